//! The PMD side of a memif port, sending. Server role ([`MemifTxq`]): tx
//! queue `q` copies frames into the buffers the client posted on S2C ring
//! `q % rings`. Client role ([`ClientTxq`]): the switch owns the memory;
//! tx queue `q` fills C2S ring `q % rings` (`ClientRings::send_parts`).
//! Either way a split packet is copied head then tail within the burst
//! (`crate::copy`), so the tx queues take split packets.
//!
//! The peer's claims are checked as on rx (`rx.rs`): a head (server role)
//! or tail (client role) outside what the switch handed out sends nothing
//! (`bad_head`, once per event); in the server role a posted buffer
//! outside its region or of no room stops the ring (`bad_desc`) until
//! the client posts valid ones.
//! Each ring is taken for a burst: PMDs that share one take turns.

use crate::client::ClientRings;
use crate::connection::Connection;
use crate::copy::{copy_range, parts};
use crate::shared::{Follow, Shared, bump};
use nfv_mem::{Batch, PoolCache};
use nfv_ports::TxQueue;
use nfv_wire::memif;
use std::sync::Arc;

/// Tx queue of PMD `pmd`: the client's S2C ring `pmd % rings`.
pub(crate) struct MemifTxq {
    follow: Follow<Connection>,
    pmd: usize,
    max_frame: usize,
}

impl MemifTxq {
    pub fn new(shared: Arc<Shared<Connection>>, pmd: usize, max_frame: usize) -> MemifTxq {
        MemifTxq {
            follow: Follow::new(shared),
            pmd,
            max_frame,
        }
    }
}

impl TxQueue for MemifTxq {
    fn tx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        self.follow.changed();
        let Some(conn) = self.follow.conn.as_deref() else {
            return 0;
        };
        if conn.tx.is_empty() {
            return 0;
        }
        let ring = &conn.tx[self.pmd % conn.tx.len()];
        let c = &*self.follow.counters;
        let view = &ring.view;
        let mut turn = ring.take();
        let mut slot = turn.tail();
        // The client may have posted at most the ring past our tail.
        let Some(mut free) = turn
            .peer()
            .check(slot, view.head(), view.size(), &c.bad_head)
        else {
            return 0;
        };
        let mut sent = 0;
        'frames: for pkt in batch.iter() {
            let parts = parts(pkt);
            let frame_len = pkt.frame_len();
            let start = slot;
            let mut done = 0usize;
            loop {
                if free == 0 {
                    slot = start;
                    break 'frames;
                }
                let d = view.desc(slot);
                let Some(dst) = conn.buffer(d.region, d.offset, d.length) else {
                    // A posted buffer outside its region: the ring stops
                    // here (counted) until the client posts valid ones.
                    bump(&c.bad_desc);
                    slot = start;
                    break 'frames;
                };
                let take = (frame_len - done).min(d.length as usize);
                if take == 0 {
                    // A buffer of no room cannot carry the frame on.
                    bump(&c.bad_desc);
                    slot = start;
                    break 'frames;
                }
                // SAFETY: `buffer` checked `d.length` bytes at `dst` lie
                // in a mapped region, and `take <= d.length`; the sources
                // are our packet's head and (split packets, within their
                // producer's burst) its tail, never this client's ring
                // slot (we own those slots until we publish the tail).
                unsafe { copy_range(&parts, done, dst, take) };
                done += take;
                let more = done < frame_len;
                view.set_desc_len(slot, take as u32, more);
                slot = slot.wrapping_add(1);
                free -= 1;
                if !more {
                    break;
                }
            }
            sent += 1;
        }
        if sent > 0 {
            turn.set_tail(slot);
            view.set_tail(slot);
            if view.flags() & memif::ring::FLAG_MASK_INT == 0 && ring.call.signal() {
                bump(&c.interrupts);
            }
        }
        drop(turn);
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
