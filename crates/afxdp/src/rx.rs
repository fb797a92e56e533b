//! The rx queue: copy each received frame into a switch packet and hand
//! its UMEM frame straight back to the fill ring.
//!
//! Why copy: the frame is back on the fill ring within the same burst, so
//! the kernel never runs short of buffers however long the switch keeps
//! the packet (a VNF queue, a slow output), the packet is an ordinary pool
//! packet every element and port understands, and the UMEM stays small. A
//! 64-byte copy from a prefetched frame costs a few ns; copy-mode AF_XDP
//! (veth, most drivers) already pays a kernel copy per frame.
//!
//! Per burst (≤ 32 frames): one acquire load of the rx producer (only when
//! the cached view is empty), one of the fill consumer (only when short),
//! one release store on each ring, no syscall unless the fill ring's
//! need-wakeup flag is set (zero-copy drivers), no allocation.
//!
//! Fill-ring accounting: the queue's `ring_size` rx frames are each on the
//! fill ring, in the kernel, on the rx ring, or in this function between
//! reading a descriptor and refilling it. A burst takes only as many
//! descriptors as it can refill right away, so no frame is ever held back
//! and every burst — idle ones included — leaves the fill ring as full as
//! the kernel lets it be. (The kernel publishes its fill-ring consumer
//! index lazily; if that makes the ring look full, the descriptors wait on
//! the rx ring for the next burst instead of being lost.)

use crate::tx::retry_tx;
use crate::umem::Umem;
use crate::xsk::{RxRings, Xsk, bump};
use nfv_mem::hint::prefetch;
use nfv_mem::{BATCH, Batch, PoolCache};
use nfv_ports::RxQueue;
use std::sync::Arc;

pub struct AfXdpRxq {
    xsk: Arc<Xsk>,
    /// `None` only for a queue opened twice (see `AfXdpPort::open_rxq`).
    rings: Option<RxRings>,
}

impl AfXdpRxq {
    pub fn new(xsk: Arc<Xsk>) -> AfXdpRxq {
        let rings = xsk.take_rx();
        if rings.is_none() {
            tracing::error!(
                "AF_XDP queue {}: rx queue opened twice; the second one receives nothing",
                xsk.queue
            );
        }
        AfXdpRxq { xsk, rings }
    }
}

impl Drop for AfXdpRxq {
    fn drop(&mut self) {
        if let Some(r) = self.rings.take() {
            self.xsk.return_rx(r);
        }
    }
}

impl RxQueue for AfXdpRxq {
    #[inline]
    fn rx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        retry_tx(&self.xsk);
        let Some(r) = self.rings.as_mut() else {
            return 0;
        };
        receive_copies(&self.xsk, r, batch, pool)
    }
}

/// One burst of the copy path: frames off `r`'s rx ring into pool packets
/// appended to `batch`, each UMEM frame straight back on the fill ring.
#[inline]
pub(crate) fn receive_copies(
    xsk: &Xsk,
    r: &mut RxRings,
    batch: &mut Batch,
    pool: &mut PoolCache,
) -> usize {
    let room = batch.remaining_capacity().min(BATCH) as u32;
    let mut n = r.rx.available(room);
    if n > 0 {
        // Take only what can go back on the fill ring now.
        n = n.min(r.fill.free(n));
    }
    let mut got = 0;
    if n > 0 {
        let start = batch.len();
        got = pool.alloc_into(batch, n as usize) as u32;
        if got > 0 {
            xsk.umem.prefetch(Umem::data_addr(r.rx.read(0).addr));
            prefetch(batch[start].data_ptr());
        }
        for i in 0..got {
            let d = r.rx.read(i);
            if i + 1 < got {
                // The next frame (written by the kernel, likely on
                // another core) and the next packet buffer.
                xsk.umem.prefetch(Umem::data_addr(r.rx.read(i + 1).addr));
                prefetch(batch[start + i as usize + 1].data_ptr());
            }
            let p = &mut batch[start + i as usize];
            let len = d.len as usize;
            let room = p.room_mut();
            let ok = len <= room.len()
                && xsk
                    .umem
                    .read_into(Umem::data_addr(d.addr), &mut room[..len]);
            if ok {
                let _ = p.set_len(len);
            } else {
                bump(&xsk.rx_counters.bad_descs, 1);
                let _ = p.set_len(0);
            }
            r.fill.write(i, Umem::chunk_of(d.addr));
        }
        r.rx.release(got);
        r.fill.submit(got);
    }
    if r.fill.needs_wakeup() {
        bump(&xsk.rx_counters.wakeups, 1);
        xsk.wake_rx();
    }
    got as usize
}
