//! nfvswitch under a real OpenFlow controller: os-ken (OpenStack's Ryu,
//! PyPI `os-ken`) running a MAC-learning application
//! (`controllers/learning_switch.py`) as the controller of a node whose
//! two AF_PACKET ports lead into two network namespaces. The node starts
//! with no rule at all: the hosts reach each other only once the
//! controller has installed its table-miss rule, learnt their MACs from
//! packet-ins, answered with packet-outs and installed a rule per pair.
//! Then the controller is stopped (fail mode `secure`: the learnt rules
//! keep forwarding), started again, and the switch reconnects by itself.
//! The same controller also joins two DPDK testpmd virtio-user ports on
//! two vhost-user ports.
//!
//! Faucet (PyPI `faucet`), a production controller with a multi-table
//! pipeline, runs a two-VLAN, four-port `faucet.yaml` (its `hardware:
//! "Open vSwitch"` profile) over four namespaces: hosts in the same VLAN
//! ping, hosts in different VLANs do not, and the switch refuses nothing
//! Faucet sends.
//!
//! Needs root, `ip netns`, `ping`, `ethtool`, os-ken and Faucet
//! (scripts/test installs them into venvs and names them in
//! `NFVSWITCH_OSKEN_PYTHON` and `NFVSWITCH_FAUCET`); otherwise SKIPPED
//! with the reason.

mod kernel_host;

use kernel_host::*;
use nfv_testutil::{skip, wait_until};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const LEFT_IP: Ipv4Addr = Ipv4Addr::new(10, 78, 0, 1);
const RIGHT_IP: Ipv4Addr = Ipv4Addr::new(10, 78, 0, 2);
const SLOW: Duration = Duration::from_secs(90);

/// The python that has os-ken, if any.
fn osken_python() -> Result<PathBuf, String> {
    let py = std::env::var_os("NFVSWITCH_OSKEN_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("python3"));
    let ok = Command::new(&py)
        .args(["-c", "import os_ken.base.app_manager"])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        Ok(py)
    } else {
        Err(format!(
            "os-ken not importable by {} (scripts/test pip-installs it; set NFVSWITCH_OSKEN_PYTHON)",
            py.display()
        ))
    }
}

/// [`osken_python`], or None after reporting `test` SKIPPED.
fn osken_or_skip(test: &str) -> Option<PathBuf> {
    osken_python().map_err(|why| skip(test, &why)).ok()
}

/// os-ken listening on 127.0.0.1:`port` with the learning switch; its log
/// in `log`.
struct Controller(Child);

impl Controller {
    fn start(py: &Path, port: u16, log: &Path) -> Controller {
        Controller::start_with(py, port, log, None)
    }

    /// As [`Controller::start`]; with `tls` ("KEY,CERT,CA") it listens
    /// for TLS.
    fn start_with(py: &Path, port: u16, log: &Path, tls: Option<String>) -> Controller {
        let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/controllers");
        let log = std::fs::File::create(log).unwrap();
        let mut cmd = Command::new(py);
        if let Some(t) = tls {
            cmd.env("OSKEN_TLS", t);
        }
        let child = cmd
            .arg(here.join("run_osken.py"))
            .arg(port.to_string())
            .arg(here.join("learning_switch.py"))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .expect("start os-ken");
        Controller(child)
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A TCP port free now (the controller binds it next).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn a_learning_switch_controller_connects_two_hosts_and_survives_a_restart() {
    let test = "a_learning_switch_controller_connects_two_hosts_and_survives_a_restart";
    if let Some(why) = unavailable() {
        skip(test, &why);
        return;
    }
    let Some(py) = osken_or_skip(test) else {
        return;
    };
    let dir = TempDir::new("osken", "learn");
    let port = free_port();
    let log = dir.0.join("osken.log");
    let controller = Controller::start(&py, port, &log);
    let (ns1, v1) = host(LEFT_IP).unwrap();
    let (ns2, v2) = host(RIGHT_IP).unwrap();
    let body = format!(
        "[openflow]\ncontrollers = [\"tcp:127.0.0.1:{port}\"]\nfail_mode = \"secure\"\n{}{}",
        kernel_port("left", 1, "afpacket", &v1.host),
        kernel_port("right", 2, "afpacket", &v2.host),
    );
    let node = Node::start(&dir.0, "osken", &body);
    let state = |node: &Node| {
        format!(
            "--- controllers\n{}\n--- dump-flows\n{}\n--- os-ken\n{}",
            node.ctl(&["show", "controllers"]).unwrap_or_else(|e| e),
            node.ctl(&["dump-flows"]).unwrap_or_else(|e| e),
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    };
    // The controller installs its table-miss rule once the switch joins.
    assert!(
        wait_until(SLOW, || node
            .ctl(&["dump-flows"])
            .is_ok_and(|f| f.contains("priority=0,actions=CONTROLLER:65535"))),
        "the controller never programmed the switch\n{}",
        state(&node)
    );
    // ARP and ICMP go through the controller until it has learnt both
    // MACs, then through its rules.
    let pinged = wait_until(SLOW, || ping(&ns1, RIGHT_IP, 1).is_ok_and(|n| n >= 1));
    assert!(pinged, "no ping through the controller\n{}", state(&node));
    assert!(
        wait_until(SLOW, || node.ctl(&["dump-flows"]).is_ok_and(|f| f
            .lines()
            .filter(|l| l.contains("priority=1,"))
            .count()
            >= 2)),
        "the controller installed no learnt rules\n{}",
        state(&node)
    );
    tcp_exchange(&ns1, &ns2, RIGHT_IP, 200_000, 200_000)
        .unwrap_or_else(|e| panic!("TCP through the learnt rules: {e}\n{}", state(&node)));
    let shown = node.ctl(&["show", "controllers"]).unwrap();
    assert!(shown.contains("packet_out="), "{shown}");

    // The controller goes away: secure mode keeps the learnt rules, and
    // the hosts still talk.
    drop(controller);
    assert!(
        wait_until(SLOW, || node
            .ctl(&["show", "controllers"])
            .is_ok_and(|s| s.contains("no controller connected"))),
        "the switch did not notice the controller leave\n{}",
        state(&node)
    );
    assert_eq!(
        ping(&ns1, RIGHT_IP, 3).unwrap_or(0),
        3,
        "secure mode lost the learnt rules\n{}",
        state(&node)
    );
    // It comes back on the same port; the switch reconnects (backoff at
    // most 8 s) and the new controller programs it again.
    let log2 = dir.0.join("osken2.log");
    let _controller = Controller::start(&py, port, &log2);
    assert!(
        wait_until(SLOW, || std::fs::read_to_string(&log2)
            .is_ok_and(|l| l.contains("joined"))),
        "the switch did not reconnect\n{}",
        state(&node)
    );
    tcp_exchange(&ns2, &ns1, LEFT_IP, 100_000, 100_000)
        .unwrap_or_else(|e| panic!("TCP after the controller restart: {e}\n{}", state(&node)));
    drop((v1, v2, ns1, ns2));
}

/// Faucet's two VLANs over four ports.
const FAUCET_YAML: &str = "\
vlans:
  office:
    vid: 100
  guest:
    vid: 200
dps:
  sw1:
    dp_id: 0xa1
    hardware: \"Open vSwitch\"
    interfaces:
      1:
        native_vlan: office
      2:
        native_vlan: office
      3:
        native_vlan: guest
      4:
        native_vlan: guest
";

#[test]
fn faucet_keeps_two_vlans_apart() {
    let test = "faucet_keeps_two_vlans_apart";
    if let Some(why) = unavailable() {
        skip(test, &why);
        return;
    }
    let faucet = std::env::var_os("NFVSWITCH_FAUCET").map(PathBuf::from);
    let Some(faucet) = faucet.filter(|f| f.exists()) else {
        skip(
            test,
            "Faucet not installed (scripts/test pip-installs it; set NFVSWITCH_FAUCET to its `faucet` script)",
        );
        return;
    };
    let dir = TempDir::new("faucet", "vlans");
    std::fs::write(dir.0.join("faucet.yaml"), FAUCET_YAML).unwrap();
    let port = free_port();
    let prom = free_port();
    let log = dir.0.join("faucet.log");
    let exc = dir.0.join("faucet-exception.log");
    let bin_dir = faucet.parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = std::fs::File::create(dir.0.join("faucet.out")).unwrap();
    let child = Command::new(&faucet)
        .env("PATH", path)
        .env("FAUCET_CONFIG", dir.0.join("faucet.yaml"))
        .env("FAUCET_LOG", &log)
        .env("FAUCET_EXCEPTION_LOG", &exc)
        .env("FAUCET_PROMETHEUS_PORT", prom.to_string())
        .env("FAUCET_PROMETHEUS_ADDR", "127.0.0.1")
        .arg(format!("--ryu-ofp-tcp-listen-port={port}"))
        .arg("--ryu-ofp-listen-host=127.0.0.1")
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .stdin(Stdio::null())
        .spawn()
        .expect("start faucet");
    let _faucet = Controller(child);
    let ips: Vec<Ipv4Addr> = (1..=4).map(|i| Ipv4Addr::new(10, 79, 0, i)).collect();
    let hosts: Vec<_> = ips.iter().map(|ip| host(*ip).unwrap()).collect();
    let mut body = format!(
        "[openflow]\ncontrollers = [\"tcp:127.0.0.1:{port}\"]\ndatapath_id = \"00000000000000a1\"\n"
    );
    for (i, (_, v)) in hosts.iter().enumerate() {
        body += &kernel_port(&format!("h{}", i + 1), (i + 1) as u16, "afpacket", &v.host);
    }
    let node = Node::start(&dir.0, "faucet", &body);
    let state = |node: &Node| {
        format!(
            "--- controllers\n{}\n--- dump-flows\n{}\n--- faucet.log\n{}\n--- faucet.out\n{}",
            node.ctl(&["show", "controllers"]).unwrap_or_else(|e| e),
            node.ctl(&["dump-flows"]).unwrap_or_else(|e| e),
            std::fs::read_to_string(&log).unwrap_or_default(),
            std::fs::read_to_string(dir.0.join("faucet.out")).unwrap_or_default(),
        )
    };
    // Faucet's pipeline is in once its flood table has rules.
    assert!(
        wait_until(SLOW, || node
            .ctl(&["dump-flows"])
            .is_ok_and(|f| f.contains("table=3") && f.contains("dl_vlan=200"))),
        "Faucet never programmed the switch\n{}",
        state(&node)
    );
    let ns = |i: usize| &hosts[i].0;
    assert!(
        wait_until(SLOW, || ping(ns(0), ips[1], 1).is_ok_and(|n| n >= 1)),
        "hosts 1 and 2 (VLAN office) do not reach each other\n{}",
        state(&node)
    );
    assert!(
        wait_until(SLOW, || ping(ns(2), ips[3], 1).is_ok_and(|n| n >= 1)),
        "hosts 3 and 4 (VLAN guest) do not reach each other\n{}",
        state(&node)
    );
    tcp_exchange(ns(1), ns(0), ips[0], 100_000, 100_000)
        .unwrap_or_else(|e| panic!("TCP within VLAN office: {e}\n{}", state(&node)));
    // Across VLANs: nothing, not even ARP.
    assert_eq!(
        ping(ns(0), ips[2], 2).unwrap_or(0),
        0,
        "host 1 (office) reached host 3 (guest)\n{}",
        state(&node)
    );
    let shown = node.ctl(&["show", "controllers"]).unwrap();
    assert!(
        shown.contains("errors_sent=0"),
        "the switch refused something Faucet sent\n{}",
        state(&node)
    );
    let flog = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        !flog.contains("OFPErrorMsg") && !flog.contains("error from switch"),
        "Faucet logged an error from the switch\n{}",
        state(&node)
    );
    let exceptions = std::fs::read_to_string(&exc).unwrap_or_default();
    assert!(exceptions.trim().is_empty(), "Faucet raised: {exceptions}");
    drop(hosts);
}

/// DPDK testpmd, one process, two virtio-user ports behind the node's two
/// vhost-user ports, forwarding each port's packets out of the other with
/// its own MAC as source (`mac` mode, after a first burst from each):
/// traffic flows only once the learning controller has seen both MACs,
/// and then through the switch's rules, not the controller.
#[test]
fn a_learning_switch_controller_forwards_between_two_testpmd_ports() {
    let test = "a_learning_switch_controller_forwards_between_two_testpmd_ports";
    if nfv_testutil::which("dpdk-testpmd").is_none() {
        skip(test, "dpdk-testpmd not installed (Debian package dpdk-dev)");
        return;
    }
    let Some(py) = osken_or_skip(test) else {
        return;
    };
    let dir = TempDir::new("osken", "testpmd");
    let port = free_port();
    let log = dir.0.join("osken.log");
    let _controller = Controller::start(&py, port, &log);
    let sock = |n: u32| dir.0.join(format!("vnf{n}.sock"));
    let mut body = format!("[openflow]\ncontrollers = [\"tcp:127.0.0.1:{port}\"]\n");
    for n in 1..=2 {
        body += &format!(
            "[[port]]\nname = \"vnf{n}\"\nid = {n}\ntype = \"vhost-user\"\nsocket = \"{}\"\nmode = \"server\"\n",
            sock(n).display()
        );
    }
    let node = Node::start(&dir.0, "ostp", &body);
    assert!(
        wait_until(SLOW, || node
            .ctl(&["dump-flows"])
            .is_ok_and(|f| f.contains("actions=CONTROLLER:65535"))),
        "the controller never programmed the switch\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let (m1, m2) = ("02:00:00:00:aa:01", "02:00:00:00:aa:02");
    let prefix = format!("nfvostp{}", std::process::id());
    let child = Command::new("dpdk-testpmd")
        .args([
            "--no-pci",
            "--no-huge",
            "-m",
            "512",
            &format!("--file-prefix={prefix}"),
            "-l",
            "0,1",
            &format!(
                "--vdev=net_virtio_user0,path={},queues=1,mac={m1}",
                sock(1).display()
            ),
            &format!(
                "--vdev=net_virtio_user1,path={},queues=1,mac={m2}",
                sock(2).display()
            ),
            "--",
            "--forward-mode=mac",
            &format!("--eth-peer=0,{m2}"),
            &format!("--eth-peer=1,{m1}"),
            "--tx-first",
            "--nb-cores=1",
            "--total-num-mbufs=8192",
            "--no-lsc-interrupt",
            "--stats-period=1",
        ])
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(dir.0.join("testpmd.out")).unwrap())
        .stderr(std::fs::File::create(dir.0.join("testpmd.err")).unwrap())
        .spawn();
    let child = match child {
        Ok(c) => c,
        Err(e) => {
            skip(test, &format!("cannot start dpdk-testpmd: {e}"));
            return;
        }
    };
    let _testpmd = Controller(child);
    let state = |node: &Node| {
        format!(
            "--- controllers\n{}\n--- dump-flows\n{}\n--- os-ken\n{}\n--- testpmd\n{}{}",
            node.ctl(&["show", "controllers"]).unwrap_or_else(|e| e),
            node.ctl(&["dump-flows"]).unwrap_or_else(|e| e),
            std::fs::read_to_string(&log).unwrap_or_default(),
            std::fs::read_to_string(dir.0.join("testpmd.out"))
                .unwrap_or_default()
                .lines()
                .rev()
                .take(30)
                .collect::<Vec<_>>()
                .join("\n"),
            std::fs::read_to_string(dir.0.join("testpmd.err")).unwrap_or_default(),
        )
    };
    // Both directions learnt: a rule for each, and packets through them
    // by the ten thousand while the controller saw a handful.
    let learnt = |node: &Node| -> Vec<u64> {
        node.ctl(&["dump-flows"])
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("priority=1,"))
            .filter_map(|l| {
                l.split("n_packets=")
                    .nth(1)?
                    .split(',')
                    .next()?
                    .parse()
                    .ok()
            })
            .collect()
    };
    assert!(
        wait_until(SLOW, || {
            let n = learnt(&node);
            n.len() == 2 && n.iter().all(|&p| p > 10_000)
        }),
        "no traffic through learnt rules between the testpmd ports\n{}",
        state(&node)
    );
    let shown = node.ctl(&["show", "controllers"]).unwrap();
    let packet_outs: u64 = shown
        .split("packet_out=")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(u64::MAX);
    let through_rules: u64 = learnt(&node).iter().sum();
    assert!(
        packet_outs < through_rules / 100,
        "the controller carried {packet_outs} packets against {through_rules} through rules\n{}",
        state(&node)
    );
    let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/{prefix}"));
}

/// The switch connects to a controller over TLS (`ssl:`): os-ken listens
/// with its certificate and asks for the switch's, both signed by one CA;
/// the controller programs the switch as over TCP.
#[test]
fn the_switch_reaches_a_controller_over_tls() {
    let test = "the_switch_reaches_a_controller_over_tls";
    let Some(py) = osken_or_skip(test) else {
        return;
    };
    let dir = TempDir::new("osken", "tls");
    if nfv_testutil::pki::make_pki(&dir.0, "ca", &["switch", "controller"]).is_none() {
        skip(test, "openssl could not make test certificates");
        return;
    }
    let p = |f: &str| dir.0.join(f).display().to_string();
    let port = free_port();
    let log = dir.0.join("osken.log");
    let _controller = Controller::start_with(
        &py,
        port,
        &log,
        Some(format!(
            "{},{},{}",
            p("controller.key"),
            p("controller.pem"),
            p("ca.pem")
        )),
    );
    let body = format!(
        "[openflow]\ncontrollers = [\"ssl:127.0.0.1:{port}\"]\n\
         ssl_private_key = \"{}\"\nssl_certificate = \"{}\"\nssl_ca_certificate = \"{}\"\n\
         [[port]]\nname = \"s1\"\nid = 1\ntype = \"sink\"\n",
        p("switch.key"),
        p("switch.pem"),
        p("ca.pem")
    );
    let node = Node::start(&dir.0, "ostls", &body);
    assert!(
        wait_until(SLOW, || node
            .ctl(&["dump-flows"])
            .is_ok_and(|f| f.contains("actions=CONTROLLER:65535"))),
        "the controller never programmed the switch over TLS\n{}\n{}",
        node.ctl(&["show", "controllers"]).unwrap_or_else(|e| e),
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let shown = node.ctl(&["show", "controllers"]).unwrap();
    assert!(shown.contains("ssl:127.0.0.1:"), "{shown}");
}
