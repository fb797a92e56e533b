//! `nfvswitch calibrate` fails loudly: a point that fails makes it exit 1
//! naming the point (no profile written) unless `--keep-going`, which
//! writes the profile with the point recorded as missing.
//!
//! The failure is a real one, made cheap: with `TMPDIR` set to a plain
//! file the test bed cannot make its socket directory, so every point
//! fails at once, before any process starts. One short real calibration
//! (one hop type, 64 B, 1 s per run) checks the recorded placement.

use nfv_plan::{HopKind, Profile};
use nfv_testutil::TempDir;
use std::path::PathBuf;
use std::process::{Command, Output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_nfvswitch"))
}

/// A fresh directory of this test's own, removed when the test ends.
fn dir(tag: &str) -> TempDir {
    TempDir::new("calibrate", tag)
}

/// Calibrates memif-copy at 64 and 1518 B into `dir/profile.json` with
/// `TMPDIR` a plain file, so that every point fails.
fn failing_calibrate(dir: &std::path::Path, extra: &[&str]) -> (Output, PathBuf) {
    let not_a_dir = dir.join("not-a-directory");
    std::fs::write(&not_a_dir, "").unwrap();
    let out = dir.join("profile.json");
    let output = bin()
        .env("TMPDIR", &not_a_dir)
        .args(["calibrate", "--hops", "memif-copy", "--sizes", "64,1518"])
        .arg("--out")
        .arg(&out)
        .args(extra)
        .output()
        .unwrap();
    (output, out)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn a_failed_point_exits_1_naming_every_failed_point() {
    let d = dir("refuse");
    let (output, profile) = failing_calibrate(&d.0, &[]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "stderr: {stderr}");
    let lines = [
        "nfvswitch: 2 of 2 calibration point(s) failed, so no profile was written:",
        "  memif-copy 64 B: north-south N=1 run: cannot start the test bed: ",
        "  memif-copy 1518 B: north-south N=1 run: cannot start the test bed: ",
        "--keep-going writes the profile anyway, with these points recorded as missing \
         (`nfvswitch plan` then says which figures it takes from other sizes)",
    ];
    for (got, want) in stderr.lines().zip(lines) {
        assert!(
            got.starts_with(want),
            "{got:?} does not start with {want:?}"
        );
    }
    assert_eq!(stderr.lines().count(), lines.len(), "stderr: {stderr}");
    assert!(!profile.exists(), "a profile was written");
    let stdout = text(&output.stdout);
    assert!(stdout.contains("memif-copy    64 B: FAILED: "), "{stdout}");
}

#[test]
fn keep_going_writes_the_profile_with_the_points_missing() {
    let d = dir("keep-going");
    let (output, profile) = failing_calibrate(&d.0, &["--keep-going"]);
    let stdout = text(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        text(&output.stderr)
    );
    assert!(
        stdout.contains("2 of 2 point(s) recorded as missing; `nfvswitch plan` says which"),
        "{stdout}"
    );
    assert!(
        stdout.contains("\n  memif-copy 1518 B: north-south N=1 run: "),
        "{stdout}"
    );
    let p = Profile::from_json(&std::fs::read_to_string(&profile).unwrap()).unwrap();
    let missing: Vec<(HopKind, usize)> = p.missing.iter().map(|m| (m.hop, m.size)).collect();
    assert_eq!(
        missing,
        [(HopKind::MemifCopy, 64), (HopKind::MemifCopy, 1518)]
    );
    let why = p.hops[&HopKind::MemifCopy]
        .unavailable
        .as_deref()
        .unwrap_or("");
    assert!(
        why.starts_with("every run failed: 64 B: north-south N=1 run: "),
        "{why}"
    );
    assert_eq!(p.placement.map(|pl| pl.vnfs), Some(2));
}

#[test]
fn help_lists_keep_going() {
    let output = bin().args(["calibrate", "--help"]).output().unwrap();
    let stdout = text(&output.stdout);
    assert!(output.status.success());
    assert!(
        stdout.contains("--keep-going") && stdout.contains("recorded as missing"),
        "{stdout}"
    );
}

#[test]
fn a_short_calibration_records_the_machine_and_placement() {
    let d = dir("short");
    let profile = d.0.join("profile.json");
    let output = bin()
        .args([
            "calibrate",
            "--hops",
            "vhost-one-copy",
            "--sizes",
            "64",
            "--seconds",
            "1",
        ])
        .arg("--out")
        .arg(&profile)
        .output()
        .unwrap();
    let stdout = text(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        text(&output.stderr)
    );
    let p = Profile::from_json(&std::fs::read_to_string(&profile).unwrap()).unwrap();
    assert!(p.missing.is_empty(), "{:?}", p.missing);
    let placement = p.placement.expect("placement recorded");
    assert_eq!(placement.vnfs, 2);
    assert!(placement.pmd_cores + placement.vnf_cores <= p.machine.cores.max(1));
    assert_eq!(
        stdout.contains("warning: the east-west runs start 2 VNFs"),
        placement.vnfs_shared_cores(),
        "{stdout}"
    );
}
