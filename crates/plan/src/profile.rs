//! The switch cost profile: what a hop costs on one node, in TSC cycles
//! per packet, per hop type and frame size, with the machine it was taken
//! on. `nfvswitch calibrate` writes one (JSON); [`Profile::builtin`] is
//! used when there is none.
//!
//! Per frame size a hop type has up to four figures ([`HopPoint`]):
//! - `edge_cycles`: the switch PMD's busy cycles per *delivered* packet
//!   (one that reached the far end of the chain) on a hop between a VNF
//!   port of this type and a port that is not a VNF (the test bed's
//!   generator and sink: half of what `nfvswitch sweep`'s north-south N=1
//!   costs per delivered packet). Under the test bed's unpaced generator
//!   this includes the work spent on packets the chain dropped (made,
//!   copied or queued, then refused by a full ring), so it is the cost of
//!   a hop of a saturated switch under overload, not of an idle one;
//! - `inner_cycles`: the same for a hop from one VNF to the next (derived
//!   from the east-west N=2 chain: three hops, two of them edges);
//! - `vnf_cycles`: CPU cycles the VNF process spends per packet it
//!   forwards on this interface;
//! - `vnf_core_share`: for the record, the share of one core the VNF
//!   process got in the north-south N=1 run (CPU time / wall time); below
//!   1 when the VNF waited on the switch or shared its core;
//! - `limit_mpps`: a per-port rate the hop did not exceed although
//!   neither the PMD nor the VNF was saturated (the ring exchange between
//!   two cores limits it), if one was seen.
//!
//! A profile also records the points calibration could not measure
//! ([`MissingPoint`]: [`HopProfile::at`] then interpolates over, or holds
//! flat from, the sizes that were measured, and
//! [`crate::profile_notes`] says so) and how calibration placed the switch
//! and the VNFs on the machine's cores ([`Placement`]).
//!
//! For the NIC-facing types (`afxdp`, `afpacket`) `edge_cycles` is what a
//! packet's receive and transmit on such a port cost the PMD on top of
//! the generator and sink they replace. For `vf` only `vnf_cycles` means
//! anything (the switch is not involved).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Hop and interface types of the profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HopKind {
    /// vhost-user, frames a guest sends reach the next guest in one copy.
    VhostOneCopy,
    /// vhost-user through the switch's packet pool (two copies).
    VhostCopy,
    /// memif in one copy.
    MemifOneCopy,
    /// memif through the switch's pool.
    MemifCopy,
    /// AF_XDP port on a NIC (the switch's physical port).
    Afxdp,
    /// AF_PACKET port on a NIC.
    Afpacket,
    /// An SR-IOV virtual function driven by the VNF itself.
    Vf,
}

impl HopKind {
    pub const ALL: [HopKind; 7] = [
        HopKind::VhostOneCopy,
        HopKind::VhostCopy,
        HopKind::MemifOneCopy,
        HopKind::MemifCopy,
        HopKind::Afxdp,
        HopKind::Afpacket,
        HopKind::Vf,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            HopKind::VhostOneCopy => "vhost-one-copy",
            HopKind::VhostCopy => "vhost-copy",
            HopKind::MemifOneCopy => "memif-one-copy",
            HopKind::MemifCopy => "memif-copy",
            HopKind::Afxdp => "afxdp",
            HopKind::Afpacket => "afpacket",
            HopKind::Vf => "vf",
        }
    }
}

impl std::fmt::Display for HopKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

impl std::str::FromStr for HopKind {
    type Err = String;
    fn from_str(s: &str) -> Result<HopKind, String> {
        HopKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s.trim())
            .ok_or_else(|| {
                let names: Vec<&str> = HopKind::ALL.iter().map(|k| k.as_str()).collect();
                format!("{s:?} is not one of {}", names.join(", "))
            })
    }
}

/// One frame size of one hop type.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HopPoint {
    /// Frame size, bytes.
    pub size: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edge_cycles: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inner_cycles: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vnf_cycles: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_mpps: Option<f64>,
    /// What the calibration run delivered (for the record).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_mpps: Option<f64>,
    /// The PMD's busy share during it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pmd_busy_percent: Option<f64>,
    /// The PMD's busy cycles per packet it *received* (generator and VNF
    /// ports together) during it, for the record (profiles before the
    /// per-delivered figures used this as `edge_cycles`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pmd_cycles_per_received: Option<f64>,
    /// Share of one core the VNF process got during it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vnf_core_share: Option<f64>,
}

/// A hop type: measured points, or why it could not be measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HopProfile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
    #[serde(default)]
    pub points: Vec<HopPoint>,
}

/// Which figure of a [`HopPoint`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Figure {
    Edge,
    Inner,
    Vnf,
    Limit,
}

impl Figure {
    fn of(self, p: &HopPoint) -> Option<f64> {
        match self {
            Figure::Edge => p.edge_cycles,
            Figure::Inner => p.inner_cycles,
            Figure::Vnf => p.vnf_cycles,
            Figure::Limit => p.limit_mpps,
        }
    }
}

impl HopProfile {
    /// (size, value) of every point that has `fig`, smallest size first.
    fn measured(&self, fig: Figure) -> Vec<(f64, f64)> {
        let mut pts: Vec<(f64, f64)> = self
            .points
            .iter()
            .filter_map(|p| fig.of(p).map(|v| (p.size as f64, v)))
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        pts
    }

    /// The sizes of the points that have `fig`, smallest first.
    pub fn measured_sizes(&self, fig: Figure) -> Vec<usize> {
        self.measured(fig)
            .iter()
            .map(|&(s, _)| s as usize)
            .collect()
    }

    /// The measured sizes [`HopProfile::at`] takes `fig` at `size` from
    /// ([`sources_among`] the sizes that have it).
    pub fn sources(&self, size: usize, fig: Figure) -> Vec<usize> {
        sources_among(&self.measured_sizes(fig), size)
    }

    /// The figure at `size`, interpolated linearly between the measured
    /// sizes that have it and held flat beyond them.
    pub fn at(&self, size: usize, fig: Figure) -> Option<f64> {
        let pts = self.measured(fig);
        let s = size as f64;
        let (first, last) = (pts.first()?, pts.last()?);
        if s <= first.0 {
            return Some(first.1);
        }
        if s >= last.0 {
            return Some(last.1);
        }
        pts.windows(2).find(|w| s <= w[1].0).map(|w| {
            let t = (s - w[0].0) / (w[1].0 - w[0].0);
            w[0].1 + t * (w[1].1 - w[0].1)
        })
    }
}

/// Which of the measured `sizes` (ascending) [`HopProfile::at`] takes a
/// figure at `size` from: `[size]` when measured there, the nearest one
/// when `size` is beyond the measured range (held flat), the two around
/// it when interpolated, none when nothing was measured.
pub fn sources_among(sizes: &[usize], size: usize) -> Vec<usize> {
    let (Some(&first), Some(&last)) = (sizes.first(), sizes.last()) else {
        return Vec::new();
    };
    if sizes.contains(&size) {
        return vec![size];
    }
    if size < first {
        return vec![first];
    }
    if size > last {
        return vec![last];
    }
    sizes
        .windows(2)
        .find(|w| size < w[1])
        .map_or_else(Vec::new, |w| vec![w[0], w[1]])
}

/// The machine a profile was taken on.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    pub cpu_model: String,
    /// TSC rate: the unit of every cycle figure.
    pub tsc_ghz: f64,
    pub cores: usize,
    pub kernel: String,
    #[serde(default)]
    pub taken_at: String,
    #[serde(default)]
    pub nfvswitch_version: String,
}

/// A point calibration tried and could not measure (`nfvswitch calibrate
/// --keep-going` writes the profile anyway, with these recorded).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MissingPoint {
    pub hop: HopKind,
    /// Frame size, bytes.
    pub size: usize,
    /// Why it failed, as calibrate reported it.
    pub why: String,
}

/// How calibration placed the switch and the VNFs on the machine's
/// cores: figures taken with VNFs sharing cores (with each other or with
/// the switch's PMDs) include the waiting for the shared core.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    /// Cores the switch's PMD threads busy-polled, one each.
    pub pmd_cores: usize,
    /// Cores of the VNFs' own (0: they ran on the PMDs' cores).
    pub vnf_cores: usize,
    /// The most VNFs one calibration run started.
    pub vnfs: usize,
}

impl Placement {
    /// True when some run had more VNFs than the VNFs had cores of their
    /// own.
    pub fn vnfs_shared_cores(&self) -> bool {
        self.vnf_cores < self.vnfs
    }
}

/// A cost profile (`nfvswitch calibrate --out PROFILE.json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// "calibrated" or "built-in default".
    pub source: String,
    pub machine: Machine,
    /// Seconds measured per point.
    #[serde(default)]
    pub seconds_per_point: f64,
    pub hops: BTreeMap<HopKind, HopProfile>,
    /// Points calibration could not measure (profiles written before it
    /// recorded them have none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<MissingPoint>,
    /// Where calibration ran the switch and the VNFs (`None`: not
    /// recorded, as in profiles before it was, and the built-in one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
}

/// Where a figure used by the model came from.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Origin {
    Profile,
    /// The profile lacked it (or marked the hop unavailable): the
    /// built-in default was used.
    Default(HopKind),
}

impl Profile {
    pub const BUILTIN: &'static str = "built-in default";

    /// The default profile: rounded figures of `bench/README.md` from the
    /// development machine (2 vCPUs of an AMD EPYC, TSC ~2.0 GHz) for the
    /// vhost-user and memif hops; rough estimates for the kernel ports
    /// (their bench figures are over veth, dominated by the kernel side);
    /// for the VF an assumed DPDK poll-mode driver forwarding ~25 Mpps per
    /// 2 GHz core. Not measured on the node being planned.
    pub fn builtin() -> Profile {
        // (kind, size, edge, inner, vnf)
        let rows: &[(HopKind, usize, f64, f64, f64)] = &[
            (HopKind::VhostOneCopy, 64, 200.0, 210.0, 260.0),
            (HopKind::VhostOneCopy, 512, 260.0, 270.0, 320.0),
            (HopKind::VhostOneCopy, 1518, 350.0, 380.0, 420.0),
            (HopKind::VhostCopy, 64, 200.0, 220.0, 260.0),
            (HopKind::VhostCopy, 512, 280.0, 320.0, 320.0),
            (HopKind::VhostCopy, 1518, 410.0, 520.0, 420.0),
            (HopKind::MemifOneCopy, 64, 260.0, 270.0, 240.0),
            (HopKind::MemifOneCopy, 512, 400.0, 420.0, 300.0),
            (HopKind::MemifOneCopy, 1518, 740.0, 760.0, 400.0),
            (HopKind::MemifCopy, 64, 250.0, 260.0, 240.0),
            (HopKind::MemifCopy, 512, 420.0, 460.0, 300.0),
            (HopKind::MemifCopy, 1518, 760.0, 860.0, 400.0),
            (HopKind::Afxdp, 64, 150.0, 0.0, 0.0),
            (HopKind::Afxdp, 512, 300.0, 0.0, 0.0),
            (HopKind::Afxdp, 1518, 600.0, 0.0, 0.0),
            (HopKind::Afpacket, 64, 600.0, 0.0, 0.0),
            (HopKind::Afpacket, 512, 800.0, 0.0, 0.0),
            (HopKind::Afpacket, 1518, 1200.0, 0.0, 0.0),
            (HopKind::Vf, 64, 0.0, 0.0, 80.0),
            (HopKind::Vf, 512, 0.0, 0.0, 90.0),
            (HopKind::Vf, 1518, 0.0, 0.0, 110.0),
        ];
        let nz = |v: f64| (v > 0.0).then_some(v);
        let mut hops: BTreeMap<HopKind, HopProfile> = BTreeMap::new();
        for &(k, size, edge, inner, vnf) in rows {
            hops.entry(k).or_default().points.push(HopPoint {
                size,
                edge_cycles: nz(edge),
                inner_cycles: nz(inner),
                vnf_cycles: nz(vnf),
                ..Default::default()
            });
        }
        Profile {
            source: Profile::BUILTIN.into(),
            machine: Machine {
                cpu_model: "AMD EPYC (development VM)".into(),
                tsc_ghz: 2.0,
                cores: 2,
                kernel: "6.x".into(),
                taken_at: "2026-11 (bench/README.md)".into(),
                nfvswitch_version: String::new(),
            },
            seconds_per_point: 0.0,
            hops,
            missing: Vec::new(),
            placement: None,
        }
    }

    /// A figure of `kind` at `size`: from this profile, else from the
    /// built-in default (scaled by the TSC ratio, as cycles).
    pub fn figure(&self, kind: HopKind, size: usize, fig: Figure) -> Option<(f64, Origin)> {
        let own = self
            .hops
            .get(&kind)
            .filter(|h| h.unavailable.is_none())
            .and_then(|h| h.at(size, fig));
        if let Some(v) = own {
            return Some((v, Origin::Profile));
        }
        let b = Profile::builtin();
        let v = b.hops.get(&kind)?.at(size, fig)?;
        // Limits are rates; cycle counts move with the clock.
        let v = match fig {
            Figure::Limit => v,
            _ if self.machine.tsc_ghz > 0.0 => v * self.machine.tsc_ghz / b.machine.tsc_ghz,
            _ => v,
        };
        Some((v, Origin::Default(kind)))
    }

    pub fn from_json(text: &str) -> Result<Profile, String> {
        let p: Profile = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if !(p.machine.tsc_ghz > 0.0 && p.machine.tsc_ghz < 100.0) {
            return Err(format!(
                "machine.tsc_ghz: {} is not a clock rate in GHz",
                p.machine.tsc_ghz
            ));
        }
        Ok(p)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpolation_table() {
        let h = HopProfile {
            unavailable: None,
            points: vec![
                HopPoint {
                    size: 64,
                    edge_cycles: Some(100.0),
                    ..Default::default()
                },
                HopPoint {
                    size: 1518,
                    edge_cycles: Some(400.0),
                    ..Default::default()
                },
                HopPoint {
                    size: 512,
                    edge_cycles: Some(200.0),
                    ..Default::default()
                },
            ],
        };
        // (size, expected): below, at, between, beyond.
        let rows: &[(usize, f64)] = &[
            (60, 100.0),
            (64, 100.0),
            (288, 150.0),
            (512, 200.0),
            (1015, 300.0),
            (9000, 400.0),
        ];
        for &(s, want) in rows {
            assert_eq!(h.at(s, Figure::Edge), Some(want), "size {s}");
        }
        assert_eq!(h.at(64, Figure::Inner), None);
    }

    #[test]
    fn sources_name_the_measured_sizes_of_a_figure() {
        let point = |size, edge| HopPoint {
            size,
            edge_cycles: edge,
            inner_cycles: Some(1.0),
            ..Default::default()
        };
        let h = HopProfile {
            unavailable: None,
            points: vec![
                point(1518, Some(400.0)),
                point(64, Some(100.0)),
                point(512, None),
            ],
        };
        // (size, figure, expected sources): measured, held flat below and
        // above, interpolated, a point without the figure skipped, none.
        let rows: &[(usize, Figure, &[usize])] = &[
            (64, Figure::Edge, &[64]),
            (60, Figure::Edge, &[64]),
            (9000, Figure::Edge, &[1518]),
            (512, Figure::Edge, &[64, 1518]),
            (594, Figure::Inner, &[512, 1518]),
            (1518, Figure::Inner, &[1518]),
            (512, Figure::Vnf, &[]),
        ];
        for &(size, fig, want) in rows {
            assert_eq!(h.sources(size, fig), want, "{size} B {fig:?}");
        }
    }

    #[test]
    fn missing_figures_fall_back_to_the_default_scaled_by_clock() {
        let mut p = Profile::builtin();
        p.source = "calibrated".into();
        p.machine.tsc_ghz = 4.0;
        p.hops.insert(
            HopKind::Afxdp,
            HopProfile {
                unavailable: Some("no NIC".into()),
                points: vec![],
            },
        );
        let (v, o) = p.figure(HopKind::Afxdp, 64, Figure::Edge).unwrap();
        assert_eq!(o, Origin::Default(HopKind::Afxdp));
        assert_eq!(v, 300.0);
        let (v, o) = p.figure(HopKind::VhostCopy, 64, Figure::Edge).unwrap();
        assert_eq!((v, o), (200.0, Origin::Profile));
    }

    #[test]
    fn json_round_trip_and_refusal() {
        let p = Profile::builtin();
        let q = Profile::from_json(&p.to_json()).unwrap();
        assert_eq!(p, q);
        assert!(p.to_json().contains("\"vhost-one-copy\""));
        let bad = p.to_json().replace("\"tsc_ghz\": 2.0", "\"tsc_ghz\": 0.0");
        assert!(Profile::from_json(&bad).unwrap_err().contains("tsc_ghz"));
    }

    #[test]
    fn missing_points_and_placement_round_trip() {
        let mut p = Profile::builtin();
        p.missing.push(MissingPoint {
            hop: HopKind::MemifCopy,
            size: 1518,
            why: "cannot start VNF 1".into(),
        });
        p.placement = Some(Placement {
            pmd_cores: 1,
            vnf_cores: 1,
            vnfs: 2,
        });
        let text = p.to_json();
        assert!(text.contains("\"hop\": \"memif-copy\""), "{text}");
        assert!(text.contains("\"vnf_cores\": 1"), "{text}");
        assert_eq!(Profile::from_json(&text).unwrap(), p);
    }

    /// A profile written before `missing` and `placement` existed (a
    /// calibrated one of that time, cut to one hop) still loads, with
    /// none missing and the placement unknown.
    #[test]
    fn a_profile_without_the_new_fields_loads() {
        let old = r#"{
          "source": "calibrated",
          "machine": {"cpu_model": "AMD EPYC", "tsc_ghz": 2.0, "cores": 2,
                      "kernel": "6.8", "taken_at": "2026-11-20T10:00:00Z",
                      "nfvswitch_version": "0.1.0"},
          "seconds_per_point": 2.0,
          "hops": {"vhost-copy": {"points": [
            {"size": 64, "edge_cycles": 300.0, "inner_cycles": 3100.0,
             "vnf_cycles": 250.0, "vnf_core_share": 0.6}]}}
        }"#;
        let p = Profile::from_json(old).unwrap();
        assert_eq!((p.missing.len(), p.placement), (0, None));
        assert_eq!(
            p.hops[&HopKind::VhostCopy].points[0].inner_cycles,
            Some(3100.0)
        );
        assert!(!p.to_json().contains("missing"), "nothing new is written");
    }

    #[test]
    fn placement_says_when_vnfs_shared_cores() {
        // (PMD cores, VNF cores, VNFs per run, shared?)
        let rows = [
            (1, 1, 2, true),
            (1, 0, 1, true),
            (2, 2, 2, false),
            (6, 2, 2, false),
        ];
        for (pmd_cores, vnf_cores, vnfs, want) in rows {
            let p = Placement {
                pmd_cores,
                vnf_cores,
                vnfs,
            };
            assert_eq!(p.vnfs_shared_cores(), want, "{p:?}");
        }
    }
}
