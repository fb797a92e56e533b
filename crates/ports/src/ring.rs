//! `ring`: an in-process loopback pair. What one end transmits, the other
//! end receives — for tests and for wiring pipelines inside one node.
//!
//! Each end owns an inbox of lock-free rings, one per rx queue; the peer's
//! tx queue `q` feeds inbox ring `q % rings`. An end opened before its peer
//! drops what it sends (counted as `tx_full` by the datapath) until the
//! peer exists.

use crate::{Port, PortGauges, RxQueue, TxQueue};
use crossbeam_queue::ArrayQueue;
use nfv_mem::{Batch, Packet, PoolCache};
use std::sync::{Arc, OnceLock};

/// The inbox of one ring end, created when that end is opened.
pub type Inbox = Arc<OnceLock<Box<[ArrayQueue<Packet>]>>>;

pub struct RingPort {
    name: String,
    rxqs: usize,
    inbox: Inbox,
    peer_inbox: Inbox,
}

impl RingPort {
    /// `inbox`/`peer_inbox` come from the [`crate::PortFactory`]'s table of
    /// ring ends by name; `inbox` is initialised here if still empty.
    pub fn new(name: &str, rxqs: usize, size: usize, inbox: Inbox, peer_inbox: Inbox) -> RingPort {
        inbox.get_or_init(|| (0..rxqs).map(|_| ArrayQueue::new(size)).collect());
        RingPort {
            name: name.to_string(),
            rxqs,
            inbox,
            peer_inbox,
        }
    }
}

struct RingRx {
    inbox: Inbox,
    q: usize,
}

impl RxQueue for RingRx {
    #[inline]
    fn rx_burst(&mut self, batch: &mut Batch, _pool: &mut PoolCache) -> usize {
        let Some(rings) = self.inbox.get() else {
            return 0;
        };
        let ring = &rings[self.q % rings.len()];
        let mut n = 0;
        while !batch.is_full() {
            match ring.pop() {
                Some(p) => {
                    batch.push(p);
                    n += 1;
                }
                None => break,
            }
        }
        n
    }
}

struct RingTx {
    peer_inbox: Inbox,
    q: usize,
}

impl TxQueue for RingTx {
    #[inline]
    fn tx_burst(&mut self, batch: &mut Batch, _pool: &mut PoolCache) -> usize {
        let Some(rings) = self.peer_inbox.get() else {
            return 0;
        };
        let ring = &rings[self.q % rings.len()];
        let mut rest = Batch::new();
        let mut sent = 0;
        for p in batch.drain(..) {
            if !rest.is_empty() {
                rest.push(p);
                continue;
            }
            match ring.push(p) {
                Ok(()) => sent += 1,
                Err(p) => rest.push(p),
            }
        }
        *batch = rest;
        sent
    }
}

impl Port for RingPort {
    fn name(&self) -> &str {
        &self.name
    }
    fn type_name(&self) -> &'static str {
        "ring"
    }
    fn n_rxq(&self) -> usize {
        self.rxqs
    }
    fn open_rxq(&self, q: usize) -> Box<dyn RxQueue> {
        Box::new(RingRx {
            inbox: self.inbox.clone(),
            q,
        })
    }
    fn open_txq(&self, q: usize) -> Box<dyn TxQueue> {
        Box::new(RingTx {
            peer_inbox: self.peer_inbox.clone(),
            q,
        })
    }
    fn gauges(&self) -> PortGauges {
        let queued: usize = self
            .inbox
            .get()
            .map_or(0, |r| r.iter().map(|q| q.len()).sum());
        PortGauges {
            queued: Some(queued as u64),
            ..PortGauges::default()
        }
        .with("peer_up", self.peer_inbox.get().is_some())
    }
}
