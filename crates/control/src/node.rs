//! A running node: packet pool, flow table, datapath and ports, built
//! from a validated [`NodeConfig`]. Every control operation goes through
//! here, validates completely first and only then changes the switch, so
//! a bad request leaves the running state as it was.
//!
//! Thread safety: `Node` is `Sync`; operations serialise on the
//! datapath's port registry and the flow table's writer lock.

use crate::protocol::*;
use crate::rates::RateSampler;
use nfv_config::NodeConfig;
use nfv_datapath::{Datapath, DatapathConfig};
use nfv_flow::table::SharedFlowTable;
use nfv_flow::{Action, FlowSpec, PortNo, parse_filter, parse_flow};
use nfv_mem::{MemoryConfig, PacketPool};
use nfv_ports::{DropReason, PortConfig, PortFactory, PortKind, QueueSnapshot};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Pool(#[from] nfv_mem::PoolError),
    #[error(transparent)]
    Datapath(#[from] nfv_datapath::DatapathError),
    #[error(transparent)]
    Open(#[from] nfv_ports::OpenError),
    #[error(transparent)]
    Vhost(#[from] nfv_vhost::VhostError),
    /// A kernel-facing port (AF_XDP, AF_PACKET, TAP) failed to open; the
    /// message names the port and the interface.
    #[error("{0}")]
    KernelPort(String),
}

pub struct Node {
    pub name: String,
    memory: MemoryConfig,
    datapath: Datapath,
    factory: PortFactory,
    /// Configs of the ports now present, by number (for ring peers and
    /// for validating flows).
    port_configs: Mutex<BTreeMap<PortNo, PortConfig>>,
    /// Kernel-facing ports of the config that failed to open at start
    /// (interface missing, no permission, XDP busy, MTU): listed by
    /// `show ports` with their error, so the rest of the node runs.
    /// `add-port` with the same number retries; `del-port` forgets.
    failed_ports: Mutex<BTreeMap<PortNo, (PortConfig, String)>>,
    rates: RateSampler,
    chains: Vec<nfv_config::ChainConfig>,
    meta: NodeMeta,
}

/// Facts about the node kept for `show node`.
struct NodeMeta {
    started: std::time::SystemTime,
    started_at: std::time::Instant,
    /// Where the REST API listens, set by whoever started it.
    api: Mutex<Option<std::net::SocketAddr>>,
}

impl NodeMeta {
    fn new() -> NodeMeta {
        NodeMeta {
            started: std::time::SystemTime::now(),
            started_at: std::time::Instant::now(),
            api: Mutex::new(None),
        }
    }
}

impl Node {
    pub fn start(cfg: &NodeConfig) -> Result<Arc<Node>, NodeError> {
        let pool = PacketPool::new(&format!("nfvswitch-{}", cfg.name), &cfg.memory)?;
        let table = Arc::new(SharedFlowTable::new());
        let dp_cfg = DatapathConfig {
            pmd_cores: cfg.pmd.cores.iter().map(|&c| Some(c)).collect(),
            emc_entries: cfg.pmd.emc_entries,
            pmu: cfg.pmd.pmu,
        };
        let datapath = Datapath::start(&dp_cfg, pool, table.clone())?;
        let node = Node {
            name: cfg.name.clone(),
            memory: cfg.memory.clone(),
            datapath,
            factory: PortFactory::new(),
            port_configs: Mutex::new(BTreeMap::new()),
            failed_ports: Mutex::new(BTreeMap::new()),
            rates: RateSampler::default(),
            chains: cfg.chains.clone(),
            meta: NodeMeta::new(),
        };
        // Rules first, so the first packets find them.
        table.add_flows(cfg.flows.iter().cloned());
        table.add_flows(crate::chains::steering(&cfg.chains).map_err(NodeError::Invalid)?);
        // Generators last, so their first packets find every other port.
        let is_gen = |p: &&PortConfig| matches!(p.kind, PortKind::Generator(_));
        for p in cfg.ports.iter().filter(|p| !is_gen(p)) {
            match node.open_port(p) {
                Err(NodeError::KernelPort(e)) => {
                    tracing::error!("{e}; the node runs without this port");
                    node.failed().insert(p.id, (p.clone(), e));
                }
                r => r?,
            }
        }
        for p in cfg.ports.iter().filter(is_gen) {
            node.open_port(p)?;
        }
        let node = Arc::new(node);
        RateSampler::start(&node);
        Ok(node)
    }

    pub fn datapath(&self) -> &Datapath {
        &self.datapath
    }
    pub(crate) fn rates(&self) -> &RateSampler {
        &self.rates
    }

    fn configs(&self) -> std::sync::MutexGuard<'_, BTreeMap<PortNo, PortConfig>> {
        self.port_configs.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn failed(&self) -> std::sync::MutexGuard<'_, BTreeMap<PortNo, (PortConfig, String)>> {
        self.failed_ports.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn open_port(&self, p: &PortConfig) -> Result<(), NodeError> {
        let kernel = |e: &dyn std::fmt::Display| NodeError::KernelPort(e.to_string());
        let port: Arc<dyn nfv_ports::Port> = match &p.kind {
            PortKind::VhostUser(_) => nfv_vhost::VhostUserPort::from_config(p)?,
            PortKind::AfXdp(_) => nfv_afxdp::open(p).map_err(|e| kernel(&e))?,
            PortKind::AfPacket(_) => {
                nfv_afpacket::open_with(p, nfv_afpacket::max_frame_of(&self.memory))
                    .map_err(|e| kernel(&e))?
            }
            PortKind::Tap(_) => nfv_tap::open_with(p, self.memory.frame_size - nfv_mem::HEADROOM)
                .map_err(|e| kernel(&e))?,
            _ => self.factory.open(p)?,
        };
        self.datapath.add_port(p.id, port)?;
        self.failed().remove(&p.id);
        self.configs().insert(p.id, p.clone());
        tracing::info!("port {} ({}) added as {}", p.name, p.kind.type_name(), p.id);
        Ok(())
    }

    /// Handles one control request.
    pub fn handle(&self, req: &Request) -> Response {
        let r = match req {
            Request::ShowPorts => {
                serde_json::to_value(self.show_ports()).map_err(|e| e.to_string())
            }
            Request::ShowPmd => serde_json::to_value(self.show_pmd()).map_err(|e| e.to_string()),
            Request::ShowChains => {
                serde_json::to_value(self.show_chains()).map_err(|e| e.to_string())
            }
            Request::ShowTraffic => {
                serde_json::to_value(self.show_traffic()).map_err(|e| e.to_string())
            }
            Request::DumpFlows => {
                serde_json::to_value(self.dump_flows()).map_err(|e| e.to_string())
            }
            Request::AddFlows { flows } => self
                .add_flows(flows)
                .map(|n| serde_json::json!({ "added": n })),
            Request::DelFlows { filter } => self
                .del_flows(filter)
                .map(|n| serde_json::json!({ "deleted": n })),
            Request::AddPort { port } => self
                .add_port(port)
                .map(|no| serde_json::json!({ "added": no })),
            Request::DelPort { port } => self
                .del_port(port)
                .map(|no| serde_json::json!({ "deleted": no })),
            Request::ShowNode => serde_json::to_value(self.show_node()).map_err(|e| e.to_string()),
            Request::ClearStats => {
                self.datapath.clear_pmd_stats();
                for v in self.datapath.port_views() {
                    if let Some(r) = v.port.receiver_stats() {
                        r.clear();
                    }
                }
                Ok(serde_json::json!({}))
            }
        };
        match r {
            Ok(data) => Response::Ok { data },
            Err(message) => Response::Error { message },
        }
    }

    /// Parses and checks every rule against the ports present, then
    /// installs them all in one table generation.
    pub fn add_flows(&self, flows: &[String]) -> Result<usize, String> {
        let ports: BTreeSet<PortNo> = self.configs().keys().copied().collect();
        let mut specs = Vec::with_capacity(flows.len());
        for (i, text) in flows.iter().enumerate() {
            let which = if flows.len() > 1 {
                format!("flow {}: ", i + 1)
            } else {
                String::new()
            };
            let spec = parse_flow(text).map_err(|e| format!("{which}{e}"))?;
            check_ports(&spec, &ports).map_err(|e| format!("{which}{e}"))?;
            specs.push(spec);
        }
        let n = specs.len();
        self.datapath.table().add_flows(specs);
        Ok(n)
    }

    pub fn del_flows(&self, filter: &str) -> Result<usize, String> {
        let f = parse_filter(filter).map_err(|e| e.to_string())?;
        Ok(self.datapath.table().del_flows(&f))
    }

    pub fn add_port(&self, text: &str) -> Result<PortNo, String> {
        let p = nfv_config::parse_port_table(text, &self.memory).map_err(|e| e.to_string())?;
        {
            // The same cross-port checks as at load; the other end of a
            // ring may come later.
            // Ports that failed to open still hold their names and
            // interfaces, except the one this add retries.
            let mut all: Vec<PortConfig> = self.configs().values().cloned().collect();
            let failed = self.failed();
            all.extend(
                failed
                    .values()
                    .map(|(c, _)| c)
                    .filter(|c| c.id != p.id)
                    .cloned(),
            );
            drop(failed);
            all.push(p.clone());
            nfv_config::check_port_set(&all, nfv_config::Peers::MayBeMissing)
                .map_err(|c| c.describe(&all))?;
        }
        self.open_port(&p).map_err(|e| e.to_string())?;
        Ok(p.id)
    }

    pub fn del_port(&self, name_or_no: &str) -> Result<PortNo, String> {
        {
            let mut failed = self.failed();
            let hit = failed
                .iter()
                .find(|(no, (c, _))| c.name == name_or_no || no.to_string() == name_or_no)
                .map(|(no, _)| *no);
            if let Some(no) = hit {
                failed.remove(&no);
                return Ok(no);
            }
        }
        let no = self
            .datapath
            .del_port(name_or_no)
            .map_err(|e| e.to_string())?;
        self.configs().remove(&no);
        Ok(no)
    }

    pub fn show_ports(&self) -> Vec<PortReport> {
        let rates = self.rates.ports();
        self.datapath
            .port_views()
            .into_iter()
            .map(|v| {
                let (rx_rate, tx_rate) = rates.get(&v.no).copied().unwrap_or_default();
                let q = |qs: &[nfv_ports::QueueCounters], pmd: &dyn Fn(usize) -> Option<usize>| {
                    qs.iter()
                        .enumerate()
                        .map(|(i, c)| {
                            let s = c.snapshot();
                            QueueReport {
                                queue: i,
                                pmd: pmd(i),
                                packets: s.packets,
                                bytes: s.bytes,
                                drops: s.total_drops(),
                            }
                        })
                        .collect()
                };
                PortReport {
                    no: v.no,
                    name: v.port.name().to_string(),
                    type_name: v.port.type_name().to_string(),
                    rx: direction(&v.stats.rx_total(), rx_rate),
                    tx: direction(&v.stats.tx_total(), tx_rate),
                    rx_queues: q(&v.stats.rx, &|i| v.rxq_pmd.get(i).copied()),
                    tx_queues: q(&v.stats.tx, &Some),
                    info: v
                        .port
                        .gauges()
                        .entries()
                        .map(|(k, val)| (k.to_string(), val.to_string()))
                        .collect(),
                    error: None,
                }
            })
            .chain(self.failed().values().map(|(c, e)| PortReport {
                no: c.id,
                name: c.name.clone(),
                type_name: c.kind.type_name().to_string(),
                rx: DirectionReport::default(),
                tx: DirectionReport::default(),
                rx_queues: Vec::new(),
                tx_queues: Vec::new(),
                info: BTreeMap::new(),
                error: Some(e.clone()),
            }))
            .collect()
    }

    /// Per-chain and per-VNF rates over the last interval.
    pub fn show_chains(&self) -> Vec<ChainReport> {
        let rates = self.rates.ports();
        let ports = self
            .datapath
            .port_views()
            .into_iter()
            .map(|v| {
                let (rx_rate, tx_rate) = rates.get(&v.no).copied().unwrap_or_default();
                let sample = crate::chains::PortSample {
                    rx: v.stats.rx_total(),
                    tx: v.stats.tx_total(),
                    rx_rate,
                    tx_rate,
                    connected: v.port.gauges().connected,
                };
                (v.no, sample)
            })
            .collect();
        crate::chains::report(&self.chains, &ports)
    }

    /// Every receiver port's streams since the last clear-stats.
    pub fn show_traffic(&self) -> Vec<TrafficReport> {
        self.datapath
            .port_views()
            .into_iter()
            .filter_map(|v| {
                let snap = v.port.receiver_stats()?.snapshot();
                Some(TrafficReport {
                    no: v.no,
                    name: v.port.name().to_string(),
                    unstamped: snap.unstamped,
                    untracked: snap.untracked,
                    streams: snap
                        .streams
                        .iter()
                        .map(|s| StreamReport {
                            stream: s.stream,
                            src_port: nfv_traffic::stamp::stream_port(s.stream),
                            src_queue: nfv_traffic::stamp::stream_queue(s.stream),
                            received: s.received,
                            lost: s.lost(),
                            reordered: s.reordered,
                            duplicates: s.duplicates,
                            late: s.late,
                            latency: s.latency(),
                        })
                        .collect(),
                })
            })
            .collect()
    }

    /// The run control of generator port `name_or_no`.
    pub fn generator_control(
        &self,
        name_or_no: &str,
    ) -> Result<Arc<nfv_ports::GeneratorControl>, String> {
        self.port_view(name_or_no)?
            .port
            .generator_control()
            .ok_or_else(|| format!("port {name_or_no:?} is not a generator"))
    }

    /// The counters of receiver port `name_or_no`.
    pub fn receiver_stats(
        &self,
        name_or_no: &str,
    ) -> Result<Arc<nfv_ports::ReceiverStats>, String> {
        self.port_view(name_or_no)?
            .port
            .receiver_stats()
            .ok_or_else(|| format!("port {name_or_no:?} is not a receiver"))
    }

    fn port_view(&self, name_or_no: &str) -> Result<nfv_datapath::PortView, String> {
        let no = self
            .datapath
            .resolve_port(name_or_no)
            .ok_or_else(|| format!("no port {name_or_no:?}"))?;
        self.datapath
            .port_views()
            .into_iter()
            .find(|v| v.no == no)
            .ok_or_else(|| format!("no port {name_or_no:?}"))
    }

    pub fn chains(&self) -> &[nfv_config::ChainConfig] {
        &self.chains
    }

    /// The newest `last` rate samples (one per second, at most
    /// [`crate::rates::HISTORY`]), oldest first.
    pub fn rate_history(&self, last: usize) -> Vec<crate::rates::RateSample> {
        self.rates.history(last)
    }

    /// Records where the REST API listens (`None`: not serving), for
    /// `show node`.
    pub fn set_api_addr(&self, addr: Option<std::net::SocketAddr>) {
        *self.meta.api.lock().unwrap_or_else(|p| p.into_inner()) = addr;
    }

    pub fn api_addr(&self) -> Option<std::net::SocketAddr> {
        *self.meta.api.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn show_node(&self) -> NodeReport {
        let pool = self.datapath.pool();
        NodeReport {
            name: self.name.clone(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            started: self
                .meta
                .started
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
            uptime_secs: self.meta.started_at.elapsed().as_secs_f64(),
            pmds: self.datapath.n_pmds(),
            pmd_cores: self.datapath.pmd_views().iter().map(|v| v.core).collect(),
            ports: self.configs().len(),
            flows: self.datapath.table().snapshot().classifier.rules().len(),
            chains: self.chains.len(),
            memory: MemoryReport {
                frames: pool.frames(),
                frame_size: pool.frame_size(),
                hugepages: format!("{:?}", self.memory.hugepages).to_lowercase(),
                backing: pool.backing().as_str().to_string(),
                free_frames: self.datapath.pool_free_frames(),
            },
            api: self.api_addr(),
        }
    }

    pub fn show_pmd(&self) -> Vec<PmdReport> {
        let interval = self.rates.pmds();
        let pmu = self.rates.pmu();
        self.datapath
            .pmd_views()
            .into_iter()
            .map(|v| {
                // Rates and cycle figures over the last interval when there
                // was traffic in it; cumulative otherwise.
                let (mpps, recent) = interval.get(v.index).copied().unwrap_or_default();
                let basis = if recent.rx_packets > 0 {
                    recent
                } else {
                    v.stats
                };
                PmdReport {
                    index: v.index,
                    core: v.core,
                    mpps,
                    busy_percent: recent_or(&recent, &v.stats).busy_percent(),
                    cycles_per_packet: basis.cycles_per_packet(),
                    switch_cycles_per_packet: basis.switch_cycles_per_packet(),
                    packets_per_batch: basis.packets_per_busy_iteration(),
                    rx_packets: v.stats.rx_packets,
                    emc_hits: v.stats.emc_hits,
                    classifier_hits: v.stats.classifier_hits,
                    table_misses: v.stats.table_misses,
                    busy_cycles: v.stats.busy_cycles,
                    idle_cycles: v.stats.idle_cycles,
                    rx_queues: v
                        .rxqs
                        .iter()
                        .map(|(no, name, q)| format!("{name}({no})/q{q}"))
                        .collect(),
                    tsc_hz: nfv_tsc::hz(),
                    pmu: crate::pmu::report(&v.pmu, pmu.get(v.index)),
                }
            })
            .collect()
    }

    pub fn dump_flows(&self) -> Vec<FlowReport> {
        let table = self.datapath.table().snapshot();
        table
            .classifier
            .rules()
            .iter()
            .map(|r| FlowReport {
                priority: r.spec.priority,
                cookie: r.spec.cookie,
                n_packets: r.stats.packets.load(std::sync::atomic::Ordering::Relaxed),
                n_bytes: r.stats.bytes.load(std::sync::atomic::Ordering::Relaxed),
                duration_secs: r.created.elapsed().as_secs_f64(),
                rule: r.spec.to_string(),
            })
            .collect()
    }

    /// Stops the PMD threads and releases the ports (also done on drop).
    pub fn shutdown(&self) {
        self.rates.stop();
        self.datapath.shutdown();
    }
}

fn recent_or(
    recent: &nfv_datapath::stats::PmdSnapshot,
    total: &nfv_datapath::stats::PmdSnapshot,
) -> nfv_datapath::stats::PmdSnapshot {
    if recent.busy_cycles + recent.idle_cycles > 0 {
        *recent
    } else {
        *total
    }
}

fn direction(s: &QueueSnapshot, rate: (f64, f64)) -> DirectionReport {
    DirectionReport {
        packets: s.packets,
        bytes: s.bytes,
        drops: DropReason::ALL
            .iter()
            .zip(s.drops)
            .filter(|(_, n)| *n > 0)
            .map(|(r, n)| (r.as_str().to_string(), n))
            .collect(),
        mpps: rate.0,
        gbps: rate.1,
    }
}

/// Rejects rules naming ports that do not exist.
fn check_ports(spec: &FlowSpec, ports: &BTreeSet<PortNo>) -> Result<(), String> {
    if spec.matches.mask.in_port() != 0 && !ports.contains(&spec.matches.key.in_port()) {
        return Err(format!(
            "in_port={}: no such port",
            spec.matches.key.in_port()
        ));
    }
    for a in &spec.actions {
        if let Action::Output(p) = a
            && !ports.contains(p)
        {
            return Err(format!("output:{p}: no such port"));
        }
    }
    Ok(())
}
