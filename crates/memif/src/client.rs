//! The client role of memif (the side DPDK `net_memif role=client`, VPP's
//! slave and libmemif apps take): it creates the shared memory — one
//! memfd region holding the C2S rings, the S2C rings and a buffer per
//! slot, laid out as DPDK does — connects, announces the region and the
//! rings, then sends on C2S and receives on S2C.
//!
//! Used by the built-in VNF and by the tests, which also reach into the
//! rings through [`Client::raw`] to play a hostile client. Single
//! threaded: one `Client` is driven by one thread.

use crate::ring::RingView;
use crate::socket::{Conn, Received, SocketPath};
use nfv_mem::{HugepageMode, Region};
use nfv_wire::memif::{self, DescRepr, Direction, MsgRepr, Name, Secret, VERSION};
use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// What the client asks for.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    pub socket: SocketPath,
    /// The interface id (the server's `interface_id`).
    pub id: u32,
    pub secret: Option<String>,
    /// Our interface name (CONNECT).
    pub if_name: String,
    /// Queue pairs wanted (the server may allow fewer).
    pub queues: u16,
    /// Slots per ring, as log2.
    pub log2_ring: u8,
    /// Bytes per buffer.
    pub buffer_size: u32,
}

impl ClientConfig {
    /// DPDK's defaults: id 0, one queue pair, 1024 slots, 2048 B buffers.
    pub fn new(socket: SocketPath) -> ClientConfig {
        ClientConfig {
            socket,
            id: 0,
            secret: None,
            if_name: "nfv-client".into(),
            queues: 1,
            log2_ring: 10,
            buffer_size: 2048,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot connect to {0}: {1}")]
    Connect(String, std::io::Error),
    #[error("the server refused us: {0}")]
    Refused(String),
    #[error("the server speaks memif {0:#x}..={1:#x}, not 2.0")]
    Version(u16, u16),
    #[error("no answer from the server within {0:?}")]
    Timeout(Duration),
    #[error("the server closed the connection")]
    Eof,
    #[error("unexpected message from the server: {0}")]
    Unexpected(String),
    #[error("shared memory: {0}")]
    Memory(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

struct Ring {
    view: RingView,
    /// Offset of slot 0's buffer in the region (slot `j` at `+ j * bsize`).
    buffers: u32,
    /// C2S: our head; S2C: the tail we have read up to.
    pos: u16,
    eventfd: OwnedFd,
}

/// A connected memif client interface.
pub struct Client {
    conn: Conn,
    region: Region,
    c2s: Vec<Ring>,
    s2c: Vec<Ring>,
    buffer_size: u32,
    /// Where a received chain is assembled (at most [`MAX_FRAME`]).
    scratch: Vec<u8>,
    /// The server's HELLO name.
    pub server_name: String,
    /// The server's interface name (CONNECTED).
    pub server_if_name: String,
}

fn eventfd() -> std::io::Result<OwnedFd> {
    // SAFETY: plain syscall; a non-negative result is a new descriptor we
    // own.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: just created, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Largest frame the client assembles from a chain.
const MAX_FRAME: usize = 9216;

impl Client {
    /// Connects and runs the handshake; `timeout` bounds each wait for
    /// the server.
    pub fn connect(cfg: &ClientConfig, timeout: Duration) -> Result<Client, ClientError> {
        let conn = Conn::connect(&cfg.socket)
            .map_err(|e| ClientError::Connect(cfg.socket.to_string(), e))?;
        let (server_name, max_rings, max_log2) = match recv(&conn, timeout)? {
            MsgRepr::Hello {
                name,
                min_version,
                max_version,
                max_c2s_ring,
                max_s2c_ring,
                max_log2_ring_size,
                ..
            } => {
                if !(min_version..=max_version).contains(&VERSION) {
                    return Err(ClientError::Version(min_version, max_version));
                }
                // The limits are maximum indexes.
                let rings = max_c2s_ring.min(max_s2c_ring).saturating_add(1);
                (lossy(name.as_bytes()), rings, max_log2_ring_size)
            }
            m => return Err(ClientError::Unexpected(format!("{m:?} before HELLO"))),
        };
        let queues = cfg.queues.clamp(1, max_rings.max(1));
        let log2 = cfg.log2_ring.min(max_log2).min(memif::ring::MAX_LOG2_SIZE);
        let slots = 1usize << log2;
        let ring_len = memif::ring::len(log2).unwrap_or(0);
        let rings_len = 2 * usize::from(queues) * ring_len;
        let buffers_len = 2 * usize::from(queues) * slots * cfg.buffer_size as usize;
        let region = Region::new(
            "nfv-memif-client",
            rings_len + buffers_len,
            HugepageMode::Never,
        )
        .map_err(|e| ClientError::Memory(e.to_string()))?;
        let base = region.base().as_ptr();
        let make = |i: usize| -> Result<Ring, ClientError> {
            let off = i * ring_len;
            // SAFETY: `off + ring_len <= rings_len <= region.len()`, and
            // `off` is a multiple of `ring_len` (128 + 16 * slots), so
            // 8-byte aligned from the page-aligned base; the views live
            // in `Client` beside the region.
            let view = unsafe { RingView::new(base.add(off), log2) };
            Ok(Ring {
                view,
                buffers: (rings_len + i * slots * cfg.buffer_size as usize) as u32,
                pos: 0,
                eventfd: eventfd()?,
            })
        };
        let mut c2s = Vec::new();
        let mut s2c = Vec::new();
        for q in 0..usize::from(queues) {
            c2s.push(make(q)?);
        }
        for q in 0..usize::from(queues) {
            s2c.push(make(usize::from(queues) + q)?);
        }
        let mut client = Client {
            conn,
            region,
            c2s,
            s2c,
            buffer_size: cfg.buffer_size,
            scratch: Vec::with_capacity(MAX_FRAME),
            server_name,
            server_if_name: String::new(),
        };
        client.init_rings();
        client.announce(cfg, timeout)?;
        Ok(client)
    }

    fn init_rings(&mut self) {
        for (dir, rings) in [
            (Direction::C2s, &mut self.c2s),
            (Direction::S2c, &mut self.s2c),
        ] {
            for r in rings.iter_mut() {
                // We poll S2C: the server need not signal.
                let flags = if dir == Direction::S2c {
                    memif::ring::FLAG_MASK_INT
                } else {
                    0
                };
                r.view.init(flags);
                for slot in 0..r.view.size() {
                    r.view.set_desc(
                        slot,
                        &DescRepr {
                            region: 0,
                            offset: r.buffers + u32::from(slot) * self.buffer_size,
                            length: self.buffer_size,
                            ..DescRepr::default()
                        },
                    );
                }
            }
        }
        // Every S2C buffer is the server's to fill.
        for r in &self.s2c {
            r.view.set_head(r.view.size());
        }
    }

    fn announce(&mut self, cfg: &ClientConfig, timeout: Duration) -> Result<(), ClientError> {
        let secret = cfg.secret.as_deref().unwrap_or("");
        self.request(
            &MsgRepr::Init {
                version: VERSION,
                id: cfg.id,
                mode: 0,
                secret: Secret::new(secret.as_bytes()),
                name: Name::new(b"nfvswitch"),
            },
            None,
            timeout,
        )?;
        let region_fd = self.region.fd().try_clone()?;
        self.request(
            &MsgRepr::AddRegion {
                index: 0,
                size: self.region.len() as u64,
            },
            Some(region_fd.as_fd()),
            timeout,
        )?;
        let base = self.region.base().as_ptr() as usize;
        let mut rings = Vec::new();
        for (direction, list) in [(Direction::C2s, &self.c2s), (Direction::S2c, &self.s2c)] {
            for (i, r) in list.iter().enumerate() {
                let offset = (r.view.header() as usize - base) as u32;
                let msg = MsgRepr::AddRing {
                    direction,
                    other_flags: 0,
                    index: i as u16,
                    region: 0,
                    offset,
                    log2_ring_size: r.view.size().trailing_zeros() as u8,
                    private_hdr_size: 0,
                };
                rings.push((msg, r.eventfd.try_clone()?));
            }
        }
        for (msg, fd) in &rings {
            self.request(msg, Some(fd.as_fd()), timeout)?;
        }
        self.conn.send(
            &MsgRepr::Connect {
                if_name: Name::new(cfg.if_name.as_bytes()),
            },
            None,
        )?;
        match recv(&self.conn, timeout)? {
            MsgRepr::Connected { if_name } => {
                self.server_if_name = lossy(if_name.as_bytes());
                Ok(())
            }
            m => Err(ClientError::Unexpected(format!(
                "{m:?} instead of CONNECTED"
            ))),
        }
    }

    /// Sends `msg` and waits for its ACK.
    fn request(
        &self,
        msg: &MsgRepr,
        fd: Option<BorrowedFd<'_>>,
        timeout: Duration,
    ) -> Result<(), ClientError> {
        self.conn.send(msg, fd)?;
        match recv(&self.conn, timeout)? {
            MsgRepr::Ack => Ok(()),
            m => Err(ClientError::Unexpected(format!("{m:?} instead of ACK"))),
        }
    }

    /// Queue pairs in use.
    pub fn queues(&self) -> usize {
        self.c2s.len()
    }

    /// Sends `frames` on C2S ring `q` (each chained over as many buffers
    /// as it needs); returns how many went (the rest found no room).
    pub fn send<'a>(&mut self, q: usize, frames: impl IntoIterator<Item = &'a [u8]>) -> usize {
        let base = self.region.base().as_ptr();
        let bsize = self.buffer_size as usize;
        let r = &mut self.c2s[q];
        let size = r.view.size();
        let mut free = size.wrapping_sub(r.pos.wrapping_sub(r.view.tail_acquire()));
        let mut head = r.pos;
        let mut sent = 0;
        for f in frames {
            let need = f.len().div_ceil(bsize).max(1);
            if need > usize::from(free) {
                break;
            }
            for (k, chunk) in f.chunks(bsize).enumerate() {
                let slot = head & (size - 1);
                let offset = r.buffers + u32::from(slot) * self.buffer_size;
                // SAFETY: the buffer of `slot` lies inside our region
                // (laid out in `connect`) and `chunk.len() <= bsize`.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        chunk.as_ptr(),
                        base.add(offset as usize),
                        chunk.len(),
                    )
                };
                r.view.set_desc(
                    head,
                    &DescRepr {
                        next: k + 1 < need,
                        region: 0,
                        offset,
                        length: chunk.len() as u32,
                        ..DescRepr::default()
                    },
                );
                head = head.wrapping_add(1);
            }
            free -= need as u16;
            sent += 1;
        }
        if sent > 0 {
            r.pos = head;
            r.view.set_head(head);
            if r.view.flags() & memif::ring::FLAG_MASK_INT == 0 {
                kick(&r.eventfd);
            }
        }
        sent
    }

    /// Receives up to `max` frames from S2C ring `q`, handing each to
    /// `f`; gives the buffers back to the server. Returns the count.
    pub fn recv(&mut self, q: usize, max: usize, mut f: impl FnMut(&[u8])) -> usize {
        let base = self.region.base().as_ptr();
        let len = self.region.len();
        let r = &mut self.s2c[q];
        let mask = r.view.size() - 1;
        let tail = r.view.tail_acquire();
        let mut n = 0;
        while r.pos != tail && n < max {
            self.scratch.clear();
            loop {
                let d = r.view.desc(r.pos);
                r.pos = r.pos.wrapping_add(1);
                let (off, l) = (d.offset as usize, d.length as usize);
                // The server writes lengths: keep them inside the region
                // and the frame limit.
                if off + l <= len && self.scratch.len() + l <= MAX_FRAME {
                    // SAFETY: checked against the region's length above.
                    let src = unsafe { std::slice::from_raw_parts(base.add(off), l) };
                    self.scratch.extend_from_slice(src);
                }
                if !d.next || r.pos == tail {
                    break;
                }
            }
            f(&self.scratch);
            n += 1;
        }
        // Give every read slot back, with its room restored.
        let head = r.pos.wrapping_add(r.view.size());
        let mut slot = r.view.head_relaxed();
        while slot != head {
            let s = slot & mask;
            r.view.set_desc(
                slot,
                &DescRepr {
                    region: 0,
                    offset: r.buffers + u32::from(s) * self.buffer_size,
                    length: self.buffer_size,
                    ..DescRepr::default()
                },
            );
            slot = slot.wrapping_add(1);
        }
        r.view.set_head(head);
        n
    }

    /// The server's DISCONNECT reason, `Some("")` on EOF, `None` while the
    /// connection stands (never waits).
    pub fn disconnected(&self) -> Option<String> {
        let mut buf = [0u8; 256];
        match self.conn.recv(&mut buf, Duration::ZERO) {
            Ok(Received::Nothing) => None,
            Ok(Received::Msg { len, .. }) => match MsgRepr::parse(&buf[..len.min(buf.len())]) {
                Ok(MsgRepr::Disconnect { reason, .. }) => Some(lossy(reason.as_bytes())),
                _ => None,
            },
            _ => Some(String::new()),
        }
    }

    /// Asks the server to signal S2C ring `q`'s eventfd when it sends
    /// (interrupt mode, before sleeping). Returns true if frames already
    /// wait (then do not sleep): they may have come before the request
    /// was seen.
    pub fn arm(&self, q: usize) -> bool {
        let r = &self.s2c[q];
        r.view
            .set_flags(r.view.flags() & !memif::ring::FLAG_MASK_INT);
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        r.view.tail_acquire() != r.pos
    }

    /// Back to polling: the server need not signal S2C ring `q`.
    pub fn disarm(&self, q: usize) {
        let r = &self.s2c[q];
        r.view
            .set_flags(r.view.flags() | memif::ring::FLAG_MASK_INT);
    }

    /// S2C ring `q`'s eventfd (readable after the server signalled it).
    pub fn s2c_eventfd(&self, q: usize) -> BorrowedFd<'_> {
        self.s2c[q].eventfd.as_fd()
    }

    /// The control socket (readable when the server says something).
    pub fn control_fd(&self) -> BorrowedFd<'_> {
        self.conn.as_fd()
    }

    /// Empties S2C ring `q`'s eventfd after a wake-up.
    pub fn drain_eventfd(&self, q: usize) {
        let mut b = [0u8; 8];
        // SAFETY: reads 8 bytes into a live buffer from our own eventfd,
        // which is non-blocking.
        let _ = unsafe {
            libc::read(
                std::os::fd::AsRawFd::as_raw_fd(&self.s2c[q].eventfd),
                b.as_mut_ptr().cast(),
                8,
            )
        };
    }

    /// Takes the C2S heads as they stand in the rings as our positions
    /// (after a test wrote them through [`Client::raw`]).
    pub fn resync(&mut self) {
        for r in &mut self.c2s {
            r.pos = r.view.head_relaxed();
        }
    }

    /// Hooks for tests that play a hostile client.
    pub fn raw(&self) -> Raw<'_> {
        Raw { client: self }
    }
}

/// Direct access to a client's rings and memory (tests).
pub struct Raw<'a> {
    client: &'a Client,
}

impl Raw<'_> {
    /// Writes descriptor `slot` of C2S ring `q`.
    pub fn set_c2s_desc(&self, q: usize, slot: u16, d: &DescRepr) {
        self.client.c2s[q].view.set_desc(slot, d)
    }
    /// Sets C2S ring `q`'s head (and our own position with it).
    pub fn set_c2s_head(&self, q: usize, head: u16) {
        self.client.c2s[q].view.set_head(head)
    }
    pub fn c2s_head(&self, q: usize) -> u16 {
        self.client.c2s[q].view.head_relaxed()
    }
    pub fn c2s_tail(&self, q: usize) -> u16 {
        self.client.c2s[q].view.tail_acquire()
    }
    /// Writes descriptor `slot` of S2C ring `q`.
    pub fn set_s2c_desc(&self, q: usize, slot: u16, d: &DescRepr) {
        self.client.s2c[q].view.set_desc(slot, d)
    }
    pub fn set_s2c_head(&self, q: usize, head: u16) {
        self.client.s2c[q].view.set_head(head)
    }
    pub fn s2c_tail(&self, q: usize) -> u16 {
        self.client.s2c[q].view.tail_acquire()
    }
    /// The offset of C2S ring `q`'s buffer for `slot`.
    pub fn c2s_buffer(&self, q: usize, slot: u16) -> u32 {
        let r = &self.client.c2s[q];
        r.buffers + u32::from(slot & (r.view.size() - 1)) * self.client.buffer_size
    }
    /// The offset of S2C ring `q`'s buffer for `slot`.
    pub fn s2c_buffer(&self, q: usize, slot: u16) -> u32 {
        let r = &self.client.s2c[q];
        r.buffers + u32::from(slot & (r.view.size() - 1)) * self.client.buffer_size
    }
    /// Writes `bytes` at `offset` of the region.
    pub fn write(&self, offset: usize, bytes: &[u8]) {
        assert!(offset + bytes.len() <= self.client.region.len());
        // SAFETY: inside our own region (checked above).
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.client.region.base().as_ptr().add(offset),
                bytes.len(),
            )
        }
    }
    /// The region's memfd (to shrink it under the server).
    pub fn region_fd(&self) -> BorrowedFd<'_> {
        self.client.region.fd().as_fd()
    }
    pub fn region_len(&self) -> usize {
        self.client.region.len()
    }
    /// The control connection (to send what a client should not).
    pub fn conn(&self) -> &Conn {
        &self.client.conn
    }
}

/// Signals an eventfd we created (non-blocking: ours, never the peer's
/// description).
fn kick(fd: &OwnedFd) {
    let one = 1u64.to_ne_bytes();
    // SAFETY: writes 8 bytes from a live buffer to our own eventfd.
    let _ = unsafe { libc::write(std::os::fd::AsRawFd::as_raw_fd(fd), one.as_ptr().cast(), 8) };
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The next message (DISCONNECT becomes [`ClientError::Refused`]).
fn recv(conn: &Conn, timeout: Duration) -> Result<MsgRepr, ClientError> {
    let mut buf = [0u8; 256];
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ClientError::Timeout(timeout));
        }
        match conn.recv(&mut buf, left)? {
            Received::Nothing => continue,
            Received::Eof => return Err(ClientError::Eof),
            Received::Msg { len, .. } => {
                return match MsgRepr::parse(&buf[..len.min(buf.len())]) {
                    Ok(MsgRepr::Disconnect { reason, .. }) => {
                        Err(ClientError::Refused(lossy(reason.as_bytes())))
                    }
                    Ok(m) => Ok(m),
                    Err(e) => Err(ClientError::Unexpected(format!("{e:?}"))),
                };
            }
        }
    }
}
