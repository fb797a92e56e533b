//! The null rx queue: never receives.

use nfv_mem::{Batch, PoolCache};
use nfv_ports::RxQueue;

pub struct NullRx;

impl RxQueue for NullRx {
    #[inline]
    fn rx_burst(&mut self, _: &mut Batch, _: &mut PoolCache) -> usize {
        0
    }
}
