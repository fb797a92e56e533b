//! `nfvswitch sweep` end to end, short: one VNF, 64 B frames, one second
//! per run, both topologies, into a temporary directory. Checks the files
//! exist, the JSON parses and every run delivered traffic.

use serde_json::Value;
use std::process::Command;
use std::time::Instant;

const BIN: &str = env!("CARGO_BIN_EXE_nfvswitch");

/// Runs a short sweep (1 s windows after 0.5 s of warm-up, 64 B) with
/// `args` into a fresh temporary directory named after `tag`; asserts it
/// succeeded and returns (directory, stdout).
fn short_sweep(tag: &str, args: &[&str]) -> (std::path::PathBuf, String) {
    let dir = std::env::temp_dir().join(format!("nfvswitch-sweep-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new(BIN)
        .args([
            "sweep",
            "--sizes",
            "64",
            "--seconds",
            "1",
            "--warmup",
            "0.5",
        ])
        .args(args)
        .arg("--out")
        .arg(&dir)
        .output()
        .expect("run nfvswitch sweep");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    (dir, stdout)
}

#[test]
fn sweep_writes_json_markdown_and_charts() {
    let t0 = Instant::now();
    let (dir, stdout) = short_sweep("test", &["--vnfs", "1", "--topology", "ns,ew"]);
    eprintln!("sweep took {:.1} s", t0.elapsed().as_secs_f64());
    // One progress line per run.
    assert!(stdout.contains("[1/2] ns N=1   64 B:"), "{stdout}");
    assert!(stdout.contains("[2/2] ew N=1   64 B:"), "{stdout}");

    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("sweep.json")).unwrap()).unwrap();
    assert!(json["machine"]["cpus"].as_u64().unwrap() >= 1);
    assert!(json["machine"]["tsc_ghz"].as_f64().unwrap() > 0.0);
    assert!(json["finished"].is_string());
    let runs = json["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for (run, topo) in runs.iter().zip(["ns", "ew"]) {
        assert_eq!(run["topology"], topo);
        assert_eq!(
            (run["vnfs"].as_u64(), run["size"].as_u64()),
            (Some(1), Some(64))
        );
        let m = &run["result"];
        assert!(m["mpps"].as_f64().unwrap() > 0.0, "{run}");
        assert!(m["gbps"].as_f64().unwrap() > 0.0, "{run}");
        assert!(!m["samples_mpps"].as_array().unwrap().is_empty());
        assert!(m["vnfs"][0]["rx_mpps"].as_f64().unwrap() > 0.0, "{run}");
        assert!(m["pmd"]["busy_percent"].as_f64().unwrap() > 0.0, "{run}");
    }

    let md = std::fs::read_to_string(dir.join("sweep.md")).unwrap();
    assert!(md.contains("| N | 64 B |"), "{md}");
    for png in ["mpps_vs_n.png", "gbps_vs_n.png"] {
        let bytes = std::fs::read(dir.join(png)).unwrap();
        assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "{png}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sweep_rejects_bad_arguments() {
    for args in [
        &["sweep", "--vnfs", "9"][..],
        &["sweep", "--sizes", "32"],
        &["sweep", "--topology", "mesh"],
        &["sweep", "--app", "nat"],
        &["sweep", "--poll", "lazy"],
        &["sweep", "--interface", "pipe"],
    ] {
        let t0 = Instant::now();
        let out = Command::new(BIN).args(args).output().unwrap();
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(
            t0.elapsed().as_secs() < 5,
            "{args:?} was not refused at once"
        );
    }
}

/// The same test bed with memif between the switch and the VNFs: an
/// east-west chain of two VNFs (memif → VNF → memif → VNF → memif), each
/// VNF forwarding.
#[test]
fn sweep_runs_chains_over_memif() {
    let (dir, _) = short_sweep(
        "memif",
        &["--interface", "memif", "--vnfs", "2", "--topology", "ew"],
    );
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("sweep.json")).unwrap()).unwrap();
    assert_eq!(json["parameters"]["interface"], "memif", "{json}");
    let run = &json["runs"][0];
    let m = &run["result"];
    assert!(m["mpps"].as_f64().unwrap() > 0.0, "{run}");
    for v in 0..2 {
        assert!(
            m["vnfs"][v]["rx_mpps"].as_f64().unwrap() > 0.0,
            "VNF {v}: {run}"
        );
    }
    let md = std::fs::read_to_string(dir.join("sweep.md")).unwrap();
    assert!(md.contains("over memif"), "{md}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--pmds 1,2`: the same point with one PMD, then two (each on a core of
/// its own; the VNF shares a core when the machine has fewer than three):
/// both deliver, the second reports two PMDs on two cores, and the report
/// has the scaling table (saying when it cannot show scaling).
#[test]
fn sweep_over_pmd_counts_reports_each_pmd() {
    let cpus = nfv_config::CpuSet::of_this_process();
    if cpus.len() < 2 {
        println!(
            "SKIPPED sweep_over_pmd_counts_reports_each_pmd: this process may run on one CPU ({cpus})"
        );
        return;
    }
    let (dir, stdout) = short_sweep(
        "pmds",
        &["--vnfs", "1", "--topology", "ns", "--pmds", "1,2"],
    );
    assert!(stdout.contains("[2/2] ns N=1   64 B 2 PMDs:"), "{stdout}");
    if cpus.len() < 3 {
        assert!(stdout.contains("cannot show scaling with PMDs"), "{stdout}");
    }
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("sweep.json")).unwrap()).unwrap();
    let runs = json["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{json}");
    for (run, k) in runs.iter().zip([1u64, 2]) {
        assert_eq!(run["pmds"].as_u64(), Some(k), "{run}");
        let m = &run["result"];
        assert!(m["mpps"].as_f64().unwrap() > 0.0, "{run}");
        let per = m["per_pmd"].as_array().unwrap();
        assert_eq!(per.len() as u64, k, "{run}");
        let mut cores: Vec<u64> = per.iter().filter_map(|p| p["core"].as_u64()).collect();
        cores.dedup();
        assert_eq!(cores.len() as u64, k, "one core per PMD: {run}");
        let rx: f64 = per.iter().filter_map(|p| p["rx_mpps"].as_f64()).sum();
        assert!(rx > 0.0, "{run}");
    }
    let md = std::fs::read_to_string(dir.join("sweep.md")).unwrap();
    assert!(md.contains("## Scaling with PMD threads"), "{md}");
    assert!(md.contains("| 1 PMD | 2 PMDs |"), "{md}");
    std::fs::remove_dir_all(&dir).unwrap();
}
