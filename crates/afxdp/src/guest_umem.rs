//! A UMEM over a VNF's guest memory (IOVTee-style receive): the guest's
//! regions mapped again, back to back, into one reserved address range,
//! followed by frames of the switch's own, so one AF_XDP socket can
//! receive both straight into guest rx buffers and into its own frames.
//!
//! Why a second mapping: `XDP_UMEM_REG` takes one contiguous range and
//! pins it, while the guest's regions are mapped wherever `mmap` put them
//! (`nfv_virtio::GuestMemory`). The files the frontend sent are mapped
//! again here (`MAP_SHARED | MAP_FIXED` inside a `PROT_NONE` reservation),
//! so the kernel writes the very pages the guest reads. The switch itself
//! never reads or writes guest bytes through this view — it goes through
//! `GuestMemory`, whose mappings have the SIGBUS guard — only its own
//! frames at the end.
//!
//! Addresses (wave2 §2e): the UMEM is registered in unaligned-chunk mode
//! with chunks of [`CHUNK_SIZE`] and a headroom `h` chosen so the kernel's
//! largest write per chunk (`CHUNK_SIZE − h − 256`, the *frame room*) is
//! the largest frame the interface can carry. A frame lands at
//! `fill + h + 256`, so to put it right after the virtio-net header of a
//! guest buffer at UMEM offset `B` the fill address is
//! `B + hdr_len − 256 − h`; the buffer must hold `hdr_len` + frame room.
//! The bytes between the fill address and `B` belong to something else in
//! the guest; the kernel writes there only for XDP metadata, which the
//! built-in program never asks for.

use crate::chunk::{CHUNK_SIZE, XDP_PACKET_HEADROOM};
use arrayvec::ArrayVec;
use nfv_mem::{Commit, Mapping, Pages, Populate};
use nfv_virtio::memory::MAX_REGIONS;
use nfv_virtio::{GuestMemory, RegionFile};
use std::io;

/// Largest kernel headroom `XDP_UMEM_REG` accepts with 2 KiB chunks on
/// x86-64 (`chunk − 256 − sizeof(skb_shared_info) aligned − 128`).
pub const MAX_HEADROOM: usize = 1344;

/// Own memory before each guest region and after the last: more than a
/// chunk's lead (`256 + headroom − hdr_len` ≤ 1588) and its tail.
const GAP: u64 = 4096;

/// One guest region inside the UMEM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub gpa: u64,
    pub size: u64,
    /// UMEM offset of the region's first byte.
    pub umem_off: u64,
    /// The region file's page size (and alignment in the UMEM).
    pub page: u64,
}

/// Why a guest buffer cannot receive straight from the kernel (each is a
/// `zc_fallback` reason).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unfit {
    /// Shorter than the virtio-net header plus the frame room.
    ShortBuffer,
    /// Not inside one guest region, or too near the start or end of the
    /// UMEM for its chunk.
    OutsideUmem,
    /// Zero-copy driver bind: the chunk would cross a page the NIC may
    /// not see as contiguous (4 KiB pages; hugepages are contiguous).
    PageCross,
}

impl Unfit {
    pub fn as_str(self) -> &'static str {
        match self {
            Unfit::ShortBuffer => "short_buffer",
            Unfit::OutsideUmem => "outside_umem",
            Unfit::PageCross => "page_cross",
        }
    }
}

/// The reserved range with the guest's files mapped into it; unmapped on
/// drop (one `munmap` of the whole reservation removes every piece).
pub struct GuestArea {
    /// The reservation every piece is mapped into. Dropping it unmaps
    /// them all; the socket that registered the UMEM (and pinned its
    /// pages) is closed first by whoever owns both.
    map: Mapping,
    /// The UMEM's first byte, `map`'s start aligned up to the largest
    /// page size of the guest's files.
    base: *mut u8,
    /// UMEM length: the guest spans, then `own_len` bytes of own frames.
    len: usize,
    own_off: u64,
    spans: ArrayVec<Span, MAX_REGIONS>,
}

// SAFETY: the area is a plain address range owned by this value until
// drop; who may touch which bytes is decided by the ring protocols (the
// kernel writes posted chunks, the rx queue reads its own frames).
unsafe impl Send for GuestArea {}
// SAFETY: as above; `&self` methods only read immutable fields.
unsafe impl Sync for GuestArea {}

fn align_up(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}

/// One guest file's place in a [`GuestArea`]: its UMEM offset, the file
/// offset it is mapped from (page-aligned), the mapped length, and the
/// bytes of the first page before the region.
type Piece = (u64, u64, u64, u64);

/// Where the guest's files go in the UMEM ([`GuestArea::map`], step 1).
struct Layout {
    pieces: Vec<Piece>,
    /// The end of the last piece's trailing gap.
    end: u64,
    /// The largest page size of the files (and at least `page`).
    max_align: u64,
}

impl Layout {
    /// Layout first, so the reservation has the right size. A page of
    /// our own before each region and after the last keeps every
    /// buffer's chunk inside the UMEM, however near a region's edge
    /// the buffer sits.
    fn plan(files: &[RegionFile<'_>], page: u64) -> io::Result<Layout> {
        let mut cursor = GAP;
        let mut max_align = page;
        let mut plan = Vec::with_capacity(files.len());
        for f in files {
            let p = f.page_size.max(4096) as u64;
            max_align = max_align.max(p);
            let file_off = f.mmap_offset / p * p;
            let skip = f.mmap_offset - file_off;
            let map_len = align_up(skip + f.size, p);
            let at = align_up(cursor, p);
            plan.push((at, file_off, map_len, skip));
            cursor = at
                .checked_add(map_len + GAP)
                .ok_or_else(|| io::Error::other("guest memory too large for one UMEM"))?;
        }
        Ok(Layout {
            pieces: plan,
            end: cursor,
            max_align,
        })
    }
}

/// Map, step 2: a reservation with room for `len` bytes aligned to
/// `max_align`, anonymous memory over those bytes. Returns it and the
/// offset of the aligned start in it.
fn reserve(len: u64, max_align: u64) -> io::Result<(Mapping, usize)> {
    let raw_len = usize::try_from(len + max_align)
        .map_err(|_| io::Error::other("guest memory too large for one UMEM"))?;
    // An inaccessible reservation, so the pieces `map_files` adds land in
    // address space of our own.
    let map = Mapping::reserve(raw_len)?;
    let raw = map.as_ptr() as u64;
    // Inside the reservation: base_off < max_align.
    let base_off = (align_up(raw, max_align) - raw) as usize;
    // Everything the guest's files do not cover (the gaps, the own
    // frames) is our anonymous memory: the kernel pins the whole UMEM,
    // and an inaccessible page would fail the registration.
    // SAFETY: `[base_off, base_off + len)` lies in our fresh reservation
    // (raw_len = len + max_align covers it), which nothing uses yet.
    // On failure the reservation is dropped (unmapped) by `?`.
    unsafe {
        map.overlay(
            base_off,
            len as usize,
            Pages::Zeros {
                populate: Populate::OnTouch,
                commit: Commit::NoReserve,
            },
        )
    }?;
    Ok((map, base_off))
}

impl GuestArea {
    /// Maps every region of `mem` back to back (each at a multiple of its
    /// file's page size), then `own_len` bytes of anonymous memory at a
    /// page boundary. Fails if `mem` has no files (memory described with
    /// `GuestMemory::from_raw`) or a mapping fails.
    pub fn map(mem: &GuestMemory, own_len: usize) -> io::Result<GuestArea> {
        let files: Vec<RegionFile<'_>> = mem.files().collect();
        if files.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "the guest memory has no files to map",
            ));
        }
        let page = 4096u64;
        let layout = Layout::plan(&files, page)?;
        let own_off = align_up(layout.end, page);
        let len = own_off + align_up(own_len as u64, page);
        let (map, base_off) = reserve(len, layout.max_align)?;
        let mut area = GuestArea {
            base: map.as_ptr().wrapping_add(base_off),
            map,
            len: len as usize,
            own_off,
            spans: ArrayVec::new(),
        };
        area.map_files(&files, &layout.pieces, base_off)?;
        if own_len > 0 {
            area.map_own(base_off)?;
        }
        Ok(area)
    }

    /// Map, step 3: each guest file over its piece of the reservation.
    fn map_files(
        &mut self,
        files: &[RegionFile<'_>],
        pieces: &[Piece],
        base_off: usize,
    ) -> io::Result<()> {
        for (f, &(at, file_off, map_len, skip)) in files.iter().zip(pieces) {
            let file = Pages::File {
                fd: f.fd,
                offset: file_off,
                populate: Populate::OnTouch,
            };
            // SAFETY: a part of our own reservation (the plan keeps pieces
            // disjoint and inside `len`) that holds only the zeros `reserve`
            // mapped, not yet registered with any socket. On failure, drop
            // unmaps the reservation and what is in it.
            unsafe {
                self.map
                    .overlay(base_off + at as usize, map_len as usize, file)
            }?;
            self.spans.push(Span {
                gpa: f.guest_phys_addr,
                size: f.size,
                umem_off: at + skip,
                page: f.page_size.max(4096) as u64,
            });
        }
        Ok(())
    }

    /// Map, step 4: the own frames, populated and reserved, after every
    /// guest piece.
    fn map_own(&mut self, base_off: usize) -> io::Result<()> {
        let own = Pages::Zeros {
            populate: Populate::Now,
            commit: Commit::Reserve,
        };
        // SAFETY: as in `map_files`, the tail of our own reservation
        // (own_off..len, after every guest piece).
        unsafe {
            self.map.overlay(
                base_off + self.own_off as usize,
                self.len - self.own_off as usize,
                own,
            )
        }
    }

    pub fn base(&self) -> *mut u8 {
        self.base
    }
    /// Bytes registered as the UMEM.
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// UMEM offset of the switch's own frames.
    pub fn own_off(&self) -> u64 {
        self.own_off
    }
    pub fn spans(&self) -> &[Span] {
        &self.spans
    }

    /// UMEM offset of the guest-physical range `[gpa, gpa + len)`, which
    /// must lie inside one region.
    #[inline]
    pub fn umem_offset(&self, gpa: u64, len: u64) -> Option<u64> {
        self.spans.iter().find_map(|s| {
            let off = gpa.checked_sub(s.gpa)?;
            (off < s.size && len <= s.size - off).then_some(s.umem_off + off)
        })
    }

    /// The page size of the region holding UMEM offset `off` (4 KiB
    /// outside the regions).
    pub fn page_at(&self, off: u64) -> u64 {
        self.spans
            .iter()
            .find(|s| off >= s.umem_off && off - s.umem_off < s.size)
            .map_or(4096, |s| s.page)
    }

    /// Guest-physical address of UMEM offset `off` (inside a region).
    #[inline]
    pub fn gpa_of(&self, off: u64) -> Option<u64> {
        self.spans.iter().find_map(|s| {
            let d = off.checked_sub(s.umem_off)?;
            (d < s.size).then_some(s.gpa + d)
        })
    }
}

/// Where frames land for guest buffers: the numbers that tie a UMEM
/// headroom to fill addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// `XDP_UMEM_REG` headroom.
    pub headroom: u32,
    /// Largest frame the kernel writes into one chunk.
    pub frame_room: u32,
    /// The virtio-net header in front of each frame.
    pub hdr_len: u32,
    /// The socket is bound zero-copy (the NIC DMAs into the chunk): a
    /// chunk must stay inside one page of its region
    /// (`xp_desc_crosses_non_contig_pg`; wave2 §2e-b). Copy mode writes
    /// through the kernel's mapping and does not care.
    pub page_bound: bool,
}

impl Placement {
    /// For frames up to `max_frame` bytes (the interface's MTU plus its
    /// L2 header): the headroom that makes the frame room exactly that
    /// (never below what `XDP_UMEM_REG` allows, so very small MTUs get
    /// a larger room).
    pub fn for_frames(max_frame: usize, hdr_len: usize) -> Placement {
        let full = CHUNK_SIZE - XDP_PACKET_HEADROOM;
        let room = max_frame.clamp(full - MAX_HEADROOM, full);
        Placement {
            headroom: (full - room) as u32,
            frame_room: room as u32,
            hdr_len: hdr_len as u32,
            page_bound: false,
        }
    }

    /// Bytes before the frame inside its chunk (the kernel's 256 and ours).
    #[inline(always)]
    fn lead(&self) -> u64 {
        (XDP_PACKET_HEADROOM as u32 + self.headroom) as u64
    }

    /// The fill address that lands a frame right after the header of the
    /// guest buffer at `gpa` (`len` bytes).
    #[inline]
    pub fn fill_addr(&self, area: &GuestArea, gpa: u64, len: u32) -> Result<u64, Unfit> {
        if len < self.hdr_len + self.frame_room {
            return Err(Unfit::ShortBuffer);
        }
        let b = area
            .umem_offset(gpa, len as u64)
            .ok_or(Unfit::OutsideUmem)?;
        let fill = (b + self.hdr_len as u64)
            .checked_sub(self.lead())
            .ok_or(Unfit::OutsideUmem)?;
        if fill + CHUNK_SIZE as u64 > area.own_off() {
            return Err(Unfit::OutsideUmem);
        }
        if self.page_bound {
            // Regions sit at multiples of their page size in the UMEM, so
            // UMEM offsets keep the page boundaries of the guest's files.
            let page = area.page_at(b);
            if fill / page != (fill + CHUNK_SIZE as u64 - 1) / page {
                return Err(Unfit::PageCross);
            }
        }
        Ok(fill)
    }

    /// The guest buffer (its guest-physical address) a fill address was
    /// made for, `None` if it is not one of ours.
    #[inline]
    pub fn buffer_of(&self, area: &GuestArea, fill: u64) -> Option<u64> {
        let b = (fill + self.lead()).checked_sub(self.hdr_len as u64)?;
        area.gpa_of(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nfv_virtio::RegionSpec;
    use std::os::fd::{FromRawFd, OwnedFd};

    fn memfd(len: u64) -> OwnedFd {
        // SAFETY: a valid name; plain syscalls on a descriptor we own.
        unsafe {
            let raw = libc::memfd_create(c"guest-umem-test".as_ptr(), libc::MFD_CLOEXEC);
            assert!(raw >= 0);
            assert_eq!(libc::ftruncate(raw, len as i64), 0);
            OwnedFd::from_raw_fd(raw)
        }
    }

    /// Two regions of one file, like QEMU's RAM below and above 4 GiB.
    pub(crate) fn two_region_guest() -> GuestMemory {
        let fd = memfd(3 << 20);
        let dup = fd.try_clone().unwrap();
        GuestMemory::map(vec![
            RegionSpec {
                guest_phys_addr: 0,
                size: 1 << 20,
                user_addr: 0x7000_0000_0000,
                mmap_offset: 0,
                fd,
                shrink_sealed: false,
            },
            RegionSpec {
                guest_phys_addr: 1 << 32,
                size: 2 << 20,
                user_addr: 0x7100_0000_0000,
                mmap_offset: 1 << 20,
                fd: dup,
                shrink_sealed: false,
            },
        ])
        .unwrap()
    }

    #[test]
    fn the_area_sees_the_guest_pages_and_translates_both_ways() {
        let mem = two_region_guest();
        let area = GuestArea::map(&mem, 4 * CHUNK_SIZE).unwrap();
        assert_eq!(area.spans().len(), 2);
        assert_eq!(area.len() as u64, area.own_off() + 4 * CHUNK_SIZE as u64);
        for gpa in [
            0u64,
            4095,
            (1 << 20) - 1,
            1 << 32,
            (1 << 32) + (2 << 20) - 1,
        ] {
            let off = area.umem_offset(gpa, 1).unwrap();
            assert_eq!(area.gpa_of(off), Some(gpa));
            let host = mem.translate(gpa, 1).unwrap();
            // SAFETY: both pointers are inside live mappings of the same file
            // page (translate checked the guest side, umem_offset ours).
            unsafe {
                host.write_volatile(gpa as u8 ^ 0x5a);
                assert_eq!(
                    area.base().add(off as usize).read_volatile(),
                    gpa as u8 ^ 0x5a
                );
            }
        }
        // Ranges that straddle a region end or miss the guest.
        assert_eq!(area.umem_offset((1 << 20) - 1, 2), None);
        assert_eq!(area.umem_offset(1 << 21, 1), None);
        assert_eq!(area.gpa_of(area.own_off()), None);
        // The own frames are writable.
        // SAFETY: inside the own part of the area.
        unsafe { area.base().add(area.len() - 1).write(1) };
    }

    #[test]
    fn memory_without_files_is_refused() {
        let mut buf = vec![0u8; 8192];
        // SAFETY: the buffer outlives `mem`.
        let mem = unsafe { GuestMemory::from_raw(&[(0, 0, buf.as_mut_ptr(), buf.len())]).unwrap() };
        let err = GuestArea::map(&mem, 4096).err().unwrap();
        assert_eq!(err.kind(), io::ErrorKind::Unsupported);
    }

    #[test]
    fn placement_lands_the_frame_after_the_header_and_refuses_what_does_not_fit() {
        let mem = two_region_guest();
        let area = GuestArea::map(&mem, 4 * CHUNK_SIZE).unwrap();
        // MTU 1500 + Ethernet + one VLAN tag.
        let p = Placement::for_frames(1518, 12);
        assert_eq!((p.headroom, p.frame_room), (274, 1518));
        let gpa = (1 << 32) + 8192;
        let fill = p.fill_addr(&area, gpa, 1536).unwrap();
        // The kernel writes at fill + headroom + 256: the frame's first byte.
        let data = fill + p.headroom as u64 + XDP_PACKET_HEADROOM as u64;
        assert_eq!(area.gpa_of(data), Some(gpa + 12));
        assert_eq!(p.buffer_of(&area, fill), Some(gpa));
        // A Linux guest's 1536-byte buffer fits 1518; 1529 bytes do not.
        assert_eq!(p.fill_addr(&area, gpa, 1529), Err(Unfit::ShortBuffer));
        // At a region's very start: the chunk's lead lies in the gap page.
        let first = p.fill_addr(&area, 0, 2048).unwrap();
        assert_eq!(area.gpa_of(first + p.headroom as u64 + 256), Some(12));
        // A buffer past a region's end, or outside the guest.
        assert_eq!(p.fill_addr(&area, 1 << 30, 2048), Err(Unfit::OutsideUmem));
        assert_eq!(
            p.fill_addr(&area, (1 << 20) - 1000, 2048),
            Err(Unfit::OutsideUmem)
        );
        // Small MTUs: the headroom stops at what the kernel allows.
        let small = Placement::for_frames(100, 12);
        assert_eq!(small.headroom as usize, MAX_HEADROOM);
        assert_eq!(small.frame_room, 1792 - 1344);
        // Jumbo-ish: no headroom, all 1792 bytes.
        assert_eq!(Placement::for_frames(9000, 12).headroom, 0);
        // A zero-copy bind on 4 KiB pages: the chunk must stay in a page.
        let zc = Placement {
            page_bound: true,
            ..p
        };
        let lead = 256 + p.headroom as u64 - 12;
        let page = (1u64 << 32) + 3 * 4096;
        assert!(
            zc.fill_addr(&area, page + lead, 1536).is_ok(),
            "chunk at the page start"
        );
        assert_eq!(
            zc.fill_addr(&area, page + lead + 2049, 1536),
            Err(Unfit::PageCross)
        );
        assert!(
            p.fill_addr(&area, page + lead + 2049, 1536).is_ok(),
            "copy mode"
        );
    }
}
