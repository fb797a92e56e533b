//! The VNF's own shared memory, as DPDK virtio-user owns it: a packet pool
//! on a memfd (normal pages: no hugepages, no root) and a second memfd for
//! the virtqueue rings. Both are handed to the switch in SET_MEM_TABLE with
//! guest address == user address == our virtual address, so a descriptor's
//! address is simply a pointer in this process.
//!
//! Thread safety: `SharedMemory` is set up once, then only read; the ring
//! bytes are owned by the virtqueues laid out in them.

use nfv_mem::{HugepageMode, MemoryConfig, PacketPool, Region};
use nfv_virtio::layout::{RingAddrs, layout_rings, ring_area_bytes};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use vhost::VhostUserMemoryRegionInfo;

const PAGE: usize = 4096;

/// Bytes reserved per virtqueue: nfv-virtio's ring area, on whole pages
/// so no two queues share a page.
fn vq_bytes(size: u16) -> usize {
    ring_area_bytes(size).next_multiple_of(PAGE)
}

/// Frames the pool needs: every ring full, a burst in flight per queue,
/// and the per-thread cache's slack.
pub fn frames_needed(queues: u16, ring_size: u16) -> usize {
    let per_queue = 2 * ring_size as usize + 2 * nfv_mem::BATCH;
    (queues as usize * per_queue + 1024).next_power_of_two()
}

#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    #[error("packet pool: {0}")]
    Pool(#[from] nfv_mem::PoolError),
    #[error("ring memory: {0}")]
    Rings(#[from] nfv_mem::RegionError),
    #[error("ring layout: {0}")]
    Layout(#[from] nfv_virtio::layout::LayoutError),
}

pub struct SharedMemory {
    pool: Arc<PacketPool>,
    rings: Region,
    ring_size: u16,
    vqs: Vec<RingAddrs>,
}

impl SharedMemory {
    /// Maps the pool and the rings for `queues` pairs of `ring_size`, laid
    /// out as packed rings when `packed`.
    pub fn new(queues: u16, ring_size: u16, packed: bool) -> Result<SharedMemory, MemoryError> {
        let pool = PacketPool::new(
            "nfv-vnf-packets",
            &MemoryConfig {
                frame_size: 2048,
                frames: frames_needed(queues, ring_size),
                hugepages: HugepageMode::Never,
            },
        )?;
        let per_vq = vq_bytes(ring_size);
        let n_vqs = 2 * queues as usize;
        let rings = Region::new("nfv-vnf-rings", n_vqs * per_vq, HugepageMode::Never)?;
        let base = rings.base().as_ptr() as u64;
        let layout = |at: u64| {
            if packed {
                nfv_virtio::packed::layout_packed(at, per_vq, ring_size)
            } else {
                layout_rings(at, per_vq, ring_size)
            }
        };
        let vqs = (0..n_vqs)
            .map(|i| layout(base + (i * per_vq) as u64))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(SharedMemory {
            pool,
            rings,
            ring_size,
            vqs,
        })
    }

    pub fn pool(&self) -> &Arc<PacketPool> {
        &self.pool
    }

    /// Ring addresses of virtqueue `vq` (rx = 2i, tx = 2i+1).
    pub fn vq(&self, vq: usize) -> RingAddrs {
        self.vqs[vq]
    }

    /// The ring area of virtqueue `vq` as a raw byte range (for the
    /// driver queue to lay its rings out in).
    pub fn vq_area(&self, vq: usize) -> (*mut u8, usize) {
        (self.vqs[vq].desc as *mut u8, vq_bytes(self.ring_size))
    }

    /// Descriptors per virtqueue.
    pub fn ring_size(&self) -> u16 {
        self.ring_size
    }

    /// Zeroes every ring, for a fresh session after a disconnect.
    pub fn clear_rings(&mut self) {
        // SAFETY: the region is ours, mapped read/write for `len` bytes, and
        // no virtqueue is alive while `&mut self` is held by the caller
        // (queues are dropped before a new session is set up). A peer still
        // mapping it may read zeros, which is a valid empty ring.
        unsafe { std::ptr::write_bytes(self.rings.base().as_ptr(), 0, self.rings.len()) };
    }

    /// The regions for SET_MEM_TABLE: packet pool and rings, gpa == uva.
    pub fn mem_table(&self) -> Vec<VhostUserMemoryRegionInfo> {
        [self.pool.region(), &self.rings]
            .into_iter()
            .map(|r| {
                let addr = r.base().as_ptr() as u64;
                VhostUserMemoryRegionInfo {
                    guest_phys_addr: addr,
                    memory_size: r.len() as u64,
                    userspace_addr: addr,
                    mmap_offset: 0,
                    mmap_handle: r.fd().as_raw_fd(),
                }
            })
            .collect()
    }

    /// `(gpa, uva, host pointer, len)` of each region, the form
    /// `nfv_virtio::memory::GuestMemory::from_raw` takes.
    pub fn raw_regions(&self) -> Vec<(u64, u64, *mut u8, usize)> {
        [self.pool.region(), &self.rings]
            .into_iter()
            .map(|r| {
                let p = r.base().as_ptr();
                (p as u64, p as u64, p, r.len())
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_disjoint_aligned_and_inside_the_rings_region() {
        let m = SharedMemory::new(2, 256, false).unwrap();
        let t = m.mem_table();
        assert_eq!(t.len(), 2);
        let rings = t[1];
        for r in &t {
            assert_eq!(r.guest_phys_addr, r.userspace_addr);
            assert!(r.mmap_handle >= 0 && r.memory_size > 0);
        }
        let mut last_end = rings.userspace_addr;
        for i in 0..4 {
            let a = m.vq(i);
            assert_eq!(a.desc % 4096, 0, "each queue on its own pages");
            assert!(a.desc >= last_end);
            assert!(a.avail >= a.desc + 16 * 256);
            assert!(a.avail + 6 + 2 * 256 <= a.used);
            last_end = a.used + 6 + 8 * 256;
            let (p, len) = m.vq_area(i);
            assert_eq!(p as u64, a.desc);
            assert!(a.desc + len as u64 <= rings.userspace_addr + rings.memory_size);
        }
        assert!(m.pool().frames() >= 2 * (2 * 256 + 64));
    }
}
