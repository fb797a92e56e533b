//! The vhost-user control conversation, frontend side (what QEMU or DPDK
//! virtio-user say to a vhost-user backend): find the switch's socket (or
//! wait for the switch on ours), negotiate features, hand over our memory
//! and rings, and enable the queues. No packets here.
//!
//! Message order follows DPDK virtio-user: SET_OWNER, GET_FEATURES,
//! GET/SET_PROTOCOL_FEATURES, GET_QUEUE_NUM, SET_FEATURES, SET_MEM_TABLE,
//! then per virtqueue SET_VRING_NUM/BASE/ADDR/KICK/CALL, then
//! SET_VRING_ENABLE. A backend that misbehaves makes this fail with an
//! error (never a panic); replies are bounded by a socket timeout.

use crate::config::{Mode, VnfConfig};
use crate::memory::SharedMemory;
use nfv_virtio::layout::{
    VHOST_USER_F_PROTOCOL_FEATURES, VIRTIO_F_RING_PACKED, VIRTIO_F_VERSION_1, VIRTIO_NET_F_MQ,
    VIRTIO_NET_F_MRG_RXBUF, VIRTIO_RING_F_EVENT_IDX,
};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use vhost::vhost_user::message::VhostUserHeaderFlag;
use vhost::vhost_user::{Frontend, VhostUserFrontend, VhostUserProtocolFeatures};
use vhost::{VhostBackend, VringConfigData};
use vmm_sys_util::eventfd::{EFD_NONBLOCK, EventFd};

/// How long the switch may take to answer one control message.
const REPLY_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause between connection attempts while the socket is absent.
const RETRY: Duration = Duration::from_millis(100);

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("vhost-user socket {path}: {err}")]
    Socket { path: String, err: std::io::Error },
    #[error("vhost-user {step}: {err}")]
    Protocol {
        step: &'static str,
        err: vhost::Error,
    },
    #[error(
        "--packed: the switch does not offer VIRTIO_F_RING_PACKED (features {0:#x}; \
         its port may say packed_ring = false)"
    )]
    NoPacked(u64),
    #[error("the switch does not offer VIRTIO_F_VERSION_1 (features {0:#x})")]
    NoVersion1(u64),
    #[error("{want} queue pairs asked for, but the switch offers {have}{why}")]
    Queues {
        want: u16,
        have: u64,
        why: &'static str,
    },
    #[error("eventfd: {0}")]
    EventFd(std::io::Error),
    #[error("stopped")]
    Stopped,
}

fn proto(step: &'static str) -> impl FnOnce(vhost::Error) -> SessionError {
    move |err| SessionError::Protocol { step, err }
}

/// The features we ask for, given what the switch offers.
pub fn wanted_features(offered: u64, cfg: &VnfConfig) -> Result<u64, SessionError> {
    if offered & VIRTIO_F_VERSION_1 == 0 {
        return Err(SessionError::NoVersion1(offered));
    }
    let mut want = VIRTIO_F_VERSION_1 | VIRTIO_RING_F_EVENT_IDX | VHOST_USER_F_PROTOCOL_FEATURES;
    if cfg.mrg_rxbuf {
        want |= VIRTIO_NET_F_MRG_RXBUF;
    }
    if cfg.queues > 1 {
        want |= VIRTIO_NET_F_MQ;
    }
    if cfg.packed {
        if offered & VIRTIO_F_RING_PACKED == 0 {
            return Err(SessionError::NoPacked(offered));
        }
        // Not IN_ORDER (never asked for): one used descriptor per buffer.
        want |= VIRTIO_F_RING_PACKED;
    }
    Ok(want & offered)
}

/// Where a session comes from: the switch's socket (client mode) or our
/// listening socket (server mode). Kept across reconnects.
pub enum Endpoint {
    Client(std::path::PathBuf),
    Server(UnixListener),
}

impl Endpoint {
    /// Prepares the endpoint (server mode binds now, replacing a stale
    /// socket file).
    pub fn new(cfg: &VnfConfig) -> Result<Endpoint, SessionError> {
        let sock_err = |err| SessionError::Socket {
            path: cfg.socket.display().to_string(),
            err,
        };
        match cfg.mode {
            Mode::Client => Ok(Endpoint::Client(cfg.socket.clone())),
            Mode::Server => {
                // Replace a stale socket file, never a live one.
                if UnixStream::connect(&cfg.socket).is_ok() {
                    return Err(sock_err(std::io::Error::from(
                        std::io::ErrorKind::AddrInUse,
                    )));
                }
                let _ = std::fs::remove_file(&cfg.socket);
                let l = UnixListener::bind(&cfg.socket).map_err(sock_err)?;
                l.set_nonblocking(true).map_err(sock_err)?;
                Ok(Endpoint::Server(l))
            }
        }
    }

    /// Blocks (checking `stop` every 100 ms) until a switch is on the line.
    pub fn connect(&self, stop: &AtomicBool) -> Result<UnixStream, SessionError> {
        let mut logged = false;
        while !stop.load(Ordering::Relaxed) {
            let r = match self {
                Endpoint::Client(path) => UnixStream::connect(path),
                Endpoint::Server(l) => l.accept().map(|(s, _)| s),
            };
            match r {
                Ok(s) => {
                    s.set_nonblocking(false).map_err(|err| self.err(err))?;
                    s.set_read_timeout(Some(REPLY_TIMEOUT))
                        .map_err(|err| self.err(err))?;
                    return Ok(s);
                }
                Err(e) if retryable(&e) => {
                    if !logged {
                        tracing::info!("{}", self.waiting_msg());
                        logged = true;
                    }
                    std::thread::sleep(RETRY);
                }
                Err(e) => return Err(self.err(e)),
            }
        }
        Err(SessionError::Stopped)
    }

    fn err(&self, err: std::io::Error) -> SessionError {
        let path = match self {
            Endpoint::Client(p) => p.display().to_string(),
            Endpoint::Server(l) => l
                .local_addr()
                .ok()
                .and_then(|a| a.as_pathname().map(|p| p.display().to_string()))
                .unwrap_or_default(),
        };
        SessionError::Socket { path, err }
    }

    fn waiting_msg(&self) -> String {
        match self {
            Endpoint::Client(p) => format!("waiting for the switch's socket {}", p.display()),
            Endpoint::Server(_) => "waiting for the switch to connect".into(),
        }
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        if let Endpoint::Server(l) = self
            && let Ok(a) = l.local_addr()
            && let Some(p) = a.as_pathname()
        {
            let _ = std::fs::remove_file(p);
        }
    }
}

fn retryable(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        NotFound | ConnectionRefused | WouldBlock | Interrupted | ConnectionAborted
    )
}

/// An I/O error on the control socket of `cfg`.
fn socket_err(cfg: &VnfConfig) -> impl Fn(std::io::Error) -> SessionError + '_ {
    |err| SessionError::Socket {
        path: cfg.socket.display().to_string(),
        err,
    }
}

/// The protocol features both sides know (MQ, REPLY_ACK), and with
/// several queue pairs, whether the switch has as many (`raw`: the
/// control socket, for GET_QUEUE_NUM).
fn agree_protocol(
    fe: &mut Frontend,
    raw: &UnixStream,
    cfg: &VnfConfig,
) -> Result<(), SessionError> {
    let pf = fe
        .get_protocol_features()
        .map_err(proto("GET_PROTOCOL_FEATURES"))?;
    let ack = pf & (VhostUserProtocolFeatures::MQ | VhostUserProtocolFeatures::REPLY_ACK);
    fe.set_protocol_features(ack)
        .map_err(proto("SET_PROTOCOL_FEATURES"))?;
    if ack.contains(VhostUserProtocolFeatures::REPLY_ACK) {
        // Every later request is acknowledged: a backend that
        // cannot map our memory says so here, not by silence.
        fe.set_hdr_flags(VhostUserHeaderFlag::NEED_REPLY);
    }
    if cfg.queues > 1 {
        if !ack.contains(VhostUserProtocolFeatures::MQ) {
            return Err(SessionError::Queues {
                want: cfg.queues,
                have: 1,
                why: " (no VHOST_USER_PROTOCOL_F_MQ)",
            });
        }
        let have = get_queue_pairs(raw).map_err(socket_err(cfg))?;
        if have < cfg.queues as u64 {
            return Err(SessionError::Queues {
                want: cfg.queues,
                have,
                why: "",
            });
        }
    }
    Ok(())
}

/// Hands virtqueue `vq` in `mem` to the switch: size, base, addresses,
/// and a new kick and call eventfd (returned in that order).
fn set_up_vring(
    fe: &mut Frontend,
    mem: &SharedMemory,
    vq: usize,
    features: u64,
) -> Result<(EventFd, EventFd), SessionError> {
    let new_efd = || EventFd::new(EFD_NONBLOCK).map_err(SessionError::EventFd);
    let a = mem.vq(vq);
    fe.set_vring_num(vq, mem.ring_size())
        .map_err(proto("SET_VRING_NUM"))?;
    // A packed ring starts in lap 1: the wrap counter in bit 15.
    let base = if features & VIRTIO_F_RING_PACKED != 0 {
        nfv_virtio::packed::encode_base(0, true)
    } else {
        0
    };
    fe.set_vring_base(vq, base)
        .map_err(proto("SET_VRING_BASE"))?;
    let addrs = VringConfigData {
        queue_max_size: mem.ring_size(),
        queue_size: mem.ring_size(),
        flags: 0,
        desc_table_addr: a.desc,
        used_ring_addr: a.used,
        avail_ring_addr: a.avail,
        log_addr: None,
    };
    fe.set_vring_addr(vq, &addrs)
        .map_err(proto("SET_VRING_ADDR"))?;
    let (k, c) = (new_efd()?, new_efd()?);
    fe.set_vring_kick(vq, &k).map_err(proto("SET_VRING_KICK"))?;
    fe.set_vring_call(vq, &c).map_err(proto("SET_VRING_CALL"))?;
    Ok((k, c))
}

/// One negotiated vhost-user session: the control channel and the two
/// eventfds of every virtqueue.
pub struct Session {
    frontend: Frontend,
    features: u64,
    /// Per virtqueue: we write it to wake the switch.
    pub kick: Vec<EventFd>,
    /// Per virtqueue: the switch writes it to wake us.
    pub call: Vec<EventFd>,
    protocol: bool,
}

impl Session {
    /// Negotiates over `stream` and sets up `2 * cfg.queues` virtqueues
    /// in `mem`. The rings must be zeroed and no queue driven yet.
    pub fn negotiate(
        stream: UnixStream,
        cfg: &VnfConfig,
        mem: &SharedMemory,
    ) -> Result<Session, SessionError> {
        let n_vqs = 2 * cfg.queues as usize;
        // Kept for GET_QUEUE_NUM, sent by hand (see `get_queue_pairs`).
        let raw = stream.try_clone().map_err(socket_err(cfg))?;
        let mut fe = Frontend::from_stream(stream, n_vqs as u64);
        fe.set_owner().map_err(proto("SET_OWNER"))?;
        let offered = fe.get_features().map_err(proto("GET_FEATURES"))?;
        let features = wanted_features(offered, cfg)?;
        let protocol = features & VHOST_USER_F_PROTOCOL_FEATURES != 0;
        if protocol {
            agree_protocol(&mut fe, &raw, cfg)?;
        } else if cfg.queues > 1 {
            return Err(SessionError::Queues {
                want: cfg.queues,
                have: 1,
                why: " (no VHOST_USER_F_PROTOCOL_FEATURES)",
            });
        }
        if cfg.queues > 1 && features & VIRTIO_NET_F_MQ == 0 {
            return Err(SessionError::Queues {
                want: cfg.queues,
                have: 1,
                why: " (no VIRTIO_NET_F_MQ)",
            });
        }
        fe.set_features(features).map_err(proto("SET_FEATURES"))?;
        fe.set_mem_table(&mem.mem_table())
            .map_err(proto("SET_MEM_TABLE"))?;
        let mut kick = Vec::with_capacity(n_vqs);
        let mut call = Vec::with_capacity(n_vqs);
        for vq in 0..n_vqs {
            let (k, c) = set_up_vring(&mut fe, mem, vq, features)?;
            kick.push(k);
            call.push(c);
        }
        if protocol {
            for vq in 0..n_vqs {
                fe.set_vring_enable(vq, true)
                    .map_err(proto("SET_VRING_ENABLE"))?;
            }
        }
        Ok(Session {
            frontend: fe,
            features,
            kick,
            call,
            protocol,
        })
    }

    /// The negotiated virtio feature bits.
    pub fn features(&self) -> u64 {
        self.features
    }

    /// The control socket, for waiting on it together with call eventfds.
    pub fn socket_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the fd belongs to `self.frontend`, which outlives the
        // returned borrow (it is tied to `&self`).
        unsafe { BorrowedFd::borrow_raw(self.frontend.as_raw_fd()) }
    }

    /// The call eventfd of virtqueue `vq`, for `poll(2)`.
    pub fn call_fd(&self, vq: usize) -> BorrowedFd<'_> {
        // SAFETY: the eventfd is owned by `self.call` and outlives the
        // borrow, which is tied to `&self`.
        unsafe { BorrowedFd::borrow_raw(self.call[vq].as_raw_fd()) }
    }

    /// True when the switch has closed the control socket (or it broke).
    /// Costs one `poll` syscall; the loop calls it every ~100 ms.
    pub fn peer_gone(&self) -> bool {
        socket_closed(self.socket_fd())
    }

    /// Stops the rings politely (disable, then GET_VRING_BASE, which a
    /// backend answers only once it no longer touches the ring) before
    /// our memory goes away. Errors are ignored: the peer may be gone.
    pub fn stop_rings(&mut self) {
        let n_vqs = self.kick.len();
        // Do not wait long for a peer that is going away.
        self.frontend.set_hdr_flags(VhostUserHeaderFlag::empty());
        for vq in 0..n_vqs {
            if self.protocol {
                let _ = self.frontend.set_vring_enable(vq, false);
            }
            if self.frontend.get_vring_base(vq).is_err() {
                break;
            }
        }
    }
}

/// VHOST_USER_GET_QUEUE_NUM, by hand: the `vhost` crate's frontend takes
/// the answer as a number of *virtqueues* and then refuses ring indexes
/// beyond it, while virtio-net backends (QEMU, DPDK, nfv-vhost) answer in
/// queue *pairs*. The request has no body; the reply is one u64.
fn get_queue_pairs(mut sock: &UnixStream) -> std::io::Result<u64> {
    use std::io::{Error, ErrorKind, Read, Write};
    const GET_QUEUE_NUM: u32 = 17;
    const VERSION: u32 = 0x1;
    const REPLY: u32 = 0x4;
    let mut req = [0u8; 12];
    req[..4].copy_from_slice(&GET_QUEUE_NUM.to_le_bytes());
    req[4..8].copy_from_slice(&VERSION.to_le_bytes());
    sock.write_all(&req)?;
    let mut reply = [0u8; 20];
    sock.read_exact(&mut reply)?;
    let word = |i: usize| u32::from_le_bytes(reply[i..i + 4].try_into().unwrap_or_default());
    if word(0) != GET_QUEUE_NUM || word(4) & REPLY == 0 || word(8) != 8 {
        return Err(Error::new(
            ErrorKind::InvalidData,
            "malformed GET_QUEUE_NUM reply",
        ));
    }
    Ok(u64::from_le_bytes(
        reply[12..].try_into().unwrap_or_default(),
    ))
}

/// Whether a connected stream socket has been closed by its peer. A
/// backend does not send unsolicited messages on the frontend channel, so
/// readable means closed unless a peek finds data.
pub fn socket_closed(fd: BorrowedFd<'_>) -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use nix::sys::socket::{MsgFlags, recv};
    // nix names no POLLRDHUP; the kernel's bit it is.
    let rdhup = PollFlags::from_bits_retain(libc::POLLRDHUP);
    let mut p = [PollFd::new(fd, PollFlags::POLLIN | rdhup)];
    if !matches!(poll(&mut p, PollTimeout::ZERO), Ok(n) if n > 0) {
        return false;
    }
    let gone = PollFlags::POLLHUP | rdhup | PollFlags::POLLERR | PollFlags::POLLNVAL;
    if p[0].revents().is_some_and(|r| r.intersects(gone)) {
        return true;
    }
    let mut b = [0u8; 1];
    matches!(
        recv(
            fd.as_raw_fd(),
            &mut b,
            MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT
        ),
        Ok(0)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::VnfOptions;
    use std::os::fd::AsFd;

    fn cfg(queues: u32, mrg: bool) -> VnfConfig {
        VnfConfig::try_from(VnfOptions {
            socket: "/tmp/none".into(),
            queues,
            mrg_rxbuf: mrg,
            ..Default::default()
        })
        .unwrap()
    }

    #[test]
    fn feature_selection() {
        let all = u64::MAX;
        let f = wanted_features(all, &cfg(1, true)).unwrap();
        assert_eq!(
            f,
            VIRTIO_F_VERSION_1
                | VIRTIO_RING_F_EVENT_IDX
                | VHOST_USER_F_PROTOCOL_FEATURES
                | VIRTIO_NET_F_MRG_RXBUF
        );
        assert_eq!(
            f & VIRTIO_F_RING_PACKED,
            0,
            "packed rings only with --packed"
        );
        let f = wanted_features(all, &cfg(2, false)).unwrap();
        assert_ne!(f & VIRTIO_NET_F_MQ, 0);
        assert_eq!(f & VIRTIO_NET_F_MRG_RXBUF, 0);
        // Only what is offered.
        let f = wanted_features(VIRTIO_F_VERSION_1, &cfg(1, true)).unwrap();
        assert_eq!(f, VIRTIO_F_VERSION_1);
        assert!(matches!(
            wanted_features(all & !VIRTIO_F_VERSION_1, &cfg(1, true)),
            Err(SessionError::NoVersion1(_))
        ));
        // --packed: asked for, and an error when the switch does not offer it.
        let packed = VnfConfig {
            packed: true,
            ..cfg(1, true)
        };
        let f = wanted_features(all, &packed).unwrap();
        assert_ne!(f & VIRTIO_F_RING_PACKED, 0);
        assert_eq!(f & nfv_virtio::layout::VIRTIO_F_IN_ORDER, 0);
        assert!(matches!(
            wanted_features(all & !VIRTIO_F_RING_PACKED, &packed),
            Err(SessionError::NoPacked(_))
        ));
    }

    #[test]
    fn closed_socket_is_noticed() {
        let (a, b) = UnixStream::pair().unwrap();
        assert!(!socket_closed(a.as_fd()));
        drop(b);
        assert!(socket_closed(a.as_fd()));
    }
}
