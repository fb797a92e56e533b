//! The one check every file a tenant hands us for mapping passes:
//! vhost-user memory regions (`SET_MEM_TABLE`, through
//! [`crate::GuestMemory::map`]), the vhost-user dirty log (`SET_LOG_BASE`,
//! [`crate::dirty_log::DirtyLog::map`]) and memif regions (also through
//! `GuestMemory::map`).
//!
//! A mapping of a tenant's file is touched by PMD threads (and by the
//! protocol thread under locks PMDs take), so a page fault in it must be
//! served from memory, never wait on a disk, the network or another
//! process. [`check_mappable`] accepts only
//! - a regular file (`S_IFREG`): a FIFO, socket, device or directory is
//!   refused, naming what it is;
//! - on a memory-backed file system (`fstatfs`): tmpfs (which is also what
//!   a memfd and `/dev/shm` report) or hugetlbfs. Anything else (ext4,
//!   overlayfs, NFS, and FUSE above all, whose reads a tenant may simply
//!   never answer) is refused with the file system's name;
//! - at least `offset + len` bytes long (overflow-checked): mapping past
//!   the end would turn the first access into SIGBUS.
//!
//! Seals are not required. `F_SEAL_SHRINK` would rule out the one way a
//! checked file can still fault (shrinking after the check), but real
//! peers do not set it: QEMU's `memory-backend-file` (hugetlbfs, `/dev/shm`)
//! cannot be sealed, DPDK (virtio-user, net_memif) and libmemif create
//! memfds without `MFD_ALLOW_SEALING`. A shrink is caught by the SIGBUS
//! guard ([`crate::guard`]) instead; [`shrink_sealed`] only reports whether
//! a file is sealed.
//!
//! No `unsafe` here: `nix` wraps the three syscalls.

use std::os::fd::BorrowedFd;

use nix::fcntl::{FcntlArg, SealFlag, fcntl};
use nix::sys::stat::{SFlag, fstat};
use nix::sys::statfs::{FsType, HUGETLBFS_MAGIC, TMPFS_MAGIC, fstatfs};

/// Why a tenant's file may not be mapped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnmappableFd {
    #[error("offset {offset:#x} + length {len:#x} overflows")]
    Overflow { offset: u64, len: u64 },
    #[error("cannot {call} the fd: {err}")]
    Stat { call: &'static str, err: String },
    #[error("the fd is a {0}, not a regular file (memfd, tmpfs or hugetlbfs file)")]
    NotRegular(&'static str),
    #[error(
        "the file is on the {} file system ({magic:#x}), not tmpfs/hugetlbfs: its pages could \
         fault slowly or block the PMD",
        fs_name(*.magic).unwrap_or("unknown")
    )]
    FileSystem { magic: u64 },
    #[error("offset {offset:#x} + length {len:#x} is past the end of the file ({have} bytes)")]
    Short { offset: u64, len: u64, have: u64 },
}

impl UnmappableFd {
    /// A short fixed text for protocols whose refusal carries a bounded
    /// static reason (memif's DISCONNECT: 96 bytes).
    pub fn short_reason(&self) -> &'static str {
        match self {
            UnmappableFd::Overflow { .. } => "Region too large",
            UnmappableFd::Stat { .. } => "Region fd cannot be checked",
            UnmappableFd::NotRegular(kind) => match *kind {
                "FIFO" => "Region fd is a FIFO, not a regular file",
                "socket" => "Region fd is a socket, not a regular file",
                "character device" => "Region fd is a character device, not a regular file",
                "block device" => "Region fd is a block device, not a regular file",
                "directory" => "Region fd is a directory, not a regular file",
                _ => "Region fd is not a regular file",
            },
            UnmappableFd::FileSystem { .. } => "Region file is not on tmpfs or hugetlbfs",
            UnmappableFd::Short { .. } => "Region file smaller than the region",
        }
    }
}

/// Names of the file systems a tenant's file is most likely on.
fn fs_name(magic: u64) -> Option<&'static str> {
    Some(match magic {
        0xef53 => "ext2/ext3/ext4",
        0x794c_7630 => "overlayfs",
        0x6573_5546 => "FUSE",
        0x6969 => "NFS",
        0x5846_5342 => "XFS",
        0x9123_683e => "btrfs",
        0x8584_58f6 => "ramfs",
        0x6265_6572 => "sysfs",
        0x9fa0 => "proc",
        0x1cd1 => "devpts",
        0x5346_544e => "NTFS",
        0x4d44 => "FAT",
        0xfe53_4d42 => "SMB2",
        0xff53_4d42 => "CIFS",
        0x0102_1997 => "9p",
        _ => return None,
    })
}

/// What kind of file a mode says (for refusals).
fn kind(mode: u32) -> &'static str {
    match SFlag::from_bits_truncate(mode & SFlag::S_IFMT.bits()) {
        SFlag::S_IFIFO => "FIFO",
        SFlag::S_IFSOCK => "socket",
        SFlag::S_IFCHR => "character device",
        SFlag::S_IFBLK => "block device",
        SFlag::S_IFDIR => "directory",
        SFlag::S_IFLNK => "symbolic link",
        SFlag::S_IFREG => "regular file",
        _ => "file of unknown type",
    }
}

fn memory_backed(t: FsType) -> bool {
    t == TMPFS_MAGIC || t == HUGETLBFS_MAGIC
}

/// Checks that `len` bytes at `offset` of `fd` (a tenant's file) may be
/// mapped and touched on a PMD thread: a regular file on tmpfs or
/// hugetlbfs, long enough. Three syscalls; call it once per mapping, never
/// per packet.
pub fn check_mappable(fd: BorrowedFd<'_>, offset: u64, len: u64) -> Result<(), UnmappableFd> {
    let end = offset
        .checked_add(len)
        .ok_or(UnmappableFd::Overflow { offset, len })?;
    let st = fstat(fd).map_err(|e| UnmappableFd::Stat {
        call: "fstat",
        err: e.desc().to_string(),
    })?;
    if st.st_mode & SFlag::S_IFMT.bits() != SFlag::S_IFREG.bits() {
        return Err(UnmappableFd::NotRegular(kind(st.st_mode)));
    }
    let fs = fstatfs(fd).map_err(|e| UnmappableFd::Stat {
        call: "fstatfs",
        err: e.desc().to_string(),
    })?;
    let t = fs.filesystem_type();
    if !memory_backed(t) {
        return Err(UnmappableFd::FileSystem { magic: t.0 as u64 });
    }
    let have = st.st_size.max(0) as u64;
    if have < end {
        return Err(UnmappableFd::Short { offset, len, have });
    }
    Ok(())
}

/// True when the file is sealed against shrinking (a memfd with
/// `F_SEAL_SHRINK`): it cannot fault. Never required (see the module doc).
pub fn shrink_sealed(fd: BorrowedFd<'_>) -> bool {
    // EINVAL for files that cannot be sealed.
    fcntl(fd, FcntlArg::F_GET_SEALS)
        .is_ok_and(|s| SealFlag::from_bits_truncate(s).contains(SealFlag::F_SEAL_SHRINK))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;
    use std::os::fd::{AsFd, OwnedFd};

    fn memfd(len: u64) -> File {
        let fd =
            nix::sys::memfd::memfd_create(c"tenant-fd", nix::sys::memfd::MFdFlags::MFD_CLOEXEC)
                .unwrap();
        let f = File::from(fd);
        f.set_len(len).unwrap();
        f
    }

    fn shm_file(len: u64) -> Option<File> {
        let path = format!("/dev/shm/nfv-tenant-fd-{}", std::process::id());
        let f = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .ok()?;
        let _ = std::fs::remove_file(&path);
        f.set_len(len).ok()?;
        Some(f)
    }

    /// A regular file on a file system that is not memory-backed: the
    /// target dir (on disk), else the temp dir.
    fn disk_file(len: u64) -> Option<File> {
        let dirs = [
            option_env!("CARGO_TARGET_TMPDIR").map(std::path::PathBuf::from),
            Some(std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))),
            Some(std::env::temp_dir()),
        ];
        for dir in dirs.into_iter().flatten() {
            let path = dir.join(format!("nfv-tenant-fd-disk-{}", std::process::id()));
            let Ok(f) = File::options()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&path)
            else {
                continue;
            };
            let _ = std::fs::remove_file(&path);
            f.set_len(len).ok()?;
            if !memory_backed(fstatfs(f.as_fd()).unwrap().filesystem_type()) {
                return Some(f);
            }
        }
        None
    }

    #[test]
    fn a_memfd_reports_tmpfs() {
        let f = memfd(4096);
        assert_eq!(fstatfs(f.as_fd()).unwrap().filesystem_type(), TMPFS_MAGIC);
    }

    #[test]
    fn only_long_enough_regular_files_in_memory_pass() {
        let (pipe_r, _pipe_w) = nix::unistd::pipe().unwrap();
        let dir = File::open("/").unwrap();
        let null = File::open("/dev/null").unwrap();
        let (sock, _peer) = std::os::unix::net::UnixStream::pair().unwrap();
        let sock = OwnedFd::from(sock);
        let m = memfd(8192);
        type Case<'a> = (&'a str, BorrowedFd<'a>, u64, u64, Result<(), UnmappableFd>);
        let mut cases: Vec<Case> = vec![
            ("memfd", m.as_fd(), 0, 8192, Ok(())),
            ("memfd at an offset", m.as_fd(), 4096, 4096, Ok(())),
            (
                "memfd too short",
                m.as_fd(),
                4096,
                8192,
                Err(UnmappableFd::Short {
                    offset: 4096,
                    len: 8192,
                    have: 8192,
                }),
            ),
            (
                "offset + len overflows",
                m.as_fd(),
                u64::MAX - 10,
                4096,
                Err(UnmappableFd::Overflow {
                    offset: u64::MAX - 10,
                    len: 4096,
                }),
            ),
            (
                "pipe",
                pipe_r.as_fd(),
                0,
                4096,
                Err(UnmappableFd::NotRegular("FIFO")),
            ),
            (
                "socket",
                sock.as_fd(),
                0,
                4096,
                Err(UnmappableFd::NotRegular("socket")),
            ),
            (
                "/dev/null",
                null.as_fd(),
                0,
                4096,
                Err(UnmappableFd::NotRegular("character device")),
            ),
            (
                "directory",
                dir.as_fd(),
                0,
                4096,
                Err(UnmappableFd::NotRegular("directory")),
            ),
        ];
        let shm = shm_file(8192);
        match &shm {
            Some(f) => cases.push(("/dev/shm file", f.as_fd(), 0, 8192, Ok(()))),
            None => nfv_testutil::skip("tenant_fd /dev/shm case", "cannot create a /dev/shm file"),
        }
        let disk = disk_file(8192);
        match &disk {
            Some(f) => {
                let magic = fstatfs(f.as_fd()).unwrap().filesystem_type().0 as u64;
                cases.push((
                    "disk file",
                    f.as_fd(),
                    0,
                    4096,
                    Err(UnmappableFd::FileSystem { magic }),
                ));
            }
            None => nfv_testutil::skip(
                "tenant_fd disk-file case",
                "no file system that is not tmpfs/hugetlbfs is writable here",
            ),
        }
        for (what, fd, offset, len, want) in cases {
            assert_eq!(check_mappable(fd, offset, len), want, "{what}");
            if let Err(e) = want {
                assert!(e.short_reason().len() <= 96, "{what}");
            }
        }
    }

    #[test]
    fn refusals_name_the_file_system() {
        let e = UnmappableFd::FileSystem { magic: 0x6573_5546 }.to_string();
        assert!(
            e.contains("FUSE file system (0x65735546), not tmpfs/hugetlbfs"),
            "{e}"
        );
        assert!(e.contains("block the PMD"), "{e}");
        let e = UnmappableFd::FileSystem { magic: 0x1234 }.to_string();
        assert!(e.contains("unknown file system (0x1234)"), "{e}");
        assert_eq!(
            UnmappableFd::NotRegular("FIFO").short_reason(),
            "Region fd is a FIFO, not a regular file"
        );
    }

    #[test]
    fn seals_are_reported_not_required() {
        let plain = memfd(4096);
        assert!(!shrink_sealed(plain.as_fd()));
        let fd = nix::sys::memfd::memfd_create(
            c"tenant-fd-sealed",
            nix::sys::memfd::MFdFlags::MFD_CLOEXEC | nix::sys::memfd::MFdFlags::MFD_ALLOW_SEALING,
        )
        .unwrap();
        let sealed = File::from(fd);
        sealed.set_len(4096).unwrap();
        fcntl(
            sealed.as_fd(),
            FcntlArg::F_ADD_SEALS(SealFlag::F_SEAL_SHRINK | SealFlag::F_SEAL_GROW),
        )
        .unwrap();
        assert!(shrink_sealed(sealed.as_fd()));
        assert_eq!(check_mappable(sealed.as_fd(), 0, 4096), Ok(()));
        assert_eq!(check_mappable(plain.as_fd(), 0, 4096), Ok(()));
    }
}
