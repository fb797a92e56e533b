//! TAP port against the kernel: creating and attaching, the errors a user
//! hits, and the host stack reached through the TAP (ARP and ping
//! answered by the test through rx_burst/tx_burst). Needs root;
//! otherwise each test prints SKIPPED.

use nfv_mem::{Batch, HugepageMode, MemoryConfig, PacketPool, PoolCache};
use nfv_ports::{Port, PortConfig, PortKind, RxQueue, TxQueue};
use nfv_tap::TapConfig;
use nfv_testutil::netns::{Netns, run, unique_name};
use nfv_testutil::offload::inet_checksum;
use std::sync::Arc;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(5);
/// The address and MAC the test answers for, behind the TAP.
const PEER_MAC: [u8; 6] = [0x02, 0x77, 0, 0, 0, 0x02];
const PEER_IP: [u8; 4] = [10, 78, 0, 2];

fn can_run(test: &str) -> bool {
    if let Some(why) = nfv_testutil::netns::unavailable() {
        nfv_testutil::skip(test, &why);
        return false;
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        nfv_testutil::skip(test, "/dev/net/tun does not exist");
        return false;
    }
    true
}

fn cfg(name: &str, iface: &str, rxqs: usize) -> PortConfig {
    PortConfig {
        name: name.into(),
        id: 1,
        rxqs,
        kind: PortKind::typed(TapConfig {
            iface: iface.into(),
        }),
    }
}

fn exists(iface: &str) -> bool {
    nfv_netdev::index(iface).is_ok()
}

fn info(port: &dyn Port, key: &str) -> String {
    port.gauges()
        .text(key)
        .unwrap_or_else(|| panic!("no gauge {key}"))
}

fn pool() -> (Arc<PacketPool>, PoolCache) {
    let pool = PacketPool::new(
        "tap-test",
        &MemoryConfig {
            frame_size: 2048,
            frames: 4096,
            hugepages: HugepageMode::Never,
        },
    )
    .unwrap();
    let cache = pool.cache();
    (pool, cache)
}

/// Removes an interface made by a test on drop.
struct LinkGuard(String);

impl Drop for LinkGuard {
    fn drop(&mut self) {
        let _ = run("ip", &["link", "del", &self.0]);
    }
}

#[test]
fn a_missing_tap_is_created_and_removed_on_close() {
    if !can_run("tap::a_missing_tap_is_created_and_removed_on_close") {
        return;
    }
    let name = unique_name("nvtc");
    assert!(!exists(&name));
    let port = nfv_tap::open(&cfg("host0", &name, 1)).unwrap_or_else(|e| panic!("{e}"));
    assert!(exists(&name));
    assert!(
        nfv_netdev::flags(&name).unwrap() & libc::IFF_UP != 0,
        "not up"
    );
    assert!(info(&*port, "created").starts_with("yes"));
    assert!(info(&*port, "syscalls").contains("per frame"));
    assert_eq!(info(&*port, "max_frame"), "1518");
    assert!(info(&*port, "kernel_drops").parse::<u64>().is_ok());
    let rxq = port.open_rxq(0);
    let txq = port.open_txq(0);
    assert_eq!(txq.max_frame(), 1518);
    drop(port);
    // The queues still hold the descriptors: the interface stays.
    assert!(exists(&name));
    drop((rxq, txq));
    assert!(
        nfv_testutil::wait_until(WAIT, || !exists(&name)),
        "TAP left behind"
    );
}

#[test]
fn an_existing_persistent_tap_is_attached_and_left_in_place() {
    if !can_run("tap::an_existing_persistent_tap_is_attached_and_left_in_place") {
        return;
    }
    let name = unique_name("nvtp");
    run("ip", &["tuntap", "add", "dev", &name, "mode", "tap"]).unwrap();
    let _guard = LinkGuard(name.clone());
    let port = nfv_tap::open(&cfg("host0", &name, 1)).unwrap_or_else(|e| panic!("{e}"));
    assert!(info(&*port, "created").starts_with("no"));
    drop(port);
    std::thread::sleep(Duration::from_millis(50));
    assert!(exists(&name), "the user's TAP was removed");
}

#[test]
fn names_of_other_interfaces_are_refused() {
    if !can_run("tap::names_of_other_interfaces_are_refused") {
        return;
    }
    let veth = unique_name("nvtv");
    let peer = unique_name("nvtw");
    run(
        "ip",
        &["link", "add", &veth, "type", "veth", "peer", "name", &peer],
    )
    .unwrap();
    let _g1 = LinkGuard(veth.clone());
    let e = nfv_tap::open(&cfg("host0", &veth, 1))
        .err()
        .expect("opened a veth")
        .to_string();
    assert_eq!(
        e,
        format!(
            "port host0: interface \"{veth}\" already exists and is a veth interface, not a \
             TAP; choose another name or remove it"
        )
    );
    let tun = unique_name("nvtt");
    run("ip", &["tuntap", "add", "dev", &tun, "mode", "tun"]).unwrap();
    let _g2 = LinkGuard(tun.clone());
    let e = nfv_tap::open(&cfg("host0", &tun, 1))
        .err()
        .expect("opened a tun")
        .to_string();
    assert!(e.contains("is a TUN (layer 3) device, not a TAP"), "{e}");
    let e = nfv_tap::open(&cfg("host0", "lo", 1))
        .err()
        .expect("opened lo")
        .to_string();
    assert!(e.contains("\"lo\" already exists"), "{e}");
}

#[test]
fn a_queue_count_the_existing_tap_cannot_give_is_explained() {
    if !can_run("tap::a_queue_count_the_existing_tap_cannot_give_is_explained") {
        return;
    }
    let name = unique_name("nvtq");
    run("ip", &["tuntap", "add", "dev", &name, "mode", "tap"]).unwrap();
    let _guard = LinkGuard(name.clone());
    let e = nfv_tap::open(&cfg("host0", &name, 2))
        .err()
        .expect("opened")
        .to_string();
    assert!(
        e.starts_with(&format!(
            "port host0: TAP \"{name}\" exists without multi_queue, but the port has rxqs = 2"
        )),
        "{e}"
    );
    assert!(e.contains("mode tap multi_queue"), "{e}");
    // Single queue attaches; a second single-queue attach is busy.
    let _port = nfv_tap::open(&cfg("host0", &name, 1)).unwrap_or_else(|e| panic!("{e}"));
    let e = nfv_tap::open(&cfg("host1", &name, 1))
        .err()
        .expect("attached twice")
        .to_string();
    assert!(e.contains("already in use by another process"), "{e}");
}

#[test]
fn an_mtu_too_big_for_the_packet_buffers_is_refused() {
    if !can_run("tap::an_mtu_too_big_for_the_packet_buffers_is_refused") {
        return;
    }
    let name = unique_name("nvtm");
    run("ip", &["tuntap", "add", "dev", &name, "mode", "tap"]).unwrap();
    let _guard = LinkGuard(name.clone());
    run("ip", &["link", "set", &name, "mtu", "9000"]).unwrap();
    let e = nfv_tap::open(&cfg("host0", &name, 1))
        .err()
        .expect("opened")
        .to_string();
    assert!(
        e.starts_with(&format!("port host0: interface \"{name}\" has MTU 9000")),
        "{e}"
    );
    // 2048-byte buffers less the headroom and the virtio-net header.
    assert!(e.contains("hold 1910 bytes"), "{e}");
    let port = nfv_tap::open_with(&cfg("host0", &name, 1), 16384 - nfv_mem::HEADROOM)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(port.open_txq(0).max_frame(), 9018);
}

#[test]
fn without_cap_net_admin_the_error_says_permission() {
    if !can_run("tap::without_cap_net_admin_the_error_says_permission") {
        return;
    }
    let name = unique_name("nvtx");
    let c = cfg("host0", &name, 1);
    let msg = std::thread::spawn(move || {
        nfv_testutil::netns::drop_all_capabilities();
        nfv_tap::open(&c).err().map(|e| e.to_string())
    })
    .join()
    .unwrap()
    .expect("created a TAP without capabilities");
    assert_eq!(
        msg,
        format!(
            "port host0: creating TAP \"{name}\": permission denied (needs root or \
             CAP_NET_ADMIN)"
        )
    );
    assert!(!exists(&name));
}

#[test]
fn bad_configs_are_refused() {
    let mut c = cfg("host0", "a/b", 1);
    let e = nfv_tap::open(&c).err().unwrap().to_string();
    assert!(
        e.starts_with("port host0: interface name \"a/b\" is not valid"),
        "{e}"
    );
    c = cfg("host0", "nvtok0", 65);
    let e = nfv_tap::open(&c).err().unwrap().to_string();
    assert_eq!(e, "port host0: rxqs 65 must be in 1..=64");
    c.kind = PortKind::Sink;
    let e = nfv_tap::open(&c).err().unwrap().to_string();
    assert_eq!(e, "port host0: not a tap port (type sink)");
}

#[test]
fn the_host_stack_is_reached_through_the_tap() {
    if !can_run("tap::the_host_stack_is_reached_through_the_tap") {
        return;
    }
    ping_through_tap(1);
}

#[test]
fn a_multi_queue_tap_serves_every_queue() {
    if !can_run("tap::a_multi_queue_tap_serves_every_queue") {
        return;
    }
    ping_through_tap(2);
}

/// Creates a TAP port with `rxqs` queues, moves the interface into a
/// namespace with address 10.78.0.1/24, and answers the kernel's ARP
/// requests and pings for 10.78.0.2 through the port while `ping` runs.
fn ping_through_tap(rxqs: usize) {
    let ns = Netns::new("nvtn").unwrap();
    let name = unique_name("nvts");
    let port = nfv_tap::open(&cfg("host0", &name, rxqs)).unwrap_or_else(|e| panic!("{e}"));
    let mut rxqs_: Vec<Box<dyn RxQueue>> = (0..rxqs).map(|q| port.open_rxq(q)).collect();
    let mut txqs: Vec<Box<dyn TxQueue>> = (0..rxqs).map(|q| port.open_txq(q)).collect();
    // The descriptors keep working after the interface changes namespace.
    run("ip", &["link", "set", &name, "netns", ns.name()]).unwrap();
    ns.run(&["ip", "addr", "add", "10.78.0.1/24", "dev", &name])
        .unwrap();
    ns.run(&["ip", "link", "set", &name, "up"]).unwrap();
    let (_pool, mut cache) = pool();

    // A runt is refused on its own; the frame after it still goes.
    let mut b = Batch::new();
    for len in [10, 60] {
        let mut p = cache.alloc().unwrap();
        p.set_len(len).unwrap();
        p.data_mut().fill(0);
        p.data_mut()[..6].copy_from_slice(&[0xff; 6]);
        b.push(p);
    }
    assert_eq!(txqs[0].tx_burst(&mut b, &mut cache), 1);
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].len(), 10);
    cache.free_batch(&mut b);
    assert_eq!(info(&*port, "tx_refused"), "1");

    let count = 3 * rxqs;
    let mut ping = ns
        .command("ping")
        .args([
            "-c",
            &count.to_string(),
            "-i",
            "0.2",
            "-W",
            "2",
            "10.78.0.2",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("ping");
    let (mut arps, mut echos) = (0, 0);
    let mut per_queue = vec![0; rxqs];
    let end = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(s) = ping.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < end, "ping did not finish");
        let mut idle = true;
        for (q, rxq) in rxqs_.iter_mut().enumerate() {
            let mut batch = Batch::new();
            if rxq.rx_burst(&mut batch, &mut cache) == 0 {
                continue;
            }
            idle = false;
            let mut replies = Batch::new();
            for p in batch.drain(..) {
                let reply = if let Some(r) = arp_reply(p.data()) {
                    arps += 1;
                    Some(r)
                } else if let Some(r) = echo_reply(p.data()) {
                    echos += 1;
                    per_queue[q] += 1;
                    Some(r)
                } else {
                    None // IPv6 ND, MLD, …
                };
                cache.free(p);
                if let Some(r) = reply {
                    let mut out = cache.alloc().unwrap();
                    out.set_len(r.len()).unwrap();
                    out.data_mut().copy_from_slice(&r);
                    replies.push(out);
                }
            }
            let n = replies.len();
            // Reply through a tx queue of another queue's descriptor too.
            let nt = txqs.len();
            let txq = &mut txqs[(q + 1) % nt];
            assert_eq!(txq.tx_burst(&mut replies, &mut cache), n);
        }
        if idle {
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    let out = ping.wait_with_output().unwrap();
    assert!(
        status.success(),
        "ping failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(arps >= 1, "no ARP request seen");
    assert!(echos >= count, "{echos} echo requests seen, {count} sent");
    // The kernel learnt the neighbour from the ARP reply written by tx_burst.
    let neigh = ns.run(&["ip", "neigh", "show", "10.78.0.2"]).unwrap();
    assert!(neigh.contains("02:77:00:00:00:02"), "{neigh}");
    assert_eq!(info(&*port, "tx_eagain"), "0");
    assert_eq!(info(&*port, "tx_errors"), "0");
    assert_eq!(info(&*port, "rx_truncated"), "0");
    // Moved away: the kernel's counters are not visible from here.
    assert!(info(&*port, "kernel_drops").starts_with("n/a"));
    if rxqs > 1 {
        eprintln!("echo requests per rx queue: {per_queue:?}");
    }
}

/// An ARP reply for a request asking for [`PEER_IP`].
fn arp_reply(f: &[u8]) -> Option<Vec<u8>> {
    if f.len() < 42 || f[12..14] != [0x08, 0x06] {
        return None;
    }
    let arp = &f[14..42];
    if arp[6..8] != [0, 1] || arp[24..28] != PEER_IP {
        return None;
    }
    let (sha, spa) = (&arp[8..14], &arp[14..18]);
    let mut r = Vec::with_capacity(60);
    r.extend_from_slice(sha);
    r.extend_from_slice(&PEER_MAC);
    r.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 2]);
    r.extend_from_slice(&PEER_MAC);
    r.extend_from_slice(&PEER_IP);
    r.extend_from_slice(sha);
    r.extend_from_slice(spa);
    r.resize(60, 0);
    Some(r)
}

/// An ICMP echo reply for an echo request to [`PEER_IP`].
fn echo_reply(f: &[u8]) -> Option<Vec<u8>> {
    if f.len() < 34 || f[12..14] != [0x08, 0x00] {
        return None;
    }
    let ihl = usize::from(f[14] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([f[16], f[17]]));
    if f[23] != 1 || f[30..34] != PEER_IP || f.len() < 14 + total || total < ihl + 8 {
        return None;
    }
    let icmp_at = 14 + ihl;
    if f[icmp_at] != 8 {
        return None;
    }
    let mut r = f[..14 + total].to_vec();
    r.copy_within(6..12, 0);
    r[6..12].copy_from_slice(&PEER_MAC);
    let (src, dst) = (f[26..30].to_vec(), f[30..34].to_vec());
    r[26..30].copy_from_slice(&dst);
    r[30..34].copy_from_slice(&src);
    r[22] = 64;
    r[24..26].fill(0);
    let c = inet_checksum(&r[14..14 + ihl]);
    r[24..26].copy_from_slice(&c.to_be_bytes());
    r[icmp_at] = 0;
    r[icmp_at + 2..icmp_at + 4].fill(0);
    let c = inet_checksum(&r[icmp_at..]);
    r[icmp_at + 2..icmp_at + 4].copy_from_slice(&c.to_be_bytes());
    Some(r)
}

#[test]
fn offload_metadata_is_handed_to_the_kernel() {
    if !can_run("tap::offload_metadata_is_handed_to_the_kernel") {
        return;
    }
    let ns = Netns::new("nvto").unwrap();
    let name = unique_name("nvto");
    let port = nfv_tap::open(&cfg("host0", &name, 1)).unwrap_or_else(|e| panic!("{e}"));
    let mut txq = port.open_txq(0);
    run("ip", &["link", "set", &name, "netns", ns.name()]).unwrap();
    ns.run(&["ip", "addr", "add", "10.79.0.1/24", "dev", &name])
        .unwrap();
    ns.run(&["ip", "link", "set", &name, "up"]).unwrap();
    let mac_text = ns
        .run(&["cat", &format!("/sys/class/net/{name}/address")])
        .unwrap();
    let mac: Vec<u8> = mac_text
        .trim()
        .split(':')
        .map(|h| u8::from_str_radix(h, 16).unwrap())
        .collect();
    let ends = nfv_testutil::offload::Ends {
        src_mac: PEER_MAC,
        dst_mac: mac.try_into().unwrap(),
        src_ip: [10, 79, 0, 2],
        dst_ip: [10, 79, 0, 1],
    };
    let (frame, hdr) = nfv_testutil::offload::partial_csum_udp(&ends, &[0x5a; 100]);
    let (_pool, mut cache) = pool();
    let send = |txq: &mut Box<dyn TxQueue>, cache: &mut PoolCache, offload: bool| {
        let mut b = Batch::new();
        let mut p = cache.alloc().unwrap();
        p.set_len(frame.len()).unwrap();
        p.data_mut().copy_from_slice(&frame);
        if offload {
            assert!(p.set_offload(hdr));
        }
        b.push(p);
        assert_eq!(txq.tx_burst(&mut b, cache), 1);
    };
    let wait_for = |what: &str, f: &dyn Fn() -> bool| {
        let end = Instant::now() + WAIT;
        while !f() {
            assert!(Instant::now() < end, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    // Without the header's flag the kernel checks the field as a full
    // checksum: a checksum error.
    let errs = ns.snmp("Udp", "InCsumErrors");
    send(&mut txq, &mut cache, false);
    wait_for("the checksum error", &|| {
        ns.snmp("Udp", "InCsumErrors") > errs
    });
    // With NEEDS_CSUM the same bytes are a partial checksum the kernel
    // takes as such: the datagram reaches UDP (no port listens: NoPorts).
    let (errs, no_ports) = (ns.snmp("Udp", "InCsumErrors"), ns.snmp("Udp", "NoPorts"));
    send(&mut txq, &mut cache, true);
    wait_for("the datagram", &|| ns.snmp("Udp", "NoPorts") > no_ports);
    assert_eq!(ns.snmp("Udp", "InCsumErrors"), errs);
    assert_eq!(info(&*port, "tx_refused"), "0");
}
