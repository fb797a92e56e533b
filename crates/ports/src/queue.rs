//! The queues a port hands out, each owned by one PMD thread
//! ([`RxQueue`], [`TxQueue`]), and [`settle_tx`] for the tx queues of
//! ports that hand frames to the kernel one by one.

use nfv_mem::{Batch, PoolCache};

/// A receive queue, owned by one PMD thread.
pub trait RxQueue: Send {
    /// Appends up to `batch.remaining_capacity()` received packets to
    /// `batch`, allocating from `pool` if the port copies into switch
    /// memory. Returns the number appended. Must not block.
    fn rx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize;
    /// Ends the burst: every packet the last `rx_burst` produced has been
    /// sent or freed. A port whose packets borrow its own memory (split
    /// packets, see `nfv_mem::packet`) gives that memory back here; the
    /// next `rx_burst` also ends the previous burst, so a caller that
    /// keeps packets across bursts must join them first
    /// (`Packet::join_tail`).
    fn burst_done(&mut self) {}
}

/// A transmit queue, owned by one PMD thread.
pub trait TxQueue: Send {
    /// Sends a prefix of `batch` and removes the sent packets from it;
    /// packets it could not send stay in `batch` for the caller to count
    /// and free. Returns the number sent. Must not block.
    fn tx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize;
    /// Finishes what the last `tx_burst` left for later (a vhost-user
    /// queue's interrupt check, whose fence would otherwise wait at every
    /// burst's end for the driver's core). The datapath calls it once a
    /// poll iteration has passed without a burst on the queue; the next
    /// `tx_burst` does it first anyway. Must not block.
    fn settle(&mut self) {}
    /// Largest frame (bytes, no FCS) this queue accepts.
    fn max_frame(&self) -> usize {
        usize::MAX
    }
    /// Whether the queue's peer takes packets now (a VNF connected and
    /// taking them), at TSC `now_tsc` (the PMD's coarse clock). A
    /// fast_failover group skips buckets watching a port that is not
    /// live. Read per packet of such a group: atomic loads, never a
    /// syscall or a lock.
    fn is_live(&self, _now_tsc: u64) -> bool {
        true
    }
    /// True when `tx_burst` takes split packets (head in a switch buffer,
    /// tail borrowed from the sender: see `nfv_mem::packet`) and is done
    /// with them when it returns. Ports that keep packets past their burst
    /// (kernel rings, other threads) answer false and the datapath joins
    /// split packets before handing them over.
    fn takes_split(&self) -> bool {
        false
    }
    /// The offloads this queue's peer takes as they are, now: packets
    /// carrying offload metadata it does not accept (a partial checksum,
    /// a large segment; `nfv_mem::Packet::offload`) are checksummed or
    /// segmented in software by the datapath before `tx_burst`. Asked only
    /// for such packets. None by default: ports without a virtio-net
    /// header get complete frames.
    fn offload_caps(&mut self) -> nfv_offload::OffloadCaps {
        nfv_offload::OffloadCaps::NONE
    }
    /// Largest frame this queue accepts when it carries a large segment
    /// its peer segments itself (only asked when [`Self::offload_caps`]
    /// accepts one).
    fn max_segment_frame(&self) -> usize {
        self.max_frame()
    }
}

/// Ends a [`TxQueue::tx_burst`] of a port that hands frames to the kernel
/// one by one: the first `done` packets of `batch` were tried, those whose
/// bit is set in `refused` were refused one at a time (too big, say) and
/// the rest went out. Frees what went out and leaves in `batch`, in order,
/// the refused ones and those not tried, for the caller to count and free.
/// Returns the number sent.
pub fn settle_tx(batch: &mut Batch, pool: &mut PoolCache, done: usize, refused: u64) -> usize {
    let sent = done - refused.count_ones() as usize;
    if sent == batch.len() {
        pool.free_batch(batch);
        return sent;
    }
    let mut rest = Batch::new();
    for (i, p) in batch.drain(..).enumerate() {
        if i < done && refused & (1 << i) == 0 {
            pool.free(p);
        } else {
            rest.push(p);
        }
    }
    *batch = rest;
    sent
}
