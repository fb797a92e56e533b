//! nfvswitch under a real OpenFlow controller: os-ken (OpenStack's Ryu,
//! PyPI `os-ken`) running a MAC-learning application
//! (`controllers/learning_switch.py`) as the controller of a node whose
//! two AF_PACKET ports lead into two network namespaces. The node starts
//! with no rule at all: the hosts reach each other only once the
//! controller has installed its table-miss rule, learnt their MACs from
//! packet-ins, answered with packet-outs and installed a rule per pair.
//! Then the controller is stopped (fail mode `secure`: the learnt rules
//! keep forwarding), started again, and the switch reconnects by itself.
//!
//! Needs root, `ip netns`, `ping`, `ethtool` and os-ken (scripts/test
//! installs it into a venv and names its python in
//! `NFVSWITCH_OSKEN_PYTHON`); otherwise SKIPPED with the reason.

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

/// os-ken listening on 127.0.0.1:`port` with the learning switch; its log
/// in `log`.
struct Controller(Child);

impl Controller {
    fn start(py: &Path, port: u16, log: &Path) -> Controller {
        let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/controllers");
        let log = std::fs::File::create(log).unwrap();
        let child = Command::new(py)
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
    let py = match osken_python() {
        Ok(p) => p,
        Err(why) => {
            skip(test, &why);
            return;
        }
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
