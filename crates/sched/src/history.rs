//! Measured cycles per interval: what placement and auto load balancing
//! decide from.

use crate::types::{RxqId, RxqLoad};
use std::collections::{BTreeMap, VecDeque};

/// Intervals of history kept (OVS: 12 of 5 s, one minute).
pub const INTERVALS: usize = 12;

/// Cycles of one rx queue or one PMD in each recent interval, newest last.
#[derive(Clone, Debug, Default)]
struct Series {
    /// The cumulative counter at the last sample.
    last: u64,
    intervals: VecDeque<u64>,
}

impl Series {
    fn push(&mut self, cumulative: u64) {
        // A counter that went back was cleared: count from there.
        let delta = cumulative.saturating_sub(self.last);
        self.last = cumulative;
        if self.intervals.len() == INTERVALS {
            self.intervals.pop_front();
        }
        self.intervals.push_back(delta);
    }

    fn sum_last(&self, n: usize) -> u64 {
        self.intervals.iter().rev().take(n).sum()
    }
}

/// The per-interval history of rx queues' processing cycles and PMDs'
/// busy and total cycles, fed by cumulative counters at each interval's
/// end ([`History::sample`]).
#[derive(Clone, Debug, Default)]
pub struct History {
    rxqs: BTreeMap<RxqId, Series>,
    /// Per PMD index: busy cycles, total (busy + idle) cycles.
    pmds: BTreeMap<usize, (Series, Series)>,
}

impl History {
    pub fn new() -> History {
        History::default()
    }

    /// An interval ended: the cumulative processing cycles of every rx
    /// queue polled now, and each PMD's cumulative busy and total cycles.
    /// The first sample of a queue or PMD only sets its baseline; queues
    /// and PMDs absent from a sample are forgotten.
    pub fn sample(&mut self, rxqs: &[(RxqId, u64)], pmds: &[(usize, u64, u64)]) {
        let mut next = BTreeMap::new();
        for &(id, cum) in rxqs {
            let s = match self.rxqs.remove(&id) {
                Some(mut s) => {
                    s.push(cum);
                    s
                }
                None => Series {
                    last: cum,
                    intervals: VecDeque::new(),
                },
            };
            next.insert(id, s);
        }
        self.rxqs = next;
        let mut next = BTreeMap::new();
        for &(index, busy, total) in pmds {
            let s = match self.pmds.remove(&index) {
                Some((mut b, mut t)) => {
                    b.push(busy);
                    t.push(total);
                    (b, t)
                }
                None => (
                    Series {
                        last: busy,
                        intervals: VecDeque::new(),
                    },
                    Series {
                        last: total,
                        intervals: VecDeque::new(),
                    },
                ),
            };
            next.insert(index, s);
        }
        self.pmds = next;
    }

    /// Each rx queue's cycles over its last `n` intervals.
    pub fn rxq_loads(&self, n: usize) -> Vec<RxqLoad> {
        self.rxqs
            .iter()
            .map(|(&id, s)| RxqLoad {
                id,
                cycles: s.sum_last(n),
            })
            .collect()
    }

    /// The cycles of the last `n` intervals as the PMDs measured them
    /// (their mean total): what a queue's load is a share of.
    pub fn window(&self, n: usize) -> u64 {
        if self.pmds.is_empty() {
            return 0;
        }
        let sum: u64 = self.pmds.values().map(|(_, t)| t.sum_last(n)).sum();
        sum / self.pmds.len() as u64
    }

    /// Each PMD's busy percentage over its last `n` intervals.
    pub fn pmd_busy(&self, n: usize) -> Vec<(usize, f64)> {
        self.pmds
            .iter()
            .map(|(&i, (b, t))| {
                let total = t.sum_last(n);
                let pct = if total == 0 {
                    0.0
                } else {
                    100.0 * b.sum_last(n) as f64 / total as f64
                };
                (i, pct)
            })
            .collect()
    }

    /// Complete intervals recorded (of the PMD with the fewest).
    pub fn intervals(&self) -> usize {
        self.pmds
            .values()
            .map(|(b, _)| b.intervals.len())
            .min()
            .unwrap_or(0)
    }

    /// Forgets every rx queue's history (their PMDs changed: what they
    /// cost is measured afresh) but keeps the baselines.
    pub fn forget_rxq_intervals(&mut self) {
        for s in self.rxqs.values_mut() {
            s.intervals.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(queue: usize) -> RxqId {
        RxqId { port: 1, queue }
    }

    #[test]
    fn intervals_are_deltas_of_cumulative_counters_and_roll_after_twelve() {
        let mut h = History::new();
        h.sample(&[(q(0), 1000)], &[(0, 50, 100)]);
        assert_eq!(h.intervals(), 0, "the first sample is a baseline");
        for i in 1..=15u64 {
            h.sample(&[(q(0), 1000 + 10 * i)], &[(0, 50 + 40 * i, 100 + 100 * i)]);
        }
        assert_eq!(h.intervals(), INTERVALS);
        assert_eq!(h.rxq_loads(INTERVALS)[0].cycles, 120);
        assert_eq!(h.rxq_loads(1)[0].cycles, 10);
        assert_eq!(h.window(INTERVALS), 1200);
        assert_eq!(h.pmd_busy(INTERVALS), [(0, 40.0)]);
    }

    #[test]
    fn cleared_counters_and_vanished_queues() {
        let mut h = History::new();
        h.sample(&[(q(0), 500), (q(1), 7)], &[(0, 10, 20)]);
        h.sample(&[(q(0), 100)], &[(0, 0, 0)]);
        let loads = h.rxq_loads(INTERVALS);
        assert_eq!(loads.len(), 1, "queue 1 went away");
        assert_eq!(loads[0].cycles, 0, "a cleared counter counts as zero");
        h.sample(&[(q(0), 130)], &[(0, 5, 10)]);
        assert_eq!(h.rxq_loads(1)[0].cycles, 30);
        assert_eq!(h.pmd_busy(1), [(0, 50.0)]);
        h.forget_rxq_intervals();
        assert_eq!(h.rxq_loads(INTERVALS)[0].cycles, 0);
        h.sample(&[(q(0), 140)], &[(0, 5, 10)]);
        assert_eq!(h.rxq_loads(INTERVALS)[0].cycles, 10, "baselines kept");
    }
}
