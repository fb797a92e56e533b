//! SET_MEM_TABLE: checking the frontend's region list before anything is
//! mapped. A frontend is hostile: regions must not overlap (in
//! guest-physical or in frontend-virtual space), and each file must pass
//! `nfv_virtio::tenant_fd::check_mappable` — the one check every file a
//! tenant hands us for mapping passes (memory regions, the dirty log, memif
//! regions): a regular file on tmpfs (memfd, `/dev/shm`) or hugetlbfs
//! (hugepage memfd, `/dev/hugepages`), at least as long as the part we map.
//! A file on any other file system (a disk, NFS, FUSE) is refused: a page
//! fault there can wait on I/O or on another process, on a PMD thread; and
//! mapping past the end of a file would turn the first access into SIGBUS.
//!
//! Shrinking after the check is the remaining way to fault. A memfd sealed
//! with `F_SEAL_SHRINK` cannot shrink; QEMU's `memory-backend-memfd` seals
//! by default (`seal=on`: grow, shrink and seal seals), but its
//! `memory-backend-file` (hugetlbfs, `/dev/shm` files) cannot be sealed, and
//! DPDK virtio-user hands hugetlbfs files or `MFD_HUGETLB` memfds created
//! without `MFD_ALLOW_SEALING`, so no seals either: seals are not required
//! (real frontends would be refused). Whether a region was sealed is passed
//! on ([`RegionSpec::shrink_sealed`]); unsealed memory relies on the SIGBUS
//! guard (`nfv_virtio::guard`), which turns a fault into the quarantine of
//! that port's rings.
//!
//! Size: a file costs the frontend nothing to make huge (a sparse memfd),
//! but what we map takes the switch's address space. A table is charged
//! the length actually mapped (`GuestMemory::mapped_len`: each region's
//! file from offset 0 to `mmap_offset + size`, so a small region far into
//! a file costs the whole prefix). It must fit the port's cap
//! (`max_guest_memory`, default [`DEFAULT_MAX_GUEST_MEMORY`]) and, together
//! with every table mapped by any port of the node (old tables included
//! until their last ring lets go), the node's budget ([`NODE_BUDGET`],
//! default [`DEFAULT_NODE_GUEST_MEMORY`]). A table over either is refused
//! with a NACK and counted (`mem_over_budget`, `mem_table_errors`); the
//! port keeps the table it had and its rings keep running.

use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};

use nfv_virtio::GuestMemory;
use nfv_virtio::memory::{MapBudget, MemoryError, RegionSpec};
use nfv_virtio::tenant_fd::{self, UnmappableFd};
use vhost::vhost_user::message::VhostUserMemoryRegion;

/// Most regions in one table (the vhost-user limit for SET_MEM_TABLE).
pub const MAX_REGIONS: usize = 8;

/// Default cap on one port's mapped guest memory: 1 TiB. QEMU maps a
/// guest's RAM once per region from the same file, the region above 4 GiB
/// from an offset of 2–3 GiB, so a VM of `R` bytes of RAM costs `R` plus
/// up to 3 GiB: this admits VMs up to ~1021 GiB — above the NFV VMs this
/// switch serves (tens to hundreds of GiB) and the largest general-purpose
/// cloud shapes — while one port can take no more than 1/64 of the node's
/// budget.
pub const DEFAULT_MAX_GUEST_MEMORY: u64 = 1 << 40;

/// Largest `max_guest_memory_gib` a port may set: 64 TiB, the default
/// node budget.
pub const NODE_BUDGET_MAX_GIB: u64 = 64 << 10;

/// Default budget of guest memory mapped by all vhost-user ports of the
/// node together: 64 TiB, half of x86-64's 128 TiB user address space
/// (4-level paging), leaving the other half to the packet pools, thread
/// stacks, the heap and the transient second table of a port swapping
/// tables.
pub const DEFAULT_NODE_GUEST_MEMORY: u64 = 64 << 40;

/// The node's guest-memory budget, shared by every vhost-user port of the
/// process (and every memif connection, which charges its regions here);
/// [`MapBudget::set_limit`] changes it for later tables.
pub static NODE_BUDGET: MapBudget = MapBudget::new(DEFAULT_NODE_GUEST_MEMORY);

/// Why a checked table was not mapped.
#[derive(Debug)]
pub(crate) enum MapRefused {
    /// Over the port's cap or the node's budget: the old table stays.
    Budget(String),
    Other(String),
}

/// Maps a checked table if it fits the port's cap `cap` and the node's
/// budget (charged until the memory is unmapped).
pub(crate) fn map(specs: Vec<RegionSpec>, cap: u64) -> Result<GuestMemory, MapRefused> {
    let want = GuestMemory::mapped_len(&specs);
    if want > cap {
        return Err(MapRefused::Budget(format!(
            "it maps {want} bytes, more than the port's max_guest_memory of {cap} bytes"
        )));
    }
    GuestMemory::map_charged(specs, &NODE_BUDGET).map_err(|e| match e {
        MemoryError::OverBudget(o) => MapRefused::Budget(o.to_string()),
        e => MapRefused::Other(e.to_string()),
    })
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemTableError {
    #[error("{0} regions; 1..={MAX_REGIONS} are allowed")]
    Count(usize),
    #[error("{regions} regions but {files} file descriptors")]
    Fds { regions: usize, files: usize },
    #[error("region {0}: size 0 or address overflow")]
    Range(usize),
    #[error("regions {0} and {1} overlap in guest-physical addresses")]
    GpaOverlap(usize, usize),
    #[error("regions {0} and {1} overlap in frontend addresses")]
    UvaOverlap(usize, usize),
    #[error("region {idx}: {err}")]
    File { idx: usize, err: UnmappableFd },
}

fn overlap(a: (u64, u64), b: (u64, u64)) -> bool {
    a.0 < b.0 + b.1 && b.0 < a.0 + a.1
}

/// Checks the table and turns it into the specs `GuestMemory::map` takes.
pub fn check(
    regions: &[VhostUserMemoryRegion],
    files: Vec<File>,
) -> Result<Vec<RegionSpec>, MemTableError> {
    if regions.is_empty() || regions.len() > MAX_REGIONS {
        return Err(MemTableError::Count(regions.len()));
    }
    if files.len() != regions.len() {
        return Err(MemTableError::Fds {
            regions: regions.len(),
            files: files.len(),
        });
    }
    for (i, r) in regions.iter().enumerate() {
        let ok = r.memory_size != 0
            && r.guest_phys_addr.checked_add(r.memory_size).is_some()
            && r.user_addr.checked_add(r.memory_size).is_some()
            && r.mmap_offset.checked_add(r.memory_size).is_some();
        if !ok {
            return Err(MemTableError::Range(i));
        }
        for (j, o) in regions[..i].iter().enumerate() {
            if overlap(
                (r.guest_phys_addr, r.memory_size),
                (o.guest_phys_addr, o.memory_size),
            ) {
                return Err(MemTableError::GpaOverlap(j, i));
            }
            if overlap((r.user_addr, r.memory_size), (o.user_addr, o.memory_size)) {
                return Err(MemTableError::UvaOverlap(j, i));
            }
        }
    }
    let mut specs = Vec::with_capacity(regions.len());
    for (i, (r, f)) in regions.iter().zip(files).enumerate() {
        tenant_fd::check_mappable(f.as_fd(), r.mmap_offset, r.memory_size)
            .map_err(|err| MemTableError::File { idx: i, err })?;
        specs.push(RegionSpec {
            guest_phys_addr: r.guest_phys_addr,
            size: r.memory_size,
            user_addr: r.user_addr,
            mmap_offset: r.mmap_offset,
            shrink_sealed: tenant_fd::shrink_sealed(f.as_fd()),
            fd: OwnedFd::from(f),
        });
    }
    Ok(specs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    fn memfd(len: u64) -> File {
        // SAFETY: valid NUL-terminated name; the fd is fresh and ours.
        let fd = unsafe { libc::memfd_create(c"t".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0);
        // SAFETY: `fd` was just created and is owned by nothing else.
        let f = unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        f.set_len(len).unwrap();
        f
    }

    fn region(gpa: u64, size: u64, uva: u64, off: u64) -> VhostUserMemoryRegion {
        VhostUserMemoryRegion::new(gpa, size, uva, off)
    }

    /// A regular file on a disk file system (the target dir), and that
    /// file system's type; `None` (with SKIPPED) when it is tmpfs.
    fn disk_file(len: u64) -> Option<(File, u64)> {
        let dir = std::env::var_os("CARGO_TARGET_TMPDIR")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(std::env::temp_dir);
        let path = dir.join(format!("memtable-disk-{}", std::process::id()));
        let f = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .ok()?;
        let _ = std::fs::remove_file(&path);
        f.set_len(len).ok()?;
        // SAFETY: plain data, filled in by fstatfs.
        let mut sfs: libc::statfs = unsafe { std::mem::zeroed() };
        // SAFETY: valid fd and buffer.
        assert_eq!(unsafe { libc::fstatfs(f.as_raw_fd(), &mut sfs) }, 0);
        if sfs.f_type == libc::TMPFS_MAGIC {
            nfv_testutil::skip("memtable disk file", "the temp dir is on tmpfs");
            return None;
        }
        Some((f, sfs.f_type as u64))
    }

    #[test]
    fn seals_are_noticed() {
        assert!(!tenant_fd::shrink_sealed(memfd(4096).as_fd()));
        // SAFETY: valid name; the fd is fresh and then owned by the File.
        let fd = unsafe {
            libc::memfd_create(c"s".as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING)
        };
        assert!(fd >= 0);
        // SAFETY: as above.
        let f = unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        f.set_len(8192).unwrap();
        // SAFETY: adds seals to our own memfd.
        let r = unsafe {
            libc::fcntl(
                f.as_raw_fd(),
                libc::F_ADD_SEALS,
                libc::F_SEAL_SHRINK | libc::F_SEAL_GROW,
            )
        };
        assert_eq!(r, 0);
        let specs = check(&[region(0, 8192, 0, 0)], vec![f]).unwrap();
        assert!(specs[0].shrink_sealed);
    }

    #[test]
    fn good_table_passes() {
        let specs = check(
            &[
                region(0, 1 << 20, 0x7000_0000, 0),
                region(1 << 20, 1 << 20, 0x8000_0000, 4096),
            ],
            vec![memfd(1 << 20), memfd((1 << 20) + 4096)],
        )
        .unwrap();
        assert_eq!(specs.len(), 2);
        assert_eq!(specs[1].mmap_offset, 4096);
    }

    #[test]
    fn bad_tables_are_refused() {
        let m = || memfd(1 << 20);
        let cases: Vec<(Vec<VhostUserMemoryRegion>, Vec<File>, MemTableError)> = vec![
            (vec![], vec![], MemTableError::Count(0)),
            (
                vec![region(0, 4096, 0, 0)],
                vec![m(), m()],
                MemTableError::Fds {
                    regions: 1,
                    files: 2,
                },
            ),
            (
                vec![region(0, 8192, 0, 0), region(4096, 4096, 1 << 30, 0)],
                vec![m(), m()],
                MemTableError::GpaOverlap(0, 1),
            ),
            (
                vec![region(0, 8192, 0, 0), region(1 << 30, 4096, 4096, 0)],
                vec![m(), m()],
                MemTableError::UvaOverlap(0, 1),
            ),
            (
                vec![region(0, 2 << 20, 0, 0)],
                vec![m()],
                MemTableError::File {
                    idx: 0,
                    err: UnmappableFd::Short {
                        offset: 0,
                        len: 2 << 20,
                        have: 1 << 20,
                    },
                },
            ),
            (vec![region(0, 0, 0, 0)], vec![m()], MemTableError::Range(0)),
            (
                vec![region(u64::MAX - 10, 4096, 0, 0)],
                vec![m()],
                MemTableError::Range(0),
            ),
            (
                vec![region(0, 4096, 0, 0)],
                vec![File::open("/dev/null").unwrap()],
                MemTableError::File {
                    idx: 0,
                    err: UnmappableFd::NotRegular("character device"),
                },
            ),
            (
                vec![region(0, 4096, 0, 0), region(1 << 20, 4096, 1 << 20, 0)],
                vec![m(), File::from(nix::unistd::pipe().unwrap().0)],
                MemTableError::File {
                    idx: 1,
                    err: UnmappableFd::NotRegular("FIFO"),
                },
            ),
            (
                vec![region(0, 4096, 0, (1 << 20) - 100)],
                vec![m()],
                MemTableError::File {
                    idx: 0,
                    err: UnmappableFd::Short {
                        offset: (1 << 20) - 100,
                        len: 4096,
                        have: 1 << 20,
                    },
                },
            ),
        ];
        let mut cases = cases;
        if let Some((f, fs_type)) = disk_file(8192) {
            cases.push((
                vec![region(0, 4096, 0, 0)],
                vec![f],
                MemTableError::File {
                    idx: 0,
                    err: UnmappableFd::FileSystem { magic: fs_type },
                },
            ));
        }
        for (regions, files, want) in cases {
            assert_eq!(check(&regions, files).unwrap_err(), want);
        }
    }
}
