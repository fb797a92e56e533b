//! The model: for one node, service shape, N and frame mix, what each I/O
//! mode delivers, what binds it and what it needs.
//!
//! Traffic enters from the wire, is split evenly over the service's `P`
//! parallel chains (chain `i` has `L_i` VNFs, `Σ L_i = N`) and leaves by
//! the wire. `T` is the delivered packet rate (all chains together); each
//! mode's `T` is the smallest of these limits ([`Bottleneck`]):
//!
//! | limit | `T ≤` |
//! |---|---|
//! | offered load | what the file offers (default: line rate) |
//! | port speed | `ports × port_gbps / ((F + 20 B preamble and gap) × 8)` |
//! | PCIe link | [`crate::pcie`]: per frame `x` receives and `x` transmits — SR-IOV `x = mean L` (the hairpin), every other mode `x = 1` |
//! | hop limit | `P × limit_mpps` of the VNF hop type (a port's ring exchange), when the profile has one |
//! | switch cores | `switch_cores × Hz / C_sw` |
//! | VNF cores | `vnf_cores × Hz / W` and `P × Hz / max c_v` (a VNF is single-threaded) |
//!
//! with, per delivered packet, averaged over the chains:
//! - `C_sw` — switch cycles: copy and one-copy pay two edge hops
//!   (wire ↔ VNF) and `L − 1` inner hops (VNF → VNF) of the VNF hop type,
//!   plus the NIC port's receive and transmit (AF_XDP) on a PCI NIC;
//!   hybrid pays only the `L − 1` inner one-copy hops; SR-IOV pays none.
//! - `W` — VNF cycles: `Σ c_v` over the chain's VNFs; `c_v` is the VF
//!   figure (SR-IOV), the vhost-user/memif figure (switch modes), and in
//!   hybrid the mean of both for a chain's first and last VNF.
//!
//! For an IMIX every per-packet figure is the packet-weighted mean over
//! its sizes. Cores needed are what carry the rate the hardware allows
//! (the smallest of the first four limits); with an unlimited test bed
//! they are the cores given.
//!
//! Assumptions beyond those of [`crate::pcie`] and [`crate::profile`]:
//! PMD threads scale linearly with cores (rx queues spread evenly);
//! VNFs on shared cores share them perfectly; cycles per packet carry over
//! to a node of another clock rate unchanged; the NIC's ports are all
//! used alike; a VNF uses one VF for both directions.

use crate::pcie::Pcie;
use crate::profile::{Figure, HopKind, Origin, Profile};
use crate::topology::{Frames, Nic, Offered, Topology};
use nfv_vnf_interface::VnfInterface;
use serde::Serialize;
use std::collections::BTreeSet;

/// How the VNFs are connected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Every VNF on its own VF; chains hairpin through the NIC.
    Sriov,
    /// Every hop through nfvswitch, through its packet pool.
    SwitchCopy,
    /// Every hop through nfvswitch, guest to guest in one copy.
    SwitchOneCopy,
    /// VFs for the north-south legs (into a chain's first VNF, out of its
    /// last), nfvswitch (one copy) between the VNFs.
    Hybrid,
}

impl Mode {
    /// Also the tie-break order of the recommendation: fewer software
    /// hops first.
    pub const ALL: [Mode; 4] = [
        Mode::Sriov,
        Mode::Hybrid,
        Mode::SwitchOneCopy,
        Mode::SwitchCopy,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Sriov => "sriov",
            Mode::SwitchCopy => "switch-copy",
            Mode::SwitchOneCopy => "switch-one-copy",
            Mode::Hybrid => "hybrid",
        }
    }
    pub fn describe(self) -> &'static str {
        match self {
            Mode::Sriov => "SR-IOV VFs only",
            Mode::SwitchCopy => "nfvswitch (copy)",
            Mode::SwitchOneCopy => "nfvswitch (one-copy)",
            Mode::Hybrid => "hybrid (VFs north-south, switch east-west)",
        }
    }
}

/// What limits a mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Bottleneck {
    OfferedLoad,
    PortSpeed,
    PcieLink,
    HopLimit,
    SwitchCores,
    VnfCores,
}

impl Bottleneck {
    pub fn as_str(self) -> &'static str {
        match self {
            Bottleneck::OfferedLoad => "offered load",
            Bottleneck::PortSpeed => "port speed",
            Bottleneck::PcieLink => "PCIe link",
            Bottleneck::HopLimit => "hop limit",
            Bottleneck::SwitchCores => "switch cores",
            Bottleneck::VnfCores => "VNF cores",
        }
    }
    /// Limits that cores cannot lift.
    fn is_hardware(self) -> bool {
        matches!(
            self,
            Bottleneck::OfferedLoad
                | Bottleneck::PortSpeed
                | Bottleneck::PcieLink
                | Bottleneck::HopLimit
        )
    }
}

/// One limit and the rate it allows.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Limit {
    pub what: Bottleneck,
    pub mpps: f64,
}

/// One mode at one point.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Prediction {
    pub mode: Mode,
    /// Why the mode cannot run here (then the figures are zero).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
    /// Delivered, all chains together.
    pub mpps: f64,
    pub gbps: f64,
    /// Sum over VNFs of what each transmits (the seeds' GUI aggregate).
    pub vnf_tx_mpps: f64,
    pub bottleneck: Option<Bottleneck>,
    /// Every limit that applies, smallest first.
    pub limits: Vec<Limit>,
    pub switch_cycles_per_packet: f64,
    pub vnf_cycles_per_packet: f64,
    pub switch_cores_needed: u32,
    pub vnf_cores_needed: u32,
    pub vfs_needed: u32,
}

/// Every mode at one (N, frames).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Point {
    pub vnfs: u32,
    pub frames: Frames,
    pub chains: Vec<u32>,
    pub predictions: Vec<Prediction>,
    pub recommended: Option<Mode>,
    pub why: String,
}

/// The plan of a topology file.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Plan {
    pub topology: String,
    pub profile: String,
    pub tsc_ghz: f64,
    /// Where figures came from, and what the model could not use.
    pub notes: Vec<String>,
    pub points: Vec<Point>,
}

/// Per-packet figures of a frame mix, with where they came from.
struct Costs<'a> {
    profile: &'a Profile,
    mix: Vec<(usize, f64)>,
    origins: BTreeSet<Origin>,
}

impl Costs<'_> {
    fn get(&mut self, kind: HopKind, fig: Figure) -> Option<f64> {
        let mut sum = 0.0;
        for &(size, w) in &self.mix {
            let (v, o) = self.profile.figure(kind, size, fig)?;
            self.origins.insert(o);
            sum += v * w;
        }
        Some(sum)
    }
}

/// Plans every (N, frames) of `t` with `profile`.
pub fn plan(t: &Topology, profile: &Profile) -> Plan {
    let tsc_ghz = t.node.tsc_ghz.unwrap_or(profile.machine.tsc_ghz);
    let mut origins = BTreeSet::new();
    let mut points = Vec::new();
    for &frames in &t.service.frames {
        for &n in &t.service.vnfs {
            let mut costs = Costs {
                profile,
                mix: frames.mix(),
                origins: BTreeSet::new(),
            };
            let chains = t.service.shape.chains(n);
            let predictions: Vec<Prediction> = Mode::ALL
                .iter()
                .map(|&m| predict(t, &mut costs, tsc_ghz * 1e9, frames, &chains, m))
                .collect();
            origins.append(&mut costs.origins);
            let (recommended, why) = recommend(&predictions);
            points.push(Point {
                vnfs: n,
                frames,
                chains,
                predictions,
                recommended,
                why,
            });
        }
    }
    let mut notes = Vec::new();
    if profile.source == Profile::BUILTIN {
        notes.push(
            "no profile given: the built-in default profile (figures of the development \
             machine in bench/README.md, not of this node; run `nfvswitch calibrate`)"
                .to_string(),
        );
    }
    for o in &origins {
        if let Origin::Default(k) = o
            && profile.source != Profile::BUILTIN
        {
            let why = profile
                .hops
                .get(k)
                .and_then(|h| h.unavailable.clone())
                .unwrap_or_else(|| "not in the profile".into());
            notes.push(format!(
                "{k}: built-in default figures ({why}), scaled to the profile's clock"
            ));
        }
    }
    if t.node
        .tsc_ghz
        .is_some_and(|g| (g - profile.machine.tsc_ghz).abs() > 0.01)
    {
        notes.push(format!(
            "cycle figures taken at {:.2} GHz applied at the node's {tsc_ghz:.2} GHz unchanged",
            profile.machine.tsc_ghz
        ));
    }
    Plan {
        topology: t.name.clone(),
        profile: profile.source.clone(),
        tsc_ghz,
        notes,
        points,
    }
}

fn vnf_kinds(i: VnfInterface) -> (HopKind, HopKind) {
    match i {
        VnfInterface::VhostUser => (HopKind::VhostCopy, HopKind::VhostOneCopy),
        VnfInterface::Memif => (HopKind::MemifCopy, HopKind::MemifOneCopy),
    }
}

fn unavailable(mode: Mode, why: String) -> Prediction {
    Prediction {
        mode,
        unavailable: Some(why),
        mpps: 0.0,
        gbps: 0.0,
        vnf_tx_mpps: 0.0,
        bottleneck: None,
        limits: Vec::new(),
        switch_cycles_per_packet: 0.0,
        vnf_cycles_per_packet: 0.0,
        switch_cores_needed: 0,
        vnf_cores_needed: 0,
        vfs_needed: 0,
    }
}

/// Link-limited frames per second of a mix with `x` receives and `x`
/// transmits per frame.
fn pcie_fps(p: &Pcie, mix: &[(usize, f64)], x: f64) -> f64 {
    let (mut up, mut down) = (0.0, 0.0);
    for &(s, w) in mix {
        let f = p.per_frame(s, x, x);
        up += w * f.up;
        down += w * f.down;
    }
    p.bits_per_second() / 8.0 / f64::max(up, down)
}

fn predict(
    t: &Topology,
    costs: &mut Costs,
    hz: f64,
    frames: Frames,
    chains: &[u32],
    mode: Mode,
) -> Prediction {
    let n: u32 = chains.iter().sum();
    let p = chains.len() as f64;
    let mean_l = n as f64 / p;
    let size = frames.mean_size();
    let (copy, one) = vnf_kinds(t.service.interface);
    let vk = if mode == Mode::SwitchCopy { copy } else { one };
    let pci = match &t.node.nic {
        Nic::Pci {
            ports,
            port_gbps,
            pcie,
            vfs,
        } => Some((*ports, *port_gbps, *pcie, *vfs)),
        Nic::Testbed => None,
    };
    // VFs.
    let vfs_needed = match mode {
        Mode::Sriov => n,
        Mode::Hybrid => chains.iter().map(|&l| if l == 1 { 1 } else { 2 }).sum(),
        _ => 0,
    };
    if vfs_needed > 0 {
        match pci {
            None => return unavailable(mode, "the test bed has no VFs".into()),
            Some((.., vfs)) if vfs < vfs_needed => {
                return unavailable(mode, format!("needs {vfs_needed} VFs, the NIC has {vfs}"));
            }
            _ => {}
        }
    }
    // Switch cycles per delivered packet.
    let mut missing = Vec::new();
    let mut fig = |k: HopKind, f: Figure, c: &mut Costs| {
        c.get(k, f).unwrap_or_else(|| {
            missing.push(format!("{k}"));
            0.0
        })
    };
    let inner_hops: f64 = chains.iter().map(|&l| (l - 1) as f64).sum::<f64>() / p;
    let c_sw = match mode {
        Mode::Sriov => 0.0,
        Mode::Hybrid => inner_hops * fig(one, Figure::Inner, costs),
        _ => {
            let nic = if pci.is_some() {
                fig(HopKind::Afxdp, Figure::Edge, costs)
            } else {
                0.0
            };
            2.0 * fig(vk, Figure::Edge, costs) + inner_hops * fig(vk, Figure::Inner, costs) + nic
        }
    };
    // VNF cycles: per VNF, then per delivered packet.
    let c_vf = if matches!(mode, Mode::Sriov | Mode::Hybrid) {
        fig(HopKind::Vf, Figure::Vnf, costs)
    } else {
        0.0
    };
    let c_vk = if mode == Mode::Sriov {
        0.0
    } else {
        fig(vk, Figure::Vnf, costs)
    };
    let mut per_vnf = Vec::new();
    for &l in chains {
        for j in 0..l {
            per_vnf.push(match mode {
                Mode::Sriov => c_vf,
                Mode::Hybrid if l == 1 => c_vf,
                Mode::Hybrid if j == 0 || j == l - 1 => (c_vf + c_vk) / 2.0,
                _ => c_vk,
            });
        }
    }
    let limit_mpps = if matches!(mode, Mode::SwitchCopy | Mode::SwitchOneCopy) {
        costs.get(vk, Figure::Limit)
    } else {
        None
    };
    if !missing.is_empty() {
        return unavailable(mode, format!("no cost figures for {}", missing.join(", ")));
    }
    let w: f64 = per_vnf.iter().sum::<f64>() / p;
    let c_max = per_vnf.iter().copied().fold(0.0, f64::max);
    // The limits, in packets per second.
    let mut limits: Vec<(Bottleneck, f64)> = Vec::new();
    let line = pci.map(|(ports, gbps, ..)| ports as f64 * gbps * 1e9 / ((size + 20.0) * 8.0));
    match t.service.offered {
        // Line rate: the port-speed limit says it.
        Offered::Line => {}
        Offered::Gbps(g) => limits.push((Bottleneck::OfferedLoad, g * 1e9 / (size * 8.0))),
        Offered::Mpps(m) => limits.push((Bottleneck::OfferedLoad, m * 1e6)),
    }
    if let (Some(l), Some((.., pcie, _))) = (line, pci) {
        limits.push((Bottleneck::PortSpeed, l));
        let x = if mode == Mode::Sriov { mean_l } else { 1.0 };
        limits.push((Bottleneck::PcieLink, pcie_fps(&pcie, &costs.mix, x)));
    }
    if let Some(m) = limit_mpps {
        limits.push((Bottleneck::HopLimit, p * m * 1e6));
    }
    if c_sw > 0.0 {
        if t.node.switch_cores == 0 {
            return unavailable(mode, "node.switch_cores = 0".into());
        }
        limits.push((
            Bottleneck::SwitchCores,
            t.node.switch_cores as f64 * hz / c_sw,
        ));
    }
    if w > 0.0 {
        let shared = t.node.vnf_cores as f64 * hz / w;
        let single = p * hz / c_max;
        limits.push((Bottleneck::VnfCores, shared.min(single)));
    }
    // Stable: on a tie the earlier (hardware) limit is named.
    limits.sort_by(|a, b| a.1.total_cmp(&b.1));
    let (what, pps) = limits[0];
    let hw = limits
        .iter()
        .filter(|l| l.0.is_hardware())
        .map(|l| l.1)
        .fold(f64::INFINITY, f64::min);
    let cores = |cycles: f64, given: u32| {
        if !hw.is_finite() {
            given
        } else {
            (hw * cycles / hz - 1e-9).ceil().max(0.0) as u32
        }
    };
    Prediction {
        mode,
        unavailable: None,
        mpps: pps / 1e6,
        gbps: pps * size * 8.0 / 1e9,
        vnf_tx_mpps: pps / p * n as f64 / 1e6,
        bottleneck: Some(what),
        limits: limits
            .iter()
            .map(|&(what, pps)| Limit {
                what,
                mpps: pps / 1e6,
            })
            .collect(),
        switch_cycles_per_packet: c_sw,
        vnf_cycles_per_packet: w,
        switch_cores_needed: if c_sw > 0.0 {
            cores(c_sw, t.node.switch_cores)
        } else {
            0
        },
        vnf_cores_needed: cores(w, t.node.vnf_cores),
        vfs_needed,
    }
}

/// The mode with the highest rate; within 5 % of it, the one needing
/// fewest cores, then the first of [`Mode::ALL`].
fn recommend(preds: &[Prediction]) -> (Option<Mode>, String) {
    let ok: Vec<&Prediction> = preds.iter().filter(|p| p.unavailable.is_none()).collect();
    let Some(best) = ok.iter().map(|p| p.mpps).reduce(f64::max) else {
        return (None, "no mode can run on this node".into());
    };
    let cores = |p: &Prediction| p.switch_cores_needed + p.vnf_cores_needed;
    let pick = ok
        .iter()
        .filter(|p| p.mpps >= 0.95 * best)
        .min_by_key(|p| cores(p))
        .copied()
        .unwrap_or(ok[0]);
    let bound = pick.bottleneck.map_or("", Bottleneck::as_str);
    let mut why = format!(
        "{}: {:.2} Mpps, {:.1} Gbps, bound by {bound}; {} switch + {} VNF cores",
        pick.mode.as_str(),
        pick.mpps,
        pick.gbps,
        pick.switch_cores_needed,
        pick.vnf_cores_needed
    );
    let worst = ok
        .iter()
        .filter(|p| p.mode != pick.mode)
        .min_by(|a, b| a.mpps.total_cmp(&b.mpps));
    if let Some(w) = worst
        && w.mpps > 0.0
    {
        why += &format!(
            "; {:.2}x {} ({})",
            pick.mpps / w.mpps,
            w.mode.as_str(),
            w.bottleneck.map_or("", Bottleneck::as_str)
        );
    }
    (Some(pick.mode), why)
}
