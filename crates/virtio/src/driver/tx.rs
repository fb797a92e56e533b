//! TX on the driver side: the virtio-net header goes into the packet's
//! headroom and each packet is one device-readable descriptor; the packet
//! stays in the slot table until the device returns it.

use super::DriverQueue;
use nfv_mem::{Batch, Packet, PoolCache};

impl DriverQueue {
    /// Posts packets from the front of `batch` (as many as there are free
    /// descriptors, reclaiming completed ones first if needed) and removes
    /// them from it; returns how many were posted. A packet not in the
    /// shared memory, or without headroom for the header, is copied into a
    /// fresh `pool` packet (dropped as `tx_dropped` if that fails).
    pub fn transmit_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        if self.quarantined || batch.is_empty() {
            return 0;
        }
        if self.free.len() < batch.len() {
            self.reclaim_tx(pool);
        }
        let n = batch.len().min(self.free.len());
        let mut posted = 0;
        for pkt in batch.drain(..n) {
            if self.post_tx(pkt, pool) {
                posted += 1;
            }
        }
        if posted > 0 {
            self.publish_avail();
        }
        posted
    }

    #[inline(always)]
    fn tx_gpa(&mut self, pkt: &Packet) -> Option<u64> {
        let hdr = self.hdr_len;
        if pkt.headroom() < hdr || pkt.len() + hdr > u16::MAX as usize {
            return None;
        }
        self.mem.host_to_gpa_hinted(
            pkt.data_ptr().wrapping_sub(hdr),
            pkt.len() + hdr,
            &mut self.hint,
        )
    }

    #[inline(always)]
    fn post_tx(&mut self, mut pkt: Packet, pool: &mut PoolCache) -> bool {
        let gpa = match self.tx_gpa(&pkt) {
            Some(g) => g,
            None => match self.copy_for_tx(pkt, pool) {
                Some((g, c)) => {
                    pkt = c;
                    g
                }
                None => {
                    self.stats.tx_dropped += 1;
                    return false;
                }
            },
        };
        let Some(id) = self.free.pop() else {
            // Not reached: the caller posts at most `free.len()` packets.
            pool.free(pkt);
            return false;
        };
        let frame = pkt.len();
        // The packet's offload metadata, if any, is the header's first
        // bytes (a partial checksum or a large segment for the device).
        let meta = pkt.offload();
        if let Some(h) = pkt.prepend(self.hdr_len) {
            h.fill(0);
            if let Some(m) = meta {
                h[..m.len()].copy_from_slice(&m);
            }
        }
        self.stats.tx_packets += 1;
        self.stats.tx_bytes += frame as u64;
        let len = pkt.len() as u32;
        self.post(id, gpa, len, 0, pkt);
        true
    }

    #[cold]
    fn copy_for_tx(&mut self, pkt: Packet, pool: &mut PoolCache) -> Option<(u64, Packet)> {
        let c = pool.copy(&pkt);
        pool.free(pkt);
        let c = c?;
        match self.tx_gpa(&c) {
            Some(g) => Some((g, c)),
            None => {
                pool.free(c);
                None
            }
        }
    }

    /// Frees the packets the device has finished sending; returns how many.
    pub fn reclaim_tx(&mut self, pool: &mut PoolCache) -> usize {
        if self.quarantined {
            return 0;
        }
        if self.features & crate::layout::VIRTIO_F_IN_ORDER != 0 {
            return match self.packed {
                Some(_) => self.reclaim_tx_in_order_packed(pool),
                None => self.reclaim_tx_in_order_split(pool),
            };
        }
        let Some(pending) = self.used_pending() else {
            return 0;
        };
        let mut n = 0;
        for _ in 0..pending {
            let e = self.pop_used();
            if let Some(p) = self.check_used_id(e.id).and_then(|id| self.take_slot(id)) {
                pool.free(p);
                n += 1;
            }
        }
        self.after_harvest();
        n
    }

    /// [`Self::reclaim_tx`] on a split ring with `VIRTIO_F_IN_ORDER`: the
    /// device may return a run of chains as one used entry, at the run's
    /// first slot, naming its last chain (virtio 1.2 §2.7.9), so the
    /// entries are not read at all (as DPDK's in-order TX does): chains are
    /// used in the order they were made available, so used position `i`
    /// is the chain this driver put at avail position `i`.
    fn reclaim_tx_in_order_split(&mut self, pool: &mut PoolCache) -> usize {
        let Some(pending) = self.used_pending() else {
            return 0;
        };
        let mut n = 0;
        for _ in 0..pending {
            let id = self.ring.avail_entry(self.last_used);
            self.skip_used();
            if let Some(p) = self
                .check_used_id(u32::from(id))
                .and_then(|i| self.take_slot(i))
            {
                pool.free(p);
                n += 1;
            }
        }
        self.after_harvest();
        n
    }

    /// [`Self::reclaim_tx`] on a packed ring with `VIRTIO_F_IN_ORDER`: a
    /// used descriptor may return a whole batch (see `driver/packed.rs`).
    fn reclaim_tx_in_order_packed(&mut self, pool: &mut PoolCache) -> usize {
        let mut ids = std::mem::take(&mut self.batch_ids);
        let mut n = 0;
        loop {
            if self.pop_used_batch_packed(&mut ids).is_none() {
                self.errors.used_idx_jump += 1;
                self.quarantined = true;
                break;
            }
            if ids.is_empty() {
                break;
            }
            for &id in &ids {
                if let Some(p) = self
                    .check_used_id(id as u32)
                    .and_then(|i| self.take_slot(i))
                {
                    pool.free(p);
                    n += 1;
                }
            }
        }
        self.batch_ids = ids;
        n
    }
}
