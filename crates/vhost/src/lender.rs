//! The port as a lender of its guests' receive buffers: the calls a
//! borrower makes through its [`Lender`] (`nfv_virtio::lend`), implemented
//! over the port's shared state ([`Shared`]), and the owner that packets
//! over lent buffers go back to. The loans themselves, and how this port
//! keeps the lending rules, are in `lend.rs`.

use std::sync::atomic::Ordering::*;
use std::sync::{Arc, Weak};

use nfv_mem::owner::{self, BufferOwner, OwnerId};
use nfv_virtio::DeviceQueue;
use nfv_virtio::lend::{Borrower, Lease, LeaseError, Lender, LendingPort, TxKeep, untoken};

use crate::shared::Shared;

/// Takes packets over lent buffers back (see `lend.rs`'s doc).
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

/// The port as a lender (see `lend.rs`'s doc): the calls a borrower makes
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
