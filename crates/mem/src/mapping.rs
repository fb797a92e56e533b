//! The one `mmap` wrapper: a mapping owned by a value and unmapped when it
//! is dropped. Packet regions, AF_XDP UMEMs and rings, AF_PACKET rings,
//! guest memory and dirty logs are all made with it.
//!
//! Besides plain mappings it makes reservations ([`Mapping::reserve`]:
//! inaccessible address space) and puts pages into part of a mapping in
//! place ([`Mapping::overlay`], `MAP_FIXED`): the AF_XDP UMEM over guest
//! memory lays the guest's files out back to back that way. The reserving
//! `Mapping` still owns the whole range, so dropping it removes every piece.
//! [`overlay_raw`] does the same on a range the caller does not hold as a
//! `Mapping`; it does not allocate, so the SIGBUS guard can use it in its
//! signal handler.
//!
//! Thread safety: `Send + Sync`. A mapping is a plain address range; who
//! may touch which bytes is decided by the code that hands out pieces of it
//! (a pool, a ring protocol), not by the thread that mapped it.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::ptr::NonNull;

/// A memory mapping, unmapped on drop: read/write, or inaccessible for a
/// reservation.
#[derive(Debug)]
pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: see the module's thread-safety note; `Mapping` only hands out raw
// pointers, and the range stays mapped until `drop`.
unsafe impl Send for Mapping {}
// SAFETY: as above; every method takes `&self` and reads immutable fields
// (`overlay` changes pages, not the value, and is `unsafe` for that).
unsafe impl Sync for Mapping {}

/// Whether the kernel fills in every page at map time (`MAP_POPULATE`):
/// the fast path then never takes a page fault, and a hugetlb mapping
/// without enough reserved pages fails at once (ENOMEM) instead of with
/// SIGBUS on first touch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Populate {
    Now,
    OnTouch,
}

impl Populate {
    fn flag(self) -> libc::c_int {
        match self {
            Populate::Now => libc::MAP_POPULATE,
            Populate::OnTouch => 0,
        }
    }
}

/// Whether private anonymous pages are charged against the kernel's
/// commit limit when they are mapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Commit {
    /// Charged up front (the kernel's default): under strict overcommit
    /// the mapping fails now rather than a touch failing later.
    Reserve,
    /// `MAP_NORESERVE`: not charged; for large ranges of which little is
    /// ever touched (reservations, padding, zeros standing in for lost
    /// pages).
    NoReserve,
}

impl Commit {
    fn flag(self) -> libc::c_int {
        match self {
            Commit::Reserve => 0,
            Commit::NoReserve => libc::MAP_NORESERVE,
        }
    }
}

/// What [`Mapping::overlay`] and [`overlay_raw`] put in place, always
/// read/write.
#[derive(Clone, Copy, Debug)]
pub enum Pages<'a> {
    /// Private anonymous zero pages (`MAP_PRIVATE | MAP_ANONYMOUS`):
    /// writes stay in this process.
    Zeros { populate: Populate, commit: Commit },
    /// `fd`'s pages from `offset` (`MAP_SHARED`): the same memory as every
    /// other mapping of them.
    File {
        fd: BorrowedFd<'a>,
        offset: u64,
        populate: Populate,
    },
}

impl Pages<'_> {
    /// `mmap`'s flags, fd and offset for these pages. No allocation.
    fn args(self) -> (libc::c_int, RawFd, u64) {
        match self {
            Pages::Zeros { populate, commit } => (
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | populate.flag() | commit.flag(),
                -1,
                0,
            ),
            Pages::File {
                fd,
                offset,
                populate,
            } => (libc::MAP_SHARED | populate.flag(), fd.as_raw_fd(), offset),
        }
    }
}

/// The one `mmap` call. It does not allocate (errors are errno values or
/// a bare kind), so [`overlay_raw`] may use it in a signal handler.
///
/// # Safety
/// Without `MAP_FIXED` in `flags` there is no requirement: the kernel
/// picks a fresh range. With it, `[addr, addr + len)` is replaced, so the
/// caller must own that range and nothing may rely on what is there now.
unsafe fn map(
    addr: *mut u8,
    len: usize,
    prot: libc::c_int,
    flags: libc::c_int,
    fd: RawFd,
    offset: u64,
) -> io::Result<*mut u8> {
    let offset =
        libc::off_t::try_from(offset).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: the caller's contract covers `MAP_FIXED`; otherwise the
    // mapping is fresh and nothing existing is affected. The kernel checks
    // `fd`, `len` and `offset`, and the result is checked before use.
    let p = unsafe { libc::mmap(addr.cast(), len, prot, flags, fd, offset) };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(p.cast())
}

const RW: libc::c_int = libc::PROT_READ | libc::PROT_WRITE;

impl Mapping {
    /// Maps `len` bytes of `fd` from `offset`, shared with whoever else
    /// maps it (another process, the kernel's side of a socket ring).
    pub fn shared(
        fd: BorrowedFd<'_>,
        len: usize,
        offset: u64,
        populate: Populate,
    ) -> io::Result<Mapping> {
        let flags = libc::MAP_SHARED | populate.flag();
        // SAFETY: no MAP_FIXED: a fresh range at an address the kernel picks.
        let p = unsafe { map(std::ptr::null_mut(), len, RW, flags, fd.as_raw_fd(), offset) }?;
        Self::owned(p, len)
    }

    /// Anonymous private memory, every page faulted in now.
    pub fn anonymous(len: usize) -> io::Result<Mapping> {
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE;
        // SAFETY: no MAP_FIXED: a fresh range at an address the kernel picks.
        let p = unsafe { map(std::ptr::null_mut(), len, RW, flags, -1, 0) }?;
        Self::owned(p, len)
    }

    /// `len` bytes of address space, inaccessible (`PROT_NONE`, private,
    /// anonymous, `MAP_NORESERVE`): no other mapping can land there, and
    /// [`Mapping::overlay`] puts usable pages into it.
    pub fn reserve(len: usize) -> io::Result<Mapping> {
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE;
        // SAFETY: no MAP_FIXED: a fresh range at an address the kernel picks.
        let p = unsafe { map(std::ptr::null_mut(), len, libc::PROT_NONE, flags, -1, 0) }?;
        Self::owned(p, len)
    }

    fn owned(p: *mut u8, len: usize) -> io::Result<Mapping> {
        let ptr = NonNull::new(p).ok_or_else(|| io::Error::other("mmap returned NULL"))?;
        Ok(Mapping { ptr, len })
    }

    /// Replaces `[offset, offset + len)` of this mapping with `pages`
    /// (`MAP_FIXED`, read/write). The range stays part of this mapping:
    /// dropping it unmaps the new pages too. Offset and length must be
    /// multiples of the page size (of `pages`' file, for hugetlbfs); a
    /// range outside the mapping is refused (`InvalidInput`) before any
    /// syscall.
    ///
    /// # Safety
    /// Whatever was mapped in that range is gone: nothing (no reference,
    /// no pointer in use, no kernel registration such as an AF_XDP UMEM)
    /// may rely on its old contents.
    pub unsafe fn overlay(&self, offset: usize, len: usize, pages: Pages<'_>) -> io::Result<()> {
        if offset.checked_add(len).is_none_or(|end| end > self.len) {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        }
        // SAFETY: the range lies inside our own mapping (checked above), so
        // only memory this value owns is replaced; the caller promises
        // nothing relies on it.
        unsafe { overlay_raw(self.ptr.as_ptr().add(offset), len, pages) }
    }

    /// First byte of the mapping.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// First byte of the mapping, never null.
    pub fn base(&self) -> NonNull<u8> {
        self.ptr
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a zero-length mapping (which `mmap` refuses to make).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Replaces `[addr, addr + len)` with `pages` (`MAP_FIXED`, read/write),
/// for a range that is not held as a [`Mapping`] here (the SIGBUS guard's
/// entries are addresses). Whoever owns the range still unmaps it as
/// before. Async-signal-safe: one `mmap` syscall, no allocation, no lock.
///
/// # Safety
/// `addr` and `len` must be page-aligned and the range mapped by the
/// caller or by an owner that cannot unmap it meanwhile; nothing may rely
/// on its old contents (or, as in the guard, losing them is the point).
pub unsafe fn overlay_raw(addr: *mut u8, len: usize, pages: Pages<'_>) -> io::Result<()> {
    let (flags, fd, offset) = pages.args();
    // SAFETY: MAP_FIXED over a range the caller vouches for (see above).
    let p = unsafe { map(addr, len, RW, flags | libc::MAP_FIXED, fd, offset) }?;
    if p != addr {
        // MAP_FIXED puts the pages at `addr` or fails; never seen.
        return Err(io::Error::from(io::ErrorKind::Other));
    }
    Ok(())
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the range `mmap` returned (pieces overlaid
        // into it included); whoever still needs the memory keeps the
        // `Mapping` alive (or leaks it on purpose, as a pool with packets in
        // flight does).
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::{AsFd, FromRawFd, OwnedFd};

    #[test]
    fn anonymous_and_shared_mappings_are_writable_and_shared_ones_are_shared() {
        let a = Mapping::anonymous(8192).unwrap();
        // SAFETY: 8 KiB mapped read/write, owned by this test.
        unsafe {
            a.as_ptr().add(8191).write(9);
            assert_eq!(a.as_ptr().add(8191).read(), 9);
        }
        // SAFETY: a valid NUL-terminated name; plain syscalls on fds we own.
        let fd = unsafe {
            let raw = libc::memfd_create(c"mapping-test".as_ptr(), libc::MFD_CLOEXEC);
            assert!(raw >= 0);
            assert_eq!(libc::ftruncate(raw, 8192), 0);
            OwnedFd::from_raw_fd(raw)
        };
        let m1 = Mapping::shared(fd.as_fd(), 8192, 0, Populate::Now).unwrap();
        let m2 = Mapping::shared(fd.as_fd(), 4096, 4096, Populate::OnTouch).unwrap();
        assert_eq!((m1.len(), m2.len(), m1.is_empty()), (8192, 4096, false));
        // SAFETY: both mappings are live and at least as long as the offsets used.
        unsafe {
            m1.as_ptr().add(4096 + 7).write(42);
            assert_eq!(m2.as_ptr().add(7).read(), 42, "same page of the file");
        }
    }

    #[test]
    fn refusals_are_errors() {
        assert!(Mapping::anonymous(0).is_err(), "zero length");
        assert!(Mapping::reserve(0).is_err(), "zero length");
        // SAFETY: as above.
        let fd = unsafe { OwnedFd::from_raw_fd(libc::memfd_create(c"m".as_ptr(), 0)) };
        assert!(Mapping::shared(fd.as_fd(), 4096, u64::MAX, Populate::Now).is_err());
    }

    fn memfd(len: i64) -> OwnedFd {
        // SAFETY: a valid NUL-terminated name; plain syscalls on an fd we own.
        unsafe {
            let raw = libc::memfd_create(c"mapping-overlay".as_ptr(), libc::MFD_CLOEXEC);
            assert!(raw >= 0);
            assert_eq!(libc::ftruncate(raw, len), 0);
            OwnedFd::from_raw_fd(raw)
        }
    }

    /// The permissions `/proc/self/maps` shows for the page at `p`.
    fn perms_at(p: *mut u8) -> String {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let a = p as usize;
        let line = maps
            .lines()
            .find(|l| {
                let (range, _) = l.split_once(' ').unwrap();
                let (s, e) = range.split_once('-').unwrap();
                let s = usize::from_str_radix(s, 16).unwrap();
                let e = usize::from_str_radix(e, 16).unwrap();
                (s..e).contains(&a)
            })
            .unwrap();
        line.split_whitespace().nth(1).unwrap().to_string()
    }

    fn resident(p: *mut u8, len: usize) -> bool {
        let mut vec = vec![0u8; len / 4096];
        // SAFETY: `p..p+len` is mapped; `vec` has one byte per page.
        assert_eq!(unsafe { libc::mincore(p.cast(), len, vec.as_mut_ptr()) }, 0);
        vec.iter().all(|b| b & 1 == 1)
    }

    #[test]
    fn a_reservation_takes_zeros_and_file_pages_in_place() {
        const P: usize = 4096;
        let r = Mapping::reserve(6 * P).unwrap();
        assert_eq!(perms_at(r.as_ptr()), "---p");
        let fd = memfd(2 * P as i64);
        let file = Mapping::shared(fd.as_fd(), 2 * P, 0, Populate::OnTouch).unwrap();
        // SAFETY: the file mapping is live and 2 pages long.
        unsafe { file.as_ptr().add(P + 5).write(77) };
        let zeros = Pages::Zeros {
            populate: Populate::OnTouch,
            commit: Commit::NoReserve,
        };
        let own = Pages::Zeros {
            populate: Populate::Now,
            commit: Commit::Reserve,
        };
        let page_1 = Pages::File {
            fd: fd.as_fd(),
            offset: P as u64,
            populate: Populate::OnTouch,
        };
        // SAFETY: pages 1..5 of our own reservation, which nothing uses.
        unsafe {
            r.overlay(P, P, zeros).unwrap();
            r.overlay(2 * P, P, page_1).unwrap();
            r.overlay(3 * P, 2 * P, own).unwrap();
        }
        let at = |i: usize| r.as_ptr().wrapping_add(i * P);
        assert_eq!(
            [perms_at(at(1)), perms_at(at(2)), perms_at(at(3))],
            ["rw-p", "rw-s", "rw-p"]
        );
        assert_eq!(perms_at(at(5)), "---p", "the rest stays reserved");
        assert!(resident(at(3), 2 * P), "populated now");
        // SAFETY: pages 1..5 are mapped read/write now.
        unsafe {
            assert_eq!(at(1).read(), 0);
            assert_eq!(at(2).add(5).read(), 77, "the file's second page");
            at(2).add(6).write(78);
            assert_eq!(file.as_ptr().add(P + 6).read(), 78, "shared");
            at(4).add(P - 1).write(1);
        }
        // Outside the mapping or overflowing: refused before any syscall.
        for (off, len) in [(5 * P, 2 * P), (usize::MAX - P + 1, 2 * P)] {
            // SAFETY: refused, nothing is replaced.
            let e = unsafe { r.overlay(off, len, zeros) }.unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        }
        // A misaligned offset is the kernel's to refuse.
        // SAFETY: as above (EINVAL, nothing replaced).
        assert!(unsafe { r.overlay(1, P, zeros) }.is_err());
    }

    #[test]
    fn zeros_over_a_shared_mapping_leave_the_file_alone() {
        let fd = memfd(8192);
        let m = Mapping::shared(fd.as_fd(), 8192, 0, Populate::Now).unwrap();
        // SAFETY: inside the live mapping.
        unsafe { m.as_ptr().add(4100).write(9) };
        let zeros = Pages::Zeros {
            populate: Populate::OnTouch,
            commit: Commit::NoReserve,
        };
        // SAFETY: the whole of our own mapping, which nothing else uses;
        // `m` still unmaps it on drop.
        unsafe { overlay_raw(m.as_ptr(), m.len(), zeros) }.unwrap();
        // SAFETY: still mapped, now private zeros.
        assert_eq!(unsafe { m.as_ptr().add(4100).read() }, 0);
        assert_eq!(perms_at(m.as_ptr()), "rw-p");
        let mut b = [0u8; 1];
        std::os::unix::fs::FileExt::read_exact_at(&std::fs::File::from(fd), &mut b, 4100).unwrap();
        assert_eq!(b, [9], "the file keeps what was written");
    }
}
