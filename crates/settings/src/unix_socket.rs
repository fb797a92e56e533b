//! Unix socket files the switch listens on (vhost-user and memif server
//! ports, the control socket): bound without ever taking a path over
//! from someone else, removed without ever deleting what is not ours.
//!
//! * [`listen_exclusive`] looks at the path first, without following a
//!   symbolic link. Nothing there: bind. A socket nobody listens on (a
//!   `connect(2)` to it is refused: what a crashed run leaves) is removed
//!   and the path bound. Anything else is refused and left alone: a
//!   socket that accepts connections ("in use by another process"), a
//!   symbolic link (never followed), a file or directory.
//! * The [`BoundSocket`] it returns remembers the inode it bound (device
//!   and inode number). Dropping it (or [`BoundSocket::remove`]) removes
//!   the path only while it still names that inode: a socket another
//!   process bound there in the meantime stays. It also holds a duplicate
//!   of the listening descriptor until then: a bound socket keeps its
//!   inode alive, so the file system cannot give that inode number to a
//!   file someone else creates at the path (ext4 reuses a freed number at
//!   once) and the comparison cannot be fooled.
//!
//! Errors are `io::Error`s whose kind says what was found
//! (`AddrInUse`: someone listens; `AlreadyExists`: not a socket) and whose
//! text says it without the path: callers name the path in their own
//! error ("vhost-user socket /x: ...").
//!
//! Abstract sockets (memif's `@name`) have no file and need none of this.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::sys::socket::{self, AddressFamily, Backlog, SockFlag, SockType, UnixAddr};

/// The mode and owner a socket file gets before anyone can connect to it
/// (the control socket: 0660 root:group). Default: what the umask and
/// the process's user give.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SocketAccess {
    /// Permission bits (`0o660`).
    pub mode: Option<u32>,
    /// Owning user id.
    pub uid: Option<u32>,
    /// Owning group id.
    pub gid: Option<u32>,
}

impl SocketAccess {
    fn is_default(&self) -> bool {
        *self == SocketAccess::default()
    }
}

/// A socket file this process bound: `path` and the inode it had then.
/// Dropped, it removes the path if the path still names that inode.
/// Holds a duplicate of the socket's descriptor (see the module doc), so
/// the socket stays bound until this is dropped.
#[derive(Debug)]
pub struct BoundSocket {
    path: PathBuf,
    id: (u64, u64),
    armed: bool,
    _pin: OwnedFd,
}

/// What [`BoundSocket::remove`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Removal {
    /// The path named our inode and is gone.
    Removed,
    /// The path names another inode now (someone bound it again, or put
    /// something else there): left alone.
    NotOurs,
    /// Nothing is at the path any more.
    Missing,
}

impl BoundSocket {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `(st_dev, st_ino)` of the socket file as bound.
    pub fn inode(&self) -> (u64, u64) {
        self.id
    }

    /// Removes the path if it still names the inode we bound.
    pub fn remove(mut self) -> io::Result<Removal> {
        self.armed = false;
        remove_if_ours(&self.path, self.id)
    }
}

impl Drop for BoundSocket {
    fn drop(&mut self) {
        if self.armed {
            let _ = remove_if_ours(&self.path, self.id);
        }
    }
}

fn remove_if_ours(path: &Path, id: (u64, u64)) -> io::Result<Removal> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() && (m.dev(), m.ino()) == id => {
            match std::fs::remove_file(path) {
                Ok(()) => Ok(Removal::Removed),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Removal::Missing),
                Err(e) => Err(e),
            }
        }
        Ok(_) => Ok(Removal::NotOurs),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Removal::Missing),
        Err(e) => Err(e),
    }
}

/// A `SOCK_STREAM` listener at `path` (vhost-user, the control socket):
/// [`listen_exclusive`] with a backlog of 128, as a std listener.
pub fn bind_exclusive(
    path: &Path,
    access: &SocketAccess,
) -> io::Result<(UnixListener, BoundSocket)> {
    let (fd, bound) = listen_exclusive(path, SockType::Stream, 128, access)?;
    Ok((UnixListener::from(fd), bound))
}

/// Binds a listening socket of type `ty` at `path`, refusing to take the
/// path from anyone (see the module doc), with `access` applied before
/// the socket can be reached.
///
/// With the default `access` the socket is bound at `path` directly.
/// Otherwise it is bound in a fresh directory of mode 0700 beside `path`,
/// given its mode and owner there (no one else can reach it yet: no
/// window in which the umask's mode applies, no path another user could
/// swap for a link before `chmod`/`chown`), put to listen, and renamed to
/// `path` without replacing anything that appeared there meanwhile.
pub fn listen_exclusive(
    path: &Path,
    ty: SockType,
    backlog: i32,
    access: &SocketAccess,
) -> io::Result<(OwnedFd, BoundSocket)> {
    clear_stale(path, ty)?;
    let backlog = Backlog::new(backlog).map_err(io::Error::from)?;
    let fd = socket::socket(AddressFamily::Unix, ty, SockFlag::SOCK_CLOEXEC, None)?;
    let id = if access.is_default() {
        bind_in_place(&fd, path, backlog)?
    } else {
        bind_and_move(&fd, path, backlog, access)?
    };
    let bound = BoundSocket {
        path: path.to_path_buf(),
        id,
        armed: true,
        _pin: fd.try_clone()?,
    };
    Ok((fd, bound))
}

fn inode_of(path: &Path) -> io::Result<(u64, u64)> {
    let m = std::fs::symlink_metadata(path)?;
    Ok((m.dev(), m.ino()))
}

fn bind_in_place(fd: &OwnedFd, path: &Path, backlog: Backlog) -> io::Result<(u64, u64)> {
    socket::bind(fd.as_raw_fd(), &UnixAddr::new(path)?).map_err(bind_error)?;
    let id = inode_of(path)?;
    socket::listen(fd, backlog)?;
    // Between bind and listen a `connect` is refused: another process
    // checking the path in that window may have taken it for stale.
    if inode_of(path).ok() != Some(id) {
        return Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            "replaced by another process while it was being bound; not removed",
        ));
    }
    Ok(id)
}

fn bind_and_move(
    fd: &OwnedFd,
    path: &Path,
    backlog: Backlog,
    access: &SocketAccess,
) -> io::Result<(u64, u64)> {
    use nix::fcntl::{AT_FDCWD, RenameFlags, renameat2};
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let dir = nix::unistd::mkdtemp(&parent.join(".nfvXXXXXX"))
        .map_err(|e| io::Error::new(io::Error::from(e).kind(), format!("mkdtemp: {e}")))?;
    let staged = dir.join("s");
    let result = (|| {
        socket::bind(fd.as_raw_fd(), &UnixAddr::new(&staged)?).map_err(bind_error)?;
        if let Some(mode) = access.mode {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(mode))?;
        }
        if access.uid.is_some() || access.gid.is_some() {
            std::os::unix::fs::lchown(&staged, access.uid, access.gid)?;
        }
        let id = inode_of(&staged)?;
        socket::listen(fd, backlog)?;
        renameat2(
            AT_FDCWD,
            &staged,
            AT_FDCWD,
            path,
            RenameFlags::RENAME_NOREPLACE,
        )
        .map_err(|e| match e {
            Errno::EEXIST => io::Error::new(
                io::ErrorKind::AddrInUse,
                "another process created it while it was being bound; not replaced",
            ),
            e => io::Error::from(e),
        })?;
        Ok(id)
    })();
    let _ = std::fs::remove_file(&staged);
    let _ = std::fs::remove_dir(&dir);
    result
}

fn bind_error(e: Errno) -> io::Error {
    match e {
        Errno::EADDRINUSE => io::Error::new(
            io::ErrorKind::AddrInUse,
            "another process bound it while it was being checked; not removed",
        ),
        e => e.into(),
    }
}

/// Makes `path` free to bind: nothing there, or a stale socket (removed).
/// Anything else is an error and stays.
fn clear_stale(path: &Path, ty: SockType) -> io::Result<()> {
    let m = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let ft = m.file_type();
    if !ft.is_socket() {
        let what = if ft.is_symlink() {
            "a symbolic link (not followed)"
        } else if ft.is_dir() {
            "a directory"
        } else if ft.is_file() {
            "a regular file"
        } else {
            "a special file"
        };
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("exists and is not a socket but {what}; not removed"),
        ));
    }
    match probe(path, ty) {
        Probe::Refused => {}
        Probe::Gone => return Ok(()),
        Probe::Listening(how) => {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("in use by another process ({how}); not removed"),
            ));
        }
        Probe::Unknown(e) => {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("cannot tell whether another process uses it (connect: {e}); not removed"),
            ));
        }
    }
    // Stale: remove it, unless it changed since we looked (it may have
    // been re-bound, or swapped for a link, while we probed).
    if inode_of(path).ok() != Some((m.dev(), m.ino())) {
        return Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            "replaced by another process while it was being checked; not removed",
        ));
    }
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

enum Probe {
    /// Nobody listens: a stale socket.
    Refused,
    /// The file went away meanwhile.
    Gone,
    /// Someone listens (what showed it).
    Listening(&'static str),
    /// The probe could not tell.
    Unknown(Errno),
}

/// Connects to `path` without blocking. Only a refused connection shows
/// a stale socket: an accepted one, a full backlog and a socket of
/// another type all show a live one.
fn probe(path: &Path, ty: SockType) -> Probe {
    let Ok(addr) = UnixAddr::new(path) else {
        return Probe::Unknown(Errno::ENAMETOOLONG);
    };
    let fd = match socket::socket(
        AddressFamily::Unix,
        ty,
        SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        None,
    ) {
        Ok(fd) => fd,
        Err(e) => return Probe::Unknown(e),
    };
    match socket::connect(fd.as_raw_fd(), &addr) {
        Ok(()) => Probe::Listening("a connection to it was accepted"),
        Err(Errno::EAGAIN | Errno::EINPROGRESS) => {
            Probe::Listening("it listens, its backlog is full")
        }
        Err(Errno::EPROTOTYPE) => Probe::Listening("a socket of another type is bound to it"),
        Err(Errno::ECONNREFUSED) => Probe::Refused,
        Err(Errno::ENOENT) => Probe::Gone,
        Err(e) => Probe::Unknown(e),
    }
}

/// The file `path` names as the kernel resolves it, for telling whether
/// two socket paths are the same socket: the longest existing ancestor of
/// its directory resolved (symbolic links followed, made absolute), the
/// rest normalised by hand (`.` dropped, `..` taking off a component),
/// then the file name; a symbolic link at the path itself is followed
/// too. `a/../a/x.sock`, `./a/x.sock` and `link-to-a/x.sock` all give
/// `/abs/a/x.sock`. Reads the file system; never fails (what cannot be
/// resolved is normalised as written).
pub fn canonical_path(path: &Path) -> PathBuf {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let (dir, name) = match (abs.parent(), abs.file_name()) {
        (Some(d), Some(n)) => (d, n),
        // `/` or a path ending in `..`: no file name to keep apart.
        _ => return resolve_dir(&abs),
    };
    let joined = resolve_dir(dir).join(name);
    match std::fs::symlink_metadata(&joined) {
        Ok(m) if m.file_type().is_symlink() => joined.canonicalize().unwrap_or(joined),
        _ => joined,
    }
}

/// `dir` resolved as far as it exists, the rest normalised lexically.
fn resolve_dir(dir: &Path) -> PathBuf {
    let parts: Vec<_> = dir.components().collect();
    for k in (1..=parts.len()).rev() {
        let head: PathBuf = parts[..k].iter().collect();
        if let Ok(real) = head.canonicalize() {
            let rest: PathBuf = parts[k..].iter().collect();
            return normalize(&real.join(rest));
        }
    }
    normalize(dir)
}

/// `.` dropped, `..` removes the component before it (never above the
/// root), without looking at the file system.
fn normalize(p: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => match out.components().next_back() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                Some(Component::RootDir | Component::Prefix(_)) => {}
                _ => out.push(c),
            },
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    struct Dir(PathBuf);
    impl Dir {
        fn new(tag: &str) -> Dir {
            let p = std::env::temp_dir().join(format!("nfv-unixsock-{}-{tag}", std::process::id()));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).unwrap();
            Dir(p)
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn stale_socket(path: &Path) {
        drop(UnixListener::bind(path).unwrap());
        assert!(
            std::fs::symlink_metadata(path)
                .unwrap()
                .file_type()
                .is_socket()
        );
    }

    #[test]
    fn binds_a_free_path_and_removes_it_on_drop() {
        let d = Dir::new("free");
        let p = d.0.join("a.sock");
        let (l, bound) = bind_exclusive(&p, &SocketAccess::default()).unwrap();
        assert_eq!(bound.inode(), inode_of(&p).unwrap());
        std::os::unix::net::UnixStream::connect(&p).unwrap();
        drop(l);
        assert_eq!(bound.remove().unwrap(), Removal::Removed);
        assert!(std::fs::symlink_metadata(&p).is_err());
    }

    #[test]
    fn a_stale_socket_is_replaced() {
        let d = Dir::new("stale");
        let p = d.0.join("a.sock");
        stale_socket(&p);
        let (_l, bound) = bind_exclusive(&p, &SocketAccess::default()).unwrap();
        assert_eq!(bound.inode(), inode_of(&p).unwrap());
        std::os::unix::net::UnixStream::connect(&p).unwrap();
    }

    #[test]
    fn a_live_socket_is_refused_and_kept() {
        let d = Dir::new("live");
        let p = d.0.join("a.sock");
        let _foreign = UnixListener::bind(&p).unwrap();
        let before = inode_of(&p).unwrap();
        let e = bind_exclusive(&p, &SocketAccess::default()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse);
        assert!(e.to_string().contains("in use by another process"), "{e}");
        assert_eq!(inode_of(&p).unwrap(), before);
        // A seqpacket listener is live to a stream probe too.
        let q = d.0.join("b.sock");
        let (_s, _b) =
            listen_exclusive(&q, SockType::SeqPacket, 4, &SocketAccess::default()).unwrap();
        let e = bind_exclusive(&q, &SocketAccess::default()).unwrap_err();
        assert!(e.to_string().contains("in use"), "{e}");
    }

    #[test]
    fn files_dirs_and_links_are_refused_and_kept() {
        let d = Dir::new("notsock");
        let file = d.0.join("file");
        std::fs::write(&file, b"keep me").unwrap();
        let e = bind_exclusive(&file, &SocketAccess::default()).unwrap_err();
        assert!(
            e.to_string().contains("not a socket but a regular file"),
            "{e}"
        );
        assert_eq!(std::fs::read(&file).unwrap(), b"keep me");

        let sub = d.0.join("dir");
        std::fs::create_dir(&sub).unwrap();
        let e = bind_exclusive(&sub, &SocketAccess::default()).unwrap_err();
        assert!(e.to_string().contains("a directory"), "{e}");

        // A link to a stale socket: neither followed nor removed.
        let target = d.0.join("target.sock");
        stale_socket(&target);
        let link = d.0.join("link.sock");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = bind_exclusive(&link, &SocketAccess::default()).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert!(
            std::fs::symlink_metadata(&target)
                .unwrap()
                .file_type()
                .is_socket()
        );
    }

    #[test]
    fn a_rebound_path_is_not_removed() {
        let d = Dir::new("rebound");
        let p = d.0.join("a.sock");
        let (l, bound) = bind_exclusive(&p, &SocketAccess::default()).unwrap();
        drop(l);
        std::fs::remove_file(&p).unwrap();
        let _other = UnixListener::bind(&p).unwrap();
        let theirs = inode_of(&p).unwrap();
        assert_eq!(bound.remove().unwrap(), Removal::NotOurs);
        assert_eq!(inode_of(&p).unwrap(), theirs);
        // Dropping (rather than remove()) leaves it as well.
        let q = d.0.join("b.sock");
        let (l, bound) = bind_exclusive(&q, &SocketAccess::default()).unwrap();
        drop(l);
        std::fs::remove_file(&q).unwrap();
        std::fs::write(&q, b"x").unwrap();
        drop(bound);
        assert_eq!(std::fs::read(&q).unwrap(), b"x");
    }

    #[test]
    fn access_is_applied_and_the_staging_dir_removed() {
        let d = Dir::new("access");
        let p = d.0.join("ctl.sock");
        let gid = nix::unistd::getegid().as_raw();
        let access = SocketAccess {
            mode: Some(0o660),
            uid: None,
            gid: Some(gid),
        };
        let (_l, bound) = bind_exclusive(&p, &access).unwrap();
        let m = std::fs::symlink_metadata(&p).unwrap();
        assert!(m.file_type().is_socket());
        assert_eq!(m.permissions().mode() & 0o777, 0o660);
        assert_eq!(m.gid(), gid);
        assert_eq!(bound.inode(), (m.dev(), m.ino()));
        std::os::unix::net::UnixStream::connect(&p).unwrap();
        let left: Vec<_> = std::fs::read_dir(&d.0).unwrap().collect();
        assert_eq!(left.len(), 1, "{left:?}");
        // A live one is refused the same way.
        let e = bind_exclusive(&p, &access).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse);
    }

    #[test]
    fn canonical_paths_resolve_dots_links_and_missing_tails() {
        let d = Dir::new("canon");
        let real = d.0.canonicalize().unwrap();
        std::fs::create_dir(d.0.join("a")).unwrap();
        std::os::unix::fs::symlink(d.0.join("a"), d.0.join("link")).unwrap();
        std::fs::write(d.0.join("a/target.sock"), b"").unwrap();
        std::os::unix::fs::symlink(d.0.join("a/target.sock"), d.0.join("a/alias.sock")).unwrap();
        let want = real.join("a/x.sock");
        for (written, expect) in [
            ("a/x.sock", want.clone()),
            ("a/../a/x.sock", want.clone()),
            ("./a/./x.sock", want.clone()),
            ("link/x.sock", want.clone()),
            ("link/../a/x.sock", want.clone()),
            ("a/alias.sock", real.join("a/target.sock")),
            ("missing/../a/x.sock", want.clone()),
            ("missing/sub/../x.sock", real.join("missing/x.sock")),
            ("a/y.sock", real.join("a/y.sock")),
        ] {
            assert_eq!(canonical_path(&d.0.join(written)), expect, "{written}");
        }
        assert_eq!(normalize(Path::new("/../a/./b/..")), PathBuf::from("/a"));
        assert_eq!(normalize(Path::new("a/../../b")), PathBuf::from("../b"));
    }
}
