//! `examples/memif-pvp.toml` as its header says to run it: the node
//! (`nfvswitch run`) and the DPDK testpmd command quoted in the file,
//! with only the paths moved into a temp dir. Frames from the generator
//! must cross testpmd and reach the receiver; the memif ports must show
//! their peer and no errors; testpmd killed and started again must be
//! served again. SKIPPED without `dpdk-testpmd` (Debian package
//! `dpdk-dev`). Every process is killed by PID, also on panic.

mod common;

use common::{BIN, tempdir};
use nfv_testutil::wait_until;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const TEST: &str = "memif::the_memif_pvp_example_runs_with_its_testpmd_command";
const WAIT: Duration = Duration::from_secs(30);

struct Killed {
    child: Child,
    runtime: Option<PathBuf>,
}

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(r) = &self.runtime {
            let _ = std::fs::remove_dir_all(r);
        }
    }
}

fn example() -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/memif-pvp.toml");
    std::fs::read_to_string(p).unwrap()
}

/// The testpmd command in the example's header, as arguments.
fn testpmd_command(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        let l = line.trim_start_matches('#').trim();
        if l.starts_with("dpdk-testpmd") {
            inside = true;
        }
        if !inside {
            continue;
        }
        words.extend(
            l.trim_end_matches('\\')
                .split_whitespace()
                .map(String::from),
        );
        if !l.ends_with('\\') {
            break;
        }
    }
    words
}

fn ctl(sock: &Path, args: &[&str]) -> Option<Value> {
    let out = Command::new(BIN)
        .args(["ctl", "--json", "-s"])
        .arg(sock)
        .args(args)
        .output()
        .ok()?;
    serde_json::from_slice(&out.stdout).ok()
}

fn port<'a>(ports: &'a Value, name: &str) -> &'a Value {
    ports
        .as_array()
        .and_then(|a| a.iter().find(|p| p["name"] == name))
        .unwrap_or(&Value::Null)
}

fn info<'a>(ports: &'a Value, name: &str, key: &str) -> &'a str {
    port(ports, name)["info"][key].as_str().unwrap_or("")
}

fn start_testpmd(args: &[String], dir: &Path, prefix: &str) -> Killed {
    let log = std::fs::File::create(dir.join(format!("{prefix}.log"))).unwrap();
    let child = Command::new(&args[0])
        .args(args[1..].iter().map(|a| {
            if a.starts_with("--file-prefix=") {
                format!("--file-prefix={prefix}")
            } else {
                a.clone()
            }
        }))
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    Killed {
        child,
        runtime: Some(PathBuf::from("/var/run/dpdk").join(prefix)),
    }
}

#[test]
fn the_memif_pvp_example_runs_with_its_testpmd_command() {
    if nfv_testutil::which("dpdk-testpmd").is_none() {
        return nfv_testutil::skip(TEST, "dpdk-testpmd not installed (Debian package dpdk-dev)");
    }
    let dir = tempdir("memif-pvp");
    let moved = format!("{}/", dir.display());
    let text = example();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let node_cfg = text
        .replace("/tmp/nfvswitch-", &moved)
        .replace("hugepages = \"auto\"", "hugepages = \"never\"")
        .replace("cores = [1]", &format!("cores = [{}]", cpus - 1));
    let cfg_path = dir.join("memif-pvp.toml");
    std::fs::write(&cfg_path, node_cfg).unwrap();
    let sock = dir.join("memif-pvp.sock");
    let node_log = std::fs::File::create(dir.join("node.log")).unwrap();
    let _node = Killed {
        child: Command::new(BIN)
            .args(["--log", "warn", "run"])
            .arg(&cfg_path)
            .stdout(node_log.try_clone().unwrap())
            .stderr(node_log)
            .spawn()
            .unwrap(),
        runtime: None,
    };
    assert!(
        wait_until(WAIT, || ctl(&sock, &["show", "ports"]).is_some()),
        "the node never answered"
    );
    let args: Vec<String> = testpmd_command(&text)
        .into_iter()
        .map(|a| a.replace("/tmp/nfvswitch-", &moved))
        .collect();
    assert!(
        args.len() > 5 && args[0] == "dpdk-testpmd",
        "no testpmd command in the example's header: {args:?}"
    );
    let prefix = format!("nfvmemifpvp{}", std::process::id());
    let log = dir.join(format!("{prefix}.log"));
    let tp = start_testpmd(&args, &dir, &prefix);
    let read_log = || std::fs::read_to_string(&log).unwrap_or_default();
    let connected = |name: &str| {
        ctl(&sock, &["show", "ports"]).is_some_and(|p| info(&p, name, "connected") == "true")
    };
    assert!(
        wait_until(WAIT, || connected("p1") && connected("p2")),
        "testpmd never connected to both ports:\n{}",
        read_log()
    );
    let received = || {
        ctl(&sock, &["show", "ports"]).map_or(0, |p| {
            port(&p, "rx0")["tx"]["packets"].as_u64().unwrap_or(0)
        })
    };
    let start = received();
    assert!(
        wait_until(WAIT, || received() >= start + 20_000),
        "frames do not reach the receiver through testpmd:\n{:?}\n{}",
        ctl(&sock, &["show", "ports"]),
        read_log()
    );
    let ports = ctl(&sock, &["show", "ports"]).unwrap();
    for p in ["p1", "p2"] {
        assert!(info(&ports, p, "peer").contains("DPDK"), "{p}: {ports}");
        for c in [
            "bad_desc",
            "bad_chain",
            "too_big",
            "empty",
            "bad_head",
            "memory_faults",
        ] {
            assert_eq!(info(&ports, p, c), "0", "{p} {c}: {ports}");
        }
    }
    // testpmd goes away and comes back: the ports follow.
    drop(tp);
    assert!(
        wait_until(WAIT, || !connected("p1") && !connected("p2")),
        "the ports did not notice testpmd was killed"
    );
    let _tp2 = start_testpmd(&args, &dir, &format!("{prefix}b"));
    assert!(
        wait_until(WAIT, || connected("p1") && connected("p2")),
        "the restarted testpmd was not served"
    );
    let start = received();
    assert!(
        wait_until(WAIT, || received() >= start + 20_000),
        "no frames after the restart"
    );
    let ports = ctl(&sock, &["show", "ports"]).unwrap();
    assert_eq!(info(&ports, "p1", "reconnects"), "1", "{ports}");
    let _ = std::fs::remove_dir_all(&dir);
}
