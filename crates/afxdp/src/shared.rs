//! What the zero-copy queues share with the rest of the port: their
//! counters (written by the queue's rx PMD and manager, read by `show
//! ports` through `zero_copy::gauges`) and the fallback reasons those
//! counters are kept by. Below `zero_copy.rs` (the queue, its manager and
//! its PMD side) and `zero_copy_rx.rs` (the lending rx burst), which both
//! write them.

use crate::guest_umem::Unfit;
use nfv_virtio::NotLendable;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Why a frame did not land in a guest buffer, or a buffer was not lent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum Fallback {
    /// No guest buffer was on the fill ring: the frame landed in an own
    /// frame and was copied.
    NoGuestBuffer,
    /// The next guest buffer is not one writable descriptor.
    BufferShape,
    /// The next guest buffer is shorter than header + frame room.
    ShortBuffer,
    /// The next guest buffer does not fit the UMEM's layout.
    OutsideUmem,
    /// A bad chain (left for the copy path to count).
    BadChain,
    /// Zero-copy driver bind: the buffer's chunk would cross a page.
    PageCross,
}

impl Fallback {
    pub const ALL: [Fallback; 6] = [
        Fallback::NoGuestBuffer,
        Fallback::BufferShape,
        Fallback::ShortBuffer,
        Fallback::OutsideUmem,
        Fallback::BadChain,
        Fallback::PageCross,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            Fallback::NoGuestBuffer => "no_guest_buffer",
            Fallback::BufferShape => "buffer_shape",
            Fallback::ShortBuffer => "short_buffer",
            Fallback::OutsideUmem => "outside_umem",
            Fallback::BadChain => "bad_chain",
            Fallback::PageCross => "page_cross",
        }
    }
    pub(crate) fn of_unfit(u: Unfit) -> Fallback {
        match u {
            Unfit::ShortBuffer => Fallback::ShortBuffer,
            Unfit::OutsideUmem => Fallback::OutsideUmem,
            Unfit::PageCross => Fallback::PageCross,
        }
    }
    pub(crate) fn of_not_lendable(n: NotLendable) -> Fallback {
        match n {
            NotLendable::Shape => Fallback::BufferShape,
            _ => Fallback::BadChain,
        }
    }
}

/// Counters of one zero-copy queue, written by its rx PMD (single
/// writer: plain load + store) and read by `show ports`.
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct ZcCounters {
    /// Frames received straight into guest buffers.
    pub zero_copy: AtomicU64,
    /// Guest buffers put on the fill ring.
    pub lent: AtomicU64,
    /// Fallbacks by reason ([`Fallback`] order). `no_guest_buffer` counts
    /// frames; the buffer reasons count bursts that stopped lending.
    pub fallback: [AtomicU64; 6],
    /// Rx descriptors that named no posted buffer, or a frame that did
    /// not fit it (the buffer went back to the guest empty).
    pub bad_descs: AtomicU64,
    /// Guest sockets built / revoked.
    pub switches: AtomicU64,
    pub revokes: AtomicU64,
}

#[inline(always)]
pub(crate) fn add(c: &AtomicU64, n: u64) {
    c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
}
