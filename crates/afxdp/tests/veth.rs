//! AF_XDP ports on a real veth pair: the port on the host end, a raw
//! AF_PACKET socket on the end inside a namespace as the other side of
//! the wire. Needs root (namespaces, XDP); otherwise each test reports
//! SKIPPED. After every port is dropped, no XDP program may remain on the
//! interface.

mod common;

use common::{Env, RawSocket, frame, host_mac, info, pool, test_seq, xdp_on};
use nfv_afxdp::OpenError;
use nfv_afxdp::{AfXdpConfig, XdpBindMode};
use nfv_mem::{Batch, PoolCache};
use nfv_ports::{PortConfig, PortKind, RxQueue, TxQueue};
use nfv_testutil::rawsock::ETH_P_ALL;
use std::time::{Duration, Instant};

fn cfg(name: &str, iface: &str, mode: XdpBindMode, ring_size: usize) -> PortConfig {
    PortConfig {
        name: name.to_string(),
        id: 1,
        rxqs: 1,
        kind: PortKind::typed(AfXdpConfig {
            mode,
            ring_size,
            ..AfXdpConfig::new(iface)
        }),
    }
}

/// Polls `rxq` until `want` test frames arrived or 5 s passed; returns
/// them in arrival order (other frames are freed).
fn receive(rxq: &mut dyn RxQueue, pool: &mut PoolCache, want: usize) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let end = Instant::now() + Duration::from_secs(5);
    while got.len() < want && Instant::now() < end {
        let mut b = Batch::new();
        if rxq.rx_burst(&mut b, pool) == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
        for p in b.drain(..) {
            if test_seq(p.data()).is_some() {
                got.push(p.data().to_vec());
            }
            pool.free(p);
        }
    }
    got
}

/// Sends every frame through `txq`, retrying what does not fit.
fn transmit(txq: &mut dyn TxQueue, pool: &mut PoolCache, frames: &[Vec<u8>]) {
    let end = Instant::now() + Duration::from_secs(5);
    let mut next = 0;
    while next < frames.len() {
        assert!(Instant::now() < end, "tx stuck at frame {next}");
        let mut b = Batch::new();
        for f in frames[next..].iter().take(b.capacity()) {
            let mut p = pool.alloc().expect("pool");
            p.set_len(f.len()).unwrap();
            p.data_mut().copy_from_slice(f);
            b.push(p);
        }
        next += txq.tx_burst(&mut b, pool);
        pool.free_batch(&mut b);
    }
}

/// Frames the namespace side receives until `want` test frames arrived or
/// 5 s passed.
fn receive_in_ns(sock: &RawSocket, want: usize) -> Vec<Vec<u8>> {
    sock.recv_n(want, Duration::from_secs(5), |f| test_seq(f).is_some())
}

fn assert_detached(env: &Env) {
    assert!(
        nfv_testutil::wait_until(Duration::from_secs(2), || xdp_on(&env.veth.host).is_none()),
        "XDP program left on {}: {:?}",
        env.veth.host,
        xdp_on(&env.veth.host)
    );
}

#[test]
fn rx_receives_frames_sent_in_the_namespace() {
    let Some(env) = common::env("afxdp::rx_receives_frames_sent_in_the_namespace") else {
        return;
    };
    let host = &env.veth.host;
    let port = nfv_afxdp::open(&cfg("xrx", host, XdpBindMode::Copy, 2048)).unwrap();
    assert!(
        xdp_on(host).is_some(),
        "no XDP program on {host} while the port is open"
    );
    assert_eq!(info(&port, "xdp_mode"), "native");
    assert_eq!(info(&port, "bind_mode"), "copy");
    let mut rxq = port.open_rxq(0);
    let mut pool = pool();
    let sock = RawSocket::in_ns(&env.ns, &env.veth.inner, ETH_P_ALL);
    let frames: Vec<Vec<u8>> = (0..100u32)
        .map(|i| {
            frame(
                host_mac(host),
                env.veth.inner_mac,
                i,
                60 + (i as usize * 97) % 1455,
            )
        })
        .collect();
    for f in &frames {
        sock.send(f);
    }
    let got = receive(&mut *rxq, &mut pool, frames.len());
    assert_eq!(
        got.len(),
        frames.len(),
        "received {} of {}",
        got.len(),
        frames.len()
    );
    assert!(got == frames, "payloads differ");
    for key in [
        "rx_dropped",
        "rx_invalid_descs",
        "rx_ring_full",
        "rx_fill_ring_empty_descs",
        "tx_invalid_descs",
    ] {
        assert_eq!(info(&port, key), "0", "{key}");
    }
    drop(rxq);
    drop(port);
    assert_detached(&env);
}

#[test]
fn tx_frames_arrive_in_the_namespace() {
    let Some(env) = common::env("afxdp::tx_frames_arrive_in_the_namespace") else {
        return;
    };
    let host = &env.veth.host;
    let port = nfv_afxdp::open(&cfg("xtx", host, XdpBindMode::Auto, 2048)).unwrap();
    // veth has no zero-copy: auto falls back to copy.
    assert_eq!(info(&port, "bind_mode"), "copy");
    let sock = RawSocket::in_ns(&env.ns, &env.veth.inner, ETH_P_ALL);
    let mut txq = port.open_txq(0);
    assert_eq!(
        txq.max_frame(),
        1518,
        "MTU 1500 + Ethernet header + VLAN tag"
    );
    let mut pool = pool();
    let frames: Vec<Vec<u8>> = (0..300u32)
        .map(|i| {
            frame(
                env.veth.inner_mac,
                host_mac(host),
                i,
                60 + (i as usize * 53) % 1455,
            )
        })
        .collect();
    transmit(&mut *txq, &mut pool, &frames);
    let got = receive_in_ns(&sock, frames.len());
    assert_eq!(
        got.len(),
        frames.len(),
        "namespace got {} of {}",
        got.len(),
        frames.len()
    );
    assert!(got == frames, "payloads differ");
    assert_eq!(info(&port, "tx_invalid_descs"), "0");
    assert!(info(&port, "tx_kicks").parse::<u64>().unwrap() > 0);
    drop(txq);
    drop(port);
    assert_detached(&env);
}

#[test]
fn tx_queues_sharing_one_socket_lose_nothing() {
    let Some(env) = common::env("afxdp::tx_queues_sharing_one_socket_lose_nothing") else {
        return;
    };
    let host = env.veth.host.clone();
    let port = nfv_afxdp::open(&cfg("xsh", &host, XdpBindMode::Copy, 256)).unwrap();
    let sock = RawSocket::in_ns(&env.ns, &env.veth.inner, ETH_P_ALL);
    let mac = host_mac(&host);
    let inner = env.veth.inner_mac;
    // Two PMD threads, one socket: both go through the spin lock. 800
    // frames through 256 tx frames, and fewer than the namespace end's
    // backlog (1,000) holds if its softirq falls behind.
    let txqs: Vec<_> = (0..2).map(|t| port.open_txq(t)).collect();
    assert_eq!(info(&port, "tx_queues"), "2");
    let senders: Vec<_> = txqs
        .into_iter()
        .zip(0u32..)
        .map(|(mut txq, t)| {
            std::thread::spawn(move || {
                let mut pool = pool();
                let frames: Vec<Vec<u8>> = (0..400)
                    .map(|i| frame(inner, mac, t << 16 | i, 64))
                    .collect();
                transmit(&mut *txq, &mut pool, &frames);
            })
        })
        .collect();
    for s in senders {
        s.join().unwrap();
    }
    let mut seqs: Vec<u32> = receive_in_ns(&sock, 800)
        .iter()
        .filter_map(|f| test_seq(f))
        .collect();
    seqs.sort_unstable();
    let want: Vec<u32> = (0..2u32)
        .flat_map(|t| (0..400).map(move |i| t << 16 | i))
        .collect();
    assert!(seqs == want, "got {} frames of 800", seqs.len());
    drop(port);
    assert_detached(&env);
}

#[test]
fn rx_frames_are_recycled_through_a_small_ring() {
    let Some(env) = common::env("afxdp::rx_frames_are_recycled_through_a_small_ring") else {
        return;
    };
    let host = &env.veth.host;
    // 64 rx frames; 640 frames in bursts of 32 go round the ring ten times.
    let port = nfv_afxdp::open(&cfg("xrc", host, XdpBindMode::Copy, 64)).unwrap();
    let mut rxq = port.open_rxq(0);
    let mut pool = pool();
    let sock = RawSocket::in_ns(&env.ns, &env.veth.inner, ETH_P_ALL);
    let (dst, src) = (host_mac(host), env.veth.inner_mac);
    for round in 0..20u32 {
        let frames: Vec<Vec<u8>> = (0..32)
            .map(|i| frame(dst, src, round * 32 + i, 64))
            .collect();
        for f in &frames {
            sock.send(f);
        }
        let got = receive(&mut *rxq, &mut pool, frames.len());
        assert!(got == frames, "round {round}: got {} of 32", got.len());
    }
    assert_eq!(info(&port, "rx_fill_ring_empty_descs"), "0");
    assert_eq!(info(&port, "rx_dropped"), "0");
    drop(rxq);
    drop(port);
    assert_detached(&env);
}

#[test]
fn missing_interface_is_named() {
    let e = nfv_afxdp::open(&cfg("xmiss", "nfv-nosuch0", XdpBindMode::Auto, 2048))
        .err()
        .expect("no such interface");
    let msg = e.to_string();
    eprintln!("{msg}");
    assert!(
        msg.contains("port xmiss") && msg.contains("\"nfv-nosuch0\" does not exist"),
        "{msg}"
    );
}

#[test]
fn second_port_on_the_interface_is_refused_and_the_first_keeps_working() {
    let Some(env) =
        common::env("afxdp::second_port_on_the_interface_is_refused_and_the_first_keeps_working")
    else {
        return;
    };
    let host = &env.veth.host;
    let first = nfv_afxdp::open(&cfg("xa", host, XdpBindMode::Copy, 2048)).unwrap();
    let e = nfv_afxdp::open(&cfg("xb", host, XdpBindMode::Copy, 2048))
        .err()
        .expect("second port on the same interface");
    assert!(matches!(e, OpenError::AlreadyAttached { .. }), "{e:?}");
    let msg = e.to_string();
    eprintln!("{msg}");
    assert!(msg.contains("port xb"), "{msg}");
    assert!(msg.contains("already has an XDP program"), "{msg}");
    assert!(msg.contains(&format!("ip link show dev {host}")), "{msg}");
    // The failed open left the first port's program in place.
    assert!(xdp_on(host).is_some());
    let mut rxq = first.open_rxq(0);
    let mut pool = pool();
    let sock = RawSocket::in_ns(&env.ns, &env.veth.inner, ETH_P_ALL);
    let frames: Vec<Vec<u8>> = (0..10)
        .map(|i| frame(host_mac(host), env.veth.inner_mac, i, 64))
        .collect();
    for f in &frames {
        sock.send(f);
    }
    assert!(receive(&mut *rxq, &mut pool, 10) == frames);
    drop(rxq);
    drop(first);
    assert_detached(&env);
}

#[test]
fn mtu_too_big_for_the_frames_names_the_mtu_that_fits() {
    let Some(env) = common::env("afxdp::mtu_too_big_for_the_frames_names_the_mtu_that_fits") else {
        return;
    };
    let host = &env.veth.host;
    nfv_testutil::netns::run("ip", &["link", "set", "dev", host, "mtu", "9000"]).unwrap();
    let e = nfv_afxdp::open(&cfg("xmtu", host, XdpBindMode::Auto, 2048))
        .err()
        .expect("MTU 9000 with 2048-byte frames");
    let msg = e.to_string();
    eprintln!("{msg}");
    assert!(
        msg.contains("port xmtu") && msg.contains(host.as_str()),
        "{msg}"
    );
    assert!(msg.contains("MTU 9000"), "{msg}");
    assert!(msg.contains("mtu 1774"), "{msg}");
    assert!(xdp_on(host).is_none());
    // And the MTU it names does fit.
    nfv_testutil::netns::run("ip", &["link", "set", "dev", host, "mtu", "1774"]).unwrap();
    let port = nfv_afxdp::open(&cfg("xmtu", host, XdpBindMode::Auto, 2048)).unwrap();
    assert_eq!(port.open_txq(0).max_frame(), 1792);
    drop(port);
    assert_detached(&env);
}

#[test]
fn zero_copy_on_veth_says_the_driver_cannot() {
    let Some(env) = common::env("afxdp::zero_copy_on_veth_says_the_driver_cannot") else {
        return;
    };
    let host = &env.veth.host;
    let e = nfv_afxdp::open(&cfg("xzc", host, XdpBindMode::ZeroCopy, 2048))
        .err()
        .expect("veth has no zero-copy");
    assert!(matches!(e, OpenError::ZeroCopyUnsupported { .. }), "{e:?}");
    let msg = e.to_string();
    eprintln!("{msg}");
    assert!(
        msg.contains("port xzc") && msg.contains("zero-copy"),
        "{msg}"
    );
    assert!(msg.contains("\"copy\""), "{msg}");
    assert_detached(&env);
}

#[test]
fn no_capabilities_is_a_permission_error() {
    let Some(env) = common::env("afxdp::no_capabilities_is_a_permission_error") else {
        return;
    };
    let host = env.veth.host.clone();
    // Capabilities are per thread: drop them all in a thread of our own.
    let r = std::thread::spawn(move || {
        nfv_testutil::netns::drop_all_capabilities();
        nfv_afxdp::open(&cfg("xperm", &host, XdpBindMode::Auto, 2048)).err()
    })
    .join()
    .unwrap();
    let e = r.expect("open without capabilities");
    assert!(matches!(e, OpenError::Permission { .. }), "{e:?}");
    let msg = e.to_string();
    eprintln!("{msg}");
    assert!(
        msg.contains("port xperm") && msg.contains("permission denied"),
        "{msg}"
    );
    assert!(
        msg.contains("CAP_BPF") && msg.contains("CAP_NET_ADMIN"),
        "{msg}"
    );
    assert_detached(&env);
}

#[test]
fn interface_deleted_under_an_open_port_is_survived() {
    let Some(env) = common::env("afxdp::interface_deleted_under_an_open_port_is_survived") else {
        return;
    };
    let host = env.veth.host.clone();
    let port = nfv_afxdp::open(&cfg("xdel", &host, XdpBindMode::Copy, 64)).unwrap();
    let mut rxq = port.open_rxq(0);
    let mut txq = port.open_txq(0);
    let mut pool = pool();
    nfv_testutil::netns::run("ip", &["link", "del", &host]).unwrap();
    // Frames the namespace sent before the delete (IPv6 neighbour
    // discovery, say) may still sit in the rx ring; nothing more can come.
    let mut leftovers = 0;
    for _ in 0..100 {
        let mut b = Batch::new();
        leftovers += rxq.rx_burst(&mut b, &mut pool);
        pool.free_batch(&mut b);
        assert!(
            leftovers <= 64,
            "{leftovers} frames from a deleted interface"
        );
        pool.alloc_into(&mut b, 32);
        for p in b.iter_mut() {
            p.set_len(64).unwrap();
        }
        txq.tx_burst(&mut b, &mut pool);
        pool.free_batch(&mut b);
    }
    let _ = port.gauges();
    drop(rxq);
    drop(txq);
    drop(port);
}

/// A bridge (no native XDP, no ports) in the test's namespace, removed on
/// drop.
struct Bridge(String);

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = nfv_testutil::netns::run("ip", &["link", "del", &self.0]);
    }
}

#[test]
fn driver_without_native_xdp_gets_generic_mode_and_tx_frames_recycle() {
    if let Some(why) = nfv_testutil::netns::unavailable() {
        nfv_testutil::skip(
            "afxdp::driver_without_native_xdp_gets_generic_mode_and_tx_frames_recycle",
            &why,
        );
        return;
    }
    let name = nfv_testutil::netns::unique_name("nvb");
    nfv_testutil::netns::run("ip", &["link", "add", &name, "type", "bridge"]).unwrap();
    let br = Bridge(name);
    let port = nfv_afxdp::open(&cfg("xdum", &br.0, XdpBindMode::Auto, 64)).unwrap();
    assert_eq!(info(&port, "xdp_mode"), "generic");
    assert_eq!(info(&port, "bind_mode"), "copy");
    assert!(xdp_on(&br.0).unwrap().contains("xdpgeneric"));
    // 64 tx frames, 2,000 frames sent (the bridge has no ports and drops
    // them): completions must bring the frames back.
    let mut txq = port.open_txq(0);
    let mut pool = pool();
    let frames: Vec<Vec<u8>> = (0..2000).map(|i| frame([2; 6], [4; 6], i, 64)).collect();
    transmit(&mut *txq, &mut pool, &frames);
    drop(txq);
    drop(port);
    assert!(
        nfv_testutil::wait_until(Duration::from_secs(2), || xdp_on(&br.0).is_none()),
        "XDP program left on {}",
        br.0
    );
}
