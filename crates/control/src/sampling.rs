//! The rates thread: once per [`INTERVAL`] it reads every counter of a
//! running node, stores the rates in the node's [`RateSampler`] and adds a
//! [`RateSample`] to its history (module doc of [`crate::rates`]).

use crate::node::Node;
use crate::rates::{
    ChainRates, INTERVAL, Latest, PmdRates, PortRates, Rate, RateSample, RateSampler,
};
use nfv_datapath::PortView;
use nfv_datapath::stats::PmdSnapshot;
use nfv_flow::PortNo;
use nfv_ports::QueueSnapshot;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Instant;

fn rate(now: &QueueSnapshot, then: &QueueSnapshot, secs: f64) -> Rate {
    let p = now.packets.wrapping_sub(then.packets) as f64;
    let b = now.bytes.wrapping_sub(then.bytes) as f64;
    (p / secs / 1e6, b * 8.0 / secs / 1e9)
}

fn drop_rate(now: &QueueSnapshot, then: &QueueSnapshot, secs: f64) -> f64 {
    now.total_drops().saturating_sub(then.total_drops()) as f64 / secs
}

fn pmd_rates(pmds: &[(f64, PmdSnapshot)]) -> Vec<PmdRates> {
    pmds.iter()
        .enumerate()
        .map(|(index, (mpps, d))| PmdRates {
            index,
            mpps: *mpps,
            busy_percent: d.busy_percent(),
            cycles_per_packet: d.cycles_per_packet(),
        })
        .collect()
}

/// Chain reports (made from the rates just stored) cut down to rates, with
/// each VNF port's drop rate added.
fn chain_rates(chains: &[crate::protocol::ChainReport], ports: &[PortRates]) -> Vec<ChainRates> {
    chains
        .iter()
        .map(|c| ChainRates {
            name: c.name.clone(),
            ingress_mpps: c.ingress_mpps,
            egress_mpps: c.egress_mpps,
            egress_gbps: c.egress_gbps,
            loss_percent: c.loss_percent,
            vnfs: c
                .vnfs
                .iter()
                .map(|v| {
                    let drops_per_sec = ports
                        .iter()
                        .find(|p| p.no == v.port)
                        .map_or(0.0, |p| p.rx_drops_per_sec + p.tx_drops_per_sec);
                    v.rates(drops_per_sec)
                })
                .collect(),
        })
        .collect()
}

/// The counters at the end of an interval, to take the next one's deltas
/// from.
struct Counters {
    at: Instant,
    /// Per port: (rx, tx) totals.
    ports: BTreeMap<PortNo, (QueueSnapshot, QueueSnapshot)>,
    pmds: Vec<PmdSnapshot>,
    /// Each PMD's own stamped PMU reading.
    pmus: Vec<nfv_pmu::PmuSnapshot>,
}

/// Ends the interval that started at `prev`: stores the node's latest
/// rates and PMU deltas, adds a [`RateSample`] to the history, and
/// returns the counters now.
fn sample(node: &Node, prev: &Counters) -> Counters {
    let now_t = Instant::now();
    let secs = now_t.duration_since(prev.at).as_secs_f64().max(1e-3);
    let dp = node.datapath();
    let ports = ports_since(&dp.port_views(), &prev.ports, secs);
    let cur_pmds: Vec<PmdSnapshot> = dp.pmd_views().iter().map(|v| v.stats).collect();
    let pmds = pmds_since(&cur_pmds, &prev.pmds, secs);
    let pmd_rates = pmd_rates(&pmds);
    // PMU deltas between the PMDs' own stamped readings.
    let cur_pmus: Vec<_> = dp.pmd_views().iter().map(|v| v.pmu).collect();
    *node.rates().pmu.lock().unwrap_or_else(|p| p.into_inner()) = cur_pmus
        .iter()
        .enumerate()
        .map(|(i, s)| s.since(prev.pmus.get(i).unwrap_or(&Default::default())))
        .collect();
    *node
        .rates()
        .latest
        .lock()
        .unwrap_or_else(|p| p.into_inner()) = Latest {
        ports: ports.latest,
        pmds,
    };
    // The chain reports read the rates just stored.
    let sample = RateSample {
        time: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64()),
        secs,
        chains: chain_rates(&node.show_chains(), &ports.rates),
        ports: ports.rates,
        pmds: pmd_rates,
    };
    node.rates().push(sample);
    Counters {
        at: now_t,
        ports: ports.counters,
        pmds: cur_pmds,
        pmus: cur_pmus,
    }
}

/// The ports over one interval.
struct PortsInterval {
    /// Per port: (rx, tx) rates, for [`Latest`].
    latest: BTreeMap<PortNo, (Rate, Rate)>,
    /// For the history.
    rates: Vec<PortRates>,
    /// Per port: (rx, tx) totals at the end.
    counters: BTreeMap<PortNo, (QueueSnapshot, QueueSnapshot)>,
}

/// The rates of every port since `prev` (none for a port new since then).
fn ports_since(
    views: &[PortView],
    prev: &BTreeMap<PortNo, (QueueSnapshot, QueueSnapshot)>,
    secs: f64,
) -> PortsInterval {
    let mut out = PortsInterval {
        latest: BTreeMap::new(),
        rates: Vec::new(),
        counters: BTreeMap::new(),
    };
    for v in views {
        let cur = (v.stats.rx_total(), v.stats.tx_total());
        if let Some(prev) = prev.get(&v.no) {
            let (rx, tx) = (rate(&cur.0, &prev.0, secs), rate(&cur.1, &prev.1, secs));
            out.latest.insert(v.no, (rx, tx));
            out.rates.push(PortRates {
                no: v.no,
                name: v.port.name().to_string(),
                rx_mpps: rx.0,
                rx_gbps: rx.1,
                tx_mpps: tx.0,
                tx_gbps: tx.1,
                rx_drops_per_sec: drop_rate(&cur.0, &prev.0, secs),
                tx_drops_per_sec: drop_rate(&cur.1, &prev.1, secs),
            });
        }
        out.counters.insert(v.no, cur);
    }
    out
}

/// Each PMD's Mpps and counter deltas since `prev`.
fn pmds_since(cur: &[PmdSnapshot], prev: &[PmdSnapshot], secs: f64) -> Vec<(f64, PmdSnapshot)> {
    cur.iter()
        .enumerate()
        .map(|(i, s)| {
            let d = match prev.get(i) {
                // A counter going backwards means clear-stats.
                Some(p) if p.iterations <= s.iterations => s.since(p),
                _ => *s,
            };
            (d.rx_packets as f64 / secs / 1e6, d)
        })
        .collect()
}

impl RateSampler {
    pub fn start(node: &Arc<Node>) {
        let weak: Weak<Node> = Arc::downgrade(node);
        let _ = std::thread::Builder::new()
            .name("rates".into())
            .spawn(move || {
                let mut prev = Counters {
                    at: Instant::now(),
                    ports: BTreeMap::new(),
                    pmds: Vec::new(),
                    pmus: Vec::new(),
                };
                loop {
                    std::thread::sleep(INTERVAL);
                    let Some(node) = weak.upgrade() else { return };
                    if node.rates().stop.load(Ordering::Relaxed) {
                        return;
                    }
                    prev = sample(&node, &prev);
                }
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_rates_add_each_vnf_ports_drop_rate() {
        let port = |no, rx_d, tx_d| PortRates {
            no,
            name: format!("p{no}"),
            rx_mpps: 0.0,
            rx_gbps: 0.0,
            tx_mpps: 0.0,
            tx_gbps: 0.0,
            rx_drops_per_sec: rx_d,
            tx_drops_per_sec: tx_d,
        };
        let vnf = |port| crate::protocol::VnfReport {
            name: format!("v{port}"),
            port,
            rx_mpps: 1.0,
            rx_gbps: 2.0,
            tx_mpps: 3.0,
            tx_gbps: 4.0,
            rx_packets: 0,
            tx_packets: 0,
            drops: 0,
            connected: true,
        };
        let chain = crate::protocol::ChainReport {
            name: "c".into(),
            hops: vec![],
            ingress_mpps: 2.0,
            egress_mpps: 1.0,
            egress_gbps: 0.5,
            loss_percent: 50.0,
            vnfs: vec![vnf(3), vnf(9)],
        };
        let r = chain_rates(&[chain], &[port(3, 10.0, 5.0), port(4, 1.0, 1.0)]);
        assert_eq!(r[0].loss_percent, 50.0);
        assert_eq!(r[0].vnfs[0].drops_per_sec, 15.0);
        assert_eq!((r[0].vnfs[0].rx_mpps, r[0].vnfs[0].tx_gbps), (1.0, 4.0));
        // A VNF port gone since: no drops rather than a failure.
        assert_eq!(r[0].vnfs[1].drops_per_sec, 0.0);
    }
}
