//! The control-socket protocol: one JSON request per line, one JSON
//! response per line. Typed on both sides; the CLI and tests share it.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Request {
    ShowPorts,
    ShowPmd,
    ShowChains,
    /// Per receiver port: streams with loss, reordering and latency.
    ShowTraffic,
    DumpFlows,
    /// One or more rules in ovs-ofctl syntax; all are validated before any
    /// is installed (all or nothing).
    AddFlows {
        flows: Vec<String>,
    },
    /// Empty filter = every rule. `strict` needs `priority=` in the filter.
    DelFlows {
        filter: String,
    },
    /// One port as an inline TOML table (the keys of a `[[port]]` table).
    AddPort {
        port: String,
    },
    DelPort {
        port: String,
    },
    /// Zeroes PMD counters and receiver port (traffic) counters.
    ClearStats,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum Response {
    Ok { data: serde_json::Value },
    Error { message: String },
}

/// Counters of one direction of a port.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct DirectionReport {
    pub packets: u64,
    pub bytes: u64,
    /// Drops by reason (only non-zero reasons are listed).
    pub drops: BTreeMap<String, u64>,
    /// Rate over the last sampling interval.
    pub mpps: f64,
    pub gbps: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct QueueReport {
    pub queue: usize,
    pub pmd: Option<usize>,
    pub packets: u64,
    pub bytes: u64,
    pub drops: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PortReport {
    pub no: u16,
    pub name: String,
    #[serde(rename = "type")]
    pub type_name: String,
    pub rx: DirectionReport,
    pub tx: DirectionReport,
    pub rx_queues: Vec<QueueReport>,
    pub tx_queues: Vec<QueueReport>,
    pub info: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PmdReport {
    pub index: usize,
    pub core: Option<usize>,
    /// Over the last sampling interval.
    pub mpps: f64,
    pub busy_percent: f64,
    /// Busy TSC cycles per received packet (OVS pmd-perf-show definition).
    pub cycles_per_packet: Option<f64>,
    /// The part spent outside port rx/tx bursts (lookup, actions, batching).
    pub switch_cycles_per_packet: Option<f64>,
    pub packets_per_batch: f64,
    /// Cumulative since start (or clear-stats).
    pub rx_packets: u64,
    pub emc_hits: u64,
    pub classifier_hits: u64,
    pub table_misses: u64,
    pub busy_cycles: u64,
    pub idle_cycles: u64,
    pub rx_queues: Vec<String>,
    pub tsc_hz: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct FlowReport {
    pub priority: u16,
    pub cookie: u64,
    pub n_packets: u64,
    pub n_bytes: u64,
    pub duration_secs: f64,
    /// The rule in ovs-ofctl syntax (re-parsable by add-flow).
    pub rule: String,
}

/// One VNF of a chain, from the switch's side of its vhost-user port.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct VnfReport {
    pub name: String,
    pub port: u16,
    /// What the VNF received (the switch sent to it).
    pub rx_mpps: f64,
    pub rx_gbps: f64,
    /// What the VNF sent back into the switch.
    pub tx_mpps: f64,
    pub tx_gbps: f64,
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub drops: u64,
    pub connected: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ChainReport {
    pub name: String,
    /// Port names: ingress, VNFs..., egress.
    pub hops: Vec<String>,
    pub ingress_mpps: f64,
    pub egress_mpps: f64,
    pub egress_gbps: f64,
    /// 100 × (1 − egress/ingress) over the last interval.
    pub loss_percent: f64,
    pub vnfs: Vec<VnfReport>,
}

/// One stream as a receiver port saw it, since the last clear-stats.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct StreamReport {
    /// The stamp's stream id: generator port number << 8 | its rx queue.
    pub stream: u32,
    pub src_port: u16,
    pub src_queue: u8,
    pub received: u64,
    /// Sequence gaps not filled (losses after the newest arrival are not
    /// visible here; `nfvswitch ndr` counts against what was sent).
    pub lost: u64,
    pub reordered: u64,
    pub duplicates: u64,
    /// Reordered by more than the duplicate-detection window.
    pub late: u64,
    /// In nanoseconds; `None` before the first packet.
    pub latency: Option<nfv_traffic::LatencySummary>,
}

/// A receiver port's streams.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TrafficReport {
    pub no: u16,
    pub name: String,
    /// Frames without a valid stamp.
    pub unstamped: u64,
    /// Stamped frames of streams beyond the per-queue stream limit.
    pub untracked: u64,
    pub streams: Vec<StreamReport>,
}
