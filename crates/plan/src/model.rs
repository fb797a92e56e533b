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

use crate::nic::Engine;
use crate::pcie::Pcie;
use crate::profile::{Figure, HopKind, Origin, Profile};
use crate::topology::{Frames, Nic, Offered, Topology, VnfPoll};
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
    /// The NIC controller's packet rate ([`crate::nic`]).
    NicPacketRate,
    /// The NIC's VF-to-VF switching rate (an SR-IOV hairpin).
    NicHairpin,
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
            Bottleneck::NicPacketRate => "NIC packet rate",
            Bottleneck::NicHairpin => "NIC VF-to-VF switching",
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
                | Bottleneck::NicPacketRate
                | Bottleneck::NicHairpin
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
    if let Nic::Pci { engine, .. } = &t.node.nic
        && engine.unknown()
    {
        notes.push(
            "unknown NIC: no nic_model, packet_rate_mpps or hairpin_mpps, so only the ports and \
             the PCIe link bound it; its SR-IOV figures are upper bounds (at small frames a \
             controller's own packet rate, and its VF-to-VF switching, bind first)"
                .to_string(),
        );
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
    notes.extend(crate::profile_notes::notes(profile, t));
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

/// The NIC figures the model uses (a PCI NIC; the test bed has none).
#[derive(Clone)]
struct PciNic {
    ports: u32,
    port_gbps: f64,
    pcie: Pcie,
    vfs: u32,
    engine: Engine,
}

impl PciNic {
    fn of(nic: &Nic) -> Option<PciNic> {
        match nic {
            Nic::Pci {
                ports,
                port_gbps,
                pcie,
                vfs,
                engine,
            } => Some(PciNic {
                ports: *ports,
                port_gbps: *port_gbps,
                pcie: *pcie,
                vfs: *vfs,
                engine: engine.clone(),
            }),
            Nic::Testbed => None,
        }
    }
}

/// One mode at one point on the node: what [`predict`]'s steps share.
struct Case<'a> {
    t: &'a Topology,
    /// The node's clock, Hz.
    hz: f64,
    mode: Mode,
    /// `L_i` of each chain.
    chains: &'a [u32],
    /// Mean frame size, bytes.
    size: f64,
    /// `None`: the test bed.
    nic: Option<PciNic>,
}

/// Cycles per delivered packet of one mode, averaged over the chains.
struct Cycles {
    /// `C_sw`.
    switch: f64,
    /// `W`.
    vnf: f64,
    /// `max c_v`.
    vnf_max: f64,
    /// The VNF hop type's `limit_mpps` (switch modes, when the profile
    /// has one).
    limit_mpps: Option<f64>,
}

/// Reads cost figures, noting each hop type that has none.
struct Figures<'c, 'a> {
    costs: &'c mut Costs<'a>,
    missing: Vec<String>,
}

impl Figures<'_, '_> {
    fn get(&mut self, k: HopKind, f: Figure) -> f64 {
        self.costs.get(k, f).unwrap_or_else(|| {
            self.missing.push(format!("{k}"));
            0.0
        })
    }
}

fn predict(
    t: &Topology,
    costs: &mut Costs,
    hz: f64,
    frames: Frames,
    chains: &[u32],
    mode: Mode,
) -> Prediction {
    let case = Case {
        t,
        hz,
        mode,
        chains,
        size: frames.mean_size(),
        nic: PciNic::of(&t.node.nic),
    };
    let vfs_needed = case.vfs_needed();
    if let Some(why) = case.vf_shortage(vfs_needed) {
        return unavailable(mode, why);
    }
    let cycles = match case.cycles(costs) {
        Ok(cycles) => cycles,
        Err(why) => return unavailable(mode, why),
    };
    match case.limits(costs, &cycles) {
        Ok(limits) => case.prediction(&cycles, limits, vfs_needed),
        Err(why) => unavailable(mode, why),
    }
}

impl Case<'_> {
    /// `P`.
    fn p(&self) -> f64 {
        self.chains.len() as f64
    }

    /// `N`.
    fn n(&self) -> u32 {
        self.chains.iter().sum()
    }

    /// The VNF hop types of the service's interface: (copy, one-copy).
    fn kinds(&self) -> (HopKind, HopKind) {
        vnf_kinds(self.t.service.interface)
    }

    /// The hop type of the VNFs' switch ports in this mode.
    fn vnf_kind(&self) -> HopKind {
        let (copy, one) = self.kinds();
        if self.mode == Mode::SwitchCopy {
            copy
        } else {
            one
        }
    }

    fn vfs_needed(&self) -> u32 {
        match self.mode {
            Mode::Sriov => self.n(),
            Mode::Hybrid => self
                .chains
                .iter()
                .map(|&l| if l == 1 { 1 } else { 2 })
                .sum(),
            _ => 0,
        }
    }

    /// Why the NIC cannot give `needed` VFs, if it cannot.
    fn vf_shortage(&self, needed: u32) -> Option<String> {
        if needed == 0 {
            return None;
        }
        match &self.nic {
            None => Some("the test bed has no VFs".into()),
            Some(nic) if nic.vfs < needed => {
                Some(format!("needs {needed} VFs, the NIC has {}", nic.vfs))
            }
            _ => None,
        }
    }

    /// The mode's cycle figures; `Err` names the hop types the profile
    /// has no figures for.
    fn cycles(&self, costs: &mut Costs) -> Result<Cycles, String> {
        let mut figs = Figures {
            costs,
            missing: Vec::new(),
        };
        let switch = self.switch_cycles(&mut figs);
        let per_vnf = self.vnf_cycles(&mut figs);
        let limit_mpps = if matches!(self.mode, Mode::SwitchCopy | Mode::SwitchOneCopy) {
            figs.costs.get(self.vnf_kind(), Figure::Limit)
        } else {
            None
        };
        if !figs.missing.is_empty() {
            return Err(format!("no cost figures for {}", figs.missing.join(", ")));
        }
        Ok(Cycles {
            switch,
            vnf: per_vnf.iter().sum::<f64>() / self.p(),
            vnf_max: per_vnf.iter().copied().fold(0.0, f64::max),
            limit_mpps,
        })
    }

    /// `C_sw`: switch cycles per delivered packet.
    fn switch_cycles(&self, figs: &mut Figures) -> f64 {
        let vk = self.vnf_kind();
        let (_, one) = self.kinds();
        let inner_hops: f64 = self.chains.iter().map(|&l| (l - 1) as f64).sum::<f64>() / self.p();
        match self.mode {
            Mode::Sriov => 0.0,
            Mode::Hybrid => inner_hops * figs.get(one, Figure::Inner),
            _ => {
                let nic = if self.nic.is_some() {
                    figs.get(HopKind::Afxdp, Figure::Edge)
                } else {
                    0.0
                };
                2.0 * figs.get(vk, Figure::Edge) + inner_hops * figs.get(vk, Figure::Inner) + nic
            }
        }
    }

    /// `c_v` of every VNF, chain by chain.
    fn vnf_cycles(&self, figs: &mut Figures) -> Vec<f64> {
        let mode = self.mode;
        let c_vf = if matches!(mode, Mode::Sriov | Mode::Hybrid) {
            figs.get(HopKind::Vf, Figure::Vnf)
        } else {
            0.0
        };
        let c_vk = if mode == Mode::Sriov {
            0.0
        } else {
            figs.get(self.vnf_kind(), Figure::Vnf)
        };
        let mut per_vnf = Vec::new();
        for &l in self.chains {
            for j in 0..l {
                per_vnf.push(match mode {
                    Mode::Sriov => c_vf,
                    Mode::Hybrid if l == 1 => c_vf,
                    Mode::Hybrid if j == 0 || j == l - 1 => (c_vf + c_vk) / 2.0,
                    _ => c_vk,
                });
            }
        }
        per_vnf
    }

    /// Every limit, in packets per second, smallest first (stable: on a
    /// tie the earlier, hardware, limit comes first).
    fn limits(&self, costs: &Costs, cycles: &Cycles) -> Result<Vec<(Bottleneck, f64)>, String> {
        let (t, hz, p) = (self.t, self.hz, self.p());
        let mut limits: Vec<(Bottleneck, f64)> = Vec::new();
        match t.service.offered {
            // Line rate: the port-speed limit says it.
            Offered::Line => {}
            Offered::Gbps(g) => limits.push((Bottleneck::OfferedLoad, g * 1e9 / (self.size * 8.0))),
            Offered::Mpps(m) => limits.push((Bottleneck::OfferedLoad, m * 1e6)),
        }
        if let Some(nic) = &self.nic {
            let line = nic.ports as f64 * nic.port_gbps * 1e9 / ((self.size + 20.0) * 8.0);
            limits.push((Bottleneck::PortSpeed, line));
            let mean_l = self.n() as f64 / p;
            let x = if self.mode == Mode::Sriov {
                mean_l
            } else {
                1.0
            };
            limits.push((Bottleneck::PcieLink, pcie_fps(&nic.pcie, &costs.mix, x)));
            limits.extend(self.engine_limits(&nic.engine, x));
        }
        if let Some(m) = cycles.limit_mpps {
            limits.push((Bottleneck::HopLimit, p * m * 1e6));
        }
        if cycles.switch > 0.0 {
            if t.node.switch_cores == 0 {
                return Err("node.switch_cores = 0".into());
            }
            limits.push((
                Bottleneck::SwitchCores,
                t.node.switch_cores as f64 * hz / cycles.switch,
            ));
        }
        if cycles.vnf > 0.0 {
            limits.push((Bottleneck::VnfCores, self.vnf_core_limit(cycles)));
        }
        limits.sort_by(|a, b| a.1.total_cmp(&b.1));
        Ok(limits)
    }

    /// The NIC controller's limits ([`crate::nic`]): `receives` frames
    /// reach the controller per delivered packet (the mean chain length
    /// for SR-IOV, one otherwise); an SR-IOV chain of two or more VNFs
    /// also goes through the NIC's switch that many times (chains of one
    /// VNF, in a mixed service, do not).
    fn engine_limits(&self, e: &Engine, receives: f64) -> Vec<(Bottleneck, f64)> {
        let mut v = Vec::new();
        if let Some(rate) = e.packet_rate_mpps {
            v.push((Bottleneck::NicPacketRate, rate * 1e6 / receives));
        }
        // Frames the NIC's switch delivers to VFs of hairpinning chains
        // per delivered packet: a chain of one VNF does not hairpin.
        let hairpinned: u32 = self.chains.iter().filter(|&&l| l > 1).sum();
        let per_packet = f64::from(hairpinned) / self.p();
        if self.mode == Mode::Sriov
            && hairpinned > 0
            && let Some(rate) = e.hairpin_mpps
        {
            v.push((Bottleneck::NicHairpin, rate * 1e6 / per_packet));
        }
        v
    }

    /// What the VNF cores carry. Each chain is held to its slowest VNF on
    /// one core; all together to the cores' cycles. Busy-polling VNFs
    /// on fewer cores than VNFs take turns by time slice: each gets
    /// `vnf_cores / N` of a core whatever its load, so every chain is
    /// held to that share of its slowest VNF's rate.
    fn vnf_core_limit(&self, cycles: &Cycles) -> f64 {
        let (t, hz, p) = (self.t, self.hz, self.p());
        let shared = t.node.vnf_cores as f64 * hz / cycles.vnf;
        let share = match t.service.vnf_poll {
            VnfPoll::Busy => (t.node.vnf_cores as f64 / self.n() as f64).min(1.0),
            VnfPoll::Adaptive => 1.0,
        };
        let single = share * p * hz / cycles.vnf_max;
        shared.min(single)
    }

    /// VNF cores needed to carry `hw` packets per second: busy-polling
    /// VNFs a core each, adaptive ones the cycles they use.
    fn vnf_cores_needed(&self, cycles: &Cycles, hw: f64) -> u32 {
        let t = self.t;
        match t.service.vnf_poll {
            VnfPoll::Busy => self.n(),
            VnfPoll::Adaptive if !hw.is_finite() => t.node.vnf_cores,
            VnfPoll::Adaptive => (hw * cycles.vnf / self.hz - 1e-9).ceil().max(0.0) as u32,
        }
    }

    /// The prediction: the rate the smallest limit allows, and the cores
    /// that carry what the hardware allows.
    fn prediction(
        &self,
        cycles: &Cycles,
        limits: Vec<(Bottleneck, f64)>,
        vfs_needed: u32,
    ) -> Prediction {
        let (t, hz, p) = (self.t, self.hz, self.p());
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
            mode: self.mode,
            unavailable: None,
            mpps: pps / 1e6,
            gbps: pps * self.size * 8.0 / 1e9,
            vnf_tx_mpps: pps / p * self.n() as f64 / 1e6,
            bottleneck: Some(what),
            limits: limits
                .iter()
                .map(|&(what, pps)| Limit {
                    what,
                    mpps: pps / 1e6,
                })
                .collect(),
            switch_cycles_per_packet: cycles.switch,
            vnf_cycles_per_packet: cycles.vnf,
            switch_cores_needed: if cycles.switch > 0.0 {
                cores(cycles.switch, t.node.switch_cores)
            } else {
                0
            },
            vnf_cores_needed: self.vnf_cores_needed(cycles, hw),
            vfs_needed,
        }
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
