//! The switching fabric of one PMD: a tx slot per output port (its tx
//! queue and the packets pending for it), one tx burst per output per
//! batch. It knows ports and queues, never rules (netmap/VALE style: the
//! decision picks destinations, the fabric moves packets).
//!
//! Every packet handed to [`Fabric::output`] is accounted for: queued, or
//! freed with its drop counted where it happened (`no_port` on the in
//! port's rx counters, `too_big` and `tx_full` on the out port's tx
//! counters).
//!
//! Split packets (one-copy forwarding: the tail still in the sender's
//! buffer, see `nfv_mem::packet`) go as they are to queues that take them
//! ([`TxQueue::takes_split`]: vhost-user, which copies them straight into
//! the guest) and are joined first for every other port, which may keep
//! packets past the burst.

use nfv_flow::PortNo;
use nfv_mem::{Batch, BatchShape, Packet, PoolCache};
use nfv_offload::{OffloadMeta, TxPlan};
#[cfg(test)]
use nfv_ports::QueueSnapshot;
use nfv_ports::{DropReason, PortStats, QueueCounters, TxQueue};
use std::sync::Arc;

const NO_SLOT: u16 = u16::MAX;

/// The deepest byte the decision and the actions read or edit: Ethernet,
/// the VLAN tags skipped, an IPv4 header with the most options, the
/// transport ports. A split packet's head holds at least `SPLIT_HEAD`
/// bytes, so everything decided on is switch-owned (a guest rewriting its
/// buffer cannot change it between decision and delivery).
const DEEPEST_HEADER_BYTE: usize = nfv_wire::ethernet::HEADER_LEN
    + nfv_wire::l2::MAX_VLAN_TAGS * nfv_wire::vlan::HEADER_LEN
    + 15 * 4 // IPv4 IHL is 4 bits of 32-bit words
    + nfv_wire::udp::field::DST_PORT.end;
const _: () = assert!(DEEPEST_HEADER_BYTE <= nfv_mem::SPLIT_HEAD);

/// One output port as seen by one PMD: its tx queue and pending packets.
struct TxSlot {
    no: PortNo,
    txq: Box<dyn TxQueue>,
    pending: Batch,
    pending_bytes: u64,
    stats: Arc<PortStats>,
    qid: usize,
    max_frame: usize,
    /// Largest large segment the queue takes when its peer segments.
    max_segment_frame: usize,
    takes_split: bool,
    /// Listed in [`Fabric::sent`] (it sent a burst this poll iteration).
    sent_now: bool,
}

impl TxSlot {
    #[inline(always)]
    fn counters(&self) -> &QueueCounters {
        &self.stats.tx[self.qid]
    }

    /// One tx burst of everything pending; what the queue refuses is freed
    /// and counted as `tx_full`.
    #[inline]
    fn send(&mut self, pool: &mut PoolCache) {
        let n = self.pending.len();
        let sent = self.txq.tx_burst(&mut self.pending, pool);
        let mut unsent_bytes = 0;
        for p in self.pending.drain(..) {
            unsent_bytes += p.frame_len() as u64;
            pool.free(p);
        }
        let c = self.counters();
        c.add(sent as u64, self.pending_bytes - unsent_bytes);
        if sent < n {
            c.drop(DropReason::TxFull, (n - sent) as u64);
        }
        self.pending_bytes = 0;
    }
}

/// Tx slots by port number, and the ones with packets pending.
///
/// Thread safety: owned by one PMD thread.
#[derive(Default)]
pub struct Fabric {
    tx: Vec<TxSlot>,
    /// Port number → index in `tx`, or [`NO_SLOT`].
    slot_of: Vec<u16>,
    /// Indices in `tx` with packets pending, each once.
    dirty: Vec<u16>,
    /// Indices in `tx` that sent a burst this poll iteration, each once,
    /// and those that sent one the iteration before: what
    /// [`Fabric::settle`] finishes ([`TxQueue::settle`]).
    sent: Vec<u16>,
    due: Vec<u16>,
}

impl Fabric {
    /// Adds (or replaces) the tx queue of port `no`; `qid` selects this
    /// PMD's tx counters in `stats`.
    pub fn add_tx(&mut self, no: PortNo, txq: Box<dyn TxQueue>, stats: Arc<PortStats>, qid: usize) {
        self.del_tx(no, None);
        let max_frame = txq.max_frame();
        let max_segment_frame = txq.max_segment_frame();
        let takes_split = txq.takes_split();
        let idx = self.tx.len() as u16;
        self.tx.push(TxSlot {
            no,
            txq,
            pending: Batch::new(),
            pending_bytes: 0,
            stats,
            qid,
            max_frame,
            max_segment_frame,
            takes_split,
            sent_now: false,
        });
        if self.slot_of.len() <= no as usize {
            self.slot_of.resize(no as usize + 1, NO_SLOT);
        }
        self.slot_of[no as usize] = idx;
        self.dirty.reserve(self.tx.len());
        self.sent.reserve(self.tx.len());
        self.due.reserve(self.tx.len());
    }

    /// Removes a port's tx queue, freeing what was pending for it (into
    /// `pool` when given, else by dropping the packets).
    pub fn del_tx(&mut self, no: PortNo, pool: Option<&mut PoolCache>) {
        let Some(&idx) = self.slot_of.get(no as usize) else {
            return;
        };
        if idx == NO_SLOT {
            return;
        }
        let mut slot = self.tx.swap_remove(idx as usize);
        match pool {
            Some(p) => p.free_batch(&mut slot.pending),
            None => slot.pending.clear(),
        }
        // Leaving this PMD: nothing of it is left for later.
        slot.txq.settle();
        for list in [&mut self.dirty, &mut self.sent, &mut self.due] {
            list.retain(|&d| d != idx);
        }
        self.slot_of[no as usize] = NO_SLOT;
        if let Some(moved) = self.tx.get(idx as usize) {
            let old = self.tx.len() as u16;
            self.slot_of[moved.no as usize] = idx;
            for list in [&mut self.dirty, &mut self.sent, &mut self.due] {
                for d in list.iter_mut().filter(|d| **d == old) {
                    *d = idx;
                }
            }
        }
    }

    /// Whether port `no` can take packets at TSC `now` (the PMD's coarse
    /// clock): it has a tx queue here and the queue says its peer is
    /// there and taking them (a fast_failover group's test).
    pub fn is_live(&self, no: PortNo, now: u64) -> bool {
        match self.slot_of.get(no as usize).copied() {
            Some(idx) if idx != NO_SLOT => self.tx[idx as usize].txq.is_live(now),
            _ => false,
        }
    }

    /// The port numbers that have a tx queue here (flooding's targets).
    pub fn outputs(&self) -> impl Iterator<Item = PortNo> + '_ {
        self.tx.iter().map(|s| s.no)
    }

    /// Queues `pkt` for port `out` (sending that port's pending batch first
    /// if it is full). `rx` are the in port's counters, for `no_port`.
    #[inline(always)]
    pub fn output(
        &mut self,
        out: PortNo,
        mut pkt: Packet,
        rx: &QueueCounters,
        pool: &mut PoolCache,
    ) {
        let idx = self.slot_of.get(out as usize).copied().unwrap_or(NO_SLOT);
        if idx == NO_SLOT {
            rx.drop(DropReason::NoPort, 1);
            pool.free(pkt);
            return;
        }
        if pkt.has_offload() {
            return self.output_offloaded(idx, pkt, pool);
        }
        let slot = &mut self.tx[idx as usize];
        let len = pkt.frame_len();
        if len > slot.max_frame {
            slot.counters().drop(DropReason::TooBig, 1);
            pool.free(pkt);
            return;
        }
        // Out of line, so that `pkt` never has its address taken on the
        // common path: it then goes from registers into `pending`, where
        // it used to be assembled on the stack field by field and read
        // back whole — a store-forwarding stall `perf annotate` put at
        // 15-20 % of the element's samples. (End to end the gain measured
        // within the noise: about a cycle per packet.)
        if (pkt.is_split() || pkt.is_borrowed()) && !slot.takes_split {
            match keepable(pkt, slot.counters(), pool) {
                Some(p) => pkt = p,
                None => return,
            }
        }
        self.enqueue(idx, pkt, len, pool);
    }

    /// Queues the whole of `batch` for port `out` in one move, leaving
    /// `batch` empty, when nothing in it needs a packet's own treatment
    /// (offload metadata, a split packet the queue cannot take, a frame
    /// too big) and nothing is pending for the port yet. `false`: nothing
    /// was done; use [`Fabric::output`] per packet.
    ///
    /// `shape`, when the caller already read every packet of the batch
    /// (a port-wide rule's decision does), stands for the per-packet
    /// checks.
    #[inline(always)]
    pub fn output_batch(
        &mut self,
        out: PortNo,
        batch: &mut Batch,
        shape: Option<&BatchShape>,
    ) -> bool {
        let idx = self.slot_of.get(out as usize).copied().unwrap_or(NO_SLOT);
        if idx == NO_SLOT {
            return false;
        }
        let slot = &mut self.tx[idx as usize];
        if !slot.pending.is_empty() {
            return false;
        }
        let bytes = match shape {
            Some(s) => {
                if s.offload() || (s.split() && !slot.takes_split) || s.longest() > slot.max_frame {
                    return false;
                }
                s.bytes()
            }
            None => {
                let mut bytes = 0u64;
                for p in batch.iter() {
                    let len = p.frame_len();
                    let split = p.is_split() || p.is_borrowed();
                    if p.has_offload() || (split && !slot.takes_split) || len > slot.max_frame {
                        return false;
                    }
                    bytes += len as u64;
                }
                bytes
            }
        };
        std::mem::swap(&mut slot.pending, batch);
        slot.pending_bytes = bytes;
        self.dirty.push(idx);
        true
    }

    /// Appends `pkt` (`len` bytes) to slot `idx`'s pending batch.
    #[inline(always)]
    fn enqueue(&mut self, idx: u16, pkt: Packet, len: usize, pool: &mut PoolCache) {
        let slot = &mut self.tx[idx as usize];
        if slot.pending.is_empty() {
            self.dirty.push(idx);
        } else if slot.pending.is_full() {
            // Still listed in `dirty` (it was not empty): sent now, it
            // keeps filling and is flushed with the rest.
            slot.send(pool);
        }
        slot.pending_bytes += len as u64;
        slot.pending.push(pkt);
    }

    /// [`Fabric::output`] for a packet with offload metadata (a partial
    /// checksum or a large segment, from a guest that negotiated them):
    /// queued as it is when the output's peer takes it now
    /// ([`TxQueue::offload_caps`]); else its checksum is completed, or it
    /// is cut into segments, here, once for this output. The metadata is
    /// checked against the frame again first: actions may have edited the
    /// frame since it was received.
    #[cold]
    #[inline(never)]
    fn output_offloaded(&mut self, idx: u16, mut pkt: Packet, pool: &mut PoolCache) {
        let slot = &mut self.tx[idx as usize];
        let meta = OffloadMeta::from_virtio_hdr(&pkt.offload().unwrap_or_default());
        let plan = slot.txq.offload_caps().plan(&meta);
        // Offload packets are whole (the vhost-user port joins them);
        // this keeps the rule should another producer split one.
        if (pkt.is_split() || pkt.is_borrowed()) && !slot.takes_split {
            match keepable(pkt, slot.counters(), pool) {
                Some(p) => pkt = p,
                None => return,
            }
        }
        let len = pkt.frame_len();
        match plan {
            TxPlan::AsIs => {
                let max = if meta.is_gso() {
                    slot.max_segment_frame
                } else {
                    slot.max_frame
                };
                if len > max {
                    slot.counters().drop(DropReason::TooBig, 1);
                    pool.free(pkt);
                    return;
                }
                self.enqueue(idx, pkt, len, pool);
            }
            TxPlan::ClearHeader | TxPlan::CompleteChecksum => {
                if len > slot.max_frame {
                    slot.counters().drop(DropReason::TooBig, 1);
                    pool.free(pkt);
                    return;
                }
                if plan == TxPlan::CompleteChecksum {
                    if pkt.is_split() && !pkt.join_tail() {
                        slot.counters().drop(DropReason::TooBig, 1);
                        pool.free(pkt);
                        return;
                    }
                    if nfv_offload::validate(&meta, pkt.data()).is_err() {
                        slot.counters().drop(DropReason::BadOffload, 1);
                        pool.free(pkt);
                        return;
                    }
                    nfv_offload::complete_checksum(
                        pkt.data_mut(),
                        meta.csum_start as usize,
                        meta.csum_offset as usize,
                    );
                }
                pkt.clear_offload();
                self.enqueue(idx, pkt, len, pool);
            }
            TxPlan::Segment { full_csum } => self.segment(idx, pkt, &meta, full_csum, pool),
        }
    }

    /// Software GSO for slot `idx`: `pkt` cut into segments of
    /// `meta.gso_size` payload bytes (pool packets, each queued), then
    /// freed.
    #[cold]
    #[inline(never)]
    fn segment(
        &mut self,
        idx: u16,
        mut pkt: Packet,
        meta: &OffloadMeta,
        full_csum: bool,
        pool: &mut PoolCache,
    ) {
        let slot = &mut self.tx[idx as usize];
        if pkt.is_split() && !pkt.join_tail() {
            slot.counters().drop(DropReason::TooBig, 1);
            pool.free(pkt);
            return;
        }
        let Ok(layout) = nfv_offload::validate(meta, pkt.data()) else {
            slot.counters().drop(DropReason::BadOffload, 1);
            pool.free(pkt);
            return;
        };
        let gso = meta.gso_size as usize;
        let frame_len = pkt.len();
        let partial = (!full_csum).then(|| layout.partial_csum_meta().to_virtio_hdr());
        let mut index = 0;
        while let Some(seg_len) = nfv_offload::segment_len(frame_len, &layout, gso, index) {
            let slot = &mut self.tx[idx as usize];
            if seg_len > slot.max_frame {
                slot.counters().drop(DropReason::TooBig, 1);
                index += 1;
                continue;
            }
            let Some(mut seg) = pool.alloc() else {
                let left = nfv_offload::segment_count(frame_len, &layout, gso) - index;
                slot.counters().drop(DropReason::NoBuffers, left as u64);
                break;
            };
            if seg.max_len() < seg_len {
                slot.counters().drop(DropReason::TooBig, 1);
                pool.free(seg);
                index += 1;
                continue;
            }
            let n =
                nfv_offload::segment(pkt.data(), &layout, gso, index, seg.room_mut(), full_csum);
            // Cannot fail: n == seg_len <= max_len (checked).
            let _ = seg.set_len(n);
            seg.set_in_port(pkt.in_port());
            if let Some(h) = partial {
                seg.set_offload(h);
            }
            self.enqueue(idx, seg, n, pool);
            index += 1;
        }
        pool.free(pkt);
    }

    /// Sends every output's pending batch (one tx burst per port).
    #[inline]
    pub fn flush(&mut self, pool: &mut PoolCache) {
        for &idx in &self.dirty {
            let slot = &mut self.tx[idx as usize];
            if !slot.pending.is_empty() {
                slot.send(pool);
                if !slot.sent_now {
                    slot.sent_now = true;
                    self.sent.push(idx);
                }
            }
        }
        self.dirty.clear();
    }

    /// Once a poll iteration, after its last flush: finishes what the
    /// queues that sent a burst in the iteration before, and none in this
    /// one, left for later ([`TxQueue::settle`]: a vhost-user queue's
    /// interrupt check). A queue that sent again settled at the start of
    /// that burst, and is looked at again next iteration. One iteration
    /// late is the point: by then what the burst stored has reached the
    /// guest's core, and the check's fence does not wait for it.
    #[inline]
    pub fn settle(&mut self) {
        for &idx in &self.due {
            let slot = &mut self.tx[idx as usize];
            if !slot.sent_now {
                slot.txq.settle();
            }
        }
        self.due.clear();
        for &idx in &self.sent {
            self.tx[idx as usize].sent_now = false;
        }
        std::mem::swap(&mut self.due, &mut self.sent);
    }

    /// Finishes what every queue left for later (the PMD is stopping).
    pub fn settle_all(&mut self) {
        for slot in &mut self.tx {
            slot.txq.settle();
            slot.sent_now = false;
        }
        self.sent.clear();
        self.due.clear();
    }
}

/// `pkt` made fit for a port that may keep it past this burst: a split
/// frame joined in its head's buffer, a frame in a VNF's lent receive
/// buffer copied to the pool (the buffer goes back to its guest now).
/// `None` (counted, freed) when that cannot be done.
#[cold]
#[inline(never)]
fn keepable(mut pkt: Packet, counters: &QueueCounters, pool: &mut PoolCache) -> Option<Packet> {
    // A join cannot fail for packets the switch split (their buffer holds
    // the whole frame); should it, the frame is too big for it.
    if pkt.is_split() && !pkt.join_tail() {
        counters.drop(DropReason::TooBig, 1);
        pool.free(pkt);
        return None;
    }
    if pkt.is_borrowed() {
        let Some(copy) = pool.copy(&pkt) else {
            counters.drop(DropReason::NoBuffers, 1);
            pool.free(pkt);
            return None;
        };
        pool.free(std::mem::replace(&mut pkt, copy));
    }
    Some(pkt)
}

#[cfg(test)]
#[path = "fabric_offload_tests.rs"]
mod offload_tests;

#[cfg(test)]
#[path = "fabric_settle_tests.rs"]
mod settle_tests;

#[cfg(test)]
#[path = "fabric_batch_tests.rs"]
mod batch_tests;
