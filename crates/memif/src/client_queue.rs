//! The PMD side of a memif port in the client role: the switch owns the
//! memory ([`ClientRings`]); rx queue `i` reads S2C ring `i` (what the
//! server sent us), tx queue `q` fills C2S ring `q % rings`.
//!
//! The server can write into our rings: a descriptor it rewrote to point
//! outside our region is counted (`bad_desc`) and skipped, a tail that
//! claims more than the ring holds is cut to the ring, and every slot we
//! give back gets its own buffer and full room again, whatever the server
//! left there. Each ring is taken for a burst (PMDs that share a C2S ring
//! take turns; an rx ring has one owner).

use crate::client::{ClientRings, Received1};
use crate::port::Shared;
use crate::queue::{Follow, bump};
use nfv_mem::{Batch, PoolCache};
use nfv_ports::{RxQueue, TxQueue};
use std::sync::Arc;

/// Rx queue `index`: the server's S2C ring `index`.
pub(crate) struct ClientRxq {
    follow: Follow<ClientRings>,
    index: usize,
}

impl ClientRxq {
    pub fn new(shared: Arc<Shared<ClientRings>>, index: usize) -> ClientRxq {
        ClientRxq {
            follow: Follow::new(shared),
            index,
        }
    }
}

impl RxQueue for ClientRxq {
    fn rx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        self.follow.changed();
        let Some(rings) = self.follow.conn.as_deref() else {
            return 0;
        };
        let Some(slot) = rings.s2c.get(self.index) else {
            return 0;
        };
        let c = &*self.follow.counters;
        let mut ring = slot.take();
        let mut left = ClientRings::waiting(&ring);
        if left == 0 {
            // Nothing came; but a server that reset the head (DPDK does at
            // connect) must get its buffers posted again.
            if ring.view.head_relaxed() != ring.posted_head() {
                rings.refill(&mut ring);
            }
            return 0;
        }
        let mut n = 0;
        while left > 0 && !batch.is_full() {
            let Some(mut pkt) = pool.alloc() else { break };
            match rings.recv_one(&mut ring, &mut left, pkt.room_mut()) {
                Received1::Frame(0) => {
                    bump(&c.empty);
                    pool.free(pkt);
                }
                Received1::Frame(len) => {
                    // `len` fits: `recv_one` copied into the room.
                    let _ = pkt.set_len(len);
                    batch.push(pkt);
                    n += 1;
                }
                Received1::TooBig => {
                    bump(&c.too_big);
                    pool.free(pkt);
                }
                Received1::BadDesc => {
                    bump(&c.bad_desc);
                    pool.free(pkt);
                }
            }
        }
        rings.refill(&mut ring);
        n
    }
}

/// Tx queue of PMD `pmd`: C2S ring `pmd % rings`.
pub(crate) struct ClientTxq {
    follow: Follow<ClientRings>,
    pmd: usize,
    max_frame: usize,
}

impl ClientTxq {
    pub fn new(shared: Arc<Shared<ClientRings>>, pmd: usize, max_frame: usize) -> ClientTxq {
        ClientTxq {
            follow: Follow::new(shared),
            pmd,
            max_frame,
        }
    }
}

impl TxQueue for ClientTxq {
    fn tx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        self.follow.changed();
        let Some(rings) = self.follow.conn.as_deref() else {
            return 0;
        };
        if rings.queues() == 0 {
            return 0;
        }
        let sent = rings.send(self.pmd % rings.queues(), batch.iter().map(|p| p.data()));
        for p in batch.drain(..sent) {
            pool.free(p);
        }
        sent
    }

    fn max_frame(&self) -> usize {
        self.max_frame
    }
}
