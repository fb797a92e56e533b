//! The notes on hand-made profiles and topologies.

use super::*;
use crate::profile::HopPoint;
use crate::topology;
use std::path::Path;

/// A calibrated profile of a 4-core machine with each VNF on a core of
/// its own: memif-copy measured at 64 and 512 B (inner = edge), vhost-copy
/// at 64, 512 and 1518 B.
fn profile() -> Profile {
    let mut p = Profile::builtin();
    p.source = "calibrated".into();
    p.machine.cores = 4;
    p.placement = Some(Placement {
        pmd_cores: 2,
        vnf_cores: 2,
        vnfs: 2,
    });
    p.hops.clear();
    let point = |size| HopPoint {
        size,
        edge_cycles: Some(300.0),
        inner_cycles: Some(300.0),
        vnf_cycles: Some(250.0),
        ..Default::default()
    };
    let hop = |sizes: &[usize]| HopProfile {
        unavailable: None,
        points: sizes.iter().map(|&s| point(s)).collect(),
    };
    p.hops.insert(HopKind::MemifCopy, hop(&[64, 512]));
    p.hops.insert(HopKind::VhostCopy, hop(&[64, 512, 1518]));
    p
}

fn missing(hop: HopKind, size: usize) -> MissingPoint {
    MissingPoint {
        hop,
        size,
        why: "cannot start VNF 1".into(),
    }
}

/// A test-bed node with `cores` switch and `cores` VNF cores, planning
/// `frames` over `interface`.
fn topology(cores: u32, frames: &str, interface: &str) -> Topology {
    let text = format!(
        "[node]\nswitch_cores = {cores}\nvnf_cores = {cores}\n[node.nic]\nkind = \"testbed\"\n\
         [service]\nvnfs = 2\nshape = \"east-west\"\nframes = {frames}\ninterface = \"{interface}\"\n"
    );
    topology::parse(Path::new("t.toml"), &text).unwrap()
}

type Change = fn(&mut Profile);

struct Row {
    what: &'static str,
    change: Change,
    /// (switch cores = VNF cores, frames, interface)
    node: (u32, &'static str, &'static str),
    /// Exactly these notes.
    want: &'static [&'static str],
}

const ROWS: &[Row] = &[
    Row {
        what: "a profile like the node, nothing missing: no note",
        change: |_| {},
        node: (4, "[64, 1518]", "memif"),
        want: &[],
    },
    Row {
        what: "the size the plan needs failed: held flat from the nearest",
        change: |p| p.missing.push(missing(HopKind::MemifCopy, 1518)),
        node: (2, "[64, 1518]", "memif"),
        want: &[
            "memif-copy 1518 B: calibration failed (cannot start VNF 1); the edge, inner \
                 and VNF figures are the 512 B ones (the nearest measured size, held flat)",
        ],
    },
    Row {
        what: "a size between two measured ones failed: interpolated",
        change: |p| {
            p.hops.get_mut(&HopKind::MemifCopy).unwrap().points[1].size = 1518;
            p.missing.push(missing(HopKind::MemifCopy, 512));
        },
        node: (2, "[512]", "memif"),
        want: &[
            "memif-copy 512 B: calibration failed (cannot start VNF 1); the edge, inner \
                 and VNF figures are interpolated between 64 B and 1518 B",
        ],
    },
    Row {
        what: "IMIX's 594 B would have used the failed 1518 B point",
        change: |p| p.missing.push(missing(HopKind::MemifCopy, 1518)),
        node: (2, "\"imix\"", "memif"),
        want: &[
            "memif-copy 594 B: the 1518 B calibration point failed (cannot start VNF 1); the \
             edge, inner and VNF figures are the 512 B ones (the nearest measured size, held flat)",
            "memif-copy 1518 B: calibration failed (cannot start VNF 1); the edge, inner and \
             VNF figures are the 512 B ones (the nearest measured size, held flat)",
        ],
    },
    Row {
        what: "only the figures the failed point would have given are named",
        change: |p| {
            let points = &mut p.hops.get_mut(&HopKind::MemifCopy).unwrap().points;
            points.push(HopPoint {
                size: 1518,
                vnf_cycles: Some(400.0),
                ..Default::default()
            });
            p.missing.push(missing(HopKind::MemifCopy, 1518));
        },
        node: (2, "[1518]", "memif"),
        want: &[
            "memif-copy 1518 B: calibration failed (cannot start VNF 1); the edge and \
                 inner figures are the 512 B ones (the nearest measured size, held flat)",
        ],
    },
    Row {
        what: "a failed point of a hop type the plan does not read: no note",
        change: |p| p.missing.push(missing(HopKind::MemifCopy, 1518)),
        node: (2, "[1518]", "vhost"),
        want: &[],
    },
    Row {
        what: "a failed point of a hop type marked unavailable: the plan's own note says it",
        change: |p| {
            p.hops.get_mut(&HopKind::MemifCopy).unwrap().unavailable =
                Some("every run failed".into());
            p.missing.push(missing(HopKind::MemifCopy, 1518));
        },
        node: (2, "[1518]", "memif"),
        want: &[],
    },
    Row {
        what: "a 16 + 16 core node on a 4-core profile with inner = edge",
        change: |_| {},
        node: (16, "[64]", "memif"),
        want: &[
            "the profile was calibrated on a machine with 4 cores; this node has 32 (16 \
                 switch + 16 VNF): on a machine that small the switch and the VNFs wait for \
                 each other's cores, which inflates the per-hop cycle figures, so the predicted \
                 rates for this node are likely too low (and the cores needed too high); \
                 calibrate on a machine with cores like the node's",
        ],
    },
    Row {
        what: "a 2-core profile whose inner hops cost 10x its edge hops, VNFs sharing a core",
        change: |p| {
            p.machine.cores = 2;
            p.placement = Some(Placement {
                pmd_cores: 1,
                vnf_cores: 1,
                vnfs: 2,
            });
            for h in p.hops.values_mut() {
                for pt in &mut h.points {
                    pt.inner_cycles = Some(3000.0);
                }
            }
        },
        node: (8, "[64]", "vhost"),
        want: &[
            "the profile was calibrated on a machine with 2 cores; this node has 16 (8 switch \
             + 8 VNF): on a machine that small the switch and the VNFs wait for each other's \
             cores, which inflates the per-hop cycle figures (in this profile an inner hop \
             costs 10.0x an edge hop, though both move a packet from one port to another), so \
             the predicted rates for this node are likely too low (and the cores needed too \
             high); calibrate on a machine with cores like the node's",
            "VNFs shared cores during calibration (up to 2 VNFs ran on 1 core(s) of their \
             own): the inner-hop and VNF figures include waiting for the shared core and \
             overstate what a hop costs on a node with a core per VNF",
        ],
    },
    Row {
        what: "exactly twice the profile's cores is not far more",
        change: |_| {},
        node: (4, "[64]", "vhost"),
        want: &[],
    },
    Row {
        what: "VNFs on the PMDs' cores during calibration",
        change: |p| {
            p.placement = Some(Placement {
                pmd_cores: 1,
                vnf_cores: 0,
                vnfs: 1,
            })
        },
        node: (2, "[64]", "vhost"),
        want: &[
            "VNFs shared cores during calibration (up to 1 VNFs ran on the switch's 1 PMD \
                 core(s)): the inner-hop and VNF figures include waiting for the shared core \
                 and overstate what a hop costs on a node with a core per VNF",
        ],
    },
    Row {
        what: "the built-in profile: its own note in the plan says it is not of this node",
        change: |p| *p = Profile::builtin(),
        node: (16, "[64]", "vhost"),
        want: &[],
    },
];

#[test]
fn notes_table() {
    for row in ROWS {
        let mut p = profile();
        (row.change)(&mut p);
        let (cores, frames, interface) = row.node;
        let got = notes(&p, &topology(cores, frames, interface));
        assert_eq!(got, row.want, "{}", row.what);
    }
}

#[test]
fn used_points_follow_the_interface_nic_and_frames() {
    let t = topology(2, "[1518, \"imix\"]", "memif");
    let want: Vec<(HopKind, usize)> = [HopKind::MemifOneCopy, HopKind::MemifCopy]
        .into_iter()
        .flat_map(|k| [64, 594, 1518].map(|s| (k, s)))
        .collect();
    assert_eq!(used_points(&t), want);
    let pci = topology::parse(
        Path::new("t.toml"),
        "[node]\nswitch_cores = 1\nvnf_cores = 2\n[node.nic]\nports = 1\nport_gbps = 10\n\
         pcie_gen = 3\npcie_lanes = 8\nvfs = 4\n[service]\nvnfs = 1\nshape = \"north-south\"\n\
         frames = [64]\n",
    )
    .unwrap();
    let kinds: Vec<HopKind> = used_points(&pci).iter().map(|&(k, _)| k).collect();
    assert_eq!(
        kinds,
        [
            HopKind::VhostOneCopy,
            HopKind::VhostCopy,
            HopKind::Afxdp,
            HopKind::Vf
        ]
    );
}
