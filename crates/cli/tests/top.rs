//! `nfvswitch top` against a running node (a child process, gen → sink):
//! `--once` prints one frame with the PMD and port rows at non-zero rates;
//! without a node it fails with a clear message.

use nfv_testutil::wait_until;
use std::process::Command;
use std::time::Duration;

mod common;
use common::{BIN, start};

/// The cells of the row whose `col`-th cell is `key`, below the header
/// line starting with `header`.
fn row<'a>(frame: &'a str, header: &str, col: usize, key: &str) -> Option<Vec<&'a str>> {
    frame
        .lines()
        .skip_while(|l| !l.starts_with(header))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|cells| cells.get(col) == Some(&key))
}

fn num(cells: &[&str], i: usize) -> f64 {
    cells
        .get(i)
        .and_then(|c| c.parse().ok())
        .unwrap_or(f64::NAN)
}

/// PMD 0 forwards and both ports move packets, per the frame.
fn rates_nonzero(frame: &str) -> bool {
    let (Some(pmd), Some(gen0), Some(sink0)) = (
        row(frame, "pmd", 0, "0"),
        row(frame, "port", 1, "gen0"),
        row(frame, "port", 1, "sink0"),
    ) else {
        return false;
    };
    // pmd: index core busy% Mpps ...; port: no name type rxMpps rxGbps txMpps txGbps
    num(&pmd, 3) > 0.0 && num(&gen0, 3) > 0.0 && num(&sink0, 5) > 0.0 && num(&sink0, 6) > 0.0
}

#[test]
fn top_once_and_show_pmd_report_rates_and_pmu() {
    let d = start("top");
    let mut frame = String::new();
    // Rates are the node's one-second samples: wait for one with traffic.
    let ok = wait_until(Duration::from_secs(15), || {
        let out = Command::new(BIN)
            .args(["top", "--once", "--socket"])
            .arg(&d.socket)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "top --once failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        frame = String::from_utf8_lossy(&out.stdout).into_owned();
        rates_nonzero(&frame)
    });
    assert!(
        ok,
        "no frame with non-zero PMD and port rates; last:\n{frame}"
    );
    assert!(
        !frame.contains('\x1b'),
        "--once prints no escapes:\n{frame}"
    );
    // IPC: a number where the PMU counts, else "unsupported" with the
    // reason below the table.
    let pmd = row(&frame, "pmd", 0, "0").unwrap();
    let ipc = pmd[7];
    assert!(
        ipc.parse::<f64>().is_ok_and(|x| x > 0.0)
            || (ipc == "unsupported"
                && frame.lines().any(
                    |l| l.trim_start().starts_with("unsupported") && l.contains("instructions")
                )),
        "IPC cell {ipc:?}:\n{frame}"
    );
    assert!(frame.contains("no chains configured"), "{frame}");

    // `ctl show pmd`: a PMU line per PMD; `--json`: the whole pmu object.
    let ctl = |args: &[&str]| {
        let out = Command::new(BIN)
            .arg("ctl")
            .arg("--socket")
            .arg(&d.socket)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "ctl {args:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let human = ctl(&["show", "pmd"]);
    assert!(
        human.contains("PMU (over ") && human.contains("pmd 0: IPC "),
        "{human}"
    );
    let json: serde_json::Value = serde_json::from_str(&ctl(&["--json", "show", "pmd"])).unwrap();
    let pmu = &json[0]["pmu"];
    assert_eq!(pmu["enabled"], true, "{pmu}");
    let counters = pmu["counters"].as_array().unwrap();
    assert_eq!(counters.len(), 9, "{pmu}");
    for c in counters {
        let ok = (c["total"].is_u64() && c["delta"].is_u64() && c["unsupported"].is_null())
            || (c["total"].is_null() && c["delta"].is_null() && c["unsupported"].is_string());
        assert!(ok, "counter {c}");
    }
    for k in [
        "ipc",
        "cache_miss_pct",
        "llc_misses_per_pkt",
        "dtlb_misses_per_pkt",
        "context_switches_per_s",
    ] {
        let m = &pmu["derived"][k];
        assert!(
            m["value"].is_f64() != m["reason"].is_string(),
            "{k}: a number or a reason: {m}"
        );
    }
    let clock = counters.iter().find(|c| c["name"] == "task-clock").unwrap();
    if clock["unsupported"].is_string() {
        nfv_testutil::skip(
            "top_once_and_show_pmd_report_rates_and_pmu (task-clock part)",
            clock["unsupported"].as_str().unwrap_or(""),
        );
    } else {
        assert!(clock["total"].as_u64().unwrap() > 0, "{clock}");
    }
}

#[test]
fn top_without_a_node_says_so_and_fails() {
    let out = Command::new(BIN)
        .args(["top", "--once", "--socket", "/nonexistent/nfvswitch.sock"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no control socket at /nonexistent/nfvswitch.sock"),
        "{err}"
    );
}
