//! [`Fabric::settle`]: a queue that sent a burst is settled
//! ([`TxQueue::settle`]) one poll iteration later, unless it sent again in
//! that iteration (its burst settled first), and when it leaves the PMD.

use super::*;
use nfv_mem::{MemoryConfig, PacketPool};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// Takes every packet; counts its `settle` calls.
struct SettleCounter(Arc<AtomicUsize>);

impl TxQueue for SettleCounter {
    fn tx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        let n = batch.len();
        pool.free_batch(batch);
        n
    }
    fn settle(&mut self) {
        self.0.fetch_add(1, Relaxed);
    }
}

#[test]
fn a_queue_is_settled_an_iteration_after_its_last_burst() {
    const A: PortNo = 1;
    const B: PortNo = 2;
    let pool = PacketPool::new("fabric-settle", &MemoryConfig::plain(2048, 64)).unwrap();
    let mut cache = pool.cache();
    let stats = Arc::new(PortStats::new(1, 1));
    let mut fabric = Fabric::default();
    let counts = [A, B].map(|no| {
        let c = Arc::new(AtomicUsize::new(0));
        fabric.add_tx(no, Box::new(SettleCounter(c.clone())), stats.clone(), 0);
        c
    });
    // (ports sending a burst this iteration, settles of A and B after it)
    let iterations: &[(&[PortNo], [usize; 2])] = &[
        (&[A], [0, 0]),
        (&[A, B], [0, 0]),
        (&[], [1, 1]),
        (&[], [1, 1]),
        (&[B], [1, 1]),
        (&[B], [1, 1]),
        (&[A], [1, 2]),
    ];
    for (i, &(sending, want)) in iterations.iter().enumerate() {
        for &no in sending {
            let mut p = cache.alloc().unwrap();
            p.set_len(64).unwrap();
            fabric.output(no, p, &stats.rx[0], &mut cache);
        }
        fabric.flush(&mut cache);
        fabric.settle();
        let got = counts.each_ref().map(|c| c.load(Relaxed));
        assert_eq!(got, want, "iteration {i} (sending {sending:?})");
    }
    // A sent in the last iteration; leaving the PMD settles it.
    fabric.del_tx(A, Some(&mut cache));
    assert_eq!(counts[0].load(Relaxed), 2);
    fabric.settle();
    fabric.settle_all();
    assert_eq!(
        counts.each_ref().map(|c| c.load(Relaxed)),
        [2, 3],
        "settle_all"
    );
}
