//! `nfvswitch plan`: every `examples/plan-*.toml` plans (table, JSON,
//! chart), and bad topology files are refused with `file:line: field`.

use nfv_testutil::TempDir;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_nfvswitch"))
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().unwrap()
}

fn plan_examples() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(examples())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with("plan-") && n.ends_with(".toml")
        })
        .collect();
    v.sort();
    v
}

/// `name` in the test's own directory (removed when the test ends).
fn tmp(dir: &TempDir, name: &str) -> PathBuf {
    dir.0.join(name)
}

#[test]
fn every_plan_example_plans() {
    let files = plan_examples();
    // The seeds' shapes: ns and ew on 2 x 10G and on 40G Gen3 x8.
    assert!(files.len() >= 4, "{files:?}");
    for f in &files {
        let f = f.to_str().unwrap();
        let out = run(&["plan", f]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{f}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("recommendations:"), "{f}: {text}");
        assert!(
            text.contains("built-in default"),
            "{f}: no word on the profile"
        );
        let out = run(&["plan", f, "--json"]);
        assert!(out.status.success(), "{f} --json");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let points = v["plan"]["points"].as_array().unwrap();
        assert!(!points.is_empty(), "{f}");
        for p in points {
            assert_eq!(p["predictions"].as_array().unwrap().len(), 4, "{f}");
            assert!(p["recommended"].is_string(), "{f}: {p}");
        }
    }
}

/// The text table marks core counts the node does not have, and says
/// what that means for the row's rate.
#[test]
fn cores_the_node_lacks_are_marked() {
    let f = examples().join("plan-ew-40g-gen3x8.toml");
    let out = run(&["plan", f.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    let row = text
        .lines()
        .find(|l| l.starts_with("1  switch-one-copy"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(row.contains(" > 2 "), "{row}");
    assert!(
        text.contains(
            "cannot reach the hardware's rate on this node (its 2 switch and 8 VNF cores)"
        ),
        "{text}"
    );
    // A row within the node's cores is not marked.
    let sriov = text.lines().find(|l| l.starts_with("1  sriov")).unwrap();
    assert!(!sriov.contains('>'), "{sriov}");
}

#[test]
fn the_seeds_hairpin_in_the_40g_example() {
    let f = examples().join("plan-ew-40g-gen3x8.toml");
    let out = run(&["plan", f.to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for p in v["plan"]["points"].as_array().unwrap() {
        let n = p["vnfs"].as_u64().unwrap();
        if p["frames"]["size"] != 1518 || n < 2 {
            continue;
        }
        let sriov = &p["predictions"][0];
        assert_eq!(sriov["mode"], "sriov");
        assert_eq!(sriov["bottleneck"], "pcie-link", "N={n}");
        // What the VNFs transmit together: the link's ~46.5 Gbit/s.
        let agg_gbps = sriov["vnf_tx_mpps"].as_f64().unwrap() * 1518.0 * 8.0 / 1e3;
        assert!((agg_gbps - 46.49).abs() < 0.1, "N={n}: {agg_gbps}");
    }
}

#[test]
fn chart_and_profile() {
    let dir = TempDir::new("plan", "chart");
    let f = examples().join("plan-ns-2x10g.toml");
    let png = tmp(&dir, "ns.png");
    let out = run(&[
        "plan",
        f.to_str().unwrap(),
        "--chart",
        png.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    // A profile with the VF marked unavailable: the plan says where the
    // VF figures came from.
    let prof = tmp(&dir, "p.json");
    let mut p = nfv_plan::Profile::builtin();
    p.source = "calibrated".into();
    p.hops.get_mut(&nfv_plan::HopKind::Vf).unwrap().unavailable = Some("no VF here".into());
    std::fs::write(&prof, p.to_json()).unwrap();
    let out = run(&[
        "plan",
        f.to_str().unwrap(),
        "--profile",
        prof.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(
        text.contains("vf: built-in default figures (no VF here)"),
        "{text}"
    );
    std::fs::write(&prof, "{").unwrap();
    let out = run(&[
        "plan",
        f.to_str().unwrap(),
        "--profile",
        prof.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
}

const GOOD: &str = "\
[node]
switch_cores = 2
vnf_cores = 8

[node.nic]
ports = 1
port_gbps = 40
pcie_gen = 3
pcie_lanes = 8
vfs = 16

[service]
vnfs = [1, 2, 4]
shape = \"east-west\"
frames = [64, 1518]
";

#[test]
fn bad_topologies_are_refused_with_file_line_field() {
    let dir = TempDir::new("plan", "bad");
    assert!(
        run(&["plan", write(&dir, "good.toml", GOOD).to_str().unwrap()])
            .status
            .success()
    );
    // (what, replace, with, line, field)
    let rows: &[(&str, &str, &str, usize, &str)] = &[
        (
            "lanes",
            "pcie_lanes = 8",
            "pcie_lanes = 3",
            9,
            "node.nic.pcie_lanes",
        ),
        (
            "gen",
            "pcie_gen = 3",
            "pcie_gen = 6",
            8,
            "node.nic.pcie_gen",
        ),
        ("unknown key", "vfs = 16", "vfz = 16", 10, "node.nic.vfz"),
        (
            "type",
            "port_gbps = 40",
            "port_gbps = \"fast\"",
            7,
            "node.nic.port_gbps",
        ),
        (
            "zero cores",
            "vnf_cores = 8",
            "vnf_cores = 0",
            3,
            "node.vnf_cores",
        ),
        (
            "frame size",
            "frames = [64, 1518]",
            "frames = [64, 9000]",
            15,
            "service.frames[1]",
        ),
        (
            "frame name",
            "frames = [64, 1518]",
            "frames = \"jumbo\"",
            15,
            "service.frames",
        ),
        (
            "N",
            "vnfs = [1, 2, 4]",
            "vnfs = [1, 0]",
            13,
            "service.vnfs[1]",
        ),
        (
            "shape",
            "\"east-west\"",
            "\"diagonal\"",
            14,
            "service.shape",
        ),
        (
            "mixed w/o length",
            "\"east-west\"",
            "\"mixed\"",
            14,
            "service.chain_length",
        ),
        (
            "kind",
            "ports = 1",
            "kind = \"usb\"\nports = 1",
            6,
            "node.nic.kind",
        ),
        (
            "testbed + pcie",
            "ports = 1",
            "kind = \"testbed\"\nports = 1",
            7,
            "node.nic.ports",
        ),
        ("missing", "switch_cores = 2\n", "", 1, "node.switch_cores"),
        (
            "interface",
            "frames = [64, 1518]",
            "frames = [64, 1518]\ninterface = \"pipe\"",
            16,
            "service.interface",
        ),
        (
            "both loads",
            "frames = [64, 1518]",
            "frames = 64\noffered_gbps = 1\noffered_mpps = 1",
            17,
            "service.offered_mpps",
        ),
        (
            "no [service]",
            "[service]\nvnfs = [1, 2, 4]\nshape = \"east-west\"\nframes = [64, 1518]\n",
            "",
            1,
            "service",
        ),
        (
            "no [node.nic]",
            "[node.nic]\nports = 1\nport_gbps = 40\npcie_gen = 3\npcie_lanes = 8\nvfs = 16\n",
            "",
            1,
            "node.nic",
        ),
        (
            "NIC model",
            "vfs = 16",
            "vfs = 16\nnic_model = \"e999\"",
            11,
            "node.nic.nic_model",
        ),
        (
            "VNF polling",
            "frames = [64, 1518]",
            "frames = [64, 1518]\nvnf_poll = \"sometimes\"",
            16,
            "service.vnf_poll",
        ),
    ];
    for &(what, from, to, line, field) in rows {
        assert!(GOOD.contains(from), "{what}: {from:?}");
        let path = write(&dir, "bad.toml", &GOOD.replacen(from, to, 1));
        let out = run(&["plan", path.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{what}: accepted");
        let want = format!("{}:{line}: {field}: ", path.display());
        assert!(err.contains(&want), "{what}: want {want:?} in {err:?}");
    }
    // Not TOML at all: file and line, no field.
    let path = write(&dir, "bad.toml", "[node\n");
    let err = String::from_utf8_lossy(&run(&["plan", path.to_str().unwrap()]).stderr).to_string();
    assert!(err.contains(&format!("{}:1: ", path.display())), "{err}");
}

fn write(dir: &TempDir, name: &str, text: &str) -> PathBuf {
    let p = tmp(dir, name);
    std::fs::write(&p, text).unwrap();
    p
}

/// `--chart` is checked before anything is planned: a format other than
/// PNG, or a path that cannot be written, is refused and nothing is
/// printed; a good path draws a PNG.
#[test]
fn chart_paths_are_checked_before_planning() {
    let f = examples().join("plan-ns-2x10g.toml");
    let dir = TempDir::new("plan", "chart-paths");
    let chart_dir = tmp(&dir, "chart-dir");
    std::fs::create_dir_all(&chart_dir).unwrap();
    // (chart path, the refusal)
    let rows = [
        (
            tmp(&dir, "x.svg"),
            "charts are PNG only; give a path ending in .png",
        ),
        (tmp(&dir, "x"), "charts are PNG only"),
        (tmp(&dir, "no-such-dir/x.png"), "cannot write it"),
        (chart_dir.clone(), "charts are PNG only"),
    ];
    for (chart, want) in rows {
        let out = run(&[
            "plan",
            f.to_str().unwrap(),
            "--chart",
            chart.to_str().unwrap(),
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{}: accepted", chart.display());
        assert!(err.contains(want), "{}: {err}", chart.display());
        assert!(
            out.stdout.is_empty(),
            "{}: planned before refusing",
            chart.display()
        );
    }
    assert!(!tmp(&dir, "x.svg").exists(), "nothing left behind");
}

/// `--explain-topology` lists every key with its unit and default, needs
/// no file, and names the NIC models; a plan without a file says where
/// to look.
#[test]
fn explain_topology_lists_every_key() {
    let out = run(&["plan", "--explain-topology"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for f in nfv_plan::topology::FIELDS {
        assert!(text.contains(f.path), "{}", f.path);
        assert!(text.contains(f.default), "{}", f.path);
    }
    assert!(text.contains("\"xl710\""), "{text}");
    let out = run(&["plan"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--explain-topology") || err.contains("<TOPOLOGY>"),
        "{err}"
    );
}

/// A calibrated profile with a failed point, from a 2-core machine:
/// `plan` says which figures it substituted and that the node has far
/// more cores than the profile's machine.
#[test]
fn plan_says_what_a_calibration_missed() {
    let dir = TempDir::new("plan", "missed");
    let f = examples().join("plan-ew-40g-gen3x8.toml");
    let mut p = nfv_plan::Profile::builtin();
    p.source = "calibrated".into();
    let hop = p.hops.get_mut(&nfv_plan::HopKind::VhostOneCopy).unwrap();
    hop.points.retain(|x| x.size != 1518);
    p.missing.push(nfv_plan::profile::MissingPoint {
        hop: nfv_plan::HopKind::VhostOneCopy,
        size: 1518,
        why: "cannot start VNF 1".into(),
    });
    let prof = tmp(&dir, "missing.json");
    std::fs::write(&prof, p.to_json()).unwrap();
    let out = run(&[
        "plan",
        f.to_str().unwrap(),
        "--profile",
        prof.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("vhost-one-copy 1518 B: calibration failed (cannot start VNF 1)"),
        "{text}"
    );
    assert!(text.contains("2 cores"), "{text}");
}
