//! The device side of a packed virtqueue (virtio §2.8): the same
//! [`DeviceQueue`] API, bursts and counters as the split ring, over one
//! descriptor ring (see [`crate::packed`] for the format).
//!
//! Differences from the split ring, and what we chose:
//! * There is no avail index: a burst polls the next slot's flags (one
//!   acquire load) and takes chains while they are available.
//!   [`DeviceQueue::last_pending`] is therefore a lower bound: the chains
//!   taken by the last burst, plus one if another was waiting.
//! * Chains are used in the order they were made available, so the used
//!   descriptor of a chain goes to its own first slot and the used
//!   position always equals the avail position between bursts. On RX each
//!   chain gets its own used descriptor (its length matters), written as
//!   soon as its packet is complete: deferring them hurt Linux NAPI in
//!   DPDK's vhost. On TX the burst's chains go back together at its end;
//!   with `VIRTIO_F_IN_ORDER` as one used descriptor carrying the last
//!   chain's id (§2.8.20: the driver takes every buffer up to it), so the
//!   driver reads one line per burst, not one per four chains.
//! * Buffer ids are the driver's cookies: the device copies the id of a
//!   chain's last descriptor into its used descriptor and never indexes
//!   anything with it.
//! * A bad chain is walked to its end (NEXT flags only) and returned with
//!   length 0, its error counted, as on split rings. A chain whose NEXT
//!   flags run around the whole ring has no end: the position cannot be
//!   resynchronised, so the queue is quarantined (`chain_too_long`).
//! * One-copy mode works as on split rings: a burst that handed out split
//!   packets returns its chains (all of them, in order) only at
//!   `complete_held`. No lending or keeping on packed rings.
//! * Position after a reconnect: `VHOST_USER_GET_VRING_BASE` reports the
//!   avail position and wrap counter ([`crate::packed::encode_base`]);
//!   since nothing is in flight between bursts, the used position is the
//!   same. A backend that restarts without that value (a crash) cannot
//!   recover the ring: the frontend must reset the device.

use super::DeviceQueue;
use super::chain::{
    BURST_DESC_BUDGET, ChainError, MAX_CHAIN_DESCS, RX_BURST_DESC_BUDGET, Seg, Walk, chain_cost,
    indirect_table,
};
use super::rx::{Fill, Rx};
use super::tx::Tx;
use crate::layout::VIRTIO_F_IN_ORDER;
use crate::memory::GuestMemory;
use crate::packed::{
    DESC_F_INDIRECT, DESC_F_NEXT, DESC_F_WRITE, EVENT_F_DESC, EVENT_F_DISABLE, EVENT_F_ENABLE,
    PackedDesc, PackedRing, is_avail, need_event_packed, step, used_flags,
};
use crate::ring::prefetch;
use nfv_mem::{Batch, PoolCache};
use std::sync::atomic::{Ordering, fence};

/// A used descriptor waiting for its packet to complete.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct PendingUsed {
    id: u16,
    len: u32,
    /// Ring slots the chain took.
    descs: u16,
}

/// The packed ring and the positions of one device queue.
#[derive(Debug)]
pub(super) struct PackedState {
    pub ring: PackedRing,
    /// Lap of `DeviceQueue::last_avail` (the next slot to take).
    pub avail_wrap: bool,
    /// Next slot a used descriptor goes to, and its lap.
    pub used: u16,
    pub used_wrap: bool,
    /// RX: the used descriptors of the packet being written (at most one
    /// per descriptor the packet may visit).
    pending: Vec<PendingUsed>,
    /// TX: the chains of the last burst (id, ring slots), returned at its
    /// end — or, when split packets of the burst still read their tails,
    /// by `complete_held` — in the order they were taken.
    taken: [(u16, u16); nfv_mem::BATCH],
    n_taken: usize,
    /// Position and lap of the used position when that burst started.
    burst_start: (u16, bool),
}

impl PackedState {
    pub fn new(ring: PackedRing, idx: u16, wrap: bool) -> PackedState {
        PackedState {
            ring,
            avail_wrap: wrap,
            used: idx,
            used_wrap: wrap,
            pending: Vec::with_capacity(MAX_CHAIN_DESCS as usize),
            taken: [(0, 0); nfv_mem::BATCH],
            n_taken: 0,
            burst_start: (idx, wrap),
        }
    }
}

/// A walk over one packed chain: ring descriptors linked by NEXT, any of
/// them possibly an indirect table (whose entries follow one another; only
/// their WRITE flag counts, §2.8.7). Each descriptor is read once and
/// bounds-checked once; the walk fails after [`MAX_CHAIN_DESCS`]
/// descriptors, and a chain cannot take more ring slots than the ring has.
#[derive(Clone, Copy)]
pub(super) struct PackedChain {
    ring: *const PackedDesc,
    size: u16,
    /// Next ring slot and its lap.
    slot: u16,
    wrap: bool,
    /// Ring slots taken so far.
    descs: u16,
    /// The last ring descriptor read had NEXT.
    more: bool,
    started: bool,
    /// Buffer id of the last ring descriptor read.
    id: u16,
    table: *const PackedDesc,
    table_len: u32,
    table_next: u32,
    steps: u32,
}

impl PackedChain {
    /// A chain starting at `slot` (lap `wrap`), whose first descriptor the
    /// caller saw available; `used` descriptors of the cap are already
    /// spent (earlier chains of the same RX packet).
    #[inline(always)]
    fn new(ring: &PackedRing, slot: u16, wrap: bool, used: u32) -> PackedChain {
        PackedChain {
            ring: ring.desc,
            size: ring.size,
            slot,
            wrap,
            descs: 0,
            more: false,
            started: false,
            id: 0,
            table: std::ptr::null(),
            table_len: 0,
            table_next: 0,
            steps: used,
        }
    }

    /// Reads ring slot `self.slot` (flags with acquire) and moves past it.
    #[inline(always)]
    fn take_slot(&mut self) -> PackedDesc {
        // SAFETY: `slot < size` (it starts below and `step` wraps it), and
        // the ring of `size` descriptors was checked at setup; integer
        // copies, volatile (flags with acquire, so the rest is what the
        // driver published with them).
        let d = unsafe {
            let p = self.ring.add(self.slot as usize);
            let flags =
                std::sync::atomic::AtomicU16::from_ptr(std::ptr::addr_of!((*p).flags).cast_mut())
                    .load(Ordering::Acquire);
            PackedDesc {
                addr: std::ptr::addr_of!((*p).addr).read_volatile(),
                len: std::ptr::addr_of!((*p).len).read_volatile(),
                id: std::ptr::addr_of!((*p).id).read_volatile(),
                flags,
            }
        };
        step(&mut self.slot, &mut self.wrap, self.size);
        self.descs += 1;
        self.started = true;
        self.id = d.id;
        self.more = d.flags & DESC_F_NEXT != 0;
        d
    }

    /// Moves past the rest of the chain (after the buffers needed, or
    /// after an error), reading only flags and ids, so the next chain's
    /// slot and this chain's id are known. `Err` when the NEXT flags run
    /// past a whole ring: the chain has no end.
    #[inline(always)]
    fn skip_rest(&mut self) -> Result<(), ()> {
        self.table_len = 0;
        while self.more || !self.started {
            if self.descs >= self.size {
                return Err(());
            }
            self.steps += 1;
            self.take_slot();
        }
        Ok(())
    }
}

impl Walk for PackedChain {
    #[inline(always)]
    fn next(&mut self, mem: &GuestMemory, hint: &mut usize) -> Result<Option<Seg>, ChainError> {
        loop {
            if self.table_next < self.table_len {
                if self.steps >= MAX_CHAIN_DESCS {
                    return Err(ChainError::TooLong);
                }
                self.steps += 1;
                // SAFETY: `table_next < table_len` entries of a table
                // translated and 8-aligned below; one volatile copy.
                let d = unsafe { self.table.add(self.table_next as usize).read_volatile() };
                self.table_next += 1;
                return Seg::of(mem, d.addr, d.len, d.flags, hint).map(Some);
            }
            if self.started && !self.more {
                return Ok(None);
            }
            if self.steps >= MAX_CHAIN_DESCS || self.descs >= self.size {
                return Err(ChainError::TooLong);
            }
            self.steps += 1;
            let d = self.take_slot();
            if d.flags & DESC_F_INDIRECT != 0 {
                let (p, n) = indirect_table(mem, d.addr, d.len, hint)?;
                self.table = p.cast();
                self.table_len = n;
                self.table_next = 0;
                continue;
            }
            return Seg::of(mem, d.addr, d.len, d.flags, hint).map(Some);
        }
    }

    #[inline(always)]
    fn is_done(&self) -> bool {
        self.started && !self.more && self.table_next >= self.table_len
    }

    #[inline(always)]
    fn steps(&self) -> u32 {
        self.steps
    }
}

impl DeviceQueue {
    #[inline(always)]
    fn packed(&self) -> &PackedState {
        // Only called on packed queues (`self.packed` is set in `new`).
        self.packed.as_deref().expect("a packed queue")
    }

    /// `dequeue_burst` on a packed ring.
    #[inline]
    pub(super) fn dequeue_packed(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        if self.quarantined || self.in_debt() {
            return 0;
        }
        let room = batch.remaining_capacity();
        if room == 0 {
            return 0;
        }
        let (mut cur, mut wrap) = (self.last_avail, self.packed().avail_wrap);
        let start = (cur, wrap);
        self.warm_packed(cur, wrap, room, false);
        let mut got = 0;
        let mut taken = 0u16;
        let mut bytes = 0u64;
        let mut spent = 0u32;
        let mut split = 0u64;
        while (taken as usize) < room {
            let ring = &self.packed().ring;
            if !is_avail(ring.flags(cur), wrap) {
                break;
            }
            if spent >= BURST_DESC_BUDGET {
                self.stats.budget_exhausted += 1;
                break;
            }
            let Some(fresh) = pool.alloc() else {
                self.stats.alloc_failures += 1;
                break;
            };
            // Filled in its batch slot (see `dequeue_burst`: moving a
            // just-written packet in costs a failed store forward).
            batch.push(fresh);
            let pkt = batch.last_mut().expect("pushed above");
            let mut chain = PackedChain::new(ring, cur, wrap, 0);
            let mut r = self.read_tx_chain(&mut chain, pkt);
            if chain.skip_rest().is_err() {
                pool.free(batch.pop().expect("pushed above"));
                self.quarantine_packed();
                break;
            }
            spent += chain_cost(chain.steps());
            if self.tx_hdr_asks() {
                let again = PackedChain::new(&self.packed().ring, cur, wrap, 0);
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
            let st = self.packed_mut();
            st.taken[st.n_taken] = (chain.id, chain.descs);
            st.n_taken += 1;
            (cur, wrap) = (chain.slot, chain.wrap);
            taken += 1;
        }
        self.last_avail = cur;
        self.packed_mut().avail_wrap = wrap;
        self.note_pending(taken, cur, wrap);
        self.stats.packets += got as u64;
        self.stats.bytes += bytes;
        self.owe(spent, BURST_DESC_BUDGET);
        self.packed_mut().burst_start = start;
        if split == 0 {
            self.return_taken_packed();
        } else {
            // Their tails are still read: the chains go back at
            // `complete_held`.
            self.stats.one_copy += split;
            self.held = true;
        }
        got
    }

    /// Returns the chains of the last TX burst (used descriptors in the
    /// order they were taken) and interrupts the driver if it asked.
    #[inline(always)]
    pub(super) fn return_taken_packed(&mut self) {
        let n = std::mem::take(&mut self.packed_mut().n_taken);
        if self.quarantined {
            return;
        }
        if n > 1 && self.features & VIRTIO_F_IN_ORDER != 0 {
            // In order (§2.8.20): one used descriptor, with the last
            // chain's buffer id, returns the whole burst — one line
            // written for the driver to read instead of up to eight. TX
            // lengths are 0 anyway, so nothing is lost.
            let st = self.packed();
            let id = st.taken[n - 1].0;
            let descs = st.taken[..n].iter().map(|&(_, d)| d).sum();
            self.write_used_packed(id, 0, descs, false);
        } else {
            for k in 0..n {
                let (id, descs) = self.packed().taken[k];
                self.write_used_packed(id, 0, descs, false);
            }
        }
        let start = self.packed().burst_start;
        self.finish_packed(start);
    }

    /// `enqueue_burst` on a packed ring.
    #[inline]
    pub(super) fn enqueue_packed(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        if self.quarantined || batch.is_empty() || self.in_debt() {
            return 0;
        }
        let start = (self.last_avail, self.packed().avail_wrap);
        let (mut cur, mut wrap) = start;
        self.warm_packed(cur, wrap, batch.len(), true);
        let mut done = 0;
        let mut delivered = 0;
        let mut bytes = 0u64;
        let mut spent = 0u32;
        let mut taken = 0u16;
        while done < batch.len() {
            if spent >= RX_BURST_DESC_BUDGET {
                if is_avail(self.packed().ring.flags(cur), wrap) {
                    self.stats.budget_exhausted += 1;
                }
                break;
            }
            if let Some(next) = batch.get(done + 1) {
                prefetch(next.data_ptr());
                // As on the split ring: the next packet most likely takes
                // the next slot; own a large frame's buffer lines first.
                let bytes = self.hdr_len + next.frame_len();
                if bytes > 128 {
                    let ring = &self.packed().ring;
                    let (mut i, mut w) = (cur, wrap);
                    step(&mut i, &mut w, ring.size);
                    let (addr, _, _) = ring.read(i);
                    self.mem.prefetch_rest_write(addr, self.hint, bytes);
                }
            }
            let mut steps = 0;
            let before = cur;
            let r = self.rx_packet_packed(&batch[done], &mut cur, &mut wrap, &mut steps);
            spent += chain_cost(steps);
            if cur != before {
                taken += 1;
            }
            match r {
                Rx::Delivered => {
                    bytes += batch[done].frame_len() as u64;
                    delivered += 1;
                }
                Rx::Dropped => {}
                Rx::NoBuffers => break,
            }
            done += 1;
            if self.quarantined {
                break;
            }
        }
        self.last_avail = cur;
        self.packed_mut().avail_wrap = wrap;
        self.note_pending(taken, cur, wrap);
        self.stats.packets += delivered as u64;
        self.stats.bytes += bytes;
        for p in batch.drain(..done) {
            pool.free(p);
        }
        self.owe(spent, RX_BURST_DESC_BUDGET);
        self.finish_packed(start);
        delivered
    }

    /// Writes `pkt` (header + frame) into the chains available from
    /// `*cur`: one without MRG_RXBUF, as many as needed with it. Their used
    /// descriptors are written only once the packet is complete: a packet
    /// that runs out of buffers leaves every chain it looked at available.
    #[inline(always)]
    fn rx_packet_packed(
        &mut self,
        pkt: &nfv_mem::Packet,
        cur: &mut u16,
        wrap: &mut bool,
        steps: &mut u32,
    ) -> Rx {
        if !is_avail(self.packed().ring.flags(*cur), *wrap) {
            return Rx::NoBuffers;
        }
        let Ok(meta) = self.rx_offload(pkt) else {
            return Rx::Dropped;
        };
        let ring = &self.packed().ring;
        // The common case: header and frame fit the first buffer of the
        // next chain. Its used descriptor goes out at once.
        let mut chain = PackedChain::new(ring, *cur, *wrap, *steps);
        if let Some(total) = self.rx_into_first_buffer(&mut chain, pkt, meta) {
            let walked = chain.skip_rest();
            *steps = chain.steps();
            (*cur, *wrap) = (chain.slot, chain.wrap);
            if walked.is_err() {
                self.quarantine_packed();
                return Rx::Dropped;
            }
            // total <= 12 + 65535: fits u32.
            self.write_used_packed(chain.id, total as u32, chain.descs, true);
            return Rx::Delivered;
        }
        let mut fill = Fill::new(pkt, self.hdr_len, meta);
        let mark = (*cur, *wrap);
        self.packed_mut().pending.clear();
        loop {
            let ring = &self.packed().ring;
            if !is_avail(ring.flags(*cur), *wrap) {
                (*cur, *wrap) = mark;
                return Rx::NoBuffers;
            }
            let mut chain = PackedChain::new(ring, *cur, *wrap, *steps);
            let mut written = 0usize;
            let mut failed = None;
            while !fill.complete() {
                match chain.next(&self.mem, &mut self.hint) {
                    Ok(Some(seg)) if seg.write => {
                        let n = fill.fill(seg.ptr, seg.len as usize);
                        self.logged(seg.ptr, n);
                        written += n;
                    }
                    Ok(Some(_)) => {
                        failed = Some(ChainError::WrongDirection);
                        break;
                    }
                    Ok(None) => break,
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
            }
            let walked = chain.skip_rest();
            *steps = chain.steps();
            (*cur, *wrap) = (chain.slot, chain.wrap);
            if walked.is_err() {
                self.quarantine_packed();
                return Rx::Dropped;
            }
            let st = self.packed_mut();
            if st.pending.len() == st.pending.capacity() {
                // Cannot happen: each chain visits a descriptor and the
                // packet's chains together stop at MAX_CHAIN_DESCS.
                failed = Some(ChainError::TooLong);
            }
            if let Some(e) = failed {
                // Return every chain of the packet empty.
                self.errors.record(e);
                self.stats.bad_chain_drops += 1;
                self.commit_pending(Some(chain.id), chain.descs, true);
                return Rx::Dropped;
            }
            st.pending.push(PendingUsed {
                id: chain.id,
                // written <= 12 + 65535: fits u32.
                len: written as u32,
                descs: chain.descs,
            });
            if fill.complete() {
                break;
            }
            if !self.mrg {
                // The chain stays available for the next (smaller) packet.
                (*cur, *wrap) = mark;
                self.stats.no_room += 1;
                return Rx::Dropped;
            }
        }
        let n = self.packed().pending.len();
        if self.mrg && n > 1 {
            fill.set_num_buffers(n as u16);
            self.logged_num_buffers(&fill);
        }
        self.commit_pending(None, 0, false);
        Rx::Delivered
    }

    /// Writes the used descriptors of the packet's chains (`pending`),
    /// then, for a failed packet, that of the failing chain; `empty`
    /// returns them all with length 0.
    #[inline(always)]
    fn commit_pending(&mut self, last: Option<u16>, last_descs: u16, empty: bool) {
        let mut pending = std::mem::take(&mut self.packed_mut().pending);
        for p in &pending {
            let len = if empty { 0 } else { p.len };
            self.write_used_packed(p.id, len, p.descs, true);
        }
        if let Some(id) = last {
            self.write_used_packed(id, 0, last_descs, true);
        }
        pending.clear();
        self.packed_mut().pending = pending;
    }

    #[inline(always)]
    fn packed_mut(&mut self) -> &mut PackedState {
        self.packed.as_deref_mut().expect("a packed queue")
    }

    /// Reads ahead over up to `max` available slots from `(cur, wrap)` and
    /// prefetches the buffer each points to (for writing on RX): the
    /// descriptors and buffers were written by the driver's core, and
    /// issuing every miss of the burst before the first copy overlaps
    /// them instead of paying them one packet at a time (as the split
    /// ring's bursts do). Addresses are only prefetched, never
    /// dereferenced: no check needed here.
    #[inline(always)]
    fn warm_packed(&self, cur: u16, wrap: bool, max: usize, write: bool) {
        let ring = &self.packed().ring;
        let (mut i, mut w) = (cur, wrap);
        let skip = self.unread_header();
        for _ in 0..max {
            if !is_avail(ring.flags(i), w) {
                break;
            }
            let (addr, len, _) = ring.read(i);
            if write {
                self.mem.prefetch_rx_buffer(addr, self.hint, self.hdr_len);
            } else {
                self.mem.prefetch_read_span(
                    addr.wrapping_add(skip as u64),
                    (len as usize).saturating_sub(skip),
                    self.hint,
                );
            }
            step(&mut i, &mut w, ring.size);
        }
    }

    /// Writes one used descriptor at the used position and moves it past
    /// the chain's `descs` slots. RX descriptors carry WRITE: their
    /// length counts.
    #[inline(always)]
    fn write_used_packed(&mut self, id: u16, len: u32, descs: u16, rx: bool) {
        let st = self.packed_mut();
        let mut flags = used_flags(st.used_wrap);
        if rx {
            flags |= DESC_F_WRITE;
        }
        let slot = st.used;
        st.ring.write_used(slot, len, id, flags);
        for _ in 0..descs {
            step(&mut st.used, &mut st.used_wrap, st.ring.size);
        }
        if self.dirty_log.is_some() {
            let p = self.packed().ring.slot_ptr(slot);
            self.logged(p, 16);
        }
    }

    /// `last_pending` after a burst that took `taken` chains and stopped
    /// at `cur`: those plus one if the next is available (the ring has no
    /// count of what the driver posted).
    #[inline(always)]
    fn note_pending(&mut self, taken: u16, cur: u16, wrap: bool) {
        let more = !self.quarantined && is_avail(self.packed().ring.flags(cur), wrap);
        self.last_pending = taken + u16::from(more);
    }

    #[cold]
    fn quarantine_packed(&mut self) {
        self.errors.chain_too_long += 1;
        self.quarantined = true;
        self.last_pending = 0;
    }

    /// Ends a burst that started at `start` (position and lap): interrupts
    /// the driver if it asked for it, by its driver event area.
    #[inline(always)]
    fn finish_packed(&mut self, start: (u16, bool)) {
        let st = self.packed();
        let (new, new_wrap) = (st.used, st.used_wrap);
        if (new, new_wrap) == start || self.call.is_none() {
            return;
        }
        // Our used flags must be visible before we read the driver's wish.
        fence(Ordering::SeqCst);
        let (off_wrap, flags) = st.ring.driver_event();
        let want = match flags.load(Ordering::Relaxed) {
            EVENT_F_DISABLE => false,
            EVENT_F_DESC if self.event_idx => need_event_packed(
                off_wrap.load(Ordering::Relaxed),
                start.0,
                start.1,
                new,
                new_wrap,
                st.ring.size,
            ),
            // ENABLE, DESC without EVENT_IDX, or a reserved value: the
            // driver gets an interrupt rather than a lost one.
            _ => true,
        };
        if want {
            self.interrupt();
        }
    }

    /// `set_kick_wanted` on a packed ring: the device event area says
    /// ENABLE or DISABLE (we never ask for a kick at a given position).
    pub(super) fn set_kick_wanted_packed(&mut self, on: bool) {
        let v = if on { EVENT_F_ENABLE } else { EVENT_F_DISABLE };
        let flags = self.packed().ring.device_event().1;
        flags.store(v, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        self.logged(flags.as_ptr().cast(), 2);
    }

    /// `has_avail` on a packed ring: is the next slot available?
    pub(super) fn has_avail_packed(&self) -> bool {
        fence(Ordering::SeqCst);
        let st = self.packed();
        is_avail(st.ring.flags(self.last_avail), st.avail_wrap)
    }
}
