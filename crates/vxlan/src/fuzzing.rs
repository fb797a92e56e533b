//! Entry point for the `vxlan_underlay` fuzz target (and the corpus
//! replay test): a tunnel port over a fake underlay (an in-process port
//! whose receive side hands out the frames the input builds and whose
//! transmit side records what the tunnel sends), driven burst by burst as
//! a PMD would, with the port's clock moved by the input.
//!
//! Input (each op; past the end every read is 0, and the run ends): a
//! header byte (bit 0: RFC strictness instead of exact, bit 1: a gateway
//! as the next hop, bits 2-3: ARP ageing of 1 s/10 s/60 s/15 min, bits
//! 4-5: the underlay accepts all, none, or one frame per transmit burst),
//! two bytes of VNI and two of underlay MTU, then ops, one byte each
//! (`op % 6`) with their operands:
//! 0 a raw frame (length, bytes); 1 a tunnel frame as the remote sends
//! it, then mutated field by field (IP options, checksum, fragment bits,
//! addresses, ports, VXLAN flags and VNI, lengths, padding); 2 an ARP
//! packet (operation, sender and target chosen among the next hop, us,
//! 0.0.0.0 and others, then truncated or padded); 3 a receive burst of
//! what was queued; 4 a transmit burst of inner frames (lengths, room in
//! front); 5 the clock moves on.
//!
//! Checks, per receive burst: no panic; `fast_tunnel` accepts only what
//! `classify` accepts, at the same place; the frames the port hands up
//! are exactly the inner frames of the burst's tunnel frames (the fast
//! path's first, in order, then the others); every ARP answer sent is
//! the well-formed reply to a request for our address, one per request;
//! the next hop's MAC after the burst is one a qualifying ARP packet of
//! the burst taught (see `ORDER_KEPT` for what is checked in order). Per
//! transmit burst: with no next hop known nothing but an ARP request goes
//! out; with one, every frame sent reads back (`classify` from the
//! remote's side) as this tunnel's, to the learnt MAC, carrying exactly
//! the inner frame.

use crate::header::{Class, Expect, OUTER_LEN, Template, TunnelHeader, classify, fast_tunnel};
use crate::neigh::State;
use crate::{Underlay, VxlanConfig, VxlanPort};
use nfv_mem::{Batch, HugepageMode, MemoryConfig, PacketPool, PoolCache};
use nfv_ports::{Clock, Port, RxQueue, TxQueue};
use nfv_wire::ethernet::{self, EtherType};
use nfv_wire::vxlan::{Strictness, VxlanPacket};
use nfv_wire::{
    ArpOperation, ArpPacket, ArpRepr, EthernetAddress, EthernetFrame, Ipv4Addr, Ipv4Packet,
    UdpPacket,
};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

const LOCAL: Ipv4Addr = Ipv4Addr::new(172, 31, 1, 100);
const REMOTE: Ipv4Addr = Ipv4Addr::new(172, 31, 1, 1);
const GATEWAY: Ipv4Addr = Ipv4Addr::new(172, 31, 1, 254);
const OTHER: Ipv4Addr = Ipv4Addr::new(10, 9, 8, 7);
const LOCAL_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0x64];
const HOP_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];

/// Whether the port promises the order of the frames its fast path
/// passes over (tunnel frames of an uncommon shape, ARP) within a burst:
/// then those are checked in order (inner frames, ARP answers, the MAC
/// learnt last). It does: the fast path rotates its frames to the front,
/// keeping the others in their order.
const ORDER_KEPT: bool = true;

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
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.u8()).collect()
    }
    fn mac(&mut self) -> [u8; 6] {
        [
            self.u8(),
            self.u8(),
            self.u8(),
            self.u8(),
            self.u8(),
            self.u8(),
        ]
    }
    fn is_empty(&self) -> bool {
        self.at >= self.data.len()
    }
}

thread_local! {
    static NOW_MS: Cell<u64> = const { Cell::new(1_000_000) };
    static POOL: RefCell<Option<(Arc<PacketPool>, PoolCache)>> = const { RefCell::new(None) };
}

fn now() -> u64 {
    NOW_MS.with(Cell::get)
}

fn with_pool<R>(f: impl FnOnce(&mut PoolCache) -> R) -> R {
    POOL.with(|p| {
        let mut p = p.borrow_mut();
        let (_, cache) = p.get_or_insert_with(|| {
            let cfg = MemoryConfig {
                frame_size: 2048,
                frames: 512,
                hugepages: HugepageMode::Never,
            };
            let pool = PacketPool::new("fuzz-vxlan", &cfg).expect("fuzz pool");
            let cache = pool.cache();
            (pool, cache)
        });
        f(cache)
    })
}

/// The fake underlay: frames queued for receive, frames sent, and how
/// many frames each transmit burst takes.
#[derive(Default)]
struct Wire {
    inbox: Mutex<VecDeque<Vec<u8>>>,
    sent: Mutex<Vec<Vec<u8>>>,
    accept: AtomicUsize,
}

struct FakePort(Arc<Wire>);
struct FakeRx(Arc<Wire>);
struct FakeTx(Arc<Wire>);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Port for FakePort {
    fn name(&self) -> &str {
        "fuzz-underlay"
    }
    fn type_name(&self) -> &'static str {
        "fuzz"
    }
    fn n_rxq(&self) -> usize {
        1
    }
    fn open_rxq(&self, _q: usize) -> Box<dyn RxQueue> {
        Box::new(FakeRx(self.0.clone()))
    }
    fn open_txq(&self, _q: usize) -> Box<dyn TxQueue> {
        Box::new(FakeTx(self.0.clone()))
    }
}

impl RxQueue for FakeRx {
    fn rx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        let mut inbox = lock(&self.0.inbox);
        let mut n = 0;
        while !batch.is_full() {
            let Some(f) = inbox.pop_front() else { break };
            let Some(mut p) = pool.alloc() else { break };
            // Frames are built no longer than a buffer.
            if p.set_len(f.len()).is_err() {
                pool.free(p);
                continue;
            }
            p.data_mut().copy_from_slice(&f);
            batch.push(p);
            n += 1;
        }
        n
    }
}

impl TxQueue for FakeTx {
    fn tx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        let n = batch.len().min(self.0.accept.load(Relaxed));
        let mut sent = lock(&self.0.sent);
        for p in batch.drain(..n) {
            sent.push(p.data().to_vec());
            pool.free(p);
        }
        n
    }
}

/// What the run knows of the tunnel.
struct Run {
    port: VxlanPort,
    wire: Arc<Wire>,
    rx: Box<dyn RxQueue>,
    tx: Box<dyn TxQueue>,
    expect: Expect,
    /// The tunnel seen from the remote: what it sends, and how it reads
    /// what we send.
    remote_view: Expect,
    hop: Ipv4Addr,
    vni: u32,
    /// Frames queued for the next receive burst.
    queued: Vec<Vec<u8>>,
}

pub fn underlay_frames(data: &[u8]) {
    let mut b = Bytes { data, at: 0 };
    let mut run = Run::new(&mut b);
    with_pool(|pool| {
        for _ in 0..64 {
            if b.is_empty() {
                break;
            }
            run.op(&mut b, pool);
        }
        run.rx_burst(pool);
    });
}

impl Run {
    /// The tunnel port the input's header byte, VNI and MTU describe,
    /// over a fresh underlay, with the clock reset.
    fn new(b: &mut Bytes) -> Run {
        let h = b.u8();
        let vni = u32::from(b.u16()) % 300;
        let mtu = 576 + usize::from(b.u16() % 1500);
        let mut cfg = VxlanConfig::new("fuzz", LOCAL, REMOTE, vni);
        cfg.strict = h & 1 == 0;
        if h & 2 != 0 {
            cfg.gateway = Some(GATEWAY);
        }
        cfg.arp_ageing_ms = [1_000, 10_000, 60_000, 900_000][usize::from(h >> 2) & 3];
        let wire = Arc::new(Wire::default());
        wire.accept.store(
            match (h >> 4) & 3 {
                1 => 0,
                2 => 1,
                _ => usize::MAX,
            },
            Relaxed,
        );
        NOW_MS.with(|c| c.set(1_000_000));
        let hop = cfg.next_hop();
        let expect = Expect {
            local_ip: LOCAL,
            remote_ip: REMOTE,
            dst_port: cfg.dst_port,
            vni,
            strictness: if cfg.strict {
                Strictness::Exact
            } else {
                Strictness::Rfc
            },
        };
        let remote_view = Expect {
            local_ip: REMOTE,
            remote_ip: LOCAL,
            strictness: Strictness::Exact,
            ..expect
        };
        let underlay = Underlay {
            port: Arc::new(FakePort(wire.clone())),
            mac: LOCAL_MAC,
            mtu,
        };
        let port = VxlanPort::over("fuzz-vxlan", cfg, underlay, Clock { now, hz: 1000 });
        let rx = port.open_rxq(0);
        let tx = port.open_txq(0);
        Run {
            port,
            wire,
            rx,
            tx,
            expect,
            remote_view,
            hop,
            vni,
            queued: Vec::new(),
        }
    }

    /// One op of the input (`op % 6`, see the module doc).
    fn op(&mut self, b: &mut Bytes, pool: &mut PoolCache) {
        match b.u8() % 6 {
            0 => {
                let len = usize::from(b.u16()) % 1600;
                let f = b.bytes(len);
                self.queue(f);
            }
            1 => {
                let f = self.tunnel_frame(b);
                self.queue(f);
            }
            2 => {
                let f = self.arp_frame(b);
                self.queue(f);
            }
            3 => self.rx_burst(pool),
            4 => self.tx_burst(b, pool),
            _ => NOW_MS.with(|c| c.set(c.get() + u64::from(b.u16()) * 16)),
        }
    }

    fn queue(&mut self, f: Vec<u8>) {
        // At most a burst's worth waits: a receive burst takes them all.
        if self.queued.len() < nfv_mem::BATCH {
            self.queued.push(f);
        }
    }

    /// A frame of this tunnel as the remote sends it, then mutated.
    fn tunnel_frame(&self, b: &mut Bytes) -> Vec<u8> {
        let m = b.u16();
        let inner = inner_frame(b, m);
        let mut f = self.remote_outer(inner.len(), m);
        let words = ip_options(&mut f, b, m);
        f.extend_from_slice(&inner);
        let ip_at = ethernet::HEADER_LEN;
        let udp_at = ip_at + 20 + 4 * words;
        mutate_ip(&mut f[ip_at..], b, m);
        mutate_udp(&mut f[udp_at..], b, m);
        self.mutate_vxlan(&mut f[udp_at + 8..], b, m);
        // Checksum again (unless the input wants it wrong).
        if m & 1024 == 0 {
            Ipv4Packet::new_unchecked(&mut f[ip_at..]).fill_checksum();
        }
        damage(&mut f, b, m);
        f
    }

    /// The outer headers the remote puts before an inner frame of
    /// `inner_len` bytes (`m` picks the source port).
    fn remote_outer(&self, inner_len: usize, m: u16) -> Vec<u8> {
        let t = Template::new(&TunnelHeader {
            src_mac: HOP_MAC,
            dst_mac: LOCAL_MAC,
            local_ip: REMOTE,
            remote_ip: LOCAL,
            vni: self.vni,
            dst_port: self.expect.dst_port,
            ttl: 64,
            dont_fragment: true,
            src_ports: (32768, 61000),
        });
        let mut f = vec![0u8; OUTER_LEN];
        t.write(&mut f, inner_len, u32::from(m));
        f
    }

    /// The VXLAN header's flags and VNI, as `m` asks.
    fn mutate_vxlan(&self, vxlan: &mut [u8], b: &mut Bytes, m: u16) {
        let mut v = VxlanPacket::new_unchecked(vxlan);
        if m & 256 != 0 {
            v.set_flags_word([0x0800_0000, 0, 0x0c00_0000, 0x0800_0001][usize::from(b.u8() & 3)]);
        }
        if m & 512 != 0 {
            let vni = match b.u8() & 3 {
                0 => self.vni + 1,
                1 => 0xff_ffff,
                2 => 0,
                _ => u32::from(b.u16()),
            };
            v.set_vni(vni);
        }
    }

    /// An ARP packet on the underlay.
    fn arp_frame(&self, b: &mut Bytes) -> Vec<u8> {
        let m = b.u8();
        let ip = |b: &mut Bytes, hop| {
            [hop, LOCAL, Ipv4Addr::UNSPECIFIED, OTHER][usize::from(b.u8() & 3)]
        };
        let sha = match b.u8() & 3 {
            0 => EthernetAddress(HOP_MAC),
            1 => EthernetAddress([0xff; 6]),
            2 => EthernetAddress([1, 0, 0x5e, 0, 0, 1]),
            _ => EthernetAddress(b.mac()),
        };
        let arp = ArpRepr {
            op: [
                ArpOperation::REQUEST,
                ArpOperation::REPLY,
                ArpOperation(0),
                ArpOperation(8),
            ][usize::from(m & 3)],
            sha,
            spa: ip(b, self.hop),
            tha: EthernetAddress(if m & 4 != 0 { b.mac() } else { [0; 6] }),
            tpa: ip(b, self.hop),
        };
        let mut f = vec![0u8; ethernet::HEADER_LEN + arp.buffer_len()];
        let mut eth = EthernetFrame::new_unchecked(&mut f[..]);
        eth.set_dst_addr(EthernetAddress([0xff; 6]));
        eth.set_src_addr(sha);
        eth.set_ethertype(EtherType::ARP);
        arp.emit(&mut ArpPacket::new_unchecked(eth.payload_mut()));
        if m & 8 != 0 {
            let keep = usize::from(b.u8()) % (f.len() + 1);
            f.truncate(keep);
        }
        if m & 16 != 0 {
            f.extend(std::iter::repeat_n(0, usize::from(b.u8() % 32)));
        }
        if m & 32 != 0 && f.len() > ethernet::HEADER_LEN {
            let at = ethernet::HEADER_LEN + usize::from(b.u8()) % (f.len() - ethernet::HEADER_LEN);
            f[at] = b.u8();
        }
        f
    }

    fn rx_burst(&mut self, pool: &mut PoolCache) {
        let frames = std::mem::take(&mut self.queued);
        lock(&self.wire.inbox).extend(frames.iter().cloned());
        lock(&self.wire.sent).clear();
        let learnt_before = self.port.neighbour().state(now());
        let mut want = self.expected(&frames);
        let mut batch = Batch::new();
        self.rx.rx_burst(&mut batch, pool);
        let got: Vec<Vec<u8>> = batch.iter().map(|p| p.data().to_vec()).collect();
        self.rx.burst_done();
        pool.free_batch(&mut batch);
        check_handed_up(got, &want.fast, &mut want.slow);
        let sent = std::mem::take(&mut *lock(&self.wire.sent));
        let accept = self.wire.accept.load(Relaxed);
        check_answers(&sent, &mut want.replies, accept);
        let after = self.port.neighbour().state(now());
        check_learnt(&want.taught, &learnt_before, &after);
    }

    /// What a receive burst of `frames` should do, read with `classify`.
    fn expected(&self, frames: &[Vec<u8>]) -> Expected {
        let mut want = Expected::default();
        for f in frames {
            let class = classify(f, &self.expect);
            if let Some(len) = fast_tunnel(f, &self.expect) {
                assert_eq!(
                    class,
                    Class::Tunnel {
                        offset: OUTER_LEN,
                        len
                    },
                    "fast_tunnel accepted what classify reads otherwise"
                );
                want.fast.push(f[OUTER_LEN..OUTER_LEN + len].to_vec());
                continue;
            }
            match class {
                Class::Tunnel { offset, len } => {
                    assert!(len >= ethernet::HEADER_LEN && offset + len <= f.len());
                    want.slow.push(f[offset..offset + len].to_vec());
                }
                Class::Arp => {
                    let Some(arp) = parse_arp(f) else { continue };
                    let from_hop = arp.spa == self.hop && arp.sha.is_unicast();
                    if from_hop && (arp.tpa == LOCAL || arp.spa == arp.tpa) {
                        want.taught.push(arp.sha.0);
                    }
                    if arp.op == ArpOperation::REQUEST
                        && arp.tpa == LOCAL
                        && !arp.spa.is_unspecified()
                        && arp.sha.is_unicast()
                    {
                        want.replies.push(arp);
                    }
                }
                Class::Refused(_) => {}
            }
        }
        want
    }

    fn tx_burst(&mut self, b: &mut Bytes, pool: &mut PoolCache) {
        let n = usize::from(b.u8() % 33);
        let max = self.tx.max_frame();
        let mut batch = Batch::new();
        let mut inners = Vec::new();
        for i in 0..n {
            let Some(mut p) = pool.alloc() else { break };
            // Less room in front sometimes (the copy path).
            let front = usize::from(b.u8());
            if front & 1 != 0 {
                let _ = p.prepend(p.headroom().saturating_sub(front >> 1));
                let _ = p.set_len(0);
            }
            // A frame holds its Ethernet header (runts never reach a port).
            let cap = max.min(p.max_len());
            let len = 14 + usize::from(b.u16()) % (cap - 13);
            if p.set_len(len).is_err() {
                pool.free(p);
                continue;
            }
            for (j, x) in p.data_mut().iter_mut().enumerate() {
                *x = (i * 7 + j) as u8;
            }
            inners.push(p.data().to_vec());
            batch.push(p);
        }
        lock(&self.wire.sent).clear();
        let hop = self.port.neighbour().state(now());
        let sent = self.tx.tx_burst(&mut batch, pool);
        pool.free_batch(&mut batch);
        let frames = std::mem::take(&mut *lock(&self.wire.sent));
        let (arp, data): (Vec<_>, Vec<_>) = frames.into_iter().partition(|f| {
            EthernetFrame::new_checked(&f[..]).is_ok_and(|e| e.ethertype() == EtherType::ARP)
        });
        assert!(arp.len() <= 1, "one ARP request per burst at most");
        for r in &arp {
            let a = parse_arp(r).expect("a request parses");
            assert_eq!(
                (a.op, a.sha, a.spa, a.tpa),
                (
                    ArpOperation::REQUEST,
                    EthernetAddress(LOCAL_MAC),
                    LOCAL,
                    self.hop
                ),
                "the request"
            );
        }
        let State::Reachable { mac, .. } = hop else {
            assert_eq!((sent, data.len()), (0, 0), "sent with no next hop");
            return;
        };
        assert_eq!(data.len(), sent, "frames on the wire vs reported");
        for (f, inner) in data.iter().zip(&inners) {
            assert_eq!(
                classify(f, &self.remote_view),
                Class::Tunnel {
                    offset: OUTER_LEN,
                    len: inner.len()
                },
                "an encapsulated frame reads back"
            );
            assert_eq!(fast_tunnel(f, &self.remote_view), Some(inner.len()));
            assert_eq!(&f[OUTER_LEN..], &inner[..], "the inner frame");
            let eth = EthernetFrame::new_checked(&f[..]).expect("a frame");
            assert_eq!(eth.dst_addr(), EthernetAddress(mac), "to the next hop");
            assert_eq!(eth.src_addr(), EthernetAddress(LOCAL_MAC));
        }
    }
}

/// The inner frame of a tunnel frame: length and a seed from the input,
/// IPv4's Ethertype unless `m` says otherwise.
fn inner_frame(b: &mut Bytes, m: u16) -> Vec<u8> {
    let inner_len = usize::from(b.u16()) % 1500;
    let seed = b.u8();
    let mut inner: Vec<u8> = (0..inner_len).map(|i| seed.wrapping_add(i as u8)).collect();
    if inner_len >= 14 && m & 1 == 0 {
        inner[12..14].copy_from_slice(&[0x08, 0x00]);
    }
    inner
}

/// IP options, as `m` asks: the outer headers move back by 4 bytes per
/// word. Returns the words added.
fn ip_options(f: &mut Vec<u8>, b: &mut Bytes, m: u16) -> usize {
    let words = if m & 2 != 0 {
        usize::from(b.u8() % 11)
    } else {
        0
    };
    if words > 0 {
        let at = ethernet::HEADER_LEN + 20;
        // NOPs: the receive side skips options, whatever they say.
        f.splice(at..at, std::iter::repeat_n(1u8, 4 * words));
        let mut ip = Ipv4Packet::new_unchecked(&mut f[ethernet::HEADER_LEN..]);
        ip.set_header_len((20 + 4 * words) as u8);
        ip.set_total_len(ip.total_len() + 4 * words as u16);
    }
    words
}

/// The outer IPv4 header's fragment bits, addresses, length, TTL and
/// protocol, as `m` asks.
fn mutate_ip(ip: &mut [u8], b: &mut Bytes, m: u16) {
    let mut ip = Ipv4Packet::new_unchecked(ip);
    if m & 4 != 0 {
        ip.set_more_frags(b.u8() & 1 != 0);
        ip.set_frag_offset(u16::from(b.u8()) * 8);
    }
    if m & 8 != 0 {
        ip.set_src_addr([REMOTE, OTHER, LOCAL][usize::from(b.u8() % 3)]);
        ip.set_dst_addr([LOCAL, OTHER, REMOTE][usize::from(b.u8() % 3)]);
    }
    if m & 16 != 0 {
        // Lengths off by a signed byte.
        let d = b.u8() as i8 as i32;
        ip.set_total_len((i32::from(ip.total_len()) + d) as u16);
    }
    if m & 32 != 0 {
        ip.set_ttl(b.u8());
        ip.set_protocol(nfv_wire::IpProtocol(b.u8()));
    }
}

/// The UDP header's destination port and length, as `m` asks.
fn mutate_udp(udp: &mut [u8], b: &mut Bytes, m: u16) {
    let mut u = UdpPacket::new_unchecked(udp);
    if m & 64 != 0 {
        let port = match b.u8() % 3 {
            0 => 8472,
            1 => b.u16(),
            _ => 4789,
        };
        u.set_dst_port(port);
    }
    if m & 128 != 0 {
        let d = b.u8() as i8 as i32;
        u.set_len((i32::from(u.len()) + d) as u16);
    }
}

/// The finished frame padded, cut short, a byte changed or the Ethertype
/// replaced, as `m` asks.
fn damage(f: &mut Vec<u8>, b: &mut Bytes, m: u16) {
    if m & 2048 != 0 {
        // Ethernet padding after the IP packet.
        let pad = b.u8() % 64;
        f.extend(std::iter::repeat_n(0, usize::from(pad)));
    }
    if m & 4096 != 0 {
        // Cut short.
        let keep = usize::from(b.u16()) % (f.len() + 1);
        f.truncate(keep);
    }
    if m & 8192 != 0 {
        // One byte anywhere.
        if !f.is_empty() {
            let at = usize::from(b.u16()) % f.len();
            f[at] = b.u8();
        }
    }
    if m & 16384 != 0 && f.len() >= ethernet::HEADER_LEN {
        EthernetFrame::new_unchecked(&mut f[..]).set_ethertype(EtherType(b.u16()));
    }
}

/// What a receive burst should hand up, answer and learn.
#[derive(Default)]
struct Expected {
    /// Inner frames of the tunnel frames the fast path takes, in order.
    fast: Vec<Vec<u8>>,
    /// Inner frames of the other tunnel frames, in order.
    slow: Vec<Vec<u8>>,
    /// ARP requests for our address, to be answered in order.
    replies: Vec<ArpRepr>,
    /// The next hop's MACs that qualifying ARP packets teach, in order.
    taught: Vec<[u8; 6]>,
}

/// The frames handed up (`got`) are the fast path's inner frames first,
/// in order, then the others.
fn check_handed_up(mut got: Vec<Vec<u8>>, fast: &[Vec<u8>], slow: &mut [Vec<u8>]) {
    assert!(
        got.len() == fast.len() + slow.len() && got[..fast.len()] == fast[..],
        "the fast path's inner frames do not come first, in order"
    );
    let mut rest = got.split_off(fast.len());
    if !ORDER_KEPT {
        rest.sort();
        slow.sort();
    }
    assert!(
        rest == slow,
        "inner frames handed up differ from the tunnel frames received"
    );
}

/// Every frame `sent` is the well-formed reply to one of `replies`, one
/// per request, as many as the underlay accepts.
fn check_answers(sent: &[Vec<u8>], replies: &mut Vec<ArpRepr>, accept: usize) {
    assert_eq!(sent.len(), replies.len().min(accept), "ARP answers sent");
    for (i, s) in sent.iter().enumerate() {
        let eth = EthernetFrame::new_checked(&s[..]).expect("an answer is a frame");
        assert_eq!(eth.src_addr(), EthernetAddress(LOCAL_MAC));
        assert_eq!(eth.ethertype(), EtherType::ARP);
        let a = parse_arp(s).expect("an answer parses");
        // The request answered: the next in order, or any not yet
        // answered.
        let k = if ORDER_KEPT {
            Some(0)
        } else {
            replies
                .iter()
                .position(|r| r.reply(EthernetAddress(LOCAL_MAC)) == a)
        };
        let Some(req) = k.map(|k| replies.remove(k)) else {
            panic!("answer {i} ({a:?}) to no request of the burst");
        };
        assert_eq!(eth.dst_addr(), req.sha, "answer to the asker");
        assert_eq!(s.len(), ethernet::HEADER_LEN + req.buffer_len());
        assert_eq!(a, req.reply(EthernetAddress(LOCAL_MAC)), "the answer");
    }
}

/// The next hop's entry `after` the burst holds a MAC the burst `taught`,
/// or, taught nothing, is in the same state as `before`.
fn check_learnt(taught: &[[u8; 6]], before: &State, after: &State) {
    let learnt = if ORDER_KEPT {
        taught.last().copied()
    } else {
        taught.first().copied()
    };
    match learnt {
        Some(mac) => assert!(
            matches!(after, State::Reachable { mac: m, .. }
                if *m == mac || !ORDER_KEPT && taught.contains(m)),
            "taught {taught:?}, entry {after:?}"
        ),
        None => assert_eq!(
            std::mem::discriminant(after),
            std::mem::discriminant(before),
            "the entry changed with nothing to learn from"
        ),
    }
}

fn parse_arp(f: &[u8]) -> Option<ArpRepr> {
    let eth = EthernetFrame::new_checked(f).ok()?;
    ArpRepr::parse(&ArpPacket::new_checked(eth.payload()).ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seeds `fuzz/corpus/vxlan_underlay` starts from, as op lists:
    /// they reach the fast path, the slow path, every refusal kind, ARP
    /// learning and answering and both transmit paths.
    fn seeds() -> Vec<(&'static str, Vec<u8>)> {
        // Header: exact, no gateway, ageing 15 min, all accepted; VNI 100; MTU 1500.
        let head = |h: u8| {
            let mut v = vec![h];
            v.extend(100u16.to_le_bytes());
            v.extend((1500u16 - 576).to_le_bytes());
            v
        };
        let tunnel = |m: u16, len: u16, extra: &[u8]| {
            let mut v = vec![1];
            v.extend(m.to_le_bytes());
            v.extend(len.to_le_bytes());
            v.push(0x40);
            v.extend(extra);
            v
        };
        // ARP: op byte, sha kind, spa kind, tpa kind.
        let arp = |m: u8, sha: u8, spa: u8, tpa: u8| vec![2, m, sha, spa, tpa];
        let tx = |n: u8| {
            let mut v = vec![4, n];
            for i in 0..n {
                v.extend([2 * i + i % 2, 60 + i, 0]);
            }
            v
        };
        let rx = vec![3u8];
        let cat = |parts: &[&[u8]]| parts.concat();
        vec![
            (
                "tunnel-fast-and-options",
                cat(&[
                    &head(0x0c),
                    &tunnel(0, 60, &[]),
                    &tunnel(2, 64, &[3]),
                    &tunnel(2048, 60, &[13]),
                    &rx,
                ]),
            ),
            (
                "tunnel-refusals",
                cat(&[
                    &head(0x0c),
                    &tunnel(1024, 60, &[]),
                    &tunnel(4, 60, &[1, 0]),
                    &tunnel(8, 60, &[1, 0]),
                    &tunnel(8, 60, &[0, 1]),
                    &tunnel(64, 60, &[0, 0]),
                    &tunnel(256, 60, &[1]),
                    &tunnel(512, 60, &[0]),
                    &tunnel(16, 60, &[0x80]),
                    &tunnel(128, 60, &[0xf0]),
                    &tunnel(4096, 60, &[40, 0]),
                    &rx,
                ]),
            ),
            (
                "arp-learn-answer-then-send",
                cat(&[
                    &head(0x0c),
                    &tx(2),
                    &arp(0, 0, 0, 1),
                    &arp(1, 0, 0, 1),
                    &arp(0, 0, 3, 1),
                    // A stranger's MAC (sha kind 3 reads it next).
                    &[2, 0, 3, 2, 0, 0, 0, 0, 0x77, 3, 1],
                    &rx,
                    &tx(4),
                    &tx(32),
                ]),
            ),
            (
                "arp-ignored-and-ageing",
                cat(&[
                    &head(0x01),
                    &arp(0, 1, 0, 1),
                    &arp(0, 0, 2, 1),
                    &arp(2, 0, 0, 1),
                    &arp(8, 0, 0, 1),
                    &[20],
                    &rx,
                    &arp(1, 0, 0, 0),
                    &rx,
                    &tx(3),
                    &[5, 0xff, 0xff],
                    &tx(3),
                ]),
            ),
            (
                "gateway-rfc-underlay-refuses",
                cat(&[
                    &head(0x1f),
                    &arp(0, 0, 0, 1),
                    &tunnel(256, 60, &[2]),
                    &rx,
                    &tx(5),
                ]),
            ),
            (
                "raw-garbage",
                cat(&[&head(0), &[0, 20, 0], &[0xab; 20], &rx]),
            ),
        ]
    }

    #[test]
    fn seeds_run() {
        for (name, s) in seeds() {
            eprintln!("{name}");
            underlay_frames(&s);
        }
        underlay_frames(&[]);
        underlay_frames(&[0xff; 300]);
    }

    /// Writes the seeds to `fuzz/corpus/vxlan_underlay` when asked
    /// (`NFV_WRITE_SEEDS=1 cargo test -p nfv-vxlan fuzzing`).
    #[test]
    fn write_seeds() {
        if std::env::var_os("NFV_WRITE_SEEDS").is_none() {
            return;
        }
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fuzz/corpus/vxlan_underlay");
        std::fs::create_dir_all(&dir).unwrap();
        for (name, s) in seeds() {
            std::fs::write(dir.join(name), s).unwrap();
        }
    }
}
