//! Prometheus metrics. A collector reads the node on every scrape (the
//! node's counters are the source of truth; nothing is copied between
//! scrapes) and `prometheus-client` encodes OpenMetrics text, which
//! [`to_text_004`] turns into the classic text format for tools that do
//! not speak OpenMetrics (`promtool check metrics`).
//!
//! Names: `nfvswitch_` prefix, counters end in `_total`, base units
//! (`_bytes`, `_seconds`), ratios 0..1 end in `_ratio`; labels are
//! snake_case: `port`, `port_no`, `type`, `queue`, `reason`, `pmd`,
//! `core`, `chain`, `vnf`, `stream`, `event`.

use crate::served::Served;
use nfv_control::Node;
use nfv_control::protocol::{ChainReport, VnfReport};
use nfv_control::vnf_figures::{VNF_FIGURES, VnfValue};
use nfv_datapath::PortView;
use nfv_ports::{
    DropReason, FigureKind, GAUGE_METRICS, GaugeMetric, PORT_FIGURES, PortExport, PortFigure,
    PortGauges, PortUnit, QueueCounters, QueueSnapshot,
};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::{Registry, Unit};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

pub const TEXT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
pub const OPENMETRICS_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

type Labels = Vec<(&'static str, String)>;

/// One metric family and its samples, before encoding.
struct Family {
    name: Cow<'static, str>,
    help: &'static str,
    unit: Option<Unit>,
    samples: Samples,
}

enum Samples {
    Counter(Vec<(Labels, u64)>),
    /// A counter of a fractional quantity (seconds).
    CounterF(Vec<(Labels, f64)>),
    Gauge(Vec<(Labels, f64)>),
}

impl Family {
    fn counter(name: impl Into<Cow<'static, str>>, help: &'static str) -> Family {
        Family {
            name: name.into(),
            help,
            unit: None,
            samples: Samples::Counter(Vec::new()),
        }
    }
    fn gauge(name: impl Into<Cow<'static, str>>, help: &'static str) -> Family {
        Family {
            name: name.into(),
            help,
            unit: None,
            samples: Samples::Gauge(Vec::new()),
        }
    }
    /// The unit is appended to the name by the encoder.
    fn unit(mut self, unit: Unit) -> Family {
        self.unit = Some(unit);
        self
    }
    /// A counter of seconds (or another fractional quantity).
    fn counter_f(name: impl Into<Cow<'static, str>>, help: &'static str) -> Family {
        Family {
            name: name.into(),
            help,
            unit: None,
            samples: Samples::CounterF(Vec::new()),
        }
    }
    /// Adds a figure's value as its kind wants it.
    fn figure(&mut self, kind: FigureKind, labels: Labels, v: u64) {
        match kind {
            FigureKind::Counter => self.count(labels, v),
            FigureKind::Gauge => self.set(labels, v as f64),
        }
    }
    fn count(&mut self, labels: Labels, v: u64) {
        match &mut self.samples {
            Samples::Counter(s) => s.push((labels, v)),
            Samples::CounterF(s) | Samples::Gauge(s) => s.push((labels, v as f64)),
        }
    }
    fn set(&mut self, labels: Labels, v: f64) {
        match &mut self.samples {
            Samples::Counter(s) => s.push((labels, v as u64)),
            Samples::CounterF(s) | Samples::Gauge(s) => s.push((labels, v)),
        }
    }
    fn encode(&self, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let ty = match self.samples {
            Samples::Counter(_) | Samples::CounterF(_) => MetricType::Counter,
            Samples::Gauge(_) => MetricType::Gauge,
        };
        let mut m = encoder.encode_descriptor(&self.name, self.help, self.unit.as_ref(), ty)?;
        match &self.samples {
            Samples::Counter(s) => {
                for (labels, v) in s {
                    ConstCounter::new(*v).encode(m.encode_family(labels)?)?;
                }
            }
            Samples::CounterF(s) => {
                for (labels, v) in s {
                    ConstCounter::new(*v).encode(m.encode_family(labels)?)?;
                }
            }
            Samples::Gauge(s) => {
                for (labels, v) in s {
                    ConstGauge::new(*v).encode(m.encode_family(labels)?)?;
                }
            }
        }
        Ok(())
    }
}

/// Reads the node on each scrape.
struct NodeCollector {
    served: Arc<Served>,
}

impl std::fmt::Debug for NodeCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NodeCollector({})", self.served.node().name)
    }
}

impl Collector for NodeCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for f in collect(&self.served.node()) {
            f.encode(&mut encoder)?;
        }
        Ok(())
    }
}

pub fn registry(served: Arc<Served>) -> Registry {
    let mut r = Registry::with_prefix("nfvswitch");
    r.register_collector(Box::new(NodeCollector { served }));
    r
}

/// OpenMetrics text of everything in `registry`.
pub fn encode(registry: &Registry) -> Result<String, std::fmt::Error> {
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, registry)?;
    Ok(out)
}

/// OpenMetrics text → Prometheus text format 0.0.4: a counter family's
/// HELP and TYPE name its samples (`x_total`, not `x`), and there is no
/// `# UNIT` or `# EOF`. Samples are the same in both.
pub fn to_text_004(open_metrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = open_metrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(open_metrics.len());
    for line in open_metrics.lines() {
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "]
            .into_iter()
            .find(|p| line.starts_with(p));
        if let Some(p) = meta {
            let rest = &line[p.len()..];
            let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
            if counters.contains(name) {
                out.push_str(&format!("{p}{name}_total {tail}\n"));
                continue;
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

fn port_labels(name: &str, no: u16, ty: &str) -> Labels {
    vec![
        ("port", name.to_string()),
        ("port_no", no.to_string()),
        ("type", ty.to_string()),
    ]
}

fn with(mut l: Labels, k: &'static str, v: impl ToString) -> Labels {
    l.push((k, v.to_string()));
    l
}

/// Every family, read from the node now.
fn collect(node: &Node) -> Vec<Family> {
    let mut out = Vec::new();
    node_families(node, &mut out);
    port_families(node, &mut out);
    pmd_families(node, &mut out);
    chain_families(node, &mut out);
    traffic_families(node, &mut out);
    openflow_families(node, &mut out);
    out
}

/// The OpenFlow agent (`show controllers`): connections, messages, and
/// where packet-ins went. Nothing when no `[openflow]` is configured.
fn openflow_families(node: &Node, out: &mut Vec<Family>) {
    let c = node.show_controllers();
    let Some(conns) = c["connections"].as_array() else {
        return;
    };
    if c["listen"].as_array().is_none_or(|l| l.is_empty()) {
        return;
    }
    let mut connected = Family::gauge(
        "openflow_connections",
        "OpenFlow connections (controllers and clients such as ovs-ofctl) by role.",
    );
    let mut by_role = BTreeMap::<String, f64>::new();
    let mut received = Family::counter(
        "openflow_messages_received",
        "OpenFlow messages received, by type, over the connections open now.",
    );
    let mut by_type = BTreeMap::<String, u64>::new();
    let (mut errors, mut async_sent, mut async_dropped) = (0, 0, 0);
    for s in conns {
        *by_role
            .entry(s["role"].as_str().unwrap_or("?").to_string())
            .or_default() += 1.0;
        if let Some(o) = s["received"].as_object() {
            for (k, n) in o {
                *by_type.entry(k.clone()).or_default() += n.as_u64().unwrap_or(0);
            }
        }
        errors += s["errors_sent"].as_u64().unwrap_or(0);
        async_sent += s["async_sent"].as_u64().unwrap_or(0);
        async_dropped += s["async_dropped"].as_u64().unwrap_or(0);
    }
    for (role, n) in by_role {
        connected.set(vec![("role", role)], n);
    }
    for (t, n) in by_type {
        received.count(vec![("type", t)], n);
    }
    let mut sent = Family::counter(
        "openflow_errors_sent",
        "OFPT_ERROR replies sent (requests refused), over the connections open now.",
    );
    sent.count(vec![], errors);
    let mut asyncs = Family::counter(
        "openflow_async_messages",
        "Asynchronous messages (packet-in, flow removed, port status) by outcome: sent, or dropped for a controller's full send queue.",
    );
    asyncs.count(vec![("outcome", "sent".into())], async_sent);
    asyncs.count(vec![("outcome", "dropped".into())], async_dropped);
    let mut pin = Family::counter(
        "openflow_packet_ins",
        "Packet-in counters, by what each counts (`show controllers`'s names): queued for the agent, dropped at the in_port's full queue (the controller or the rate limit behind), dropped with no controller connected, cut to a slot's size, dropped for a controller's full send queue.",
    );
    // The outcomes as `show controllers` names them (one list, in the
    // datapath's `ControllerPath`).
    for (outcome, n) in c["packet_in"].as_object().into_iter().flatten() {
        pin.count(vec![("what", outcome.clone())], n.as_u64().unwrap_or(0));
    }
    let mut pout = Family::counter(
        "openflow_packet_outs",
        "Packets controllers sent out, by outcome: sent, or refused (no buffer, too long).",
    );
    for (outcome, n) in c["packet_out"].as_object().into_iter().flatten() {
        pout.count(vec![("outcome", outcome.clone())], n.as_u64().unwrap_or(0));
    }
    out.extend([connected, received, sent, asyncs, pin, pout]);
}

fn node_families(node: &Node, out: &mut Vec<Family>) {
    let n = node.show_node();
    let mut info = Family::gauge("build_info", "nfvswitch version (always 1).");
    info.set(
        vec![("version", n.version.clone()), ("node", n.name.clone())],
        1.0,
    );
    let mut start = Family::gauge(
        "start_time",
        "When the node started, seconds since the Unix epoch.",
    )
    .unit(Unit::Seconds);
    start.set(vec![], n.started);
    let mut up = Family::gauge("uptime", "Seconds since the node started.").unit(Unit::Seconds);
    up.set(vec![], n.uptime_secs);
    let mut tsc = Family::gauge(
        "tsc_hertz",
        "TSC cycles per second (to turn the cycle counters into time).",
    );
    tsc.set(vec![], nfv_tsc::hz() as f64);
    let mut flows = Family::gauge("flow_rules", "Rules in the flow table.");
    flows.set(vec![], n.flows as f64);
    let mut pool = Family::gauge("memory_frames", "Packet buffers in the pool.");
    pool.set(
        vec![("backing", n.memory.backing.clone())],
        n.memory.frames as f64,
    );
    out.extend([info, start, up, tsc, flows, pool]);
}

fn port_families(node: &Node, out: &mut Vec<Family>) {
    let mut traffic = PortTraffic::new();
    let mut gauges = PortGaugeFamilies::new();
    for v in node.datapath().port_views() {
        let l = port_labels(v.port.name(), v.no, v.port.type_name());
        traffic.add(&l, &v);
        gauges.add(&l, &v.port.gauges());
    }
    out.extend(traffic.families());
    out.extend(gauges.families());
}

/// A family of a figure of `kind`, empty.
fn figure_family(
    name: impl Into<Cow<'static, str>>,
    kind: FigureKind,
    help: &'static str,
) -> Family {
    match kind {
        FigureKind::Counter => Family::counter(name, help),
        FigureKind::Gauge => Family::gauge(name, help),
    }
}

/// The family of a per-port figure, with the `bytes` unit for byte counts
/// (`port_rx` + bytes = `nfvswitch_port_rx_bytes_total`).
fn port_figure_family(name: String, f: &PortFigure, help: &'static str) -> Family {
    match f.unit {
        PortUnit::Bytes => {
            let name = name.strip_suffix("_bytes").unwrap_or(&name).to_string();
            figure_family(name, f.kind, help).unit(Unit::Bytes)
        }
        _ => figure_family(name, f.kind, help),
    }
}

/// One exported direction of a per-port figure.
struct PortSeries {
    family: Family,
    figure: &'static PortFigure,
    rx: bool,
}

impl PortSeries {
    /// `port_<level><rx|tx>_<name>` of every figure with a help text for
    /// that level, in declaration order, rx before tx.
    fn all(level: &str, help: fn(&PortExport) -> Option<&'static str>) -> Vec<PortSeries> {
        PORT_FIGURES
            .iter()
            .flat_map(|f| [(f, true), (f, false)])
            .filter_map(|(f, rx)| {
                let help = help(&f.export(rx)?)?;
                let dir = if rx { "rx" } else { "tx" };
                Some(PortSeries {
                    family: port_figure_family(format!("port_{level}{dir}_{}", f.name), f, help),
                    figure: f,
                    rx,
                })
            })
            .collect()
    }

    fn add(&mut self, labels: Labels, s: &QueueSnapshot) {
        self.family
            .figure(self.figure.kind, labels, (self.figure.get)(&s.figures()));
    }
}

/// What the switch counted on each port ([`PORT_FIGURES`]): each figure's
/// port totals, drops by reason, then each figure per queue.
struct PortTraffic {
    totals: Vec<PortSeries>,
    rx_d: Family,
    tx_d: Family,
    queues: Vec<PortSeries>,
}

impl PortTraffic {
    fn new() -> PortTraffic {
        PortTraffic {
            totals: PortSeries::all("", |e| e.port_help),
            rx_d: Family::counter(
                "port_rx_dropped_packets",
                "Packets received on a port and dropped, by reason.",
            ),
            tx_d: Family::counter(
                "port_tx_dropped_packets",
                "Packets not transmitted on a port, by reason.",
            ),
            queues: PortSeries::all("queue_", |e| e.queue_help),
        }
    }

    fn add(&mut self, l: &Labels, v: &PortView) {
        let (rx, tx) = (v.stats.rx_total(), v.stats.tx_total());
        for s in &mut self.totals {
            s.add(l.clone(), if s.rx { &rx } else { &tx });
        }
        for (i, r) in DropReason::ALL.iter().enumerate() {
            self.rx_d
                .count(with(l.clone(), "reason", r.as_str()), rx.drops[i]);
            self.tx_d
                .count(with(l.clone(), "reason", r.as_str()), tx.drops[i]);
        }
        let snapshots = |qs: &[QueueCounters]| qs.iter().map(|c| c.snapshot()).collect::<Vec<_>>();
        let (rxqs, txqs) = (snapshots(&v.stats.rx), snapshots(&v.stats.tx));
        for s in &mut self.queues {
            for (q, snap) in if s.rx { &rxqs } else { &txqs }.iter().enumerate() {
                s.add(with(l.clone(), "queue", q), snap);
            }
        }
    }

    /// In the order they are exported.
    fn families(self) -> Vec<Family> {
        let totals = self.totals.into_iter().map(|s| s.family);
        let queues = self.queues.into_iter().map(|s| s.family);
        totals.chain([self.rx_d, self.tx_d]).chain(queues).collect()
    }
}

/// What ports report of themselves ([`PortGauges`]): a family for each
/// gauge [`GAUGE_METRICS`] declares, with a series for each port that
/// has it.
struct PortGaugeFamilies {
    families: Vec<(&'static GaugeMetric, Family)>,
}

impl PortGaugeFamilies {
    fn new() -> PortGaugeFamilies {
        PortGaugeFamilies {
            families: GAUGE_METRICS
                .iter()
                .map(|g| (g, figure_family(g.metric, g.kind, g.help)))
                .collect(),
        }
    }

    fn add(&mut self, l: &Labels, gauges: &PortGauges) {
        for (g, fam) in &mut self.families {
            for (label, v) in g.series(gauges) {
                let labels = match (g.label, label) {
                    (Some(k), Some(value)) => with(l.clone(), k, value),
                    _ => l.clone(),
                };
                fam.figure(g.kind, labels, v);
            }
        }
    }

    /// In the order they are exported.
    fn families(self) -> Vec<Family> {
        self.families.into_iter().map(|(_, f)| f).collect()
    }
}

fn pmd_families(node: &Node, out: &mut Vec<Family>) {
    use nfv_datapath::stats::PMD_FIGURES;
    // Every declared per-PMD figure, under its own name and help.
    let mut figures: Vec<Family> = PMD_FIGURES
        .iter()
        .map(|f| figure_family(format!("pmd_{}", f.name), f.kind, f.help))
        .collect();
    let mut cpp = Family::gauge(
        "pmd_cycles_per_packet",
        "Busy TSC cycles per received packet over the last second with traffic \
         (cumulative when the last second had none).",
    );
    let mut ratio = Family::gauge(
        "pmd_busy_ratio",
        "Share of cycles in busy iterations over the last second, 0 to 1.",
    );
    let mut pps = Family::gauge(
        "pmd_rx_packets_per_second",
        "Packets received per second over the last second.",
    );
    let reports = node.show_pmd();
    for r in &reports {
        let l: Labels = vec![
            ("pmd", r.index.to_string()),
            ("core", r.core.map_or("none".into(), |c| c.to_string())),
        ];
        for (fam, f) in figures.iter_mut().zip(PMD_FIGURES) {
            fam.figure(f.kind, l.clone(), (f.get)(&r.figures));
        }
        if let Some(c) = r.cycles_per_packet {
            cpp.set(l.clone(), c);
        }
        ratio.set(l.clone(), r.busy_percent / 100.0);
        pps.set(l, r.mpps * 1e6);
    }
    out.append(&mut figures);
    out.extend([cpp, ratio, pps]);
    pmu_families(&reports, out);
}

/// PMU counters of each PMD: supported ones as counters, and for every
/// counter whether this machine supports it (VMs often do not).
fn pmu_families(reports: &[nfv_control::protocol::PmdReport], out: &mut Vec<Family>) {
    let mut enabled = Family::gauge(
        "pmu_enabled",
        "1 when the PMD thread counts PMU events (datapath pmu = true).",
    );
    let mut supported = Family::gauge(
        "pmu_event_supported",
        "1 when this PMU event can be counted on this machine, 0 when not \
         (its values are then absent).",
    );
    let mut events = Family::counter(
        "pmu_events",
        "PMU events counted on a PMD thread (perf event names in `event`).",
    );
    let mut time = Family::counter_f(
        "pmu_time",
        "PMU time counters of a PMD thread (task-clock).",
    )
    .unit(Unit::Seconds);
    let mut ipc = Family::gauge(
        "pmu_instructions_per_cycle",
        "Instructions per cycle over the last second.",
    );
    let mut miss = Family::gauge(
        "pmu_cache_miss_ratio",
        "cache-misses / cache-references over the last second, 0 to 1.",
    );
    let mut llc = Family::gauge(
        "pmu_llc_misses_per_packet",
        "LLC load misses per received packet over the last second.",
    );
    let mut dtlb = Family::gauge(
        "pmu_dtlb_misses_per_packet",
        "dTLB load misses per received packet over the last second.",
    );
    for r in reports {
        let l: Labels = vec![
            ("pmd", r.index.to_string()),
            ("core", r.core.map_or("none".into(), |c| c.to_string())),
        ];
        let p = &r.pmu;
        enabled.set(l.clone(), if p.enabled { 1.0 } else { 0.0 });
        for c in &p.counters {
            let cl = with(l.clone(), "event", &c.name);
            supported.set(cl.clone(), if c.total.is_some() { 1.0 } else { 0.0 });
            match (c.total, c.unit.as_str()) {
                (Some(t), "ns") => time.set(cl, t as f64 / 1e9),
                (Some(t), _) => events.count(cl, t),
                (None, _) => {}
            }
        }
        let d = &p.derived;
        for (fam, m, scale) in [
            (&mut ipc, &d.ipc, 1.0),
            (&mut miss, &d.cache_miss_pct, 0.01),
            (&mut llc, &d.llc_misses_per_pkt, 1.0),
            (&mut dtlb, &d.dtlb_misses_per_pkt, 1.0),
        ] {
            if let Some(v) = m.value.filter(|v| v.is_finite()) {
                fam.set(l.clone(), v * scale);
            }
        }
    }
    out.extend([enabled, supported, events, time, ipc, miss, llc, dtlb]);
}

fn chain_families(node: &Node, out: &mut Vec<Family>) {
    let mut vnfs = VnfFamilies::new();
    let mut chains = ChainFamilies::new();
    let ports: BTreeMap<u16, (u64, u64)> = node
        .datapath()
        .port_views()
        .into_iter()
        .map(|v| {
            (
                v.no,
                (v.stats.rx_total().packets, v.stats.tx_total().packets),
            )
        })
        .collect();
    let reports = node.show_chains();
    for (cfg, r) in node.chains().iter().zip(&reports) {
        let l: Labels = vec![("chain", r.name.clone())];
        let get = |id: u16| ports.get(&id).copied().unwrap_or_default();
        let packets_in = get(cfg.ingress().1).0;
        let packets_out = get(cfg.egress().1).1;
        chains.add(&l, r, packets_in, packets_out);
        for v in &r.vnfs {
            vnfs.add(with(with(l.clone(), "vnf", &v.name), "port_no", v.port), v);
        }
    }
    out.extend(vnfs.families());
    out.extend(chains.families());
}

/// Each VNF of each chain: a family per figure [`VNF_FIGURES`] declares.
struct VnfFamilies {
    families: Vec<Family>,
}

impl VnfFamilies {
    fn new() -> VnfFamilies {
        VnfFamilies {
            families: VNF_FIGURES
                .iter()
                .map(|f| figure_family(format!("vnf_{}", f.metric), f.kind, f.help))
                .collect(),
        }
    }

    fn add(&mut self, vl: Labels, v: &VnfReport) {
        for (fam, f) in self.families.iter_mut().zip(VNF_FIGURES) {
            match (f.get)(v) {
                VnfValue::Count(n) => fam.count(vl.clone(), n),
                value => fam.set(vl.clone(), f.unit.metric(value)),
            }
        }
    }

    /// In the order they are exported.
    fn families(self) -> Vec<Family> {
        self.families
    }
}

/// Each chain, end to end.
struct ChainFamilies {
    ingress: Family,
    egress: Family,
    ingress_pps: Family,
    egress_pps: Family,
    egress_bps: Family,
    loss: Family,
}

impl ChainFamilies {
    fn new() -> ChainFamilies {
        ChainFamilies {
            ingress: Family::counter(
                "chain_ingress_packets",
                "Packets received on a chain's ingress port.",
            ),
            egress: Family::counter(
                "chain_egress_packets",
                "Packets transmitted on a chain's egress port.",
            ),
            ingress_pps: Family::gauge(
                "chain_ingress_packets_per_second",
                "Packets per second into a chain over the last second.",
            ),
            egress_pps: Family::gauge(
                "chain_egress_packets_per_second",
                "Packets per second out of a chain over the last second.",
            ),
            egress_bps: Family::gauge(
                "chain_egress_bytes_per_second",
                "Bytes per second out of a chain over the last second.",
            ),
            loss: Family::gauge(
                "chain_loss_ratio",
                "1 - egress/ingress packet rate over the last second, 0 to 1.",
            ),
        }
    }

    /// Chain `r`: `packets_in` received on its ingress port,
    /// `packets_out` sent on its egress port.
    fn add(&mut self, l: &Labels, r: &ChainReport, packets_in: u64, packets_out: u64) {
        self.ingress.count(l.clone(), packets_in);
        self.egress.count(l.clone(), packets_out);
        self.ingress_pps.set(l.clone(), r.ingress_mpps * 1e6);
        self.egress_pps.set(l.clone(), r.egress_mpps * 1e6);
        self.egress_bps.set(l.clone(), r.egress_gbps * 1e9 / 8.0);
        self.loss.set(l.clone(), r.loss_percent / 100.0);
    }

    /// In the order they are exported.
    fn families(self) -> [Family; 6] {
        [
            self.ingress,
            self.egress,
            self.ingress_pps,
            self.egress_pps,
            self.egress_bps,
            self.loss,
        ]
    }
}

fn traffic_families(node: &Node, out: &mut Vec<Family>) {
    let mut recv = Family::counter(
        "stream_received_packets",
        "Stamped packets a receiver port got from one stream.",
    );
    let mut lost = Family::counter(
        "stream_lost_packets",
        "Sequence gaps not filled in one stream.",
    );
    let mut reord = Family::counter(
        "stream_reordered_packets",
        "Packets of one stream that arrived out of order.",
    );
    let mut dup = Family::counter(
        "stream_duplicate_packets",
        "Duplicate packets in one stream.",
    );
    for t in node.show_traffic() {
        for s in &t.streams {
            let l: Labels = vec![
                ("port", t.name.clone()),
                ("port_no", t.no.to_string()),
                ("stream", s.stream.to_string()),
            ];
            recv.count(l.clone(), s.received);
            lost.count(l.clone(), s.lost);
            reord.count(l.clone(), s.reordered);
            dup.count(l, s.duplicates);
        }
    }
    out.extend([recv, lost, reord, dup]);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A collector of fixed families, for tests.
    #[derive(Debug)]
    struct Fixed(fn() -> Vec<Family>);

    impl Collector for Fixed {
        fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
            for f in (self.0)() {
                f.encode(&mut encoder)?;
            }
            Ok(())
        }
    }

    fn text_of(families: fn() -> Vec<Family>) -> String {
        let mut r = Registry::with_prefix("nfvswitch");
        r.register_collector(Box::new(Fixed(families)));
        to_text_004(&encode(&r).unwrap())
    }

    fn labels(port: &str) -> Labels {
        port_labels(port, 3, "vhost-user")
    }

    /// Every gauge a port type may export, under its name, type and help.
    #[test]
    fn port_gauges_keep_their_names_and_help() {
        let t = text_of(|| {
            let g = PortGauges {
                connected: Some(true),
                queued: Some(7),
                guest_rx_free: Some(250),
                other: vec![
                    ("vring0", nfv_ports::Gauge::Text("x".into())),
                    (PortGauges::ONE_COPY_PACKETS, 11u64.into()),
                    (PortGauges::ZERO_COPY_PACKETS, 12u64.into()),
                    ("zc_fallback_no_guest_buffer", 2u64.into()),
                    ("zc_fallback_bad_chain", 1u64.into()),
                    (PortGauges::SENT_IN_PLACE_PACKETS, 13u64.into()),
                ],
            };
            let mut f = PortGaugeFamilies::new();
            f.add(&labels("v"), &g);
            f.add(&labels("bare"), &PortGauges::default());
            f.families()
        });
        assert_eq!(
            t,
            concat!(
                "# HELP nfvswitch_port_ring_queued_packets Packets waiting in a port's ring (ports that expose it).\n",
                "# TYPE nfvswitch_port_ring_queued_packets gauge\n",
                "nfvswitch_port_ring_queued_packets{port=\"v\",port_no=\"3\",type=\"vhost-user\"} 7.0\n",
                "# HELP nfvswitch_port_guest_rx_buffers Receive buffers the guest had posted at the switch's last transmit burst to it (vhost-user ports); 0 = the guest is not draining.\n",
                "# TYPE nfvswitch_port_guest_rx_buffers gauge\n",
                "nfvswitch_port_guest_rx_buffers{port=\"v\",port_no=\"3\",type=\"vhost-user\"} 250.0\n",
                "# HELP nfvswitch_port_connected 1 when the port's peer is connected (ports that have one).\n",
                "# TYPE nfvswitch_port_connected gauge\n",
                "nfvswitch_port_connected{port=\"v\",port_no=\"3\",type=\"vhost-user\"} 1.0\n",
                "# HELP nfvswitch_port_one_copy_packets_total Frames received on a vhost-user port and forwarded in one copy (the switch copied their headers, the receiving port the rest straight from the sender's buffer).\n",
                "# TYPE nfvswitch_port_one_copy_packets_total counter\n",
                "nfvswitch_port_one_copy_packets_total{port=\"v\",port_no=\"3\",type=\"vhost-user\"} 11\n",
                "# HELP nfvswitch_port_zero_copy_packets_total Frames moved without a switch copy: on a kernel port with zero_copy, received straight into the VNF's buffers; on that VNF's vhost-user port, completed in place.\n",
                "# TYPE nfvswitch_port_zero_copy_packets_total counter\n",
                "nfvswitch_port_zero_copy_packets_total{port=\"v\",port_no=\"3\",type=\"vhost-user\"} 12\n",
                "# HELP nfvswitch_port_zero_copy_fallbacks_total Why a zero-copy kernel port copied a frame (no_guest_buffer) or stopped lending guest buffers for a burst (buffer_shape, short_buffer, outside_umem, bad_chain).\n",
                "# TYPE nfvswitch_port_zero_copy_fallbacks_total counter\n",
                "nfvswitch_port_zero_copy_fallbacks_total{port=\"v\",port_no=\"3\",type=\"vhost-user\",reason=\"no_guest_buffer\"} 2\n",
                "nfvswitch_port_zero_copy_fallbacks_total{port=\"v\",port_no=\"3\",type=\"vhost-user\",reason=\"bad_chain\"} 1\n",
                "# HELP nfvswitch_port_sent_in_place_packets_total Frames a kernel port with zero_copy sent with their tail read by the kernel straight from the VNF's transmit buffer (send_in_place).\n",
                "# TYPE nfvswitch_port_sent_in_place_packets_total counter\n",
                "nfvswitch_port_sent_in_place_packets_total{port=\"v\",port_no=\"3\",type=\"vhost-user\"} 13\n",
            )
        );
    }

    /// Every per-VNF figure under its name, type and help.
    #[test]
    fn vnf_figures_keep_their_names_and_help() {
        let t = text_of(|| {
            let v = VnfReport {
                name: "vnf1".into(),
                port: 3,
                rx_mpps: 2.5,
                rx_gbps: 1.28,
                tx_mpps: 2.25,
                tx_gbps: 1.152,
                rx_packets: 10,
                tx_packets: 9,
                drops: 1,
                connected: true,
            };
            let mut f = VnfFamilies::new();
            f.add(
                vec![
                    ("chain", "c".into()),
                    ("vnf", "vnf1".into()),
                    ("port_no", "3".into()),
                ],
                &v,
            );
            f.families()
        });
        assert_eq!(
            t,
            concat!(
                "# HELP nfvswitch_vnf_rx_packets_per_second Packets per second delivered to a VNF over the last second.\n",
                "# TYPE nfvswitch_vnf_rx_packets_per_second gauge\n",
                "nfvswitch_vnf_rx_packets_per_second{chain=\"c\",vnf=\"vnf1\",port_no=\"3\"} 2500000.0\n",
                "# HELP nfvswitch_vnf_rx_bytes_per_second Bytes per second delivered to a VNF over the last second.\n",
                "# TYPE nfvswitch_vnf_rx_bytes_per_second gauge\n",
                "nfvswitch_vnf_rx_bytes_per_second{chain=\"c\",vnf=\"vnf1\",port_no=\"3\"} 160000000.0\n",
                "# HELP nfvswitch_vnf_tx_packets_per_second Packets per second a VNF sent over the last second.\n",
                "# TYPE nfvswitch_vnf_tx_packets_per_second gauge\n",
                "nfvswitch_vnf_tx_packets_per_second{chain=\"c\",vnf=\"vnf1\",port_no=\"3\"} 2250000.0\n",
                "# HELP nfvswitch_vnf_tx_bytes_per_second Bytes per second a VNF sent over the last second.\n",
                "# TYPE nfvswitch_vnf_tx_bytes_per_second gauge\n",
                "nfvswitch_vnf_tx_bytes_per_second{chain=\"c\",vnf=\"vnf1\",port_no=\"3\"} 144000000.0\n",
                "# HELP nfvswitch_vnf_rx_packets_total Packets the switch delivered to a VNF of a chain.\n",
                "# TYPE nfvswitch_vnf_rx_packets_total counter\n",
                "nfvswitch_vnf_rx_packets_total{chain=\"c\",vnf=\"vnf1\",port_no=\"3\"} 10\n",
                "# HELP nfvswitch_vnf_tx_packets_total Packets a VNF of a chain sent back into the switch.\n",
                "# TYPE nfvswitch_vnf_tx_packets_total counter\n",
                "nfvswitch_vnf_tx_packets_total{chain=\"c\",vnf=\"vnf1\",port_no=\"3\"} 9\n",
                "# HELP nfvswitch_vnf_dropped_packets_total Packets dropped on a VNF's port, both directions.\n",
                "# TYPE nfvswitch_vnf_dropped_packets_total counter\n",
                "nfvswitch_vnf_dropped_packets_total{chain=\"c\",vnf=\"vnf1\",port_no=\"3\"} 1\n",
                "# HELP nfvswitch_vnf_connected 1 when the VNF is connected.\n",
                "# TYPE nfvswitch_vnf_connected gauge\n",
                "nfvswitch_vnf_connected{chain=\"c\",vnf=\"vnf1\",port_no=\"3\"} 1.0\n",
            )
        );
    }

    #[test]
    fn text_004_names_counter_metadata_like_the_samples() {
        let om = "# HELP nfvswitch_port_rx_bytes Bytes.\n\
                  # TYPE nfvswitch_port_rx_bytes counter\n\
                  # UNIT nfvswitch_port_rx_bytes bytes\n\
                  nfvswitch_port_rx_bytes_total{port=\"a\"} 5\n\
                  # HELP nfvswitch_uptime_seconds Up.\n\
                  # TYPE nfvswitch_uptime_seconds gauge\n\
                  # UNIT nfvswitch_uptime_seconds seconds\n\
                  nfvswitch_uptime_seconds 1.5\n\
                  # EOF\n";
        let t = to_text_004(om);
        assert_eq!(
            t,
            "# HELP nfvswitch_port_rx_bytes_total Bytes.\n\
             # TYPE nfvswitch_port_rx_bytes_total counter\n\
             nfvswitch_port_rx_bytes_total{port=\"a\"} 5\n\
             # HELP nfvswitch_uptime_seconds Up.\n\
             # TYPE nfvswitch_uptime_seconds gauge\n\
             nfvswitch_uptime_seconds 1.5\n"
        );
    }
}
