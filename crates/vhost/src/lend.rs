//! vhost-user's side of lending a VNF's receive buffers (IOVTee): the
//! port is a lender under the contract of `nfv_virtio::lend`, whose doc
//! has the rules (claim, lease, revoke before retire, packets, the other
//! direction); the ring operations are `nfv_virtio`'s `device/lend.rs`
//! and `device/keep.rs`. Here is how this port keeps those rules:
//!
//! * The port type adds each port it opens to the node's
//!   [`nfv_virtio::lend::Lenders`] (`settings.rs`);
//!   [`crate::VhostUserPort::lender`] hands the same [`Lender`] out
//!   directly. It is implemented over the port's shared state
//!   ([`Shared`]), not the port: a lender outliving its port finds its
//!   rings stopped ([`LendingPort::is_closed`]).
//! * Claimed ([`LendState::claimed`]): `features.rs` no longer offers
//!   `VIRTIO_F_IN_ORDER`.
//! * Revoke before retire: the protocol thread, before it rebuilds or
//!   stops a guest RX ring (`Backend::apply_tx`), calls
//!   [`LendState::before_change`] outside every lock (a revoke if the
//!   lease's memory or addresses change), then gives every buffer still
//!   lent back under the ring's lock before the old queue retires; before
//!   a guest TX ring changes, [`LendState::before_tx_change`] makes a
//!   borrower sending in place let go first.
//! * Packets over lent buffers come back through [`LendOwner`] (a bit in
//!   the pair's [`HeadBits`], no lock) and are given back by the next
//!   holder of the ring's lock ([`LendState::drain_returns`]); this
//!   port's tx queues complete them in place ([`deliver_mixed`]).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::*};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use nfv_mem::owner::{self, BufferOwner, OwnerId};
use nfv_virtio::DeviceQueue;
use nfv_virtio::lend::{
    Borrower, HeadBits, Lease, LeaseError, Lender, LendingPort, TxKeep, untoken,
};

use crate::shared::Shared;

/// One guest RX ring's loans.
pub struct LendPair {
    borrower: Mutex<Option<Arc<dyn Borrower>>>,
    /// The current lease; 0: none. Changes (release store) when a lease
    /// starts or ends.
    tag: AtomicU32,
    /// What the lease was granted on: memory and ring addresses.
    key: Mutex<Option<LeaseKey>>,
    /// Heads whose packets came back through `release`, to give back.
    returned: HeadBits,
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
            returned: HeadBits::default(),
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
        if !lp.returned.pending() {
            return;
        }
        self.drain_slow(lp, dq);
    }

    #[cold]
    fn drain_slow(&self, lp: &LendPair, dq: &mut DeviceQueue) {
        let n = lp.returned.take(|head| dq.return_lent(head));
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
        if !lp.tx.is_on() {
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
        lp.tx.let_go();
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
        if current == 0 || current & 0xff != tag {
            // From an ended lease: its buffers were given back already.
            return;
        }
        lp.returned.insert(head);
    }
}

/// The port as a lender (see the module doc): the calls a borrower makes
/// through its [`Lender`].
impl LendingPort for Shared {
    fn name(&self) -> &str {
        &self.name
    }

    fn pairs(&self) -> usize {
        self.cfg.queues
    }

    fn is_closed(&self) -> bool {
        self.stop.load(Acquire)
    }

    fn owner_id(&self) -> Option<OwnerId> {
        self.lend.owner_id()
    }

    fn claim(self: Arc<Self>, pair: usize, b: Arc<dyn Borrower>) -> Result<(), LeaseError> {
        let lend = &self.lend;
        let lp = lend.pairs.get(pair).ok_or(LeaseError::NoPair)?;
        let mut slot = lp.borrower.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_some() {
            return Err(LeaseError::NotLendable("another port borrows this ring"));
        }
        lend.owner.get_or_init(|| {
            let o = Arc::new(LendOwner {
                shared: Arc::downgrade(&self),
            });
            let weak: Weak<dyn BufferOwner> = Arc::downgrade(&o) as Weak<dyn BufferOwner>;
            (owner::register_borrowed(weak), o)
        });
        lend.claimed.store(true, Release);
        *slot = Some(b);
        Ok(())
    }

    fn unclaim(&self, pair: usize) {
        let Some(lp) = self.lend.pairs.get(pair) else {
            return;
        };
        *lp.key.lock().unwrap_or_else(|p| p.into_inner()) = None;
        lp.tag.store(0, Release);
        *lp.borrower.lock().unwrap_or_else(|p| p.into_inner()) = None;
        // Buffers still lent go back now: the borrower closed its socket
        // first, so nothing writes them any more.
        let ring = &self.tx[pair];
        let mut st = ring.lock();
        if let Some(dq) = st.dq.as_mut() {
            let n = dq.return_all_lent();
            lp.returned_total.fetch_add(n as u64, Relaxed);
        }
    }

    /// Cold: under the ring's lock and the lease's mutex.
    fn lease(&self, pair: usize) -> Result<Lease, LeaseError> {
        let lend = &self.lend;
        let lp = lend.pairs.get(pair).ok_or(LeaseError::NoPair)?;
        let ring = &self.tx[pair];
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

    #[inline]
    fn with_ring(&self, pair: usize, tag: u32, f: &mut dyn FnMut(&mut DeviceQueue)) {
        let lend = &self.lend;
        let Some(lp) = lend.pairs.get(pair) else {
            return;
        };
        if tag == 0 || lp.tag.load(Acquire) != tag {
            return;
        }
        let ring = &self.tx[pair];
        let mut st = ring.lock();
        let Some(dq) = st.dq.as_mut() else {
            return;
        };
        lend.drain_returns(pair, dq);
        let before = dq.stats().lent_returned;
        f(dq);
        let after = dq.stats().lent_returned;
        if after != before {
            lp.returned_total.fetch_add(after - before, Relaxed);
        }
    }

    #[inline]
    fn tx_keep(&self, pair: usize) -> Option<&TxKeep> {
        self.lend.pairs.get(pair).map(|lp| &lp.tx)
    }
}

/// The lender of `shared`'s port.
pub(crate) fn lender(shared: &Arc<Shared>) -> Lender {
    Lender::new(shared.clone())
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
