//! What the traffic ports share with the control plane: a generator's run
//! control ([`GeneratorControl`]) and a receiver's counters
//! ([`ReceiverStats`]). Below the ports that fill them (`generator`,
//! `receiver`) and the [`Port`](crate::Port) trait that hands them out.

use crate::stats::QueueCounters;
use nfv_traffic::{ReceiverShared, ReceiverSnapshot};
use std::sync::atomic::{
    AtomicU64,
    Ordering::{Relaxed, Release},
};
use std::sync::{Arc, Mutex, MutexGuard};

/// Lock-free run control of a generator, for the control plane
/// (`nfvswitch ndr` sets a rate and a packet budget per trial). Each rx
/// queue notices a change at its next burst (one relaxed load of `epoch`)
/// and restarts its pacing and budget from then; sequence numbers go on.
///
/// Thread safety: `Sync`. Writers are control-plane threads (one at a
/// time); PMDs only read the settings and each writes its own queue's
/// `generated` counter.
pub struct GeneratorControl {
    pub(crate) port_id: u16,
    pub(crate) stamp: bool,
    pub(crate) mean_frame: f64,
    pub(crate) epoch: AtomicU64,
    /// Packets per second over all queues; 0 = as fast as possible.
    pub(crate) rate_pps: AtomicU64,
    /// Packets to send in total; `u64::MAX` = forever.
    pub(crate) count: AtomicU64,
    /// Packets a queue may fall behind its rate before the excess is
    /// dropped; 0 = unlimited (it catches up later).
    pub(crate) backlog_limit: AtomicU64,
    /// Per rx queue, since the port opened (single writer each).
    pub(crate) generated: Box<[QueueCounters]>,
    /// Per rx queue: packets dropped for falling behind (`packets` only).
    pub(crate) missed: Box<[QueueCounters]>,
}

impl GeneratorControl {
    /// Sends `count` packets (`None`: forever) at `rate_pps` (`None`: as
    /// fast as possible), starting now.
    pub fn start(&self, rate_pps: Option<u64>, count: Option<u64>) {
        self.rate_pps.store(rate_pps.unwrap_or(0), Relaxed);
        self.count.store(count.unwrap_or(u64::MAX), Relaxed);
        self.epoch.fetch_add(1, Release);
    }
    /// From the next [`GeneratorControl::start`] on, a rate-limited queue
    /// that falls more than `packets` behind its rate drops the excess
    /// (counted as missed, their sequence numbers skipped) — a NIC's rx
    /// ring overflowing when the switch does not poll it fast enough.
    /// 0 (the default): never drop, catch up a burst at a time.
    pub fn set_backlog_limit(&self, packets: u64) {
        self.backlog_limit.store(packets, Relaxed);
    }
    /// Packets dropped for falling behind the rate, since the port opened.
    pub fn missed(&self) -> u64 {
        self.missed.iter().map(|c| c.packets.load(Relaxed)).sum()
    }
    /// Stops sending (a budget of 0 from now).
    pub fn stop(&self) {
        self.start(None, Some(0));
    }
    /// Packets generated since the port opened, all queues.
    pub fn generated(&self) -> u64 {
        self.generated.iter().map(|c| c.packets.load(Relaxed)).sum()
    }
    /// Bytes generated since the port opened, all queues.
    pub fn generated_bytes(&self) -> u64 {
        self.generated.iter().map(|c| c.bytes.load(Relaxed)).sum()
    }
    /// The port's OpenFlow number: its stamps' streams are
    /// `nfv_traffic::stamp::stream_id(port_id, queue)`.
    pub fn port_id(&self) -> u16 {
        self.port_id
    }
    /// Whether frames carry a test stamp.
    pub fn stamps(&self) -> bool {
        self.stamp
    }
    /// Mean frame size in bytes (without FCS).
    pub fn mean_frame_size(&self) -> f64 {
        self.mean_frame
    }
    /// Current rate setting (`None` = as fast as possible).
    pub fn rate_pps(&self) -> Option<u64> {
        Some(self.rate_pps.load(Relaxed)).filter(|&r| r > 0)
    }
}

/// The counters of a receiver port, for the control plane.
///
/// Thread safety: `Sync`. Its mutexes are taken only by the control
/// plane (opening a queue, reading, clearing); PMDs never touch them.
#[derive(Default)]
pub struct ReceiverStats {
    pub(crate) queues: Mutex<Vec<Arc<ReceiverShared>>>,
    baseline: Mutex<ReceiverSnapshot>,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ReceiverStats {
    /// Everything since the port opened, all queues merged.
    pub fn total(&self) -> ReceiverSnapshot {
        let mut t = ReceiverSnapshot::default();
        for q in lock(&self.queues).iter() {
            t.merge(&q.snapshot());
        }
        t
    }
    /// Since the last [`ReceiverStats::clear`].
    pub fn snapshot(&self) -> ReceiverSnapshot {
        let base = lock(&self.baseline).clone();
        self.total().since(&base)
    }
    /// Starts counting from zero (by remembering the current counts; the
    /// PMDs' counters are never written by anyone else).
    pub fn clear(&self) {
        let now = self.total();
        *lock(&self.baseline) = now;
    }
}
