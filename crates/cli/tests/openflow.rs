//! A running node under OpenFlow: `ovs-ofctl -O OpenFlow13` (Open vSwitch
//! 3.1's) programs it over `punix:` and `ptcp:`, the rules it adds carry
//! the generator's traffic (their counters and the ports' move), and a
//! long-lived `ovs-ofctl monitor` connection — a controller as far as the
//! switch can tell — hears of a rule's timeout (`FLOW_REMOVED`) and of a
//! port added at run time (`PORT_STATUS`).

mod common;

use common::{BIN, tempdir};
use nfv_testutil::wait_until;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(60);

struct Node {
    child: Child,
    dir: std::path::PathBuf,
}

impl Node {
    /// `nfvswitch run` on `cfg` (written to `dir/node.toml`), once every
    /// path of `ready` exists.
    fn start(dir: &Path, cfg: &str, ready: &[&Path]) -> Node {
        let path = dir.join("node.toml");
        std::fs::write(&path, cfg).unwrap();
        let child = Command::new(BIN)
            .args(["--log", "warn", "run", path.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let node = Node {
            child,
            dir: dir.to_path_buf(),
        };
        assert!(
            wait_until(WAIT, || ready.iter().all(|p| p.exists())),
            "node did not start"
        );
        node
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn ofctl(target: &str, cmd: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new("ovs-ofctl")
        .args(["-O", "OpenFlow13", "--timeout", "30", cmd, target])
        .args(args)
        .output()
        .expect("run ovs-ofctl");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// [`ofctl`], which must succeed; its output.
fn ofctl_ok(target: &str, cmd: &str, args: &[&str]) -> String {
    let (ok, out) = ofctl(target, cmd, args);
    assert!(ok, "ovs-ofctl {cmd} {args:?}: {out}");
    out
}

fn ctl(sock: &Path, args: &[&str]) -> String {
    let out = Command::new(BIN)
        .args(["ctl", "--socket", sock.to_str().unwrap()])
        .args(args)
        .output()
        .expect("run ctl");
    assert!(
        out.status.success(),
        "ctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// n_packets of the dump-flows line containing `needle`.
fn packets_of(dump: &str, needle: &str) -> u64 {
    dump.lines()
        .find(|l| l.contains(needle))
        .and_then(|l| l.split("n_packets=").nth(1))
        .and_then(|t| t.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[test]
fn ovs_ofctl_programs_a_running_node_and_a_monitor_hears_its_events() {
    let test = "ovs_ofctl_programs_a_running_node_and_a_monitor_hears_its_events";
    if Command::new("ovs-ofctl").arg("--version").output().is_err() {
        nfv_testutil::skip(test, "ovs-ofctl not installed (Debian openvswitch-common)");
        return;
    }
    let dir = tempdir("openflow");
    let ctl_sock = dir.join("ctl.sock");
    let of_sock = dir.join("of.sock");
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cfg = format!(
        r#"
flows = ["priority=10,in_port=1,actions=output:2"]
[node]
name = "of{pid}"
control_socket = "{ctl}"
[memory]
frames = 8192
hugepages = "never"
[pmd]
cores = [{core}]
[openflow]
listen = ["punix:{of}", "ptcp:0"]
datapath_id = "00000000000000a1"
[[port]]
name = "gen0"
id = 1
type = "generator"
rate_pps = 20000
[[port]]
name = "sink2"
id = 2
type = "sink"
[[port]]
name = "sink3"
id = 3
type = "sink"
"#,
        pid = std::process::id(),
        ctl = ctl_sock.display(),
        of = of_sock.display(),
        core = cpus - 1,
    );
    let _node = Node::start(&dir, &cfg, &[&of_sock, &ctl_sock]);
    let unix = format!("unix:{}", of_sock.display());
    let shown = ctl(&ctl_sock, &["show", "controllers"]);
    let tcp_port = shown
        .split("ptcp:")
        .nth(1)
        .and_then(|t| t.split(':').next())
        .unwrap_or_else(|| panic!("no ptcp listener shown: {shown}"))
        .to_string();
    let tcp = format!("tcp:127.0.0.1:{tcp_port}");

    let (ok, show) = ofctl(&unix, "show", &[]);
    assert!(ok, "{show}");
    assert!(show.contains("dpid:00000000000000a1"), "{show}");
    assert!(
        show.contains(" 1(gen0):") && show.contains(" 3(sink3):"),
        "{show}"
    );

    // A controller stays connected and listens. (`monitor` serves a
    // unixctl socket, under OVS_RUNDIR. What it heard is read in full
    // once it is stopped; the switch's own counters say when it has
    // been sent.)
    let mut monitor = Command::new("ovs-ofctl")
        .env("OVS_RUNDIR", &dir)
        .args(["-O", "OpenFlow13", "monitor", &unix])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let heard = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    // It prints what it hears on stderr.
    let stdout = monitor.stderr.take().unwrap();
    let reader = {
        let heard = heard.clone();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let mut h = heard.lock().unwrap();
                // The first 256 KiB: packet-ins come by the thousand.
                if h.len() < 1 << 18 {
                    h.push_str(&line);
                    h.push('\n');
                }
            }
        })
    };
    assert!(
        wait_until(WAIT, || ctl(&ctl_sock, &["show", "controllers"])
            .contains("role=")),
        "the monitor never showed up: {}",
        ctl(&ctl_sock, &["show", "controllers"])
    );

    // Over TCP: a rule above the config's sends the generator's traffic
    // to port 3 instead; its counters move, port 3's too.
    ofctl_ok(
        &tcp,
        "add-flow",
        &["priority=20,in_port=1,actions=output:3"],
    );
    assert!(
        wait_until(WAIT, || packets_of(
            &ofctl(&tcp, "dump-flows", &[]).1,
            "priority=20"
        ) > 1000),
        "the OpenFlow rule carried nothing: {}",
        ofctl(&tcp, "dump-flows", &[]).1
    );
    let (ok, ports) = ofctl(&unix, "dump-ports", &["3"]);
    assert!(
        ok && ports.contains("port  3:") && !ports.contains("tx pkts=0,"),
        "{ports}"
    );
    // The config's rule is in the same table, and the same tools see it.
    let dump = ofctl(&unix, "dump-flows", &[]).1;
    assert!(
        dump.contains("priority=10,in_port=1 actions=output:2"),
        "{dump}"
    );
    assert!(ctl(&ctl_sock, &["dump-flows"]).contains("priority=20,in_port=1"));

    // A rule with a hard timeout and send_flow_rem: its removal reaches
    // the monitor.
    ofctl_ok(
        &unix,
        "add-flow",
        &["priority=30,hard_timeout=1,send_flow_rem,in_port=1,actions=output:2"],
    );
    // A port added at run time: PORT_STATUS.
    ctl(
        &ctl_sock,
        &["add-port", "name=\"sink4\",id=4,type=\"sink\""],
    );
    assert!(
        wait_until(WAIT, || !ofctl(&unix, "dump-flows", &[])
            .1
            .contains("priority=30")),
        "the hard timeout did not remove the rule"
    );
    let async_sent = || -> u64 {
        ctl(&ctl_sock, &["show", "controllers"])
            .split("async_sent=")
            .nth(1)
            .and_then(|t| t.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    assert!(
        wait_until(WAIT, || async_sent() >= 2),
        "no flow removed or port status sent: {}",
        ctl(&ctl_sock, &["show", "controllers"])
    );

    // A rule a controller asked to hear of, deleted through ctl: announced.
    ofctl_ok(
        &unix,
        "add-flow",
        &["priority=35,send_flow_rem,in_port=3,actions=output:2"],
    );
    ctl(&ctl_sock, &["del-flows", "priority=35,in_port=3"]);
    assert!(
        wait_until(WAIT, || async_sent() >= 3),
        "no flow removed sent for a ctl delete: {}",
        ctl(&ctl_sock, &["show", "controllers"])
    );
    // A rule that goes with its group: announced as a group delete.
    ofctl_ok(&unix, "add-group", &["group_id=7,type=all,bucket=output:2"]);
    ofctl_ok(
        &unix,
        "add-flow",
        &["priority=36,send_flow_rem,in_port=3,actions=group:7"],
    );
    ctl(&ctl_sock, &["del-groups", "group_id=7"]);
    assert!(
        wait_until(WAIT, || async_sent() >= 4),
        "no flow removed sent for a group delete: {}",
        ctl(&ctl_sock, &["show", "controllers"])
    );

    // Table miss to the controller: with only a priority-0 rule sending
    // to CONTROLLER, the generator's packets reach the monitor as
    // packet-ins, at most the packet-in rate (1000/s) of them.
    ofctl_ok(&unix, "del-flows", &[]);
    ofctl_ok(&unix, "add-flow", &["priority=0,actions=CONTROLLER:128"]);
    assert!(
        wait_until(WAIT, || async_sent() >= 200),
        "no packet-ins sent: {}",
        ctl(&ctl_sock, &["show", "controllers"])
    );
    // A packet from the controller out of port 4 (which nothing else
    // sends to): a broadcast ARP request.
    let frame =
        "ffffffffffff020000000001080600010800060400010200000000010a0000010000000000000a000002";
    ofctl_ok(
        &unix,
        "packet-out",
        &[&format!(
            "in_port=controller packet={frame} actions=output:4"
        )],
    );
    assert!(
        wait_until(WAIT, || ofctl(&unix, "dump-ports", &["4"])
            .1
            .contains("tx pkts=1,")),
        "the packet-out did not leave port 4: {}",
        ofctl(&unix, "dump-ports", &["4"]).1
    );
    let shown = ctl(&ctl_sock, &["show", "controllers"]);
    // SAFETY: signals our own child, not yet reaped.
    unsafe { libc::kill(monitor.id() as libc::pid_t, libc::SIGTERM) };
    let _ = monitor.wait();
    let _ = reader.join();
    let seen = heard.lock().unwrap().clone();
    for event in [
        "OFPT_FLOW_REMOVED",
        "reason=hard",
        "reason=delete",
        "reason=group_delete",
        "OFPT_PORT_STATUS",
        "ADD: 4(sink4)",
        "OFPT_PACKET_IN",
        "in_port=1 (via no_match)",
    ] {
        assert!(
            seen.contains(event),
            "the monitor did not print {event}: {seen}"
        );
    }
    assert!(shown.contains("packet-out: refused=0 sent=1"), "{shown}");
    // 20,000 misses a second against a 1,000/s limit: most are refused.
    let figure = |name: &str| -> u64 {
        shown
            .split(&format!("{name}="))
            .nth(1)
            .and_then(|t| t.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    assert!(
        figure("queued") > 0 && figure("dropped_queue") > 0,
        "{shown}"
    );
}

/// `rx pkts` of port `name` from `ctl --json show ports`.
fn tx_packets(sock: &Path, name: &str) -> u64 {
    let out = Command::new(BIN)
        .args([
            "ctl",
            "--json",
            "--socket",
            sock.to_str().unwrap(),
            "show",
            "ports",
        ])
        .output()
        .expect("run ctl");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    v.as_array()
        .and_then(|a| a.iter().find(|p| p["name"] == name))
        .and_then(|p| p["tx"]["packets"].as_u64())
        .unwrap_or(0)
}

/// A controller that connects, says hello and then never reads again,
/// while one port floods table misses to it: the other port's traffic
/// keeps its rate (the PMD never waits on the controller path), and
/// what could not go up is counted.
#[test]
fn a_controller_that_stops_reading_slows_no_other_port() {
    let dir = tempdir("ofstall");
    let ctl_sock = dir.join("ctl.sock");
    let of_sock = dir.join("of.sock");
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Port 1 floods misses (every packet to the controller), port 3's
    // packets have a rule to port 4. Rates are paced, so the figure to
    // keep is the offered rate, on a busy machine too.
    let rate = 20_000u64;
    let cfg = format!(
        r#"
flows = ["priority=0,actions=controller", "priority=10,in_port=3,actions=output:4"]
[node]
name = "ofstall{pid}"
control_socket = "{ctl}"
[memory]
frames = 8192
hugepages = "never"
[pmd]
cores = [{core}]
[openflow]
listen = ["punix:{of}"]
packet_in_rate = 1000000
packet_in_burst = 100000
[[port]]
name = "flood"
id = 1
type = "generator"
rate_pps = 200000
[[port]]
name = "gen"
id = 3
type = "generator"
rate_pps = {rate}
[[port]]
name = "out"
id = 4
type = "sink"
"#,
        pid = std::process::id(),
        ctl = ctl_sock.display(),
        of = of_sock.display(),
        core = cpus - 1,
    );
    let _node = Node::start(&dir, &cfg, &[&of_sock, &ctl_sock]);
    // The stalled controller: HELLO (1.3, version bitmap), then silence.
    let mut stalled = std::os::unix::net::UnixStream::connect(&of_sock).unwrap();
    use std::io::Write;
    stalled
        .write_all(&[4, 0, 0, 16, 0, 0, 0, 1, 0, 1, 0, 8, 0, 0, 0, 0x10])
        .unwrap();
    // Queues fill: the connection's send queue, then the socket.
    let shown = || ctl(&ctl_sock, &["show", "controllers"]);
    let figure = |text: &str, name: &str| -> u64 {
        text.split(&format!("{name}="))
            .nth(1)
            .and_then(|t| t.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    assert!(
        wait_until(WAIT, || {
            let s = shown();
            figure(&s, "dropped_slow_controller") + figure(&s, "dropped_queue") > 1000
        }),
        "no packet-in was counted as dropped: {}",
        shown()
    );
    // Meanwhile port 3 → 4 runs at its offered rate.
    let t0 = std::time::Instant::now();
    let before = tx_packets(&ctl_sock, "out");
    std::thread::sleep(Duration::from_secs(3));
    let got = tx_packets(&ctl_sock, "out") - before;
    let achieved = got as f64 / t0.elapsed().as_secs_f64();
    println!(
        "port 3 -> 4 while port 1 floods a stalled controller: {achieved:.0} of {rate} packets/s\n{}",
        shown()
    );
    assert!(
        achieved >= 0.9 * rate as f64,
        "the other port fell to {achieved:.0} of {rate} packets/s\n{}",
        shown()
    );
    drop(stalled);
}
