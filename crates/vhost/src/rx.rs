//! The PMD side, receiving: the rx queue objects of a vhost-user port.
//! Rx queue `pair` owns the guest's TX virtqueue `2*pair+1` and builds
//! its `DeviceQueue` itself (see [`crate::shared`]).
//!
//! Per burst it checks the port generation with one atomic load; only on
//! a change does it take the slow path (`resync`). A queue whose
//! virtqueue is not running receives nothing. Per burst it also loads the
//! process-wide guest-memory fault epoch (`nfv_virtio::guard::fault_epoch`,
//! a line written only when a SIGBUS was survived). When it moved, the
//! queue checks whether *its* memory faulted and, if so, stops its
//! virtqueue for good (`DeviceQueue::quarantine_memory_fault`, counter
//! `memory_fault`, one rate-limited log line; `ownership::check_memory`);
//! other ports only pay the check.

use std::sync::Arc;
use std::sync::atomic::Ordering::*;

use nfv_mem::{Batch, HugepageMode, MemoryConfig, PacketPool, PoolCache};
use nfv_ports::RxQueue;
use nfv_virtio::guard::fault_epoch;

use crate::errors;
use crate::ownership::{check_memory, publish};
use crate::shared::{RingOwner, Shared};

/// Rx queue `pair`: the guest's TX virtqueue `2*pair+1`, owned here.
pub(crate) struct VhostRxq {
    shared: Arc<Shared>,
    pair: usize,
    generation: u64,
    owner: RingOwner,
    /// The queue's `one_copy` count already added to the ring's.
    one_copy_seen: u64,
    /// A guest MAC to announce at the next burst (SEND_RARP; pair 0).
    rarp: Option<[u8; 6]>,
    /// Buffers for the guest's large segments (TSO/USO), made when a
    /// guest first acks HOST_TSO4/6 or HOST_USO on this queue; `Err` once
    /// making it failed (logged; large segments are then dropped and
    /// counted, the guest's TCP retransmits).
    large_pool: Option<Result<Arc<PacketPool>, ()>>,
}

/// Large-segment buffers per rx queue: 64 KiB each (the largest GSO frame
/// plus headroom), as many as one burst takes and a burst in flight at the
/// outputs — 4 MiB per queue, mapped only when a guest negotiates TSO/USO.
const LARGE_FRAMES: usize = 64;
const LARGE_FRAME_SIZE: usize = 65536;

impl VhostRxq {
    pub fn new(shared: Arc<Shared>, pair: usize) -> VhostRxq {
        let ring = &shared.rx[pair];
        ring.attached.store(true, Release);
        let error_base = ring.errors.load();
        // A ring whose previous rx queue object was dropped (its port's
        // queue reopened) continues where that one stopped, unless the
        // frontend has set a new base since. Epoch first (acquire): the
        // position was stored before it.
        let base_epoch = ring.pos_epoch.load(Acquire);
        let position = ring.position.load(Relaxed) as u16;
        VhostRxq {
            shared,
            pair,
            // Forces a resync on the first burst.
            generation: u64::MAX,
            owner: RingOwner {
                error_base,
                fault_epoch: fault_epoch(),
                base_epoch,
                position,
                ..RingOwner::default()
            },
            one_copy_seen: 0,
            rarp: None,
            large_pool: None,
        }
    }

    /// A cache of queue `pair`'s large-segment pool `slot`, made on first
    /// use.
    #[cold]
    fn large_pool(
        slot: &mut Option<Result<Arc<PacketPool>, ()>>,
        shared: &Shared,
        pair: usize,
    ) -> Option<PoolCache> {
        let pool = slot.get_or_insert_with(|| {
            let cfg = MemoryConfig {
                frame_size: LARGE_FRAME_SIZE,
                frames: LARGE_FRAMES,
                hugepages: HugepageMode::Never,
            };
            let name = format!("{}-large{pair}", shared.name);
            PacketPool::new(&name, &cfg).map_err(|e| {
                tracing::warn!(
                    "vhost-user port {}: no buffers for large segments ({e}); the guest's \
                     TSO/USO frames are dropped (counter large_pool_empty)",
                    shared.name
                );
            })
        });
        pool.as_ref().ok().map(|p| p.cache())
    }

    /// Appends the announcement of the guest's MAC to `batch` as if the
    /// guest had sent it (see `crate::rarp`). Tried again next burst when
    /// the batch is full or the pool empty.
    #[cold]
    fn inject_rarp(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        let Some(mac) = self.rarp else {
            return 0;
        };
        if batch.remaining_capacity() == 0 {
            return 0;
        }
        let Some(mut p) = pool.alloc() else {
            return 0;
        };
        let f = crate::rarp::frame(mac);
        if p.set_len(f.len()).is_err() {
            pool.free(p);
            return 0;
        }
        p.data_mut().copy_from_slice(&f);
        batch.push(p);
        self.rarp = None;
        crate::shared::Status::bump(&self.shared.status.rarp_sent);
        1
    }

    /// Moves to the current generation: keeps, rebuilds or drops the
    /// device queue, then acknowledges.
    #[cold]
    fn resync(&mut self) {
        let snap = self.shared.snapshot();
        let setup = snap.rx.get(self.pair).cloned().flatten();
        let ring = &self.shared.rx[self.pair];
        let vring = 2 * self.pair + 1;
        let o = &mut self.owner;
        if let Some(retired) = o.apply(setup.as_deref(), &self.shared, vring, &ring.errors, false) {
            // Dropping the retired queue drops its Arc<GuestMemory>.
            drop(retired);
            ring.position.store(o.position as u32, Relaxed);
            ring.pos_epoch.store(o.base_epoch, Release);
            let large = match o.dq.as_ref().map(|dq| dq.host_offloads()) {
                Some(h) if h.tso4 || h.tso6 || h.uso => {
                    Self::large_pool(&mut self.large_pool, &self.shared, self.pair)
                }
                _ => None,
            };
            let o = &mut self.owner;
            if let Some(dq) = o.dq.as_mut() {
                dq.set_one_copy(self.shared.cfg.one_copy);
                dq.set_large_pool(large);
            }
            self.one_copy_seen = 0;
        }
        if self.owner.dq.is_none() {
            ring.queued.0.store(0, Relaxed);
        }
        if self.pair == 0
            && let Some(mac) = crate::rarp::decode(self.shared.rarp.swap(0, AcqRel))
        {
            self.rarp = Some(mac);
        }
        self.generation = snap.generation;
        ring.acked_gen.store(snap.generation, Release);
    }
}

impl RxQueue for VhostRxq {
    #[inline]
    fn rx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        if self.shared.generation.load(Acquire) != self.generation {
            self.resync();
        }
        let announced = if self.rarp.is_some() {
            self.inject_rarp(batch, pool)
        } else {
            0
        };
        let o = &mut self.owner;
        let Some(dq) = o.dq.as_mut() else {
            return announced;
        };
        let epoch = fault_epoch();
        if epoch != o.fault_epoch {
            o.fault_epoch = epoch;
            check_memory(&self.shared, 2 * self.pair + 1, dq);
        }
        // Chains kept for a port that sends their tails in place
        // (`nfv_virtio::lend::TxKeep`): those sent go back before the next
        // dequeue.
        let keep = &self.shared.lend.pairs[self.pair].tx;
        dq.complete_held();
        keep.before_burst(dq);
        let n = dq.dequeue_burst(batch, pool);
        keep.after_dequeue(dq);
        let ring = &self.shared.rx[self.pair];
        // The guest's backlog as this burst found it: one relaxed store to
        // a line only this PMD writes.
        ring.queued.0.store(dq.last_pending() as u32, Relaxed);
        if n != 0 {
            // Where we are, for GET_VRING_BASE should this PMD stop polling.
            ring.position.store(dq.last_avail_idx() as u32, Relaxed);
            let split = dq.stats().one_copy;
            if split != self.one_copy_seen {
                // Single writer: a load and a store, no read-modify-write.
                let total = ring.one_copy.load(Relaxed) + split - self.one_copy_seen;
                ring.one_copy.store(total, Relaxed);
                self.one_copy_seen = split;
            }
        }
        let t = errors::trigger(dq);
        if t != o.error_seen {
            o.error_seen = t;
            let vring = 2 * self.pair + 1;
            publish(&self.shared, vring, &ring.errors, dq, &mut o.error_base);
        }
        n + announced
    }

    #[inline]
    fn burst_done(&mut self) {
        if let Some(dq) = self.owner.dq.as_mut() {
            self.shared.lend.pairs[self.pair].tx.burst_done(dq);
        }
    }
}

impl Drop for VhostRxq {
    fn drop(&mut self) {
        let ring = &self.shared.rx[self.pair];
        let o = &mut self.owner;
        if let Some(mut dq) = o.dq.take() {
            // Dropped between bursts: return what the last one held, and
            // the chains kept for a port sending them in place (the next
            // owner starts from this position and knows nothing of them;
            // a send still in flight may then read a buffer the guest
            // reuses — a wrong frame on the wire, never a fault: the
            // borrower's UMEM keeps the memory mapped).
            dq.complete_held();
            if dq.return_all_kept() != 0 {
                dq.publish_kept();
            }
            // The interrupt check the publish left for the next burst,
            // which this owner will not run.
            dq.settle_interrupts();
            errors::mirror(&ring.errors, &dq, &mut o.error_base, true);
            ring.position.store(dq.last_avail_idx() as u32, Relaxed);
            ring.pos_epoch.store(o.base_epoch, Release);
        }
        ring.queued.0.store(0, Relaxed);
        ring.attached.store(false, Release);
    }
}
