//! Per-PMD counters and their cycle arithmetic.
//!
//! "Busy" follows OVS `dpif-netdev/pmd-perf-show`: an iteration that
//! received at least one packet is busy, and all its cycles (rx, lookup,
//! actions, tx) are busy cycles. Cycles per packet = busy cycles / packets
//! received. Cycles spent inside port rx/tx bursts are counted separately
//! so "switch work" (lookup, actions, batching) can be told apart from the
//! cost of the ports themselves.

use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Written by one PMD thread (plain stores), read by the control plane.
/// The PMU part is a sequence lock so readers get whole readings.
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct PmdStats {
    pub iterations: AtomicU64,
    pub busy_iterations: AtomicU64,
    pub busy_cycles: AtomicU64,
    pub idle_cycles: AtomicU64,
    /// Cycles inside port `rx_burst`/`tx_burst` during busy iterations.
    pub port_cycles: AtomicU64,
    pub rx_packets: AtomicU64,
    /// Decisions answered by the EMC. Here and in the megaflow and
    /// classifier hits and the misses, a packet repeating the key of the
    /// one before it counts under the tier that answered that one.
    pub emc_hits: AtomicU64,
    /// Decisions that probed the EMC (fewer than decisions while it is
    /// bypassed for a low hit rate, see `decision.rs`).
    pub emc_probes: AtomicU64,
    /// Decisions answered by the megaflow cache.
    pub megaflow_hits: AtomicU64,
    /// Decisions taken without a lookup: the packet's in_port has a rule
    /// that takes all of its packets (`nfv_flow::port_wide`).
    pub port_wide_hits: AtomicU64,
    pub classifier_hits: AtomicU64,
    pub table_misses: AtomicU64,
    /// Free frames in this PMD's packet-pool cache, published at
    /// housekeeping (every 16 polls); with the pool's shared free list it
    /// tells how many frames are held by packets.
    pub pool_cached: AtomicU64,
    /// Bytes the PMD's decision caches hold (EMC and megaflows), published
    /// at housekeeping: a gauge.
    pub cache_bytes: AtomicU64,
    /// Megaflows cached now (a gauge) and megaflows not cached because the
    /// cache was full (a counter), published at housekeeping: a full cache
    /// keeps what it has, so a growing refusal count is how an operator
    /// sees traffic that outgrew it.
    pub megaflows: AtomicU64,
    pub megaflow_refused: AtomicU64,
    /// PMU counter totals, published every ~100 ms (own cache lines).
    pub pmu: nfv_pmu::SharedPmu,
}

/// What a PMD accumulates locally between publications.
#[derive(Debug, Default, Clone, Copy)]
pub struct PmdCounters {
    pub iterations: u64,
    pub busy_iterations: u64,
    pub busy_cycles: u64,
    pub idle_cycles: u64,
    /// Cycles inside port rx and tx bursts: an estimate, timed on every
    /// 8th iteration and counted 8 times (see `pmd.rs`).
    pub port_cycles: u64,
    pub rx_packets: u64,
    pub emc_hits: u64,
    pub emc_probes: u64,
    pub megaflow_hits: u64,
    pub port_wide_hits: u64,
    pub classifier_hits: u64,
    pub table_misses: u64,
}

impl PmdStats {
    /// Publishes the PMD's running totals (single writer: plain stores).
    #[inline]
    pub fn publish(&self, c: &PmdCounters) {
        self.iterations.store(c.iterations, Relaxed);
        self.busy_iterations.store(c.busy_iterations, Relaxed);
        self.busy_cycles.store(c.busy_cycles, Relaxed);
        self.idle_cycles.store(c.idle_cycles, Relaxed);
        self.port_cycles.store(c.port_cycles, Relaxed);
        self.rx_packets.store(c.rx_packets, Relaxed);
        self.emc_hits.store(c.emc_hits, Relaxed);
        self.emc_probes.store(c.emc_probes, Relaxed);
        self.megaflow_hits.store(c.megaflow_hits, Relaxed);
        self.port_wide_hits.store(c.port_wide_hits, Relaxed);
        self.classifier_hits.store(c.classifier_hits, Relaxed);
        self.table_misses.store(c.table_misses, Relaxed);
    }

    pub fn snapshot(&self) -> PmdSnapshot {
        PmdSnapshot {
            iterations: self.iterations.load(Relaxed),
            busy_iterations: self.busy_iterations.load(Relaxed),
            busy_cycles: self.busy_cycles.load(Relaxed),
            idle_cycles: self.idle_cycles.load(Relaxed),
            port_cycles: self.port_cycles.load(Relaxed),
            rx_packets: self.rx_packets.load(Relaxed),
            emc_hits: self.emc_hits.load(Relaxed),
            emc_probes: self.emc_probes.load(Relaxed),
            megaflow_hits: self.megaflow_hits.load(Relaxed),
            port_wide_hits: self.port_wide_hits.load(Relaxed),
            classifier_hits: self.classifier_hits.load(Relaxed),
            table_misses: self.table_misses.load(Relaxed),
            cache_bytes: self.cache_bytes.load(Relaxed),
            megaflows: self.megaflows.load(Relaxed),
            megaflow_refused: self.megaflow_refused.load(Relaxed),
        }
    }
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PmdSnapshot {
    pub iterations: u64,
    pub busy_iterations: u64,
    pub busy_cycles: u64,
    pub idle_cycles: u64,
    pub port_cycles: u64,
    pub rx_packets: u64,
    pub emc_hits: u64,
    pub emc_probes: u64,
    pub megaflow_hits: u64,
    pub port_wide_hits: u64,
    pub classifier_hits: u64,
    pub table_misses: u64,
    /// A gauge (the latest value), not a counter.
    pub cache_bytes: u64,
    /// A gauge, like `cache_bytes`.
    pub megaflows: u64,
    pub megaflow_refused: u64,
}

impl PmdSnapshot {
    /// Counter-wise `self - earlier` (for rates over an interval).
    pub fn since(&self, earlier: &PmdSnapshot) -> PmdSnapshot {
        PmdSnapshot {
            iterations: self.iterations.wrapping_sub(earlier.iterations),
            busy_iterations: self.busy_iterations.wrapping_sub(earlier.busy_iterations),
            busy_cycles: self.busy_cycles.wrapping_sub(earlier.busy_cycles),
            idle_cycles: self.idle_cycles.wrapping_sub(earlier.idle_cycles),
            port_cycles: self.port_cycles.wrapping_sub(earlier.port_cycles),
            rx_packets: self.rx_packets.wrapping_sub(earlier.rx_packets),
            emc_hits: self.emc_hits.wrapping_sub(earlier.emc_hits),
            emc_probes: self.emc_probes.wrapping_sub(earlier.emc_probes),
            megaflow_hits: self.megaflow_hits.wrapping_sub(earlier.megaflow_hits),
            port_wide_hits: self.port_wide_hits.wrapping_sub(earlier.port_wide_hits),
            classifier_hits: self.classifier_hits.wrapping_sub(earlier.classifier_hits),
            table_misses: self.table_misses.wrapping_sub(earlier.table_misses),
            cache_bytes: self.cache_bytes,
            megaflows: self.megaflows,
            megaflow_refused: self.megaflow_refused.wrapping_sub(earlier.megaflow_refused),
        }
    }
    /// Busy cycles per received packet (`None` before any packet).
    pub fn cycles_per_packet(&self) -> Option<f64> {
        (self.rx_packets > 0).then(|| self.busy_cycles as f64 / self.rx_packets as f64)
    }
    /// Busy cycles per packet spent outside port rx/tx bursts.
    pub fn switch_cycles_per_packet(&self) -> Option<f64> {
        (self.rx_packets > 0).then(|| {
            self.busy_cycles.saturating_sub(self.port_cycles) as f64 / self.rx_packets as f64
        })
    }
    /// Share of cycles in busy iterations, 0..=100.
    pub fn busy_percent(&self) -> f64 {
        let total = self.busy_cycles + self.idle_cycles;
        if total == 0 {
            0.0
        } else {
            100.0 * self.busy_cycles as f64 / total as f64
        }
    }
    /// Mean packets per busy iteration (batch fill).
    pub fn packets_per_busy_iteration(&self) -> f64 {
        if self.busy_iterations == 0 {
            0.0
        } else {
            self.rx_packets as f64 / self.busy_iterations as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cycle_arithmetic() {
        let a = PmdSnapshot {
            rx_packets: 100,
            busy_cycles: 1000,
            idle_cycles: 0,
            ..Default::default()
        };
        let b = PmdSnapshot {
            rx_packets: 1100,
            busy_cycles: 51_000,
            idle_cycles: 50_000,
            port_cycles: 20_000,
            busy_iterations: 40,
            ..Default::default()
        };
        let d = b.since(&a);
        assert_eq!(d.rx_packets, 1000);
        assert_eq!(d.cycles_per_packet(), Some(50.0));
        assert_eq!(d.switch_cycles_per_packet(), Some(30.0));
        assert!((d.busy_percent() - 50.0).abs() < 1e-9);
        assert_eq!(d.packets_per_busy_iteration(), 25.0);
        assert_eq!(PmdSnapshot::default().cycles_per_packet(), None);
    }
}
