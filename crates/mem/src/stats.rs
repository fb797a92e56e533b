//! Process-wide memory counters (slow-path events only).

use std::sync::atomic::{AtomicU64, Ordering};

static ORPHANS: AtomicU64 = AtomicU64::new(0);

/// A packet was freed after its owner had gone away.
pub(crate) fn note_orphan() {
    ORPHANS.fetch_add(1, Ordering::Relaxed);
}

/// Packets freed after their owner had gone (their memory stays mapped).
pub fn orphaned_packets() -> u64 {
    ORPHANS.load(Ordering::Relaxed)
}
