//! Latency histograms: recorded lock-free by one writer, read by anyone.
//!
//! The fast path records into [`LatencyBuckets`], a fixed array of
//! single-writer atomic counters laid out exactly like an HdrHistogram
//! with 3 significant digits (2048 sub-buckets, unit 1 ns): values below
//! 2048 ns are exact, larger ones land in buckets 1/1024 of their value
//! wide. Readers copy the counts (never torn, possibly a few packets old)
//! and turn them into an [`hdrhistogram::Histogram`] for percentiles, so
//! subtraction (clear-by-baseline) and merging (several queues) are plain
//! per-bucket arithmetic.
//!
//! Thread safety: `LatencyBuckets` is `Sync`; exactly one thread may call
//! [`LatencyBuckets::record`] (the PMD owning the queue), any may read.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

const SUB_BITS: u32 = 11;
const SUB: usize = 1 << SUB_BITS;
const HALF: usize = SUB / 2;
/// Latencies at or above this (about 68.7 s) are recorded as this.
pub const MAX_NS: u64 = 1 << 36;
/// Number of buckets covering 0..MAX_NS.
pub const BUCKETS: usize = SUB + (36 - SUB_BITS as usize) * HALF;

/// Bucket of a value (clamped to the last bucket).
#[inline]
pub fn index(ns: u64) -> usize {
    let v = ns.min(MAX_NS - 1);
    if v < SUB as u64 {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros();
    let b = msb - (SUB_BITS - 1);
    SUB + (b as usize - 1) * HALF + ((v >> b) as usize - HALF)
}

/// Lowest value that lands in bucket `i`.
#[inline]
pub fn lowest(i: usize) -> u64 {
    if i < SUB {
        return i as u64;
    }
    let k = i - SUB;
    let b = (k / HALF + 1) as u32;
    ((k % HALF + HALF) as u64) << b
}

#[inline(always)]
pub(crate) fn bump(c: &AtomicU64, n: u64) {
    // Single writer: a plain load+store, no locked instruction.
    c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
}

/// Fixed-size, single-writer histogram (see the module docs).
pub struct LatencyBuckets {
    counts: Box<[AtomicU64]>,
}

impl Default for LatencyBuckets {
    fn default() -> Self {
        LatencyBuckets {
            counts: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl LatencyBuckets {
    #[inline]
    pub fn record(&self, ns: u64) {
        bump(&self.counts[index(ns)], 1);
    }
    /// A copy of every bucket's count.
    pub fn snapshot(&self) -> Vec<u64> {
        self.counts.iter().map(|c| c.load(Relaxed)).collect()
    }
}

/// An HdrHistogram holding `counts` (as returned by
/// [`LatencyBuckets::snapshot`]).
pub fn histogram(counts: &[u64]) -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(1, MAX_NS, 3).expect("valid histogram bounds");
    for (i, &n) in counts.iter().enumerate() {
        if n > 0 {
            // In range by construction: lowest(i) < MAX_NS.
            let _ = h.record_n(lowest(i), n);
        }
    }
    h
}

/// What a report shows of a latency distribution, in nanoseconds.
/// Percentiles, min and max carry the histogram's precision (exact below
/// 2048 ns, within 0.1 % above); the mean is exact.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    pub samples: u64,
    pub min_ns: u64,
    pub mean_ns: f64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
}

/// Summary of `counts` whose values add up to `sum_ns`; `None` if empty.
pub fn summarize(counts: &[u64], sum_ns: u64) -> Option<LatencySummary> {
    let h = histogram(counts);
    let n = h.len();
    (n > 0).then(|| LatencySummary {
        samples: n,
        min_ns: h.min(),
        mean_ns: sum_ns as f64 / n as f64,
        p50_ns: h.value_at_quantile(0.5),
        p99_ns: h.value_at_quantile(0.99),
        p999_ns: h.value_at_quantile(0.999),
        max_ns: h.max(),
    })
}

/// Converts TSC cycles to nanoseconds with one multiply and shift.
#[derive(Clone, Copy, Debug)]
pub struct CyclesToNs {
    q32: u64,
}

impl CyclesToNs {
    pub fn new(hz: u64) -> CyclesToNs {
        CyclesToNs {
            q32: ((1_000_000_000u128 << 32) / u128::from(hz.max(1))) as u64,
        }
    }
    #[inline(always)]
    pub fn ns(&self, cycles: u64) -> u64 {
        ((u128::from(cycles) * u128::from(self.q32)) >> 32) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_match_hdrhistogram_with_3_significant_digits() {
        let h = Histogram::<u64>::new_with_bounds(1, MAX_NS, 3).unwrap();
        let mut values = vec![0, 1, 2047, 2048, 2049, 4095, 4096, 4097, 1_000_000];
        values.extend((0..36).map(|s| (1u64 << s) + 12345 % (1u64 << s).max(1)));
        values.push(MAX_NS - 1);
        for v in values {
            let i = index(v);
            assert!(i < BUCKETS, "{v}");
            assert_eq!(lowest(i), h.lowest_equivalent(v), "value {v}");
            assert!(
                lowest(i) <= v && (i + 1 == BUCKETS || v < lowest(i + 1)),
                "{v}"
            );
        }
        assert_eq!(index(u64::MAX), BUCKETS - 1);
        assert_eq!(histogram(&[0; BUCKETS]).len(), 0);
    }

    #[test]
    fn summary_of_a_known_distribution() {
        let b = LatencyBuckets::default();
        // 1..=1000 ns, each once: exact values below 2048.
        let mut sum = 0;
        for v in 1..=1000 {
            b.record(v);
            sum += v;
        }
        let s = summarize(&b.snapshot(), sum).unwrap();
        assert_eq!(
            (s.samples, s.min_ns, s.p50_ns, s.p99_ns, s.p999_ns, s.max_ns),
            (1000, 1, 500, 990, 999, 1000)
        );
        assert_eq!(s.mean_ns, 500.5);
        assert_eq!(summarize(&[0; BUCKETS], 0), None);
    }

    #[test]
    fn cycles_to_ns() {
        for (hz, cycles, ns) in [
            (1_000_000_000, 12345, 12345),
            (2_000_000_000, 5000, 2500),
            (3_000_000_000, 3_000_000_000, 1_000_000_000),
            (2_500_000_000, 250, 100),
        ] {
            let got = CyclesToNs::new(hz).ns(cycles);
            assert!(got.abs_diff(ns) <= 1, "{hz} Hz {cycles} cycles: {got} ns");
        }
    }
}
