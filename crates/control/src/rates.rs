//! Rates: a background thread samples every counter once per interval and
//! keeps the deltas, so `show` commands report current Mpps/Gbps and
//! per-interval cycles/packet rather than lifetime averages.

use crate::node::Node;
use nfv_datapath::stats::PmdSnapshot;
use nfv_flow::PortNo;
use nfv_ports::QueueSnapshot;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

pub const INTERVAL: Duration = Duration::from_secs(1);

/// (Mpps, Gbps) of one direction.
pub type Rate = (f64, f64);

#[derive(Default)]
struct Latest {
    ports: BTreeMap<PortNo, (Rate, Rate)>,
    pmds: Vec<(f64, PmdSnapshot)>,
}

#[derive(Default)]
pub struct RateSampler {
    latest: Mutex<Latest>,
    stop: AtomicBool,
}

fn rate(now: &QueueSnapshot, then: &QueueSnapshot, secs: f64) -> Rate {
    let p = now.packets.wrapping_sub(then.packets) as f64;
    let b = now.bytes.wrapping_sub(then.bytes) as f64;
    (p / secs / 1e6, b * 8.0 / secs / 1e9)
}

impl RateSampler {
    pub fn start(node: &Arc<Node>) {
        let weak: Weak<Node> = Arc::downgrade(node);
        let _ = std::thread::Builder::new()
            .name("rates".into())
            .spawn(move || {
                let mut prev_t = Instant::now();
                let mut prev_ports: BTreeMap<PortNo, (QueueSnapshot, QueueSnapshot)> =
                    BTreeMap::new();
                let mut prev_pmds: Vec<PmdSnapshot> = Vec::new();
                loop {
                    std::thread::sleep(INTERVAL);
                    let Some(node) = weak.upgrade() else { return };
                    if node.rates().stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let now_t = Instant::now();
                    let secs = now_t.duration_since(prev_t).as_secs_f64().max(1e-3);
                    let dp = node.datapath();
                    let mut ports = BTreeMap::new();
                    let mut cur_ports = BTreeMap::new();
                    for v in dp.port_views() {
                        let cur = (v.stats.rx_total(), v.stats.tx_total());
                        if let Some(prev) = prev_ports.get(&v.no) {
                            ports.insert(
                                v.no,
                                (rate(&cur.0, &prev.0, secs), rate(&cur.1, &prev.1, secs)),
                            );
                        }
                        cur_ports.insert(v.no, cur);
                    }
                    let cur_pmds: Vec<PmdSnapshot> =
                        dp.pmd_views().iter().map(|v| v.stats).collect();
                    let pmds = cur_pmds
                        .iter()
                        .enumerate()
                        .map(|(i, s)| {
                            let d = match prev_pmds.get(i) {
                                // A counter going backwards means clear-stats.
                                Some(p) if p.iterations <= s.iterations => s.since(p),
                                _ => *s,
                            };
                            (d.rx_packets as f64 / secs / 1e6, d)
                        })
                        .collect();
                    *node
                        .rates()
                        .latest
                        .lock()
                        .unwrap_or_else(|p| p.into_inner()) = Latest { ports, pmds };
                    prev_t = now_t;
                    prev_ports = cur_ports;
                    prev_pmds = cur_pmds;
                }
            });
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Per port: (rx, tx) rates over the last interval.
    pub fn ports(&self) -> BTreeMap<PortNo, (Rate, Rate)> {
        self.latest
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .ports
            .clone()
    }

    /// Per PMD: (Mpps, counter deltas) over the last interval.
    pub fn pmds(&self) -> Vec<(f64, PmdSnapshot)> {
        self.latest
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pmds
            .clone()
    }
}
