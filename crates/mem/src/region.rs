//! One shared memory region backing a packet pool.
//!
//! The region is a memfd mapped `MAP_SHARED`, so its fd can later be handed
//! to another process (a VNF, the kernel as an AF_XDP UMEM). With
//! `HugepageMode::Auto` we first ask for a hugetlb-backed memfd (few TLB
//! misses, as DPDK does) and fall back to normal pages with a log line;
//! hugepages are never required unless the config says `require`.

use crate::mapping::{Mapping, Populate};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;

const HUGE_PAGE: usize = 2 << 20;
const PAGE: usize = 4096;

/// Which kind of memory a region ended up on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backing {
    Hugepages2M,
    Memfd4K,
}

/// Where the packet region comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum HugepageMode {
    /// hugetlbfs when available, memfd otherwise (logged).
    #[default]
    Auto,
    /// Fail if hugepages cannot be had.
    Require,
    /// Always memfd with normal pages.
    Never,
}

impl Backing {
    pub fn as_str(&self) -> &'static str {
        match self {
            Backing::Hugepages2M => "hugetlb memfd (2 MiB pages)",
            Backing::Memfd4K => "memfd (4 KiB pages)",
        }
    }
}

/// A mapped region. Unmapped on drop (the pool that owns it leaks it
/// instead while packets still point into it, see `pool.rs`).
///
/// Thread safety: the region itself is just an address range; whoever
/// hands out pieces of it (the pool) guarantees each byte has one writer.
#[derive(Debug)]
pub struct Region {
    map: Mapping,
    backing: Backing,
    fd: OwnedFd,
}

#[derive(Debug, thiserror::Error)]
pub enum RegionError {
    #[error("memfd_create failed: {0}")]
    Memfd(io::Error),
    #[error("cannot size the packet region to {len} bytes: {err}")]
    Truncate { len: usize, err: io::Error },
    #[error("cannot map {len} bytes of {backing}: {err}")]
    Map {
        len: usize,
        backing: &'static str,
        err: io::Error,
    },
    #[error(
        "hugepages required (memory.hugepages = \"require\") but unavailable: {0}; reserve some with `echo 512 > /proc/sys/vm/nr_hugepages`"
    )]
    HugepagesUnavailable(String),
}

impl Region {
    /// Maps at least `len` bytes according to `mode`.
    pub fn new(name: &str, len: usize, mode: HugepageMode) -> Result<Region, RegionError> {
        match mode {
            HugepageMode::Never => Self::map(name, len, Backing::Memfd4K),
            HugepageMode::Require => Self::map(name, len, Backing::Hugepages2M)
                .map_err(|e| RegionError::HugepagesUnavailable(e.to_string())),
            HugepageMode::Auto => match Self::map(name, len, Backing::Hugepages2M) {
                Ok(r) => Ok(r),
                Err(e) => {
                    tracing::info!(
                        "packet memory: hugepages unavailable ({e}); using normal pages"
                    );
                    Self::map(name, len, Backing::Memfd4K)
                }
            },
        }
    }

    fn map(name: &str, len: usize, backing: Backing) -> Result<Region, RegionError> {
        let (page, flags) = match backing {
            // Sealing allowed: a region shared with a peer can be sealed
            // against shrinking ([`Region::seal_size`]).
            Backing::Hugepages2M => (
                HUGE_PAGE,
                libc::MFD_CLOEXEC | libc::MFD_HUGETLB | libc::MFD_ALLOW_SEALING,
            ),
            Backing::Memfd4K => (PAGE, libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING),
        };
        let len = len.div_ceil(page).max(1) * page;
        let cname = CString::new(name).unwrap_or_else(|_| c"nfvswitch".to_owned());
        // SAFETY: `cname` is a valid NUL-terminated string; flags are valid.
        let raw = unsafe { libc::memfd_create(cname.as_ptr(), flags) };
        if raw < 0 {
            return Err(RegionError::Memfd(io::Error::last_os_error()));
        }
        // SAFETY: `raw` is a fresh fd we own exclusively.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: plain syscall on an fd we own.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } != 0 {
            return Err(RegionError::Truncate {
                len,
                err: io::Error::last_os_error(),
            });
        }
        // Prefaulted: the fast path never takes a page fault, and a hugetlb
        // region without enough reserved pages fails here, not later.
        let map =
            Mapping::shared(fd.as_fd(), len, 0, Populate::Now).map_err(|err| RegionError::Map {
                len,
                backing: backing.as_str(),
                err,
            })?;
        Ok(Region { map, backing, fd })
    }

    /// Seals the file's size (`F_SEAL_SHRINK | F_SEAL_GROW`) before it is
    /// handed to a peer: a peer that holds the fd can then write the
    /// memory but never truncate it under us (which would turn our next
    /// access into SIGBUS).
    pub fn seal_size(&self) -> io::Result<()> {
        // SAFETY: plain fcntl on an fd we own.
        let r = unsafe {
            libc::fcntl(
                self.fd.as_raw_fd(),
                libc::F_ADD_SEALS,
                libc::F_SEAL_SHRINK | libc::F_SEAL_GROW,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    pub fn base(&self) -> NonNull<u8> {
        self.map.base()
    }
    pub fn len(&self) -> usize {
        self.map.len()
    }
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
    pub fn backing(&self) -> Backing {
        self.backing
    }
    /// The memfd, for sharing the region with another process or the kernel.
    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }
    /// True when `[ptr, ptr+len)` lies inside this region.
    pub fn contains(&self, ptr: *const u8, len: usize) -> bool {
        let start = self.map.as_ptr() as usize;
        let p = ptr as usize;
        p >= start
            && p.checked_add(len)
                .is_some_and(|end| end <= start + self.map.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_mode_maps_normal_pages_and_is_writable() {
        let r = Region::new("t", 10_000, HugepageMode::Never).unwrap();
        assert_eq!(r.backing(), Backing::Memfd4K);
        assert_eq!(r.len(), 12_288);
        // SAFETY: the region is 12 KiB, mapped read/write, owned by this test.
        unsafe {
            r.base().as_ptr().add(12_287).write(7);
            assert_eq!(r.base().as_ptr().add(12_287).read(), 7);
        }
        assert!(r.contains(r.base().as_ptr(), 12_288));
        assert!(!r.contains(r.base().as_ptr(), 12_289));
    }

    #[test]
    fn a_sealed_region_cannot_be_truncated() {
        let r = Region::new("t", 8192, HugepageMode::Never).unwrap();
        r.seal_size().unwrap();
        // SAFETY: plain syscall on the region's fd.
        let shrink = unsafe { libc::ftruncate(r.fd().as_raw_fd(), 0) };
        assert_eq!(shrink, -1);
        assert_eq!(io::Error::last_os_error().raw_os_error(), Some(libc::EPERM));
    }

    #[test]
    fn auto_mode_always_succeeds() {
        let r = Region::new("t", 1 << 20, HugepageMode::Auto).unwrap();
        assert!(r.len() >= 1 << 20);
    }
}
