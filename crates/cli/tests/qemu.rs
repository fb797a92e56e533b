//! Real VMs on nfvswitch: two Linux guests under QEMU (TCG) on two
//! vhost-user ports of one node, joined by NORMAL. Port `vm-a` is served
//! by the switch (QEMU connects); port `vm-b` is served by QEMU
//! (`server=on`) and the switch connects, so both modes carry the same
//! traffic. `vm-b`'s port does not offer MRG_RXBUF; `vm-a`'s guest comes
//! back with `mrg_rxbuf=off` after its restart, so both buffer layouts
//! are used by each direction at some point.
//!
//! The guests (kernel + initramfs from `scripts/qemu-guest`) are booted
//! once and shared by a table of cases run in order; each case prints its
//! result and time. They run under KVM where a probe guest boots, else
//! under TCG (the log says which). TCP with iperf3 checks the guests'
//! checksum and segmentation offloads as negotiated, turned off in the
//! guest, over IPv6, from a guest with offloads to one without (vm-b
//! comes back from its restart with none on its device), and from a guest
//! to host stacks behind AF_PACKET and TAP ports added at run time (its
//! large segments handed to the kernel whole). Guests are driven through a shell on their second
//! serial port. Every QEMU and the switch are killed on drop, also when a
//! case fails. Without a prepared guest image (or QEMU) the test prints
//! SKIPPED with the reason.

mod common;
#[path = "qemu/guest.rs"]
mod guest;
#[path = "qemu/kernel_ports.rs"]
mod kernel_ports;
#[path = "qemu/node.rs"]
#[allow(dead_code)] // `packets`, `wait_info`: for qemu_migration.rs
mod node;
#[path = "qemu/tcp.rs"]
mod tcp;
#[path = "qemu/traffic.rs"]
mod traffic;

use guest::{Extras, Guest, Image, Launch, NO_OFFLOADS, Spec};
use nfv_testutil::{TempDir, skip};
use node::{Node, PortSpec, VRING_FAULTS};
use std::time::{Duration, Instant};

/// A TCG boot takes ~15 s on an idle core; two at once on a busy
/// two-core machine take longer.
const BOOT: Duration = Duration::from_secs(180);
const CONNECT: Duration = Duration::from_secs(30);
const CMD: Duration = Duration::from_secs(30);
const PORTS: [&str; 2] = ["vm-a", "vm-b"];

/// The test bed shared by every case. Fields drop in order: guests first,
/// then the switch, then the directory.
struct Bed {
    a: Option<Guest>,
    b: Option<Guest>,
    node: Node,
    image: Image,
    specs: [Spec; 2],
    /// Device options of each guest (vm-b loses its offloads on restart).
    launch: [Launch; 2],
    dir: TempDir,
}

impl Bed {
    fn start(image: Image) -> Result<Bed, String> {
        let dir = common::tempdir("qemu");
        let sock = |n: &str| dir.join(format!("{n}.sock"));
        let node = Node::start(
            &dir,
            &[
                PortSpec {
                    name: PORTS[0],
                    id: 1,
                    socket: sock(PORTS[0]),
                    switch_server: true,
                    queues: 2,
                    mrg_rxbuf: true,
                },
                PortSpec {
                    name: PORTS[1],
                    id: 2,
                    socket: sock(PORTS[1]),
                    switch_server: false,
                    queues: 2,
                    mrg_rxbuf: false,
                },
            ],
        )?;
        let spec = |name, mac, ip, qemu_server| Spec {
            name,
            mac,
            ip,
            socket: sock(name),
            qemu_server,
            queues: 2,
            mrg_rxbuf: true,
            packed: false,
        };
        let specs = [
            spec(PORTS[0], "52:54:00:00:00:0a", "198.18.0.1/24", false),
            spec(PORTS[1], "52:54:00:00:00:0b", "198.18.0.2/24", true),
        ];
        Ok(Bed {
            a: None,
            b: None,
            node,
            image,
            specs,
            launch: Default::default(),
            dir: TempDir(dir),
        })
    }

    /// Boots both guests at once (each boot is one busy vCPU thread).
    fn boot_both(&mut self) -> Result<String, String> {
        let (image, dir) = (&self.image, self.dir.0.as_path());
        let [sa, sb] = self.specs.clone();
        let [la, lb] = &self.launch;
        let (ra, rb) = std::thread::scope(|s| {
            let ta = s.spawn(|| Guest::launch(image, sa, dir, BOOT, Extras::default(), la));
            let tb = s.spawn(|| Guest::launch(image, sb, dir, BOOT, Extras::default(), lb));
            (join(ta), join(tb))
        });
        // Keep whichever booted, so its diagnostics are there on failure.
        let (ra, rb) = (
            ra.map(|g| self.a.insert(g).boot_secs),
            rb.map(|g| self.b.insert(g).boot_secs),
        );
        let (ta, tb) = (ra?, rb?);
        for p in PORTS {
            self.node.wait_connected(p, 1, CONNECT)?;
        }
        Ok(format!(
            "boot to shell: vm-a {ta:.1} s, vm-b {tb:.1} s (together)"
        ))
    }

    fn guests(&mut self) -> Result<(&mut Guest, &mut Guest), String> {
        match (self.a.as_mut(), self.b.as_mut()) {
            (Some(a), Some(b)) => Ok((a, b)),
            _ => Err("a guest is not running".into()),
        }
    }

    fn each_guest(
        &mut self,
        mut f: impl FnMut(&mut Guest) -> Result<(), String>,
    ) -> Result<(), String> {
        let (a, b) = self.guests()?;
        f(a)?;
        f(b)
    }

    fn diagnostics(&self) -> String {
        let mut s = String::new();
        for g in [&self.a, &self.b].into_iter().flatten() {
            s.push_str(&g.diagnostics());
            s.push('\n');
        }
        s.push_str("--- vhost-user ring events ---\n");
        s.push_str(&self.node.ring_events());
        s.push_str("\n--- show ports ---\n");
        s.push_str(
            &self
                .node
                .ports()
                .map(|p| p.to_string())
                .unwrap_or_else(|e| e),
        );
        s.push_str("\n--- switch log (tail) ---\n");
        s.push_str(&self.node.log_tail());
        s
    }
}

fn join<T>(h: std::thread::ScopedJoinHandle<'_, Result<T, String>>) -> Result<T, String> {
    h.join()
        .unwrap_or_else(|_| Err("boot thread panicked".into()))
}

type Case = fn(&mut Bed) -> Result<String, String>;

/// In order: later cases build on the state earlier ones leave.
const CASES: &[(&str, Case)] = &[
    ("boot two guests, both vhost-user modes", Bed::boot_both),
    (
        "negotiated features (EVENT_IDX, MRG_RXBUF on/off)",
        features,
    ),
    ("ping and TCP both ways", traffic_both_ways),
    (
        "iperf3 TCP with the guests' offloads as negotiated, then off (ethtool -K)",
        iperf_offloads_on_off,
    ),
    (
        "iperf3 TCP from a guest to host stacks behind AF_PACKET and TAP (kernel GSO)",
        guest_to_kernel_ports,
    ),
    ("IPv6: ping and TCP (iperf3, md5-checked nc)", ipv6_tcp),
    (
        "a kernel port receiving straight into vm-a's buffers (zero_copy)",
        kernel_zero_copy,
    ),
    ("guest rx is interrupt-driven", interrupts),
    ("two queue pairs (ethtool -L combined 2)", two_queue_pairs),
    ("guest driver unloaded and reloaded", driver_reload),
    (
        "QEMU SIGKILLed and restarted (vm-a mrg_rxbuf=off, vm-b without offloads)",
        qemu_restart,
    ),
    (
        "vm-a restarted with packed virtqueues (packed=on)",
        packed_guest,
    ),
    (
        "iperf3 TCP between a guest with offloads and one without (device csum/tso off)",
        iperf_mixed_offloads,
    ),
    ("switch counters: traffic, no errors", switch_health),
];

#[test]
fn qemu_guests_through_vhost_user() {
    let name = "qemu_guests_through_vhost_user";
    let image = match Image::find() {
        Ok(i) => i,
        Err(why) => return skip(name, &why),
    };
    let started = Instant::now();
    let (image, accel) = image.probe_accel(&std::env::temp_dir());
    println!("qemu: guests under {accel}");
    let mut bed = Bed::start(image).unwrap_or_else(|e| panic!("switch did not start: {e}"));
    for (case, run) in CASES {
        let t = Instant::now();
        match run(&mut bed) {
            Ok(what) => println!(
                "case {case}: ok in {:.1} s: {what}",
                t.elapsed().as_secs_f64()
            ),
            Err(e) => panic!(
                "case {case}: FAILED after {:.1} s: {e}\n{}",
                t.elapsed().as_secs_f64(),
                bed.diagnostics()
            ),
        }
    }
    println!(
        "qemu: {} cases in {:.1} s",
        CASES.len(),
        started.elapsed().as_secs_f64()
    );
}

/// Virtio feature bit `bit` as the guest driver negotiated it (sysfs shows
/// the bits as a string of 0/1, bit 0 first).
fn guest_feature(g: &mut Guest, bit: usize) -> Result<bool, String> {
    let out = g.ok("cat /sys/class/net/eth0/device/features", CMD)?;
    let bits = out.trim();
    bits.as_bytes()
        .get(bit)
        .map(|&c| c == b'1')
        .ok_or_else(|| format!("short feature string {bits:?}"))
}

const EVENT_IDX_BIT: usize = 29;
const MRG_RXBUF_BIT: usize = 15;

/// Both sides agree on EVENT_IDX and on MRG_RXBUF as configured.
fn check_features(bed: &mut Bed, want_mrg: [bool; 2]) -> Result<String, String> {
    let mut summary = Vec::new();
    for (i, port) in PORTS.into_iter().enumerate() {
        let switch = bed.node.info(port, "features")?;
        let layout = bed.node.info(port, "ring_layout")?;
        let want = if bed.specs[i].packed {
            "packed"
        } else {
            "split"
        };
        if layout != want {
            return Err(format!(
                "{port}: ring_layout {layout:?}, the guest's is {want}"
            ));
        }
        let has = |f: &str| {
            switch
                .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                .any(|w| w == f)
        };
        let g = if i == 0 {
            bed.a.as_mut()
        } else {
            bed.b.as_mut()
        };
        let g = g.ok_or("a guest is not running")?;
        let (g_event, g_mrg) = (
            guest_feature(g, EVENT_IDX_BIT)?,
            guest_feature(g, MRG_RXBUF_BIT)?,
        );
        if !has("EVENT_IDX") || !g_event {
            return Err(format!(
                "{port}: EVENT_IDX not negotiated: switch {switch:?}, guest {g_event}"
            ));
        }
        if has("MRG_RXBUF") != want_mrg[i] || g_mrg != want_mrg[i] {
            return Err(format!(
                "{port}: MRG_RXBUF should be {}: switch {switch:?}, guest {g_mrg}",
                want_mrg[i]
            ));
        }
        summary.push(format!("{port}: {switch}"));
    }
    Ok(summary.join("; "))
}

fn features(bed: &mut Bed) -> Result<String, String> {
    check_features(bed, [true, false])
}

fn traffic_both_ways(bed: &mut Bed) -> Result<String, String> {
    let (a, b) = bed.guests()?;
    traffic::both_ways(a, b)
}

/// The offload state of both guests and ports, one line.
fn offload_states(bed: &mut Bed) -> Result<String, String> {
    let node = &bed.node;
    let (a, b) = match (bed.a.as_mut(), bed.b.as_mut()) {
        (Some(a), Some(b)) => (a, b),
        _ => return Err("a guest is not running".into()),
    };
    Ok(format!(
        "{}; {}",
        tcp::offload_state(node, PORTS[0], a)?,
        tcp::offload_state(node, PORTS[1], b)?
    ))
}

/// a -> b with the offloads the guests negotiated (none while the switch
/// offers none), then with tx checksumming, TSO and GSO off in both
/// guests (each guest then checksums and segments in software whatever
/// was negotiated); the exact bytes checked in the second state too.
/// The offloads are put back at the end.
fn iperf_offloads_on_off(bed: &mut Bed) -> Result<String, String> {
    let on_state = offload_states(bed)?;
    let ip_b = bed.specs[1].addr();
    let (a, b) = bed.guests()?;
    let on = tcp::iperf_tcp(a, b, ip_b)?;
    tcp::set_offloads(a, false)?;
    tcp::set_offloads(b, false)?;
    let off_state = offload_states(bed)?;
    let (a, b) = bed.guests()?;
    let off = tcp::iperf_tcp(a, b, ip_b)?;
    let exact = tcp::exact(a, b, ip_b)?;
    tcp::set_offloads(a, true)?;
    tcp::set_offloads(b, true)?;
    Ok(format!(
        "as negotiated [{on_state}]: {on}; off [{off_state}]: {off}; {exact}"
    ))
}

/// vm-a (offloads as negotiated) to a namespace behind an AF_PACKET port
/// and then behind a TAP port, each added at run time: its large segments
/// go to the kernel whole, behind their virtio-net header.
fn guest_to_kernel_ports(bed: &mut Bed) -> Result<String, String> {
    if let Some(why) = nfv_testutil::netns::unavailable() {
        println!("SKIPPED (kernel ports case): {why}");
        return Ok(format!("SKIPPED: {why}"));
    }
    if nfv_testutil::which("ethtool").is_none() {
        println!("SKIPPED (kernel ports case): `ethtool` is not installed");
        return Ok("SKIPPED: `ethtool` is not installed".into());
    }
    let node = &bed.node;
    let a = bed.a.as_mut().ok_or("vm-a is not running")?;
    let ap = kernel_ports::guest_to_host(node, a, "afpacket", 7, "198.18.0.5")?;
    let tap = kernel_ports::guest_to_host(node, a, "tap", 8, "198.18.0.6")?;
    Ok(format!("{ap}; {tap}"))
}

const IPV6: [&str; 2] = ["fd00::1/64", "fd00::2/64"];

/// IPv6 addresses on both guests (no DAD); ping6 both ways, iperf3 a -> b
/// and an md5-checked transfer b -> a.
fn ipv6_tcp(bed: &mut Bed) -> Result<String, String> {
    let (a, b) = bed.guests()?;
    tcp::add_ipv6(a, IPV6[0])?;
    tcp::add_ipv6(b, IPV6[1])?;
    let addr = |i: usize| IPV6[i].split('/').next().unwrap_or(IPV6[i]);
    tcp::ping6(a, addr(1))?;
    tcp::ping6(b, addr(0))?;
    let ab = tcp::iperf_tcp(a, b, addr(1))?;
    let ba = tcp::exact(b, a, addr(0))?;
    Ok(format!("ping6 both ways; {ab}; {ba}"))
}

/// vm-a (offloads as negotiated) and vm-b (a device without any
/// checksum or segmentation offload): once the switch negotiates TSO
/// with vm-a, what vm-a sends to vm-b is segmented by the switch.
fn iperf_mixed_offloads(bed: &mut Bed) -> Result<String, String> {
    let state = offload_states(bed)?;
    let (ip_a, ip_b) = (bed.specs[0].addr(), bed.specs[1].addr());
    let (a, b) = bed.guests()?;
    let ab = tcp::iperf_tcp(a, b, ip_b)?;
    let ba = tcp::iperf_tcp(b, a, ip_a)?;
    let exact = tcp::exact(a, b, ip_b)?;
    Ok(format!("[{state}]: {ab}; {ba}; {exact}"))
}

/// An AF_XDP port added at run time with `zero_copy = "vm-a"`: what a
/// host in a namespace sends to vm-a lands straight in the Linux guest's
/// receive buffers (mergeable, 1536 B: room for MTU 1500), the switch
/// writing only the virtio-net header and the used entry; replies go back
/// out of the same port with `send_in_place`: the kernel reads each
/// reply's tail from the Linux driver's transmit buffer, its chain
/// returned on completion, out of order. ping checks its payload pattern
/// in every reply.
/// The port is removed again (its socket closed, vm-a's lent buffers
/// given back) and vm-a keeps working.
fn kernel_zero_copy(bed: &mut Bed) -> Result<String, String> {
    if let Some(why) = nfv_testutil::netns::unavailable() {
        println!("SKIPPED (zero-copy case): {why}");
        return Ok(format!("SKIPPED: {why}"));
    }
    let ns = nfv_testutil::netns::Netns::new("nqz")?;
    let veth = nfv_testutil::netns::Veth::into_ns(&ns, "198.18.0.3/24")?;
    let node = &bed.node;
    node.ctl(&[
        "add-port",
        &format!(
            "name=\"host\",id=7,type=\"afxdp\",iface=\"{}\",xdp_mode=\"copy\",zero_copy=\"vm-a\",send_in_place=\"on\"",
            veth.host
        ),
    ])?;
    let ready = nfv_testutil::wait_until(CONNECT, || {
        node.info("host", "rx_mode")
            .is_ok_and(|m| m.starts_with("zero-copy"))
    });
    if !ready {
        return Err(format!(
            "the AF_XDP port never received into vm-a: {}",
            node.port("host")
                .map(|p| p["info"].to_string())
                .unwrap_or_else(|e| e)
        ));
    }
    let out = ns.run(&[
        "ping",
        "-c",
        "20",
        "-i",
        "0.2",
        "-W",
        "2",
        "-s",
        "1400",
        "-p",
        "6e667a63",
        "198.18.0.1",
    ]);
    let out = out.map_err(|e| format!("ping from the namespace: {e}"))?;
    let received = out
        .lines()
        .find_map(|l| {
            l.split(", ")
                .find_map(|f| f.strip_suffix(" received"))
                .and_then(|n| n.parse::<u32>().ok())
        })
        .unwrap_or(0);
    if received < 18 || out.contains("wrong data byte") {
        return Err(format!("ping through zero-copy: {out}"));
    }
    let zc_host = node.info_count("host", "zero_copy_packets")?;
    let zc_vm = node.info_count(PORTS[0], "zero_copy_packets")?;
    if zc_host < 18 || zc_vm < 18 {
        return Err(format!(
            "frames received in place: host {zc_host}, completed in vm-a {zc_vm}: {}",
            node.port("host")
                .map(|p| p["info"].to_string())
                .unwrap_or_else(|e| e)
        ));
    }
    let in_place = node.info_count("host", "tx_zero_copy_packets")?;
    let inflight = node.info_count("host", "zc_tx_inflight")?;
    if in_place < 18 {
        return Err(format!(
            "replies sent in place from vm-a's buffers: {in_place}: {}",
            node.port("host")
                .map(|p| p["info"].to_string())
                .unwrap_or_else(|e| e)
        ));
    }
    node.ctl(&["del-port", "host"])?;
    drop((veth, ns));
    let (a, b) = bed.guests()?;
    traffic::ping(a, b)?;
    Ok(format!(
        "{received}/20 pings with 1400 B payloads; {zc_host} frames received into vm-a's \
         buffers, {zc_vm} completed in place; {in_place} replies sent from vm-a's buffers \
         in place ({inflight} still out at the end)"
    ))
}

/// Sum of the guest's virtio interrupt counts in /proc/interrupts.
fn virtio_irqs(g: &mut Guest) -> Result<u64, String> {
    let out = g.ok("grep virtio /proc/interrupts", CMD)?;
    Ok(out
        .lines()
        .map(|l| {
            l.split_whitespace()
                .nth(1)
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0)
        })
        .sum())
}

/// With EVENT_IDX and the Linux driver's defaults the guest sleeps
/// between packets and the switch wakes it: each ping reply to an idle
/// guest costs an interrupt.
fn interrupts(bed: &mut Bed) -> Result<String, String> {
    let (a, b) = bed.guests()?;
    let before = virtio_irqs(a)?;
    traffic::ping(a, b)?;
    let after = virtio_irqs(a)?;
    // At least one interrupt per two replies: a polling driver would take
    // next to none.
    if after < before + 5 {
        return Err(format!(
            "vm-a took {} virtio interrupts for 10+ ping replies",
            after - before
        ));
    }
    Ok(format!(
        "vm-a: {} virtio interrupts during 10+ pings",
        after - before
    ))
}

/// A counter from `ethtool -S eth0` in the guest.
fn guest_stat(g: &mut Guest, key: &str) -> Result<u64, String> {
    let out = g.ok("ethtool -S eth0", CMD)?;
    out.lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{key}: ")))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| format!("no {key} in ethtool -S: {out}"))
}

fn switch_rxq_bytes(node: &Node, port: &str, q: usize) -> Result<u64, String> {
    let p = node.port(port)?;
    p["rx_queues"]
        .as_array()
        .and_then(|qs| qs.iter().find(|x| x["queue"] == q))
        .and_then(|x| x["bytes"].as_u64())
        .ok_or_else(|| format!("{port}: no rx queue {q} in show ports"))
}

/// Both guests turn on their second queue pair and send through it only
/// (XPS), so the switch's second rx queue of each port carries the load:
/// at least the 4 MiB each guest sends (bytes, not packets: with TSO a
/// 64 KiB segment is one packet).
fn two_queue_pairs(bed: &mut Bed) -> Result<String, String> {
    bed.each_guest(|g| {
        g.ok("ethtool -L eth0 combined 2", CMD)?;
        let l = g.ok("ethtool -l eth0", CMD)?;
        let current = l.rsplit("Current hardware settings:").next().unwrap_or("");
        if !current.lines().any(|x| x.split_whitespace().eq(["Combined:", "2"])) {
            return Err(format!("{}: ethtool -l after -L: {l}", g.spec.name));
        }
        g.ok(
            "echo 0 >/sys/class/net/eth0/queues/tx-0/xps_cpus && echo 1 >/sys/class/net/eth0/queues/tx-1/xps_cpus",
            CMD,
        )
        .map(|_| ())
    })?;
    for p in PORTS {
        bed.node.wait_connected(p, 2, CONNECT)?;
    }
    let q1 = |bed: &mut Bed| -> Result<[u64; 4], String> {
        let (a, b) = bed.guests()?;
        let (ga, gb) = (
            guest_stat(a, "tx_queue_1_bytes")?,
            guest_stat(b, "tx_queue_1_bytes")?,
        );
        Ok([
            ga,
            gb,
            switch_rxq_bytes(&bed.node, PORTS[0], 1)?,
            switch_rxq_bytes(&bed.node, PORTS[1], 1)?,
        ])
    };
    let before = q1(bed)?;
    let (a, b) = bed.guests()?;
    let summary = traffic::both_ways(a, b)?;
    let after = q1(bed)?;
    let grew: Vec<u64> = after.iter().zip(before).map(|(x, y)| x - y).collect();
    let sent = u64::from(traffic::TCP_BLOCKS) * 65536;
    if grew.iter().any(|&d| d < sent) {
        return Err(format!(
            "queue 1 barely used (bytes): guest tx a {}, b {}; switch rx vm-a {}, vm-b {}",
            grew[0], grew[1], grew[2], grew[3]
        ));
    }
    Ok(format!(
        "queue 1 bytes: guest tx {}/{}, switch rx {}/{}; {summary}",
        grew[0], grew[1], grew[2], grew[3]
    ))
}

/// `rmmod virtio_net; modprobe virtio_net`: the driver resets the device
/// and negotiates again over the same vhost-user connection.
fn driver_reload(bed: &mut Bed) -> Result<String, String> {
    let reconnects = reconnect_counts(&bed.node)?;
    bed.each_guest(|g| {
        let ip = g.spec.ip;
        g.ok(
            &format!(
                "rmmod virtio_net && modprobe virtio_net && \
                 for i in $(seq 50); do [ -e /sys/class/net/eth0 ] && break; sleep 0.1; done && \
                 ip addr add {ip} dev eth0 && ip link set eth0 up"
            ),
            CMD,
        )
        .map(|_| ())
    })?;
    for p in PORTS {
        bed.node.wait_connected(p, 1, CONNECT)?;
    }
    let features = check_features(bed, [true, false])?;
    let (a, b) = bed.guests()?;
    let summary = traffic::both_ways(a, b)?;
    if reconnect_counts(&bed.node)? != reconnects {
        return Err(
            "the vhost-user connection was re-made; a driver reload should not need that".into(),
        );
    }
    Ok(format!("{summary}; {features}"))
}

fn reconnect_counts(node: &Node) -> Result<[u64; 2], String> {
    Ok([
        node.info_count(PORTS[0], "reconnects")?,
        node.info_count(PORTS[1], "reconnects")?,
    ])
}

/// Both QEMUs die without a word; new ones (vm-a now `mrg_rxbuf=off`)
/// take their sockets while the switch runs on.
fn qemu_restart(bed: &mut Bed) -> Result<String, String> {
    let before = reconnect_counts(&bed.node)?;
    for g in [bed.a.take(), bed.b.take()].into_iter().flatten() {
        g.kill();
    }
    for p in PORTS {
        let gone = nfv_testutil::wait_until(CONNECT, || {
            bed.node.info(p, "connected").is_ok_and(|c| c == "false")
        });
        if !gone {
            return Err(format!("{p}: the switch did not notice its QEMU die"));
        }
    }
    bed.specs[0].mrg_rxbuf = false;
    bed.launch[0].device = Some(format!("host_mtu={GUEST_MTU}"));
    bed.launch[1].device = Some(NO_OFFLOADS.into());
    let boot = bed.boot_both()?;
    let after = reconnect_counts(&bed.node)?;
    if after.iter().zip(before).any(|(x, y)| *x <= y) {
        return Err(format!("reconnects did not grow: {before:?} -> {after:?}"));
    }
    let features = check_features(bed, [false, false])?;
    let mtu = guest_mtu(bed)?;
    let (a, b) = bed.guests()?;
    let summary = traffic::both_ways(a, b)?;
    Ok(format!(
        "{boot}; reconnects {before:?} -> {after:?}; {mtu}; {summary}; {features}"
    ))
}

/// The MTU vm-a is given by QEMU (`host_mtu`) after its restart: below
/// the port's `mtu` (1500), so the switch takes it.
const GUEST_MTU: u32 = 1400;

/// vm-a's driver took the MTU from the device (VIRTIO_NET_F_MTU, offered
/// because the port has `mtu`) and the switch accepted QEMU's NET_SET_MTU.
fn guest_mtu(bed: &mut Bed) -> Result<String, String> {
    let a = bed.a.as_mut().ok_or("vm-a is not running")?;
    let in_guest = a.ok("cat /sys/class/net/eth0/mtu", CMD)?;
    let switch = bed.node.info(PORTS[0], "guest_mtu")?;
    if in_guest.trim() != GUEST_MTU.to_string() || switch != GUEST_MTU.to_string() {
        return Err(format!(
            "host_mtu={GUEST_MTU}: vm-a's eth0 MTU {}, the switch's guest_mtu {switch}",
            in_guest.trim()
        ));
    }
    Ok(format!(
        "vm-a MTU {GUEST_MTU} from the device (NET_SET_MTU accepted)"
    ))
}

/// vm-a comes back with `packed=on` (and mergeable buffers again): the
/// Linux driver runs packed virtqueues on both queue pairs, the switch
/// reports `ring_layout = packed` for vm-a and `split` for vm-b, and
/// traffic flows both ways between the two layouts.
fn packed_guest(bed: &mut Bed) -> Result<String, String> {
    if let Some(a) = bed.a.take() {
        a.kill();
    }
    let gone = nfv_testutil::wait_until(CONNECT, || {
        bed.node
            .info(PORTS[0], "connected")
            .is_ok_and(|c| c == "false")
    });
    if !gone {
        return Err("vm-a: the switch did not notice its QEMU die".into());
    }
    bed.specs[0].packed = true;
    bed.specs[0].mrg_rxbuf = true;
    let spec = bed.specs[0].clone();
    let g = Guest::launch(
        &bed.image,
        spec,
        &bed.dir.0,
        BOOT,
        Extras::default(),
        &bed.launch[0],
    )?;
    let boot = g.boot_secs;
    bed.a = Some(g);
    bed.node.wait_connected(PORTS[0], 1, CONNECT)?;
    let features = check_features(bed, [true, false])?;
    let (a, b) = bed.guests()?;
    let summary = traffic::both_ways(a, b)?;
    Ok(format!("boot {boot:.1} s; {summary}; {features}"))
}

/// Packets went both ways on both ports and the switch saw no protocol,
/// negotiation, memory-table, ring or guest-memory errors.
fn switch_health(bed: &mut Bed) -> Result<String, String> {
    let mut summary = Vec::new();
    for p in PORTS {
        let port = bed.node.port(p)?;
        let info = &port["info"];
        let (rx, tx) = (
            port["rx"]["packets"].as_u64().unwrap_or(0),
            port["tx"]["packets"].as_u64().unwrap_or(0),
        );
        if rx == 0 || tx == 0 {
            return Err(format!("{p}: rx {rx}, tx {tx} packets"));
        }
        for key in [
            "protocol_errors",
            "negotiation_errors",
            "mem_table_errors",
            "ring_errors",
            "memory_faults",
        ] {
            if info[key] != "0" {
                return Err(format!("{p}: {key} = {}: {info}", info[key]));
            }
        }
        for key in ["quarantined", "call_stuck"] {
            if info[key] != "[]" {
                return Err(format!("{p}: {key} = {}: {info}", info[key]));
            }
        }
        let vrings = info
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| k.starts_with("vring"));
        for (k, v) in vrings {
            let text = v.as_str().unwrap_or("");
            if text
                .split_whitespace()
                .any(|kv| VRING_FAULTS.contains(&kv.split('=').next().unwrap_or("")))
            {
                return Err(format!("{p}: {k}: {text}"));
            }
        }
        summary.push(format!(
            "{p}: rx {rx} tx {tx} packets, drops rx {} tx {}",
            port["rx"]["drops"], port["tx"]["drops"]
        ));
    }
    Ok(summary.join("; "))
}
