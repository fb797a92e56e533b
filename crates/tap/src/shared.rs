//! What the port (`port.rs`) and its queues (`rx.rs`, `tx.rs`) share:
//! the per-queue counters the queues write and `gauges` reads, and the
//! framing of every frame on a TAP descriptor.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Bytes of the virtio-net header in front of every frame on a TAP
/// descriptor (`IFF_VNET_HDR`, the kernel's default size: the header
/// without `num_buffers`).
pub const VNET_HDR_LEN: usize = 10;

/// Counters of one queue. Single writer (the PMD owning the queue).
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct Counters {
    /// Frames larger than a packet buffer (cut by the kernel, dropped).
    pub rx_truncated: AtomicU64,
    /// `read()` errors other than EAGAIN (ends the burst).
    pub rx_errors: AtomicU64,
    /// Frames left unsent because `write()` said EAGAIN/ENOBUFS.
    pub tx_eagain: AtomicU64,
    /// `write()`s that took fewer bytes than the frame (counted as sent:
    /// the kernel consumed it).
    pub tx_short: AtomicU64,
    /// Frames the kernel refused one by one (EINVAL, EMSGSIZE: runts,
    /// oversize).
    pub tx_refused: AtomicU64,
    /// Frames left unsent after other errors (EIO: the interface is down).
    pub tx_errors: AtomicU64,
    /// Large segments the kernel took whole (GSO metadata in their
    /// virtio-net header: the kernel segments them or passes them on).
    pub tx_gso_frames: AtomicU64,
}

#[inline(always)]
pub fn bump(c: &AtomicU64, n: u64) {
    c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
}
