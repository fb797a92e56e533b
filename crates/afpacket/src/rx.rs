//! Receive side: one socket per rx queue with a TPACKET_V3 ring mapped
//! into the switch, read without syscalls.
//!
//! The ring is `block_nr` blocks of `block_size` bytes. The kernel fills
//! one block at a time with variable-size frames and hands it to user
//! space (`block_status |= TP_STATUS_USER`) when it is full or when the
//! retire timer ([`RETIRE_BLOCK_MS`]) fires, whichever comes first. The
//! rx queue walks the frames of the oldest ready block across as many
//! bursts as it takes, copies each into a switch packet, and gives the
//! block back (`TP_STATUS_KERNEL`) once all its frames are out. Blocks are
//! used strictly in ring order, by both sides.
//!
//! Cost per packet: one pool allocation and one copy of the frame out of
//! the ring; per burst: one acquire load of the block status. At low rates
//! a frame waits for the retire timer, so a lone frame's latency is about
//! that timer (measured figures: `bench/README.md`, AF_PACKET).

use crate::block::{BlockWalk, OFF_BLOCK_STATUS};
use crate::shared::{RxCounters, bump};
use nfv_mem::{Batch, Mapping, PoolCache};
use nfv_ports::RxQueue;
use std::os::fd::OwnedFd;
use std::sync::atomic::{
    AtomicU32,
    Ordering::{Acquire, Release},
};
use std::sync::{Arc, Mutex};

/// How long the kernel keeps a partly filled block before handing it
/// over (`tp_retire_blk_tov`, milliseconds).
pub const RETIRE_BLOCK_MS: u32 = 1;

/// Largest block the ring is carved into.
const MAX_BLOCK: usize = 128 << 10;
/// Fewest blocks a ring has (the kernel fills one while the switch walks
/// another; more blocks smooth out bursts).
const MIN_BLOCKS: usize = 8;
/// Where the kernel puts a frame's Ethernet header relative to its
/// `tpacket3_hdr`: TPACKET_ALIGN(TPACKET3_HDRLEN + 16) - 14.
const MAC_OFFSET: usize = 82;

/// The shape of an rx ring (`struct tpacket_req3`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub block_size: usize,
    pub block_nr: usize,
    /// Nominal frame slot: a power of two holding a frame of the
    /// interface's largest size and its header. Frames are packed by
    /// their real size, so a ring holds `frame_nr` full-size frames and
    /// many more small ones.
    pub frame_size: usize,
    pub frame_nr: usize,
}

impl Geometry {
    /// A ring of `frames` slots (a power of two) for frames up to
    /// `max_frame` bytes, in blocks that are powers of two between a page
    /// and 128 KiB, at least 8 of them when the ring is big enough.
    pub fn new(frames: usize, max_frame: usize, page: usize) -> Geometry {
        let frame_size = (MAC_OFFSET + max_frame).next_power_of_two();
        let bytes = frames * frame_size;
        let block_size = (bytes / MIN_BLOCKS)
            .min(MAX_BLOCK)
            .max(frame_size)
            .max(page)
            .next_power_of_two();
        let block_nr = (bytes / block_size).max(1);
        Geometry {
            block_size,
            block_nr,
            frame_size,
            frame_nr: block_nr * (block_size / frame_size),
        }
    }

    pub fn bytes(&self) -> usize {
        self.block_size * self.block_nr
    }

    pub fn req(&self) -> libc::tpacket_req3 {
        libc::tpacket_req3 {
            tp_block_size: self.block_size as u32,
            tp_block_nr: self.block_nr as u32,
            tp_frame_size: self.frame_size as u32,
            tp_frame_nr: self.frame_nr as u32,
            tp_retire_blk_tov: RETIRE_BLOCK_MS,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        }
    }
}

/// A mapped TPACKET_V3 ring and the position of the walk through it.
/// Moves into the rx queue that reads it and back into the port when that
/// queue is dropped, so a reopened queue carries on where the last one
/// stopped (a half-walked block stays owned by user space until walked).
pub struct RxRing {
    map: Mapping,
    geometry: Geometry,
    /// The block being walked, or the next one the kernel will hand over.
    cur: usize,
    /// Position in `cur` while it is owned by user space.
    walk: Option<BlockWalk>,
    /// Keeps the socket open while the ring is mapped (dropped after
    /// `map`: fields drop in declaration order).
    _fd: Arc<OwnedFd>,
}

impl RxRing {
    pub fn new(map: Mapping, geometry: Geometry, fd: Arc<OwnedFd>) -> RxRing {
        assert!(map.len() >= geometry.bytes());
        RxRing {
            map,
            geometry,
            cur: 0,
            walk: None,
            _fd: fd,
        }
    }

    #[inline(always)]
    fn status(&self, block: usize) -> &AtomicU32 {
        debug_assert!(block < self.geometry.block_nr);
        // SAFETY: the block lies inside the mapping (block < block_nr), its
        // start is page aligned, so `block_status` at offset 8 is a 4-byte
        // aligned u32 that lives as long as `self.map`. The kernel accesses
        // it concurrently, which is what the atomic type is for.
        unsafe {
            &*self
                .map
                .as_ptr()
                .add(block * self.geometry.block_size + OFF_BLOCK_STATUS)
                .cast::<AtomicU32>()
        }
    }

    /// The current block if the kernel has handed it to user space.
    #[inline(always)]
    fn user_block(&self) -> Option<&[u8]> {
        if self.status(self.cur).load(Acquire) & libc::TP_STATUS_USER == 0 {
            return None;
        }
        // SAFETY: the block lies inside the mapping. The kernel set
        // TP_STATUS_USER (the acquire load above orders its writes of the
        // block before our reads) and does not write a block user space
        // owns until `release_block` stores TP_STATUS_KERNEL, which takes
        // `&mut self` and so cannot overlap this borrow.
        Some(unsafe {
            std::slice::from_raw_parts(
                self.map.as_ptr().add(self.cur * self.geometry.block_size),
                self.geometry.block_size,
            )
        })
    }

    /// Gives the current block back to the kernel and moves to the next.
    #[inline]
    fn release_block(&mut self) {
        // Release: every read of the block above happens before the kernel
        // may refill it.
        self.status(self.cur).store(libc::TP_STATUS_KERNEL, Release);
        self.cur += 1;
        if self.cur == self.geometry.block_nr {
            self.cur = 0;
        }
        self.walk = None;
    }

    /// Copies up to `batch.remaining_capacity()` frames into fresh
    /// packets. A frame stays in the ring when the pool is empty.
    #[inline]
    pub fn burst(&mut self, batch: &mut Batch, pool: &mut PoolCache, c: &RxCounters) -> usize {
        let mut n = 0;
        while !batch.is_full() {
            let Some(block) = self.user_block() else {
                break;
            };
            let mut walk = match self.walk {
                Some(w) => w,
                None => match BlockWalk::start(block) {
                    Ok(w) => w,
                    Err(e) => {
                        bump(&c.bad_blocks, 1);
                        bump(&c.bad_frames, u64::from(e.lost));
                        self.release_block();
                        continue;
                    }
                },
            };
            // Frames of this block until the batch is full or the pool
            // runs dry.
            let mut dry = false;
            while walk.remaining() > 0 && !batch.is_full() {
                let Some(mut pkt) = pool.alloc() else {
                    dry = true;
                    break;
                };
                match walk.next_frame(block) {
                    Some(Ok(f)) => {
                        let len = f.data.len();
                        if f.truncated() {
                            bump(&c.truncated, 1);
                            pool.free(pkt);
                        } else if len > pkt.max_len() {
                            bump(&c.oversize, 1);
                            pool.free(pkt);
                        } else {
                            pkt.room_mut()[..len].copy_from_slice(f.data);
                            // Cannot fail: len <= max_len was checked.
                            let _ = pkt.set_len(len);
                            batch.push(pkt);
                            n += 1;
                        }
                    }
                    Some(Err(e)) => {
                        bump(&c.bad_blocks, 1);
                        bump(&c.bad_frames, u64::from(e.lost));
                        pool.free(pkt);
                    }
                    None => pool.free(pkt),
                }
            }
            if walk.remaining() == 0 {
                bump(&c.blocks, 1);
                self.release_block();
            } else {
                self.walk = Some(walk);
            }
            if dry {
                break;
            }
        }
        n
    }
}

/// Where a port keeps a ring while no rx queue holds it.
pub type RingSlot = Arc<Mutex<Option<RxRing>>>;

/// An rx queue of an AF_PACKET port.
pub struct AfPacketRx {
    ring: Option<RxRing>,
    home: RingSlot,
    counters: Arc<RxCounters>,
}

impl AfPacketRx {
    /// Takes the ring out of `home` (`None` in it: the queue is already
    /// open elsewhere, and this one receives nothing).
    pub fn new(home: RingSlot, counters: Arc<RxCounters>) -> AfPacketRx {
        let ring = home.lock().unwrap_or_else(|p| p.into_inner()).take();
        AfPacketRx {
            ring,
            home,
            counters,
        }
    }

    pub fn has_ring(&self) -> bool {
        self.ring.is_some()
    }
}

impl RxQueue for AfPacketRx {
    #[inline]
    fn rx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        match &mut self.ring {
            Some(r) => r.burst(batch, pool, &self.counters),
            None => 0,
        }
    }
}

impl Drop for AfPacketRx {
    fn drop(&mut self) {
        if let Some(r) = self.ring.take() {
            *self.home.lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_fits_the_kernel_rules() {
        // (ring frames, max frame) -> (block size, blocks, frame slot)
        for (frames, max_frame, want) in [
            (4096, 1518, (128 << 10, 64, 2048)),
            (64, 1518, (16 << 10, 8, 2048)),
            (65536, 1518, (128 << 10, 1024, 2048)),
            (64, 9018, (128 << 10, 8, 16384)),
            (4096, 9018, (128 << 10, 512, 16384)),
        ] {
            let g = Geometry::new(frames, max_frame, 4096);
            assert_eq!(
                (g.block_size, g.block_nr, g.frame_size),
                want,
                "{frames} {max_frame}"
            );
            // What packet_set_ring checks for TPACKET_V3.
            assert_eq!(g.block_size % 4096, 0);
            assert!(g.block_size >= g.frame_size);
            assert_eq!(g.frame_size % 16, 0);
            assert_eq!(g.frame_nr, g.block_nr * (g.block_size / g.frame_size));
            assert_eq!(g.frame_nr, frames);
            assert!(g.frame_size >= MAC_OFFSET + max_frame);
        }
        // Large pages: blocks are at least a page.
        let g = Geometry::new(64, 1518, 65536);
        assert_eq!(g.block_size, 65536);
        assert_eq!(g.block_size % 65536, 0);
        assert_eq!(g.frame_nr, g.block_nr * (g.block_size / g.frame_size));
    }
}
