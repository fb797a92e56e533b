//! `nfvswitch vnf` as a process, as an operator runs it: a node
//! (`nfvswitch run`) with generator → vhost-user port → sink, and the VNF
//! as a second process on the port's socket. Checks the stats line, the
//! JSON file a demo reads, reconnecting after the node restarts, and a
//! clean stop on SIGTERM with final counters. Every child is killed by
//! PID when the test ends.

mod common;

use common::{BIN, tempdir};
use nfv_testutil::wait_until;
use serde_json::Value;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(20);

struct Proc(Option<Child>);

impl Proc {
    fn spawn(args: &[&str]) -> Proc {
        let c = Command::new(BIN)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn nfvswitch");
        Proc(Some(c))
    }

    fn signal(&self, sig: libc::c_int) {
        if let Some(c) = &self.0 {
            // SAFETY: signals our own child, not yet reaped.
            unsafe { libc::kill(c.id() as libc::pid_t, sig) };
        }
    }

    /// Waits for exit (killing it after `WAIT`); returns (success, stdout,
    /// stderr).
    fn wait(mut self) -> (bool, String, String) {
        let mut c = self.0.take().unwrap();
        let done = wait_until(WAIT, || matches!(c.try_wait(), Ok(Some(_))));
        if !done {
            let _ = c.kill();
        }
        let out = c.wait_with_output().expect("output");
        (
            done && out.status.success(),
            String::from_utf8_lossy(&out.stdout).into(),
            String::from_utf8_lossy(&out.stderr).into(),
        )
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A node: generator (rate-limited) → vhost-user server port → sink.
fn node(dir: &Path) -> Proc {
    let port = format!(
        "type = \"vhost-user\"\nsocket = \"{}/vnf0.sock\"\nmode = \"server\"",
        dir.display()
    );
    node_with(dir, &port)
}

/// The same node with port `vnf0` of another type (`port`: its keys
/// after `id`).
fn node_with(dir: &Path, port: &str) -> Proc {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cfg = format!(
        r#"
flows = ["in_port=1,actions=output:2", "in_port=2,actions=output:3"]
[node]
name = "vnftest{pid}"
control_socket = "{dir}/ctl.sock"
[memory]
frames = 8192
hugepages = "never"
[pmd]
cores = [{core}]
[[port]]
name = "gen0"
id = 1
type = "generator"
rate_pps = 50000
[[port]]
name = "vnf0"
id = 2
{port}
[[port]]
name = "sink0"
id = 3
type = "sink"
"#,
        pid = std::process::id(),
        dir = dir.display(),
        core = cpus - 1
    );
    let path = dir.join("node.toml");
    std::fs::write(&path, cfg).unwrap();
    Proc::spawn(&["--log", "warn", "run", path.to_str().unwrap()])
}

fn json(path: &Path) -> Option<Value> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

#[test]
fn vnf_rejects_bad_options_naming_the_flag() {
    let cases: &[(&[&str], &str)] = &[
        (&["--app", "l2fwd"], "--next-hop: required by --app l2fwd"),
        (
            &["--app", "l2fwd", "--next-hop", "02:00:00:00:00"],
            "--next-hop",
        ),
        (
            &["--ring-size", "1000"],
            "--ring-size: 1000 is not a power of two",
        ),
        (&["--queues", "0"], "--queues"),
    ];
    for (args, want) in cases {
        let out = Command::new(BIN)
            .args(["vnf", "--socket", "/tmp/nfvswitch-vnf-never.sock"])
            .args(*args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} accepted");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn vnf_process_forwards_reconnects_and_stops_on_sigterm() {
    let dir = tempdir("fwd");
    let stats = dir.join("vnf.json");
    let sock = dir.join("vnf0.sock");
    // The VNF first: it waits for the switch's socket (client mode).
    let vnf = Proc::spawn(&[
        "--log",
        "warn",
        "vnf",
        "--socket",
        sock.to_str().unwrap(),
        "--app",
        "macswap",
        "--ring-size",
        "256",
        "--stats-every",
        "0.2",
        "--json-stats",
        stats.to_str().unwrap(),
    ]);
    let n1 = node(&dir);
    let rx = |min: u64| {
        let stats = &stats;
        move || {
            json(stats).is_some_and(|v| {
                v["connected"] == true && v["total"]["rx_packets"].as_u64().unwrap_or(0) >= min
            })
        }
    };
    assert!(
        wait_until(WAIT, rx(1000)),
        "VNF forwarded nothing: {:?}",
        json(&stats)
    );
    // The node restarts: the VNF reconnects and forwards again.
    n1.signal(libc::SIGKILL);
    let _ = n1.wait();
    assert!(
        wait_until(WAIT, || json(&stats)
            .is_some_and(|v| v["connected"] == false)),
        "VNF did not notice the node going away"
    );
    let before = json(&stats).unwrap()["total"]["rx_packets"]
        .as_u64()
        .unwrap();
    let _ = std::fs::remove_file(&sock);
    let n2 = node(&dir);
    assert!(
        wait_until(WAIT, rx(before + 1000)),
        "VNF did not reconnect: {:?}",
        json(&stats)
    );
    let v = json(&stats).unwrap();
    assert_eq!(v["connections"], 2);
    assert_eq!(v["app"], "macswap");
    for k in ["rx_mpps", "tx_mpps", "rx_gbps", "tx_gbps"] {
        assert!(v[k].is_number(), "{k} in {v}");
    }
    vnf.signal(libc::SIGTERM);
    let (ok, out, err) = vnf.wait();
    assert!(ok, "VNF did not exit cleanly on SIGTERM: {err}");
    assert!(out.contains("vnf macswap: rx "), "no stats line: {out}");
    assert!(out.contains("Mpps") && out.contains("Gbps"), "{out}");
    assert!(
        out.contains("final counters") && out.contains("2 session(s)"),
        "{out}"
    );
    n2.signal(libc::SIGTERM);
    let _ = n2.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

/// The same VNF over memif: the node's memif port serves it; it forwards,
/// comes back after the node restarts, and reports like the vhost one.
#[test]
fn vnf_over_memif_forwards_and_reconnects() {
    let dir = tempdir("memif");
    let stats = dir.join("vnf.json");
    let sock = dir.join("vnf0.memif");
    let port = format!(
        "type = \"memif\"\nsocket = \"{}\"\ninterface_id = 5",
        sock.display()
    );
    let vnf = Proc::spawn(&[
        "--log",
        "warn",
        "vnf",
        "--memif",
        sock.to_str().unwrap(),
        "--memif-id",
        "5",
        "--app",
        "macswap",
        "--ring-size",
        "256",
        "--stats-every",
        "0.2",
        "--json-stats",
        stats.to_str().unwrap(),
    ]);
    let n1 = node_with(&dir, &port);
    let rx = |min: u64| {
        let stats = &stats;
        move || {
            json(stats).is_some_and(|v| {
                v["connected"] == true
                    && v["total"]["rx_packets"].as_u64().unwrap_or(0) >= min
                    && v["total"]["tx_packets"].as_u64().unwrap_or(0) >= min
            })
        }
    };
    assert!(
        wait_until(WAIT, rx(1000)),
        "VNF forwarded nothing over memif: {:?}",
        json(&stats)
    );
    n1.signal(libc::SIGKILL);
    let _ = n1.wait();
    assert!(
        wait_until(WAIT, || json(&stats)
            .is_some_and(|v| v["connected"] == false)),
        "VNF did not notice the node going away"
    );
    let before = json(&stats).unwrap()["total"]["rx_packets"]
        .as_u64()
        .unwrap();
    let n2 = node_with(&dir, &port);
    assert!(
        wait_until(WAIT, rx(before + 1000)),
        "VNF did not reconnect over memif: {:?}",
        json(&stats)
    );
    assert_eq!(json(&stats).unwrap()["connections"], 2);
    vnf.signal(libc::SIGTERM);
    let (ok, out, err) = vnf.wait();
    assert!(ok, "VNF did not exit cleanly on SIGTERM: {err}");
    assert!(out.contains("vnf macswap: rx "), "no stats line: {out}");
    n2.signal(libc::SIGTERM);
    let (_, _, node_err) = n2.wait();
    assert!(!node_err.contains("panicked"), "{node_err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `nfvswitch ctl --socket SOCK --json ARGS...`: the parsed answer, or the
/// error text.
fn ctl(sock: &Path, args: &[&str]) -> Result<Value, String> {
    let out = Command::new(BIN)
        .args(["ctl", "--json", "--socket", sock.to_str().unwrap()])
        .args(args)
        .output()
        .expect("run ctl");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into());
    }
    serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())
}

/// A fast_failover group in front of two VNF processes (primary and
/// backup): traffic goes to the primary while it is connected, and to the
/// backup once the primary's process is killed — `is_live` follows the
/// vhost-user connection, so no rule changes. Prints how long the switch
/// took after the kill; the bound asserted is a loaded machine's, not the
/// figure.
#[test]
fn a_fast_failover_group_moves_traffic_to_the_backup_vnf_when_the_primary_dies() {
    failover("failover", Failure::Killed, Kind::FastFailover);
}

/// A select group over two VNF instances with watch ports: 64 flows
/// spread over both; once one instance is killed, its flows go to the
/// other (OVS skips a select bucket whose watch port is down) and none
/// reach the dead one.
#[test]
fn a_select_group_moves_a_dead_instances_flows_to_the_others() {
    failover("selectdead", Failure::Killed, Kind::Select);
}

/// As above, the primary's process stopped (SIGSTOP) instead: still
/// connected, it takes no packets, and after a while with no room in its
/// rings the port is not live (`nfv_vhost`'s `stall.rs`); once it runs
/// again (SIGCONT) its traffic comes back at the end of the hold.
#[test]
fn a_fast_failover_group_moves_traffic_off_a_vnf_that_stopped_polling() {
    failover("failstop", Failure::Stopped, Kind::FastFailover);
}

/// The group in front of the two VNFs.
#[derive(PartialEq)]
enum Kind {
    /// Primary and backup.
    FastFailover,
    /// Two instances sharing the flows.
    Select,
}

/// How the primary VNF fails.
#[derive(PartialEq)]
enum Failure {
    Killed,
    Stopped,
}

fn failover(tag: &str, how: Failure, kind: Kind) {
    let dir = tempdir(tag);
    let sock = |n: u32| dir.join(format!("vnf{n}.sock"));
    let vhost = |n: u32| {
        format!(
            "type = \"vhost-user\"\nsocket = \"{}\"\nmode = \"server\"",
            sock(n).display()
        )
    };
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cfg = format!(
        r#"
flows = ["in_port=2,actions=output:4", "in_port=3,actions=output:5"]
[node]
name = "failover{pid}"
control_socket = "{dir}/ctl.sock"
[memory]
frames = 8192
hugepages = "never"
[pmd]
cores = [{core}]
[[port]]
name = "gen0"
id = 1
type = "generator"
rate_pps = 20000
flows = {flows}
[[port]]
name = "primary"
id = 2
{primary}
[[port]]
name = "backup"
id = 3
{backup}
[[port]]
name = "via-primary"
id = 4
type = "sink"
[[port]]
name = "via-backup"
id = 5
type = "sink"
"#,
        pid = std::process::id(),
        dir = dir.display(),
        core = cpus - 1,
        flows = if kind == Kind::Select { 64 } else { 1 },
        primary = vhost(1),
        backup = vhost(2),
    );
    let path = dir.join("node.toml");
    std::fs::write(&path, cfg).unwrap();
    let node = Proc::spawn(&["--log", "warn", "run", path.to_str().unwrap()]);
    let ctl_sock = dir.join("ctl.sock");
    assert!(wait_until(WAIT, || ctl_sock.exists()), "node did not start");
    let vnf = |n: u32| {
        Proc::spawn(&[
            "--log",
            "warn",
            "vnf",
            "--socket",
            sock(n).to_str().unwrap(),
            "--ring-size",
            "256",
        ])
    };
    let primary = vnf(1);
    let _backup = vnf(2);
    let connected = |name: &str| {
        ctl(&ctl_sock, &["show", "ports"]).is_ok_and(|v| {
            v.as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == name && p["info"]["connected"] == "true")
        })
    };
    assert!(
        wait_until(WAIT, || connected("primary") && connected("backup")),
        "VNFs did not connect: {:?}",
        ctl(&ctl_sock, &["show", "ports"])
    );
    let group_type = match kind {
        Kind::FastFailover => "fast_failover",
        Kind::Select => "select",
    };
    ctl(
        &ctl_sock,
        &[
            "add-group",
            &format!(
                "group_id=1,type={group_type},bucket=watch_port:2,output:2,\
                 bucket=watch_port:3,output:3"
            ),
        ],
    )
    .unwrap();
    ctl(&ctl_sock, &["add-flow", "in_port=1,actions=group:1"]).unwrap();
    let sent_by = |sink: &str| -> u64 {
        ctl(&ctl_sock, &["show", "ports"])
            .ok()
            .and_then(|v| {
                v.as_array()?
                    .iter()
                    .find(|p| p["name"] == sink)
                    .and_then(|p| p["tx"]["packets"].as_u64())
            })
            .unwrap_or(0)
    };
    assert!(
        wait_until(WAIT, || sent_by("via-primary") > 2000),
        "nothing through the primary"
    );
    let backup_before = sent_by("via-backup");
    if kind == Kind::FastFailover {
        assert_eq!(
            backup_before, 0,
            "the backup idles while the primary is live"
        );
    } else {
        assert!(
            wait_until(WAIT, || sent_by("via-backup") > 500),
            "the select group sends nothing to the second instance"
        );
    }
    let backup_before = sent_by("via-backup");
    let killed = std::time::Instant::now();
    primary.signal(if how == Failure::Killed {
        libc::SIGKILL
    } else {
        libc::SIGSTOP
    });
    assert!(
        wait_until(WAIT, || sent_by("via-backup") > backup_before),
        "traffic did not move to the backup"
    );
    let moved = killed.elapsed();
    let primary_after = sent_by("via-primary");
    assert!(
        wait_until(WAIT, || sent_by("via-backup") > backup_before + 2000),
        "the backup does not carry the traffic"
    );
    assert!(
        sent_by("via-primary") <= primary_after + 64,
        "traffic still reaches the dead primary"
    );
    if kind == Kind::Select {
        // All 64 flows now reach the survivor, not only its half: over a
        // second it carries near the generator's whole 20,000 pps.
        let t0 = std::time::Instant::now();
        let b0 = sent_by("via-backup");
        std::thread::sleep(std::time::Duration::from_secs(1));
        let rate = (sent_by("via-backup") - b0) as f64 / t0.elapsed().as_secs_f64();
        assert!(
            rate > 15_000.0,
            "the survivor carries {rate:.0} pps of 20,000"
        );
    }
    let groups = ctl(&ctl_sock, &["dump-groups"]).unwrap();
    let buckets = &groups[0]["buckets"];
    assert!(
        buckets[0]["packets"].as_u64() > Some(2000) && buckets[1]["packets"].as_u64() > Some(2000),
        "bucket counters: {groups}"
    );
    println!(
        "{group_type}: the other VNF carried traffic {:.1} ms after the first was {} \
         (polled through ctl)",
        moved.as_secs_f64() * 1e3,
        if how == Failure::Killed {
            "killed"
        } else {
            "stopped"
        }
    );
    if how == Failure::Stopped {
        let stalled_at = sent_by("via-primary");
        primary.signal(libc::SIGCONT);
        assert!(
            wait_until(WAIT, || sent_by("via-primary") > stalled_at + 2000),
            "traffic did not come back to the primary once it ran again: {:?}",
            ctl(&ctl_sock, &["show", "ports"])
        );
        let shown = ctl(&ctl_sock, &["show", "ports"]).unwrap();
        let stalls = shown
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "primary")
            .and_then(|p| p["info"]["stalls"].as_str().map(String::from))
            .unwrap_or_default();
        assert_ne!(stalls, "0", "no stall counted: {shown}");
        primary.signal(libc::SIGKILL);
    }
    node.signal(libc::SIGTERM);
    let _ = node.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A chain hop naming a primary and a backup, and one naming two
/// instances: the node installs a fast_failover and a select group and
/// steers through them (no VNF needs to be connected to see that).
#[test]
fn chain_hops_with_standby_and_scale_out_become_groups() {
    let dir = tempdir("chaingroups");
    let vhost = |n: u32| {
        format!(
            "[[port]]\nname = \"vnf{n}\"\nid = {}\ntype = \"vhost-user\"\nsocket = \"{}\"\nmode = \"server\"\n",
            10 + n,
            dir.join(format!("v{n}.sock")).display()
        )
    };
    let cfg = format!(
        r#"
[node]
name = "chaingroups{pid}"
control_socket = "{dir}/ctl.sock"
[memory]
frames = 8192
hugepages = "never"
[[port]]
name = "gen0"
id = 1
type = "generator"
rate_pps = 1000
[[port]]
name = "out"
id = 2
type = "sink"
{v1}{v2}{v3}{v4}
[[chain]]
name = "fw"
ingress = "gen0"
vnfs = [{{ primary = "vnf1", backup = "vnf2" }}, {{ select = ["vnf3", "vnf4"] }}]
egress = "out"
"#,
        pid = std::process::id(),
        dir = dir.display(),
        v1 = vhost(1),
        v2 = vhost(2),
        v3 = vhost(3),
        v4 = vhost(4),
    );
    let path = dir.join("node.toml");
    std::fs::write(&path, cfg).unwrap();
    let node = Proc::spawn(&["--log", "warn", "run", path.to_str().unwrap()]);
    let ctl_sock = dir.join("ctl.sock");
    assert!(wait_until(WAIT, || ctl_sock.exists()), "node did not start");
    let groups = ctl(&ctl_sock, &["dump-groups"]).unwrap().to_string();
    assert!(
        groups.contains("fast_failover") && groups.contains("select"),
        "{groups}"
    );
    let flows = ctl(&ctl_sock, &["dump-flows"]).unwrap().to_string();
    let g1 = nfv_config::chain_group_id(0, 1);
    let g2 = nfv_config::chain_group_id(0, 2);
    for want in [
        format!("in_port=1,actions=group:{g1}"),
        format!("in_port=11,actions=group:{g2}"),
        format!("in_port=12,actions=group:{g2}"),
        "in_port=13,actions=output:2".to_string(),
        "in_port=14,actions=output:2".to_string(),
    ] {
        assert!(flows.contains(&want), "no {want} in {flows}");
    }
    // Nobody is connected: the failover group has no live bucket, and
    // the generator's packets are dropped there, counted.
    node.signal(libc::SIGTERM);
    let (_, _, err) = node.wait();
    assert!(!err.contains("panicked"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
