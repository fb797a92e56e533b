//! The control-socket protocol: one JSON request per line, one JSON
//! response per line. Typed on both sides; the CLI and tests share it.

/// One VNF of a chain: its figures are declared in `vnf_figures.rs`.
pub use crate::vnf_figures::VnfReport;
use nfv_datapath::stats::PmdSnapshot;
use nfv_ports::QueueFigures;
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
    /// The rules a filter selects, as `del-flows` would (empty: all).
    DumpFlows {
        #[serde(default)]
        filter: String,
    },
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
    /// Facts about the node: name, version, uptime, PMDs, memory, and
    /// where its REST API listens.
    ShowNode,
    /// The OpenFlow listeners and connected controllers: role, messages
    /// by type, errors and asynchronous messages sent and dropped.
    ShowControllers,
    /// Rx queues per PMD with their share of its cycles (OVS
    /// `pmd-rxq-show`).
    ShowRxqs,
    /// Places every rx queue again by measured load (`dry_run`: only
    /// report what would move).
    PmdRebalance {
        #[serde(default)]
        dry_run: bool,
    },
    /// Moves one rx queue (port name or number) to a PMD (its index).
    PmdRxqMove {
        port: String,
        queue: usize,
        pmd: usize,
    },
    /// What the datapath would do with a packet whose fields are given as
    /// a match (`in_port=1,udp,nw_dst=10.0.0.2,tp_dst=80`; unnamed fields
    /// are zero): OVS's `ofproto/trace`. `ct(table=T)`'s tracked copies
    /// are followed, the n-th coming back with the connection states of
    /// `ct_next[n]` (OVS's `--ct-next FLAGS`: `trk,new`, `trk,est,rpl`),
    /// `trk,new` past the end of the list.
    Trace {
        flow: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        ct_next: Vec<String>,
    },
    /// A group in `ovs-ofctl add-group` syntax; refused if its id exists.
    AddGroup {
        group: String,
    },
    /// Replaces a group (same syntax); refused if its id does not exist.
    ModGroup {
        group: String,
    },
    /// Deletes a group (every group when `group_id` is absent) and the
    /// rules that name it.
    DelGroups {
        #[serde(default)]
        group_id: Option<u32>,
    },
    /// Every group with its buckets' counters.
    DumpGroups,
    /// A meter in `ovs-ofctl add-meter` syntax; refused if its id exists.
    AddMeter {
        meter: String,
    },
    /// Replaces a meter (same syntax); refused if its id does not exist.
    ModMeter {
        meter: String,
    },
    /// Deletes a meter (every meter when `meter_id` is absent) and the
    /// rules that name it.
    DelMeters {
        #[serde(default)]
        meter_id: Option<u32>,
    },
    /// Every meter with its counters.
    DumpMeters,
    /// Per table: its rules and the packets they matched.
    DumpTables,
    /// Connections of every PMD's table (of `zone`, or all), at most
    /// `limit` of them (default [`CONNTRACK_DUMP_LIMIT`]), OVS's
    /// `dpctl/dump-conntrack`.
    DumpConntrack {
        #[serde(default)]
        zone: Option<u16>,
        #[serde(default)]
        limit: Option<usize>,
    },
    /// Removes every connection (of `zone`, or all): OVS's
    /// `dpctl/flush-conntrack`.
    FlushConntrack {
        #[serde(default)]
        zone: Option<u16>,
    },
}

/// Connections a dump lists unless asked for more (each PMD copies them
/// between two polls: a dump of a million would hold it for a while).
pub const CONNTRACK_DUMP_LIMIT: usize = 10_000;

/// `dump-conntrack`: the connections listed and how many there are.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ConntrackReport {
    /// Connections in every PMD's table (of the zone asked for).
    pub total: u64,
    pub connections: Vec<ConnReport>,
}

/// One connection, as OVS's `dump-conntrack` writes it (`text`) and by
/// field.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ConnReport {
    pub text: String,
    pub zone: u16,
    /// `tcp`, `udp`, `icmp`, `icmpv6`, or the protocol number.
    pub proto: String,
    pub mark: u32,
    /// Hex, `0x` and 32 digits.
    pub label: String,
    /// The TCP state (`ESTABLISHED`, …) or the pseudo-state of the others.
    pub state: String,
    /// Seconds until the connection expires if no packet comes.
    pub expires_in_secs: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum Response {
    Ok { data: serde_json::Value },
    Error { message: String },
}

/// One group (`dump-groups`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct GroupReport {
    pub group_id: u32,
    #[serde(rename = "type")]
    pub kind: String,
    /// The group as `add-group` text.
    pub group: String,
    pub buckets: Vec<BucketReport>,
    /// Rules whose actions name this group.
    pub rules: usize,
}

/// `dump-tables`: one table that holds rules. `matched` adds up the
/// rules' counters (a packet through a pipeline counts in every table it
/// matched in).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TableReport {
    pub table: u8,
    pub rules: usize,
    pub matched_packets: u64,
    pub matched_bytes: u64,
}

/// `dump-meters`: one meter.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct MeterReport {
    pub meter_id: u32,
    /// The meter as `add-meter` text.
    pub meter: String,
    /// Packets and bytes that reached the meter.
    pub packets: u64,
    pub bytes: u64,
    /// Of those, what its drop band dropped.
    pub band_packets: u64,
    pub band_bytes: u64,
    /// Rules whose actions name this meter.
    pub rules: usize,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct BucketReport {
    pub actions: String,
    pub weight: u16,
    pub watch_port: Option<u16>,
    pub packets: u64,
    pub bytes: u64,
}

/// The node as a whole (`show node`, `GET /api/v1/node`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct NodeReport {
    pub name: String,
    /// nfvswitch version.
    pub version: String,
    /// Seconds since the Unix epoch when the node started.
    pub started: f64,
    pub uptime_secs: f64,
    pub pmds: usize,
    /// The CPU of each PMD thread (`None`: not pinned).
    pub pmd_cores: Vec<Option<usize>>,
    pub ports: usize,
    pub flows: usize,
    /// Rules removed by their idle timeout and by their hard timeout.
    #[serde(default)]
    pub flows_expired_idle: u64,
    #[serde(default)]
    pub flows_expired_hard: u64,
    pub chains: usize,
    pub memory: MemoryReport,
    /// The address the REST API is bound to (the real one when the
    /// config asked for port 0); `None` when it is off or failed to bind.
    pub api: Option<std::net::SocketAddr>,
    /// Where the REST API's bearer token is kept (the path, never the
    /// token).
    #[serde(default)]
    pub api_token_file: Option<std::path::PathBuf>,
    /// `[node] socket_dir`: where attachment sockets are made; `None`:
    /// attachments are refused.
    #[serde(default)]
    pub socket_dir: Option<std::path::PathBuf>,
    /// Attachments of the state file refused at start (invalid, outside
    /// `socket_dir`, or in conflict with a configured port).
    #[serde(default)]
    pub attachments_refused: u64,
}

/// The packet pool.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct MemoryReport {
    pub frames: usize,
    pub frame_size: usize,
    /// What the config asked for: "auto", "require" or "never".
    pub hugepages: String,
    /// What the pool got.
    pub backing: String,
    /// Frames not held by any packet (the shared free list plus the PMDs'
    /// caches as of their last housekeeping). Equal to `frames` whenever
    /// no packet is in flight; less than that with no traffic = a leak.
    #[serde(default)]
    pub free_frames: usize,
}

/// Counters of one direction of a port.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct DirectionReport {
    /// Every per-port figure (`nfv_ports::PORT_FIGURES`) by name, summed
    /// over the direction's queues.
    #[serde(flatten)]
    pub figures: QueueFigures,
    /// Drops by reason (only non-zero reasons are listed).
    pub drops: BTreeMap<String, u64>,
    /// Rate over the last sampling interval.
    pub mpps: f64,
    pub gbps: f64,
}

/// Reads its figures as the JSON flattens them: `report.rx.packets`.
impl std::ops::Deref for DirectionReport {
    type Target = QueueFigures;
    fn deref(&self) -> &QueueFigures {
        &self.figures
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct QueueReport {
    pub queue: usize,
    pub pmd: Option<usize>,
    /// Every per-port figure (`nfv_ports::PORT_FIGURES`) by name.
    #[serde(flatten)]
    pub figures: QueueFigures,
    /// All reasons.
    pub drops: u64,
}

/// Reads its figures as the JSON flattens them: `queue.packets`.
impl std::ops::Deref for QueueReport {
    type Target = QueueFigures;
    fn deref(&self) -> &QueueFigures {
        &self.figures
    }
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
    /// Why the port is not forwarding: it failed to open at start (a
    /// kernel interface missing, no permission, …). `None` when it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `show rxqs`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RxqsReport {
    /// `pmd.rxq_assign`.
    pub algorithm: String,
    pub interval_secs: u64,
    /// Intervals of history so far (up to 12); 0: the figures are since
    /// the start.
    pub intervals: usize,
    pub auto_lb: bool,
    pub auto_lb_rebalances: u64,
    /// What the last automatic check decided, and why.
    pub last_auto_lb: Option<String>,
    pub pmds: Vec<RxqsPmd>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RxqsPmd {
    pub pmd: usize,
    pub core: Option<usize>,
    /// Busy share of the PMD's cycles over the history (None before the
    /// first interval ends).
    pub busy_percent: Option<f64>,
    pub rxqs: Vec<RxqReport>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RxqReport {
    pub port: u16,
    pub name: String,
    pub queue: usize,
    /// The queue's processing cycles in percent of its PMD's cycles.
    pub usage_percent: f64,
}

/// `pmd-rebalance`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RebalanceReport {
    pub algorithm: String,
    pub dry_run: bool,
    pub moves: Vec<RxqMove>,
    /// Per PMD, percent of its cycles, before and (estimated) after.
    pub current_loads: Vec<f64>,
    pub estimated_loads: Vec<f64>,
    pub current_variance: f64,
    pub estimated_variance: f64,
    pub improvement_percent: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RxqMove {
    pub port: u16,
    pub name: String,
    pub queue: usize,
    pub from: usize,
    pub to: usize,
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
    /// Every per-PMD figure (`nfv_datapath::stats::PMD_FIGURES`) by name:
    /// counters cumulative since start (or clear-stats), gauges as of the
    /// PMD's last housekeeping.
    #[serde(flatten)]
    pub figures: PmdSnapshot,
    pub rx_queues: Vec<String>,
    pub tsc_hz: u64,
    /// PMU counters of the PMD thread.
    #[serde(default)]
    pub pmu: PmuReport,
}

/// A PMD thread's PMU counters (`show pmd`). Totals count since the PMD
/// opened its counters (or clear-stats); deltas and derived figures cover
/// the last sampling interval (before the first one: since the start).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct PmuReport {
    /// False when counting is switched off (datapath `pmu = false`).
    pub enabled: bool,
    /// Length of the interval the deltas and derived figures cover.
    pub interval_secs: f64,
    /// Packets the PMD received in that interval.
    pub interval_packets: u64,
    pub counters: Vec<PmuCounterReport>,
    pub derived: PmuDerivedReport,
}

/// One counter: values, or `None` and the reason in `unsupported`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct PmuCounterReport {
    /// `perf list` name: instructions, cycles, cache-references,
    /// cache-misses, llc-load-misses, dtlb-load-misses, context-switches,
    /// task-clock, page-faults.
    pub name: String,
    /// "events", or "ns" for task-clock.
    pub unit: String,
    pub total: Option<u64>,
    pub delta: Option<u64>,
    pub unsupported: Option<String>,
    /// Counts user space only (the kernel refused kernel-mode counting).
    pub user_only: bool,
}

/// Figures derived over the interval.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct PmuDerivedReport {
    /// Instructions per cycle.
    pub ipc: MetricReport,
    /// 100 × cache-misses / cache-references.
    pub cache_miss_pct: MetricReport,
    pub llc_misses_per_pkt: MetricReport,
    pub dtlb_misses_per_pkt: MetricReport,
    pub context_switches_per_s: MetricReport,
}

/// A number, or `None` and why not.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct MetricReport {
    pub value: Option<f64>,
    pub reason: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct FlowReport {
    pub priority: u16,
    pub cookie: u64,
    pub n_packets: u64,
    pub n_bytes: u64,
    pub duration_secs: f64,
    /// Seconds since a packet last hit the rule (since it was added, if
    /// none has): what its idle timeout counts.
    #[serde(default)]
    pub idle_age_secs: f64,
    /// The rule in ovs-ofctl syntax (re-parsable by add-flow).
    pub rule: String,
}

/// `trace`: one packet through the flow table.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TraceReport {
    /// Every field of the packet, as the datapath's flow key holds it.
    pub packet: String,
    /// `port-wide rule` (no lookup), or `classifier` with the subtables
    /// it visited.
    pub decided_by: String,
    /// The rule that matched, as dump-flows shows it (`None`: no rule
    /// matches, the packet is dropped as `no_match`).
    pub rule: Option<String>,
    pub cookie: Option<u64>,
    /// Every table the packet was looked up in, in order, with the rule
    /// it matched there (`None`: that table missed and the pipeline
    /// ended); one entry unless the rule goes on to later tables.
    #[serde(default)]
    pub tables: Vec<TraceTableReport>,
    pub steps: Vec<TraceStepReport>,
    /// Actions never applied: after the last output, or after a drop
    /// (`dec_ttl` on a TTL of 0 or 1).
    pub unused_actions: Vec<String>,
    /// Where the packet leaves: port numbers with names, or `normal`;
    /// a group's buckets' outputs where the group's step is; then the
    /// tracked copies' (`ct(table=T)`), in the order they are looked up.
    pub outputs: Vec<String>,
    /// What the PMD's caches keep after it.
    pub cache: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TraceTableReport {
    pub table: u8,
    pub rule: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TraceStepReport {
    pub action: String,
    /// The packet's fields after the action.
    pub packet: String,
    pub note: Option<String>,
    /// `group:N`: the buckets that ran, each on its own copy of the packet
    /// (left out for other actions).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub buckets: Vec<TraceBucketReport>,
    /// `ct(table=T)`: its tracked copy, looked up again from table T (left
    /// out for other actions, and for a copy past the recirculation limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recirculation: Option<Box<TraceRecirculationReport>>,
}

/// A `ct(table=T)`'s tracked copy as the trace followed it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TraceRecirculationReport {
    /// Its place in the order the datapath looks tracked copies up (1
    /// first): the `--ct-next` it takes.
    pub recirculation: usize,
    /// 1 for a copy of the packet's own actions, 2 for a copy a round-1
    /// copy sent, ...
    pub round: usize,
    /// The connection states the tracker is taken to answer (`new|trk`),
    /// and where they come from (`--ct-next N`, or the default).
    pub ct_state: String,
    pub ct_state_from: String,
    /// Every field of the key looked up.
    pub packet: String,
    /// The rule that matched (`None`: none; the copy is dropped,
    /// `no_match`).
    pub rule: Option<String>,
    /// Every table it was looked up in, with the rule each matched.
    pub tables: Vec<TraceTableReport>,
    pub steps: Vec<TraceStepReport>,
    pub unused_actions: Vec<String>,
    /// Where this copy leaves (the copies it forks list their own).
    pub outputs: Vec<String>,
}

/// One group bucket as it ran on its copy of the packet.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TraceBucketReport {
    /// The bucket's place in the group (0 first).
    pub bucket: usize,
    pub steps: Vec<TraceStepReport>,
    /// The bucket's actions never applied (after its last output, or
    /// after a drop).
    pub unused_actions: Vec<String>,
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
