//! Lending a VNF's receive buffers to another port's rx queue (IOVTee):
//! an AF_XDP socket whose UMEM is this guest's memory receives frames
//! straight into the guest's rx buffers; the switch then only writes the
//! virtio-net header and the used entry (`nfv_virtio`'s `lend.rs` has the
//! ring side). This module is the port side: who may borrow which ring,
//! the packets built over lent buffers and how they come back, and the
//! order of things when a ring stops.
//!
//! * **Claim.** A borrower (one per queue pair) claims the ring with a
//!   [`Borrower`] handle. From the first claim on, the port no longer
//!   offers `VIRTIO_F_IN_ORDER` (lent buffers complete in the order the
//!   kernel fills them); a frontend that negotiated it before the claim
//!   keeps it, and its rings do not lend until it reconnects.
//! * **Lease.** A borrower works on one *lease* of a ring: the guest
//!   memory and ring addresses as they were when it started. The lease
//!   tag changes when the ring's memory or addresses change or the ring
//!   stops; the borrower's calls with an old tag are refused, and packets
//!   carrying an old tag are ignored when they come back.
//! * **Revoke before retire.** Before a ring with a lease is stopped or
//!   moved to other memory, the protocol thread calls
//!   [`Borrower::revoke`], outside every lock: when it returns the
//!   borrower's socket is closed (the kernel writes no lent buffer any
//!   more) and no packet over a lent buffer is in flight. Then, under the
//!   ring's lock, every buffer still lent goes back to the guest empty,
//!   and only then is the ring retired — so `GET_VRING_BASE` answers with
//!   a position every buffer before which was used. A ring rebuilt over
//!   the same memory and addresses (a new call fd) keeps its loans.
//! * **Packets.** A frame in a lent buffer travels as a [`Packet`] whose
//!   owner is this port's lender id (with `nfv_mem::owner::BORROWED` set)
//!   and whose token says which ring, lease and head. The port's own tx
//!   queue completes it in place; anything else that frees it (a drop, an
//!   output to another port) returns it through [`LendOwner::release`],
//!   which only sets a bit: the next holder of the ring's lock gives the
//!   buffer back. Release never takes a lock, so two ports freeing each
//!   other's buffers under their own ring locks cannot deadlock.
//! * **The other direction** ([`TxKeep`]). The borrower may also send the
//!   frames this guest transmits in place: the guest TX ring's rx queue
//!   publishes each burst's split chains (head, tail address); the
//!   borrower, in the same PMD iteration, takes the ones whose tails it
//!   put on its tx ring; at the burst's end those chains are kept
//!   (`nfv_virtio`'s `keep.rs`) and go back to the guest when the
//!   borrower reports their sends complete (a bit per head, no lock) — or
//!   all at once when it lets go (its socket closed: a revoke, or a change
//!   of the guest TX ring, which revokes first).

use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use nfv_mem::owner::{self, BufferOwner, OwnerId};
use nfv_mem::{BATCH, Packet};
use nfv_virtio::{DeviceQueue, GuestMemory};

use crate::shared::Shared;

/// Longest virtqueue (virtio): a bit per head fits 512 words.
const MAX_HEADS: usize = 32768;

/// Clears a bit-per-head set (atomically, word by word) and calls `f` for
/// each head that was in it; how many calls returned true.
fn take_bits(words: &[AtomicU64], mut f: impl FnMut(u16) -> bool) -> u64 {
    let mut n = 0;
    for (w, word) in words.iter().enumerate() {
        let mut bits = word.swap(0, Acquire);
        while bits != 0 {
            let b = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            n += f((w * 64 + b) as u16) as u64;
        }
    }
    n
}

/// What a borrower must do when the ring it borrows from stops.
pub trait Borrower: Send + Sync {
    /// Stops writing lent buffers and using packets over them: when this
    /// returns, the kernel writes none of them any more (the socket is
    /// closed) and none is in flight. Called by the port's protocol
    /// thread, never under a lock; must not wait for that thread.
    fn revoke(&self);
}

/// The token of a packet in a lent buffer: queue pair, lease tag, head.
#[inline(always)]
pub fn token(pair: usize, tag: u32, head: u16) -> u32 {
    ((pair as u32) << 24) | ((tag & 0xff) << 16) | head as u32
}

#[inline(always)]
fn untoken(t: u32) -> (usize, u32, u16) {
    ((t >> 24) as usize, (t >> 16) & 0xff, t as u16)
}

/// A guest TX ring's chains sent in place by the borrower (see the
/// module doc). The split list is written by the ring's rx queue after a
/// dequeue and read by the borrower's tx burst on the same PMD before the
/// burst ends; the sent bits are set by the borrower from any thread.
pub struct TxKeep {
    /// The borrower sends tails in place: the rx queue keeps chains.
    on: AtomicBool,
    /// The borrower let go (its socket is closed): every kept chain goes
    /// back at the rx queue's next burst.
    return_all: AtomicBool,
    sent_any: AtomicBool,
    /// Chains the borrower may keep at once: half the ring, so the guest
    /// always has the other half to transmit with.
    cap: AtomicU32,
    split_n: AtomicUsize,
    split_tail: [AtomicUsize; BATCH],
    split_head: [AtomicU16; BATCH],
    split_taken: [AtomicBool; BATCH],
    /// Heads whose send completed, to return (a bit per head).
    sent: Box<[AtomicU64]>,
}

impl Default for TxKeep {
    fn default() -> Self {
        TxKeep {
            on: AtomicBool::new(false),
            return_all: AtomicBool::new(false),
            sent_any: AtomicBool::new(false),
            cap: AtomicU32::new(0),
            split_n: AtomicUsize::new(0),
            split_tail: std::array::from_fn(|_| AtomicUsize::new(0)),
            split_head: std::array::from_fn(|_| AtomicU16::new(0)),
            split_taken: std::array::from_fn(|_| AtomicBool::new(false)),
            sent: (0..MAX_HEADS / 64).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl TxKeep {
    /// Before a dequeue on the guest TX ring: gives back the chains whose
    /// sends completed (all of them if the borrower let go) and follows
    /// the borrower's keep mode. Nothing is held here (the last burst
    /// ended). A few relaxed loads when there is nothing to do.
    #[inline]
    pub(crate) fn before_burst(&self, dq: &mut DeviceQueue) {
        if self.return_all.load(Relaxed) {
            self.let_go_slow(dq);
        }
        if self.sent_any.load(Relaxed) {
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
        self.sent_any.store(false, Relaxed);
        for w in self.sent.iter() {
            w.store(0, Relaxed);
        }
        if dq.return_all_kept() != 0 {
            dq.publish_kept();
        }
    }

    #[cold]
    fn drain_sent(&self, dq: &mut DeviceQueue) {
        self.sent_any.store(false, Relaxed);
        let n = take_bits(&self.sent, |head| dq.return_kept(head));
        if n != 0 {
            dq.publish_kept();
        }
    }

    /// After a dequeue: the burst's split chains, for the borrower.
    #[inline]
    pub(crate) fn after_dequeue(&self, dq: &DeviceQueue) {
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

    /// The burst ended: chains whose tails the borrower took are kept.
    #[inline]
    pub(crate) fn burst_done(&self, dq: &mut DeviceQueue) {
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
        if (head as usize) < MAX_HEADS {
            self.sent[head as usize / 64].fetch_or(1 << (head % 64), Release);
            self.sent_any.store(true, Release);
        }
    }
}

/// One guest RX ring's loans.
pub struct LendPair {
    borrower: Mutex<Option<Arc<dyn Borrower>>>,
    /// The current lease; 0: none. Changes (release store) when a lease
    /// starts or ends.
    tag: AtomicU32,
    /// What the lease was granted on: memory and ring addresses.
    key: Mutex<Option<LeaseKey>>,
    /// Heads whose packets came back through `release`, to give back.
    returned: Box<[AtomicU64]>,
    returned_any: AtomicBool,
    /// Lent buffers completed in place / given back, by this port's tx
    /// queues and the borrower (single writer each under the ring lock).
    pub zero_copy: AtomicU64,
    pub returned_total: AtomicU64,
    /// The guest TX ring of the same pair, sent in place.
    pub tx: TxKeep,
}

impl Default for LendPair {
    fn default() -> Self {
        LendPair {
            borrower: Mutex::new(None),
            tag: AtomicU32::new(0),
            key: Mutex::new(None),
            returned: (0..MAX_HEADS / 64).map(|_| AtomicU64::new(0)).collect(),
            returned_any: AtomicBool::new(false),
            zero_copy: AtomicU64::new(0),
            returned_total: AtomicU64::new(0),
            tx: TxKeep::default(),
        }
    }
}

/// Memory and ring addresses a lease was granted on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LeaseKey {
    pub mem: usize,
    pub rings: [u64; 3],
    pub size: u16,
    pub features: u64,
}

impl LeaseKey {
    pub fn of(s: &crate::shared::RingSetup) -> LeaseKey {
        LeaseKey {
            mem: Arc::as_ptr(&s.mem) as usize,
            rings: [s.desc, s.avail, s.used],
            size: s.size,
            features: s.features,
        }
    }
}

/// The lending state of a port (in [`Shared`]).
#[derive(Default)]
pub(crate) struct LendState {
    /// A borrower exists or existed: IN_ORDER is no longer offered.
    pub claimed: AtomicBool,
    owner: OnceLock<(OwnerId, Arc<LendOwner>)>,
    pub pairs: Box<[LendPair]>,
    next_tag: AtomicU32,
}

impl LendState {
    pub fn new(pairs: usize) -> LendState {
        LendState {
            pairs: (0..pairs).map(|_| LendPair::default()).collect(),
            next_tag: AtomicU32::new(1),
            ..LendState::default()
        }
    }

    /// The owner id of packets over lent buffers (`None` before a claim).
    #[inline(always)]
    pub fn owner_id(&self) -> Option<OwnerId> {
        self.owner.get().map(|o| o.0)
    }

    /// Gives back, under the ring's lock, the buffers whose packets were
    /// released elsewhere. Cheap when there are none (one load).
    #[inline]
    pub fn drain_returns(&self, pair: usize, dq: &mut DeviceQueue) {
        let lp = &self.pairs[pair];
        if !lp.returned_any.load(Relaxed) {
            return;
        }
        self.drain_slow(lp, dq);
    }

    #[cold]
    fn drain_slow(&self, lp: &LendPair, dq: &mut DeviceQueue) {
        lp.returned_any.store(false, Relaxed);
        let n = take_bits(&lp.returned, |head| dq.return_lent(head));
        if n != 0 {
            lp.returned_total.fetch_add(n, Relaxed);
            dq.publish();
        }
    }

    /// Before pair `pair`'s guest TX ring changes (starts, stops, moves):
    /// a borrower sending its chains in place lets go first (revoked,
    /// outside locks), so its kept chains can go back before the ring's
    /// queue retires.
    pub fn before_tx_change(&self, pair: usize) {
        let Some(lp) = self.pairs.get(pair) else {
            return;
        };
        if !lp.tx.on.load(Acquire) {
            return;
        }
        let b = lp
            .borrower
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(b) = b {
            b.revoke();
        }
        lp.tx.on.store(false, Release);
        lp.tx.return_all.store(true, Release);
    }

    /// Before ring `pair` moves from `old` to `new` (either may be absent):
    /// if a lease exists and the memory or addresses change, revokes it
    /// (calls the borrower, outside locks) and ends the lease. Returns
    /// whether the ring's loans must be given back before it is retired.
    pub fn before_change(&self, pair: usize, new: Option<&LeaseKey>) -> bool {
        let lp = &self.pairs[pair];
        let mut key = lp.key.lock().unwrap_or_else(|p| p.into_inner());
        let Some(current) = key.as_ref() else {
            return false;
        };
        if new == Some(current) {
            return false;
        }
        *key = None;
        drop(key);
        lp.tag.store(0, Release);
        let b = lp
            .borrower
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(b) = b {
            b.revoke();
        }
        true
    }
}

/// Takes packets over lent buffers back (see the module doc).
pub(crate) struct LendOwner {
    shared: Weak<Shared>,
}

impl BufferOwner for LendOwner {
    fn release(&self, token: u32) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        let (pair, tag, head) = untoken(token);
        let Some(lp) = shared.lend.pairs.get(pair) else {
            return;
        };
        let current = lp.tag.load(Acquire);
        if current == 0 || current & 0xff != tag || head as usize >= MAX_HEADS {
            // From an ended lease: its buffers were given back already.
            return;
        }
        lp.returned[head as usize / 64].fetch_or(1 << (head % 64), Release);
        lp.returned_any.store(true, Release);
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

/// A vhost-user port as a lender, found by name. Holds the port's shared
/// state (not the port): a lender outliving its port finds its rings
/// stopped.
#[derive(Clone)]
pub struct Lender {
    shared: Arc<Shared>,
}

static PORTS: Mutex<Vec<(String, Weak<Shared>)>> = Mutex::new(Vec::new());

/// Makes a port findable by [`Lender::find`].
pub(crate) fn register(shared: &Arc<Shared>) {
    let mut v = PORTS.lock().unwrap_or_else(|p| p.into_inner());
    v.retain(|(_, w)| w.strong_count() > 0);
    v.push((shared.name.clone(), Arc::downgrade(shared)));
}

impl Lender {
    /// The open vhost-user port called `name`.
    pub fn find(name: &str) -> Option<Lender> {
        let v = PORTS.lock().unwrap_or_else(|p| p.into_inner());
        v.iter()
            .rev()
            .filter(|(n, _)| n == name)
            .find_map(|(_, w)| w.upgrade())
            .map(|shared| Lender { shared })
    }

    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// Queue pairs of the port.
    pub fn pairs(&self) -> usize {
        self.shared.cfg.queues
    }

    /// The port was removed: its rings stopped for good.
    pub fn is_closed(&self) -> bool {
        self.shared.stop.load(Acquire)
    }

    /// The id packets over lent buffers carry (registered by `claim`).
    pub fn owner_id(&self) -> Option<OwnerId> {
        self.shared.lend.owner_id()
    }

    /// Makes `b` the borrower of pair `pair`'s guest RX ring; fails if it
    /// has one.
    pub fn claim(&self, pair: usize, b: Arc<dyn Borrower>) -> Result<(), LeaseError> {
        let lend = &self.shared.lend;
        let lp = lend.pairs.get(pair).ok_or(LeaseError::NoPair)?;
        let mut slot = lp.borrower.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_some() {
            return Err(LeaseError::NotLendable("another port borrows this ring"));
        }
        lend.owner.get_or_init(|| {
            let o = Arc::new(LendOwner {
                shared: Arc::downgrade(&self.shared),
            });
            let weak: Weak<dyn BufferOwner> = Arc::downgrade(&o) as Weak<dyn BufferOwner>;
            (owner::register_borrowed(weak), o)
        });
        lend.claimed.store(true, Release);
        *slot = Some(b);
        Ok(())
    }

    /// Pair `pair`'s guest TX ring, for sending its frames in place.
    pub fn tx_keep(&self, pair: usize) -> Option<&TxKeep> {
        self.shared.lend.pairs.get(pair).map(|lp| &lp.tx)
    }

    /// The borrower starts sending pair `pair`'s frames in place (after
    /// [`Lender::claim`]; the ring keeps chains from its next burst).
    pub fn start_tx_keep(&self, pair: usize) {
        if let Some(lp) = self.shared.lend.pairs.get(pair) {
            lp.tx.on.store(true, Release);
        }
    }

    /// The borrower stopped sending in place and its socket is closed:
    /// every chain kept for it goes back at the ring's next burst.
    pub fn let_go_tx(&self, pair: usize) {
        if let Some(lp) = self.shared.lend.pairs.get(pair) {
            lp.tx.on.store(false, Release);
            lp.tx.return_all.store(true, Release);
        }
    }

    /// Gives up pair `pair` (the borrower closed; it revoked itself first).
    pub fn unclaim(&self, pair: usize) {
        let Some(lp) = self.shared.lend.pairs.get(pair) else {
            return;
        };
        *lp.key.lock().unwrap_or_else(|p| p.into_inner()) = None;
        lp.tag.store(0, Release);
        *lp.borrower.lock().unwrap_or_else(|p| p.into_inner()) = None;
        // Buffers still lent go back now: the borrower closed its socket
        // first, so nothing writes them any more.
        let ring = &self.shared.tx[pair];
        let mut st = ring.lock();
        if let Some(dq) = st.dq.as_mut() {
            let n = dq.return_all_lent();
            lp.returned_total.fetch_add(n as u64, Relaxed);
        }
    }

    /// Starts a lease on pair `pair`'s running guest RX ring (cold: under
    /// the ring's lock and the lease's mutex).
    pub fn lease(&self, pair: usize) -> Result<Lease, LeaseError> {
        let lend = &self.shared.lend;
        let lp = lend.pairs.get(pair).ok_or(LeaseError::NoPair)?;
        let ring = &self.shared.tx[pair];
        let st = ring.lock();
        let dq = st.dq.as_ref().ok_or(LeaseError::NotRunning)?;
        dq.lendable()
            .map_err(|e| LeaseError::NotLendable(e.as_str()))?;
        let key = st.lease_key.clone().ok_or(LeaseError::NotRunning)?;
        let mut k = lp.key.lock().unwrap_or_else(|p| p.into_inner());
        let tag = match (k.as_ref(), lp.tag.load(Acquire)) {
            (Some(cur), t) if *cur == key && t != 0 => t,
            _ => {
                let mut t = lend.next_tag.fetch_add(1, Relaxed) & 0xff;
                if t == 0 {
                    t = lend.next_tag.fetch_add(1, Relaxed) & 0xff;
                }
                *k = Some(key);
                lp.tag.store(t, Release);
                t
            }
        };
        Ok(Lease {
            tag,
            mem: dq.memory().clone(),
            hdr_len: dq.hdr_len(),
        })
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
        let lend = &self.shared.lend;
        let lp = lend.pairs.get(pair)?;
        if tag == 0 || lp.tag.load(Acquire) != tag {
            return None;
        }
        let ring = &self.shared.tx[pair];
        let mut st = ring.lock();
        let dq = st.dq.as_mut()?;
        lend.drain_returns(pair, dq);
        let before = dq.stats().lent_returned;
        let r = f(dq);
        let after = dq.stats().lent_returned;
        if after != before {
            lp.returned_total.fetch_add(after - before, Relaxed);
        }
        Some(r)
    }

    /// A packet over lent buffer `l` of pair `pair` under lease `tag`:
    /// `len` frame bytes after the `hdr_len`-byte header.
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
        l: &nfv_virtio::Lent,
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

/// Delivers `batch` into pair `pair`'s guest RX ring in order: packets
/// in this ring's lent buffers are completed in place (header and used
/// entry, no copy); runs of other packets go through `enqueue_burst`.
/// Packets in lent buffers whose data moved (a pushed or popped header),
/// or lent by another ring or an ended lease, are copied into pool
/// packets and their buffers given back. Returns how many were delivered;
/// what could not be (the guest ran out of buffers) stays in `batch`.
pub(crate) fn deliver_mixed(
    lend: &LendState,
    owner: OwnerId,
    pair: usize,
    dq: &mut DeviceQueue,
    batch: &mut nfv_mem::Batch,
    pool: &mut nfv_mem::PoolCache,
) -> usize {
    lend.drain_returns(pair, dq);
    let lp = &lend.pairs[pair];
    let tag = lp.tag.load(Acquire);
    let hdr = dq.hdr_len();
    let mut delivered = 0;
    let mut in_place = 0u64;
    let mut run = nfv_mem::Batch::new();
    let mut left = nfv_mem::Batch::new();
    let pending: nfv_mem::Batch = batch.drain(..).collect();
    for p in pending {
        if p.owner() != owner {
            run.push(p);
            continue;
        }
        let (pp, ptag, head) = untoken(p.token());
        if pp == pair && tag != 0 && ptag == tag & 0xff && p.headroom() == hdr && p.tail().1 == 0 {
            if !run.is_empty() {
                delivered += dq.enqueue_burst(&mut run, pool);
                left.extend(run.drain(..));
            }
            let len = p.len() as u32;
            p.into_token();
            if dq.complete_lent(head, len) {
                delivered += 1;
                in_place += 1;
            }
            continue;
        }
        // A copy goes in; the buffer goes back: directly when it is this
        // ring's (we hold its lock), else through its owner.
        if let Some(c) = pool.copy(&p) {
            run.push(c);
        }
        if pp == pair && tag != 0 && ptag == tag & 0xff {
            p.into_token();
            if dq.return_lent(head) {
                lp.returned_total.fetch_add(1, Relaxed);
            }
        } else {
            pool.free(p);
        }
    }
    if !run.is_empty() {
        delivered += dq.enqueue_burst(&mut run, pool);
        left.extend(run.drain(..));
    }
    dq.publish();
    *batch = left;
    if in_place != 0 {
        lp.zero_copy.fetch_add(in_place, Relaxed);
    }
    delivered
}
