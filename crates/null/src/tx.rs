//! The null tx queue: takes every packet of the burst and frees it at
//! once, so it never backpressures (no `tx_full`). The datapath counts
//! what it sent (packets, bytes) and, through [`TxQueue::max_frame`],
//! drops longer frames as `too_big` before the burst.

use nfv_mem::{Batch, PoolCache};
use nfv_ports::TxQueue;

pub struct NullTx {
    pub max_frame: usize,
}

impl TxQueue for NullTx {
    #[inline]
    fn tx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        let n = batch.len();
        pool.free_batch(batch);
        n
    }

    fn max_frame(&self) -> usize {
        self.max_frame
    }

    /// It never reads a frame: split packets need no join.
    fn takes_split(&self) -> bool {
        true
    }
}
