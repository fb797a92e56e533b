//! Driver TX queue → switch: copy frames out of guest chains into pool
//! packets (virtio-net §5.1.6.2 from the device's side).
//!
//! Cost notes (64 B frames, see `examples/virtq_bench.rs`): the avail
//! entries of the burst are read first and their descriptors prefetched;
//! per chain one descriptor read, one translation (hinted), one copy.
//!
//! One-copy mode ([`DeviceQueue::set_one_copy`]): of a frame longer than
//! [`SPLIT_HEAD`] + [`SPLIT_MIN_TAIL`] only the head is copied — every
//! header the switch reads or edits, so a guest rewriting its buffer after
//! the decision cannot change what was decided on — and the rest stays in
//! the guest's buffer as the packet's tail (`nfv_mem::packet`), which the
//! receiving vhost-user port copies straight into its guest. The chains
//! of such a burst are returned (used ring published) only by
//! [`DeviceQueue::complete_held`], after the burst's outputs are done, in
//! the order they were taken: with or without `VIRTIO_F_IN_ORDER`, used
//! entries follow avail order and every chain is returned exactly once.
//!
//! With `VIRTIO_F_IN_ORDER` a burst's chains go back as one used entry
//! (virtio 1.2 §2.7.9: at the burst's first slot, the last chain's id,
//! `used.idx` moved by the burst): a driver TX queue's lengths are all 0,
//! so nothing is lost, and one used-ring line crosses to the driver per
//! burst instead of four (`bench/shared-lines split+inorder`).

use super::DeviceQueue;
use super::chain::{BURST_DESC_BUDGET, Chain, ChainError, Seg, Walk, chain_cost};
use crate::layout::{
    VIRTIO_F_IN_ORDER, VIRTQ_DESC_F_INDIRECT, VIRTQ_DESC_F_NEXT, VIRTQ_DESC_F_WRITE,
};
use crate::ring::prefetch;
pub use nfv_mem::SPLIT_HEAD;
use nfv_mem::{BATCH, Batch, Packet, PoolCache};

/// Chains whose first buffer is prefetched ahead of the one being copied.
pub(super) const PREFETCH_AHEAD: usize = 2;

/// Shortest tail worth leaving in the guest's buffer: below it, copying
/// the rest with the head costs less than the second source later.
pub const SPLIT_MIN_TAIL: usize = 128;

/// Outcome of reading one chain.
pub(super) enum Tx {
    Frame,
    /// Head copied, tail left in the guest's buffer.
    Split,
    Oversize,
    /// Dropped for a reason already counted (a hostile offload header, no
    /// large-segment buffer).
    Refused,
}

impl DeviceQueue {
    /// Takes up to `batch.remaining_capacity()` chains from the driver's TX
    /// queue, appends one packet per good frame to `batch` (virtio-net
    /// header stripped) and returns how many were appended. Bad chains are
    /// counted in [`super::QueueErrors`], oversize frames in
    /// [`super::QueueStats::oversize`]; every chain taken is returned to the
    /// used ring (length 0). Stops early when `pool` is empty, and after
    /// the chain that took the burst past [`BURST_DESC_BUDGET`]
    /// descriptors (the rest waits for the next burst; a queue that went
    /// over skips its next bursts until the excess is repaid).
    ///
    /// With deferred interrupt checks ([`DeviceQueue::set_defer_interrupts`])
    /// every burst's chains are held, split packets or not, and go back at
    /// [`DeviceQueue::complete_held`]: the caller calls it once the burst's
    /// packets are sent, so that the used ring's stores are not in flight
    /// when the sending queue's lock is taken (a locked instruction waits
    /// for them: the driver's core polls those lines). The check for the
    /// last publish then runs here, after this burst's chains are read,
    /// when those stores have long completed.
    #[inline]
    pub fn dequeue_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        let n = self.dequeue_chains(batch, pool);
        self.settle_interrupts();
        n
    }

    #[inline(always)]
    fn dequeue_chains(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        // A new burst ends the last one (its split packets are gone).
        self.complete_held();
        if self.packed.is_some() {
            return self.dequeue_packed(batch, pool);
        }
        if self.quarantined || self.in_debt() {
            return 0;
        }
        // This queue's chains are the device's to read: with IN_ORDER their
        // used entries go back one per burst (`flush_shadow`).
        self.used_batch = self.features & VIRTIO_F_IN_ORDER != 0;
        let room = batch.remaining_capacity();
        if room == 0 {
            return 0;
        }
        let Some(avail) = self.pending() else {
            return 0;
        };
        let n = (avail as usize).min(room);
        if n == 0 {
            return 0;
        }
        let mut heads = [0u16; BATCH];
        for (i, h) in heads[..n].iter_mut().enumerate() {
            *h = self
                .ring
                .avail_entry(self.last_avail.wrapping_add(i as u16));
            prefetch(self.ring.desc_ptr(*h));
        }
        self.warm_used(n);
        let mut got = 0;
        let mut bytes = 0u64;
        // Issue every buffer prefetch of the burst before the first copy:
        // these lines were written by the driver's core, and when a
        // cross-core miss costs hundreds of ns (vCPUs far apart) only
        // overlapping all of them keeps the burst from serialising on them.
        let skip = self.unread_header();
        for &h in &heads[..n] {
            self.ring.prefetch_buffer(&self.mem, h, self.hint, skip);
        }
        let mut spent = 0u32;
        let mut split = 0u64;
        for &head in &heads[..n] {
            if spent >= BURST_DESC_BUDGET {
                self.stats.budget_exhausted += 1;
                break;
            }
            let Some(fresh) = pool.alloc() else {
                self.stats.alloc_failures += 1;
                break;
            };
            self.last_avail = self.last_avail.wrapping_add(1);
            if head >= self.ring.size {
                // No valid id to return it under: consumed and counted.
                self.errors.desc_id_out_of_range += 1;
                self.unreturnable = self.unreturnable.wrapping_add(1);
                pool.free(fresh);
                spent += 1;
                continue;
            }
            // The packet is filled in its batch slot, not on the stack and
            // moved in after: the move read its fields back with 16-byte
            // loads right after the chain reader's narrow stores, a failed
            // store forward (~19 % of this function's samples at 64 B).
            batch.push(fresh);
            let pkt = batch.last_mut().expect("pushed above");
            let mut r = match self.read_direct(head, pkt) {
                Some(r) => {
                    spent += chain_cost(1);
                    r
                }
                None => {
                    let mut chain = Chain::new(self.ring.desc, self.ring.size, head, 0);
                    let r = self.read_tx_chain(&mut chain, pkt);
                    spent += chain_cost(chain.steps());
                    r
                }
            };
            if self.tx_hdr_asks() {
                let again = Chain::new(self.ring.desc, self.ring.size, head, 0);
                r = self.offloaded(r, again, pkt, pool, &mut spent);
            }
            match r {
                Ok(Tx::Frame) => {
                    bytes += pkt.len() as u64;
                    got += 1;
                }
                Ok(Tx::Split) => {
                    bytes += pkt.frame_len() as u64;
                    split += 1;
                    got += 1;
                    if self.keep {
                        // Its used entry waits for the burst's end: the
                        // chain may be kept (`keep.rs`).
                        self.splits[self.n_splits] = (head, pkt.tail().0 as usize);
                        self.n_splits += 1;
                        continue;
                    }
                }
                Ok(Tx::Oversize) => {
                    self.stats.oversize += 1;
                    pool.free(batch.pop().expect("pushed above"));
                }
                Ok(Tx::Refused) => pool.free(batch.pop().expect("pushed above")),
                Err(e) => {
                    self.errors.record(e);
                    pool.free(batch.pop().expect("pushed above"));
                }
            }
            self.push_used(head, 0);
        }
        self.stats.packets += got as u64;
        self.stats.bytes += bytes;
        self.owe(spent, BURST_DESC_BUDGET);
        self.stats.one_copy += split;
        if split == 0 && !self.defer_interrupts {
            self.finish_burst();
        } else {
            // Split packets' tails are still read, or the publish waits
            // for the burst's packets to be sent (see `dequeue_burst`):
            // the chains go back (all of the burst's, in order) at
            // `complete_held`.
            self.held = true;
        }
        got
    }

    /// Returns the chains of the last burst that produced split packets
    /// (publishes their used entries, interrupting the driver if it asked
    /// for it). Call when every packet of that burst has been sent or
    /// freed; the next [`DeviceQueue::dequeue_burst`] calls it first. A
    /// no-op when nothing is held.
    #[inline]
    pub fn complete_held(&mut self) {
        if self.held {
            self.complete_held_keeping(|_, _| false);
        }
    }

    /// Chains taken but not yet returned because split packets of the last
    /// burst still read them (see [`DeviceQueue::complete_held`]).
    pub fn holds_chains(&self) -> bool {
        self.held
    }

    /// The chain at `head` when it is one readable descriptor (no NEXT, no
    /// INDIRECT): what DPDK's and Linux's transmit paths post for a frame
    /// with its header in front. Read as [`Self::read_tx_chain`] would
    /// read it (one descriptor visited), without the walker's state;
    /// `None` (nothing read into `pkt`) for every other chain, which the
    /// walker then reads and checks from its own copy of the descriptor.
    #[inline(always)]
    fn read_direct(&mut self, head: u16, pkt: &mut Packet) -> Option<Result<Tx, ChainError>> {
        // SAFETY: `head < size` (the caller checked it) indexes the queue's
        // descriptor table, validated and aligned at setup; one volatile
        // copy, and only the copy is used.
        let d = unsafe { self.ring.desc_ptr(head).read_volatile() };
        if d.flags & (VIRTQ_DESC_F_NEXT | VIRTQ_DESC_F_INDIRECT | VIRTQ_DESC_F_WRITE) != 0 {
            return None;
        }
        let head_max = if self.one_copy {
            SPLIT_HEAD
        } else {
            usize::MAX
        };
        Some(
            match Seg::of(&self.mem, d.addr, d.len, d.flags, &mut self.hint) {
                Ok(seg) => self.read_one_buffer(&seg, pkt, head_max),
                Err(e) => Err(e),
            },
        )
    }

    /// Copies the frame of `chain` (after the virtio-net header, which may
    /// share a buffer with the data or span several) into `pkt`; in
    /// one-copy mode only its head when the rest is one contiguous span of
    /// at least [`SPLIT_MIN_TAIL`] bytes, which becomes the packet's tail.
    /// The whole chain is walked and checked even when the frame does not
    /// fit.
    #[inline(always)]
    pub(super) fn read_tx_chain<W: Walk>(
        &mut self,
        chain: &mut W,
        pkt: &mut Packet,
    ) -> Result<Tx, ChainError> {
        let room = pkt.room_mut();
        let (dst, cap) = (room.as_mut_ptr(), room.len());
        let head_max = if self.one_copy {
            SPLIT_HEAD
        } else {
            usize::MAX
        };
        let first = chain.next(&self.mem, &mut self.hint)?;
        if let Some(seg) = &first
            && chain.is_done()
            && !seg.write
        {
            return self.read_one_buffer(seg, pkt, head_max);
        }
        let mut skip = self.hdr_len;
        let mut off = 0usize;
        // The span after the head, not copied yet: the tail if no other
        // buffer with data follows it.
        let mut rest: (*const u8, usize) = (std::ptr::null(), 0);
        let mut total = 0u64;
        let mut fits = true;
        let mut next = first;
        while let Some(seg) = next {
            if seg.write {
                return Err(ChainError::WrongDirection);
            }
            total += seg.len as u64;
            if total > u32::MAX as u64 {
                return Err(ChainError::LenOverflow);
            }
            let (mut src, mut len) = (seg.ptr, seg.len as usize);
            if skip != 0 {
                let s = skip.min(len);
                if self.host_offloads.csum {
                    self.keep_tx_hdr(src, s, self.hdr_len - skip);
                }
                skip -= s;
                src = src.wrapping_add(s);
                len -= s;
            }
            if len != 0 && fits {
                if len > cap - off - rest.1 {
                    fits = false;
                } else {
                    if rest.1 != 0 {
                        // More data follows: the span is not the tail.
                        // SAFETY: `rest` is inside a translated buffer of
                        // this chain; `off + rest.1 <= cap` (checked).
                        unsafe { nfv_mem::copy_span(rest.0, dst.add(off), rest.1) };
                        off += rest.1;
                        rest.1 = 0;
                    }
                    let h = len.min(head_max.saturating_sub(off));
                    // SAFETY: `src..src+h` is inside the translated buffer
                    // (we skipped at most its length, `h <= len`);
                    // `dst+off..+h` is inside the packet's room
                    // (`off + len <= cap`). `copy` tolerates overlap, should
                    // the pool ever live in guest memory.
                    unsafe { nfv_mem::copy_span(src, dst.add(off), h) };
                    off += h;
                    if h < len {
                        rest = (src.wrapping_add(h), len - h);
                    }
                }
            }
            next = chain.next(&self.mem, &mut self.hint)?;
        }
        if skip != 0 {
            return Err(ChainError::Short);
        }
        if !fits {
            return Ok(Tx::Oversize);
        }
        if rest.1 >= SPLIT_MIN_TAIL {
            // Cannot fail: off + rest.1 <= cap == max_len.
            let _ = pkt.set_len(off);
            // SAFETY: `rest` lies in a buffer of a chain this queue holds
            // until `complete_held` (the burst's end), in guest memory the
            // queue keeps mapped (`Arc<GuestMemory>`) at least that long;
            // readers copy it with `ptr::copy` (the guest may write it);
            // head + tail fit the packet (checked above).
            unsafe { pkt.set_tail(rest.0, rest.1 as u32) };
            return Ok(Tx::Split);
        }
        if rest.1 != 0 {
            // SAFETY: as for the copy above; `off + rest.1 <= cap`.
            unsafe { nfv_mem::copy_span(rest.0, dst.add(off), rest.1) };
            off += rest.1;
        }
        // Cannot fail: off <= cap == max_len.
        let _ = pkt.set_len(off);
        Ok(Tx::Frame)
    }

    /// [`Self::read_tx_chain`] for the common chain of one readable buffer
    /// holding the virtio-net header and the frame (DPDK's and Linux's
    /// transmit path when the header fits in front of the data): the same
    /// checks and results, without the multi-buffer bookkeeping. `pkt` is
    /// being filled (fresh from the pool: no tail).
    #[inline(always)]
    fn read_one_buffer(
        &mut self,
        seg: &super::chain::Seg,
        pkt: &mut Packet,
        head_max: usize,
    ) -> Result<Tx, ChainError> {
        let len = seg.len as usize;
        let Some(frame) = len.checked_sub(self.hdr_len) else {
            return Err(ChainError::Short);
        };
        if self.host_offloads.csum {
            self.keep_tx_hdr(seg.ptr, self.hdr_len, 0);
        }
        // A packet being filled: no tail yet, so `frame <= room` is all
        // `set_len` would check.
        debug_assert!(!pkt.is_split());
        let room = pkt.room_mut();
        if frame > room.len() {
            return Ok(Tx::Oversize);
        }
        let src = seg.ptr.wrapping_add(self.hdr_len);
        let dst = room.as_mut_ptr();
        let head = frame.min(head_max);
        if frame - head >= SPLIT_MIN_TAIL {
            // SAFETY: `src..src+head` is inside the translated buffer
            // (`hdr_len + frame == seg.len`, `head <= frame`);
            // `dst..dst+head` is inside the packet's room (`frame <=
            // room.len()`, checked). `copy` tolerates overlap, should the
            // pool ever live in guest memory.
            unsafe { nfv_mem::copy_span(src, dst, head) };
            // SAFETY: head <= frame <= room.len() == max_len, no tail.
            unsafe { pkt.set_len_unchecked(head) };
            // SAFETY: the tail lies in a buffer of a chain this queue holds
            // until `complete_held`, in guest memory it keeps mapped at
            // least that long; readers copy it with `ptr::copy`; head +
            // tail fit the packet (checked above).
            unsafe { pkt.set_tail(src.wrapping_add(head), (frame - head) as u32) };
            return Ok(Tx::Split);
        }
        // SAFETY: as above, for the whole `frame`.
        unsafe { nfv_mem::copy_span(src, dst, frame) };
        // SAFETY: frame <= room.len() == max_len, no tail.
        unsafe { pkt.set_len_unchecked(frame) };
        Ok(Tx::Frame)
    }
}
