//! Memory shared with the kernel: the UMEM (packet frames) and the ring
//! mappings of a socket. Every access to frame bytes goes through the
//! bounds-checked copies here, so the rx and tx code needs no `unsafe`.
//!
//! Frame layout of one queue's own frames (chunks of [`CHUNK_SIZE`] from
//! `own_off`): frames `0..ring_size` belong to rx (they circulate fill
//! ring → kernel → rx ring → back to the fill ring), frames
//! `ring_size..2 * ring_size` to tx (free list → tx ring → completion
//! ring → free list). Neither side ever touches the other's frames.
//!
//! A UMEM is either only those frames (aligned chunks, the usual case) or
//! a VNF's guest memory followed by them ([`Umem::over_guest`], unaligned
//! chunks, see `guest_umem.rs`). The bounds-checked copies reach only the
//! own frames: guest bytes are read and written through the guest's own
//! mappings by the virtio code.

pub use crate::chunk::{CHUNK_SIZE, RX_FRAME_MAX, TX_OFFSET, XDP_PACKET_HEADROOM};
use crate::guest_umem::{GuestArea, Placement};
use nfv_mem::Mapping;
use nfv_mem::hint::prefetch;
use nfv_virtio::GuestMemory;
use std::io;

/// In unaligned mode a descriptor address carries the data's offset from
/// the chunk address in bits 48..64 (`XSK_UNALIGNED_BUF_OFFSET_SHIFT`).
const OFFSET_SHIFT: u32 = 48;
const ADDR_MASK: u64 = (1 << OFFSET_SHIFT) - 1;

/// The memory a `Umem` keeps mapped (only held, never read: `base`
/// points into it).
enum Backing {
    Own(#[allow(dead_code)] Mapping),
    Guest(Box<GuestArea>),
}

/// One queue's frame memory.
pub struct Umem {
    backing: Backing,
    base: *mut u8,
    len: usize,
    own_off: u64,
    frames: u32,
    /// Over guest memory: where frames land in guest buffers.
    placement: Option<Placement>,
}

// SAFETY: `base` points into `backing`, which this value owns; the bytes
// are shared with the kernel under the ring protocols, never referenced.
unsafe impl Send for Umem {}
// SAFETY: as above; `&self` methods copy through bounds-checked ranges of
// frames the caller owns by the ring protocol.
unsafe impl Sync for Umem {}

impl Umem {
    /// `frames` chunks of [`CHUNK_SIZE`] bytes, aligned mode.
    pub fn new(frames: u32) -> io::Result<Umem> {
        let map = Mapping::anonymous(frames as usize * CHUNK_SIZE)?;
        Ok(Umem {
            base: map.as_ptr(),
            len: map.len(),
            backing: Backing::Own(map),
            own_off: 0,
            frames,
            placement: None,
        })
    }

    /// `mem`'s regions followed by `frames` own chunks, unaligned mode,
    /// with the headroom of `placement`.
    pub fn over_guest(mem: &GuestMemory, frames: u32, placement: Placement) -> io::Result<Umem> {
        let area = GuestArea::map(mem, frames as usize * CHUNK_SIZE)?;
        Ok(Umem {
            base: area.base(),
            len: area.len(),
            own_off: area.own_off(),
            backing: Backing::Guest(Box::new(area)),
            frames,
            placement: Some(placement),
        })
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.base
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn frames(&self) -> u32 {
        self.frames
    }

    /// The guest memory view and its placement, for a UMEM over a guest.
    pub fn guest(&self) -> Option<(&GuestArea, Placement)> {
        match (&self.backing, self.placement) {
            (Backing::Guest(a), Some(p)) => Some((a, p)),
            _ => None,
        }
    }

    /// The `XDP_UMEM_REG` argument for this memory.
    pub fn registration(&self) -> libc::xdp_umem_reg {
        libc::xdp_umem_reg {
            addr: self.base as u64,
            len: self.len as u64,
            chunk_size: CHUNK_SIZE as u32,
            headroom: self.placement.map_or(0, |p| p.headroom),
            flags: if self.placement.is_some() {
                libc::XDP_UMEM_UNALIGNED_CHUNK_FLAG
            } else {
                0
            },
            tx_metadata_len: 0,
        }
    }

    /// UMEM address of the start of own frame `i`.
    #[inline(always)]
    pub fn frame_addr(&self, i: u32) -> u64 {
        self.own_off + i as u64 * CHUNK_SIZE as u64
    }

    /// The chunk address of a descriptor or completion address: its low
    /// 48 bits rounded down to a chunk (own frames are chunk-aligned in
    /// both modes).
    #[inline(always)]
    pub fn chunk_of(addr: u64) -> u64 {
        addr & ADDR_MASK & !(CHUNK_SIZE as u64 - 1)
    }

    /// The address a fill entry was posted with (unaligned mode: the low
    /// 48 bits of the rx descriptor's address).
    #[inline(always)]
    pub fn fill_of(addr: u64) -> u64 {
        addr & ADDR_MASK
    }

    /// Where a received frame's data starts: the descriptor's address,
    /// with an unaligned-mode offset (bits 48..64) added.
    #[inline(always)]
    pub fn data_addr(addr: u64) -> u64 {
        (addr & ADDR_MASK) + (addr >> OFFSET_SHIFT)
    }

    /// Whether `len` bytes at `addr` lie inside one own chunk.
    #[inline(always)]
    fn in_bounds(&self, addr: u64, len: usize) -> bool {
        let end = addr.wrapping_add(len as u64);
        addr >= self.own_off
            && end >= addr
            && end <= self.len as u64
            && (len == 0 || Self::chunk_of(addr) == Self::chunk_of(end - 1))
    }

    /// Copies `dst.len()` bytes at `addr` into `dst`. False (nothing
    /// copied) if the range leaves its chunk or the own frames.
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

    /// Copies the whole frame of `p` — its head, then its tail if it is
    /// split (still in the sender's buffer) — into the UMEM at `addr`: one
    /// copy of each byte. False (nothing copied) if the frame does not fit
    /// the chunk. Same ownership rule as [`Umem::write_from`].
    #[inline(always)]
    pub fn write_frame(&self, addr: u64, p: &nfv_mem::Packet) -> bool {
        let head = p.data();
        let (tail, tail_len) = p.tail();
        if !self.in_bounds(addr, head.len() + tail_len) {
            return false;
        }
        let dst = self.as_ptr().wrapping_add(addr as usize);
        // SAFETY: the range is inside the mapping (checked above) and the
        // frame is ours; the head is switch memory; the tail is readable
        // until the burst that produced the packet ends (`Packet::set_tail`
        // contract: we are inside it) and is only copied, never borrowed.
        unsafe {
            std::ptr::copy_nonoverlapping(head.as_ptr(), dst, head.len());
            if tail_len != 0 {
                std::ptr::copy(tail, dst.add(head.len()), tail_len);
            }
        }
        true
    }

    /// Copies `src` into the UMEM at `addr`. False (nothing copied) if the
    /// range leaves its chunk or the own frames.
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
        if addr < self.len as u64 {
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
        assert!(u.write_from(u.frame_addr(1) + 10, &[7; 64]));
        assert!(u.read_into(u.frame_addr(1) + 10, &mut buf));
        assert_eq!(buf, [7; 64]);
        // The last byte of a chunk is fine, one more crosses into the next.
        let end = u.frame_addr(2);
        assert!(u.read_into(end - 64, &mut buf));
        assert!(!u.read_into(end - 63, &mut buf));
        // Past the end, and address overflow.
        assert!(!u.read_into(u.frame_addr(4), &mut buf));
        assert!(!u.read_into(u64::MAX - 10, &mut buf));
        assert!(!u.write_from(u.frame_addr(3) + 2000, &[0; 64]));
        // A whole chunk fits.
        assert!(u.write_from(u.frame_addr(3), &[1; CHUNK_SIZE]));
        assert!(u.read_into(u.frame_addr(4), &mut []));
    }

    #[test]
    fn chunk_of_masks_rx_offsets() {
        let u = Umem::new(8).unwrap();
        assert_eq!(Umem::chunk_of(u.frame_addr(5) + 256), u.frame_addr(5));
        assert_eq!(Umem::chunk_of(u.frame_addr(5)), u.frame_addr(5));
        // Unaligned-mode descriptors: offset in the top 16 bits.
        let d = (530u64 << 48) | 0x1234_5678;
        assert_eq!(Umem::data_addr(d), 0x1234_5678 + 530);
        assert_eq!(Umem::fill_of(d), 0x1234_5678);
        assert_eq!(Umem::data_addr(0x800), 0x800);
        assert_eq!(RX_FRAME_MAX, 1792);
    }
}
