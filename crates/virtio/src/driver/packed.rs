//! The driver side on a packed ring (virtio §2.8), behind the same
//! [`DriverQueue`] API: every buffer is one descriptor (its own chain), so
//! each used descriptor the device writes stands for one buffer and the
//! used position moves one slot per buffer. Without `VIRTIO_F_IN_ORDER`
//! (the built-in VNF does not offer it on packed rings), a device writes
//! one used descriptor per chain; with it a device may return a batch of
//! TX buffers with one used descriptor carrying the id of the batch's
//! last (§2.8.20), and [`DriverQueue::reclaim_tx`] takes every buffer up
//! to that one, in the order they were posted.
//!
//! Interrupts are asked for with the driver event area's ENABLE/DISABLE;
//! kicks follow the device event area, including its DESC mode.

use super::DriverQueue;
use crate::layout::UsedElem;
use crate::packed::{
    EVENT_F_DESC, EVENT_F_DISABLE, EVENT_F_ENABLE, PackedRing, avail_flags, is_used,
    need_event_packed, step,
};
use std::sync::atomic::{Ordering, fence};

/// Positions of a packed driver queue.
#[derive(Debug)]
pub(super) struct PackedDriver {
    pub ring: PackedRing,
    /// Next slot to make available, and the driver's wrap counter.
    pub avail: u16,
    pub avail_wrap: bool,
    /// Next slot the device's used descriptor is expected in.
    pub used: u16,
    pub used_wrap: bool,
    /// `(avail, avail_wrap)` at the last `needs_kick`.
    pub kick_old: (u16, bool),
    /// The buffer id posted at each slot (in-order batches name only
    /// their last buffer).
    posted_id: Vec<u16>,
}

impl PackedDriver {
    pub fn new(ring: PackedRing) -> PackedDriver {
        // Both wrap counters start at 1 (§2.8.1).
        PackedDriver {
            posted_id: vec![0; ring.size as usize],
            ring,
            avail: 0,
            avail_wrap: true,
            used: 0,
            used_wrap: true,
            kick_old: (0, true),
        }
    }
}

impl DriverQueue {
    #[inline(always)]
    fn pk(&self) -> &PackedDriver {
        self.packed.as_deref().expect("a packed queue")
    }
    #[inline(always)]
    fn pk_mut(&mut self) -> &mut PackedDriver {
        self.packed.as_deref_mut().expect("a packed queue")
    }

    /// Makes one single-descriptor buffer available at the next slot
    /// (visible at once: its flags are stored last, with release).
    #[inline(always)]
    pub(super) fn post_packed(&mut self, id: u16, gpa: u64, len: u32, flags: u16) {
        let p = self.pk_mut();
        p.posted_id[p.avail as usize] = id;
        p.ring
            .write(p.avail, gpa, len, id, flags | avail_flags(p.avail_wrap));
        step(&mut p.avail, &mut p.avail_wrap, p.ring.size);
    }

    /// With `VIRTIO_F_IN_ORDER`: the ids of the buffers the used
    /// descriptor at the used position returns — every one posted from
    /// there up to the one it names — moving past them. Empty when none
    /// is used; `None` when the id is not among the `outstanding` posted
    /// (a device error: the caller quarantines).
    pub(super) fn pop_used_batch_packed(&mut self, out: &mut Vec<u16>) -> Option<()> {
        out.clear();
        if !self.has_used_packed() {
            return Some(());
        }
        let outstanding = self.outstanding();
        let last = self.peek_used_packed().id as u16;
        let p = self.pk_mut();
        let (mut i, mut w) = (p.used, p.used_wrap);
        loop {
            if out.len() >= outstanding {
                return None;
            }
            let id = p.posted_id[i as usize];
            out.push(id);
            step(&mut i, &mut w, p.ring.size);
            if id == last {
                break;
            }
        }
        (p.used, p.used_wrap) = (i, w);
        Some(())
    }

    /// Used descriptors ready, counted up to what is outstanding.
    #[inline(always)]
    pub(super) fn used_pending_packed(&self) -> u16 {
        let p = self.pk();
        let (mut i, mut w) = (p.used, p.used_wrap);
        let mut n = 0u16;
        while (n as usize) < self.outstanding() && is_used(p.ring.flags(i), w) {
            n += 1;
            step(&mut i, &mut w, p.ring.size);
        }
        n
    }

    /// The used descriptor at the used position (validated by callers).
    #[inline(always)]
    pub(super) fn peek_used_packed(&self) -> UsedElem {
        let p = self.pk();
        let (_, len, id) = p.ring.read(p.used);
        UsedElem { id: id as u32, len }
    }

    #[inline(always)]
    pub(super) fn skip_used_packed(&mut self) {
        let p = self.pk_mut();
        step(&mut p.used, &mut p.used_wrap, p.ring.size);
    }

    pub(super) fn has_used_packed(&self) -> bool {
        fence(Ordering::SeqCst);
        let p = self.pk();
        is_used(p.ring.flags(p.used), p.used_wrap)
    }

    pub(super) fn set_interrupts_packed(&mut self, on: bool) {
        let v = if on { EVENT_F_ENABLE } else { EVENT_F_DISABLE };
        self.pk().ring.driver_event().1.store(v, Ordering::Relaxed);
        fence(Ordering::SeqCst);
    }

    /// Whether the device wants a kick for what was made available since
    /// the last call.
    pub(super) fn needs_kick_packed(&mut self) -> bool {
        let event_idx = self.event_idx;
        let p = self.pk_mut();
        let (old, new) = (p.kick_old, (p.avail, p.avail_wrap));
        p.kick_old = new;
        if old == new {
            return false;
        }
        fence(Ordering::SeqCst);
        let (off_wrap, flags) = p.ring.device_event();
        match flags.load(Ordering::Relaxed) {
            EVENT_F_DISABLE => false,
            EVENT_F_DESC if event_idx => need_event_packed(
                off_wrap.load(Ordering::Relaxed),
                old.0,
                old.1,
                new.0,
                new.1,
                p.ring.size,
            ),
            _ => true,
        }
    }
}
