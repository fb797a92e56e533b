//! The PMD side of a memif port in the client role: the switch owns the
//! memory ([`ClientRings`]); rx queue `i` reads S2C ring `i` (what the
//! server sent us), tx queue `q` fills C2S ring `q % rings`.
//!
//! The server can write into our rings: a descriptor it rewrote to point
//! outside our region is counted (`bad_desc`) and skipped, a tail outside
//! what we handed out (`crate::position`: past the head we posted, behind
//! where we read, past our head on C2S) moves nothing and is counted
//! (`bad_head`) once per event, the ring resuming when it is sane again,
//! and every slot we give back gets its own buffer and full room again,
//! whatever the server left there. Each ring is taken for a burst (PMDs
//! that share a C2S ring take turns; an rx ring has one owner).

use crate::client::{ClientRings, Received1};
use crate::port::Shared;
use crate::queue::{Follow, bump, parts};
use nfv_mem::{Batch, PoolCache, SPLIT_HEAD};
use nfv_ports::{RxQueue, TxQueue};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

/// Rx queue `index`: the server's S2C ring `index`.
pub(crate) struct ClientRxq {
    follow: Follow<ClientRings>,
    index: usize,
    /// Lend frames in one buffer (split packets) instead of copying them.
    one_copy: bool,
    /// Buffers lent in the last burst: post them back when it ends.
    pending_refill: bool,
}

impl ClientRxq {
    pub fn new(shared: Arc<Shared<ClientRings>>, index: usize, one_copy: bool) -> ClientRxq {
        ClientRxq {
            follow: Follow::new(shared),
            index,
            one_copy,
            pending_refill: false,
        }
    }

    /// Gives the buffers of the last burst back to the server.
    #[inline(always)]
    fn finish(&mut self) {
        if std::mem::take(&mut self.pending_refill)
            && let Some(rings) = self.follow.conn.as_deref()
            && let Some(slot) = rings.s2c.get(self.index)
        {
            rings.refill(&mut slot.take());
        }
    }
}

impl RxQueue for ClientRxq {
    fn burst_done(&mut self) {
        self.finish();
    }

    fn rx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        // The previous burst ends here at the latest.
        self.finish();
        self.follow.changed();
        let Some(rings) = self.follow.conn.as_deref() else {
            return 0;
        };
        let Some(slot) = rings.s2c.get(self.index) else {
            return 0;
        };
        let c = &*self.follow.counters;
        let mut ring = slot.take();
        let mut left = ClientRings::waiting(&mut ring, &c.bad_head);
        if left == 0 {
            // Nothing came; but a server that reset the head (DPDK does at
            // connect) must get its buffers posted again.
            if ring.view.head_relaxed() != ring.posted_head() {
                rings.refill(&mut ring);
            }
            return 0;
        }
        let mut n = 0;
        let mut lent = 0u64;
        while left > 0 && !batch.is_full() {
            let Some(mut pkt) = pool.alloc() else { break };
            if self.one_copy
                && let Some((src, len)) = rings.single(&ring, SPLIT_HEAD)
                && len as usize <= pkt.max_len()
            {
                ClientRings::skip_one(&mut ring, &mut left);
                // SAFETY: `single` checked the buffer (longer than
                // SPLIT_HEAD) lies in our region; the packet has room for
                // it (`max_len`); `finish` posts it back only at the
                // burst's end, and the region stays mapped while this
                // queue holds it.
                unsafe { crate::queue::lend_tail(&mut pkt, src, len) };
                batch.push(pkt);
                n += 1;
                lent += 1;
                continue;
            }
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
        if lent > 0 {
            c.one_copy
                .store(c.one_copy.load(Relaxed).wrapping_add(lent), Relaxed);
            self.pending_refill = true;
        } else {
            rings.refill(&mut ring);
        }
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
        // SAFETY: heads are our packets; split tails are readable within
        // their producer's burst, which outlasts this call.
        let sent = unsafe {
            rings.send_parts(
                self.pmd % rings.queues(),
                batch.iter().map(parts),
                &self.follow.counters.bad_head,
            )
        };
        for p in batch.drain(..sent) {
            pool.free(p);
        }
        sent
    }

    fn max_frame(&self) -> usize {
        self.max_frame
    }

    /// Split packets are copied (head, then tail) within `tx_burst`.
    fn takes_split(&self) -> bool {
        true
    }
}
