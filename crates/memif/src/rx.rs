//! The PMD side of a memif port, receiving. Server role ([`MemifRxq`]):
//! rx queue `i` copies frames out of the client's C2S ring `i`. Client
//! role ([`ClientRxq`]): the switch owns the memory ([`ClientRings`]); rx
//! queue `i` reads S2C ring `i` (what the server sent us).
//!
//! One copy per hop (`one_copy`): a frame in one buffer and longer than
//! [`SPLIT_HEAD`] is not copied out whole: its head goes into a switch
//! buffer and its tail stays in the peer's buffer (a split packet,
//! `crate::copy::lend_tail`), whose slot the rx queue gives back only
//! when the burst ends (`burst_done`, or the next `rx_burst`). The output
//! port copies the tail straight into its own peer (memif and vhost-user
//! tx queues take split packets); ports that keep packets get them joined
//! by the datapath.
//!
//! Everything in the rings is the peer's claim. Server role: a head
//! outside what the switch handed out (`crate::position`: counted once
//! per event, the ring resuming when the head is sane again), a
//! descriptor outside its region, a chain that runs past the head or past
//! the largest frame, a zero-length frame are each counted (the queue's
//! `Counters`) and dropped, never followed. Client role: a descriptor
//! the server rewrote to point outside our region is counted
//! (`bad_desc`) and skipped, a tail outside what we handed out (past the
//! head we posted, behind where we read) moves nothing and is counted
//! (`bad_head`) once per event, and every slot we give back gets its own
//! buffer and full room again, whatever the server left there. No loop
//! runs longer than the ring, and nothing here waits on the peer.

use crate::client::{ClientRings, Received1};
use crate::connection::Connection;
use crate::copy::lend_tail;
use crate::position::PeerPosition;
use crate::shared::{Follow, Shared, bump};
use nfv_mem::{Batch, PoolCache, SPLIT_HEAD};
use nfv_ports::RxQueue;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::*};

/// Rx queue `index`: the client's C2S ring `index`.
pub(crate) struct MemifRxq {
    follow: Follow<Connection>,
    index: usize,
    /// The next slot to read.
    next: u16,
    /// Lend frames (split packets) instead of copying them whole.
    one_copy: bool,
    /// The tail to publish when the burst ends: slots whose buffers split
    /// packets still borrow go back to the client only then.
    pending: Option<u16>,
    /// The check of the client's head.
    peer: PeerPosition,
}

impl MemifRxq {
    pub fn new(shared: Arc<Shared<Connection>>, index: usize, one_copy: bool) -> MemifRxq {
        MemifRxq {
            follow: Follow::new(shared),
            index,
            next: 0,
            one_copy,
            pending: None,
            peer: PeerPosition::default(),
        }
    }

    /// Gives the slots of the last burst back to the client.
    #[inline(always)]
    fn finish(&mut self) {
        if let Some(tail) = self.pending.take()
            && let Some(ring) = self.follow.conn.as_ref().and_then(|c| c.rx.get(self.index))
        {
            ring.view.set_tail(tail);
        }
    }
}

impl RxQueue for MemifRxq {
    fn burst_done(&mut self) {
        self.finish();
    }

    fn rx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        // The previous burst ends here at the latest (before the
        // connection may change under it).
        self.finish();
        if self.follow.changed() {
            self.peer = PeerPosition::default();
            if let Some(ring) = self.follow.conn.as_ref().and_then(|c| c.rx.get(self.index)) {
                // Where the previous owner of this ring (if any) stopped:
                // the tail is ours to write, so it is our position.
                self.next = ring.view.tail();
            }
        }
        let Some(conn) = self.follow.conn.as_deref() else {
            return 0;
        };
        let Some(ring) = conn.rx.get(self.index) else {
            return 0;
        };
        let c = &*self.follow.counters;
        let view = &ring.view;
        // The client may have filled at most the ring from our published
        // tail (= `next`: `finish` ran): otherwise take nothing until it
        // is sane again (its queue stalls, nobody else's does).
        let Some(mut avail) = self
            .peer
            .check(self.next, view.head(), view.size(), &c.bad_head)
        else {
            return 0;
        };
        if avail == 0 {
            return 0;
        }
        let mut slot = self.next;
        let mut n = 0;
        let mut lent = 0u64;
        while avail > 0 && !batch.is_full() {
            let Some(fresh) = pool.alloc() else { break };
            // Filled in its batch slot: moving a just-written packet in
            // costs a failed store forward (virtio's `dequeue_burst`).
            batch.push(fresh);
            let pkt = batch.last_mut().expect("pushed above");
            let first = view.desc(slot);
            // One buffer, longer than the head the switch needs: lend its
            // tail (the common case; chains are copied whole).
            if self.one_copy
                && !first.next
                && first.length as usize > SPLIT_HEAD
                && (first.length as usize) <= pkt.max_len()
                && let Some(src) = conn.buffer(first.region, first.offset, first.length)
            {
                slot = slot.wrapping_add(1);
                avail -= 1;
                // SAFETY: `buffer` checked `first.length` bytes at `src`
                // lie in a mapped region; the packet has room for them
                // (`max_len`); the slot goes back only in `finish`, at the
                // burst's end, and the memory stays mapped while this
                // queue holds `conn`.
                unsafe { lend_tail(pkt, src, first.length) };
                n += 1;
                lent += 1;
                continue;
            }
            let room = pkt.room_mut();
            let mut len = 0usize;
            let mut fault: Option<&AtomicU64> = None;
            loop {
                if avail == 0 {
                    // NEXT set on the last slot the client published.
                    fault = Some(&c.bad_chain);
                    break;
                }
                let d = view.desc(slot);
                slot = slot.wrapping_add(1);
                avail -= 1;
                if fault.is_none() {
                    match conn.buffer(d.region, d.offset, d.length) {
                        None => fault = Some(&c.bad_desc),
                        Some(_) if len + d.length as usize > room.len() => fault = Some(&c.too_big),
                        Some(src) => {
                            // SAFETY: `buffer` checked that `d.length`
                            // bytes at `src` lie in a mapped region; the
                            // destination has room (checked above); the
                            // client's memory never overlaps our pool.
                            unsafe {
                                nfv_mem::copy_span(
                                    src,
                                    room.as_mut_ptr().add(len),
                                    d.length as usize,
                                )
                            };
                            len += d.length as usize;
                        }
                    }
                }
                if !d.next {
                    break;
                }
            }
            if fault.is_none() && len == 0 {
                fault = Some(&c.empty);
            }
            match fault {
                Some(counter) => {
                    bump(counter);
                    pool.free(batch.pop().expect("pushed above"));
                }
                None => {
                    // `len` fits: checked against the room above.
                    let _ = pkt.set_len(len);
                    n += 1;
                }
            }
        }
        self.next = slot;
        if lent > 0 {
            c.one_copy
                .store(c.one_copy.load(Relaxed).wrapping_add(lent), Relaxed);
            self.pending = Some(slot);
        } else {
            view.set_tail(slot);
        }
        n
    }
}

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
            let Some(fresh) = pool.alloc() else { break };
            // Filled in its batch slot: moving a just-written packet in
            // costs a failed store forward (virtio's `dequeue_burst`).
            batch.push(fresh);
            let pkt = batch.last_mut().expect("pushed above");
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
                unsafe { lend_tail(pkt, src, len) };
                n += 1;
                lent += 1;
                continue;
            }
            match rings.recv_one(&mut ring, &mut left, pkt.room_mut()) {
                Received1::Frame(0) => {
                    bump(&c.empty);
                    pool.free(batch.pop().expect("pushed above"));
                }
                Received1::Frame(len) => {
                    // `len` fits: `recv_one` copied into the room.
                    let _ = pkt.set_len(len);
                    n += 1;
                }
                Received1::TooBig => {
                    bump(&c.too_big);
                    pool.free(batch.pop().expect("pushed above"));
                }
                Received1::BadDesc => {
                    bump(&c.bad_desc);
                    pool.free(batch.pop().expect("pushed above"));
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
