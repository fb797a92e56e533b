//! What the port (`port.rs`) and its queues (`rx.rs`, `tx.rs`) share:
//! the per-queue counters, written by the queue's PMD and summed by the
//! port's `gauges`.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Counters of one rx queue. Single writer (the PMD polling the queue);
/// the control plane reads them.
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct RxCounters {
    /// Frames the kernel cut to fit a ring block (dropped).
    pub truncated: AtomicU64,
    /// Frames larger than a switch packet buffer, e.g. GRO aggregates
    /// (dropped).
    pub oversize: AtomicU64,
    /// Blocks whose layout failed the walker's bounds checks.
    pub bad_blocks: AtomicU64,
    /// Frames lost with those blocks.
    pub bad_frames: AtomicU64,
    /// Blocks handed back to the kernel.
    pub blocks: AtomicU64,
}

/// Counters of one tx queue. Single writer (the PMD owning the queue).
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct TxCounters {
    /// `sendmmsg` calls (frames sent / calls = the mean burst).
    pub calls: AtomicU64,
    /// Frames left unsent because the kernel said EAGAIN or ENOBUFS.
    pub busy: AtomicU64,
    /// Frames the kernel refused one by one (EMSGSIZE, EINVAL).
    pub bad_frames: AtomicU64,
    /// Frames left unsent after any other error (link down or gone).
    pub errors: AtomicU64,
    /// Large segments given to `sendmmsg` whole (GSO metadata in their
    /// virtio-net header; the kernel segments them or passes them on).
    pub gso_frames: AtomicU64,
}

#[inline(always)]
pub fn bump(c: &AtomicU64, n: u64) {
    c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
}
