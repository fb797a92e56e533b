//! Guest memory: the regions a virtio driver shares with the device.
//!
//! Each region has three addresses: the guest-physical address written in
//! descriptors, the frontend's *user* (virtual) address used in
//! `VHOST_USER_SET_VRING_ADDR`, and the host pointer where this process sees
//! it. Up to [`MAX_REGIONS`] regions (the vhost-user limit is 8 by default,
//! 32 with `CONFIGURE_MEM_SLOTS`-style extensions).
//!
//! Translation is the fast path of every descriptor: a linear scan over a
//! handful of regions, with an optional caller-kept hint (the region that
//! matched last) so a queue usually checks one region. A buffer must lie
//! entirely inside **one** region; ranges are checked without overflow.
//!
//! Nothing here dereferences guest memory: the returned pointers are raw,
//! and the ring code accesses them with volatile/atomic loads and raw copies
//! (never references), because the guest may change them at any time.
//!
//! The frontend may also take memory away: a file shrunk after we mapped
//! it makes our next access raise SIGBUS. Every mapping made by
//! [`GuestMemory::map`] is registered with the SIGBUS guard
//! ([`crate::guard`]), which replaces a faulting mapping with zero pages so
//! the access completes; [`GuestMemory::faulted`] then says so, and the
//! owner of the queues stops them (the vhost port quarantines the rings).
//! The guard is removed before the mapping is unmapped. Memory described
//! by [`GuestMemory::from_raw`] is not guarded.
//!
//! A frontend's file costs it nothing to make large (a sparse memfd), but
//! every byte we map takes address space from the switch. A
//! [`MapBudget`] bounds what a set of owners may have mapped at once
//! ([`GuestMemory::map_charged`]): the charge is the length actually
//! mapped (each region's file from offset 0 to `mmap_offset + size`,
//! rounded to the file's page size), taken before anything is mapped and
//! given back after the last mapping is removed.

use arrayvec::ArrayVec;
use nfv_mem::{Mapping, Populate};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::guard::Guarded;

/// Most regions a [`GuestMemory`] holds.
pub const MAX_REGIONS: usize = 32;

/// The most bytes of one buffer [`GuestMemory::prefetch_rest_write`] warms:
/// a full-size Ethernet frame and its header, not a 64 KiB TSO buffer
/// (the copy's own access pattern serves those, and a longer run would
/// evict what the burst warmed before it).
pub const REST_PREFETCH_MAX: usize = 2048;

/// One region as announced by a vhost-user frontend
/// (`VHOST_USER_SET_MEM_TABLE`). The fd is mapped from offset 0 and the
/// region starts `mmap_offset` bytes into the mapping.
#[derive(Debug)]
pub struct RegionSpec {
    pub guest_phys_addr: u64,
    pub size: u64,
    pub user_addr: u64,
    pub mmap_offset: u64,
    pub fd: OwnedFd,
    /// The frontend sealed the file against shrinking (memfd
    /// `F_SEAL_SHRINK`): it cannot fault. Unsealed files rely on the
    /// SIGBUS guard.
    pub shrink_sealed: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    #[error("guest memory needs 1..={MAX_REGIONS} regions, got {0}")]
    RegionCount(usize),
    #[error("region {0} has size 0")]
    ZeroSize(usize),
    #[error("region {0}: address range overflows (gpa, uva, mmap_offset or size too large)")]
    Overflow(usize),
    #[error("regions {0} and {1} overlap ({2} addresses)")]
    Overlap(usize, usize, &'static str),
    #[error("region {index}: mmap of {len} bytes failed: {err}")]
    Map {
        index: usize,
        len: usize,
        err: io::Error,
    },
    #[error("region {index}: {err}")]
    Unmappable {
        index: usize,
        err: crate::tenant_fd::UnmappableFd,
    },
    #[error("region {0}: the SIGBUS guard's table is full ({n} mappings)", n = crate::guard::SLOTS)]
    GuardFull(usize),
    #[error("{0}")]
    OverBudget(OverBudget),
}

/// Bytes of address space that a set of owners (every vhost-user port
/// of the node) may have mapped for guest memory at once.
///
/// Thread safety: `Sync`; charges and releases are atomic (a
/// compare-exchange loop), so owners on any thread share one budget.
#[derive(Debug)]
pub struct MapBudget {
    limit: AtomicU64,
    used: AtomicU64,
}

/// A mapping would take a [`MapBudget`] over its limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "mapping {want} bytes would exceed the node's guest-memory budget \
     ({used} of {limit} bytes already mapped)"
)]
pub struct OverBudget {
    pub want: u64,
    pub used: u64,
    pub limit: u64,
}

impl MapBudget {
    pub const fn new(limit: u64) -> MapBudget {
        MapBudget {
            limit: AtomicU64::new(limit),
            used: AtomicU64::new(0),
        }
    }
    pub fn limit(&self) -> u64 {
        self.limit.load(Relaxed)
    }
    /// A new limit for later charges (what is mapped stays mapped).
    pub fn set_limit(&self, limit: u64) {
        self.limit.store(limit, Relaxed);
    }
    /// Bytes charged now.
    pub fn used(&self) -> u64 {
        self.used.load(Relaxed)
    }
    /// Charges `bytes` if they fit; the [`Charge`] gives them back on drop.
    pub fn charge(&'static self, bytes: u64) -> Result<Charge, OverBudget> {
        let limit = self.limit();
        let mut used = self.used.load(Relaxed);
        loop {
            let fits = used.checked_add(bytes).is_some_and(|t| t <= limit);
            if !fits {
                return Err(OverBudget {
                    want: bytes,
                    used,
                    limit,
                });
            }
            match self
                .used
                .compare_exchange_weak(used, used + bytes, Relaxed, Relaxed)
            {
                Ok(_) => {
                    return Ok(Charge {
                        budget: self,
                        bytes,
                    });
                }
                Err(now) => used = now,
            }
        }
    }
}

/// Bytes charged to a [`MapBudget`], given back on drop.
#[derive(Debug)]
pub struct Charge {
    budget: &'static MapBudget,
    bytes: u64,
}

impl Charge {
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.bytes, Relaxed);
    }
}

/// A region's file as seen by [`GuestMemory::files`]: enough to map the
/// same memory again somewhere else (an AF_XDP UMEM over guest memory).
#[derive(Clone, Copy, Debug)]
pub struct RegionFile<'a> {
    pub guest_phys_addr: u64,
    pub size: u64,
    /// Where the region starts in the file.
    pub mmap_offset: u64,
    /// The file's page size (hugetlbfs: the huge page size): mappings of
    /// it must start at a multiple of this offset and address.
    pub page_size: usize,
    pub fd: BorrowedFd<'a>,
}

/// A region's file, kept open while the memory is mapped.
#[derive(Debug)]
struct KeptFile {
    fd: OwnedFd,
    mmap_offset: u64,
    page_size: usize,
}

/// A region as seen by [`GuestMemory::regions`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionInfo {
    pub guest_phys_addr: u64,
    pub user_addr: u64,
    pub size: u64,
    pub host: *mut u8,
}

#[derive(Clone, Copy, Debug)]
struct MemRegion {
    gpa: u64,
    uva: u64,
    size: u64,
    host: *mut u8,
}

/// The memory a driver shares with us, for translating ring and buffer
/// addresses into host pointers.
///
/// Thread safety: `Send + Sync`. The table is immutable after construction
/// and every method takes `&self` and only reads it (there is no interior
/// cache: the last-hit hint lives in the caller, e.g. each queue). The
/// pointers it hands out are raw; who may touch which bytes through them is
/// decided by the virtqueue protocol (each queue has one owner), not here.
#[derive(Debug)]
pub struct GuestMemory {
    regions: ArrayVec<MemRegion, MAX_REGIONS>,
    /// SIGBUS guards of our own mappings (dropped before unmapping).
    guards: ArrayVec<Guarded, MAX_REGIONS>,
    /// Our own mappings, in region order (empty for
    /// [`GuestMemory::from_raw`]); unmapped in `Drop`, after the guards.
    maps: ArrayVec<Mapping, MAX_REGIONS>,
    /// Regions whose file was not sealed against shrinking.
    unsealed: usize,
    /// The regions' files, in region order (empty for [`GuestMemory::from_raw`]).
    files: ArrayVec<KeptFile, MAX_REGIONS>,
    /// What [`GuestMemory::map_charged`] charged (a field: given back
    /// after `Drop::drop` has unmapped everything).
    charge: Option<Charge>,
}

// SAFETY: the raw pointers refer to mappings that live as long as this value
// (ours are unmapped only in `Drop`; `from_raw` callers promise the same),
// the table itself is never mutated after construction, and no references
// into guest memory are created here. Moving the table to another thread is
// therefore sound.
unsafe impl Send for GuestMemory {}
// SAFETY: as above; all methods take `&self` and only read immutable fields.
unsafe impl Sync for GuestMemory {}

/// Checks `[addr, addr+len)` against `[base, base+size)` without overflow.
#[inline(always)]
fn offset_in(base: u64, size: u64, addr: u64, len: usize) -> Option<u64> {
    let off = addr.wrapping_sub(base);
    if off < size && len as u64 <= size - off {
        Some(off)
    } else {
        None
    }
}

impl GuestMemory {
    /// Maps the frontend's regions (`MAP_SHARED`, read/write). Rejects zero
    /// sizes, overflowing ranges, overlapping guest-physical or user
    /// address ranges and files that fail
    /// [`crate::tenant_fd::check_mappable`] before mapping anything. Mappings are removed on drop.
    /// Pages are not prefaulted (guest memory can be large); the first
    /// touch of each page takes a fault once.
    pub fn map(specs: Vec<RegionSpec>) -> Result<GuestMemory, MemoryError> {
        Self::map_inner(specs, None)
    }

    /// [`GuestMemory::map`], charging the length to be mapped to `budget`
    /// first (refused with [`MemoryError::OverBudget`], nothing mapped,
    /// when it does not fit); the charge is given back once this memory is
    /// unmapped.
    pub fn map_charged(
        specs: Vec<RegionSpec>,
        budget: &'static MapBudget,
    ) -> Result<GuestMemory, MemoryError> {
        Self::map_inner(specs, Some(budget))
    }

    /// Address space [`GuestMemory::map`] would map for `specs`: each
    /// file from offset 0 to the region's end, rounded up to its page size.
    pub fn mapped_len(specs: &[RegionSpec]) -> u64 {
        specs
            .iter()
            .map(|s| {
                let page = block_size(&s.fd) as u64;
                s.mmap_offset
                    .saturating_add(s.size)
                    .div_ceil(page)
                    .saturating_mul(page)
            })
            .fold(0, u64::saturating_add)
    }

    fn map_inner(
        specs: Vec<RegionSpec>,
        budget: Option<&'static MapBudget>,
    ) -> Result<GuestMemory, MemoryError> {
        let ranges: Vec<(u64, u64, u64)> = specs
            .iter()
            .map(|s| (s.guest_phys_addr, s.user_addr, s.size))
            .collect();
        Self::validate(&ranges)?;
        for (i, s) in specs.iter().enumerate() {
            let end = s.mmap_offset.checked_add(s.size);
            if end.is_none_or(|e| e > isize::MAX as u64) {
                return Err(MemoryError::Overflow(i));
            }
            // Every file before any mapping: a refused table maps nothing.
            crate::tenant_fd::check_mappable(s.fd.as_fd(), 0, s.mmap_offset + s.size)
                .map_err(|err| MemoryError::Unmappable { index: i, err })?;
        }
        let charge = match budget {
            Some(b) => Some(
                b.charge(Self::mapped_len(&specs))
                    .map_err(MemoryError::OverBudget)?,
            ),
            None => None,
        };
        let mut mem = GuestMemory {
            regions: ArrayVec::new(),
            guards: ArrayVec::new(),
            maps: ArrayVec::new(),
            unsealed: specs.iter().filter(|s| !s.shrink_sealed).count(),
            files: ArrayVec::new(),
            charge,
        };
        for (i, s) in specs.into_iter().enumerate() {
            // hugetlbfs needs the length rounded to its page size, which
            // fstat reports as the block size; memfd/tmpfs reports 4 KiB.
            let page = block_size(&s.fd);
            let want = (s.mmap_offset + s.size) as usize;
            let len = want.div_ceil(page) * page;
            // Dropping `mem` on an error unmaps what was mapped so far.
            let map = Mapping::shared(s.fd.as_fd(), len, 0, Populate::OnTouch)
                .map_err(|err| MemoryError::Map { index: i, len, err })?;
            let base = map.as_ptr();
            // Refused: `map`, not yet shared, is unmapped as it drops.
            let guard = crate::guard::register(base, len).ok_or(MemoryError::GuardFull(i))?;
            mem.guards.push(guard);
            mem.maps.push(map);
            mem.regions.push(MemRegion {
                gpa: s.guest_phys_addr,
                uva: s.user_addr,
                size: s.size,
                // SAFETY: mmap_offset + size <= len, so this stays inside
                // the mapping.
                host: unsafe { base.add(s.mmap_offset as usize) },
            });
            // Kept (not needed by these mappings) so the same memory can
            // be mapped again elsewhere (`files`).
            mem.files.push(KeptFile {
                fd: s.fd,
                mmap_offset: s.mmap_offset,
                page_size: page,
            });
        }
        Ok(mem)
    }

    /// Describes memory this process already has mapped (the driver side,
    /// tests). Each entry is `(guest_phys_addr, user_addr, host, len)`.
    /// Nothing is unmapped on drop.
    ///
    /// # Safety
    /// Each `host..host+len` must be valid for reads and writes for as long
    /// as the returned value (and anything translated through it) is used,
    /// and must not overflow the address space.
    pub unsafe fn from_raw(
        regions: &[(u64, u64, *mut u8, usize)],
    ) -> Result<GuestMemory, MemoryError> {
        let ranges: Vec<(u64, u64, u64)> = regions
            .iter()
            .map(|&(g, u, _, l)| (g, u, l as u64))
            .collect();
        Self::validate(&ranges)?;
        for (i, &(_, _, host, len)) in regions.iter().enumerate() {
            if host.is_null() || (host as usize).checked_add(len).is_none() {
                return Err(MemoryError::Overflow(i));
            }
        }
        Ok(GuestMemory {
            regions: regions
                .iter()
                .map(|&(gpa, uva, host, len)| MemRegion {
                    gpa,
                    uva,
                    size: len as u64,
                    host,
                })
                .collect(),
            guards: ArrayVec::new(),
            maps: ArrayVec::new(),
            unsealed: 0,
            files: ArrayVec::new(),
            charge: None,
        })
    }

    /// Checks count, sizes, overflow and overlap of `(gpa, uva, size)`.
    fn validate(r: &[(u64, u64, u64)]) -> Result<(), MemoryError> {
        if r.is_empty() || r.len() > MAX_REGIONS {
            return Err(MemoryError::RegionCount(r.len()));
        }
        for (i, &(g, u, s)) in r.iter().enumerate() {
            if s == 0 {
                return Err(MemoryError::ZeroSize(i));
            }
            if g.checked_add(s).is_none() || u.checked_add(s).is_none() || s > isize::MAX as u64 {
                return Err(MemoryError::Overflow(i));
            }
        }
        let overlap = |a: u64, sa: u64, b: u64, sb: u64| a < b + sb && b < a + sa;
        for i in 0..r.len() {
            for j in i + 1..r.len() {
                if overlap(r[i].0, r[i].2, r[j].0, r[j].2) {
                    return Err(MemoryError::Overlap(i, j, "guest-physical"));
                }
                if overlap(r[i].1, r[i].2, r[j].1, r[j].2) {
                    return Err(MemoryError::Overlap(i, j, "user"));
                }
            }
        }
        Ok(())
    }

    /// Host pointer for the guest-physical range `[gpa, gpa+len)`, which
    /// must lie inside one region.
    #[inline]
    pub fn translate(&self, gpa: u64, len: usize) -> Option<*mut u8> {
        let mut hint = 0;
        self.translate_hinted(gpa, len, &mut hint)
    }

    /// [`GuestMemory::translate`] trying region `*hint` first and updating
    /// it on a miss: queues keep one hint each, so the common case checks a
    /// single region.
    #[inline(always)]
    pub fn translate_hinted(&self, gpa: u64, len: usize, hint: &mut usize) -> Option<*mut u8> {
        if let Some(r) = self.regions.get(*hint)
            && let Some(off) = offset_in(r.gpa, r.size, gpa, len)
        {
            return Some(r.host.wrapping_add(off as usize));
        }
        self.translate_slow(gpa, len, hint)
    }

    #[inline(never)]
    fn translate_slow(&self, gpa: u64, len: usize, hint: &mut usize) -> Option<*mut u8> {
        for (i, r) in self.regions.iter().enumerate() {
            if let Some(off) = offset_in(r.gpa, r.size, gpa, len) {
                *hint = i;
                return Some(r.host.wrapping_add(off as usize));
            }
        }
        None
    }

    /// Prefetches the start of a receive buffer at `gpa`, assuming it lies
    /// in region `hint`, about to take a virtio-net header of `hdr_len`
    /// bytes and then a frame: its first two lines, those the device will
    /// write with intent to write. Nothing is checked and nothing can go
    /// wrong: a prefetch never faults, whatever the address, so this may
    /// be fed unvalidated descriptor addresses to warm buffers ahead of
    /// their (checked) use.
    ///
    /// Two lines, because drivers place the header right before their
    /// packet data (DPDK: at the end of the mbuf headroom), so even a
    /// 64-byte frame begins on the next line; warming only the first left
    /// every frame's first data line to a cross-core miss inside the copy.
    /// A first line that holds only the header is asked for to be read:
    /// the header is written only where it changed
    /// (`device::rx::write_header`), and a reused DPDK buffer's has not,
    /// so owning that line would take it from the driver's core for
    /// nothing.
    #[inline(always)]
    pub fn prefetch_rx_buffer(&self, gpa: u64, hint: usize, hdr_len: usize) {
        if let Some(r) = self.regions.get(hint) {
            let p = r.host.wrapping_add(gpa.wrapping_sub(r.gpa) as usize);
            if (p as usize & 63) + hdr_len >= 64 {
                nfv_mem::hint::prefetch(p);
            } else {
                nfv_mem::hint::prefetch_write(p);
            }
            nfv_mem::hint::prefetch_write(p.wrapping_add(64));
        }
    }

    /// Prefetches for reading the lines holding the first
    /// `len.min(SPLIT_HEAD)` bytes at `gpa` (at least its first line),
    /// assuming it lies in region `hint`: the bytes a transmitted frame's
    /// dequeue reads first. Unchecked, as [`Self::prefetch_rx_buffer`].
    ///
    /// Only those lines: the virtio-net header in front of a frame sits
    /// on a line of its own when the driver puts it in the mbuf headroom
    /// (DPDK) and is not read unless checksum offload was negotiated, so
    /// asking for it took a fill buffer and a cross-core transfer a
    /// packet for nothing, while the head's second line went unasked.
    #[inline(always)]
    pub fn prefetch_read_span(&self, gpa: u64, len: usize, hint: usize) {
        if let Some(r) = self.regions.get(hint) {
            let p = r.host.wrapping_add(gpa.wrapping_sub(r.gpa) as usize);
            let end = (p as usize).wrapping_add(len.clamp(1, nfv_mem::SPLIT_HEAD));
            let mut line = p as usize & !63;
            while line < end {
                nfv_mem::hint::prefetch(line as *const u8);
                line += 64;
            }
        }
    }

    /// Prefetches, with intent to write, the lines of the buffer at `gpa`
    /// past the two [`Self::prefetch_rx_buffer`] warms, up to `bytes` (at most
    /// [`REST_PREFETCH_MAX`]): the device is about to copy a large frame
    /// there. Each line would otherwise be requested for ownership inside
    /// the copy, one stall at a time once the core's fill buffers are busy
    /// with the source, and a line the other side read since it was last
    /// written here must be taken back from that core. Unchecked, as
    /// `prefetch_rx_buffer`: a prefetch never faults.
    #[inline(always)]
    pub fn prefetch_rest_write(&self, gpa: u64, hint: usize, bytes: usize) {
        if let Some(r) = self.regions.get(hint) {
            let p = r.host.wrapping_add(gpa.wrapping_sub(r.gpa) as usize);
            let end = bytes.min(REST_PREFETCH_MAX);
            // `p` need not be line-aligned: stop past the line holding
            // the last byte (at most one line more than needed).
            let mut off = 128;
            while off < end + 63 {
                nfv_mem::hint::prefetch_write(p.wrapping_add(off));
                off += 64;
            }
        }
    }

    /// Host pointer for the frontend's user-address range `[uva, uva+len)`
    /// (vring addresses), inside one region.
    pub fn translate_uva(&self, uva: u64, len: usize) -> Option<*mut u8> {
        self.regions.iter().find_map(|r| {
            offset_in(r.uva, r.size, uva, len).map(|off| r.host.wrapping_add(off as usize))
        })
    }

    /// The guest-physical address of the host range `[ptr, ptr+len)`, inside
    /// one region (the driver side uses this to fill descriptors).
    #[inline(always)]
    pub fn host_to_gpa_hinted(&self, ptr: *const u8, len: usize, hint: &mut usize) -> Option<u64> {
        let p = ptr as u64;
        if let Some(r) = self.regions.get(*hint)
            && let Some(off) = offset_in(r.host as u64, r.size, p, len)
        {
            return Some(r.gpa + off);
        }
        for (i, r) in self.regions.iter().enumerate() {
            if let Some(off) = offset_in(r.host as u64, r.size, p, len) {
                *hint = i;
                return Some(r.gpa + off);
            }
        }
        None
    }

    /// [`GuestMemory::host_to_gpa_hinted`] without a hint.
    pub fn host_to_gpa(&self, ptr: *const u8, len: usize) -> Option<u64> {
        let mut hint = 0;
        self.host_to_gpa_hinted(ptr, len, &mut hint)
    }

    /// The regions, in the order given.
    pub fn regions(&self) -> impl Iterator<Item = RegionInfo> + '_ {
        self.regions.iter().map(|r| RegionInfo {
            guest_phys_addr: r.gpa,
            user_addr: r.uva,
            size: r.size,
            host: r.host,
        })
    }

    /// The regions' files, in region order; empty when the memory was
    /// described with [`GuestMemory::from_raw`] (no files to map again).
    pub fn files(&self) -> impl Iterator<Item = RegionFile<'_>> + '_ {
        self.regions
            .iter()
            .zip(&self.files)
            .map(|(r, f)| RegionFile {
                guest_phys_addr: r.gpa,
                size: r.size,
                mmap_offset: f.mmap_offset,
                page_size: f.page_size,
                fd: f.fd.as_fd(),
            })
    }

    pub fn region_count(&self) -> usize {
        self.regions.len()
    }

    /// True once an access to this memory raised SIGBUS (the frontend
    /// shrank a file) and was survived: the memory reads as zeros from then
    /// on and its queues must stop. Cold path: a few loads.
    pub fn faulted(&self) -> bool {
        self.guards.iter().any(|g| g.faulted())
    }

    /// Regions mapped from files the frontend did not seal against
    /// shrinking (these depend on the SIGBUS guard).
    pub fn unsealed_regions(&self) -> usize {
        self.unsealed
    }

    /// Bytes charged to a budget for this memory (0: none).
    pub fn charged(&self) -> u64 {
        self.charge.as_ref().map_or(0, Charge::bytes)
    }
}

fn block_size(fd: &OwnedFd) -> usize {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
    // SAFETY: an all-zero `stat` is a valid value to be overwritten.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes into `st`, which is a valid, owned struct.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } == 0 {
        let b = st.st_blksize as usize;
        if b.is_power_of_two() && b > page && b <= 1 << 30 {
            return b;
        }
    }
    page
}

impl Drop for GuestMemory {
    fn drop(&mut self) {
        // Unguard first: no SIGBUS handler may remap a range after it is
        // unmapped (and perhaps reused).
        self.guards.clear();
        // Every queue holding translated pointers keeps an `Arc` to us, so
        // none is in use any more.
        self.maps.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::FromRawFd;

    fn memfd(len: usize) -> OwnedFd {
        // SAFETY: valid name and flags; the fd is checked and then owned.
        let fd = unsafe { libc::memfd_create(c"gm-test".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0);
        // SAFETY: `fd` is a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: plain syscall on an fd we own.
        let r = unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) };
        assert_eq!(r, 0);
        fd
    }

    fn dup(fd: &OwnedFd) -> OwnedFd {
        fd.try_clone().unwrap()
    }

    /// The prefetches take descriptor addresses and lengths unchecked:
    /// whatever a guest writes there, they neither fault nor write.
    #[test]
    fn prefetches_of_any_guest_address_never_fault() {
        let fd = memfd(4096);
        let mem = GuestMemory::map(vec![RegionSpec {
            guest_phys_addr: 0x1000,
            size: 4096,
            user_addr: 0x7f00_0000_0000,
            mmap_offset: 0,
            fd: dup(&fd),
            shrink_sealed: false,
        }])
        .unwrap();
        for gpa in [0, 0x1000, 0x1ff0, 0x2000, u64::MAX - 64, u64::MAX] {
            for len in [0, 1, 64, 65, 128, 4096, usize::MAX] {
                for hint in [0, 1, usize::MAX] {
                    mem.prefetch_read_span(gpa, len, hint);
                    mem.prefetch_rx_buffer(gpa, hint, 12);
                    mem.prefetch_rest_write(gpa, hint, len);
                }
            }
        }
        let p = mem.translate(0x1000, 4096).unwrap();
        // SAFETY: the region's 4096 mapped bytes, read only.
        let bytes = unsafe { std::slice::from_raw_parts(p, 4096) };
        assert!(bytes.iter().all(|&b| b == 0), "a prefetch wrote");
    }

    #[test]
    fn map_honours_mmap_offset_and_translates_all_three_address_kinds() {
        let fd = memfd(3 * 4096);
        let mem = GuestMemory::map(vec![
            RegionSpec {
                guest_phys_addr: 0,
                size: 4096,
                user_addr: 0x7f00_0000_0000,
                mmap_offset: 0,
                fd: dup(&fd),
                shrink_sealed: false,
            },
            RegionSpec {
                guest_phys_addr: 0x1_0000_0000,
                size: 8192,
                user_addr: 0x7f00_0010_0000,
                mmap_offset: 4096,
                fd: dup(&fd),
                shrink_sealed: false,
            },
        ])
        .unwrap();
        let p0 = mem.translate(0x10, 4).unwrap();
        let p1 = mem.translate(0x1_0000_0000, 4).unwrap();
        // SAFETY: both pointers are inside live mappings of the memfd.
        unsafe {
            p1.write(0xab);
            // Region 1 starts 4096 bytes into the file, region 0 at 0.
            assert_eq!(p0.sub(0x10).read(), 0);
        }
        assert_eq!(mem.translate_uva(0x7f00_0010_0000, 8192), Some(p1));
        assert_eq!(mem.host_to_gpa(p1, 8192), Some(0x1_0000_0000));
        assert_eq!(mem.host_to_gpa(p0, 4096 - 0x10), Some(0x10));
        assert_eq!(mem.region_count(), 2);
        // A second mapping of the whole file shows the byte written via p1
        // at file offset 4096: mmap_offset was honoured.
        let again = GuestMemory::map(vec![RegionSpec {
            guest_phys_addr: 0,
            size: 3 * 4096,
            user_addr: 0,
            mmap_offset: 0,
            fd,
            shrink_sealed: false,
        }])
        .unwrap();
        let q = again.translate(4096, 1).unwrap();
        // SAFETY: inside the second mapping.
        assert_eq!(unsafe { q.read() }, 0xab);
    }

    #[test]
    fn buffers_must_fit_in_one_region_without_overflow() {
        let mut a = vec![0u8; 4096];
        let mut b = vec![0u8; 4096];
        // SAFETY: the vectors outlive `mem`.
        let mem = unsafe {
            GuestMemory::from_raw(&[
                (0x1000, 0x1000, a.as_mut_ptr(), 4096),
                (0x2000, 0x2000, b.as_mut_ptr(), 4096),
            ])
        }
        .unwrap();
        assert!(mem.translate(0x1000, 4096).is_some());
        assert!(mem.translate(0x1fff, 1).is_some());
        assert!(mem.translate(0x1fff, 2).is_none(), "spans two regions");
        assert!(mem.translate(0x0fff, 1).is_none());
        assert!(mem.translate(0x3000, 0).is_none(), "one past the end");
        assert!(mem.translate(0x1800, usize::MAX).is_none());
        assert!(mem.translate(u64::MAX, 2).is_none());
        assert!(mem.translate(u64::MAX - 1, usize::MAX).is_none());
        let mut hint = 7;
        assert_eq!(
            mem.translate_hinted(0x2004, 4, &mut hint),
            Some(b.as_mut_ptr().wrapping_add(4))
        );
        assert_eq!(hint, 1);
        assert_eq!(
            mem.translate_hinted(0x1004, 4, &mut hint),
            Some(a.as_mut_ptr().wrapping_add(4))
        );
        assert_eq!(hint, 0);
        assert!(mem.host_to_gpa(a.as_ptr().wrapping_add(4095), 2).is_none());
    }

    #[test]
    fn bad_tables_are_rejected() {
        let p = std::ptr::dangling_mut::<u8>();
        let raw = |r: &[(u64, u64, *mut u8, usize)]| {
            // SAFETY: nothing is dereferenced: every table here is invalid.
            unsafe { GuestMemory::from_raw(r) }.unwrap_err()
        };
        assert!(matches!(raw(&[]), MemoryError::RegionCount(0)));
        assert!(matches!(raw(&[(0, 0, p, 0)]), MemoryError::ZeroSize(0)));
        assert!(matches!(
            raw(&[(u64::MAX, 0, p, 2)]),
            MemoryError::Overflow(0)
        ));
        assert!(matches!(
            raw(&[(0, 0, p, 4096), (4095, 8192, p, 1)]),
            MemoryError::Overlap(0, 1, "guest-physical")
        ));
        assert!(matches!(
            raw(&[(0, 0, p, 4096), (4096, 100, p, 1)]),
            MemoryError::Overlap(0, 1, "user")
        ));
        let many: Vec<_> = (0..33u64).map(|i| (i * 4096, i * 4096, p, 4096)).collect();
        assert!(matches!(raw(&many), MemoryError::RegionCount(33)));
        let e = GuestMemory::map(vec![RegionSpec {
            guest_phys_addr: 0,
            size: 4096,
            user_addr: 0,
            mmap_offset: u64::MAX - 10,
            fd: memfd(4096),
            shrink_sealed: false,
        }])
        .unwrap_err();
        assert!(matches!(e, MemoryError::Overflow(0)));
    }

    #[test]
    fn a_shrunk_file_is_survived_and_reported() {
        let fd = memfd(4 * 4096);
        let mem = GuestMemory::map(vec![RegionSpec {
            guest_phys_addr: 0,
            size: 4 * 4096,
            user_addr: 0,
            mmap_offset: 0,
            fd: dup(&fd),
            shrink_sealed: false,
        }])
        .unwrap();
        let p = mem.translate(3 * 4096, 8).unwrap();
        // SAFETY: inside the mapping, which is live.
        unsafe { p.write_volatile(7) };
        assert!(!mem.faulted());
        let epoch = crate::guard::fault_epoch();
        // SAFETY: plain syscall on our fd: the frontend's attack.
        assert_eq!(unsafe { libc::ftruncate(fd.as_raw_fd(), 4096) }, 0);
        // SAFETY: still our mapping; the access past the file's new end
        // raises SIGBUS, which the guard turns into a read of zero.
        let v = unsafe { p.read_volatile() };
        assert_eq!(v, 0);
        assert!(mem.faulted());
        assert_ne!(crate::guard::fault_epoch(), epoch);
        // The rest of the mapping is zeros too, and writable.
        let q = mem.translate(0, 8).unwrap();
        // SAFETY: inside the (replaced) mapping.
        unsafe {
            assert_eq!(q.read_volatile(), 0);
            q.write_volatile(1);
        }
    }

    #[test]
    fn a_budget_refuses_what_does_not_fit_and_is_given_back_on_unmap() {
        static BUDGET: MapBudget = MapBudget::new(1 << 40);
        let spec = |size: u64, off: u64| RegionSpec {
            guest_phys_addr: 0,
            size,
            user_addr: 0,
            mmap_offset: off,
            fd: memfd((size + off) as usize),
            shrink_sealed: false,
        };
        // Sparse: 768 GiB of memfd costs nothing until touched.
        let a = GuestMemory::map_charged(vec![spec(512 << 30, 0)], &BUDGET).unwrap();
        assert_eq!((a.charged(), BUDGET.used()), (512 << 30, 512 << 30));
        // The mapped length counts the offset: 4 KiB at 600 GiB maps 600 GiB.
        let e = GuestMemory::map_charged(vec![spec(4096, 600 << 30)], &BUDGET).unwrap_err();
        let MemoryError::OverBudget(o) = e else {
            panic!("{e}")
        };
        assert_eq!(
            (o.want, o.used, o.limit),
            ((600 << 30) + 4096, 512 << 30, 1 << 40)
        );
        assert_eq!(BUDGET.used(), 512 << 30, "a refusal charges nothing");
        let b = GuestMemory::map_charged(vec![spec(256 << 30, 0)], &BUDGET).unwrap();
        assert_eq!(BUDGET.used(), 768 << 30);
        drop(a);
        assert_eq!(BUDGET.used(), 256 << 30);
        drop(b);
        assert_eq!(BUDGET.used(), 0);
        // Uncharged mapping is unaffected by any budget.
        assert_eq!(GuestMemory::map(vec![spec(4096, 0)]).unwrap().charged(), 0);
    }

    #[test]
    fn guest_memory_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<GuestMemory>();
    }
}
