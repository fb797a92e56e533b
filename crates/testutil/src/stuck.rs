//! A peer that listens on a unix socket but never accepts, with its
//! backlog already full: a blocking `connect(2)` to it never returns. What
//! a hung VNF (or one whose accept loop died) looks like to a switch port
//! in client mode.

use nix::sys::socket::{self, AddressFamily, Backlog, SockFlag, SockType, UnixAddr, bind, listen};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// The listening socket and the connections that fill its backlog; the
/// socket file is removed on drop.
pub struct StuckListener {
    _listener: OwnedFd,
    _fillers: Vec<OwnedFd>,
    path: PathBuf,
}

impl StuckListener {
    /// Binds `path` (`SOCK_STREAM` for vhost-user, `SOCK_SEQPACKET` for
    /// memif), listens with the smallest backlog and fills it.
    pub fn new(path: &Path, ty: SockType) -> StuckListener {
        let _ = std::fs::remove_file(path);
        let l =
            socket::socket(AddressFamily::Unix, ty, SockFlag::SOCK_CLOEXEC, None).expect("socket");
        let addr = UnixAddr::new(path).expect("socket path");
        bind(l.as_raw_fd(), &addr).expect("bind");
        listen(&l, Backlog::new(0).expect("backlog")).expect("listen");
        let mut fillers = Vec::new();
        // Connect without blocking until the kernel says the backlog is
        // full (a backlog of 0 holds one or two pending connections).
        for _ in 0..8 {
            let c = socket::socket(
                AddressFamily::Unix,
                ty,
                SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
                None,
            )
            .expect("socket");
            match socket::connect(c.as_raw_fd(), &addr) {
                Ok(()) => fillers.push(c),
                Err(nix::errno::Errno::EAGAIN) => break,
                Err(e) => panic!("filling the backlog: {e}"),
            }
        }
        StuckListener {
            _listener: l,
            _fillers: fillers,
            path: path.to_path_buf(),
        }
    }
}

impl Drop for StuckListener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
