//! The port's queues, packet in and packet out, over an in-process ring
//! as the underlay (no kernel): tunnel A's transmit side feeds a ring
//! whose other end is tunnel B's underlay, or the test itself plays the
//! underlay's other host. The clock is the test's.

use nfv_mem::{Batch, HugepageMode, MemoryConfig, PacketPool, PoolCache};
use nfv_ports::ring::{Inbox, RingPort};
use nfv_ports::{Clock, Port, RxQueue, TxQueue};
use nfv_vxlan::{OUTER_LEN, Underlay, VxlanConfig, VxlanPort};
use nfv_wire::{ArpOperation, ArpPacket, ArpRepr, EthernetAddress, EthernetFrame, Ipv4Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

const A_IP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const B_IP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
const A_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
const B_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0xb];

/// The test's clock, in milliseconds (hz = 1000).
static NOW_MS: AtomicU64 = AtomicU64::new(1_000_000);

fn now() -> u64 {
    NOW_MS.load(Relaxed)
}

fn clock() -> Clock {
    Clock { now, hz: 1000 }
}

fn pool() -> PoolCache {
    PacketPool::new(
        "vxlan-test",
        &MemoryConfig {
            frame_size: 2048,
            frames: 1024,
            hugepages: HugepageMode::Never,
        },
    )
    .unwrap()
    .cache()
}

/// A ring pair: (one end, the other end).
fn ring_pair(name: &str) -> (Arc<dyn Port>, Arc<dyn Port>) {
    let (x, y): (Inbox, Inbox) = (Inbox::default(), Inbox::default());
    let a = RingPort::new(&format!("{name}.a"), 1, 256, x.clone(), y.clone());
    let b = RingPort::new(&format!("{name}.b"), 1, 256, y, x);
    (Arc::new(a), Arc::new(b))
}

fn tunnel(
    name: &str,
    local: (Ipv4Addr, [u8; 6]),
    remote: Ipv4Addr,
    underlay: Arc<dyn Port>,
) -> VxlanPort {
    let cfg = VxlanConfig::new("ring", local.0, remote, 100);
    let under = Underlay {
        port: underlay,
        mac: local.1,
        mtu: 1500,
    };
    VxlanPort::over(name, cfg, under, clock())
}

fn frame(pool: &mut PoolCache, bytes: &[u8]) -> nfv_mem::Packet {
    let mut p = pool.alloc().unwrap();
    p.set_len(bytes.len()).unwrap();
    p.data_mut().copy_from_slice(bytes);
    p
}

/// An inner frame of `len` bytes, its bytes numbered from `seed`.
fn inner(len: usize, seed: u8) -> Vec<u8> {
    let mut f: Vec<u8> = (0..len).map(|i| seed.wrapping_add(i as u8)).collect();
    f[..6].copy_from_slice(&[2, 0, 0, 0, 1, 2]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 1, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f
}

fn arp_frame(arp: &ArpRepr, dst: [u8; 6]) -> Vec<u8> {
    let mut f = vec![0u8; 42];
    let mut eth = EthernetFrame::new_unchecked(&mut f[..]);
    eth.set_dst_addr(EthernetAddress(dst));
    eth.set_src_addr(arp.sha);
    eth.set_ethertype(nfv_wire::EtherType::ARP);
    arp.emit(&mut ArpPacket::new_unchecked(eth.payload_mut()));
    f
}

fn parse_arp(f: &[u8]) -> Option<(EthernetAddress, ArpRepr)> {
    let eth = EthernetFrame::new_checked(f).ok()?;
    let arp = ArpRepr::parse(&ArpPacket::new_checked(eth.payload()).ok()?).ok()?;
    Some((eth.dst_addr(), arp))
}

fn drain(rx: &mut dyn RxQueue, pool: &mut PoolCache) -> Vec<Vec<u8>> {
    let mut b = Batch::new();
    rx.rx_burst(&mut b, pool);
    let out = b.iter().map(|p| p.data().to_vec()).collect();
    pool.free_batch(&mut b);
    rx.burst_done();
    out
}

#[test]
fn frames_cross_the_tunnel_byte_for_byte_once_the_next_hop_answers() {
    let mut pool = pool();
    let (under_a, under_b) = ring_pair("ab");
    let a = tunnel("a", (A_IP, A_MAC), B_IP, under_a);
    let b = tunnel("b", (B_IP, B_MAC), A_IP, under_b);
    let mut a_tx = a.open_txq(0);
    let mut a_rx = a.open_rxq(0);
    let mut b_rx = b.open_rxq(0);

    // No next hop yet: nothing sent, one ARP request on the underlay.
    let mut batch = Batch::new();
    batch.push(frame(&mut pool, &inner(60, 1)));
    assert_eq!(a_tx.tx_burst(&mut batch, &mut pool), 0);
    pool.free_batch(&mut batch);
    // B receives the request, learns nothing it needs, answers it.
    assert!(
        drain(b_rx.as_mut(), &mut pool).is_empty(),
        "ARP is not a tunnel frame"
    );
    assert_eq!(b.gauges().count("arp_replies_sent"), Some(1));
    // A receives the answer and learns B's MAC.
    assert!(drain(a_rx.as_mut(), &mut pool).is_empty());
    assert_eq!(a.gauges().count("arp_learnt"), Some(1));

    for (len, n) in [(14, 1), (60, 5), (1400, 32), (1464, 3)] {
        let sent: Vec<Vec<u8>> = (0..n).map(|i| inner(len, i as u8)).collect();
        let mut batch: Batch = sent.iter().map(|f| frame(&mut pool, f)).collect();
        assert_eq!(a_tx.tx_burst(&mut batch, &mut pool), n, "{len} B");
        assert_eq!(
            drain(b_rx.as_mut(), &mut pool),
            sent,
            "{len} B frames through the tunnel"
        );
    }
    assert_eq!(
        a_tx.max_frame(),
        1464,
        "a 1500-byte underlay MTU less 36 bytes of outer IP/UDP/VXLAN"
    );
    let g = a.gauges();
    assert_eq!(g.count("tx_arp_miss"), Some(1));
    assert_eq!(g.count("arp_requests_sent"), Some(1));
    assert_eq!(g.count("tx_headroom_copies"), Some(0));
}

#[test]
fn arp_requests_are_rate_limited_per_port_across_queues() {
    let mut pool = pool();
    let (under_a, under_b) = ring_pair("rl");
    let a = tunnel("a", (A_IP, A_MAC), B_IP, under_a);
    let mut txqs = [a.open_txq(0), a.open_txq(1)];
    let mut other_end = under_b.open_rxq(0);
    let start = now();
    let mut requests = 0;
    for ms in (0..3000).step_by(100) {
        NOW_MS.store(start + ms, Relaxed);
        for q in txqs.iter_mut() {
            let mut batch = Batch::new();
            batch.push(frame(&mut pool, &inner(60, 0)));
            assert_eq!(q.tx_burst(&mut batch, &mut pool), 0);
            pool.free_batch(&mut batch);
        }
        for f in drain(other_end.as_mut(), &mut pool) {
            let (dst, arp) = parse_arp(&f).expect("only ARP requests on the underlay");
            assert_eq!(dst, EthernetAddress([0xff; 6]));
            assert_eq!(
                (arp.op, arp.sha.0, arp.spa, arp.tpa),
                (ArpOperation::REQUEST, A_MAC, A_IP, B_IP)
            );
            requests += 1;
        }
    }
    assert_eq!(
        requests, 3,
        "one request per second over 3 s of misses on two queues"
    );
    assert_eq!(a.gauges().count("tx_arp_miss"), Some(60));
}

#[test]
fn the_underlay_host_asks_and_answers() {
    let mut pool = pool();
    let (under_a, host_end) = ring_pair("host");
    let a = tunnel("a", (A_IP, A_MAC), B_IP, under_a);
    let mut a_rx = a.open_rxq(0);
    let mut host_tx = host_end.open_txq(0);
    let mut host_rx = host_end.open_rxq(0);
    let send = |tx: &mut Box<dyn TxQueue>, pool: &mut PoolCache, f: Vec<u8>| {
        let mut b = Batch::new();
        b.push(frame(pool, &f));
        assert_eq!(tx.tx_burst(&mut b, pool), 1);
    };
    let ask = |sender: Ipv4Addr, target: Ipv4Addr| ArpRepr {
        op: ArpOperation::REQUEST,
        sha: EthernetAddress(B_MAC),
        spa: sender,
        tha: EthernetAddress([0; 6]),
        tpa: target,
    };
    // Who has A? (from the next hop): answered, and teaches B's MAC.
    send(
        &mut host_tx,
        &mut pool,
        arp_frame(&ask(B_IP, A_IP), [0xff; 6]),
    );
    assert!(drain(a_rx.as_mut(), &mut pool).is_empty());
    let answers = drain(host_rx.as_mut(), &mut pool);
    assert_eq!(answers.len(), 1);
    let (dst, reply) = parse_arp(&answers[0]).unwrap();
    assert_eq!(dst, EthernetAddress(B_MAC));
    assert_eq!(
        (reply.op, reply.sha.0, reply.spa, reply.tha.0, reply.tpa),
        (ArpOperation::REPLY, A_MAC, A_IP, B_MAC, B_IP)
    );
    assert!(a.neighbour().lookup(now()).mac == Some(B_MAC));
    // Who has someone else? Garbage? Neither answered nor learnt from.
    send(
        &mut host_tx,
        &mut pool,
        arp_frame(&ask(B_IP, Ipv4Addr::new(192, 0, 2, 9)), [0xff; 6]),
    );
    let mut short = arp_frame(&ask(B_IP, A_IP), [0xff; 6]);
    short.truncate(30);
    send(&mut host_tx, &mut pool, short);
    assert!(drain(a_rx.as_mut(), &mut pool).is_empty());
    assert!(drain(host_rx.as_mut(), &mut pool).is_empty());
    let g = a.gauges();
    assert_eq!(g.count("arp_replies_sent"), Some(1));
    assert_eq!(g.count("arp_ignored"), Some(2));
    // Other traffic on the underlay (UDP to A's DNS port) is counted, not
    // passed up; so is a broken IPv4 header.
    let mut dns = Vec::new();
    etherparse::PacketBuilder::ethernet2(B_MAC, A_MAC)
        .ipv4(B_IP.octets(), A_IP.octets(), 64)
        .udp(5353, 53)
        .write(&mut dns, &[0; 20])
        .unwrap();
    send(&mut host_tx, &mut pool, dns);
    send(&mut host_tx, &mut pool, inner(60, 3));
    assert!(drain(a_rx.as_mut(), &mut pool).is_empty());
    assert_eq!(a.gauges().count("rx_not_for_tunnel"), Some(1));
    assert_eq!(a.gauges().count("rx_malformed"), Some(1));
}

#[test]
fn a_frame_without_headroom_is_copied_in_front_of_its_headers() {
    let mut pool = pool();
    let (under_a, under_b) = ring_pair("hr");
    let a = tunnel("a", (A_IP, A_MAC), B_IP, under_a);
    let b = tunnel("b", (B_IP, B_MAC), A_IP, under_b);
    a.neighbour().learn(B_MAC, now());
    let mut a_tx = a.open_txq(0);
    let mut b_rx = b.open_rxq(0);
    let bytes = inner(100, 9);
    let mut p = pool.alloc().unwrap();
    // Move the data to the buffer's start: no room in front.
    let room = p.headroom();
    assert!(p.prepend(room).is_some());
    p.set_len(bytes.len()).unwrap();
    p.data_mut().copy_from_slice(&bytes);
    assert!(p.headroom() < OUTER_LEN);
    let mut batch = Batch::new();
    batch.push(p);
    assert_eq!(a_tx.tx_burst(&mut batch, &mut pool), 1);
    assert_eq!(drain(b_rx.as_mut(), &mut pool), vec![bytes]);
    assert_eq!(a.gauges().count("tx_headroom_copies"), Some(1));
}
