//! The test bed that `nfvswitch demo` and `nfvswitch sweep` share: a node
//! in this process (generator and sink ports stand in for the physical
//! ports) and N VNF processes (`nfvswitch vnf`, connected over
//! vhost-user or memif: [`VnfInterface`]), with the service chains
//! installed.
//!
//! - `ns` (north-south, PVP): N chains in parallel, gen_i → vnf_i → sink_i.
//! - `ew` (east-west): one chain gen → vnf1 → … → vnfN → sink.
//!
//! On a 2-core machine busy pollers that share a core starve each other,
//! so the switch's PMD owns the last core and the VNFs share the others in
//! adaptive poll/sleep mode ([`Cores`]).
//!
//! [`Testbed::measure`] reads the counters once a second for a window and
//! reports means over it: delivered Mpps/Gbps at the sinks, per-VNF rx
//! and drops, and the switch PMD's busy % and cycles per packet.

use nfv_config::{ChainConfig, CpuSet, NodeConfig, PmdConfig};
use nfv_control::Node;
use nfv_datapath::stats::PmdSnapshot;
use nfv_mem::MemoryConfig;
use nfv_ports::config::{GeneratorConfig, PortConfig, PortKind};
use nfv_ports::{DropReason, QueueSnapshot};
use nfv_vhost::{VhostUserConfig, VhostUserMode};
use nfv_vnf_interface::VnfInterface;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How the VNFs are connected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Topology {
    /// North-south (PVP): N chains in parallel, gen_i → vnf_i → sink_i.
    Ns,
    /// East-west: one chain gen → vnf1 → … → vnfN → sink.
    Ew,
}

impl Topology {
    pub fn as_str(self) -> &'static str {
        match self {
            Topology::Ns => "ns",
            Topology::Ew => "ew",
        }
    }
    pub fn describe(self) -> &'static str {
        match self {
            Topology::Ns => "north-south (PVP, VNFs in parallel)",
            Topology::Ew => "east-west (chain of VNFs)",
        }
    }
}

impl std::fmt::Display for Topology {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Topology {
    type Err = String;
    fn from_str(s: &str) -> Result<Topology, String> {
        match s.trim() {
            "ns" => Ok(Topology::Ns),
            "ew" => Ok(Topology::Ew),
            other => Err(format!("{other:?} is not ns or ew")),
        }
    }
}

/// Checks `--vnfs` (1..=8) and `--sizes` (64..=1518).
pub fn validate(vnfs: &[usize], sizes: &[usize]) -> Result<(), String> {
    if vnfs.is_empty() || sizes.is_empty() {
        return Err("--vnfs and --sizes need at least one value".into());
    }
    if let Some(n) = vnfs.iter().find(|&&n| !(1..=8).contains(&n)) {
        return Err(format!("--vnfs: {n} is not in 1..=8"));
    }
    if let Some(s) = sizes.iter().find(|&&s| !(64..=1518).contains(&s)) {
        return Err(format!("--sizes: {s} is not in 64..=1518"));
    }
    Ok(())
}

/// What every run of a demo or sweep shares.
#[derive(Clone, Debug)]
pub struct Setup {
    /// VNF application: io, macswap or l2fwd.
    pub app: String,
    /// VNF poll mode: adaptive or busy.
    pub poll: String,
    /// vhost-user or memif between the switch and the VNFs.
    pub interface: VnfInterface,
    /// Offered load per generator in packets/s (0 = as fast as possible).
    pub rate_pps: u64,
    /// Traffic before the measurement starts (connection, ring fill).
    pub warmup: Duration,
}

impl Setup {
    /// Refuses an app or poll mode the VNF would refuse (with the VNF's
    /// own validation), before any process is started.
    pub fn check(&self) -> Result<(), String> {
        let o = nfv_vnf::VnfOptions {
            socket: "check.sock".into(),
            app: self.app.clone(),
            poll: self.poll.clone(),
            next_hop: (self.app == "l2fwd").then(|| L2FWD_NEXT_HOP.to_string()),
            ..Default::default()
        };
        nfv_vnf::VnfConfig::try_from(o)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

/// Where `--app l2fwd` VNFs send (the test bed does not learn MACs).
const L2FWD_NEXT_HOP: &str = "02:00:00:00:00:02";

/// One point of a demo or sweep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    pub topology: Topology,
    pub vnfs: usize,
    pub size: usize,
}

/// Which cores the switch's PMDs and the VNFs use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cores {
    /// The CPUs this process may run on (its affinity mask).
    pub allowed: CpuSet,
    /// The cores the switch's PMD threads busy-poll, one each; rx queues
    /// are spread over them by the node's rxq assignment.
    pub pmds: Vec<usize>,
    /// The VNFs are pinned round-robin to these (empty: they share the
    /// PMDs' cores).
    pub vnfs: Vec<usize>,
}

impl Cores {
    /// [`Cores::place`] on the CPUs this process may run on.
    pub fn detect(pmds: Option<usize>, max_vnfs: usize) -> Result<Cores, String> {
        Cores::place(CpuSet::of_this_process(), pmds, max_vnfs)
    }

    /// PMDs on the highest allowed CPUs, VNFs on the rest. `pmds` `None`:
    /// as many as are left once each of up to `max_vnfs` VNFs has a core
    /// of its own (at least one). VNFs and PMDs share cores only when the
    /// CPUs do not suffice; on one CPU everything shares it.
    pub fn place(allowed: CpuSet, pmds: Option<usize>, max_vnfs: usize) -> Result<Cores, String> {
        let ids = allowed.ids();
        let n = ids.len();
        let k = match pmds {
            Some(0) => return Err("--pmds: at least 1".into()),
            Some(k) if k > n => {
                return Err(format!(
                    "--pmds {k}: this process may run on {n} CPU(s) ({allowed}); a PMD needs one of its own"
                ));
            }
            Some(k) if k > nfv_config::MAX_PMD_CORES => {
                return Err(format!("--pmds {k}: at most {}", nfv_config::MAX_PMD_CORES));
            }
            Some(k) => k,
            None => n
                .saturating_sub(max_vnfs.max(1))
                .clamp(1, nfv_config::MAX_PMD_CORES),
        };
        let (vnfs, pmds) = ids.split_at(n - k);
        Ok(Cores {
            pmds: pmds.to_vec(),
            vnfs: vnfs.to_vec(),
            allowed,
        })
    }

    /// The cores the VNFs run on (with none of their own: the PMDs').
    pub fn vnf_cores(&self) -> Vec<usize> {
        if self.vnfs.is_empty() {
            self.pmds.clone()
        } else {
            self.vnfs.clone()
        }
    }

    /// True when `vnfs` VNFs need more cores than they have: then two
    /// VNFs (or a VNF and a PMD) share one and the figures show the
    /// sharing, not the switch.
    pub fn vnfs_share(&self, vnfs: usize) -> bool {
        self.vnfs.len() < vnfs
    }

    /// One sentence for the top of the output.
    pub fn describe(&self, setup: &Setup) -> String {
        format!(
            "{} CPU(s) allowed ({}). Switch: {} PMD(s) busy-polling core(s) {:?} (generators \
             and sinks are its ports); VNFs ({} mode, app {}) on core(s) {:?}{}.",
            self.allowed.len(),
            self.allowed,
            self.pmds.len(),
            self.pmds,
            setup.poll,
            setup.app,
            self.vnf_cores(),
            if self.vnfs.is_empty() {
                ", shared with the PMDs"
            } else {
                ""
            },
        )
    }
}

struct Vnf {
    child: Child,
    stats: PathBuf,
}

impl Drop for Vnf {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Vnf {
    /// The VNF's own drop counters (from its --json-stats file, written
    /// once a second).
    fn drops(&self) -> u64 {
        let Ok(text) = std::fs::read(&self.stats) else {
            return 0;
        };
        let Ok(j) = serde_json::from_slice::<serde_json::Value>(&text) else {
            return 0;
        };
        j["total"]["drops"]
            .as_object()
            .map_or(0, |d| d.values().filter_map(|x| x.as_u64()).sum())
    }
}

fn port(name: String, id: u16, kind: PortKind) -> PortConfig {
    PortConfig {
        name,
        id,
        rxqs: 1,
        kind,
    }
}

pub fn node_config(run: &Run, setup: &Setup, dir: &Path, pmd_cores: &[usize]) -> NodeConfig {
    let (ports, chains) = ports_and_chains(run, setup, dir);
    NodeConfig {
        source: "demo".into(),
        name: format!("demo-{}", std::process::id()),
        control_socket: Some(dir.join("ctl.sock")),
        // The demo and sweeps do not serve the REST API.
        api: None,
        state_file: None,
        access: Default::default(),
        memory: MemoryConfig {
            frames: 65536,
            ..Default::default()
        },
        pmd: PmdConfig {
            cores: pmd_cores.to_vec(),
            ..PmdConfig::default_for(1)
        },
        ports,
        flows: vec![],
        groups: vec![],
        meters: vec![],
        chains,
        openflow: Default::default(),
        conntrack: Default::default(),
    }
}

/// The test bed's ports and the chains through them: per VNF a chain
/// generator → VNF → sink (`ns`), or one chain through every VNF (`ew`).
fn ports_and_chains(run: &Run, setup: &Setup, dir: &Path) -> (Vec<PortConfig>, Vec<ChainConfig>) {
    let generator = |i: usize| generator_port(run, setup.rate_pps, i);
    let vnf = |i: usize| vnf_port(setup, dir, i);
    let mut ports = Vec::new();
    let mut chains = Vec::new();
    let hop = |p: &PortConfig| (p.name.clone(), p.id);
    match run.topology {
        Topology::Ns => {
            for i in 1..=run.vnfs {
                let (g, v, s) = (generator(i), vnf(i), sink_port(i));
                chains.push(ChainConfig::new(
                    format!("ns{i}"),
                    vec![hop(&g), hop(&v), hop(&s)],
                    1000,
                ));
                ports.extend([g, v, s]);
            }
        }
        Topology::Ew => {
            let (g, s) = (generator(1), sink_port(1));
            let vnfs: Vec<PortConfig> = (1..=run.vnfs).map(vnf).collect();
            let mut hops = vec![hop(&g)];
            hops.extend(vnfs.iter().map(hop));
            hops.push(hop(&s));
            chains.push(ChainConfig::new("ew".into(), hops, 1000));
            ports.push(g);
            ports.extend(vnfs);
            ports.push(s);
        }
    }
    (ports, chains)
}

/// Generator `i`: frames of the run's size at `rate` (0: as fast as it
/// can), from 10.0.`i`.1.
fn generator_port(run: &Run, rate: u64, i: usize) -> PortConfig {
    let g = GeneratorConfig {
        frame_size: run.size,
        rate_pps: (rate > 0).then_some(rate),
        src_ip: std::net::Ipv4Addr::new(10, 0, i as u8, 1),
        ..Default::default()
    };
    port(format!("gen{i}"), 100 + i as u16, PortKind::Generator(g))
}

fn sink_port(i: usize) -> PortConfig {
    port(format!("sink{i}"), 200 + i as u16, PortKind::Sink)
}

/// VNF `i`'s port: a vhost-user server or a memif socket in `dir`.
fn vnf_port(setup: &Setup, dir: &Path, i: usize) -> PortConfig {
    let socket = dir.join(format!("vnf{i}.sock"));
    let kind = match setup.interface {
        VnfInterface::VhostUser => PortKind::typed(VhostUserConfig {
            socket,
            mode: VhostUserMode::Server,
            queues: 1,
            mrg_rxbuf: true,
            tx_retries: VhostUserConfig::DEFAULT_TX_RETRIES,
            one_copy: true,
            packed_ring: true,
            offloads: nfv_vhost::Offloads::ALL,
            max_guest_memory: nfv_vhost::DEFAULT_MAX_GUEST_MEMORY,
            mtu: None,
        }),
        VnfInterface::Memif => PortKind::typed(nfv_memif::MemifConfig::new(socket)),
    };
    port(format!("vnf{i}"), 10 + i as u16, kind)
}

fn spawn_vnf(setup: &Setup, dir: &Path, i: usize, cores: &[usize]) -> Result<Vnf, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let stats = dir.join(format!("vnf{i}.json"));
    let mut cmd = Command::new(exe);
    let socket_flag = match setup.interface {
        VnfInterface::VhostUser => "--socket",
        VnfInterface::Memif => "--memif",
    };
    cmd.args(["--log", "warn", "vnf", socket_flag])
        .arg(dir.join(format!("vnf{i}.sock")))
        .args([
            "--mode",
            "client",
            "--app",
            &setup.app,
            "--poll",
            &setup.poll,
            "--stats-every",
            "1",
        ])
        .arg("--json-stats")
        .arg(&stats)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if setup.app == "l2fwd" {
        cmd.args(["--next-hop", L2FWD_NEXT_HOP]);
    }
    if !cores.is_empty() {
        cmd.args(["--cpu", &cores[(i - 1) % cores.len()].to_string()]);
    }
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot start VNF {i}: {e}"))?;
    Ok(Vnf { child, stats })
}

/// Counters of one instant (cumulative).
struct Counters {
    at: Instant,
    /// Per port number: (rx, tx) as the switch counts them.
    ports: BTreeMap<u16, (QueueSnapshot, QueueSnapshot)>,
    /// Per PMD: its core and counters.
    pmds: Vec<(Option<usize>, PmdSnapshot)>,
    /// Per VNF (index i-1): its own drop count.
    vnf_drops: Vec<u64>,
}

/// One VNF over a measurement window, from the switch's side of its port
/// (what the switch sent it is the VNF's rx).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VnfMeasurement {
    pub name: String,
    pub chain: String,
    pub rx_mpps: f64,
    pub rx_gbps: f64,
    pub tx_mpps: f64,
    /// Packets the VNF did not take (ring full) plus packets it sent that
    /// the switch dropped, over the window.
    pub switch_drops: u64,
    /// The VNF's own drop counters over the window (read from its stats
    /// file, which it writes once a second).
    pub vnf_drops: u64,
}

/// The switch's PMD thread(s) over a measurement window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PmdMeasurement {
    /// The core the PMD polls on (per-PMD figures; none for the sum).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core: Option<usize>,
    /// Packets the PMD received (from generators and VNFs), Mpps.
    pub rx_mpps: f64,
    pub busy_percent: f64,
    /// Busy TSC cycles per received packet.
    pub cycles_per_packet: Option<f64>,
}

impl PmdMeasurement {
    /// From the counters' change `d` over `secs` seconds.
    fn of(core: Option<usize>, d: &PmdSnapshot, secs: f64) -> PmdMeasurement {
        let (busy, idle, rx) = (d.busy_cycles, d.idle_cycles, d.rx_packets);
        PmdMeasurement {
            core,
            rx_mpps: rx as f64 / secs / 1e6,
            busy_percent: if busy + idle > 0 {
                100.0 * busy as f64 / (busy + idle) as f64
            } else {
                0.0
            },
            cycles_per_packet: (rx > 0).then(|| busy as f64 / rx as f64),
        }
    }

    /// "97 %" or, with several PMDs, "97/95 %" (each PMD's busy share).
    pub fn busy_list(per_pmd: &[PmdMeasurement], sum: &PmdMeasurement) -> String {
        if per_pmd.len() <= 1 {
            format!("{:.0} %", sum.busy_percent)
        } else {
            let each: Vec<String> = per_pmd
                .iter()
                .map(|p| format!("{:.0}", p.busy_percent))
                .collect();
            format!("{} %", each.join("/"))
        }
    }
}

/// What a run measured over its window: means of the per-second samples.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// Length of the window, seconds.
    pub seconds: f64,
    /// Delivered to the sinks, all chains together (frame bytes without
    /// FCS for Gbps).
    pub mpps: f64,
    pub gbps: f64,
    /// Taken by the switch from the generators.
    pub offered_mpps: f64,
    /// 100 × (1 − delivered / offered) over the window.
    pub loss_percent: f64,
    /// Delivered Mpps and Gbps of each one-second sample.
    pub samples_mpps: Vec<f64>,
    pub samples_gbps: Vec<f64>,
    pub vnfs: Vec<VnfMeasurement>,
    /// All PMDs together (busy %: of all their cycles).
    pub pmd: PmdMeasurement,
    /// Each PMD (sweeps from before several PMDs have none).
    #[serde(default)]
    pub per_pmd: Vec<PmdMeasurement>,
    /// The switch's drops over the window, all ports and both directions,
    /// by reason (non-zero reasons only).
    #[serde(default)]
    pub drops: BTreeMap<String, u64>,
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// A running test bed; dropping it stops the VNFs and the node.
pub struct Testbed {
    node: Arc<Node>,
    vnfs: Vec<Vnf>,
    dir: PathBuf,
}

impl Testbed {
    /// Starts the node and the VNFs of `run`, waits until every VNF has
    /// connected, then lets traffic run for `setup.warmup`.
    pub fn start(setup: &Setup, run: &Run, cores: &Cores) -> Result<Testbed, String> {
        Testbed::start_with(setup, run, cores, |_| {})
    }

    /// [`Testbed::start`], calling `on_node` with the node as soon as it
    /// runs, before the VNFs connect (the demo's dashboard shows it from
    /// there on).
    pub fn start_with(
        setup: &Setup,
        run: &Run,
        cores: &Cores,
        on_node: impl FnOnce(&Arc<Node>),
    ) -> Result<Testbed, String> {
        let dir = std::env::temp_dir().join(format!("nfvswitch-demo-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let cfg = node_config(run, setup, &dir, &cores.pmds);
        let node = Node::start(&cfg).map_err(|e| e.to_string())?;
        on_node(&node);
        let mut bed = Testbed {
            node,
            vnfs: Vec::new(),
            dir,
        };
        for i in 1..=run.vnfs {
            let v = spawn_vnf(setup, &bed.dir, i, &cores.vnfs)?;
            bed.vnfs.push(v);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while !bed
            .node
            .show_chains()
            .iter()
            .all(|c| c.vnfs.iter().all(|v| v.connected))
        {
            if Instant::now() > deadline {
                return Err("VNFs did not connect within 10 s".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(setup.warmup);
        Ok(bed)
    }

    pub fn node(&self) -> &Node {
        &self.node
    }

    /// The own drop count of VNF port `name` ("vnf3").
    pub fn vnf_drops(&self, name: &str) -> u64 {
        let i: usize = name.trim_start_matches("vnf").parse().unwrap_or(1);
        self.vnfs.get(i.wrapping_sub(1)).map_or(0, Vnf::drops)
    }

    fn counters(&self) -> Counters {
        let dp = self.node.datapath();
        Counters {
            at: Instant::now(),
            ports: dp
                .port_views()
                .iter()
                .map(|v| (v.no, (v.stats.rx_total(), v.stats.tx_total())))
                .collect(),
            pmds: dp.pmd_views().iter().map(|v| (v.core, v.stats)).collect(),
            vnf_drops: self.vnfs.iter().map(Vnf::drops).collect(),
        }
    }

    /// Samples the counters every second for `seconds` seconds (calling
    /// `tick(t, self)` after each sample) and returns the means.
    pub fn measure(&self, seconds: u64, tick: impl FnMut(u64, &Testbed)) -> Measurement {
        let chains = self.node.chains();
        let ingress: Vec<u16> = chains.iter().map(|c| c.ingress().1).collect();
        let egress: Vec<u16> = chains.iter().map(|c| c.egress().1).collect();
        let w = self.sample(seconds, &egress, tick);
        let secs = w.secs();
        let offered = w.moved(&ingress, false) as f64;
        let delivered = w.moved(&egress, true) as f64;
        let per_pmd = w.pmds();
        let total = per_pmd
            .iter()
            .fold(PmdSnapshot::default(), |t, (_, d)| t.plus(d));
        Measurement {
            seconds: secs,
            mpps: mean(&w.samples_mpps),
            gbps: mean(&w.samples_gbps),
            offered_mpps: offered / secs / 1e6,
            loss_percent: if offered > 0.0 {
                (100.0 * (1.0 - delivered / offered)).max(0.0)
            } else {
                0.0
            },
            vnfs: w.vnfs(chains),
            drops: w.drops(),
            samples_mpps: w.samples_mpps,
            samples_gbps: w.samples_gbps,
            pmd: PmdMeasurement::of(None, &total, secs),
            per_pmd: per_pmd
                .iter()
                .map(|(core, d)| PmdMeasurement::of(*core, d, secs))
                .collect(),
        }
    }

    /// The counters at the start, after each of `seconds` seconds (the
    /// delivered rate at the `egress` ports each second) and at the end.
    fn sample(&self, seconds: u64, egress: &[u16], mut tick: impl FnMut(u64, &Testbed)) -> Window {
        let first = self.counters();
        let mut prev = first.at;
        let mut prev_out = first.total(egress, true);
        let (mut samples_mpps, mut samples_gbps) = (Vec::new(), Vec::new());
        let mut last = None;
        for t in 1..=seconds.max(1) {
            let due = first.at + Duration::from_secs(t);
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
            let now = self.counters();
            let secs = now.at.duration_since(prev).as_secs_f64().max(1e-3);
            let out = now.total(egress, true);
            samples_mpps.push(out.0.wrapping_sub(prev_out.0) as f64 / secs / 1e6);
            samples_gbps.push(out.1.wrapping_sub(prev_out.1) as f64 * 8.0 / secs / 1e9);
            (prev, prev_out) = (now.at, out);
            last = Some(now);
            tick(t, self);
        }
        let last = last.unwrap_or_else(|| self.counters());
        Window {
            first,
            last,
            samples_mpps,
            samples_gbps,
        }
    }
}

impl Counters {
    /// Packets and bytes the ports `ids` transmitted (`tx`) or received.
    fn total(&self, ids: &[u16], tx: bool) -> (u64, u64) {
        ids.iter()
            .filter_map(|id| self.ports.get(id))
            .map(|(rx, t)| if tx { t } else { rx })
            .fold((0, 0), |(p, b), s| (p + s.packets, b + s.bytes))
    }
}

/// A measurement window: the counters at both ends and the per-second
/// delivered rates in between.
struct Window {
    first: Counters,
    last: Counters,
    samples_mpps: Vec<f64>,
    samples_gbps: Vec<f64>,
}

impl Window {
    /// Its length, seconds.
    fn secs(&self) -> f64 {
        self.last
            .at
            .duration_since(self.first.at)
            .as_secs_f64()
            .max(1e-3)
    }

    /// Packets the ports `ids` transmitted (`tx`) or received over it.
    fn moved(&self, ids: &[u16], tx: bool) -> u64 {
        self.last
            .total(ids, tx)
            .0
            .wrapping_sub(self.first.total(ids, tx).0)
    }

    /// Port `id`'s (rx, tx) change over it.
    fn delta(&self, id: u16) -> (QueueSnapshot, QueueSnapshot) {
        let z = (QueueSnapshot::default(), QueueSnapshot::default());
        let a = self.first.ports.get(&id).unwrap_or(&z);
        let b = self.last.ports.get(&id).unwrap_or(&z);
        (b.0.since(&a.0), b.1.since(&a.1))
    }

    /// Each VNF of `chains`, chain by chain.
    fn vnfs(&self, chains: &[ChainConfig]) -> Vec<VnfMeasurement> {
        let secs = self.secs();
        chains
            .iter()
            .flat_map(|c| c.vnfs().iter().map(move |v| (c, v)))
            .map(|(c, (name, id))| {
                let (rx, tx) = self.delta(*id);
                let i: usize = name.trim_start_matches("vnf").parse().unwrap_or(1);
                let own = |k: &Counters| k.vnf_drops.get(i.wrapping_sub(1)).copied().unwrap_or(0);
                VnfMeasurement {
                    name: name.clone(),
                    chain: c.name.clone(),
                    rx_mpps: tx.packets as f64 / secs / 1e6,
                    rx_gbps: tx.bytes as f64 * 8.0 / secs / 1e9,
                    tx_mpps: rx.packets as f64 / secs / 1e6,
                    switch_drops: tx.total_drops() + rx.total_drops(),
                    vnf_drops: own(&self.last).saturating_sub(own(&self.first)),
                }
            })
            .collect()
    }

    /// The switch's drops over it, all ports and both directions, by
    /// reason (non-zero reasons only).
    fn drops(&self) -> BTreeMap<String, u64> {
        let mut drops = BTreeMap::new();
        for &id in self.last.ports.keys() {
            let (rx, tx) = self.delta(id);
            for (i, r) in DropReason::ALL.iter().enumerate() {
                let n = rx.drops[i] + tx.drops[i];
                if n > 0 {
                    *drops.entry(r.as_str().to_string()).or_insert(0) += n;
                }
            }
        }
        drops
    }

    /// Each PMD's core and counter change over it.
    fn pmds(&self) -> Vec<(Option<usize>, PmdSnapshot)> {
        self.last
            .pmds
            .iter()
            .enumerate()
            .map(|(i, (core, p))| {
                let d = self.first.pmds.get(i).map_or(*p, |(_, f)| p.since(f));
                (*core, d)
            })
            .collect()
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        // VNFs first (SIGTERM, then wait), then the switch.
        self.vnfs.clear();
        self.node.shutdown();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod cores_tests {
    use super::Cores;
    use nfv_config::CpuSet;

    /// (allowed CPUs, --pmds, most VNFs) -> (PMD cores, VNF cores).
    #[test]
    fn pmds_take_the_highest_cores_and_vnfs_the_rest() {
        type Case = (
            &'static [usize],
            Option<usize>,
            usize,
            &'static [usize],
            &'static [usize],
        );
        let cases: &[Case] = &[
            // 2 CPUs: one PMD, the VNFs on the other (as before).
            (&[0, 1], None, 1, &[1], &[0]),
            (&[0, 1], None, 8, &[1], &[0]),
            (&[0, 1], Some(2), 1, &[0, 1], &[]),
            // One CPU (taskset -c 1): everything on CPU 1.
            (&[1], None, 4, &[1], &[]),
            // 16 CPUs, 8 VNFs: 8 PMDs by default; 4 when asked.
            (
                &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
                None,
                8,
                &[8, 9, 10, 11, 12, 13, 14, 15],
                &[0, 1, 2, 3, 4, 5, 6, 7],
            ),
            (
                &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
                Some(4),
                8,
                &[12, 13, 14, 15],
                &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11],
            ),
            // A mask with holes.
            (&[2, 3, 6, 7], Some(1), 2, &[7], &[2, 3, 6]),
        ];
        for &(allowed, pmds, vnfs, want_pmds, want_vnfs) in cases {
            let set = CpuSet::from_ids(allowed.iter().copied()).unwrap();
            let c = Cores::place(set, pmds, vnfs).unwrap();
            assert_eq!(
                (&c.pmds[..], &c.vnfs[..]),
                (want_pmds, want_vnfs),
                "{allowed:?} {pmds:?} {vnfs}"
            );
        }
    }

    #[test]
    fn impossible_pmd_counts_are_refused() {
        let e = Cores::place(CpuSet::first(2), Some(3), 1).unwrap_err();
        assert!(
            e.contains("--pmds 3") && e.contains("2 CPU(s) (0-1)"),
            "{e}"
        );
        assert!(Cores::place(CpuSet::first(2), Some(0), 1).is_err());
    }

    #[test]
    fn sharing_is_known() {
        let c = Cores::place(CpuSet::first(4), Some(2), 2).unwrap();
        assert!(!c.vnfs_share(2) && c.vnfs_share(3));
        let c = Cores::place(CpuSet::first(2), Some(2), 1).unwrap();
        assert!(c.vnfs_share(1));
        assert_eq!(c.vnf_cores(), vec![0, 1], "VNFs on the PMDs' cores");
    }
}
