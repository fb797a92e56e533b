//! `receiver`: a sink that reads the test stamps a generator writes
//! (`stamp = true`) and accounts per stream: received, lost, reordered,
//! duplicates and latency (`nfv_traffic::stream`).
//!
//! Every PMD has its own tx queue on the port, and each tx queue its own
//! [`TrafficReceiver`]: the fast path takes no lock and does not allocate
//! (except once per new stream). Per packet it finds the stamp (a few
//! header checks), updates its stream's sequence window and counters
//! (plain single-writer stores) and one histogram bucket; the receive
//! time is read once per burst. Readers merge the queues' counters on
//! demand ([`ReceiverStats::snapshot`]). A stream is seen by one tx queue
//! as long as one PMD forwards it (true for a generator queue); if a
//! stream is spread over PMDs its counts add up but reordering between
//! PMDs is not seen.

pub use crate::shared::ReceiverStats;
use crate::shared::lock;
use crate::{Clock, Port, PortGauges, RxQueue, TxQueue};
use nfv_mem::{Batch, PoolCache};
use nfv_traffic::TrafficReceiver;
use std::sync::Arc;

pub struct ReceiverPort {
    name: String,
    stats: Arc<ReceiverStats>,
    clock: Clock,
}

impl ReceiverPort {
    pub fn new(name: &str) -> ReceiverPort {
        ReceiverPort {
            name: name.to_string(),
            stats: Arc::default(),
            clock: Clock::tsc(),
        }
    }
    /// Uses `clock` for receive times instead of the TSC (tests); it must
    /// tick at the rate of the generator's clock.
    pub fn with_clock(mut self, clock: Clock) -> ReceiverPort {
        self.clock = clock;
        self
    }
    pub fn stats(&self) -> &Arc<ReceiverStats> {
        &self.stats
    }
}

struct ReceiverTx {
    rx: TrafficReceiver,
    clock: Clock,
}

impl TxQueue for ReceiverTx {
    #[inline]
    fn tx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        let now = (self.clock.now)();
        for p in batch.iter() {
            self.rx.receive(p.data(), now);
        }
        let n = batch.len();
        pool.free_batch(batch);
        n
    }
}

impl Port for ReceiverPort {
    fn name(&self) -> &str {
        &self.name
    }
    fn type_name(&self) -> &'static str {
        "receiver"
    }
    fn n_rxq(&self) -> usize {
        1
    }
    fn open_rxq(&self, _q: usize) -> Box<dyn RxQueue> {
        crate::sink::no_rx()
    }
    fn open_txq(&self, _q: usize) -> Box<dyn TxQueue> {
        let rx = TrafficReceiver::new(self.clock.hz);
        lock(&self.stats.queues).push(rx.shared().clone());
        Box::new(ReceiverTx {
            rx,
            clock: self.clock,
        })
    }
    fn gauges(&self) -> PortGauges {
        let s = self.stats.snapshot();
        let sum =
            |f: fn(&nfv_traffic::StreamSnapshot) -> u64| -> u64 { s.streams.iter().map(f).sum() };
        let mut g = PortGauges::default()
            .with("streams", s.streams.len())
            .with("received", sum(|x| x.received))
            .with("lost", sum(|x| x.lost()))
            .with("reordered", sum(|x| x.reordered))
            .with("duplicates", sum(|x| x.duplicates))
            .with("unstamped", s.unstamped);
        let mut all = nfv_traffic::StreamSnapshot::empty(0);
        for x in &s.streams {
            all.merge(x);
        }
        if let Some(l) = all.latency() {
            g.push("latency_p50_us", format!("{:.3}", l.p50_ns as f64 / 1e3));
            g.push("latency_p99_us", format!("{:.3}", l.p99_ns as f64 / 1e3));
        }
        g
    }
    fn receiver_stats(&self) -> Option<Arc<ReceiverStats>> {
        Some(self.stats.clone())
    }
}
