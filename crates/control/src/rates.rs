//! Rates: a background thread samples every counter once per interval and
//! keeps the deltas, so `show` commands report current Mpps/Gbps and
//! per-interval cycles/packet rather than lifetime averages. The last
//! [`HISTORY`] intervals are kept as [`RateSample`]s (per port, PMD, chain
//! and VNF) for time series (the REST API's `/api/v1/timeseries`).
//!
//! This module is what is kept ([`RateSampler`]) and read; the thread that
//! reads the node's counters is `sampling.rs`, above the node.

/// One VNF of a chain over one interval: its rates are declared in
/// `vnf_figures.rs`.
pub use crate::vnf_figures::VnfRates;
use nfv_datapath::stats::PmdSnapshot;
use nfv_flow::PortNo;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub const INTERVAL: Duration = Duration::from_secs(1);

/// Samples kept: five minutes of one-second intervals.
pub const HISTORY: usize = 300;

/// (Mpps, Gbps) of one direction.
pub type Rate = (f64, f64);

#[derive(Default)]
pub(crate) struct Latest {
    pub(crate) ports: BTreeMap<PortNo, (Rate, Rate)>,
    pub(crate) pmds: Vec<(f64, PmdSnapshot)>,
}

/// Rates of one port over one interval.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PortRates {
    pub no: PortNo,
    pub name: String,
    pub rx_mpps: f64,
    pub rx_gbps: f64,
    pub tx_mpps: f64,
    pub tx_gbps: f64,
    /// Packets dropped per second, all reasons.
    pub rx_drops_per_sec: f64,
    pub tx_drops_per_sec: f64,
}

/// One PMD thread over one interval.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PmdRates {
    pub index: usize,
    pub mpps: f64,
    pub busy_percent: f64,
    /// Busy TSC cycles per received packet; `None` without packets.
    pub cycles_per_packet: Option<f64>,
}

/// One chain over one interval.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ChainRates {
    pub name: String,
    pub ingress_mpps: f64,
    pub egress_mpps: f64,
    pub egress_gbps: f64,
    pub loss_percent: f64,
    pub vnfs: Vec<VnfRates>,
}

/// Everything sampled at the end of one interval.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RateSample {
    /// End of the interval, seconds since the Unix epoch.
    pub time: f64,
    /// Length of the interval in seconds.
    pub secs: f64,
    pub ports: Vec<PortRates>,
    pub pmds: Vec<PmdRates>,
    pub chains: Vec<ChainRates>,
}

/// Thread safety: written by the sampler thread once per interval, read
/// by control requests; each part sits behind its own short-held mutex.
#[derive(Default)]
pub struct RateSampler {
    pub(crate) latest: Mutex<Latest>,
    history: Mutex<VecDeque<RateSample>>,
    /// Per PMD: PMU counter deltas over the last interval.
    pub(crate) pmu: Mutex<Vec<nfv_pmu::PmuDelta>>,
    pub(crate) stop: AtomicBool,
}

impl RateSampler {
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    pub(crate) fn push(&self, sample: RateSample) {
        let mut h = self.history.lock().unwrap_or_else(|p| p.into_inner());
        while h.len() >= HISTORY {
            h.pop_front();
        }
        h.push_back(sample);
    }

    /// The newest `last` samples (at most [`HISTORY`]), oldest first.
    pub fn history(&self, last: usize) -> Vec<RateSample> {
        let h = self.history.lock().unwrap_or_else(|p| p.into_inner());
        h.iter()
            .skip(h.len().saturating_sub(last))
            .cloned()
            .collect()
    }

    /// Per port: (rx, tx) rates over the last interval.
    pub fn ports(&self) -> BTreeMap<PortNo, (Rate, Rate)> {
        self.latest
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .ports
            .clone()
    }

    /// Per PMD: PMU counter deltas over the last interval.
    pub fn pmu(&self) -> Vec<nfv_pmu::PmuDelta> {
        self.pmu.lock().unwrap_or_else(|p| p.into_inner()).clone()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(time: f64) -> RateSample {
        RateSample {
            time,
            secs: 1.0,
            ports: vec![],
            pmds: vec![],
            chains: vec![],
        }
    }

    #[test]
    fn history_keeps_the_newest_samples_oldest_first() {
        let r = RateSampler::default();
        assert!(r.history(10).is_empty());
        for t in 0..HISTORY + 50 {
            r.push(sample(t as f64));
        }
        let all = r.history(usize::MAX);
        assert_eq!(all.len(), HISTORY);
        assert_eq!(all[0].time, 50.0);
        assert_eq!(all[HISTORY - 1].time, (HISTORY + 49) as f64);
        let last3: Vec<f64> = r.history(3).iter().map(|s| s.time).collect();
        let n = (HISTORY + 49) as f64;
        assert_eq!(last3, [n - 2.0, n - 1.0, n]);
    }
}
