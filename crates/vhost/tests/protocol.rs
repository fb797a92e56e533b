//! The port against the `vhost` crate's frontend over real unix sockets,
//! in server and client mode: negotiation, packed rings (served, or
//! refused when turned off), traffic
//! through the port's own queues byte-exact (64 and 1518 B, MRG_RXBUF on
//! and off, 1 and 2 queue pairs), ring positions, shared virtqueues,
//! disconnect + reconnect, and ring fill in the port's gauges.

mod common;

use common::*;
use nfv_mem::{BATCH, Batch};
use nfv_ports::Port;
use nfv_vhost::VhostUserMode::{Client, Server};
use nfv_vhost::{VhostUserPort, features};
use nfv_virtio::layout::{VIRTIO_F_RING_PACKED, VIRTIO_F_VERSION_1, VIRTIO_NET_F_MRG_RXBUF};
use vhost::VhostBackend;
use vhost::vhost_user::{VhostUserFrontend, VhostUserProtocolFeatures};

/// Number of our mappings of the memfd named `name`.
fn mappings(name: &str) -> usize {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let needle = format!("/memfd:{name} ");
    maps.lines().filter(|l| l.contains(&needle)).count()
}

#[test]
fn negotiation_offers_what_is_implemented() {
    let path = sock("neg");
    let port = VhostUserPort::open("neg", &cfg(&path, Server, 4, true)).unwrap();
    let mut fe = connect(&path);
    fe.set_owner().unwrap();
    let offered = fe.get_features().unwrap();
    assert_eq!(
        offered,
        features::offered(true, true, true, nfv_vhost::Offloads::ALL)
    );
    assert_ne!(offered & VIRTIO_F_RING_PACKED, 0, "packed rings offered");
    fe.set_features(offered).unwrap();
    let pf = fe.get_protocol_features().unwrap();
    assert_eq!(
        pf,
        VhostUserProtocolFeatures::MQ
            | VhostUserProtocolFeatures::REPLY_ACK
            | VhostUserProtocolFeatures::LOG_SHMFD
            | VhostUserProtocolFeatures::RARP
            | VhostUserProtocolFeatures::MTU
    );
    fe.set_protocol_features(pf).unwrap();
    // Queue pairs, as DPDK and QEMU read it.
    assert_eq!(fe.get_queue_num().unwrap(), 4);
    wait_status(&port, "features", |s| s.features == offered && s.connected);
    let gauges = port.gauges();
    let get = |k: &str| gauges.text(k).unwrap();
    assert_eq!(get("mode"), "server");
    assert_eq!(gauges.connected, Some(true));
    assert!(get("features").contains("MRG_RXBUF"), "{gauges:?}");
    // Everything offered was acked, packed rings included.
    assert_eq!(get("ring_layout"), "packed");
    assert_eq!(get("queue_pairs"), "0 of 4 enabled");

    let path2 = sock("neg2");
    let p2 = VhostUserPort::open("neg2", &cfg(&path2, Server, 1, false)).unwrap();
    let fe2 = connect(&path2);
    assert_eq!(fe2.get_features().unwrap() & VIRTIO_NET_F_MRG_RXBUF, 0);
    assert_eq!(nfv_ports::TxQueue::max_frame(&*p2.open_txq(0)), 1518);
    assert_eq!(nfv_ports::TxQueue::max_frame(&*port.open_txq(0)), 9000);
}

#[test]
fn ring_packed_is_refused_when_turned_off_and_the_port_stays_up() {
    for mode in [Server, Client] {
        let path = sock(&format!("packed-{mode:?}"));
        let listener = (mode == Client).then(|| listen(&path));
        let no_packed = nfv_vhost::VhostUserConfig {
            packed_ring: false,
            ..cfg(&path, mode, 1, true)
        };
        let mut sw = SwitchSide::open("packed", &no_packed, 1);
        let fresh = || match &listener {
            Some(l) => accept(l),
            None => connect(&path),
        };
        let fe = fresh();
        fe.set_owner().unwrap();
        let offered = fe.get_features().unwrap();
        assert_eq!(offered & VIRTIO_F_RING_PACKED, 0, "not offered");
        // No REPLY_ACK yet: the refusal shows as the connection closing.
        let _ = fe.set_features(offered | VIRTIO_F_RING_PACKED);
        let port = sw.port.clone();
        // (A client-mode port reconnects at once.)
        wait_status(&port, "negotiation error", |s| {
            s.negotiation_errors == 1 && s.disconnects == 1
        });
        assert!(fe.get_features().is_err(), "the connection must be closed");
        assert!(port.status().last_error.contains("RING_PACKED"));
        // The next frontend is served normally.
        let mut g = Guest::setup(fresh(), &format!("packed-{mode:?}"), &GuestOpts::default());
        assert_eq!(g.features & VIRTIO_F_RING_PACKED, 0);
        round_trip(&mut g, &mut sw, 0, 0, 0, &[frame(64, 1), frame(1518, 2)]);
        assert_eq!(port.status().negotiation_errors, 1);
    }
}

/// Packed rings through the port's own queues: MRG_RXBUF on and off, 1
/// and 2 pairs, a ring size that is not a power of two, frames of 64 to
/// 1518 bytes byte-exact; `show ports` says `packed`; GET_VRING_BASE
/// answers with the wrap counter in bit 15, and a ring restarted from it
/// carries on.
#[test]
fn packed_rings_round_trip_byte_exact() {
    for mrg in [true, false] {
        for pairs in [1, 2] {
            for size in [256u16, 300] {
                let tag = format!("pk-{mrg}-{pairs}-{size}");
                let path = sock(&tag);
                let mut sw = SwitchSide::open(&tag, &cfg(&path, Server, pairs, mrg), pairs);
                let fe = connect(&path);
                let offered = fe.get_features().unwrap();
                let f = guest_features(offered) | VIRTIO_F_RING_PACKED;
                let opts = GuestOpts {
                    pairs,
                    size,
                    rx_buf_len: if mrg { 512 } else { 0 },
                    features: Some(f),
                    frame_size: 2048,
                };
                fe.set_owner().unwrap();
                let mut g = Guest::setup(fe, &tag, &opts);
                assert_ne!(g.features & VIRTIO_F_RING_PACKED, 0);
                wait_status(&sw.port, "pairs enabled", |s| s.pairs_enabled == pairs);
                assert_eq!(sw.port.gauges().text("ring_layout").unwrap(), "packed");
                for p in 0..pairs {
                    let frames: Vec<_> = (0..1200)
                        .map(|i| frame([64, 65, 700, 1518][i % 4], (p * 10000 + i) as u32))
                        .collect();
                    for chunk in frames.chunks(200) {
                        round_trip(&mut g, &mut sw, p, p, p, chunk);
                    }
                }
                let st = sw.port.status();
                assert!(st.vrings.iter().all(|v| v.violations() == 0), "{st:#?}");
                assert_eq!((st.protocol_errors, st.ring_errors), (0, 0), "{st:#?}");
                // 1200 chains through the guest TX ring of pair 0.
                let (slot, wrap) = (1200 % size, (1200 / size) % 2 == 0);
                let stop = std::sync::atomic::AtomicBool::new(false);
                std::thread::scope(|s| {
                    let pmd = s.spawn(|| {
                        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                            sw.poll();
                        }
                    });
                    let base = g.fe.get_vring_base(1).unwrap() as u16;
                    assert_eq!(base, nfv_virtio::packed::encode_base(slot, wrap), "{tag}");
                    stop.store(true, std::sync::atomic::Ordering::Relaxed);
                    pmd.join().unwrap();
                });
                // Restart vring 1 where it stopped: traffic carries on.
                let a = g.ring_addrs[1];
                g.fe.set_vring_base(1, nfv_virtio::packed::encode_base(slot, wrap))
                    .unwrap();
                g.fe.set_vring_addr(
                    1,
                    &vhost::VringConfigData {
                        queue_max_size: size,
                        queue_size: size,
                        flags: 0,
                        desc_table_addr: a.desc,
                        used_ring_addr: a.used,
                        avail_ring_addr: a.avail,
                        log_addr: None,
                    },
                )
                .unwrap();
                let kick = vmm_sys_util::eventfd::EventFd::new(libc::EFD_NONBLOCK).unwrap();
                g.fe.set_vring_kick(1, &kick).unwrap();
                let more: Vec<_> = (0..100).map(|i| frame(128, 50000 + i)).collect();
                round_trip(&mut g, &mut sw, 0, 0, 0, &more);
            }
        }
    }
}

/// Every combination of mode, MRG_RXBUF, frame size and queue pairs.
#[test]
fn traffic_round_trips_byte_exact() {
    for mode in [Server, Client] {
        for mrg in [true, false] {
            for pairs in [1, 2] {
                let tag = format!("rt-{mode:?}-{mrg}-{pairs}");
                let path = sock(&tag);
                let listener = (mode == Client).then(|| listen(&path));
                let mut sw = SwitchSide::open(&tag, &cfg(&path, mode, pairs, mrg), pairs);
                let fe = match &listener {
                    Some(l) => accept(l),
                    None => connect(&path),
                };
                let opts = GuestOpts {
                    pairs,
                    // Small buffers make 1518-byte frames span several.
                    rx_buf_len: if mrg { 512 } else { 0 },
                    ..GuestOpts::default()
                };
                let mut g = Guest::setup(fe, &tag, &opts);
                assert_eq!(g.features & VIRTIO_NET_F_MRG_RXBUF != 0, mrg);
                assert_ne!(g.features & VIRTIO_F_VERSION_1, 0);
                wait_status(&sw.port, "pairs enabled", |s| s.pairs_enabled == pairs);
                for p in 0..pairs {
                    for len in [64, 1518] {
                        let frames: Vec<_> = (0..100)
                            .map(|i| frame(len, (p * 1000 + i) as u32))
                            .collect();
                        // PMD p is alone on pair p.
                        round_trip(&mut g, &mut sw, p, p, p, &frames);
                    }
                }
                let st = sw.port.status();
                assert!(st.vrings.iter().all(|v| v.violations() == 0), "{st:#?}");
                assert_eq!((st.protocol_errors, st.ring_errors), (0, 0), "{st:#?}");
            }
        }
    }
}

#[test]
fn more_pmds_than_enabled_pairs_share_a_virtqueue() {
    let path = sock("share");
    let mut sw = SwitchSide::open("share", &cfg(&path, Server, 2, true), 3);
    let opts = GuestOpts {
        pairs: 2,
        ..GuestOpts::default()
    };
    let mut g = Guest::setup(connect(&path), "share", &opts);
    // Three PMDs over two pairs: PMD 2 shares pair 0 with PMD 0.
    round_trip(&mut g, &mut sw, 0, 2, 0, &[frame(64, 7)]);
    round_trip(&mut g, &mut sw, 1, 1, 1, &[frame(64, 8)]);
    // The guest disables pair 1's RX virtqueue: PMD 1 moves to pair 0.
    g.fe.set_vring_enable(2, false).unwrap();
    wait_status(&sw.port, "one pair", |s| s.pairs_enabled == 1);
    round_trip(&mut g, &mut sw, 1, 1, 0, &[frame(100, 9)]);
    // Several PMD threads on one virtqueue at once: nothing lost or torn.
    let port = sw.port.clone();
    let frames: Vec<_> = (0..3000).map(|i| frame(64 + i % 200, i as u32)).collect();
    std::thread::scope(|s| {
        for q in 0..3 {
            let port = port.clone();
            let mine: Vec<_> = frames.iter().skip(q).step_by(3).cloned().collect();
            s.spawn(move || {
                let mut cache = pool(&format!("pmd{q}"), 1024).cache();
                let mut txq = port.open_txq(q);
                let mut sent = 0;
                while sent < mine.len() {
                    let end = (sent + 16).min(mine.len());
                    let mut b = fill(&mut cache, &mine[sent..end]);
                    sent += txq.tx_burst(&mut b, &mut cache);
                    cache.free_batch(&mut b);
                }
            });
        }
        let mut got = Vec::new();
        wait("all frames", || {
            got.extend(g.recv(0));
            got.len() >= frames.len()
        });
        let mut want = frames.clone();
        want.sort();
        got.sort();
        assert!(got == want, "frames lost or changed");
    });
}

#[test]
fn get_vring_base_stops_the_ring_where_it_was() {
    let path = sock("base");
    let mut sw = SwitchSide::open("base", &cfg(&path, Server, 1, false), 1);
    let mut g = Guest::setup(connect(&path), "base", &GuestOpts::default());
    for k in 0..3 {
        let frames: Vec<_> = (0..100).map(|i| frame(64, k * 100 + i)).collect();
        round_trip(&mut g, &mut sw, 0, 0, 0, &frames);
    }
    // Guest TX (vring 1): 300 chains taken; guest RX (vring 0): 300
    // buffers. A PMD keeps polling meanwhile and lets go of vring 1.
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let pmd = s.spawn(|| {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                sw.poll();
            }
        });
        assert_eq!(g.fe.get_vring_base(1).unwrap(), 300);
        assert_eq!(g.fe.get_vring_base(0).unwrap(), 300);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        pmd.join().unwrap();
    });
    assert_eq!(sw.port.status().ack_timeouts, 0);
    // Stopped: nothing moves any more.
    g.send(0, &[frame(64, 1)]);
    for _ in 0..100 {
        assert_eq!(sw.poll(), 0);
    }
    assert_eq!(sw.send(0, &[frame(64, 2)]), 0);
}

/// Ring fill in the port's gauges: "queued" is the backlog the last rx burst found on
/// the guest's TX virtqueue, "guest_rx_free" the receive buffers the last
/// tx burst found posted on its RX virtqueue. The guest here posts its rx
/// buffers once and never drains, and queues tx frames before the switch
/// polls.
#[test]
fn gauges_report_ring_fill_of_both_virtqueues() {
    let path = sock("fill");
    let mut sw = SwitchSide::open("fill", &cfg(&path, Server, 1, false), 1);
    let mut g = Guest::setup(connect(&path), "fill", &GuestOpts::default());
    wait_status(&sw.port, "pair enabled", |s| s.pairs_enabled == 1);
    let port = sw.port.clone();
    let info = |k: &str| -> u64 {
        let g = port.gauges();
        match k {
            "queued" => g.queued,
            _ => g.guest_rx_free,
        }
        .expect(k)
    };
    assert_eq!((info("queued"), info("guest_rx_free")), (0, 0));

    // Switch -> guest: every burst finds what the guest posted minus what
    // earlier bursts used.
    let posted = g.rx[0].outstanding() as u64;
    let burst: Vec<_> = (0..BATCH as u32).map(|i| frame(64, i)).collect();
    let mut used = 0;
    for _ in 0..3 {
        let sent = sw.send(0, &burst) as u64;
        assert_eq!(sent, BATCH as u64, "room for a whole burst");
        assert_eq!(info("guest_rx_free"), posted - used);
        used += sent;
    }
    assert_eq!(
        g.rx[0].outstanding() as u64,
        posted,
        "the guest did not drain"
    );

    // Guest -> switch: more than a burst queued before the first poll; each
    // burst finds what the guest queued minus what earlier bursts took.
    let frames: Vec<_> = (0..(BATCH + 9) as u32).map(|i| frame(64, i)).collect();
    let queued = g.send(0, &frames) as u64;
    assert_eq!(queued, u64::from(g.tx[0].avail_idx()));
    let mut taken = 0;
    while taken < queued {
        let mut b = Batch::new();
        let n = sw.rxq[0].rx_burst(&mut b, &mut sw.cache) as u64;
        sw.cache.free_batch(&mut b);
        assert_eq!(info("queued"), queued - taken);
        assert!(n > 0, "a burst took nothing");
        taken += n;
    }
    sw.poll();
    assert_eq!(info("queued"), 0, "everything taken");
}

#[test]
fn reconnect_resumes_traffic_and_releases_memory() {
    for mode in [Server, Client] {
        let tag = format!("recon-{mode:?}");
        let path = sock(&tag);
        let listener = (mode == Client).then(|| listen(&path));
        let fresh = || match &listener {
            Some(l) => accept(l),
            None => connect(&path),
        };
        let mut sw = SwitchSide::open(&tag, &cfg(&path, mode, 1, true), 1);
        let port = sw.port.clone();
        for round in 0..3u32 {
            let gtag = format!("{tag}-{round}");
            let mut g = Guest::setup(fresh(), &gtag, &GuestOpts::default());
            let frames: Vec<_> = (0..50)
                .map(|i| frame(64 + i, round * 100 + i as u32))
                .collect();
            round_trip(&mut g, &mut sw, 0, 0, 0, &frames);
            // Our mapping and the guest's own.
            assert_eq!(mappings(&format!("guest-{gtag}")), 2);
            drop(g);
            wait_status(&port, "disconnect", |s| s.disconnects == round as u64 + 1);
            // Queues are down: nothing received, nothing sent. (This once
            // received one frame under load, not reproduced since: say
            // which frame and what the port's state was if it comes back.)
            let late = sw.poll_frames();
            assert!(
                late.is_empty(),
                "{mode:?} round {round}: received after the disconnect (length, seed): {:?}; {:#?}",
                late.iter()
                    .map(|f| (
                        f.len(),
                        f.get(14..18)
                            .map(|s| u32::from_be_bytes(s.try_into().unwrap()))
                    ))
                    .collect::<Vec<_>>(),
                port.status()
            );
            let mut b = fill(&mut sw.cache, &[frame(64, 0)]);
            assert_eq!(sw.txq[0].tx_burst(&mut b, &mut sw.cache), 0);
            assert_eq!(b.len(), 1, "unsent packets stay for the datapath to count");
            sw.cache.free_batch(&mut b);
            // The PMD has moved on: the guest's memory is unmapped.
            wait("guest memory released", || {
                sw.poll();
                mappings(&format!("guest-{gtag}")) == 0
            });
        }
        let st = port.status();
        assert!(st.reconnects() >= 2, "{st:#?}");
        let gauges = port.gauges();
        assert!(
            gauges.count("reconnects").is_some_and(|n| n != 0),
            "{gauges:?}"
        );
        drop((sw, port));
        if mode == Server {
            assert!(!path.exists(), "server socket removed on close");
        }
    }
}

#[test]
fn client_mode_waits_for_the_peer() {
    let path = sock("late");
    let mut sw = SwitchSide::open("late", &cfg(&path, Client, 1, true), 1);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(!sw.port.status().connected);
    assert_eq!(sw.poll(), 0);
    // The VNF appears later; the port connects within a retry period.
    let l = listen(&path);
    let mut g = Guest::setup(accept(&l), "late", &GuestOpts::default());
    round_trip(&mut g, &mut sw, 0, 0, 0, &[frame(64, 3)]);
    let mut b = Batch::new();
    assert_eq!(sw.rxq[0].rx_burst(&mut b, &mut sw.cache), 0);
}

/// A guest RX virtqueue that runs out of buffers: the burst retries at
/// most `tx_retries` times and only while a try still delivers, then
/// leaves the rest to the caller (tx_full). With 8 buffers posted and 20
/// frames sent, the first try fills the ring and one more try finds
/// nothing new; with `tx_retries = 0` there is no second try.
#[test]
fn full_guest_rx_ring_is_retried_a_bounded_number_of_times() {
    for (retries, want_tries) in [(8u32, 1u64), (0, 0)] {
        let tag = format!("retry-{retries}");
        let path = sock(&tag);
        let mut c = cfg(&path, Server, 1, false);
        c.tx_retries = retries;
        let mut sw = SwitchSide::open(&tag, &c, 1);
        let opts = GuestOpts {
            size: 8,
            ..GuestOpts::default()
        };
        let mut g = Guest::setup(connect(&path), &tag, &opts);
        wait_status(&sw.port, "pair up", |s| s.pairs_enabled == 1);
        let frames: Vec<_> = (0..20).map(|i| frame(64, i)).collect();
        assert_eq!(sw.send(0, &frames), 8, "tx_retries = {retries}");
        assert_eq!(
            sw.port.status().tx_retries,
            want_tries,
            "tx_retries = {retries}"
        );
        assert_eq!(g.recv(0).len(), 8);
    }
}

/// A VNF that listens but never accepts, its backlog full: the client-mode
/// port keeps retrying without ever blocking in connect, and removing the
/// port (which joins its thread) returns at once.
#[test]
fn client_mode_port_removal_does_not_hang_on_a_peer_that_never_accepts() {
    let path = sock("stuck");
    let _stuck = nfv_testutil::stuck::StuckListener::new(&path, nix::sys::socket::SockType::Stream);
    let port = VhostUserPort::open("stuck", &cfg(&path, Client, 1, true)).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert!(!port.status().connected);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(port);
        let _ = tx.send(());
    });
    assert!(
        rx.recv_timeout(std::time::Duration::from_secs(5)).is_ok(),
        "dropping the port hung (its thread is stuck in connect)"
    );
}

/// A port with `mtu` offers VIRTIO_NET_F_MTU and takes NET_SET_MTU (as
/// QEMU sends it for `host_mtu`) up to its MTU; more, or under 68, is
/// refused with a NACK and counted, the MTU set before stays. Frames to
/// the guest are bounded by MTU + 18. Without `mtu`, no F_MTU.
#[test]
fn net_set_mtu_is_checked_against_the_port_mtu() {
    use nfv_vhost::message::{code, encode};
    use nfv_virtio::layout::VIRTIO_NET_F_MTU;
    use std::io::{Read, Write};
    let path = sock("mtu");
    let port = VhostUserPort::open(
        "mtu",
        &nfv_vhost::VhostUserConfig {
            mtu: Some(1500),
            ..cfg(&path, Server, 1, true)
        },
    )
    .unwrap();
    let mut s = raw_stream(&path);
    let mut ask = |request: u32, payload: &[u8]| -> u64 {
        s.write_all(&encode(request, true, payload)).unwrap();
        let mut reply = [0u8; 20];
        s.read_exact(&mut reply).unwrap();
        u64::from_le_bytes(reply[12..20].try_into().unwrap())
    };
    assert_ne!(ask(code::GET_FEATURES, &[]) & VIRTIO_NET_F_MTU, 0, "F_MTU");
    assert_ne!(
        ask(code::GET_PROTOCOL_FEATURES, &[]) & VhostUserProtocolFeatures::MTU.bits(),
        0
    );
    assert_eq!(ask(code::NET_SET_MTU, &1400u64.to_le_bytes()), 0, "ACK");
    for bad in [1501u64, 9000, 67, 0] {
        assert_eq!(
            ask(code::NET_SET_MTU, &bad.to_le_bytes()),
            1,
            "NACK for {bad}"
        );
    }
    let st = port.status();
    assert_eq!((st.guest_mtu, st.mtu_refused), (1400, 4));
    assert_eq!(port.gauges().text("mtu").as_deref(), Some("1500"));
    assert_eq!(port.open_txq(0).max_frame(), 1518);

    let plain_path = sock("nomtu");
    let plain = VhostUserPort::open("nomtu", &cfg(&plain_path, Server, 1, true)).unwrap();
    assert_eq!(plain.open_txq(0).max_frame(), nfv_vhost::MAX_FRAME_MRG);
    let fe = connect(&plain_path);
    fe.set_owner().unwrap();
    assert_eq!(fe.get_features().unwrap() & VIRTIO_NET_F_MTU, 0);
}
