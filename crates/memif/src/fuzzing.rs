//! Entry points for the memif fuzz targets (and the corpus replay test).
//!
//! * [`handshake`] (`memif_handshake`): the control messages a hostile
//!   client sends the switch, through the server side twice — the
//!   [`ServerHandshake`] state machine fed directly, and the real socket
//!   path ([`serve::until_connect`] over a `SOCK_SEQPACKET` pair, file
//!   descriptors attached) — then `Connection::open` on what CONNECT
//!   set up (the regions mapped, the rings checked).
//! * [`ring_walk`] (`memif_rings`): a connected client that writes
//!   anything into its rings and memory, against a real port's rx and tx
//!   queues (server role), each burst checked against a model of what it
//!   may read and write.

use crate::MemifPort;
use crate::client::{Client, ClientConfig};
use crate::connection::Connection;
use crate::handshake::{Limits, Offer, Refusal, ServerHandshake, Setup, Step};
use crate::serve::{self, HandshakeError};
use crate::settings::MemifConfig;
use crate::socket::{Conn, Listener, Received, SocketPath};
use nfv_mem::{Batch, HugepageMode, MemoryConfig, PacketPool, PoolCache};
use nfv_ports::{Port, RxQueue, TxQueue};
use nfv_wire::memif::{self, DescRepr, Direction, MsgRepr, Name, Reason, Secret, VERSION};
use std::cell::RefCell;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// Reads the input as a stream of decisions; zeros past its end.
struct Bytes<'a> {
    data: &'a [u8],
    at: usize,
}

impl Bytes<'_> {
    fn u8(&mut self) -> u8 {
        let b = self.data.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        b
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.u8()).collect()
    }
    fn is_empty(&self) -> bool {
        self.at >= self.data.len()
    }
}

const PAGE: u64 = 4096;
/// The interface on offer.
const ID: u32 = 7;
const SECRET: &[u8] = b"abc";

fn memfd(size: u64, cookies: bool) -> Option<OwnedFd> {
    // SAFETY: a valid C string; on success the fd is new and ours.
    let fd = unsafe { libc::memfd_create(c"fuzz-memif".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    // SAFETY: `fd` is fresh and owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ftruncate on an fd we own.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), size as libc::off_t) } != 0 {
        return None;
    }
    if cookies && size > 0 {
        // Every 4-byte word holds the ring cookie: a ring announced at any
        // aligned offset passes the connection's cookie check.
        let words: Vec<u8> = std::iter::repeat_n(memif::COOKIE.to_le_bytes(), (size / 4) as usize)
            .flatten()
            .collect();
        // SAFETY: writes from a live buffer into a file we own.
        let n = unsafe { libc::pwrite(fd.as_raw_fd(), words.as_ptr().cast(), words.len(), 0) };
        if n < 0 {
            return None;
        }
    }
    Some(fd)
}

fn eventfd() -> Option<OwnedFd> {
    // SAFETY: plain syscall; a non-negative result is a new fd we own.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    // SAFETY: as above.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

/// One message a client sends: its bytes and the descriptors with it.
struct Msg {
    bytes: Vec<u8>,
    fds: Vec<OwnedFd>,
}

/// Builds the client's messages from the input.
///
/// Each message: a selector byte — `sel % 8` the kind (0 INIT, 1
/// ADD_REGION, 2 ADD_RING, 3 CONNECT, 4 DISCONNECT, 5 a message only a
/// server sends, 6 raw bytes of any length, 7 a known type code followed
/// by input bytes), `(sel >> 3) & 3` the descriptors attached (none, a
/// memfd, an eventfd, both), bit 5 memfd filled with ring cookies — then
/// the kind's fields. A memfd's size is the next byte × 4 KiB (at most
/// 64 KiB).
fn messages(b: &mut Bytes) -> Vec<Msg> {
    let mut out = Vec::new();
    while !b.is_empty() && out.len() < 24 {
        let sel = b.u8();
        let bytes = match sel % 8 {
            0 => {
                let f = b.u8();
                let secret = match f & 3 {
                    0 => Secret::new(SECRET),
                    1 => Secret::EMPTY,
                    2 => Secret::new(b"abd"),
                    _ => Secret::new(&b.bytes(24)),
                };
                MsgRepr::Init {
                    version: if f & 4 == 0 { VERSION } else { b.u16() },
                    id: if f & 8 == 0 { ID } else { b.u32() },
                    mode: if f & 16 == 0 { 0 } else { b.u8() },
                    secret,
                    name: Name::new(b"fuzz"),
                }
                .emit()
                .to_vec()
            }
            1 => {
                let f = b.u8();
                let size = match f & 3 {
                    0 => u64::from(b.u8() % 17) * PAGE,
                    1 => u64::from(b.u32()),
                    2 => u64::from(b.u32()) << 24,
                    _ => u64::from(b.u16()),
                };
                MsgRepr::AddRegion {
                    index: u16::from(f >> 2),
                    size,
                }
                .emit()
                .to_vec()
            }
            2 => {
                let f = b.u8();
                let offset = match (f >> 2) & 3 {
                    0 => u32::from(b.u8()) * 128,
                    1 => u32::from(b.u16()),
                    2 => b.u32(),
                    _ => u32::from(b.u8()) * 16_512,
                };
                MsgRepr::AddRing {
                    direction: if f & 1 == 0 {
                        Direction::C2s
                    } else {
                        Direction::S2c
                    },
                    other_flags: 0,
                    index: u16::from((f >> 1) & 1) + if f & 0x80 != 0 { b.u16() } else { 0 },
                    region: u16::from((f >> 4) & 3),
                    offset,
                    log2_ring_size: b.u8() % 16,
                    private_hdr_size: 0,
                }
                .emit()
                .to_vec()
            }
            3 => MsgRepr::Connect {
                if_name: Name::new(b"fuzz0"),
            }
            .emit()
            .to_vec(),
            4 => MsgRepr::Disconnect {
                code: 0,
                reason: Reason::new(&b.bytes(8)),
            }
            .emit()
            .to_vec(),
            5 => match b.u8() % 3 {
                0 => MsgRepr::Ack,
                1 => Limits::default().hello("fuzz"),
                _ => MsgRepr::Connected {
                    if_name: Name::new(b"x"),
                },
            }
            .emit()
            .to_vec(),
            6 => {
                let n = usize::from(b.u8());
                b.bytes(n)
            }
            _ => {
                let mut m = vec![0u8; memif::MSG_LEN];
                m[0] = b.u8() % 10;
                let n = usize::from(b.u8()) % (memif::MSG_LEN - 1);
                for x in &mut m[2..2 + n] {
                    *x = b.u8();
                }
                m
            }
        };
        let cookies = sel & 0x20 != 0;
        let mut fds = Vec::new();
        let kinds = (sel >> 3) & 3;
        if kinds & 1 != 0 {
            let size = u64::from(b.u8() % 17) * PAGE;
            fds.extend(memfd(size, cookies));
        }
        if kinds & 2 != 0 {
            fds.extend(eventfd());
        }
        // A message of no bytes and no descriptor reads as the end of
        // the connection on a socket: send one byte instead.
        let bytes = if bytes.is_empty() && fds.is_empty() {
            vec![0]
        } else {
            bytes
        };
        out.push(Msg { bytes, fds });
    }
    out
}

thread_local! {
    static LISTENER: RefCell<Option<(SocketPath, Listener)>> = const { RefCell::new(None) };
}

/// A connected pair (client end, server end) on this thread's listener.
fn pair() -> Option<(Conn, Conn)> {
    LISTENER.with(|l| {
        let mut l = l.borrow_mut();
        if l.is_none() {
            let path = SocketPath::Abstract(format!(
                "nfv-fuzz-memif-{}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            let listener = Listener::bind(&path).ok()?;
            *l = Some((path, listener));
        }
        let (path, listener) = l.as_ref()?;
        let client = Conn::connect(path).ok()?;
        let server = listener.accept(Duration::from_secs(1)).ok()??;
        Some((client, server))
    })
}

/// What a handshake came to, in comparable form.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// CONNECT accepted: (region sizes, c2s rings, s2c rings) as
    /// (region, offset, log2).
    Connected(Vec<u64>, Vec<(u16, u32, u8)>, Vec<(u16, u32, u8)>),
    Refused(Refusal),
    PeerLeft(Vec<u8>),
    /// The messages ran out first.
    Eof,
}

fn outcome_of<F>(setup: &Setup<F>) -> Outcome {
    let rings = |v: &[crate::handshake::Ring<F>]| {
        v.iter()
            .map(|r| (r.region, r.offset, r.log2_size))
            .collect::<Vec<_>>()
    };
    Outcome::Connected(
        setup.regions.iter().map(|r| r.size).collect(),
        rings(&setup.c2s),
        rings(&setup.s2c),
    )
}

/// The state machine alone: its outcome and the ACKs before it. Checks
/// that only ACKs are replies and that nothing follows the end.
fn direct(msgs: &[Msg], limits: Limits, offer: &impl Fn(u32) -> Option<Offer>) -> (Outcome, usize) {
    let mut h = ServerHandshake::<usize>::new(limits);
    let mut acks = 0;
    let mut end = None;
    for (i, m) in msgs.iter().enumerate() {
        let step = h.on_message(&m.bytes, (!m.fds.is_empty()).then_some(i), offer);
        if end.is_some() {
            assert_eq!(
                step,
                Step::Ignore,
                "a message after the end was not ignored"
            );
            continue;
        }
        end = match step {
            Step::Reply(MsgRepr::Ack) => {
                acks += 1;
                None
            }
            Step::Reply(other) => panic!("the server replied {other:?}"),
            Step::Connect(setup) => {
                check_setup(&setup, limits, offer);
                Some(outcome_of(&setup))
            }
            Step::Refuse(r) => Some(Outcome::Refused(r)),
            Step::PeerLeft(reason) => Some(Outcome::PeerLeft(reason.as_bytes().to_vec())),
            Step::Ignore => panic!("ignored before the end"),
        };
    }
    (end.unwrap_or(Outcome::Eof), acks)
}

/// What a CONNECT may set up: within the limits, rings numbered from 0
/// each way, each inside an added region, the interface on offer.
fn check_setup<F>(s: &Setup<F>, limits: Limits, offer: &impl Fn(u32) -> Option<Offer>) {
    let o = offer(s.id).expect("connected to an interface not on offer");
    assert!(!o.taken, "connected to a taken interface");
    assert!(s.regions.len() <= usize::from(limits.max_regions));
    assert!(s.regions.iter().all(|r| r.size > 0), "an empty region");
    for rings in [&s.c2s, &s.s2c] {
        assert!(!rings.is_empty() && rings.len() <= usize::from(limits.max_rings));
        for r in rings {
            assert!(r.log2_size <= limits.max_log2_ring);
            let len = memif::ring::len(r.log2_size).expect("a ring size") as u64;
            let region = &s.regions[usize::from(r.region)];
            assert!(
                u64::from(r.offset) + len <= region.size,
                "a ring past its region"
            );
        }
    }
}

/// Runs one input through the server side of the handshake, directly and
/// over a socket, and opens the connection CONNECT set up.
///
/// Input: a header byte (bits 0-1: regions allowed − 1; bit 2: two ring
/// pairs allowed; bits 3-4: largest ring 2^(4 + 2x); bit 5: a 64 KiB cap
/// on the port's shared memory instead of 1 GiB; bit 6: the interface
/// has a secret; bit 7: another client holds it), then messages (see
/// `messages`). Checks: the state machine replies only ACK and ignores
/// everything after its end; a CONNECT it accepts is within the limits,
/// rings numbered from 0 each way inside added regions, the interface on
/// offer; the socket path ends exactly as the state machine does, and
/// says HELLO, one ACK per accepted message and DISCONNECT after a
/// refusal, nothing else; the connection opens only over files that hold
/// their regions, within the cap, with every ring's cookie in place.
pub fn handshake(data: &[u8]) {
    let mut b = Bytes { data, at: 0 };
    let h = b.u8();
    let limits = Limits {
        max_regions: 1 + u16::from(h & 3),
        max_rings: 1 + u16::from((h >> 2) & 1),
        max_log2_ring: 4 + 2 * ((h >> 3) & 3),
    };
    let secret = (h & 0x40 != 0).then(|| Secret::new(SECRET));
    let taken = h & 0x80 != 0;
    let offer = move |id| (id == ID).then_some(Offer { secret, taken });
    let msgs = messages(&mut b);
    let (want, acks) = direct(&msgs, limits, &offer);
    let Some((client, server)) = pair() else {
        return;
    };
    for m in &msgs {
        let raw: Vec<_> = m.fds.iter().map(|f| f.as_fd()).collect();
        if !send_all(&client, &m.bytes, &raw) {
            return;
        }
    }
    // The messages end here: the server reads the end after the last.
    // SAFETY: shutdown on a socket we own.
    unsafe { libc::shutdown(client.as_fd().as_raw_fd(), libc::SHUT_WR) };
    drop(msgs);
    // The client has said all it will and closed its side, so the server
    // meets the end without waiting; its deadline only expires when this
    // process stalls (a starved `nice` fuzzer), which says nothing of the
    // handshake: such a run is not compared.
    let r = serve::until_connect(&server, limits, "nfvswitch", offer, Duration::from_secs(8));
    let got = match &r {
        Err(HandshakeError::Timeout(_) | HandshakeError::Silent(_)) => return,
        Ok(setup) => outcome_of(setup),
        Err(HandshakeError::Refused(why)) => Outcome::Refused(*why),
        Err(HandshakeError::PeerLeft(s)) => Outcome::PeerLeft(s.as_bytes().to_vec()),
        Err(HandshakeError::Eof) => Outcome::Eof,
        Err(e) => panic!("handshake over the socket: {e}"),
    };
    // The socket path reports the peer's reason as lossy UTF-8.
    let same = match (&want, &got) {
        (Outcome::PeerLeft(a), Outcome::PeerLeft(b)) => {
            String::from_utf8_lossy(a).as_bytes() == b.as_slice()
        }
        (a, b) => a == b,
    };
    assert!(same, "state machine: {want:?}, over the socket: {got:?}");
    check_replies(&client, acks, matches!(want, Outcome::Refused(_)));
    if let Ok(setup) = r {
        // The port's cap on shared memory: 64 KiB or 1 GiB.
        open(setup, if h & 0x20 != 0 { 64 << 10 } else { 1 << 30 });
    }
}

/// Sends one message with its descriptors (all of them, unlike
/// [`Conn::send_bytes`]).
fn send_all(c: &Conn, bytes: &[u8], fds: &[std::os::fd::BorrowedFd]) -> bool {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    let raw: Vec<i32> = fds.iter().map(|f| f.as_raw_fd()).collect();
    let cmsg = [ControlMessage::ScmRights(&raw)];
    let cmsgs: &[ControlMessage] = if raw.is_empty() { &[] } else { &cmsg };
    sendmsg::<()>(
        c.as_fd().as_raw_fd(),
        &[std::io::IoSlice::new(bytes)],
        cmsgs,
        MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL,
        None,
    )
    .is_ok()
}

/// What the server said: HELLO, an ACK per accepted message, and a
/// DISCONNECT after a refusal (CONNECTED is the caller's to send).
fn check_replies(c: &Conn, acks: usize, refused: bool) {
    let mut buf = [0u8; 256];
    let mut said = Vec::new();
    while let Ok(Received::Msg { len, .. }) = c.recv(&mut buf, Duration::ZERO) {
        said.push(MsgRepr::parse(&buf[..len.min(buf.len())]).expect("the server speaks memif"));
    }
    assert!(
        matches!(said.first(), Some(MsgRepr::Hello { .. })),
        "{said:?}"
    );
    let n_acks = said.iter().filter(|m| **m == MsgRepr::Ack).count();
    assert_eq!(n_acks, acks, "ACKs: {said:?}");
    let last_is_disconnect = matches!(said.last(), Some(MsgRepr::Disconnect { .. }));
    assert_eq!(last_is_disconnect, refused, "{said:?}");
    assert_eq!(said.len(), 1 + acks + usize::from(refused), "{said:?}");
}

/// Maps what CONNECT set up: it works only when every region's file
/// holds its size, and then every ring lies inside the mapping.
fn open(setup: Setup<OwnedFd>, cap: u64) {
    let fits = setup.regions.iter().all(|r| {
        nix::sys::stat::fstat(&r.fd).is_ok_and(|st| st.st_size as u64 >= r.size) && r.size < 1 << 40
    });
    let total: u64 = setup.regions.iter().map(|r| r.size).sum();
    let (c2s, s2c) = (setup.c2s.len(), setup.s2c.len());
    if let Ok(conn) = Connection::open(setup, cap) {
        assert!(fits, "a region mapped past its file");
        assert!(total <= cap, "regions over the port's cap mapped");
        assert_eq!((conn.rx.len(), conn.tx.len()), (c2s, s2c));
        let views = conn.rx.iter().map(|r| &r.view);
        for view in views.chain(conn.tx.iter().map(|r| &r.view)) {
            assert_eq!(view.cookie(), memif::COOKIE);
            let _ = (view.head(), view.tail(), view.desc(view.size() - 1));
        }
    }
}

/// The client's region, mapped a second time for the fuzzer: the hostile
/// client writes it, the model reads it.
struct Shm {
    base: *mut u8,
    len: usize,
}

impl Shm {
    fn map(fd: std::os::fd::BorrowedFd, len: usize) -> Option<Shm> {
        // SAFETY: a shared mapping of the client's own memfd, checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        (p != libc::MAP_FAILED).then_some(Shm {
            base: p.cast(),
            len,
        })
    }
    fn snapshot(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.len];
        // SAFETY: the whole mapping, read while no other thread writes it
        // (the switch runs its bursts on this thread).
        unsafe { std::ptr::copy_nonoverlapping(self.base, v.as_mut_ptr(), self.len) };
        v
    }
    fn write(&self, at: usize, bytes: &[u8]) {
        let n = bytes.len().min(self.len.saturating_sub(at));
        // SAFETY: `at + n <= len`, inside the mapping.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.base.add(at), n) };
    }
}

impl Drop for Shm {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

thread_local! {
    static RING_POOL: RefCell<Option<(std::sync::Arc<PacketPool>, PoolCache)>> =
        const { RefCell::new(None) };
    static NEXT_ID: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    /// A port that stays on this thread's socket (interface id 0), so that
    /// the socket's listener outlives each input's port: the last port to
    /// leave a socket waits for its listener thread to stop.
    static ANCHOR: RefCell<Option<std::sync::Arc<MemifPort>>> = const { RefCell::new(None) };
}

fn with_pool<R>(f: impl FnOnce(&mut PoolCache) -> R) -> R {
    RING_POOL.with(|p| {
        let mut p = p.borrow_mut();
        let (_, cache) = p.get_or_insert_with(|| {
            let cfg = MemoryConfig {
                frame_size: 2048,
                frames: 512,
                hugepages: HugepageMode::Never,
            };
            let pool = PacketPool::new("fuzz-memif", &cfg).expect("fuzz pool");
            let cache = pool.cache();
            (pool, cache)
        });
        f(cache)
    })
}

/// Where things are in the client's region (`crate::client` lays it out
/// as DPDK does: C2S ring, S2C ring, C2S buffers, S2C buffers).
#[derive(Clone, Copy)]
struct Layout {
    size: u16,
    bsize: u32,
    ring_len: usize,
    region_len: usize,
}

impl Layout {
    /// Offset of ring `s2c`'s header.
    fn ring(&self, s2c: bool) -> usize {
        if s2c { self.ring_len } else { 0 }
    }
    fn desc_at(&self, s2c: bool, slot: u16) -> usize {
        self.ring(s2c) + memif::ring::desc_offset(usize::from(slot & (self.size - 1)))
    }
    fn buffer(&self, s2c: bool, slot: u16) -> u32 {
        let first =
            2 * self.ring_len + if s2c { usize::from(self.size) } else { 0 } * self.bsize as usize;
        first as u32 + u32::from(slot & (self.size - 1)) * self.bsize
    }
    /// The bytes a descriptor names, if they lie inside the region (what
    /// the connection's translation allows: region 0 only).
    fn range(&self, d: &DescRepr) -> Option<std::ops::Range<usize>> {
        let (off, len) = (d.offset as usize, d.length as usize);
        (d.region == 0 && off < self.region_len && len <= self.region_len - off)
            .then_some(off..off + len)
    }
}

fn desc_in(m: &[u8], at: usize) -> DescRepr {
    DescRepr::parse(&m[at..at + memif::ring::DESC_LEN]).expect("16 bytes")
}

fn u16_in(m: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([m[at], m[at + 1]])
}

/// A descriptor as the hostile client writes it.
fn fuzz_desc(b: &mut Bytes, l: &Layout, s2c: bool) -> DescRepr {
    let sel = b.u8();
    let region = if sel & 0x80 != 0 {
        u16::from(b.u8() & 3)
    } else {
        0
    };
    let offset = match sel & 7 {
        0..=2 => l.buffer(s2c, u16::from(b.u8())) + u32::from(b.u8()),
        3 => (l.region_len - usize::from(b.u8()).min(l.region_len)) as u32,
        4 => u32::from(b.u16()) % l.region_len as u32,
        5 => b.u32(),
        _ => (l.desc_at(s2c, u16::from(b.u8())) + usize::from(b.u8() & 15)) as u32,
    };
    let length = match (sel >> 3) & 7 {
        0 => 0,
        1 | 2 => u32::from(b.u8()),
        3 => u32::from(b.u16()) % 4096,
        4 => b.u32(),
        _ => l.bsize,
    };
    DescRepr {
        next: sel & 0x40 != 0,
        other_flags: 0,
        region,
        length,
        offset,
        metadata: 0,
    }
}

/// The model of one rx burst over the C2S ring in `m`, from `next`:
/// the frames handed up and where the switch stops.
fn rx_model(m: &[u8], l: &Layout, next: u16, room: usize) -> (Vec<Vec<u8>>, u16) {
    let head = u16_in(m, memif::ring::HEAD.start);
    let mut avail = head.wrapping_sub(next);
    if avail > l.size {
        return (Vec::new(), next);
    }
    let (mut frames, mut slot) = (Vec::new(), next);
    while avail > 0 && frames.len() < nfv_mem::BATCH {
        let (mut frame, mut fault) = (Vec::new(), false);
        loop {
            if avail == 0 {
                fault = true;
                break;
            }
            let d = desc_in(m, l.desc_at(false, slot));
            slot = slot.wrapping_add(1);
            avail -= 1;
            if !fault {
                match l.range(&d) {
                    Some(r) if frame.len() + r.len() <= room => frame.extend_from_slice(&m[r]),
                    _ => fault = true,
                }
            }
            if !d.next {
                break;
            }
        }
        if !fault && !frame.is_empty() {
            frames.push(frame);
        }
    }
    (frames, slot)
}

/// The model of one tx burst of `frames` over the S2C ring in `m` (which
/// it updates as the switch must), from the switch's `tail`: how many
/// frames go, and the tail after.
fn tx_model(m: &mut [u8], l: &Layout, tail: u16, frames: &[Vec<u8>]) -> (usize, u16) {
    let head = u16_in(m, l.ring(true) + memif::ring::HEAD.start);
    let mut free = head.wrapping_sub(tail);
    if free > l.size {
        return (0, tail);
    }
    let (mut slot, mut sent) = (tail, 0);
    'frames: for f in frames {
        let (start, mut done) = (slot, 0);
        loop {
            let at = l.desc_at(true, slot);
            let d = desc_in(m, at);
            let take = (f.len() - done).min(d.length as usize);
            let Some(r) = l.range(&d).filter(|_| free > 0 && take > 0) else {
                slot = start;
                break 'frames;
            };
            m[r.start..r.start + take].copy_from_slice(&f[done..done + take]);
            done += take;
            let more = done < f.len();
            let mut nd = desc_in(m, at);
            nd.next = more;
            nd.other_flags = 0;
            nd.length = take as u32;
            m[at..at + memif::ring::DESC_LEN].copy_from_slice(&nd.emit());
            slot = slot.wrapping_add(1);
            free -= 1;
            if !more {
                break;
            }
        }
        sent += 1;
    }
    if sent > 0 {
        let at = l.ring(true) + memif::ring::TAIL.start;
        m[at..at + 2].copy_from_slice(&slot.to_le_bytes());
    }
    (sent, if sent > 0 { slot } else { tail })
}

/// A server port and a client connected to it, with the queues synced.
///
/// Dropped in field order: the client first (its connection thread sees
/// the socket close at once), the port last.
struct Rig {
    client: Client,
    shm: Shm,
    rxq: Box<dyn RxQueue>,
    txq: Box<dyn TxQueue>,
    _port: std::sync::Arc<MemifPort>,
    l: Layout,
    /// The slot the rx queue reads next (= the tail it published).
    rx_next: u16,
    /// The switch's own S2C tail.
    tx_tail: u16,
    /// Room in a switch packet buffer.
    room: usize,
}

impl Rig {
    fn new(log2: u8, bsize: u32, one_copy: bool, pool: &mut PoolCache) -> Option<Rig> {
        let path = format!(
            "@nfv-fuzz-rings-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        );
        if ANCHOR.with(|a| a.borrow().is_none()) {
            let port = MemifPort::open("fuzz-anchor", &MemifConfig::new(&path), 9216).ok()?;
            ANCHOR.with(|a| *a.borrow_mut() = Some(port));
        }
        let id = NEXT_ID.with(|n| {
            n.set(n.get().wrapping_add(1).max(1));
            n.get()
        });
        let cfg = MemifConfig {
            id,
            one_copy,
            ..MemifConfig::new(&path)
        };
        let port = MemifPort::open("fuzz-rings", &cfg, 9216).ok()?;
        let mut rxq = port.open_rxq(0);
        let txq = port.open_txq(0);
        let ccfg = ClientConfig {
            id,
            log2_ring: log2,
            buffer_size: bsize,
            ..ClientConfig::new(SocketPath::parse(&path))
        };
        let mut client = Client::connect(&ccfg, Duration::from_secs(5)).ok()?;
        // One frame through proves the port published the connection to
        // its queues (the hub's thread does that after CONNECTED).
        if client.send(0, [&[0x5a; 60][..]]) != 1 {
            return None;
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut batch = Batch::new();
        while rxq.rx_burst(&mut batch, pool) == 0 {
            if Instant::now() > deadline {
                return None;
            }
            std::thread::yield_now();
        }
        rxq.burst_done();
        pool.free_batch(&mut batch);
        let raw = client.raw();
        let size = 1u16 << log2;
        let l = Layout {
            size,
            bsize,
            ring_len: memif::ring::len(log2)?,
            region_len: raw.region_len(),
        };
        let shm = Shm::map(raw.region_fd(), l.region_len)?;
        let room = {
            let p = pool.alloc()?;
            let n = p.max_len();
            pool.free(p);
            n
        };
        Some(Rig {
            client,
            shm,
            rxq,
            txq,
            _port: port,
            l,
            rx_next: 1,
            tx_tail: 0,
            room,
        })
    }

    fn rx_burst(&mut self, pool: &mut PoolCache) {
        let before = self.shm.snapshot();
        let (want, next) = rx_model(&before, &self.l, self.rx_next, self.room);
        let mut batch = Batch::new();
        self.rxq.rx_burst(&mut batch, pool);
        let mut got = Vec::new();
        for p in batch.iter_mut() {
            assert!(p.join_tail(), "a lent frame fits its packet");
            got.push(p.data().to_vec());
        }
        self.rxq.burst_done();
        pool.free_batch(&mut batch);
        assert!(
            got == want,
            "rx from {}: {} frames of {:?} bytes, the model {} of {:?} \
             (connected {}, counters {:?})",
            self.rx_next,
            got.len(),
            got.iter().map(Vec::len).collect::<Vec<_>>(),
            want.len(),
            want.iter().map(Vec::len).collect::<Vec<_>>(),
            self._port.is_connected(),
            [
                "bad_head",
                "bad_desc",
                "bad_chain",
                "too_big",
                "empty",
                "memory_faults"
            ]
            .map(|c| (c, self._port.counter(c)))
        );
        let mut expect = before;
        if next != self.rx_next {
            let at = memif::ring::TAIL.start;
            expect[at..at + 2].copy_from_slice(&next.to_le_bytes());
        }
        assert!(
            self.shm.snapshot() == expect,
            "rx wrote the region other than its tail"
        );
        self.rx_next = next;
    }

    fn tx_burst(&mut self, b: &mut Bytes, pool: &mut PoolCache) {
        let n = b.u8() % 33;
        let mut batch = Batch::new();
        let mut frames = Vec::new();
        for i in 0..n {
            let Some(mut p) = pool.alloc() else { break };
            let len = 1 + usize::from(b.u16()) % self.room;
            if p.set_len(len).is_err() {
                pool.free(p);
                break;
            }
            for (j, x) in p.data_mut().iter_mut().enumerate() {
                *x = i.wrapping_mul(31).wrapping_add(j as u8);
            }
            frames.push(p.data().to_vec());
            batch.push(p);
        }
        let mut expect = self.shm.snapshot();
        let (want, tail) = tx_model(&mut expect, &self.l, self.tx_tail, &frames);
        let sent = self.txq.tx_burst(&mut batch, pool);
        pool.free_batch(&mut batch);
        assert_eq!(sent, want, "tx frames sent");
        if self.shm.snapshot() != expect {
            let now = self.shm.snapshot();
            let first = (0..now.len()).find(|&i| now[i] != expect[i]);
            panic!("tx wrote other than the model: first difference at {first:?}");
        }
        self.tx_tail = tail;
    }
}

/// Runs one input: a connected client that writes anything into its
/// rings and memory, against a real server port's rx and tx queues.
///
/// Input: a header byte (bits 0-2: 2^(1 + x % 6) slots per ring, bits
/// 3-4: buffers of 128, 256, 1024 or 2048 bytes, bit 5: one copy), then
/// up to 48 ops, `op % 8`: 0/4 write a C2S/S2C descriptor (slot, then
/// where it points: a buffer, the region's end, anywhere, past the
/// region, into the descriptors; how long; NEXT; sometimes another
/// region), 1/5 move the C2S/S2C head (within the window or anywhere),
/// 2 write bytes anywhere in the region (headers, tails and cookies
/// included), 3 an rx burst, 6 a tx burst (frames and their lengths),
/// 7 well-formed traffic (C2S frames posted, or S2C buffers reposted).
///
/// Checks, per burst, against a model of the ring walk (`rx_model`,
/// `tx_model`): the frames received are exactly those of the sane chains
/// the head covers, in order; rx writes nothing but its tail; tx sends
/// the frames the posted buffers hold and writes exactly those buffers'
/// bytes, their descriptors' flags and lengths, and its tail — nothing
/// else of the region. No panic, no fault.
pub fn ring_walk(data: &[u8]) {
    let mut b = Bytes { data, at: 0 };
    let h = b.u8();
    let log2 = 1 + (h & 7) % 6;
    let bsize = [128, 256, 1024, 2048][usize::from((h >> 3) & 3)];
    with_pool(|pool| {
        let Some(mut rig) = Rig::new(log2, bsize, h & 0x20 != 0, pool) else {
            return;
        };
        for _ in 0..48 {
            if b.is_empty() {
                break;
            }
            rig.op(&mut b, pool);
        }
        rig.rx_burst(pool);
        let mut none = Bytes { data: &[], at: 0 };
        rig.tx_burst(&mut none, pool);
    });
}

impl Rig {
    fn op(&mut self, b: &mut Bytes, pool: &mut PoolCache) {
        let l = self.l;
        let raw = self.client.raw();
        match b.u8() % 8 {
            op @ (0 | 4) => {
                let s2c = op == 4;
                let slot = u16::from(b.u8());
                let d = fuzz_desc(b, &l, s2c);
                self.shm.write(l.desc_at(s2c, slot), &d.emit());
            }
            op @ (1 | 5) => {
                let s2c = op == 5;
                let from = if s2c { self.tx_tail } else { self.rx_next };
                let sel = b.u8();
                let head = if sel & 0x80 == 0 {
                    from.wrapping_add(u16::from(sel) % (l.size + 2))
                } else {
                    b.u16()
                };
                if s2c {
                    raw.set_s2c_head(0, head);
                } else {
                    raw.set_c2s_head(0, head);
                }
            }
            2 => {
                let at = match b.u8() & 3 {
                    0 => usize::from(b.u8()) % 136,
                    1 => l.ring_len + usize::from(b.u8()) % 136,
                    _ => b.u32() as usize % l.region_len,
                };
                let n = usize::from(b.u8() % 64);
                let bytes: Vec<u8> = (0..n).map(|_| b.u8()).collect();
                self.shm.write(at, &bytes);
            }
            3 => self.rx_burst(pool),
            6 => self.tx_burst(b, pool),
            _ => {
                let k = b.u8();
                if k & 1 == 0 {
                    // C2S: k/2 % size frames of one buffer each.
                    let n = u16::from(k >> 1) % (l.size + 1);
                    for i in 0..n {
                        let slot = self.rx_next.wrapping_add(i);
                        let d = DescRepr {
                            offset: l.buffer(false, slot),
                            length: 1 + u32::from(b.u16()) % l.bsize,
                            ..DescRepr::default()
                        };
                        raw.set_c2s_desc(0, slot, &d);
                    }
                    raw.set_c2s_head(0, self.rx_next.wrapping_add(n));
                } else {
                    // S2C: every buffer posted again.
                    for i in 0..l.size {
                        let slot = self.tx_tail.wrapping_add(i);
                        let d = DescRepr {
                            offset: l.buffer(true, slot),
                            length: l.bsize,
                            ..DescRepr::default()
                        };
                        raw.set_s2c_desc(0, slot, &d);
                    }
                    raw.set_s2c_head(0, self.tx_tail.wrapping_add(l.size));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// INIT with the right secret.
    const INIT: &[u8] = &[0, 0];
    /// ADD_REGION 0 of 64 KiB with a 64 KiB memfd of cookies.
    const REGION: &[u8] = &[0x29, 0, 16, 16];
    /// ADD_RING c2s 0 at 0 and s2c 0 at 16,512, 1024 slots, eventfds.
    const RINGS: &[u8] = &[0x12, 0x0c, 0, 10, 0x12, 0x0d, 1, 10];
    const CONNECT: &[u8] = &[3];

    /// The seeds `fuzz/corpus/memif_handshake` starts from.
    fn seeds() -> Vec<(&'static str, Vec<u8>)> {
        // Two regions, one ring pair, rings up to 1024 slots, a secret.
        let h = 0x01 | (3 << 3) | 0x40;
        vec![
            ("dpdk-like", [&[h], INIT, REGION, RINGS, CONNECT].concat()),
            (
                "two-pairs-two-regions",
                [
                    &[h | 0x04],
                    INIT,
                    REGION,
                    &[0x29, 4, 16, 16], // region 1
                    RINGS,
                    // c2s 1 and s2c 1 in region 1
                    &[0x12, 0x1e, 0, 10, 0x12, 0x1f, 1, 10],
                    CONNECT,
                ]
                .concat(),
            ),
            (
                "file-shorter-than-region",
                [&[h], INIT, &[0x29, 0, 16, 1], RINGS, CONNECT].concat(),
            ),
            (
                "over-the-cap",
                [
                    &[h | 0x20],
                    INIT,
                    REGION,
                    &[0x29, 4, 16, 16],
                    RINGS,
                    CONNECT,
                ]
                .concat(),
            ),
            ("wrong-secret", [&[h][..], &[0, 2], REGION].concat()),
            (
                "ring-outside-region",
                [&[h], INIT, REGION, &[0x12, 0x08, 0xff, 0xff, 0xff, 0x7f, 6]].concat(),
            ),
            (
                "ring-without-fd-and-no-region-fd",
                [&[h], INIT, &[1, 0, 16], &[2, 0x0c, 0, 10]].concat(),
            ),
            (
                "garbage-then-disconnect",
                [
                    &[h],
                    INIT,
                    &[7, 5, 20],
                    &[0u8; 20][..],
                    &[6, 200],
                    &[0xaa; 200][..],
                    &[4, b'b', b'y', b'e', 0, 0, 0, 0, 0],
                ]
                .concat(),
            ),
            (
                "peer-leaves",
                [&[h][..], &[4, 0xff, 0xfe, b'x', 0, 0, 0, 0, 0], INIT].concat(),
            ),
            ("taken", [&[h | 0x80], INIT].concat()),
        ]
    }

    /// The seeds `fuzz/corpus/memif_rings` starts from.
    fn ring_seeds() -> Vec<(&'static str, Vec<u8>)> {
        let le = |v: u16| v.to_le_bytes();
        // Op 7: `n` C2S frames of the given lengths.
        let c2s = |lens: &[u16]| {
            let mut v = vec![7, 2 * lens.len() as u8];
            for l in lens {
                v.extend(le(*l - 1));
            }
            v
        };
        let repost = vec![7, 1];
        let tx = |lens: &[u16]| {
            let mut v = vec![6, lens.len() as u8];
            for l in lens {
                v.extend(le(*l - 1));
            }
            v
        };
        let rx = vec![3];
        // Op 0/4: a descriptor at `slot` in its slot's buffer, of
        // `bsize` bytes, NEXT as given.
        let desc = |op: u8, slot: u8, next: bool| {
            vec![op, slot, (5 << 3) | if next { 0x40 } else { 0 }, slot, 0]
        };
        let head = |op: u8, n: u8| vec![op, n];
        // 16 slots of 2048 bytes, one copy.
        let big = 0x3b;
        // 32 slots of 128 bytes.
        let small = 0x04;
        vec![
            (
                "traffic-both-ways",
                [
                    &[big][..],
                    &c2s(&[60, 1500, 129, 2048, 64]),
                    &rx,
                    &tx(&[60, 1514, 9, 2047]),
                    &repost,
                    &tx(&[64; 20]),
                ]
                .concat(),
            ),
            (
                "chains-over-small-buffers",
                [
                    &[small][..],
                    &desc(0, 1, true),
                    &desc(0, 2, true),
                    &desc(0, 3, false),
                    &desc(0, 4, true),
                    &head(1, 4),
                    &rx,
                    &tx(&[1500, 60, 300]),
                    &rx,
                ]
                .concat(),
            ),
            (
                "descriptors-outside",
                [
                    &[big][..],
                    // past the region: offset u32, length u32
                    &[0, 1, 5 | (4 << 3), 0, 0, 0, 0x80, 0xff, 0xff, 0, 0],
                    // the region's last 16 bytes, 255 long
                    &[0, 2, 3 | (1 << 3), 16, 255],
                    // region 2
                    &[0, 3, 0x80 | (5 << 3), 2, 3, 0],
                    &head(1, 3),
                    &rx,
                    &[4, 0, 5 | (4 << 3), 0, 0, 0, 0x80, 0, 8, 0, 0],
                    &tx(&[60, 60]),
                ]
                .concat(),
            ),
            (
                "bad-heads-then-sane",
                [
                    &[big][..],
                    &c2s(&[60, 60]),
                    &[1, 0x80, 0x00, 0x80],
                    &rx,
                    &head(1, 17),
                    &rx,
                    &head(1, 2),
                    &rx,
                    &[5, 0x80, 0xff, 0xff],
                    &tx(&[60]),
                    &head(5, 3),
                    &tx(&[60, 61, 62]),
                ]
                .concat(),
            ),
            (
                "hostile-writes",
                [
                    &[small | 0x20][..],
                    &c2s(&[100, 100]),
                    // C2S header: flags, head, tail
                    &[2, 0, 4, 8, 1, 0, 7, 0, 9, 9, 9, 9],
                    &rx,
                    // S2C descriptor 0 points into the S2C descriptors
                    &[4, 0, 6 | (7 << 3), 0, 0],
                    &tx(&[200, 60]),
                    // bytes over the S2C header
                    &[2, 1, 64, 4, 0xde, 0xad, 0xbe, 0xef],
                    &tx(&[60]),
                ]
                .concat(),
            ),
            (
                "empty-frames-and-unfinished-chain",
                [
                    &[big][..],
                    &[0, 1, 0, 1],
                    &desc(0, 2, true),
                    &head(1, 2),
                    &rx,
                    &[4, 0, 0, 0],
                    &tx(&[60]),
                ]
                .concat(),
            ),
        ]
    }

    #[test]
    fn ring_seeds_run() {
        for (name, s) in ring_seeds() {
            eprintln!("{name}");
            ring_walk(&s);
        }
        ring_walk(&[]);
        ring_walk(&[0xff; 200]);
    }

    #[test]
    fn seeds_run() {
        for (name, s) in seeds() {
            eprintln!("{name}");
            handshake(&s);
        }
        handshake(&[]);
        handshake(&[0xff; 64]);
    }

    /// Writes the seeds to `fuzz/corpus/memif_handshake` when asked
    /// (`NFV_WRITE_SEEDS=1 cargo test -p nfv-memif --lib fuzzing`).
    #[test]
    fn write_seeds() {
        if std::env::var_os("NFV_WRITE_SEEDS").is_none() {
            return;
        }
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fuzz/corpus/memif_handshake");
        std::fs::create_dir_all(&dir).unwrap();
        for (name, s) in seeds() {
            std::fs::write(dir.join(name), s).unwrap();
        }
        let dir = dir.join("../memif_rings");
        std::fs::create_dir_all(&dir).unwrap();
        for (name, s) in ring_seeds() {
            std::fs::write(dir.join(name), s).unwrap();
        }
    }
}
