//! AF_PACKET port against a real veth pair: one end in a network
//! namespace (the peer, driven by raw sockets made inside it), the port
//! on the other. Needs root; otherwise each test prints SKIPPED.

mod common;

use common::*;
use nfv_mem::{Batch, HugepageMode, MemoryConfig, PacketPool};
use nfv_ports::{Port, PortConfig, PortKind};
use nfv_testutil::netns::{Netns, Veth, run};
use std::sync::Arc;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(5);
/// A MAC that is neither end's: frames to it arrive only because the
/// port's socket is promiscuous (on a NIC; veth delivers them anyway).
const OTHER_MAC: [u8; 6] = [0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee];

fn setup(test: &str, prefix: &str) -> Option<(Netns, Veth)> {
    if let Some(why) = nfv_testutil::netns::unavailable() {
        nfv_testutil::skip(test, &why);
        return None;
    }
    let ns = Netns::new(prefix).expect("netns");
    let veth = Veth::into_ns(&ns, "10.77.0.2/24").expect("veth");
    Some((ns, veth))
}

fn open(cfg: &PortConfig) -> Arc<dyn Port> {
    nfv_afpacket::open(cfg).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn frames_from_the_namespace_arrive_on_rx_burst() {
    let Some((ns, veth)) = setup(
        "afpacket::frames_from_the_namespace_arrive_on_rx_burst",
        "nap",
    ) else {
        return;
    };
    // Opening brings the interface up and makes it promiscuous while the
    // port lives.
    run("ip", &["link", "set", &veth.host, "down"]).unwrap();
    let flags = || nfv_netdev::flags(&veth.host).unwrap();
    // The promiscuity count (IFF_PROMISC in the flags shows only what a
    // user set by hand).
    let promiscuity = || {
        let d = run("ip", &["-d", "link", "show", &veth.host]).unwrap();
        let n = d
            .split_whitespace()
            .skip_while(|w| *w != "promiscuity")
            .nth(1);
        n.unwrap_or_else(|| panic!("{d}")).parse::<u32>().unwrap()
    };
    assert_eq!(flags() & libc::IFF_UP, 0);
    assert_eq!(promiscuity(), 0);
    let port = open(&port_config("ap0", &veth.host, 1, 4096));
    assert_ne!(flags() & libc::IFF_UP, 0, "not brought up");
    assert_eq!(promiscuity(), 1, "not promiscuous");
    let mut rxq = port.open_rxq(0);
    let (_pool, mut cache) = pool();
    let peer = RawSocket::in_ns(&ns, &veth.inner, TEST_ETHERTYPE);
    // The peer sees carrier once both ends are up.
    assert!(nfv_testutil::wait_until(WAIT, || {
        ns.run(&["cat", &format!("/sys/class/net/{}/carrier", veth.inner)])
            .is_ok_and(|c| c.trim() == "1")
    }));
    let sizes = [60, 64, 128, 1000, 1514];
    let sent: Vec<Vec<u8>> = (0..300u32)
        .map(|i| frame(OTHER_MAC, i, sizes[i as usize % sizes.len()]))
        .collect();
    for f in &sent {
        peer.send(f);
    }
    let got = rx_n(&mut *rxq, &mut cache, sent.len(), WAIT, is_test_frame);
    assert_eq!(got.len(), sent.len(), "frames received");
    for (g, s) in got.iter().zip(&sent) {
        assert_eq!(g, s, "frame {} differs", seq_of(s));
    }
    assert_eq!(info_u64(&*port, "kernel_drops"), 0);
    assert_eq!(info_u64(&*port, "rx_bad_blocks"), 0);
    assert!(info_u64(&*port, "rx_blocks") > 0);
    drop((rxq, port));
    assert_eq!(
        flags() & libc::IFF_PROMISC,
        0,
        "still promiscuous after close"
    );
}

#[test]
fn tx_burst_frames_arrive_in_the_namespace_and_not_back_on_rx() {
    let Some((ns, veth)) = setup(
        "afpacket::tx_burst_frames_arrive_in_the_namespace_and_not_back_on_rx",
        "nat",
    ) else {
        return;
    };
    let port = open(&port_config("ap0", &veth.host, 1, 4096));
    let mut rxq = port.open_rxq(0);
    let mut txq = port.open_txq(0);
    assert_eq!(txq.max_frame(), 1500 + 18);
    let (_pool, mut cache) = pool();
    let peer = RawSocket::in_ns(&ns, &veth.inner, TEST_ETHERTYPE);
    let sent: Vec<Vec<u8>> = (0..100u32)
        .map(|i| frame(veth.inner_mac, i, 60 + (i as usize * 37) % 1400))
        .collect();
    for chunk in sent.chunks(32) {
        let mut b = batch_of(&mut cache, chunk);
        assert_eq!(txq.tx_burst(&mut b, &mut cache), chunk.len());
        assert!(b.is_empty());
    }
    let got = peer.recv_n(sent.len(), WAIT, is_test_frame);
    assert_eq!(got.len(), sent.len(), "frames seen in the namespace");
    for (g, s) in got.iter().zip(&sent) {
        assert_eq!(g, s, "frame {} differs", seq_of(s));
    }
    // One syscall per burst: 100 frames in 4 bursts.
    assert_eq!(info_u64(&*port, "tx_syscalls"), 4);
    // PACKET_IGNORE_OUTGOING: the port does not receive what it sent.
    let echo = rx_n(
        &mut *rxq,
        &mut cache,
        1,
        Duration::from_millis(100),
        is_test_frame,
    );
    assert!(
        echo.is_empty(),
        "the port received {} of its own frames",
        echo.len()
    );
}

#[test]
fn a_frame_the_kernel_refuses_stays_in_the_batch_and_the_rest_go() {
    let Some((ns, veth)) = setup(
        "afpacket::a_frame_the_kernel_refuses_stays_in_the_batch_and_the_rest_go",
        "nar",
    ) else {
        return;
    };
    let port = open(&port_config("ap0", &veth.host, 1, 4096));
    let mut txq = port.open_txq(0);
    let (_pool, mut cache) = pool();
    let peer = RawSocket::in_ns(&ns, &veth.inner, TEST_ETHERTYPE);
    // 1516 bytes untagged: within max_frame (room for a VLAN tag) but
    // over MTU + 14, so the kernel says EMSGSIZE for it alone.
    let frames = vec![
        frame(veth.inner_mac, 0, 64),
        frame(veth.inner_mac, 1, 1516),
        frame(veth.inner_mac, 2, 64),
    ];
    let mut b = batch_of(&mut cache, &frames);
    assert_eq!(txq.tx_burst(&mut b, &mut cache), 2);
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].len(), 1516);
    cache.free_batch(&mut b);
    let got = peer.recv_n(2, WAIT, is_test_frame);
    assert_eq!(got, vec![frames[0].clone(), frames[2].clone()]);
    assert_eq!(info_u64(&*port, "tx_refused"), 1);
}

#[test]
fn frames_in_the_ring_survive_reopening_the_rx_queue() {
    let Some((ns, veth)) = setup(
        "afpacket::frames_in_the_ring_survive_reopening_the_rx_queue",
        "nao",
    ) else {
        return;
    };
    let port = open(&port_config("ap0", &veth.host, 1, 4096));
    let (_pool, mut cache) = pool();
    let peer = RawSocket::in_ns(&ns, &veth.inner, TEST_ETHERTYPE);
    let sent: Vec<Vec<u8>> = (0..100u32).map(|i| frame(OTHER_MAC, i, 64)).collect();
    for f in &sent {
        peer.send(f);
    }
    // Wait until the block is handed over, then take one burst (32 of the
    // block's frames) and close the queue mid-block.
    let mut rxq = port.open_rxq(0);
    let mut first = Vec::new();
    assert!(nfv_testutil::wait_until(WAIT, || {
        let mut b = Batch::new();
        rxq.rx_burst(&mut b, &mut cache);
        for p in b.drain(..) {
            if is_test_frame(p.data()) {
                first.push(p.data().to_vec());
            }
            cache.free(p);
        }
        !first.is_empty()
    }));
    drop(rxq);
    // A second queue opened while one holds the ring gets nothing.
    let mut rxq = port.open_rxq(0);
    let mut dup = port.open_rxq(0);
    let rest = rx_n(
        &mut *rxq,
        &mut cache,
        sent.len() - first.len(),
        WAIT,
        is_test_frame,
    );
    let mut b = Batch::new();
    assert_eq!(dup.rx_burst(&mut b, &mut cache), 0);
    first.extend(rest);
    assert_eq!(first, sent);
}

#[test]
fn flows_are_spread_over_rx_queues_by_fanout() {
    let Some((ns, veth)) = setup("afpacket::flows_are_spread_over_rx_queues_by_fanout", "naf")
    else {
        return;
    };
    let port = open(&port_config("ap0", &veth.host, 2, 1024));
    assert!(info(&*port, "rx_fanout").starts_with("hash, group "));
    let mut qs = [port.open_rxq(0), port.open_rxq(1)];
    let (_pool, mut cache) = pool();
    let peer = RawSocket::in_ns(&ns, &veth.inner, 0x0800);
    // IPv4/UDP frames of 64 flows (source ports), dst port 4242.
    let is_ours = |f: &[u8]| f.len() >= 38 && f[12..14] == [8, 0] && f[36..38] == [0x10, 0x92];
    let mut sent = 0;
    for flow in 0..64u16 {
        for _ in 0..4 {
            peer.send(&udp_frame(OTHER_MAC, 1000 + flow, 4242));
            sent += 1;
        }
    }
    let mut per_q = [0usize; 2];
    let ok = nfv_testutil::wait_until(WAIT, || {
        for (i, q) in qs.iter_mut().enumerate() {
            let got = rx_n(
                &mut **q,
                &mut cache,
                usize::MAX,
                Duration::from_millis(5),
                is_ours,
            );
            per_q[i] += got.len();
        }
        per_q[0] + per_q[1] >= sent
    });
    assert!(ok, "received {per_q:?} of {sent}");
    assert_eq!(per_q[0] + per_q[1], sent);
    assert!(
        per_q[0] > 0 && per_q[1] > 0,
        "fanout left a queue empty: {per_q:?}"
    );
}

fn udp_frame(dst: [u8; 6], sport: u16, dport: u16) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst);
    f.extend_from_slice(&[0x02, 0x5e, 0, 0, 0, 1]);
    f.extend_from_slice(&[0x08, 0x00]);
    let mut ip = [
        0x45, 0, 0, 46, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 77, 0, 2, 10, 77, 0, 1,
    ];
    let mut sum: u32 = ip
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&[0, 26, 0, 0]);
    f.resize(60, 0xab);
    f
}

#[test]
fn ring_overflow_is_counted_as_kernel_drops() {
    let Some((ns, veth)) = setup("afpacket::ring_overflow_is_counted_as_kernel_drops", "nad")
    else {
        return;
    };
    // The smallest ring: 8 blocks of 16 KiB, about 800 small frames.
    let port = open(&port_config("ap0", &veth.host, 1, 64));
    let (_pool, mut cache) = pool();
    let peer = RawSocket::in_ns(&ns, &veth.inner, TEST_ETHERTYPE);
    let n = 3000;
    for i in 0..n {
        peer.send(&frame(OTHER_MAC, i, 64));
    }
    let mut rxq = port.open_rxq(0);
    let got = rx_n(
        &mut *rxq,
        &mut cache,
        n as usize,
        Duration::from_millis(500),
        is_test_frame,
    );
    let drops = info_u64(&*port, "kernel_drops");
    assert!(drops > 0, "no kernel drops counted");
    assert!(got.len() < n as usize);
    assert!(
        got.len() as u64 + drops >= u64::from(n),
        "received {} + dropped {drops} < sent {n}",
        got.len()
    );
    // The totals keep counting (the kernel resets its own at each read).
    assert_eq!(info_u64(&*port, "kernel_drops"), drops);
    // Frames arrive in order, the dropped ones simply missing.
    assert!(got.windows(2).all(|w| seq_of(&w[0]) < seq_of(&w[1])));
}

#[test]
fn a_missing_interface_is_named() {
    let cfg = port_config("uplink", "nfvnosuch0", 1, 4096);
    let e = nfv_afpacket::open(&cfg)
        .err()
        .expect("opened a missing interface");
    let msg = e.to_string();
    assert!(msg.starts_with("port uplink: "), "{msg}");
    assert!(msg.contains("\"nfvnosuch0\" does not exist"), "{msg}");
}

#[test]
fn bad_configs_are_refused() {
    let mut cfg = port_config("uplink", "lo", 1, 1000);
    let e = nfv_afpacket::open(&cfg).err().unwrap().to_string();
    assert!(
        e.contains("port uplink: ring_size 1000 must be a power of two"),
        "{e}"
    );
    cfg = port_config("uplink", "lo", 65, 4096);
    let e = nfv_afpacket::open(&cfg).err().unwrap().to_string();
    assert!(e.contains("rxqs 65"), "{e}");
    cfg.kind = PortKind::Sink;
    let e = nfv_afpacket::open(&cfg).err().unwrap().to_string();
    assert_eq!(e, "port uplink: not an afpacket port (type sink)");
}

#[test]
fn an_mtu_too_big_for_the_packet_buffers_is_refused() {
    let Some((_ns, veth)) = setup(
        "afpacket::an_mtu_too_big_for_the_packet_buffers_is_refused",
        "nam",
    ) else {
        return;
    };
    run("ip", &["link", "set", &veth.host, "mtu", "9000"]).unwrap();
    let cfg = port_config("jumbo", &veth.host, 1, 64);
    let e = nfv_afpacket::open(&cfg).err().expect("opened").to_string();
    assert!(
        e.starts_with(&format!(
            "port jumbo: interface \"{}\" has MTU 9000, so frames of up to 9018 bytes, but the \
             switch's packet buffers hold 1920 bytes",
            veth.host
        )),
        "{e}"
    );
    assert!(e.contains("mtu 1902"), "{e}");
    // With 16 KiB buffers it fits.
    let port = nfv_afpacket::open_with(&cfg, 16384 - nfv_mem::HEADROOM).unwrap();
    assert_eq!(port.open_txq(0).max_frame(), 9018);
}

#[test]
fn without_cap_net_raw_the_error_says_permission() {
    let Some((_ns, veth)) = setup(
        "afpacket::without_cap_net_raw_the_error_says_permission",
        "nac",
    ) else {
        return;
    };
    let cfg = port_config("uplink", &veth.host, 1, 64);
    let msg = std::thread::spawn(move || {
        drop_all_caps();
        nfv_afpacket::open(&cfg).err().map(|e| e.to_string())
    })
    .join()
    .unwrap()
    .expect("opened without capabilities");
    assert!(msg.starts_with("port uplink: "), "{msg}");
    assert!(msg.contains(&veth.host), "{msg}");
    assert!(msg.contains("permission denied"), "{msg}");
    assert!(msg.contains("CAP_NET_RAW"), "{msg}");
}

/// Offload metadata goes to the kernel in a virtio-net header
/// (`PACKET_VNET_HDR`): a partial checksum is completed (the datagram
/// reaches UDP, where without the header it is a checksum error), and a
/// TCP segment four times the MTU is taken whole (refused as oversize
/// without the header) and reaches the namespace's TCP with good
/// checksums.
#[test]
fn offload_metadata_is_handed_to_the_kernel() {
    use nfv_testutil::offload::{Ends, partial_csum_udp, tso_tcp};
    let Some((ns, veth)) = setup("afpacket::offload_metadata_is_handed_to_the_kernel", "nao")
    else {
        return;
    };
    let port = open(&port_config("ap0", &veth.host, 1, 4096));
    let mut txq = port.open_txq(0);
    let caps = txq.offload_caps();
    assert!(caps.csum && caps.tso4 && caps.tso6, "{caps:?}");
    assert_eq!(txq.max_segment_frame(), 65535);
    // Room for a 4 KiB segment in one packet buffer.
    let pool = PacketPool::new(
        "afpacket-tso",
        &MemoryConfig {
            frame_size: 8192,
            frames: 64,
            hugepages: HugepageMode::Never,
        },
    )
    .unwrap();
    let mut cache = pool.cache();
    let ends = Ends {
        src_mac: [0x02, 0x5e, 0, 0, 0, 1],
        dst_mac: veth.inner_mac,
        src_ip: [10, 77, 0, 1],
        dst_ip: [10, 77, 0, 2],
    };
    let mut send = |frame: &[u8], hdr: Option<[u8; 10]>| -> usize {
        let mut b = batch_of(&mut cache, &[frame.to_vec()]);
        if let Some(h) = hdr {
            assert!(b[0].set_offload(h));
        }
        let sent = txq.tx_burst(&mut b, &mut cache);
        for p in b.drain(..) {
            cache.free(p);
        }
        sent
    };
    let wait_for = |what: &str, f: &dyn Fn() -> bool| {
        assert!(
            nfv_testutil::wait_until(WAIT, f),
            "timed out waiting for {what}"
        );
    };

    let (udp, hdr) = partial_csum_udp(&ends, &[0x5a; 100]);
    let errs = ns.snmp("Udp", "InCsumErrors");
    assert_eq!(send(&udp, None), 1);
    wait_for("the checksum error", &|| {
        ns.snmp("Udp", "InCsumErrors") > errs
    });
    let (errs, no_ports) = (ns.snmp("Udp", "InCsumErrors"), ns.snmp("Udp", "NoPorts"));
    assert_eq!(send(&udp, Some(hdr)), 1);
    wait_for("the datagram", &|| ns.snmp("Udp", "NoPorts") > no_ports);
    assert_eq!(ns.snmp("Udp", "InCsumErrors"), errs);

    let (tcp, hdr) = tso_tcp(&ends, &[0xa5; 4000], 1000);
    assert_eq!(tcp.len(), 4054);
    assert_eq!(
        send(&tcp, None),
        0,
        "an oversize frame without GSO metadata"
    );
    assert_eq!(info_u64(&*port, "tx_refused"), 1);
    let (in_segs, rsts) = (ns.snmp("Tcp", "InSegs"), ns.snmp("Tcp", "OutRsts"));
    let tcp_errs = ns.snmp("Tcp", "InCsumErrors");
    assert_eq!(send(&tcp, Some(hdr)), 1);
    // Nobody listens on port 9: TCP answers with a RST.
    wait_for("the segment", &|| {
        ns.snmp("Tcp", "InSegs") > in_segs && ns.snmp("Tcp", "OutRsts") > rsts
    });
    assert_eq!(ns.snmp("Tcp", "InCsumErrors"), tcp_errs);
    assert_eq!(info_u64(&*port, "tx_gso_frames"), 1);
    assert_eq!(info_u64(&*port, "tx_refused"), 1);
}
