//! The PMD side, sending: the tx queue objects of a vhost-user port.
//! PMD `q` sends into the guest RX virtqueue of the `q % n`-th running
//! pair, under that ring's lock; the protocol thread builds those
//! `DeviceQueue`s (see [`crate::shared`]).
//!
//! Per burst a queue checks the port generation with one atomic load and
//! only on a change looks up its pair again (`retarget`). A queue whose
//! virtqueue is not running sends nothing (the datapath counts unsent
//! packets as `tx_full` drops). The guest-memory fault epoch is checked
//! per burst as the rx queues do (`crate::rx`).

use std::sync::Arc;
use std::sync::atomic::Ordering::*;

use nfv_mem::{Batch, PoolCache};
use nfv_ports::TxQueue;
use nfv_virtio::guard::fault_epoch;

use crate::errors;
use crate::ownership::{check_memory, publish};
use crate::shared::Shared;

/// Tx queue of PMD `q`: sends into the guest RX virtqueue of pair
/// `tx_pairs[q % tx_pairs.len()]` under that ring's lock. A burst that
/// finds the protocol thread holding the ring, or the ring out for a
/// rebuild, sends nothing and is counted (`TxRing::busy`): the PMD never
/// waits on the protocol thread.
pub(crate) struct VhostTxq {
    shared: Arc<Shared>,
    q: usize,
    generation: u64,
    pair: Option<usize>,
    /// `VhostUserConfig::tx_retries`.
    retries: u32,
}

impl VhostTxq {
    pub fn new(shared: Arc<Shared>, q: usize) -> VhostTxq {
        VhostTxq {
            retries: shared.cfg.tx_retries,
            shared,
            q,
            generation: u64::MAX,
            pair: None,
        }
    }

    #[cold]
    fn retarget(&mut self) {
        let snap = self.shared.snapshot();
        self.pair = match snap.tx_pairs.len() {
            0 => None,
            n => Some(snap.tx_pairs[self.q % n]),
        };
        self.generation = snap.generation;
    }
}

impl TxQueue for VhostTxq {
    /// Live while a frontend is connected and its guest takes packets (a
    /// fast_failover group moves to its backup bucket when the VNF's
    /// process goes away or stops polling, `crate::stall`): two relaxed
    /// loads.
    fn is_live(&self, now_tsc: u64) -> bool {
        self.shared.status.connected.load(Relaxed) && self.shared.status.stall.is_live(now_tsc)
    }

    #[inline]
    fn tx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        if self.shared.generation.load(Acquire) != self.generation {
            self.retarget();
        }
        let Some(p) = self.pair else {
            return 0;
        };
        let ring = &self.shared.tx[p];
        // Never waits on the protocol thread (see `crate::shared`).
        let Some(mut st) = ring.lock_pmd() else {
            return 0;
        };
        let st = &mut *st;
        let Some(dq) = st.dq.as_mut() else {
            if st.rebuilding {
                crate::shared::Status::bump(&ring.busy);
            }
            return 0;
        };
        let epoch = fault_epoch();
        if epoch != st.fault_epoch {
            st.fault_epoch = epoch;
            check_memory(&self.shared, 2 * p, dq);
        }
        // Frames the kernel wrote into this guest's lent buffers are
        // completed in place (one relaxed load when nothing is lent).
        let lend_owner = self.shared.lend.owner_id();
        let mut n = match lend_owner {
            Some(owner) if batch.iter().any(|p| p.owner() == owner) => {
                crate::lend::deliver_mixed(&self.shared.lend, owner, p, dq, batch, pool)
            }
            _ => {
                if lend_owner.is_some() {
                    self.shared.lend.drain_returns(p, dq);
                }
                dq.enqueue_burst(batch, pool)
            }
        };
        // Bounded retry while the guest is refilling (see
        // `VhostUserConfig::tx_retries`): only as long as each try still
        // delivers, so a stalled guest costs one extra read of avail.idx.
        let mut tries = 0;
        let mut left = batch.len();
        while left != 0 && tries < self.retries {
            let sent = dq.enqueue_burst(batch, pool);
            tries += 1;
            n += sent;
            let now = batch.len();
            if now == left {
                break;
            }
            left = now;
        }
        if tries != 0 {
            ring.retries.fetch_add(tries as u64, Relaxed);
        }
        if n != 0 {
            self.shared.status.stall.delivered();
        } else if left != 0 {
            self.shared.status.stall.refused();
        }
        // The guest's free rx buffers as this burst found them.
        ring.rx_free.0.store(dq.last_pending() as u32, Relaxed);
        let t = errors::trigger(dq);
        if t != st.error_seen {
            st.error_seen = t;
            publish(&self.shared, 2 * p, &ring.errors, dq, &mut st.error_base);
        }
        n
    }

    fn settle(&mut self) {
        let Some(p) = self.pair else {
            return;
        };
        if let Some(mut st) = self.shared.tx[p].lock_pmd()
            && let Some(dq) = st.dq.as_mut()
        {
            dq.settle_interrupts();
        }
    }

    fn max_frame(&self) -> usize {
        crate::max_frame(&self.shared.cfg)
    }

    /// Split packets are copied into the guest within `tx_burst`.
    fn takes_split(&self) -> bool {
        true
    }

    /// What the guest acked (GUEST_CSUM, GUEST_TSO4/6, …), read at each
    /// ask: a driver reload may change it. The device queue checks again
    /// under the ring lock (`nfv_virtio`'s `offload.rs`).
    fn offload_caps(&mut self) -> nfv_offload::OffloadCaps {
        crate::features::guest_caps(self.shared.status.features.load(Relaxed))
    }

    /// A large segment goes into the guest's merged receive buffers whole
    /// (with MRG_RXBUF; without it Linux posts "big" chains of 64 KiB).
    fn max_segment_frame(&self) -> usize {
        u16::MAX as usize
    }
}
