//! `sink`: accepts every packet and frees it (the datapath counts them).

use crate::{Port, RxQueue, TxQueue};
use nfv_mem::{Batch, PoolCache};

pub struct SinkPort {
    name: String,
}

impl SinkPort {
    pub fn new(name: &str) -> SinkPort {
        SinkPort {
            name: name.to_string(),
        }
    }
}

struct NoRx;
impl RxQueue for NoRx {
    fn rx_burst(&mut self, _: &mut Batch, _: &mut PoolCache) -> usize {
        0
    }
}

struct SinkTx;
impl TxQueue for SinkTx {
    #[inline]
    fn tx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        let n = batch.len();
        pool.free_batch(batch);
        n
    }
    /// It never reads a frame: split packets need no join.
    fn takes_split(&self) -> bool {
        true
    }
}

impl Port for SinkPort {
    fn name(&self) -> &str {
        &self.name
    }
    fn type_name(&self) -> &'static str {
        "sink"
    }
    fn n_rxq(&self) -> usize {
        1
    }
    fn never_receives(&self) -> bool {
        true
    }
    fn open_rxq(&self, _q: usize) -> Box<dyn RxQueue> {
        Box::new(NoRx)
    }
    fn open_txq(&self, _q: usize) -> Box<dyn TxQueue> {
        Box::new(SinkTx)
    }
}

/// An rx queue that never receives: for ports that only transmit.
pub fn no_rx() -> Box<dyn RxQueue> {
    Box::new(NoRx)
}
