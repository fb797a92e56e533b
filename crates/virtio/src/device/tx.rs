//! Driver TX queue → switch: copy frames out of guest chains into pool
//! packets (virtio-net §5.1.6.2 from the device's side).
//!
//! Cost notes (64 B frames, see `examples/virtq_bench.rs`): the avail
//! entries of the burst are read first and their descriptors prefetched;
//! per chain one descriptor read, one translation (hinted), one copy.

use super::DeviceQueue;
use super::chain::{BURST_DESC_BUDGET, Chain, ChainError, chain_cost};
use crate::ring::prefetch;
use nfv_mem::{BATCH, Batch, Packet, PoolCache};

/// Chains whose first buffer is prefetched ahead of the one being copied.
pub(super) const PREFETCH_AHEAD: usize = 2;

/// Outcome of reading one chain.
enum Tx {
    Frame,
    Oversize,
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
    #[inline]
    pub fn dequeue_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        if self.quarantined || self.in_debt() {
            return 0;
        }
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
        for &h in &heads[..n] {
            self.ring.prefetch_buffer(&self.mem, h, self.hint);
        }
        let mut spent = 0u32;
        for &head in &heads[..n] {
            if spent >= BURST_DESC_BUDGET {
                self.stats.budget_exhausted += 1;
                break;
            }
            let Some(mut pkt) = pool.alloc() else {
                self.stats.alloc_failures += 1;
                break;
            };
            self.last_avail = self.last_avail.wrapping_add(1);
            if head >= self.ring.size {
                // No valid id to return it under: consumed and counted.
                self.errors.desc_id_out_of_range += 1;
                pool.free(pkt);
                spent += 1;
                continue;
            }
            let mut chain = Chain::new(self.ring.desc, self.ring.size, head, 0);
            let r = self.read_tx_chain(&mut chain, &mut pkt);
            spent += chain_cost(chain.steps());
            match r {
                Ok(Tx::Frame) => {
                    bytes += pkt.len() as u64;
                    batch.push(pkt);
                    got += 1;
                }
                Ok(Tx::Oversize) => {
                    self.stats.oversize += 1;
                    pool.free(pkt);
                }
                Err(e) => {
                    self.errors.record(e);
                    pool.free(pkt);
                }
            }
            self.push_used(head, 0);
        }
        self.stats.packets += got as u64;
        self.stats.bytes += bytes;
        self.owe(spent, BURST_DESC_BUDGET);
        self.finish_burst();
        got
    }

    /// Copies the frame of `chain` (after the virtio-net header, which may
    /// share a buffer with the data or span several) into `pkt`. The whole
    /// chain is walked and checked even when the frame does not fit.
    #[inline(always)]
    fn read_tx_chain(&mut self, chain: &mut Chain, pkt: &mut Packet) -> Result<Tx, ChainError> {
        let room = pkt.room_mut();
        let (dst, cap) = (room.as_mut_ptr(), room.len());
        let mut skip = self.hdr_len;
        let mut off = 0usize;
        let mut total = 0u64;
        let mut fits = true;
        while let Some(seg) = chain.next(&self.mem, &mut self.hint)? {
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
                skip -= s;
                src = src.wrapping_add(s);
                len -= s;
            }
            if len != 0 && fits {
                if len > cap - off {
                    fits = false;
                } else {
                    // SAFETY: `src..src+len` is inside the translated buffer
                    // (we skipped at most its length); `dst+off..+len` is
                    // inside the packet's room (`off + len <= cap`). `copy`
                    // tolerates overlap, should the pool ever live in guest
                    // memory.
                    unsafe { std::ptr::copy(src, dst.add(off), len) };
                    off += len;
                }
            }
        }
        if skip != 0 {
            return Err(ChainError::Short);
        }
        if !fits {
            return Ok(Tx::Oversize);
        }
        // Cannot fail: off <= cap == max_len.
        let _ = pkt.set_len(off);
        Ok(Tx::Frame)
    }
}
