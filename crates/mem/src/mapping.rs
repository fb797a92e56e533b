//! The one `mmap` wrapper: a mapping owned by a value and unmapped when it
//! is dropped. Packet regions, AF_XDP UMEMs and rings, and AF_PACKET rings
//! are all made with it.
//!
//! Thread safety: `Send + Sync`. A mapping is a plain address range; who
//! may touch which bytes is decided by the code that hands out pieces of it
//! (a pool, a ring protocol), not by the thread that mapped it.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;

/// A read/write memory mapping, unmapped on drop.
#[derive(Debug)]
pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: see the module's thread-safety note; `Mapping` only hands out raw
// pointers, and the range stays mapped until `drop`.
unsafe impl Send for Mapping {}
// SAFETY: as above; every method takes `&self` and reads immutable fields.
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

impl Mapping {
    /// Maps `len` bytes of `fd` from `offset`, shared with whoever else
    /// maps it (another process, the kernel's side of a socket ring).
    pub fn shared(
        fd: BorrowedFd<'_>,
        len: usize,
        offset: u64,
        populate: Populate,
    ) -> io::Result<Mapping> {
        let offset = libc::off_t::try_from(offset)
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: a fresh mapping at an address the kernel picks, so no
        // existing memory is affected; the kernel checks `fd`, `len` and
        // `offset`; the result is checked before use.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | populate.flag(),
                fd.as_raw_fd(),
                offset,
            )
        };
        Self::checked(p, len)
    }

    /// Anonymous private memory, every page faulted in now.
    pub fn anonymous(len: usize) -> io::Result<Mapping> {
        // SAFETY: a fresh anonymous mapping; no existing memory is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        Self::checked(p, len)
    }

    fn checked(p: *mut libc::c_void, len: usize) -> io::Result<Mapping> {
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(p.cast()).ok_or_else(|| io::Error::other("mmap returned NULL"))?;
        Ok(Mapping { ptr, len })
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

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the range `mmap` returned; whoever still
        // needs the memory keeps the `Mapping` alive (or leaks it on purpose,
        // as a pool with packets in flight does).
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
        // SAFETY: as above.
        let fd = unsafe { OwnedFd::from_raw_fd(libc::memfd_create(c"m".as_ptr(), 0)) };
        assert!(Mapping::shared(fd.as_fd(), 4096, u64::MAX, Populate::Now).is_err());
    }
}
