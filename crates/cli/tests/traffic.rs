//! `nfvswitch ctl show traffic` against a running node and `nfvswitch
//! ndr` on a config, as an operator runs them.

mod common;

use common::{BIN, tempdir};
use nfv_testutil::wait_until;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// gen0 (`gen_keys`) → one rule → rx0, socket in `dir`.
fn config(dir: &Path, tag: &str, gen_keys: &str) -> PathBuf {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let text = format!(
        r#"
flows = ["priority=10,in_port=1,actions=output:2"]
[node]
name = "t{tag}"
control_socket = "{}"
[memory]
frames = 8192
hugepages = "never"
[pmd]
cores = [{}]
[[port]]
name = "gen0"
id = 1
type = "generator"
{gen_keys}
[[port]]
name = "rx0"
id = 2
type = "receiver"
"#,
        dir.join("ctl.sock").display(),
        cpus - 1
    );
    let path = dir.join("node.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn show_traffic_lists_streams_with_latency() {
    let dir = tempdir("show");
    let cfg = config(&dir, "show", "stamp = true\nrate_pps = 50000\ncount = 5000");
    let socket = dir.join("ctl.sock");
    let mut child = Command::new(BIN)
        .args(["--log", "warn", "run"])
        .arg(&cfg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let ctl = |args: &[&str]| {
        Command::new(BIN)
            .arg("ctl")
            .arg("--socket")
            .arg(&socket)
            .args(args)
            .output()
            .unwrap()
    };
    let received = || -> u64 {
        let out = ctl(&["--json", "show", "traffic"]);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        v[0]["streams"][0]["received"].as_u64().unwrap_or(0)
    };
    let done = wait_until(Duration::from_secs(20), || received() == 5000);
    let text = String::from_utf8_lossy(&ctl(&["show", "traffic"]).stdout).to_string();
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(done, "5000 stamped frames never arrived: {text}");
    assert!(text.contains("p99.9 us") && text.contains("rx0"), "{text}");
    let row = text
        .lines()
        .find(|l| l.contains("port 1 q0"))
        .unwrap_or_default();
    let cells: Vec<&str> = row.split_whitespace().collect();
    // receiver, "port", "1", "q0", received, lost, reordered, dups, late, 6 latencies
    assert_eq!(cells.len(), 15, "{text}");
    assert_eq!(&cells[4..9], ["5000", "0", "0", "0", "0"], "{text}");
}

#[test]
fn ndr_search_prints_ndr_and_pdr() {
    let dir = tempdir("ndr");
    let cfg = config(&dir, "ndr", "stamp = true");
    let out = Command::new(BIN)
        .args(["ndr"])
        .arg(&cfg)
        .args([
            "--generator",
            "gen0",
            "--receiver",
            "rx0",
            "--trial-secs",
            "0.2",
            "--max-rate-pps",
            "20000",
            "--min-rate-pps",
            "5000",
            "--resolution",
            "50%",
            "--backlog",
            "0",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{stdout}{stderr}");
    // The search runs from the maximum down and prints both rates. Far
    // below what a PMD forwards, an idle machine finds the maximum
    // loss-free; a busy one can deschedule the PMD long enough within a
    // 0.2 s trial to lose some (seen at load average 7: NDR 0.0125 Mpps),
    // so what is asserted is what holds either way: the first trial runs
    // at the maximum, NDR is loss-free and within the searched range, PDR
    // is at least NDR.
    assert!(stderr.contains("trial  1 [PDR] 0.0200 Mpps"), "{stderr}");
    let rate_of = |label: &str| -> f64 {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(label))
            .unwrap_or_else(|| panic!("no {label:?} line in {stdout}"));
        line[label.len()..]
            .split_whitespace()
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no rate in {line:?}"))
    };
    let ndr = rate_of("NDR (0 loss)");
    let pdr = rate_of("PDR (<= 0.5 % loss)");
    assert!(
        (0.005..=0.02).contains(&ndr),
        "NDR {ndr} Mpps outside 0.005..0.02: {stdout}"
    );
    assert!(
        pdr >= ndr && pdr <= 0.02,
        "PDR {pdr} vs NDR {ndr}: {stdout}"
    );
    let ndr_line = stdout
        .lines()
        .find(|l| l.starts_with("NDR"))
        .unwrap_or_default();
    assert!(ndr_line.contains("lost 0 of"), "NDR is loss-free: {stdout}");

    // Refusals name what is wrong.
    let refuse = |args: &[&str], want: &str| {
        let out = Command::new(BIN)
            .arg("ndr")
            .arg(&cfg)
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(
            !out.status.success() && err.contains(want),
            "{args:?}: {err}"
        );
    };
    refuse(
        &["--generator", "rx0", "--receiver", "rx0"],
        "needs a port of type \"generator\"",
    );
    refuse(
        &["--generator", "gen0", "--receiver", "gen0"],
        "needs a port of type \"receiver\"",
    );
    refuse(
        &["--generator", "nope", "--receiver", "rx0"],
        "no port \"nope\"",
    );
    refuse(
        &[
            "--generator",
            "gen0",
            "--receiver",
            "rx0",
            "--resolution",
            "x",
        ],
        "not a number",
    );
    let plain = config(&dir, "ndr", "stamp = false");
    let out = Command::new(BIN)
        .arg("ndr")
        .arg(&plain)
        .args(["--generator", "gen0", "--receiver", "rx0"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(err.contains("set `stamp = true`"), "{err}");
}
