//! The dirty-page log of a migrating guest (vhost-user `VHOST_F_LOG_ALL`,
//! `VHOST_USER_SET_LOG_BASE` with `VHOST_USER_PROTOCOL_F_LOG_SHMFD`).
//!
//! While a VM migrates, its hypervisor copies guest memory to the
//! destination in rounds and recopies what changed since. It sees the
//! guest's own writes, not ours: every byte the switch writes into guest
//! memory (frames and virtio-net headers in receive buffers, used ring
//! entries, `used.idx`, event areas) must mark its pages in a bitmap the
//! frontend shares with us, or the destination resumes with stale buffers
//! and rings. The bitmap has one bit per 4 KiB page of guest-physical
//! address space (bit `p % 8` of byte `p / 8` for page `p`, so the
//! frontend may read it as little-endian 64-bit words); bits are set with
//! an atomic OR, because the frontend clears them while we set them, and
//! only after the write they describe (release ordering): a page whose bit
//! the frontend takes is copied after our bytes are in it.
//!
//! The log's file passes the same check as guest memory
//! ([`crate::tenant_fd::check_mappable`]: a regular file on tmpfs or
//! hugetlbfs, long enough). The frontend may still hand us a bitmap too
//! small for an address, shrink the file behind it, or hand us a new one
//! at any time: a mark past the end
//! is dropped and counted, the mapping is guarded against SIGBUS like
//! guest memory ([`crate::guard`]), and a new log replaces the old one
//! when the queues are rebuilt.

use std::fs::File;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use nfv_mem::{Mapping, Populate};

use crate::guard::{self, Guarded};
use crate::tenant_fd::{UnmappableFd, check_mappable};

/// Bytes of guest memory one bit of the log stands for.
pub const LOG_PAGE: u64 = 4096;

/// Largest log accepted: 4 GiB of bitmap covers 128 TiB of guest-physical
/// addresses (all of x86-64's user address space). It is only mapped:
/// pages of it are touched by marks alone.
pub const MAX_LOG_BYTES: u64 = 1 << 32;

/// Why a log could not be mapped.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LogError {
    #[error("the dirty log is empty (mmap_size 0)")]
    Empty,
    #[error("the dirty log is {0} bytes, more than the {MAX_LOG_BYTES} accepted")]
    TooLarge(u64),
    #[error("the dirty log cannot be used: {0}")]
    Unmappable(#[from] UnmappableFd),
    #[error("the dirty log cannot be mapped: {0}")]
    Map(String),
    #[error("the SIGBUS guard's table is full")]
    GuardFull,
}

/// A mapped dirty-page bitmap, shared by every queue of a port (and
/// marked from several PMD threads at once).
#[derive(Debug)]
pub struct DirtyLog {
    /// The bitmap (`len` bytes) inside the mapping.
    bits: *mut u8,
    len: usize,
    /// The mapping `bits` points into (kept only to be unmapped, after
    /// `guard` is dropped: see `Drop`).
    _map: Mapping,
    guard: Option<Guarded>,
    /// Marks of pages past the end of the bitmap (dropped).
    out_of_range: AtomicU64,
    /// Writes whose host address is not in guest memory (cannot happen
    /// for addresses the queue translated; counted, not trusted).
    untranslated: AtomicU64,
    /// Where the owner also counts every dropped mark (both kinds), so
    /// that the count outlives this log ([`DirtyLog::counting_drops_in`]).
    drops: Option<std::sync::Arc<AtomicU64>>,
}

// SAFETY: the mapping lives as long as the `DirtyLog`; every access to
// the bitmap is an atomic byte operation, so any number of threads may
// mark it at once.
unsafe impl Send for DirtyLog {}
// SAFETY: as above.
unsafe impl Sync for DirtyLog {}

impl DirtyLog {
    /// Maps `size` bytes of bitmap at `offset` in `file` (the payload and
    /// fd of `VHOST_USER_SET_LOG_BASE`).
    pub fn map(file: &File, size: u64, offset: u64) -> Result<DirtyLog, LogError> {
        if size == 0 {
            return Err(LogError::Empty);
        }
        if size > MAX_LOG_BYTES {
            return Err(LogError::TooLarge(size));
        }
        // Marks are made under locks a PMD takes: the log must be a
        // regular file in memory, as long as what is mapped.
        check_mappable(file.as_fd(), offset, size)?;
        // mmap wants a page-aligned offset: map from the page below.
        let page = 4096u64;
        let map_off = offset & !(page - 1);
        let skip = (offset - map_off) as usize;
        let map_len = size as usize + skip;
        let map = Mapping::shared(file.as_fd(), map_len, map_off, Populate::OnTouch)
            .map_err(|e| LogError::Map(e.to_string()))?;
        // Refused: `map`, never shared, is unmapped as it drops.
        let g = guard::register(map.as_ptr(), map_len).ok_or(LogError::GuardFull)?;
        Ok(DirtyLog {
            bits: map.as_ptr().wrapping_add(skip),
            len: size as usize,
            _map: map,
            guard: Some(g),
            out_of_range: AtomicU64::new(0),
            untranslated: AtomicU64::new(0),
            drops: None,
        })
    }

    /// Also counts every dropped mark in `drops` (a port's counter, kept
    /// across the logs a frontend hands over one after another).
    pub fn counting_drops_in(mut self, drops: std::sync::Arc<AtomicU64>) -> DirtyLog {
        self.drops = Some(drops);
        self
    }

    #[cold]
    fn dropped(&self, kind: &AtomicU64) {
        kind.fetch_add(1, Ordering::Relaxed);
        if let Some(d) = &self.drops {
            d.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Bitmap bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: an empty log is refused by [`DirtyLog::map`].
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Marks the pages of guest-physical `[gpa, gpa + len)` as written.
    /// Call it after the write.
    #[inline]
    pub fn mark(&self, gpa: u64, len: usize) {
        if len == 0 {
            return;
        }
        let first = gpa / LOG_PAGE;
        let last = gpa.saturating_add(len as u64 - 1) / LOG_PAGE;
        for page in first..=last {
            let byte = page / 8;
            if byte >= self.len as u64 {
                self.dropped(&self.out_of_range);
                return;
            }
            let bit = 1u8 << (page % 8);
            // SAFETY: `byte < len`: inside the mapped bitmap, which lives
            // as long as `self`; only ever accessed atomically.
            let cell = unsafe { AtomicU8::from_ptr(self.bits.add(byte as usize)) };
            // Always the atomic OR, even when the bit looks set: a plain
            // load could see a bit the frontend is about to take while
            // our write still sits in the store buffer, and the page be
            // copied without it. The locked OR drains our stores first.
            cell.fetch_or(bit, Ordering::Release);
        }
    }

    /// Marks a write at host address `ptr` in `mem` (a pointer the queue
    /// translated from a guest address).
    #[inline]
    pub fn mark_host(&self, mem: &crate::GuestMemory, ptr: *const u8, len: usize) {
        match mem.host_to_gpa(ptr, len) {
            Some(gpa) => self.mark(gpa, len),
            None => self.dropped(&self.untranslated),
        }
    }

    /// Marks dropped because the bitmap was too small for their page.
    pub fn out_of_range(&self) -> u64 {
        self.out_of_range.load(Ordering::Relaxed)
    }

    /// Writes that could not be translated back to a guest address.
    pub fn untranslated(&self) -> u64 {
        self.untranslated.load(Ordering::Relaxed)
    }

    /// True once the frontend shrank the log's file under us (its
    /// contents are lost; the migration it served cannot be trusted).
    pub fn faulted(&self) -> bool {
        self.guard.as_ref().is_some_and(Guarded::faulted)
    }

    /// Whether page `page`'s bit is set (tests and diagnostics).
    pub fn is_marked(&self, page: u64) -> bool {
        let byte = page / 8;
        if byte >= self.len as u64 {
            return false;
        }
        // SAFETY: inside the bitmap, as in `mark`.
        let cell = unsafe { AtomicU8::from_ptr(self.bits.add(byte as usize)) };
        cell.load(Ordering::Acquire) & (1 << (page % 8)) != 0
    }
}

impl Drop for DirtyLog {
    fn drop(&mut self) {
        // Unguard first (see `guard`); `_map` is unmapped after this body,
        // when the fields are dropped.
        drop(self.guard.take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memfd(len: u64) -> File {
        // SAFETY: a name we own; the fd is taken over by the File.
        let fd = unsafe { libc::memfd_create(c"nfv-log-test".as_ptr(), 0) };
        assert!(fd >= 0);
        // SAFETY: a fresh fd we own.
        let f = unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        f.set_len(len).unwrap();
        f
    }

    fn marked(log: &DirtyLog, pages: u64) -> Vec<u64> {
        (0..pages).filter(|&p| log.is_marked(p)).collect()
    }

    #[test]
    fn marks_every_page_a_write_touches() {
        let f = memfd(64);
        let log = DirtyLog::map(&f, 64, 0).unwrap();
        // (gpa, len) -> pages marked
        let cases: &[(u64, usize, &[u64])] = &[
            (0, 1, &[0]),
            (4095, 1, &[0]),
            (4095, 2, &[0, 1]),
            (4096, 4096, &[1]),
            (4096 * 3 - 6, 12, &[2, 3]),
            (4096 * 7 + 10, 1518 + 12, &[7]),
            (4096 * 8 - 100, 9000, &[7, 8, 9, 10]),
            (4096 * 20, 0, &[]),
        ];
        for &(gpa, len, want) in cases {
            let f = memfd(64);
            let log = DirtyLog::map(&f, 64, 0).unwrap();
            log.mark(gpa, len);
            assert_eq!(marked(&log, 512), want, "gpa {gpa:#x} len {len}");
        }
        // The bits are where the frontend reads them: byte p/8, bit p%8.
        log.mark(4096 * 9, 1);
        let mut b = [0u8; 2];
        std::os::unix::fs::FileExt::read_exact_at(&f, &mut b, 0).unwrap();
        assert_eq!(b, [0, 0b10]);
    }

    #[test]
    fn a_log_at_an_offset_and_past_its_end() {
        let f = memfd(8192);
        // 16 bytes = 128 pages, at an offset that is not page-aligned.
        let log = DirtyLog::map(&f, 16, 4100).unwrap();
        log.mark(4096 * 127, 4096);
        assert_eq!(log.out_of_range(), 0);
        log.mark(4096 * 128, 1);
        assert_eq!(log.out_of_range(), 1);
        let mut b = [0u8; 16];
        std::os::unix::fs::FileExt::read_exact_at(&f, &mut b, 4100).unwrap();
        assert_eq!(b[15], 0x80);
        assert_eq!(b[..15], [0; 15]);
    }

    #[test]
    fn dropped_marks_outlive_the_log_in_the_owners_counter() {
        let drops = std::sync::Arc::new(AtomicU64::new(0));
        for round in 1..=2u64 {
            let f = memfd(8);
            let log = DirtyLog::map(&f, 8, 0)
                .unwrap()
                .counting_drops_in(drops.clone());
            log.mark(4096 * 63, 1);
            log.mark(4096 * 64, 1);
            let mem = crate::GuestMemory::map(vec![crate::memory::RegionSpec {
                guest_phys_addr: 0,
                size: 4096,
                user_addr: 0x1000_0000,
                mmap_offset: 0,
                fd: memfd(4096).into(),
                shrink_sealed: false,
            }])
            .unwrap();
            // A host address outside every region: no guest page to mark.
            log.mark_host(&mem, std::ptr::null(), 1);
            assert_eq!((log.out_of_range(), log.untranslated()), (1, 1));
            drop(log);
            assert_eq!(drops.load(Ordering::Relaxed), 2 * round);
        }
    }

    #[test]
    fn bad_logs_are_refused() {
        let f = memfd(4096);
        assert_eq!(DirtyLog::map(&f, 0, 0).unwrap_err(), LogError::Empty);
        assert!(matches!(
            DirtyLog::map(&f, 4097, 0).unwrap_err(),
            LogError::Unmappable(UnmappableFd::Short { .. })
        ));
        assert!(matches!(
            DirtyLog::map(&f, 8, u64::MAX - 2).unwrap_err(),
            LogError::Unmappable(UnmappableFd::Overflow { .. })
        ));
        let (pipe_r, _pipe_w) = nix::unistd::pipe().unwrap();
        assert_eq!(
            DirtyLog::map(&File::from(pipe_r), 8, 0).unwrap_err(),
            LogError::Unmappable(UnmappableFd::NotRegular("FIFO"))
        );
        assert!(matches!(
            DirtyLog::map(&f, MAX_LOG_BYTES + 1, 0).unwrap_err(),
            LogError::TooLarge(_)
        ));
    }

    #[test]
    fn a_log_on_disk_is_refused() {
        let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let path = dir.join(format!("dirty-log-disk-{}", std::process::id()));
        let f = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        let _ = std::fs::remove_file(&path);
        f.set_len(4096).unwrap();
        let magic = nix::sys::statfs::fstatfs(f.as_fd())
            .unwrap()
            .filesystem_type()
            .0 as u64;
        if magic == 0x0102_1994 || magic == 0x9584_58f6 {
            nfv_testutil::skip("a_log_on_disk_is_refused", "the crate dir is on tmpfs");
            return;
        }
        let e = DirtyLog::map(&f, 4096, 0).unwrap_err();
        assert_eq!(e, LogError::Unmappable(UnmappableFd::FileSystem { magic }));
        assert!(e.to_string().contains("not tmpfs/hugetlbfs"), "{e}");
    }

    #[test]
    fn a_shrunk_log_file_does_not_kill_the_switch() {
        let f = memfd(8192);
        let log = DirtyLog::map(&f, 8192, 0).unwrap();
        f.set_len(0).unwrap();
        log.mark(4096 * 8 * 5000, 1);
        assert!(log.faulted());
    }
}
