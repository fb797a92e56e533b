//! The PMD side of a memif port (server role): rx queue `i` copies frames
//! out of the client's C2S ring `i`, tx queue `q` copies frames into the
//! buffers the client posted on S2C ring `q % rings`.
//!
//! One copy per hop (`one_copy`): a frame in one buffer and longer than
//! [`SPLIT_HEAD`] is not copied out whole: its head goes into a switch
//! buffer and its tail stays in the client's buffer (a split packet),
//! whose slot the rx queue gives back only when the burst ends
//! (`burst_done`, or the next `rx_burst`). The output port copies the
//! tail straight into its own peer (memif and vhost-user tx queues take
//! split packets); ports that keep packets get them joined by the
//! datapath. Shared helpers for both roles: [`parts`], [`copy_range`].
//!
//! Each burst checks the port's generation with one atomic load and only
//! on a change takes the slow path (the new [`Connection`], or none). A
//! queue keeps its connection in an `Arc`, so a disconnect never unmaps
//! memory a PMD is reading; the memory goes when the last queue moves on.
//!
//! Everything in the rings is the client's claim: a head outside what the
//! switch handed out (`crate::position`: counted once per event, the ring
//! resuming when the head is sane again), a descriptor outside its
//! region, a chain that runs past the head or past the largest frame, a
//! zero-length frame are each counted ([`Counters`]) and dropped, never followed. No loop runs
//! longer than the ring, and nothing here waits on the client (interrupts
//! go through the notifier thread).

use crate::connection::Connection;
use crate::port::{Link, Shared};
use crate::position::PeerPosition;
use nfv_mem::{Batch, PoolCache, SPLIT_HEAD};
use nfv_ports::{RxQueue, TxQueue};
use nfv_virtio::guard::fault_epoch;
use nfv_wire::memif;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::*};

/// Errors and events of one queue, written by its PMD only.
#[derive(Debug, Default)]
#[repr(align(64))]
pub(crate) struct Counters {
    /// Descriptors outside their region (or naming no region).
    pub bad_desc: AtomicU64,
    /// Frames whose chain ran past the client's head.
    pub bad_chain: AtomicU64,
    /// Frames larger than a switch packet buffer (rx) or than the room the
    /// client posted (tx never drops for that: it chains).
    pub too_big: AtomicU64,
    /// Frames of zero bytes.
    pub empty: AtomicU64,
    /// Events (not bursts) in which the peer's ring position lay outside
    /// what the switch handed it (`crate::position`: the client's head in
    /// the server role, the server's tail in the client role).
    pub bad_head: AtomicU64,
    /// Interrupts requested from the client's eventfd.
    pub interrupts: AtomicU64,
    /// Bursts that found the client's memory faulted (SIGBUS survived).
    pub memory_faults: AtomicU64,
    /// Frames received as split packets: head copied, tail left in the
    /// peer's buffer until the burst ends (one copy per hop).
    pub one_copy: AtomicU64,
}

/// The counter names, in [`Counters::load`] order.
pub(crate) const COUNTER_NAMES: [&str; 8] = [
    "bad_desc",
    "bad_chain",
    "too_big",
    "empty",
    "bad_head",
    "interrupts",
    "memory_faults",
    nfv_ports::PortGauges::ONE_COPY_PACKETS,
];

impl Counters {
    pub fn load(&self) -> [u64; 8] {
        [
            &self.bad_desc,
            &self.bad_chain,
            &self.too_big,
            &self.empty,
            &self.bad_head,
            &self.interrupts,
            &self.memory_faults,
            &self.one_copy,
        ]
        .map(|c| c.load(Relaxed))
    }
}

/// A frame as its parts: the packet's head and, for a split packet, the
/// tail still in its sender's buffer.
#[inline(always)]
pub(crate) fn parts(p: &nfv_mem::Packet) -> [(*const u8, usize); 2] {
    [(p.data_ptr(), p.len()), p.tail()]
}

/// Copies `len` bytes of the frame `parts`, from byte `from` on, to `dst`.
///
/// # Safety
/// `dst` must be valid for `len` bytes of writes; the parts must be
/// readable (a split tail within its producer's burst), hold at least
/// `from + len` bytes together, and not overlap `dst`.
#[inline(always)]
pub(crate) unsafe fn copy_range(
    parts: &[(*const u8, usize); 2],
    mut from: usize,
    mut dst: *mut u8,
    mut len: usize,
) {
    for &(p, n) in parts {
        if len == 0 {
            break;
        }
        if from >= n {
            from -= n;
            continue;
        }
        let k = (n - from).min(len);
        // SAFETY: the caller's contract; a peer's bytes are copied, never
        // borrowed (`ptr::copy`: the tail may be in memory the peer also
        // writes).
        unsafe { std::ptr::copy(p.add(from), dst, k) };
        dst = dst.wrapping_add(k);
        len -= k;
        from = 0;
    }
}

#[inline(always)]
pub(crate) fn bump(c: &AtomicU64) {
    c.store(c.load(Relaxed).wrapping_add(1), Relaxed);
}

/// What a queue follows of the port's connection (`L`: the server's
/// [`Connection`] or the client's `ClientRings`).
pub(crate) struct Follow<L> {
    shared: Arc<Shared<L>>,
    generation: u64,
    fault_epoch: u64,
    pub conn: Option<Arc<L>>,
    pub counters: Arc<Counters>,
}

impl<L: Link> Follow<L> {
    pub fn new(shared: Arc<Shared<L>>) -> Follow<L> {
        let counters = shared.register_counters();
        Follow {
            shared,
            // Forces a resync on the first burst.
            generation: u64::MAX,
            fault_epoch: fault_epoch(),
            conn: None,
            counters,
        }
    }

    /// True when the connection changed since the last burst (the caller
    /// then resets its ring position). A new generation or fault epoch
    /// that leaves the same connection in place is not a change: the
    /// position the queue keeps privately stays (taking it again from the
    /// ring would take it from memory the peer writes — the memif_rings
    /// fuzz target saw a queue stall that way).
    #[inline(always)]
    pub fn changed(&mut self) -> bool {
        let g = self.shared.generation();
        let f = fault_epoch();
        if g == self.generation && f == self.fault_epoch {
            return false;
        }
        self.resync(g, f)
    }

    #[cold]
    fn resync(&mut self, generation: u64, epoch: u64) -> bool {
        self.generation = generation;
        self.fault_epoch = epoch;
        let before = self.conn.take();
        self.conn = self.shared.current();
        if self.conn.as_ref().is_some_and(|c| c.faulted()) {
            // The control thread disconnects the client; until then the
            // rings (zeros now) are left alone.
            bump(&self.counters.memory_faults);
            self.conn = None;
        }
        match (&before, &self.conn) {
            (Some(a), Some(b)) => !Arc::ptr_eq(a, b),
            (None, None) => false,
            _ => true,
        }
    }
}

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
            let Some(mut pkt) = pool.alloc() else { break };
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
                unsafe { lend_tail(&mut pkt, src, first.length) };
                batch.push(pkt);
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
                                std::ptr::copy_nonoverlapping(
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
                    pool.free(pkt);
                }
                None => {
                    // `len` fits: checked against the room above.
                    let _ = pkt.set_len(len);
                    batch.push(pkt);
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

/// Makes `pkt` a split packet over the peer's buffer of `len` bytes at
/// `src` (`len > SPLIT_HEAD`): the head is copied into the packet, the rest
/// stays in the buffer as the packet's tail (one copy, `nfv_mem::packet`).
///
/// # Safety
/// `src..src + len` must lie in mapped shared memory that stays mapped,
/// and the buffer must not be handed back to the peer, until the packet's
/// burst is over; `len` must fit the packet (`max_len`).
#[inline(always)]
pub(crate) unsafe fn lend_tail(pkt: &mut nfv_mem::Packet, src: *const u8, len: u32) {
    debug_assert!(len as usize > SPLIT_HEAD);
    // SAFETY: the caller guarantees `len > SPLIT_HEAD` readable bytes at
    // `src` for the packet's burst and room in the packet; `copy` makes no
    // reference to bytes the peer may be writing.
    unsafe {
        std::ptr::copy(src, pkt.room_mut().as_mut_ptr(), SPLIT_HEAD);
        let _ = pkt.set_len(SPLIT_HEAD);
        pkt.set_tail(src.add(SPLIT_HEAD), len - SPLIT_HEAD as u32);
    }
}
