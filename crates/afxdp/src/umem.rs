//! Memory shared with the kernel: the UMEM (packet frames) and the ring
//! mappings of a socket. Every access to frame bytes goes through the
//! bounds-checked copies here, so the rx and tx code needs no `unsafe`.
//!
//! Frame layout of one queue's UMEM (aligned chunks of [`CHUNK_SIZE`]):
//! frames `0..ring_size` belong to rx (they circulate fill ring → kernel →
//! rx ring → back to the fill ring), frames `ring_size..2 * ring_size` to
//! tx (free list → tx ring → completion ring → free list). Neither side
//! ever touches the other's frames.

use nfv_mem::Mapping;
use nfv_mem::hint::prefetch;
use std::io;

/// Bytes per UMEM frame ("chunk"). Aligned mode needs a power of two
/// between 2048 and the page size.
pub const CHUNK_SIZE: usize = 2048;

/// What the kernel reserves in front of every received frame
/// (`XDP_PACKET_HEADROOM`): rx data starts this far into its chunk.
pub const XDP_PACKET_HEADROOM: usize = 256;

/// Largest frame the kernel delivers into one chunk (Ethernet header
/// included, no FCS): `CHUNK_SIZE - XDP_PACKET_HEADROOM` (the UMEM
/// registers no extra headroom).
pub const RX_FRAME_MAX: usize = CHUNK_SIZE - XDP_PACKET_HEADROOM;

/// Where tx data starts in its chunk. Tx needs no headroom in copy mode,
/// so a transmitted frame may use the whole chunk.
pub const TX_OFFSET: usize = 0;

/// One queue's frame memory.
pub struct Umem {
    map: Mapping,
    frames: u32,
}

impl Umem {
    /// `frames` chunks of [`CHUNK_SIZE`] bytes.
    pub fn new(frames: u32) -> io::Result<Umem> {
        Ok(Umem {
            map: Mapping::anonymous(frames as usize * CHUNK_SIZE)?,
            frames,
        })
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.map.as_ptr()
    }
    pub fn len(&self) -> usize {
        self.map.len()
    }
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
    pub fn frames(&self) -> u32 {
        self.frames
    }

    /// UMEM address of the start of frame `i`.
    #[inline(always)]
    pub fn frame_addr(i: u32) -> u64 {
        i as u64 * CHUNK_SIZE as u64
    }

    /// The start of the chunk `addr` points into (aligned mode: any
    /// address inside a chunk names that chunk).
    #[inline(always)]
    pub fn chunk_of(addr: u64) -> u64 {
        addr & !(CHUNK_SIZE as u64 - 1)
    }

    /// Whether `len` bytes at `addr` lie inside one chunk of this UMEM.
    #[inline(always)]
    fn in_bounds(&self, addr: u64, len: usize) -> bool {
        let end = addr.wrapping_add(len as u64);
        end >= addr
            && end <= self.len() as u64
            && (len == 0 || Self::chunk_of(addr) == Self::chunk_of(end - 1))
    }

    /// Copies `dst.len()` bytes at `addr` into `dst`. False (nothing
    /// copied) if the range leaves its chunk or the UMEM.
    ///
    /// The caller owns the frame (it came off the rx ring and is not yet
    /// back on the fill ring), so the kernel does not write it meanwhile.
    #[inline(always)]
    pub fn read_into(&self, addr: u64, dst: &mut [u8]) -> bool {
        if !self.in_bounds(addr, dst.len()) {
            return false;
        }
        // SAFETY: the range is inside the mapping (checked above) and
        // cannot overlap `dst`, which is switch memory.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.as_ptr().add(addr as usize),
                dst.as_mut_ptr(),
                dst.len(),
            )
        };
        true
    }

    /// Copies `src` into the UMEM at `addr`. False (nothing copied) if the
    /// range leaves its chunk or the UMEM.
    ///
    /// The caller owns the frame (taken from its tx free list), so neither
    /// the kernel nor another queue reads or writes it meanwhile.
    #[inline(always)]
    pub fn write_from(&self, addr: u64, src: &[u8]) -> bool {
        if !self.in_bounds(addr, src.len()) {
            return false;
        }
        // SAFETY: the range is inside the mapping (checked above) and
        // cannot overlap `src`, which is switch memory.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.as_ptr().add(addr as usize), src.len())
        };
        true
    }

    /// Cache hint for the bytes at `addr` (ignored if out of range).
    #[inline(always)]
    pub fn prefetch(&self, addr: u64) {
        if addr < self.len() as u64 {
            // A prefetch never faults; the address is inside the mapping
            // anyway.
            prefetch(self.as_ptr().wrapping_add(addr as usize));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_stay_inside_one_chunk_and_the_umem() {
        let u = Umem::new(4).unwrap();
        let mut buf = [0u8; 64];
        assert!(u.write_from(Umem::frame_addr(1) + 10, &[7; 64]));
        assert!(u.read_into(Umem::frame_addr(1) + 10, &mut buf));
        assert_eq!(buf, [7; 64]);
        // The last byte of a chunk is fine, one more crosses into the next.
        let end = Umem::frame_addr(2);
        assert!(u.read_into(end - 64, &mut buf));
        assert!(!u.read_into(end - 63, &mut buf));
        // Past the end, and address overflow.
        assert!(!u.read_into(Umem::frame_addr(4), &mut buf));
        assert!(!u.read_into(u64::MAX - 10, &mut buf));
        assert!(!u.write_from(Umem::frame_addr(3) + 2000, &[0; 64]));
        // A whole chunk fits.
        assert!(u.write_from(Umem::frame_addr(3), &[1; CHUNK_SIZE]));
        assert!(u.read_into(Umem::frame_addr(4), &mut []));
    }

    #[test]
    fn chunk_of_masks_rx_offsets() {
        assert_eq!(
            Umem::chunk_of(Umem::frame_addr(5) + 256),
            Umem::frame_addr(5)
        );
        assert_eq!(Umem::chunk_of(Umem::frame_addr(5)), Umem::frame_addr(5));
        assert_eq!(RX_FRAME_MAX, 1792);
    }
}
