//! SET_MEM_TABLE: checking the frontend's region list and files before
//! anything is mapped. A frontend is hostile: regions must not overlap
//! (in guest-physical or in frontend-virtual space), and each file must be
//! a regular file (memfd, hugetlbfs, shm) at least as long as the part we
//! map — mapping past the end of a file would turn the first access into
//! SIGBUS on a PMD thread.

use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};

use nfv_virtio::memory::RegionSpec;
use vhost::vhost_user::message::VhostUserMemoryRegion;

/// Most regions in one table (the vhost-user limit for SET_MEM_TABLE).
pub const MAX_REGIONS: usize = 8;

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
    #[error("region {0}: cannot fstat its fd: {1}")]
    Stat(usize, String),
    #[error("region {0}: the fd is not a regular file (memfd, hugetlbfs or shm file)")]
    NotFile(usize),
    #[error("region {idx}: needs {need} bytes of its file but the file has {have}")]
    Short { idx: usize, need: u64, have: u64 },
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
        // SAFETY: `st` is plain data fstat fills in; the fd is open (owned by `f`).
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid fd and a valid pointer to a stat buffer.
        if unsafe { libc::fstat(f.as_raw_fd(), &mut st) } != 0 {
            return Err(MemTableError::Stat(
                i,
                std::io::Error::last_os_error().to_string(),
            ));
        }
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Err(MemTableError::NotFile(i));
        }
        let need = r.mmap_offset + r.memory_size;
        let have = st.st_size.max(0) as u64;
        if have < need {
            return Err(MemTableError::Short { idx: i, need, have });
        }
        specs.push(RegionSpec {
            guest_phys_addr: r.guest_phys_addr,
            size: r.memory_size,
            user_addr: r.user_addr,
            mmap_offset: r.mmap_offset,
            fd: OwnedFd::from(f),
        });
    }
    Ok(specs)
}

#[cfg(test)]
mod tests {
    use super::*;

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
                MemTableError::Short {
                    idx: 0,
                    need: 2 << 20,
                    have: 1 << 20,
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
                MemTableError::NotFile(0),
            ),
        ];
        for (regions, files, want) in cases {
            assert_eq!(check(&regions, files).unwrap_err(), want);
        }
    }
}
