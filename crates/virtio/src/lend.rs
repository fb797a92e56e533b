//! Lending a VNF's receive buffers to another port's rx queue (IOVTee):
//! the contract between a *lender*, a port whose guest rings can be
//! borrowed (vhost-user: `nfv_vhost`'s `lend.rs` implements
//! [`LendingPort`]),
//! and a *borrower*, an AF_XDP queue whose UMEM is that guest's memory
//! (`nfv_afxdp::zero_copy`): the kernel receives frames straight into the
//! guest's rx buffers, and the switch then only writes the virtio-net
//! header and the used entry. The ring operations are `device/lend.rs`
//! (and `device/keep.rs` for the other direction); this module says how a
//! borrower finds a lender, who may borrow which ring, how packets are
//! built over lent buffers and come back, and the order of things when a
//! ring stops.
//!
//! * **Finding a lender.** The node owns a [`Lenders`] directory and hands
//!   it to every port it opens (`nfv_ports::OpenContext`): a lending
//!   port's type adds the port as it opens it; a borrower keeps the
//!   directory and looks its lender up by name ([`Lenders::find`]) while
//!   it has none: before the port opens, after it closed, when it is
//!   added again. The directory holds its ports weakly and finds no
//!   closed one. There is no process-wide list of ports: each node (and
//!   each test) has its own.
//! * **Claim.** A borrower (one per queue pair) claims the ring with a
//!   [`Borrower`] handle ([`Lender::claim`]). From the first claim on, the
//!   port no longer offers `VIRTIO_F_IN_ORDER` (lent buffers complete in
//!   the order the kernel fills them); a frontend that negotiated it
//!   before the claim keeps it, and its rings do not lend until it
//!   reconnects.
//! * **Lease.** A borrower works on one *lease* of a ring
//!   ([`Lender::lease`]): the guest memory and ring addresses as they were
//!   when it started. The lease tag changes when the ring's memory or
//!   addresses change or the ring stops; the borrower's calls with an old
//!   tag are refused, and packets carrying an old tag are ignored when
//!   they come back.
//! * **Revoke before retire.** Before a ring with a lease is stopped or
//!   moved to other memory, the lender (vhost-user: its protocol thread)
//!   calls [`Borrower::revoke`], outside every lock: when it returns the
//!   borrower's socket is closed (the kernel writes no lent buffer any
//!   more) and no packet over a lent buffer is in flight. Then, under the
//!   ring's lock, every buffer still lent goes back to the guest empty,
//!   and only then is the ring retired — so `GET_VRING_BASE` answers with
//!   a position every buffer before which was used. A ring rebuilt over
//!   the same memory and addresses (a new call fd) keeps its loans.
//! * **Packets.** A frame in a lent buffer travels as a [`Packet`] built by
//!   [`Lender::packet`]: its owner is the lender's id
//!   ([`Lender::owner_id`], with `nfv_mem::owner::BORROWED` set) and its
//!   [`token`] says which ring, lease and head. The lender's own tx queue
//!   completes it in place; anything else that frees it (a drop, an output
//!   to another port) returns it through the lender's
//!   `BufferOwner::release`, which only sets a bit ([`HeadBits`]): the
//!   next holder of the ring's lock gives the buffer back. Release never
//!   takes a lock, so two ports freeing each other's buffers under their
//!   own ring locks cannot deadlock.
//! * **The other direction** ([`TxKeep`]). The borrower may also send the
//!   frames the guest transmits in place: the guest TX ring's rx queue
//!   publishes each burst's split chains (head, tail address); the
//!   borrower, in the same PMD iteration, takes the ones whose tails it
//!   put on its tx ring; at the burst's end those chains are kept
//!   (`device/keep.rs`) and go back to the guest when the borrower reports
//!   their sends complete (a bit per head, no lock) — or all at once when
//!   it lets go (its socket closed: a revoke, or a change of the guest TX
//!   ring, which revokes first).
//! * **Cost.** A lender is a trait object, called once per burst at most
//!   ([`Lender::with_ring`], [`Lender::tx_keep`]); what those hand out (the
//!   ring, the [`TxKeep`]) is concrete, and [`Lender::packet`] does not
//!   call the lender, so nothing per packet goes through a vtable.

use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex, Weak};

use nfv_mem::owner::OwnerId;
use nfv_mem::{BATCH, Packet};

use crate::device::{DeviceQueue, Lent};
use crate::memory::GuestMemory;

/// Longest virtqueue (virtio): a bit per head fits 512 words.
pub const MAX_HEADS: usize = 32768;

/// A set of heads of one ring (a bit per head), filled from any thread
/// without a lock and emptied by whoever holds the ring: the lent buffers
/// whose packets came back, the kept chains whose sends completed.
pub struct HeadBits {
    words: Box<[AtomicU64]>,
    any: AtomicBool,
}

impl Default for HeadBits {
    fn default() -> Self {
        HeadBits {
            words: (0..MAX_HEADS / 64).map(|_| AtomicU64::new(0)).collect(),
            any: AtomicBool::new(false),
        }
    }
}

impl HeadBits {
    /// Adds `head` (ignored past [`MAX_HEADS`]). Any thread, no lock.
    #[inline]
    pub fn insert(&self, head: u16) {
        if (head as usize) < MAX_HEADS {
            self.words[head as usize / 64].fetch_or(1 << (head % 64), Release);
            self.any.store(true, Release);
        }
    }

    /// Whether a head may be in the set (one relaxed load).
    #[inline(always)]
    pub fn pending(&self) -> bool {
        self.any.load(Relaxed)
    }

    /// Empties the set (atomically, word by word) and calls `f` for each
    /// head that was in it; how many calls returned true.
    pub fn take(&self, mut f: impl FnMut(u16) -> bool) -> u64 {
        self.any.store(false, Relaxed);
        let mut n = 0;
        for (w, word) in self.words.iter().enumerate() {
            let mut bits = word.swap(0, Acquire);
            while bits != 0 {
                let b = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                n += f((w * 64 + b) as u16) as u64;
            }
        }
        n
    }

    /// Forgets every head.
    pub fn clear(&self) {
        self.any.store(false, Relaxed);
        for w in self.words.iter() {
            w.store(0, Relaxed);
        }
    }
}

/// What a borrower must do when the ring it borrows from stops.
pub trait Borrower: Send + Sync {
    /// Stops writing lent buffers and using packets over them: when this
    /// returns, the kernel writes none of them any more (the socket is
    /// closed) and none is in flight. Called by the lender (vhost-user:
    /// its protocol thread), never under a lock; must not wait for that
    /// thread.
    fn revoke(&self);
}

/// The token of a packet in a lent buffer: queue pair, lease tag, head.
#[inline(always)]
pub fn token(pair: usize, tag: u32, head: u16) -> u32 {
    ((pair as u32) << 24) | ((tag & 0xff) << 16) | head as u32
}

/// A [`token`]'s queue pair, lease tag (its low 8 bits) and head.
#[inline(always)]
pub fn untoken(t: u32) -> (usize, u32, u16) {
    ((t >> 24) as usize, (t >> 16) & 0xff, t as u16)
}

/// A guest TX ring's chains sent in place by the borrower (see the
/// module doc). The split list is written by the ring's rx queue after a
/// dequeue and read by the borrower's tx burst on the same PMD before the
/// burst ends; the sent bits are set by the borrower from any thread.
///
/// The lender's side: [`TxKeep::before_burst`], [`TxKeep::after_dequeue`],
/// [`TxKeep::burst_done`] (its rx queue, holding the ring) and
/// [`TxKeep::is_on`]. The borrower's: [`TxKeep::start`], [`TxKeep::cap`],
/// [`TxKeep::take`], [`TxKeep::sent`]. Either calls [`TxKeep::let_go`]
/// once the borrower's socket is closed.
pub struct TxKeep {
    /// The borrower sends tails in place: the rx queue keeps chains.
    on: AtomicBool,
    /// The borrower let go (its socket is closed): every kept chain goes
    /// back at the rx queue's next burst.
    return_all: AtomicBool,
    /// Chains the borrower may keep at once: half the ring, so the guest
    /// always has the other half to transmit with.
    cap: AtomicU32,
    split_n: AtomicUsize,
    split_tail: [AtomicUsize; BATCH],
    split_head: [AtomicU16; BATCH],
    split_taken: [AtomicBool; BATCH],
    /// Heads whose send completed, to return.
    sent: HeadBits,
}

impl Default for TxKeep {
    fn default() -> Self {
        TxKeep {
            on: AtomicBool::new(false),
            return_all: AtomicBool::new(false),
            cap: AtomicU32::new(0),
            split_n: AtomicUsize::new(0),
            split_tail: std::array::from_fn(|_| AtomicUsize::new(0)),
            split_head: std::array::from_fn(|_| AtomicU16::new(0)),
            split_taken: std::array::from_fn(|_| AtomicBool::new(false)),
            sent: HeadBits::default(),
        }
    }
}

impl TxKeep {
    /// The lender, before a dequeue on the guest TX ring: gives back the
    /// chains whose sends completed (all of them if the borrower let go)
    /// and follows the borrower's keep mode. Nothing is held here (the
    /// last burst ended). A few relaxed loads when there is nothing to do.
    #[inline]
    pub fn before_burst(&self, dq: &mut DeviceQueue) {
        if self.return_all.load(Relaxed) {
            self.let_go_slow(dq);
        }
        if self.sent.pending() {
            self.drain_sent(dq);
        }
        let on = self.on.load(Relaxed);
        if on != dq.keeps() {
            let keeps = dq.set_keep(on);
            let cap = if keeps { dq.size() as u32 / 2 } else { 0 };
            self.cap.store(cap, Relaxed);
        }
    }

    /// The borrower: how many chains it may keep at once (0 while the ring
    /// does not keep).
    #[inline(always)]
    pub fn cap(&self) -> usize {
        self.cap.load(Relaxed) as usize
    }

    #[cold]
    fn let_go_slow(&self, dq: &mut DeviceQueue) {
        self.return_all.store(false, Relaxed);
        dq.complete_held();
        // Bits from the closed socket's completions: their chains go back
        // with all the others now.
        self.sent.clear();
        if dq.return_all_kept() != 0 {
            dq.publish_kept();
        }
    }

    #[cold]
    fn drain_sent(&self, dq: &mut DeviceQueue) {
        let n = self.sent.take(|head| dq.return_kept(head));
        if n != 0 {
            dq.publish_kept();
        }
    }

    /// The lender, after a dequeue: the burst's split chains, for the
    /// borrower.
    #[inline]
    pub fn after_dequeue(&self, dq: &DeviceQueue) {
        if !dq.keeps() {
            return;
        }
        let s = dq.burst_splits();
        for (i, &(head, tail)) in s.iter().enumerate() {
            self.split_tail[i].store(tail, Relaxed);
            self.split_head[i].store(head, Relaxed);
            self.split_taken[i].store(false, Relaxed);
        }
        self.split_n.store(s.len(), Release);
    }

    /// The lender: the burst ended, chains whose tails the borrower took
    /// are kept.
    #[inline]
    pub fn burst_done(&self, dq: &mut DeviceQueue) {
        if self.split_n.load(Relaxed) == 0 {
            dq.complete_held();
            return;
        }
        dq.complete_held_keeping(|i, _| self.split_taken[i].load(Relaxed));
        self.split_n.store(0, Relaxed);
    }

    /// The borrower: the head of this burst's split chain whose tail is
    /// at `tail`, marked taken (its chain is kept until
    /// [`TxKeep::sent`]); `None` if no chain of the burst has that tail.
    #[inline]
    pub fn take(&self, tail: *const u8) -> Option<u16> {
        let n = self.split_n.load(Acquire).min(BATCH);
        let t = tail as usize;
        for i in 0..n {
            if self.split_tail[i].load(Relaxed) == t && !self.split_taken[i].load(Relaxed) {
                self.split_taken[i].store(true, Relaxed);
                return Some(self.split_head[i].load(Relaxed));
            }
        }
        None
    }

    /// The borrower: the send of kept chain `head` completed.
    #[inline]
    pub fn sent(&self, head: u16) {
        self.sent.insert(head);
    }

    /// The borrower starts sending in place (after [`Lender::claim`]; the
    /// ring keeps chains from its next burst).
    pub fn start(&self) {
        self.on.store(true, Release);
    }

    /// Whether the borrower sends in place (the lender must make it let
    /// go before the ring changes).
    pub fn is_on(&self) -> bool {
        self.on.load(Acquire)
    }

    /// The borrower stopped sending in place and its socket is closed:
    /// every chain kept for it goes back at the ring's next burst.
    pub fn let_go(&self) {
        self.on.store(false, Release);
        self.return_all.store(true, Release);
    }
}

/// Why a lease cannot start now.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LeaseError {
    #[error("no such queue pair")]
    NoPair,
    #[error("the guest's receive ring is not running")]
    NotRunning,
    #[error("the ring cannot lend: {0}")]
    NotLendable(&'static str),
}

/// A lease: the guest memory the borrower may build its UMEM over, the
/// header length, and the tag its calls and packets carry.
#[derive(Clone)]
pub struct Lease {
    pub tag: u32,
    pub mem: Arc<GuestMemory>,
    pub hdr_len: usize,
}

/// A port whose guest receive rings can be borrowed: what a lender
/// implements (vhost-user: over its port's shared state, so that a
/// [`Lender`] outliving its port finds its rings stopped). Borrowers use
/// it through a [`Lender`]. Every call is cold (control plane) except
/// [`LendingPort::with_ring`] and [`LendingPort::tx_keep`], once per
/// burst.
pub trait LendingPort: Send + Sync {
    /// The port's name (what a borrower's `zero_copy` names).
    fn name(&self) -> &str;
    /// Queue pairs of the port.
    fn pairs(&self) -> usize;
    /// The port was removed: its rings stopped for good.
    fn is_closed(&self) -> bool;
    /// The id packets over lent buffers carry (registered by the first
    /// claim).
    fn owner_id(&self) -> Option<OwnerId>;
    /// Makes `b` the borrower of pair `pair`'s guest RX ring; fails if it
    /// has one. From then on the port no longer offers
    /// `VIRTIO_F_IN_ORDER`, and revokes `b` before the ring changes.
    fn claim(self: Arc<Self>, pair: usize, b: Arc<dyn Borrower>) -> Result<(), LeaseError>;
    /// Gives up pair `pair` (the borrower closed; it revoked itself
    /// first): the lease ends and every buffer still lent goes back.
    fn unclaim(&self, pair: usize);
    /// Starts a lease on pair `pair`'s running guest RX ring, or returns
    /// the current one if memory and addresses did not change.
    fn lease(&self, pair: usize) -> Result<Lease, LeaseError>;
    /// Runs `f` once on pair `pair`'s guest RX ring under its lock, if
    /// lease `tag` still holds (else not at all); buffers whose packets
    /// came back are given back first.
    fn with_ring(&self, pair: usize, tag: u32, f: &mut dyn FnMut(&mut DeviceQueue));
    /// Pair `pair`'s guest TX ring, for sending its frames in place.
    fn tx_keep(&self, pair: usize) -> Option<&TxKeep>;
}

/// A lending port as a borrower holds it (see the module doc): found in
/// the node's [`Lenders`], or handed out by the port itself.
#[derive(Clone)]
pub struct Lender {
    port: Arc<dyn LendingPort>,
}

impl Lender {
    pub fn new(port: Arc<dyn LendingPort>) -> Lender {
        Lender { port }
    }

    pub fn name(&self) -> &str {
        self.port.name()
    }

    /// Queue pairs of the port.
    pub fn pairs(&self) -> usize {
        self.port.pairs()
    }

    /// The port was removed: its rings stopped for good.
    pub fn is_closed(&self) -> bool {
        self.port.is_closed()
    }

    /// The id packets over lent buffers carry (registered by `claim`).
    pub fn owner_id(&self) -> Option<OwnerId> {
        self.port.owner_id()
    }

    /// Makes `b` the borrower of pair `pair`'s guest RX ring; fails if it
    /// has one.
    pub fn claim(&self, pair: usize, b: Arc<dyn Borrower>) -> Result<(), LeaseError> {
        self.port.clone().claim(pair, b)
    }

    /// Gives up pair `pair` (the borrower closed; it revoked itself first).
    pub fn unclaim(&self, pair: usize) {
        self.port.unclaim(pair)
    }

    /// Starts a lease on pair `pair`'s running guest RX ring (cold: under
    /// the ring's lock and the lease's mutex).
    pub fn lease(&self, pair: usize) -> Result<Lease, LeaseError> {
        self.port.lease(pair)
    }

    /// Runs `f` on pair `pair`'s guest RX ring under its lock, if lease
    /// `tag` still holds; returned buffers are given back first.
    #[inline]
    pub fn with_ring<R>(
        &self,
        pair: usize,
        tag: u32,
        f: impl FnOnce(&mut DeviceQueue) -> R,
    ) -> Option<R> {
        let mut f = Some(f);
        let mut r = None;
        self.port.with_ring(pair, tag, &mut |dq| {
            if let Some(f) = f.take() {
                r = Some(f(dq));
            }
        });
        r
    }

    /// Pair `pair`'s guest TX ring, for sending its frames in place.
    #[inline]
    pub fn tx_keep(&self, pair: usize) -> Option<&TxKeep> {
        self.port.tx_keep(pair)
    }

    /// The borrower starts sending pair `pair`'s frames in place (after
    /// [`Lender::claim`]; the ring keeps chains from its next burst).
    pub fn start_tx_keep(&self, pair: usize) {
        if let Some(k) = self.tx_keep(pair) {
            k.start();
        }
    }

    /// The borrower stopped sending in place and its socket is closed:
    /// every chain kept for it goes back at the ring's next burst.
    pub fn let_go_tx(&self, pair: usize) {
        if let Some(k) = self.tx_keep(pair) {
            k.let_go();
        }
    }

    /// A packet over lent buffer `l` of pair `pair` under lease `tag`:
    /// `len` frame bytes after the `hdr_len`-byte header, owned by
    /// `owner` (this lender's [`Lender::owner_id`]). No call to the
    /// lender.
    ///
    /// # Safety
    /// `host` must be the translation of `l`'s buffer in the lease's
    /// memory, which must stay mapped until the packet is freed (the
    /// borrower holds the lease's `Arc<GuestMemory>` until its revoke
    /// returns, and revoke waits for packets in flight); the buffer is
    /// lent, so only this packet uses it. `hdr_len + len <= l.len`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn packet(
        &self,
        owner: OwnerId,
        pair: usize,
        tag: u32,
        l: &Lent,
        host: std::ptr::NonNull<u8>,
        hdr_len: usize,
        len: usize,
    ) -> Packet {
        // SAFETY: the caller's contract; the buffer is at most 64 KiB
        // (a descriptor's length is checked by the caller against the
        // UMEM frame room, far below that).
        unsafe {
            Packet::from_raw(
                host,
                l.len.min(1 << 16),
                hdr_len as u16,
                len as u16,
                owner,
                token(pair, tag, l.head),
            )
        }
    }
}

/// The ports of a node that lend their guest rings, by name (see the
/// module doc). Owned by the node and handed to the ports it opens;
/// holds its ports weakly.
#[derive(Default)]
pub struct Lenders {
    ports: Mutex<Vec<(String, Weak<dyn LendingPort>)>>,
}

impl Lenders {
    /// Makes `l` findable by its name (the newest port of a name wins).
    pub fn add(&self, l: &Lender) {
        let mut v = self.ports.lock().unwrap_or_else(|p| p.into_inner());
        v.retain(|(_, w)| w.strong_count() > 0);
        v.push((l.name().to_string(), Arc::downgrade(&l.port)));
    }

    /// The open lending port called `name`.
    pub fn find(&self, name: &str) -> Option<Lender> {
        let v = self.ports.lock().unwrap_or_else(|p| p.into_inner());
        v.iter()
            .rev()
            .filter(|(n, _)| n == name)
            .filter_map(|(_, w)| w.upgrade())
            .find(|p| !p.is_closed())
            .map(|port| Lender { port })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lender with a name that can close; lends nothing.
    struct Fake {
        name: &'static str,
        closed: AtomicBool,
    }

    impl LendingPort for Fake {
        fn name(&self) -> &str {
            self.name
        }
        fn pairs(&self) -> usize {
            1
        }
        fn is_closed(&self) -> bool {
            self.closed.load(SeqCst)
        }
        fn owner_id(&self) -> Option<OwnerId> {
            None
        }
        fn claim(self: Arc<Self>, _: usize, _: Arc<dyn Borrower>) -> Result<(), LeaseError> {
            Err(LeaseError::NotRunning)
        }
        fn unclaim(&self, _: usize) {}
        fn lease(&self, _: usize) -> Result<Lease, LeaseError> {
            Err(LeaseError::NotRunning)
        }
        fn with_ring(&self, _: usize, _: u32, _: &mut dyn FnMut(&mut DeviceQueue)) {}
        fn tx_keep(&self, _: usize) -> Option<&TxKeep> {
            None
        }
    }

    fn fake(name: &'static str) -> Arc<Fake> {
        Arc::new(Fake {
            name,
            closed: AtomicBool::new(false),
        })
    }

    fn same(l: &Lender, p: &Arc<Fake>) -> bool {
        std::ptr::addr_eq(Arc::as_ptr(&l.port), Arc::as_ptr(p))
    }

    #[test]
    fn lenders_find_the_newest_open_port_of_a_name_and_hold_none() {
        let d = Lenders::default();
        assert!(d.find("vnf1").is_none(), "before the port opens");
        let a = fake("vnf1");
        let b = fake("vnf2");
        d.add(&Lender::new(a.clone()));
        d.add(&Lender::new(b.clone()));
        assert!(same(&d.find("vnf1").unwrap(), &a));
        assert!(same(&d.find("vnf2").unwrap(), &b));
        // Re-added under the same name while the old one lingers: the new
        // one is found; once it closes, neither is.
        let a2 = fake("vnf1");
        d.add(&Lender::new(a2.clone()));
        assert!(same(&d.find("vnf1").unwrap(), &a2));
        a2.closed.store(true, SeqCst);
        assert!(
            same(&d.find("vnf1").unwrap(), &a),
            "the older, still open one"
        );
        a.closed.store(true, SeqCst);
        assert!(d.find("vnf1").is_none(), "closed ports are not found");
        // The directory keeps no port alive.
        let w = Arc::downgrade(&b);
        drop(b);
        assert!(w.upgrade().is_none());
        assert!(d.find("vnf2").is_none());
        // Another directory (another node) sees none of these.
        assert!(Lenders::default().find("vnf1").is_none());
    }

    #[test]
    fn head_bits_give_each_head_once() {
        let s = HeadBits::default();
        assert!(!s.pending());
        for h in [0u16, 63, 64, 32767, 5, 63] {
            s.insert(h);
        }
        s.insert(40000); // past the longest ring: ignored
        assert!(s.pending());
        let mut got = Vec::new();
        assert_eq!(
            s.take(|h| {
                got.push(h);
                true
            }),
            5
        );
        assert_eq!(got, vec![0, 5, 63, 64, 32767]);
        assert!(!s.pending());
        assert_eq!(s.take(|_| true), 0);
        s.insert(7);
        s.clear();
        assert_eq!(s.take(|_| true), 0);
    }

    #[test]
    fn tokens_round_trip() {
        for (pair, tag, head) in [(0, 1, 0), (3, 0x1ff, 32767), (255, 0xff, 65535)] {
            assert_eq!(untoken(token(pair, tag, head)), (pair, tag & 0xff, head));
        }
    }
}
