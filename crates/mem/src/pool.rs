//! The packet pool: fixed-size frames carved from one [`Region`], a shared
//! lock-free free list, and per-thread caches in front of it (the DPDK
//! mempool pattern). Steady-state alloc/free touches only the thread's own
//! cache: no atomics, no locks, no syscalls.
//!
//! Thread safety: `PacketPool` is shared (`Arc`) and lock-free
//! (`ArrayQueue`); each `PoolCache` belongs to one thread.

use crate::owner::{self, BufferOwner, OwnerId};
use crate::packet::{BATCH, Batch, HEADROOM, Packet};
use crate::region::{Backing, HugepageMode, Region, RegionError};
use crossbeam_queue::ArrayQueue;
use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::sync::{Arc, Weak};

/// Frames a thread keeps for itself before spilling to the shared list.
const CACHE_MAX: usize = 512;
/// Frames moved between a cache and the shared list at a time.
const CACHE_BULK: usize = 128;
// `free_front` makes room for a whole batch with one `spill`.
const _: () = assert!(BATCH <= CACHE_BULK);

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryConfig {
    /// Bytes per frame buffer including headroom: power of two, 2048..=65536.
    pub frame_size: usize,
    /// Number of frames in the pool, 1024..=4_194_304.
    pub frames: usize,
    pub hugepages: HugepageMode,
}

impl MemoryConfig {
    /// `frames` frames of `frame_size` bytes on ordinary pages: what tests
    /// and tools that must not take hugepages ask for.
    pub const fn plain(frame_size: usize, frames: usize) -> MemoryConfig {
        MemoryConfig {
            frame_size,
            frames,
            hugepages: HugepageMode::Never,
        }
    }
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            frame_size: 2048,
            frames: 32768,
            hugepages: HugepageMode::Auto,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    #[error("memory.frame_size {0} must be a power of two in 2048..=65536")]
    FrameSize(usize),
    #[error("memory.frames {0} must be in 64..=4194304")]
    Frames(usize),
    #[error(transparent)]
    Region(#[from] RegionError),
}

pub struct PacketPool {
    region: ManuallyDrop<Region>,
    frame_size: u32,
    frames: u32,
    free: ArrayQueue<u32>,
    owner: OwnerId,
}

impl std::fmt::Debug for PacketPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PacketPool")
            .field("frame_size", &self.frame_size)
            .field("frames", &self.frames)
            .field("free", &self.free.len())
            .field("backing", &self.region.backing())
            .finish()
    }
}

impl BufferOwner for PacketPool {
    fn release(&self, token: u32) {
        // Cannot fail: the queue holds every frame index at most once.
        let _ = self.free.push(token);
    }
}

impl PacketPool {
    pub fn new(name: &str, cfg: &MemoryConfig) -> Result<Arc<PacketPool>, PoolError> {
        if !cfg.frame_size.is_power_of_two() || !(2048..=65536).contains(&cfg.frame_size) {
            return Err(PoolError::FrameSize(cfg.frame_size));
        }
        if !(64..=4_194_304).contains(&cfg.frames) {
            return Err(PoolError::Frames(cfg.frames));
        }
        let region = Region::new(name, cfg.frame_size * cfg.frames, cfg.hugepages)?;
        tracing::info!(
            "packet memory: {} frames x {} B = {} MiB on {}",
            cfg.frames,
            cfg.frame_size,
            region.len() >> 20,
            region.backing().as_str()
        );
        let free = ArrayQueue::new(cfg.frames);
        for i in 0..cfg.frames as u32 {
            let _ = free.push(i);
        }
        Ok(Arc::new_cyclic(|me: &Weak<PacketPool>| PacketPool {
            region: ManuallyDrop::new(region),
            frame_size: cfg.frame_size as u32,
            frames: cfg.frames as u32,
            free,
            owner: owner::register(me.clone() as Weak<dyn BufferOwner>),
        }))
    }

    pub fn frame_size(&self) -> usize {
        self.frame_size as usize
    }
    pub fn frames(&self) -> usize {
        self.frames as usize
    }
    pub fn owner(&self) -> OwnerId {
        self.owner
    }
    pub fn backing(&self) -> Backing {
        self.region.backing()
    }
    pub fn region(&self) -> &Region {
        &self.region
    }
    /// Frames on the shared free list (not counting per-thread caches).
    pub fn shared_free(&self) -> usize {
        self.free.len()
    }
    /// A new per-thread cache.
    pub fn cache(self: &Arc<Self>) -> PoolCache {
        PoolCache {
            base: self.region.base(),
            frame_size: self.frame_size,
            owner: self.owner,
            local: Vec::with_capacity(CACHE_MAX + CACHE_BULK),
            alloc_failures: 0,
            pool: self.clone(),
        }
    }
}

impl Drop for PacketPool {
    fn drop(&mut self) {
        // Caches hold an `Arc`, so they are gone; frames missing now are
        // held by packets that outlived the pool. Unmapping would leave
        // them dangling, so keep the mapping (a bounded, logged leak).
        let outstanding = self.frames as usize - self.free.len();
        if outstanding == 0 {
            // SAFETY: no packet refers to the region any more.
            unsafe { ManuallyDrop::drop(&mut self.region) };
        } else {
            tracing::warn!(
                "packet pool dropped with {outstanding} frames in use; keeping its memory mapped"
            );
        }
    }
}

/// One thread's window onto a pool. Not `Sync`; owned by a PMD or port.
pub struct PoolCache {
    base: NonNull<u8>,
    frame_size: u32,
    owner: OwnerId,
    local: Vec<u32>,
    alloc_failures: u64,
    pool: Arc<PacketPool>,
}

// SAFETY: `base` points into the pool's region which this cache keeps
// alive through `pool`; the cache is used by one thread at a time.
unsafe impl Send for PoolCache {}

impl PoolCache {
    pub fn pool(&self) -> &Arc<PacketPool> {
        &self.pool
    }
    /// Allocation attempts that found the pool empty.
    pub fn alloc_failures(&self) -> u64 {
        self.alloc_failures
    }
    /// Frames held by this cache.
    pub fn cached(&self) -> usize {
        self.local.len()
    }

    #[inline(always)]
    fn packet(&self, idx: u32) -> Packet {
        let off = idx as usize * self.frame_size as usize;
        // SAFETY: `idx < frames`, so the frame lies inside the region; the
        // index came off a free list, so no other packet uses this frame.
        unsafe {
            Packet::from_raw(
                NonNull::new_unchecked(self.base.as_ptr().add(off)),
                self.frame_size,
                HEADROOM as u16,
                0,
                self.owner,
                idx,
            )
        }
    }

    #[cold]
    fn refill(&mut self) -> bool {
        for _ in 0..CACHE_BULK {
            match self.pool.free.pop() {
                Some(i) => self.local.push(i),
                None => break,
            }
        }
        !self.local.is_empty()
    }

    #[cold]
    fn spill(&mut self) {
        for i in self.local.drain(CACHE_MAX - CACHE_BULK..) {
            let _ = self.pool.free.push(i);
        }
    }

    /// One fresh, empty packet (data starts after [`HEADROOM`]).
    #[inline]
    pub fn alloc(&mut self) -> Option<Packet> {
        if self.local.is_empty() && !self.refill() {
            self.alloc_failures += 1;
            return None;
        }
        let idx = self.local.pop()?;
        Some(self.packet(idx))
    }

    /// Appends up to `n` fresh packets to `batch`; returns how many.
    #[inline]
    pub fn alloc_into(&mut self, batch: &mut Batch, n: usize) -> usize {
        let want = n.min(batch.remaining_capacity());
        let mut got = 0;
        while got < want {
            match self.alloc() {
                Some(p) => {
                    batch.push(p);
                    got += 1;
                }
                None => break,
            }
        }
        got
    }

    /// Frees one packet: to this cache if it is ours, else to its owner.
    #[inline]
    pub fn free(&mut self, pkt: Packet) {
        if pkt.owner() == self.owner {
            if self.local.len() >= CACHE_MAX {
                self.spill();
            }
            self.local.push(pkt.into_token());
        } else {
            pkt.release();
        }
    }

    /// Frees the first `n` packets of `batch` (the rest move to its
    /// front): [`PoolCache::free`] each, with the cache's room made once
    /// for all of them rather than checked a packet at a time.
    #[inline]
    pub fn free_front(&mut self, batch: &mut Batch, n: usize) {
        // `spill` leaves CACHE_MAX - CACHE_BULK, and n <= BATCH < CACHE_BULK.
        if self.local.len() + n > CACHE_MAX {
            self.spill();
        }
        for p in batch.drain(..n) {
            if p.owner() == self.owner {
                self.local.push(p.into_token());
            } else {
                p.release();
            }
        }
    }

    /// Frees every packet in `batch`, leaving it empty.
    #[inline]
    pub fn free_batch(&mut self, batch: &mut Batch) {
        let n = batch.len();
        self.free_front(batch, n);
    }

    /// A copy of `pkt` in a fresh buffer of this pool (for sending one
    /// packet to several outputs). A split packet's head is copied and its
    /// tail shared: both stay valid as long as the original's.
    pub fn copy(&mut self, pkt: &Packet) -> Option<Packet> {
        let mut c = self.alloc()?;
        let len = pkt.len();
        let (tail, tail_len) = pkt.tail();
        if len + tail_len > c.max_len() {
            self.free(c);
            return None;
        }
        let _ = c.set_len(len);
        c.data_mut().copy_from_slice(pkt.data());
        // SAFETY: `pkt`'s tail is readable as long as `pkt`'s (its
        // `set_tail` contract), which is what this copy inherits; it fits
        // behind the head (checked above).
        unsafe { c.set_tail(tail, tail_len as u32) };
        c.set_in_port(pkt.in_port());
        if let Some(meta) = pkt.offload() {
            c.set_offload(meta);
        }
        Some(c)
    }
}

impl Drop for PoolCache {
    fn drop(&mut self) {
        for i in self.local.drain(..) {
            let _ = self.pool.free.push(i);
        }
    }
}
