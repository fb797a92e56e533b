//! The `afxdp` port: its type ([`AFXDP`], registered in `nfv-port-types`),
//! its open error, device set-up in named steps (checks on the interface,
//! the XDP program and its link, one socket per rx queue, the zero-copy
//! manager), closing (dropping the port detaches the program and stops the
//! manager), its queues and what `show ports` prints (including the
//! kernel's drop counters).

use crate::bpf::{self, AttachMode, Link, XskMap};
use crate::rx::AfXdpRxq;
use crate::settings::{self, AfXdpConfig, XdpBindMode, ZeroCopy};
use crate::tx::AfXdpTxq;
use crate::umem::{CHUNK_SIZE, RX_FRAME_MAX, TX_OFFSET};
use crate::xsk::{Bind, TxCounters, Xsk, XskError};
use crate::zero_copy::{self, Target, ZcQueue, ZcRxq, ZcTxq};
use nfv_netdev::IfaceError;
use nfv_ports::config::{PortConfig, PortKind};
use nfv_ports::{OpenContext, Port, PortGauges, PortOpenError, PortType, RxQueue, TxQueue};
use nfv_settings::{PortTable, SettingError};
use nfv_virtio::lend::Lenders;
use std::io;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU64};

/// The `afxdp` port type, listed in `nfv-port-types`. Its open errors are
/// [`PortOpenError::Unavailable`]: the interface, a permission or the NIC
/// may be missing, and the node runs without the port.
pub static AFXDP: AfXdpType = AfXdpType;

pub struct AfXdpType;

impl PortType for AfXdpType {
    fn name(&self) -> &'static str {
        "afxdp"
    }
    fn keys(&self) -> &'static [&'static str] {
        settings::KEYS
    }
    fn parse(&self, t: &PortTable<'_>) -> Result<PortKind, SettingError> {
        Ok(PortKind::typed(settings::parse(t)?))
    }
    fn open(&self, cfg: &PortConfig, cx: &OpenContext<'_>) -> Result<Arc<dyn Port>, PortOpenError> {
        open_with(cfg, cx.routes.clone(), cx.lenders).map_err(PortOpenError::unavailable)
    }
}

/// Why a port could not be opened. Every message names the port, and the
/// interface when there is one, and says what to do.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("port {port}: not an afxdp port (type {kind:?})")]
    WrongKind { port: String, kind: &'static str },
    #[error("port {port}: {msg}")]
    Config { port: String, msg: String },
    #[error("port {port}: {err}")]
    Iface { port: String, err: IfaceError },
    #[error(
        "port {port}: interface {iface:?} has MTU {mtu}, too big for AF_XDP frames of {chunk} \
         bytes (a received frame must fit in {frame_max} bytes including the Ethernet header and \
         a VLAN tag): set the MTU to {fits} or less (`ip link set dev {iface} mtu {fits}`)"
    )]
    MtuTooBig {
        port: String,
        iface: String,
        mtu: usize,
        chunk: usize,
        frame_max: usize,
        fits: usize,
    },
    #[error(
        "port {port}: interface {iface:?} has {rx} rx and {tx} tx queue(s), the port wants {want} \
         (rxqs); lower rxqs or add queues (`ethtool -L {iface} combined {want}`)"
    )]
    TooFewQueues {
        port: String,
        iface: String,
        rx: usize,
        tx: usize,
        want: usize,
    },
    #[error(
        "port {port}: interface {iface:?}: {what}: permission denied (AF_XDP needs root, or \
         CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF)"
    )]
    Permission {
        port: String,
        iface: String,
        what: &'static str,
    },
    #[error(
        "port {port}: interface {iface:?} already has an XDP program attached (another port, \
         another AF_XDP application or `ip link set ... xdp`); see `ip link show dev {iface}` \
         (prog/xdp id N) and `bpftool net show dev {iface}`"
    )]
    AlreadyAttached { port: String, iface: String },
    #[error(
        "port {port}: interface {iface:?} queue {queue} is already used by another AF_XDP socket"
    )]
    QueueBusy {
        port: String,
        iface: String,
        queue: u32,
    },
    #[error(
        "port {port}: interface {iface:?} queue {queue}: zero-copy was requested (mode = \
         \"zero-copy\") but the driver does not support it ({err}); use mode = \"copy\" or \"auto\""
    )]
    ZeroCopyUnsupported {
        port: String,
        iface: String,
        queue: u32,
        err: io::Error,
    },
    #[error(
        "port {port}: interface {iface:?}: registering the UMEM: {err} (locked-memory limit? \
         run as root, or raise it: `ulimit -l unlimited`)"
    )]
    Memlock {
        port: String,
        iface: String,
        err: io::Error,
    },
    #[error("port {port}: the kernel rejected the XDP program: {err}; verifier log:\n{log}")]
    Verifier {
        port: String,
        err: io::Error,
        log: String,
    },
    #[error("port {port}: interface {iface:?}: {what}: {err}")]
    Os {
        port: String,
        iface: String,
        what: &'static str,
        err: io::Error,
    },
}

impl OpenError {
    /// Wraps an OS error of step `what`: EPERM/EACCES become
    /// [`OpenError::Permission`], ENODEV/ENXIO a missing interface.
    pub fn from_os(port: &str, iface: &str, what: &'static str, err: io::Error) -> OpenError {
        match err.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => OpenError::Permission {
                port: port.to_string(),
                iface: iface.to_string(),
                what,
            },
            Some(libc::ENODEV) | Some(libc::ENXIO) => OpenError::Iface {
                port: port.to_string(),
                err: IfaceError::Missing(iface.to_string()),
            },
            _ => OpenError::Os {
                port: port.to_string(),
                iface: iface.to_string(),
                what,
                err,
            },
        }
    }
}

/// Opens a port of this type from its validated config, on its own: a
/// `zero_copy` queue finds no VNF port to borrow from (it copies), and
/// `auto` no route.
pub fn open(cfg: &PortConfig) -> Result<Arc<dyn Port>, OpenError> {
    open_with(cfg, Arc::new(nfv_ports::NoRoutes), &Arc::default())
}

/// [`open`] in a node: `routes` answers `zero_copy = "auto"`, and a
/// zero-copy queue finds the VNF port it borrows from in `lenders`
/// (looked up by name while it has none: the port may be added later).
pub fn open_with(
    cfg: &PortConfig,
    routes: Arc<dyn nfv_ports::Routes>,
    lenders: &Arc<Lenders>,
) -> Result<Arc<dyn Port>, OpenError> {
    let Some(x) = cfg.kind.settings::<AfXdpConfig>() else {
        return Err(OpenError::WrongKind {
            port: cfg.name.clone(),
            kind: cfg.kind.type_name(),
        });
    };
    let target = match &x.zero_copy {
        ZeroCopy::Off => None,
        ZeroCopy::Into(p) => Some(zero_copy::Target::Port(p.clone())),
        ZeroCopy::Auto => Some(zero_copy::Target::Auto {
            routes,
            port: cfg.id,
        }),
    };
    Ok(Arc::new(AfXdpPort::open(
        &cfg.name, cfg.rxqs, x, target, lenders,
    )?))
}

/// Ethernet header plus one VLAN tag: a frame is at most MTU + this.
const L2_OVERHEAD: usize = nfv_wire::l2::TAGGED_HEADER_LEN;

/// An AF_XDP port: one socket (and UMEM) per rx queue on `iface`, and the
/// redirect program attached while the port lives.
///
/// Thread safety: `Sync`; the control plane reads `gauges()` while PMDs use
/// the queues. Fields are immutable after `open`; sockets are shared with
/// the queues (see `xsk.rs`).
pub struct AfXdpPort {
    // Field order is drop order: detach the program first, then release
    // the map (and with it the map's references to the sockets).
    link: Link,
    _map: Arc<XskMap>,
    name: String,
    iface: String,
    socks: Vec<Queue>,
    max_frame: usize,
    /// `zero_copy`: the manager thread of the zero-copy queues.
    manager: Option<Manager>,
    bind: Bind,
}

/// One rx queue's socket: its own, or a zero-copy queue's (which swaps
/// sockets as the VNF comes and goes, see `zero_copy.rs`).
enum Queue {
    Plain(Arc<Xsk>),
    ZeroCopy(Arc<ZcQueue>),
}

struct Manager {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for AfXdpPort {
    fn drop(&mut self) {
        if let Some(m) = self.manager.as_mut() {
            m.stop.store(true, Release);
            if let Some(t) = m.thread.take() {
                let _ = t.join();
            }
        }
        for q in &self.socks {
            if let Queue::ZeroCopy(z) = q {
                z.close();
            }
        }
    }
}

impl AfXdpPort {
    pub(crate) fn open(
        name: &str,
        rxqs: usize,
        cfg: &AfXdpConfig,
        target: Option<Target>,
        lenders: &Arc<Lenders>,
    ) -> Result<AfXdpPort, OpenError> {
        let iface = cfg.iface.as_str();
        settings::check(cfg, rxqs).map_err(|msg| OpenError::Config {
            port: name.to_string(),
            msg,
        })?;
        let (ifindex, mtu) = check_iface(name, iface, rxqs)?;

        let os = |what: &'static str, err: io::Error| OpenError::from_os(name, iface, what, err);
        let map = Arc::new(XskMap::new(rxqs as u32).map_err(|e| os("creating the XSKMAP", e))?);
        let link = load_and_attach(name, iface, ifindex, &map)?;
        let socks = open_sockets(name, iface, ifindex, rxqs, cfg, &map)?;
        let bind = socks[0].bind;
        let max_frame = (CHUNK_SIZE - TX_OFFSET).min(mtu + L2_OVERHEAD);
        let (socks, manager) = match target {
            None => (
                socks
                    .into_iter()
                    .map(|x| Queue::Plain(Arc::new(x)))
                    .collect(),
                None,
            ),
            Some(target) => {
                let zqs: Vec<Arc<ZcQueue>> = socks
                    .into_iter()
                    .map(|x| {
                        Arc::new(ZcQueue::new(
                            name,
                            target.clone(),
                            lenders.clone(),
                            ifindex,
                            x,
                            map.clone(),
                            max_frame,
                            cfg,
                        ))
                    })
                    .collect();
                let m = spawn_manager(name, zqs.clone())
                    .map_err(|e| os("starting the zero-copy manager", e))?;
                (zqs.into_iter().map(Queue::ZeroCopy).collect(), Some(m))
            }
        };
        tracing::info!(
            "port {name}: AF_XDP on {iface}: {rxqs} queue(s), {} XDP, {} mode, {} descriptors \
             per ring, frames up to {max_frame} B",
            link.mode.as_str(),
            bind.as_str(),
            cfg.ring_size
        );
        Ok(AfXdpPort {
            link,
            _map: map,
            name: name.to_string(),
            iface: iface.to_string(),
            socks,
            max_frame,
            manager,
            bind,
        })
    }

    /// How the program is attached.
    pub fn attach_mode(&self) -> AttachMode {
        self.link.mode
    }

    /// How the sockets are bound.
    pub fn bind_mode(&self) -> Bind {
        self.bind
    }
}

/// Open, step 1: the interface exists, its MTU fits a chunk and it has
/// the queues the port wants; brings it up. Returns its index and MTU.
fn check_iface(name: &str, iface: &str, rxqs: usize) -> Result<(u32, usize), OpenError> {
    let port = || name.to_string();
    let iface_err = |err| OpenError::Iface { port: port(), err };
    let ifindex = nfv_netdev::index(iface).map_err(iface_err)?;
    let mtu = nfv_netdev::mtu(iface).map_err(iface_err)?;
    if mtu + L2_OVERHEAD > RX_FRAME_MAX {
        return Err(OpenError::MtuTooBig {
            port: port(),
            iface: iface.to_string(),
            mtu,
            chunk: CHUNK_SIZE,
            frame_max: RX_FRAME_MAX,
            fits: RX_FRAME_MAX - L2_OVERHEAD,
        });
    }
    // Where sysfs is not readable (unusual mounts), bind reports it.
    if let Ok((rx, tx)) = nfv_netdev::queues(iface) {
        if rx < rxqs || tx < rxqs {
            return Err(OpenError::TooFewQueues {
                port: port(),
                iface: iface.to_string(),
                rx,
                tx,
                want: rxqs,
            });
        }
        if rx > rxqs {
            tracing::warn!(
                "port {name}: interface {iface} has {rx} rx queues but the port polls {rxqs}: \
                 frames the NIC steers to queues {rxqs}..{rx} go to the kernel stack, not the \
                 switch (set rxqs = {rx}, or `ethtool -L {iface} combined {rxqs}`)"
            );
        }
    }
    nfv_netdev::set_up(iface).map_err(iface_err)?;
    Ok((ifindex, mtu))
}

/// Open, step 2: loads the redirect program over `map` and attaches it.
fn load_and_attach(name: &str, iface: &str, ifindex: u32, map: &XskMap) -> Result<Link, OpenError> {
    let prog = bpf::load_program(map).map_err(|e| {
        if e.log.is_empty() {
            OpenError::from_os(name, iface, "loading the XDP program", e.err)
        } else {
            OpenError::Verifier {
                port: name.to_string(),
                err: e.err,
                log: e.log,
            }
        }
    })?;
    let link = attach(name, iface, ifindex, &prog)?;
    drop(prog); // the link holds the program
    Ok(link)
}

/// Open, step 3: one socket per rx queue, bound as `cfg.mode` asks
/// (`auto`: zero-copy until a queue cannot, then copy for it and the
/// rest), each put in the XSKMAP.
fn open_sockets(
    name: &str,
    iface: &str,
    ifindex: u32,
    rxqs: usize,
    cfg: &AfXdpConfig,
    map: &XskMap,
) -> Result<Vec<Xsk>, OpenError> {
    let os = |what: &'static str, err: io::Error| OpenError::from_os(name, iface, what, err);
    let mut socks = Vec::with_capacity(rxqs);
    let mut mode = cfg.mode;
    for q in 0..rxqs as u32 {
        let xsk = match mode {
            XdpBindMode::Copy => Xsk::open(ifindex, q, cfg.ring_size as u32, Bind::Copy),
            XdpBindMode::ZeroCopy => Xsk::open(ifindex, q, cfg.ring_size as u32, Bind::ZeroCopy),
            XdpBindMode::Auto => {
                match Xsk::open(ifindex, q, cfg.ring_size as u32, Bind::ZeroCopy) {
                    Err(e) if e.what == BIND_STEP && e.err.raw_os_error() != Some(libc::EBUSY) => {
                        tracing::info!(
                            "port {name}: interface {iface} queue {q}: zero-copy AF_XDP is not \
                             available ({}); using copy mode",
                            e.err
                        );
                        mode = XdpBindMode::Copy;
                        Xsk::open(ifindex, q, cfg.ring_size as u32, Bind::Copy)
                    }
                    r => r,
                }
            }
        }
        .map_err(|e| bind_error(name, iface, q, mode, e))?;
        if mode == XdpBindMode::ZeroCopy && xsk.bind != Bind::ZeroCopy {
            return Err(OpenError::ZeroCopyUnsupported {
                port: name.to_string(),
                iface: iface.to_string(),
                queue: q,
                err: io::Error::from_raw_os_error(libc::EOPNOTSUPP),
            });
        }
        map.set(q, xsk.as_fd())
            .map_err(|e| os("adding the socket to the XSKMAP", e))?;
        socks.push(xsk);
    }
    Ok(socks)
}

/// The thread that moves zero-copy queues between sockets (every 10 ms;
/// never a PMD: it maps and pins guest memory).
fn spawn_manager(port: &str, queues: Vec<Arc<ZcQueue>>) -> io::Result<Manager> {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let thread = std::thread::Builder::new()
        .name(format!("zc-{port}"))
        .spawn(move || {
            while !s.load(Acquire) {
                for q in &queues {
                    q.tick();
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        })?;
    Ok(Manager {
        stop,
        thread: Some(thread),
    })
}

/// The `XskError::what` of the bind step.
const BIND_STEP: &str = "binding the socket to the queue";

/// Native mode first, generic if the driver cannot; an interface that
/// already has a program is an error either way.
fn attach(
    name: &str,
    iface: &str,
    ifindex: u32,
    prog: &std::os::fd::OwnedFd,
) -> Result<Link, OpenError> {
    let taken =
        |err: &io::Error| matches!(err.raw_os_error(), Some(libc::EBUSY) | Some(libc::EEXIST));
    let native = match bpf::attach(prog.as_fd(), ifindex, AttachMode::Native) {
        Ok(l) => return Ok(l),
        Err(e) => e,
    };
    let fail = |err: io::Error| {
        if taken(&err) {
            OpenError::AlreadyAttached {
                port: name.to_string(),
                iface: iface.to_string(),
            }
        } else {
            OpenError::from_os(name, iface, "attaching the XDP program", err)
        }
    };
    if taken(&native) || native.raw_os_error() == Some(libc::EPERM) {
        return Err(fail(native));
    }
    tracing::info!(
        "port {name}: native XDP is not available on {iface} ({native}); using generic (SKB) mode"
    );
    bpf::attach(prog.as_fd(), ifindex, AttachMode::Generic).map_err(fail)
}

fn bind_error(name: &str, iface: &str, queue: u32, mode: XdpBindMode, e: XskError) -> OpenError {
    let errno = e.err.raw_os_error();
    if e.what == BIND_STEP {
        if errno == Some(libc::EBUSY) {
            return OpenError::QueueBusy {
                port: name.to_string(),
                iface: iface.to_string(),
                queue,
            };
        }
        if mode == XdpBindMode::ZeroCopy {
            return OpenError::ZeroCopyUnsupported {
                port: name.to_string(),
                iface: iface.to_string(),
                queue,
                err: e.err,
            };
        }
    }
    if e.what == "registering the UMEM" && matches!(errno, Some(libc::ENOMEM) | Some(libc::ENOBUFS))
    {
        return OpenError::Memlock {
            port: name.to_string(),
            iface: iface.to_string(),
            err: e.err,
        };
    }
    OpenError::from_os(name, iface, e.what, e.err)
}

impl AfXdpPort {
    fn ring_size(&self) -> u32 {
        match &self.socks[0] {
            Queue::Plain(x) => x.ring_size,
            Queue::ZeroCopy(z) => z.ring_size(),
        }
    }
}

impl Port for AfXdpPort {
    fn name(&self) -> &str {
        &self.name
    }
    fn type_name(&self) -> &'static str {
        "afxdp"
    }
    fn n_rxq(&self) -> usize {
        self.socks.len()
    }
    /// Opens rx queue `q`. A queue already open stays the only consumer;
    /// the second one receives nothing (logged).
    fn open_rxq(&self, q: usize) -> Box<dyn RxQueue> {
        match &self.socks[q % self.socks.len()] {
            Queue::Plain(x) => Box::new(AfXdpRxq::new(x.clone())),
            Queue::ZeroCopy(z) => Box::new(ZcRxq::new(z.clone())),
        }
    }
    /// Opens tx queue `q` on socket `q % n_rxq()` (shared when there are
    /// more PMDs than sockets; see `tx.rs`).
    fn open_txq(&self, q: usize) -> Box<dyn TxQueue> {
        let xsk = match &self.socks[q % self.socks.len()] {
            Queue::Plain(x) => x.clone(),
            Queue::ZeroCopy(z) => return Box::new(ZcTxq::new(z.clone())),
        };
        if xsk.tx_users.load(Relaxed) > 0 {
            tracing::debug!(
                "port {}: tx queue {q} shares socket {} with another tx queue (spin lock)",
                self.name,
                xsk.queue
            );
        }
        Box::new(AfXdpTxq::new(xsk, self.max_frame))
    }
    fn gauges(&self) -> PortGauges {
        let mut k = [0u64; 6];
        for q in &self.socks {
            let st = match q {
                Queue::Plain(x) => x.statistics().ok(),
                Queue::ZeroCopy(z) => z.statistics(),
            };
            if let Some(st) = st {
                for (d, v) in k.iter_mut().zip([
                    st.rx_dropped,
                    st.rx_invalid_descs,
                    st.rx_ring_full,
                    st.rx_fill_ring_empty_descs,
                    st.tx_invalid_descs,
                    st.tx_ring_empty_descs,
                ]) {
                    *d += v;
                }
            }
        }
        let (mut plain, mut zc): (Vec<&Xsk>, Vec<&ZcQueue>) = (Vec::new(), Vec::new());
        for q in &self.socks {
            match q {
                Queue::Plain(x) => plain.push(x),
                Queue::ZeroCopy(z) => zc.push(z),
            }
        }
        let sum = |f: &dyn Fn(&Xsk) -> u64| -> u64 { plain.iter().map(|s| f(s)).sum() };
        // Socket counters of every socket, plain or zero-copy.
        let tx_sum = |f: &dyn Fn(&TxCounters) -> &AtomicU64| -> u64 {
            sum(&|s| f(&s.tx_counters).load(Relaxed))
                + zc.iter().map(|z| z.tx_counter(f)).sum::<u64>()
        };
        let outstanding = sum(&|s| s.tx.lock().tx.outstanding() as u64)
            + zc.iter().map(|z| z.tx_outstanding()).sum::<u64>();
        let mut g = PortGauges::default()
            .with("iface", self.iface.as_str())
            .with("xdp_mode", self.link.mode.as_str())
            .with("bind_mode", self.bind_mode().as_str())
            .with("queues", self.socks.len())
            .with("ring_size", self.ring_size())
            .with("frame_size", CHUNK_SIZE)
            .with("max_frame", self.max_frame)
            .with("tx_queues", sum(&|s| s.tx_users.load(Relaxed) as u64))
            .with("rx_dropped", k[0])
            .with("rx_invalid_descs", k[1])
            .with("rx_ring_full", k[2])
            .with("rx_fill_ring_empty_descs", k[3])
            .with("tx_invalid_descs", k[4])
            .with("tx_ring_empty_descs", k[5])
            .with("rx_wakeups", sum(&|s| s.rx_counters.wakeups.load(Relaxed)))
            .with(
                "rx_bad_descs",
                sum(&|s| s.rx_counters.bad_descs.load(Relaxed)),
            )
            .with("tx_kicks", tx_sum(&|c| &c.kicks))
            .with("tx_kicks_busy", tx_sum(&|c| &c.kicks_busy))
            .with("tx_kick_errors", tx_sum(&|c| &c.kick_errors))
            .with("tx_retry_kicks", tx_sum(&|c| &c.retry_kicks))
            .with("tx_ring_outstanding", outstanding)
            .with("tx_too_big", tx_sum(&|c| &c.too_big));
        zero_copy::gauges(&mut g, zc.into_iter());
        g
    }
}
