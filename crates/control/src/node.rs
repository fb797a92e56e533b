//! A running node: packet pool, flow table, datapath and ports, built
//! from a validated [`NodeConfig`], and stopped again. Requests are
//! handled in `requests.rs`, ports added and removed in `ports.rs`,
//! reports built in `reports.rs`.
//!
//! Thread safety: `Node` is `Sync`. Port changes serialise on
//! `port_changes`; the datapath's port registry (which holds each port's
//! config, [`nfv_ports::Port::config`]) and the flow table's writer lock
//! do the rest.

use crate::error::NodeError;
use crate::rates::RateSampler;
use nfv_config::NodeConfig;
use nfv_datapath::{Datapath, DatapathConfig};
use nfv_flow::PortNo;
use nfv_flow::table::SharedFlowTable;
use nfv_mem::{MemoryConfig, PacketPool};
use nfv_ports::{PortConfig, PortFactory, PortKind};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

pub struct Node {
    pub name: String,
    pub(crate) memory: MemoryConfig,
    pub(crate) datapath: Datapath,
    pub(crate) factory: PortFactory,
    /// Where the flow table sends each port's packets, for ports that
    /// follow it (`zero_copy = "auto"`).
    pub(crate) routes: Arc<crate::routes::NodeRoutes>,
    /// The ports whose guest buffers others may borrow (vhost-user ports,
    /// added as they open; a zero-copy AF_XDP queue finds its VNF here).
    pub(crate) lenders: Arc<nfv_ports::Lenders>,
    /// Kernel-facing ports of the config that failed to open at start
    /// (interface missing, no permission, XDP busy, MTU): listed by
    /// `show ports` with their error, so the rest of the node runs.
    /// `add-port` with the same number retries; `del-port` forgets.
    pub(crate) failed_ports: Mutex<BTreeMap<PortNo, (PortConfig, String)>>,
    /// Held while a port is checked and added, or removed, so two
    /// requests cannot both pass the checks against the same ports.
    pub(crate) port_changes: Mutex<()>,
    pub(crate) rates: RateSampler,
    pub(crate) chains: Vec<nfv_config::ChainConfig>,
    pub(crate) meta: NodeMeta,
    /// Ports made for CNI attachments, and their state file.
    pub(crate) attachments: Mutex<crate::attachments::Attachments>,
    /// Rx queue load history and (automatic) rebalancing.
    pub(crate) balancer: crate::balance::Balancer,
    /// Removes rules whose timeouts ran out (`crate::expiry`).
    pub(crate) flow_expiry: crate::expiry::FlowExpiry,
    /// `[node]`'s access keys (`crate::access`).
    pub(crate) access: nfv_config::AccessConfig,
    /// The REST API's token file, resolved.
    pub(crate) api_token_file: std::path::PathBuf,
    /// The OpenFlow agent and its listeners, once started
    /// (`crate::openflow`).
    pub(crate) openflow: std::sync::OnceLock<OpenFlowRuntime>,
}

/// A started OpenFlow agent.
pub(crate) struct OpenFlowRuntime {
    pub agent: Arc<nfv_openflow::Agent>,
    /// Taken (closing every connection) when the node stops.
    pub listeners: Mutex<Option<nfv_openflow::Listeners>>,
}

/// Facts about the node kept for `show node`.
pub(crate) struct NodeMeta {
    pub started: std::time::SystemTime,
    pub started_at: std::time::Instant,
    /// Where the REST API listens, set by whoever started it.
    pub api: Mutex<Option<std::net::SocketAddr>>,
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
            megaflow_entries: cfg.pmd.megaflow_entries,
            pmu: cfg.pmd.pmu,
            packet_in_rate: cfg.openflow.packet_in_rate,
            packet_in_burst: cfg.openflow.packet_in_burst,
            conntrack: cfg.conntrack,
        };
        let datapath = Datapath::start(&dp_cfg, pool, table.clone())?;
        let node = Node {
            name: cfg.name.clone(),
            memory: cfg.memory.clone(),
            datapath,
            factory: PortFactory::new(),
            routes: Arc::new(crate::routes::NodeRoutes::new(table.clone())),
            lenders: Arc::default(),
            failed_ports: Mutex::new(BTreeMap::new()),
            port_changes: Mutex::new(()),
            rates: RateSampler::default(),
            chains: cfg.chains.clone(),
            meta: NodeMeta::new(),
            attachments: Mutex::new(crate::attachments::Attachments {
                state_file: cfg.state_file.clone(),
                ..Default::default()
            }),
            balancer: crate::balance::Balancer::new(&cfg.pmd),
            flow_expiry: Default::default(),
            access: cfg.access.clone(),
            api_token_file: cfg.access.api_token_file.clone().unwrap_or_else(|| {
                let socket = cfg
                    .control_socket
                    .clone()
                    .unwrap_or_else(|| crate::default_socket(&cfg.name));
                nfv_config::AccessConfig::token_file_for(&socket, &cfg.name)
            }),
            openflow: Default::default(),
        };
        // Groups and meters, then the rules naming them (checked at load),
        // so the first packets find them all.
        install_groups_and_meters(&table, cfg)?;
        table.add_flows(cfg.flows.iter().cloned());
        table.add_flows(crate::chains::steering(&cfg.chains)?);
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
        // A state file that cannot be read stops the start: running on
        // would forget the attachments it lists at the next change.
        if let Some(dir) = &cfg.access.socket_dir {
            std::fs::create_dir_all(dir).map_err(|e| {
                NodeError::Open(format!("[node] socket_dir {}: {e}", dir.display()).into())
            })?;
        }
        node.restore_attachments()?;
        let node = Arc::new(node);
        RateSampler::start(&node);
        crate::balance::Balancer::start(&node);
        crate::expiry::FlowExpiry::start(&node);
        node.start_openflow(&cfg.openflow)?;
        Ok(node)
    }

    pub fn datapath(&self) -> &Datapath {
        &self.datapath
    }
    pub(crate) fn rates(&self) -> &RateSampler {
        &self.rates
    }

    pub(crate) fn failed(&self) -> MutexGuard<'_, BTreeMap<PortNo, (PortConfig, String)>> {
        self.failed_ports.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn chains(&self) -> &[nfv_config::ChainConfig] {
        &self.chains
    }

    /// `[node]`'s access keys.
    pub fn access(&self) -> &nfv_config::AccessConfig {
        &self.access
    }

    /// Where the REST API's token is kept (`[node] api_token_file`, or
    /// beside the control socket).
    pub fn api_token_file(&self) -> &std::path::Path {
        &self.api_token_file
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

    /// Stops the PMD threads and releases the ports (also done on drop).
    pub fn shutdown(&self) {
        self.stop_openflow();
        self.rates.stop();
        self.balancer.stop();
        self.flow_expiry.stop();
        self.datapath.shutdown();
    }
}

/// The config's groups and meters, into the table (before its rules).
fn install_groups_and_meters(
    table: &nfv_flow::table::SharedFlowTable,
    cfg: &NodeConfig,
) -> Result<(), NodeError> {
    let refused = |e: &dyn std::fmt::Display| NodeError::Config(e.to_string());
    for g in &cfg.groups {
        let g = nfv_flow::parse_group(g).map_err(|e| refused(&e))?;
        table.add_group(g).map_err(|e| refused(&e))?;
    }
    for m in &cfg.meters {
        let m = nfv_flow::meter::parse_meter(m).map_err(|e| refused(&e))?;
        table.add_meter(m).map_err(|e| refused(&e))?;
    }
    // The groups of the chains' scaled-out and standby hops.
    for g in crate::chains::groups(&cfg.chains)? {
        let id = g.id;
        table.add_group(g).map_err(|e| {
            NodeError::Config(format!(
                "a chain's group {id}: {e} (the config's groups use it)"
            ))
        })?;
    }
    Ok(())
}
