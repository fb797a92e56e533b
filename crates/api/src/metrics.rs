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
use nfv_ports::{DropReason, PortGauges};
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
    out
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
    let mut rx_p = Family::counter(
        "port_rx_packets",
        "Packets received by the switch on a port.",
    );
    let mut tx_p = Family::counter(
        "port_tx_packets",
        "Packets transmitted by the switch on a port.",
    );
    let mut rx_b = Family::counter("port_rx", "Bytes received on a port.").unit(Unit::Bytes);
    let mut tx_b = Family::counter("port_tx", "Bytes transmitted on a port.").unit(Unit::Bytes);
    let mut rx_d = Family::counter(
        "port_rx_dropped_packets",
        "Packets received on a port and dropped, by reason.",
    );
    let mut tx_d = Family::counter(
        "port_tx_dropped_packets",
        "Packets not transmitted on a port, by reason.",
    );
    let mut q_rx_p = Family::counter(
        "port_queue_rx_packets",
        "Packets received on one rx queue of a port.",
    );
    let mut q_tx_p = Family::counter(
        "port_queue_tx_packets",
        "Packets transmitted on one tx queue of a port (one per PMD thread).",
    );
    let mut q_rx_b =
        Family::counter("port_queue_rx", "Bytes received on one rx queue.").unit(Unit::Bytes);
    let mut q_tx_b =
        Family::counter("port_queue_tx", "Bytes transmitted on one tx queue.").unit(Unit::Bytes);
    let mut queued = Family::gauge(
        "port_ring_queued_packets",
        "Packets waiting in a port's ring (ports that expose it).",
    );
    let mut guest_rx = Family::gauge(
        "port_guest_rx_buffers",
        "Receive buffers the guest had posted at the switch's last transmit burst to it \
         (vhost-user ports); 0 = the guest is not draining.",
    );
    let mut connected = Family::gauge(
        "port_connected",
        "1 when the port's peer is connected (ports that have one).",
    );
    let mut one_copy = Family::counter(
        "port_one_copy_packets",
        "Frames received on a vhost-user port and forwarded in one copy (the switch copied \
         their headers, the receiving port the rest straight from the sender's buffer).",
    );
    let mut zero_copy = Family::counter(
        "port_zero_copy_packets",
        "Frames moved without a switch copy: on a kernel port with zero_copy, received \
         straight into the VNF's buffers; on that VNF's vhost-user port, completed in place.",
    );
    let mut zc_fallback = Family::counter(
        "port_zero_copy_fallbacks",
        "Why a zero-copy kernel port copied a frame (no_guest_buffer) or stopped lending \
         guest buffers for a burst (buffer_shape, short_buffer, outside_umem, bad_chain).",
    );
    let mut sent_in_place = Family::counter(
        "port_sent_in_place_packets",
        "Frames a kernel port with zero_copy sent with their tail read by the kernel straight \
         from the VNF's transmit buffer (send_in_place).",
    );
    for v in node.datapath().port_views() {
        let l = port_labels(v.port.name(), v.no, v.port.type_name());
        let (rx, tx) = (v.stats.rx_total(), v.stats.tx_total());
        rx_p.count(l.clone(), rx.packets);
        tx_p.count(l.clone(), tx.packets);
        rx_b.count(l.clone(), rx.bytes);
        tx_b.count(l.clone(), tx.bytes);
        for (i, r) in DropReason::ALL.iter().enumerate() {
            rx_d.count(with(l.clone(), "reason", r.as_str()), rx.drops[i]);
            tx_d.count(with(l.clone(), "reason", r.as_str()), tx.drops[i]);
        }
        for (q, c) in v.stats.rx.iter().enumerate() {
            let s = c.snapshot();
            q_rx_p.count(with(l.clone(), "queue", q), s.packets);
            q_rx_b.count(with(l.clone(), "queue", q), s.bytes);
        }
        for (q, c) in v.stats.tx.iter().enumerate() {
            let s = c.snapshot();
            q_tx_p.count(with(l.clone(), "queue", q), s.packets);
            q_tx_b.count(with(l.clone(), "queue", q), s.bytes);
        }
        let gauges = v.port.gauges();
        if let Some(n) = gauges.queued {
            queued.set(l.clone(), n as f64);
        }
        if let Some(n) = gauges.guest_rx_free {
            guest_rx.set(l.clone(), n as f64);
        }
        if let Some(c) = gauges.connected {
            connected.set(l.clone(), if c { 1.0 } else { 0.0 });
        }
        if let Some(n) = gauges.count(PortGauges::ONE_COPY_PACKETS) {
            one_copy.count(l.clone(), n);
        }
        if let Some(n) = gauges.count(PortGauges::ZERO_COPY_PACKETS) {
            zero_copy.count(l.clone(), n);
        }
        if let Some(n) = gauges.count(PortGauges::SENT_IN_PLACE_PACKETS) {
            sent_in_place.count(l.clone(), n);
        }
        for (k, _) in gauges.entries() {
            if let Some(reason) = k.strip_prefix("zc_fallback_")
                && let Some(n) = gauges.count(k)
            {
                zc_fallback.count(with(l.clone(), "reason", reason), n);
            }
        }
    }
    out.extend([
        rx_p,
        tx_p,
        rx_b,
        tx_b,
        rx_d,
        tx_d,
        q_rx_p,
        q_tx_p,
        q_rx_b,
        q_tx_b,
        queued,
        guest_rx,
        connected,
        one_copy,
        zero_copy,
        zc_fallback,
        sent_in_place,
    ]);
}

fn pmd_families(node: &Node, out: &mut Vec<Family>) {
    use nfv_datapath::stats::{FigureKind, PMD_FIGURES};
    // Every declared per-PMD figure, under its own name and help.
    let mut figures: Vec<Family> = PMD_FIGURES
        .iter()
        .map(|f| {
            let name = format!("pmd_{}", f.name);
            match f.kind {
                FigureKind::Counter => Family::counter(name, f.help),
                FigureKind::Gauge => Family::gauge(name, f.help),
            }
        })
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
            match f.kind {
                FigureKind::Counter => fam.count(l.clone(), (f.get)(&r.figures)),
                FigureKind::Gauge => fam.set(l.clone(), (f.get)(&r.figures) as f64),
            }
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
    let mut vnf_rx = Family::counter(
        "vnf_rx_packets",
        "Packets the switch delivered to a VNF of a chain.",
    );
    let mut vnf_tx = Family::counter(
        "vnf_tx_packets",
        "Packets a VNF of a chain sent back into the switch.",
    );
    let mut vnf_drops = Family::counter(
        "vnf_dropped_packets",
        "Packets dropped on a VNF's port, both directions.",
    );
    let mut vnf_rx_pps = Family::gauge(
        "vnf_rx_packets_per_second",
        "Packets per second delivered to a VNF over the last second.",
    );
    let mut vnf_tx_pps = Family::gauge(
        "vnf_tx_packets_per_second",
        "Packets per second a VNF sent over the last second.",
    );
    let mut vnf_rx_bps = Family::gauge(
        "vnf_rx_bytes_per_second",
        "Bytes per second delivered to a VNF over the last second.",
    );
    let mut vnf_tx_bps = Family::gauge(
        "vnf_tx_bytes_per_second",
        "Bytes per second a VNF sent over the last second.",
    );
    let mut vnf_up = Family::gauge("vnf_connected", "1 when the VNF is connected.");
    let mut ch_in = Family::counter(
        "chain_ingress_packets",
        "Packets received on a chain's ingress port.",
    );
    let mut ch_out = Family::counter(
        "chain_egress_packets",
        "Packets transmitted on a chain's egress port.",
    );
    let mut ch_in_pps = Family::gauge(
        "chain_ingress_packets_per_second",
        "Packets per second into a chain over the last second.",
    );
    let mut ch_out_pps = Family::gauge(
        "chain_egress_packets_per_second",
        "Packets per second out of a chain over the last second.",
    );
    let mut ch_out_bps = Family::gauge(
        "chain_egress_bytes_per_second",
        "Bytes per second out of a chain over the last second.",
    );
    let mut ch_loss = Family::gauge(
        "chain_loss_ratio",
        "1 - egress/ingress packet rate over the last second, 0 to 1.",
    );
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
        ch_in.count(l.clone(), get(cfg.ingress().1).0);
        ch_out.count(l.clone(), get(cfg.egress().1).1);
        ch_in_pps.set(l.clone(), r.ingress_mpps * 1e6);
        ch_out_pps.set(l.clone(), r.egress_mpps * 1e6);
        ch_out_bps.set(l.clone(), r.egress_gbps * 1e9 / 8.0);
        ch_loss.set(l.clone(), r.loss_percent / 100.0);
        for v in &r.vnfs {
            let vl = with(with(l.clone(), "vnf", &v.name), "port_no", v.port);
            vnf_rx.count(vl.clone(), v.rx_packets);
            vnf_tx.count(vl.clone(), v.tx_packets);
            vnf_drops.count(vl.clone(), v.drops);
            vnf_rx_pps.set(vl.clone(), v.rx_mpps * 1e6);
            vnf_tx_pps.set(vl.clone(), v.tx_mpps * 1e6);
            vnf_rx_bps.set(vl.clone(), v.rx_gbps * 1e9 / 8.0);
            vnf_tx_bps.set(vl.clone(), v.tx_gbps * 1e9 / 8.0);
            vnf_up.set(vl, if v.connected { 1.0 } else { 0.0 });
        }
    }
    out.extend([
        vnf_rx, vnf_tx, vnf_drops, vnf_rx_pps, vnf_tx_pps, vnf_rx_bps, vnf_tx_bps, vnf_up, ch_in,
        ch_out, ch_in_pps, ch_out_pps, ch_out_bps, ch_loss,
    ]);
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
