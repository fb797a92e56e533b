//! The client role of memif (the side DPDK `net_memif role=client`, VPP's
//! slave and libmemif apps take): it creates the shared memory — one
//! memfd region holding the C2S rings, the S2C rings and a buffer per
//! slot, laid out as DPDK does — connects, announces the region and the
//! rings, then sends on C2S and receives on S2C.
//!
//! Used by the built-in VNF and by the tests, which also reach into the
//! rings through [`Client::raw`] to play a hostile client. Single
//! threaded: one `Client` is driven by one thread.

use crate::copy::copy_range;
use crate::position::PeerPosition;
use crate::ring::RingView;
use crate::socket::{Conn, Received, SocketPath};
use nfv_mem::{HugepageMode, Region};
use nfv_mem::{SpinGuard, SpinLock};
use nfv_virtio::notify::Call;
use nfv_wire::memif::{self, DescRepr, Direction, MsgRepr, Name, Secret, VERSION};
use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::*};
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
    /// Seal the region's size before handing it over (the server can then
    /// not truncate it under us). Tests that play a client shrinking its
    /// memory turn it off.
    pub seal: bool,
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
            seal: true,
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

/// One ring as the client keeps it.
pub(crate) struct Ring {
    pub(crate) view: RingView,
    /// Offset of slot 0's buffer in the region (slot `j` at `+ j * bsize`).
    buffers: u32,
    /// C2S: our head; S2C: the tail we have read up to.
    pos: u16,
    /// S2C: the head we last posted (kept here: the server can write the
    /// ring's copy). The server may fill slots up to it, not past.
    posted: u16,
    /// C2S: the server's tail as last accepted. It may give back slots
    /// up to our head, never take back what it gave.
    returned: u16,
    /// The check of the server's tail (`crate::position`).
    peer: PeerPosition,
}

impl Ring {
    /// The S2C head with every slot not yet read posted to the server.
    pub(crate) fn posted_head(&self) -> u16 {
        self.pos.wrapping_add(self.view.size())
    }
}

/// A ring and who holds it: the client's rings are shared by the queues
/// of a port in the client role (several PMDs may send on one C2S ring),
/// so each is taken for a burst ([`RingSlot::take`]).
pub(crate) struct RingSlot {
    ring: SpinLock<Ring>,
    eventfd: OwnedFd,
    /// Signals `eventfd` through the notifier thread (C2S: the server
    /// may have cleared O_NONBLOCK on the description it shares, so a
    /// plain write could block; see `nfv_virtio::notify`).
    kick: Call,
}

/// A ring taken for a burst; released on drop.
pub(crate) type Held<'a> = SpinGuard<'a, Ring>;

impl RingSlot {
    /// Waits for the ring: its holder is another PMD inside one burst.
    pub(crate) fn take(&self) -> Held<'_> {
        self.ring.lock()
    }
}

/// What receiving one frame found.
pub(crate) enum Received1 {
    /// A frame of this many bytes, copied.
    Frame(usize),
    /// Longer than the room given (the slots are consumed).
    TooBig,
    /// A descriptor the server rewrote to point outside our region.
    BadDesc,
}

/// The client's shared memory and rings: what the data path needs, apart
/// from the control connection. Shared by a port's queues in an `Arc`.
pub struct ClientRings {
    region: Region,
    bsize: u32,
    pub(crate) c2s: Vec<RingSlot>,
    pub(crate) s2c: Vec<RingSlot>,
    /// Events of a server position out of range met through [`Client`]'s
    /// own send and receive (a port's queues count theirs in `bad_head`).
    bad_positions: AtomicU64,
}

impl ClientRings {
    /// Creates the shared memory of `queues` queue pairs with rings of
    /// 2^`log2` slots, laid out as DPDK does (the C2S rings, the S2C
    /// rings, then a buffer per slot), every ring initialised and every
    /// S2C slot posted.
    fn create(cfg: &ClientConfig, queues: u16, log2: u8) -> Result<ClientRings, ClientError> {
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
        if cfg.seal {
            region
                .seal_size()
                .map_err(|e| ClientError::Memory(format!("sealing the region: {e}")))?;
        }
        let base = region.base().as_ptr();
        let make = |i: usize| -> Result<RingSlot, ClientError> {
            let off = i * ring_len;
            // SAFETY: `off + ring_len <= rings_len <= region.len()`, and
            // `off` is a multiple of `ring_len` (128 + 16 * slots), so
            // 8-byte aligned from the page-aligned base; the views live
            // in `ClientRings` beside the region.
            let view = unsafe { RingView::new(base.add(off), log2) };
            let eventfd = eventfd()?;
            let kick = Call::new(eventfd.try_clone()?);
            Ok(RingSlot {
                ring: SpinLock::new(Ring {
                    view,
                    buffers: (rings_len + i * slots * cfg.buffer_size as usize) as u32,
                    pos: 0,
                    // `init` posts every S2C slot.
                    posted: if i >= usize::from(queues) {
                        slots as u16
                    } else {
                        0
                    },
                    returned: 0,
                    peer: PeerPosition::default(),
                }),
                eventfd,
                kick,
            })
        };
        let q = usize::from(queues);
        let c2s = (0..q).map(make).collect::<Result<Vec<_>, _>>()?;
        let s2c = (q..2 * q).map(make).collect::<Result<Vec<_>, _>>()?;
        let rings = ClientRings {
            region,
            bsize: cfg.buffer_size,
            c2s,
            s2c,
            bad_positions: AtomicU64::new(0),
        };
        rings.init();
        Ok(rings)
    }

    /// Queue pairs.
    pub fn queues(&self) -> usize {
        self.c2s.len()
    }

    /// Sends `frames` on C2S ring `q` (each chained over as many buffers
    /// as it needs); returns how many went (the rest found no room).
    /// Signals the server if it has not masked the ring's interrupts.
    pub(crate) fn send<'a>(&self, q: usize, frames: impl IntoIterator<Item = &'a [u8]>) -> usize {
        let parts = frames
            .into_iter()
            .map(|f| [(f.as_ptr(), f.len()), (std::ptr::null(), 0)]);
        // SAFETY: every part is a live slice.
        unsafe { self.send_parts(q, parts, &self.bad_positions) }
    }

    /// [`ClientRings::send`] of frames given as parts (a split packet's
    /// head and tail); a server tail outside what we handed out sends
    /// nothing, counted in `bad` once per event.
    ///
    /// # Safety
    /// Every part must be readable for its length for the whole call.
    pub(crate) unsafe fn send_parts(
        &self,
        q: usize,
        frames: impl IntoIterator<Item = [(*const u8, usize); 2]>,
        bad: &AtomicU64,
    ) -> usize {
        let slot = &self.c2s[q];
        let mut r = slot.take();
        let base = self.region.base().as_ptr();
        let bsize = self.bsize as usize;
        let size = r.view.size();
        // The server gives back slots between the tail it gave last and
        // our head: anything else (ahead of our head, behind what it gave)
        // frees nothing until it is sane again.
        let tail = r.view.tail_acquire();
        let (returned, pos) = (r.returned, r.pos);
        if r.peer
            .check(returned, tail, pos.wrapping_sub(returned), bad)
            .is_none()
        {
            return 0;
        }
        r.returned = tail;
        // At most `size`: we never hand out more than the ring.
        let mut free = size.saturating_sub(pos.wrapping_sub(tail));
        let mut head = r.pos;
        let mut sent = 0;
        for parts in frames {
            let len = parts[0].1 + parts[1].1;
            let need = len.div_ceil(bsize).max(1);
            if need > usize::from(free) {
                break;
            }
            for k in 0..need {
                let chunk = (len - k * bsize).min(bsize);
                let offset = r.buffers + u32::from(head & (size - 1)) * self.bsize;
                // SAFETY: the buffer of this slot lies inside our region
                // (laid out in `create`) and `chunk <= bsize`; the parts
                // are readable (the caller's contract) and never this
                // slot, which is ours until the head moves past it.
                unsafe { copy_range(&parts, k * bsize, base.add(offset as usize), chunk) };
                r.view.set_desc(
                    head,
                    &DescRepr {
                        next: k + 1 < need,
                        region: 0,
                        offset,
                        length: chunk as u32,
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
                slot.kick.signal();
            }
        }
        sent
    }

    /// The next frame of S2C ring `r`, if it is one buffer of more than
    /// `min` bytes inside our region: its address and length (to lend;
    /// the caller then moves past it).
    #[inline(always)]
    pub(crate) fn single(&self, r: &Ring, min: usize) -> Option<(*const u8, u32)> {
        let d = r.view.desc(r.pos);
        let (off, len) = (d.offset as usize, d.length as usize);
        if d.next || d.region != 0 || len <= min || off.checked_add(len)? > self.region.len() {
            return None;
        }
        // In bounds: checked above.
        Some((self.region.base().as_ptr().wrapping_add(off), d.length))
    }

    /// Moves past the frame [`ClientRings::single`] returned.
    pub(crate) fn skip_one(r: &mut Ring, left: &mut u16) {
        r.pos = r.pos.wrapping_add(1);
        *left -= 1;
    }

    /// Frames waiting on S2C ring `r`: the server's tail, if it lies
    /// between where we read and the head we posted; otherwise none,
    /// counted in `bad` once per event.
    pub(crate) fn waiting(r: &mut Ring, bad: &AtomicU64) -> u16 {
        let (pos, window) = (r.pos, r.posted.wrapping_sub(r.pos));
        r.peer
            .check(pos, r.view.tail_acquire(), window, bad)
            .unwrap_or(0)
    }

    /// Copies the next frame of S2C ring `r` (which has one waiting) into
    /// `dst`, following its chain for at most `*left` slots.
    pub(crate) fn recv_one(&self, r: &mut Ring, left: &mut u16, dst: &mut [u8]) -> Received1 {
        let base = self.region.base().as_ptr();
        let region_len = self.region.len();
        let mut len = 0usize;
        let mut fault = None;
        loop {
            let d = r.view.desc(r.pos);
            r.pos = r.pos.wrapping_add(1);
            *left -= 1;
            let (off, l) = (d.offset as usize, d.length as usize);
            if fault.is_none() {
                if d.region != 0 || off.checked_add(l).is_none_or(|end| end > region_len) {
                    fault = Some(Received1::BadDesc);
                } else if len + l > dst.len() {
                    fault = Some(Received1::TooBig);
                } else {
                    // SAFETY: `off + l` is inside our region (checked
                    // above) and `dst` has room for `l` more bytes.
                    unsafe {
                        std::ptr::copy_nonoverlapping(base.add(off), dst.as_mut_ptr().add(len), l)
                    };
                    len += l;
                }
            }
            if !d.next || *left == 0 {
                break;
            }
        }
        fault.unwrap_or(Received1::Frame(len))
    }

    /// Gives every S2C slot read so far back to the server, each with its
    /// own buffer and full room (whatever the server wrote into them).
    pub(crate) fn refill(&self, r: &mut Ring) {
        let mask = r.view.size() - 1;
        let head = r.posted_head();
        // From what we posted last (not the ring's head, which the
        // server can write), at most one ring's worth.
        let mut slot = r.posted;
        for _ in 0..r.view.size() {
            if slot == head {
                break;
            }
            r.view.set_desc(
                slot,
                &DescRepr {
                    region: 0,
                    offset: r.buffers + u32::from(slot & mask) * self.bsize,
                    length: self.bsize,
                    ..DescRepr::default()
                },
            );
            slot = slot.wrapping_add(1);
        }
        r.posted = head;
        r.view.set_head(head);
    }
}

/// A connected memif client interface.
pub struct Client {
    conn: Conn,
    rings: Arc<ClientRings>,
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
        let (server_name, max_rings, max_log2) = hello(&conn, timeout)?;
        let queues = cfg.queues.clamp(1, max_rings.max(1));
        let log2 = cfg.log2_ring.min(max_log2).min(memif::ring::MAX_LOG2_SIZE);
        let rings = ClientRings::create(cfg, queues, log2)?;
        let mut client = Client {
            conn,
            rings: Arc::new(rings),
            scratch: vec![0; MAX_FRAME],
            server_name,
            server_if_name: String::new(),
        };
        client.announce(cfg, timeout)?;
        Ok(client)
    }

    /// The shared memory and rings (a port's queues hold them).
    pub fn rings(&self) -> &Arc<ClientRings> {
        &self.rings
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
        let rings = self.rings.clone();
        let region_fd = rings.region.fd().try_clone()?;
        self.request(
            &MsgRepr::AddRegion {
                index: 0,
                size: rings.region.len() as u64,
            },
            Some(region_fd.as_fd()),
            timeout,
        )?;
        let base = rings.region.base().as_ptr() as usize;
        for (direction, list) in [(Direction::C2s, &rings.c2s), (Direction::S2c, &rings.s2c)] {
            for (i, slot) in list.iter().enumerate() {
                let r = slot.take();
                let msg = MsgRepr::AddRing {
                    direction,
                    other_flags: 0,
                    index: i as u16,
                    region: 0,
                    offset: (r.view.header() as usize - base) as u32,
                    log2_ring_size: r.view.size().trailing_zeros() as u8,
                    private_hdr_size: 0,
                };
                drop(r);
                self.request(&msg, Some(slot.eventfd.as_fd()), timeout)?;
            }
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
                // A server may zero the heads and tails when it connects
                // (DPDK does): post the S2C buffers (again).
                for slot in &self.rings.s2c {
                    let mut r = slot.take();
                    r.pos = r.view.tail_acquire();
                    r.posted = r.pos;
                    self.rings.refill(&mut r);
                }
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
        self.rings.queues()
    }

    /// Events in which the server's ring positions lay outside what this
    /// client handed out, met by [`Client::send`], [`Client::recv`] and
    /// [`Client::arm`] (`crate::position`).
    pub fn bad_positions(&self) -> u64 {
        self.rings.bad_positions.load(Relaxed)
    }

    /// Sends `frames` on C2S ring `q` (each chained over as many buffers
    /// as it needs); returns how many went (the rest found no room).
    pub fn send<'a>(&mut self, q: usize, frames: impl IntoIterator<Item = &'a [u8]>) -> usize {
        self.rings.send(q, frames)
    }

    /// Receives up to `max` frames from S2C ring `q`, handing each to
    /// `f` (frames the server mangled are skipped); gives the buffers
    /// back to the server. Returns the count handed over.
    pub fn recv(&mut self, q: usize, max: usize, mut f: impl FnMut(&[u8])) -> usize {
        let rings = &*self.rings;
        let mut r = rings.s2c[q].take();
        let mut left = ClientRings::waiting(&mut r, &rings.bad_positions);
        let mut n = 0;
        while left > 0 && n < max {
            if let Received1::Frame(len) = rings.recv_one(&mut r, &mut left, &mut self.scratch) {
                f(&self.scratch[..len]);
                n += 1;
            }
        }
        rings.refill(&mut r);
        n
    }

    /// Asks the server to signal S2C ring `q`'s eventfd when it sends
    /// (interrupt mode, before sleeping). Returns true if frames already
    /// wait (then do not sleep): they may have come before the request
    /// was seen.
    pub fn arm(&self, q: usize) -> bool {
        let mut r = self.rings.s2c[q].take();
        r.view
            .set_flags(r.view.flags() & !memif::ring::FLAG_MASK_INT);
        std::sync::atomic::fence(SeqCst);
        ClientRings::waiting(&mut r, &self.rings.bad_positions) != 0
    }

    /// Back to polling: the server need not signal S2C ring `q`.
    pub fn disarm(&self, q: usize) {
        let r = self.rings.s2c[q].take();
        r.view
            .set_flags(r.view.flags() | memif::ring::FLAG_MASK_INT);
    }

    /// S2C ring `q`'s eventfd (readable after the server signalled it).
    pub fn s2c_eventfd(&self, q: usize) -> BorrowedFd<'_> {
        self.rings.s2c[q].eventfd.as_fd()
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
                std::os::fd::AsRawFd::as_raw_fd(&self.rings.s2c[q].eventfd),
                b.as_mut_ptr().cast(),
                8,
            )
        };
    }

    /// Takes the C2S heads as they stand in the rings as our positions
    /// (after a test wrote them through [`Client::raw`]).
    pub fn resync(&mut self) {
        for slot in &self.rings.c2s {
            let mut r = slot.take();
            r.pos = r.view.head_relaxed();
        }
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
    fn c2s(&self, q: usize) -> Held<'_> {
        self.client.rings.c2s[q].take()
    }
    fn s2c(&self, q: usize) -> Held<'_> {
        self.client.rings.s2c[q].take()
    }
    /// Writes descriptor `slot` of C2S ring `q`.
    pub fn set_c2s_desc(&self, q: usize, slot: u16, d: &DescRepr) {
        self.c2s(q).view.set_desc(slot, d)
    }
    /// Sets C2S ring `q`'s head (see [`Client::resync`]).
    pub fn set_c2s_head(&self, q: usize, head: u16) {
        self.c2s(q).view.set_head(head)
    }
    pub fn c2s_head(&self, q: usize) -> u16 {
        self.c2s(q).view.head_relaxed()
    }
    pub fn c2s_tail(&self, q: usize) -> u16 {
        self.c2s(q).view.tail_acquire()
    }
    /// Writes descriptor `slot` of S2C ring `q`.
    pub fn set_s2c_desc(&self, q: usize, slot: u16, d: &DescRepr) {
        self.s2c(q).view.set_desc(slot, d)
    }
    pub fn set_s2c_head(&self, q: usize, head: u16) {
        self.s2c(q).view.set_head(head)
    }
    pub fn s2c_tail(&self, q: usize) -> u16 {
        self.s2c(q).view.tail_acquire()
    }
    /// The offset of C2S ring `q`'s buffer for `slot`.
    pub fn c2s_buffer(&self, q: usize, slot: u16) -> u32 {
        let r = self.c2s(q);
        r.buffers + u32::from(slot & (r.view.size() - 1)) * self.client.rings.bsize
    }
    /// The offset of S2C ring `q`'s buffer for `slot`.
    pub fn s2c_buffer(&self, q: usize, slot: u16) -> u32 {
        let r = self.s2c(q);
        r.buffers + u32::from(slot & (r.view.size() - 1)) * self.client.rings.bsize
    }
    /// The region's memfd (to shrink it under the server: see
    /// [`ClientConfig::seal`]).
    pub fn region_fd(&self) -> BorrowedFd<'_> {
        self.client.rings.region.fd().as_fd()
    }
    pub fn region_len(&self) -> usize {
        self.client.rings.region.len()
    }
    /// The control connection (to send what a client should not).
    pub fn conn(&self) -> &Conn {
        &self.client.conn
    }
}

impl ClientRings {
    /// Writes every ring's header and descriptors (each slot with its
    /// own buffer) and posts every S2C buffer to the server.
    fn init(&self) {
        for (dir, list) in [(Direction::C2s, &self.c2s), (Direction::S2c, &self.s2c)] {
            for slot in list {
                let r = slot.take();
                // We poll S2C: the server need not signal.
                let flags = if dir == Direction::S2c {
                    memif::ring::FLAG_MASK_INT
                } else {
                    0
                };
                r.view.init(flags);
                for j in 0..r.view.size() {
                    r.view.set_desc(
                        j,
                        &DescRepr {
                            region: 0,
                            offset: r.buffers + u32::from(j) * self.bsize,
                            length: self.bsize,
                            ..DescRepr::default()
                        },
                    );
                }
                if dir == Direction::S2c {
                    r.view.set_head(r.view.size());
                }
            }
        }
    }
}

/// Waits for the server's HELLO: its name, the queue pairs it takes and
/// its largest ring (log2), if it speaks our version.
fn hello(conn: &Conn, timeout: Duration) -> Result<(String, u16, u8), ClientError> {
    match recv(conn, timeout)? {
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
            Ok((lossy(name.as_bytes()), rings, max_log2_ring_size))
        }
        m => Err(ClientError::Unexpected(format!("{m:?} before HELLO"))),
    }
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
