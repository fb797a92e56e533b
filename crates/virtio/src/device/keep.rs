//! Driver TX chains kept past their burst: the tail of a split packet
//! (one-copy mode, `tx.rs`) sent in place by a port that reads it after
//! the burst — an AF_XDP socket whose UMEM is this guest's memory puts the
//! tail on its tx ring, and the kernel reads it later. Such a chain goes
//! back to the driver when that port says its transmission completed.
//!
//! How: in keep mode the used entries of a burst's split chains are not
//! written during the dequeue; at the burst's end
//! ([`DeviceQueue::complete_held_keeping`]) each is either kept (the caller
//! says a port took it) or returned as usual. Kept chains come back one by
//! one ([`DeviceQueue::return_kept`]) in whatever order their sends
//! complete — so keep mode needs a driver without `VIRTIO_F_IN_ORDER`
//! (refused otherwise) — or all at once ([`DeviceQueue::return_all_kept`])
//! when the port let go of them (its socket closed) or the ring retires.
//! A chain is returned exactly once: a return for a head not kept is
//! refused and counted (`kept_stale`).

use super::DeviceQueue;
use crate::layout::VIRTIO_F_IN_ORDER;

impl DeviceQueue {
    /// Turns keep mode on or off; returns whether it is on. Refused (off)
    /// with `VIRTIO_F_IN_ORDER` (kept chains come back out of order) and
    /// on packed rings.
    /// Turning it off keeps the chains already kept (they come back
    /// through the return calls).
    pub fn set_keep(&mut self, on: bool) -> bool {
        self.complete_held();
        self.keep = on && self.features & VIRTIO_F_IN_ORDER == 0 && self.packed.is_none();
        if self.keep && self.kept.is_empty() {
            self.kept = vec![0; (self.ring.size as usize).div_ceil(64)];
        }
        self.keep
    }

    /// Whether split chains may be kept now.
    #[inline(always)]
    pub fn keeps(&self) -> bool {
        self.keep
    }

    /// The held burst's split chains in keep mode, in the order their
    /// packets were appended: head and tail address (`Packet::tail`).
    #[inline(always)]
    pub fn burst_splits(&self) -> &[(u16, usize)] {
        &self.splits[..self.n_splits]
    }

    /// Ends the held burst (see [`DeviceQueue::complete_held`]), keeping
    /// the split chains for which `take(index, head)` says a port took
    /// their tail (`index` into [`DeviceQueue::burst_splits`]); the others
    /// are returned. A quarantined queue keeps nothing and writes nothing.
    #[inline]
    pub fn complete_held_keeping(&mut self, mut take: impl FnMut(usize, u16) -> bool) {
        if !self.held {
            return;
        }
        self.held = false;
        if self.packed.is_some() {
            // No keep mode on packed rings: every chain goes back.
            return self.return_taken_packed();
        }
        let n = std::mem::take(&mut self.n_splits);
        if self.quarantined {
            return;
        }
        for i in 0..n {
            let head = self.splits[i].0;
            if take(i, head) {
                self.kept[head as usize / 64] |= 1 << (head % 64);
                self.kept_count += 1;
                self.stats.kept += 1;
            } else {
                self.push_used(head, 0);
            }
        }
        self.finish_burst();
    }

    /// Returns kept chain `head` (not yet published: see
    /// [`DeviceQueue::publish_kept`]). False, and counted, when `head` is
    /// not kept.
    #[inline]
    pub fn return_kept(&mut self, head: u16) -> bool {
        let (w, b) = (head as usize / 64, head % 64);
        match self.kept.get_mut(w) {
            Some(word) if *word & (1 << b) != 0 => {
                *word &= !(1 << b);
                self.kept_count -= 1;
                self.stats.kept_returned += 1;
                if !self.quarantined {
                    self.push_used(head, 0);
                }
                true
            }
            _ => {
                self.stats.kept_stale += 1;
                false
            }
        }
    }

    /// Returns every kept chain (the port that took them let go); how
    /// many. Not yet published.
    pub fn return_all_kept(&mut self) -> u32 {
        let mut n = 0;
        for w in 0..self.kept.len() {
            let mut bits = std::mem::take(&mut self.kept[w]);
            while bits != 0 {
                let b = bits.trailing_zeros() as u16;
                bits &= bits - 1;
                if !self.quarantined {
                    self.push_used(w as u16 * 64 + b, 0);
                }
                n += 1;
            }
        }
        self.kept_count = 0;
        self.stats.kept_returned += n as u64;
        n
    }

    /// Publishes returned kept chains (used index, interrupt). Must not be
    /// called while a burst is held (its chains would go back early).
    #[inline]
    pub fn publish_kept(&mut self) {
        debug_assert!(!self.held);
        if !self.held && !self.quarantined {
            self.finish_burst();
        }
    }

    /// Chains kept now.
    #[inline(always)]
    pub fn kept_outstanding(&self) -> u32 {
        self.kept_count
    }
}
