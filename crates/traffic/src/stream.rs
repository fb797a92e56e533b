//! Per-stream accounting: loss, reordering, duplicates and latency.
//!
//! A [`StreamReceiver`] is owned by the one thread that sees a stream's
//! packets (a receiver port's tx queue, owned by one PMD). Its counters
//! live in a shared [`StreamShared`] of single-writer atomics so the
//! control plane can read them at any time without a lock
//! ([`StreamShared::snapshot`]); "clearing" is done by the reader keeping
//! a baseline snapshot and subtracting it ([`StreamSnapshot::since`]).
//!
//! Definitions (sequences start at 0 for every stream):
//! - `received`: every stamped packet of the stream, duplicates included.
//! - `expected`: highest sequence seen + 1 — how many the sender had sent
//!   up to the newest packet that arrived.
//! - `duplicates`: a sequence already seen (within the last
//!   [`WINDOW`] sequences).
//! - `reordered`: arrived after a higher sequence (and not a duplicate).
//! - `late`: the part of `reordered` older than [`WINDOW`] sequences,
//!   which cannot be checked for duplicates.
//! - `lost` = `expected − (received − duplicates)`: gaps not (yet) filled.
//!   Packets lost after the newest arrival are invisible here; with the
//!   sender's count use [`StreamSnapshot::loss_given`].
//!
//! Latency (receive TSC − stamped TSC, in ns) is recorded for every
//! packet that is not a duplicate.

use crate::latency::{self, CyclesToNs, LatencyBuckets, LatencySummary, bump};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// How many sequences back duplicates are detected.
pub const WINDOW: u64 = 2048;
const WORDS: usize = (WINDOW / 64) as usize;

/// How a packet fitted its stream's sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// The next sequence.
    InOrder,
    /// Ahead of the next sequence: this many were skipped.
    Gap(u64),
    /// Fills an earlier gap.
    Reordered,
    /// Seen before.
    Duplicate,
    /// Older than the duplicate window; counted as reordered.
    Late,
}

/// The writer's private sequence state: next expected sequence and a
/// bitmap of which of the last [`WINDOW`] sequences arrived.
#[derive(Clone)]
pub struct SeqTracker {
    next: u64,
    seen: [u64; WORDS],
}

impl Default for SeqTracker {
    fn default() -> Self {
        SeqTracker {
            next: 0,
            seen: [0; WORDS],
        }
    }
}

impl SeqTracker {
    #[inline(always)]
    fn bit(seq: u64) -> (usize, u64) {
        let i = seq % WINDOW;
        ((i / 64) as usize, 1 << (i % 64))
    }

    /// Highest sequence seen + 1.
    pub fn next(&self) -> u64 {
        self.next
    }

    #[inline]
    pub fn see(&mut self, seq: u64) -> Arrival {
        if seq >= self.next {
            let skipped = seq - self.next;
            if skipped >= WINDOW {
                self.seen = [0; WORDS];
            } else {
                // Sequences entering the window have not arrived.
                for s in self.next..seq {
                    let (w, m) = Self::bit(s);
                    self.seen[w] &= !m;
                }
            }
            let (w, m) = Self::bit(seq);
            self.seen[w] |= m;
            self.next = seq + 1;
            if skipped == 0 {
                Arrival::InOrder
            } else {
                Arrival::Gap(skipped)
            }
        } else if self.next - seq > WINDOW {
            Arrival::Late
        } else {
            let (w, m) = Self::bit(seq);
            if self.seen[w] & m != 0 {
                Arrival::Duplicate
            } else {
                self.seen[w] |= m;
                Arrival::Reordered
            }
        }
    }
}

/// A stream's counters, written by one thread, read by any.
/// Thread safety: `Sync`; single writer (the owning [`StreamReceiver`]).
pub struct StreamShared {
    pub stream: u32,
    received: AtomicU64,
    bytes: AtomicU64,
    expected: AtomicU64,
    duplicates: AtomicU64,
    reordered: AtomicU64,
    late: AtomicU64,
    latency_sum_ns: AtomicU64,
    latency: LatencyBuckets,
}

impl StreamShared {
    fn new(stream: u32) -> StreamShared {
        StreamShared {
            stream,
            received: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            expected: AtomicU64::new(0),
            duplicates: AtomicU64::new(0),
            reordered: AtomicU64::new(0),
            late: AtomicU64::new(0),
            latency_sum_ns: AtomicU64::new(0),
            latency: LatencyBuckets::default(),
        }
    }

    pub fn snapshot(&self) -> StreamSnapshot {
        StreamSnapshot {
            stream: self.stream,
            received: self.received.load(Relaxed),
            bytes: self.bytes.load(Relaxed),
            expected: self.expected.load(Relaxed),
            duplicates: self.duplicates.load(Relaxed),
            reordered: self.reordered.load(Relaxed),
            late: self.late.load(Relaxed),
            latency_sum_ns: self.latency_sum_ns.load(Relaxed),
            latency: self.latency.snapshot(),
        }
    }
}

/// One stream's accounting (the writer side).
pub struct StreamReceiver {
    shared: Arc<StreamShared>,
    seq: SeqTracker,
    to_ns: CyclesToNs,
}

impl StreamReceiver {
    /// A stream whose timestamps tick at `hz`. Allocates the histogram
    /// (about 220 KiB): once per stream, never per packet.
    pub fn new(stream: u32, hz: u64) -> StreamReceiver {
        StreamReceiver {
            shared: Arc::new(StreamShared::new(stream)),
            seq: SeqTracker::default(),
            to_ns: CyclesToNs::new(hz),
        }
    }

    pub fn stream(&self) -> u32 {
        self.shared.stream
    }

    pub fn shared(&self) -> &Arc<StreamShared> {
        &self.shared
    }

    /// Accounts one packet of `len` bytes stamped with `seq` at `tx_tsc`
    /// and received at `rx_tsc` (a receive time before the send time,
    /// as with unsynchronised clocks, counts as 0 ns).
    #[inline]
    pub fn record(&mut self, seq: u64, tx_tsc: u64, rx_tsc: u64, len: usize) -> Arrival {
        let s = &*self.shared;
        bump(&s.received, 1);
        bump(&s.bytes, len as u64);
        let a = self.seq.see(seq);
        match a {
            Arrival::InOrder | Arrival::Gap(_) => s.expected.store(self.seq.next(), Relaxed),
            Arrival::Reordered => bump(&s.reordered, 1),
            Arrival::Late => {
                bump(&s.reordered, 1);
                bump(&s.late, 1);
            }
            Arrival::Duplicate => {
                bump(&s.duplicates, 1);
                return a;
            }
        }
        let ns = self.to_ns.ns(rx_tsc.saturating_sub(tx_tsc));
        bump(&s.latency_sum_ns, ns);
        s.latency.record(ns);
        a
    }
}

/// A plain copy of a stream's counters (see the module docs for their
/// meaning). Supports subtraction of a baseline and merging.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamSnapshot {
    pub stream: u32,
    pub received: u64,
    pub bytes: u64,
    pub expected: u64,
    pub duplicates: u64,
    pub reordered: u64,
    pub late: u64,
    pub latency_sum_ns: u64,
    /// Histogram bucket counts (see [`crate::latency`]).
    pub latency: Vec<u64>,
}

impl StreamSnapshot {
    /// An empty stream (for baselines of streams that did not exist yet).
    pub fn empty(stream: u32) -> StreamSnapshot {
        StreamSnapshot {
            stream,
            received: 0,
            bytes: 0,
            expected: 0,
            duplicates: 0,
            reordered: 0,
            late: 0,
            latency_sum_ns: 0,
            latency: vec![0; latency::BUCKETS],
        }
    }
    /// Distinct packets received.
    pub fn unique(&self) -> u64 {
        self.received.saturating_sub(self.duplicates)
    }
    /// Sequence gaps not filled (see the module docs).
    pub fn lost(&self) -> u64 {
        self.expected.saturating_sub(self.unique())
    }
    /// Loss given that the sender sent `sent` packets in the same period.
    pub fn loss_given(&self, sent: u64) -> u64 {
        sent.saturating_sub(self.unique())
    }
    pub fn latency(&self) -> Option<LatencySummary> {
        latency::summarize(&self.latency, self.latency_sum_ns)
    }
    /// What happened since `base` (an earlier snapshot of the same stream).
    pub fn since(&self, base: &StreamSnapshot) -> StreamSnapshot {
        StreamSnapshot {
            stream: self.stream,
            received: self.received.saturating_sub(base.received),
            bytes: self.bytes.saturating_sub(base.bytes),
            expected: self.expected.saturating_sub(base.expected),
            duplicates: self.duplicates.saturating_sub(base.duplicates),
            reordered: self.reordered.saturating_sub(base.reordered),
            late: self.late.saturating_sub(base.late),
            latency_sum_ns: self.latency_sum_ns.saturating_sub(base.latency_sum_ns),
            latency: self
                .latency
                .iter()
                .zip(base.latency.iter().chain(std::iter::repeat(&0)))
                .map(|(a, b)| a.saturating_sub(*b))
                .collect(),
        }
    }
    /// Adds the same stream as seen elsewhere (another queue): counts add
    /// up, `expected` is the larger of the two (one sequence space).
    pub fn merge(&mut self, o: &StreamSnapshot) {
        self.received += o.received;
        self.bytes += o.bytes;
        self.expected = self.expected.max(o.expected);
        self.duplicates += o.duplicates;
        self.reordered += o.reordered;
        self.late += o.late;
        self.latency_sum_ns += o.latency_sum_ns;
        if self.latency.len() < o.latency.len() {
            self.latency.resize(o.latency.len(), 0);
        }
        for (a, b) in self.latency.iter_mut().zip(&o.latency) {
            *a += b;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracker_classifies_arrivals() {
        use Arrival::*;
        let cases: &[(&str, &[u64], &[Arrival])] = &[
            ("in order", &[0, 1, 2], &[InOrder, InOrder, InOrder]),
            ("starts late", &[3, 4], &[Gap(3), InOrder]),
            ("swap", &[1, 0, 2], &[Gap(1), Reordered, InOrder]),
            (
                "duplicate",
                &[0, 1, 1, 0],
                &[InOrder, InOrder, Duplicate, Duplicate],
            ),
            (
                "dup of a reordered one",
                &[0, 2, 1, 1],
                &[InOrder, Gap(1), Reordered, Duplicate],
            ),
            ("window edge", &[2047, 0], &[Gap(2047), Reordered]),
            ("beyond window", &[2048, 0], &[Gap(2048), Late]),
            (
                "big gap clears stale bits",
                &[1, 3000, 2049],
                &[Gap(1), Gap(2998), Reordered],
            ),
        ];
        for (name, seqs, want) in cases {
            let mut t = SeqTracker::default();
            let got: Vec<Arrival> = seqs.iter().map(|&s| t.see(s)).collect();
            assert_eq!(&got, want, "{name}");
        }
    }

    #[test]
    fn wrapping_window_reuses_bits_correctly() {
        // A long in-order run, then a reordered packet whose bit position
        // was used by an older sequence: must not look like a duplicate.
        let mut t = SeqTracker::default();
        for s in 0..10_000 {
            if s != 9_000 {
                t.see(s);
            }
        }
        assert_eq!(t.see(9_000), Arrival::Reordered);
        assert_eq!(t.see(9_000), Arrival::Duplicate);
        assert_eq!(t.see(9_001), Arrival::Duplicate);
    }

    #[test]
    fn since_and_merge() {
        let mut r = StreamReceiver::new(7, 1_000_000_000);
        for s in 0..10 {
            r.record(s, 0, 100, 64);
        }
        let base = r.shared().snapshot();
        for s in [11, 10, 12, 12] {
            r.record(s, 0, 3000, 64);
        }
        let d = r.shared().snapshot().since(&base);
        assert_eq!(
            (d.received, d.expected, d.duplicates, d.reordered, d.lost()),
            (4, 3, 1, 1, 0)
        );
        let l = d.latency().unwrap();
        // Above 2048 ns buckets are 2 ns wide or more: max is the bucket's top.
        assert_eq!(
            (l.samples, l.min_ns, l.max_ns, l.mean_ns),
            (3, 3000, 3001, 3000.0)
        );
        let mut m = d.clone();
        m.merge(&d);
        assert_eq!(
            (m.received, m.expected, m.latency().unwrap().samples),
            (8, 3, 6)
        );
    }
}
