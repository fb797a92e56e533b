//! vhost-user's side of lending a VNF's receive buffers (IOVTee): the
//! port is a lender under the contract of `nfv_virtio::lend`, whose doc
//! has the rules (claim, lease, revoke before retire, packets, the other
//! direction); the ring operations are `nfv_virtio`'s `device/lend.rs`
//! and `device/keep.rs`. This module holds the port's loans (per guest RX
//! ring: the borrower, the lease and the buffers coming back) and the
//! ring side of them; `lender.rs` is the port as a lender, the calls a
//! borrower makes. Here is how this port keeps the rules:
//!
//! * The port type adds each port it opens to the node's
//!   [`nfv_virtio::lend::Lenders`] (`port.rs`);
//!   `VhostUserPort::lender` hands the same `Lender` out
//!   directly. It is implemented over the port's shared state
//!   (`Shared`, `lender.rs`), not the port: a lender outliving its port
//!   finds its rings stopped (`LendingPort::is_closed`).
//! * Claimed ([`LendState::claimed`]): `features.rs` no longer offers
//!   `VIRTIO_F_IN_ORDER`.
//! * Revoke before retire: the protocol thread, before it rebuilds or
//!   stops a guest RX ring (`Backend::apply_tx`), calls
//!   [`LendState::before_change`] outside every lock (a revoke if the
//!   lease's memory or addresses change), then gives every buffer still
//!   lent back under the ring's lock before the old queue retires; before
//!   a guest TX ring changes, [`LendState::before_tx_change`] makes a
//!   borrower sending in place let go first.
//! * Packets over lent buffers come back through `LendOwner`
//!   (`lender.rs`: a bit in the pair's [`HeadBits`], no lock) and are
//!   given back by the next holder of the ring's lock
//!   ([`LendState::drain_returns`]); this port's tx queues complete them
//!   in place ([`deliver_mixed`]).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::*};
use std::sync::{Arc, Mutex, OnceLock};

use nfv_mem::owner::{BufferOwner, OwnerId};
use nfv_virtio::DeviceQueue;
use nfv_virtio::lend::{Borrower, HeadBits, TxKeep, untoken};

/// One guest RX ring's loans.
pub struct LendPair {
    pub(crate) borrower: Mutex<Option<Arc<dyn Borrower>>>,
    /// The current lease; 0: none. Changes (release store) when a lease
    /// starts or ends.
    pub(crate) tag: AtomicU32,
    /// What the lease was granted on: memory and ring addresses.
    pub(crate) key: Mutex<Option<LeaseKey>>,
    /// Heads whose packets came back through `release`, to give back.
    pub(crate) returned: HeadBits,
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

/// Memory and ring addresses a lease was granted on
/// (`RingSetup::lease_key`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LeaseKey {
    pub mem: usize,
    pub rings: [u64; 3],
    pub size: u16,
    pub features: u64,
}

/// The lending state of a port (in `Shared`).
#[derive(Default)]
pub(crate) struct LendState {
    /// A borrower exists or existed: IN_ORDER is no longer offered.
    pub claimed: AtomicBool,
    /// The id packets over lent buffers carry, and the owner they go back
    /// to (`lender.rs`'s `LendOwner`), kept alive here.
    pub(crate) owner: OnceLock<(OwnerId, Arc<dyn BufferOwner>)>,
    pub pairs: Box<[LendPair]>,
    pub(crate) next_tag: AtomicU32,
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
