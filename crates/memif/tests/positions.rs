//! The peer's ring positions against what the switch handed out, in both
//! roles, over real rings — one table for the four rings:
//!
//! * server role, against our own client ([`Client::raw`] writes its
//!   heads): the C2S head (our rx) and the S2C head (our tx);
//! * client role, against a scripted server that maps the port's memory
//!   and writes its tails: the S2C tail (our rx) and the C2S tail (our tx).
//!
//! Each case: the peer makes `k` frames or slots available as it should,
//! then writes its position somewhere (where it should be, past the ring
//! by one, behind ours, far ahead); the switch runs a few bursts. A sane
//! position moves frames; any other moves nothing and counts `bad_head`
//! once however many bursts it lasts; the position put back, the ring
//! resumes, and an rx ring delivers every frame offered exactly once, in
//! order. The table runs from fresh rings and again across the u16 wrap.

use nfv_mem::{Batch, HugepageMode, MemoryConfig, PacketPool, PoolCache};
use nfv_memif::client::{Client, ClientConfig};
use nfv_memif::handshake::{Limits, Offer};
use nfv_memif::socket::{Listener, SocketPath};
use nfv_memif::{MemifConfig, MemifPort, MemifRole};
use nfv_ports::{Port, RxQueue, TxQueue};
use nfv_testutil::TempDir;
use nfv_wire::memif::{DescRepr, ring};
use std::collections::VecDeque;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering::*};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(20);
const LOG2: u8 = 6;
const SIZE: u16 = 1 << LOG2;
/// Frames a tx burst offers.
const TX_BURST: usize = 8;

/// Where the peer writes its position, given the window's start (`ours`)
/// and where it should be after offering (`legit`).
#[derive(Debug, Clone, Copy)]
enum Peer {
    Legit,
    /// `legit + n`.
    Past(u16),
    /// `ours - n`.
    Behind(u16),
}

/// (case, frames or slots offered, the peer's position, sane)
/// (A position within the window but past what the peer really filled
/// is its own business: the switch reads those slots as the peer left
/// them, bounds-checked; `crate::position`'s unit tests cover it.)
const CASES: [(&str, u16, Peer, bool); 6] = [
    ("normal", 5, Peer::Legit, true),
    ("full ring", SIZE, Peer::Legit, true),
    (
        "off-by-one overrun of a full ring",
        SIZE,
        Peer::Past(1),
        false,
    ),
    ("going backwards", 2, Peer::Behind(1), false),
    ("far behind", 3, Peer::Behind(20_000), false),
    ("far ahead", 3, Peer::Past(30_000), false),
];

/// A ring under test, driven from the peer's side and the switch's.
trait Under {
    /// The start of the peer's window: our position as the peer sees it.
    fn ours(&self) -> u16;
    /// Writes the peer's position.
    fn set_peer(&mut self, v: u16);
    /// The peer offers `k` frames (rx) or slots (tx) as it should;
    /// returns where its position then is.
    fn offer(&mut self, k: u16) -> u16;
    /// One burst of the switch; frames moved.
    fn burst(&mut self) -> usize;
    /// Everything offered is moved and taken back: the ring is quiet.
    fn settle(&mut self);
    /// The port's `bad_head`.
    fn bad_head(&self) -> u64;
    fn is_rx(&self) -> bool;
}

fn run_table(u: &mut dyn Under, label: &str) {
    for (case, k, peer, sane) in CASES {
        u.settle();
        let ours = u.ours();
        let legit = u.offer(k);
        let pos = match peer {
            Peer::Legit => legit,
            Peer::Past(n) => legit.wrapping_add(n),
            Peer::Behind(n) => ours.wrapping_sub(n),
        };
        u.set_peer(pos);
        let before = u.bad_head();
        let during: usize = (0..3).map(|_| u.burst()).sum();
        let what = format!("{label}, from {ours}: {case}");
        if sane {
            assert_eq!(u.bad_head(), before, "{what}: counted");
            assert!(during > 0, "{what}: nothing moved");
        } else {
            assert_eq!(during, 0, "{what}: frames moved");
            assert_eq!(u.bad_head(), before + 1, "{what}: not counted once");
        }
        u.set_peer(legit);
        let after: usize = (0..4).map(|_| u.burst()).sum();
        assert_eq!(
            u.bad_head(),
            before + u64::from(!sane),
            "{what}: counted again"
        );
        if u.is_rx() && sane && matches!(peer, Peer::Legit) {
            assert_eq!(during, usize::from(k), "{what}");
        }
        if !sane {
            assert!(after > 0, "{what}: the ring did not resume");
        }
        if u.is_rx() {
            // What a sane "past" position claimed beyond the offer is not
            // delivered twice: every frame offered exactly once.
            assert!(during + after >= usize::from(k), "{what}: frames lost");
        }
    }
    u.settle();
}

fn pool(tag: &str) -> Arc<PacketPool> {
    PacketPool::new(
        &format!("memif-pos-{tag}"),
        &MemoryConfig {
            frame_size: 2048,
            frames: 1024,
            hugepages: HugepageMode::Never,
        },
    )
    .unwrap()
}

fn frame(seq: u32) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[..4].copy_from_slice(&seq.to_le_bytes());
    for (i, b) in f.iter_mut().enumerate().skip(4) {
        *b = (i as u8) ^ (seq as u8);
    }
    f
}

/// Receives one burst, checking each frame against what was offered.
fn rx_once(rx: &mut dyn RxQueue, cache: &mut PoolCache, expect: &mut VecDeque<Vec<u8>>) -> usize {
    let mut b = Batch::new();
    let n = rx.rx_burst(&mut b, cache);
    for p in b.iter_mut() {
        assert!(p.join_tail());
        let want = expect.pop_front().expect("a frame nobody offered");
        assert!(p.data() == want.as_slice(), "a stale or reordered frame");
    }
    cache.free_batch(&mut b);
    rx.burst_done();
    n
}

fn tx_once(tx: &mut dyn TxQueue, cache: &mut PoolCache, seq: &mut u32, n: usize) -> usize {
    let mut b = Batch::new();
    for _ in 0..n {
        let f = frame(*seq);
        *seq += 1;
        let mut p = cache.alloc().unwrap();
        p.room_mut()[..f.len()].copy_from_slice(&f);
        p.set_len(f.len()).unwrap();
        b.push(p);
    }
    let sent = tx.tx_burst(&mut b, cache);
    cache.free_batch(&mut b);
    sent
}

/// Server role: the port and our client, which plays the peer.
struct ServerSide {
    port: Arc<MemifPort>,
    client: Client,
    rx: Box<dyn RxQueue>,
    tx: Box<dyn TxQueue>,
    cache: PoolCache,
    expect: VecDeque<Vec<u8>>,
    seq: u32,
    _pool: Arc<PacketPool>,
    _dir: TempDir,
}

fn server_side(tag: &str) -> ServerSide {
    let dir = TempDir::new("memif-pos", tag);
    let sock = dir.0.join("m.sock");
    let port = MemifPort::open(
        &format!("pos-{tag}"),
        &MemifConfig::new(&sock),
        2048 - nfv_mem::HEADROOM,
    )
    .unwrap();
    let client = Client::connect(
        &ClientConfig {
            log2_ring: LOG2,
            buffer_size: 1024,
            ..ClientConfig::new(SocketPath::File(sock))
        },
        WAIT,
    )
    .unwrap();
    assert!(nfv_testutil::wait_until(WAIT, || port.is_connected()));
    let pool = pool(tag);
    ServerSide {
        rx: port.open_rxq(0),
        tx: port.open_txq(0),
        cache: pool.cache(),
        port,
        client,
        expect: VecDeque::new(),
        seq: 0,
        _pool: pool,
        _dir: dir,
    }
}

/// The server role's rx ring: the client's C2S head.
struct ServerRx(ServerSide);
/// The server role's tx ring: the client's S2C head (buffers posted).
struct ServerTx(ServerSide);

impl Under for ServerRx {
    fn ours(&self) -> u16 {
        self.0.client.raw().c2s_tail(0)
    }
    fn set_peer(&mut self, v: u16) {
        self.0.client.raw().set_c2s_head(0, v)
    }
    fn offer(&mut self, k: u16) -> u16 {
        let s = &mut self.0;
        let frames: Vec<Vec<u8>> = (0..k)
            .map(|_| {
                s.seq += 1;
                frame(s.seq)
            })
            .collect();
        assert_eq!(
            s.client.send(0, frames.iter().map(Vec::as_slice)),
            usize::from(k)
        );
        s.expect.extend(frames);
        s.client.raw().c2s_head(0)
    }
    fn burst(&mut self) -> usize {
        let s = &mut self.0;
        rx_once(s.rx.as_mut(), &mut s.cache, &mut s.expect)
    }
    fn settle(&mut self) {
        while self.burst() > 0 {}
        assert!(self.0.expect.is_empty(), "frames offered never came");
    }
    fn bad_head(&self) -> u64 {
        self.0.port.counter("bad_head")
    }
    fn is_rx(&self) -> bool {
        true
    }
}

impl Under for ServerTx {
    fn ours(&self) -> u16 {
        self.0.client.raw().s2c_tail(0)
    }
    fn set_peer(&mut self, v: u16) {
        self.0.client.raw().set_s2c_head(0, v)
    }
    fn offer(&mut self, k: u16) -> u16 {
        // Every slot's buffer is posted (the client's own refill); the
        // head says how many of them are on offer.
        let head = self.ours().wrapping_add(k);
        self.set_peer(head);
        head
    }
    fn burst(&mut self) -> usize {
        let s = &mut self.0;
        tx_once(s.tx.as_mut(), &mut s.cache, &mut s.seq, TX_BURST)
    }
    fn settle(&mut self) {
        // The client takes what was sent and posts every slot again.
        while self.0.client.recv(0, 64, |_| {}) > 0 {}
    }
    fn bad_head(&self) -> u64 {
        self.0.port.counter("bad_head")
    }
    fn is_rx(&self) -> bool {
        false
    }
}

/// Moves `u`'s positions to just before the u16 wrap, `SIZE` at a time.
fn near_the_wrap(u: &mut dyn Under) {
    while u.ours() < u16::MAX - 2 * SIZE {
        u.settle();
        let legit = u.offer(SIZE);
        u.set_peer(legit);
        while u.burst() > 0 {}
    }
    u.settle();
}

#[test]
fn server_role_rx_positions() {
    let mut u = ServerRx(server_side("srx"));
    run_table(&mut u, "server rx");
    near_the_wrap(&mut u);
    run_table(&mut u, "server rx across the wrap");
}

#[test]
fn server_role_tx_positions() {
    let mut u = ServerTx(server_side("stx"));
    run_table(&mut u, "server tx");
    near_the_wrap(&mut u);
    run_table(&mut u, "server tx across the wrap");
    // What was sent arrives whole at the client.
    let _ = u.burst();
    let mut got = 0;
    u.0.client.recv(0, 64, |f| {
        assert_eq!(f.len(), 60);
        got += 1;
    });
    assert!(got > 0);
    assert_eq!(u.0.client.bad_positions(), 0);
}

/// Client role: the port connects to a scripted server, which maps the
/// port's memory and plays the peer by writing straight into its rings.
struct ClientSide {
    port: Arc<MemifPort>,
    rx: Box<dyn RxQueue>,
    tx: Box<dyn TxQueue>,
    cache: PoolCache,
    expect: VecDeque<Vec<u8>>,
    seq: u32,
    base: *mut u8,
    len: usize,
    c2s: usize,
    s2c: usize,
    /// S2C: the tail as the peer last wrote it sanely; C2S: the same.
    tail: u16,
    _listener: Listener,
    _conn: nfv_memif::socket::Conn,
    _pool: Arc<PacketPool>,
    _dir: TempDir,
}

impl Drop for ClientSide {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `client_side`, unmapped once.
        unsafe {
            nix::sys::mman::munmap(std::ptr::NonNull::new(self.base.cast()).unwrap(), self.len)
                .unwrap()
        };
    }
}

fn client_side(tag: &str) -> ClientSide {
    let dir = TempDir::new("memif-pos", tag);
    let sock = dir.0.join("m.sock");
    let listener = Listener::bind(&SocketPath::File(sock.clone())).unwrap();
    let port = MemifPort::open(
        &format!("pos-{tag}"),
        &MemifConfig {
            role: MemifRole::Client,
            ring_size: usize::from(SIZE),
            buffer_size: 1024,
            ..MemifConfig::new(&sock)
        },
        2048 - nfv_mem::HEADROOM,
    )
    .unwrap();
    let conn = listener.accept(WAIT).unwrap().expect("the port never came");
    let offer = |id| {
        (id == 0).then_some(Offer {
            secret: None,
            taken: false,
        })
    };
    let setup =
        nfv_memif::serve::serve(&conn, Limits::default(), "hostile", "h0", offer, WAIT).unwrap();
    assert!(nfv_testutil::wait_until(WAIT, || port.is_connected()));
    let region = &setup.regions[0];
    let len = region.size as usize;
    use nix::sys::mman::{MapFlags, ProtFlags, mmap};
    // SAFETY: a fresh shared mapping of the port's region, ours to read
    // and write as a (hostile) server may; unmapped on drop.
    let base = unsafe {
        mmap(
            None,
            std::num::NonZeroUsize::new(len).unwrap(),
            ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
            MapFlags::MAP_SHARED,
            region.fd.as_fd(),
            0,
        )
        .unwrap()
    };
    let pool = pool(tag);
    let c2s = setup.c2s[0].offset as usize;
    let s2c = setup.s2c[0].offset as usize;
    assert_eq!(setup.s2c[0].log2_size, LOG2);
    ClientSide {
        rx: port.open_rxq(0),
        tx: port.open_txq(0),
        cache: pool.cache(),
        port,
        expect: VecDeque::new(),
        seq: 0,
        base: base.as_ptr().cast(),
        len,
        c2s,
        s2c,
        tail: 0,
        _listener: listener,
        _conn: conn,
        _pool: pool,
        _dir: dir,
    }
}

impl ClientSide {
    fn u16_at(&self, ring: usize, field: std::ops::Range<usize>) -> &AtomicU16 {
        assert!(ring + field.end <= self.len);
        // SAFETY: inside the mapping (checked), 2-aligned (ring headers
        // are 8-aligned, the fields at even offsets).
        unsafe { &*(self.base.add(ring + field.start) as *const AtomicU16) }
    }
    fn desc(&self, ring: usize, slot: u16) -> DescRepr {
        let off = ring + ring::desc_offset(usize::from(slot & (SIZE - 1)));
        // SAFETY: inside the mapping (the ring was placed there).
        let b: [u8; ring::DESC_LEN] = unsafe { std::ptr::read_volatile(self.base.add(off).cast()) };
        DescRepr::parse(&b).unwrap()
    }
    fn set_desc(&self, ring: usize, slot: u16, d: &DescRepr) {
        let off = ring + ring::desc_offset(usize::from(slot & (SIZE - 1)));
        // SAFETY: as in `desc`.
        unsafe { std::ptr::write_volatile(self.base.add(off).cast(), d.emit()) }
    }
}

/// The client role's rx ring: the server's S2C tail (frames filled).
struct ClientRx(ClientSide);
/// The client role's tx ring: the server's C2S tail (slots given back).
struct ClientTx(ClientSide);

impl Under for ClientRx {
    fn ours(&self) -> u16 {
        self.0.tail
    }
    fn set_peer(&mut self, v: u16) {
        self.0.u16_at(self.0.s2c, ring::TAIL).store(v, Release)
    }
    fn offer(&mut self, k: u16) -> u16 {
        let s = &mut self.0;
        let head = s.u16_at(s.s2c, ring::HEAD).load(Acquire);
        assert!(head.wrapping_sub(s.tail) >= k, "the port posted too few");
        for i in 0..k {
            let slot = s.tail.wrapping_add(i);
            s.seq += 1;
            let f = frame(s.seq);
            let mut d = s.desc(s.s2c, slot);
            assert!(d.region == 0 && d.length as usize >= f.len());
            let at = d.offset as usize;
            assert!(at + f.len() <= s.len);
            // SAFETY: inside the mapping (checked).
            unsafe { std::ptr::copy_nonoverlapping(f.as_ptr(), s.base.add(at), f.len()) };
            d.length = f.len() as u32;
            d.next = false;
            s.set_desc(s.s2c, slot, &d);
            s.expect.push_back(f);
        }
        s.tail = s.tail.wrapping_add(k);
        self.set_peer(self.0.tail);
        self.0.tail
    }
    fn burst(&mut self) -> usize {
        let s = &mut self.0;
        rx_once(s.rx.as_mut(), &mut s.cache, &mut s.expect)
    }
    fn settle(&mut self) {
        while self.burst() > 0 {}
        assert!(self.0.expect.is_empty(), "frames offered never came");
    }
    fn bad_head(&self) -> u64 {
        self.0.port.counter("bad_head")
    }
    fn is_rx(&self) -> bool {
        true
    }
}

impl Under for ClientTx {
    fn ours(&self) -> u16 {
        self.0.tail
    }
    fn set_peer(&mut self, v: u16) {
        self.0.u16_at(self.0.c2s, ring::TAIL).store(v, Release)
    }
    fn offer(&mut self, k: u16) -> u16 {
        // The port sends `k` frames (the ring is quiet: all free), the
        // server takes them and gives the slots back.
        let mut sent = 0;
        while sent < usize::from(k) {
            let s = &mut self.0;
            let n = (usize::from(k) - sent).min(32);
            let got = tx_once(s.tx.as_mut(), &mut s.cache, &mut s.seq, n);
            assert_eq!(got, n, "the port could not send into a free ring");
            sent += n;
        }
        let s = &mut self.0;
        assert_eq!(
            s.u16_at(s.c2s, ring::HEAD).load(Acquire),
            s.tail.wrapping_add(k)
        );
        s.tail = s.tail.wrapping_add(k);
        s.tail
    }
    fn burst(&mut self) -> usize {
        let s = &mut self.0;
        tx_once(s.tx.as_mut(), &mut s.cache, &mut s.seq, TX_BURST)
    }
    fn settle(&mut self) {
        // Take everything sent, give every slot back (the port accepts
        // the tail at its next send).
        let head = self.0.u16_at(self.0.c2s, ring::HEAD).load(Acquire);
        self.0.tail = head;
        self.set_peer(head);
    }
    fn bad_head(&self) -> u64 {
        self.0.port.counter("bad_head")
    }
    fn is_rx(&self) -> bool {
        false
    }
}

#[test]
fn client_role_rx_positions() {
    let mut u = ClientRx(client_side("crx"));
    run_table(&mut u, "client rx");
    near_the_wrap(&mut u);
    run_table(&mut u, "client rx across the wrap");
}

#[test]
fn client_role_tx_positions() {
    let mut u = ClientTx(client_side("ctx"));
    run_table(&mut u, "client tx");
    near_the_wrap(&mut u);
    run_table(&mut u, "client tx across the wrap");
}
