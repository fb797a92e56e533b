//! Publishing a virtqueue's error and drop counters (kept as plain fields
//! inside its `DeviceQueue` by the owning thread) for `show ports`.
//!
//! The owner compares one sum per burst ([`trigger`]: ~15 loads and adds,
//! under a cycle per packet) and copies the counters out only when it
//! changed. Totals survive queue rebuilds: a new queue's counts are added
//! to the totals its ring had when it was built.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64};

use nfv_virtio::{DeviceQueue, QueueErrors, QueueStats};

/// Counter names, in the order of `values`.
pub const NAMES: [&str; 22] = [
    "avail_idx_jump",
    "desc_id_out_of_range",
    "desc_out_of_memory",
    "chain_too_long",
    "indirect_bad_len",
    "indirect_nested",
    "indirect_out_of_memory",
    "len_overflow",
    "wrong_direction",
    "short_chain",
    "bad_offload",
    "oversize_drops",
    "no_room_drops",
    "bad_chain_drops",
    "alloc_failures",
    "interrupt_errors",
    "call_blocked",
    "memory_fault",
    "budget_exhausted",
    "large_pool_empty",
    "offload_refused",
    "large_segments",
];

/// Number of protocol-violation counters at the front of [`NAMES`].
pub const VIOLATIONS: usize = 11;

/// Error and drop counters of one virtqueue since the port opened, copied
/// out of its `DeviceQueue` by the ring's owner (see the module doc).
#[derive(Debug, Default)]
pub(crate) struct ErrorMirror {
    pub counts: [AtomicU64; ERROR_KINDS],
    pub quarantined: AtomicBool,
    /// The queue's call fd blocked and is being ignored.
    pub call_stuck: AtomicBool,
    /// DeviceQueue construction failures (bad ring addresses etc.).
    pub setup_failures: AtomicU64,
}

pub(crate) const ERROR_KINDS: usize = NAMES.len();

impl ErrorMirror {
    pub fn load(&self) -> [u64; ERROR_KINDS] {
        std::array::from_fn(|i| self.counts[i].load(Relaxed))
    }
}

pub fn values(e: &QueueErrors, s: &QueueStats) -> [u64; ERROR_KINDS] {
    [
        e.avail_idx_jump,
        e.desc_id_out_of_range,
        e.desc_out_of_memory,
        e.chain_too_long,
        e.indirect_bad_len,
        e.indirect_nested,
        e.indirect_out_of_memory,
        e.len_overflow,
        e.wrong_direction,
        e.short_chain,
        e.bad_offload,
        s.oversize,
        s.no_room,
        s.bad_chain_drops,
        s.alloc_failures,
        s.interrupt_errors,
        s.call_blocked,
        s.memory_faults,
        s.budget_exhausted,
        s.large_pool_empty,
        s.offload_refused,
        s.large_segments,
    ]
}

/// A sum that changes whenever any published counter does.
#[inline(always)]
pub fn trigger(dq: &DeviceQueue) -> u64 {
    let s = dq.stats();
    dq.errors().total()
        + s.oversize
        + s.no_room
        + s.bad_chain_drops
        + s.alloc_failures
        + s.interrupt_errors
        + s.call_blocked
        + s.memory_faults
        + s.budget_exhausted
        + s.large_pool_empty
        + s.offload_refused
        + s.large_segments
}

/// Copies `dq`'s counters (on top of `base`, the ring's totals before this
/// queue) into `m`. With `retire`, `base` becomes the new totals (the
/// queue is being dropped).
#[cold]
pub fn mirror(m: &ErrorMirror, dq: &DeviceQueue, base: &mut [u64; ERROR_KINDS], retire: bool) {
    let v = values(dq.errors(), dq.stats());
    let mut total = [0; ERROR_KINDS];
    for i in 0..ERROR_KINDS {
        total[i] = base[i] + v[i];
        m.counts[i].store(total[i], Relaxed);
    }
    m.quarantined.store(dq.is_quarantined() && !retire, Relaxed);
    if retire {
        *base = total;
        m.call_stuck.store(false, Relaxed);
    }
}
