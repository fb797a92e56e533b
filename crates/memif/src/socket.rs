//! The control socket: `AF_UNIX` `SOCK_SEQPACKET`, one 128-byte message
//! per packet, at most one file descriptor per message (`SCM_RIGHTS`), on
//! a filesystem path or an abstract name (`@name`, trimmed length as DPDK
//! and libmemif bind it).

use nfv_settings::unix_socket::{self, BoundSocket, Removal, SocketAccess};
use nfv_wire::memif::{MSG_LEN, MsgRepr};
use nix::sys::socket::{
    self, AddressFamily, Backlog, ControlMessage, ControlMessageOwned, MsgFlags, SockFlag,
    SockType, UnixAddr,
};
use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::time::Duration;

/// Where a memif socket lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SocketPath {
    /// A file in the filesystem (what pods share through a directory).
    File(PathBuf),
    /// An abstract name (written `@name`; DPDK's default is
    /// `@/run/memif.sock`). It belongs to the network namespace.
    Abstract(String),
}

impl SocketPath {
    /// `@name` is abstract, anything else a file.
    pub fn parse(s: &str) -> SocketPath {
        match s.strip_prefix('@') {
            Some(name) => SocketPath::Abstract(name.to_string()),
            None => SocketPath::File(PathBuf::from(s)),
        }
    }

    fn addr(&self) -> io::Result<UnixAddr> {
        match self {
            SocketPath::File(p) => UnixAddr::new(p.as_path()),
            SocketPath::Abstract(n) => UnixAddr::new_abstract(n.as_bytes()),
        }
        .map_err(io::Error::from)
    }
}

impl std::fmt::Display for SocketPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SocketPath::File(p) => write!(f, "{}", p.display()),
            SocketPath::Abstract(n) => write!(f, "@{n}"),
        }
    }
}

fn seqpacket() -> io::Result<OwnedFd> {
    socket::socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(io::Error::from)
}

/// A listening socket (the server role). A file socket is removed when
/// the listener is dropped, if the path still names the socket we bound.
#[derive(Debug)]
pub struct Listener {
    fd: OwnedFd,
    path: SocketPath,
    /// The file we made (`None` for an abstract name).
    bound: Option<BoundSocket>,
}

impl Listener {
    /// Binds and listens at `path`. A file that is a socket nobody
    /// listens on any more (a previous run's) is replaced; a socket
    /// another process listens on, a link or any other file is an error
    /// and left alone ([`nfv_settings::unix_socket`]), as is a missing
    /// directory.
    pub fn bind(path: &SocketPath) -> io::Result<Listener> {
        let backlog = 16;
        let (fd, bound) = match path {
            SocketPath::File(p) => {
                let (fd, bound) = unix_socket::listen_exclusive(
                    p,
                    SockType::SeqPacket,
                    backlog,
                    &SocketAccess::default(),
                )?;
                (fd, Some(bound))
            }
            SocketPath::Abstract(_) => {
                let fd = seqpacket()?;
                socket::bind(fd.as_raw_fd(), &path.addr()?)?;
                socket::listen(&fd, Backlog::new(backlog).map_err(io::Error::from)?)?;
                (fd, None)
            }
        };
        Ok(Listener {
            fd,
            path: path.clone(),
            bound,
        })
    }

    pub fn path(&self) -> &SocketPath {
        &self.path
    }

    /// The next connection, waiting at most `timeout` (`None` if none
    /// came).
    pub fn accept(&self, timeout: Duration) -> io::Result<Option<Conn>> {
        if !readable(self.fd.as_fd(), timeout)? {
            return Ok(None);
        }
        let raw = socket::accept4(self.fd.as_raw_fd(), SockFlag::SOCK_CLOEXEC)?;
        // SAFETY: accept4 just returned this descriptor; nothing else
        // owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        Ok(Some(Conn { fd }))
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Some(bound) = self.bound.take() {
            match bound.remove() {
                Ok(Removal::Removed | Removal::Missing) => {}
                Ok(Removal::NotOurs) => tracing::info!(
                    "memif socket {}: no longer the socket we bound; left in place",
                    self.path
                ),
                Err(e) => tracing::warn!("memif socket {}: cannot remove it: {e}", self.path),
            }
        }
    }
}

/// Waits until `fd` is readable (or hung up) or `timeout` passes.
fn readable(fd: BorrowedFd<'_>, timeout: Duration) -> io::Result<bool> {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let ms = u16::try_from(timeout.as_millis()).unwrap_or(u16::MAX);
    let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
    loop {
        match poll(&mut fds, PollTimeout::from(ms)) {
            Ok(n) => return Ok(n > 0),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// What one receive found.
#[derive(Debug)]
pub enum Received {
    /// A message of `len` bytes (any length: the handshake judges it),
    /// with the first descriptor that came along; others are closed.
    Msg { len: usize, fd: Option<OwnedFd> },
    /// The peer closed the connection.
    Eof,
    /// Nothing within the timeout.
    Nothing,
}

/// One control connection.
#[derive(Debug)]
pub struct Conn {
    fd: OwnedFd,
}

impl Conn {
    /// Connects to a server at `path` (the client role; tests).
    /// Never blocks: a peer that listens but does not accept (its
    /// backlog full) gets `WouldBlock`, like a missing socket gets
    /// `NotFound`, and the caller retries — a blocking `connect(2)` would
    /// hold the port's thread, and port removal that joins it.
    pub fn connect(path: &SocketPath) -> io::Result<Conn> {
        let fd = socket::socket(
            AddressFamily::Unix,
            SockType::SeqPacket,
            SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
            None,
        )?;
        match socket::connect(fd.as_raw_fd(), &path.addr()?) {
            Ok(()) => {}
            Err(nix::errno::Errno::EAGAIN) => {
                return Err(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    "the peer listens but does not accept connections (its backlog is full)",
                ));
            }
            Err(e) => return Err(e.into()),
        }
        nix::fcntl::fcntl(
            &fd,
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::empty()),
        )?;
        Ok(Conn { fd })
    }

    /// The uid of the process that connected (`SO_PEERCRED`: as the
    /// kernel recorded it at `connect`, in the switch's user namespace).
    pub fn peer_uid(&self) -> io::Result<u32> {
        let c = socket::getsockopt(&self.fd, socket::sockopt::PeerCredentials)?;
        Ok(c.uid())
    }

    /// Shuts the connection down both ways: a thread waiting in
    /// [`Conn::recv`] wakes up and sees the end, and every later send
    /// fails (the descriptor stays open until dropped).
    pub fn shutdown(&self) -> io::Result<()> {
        socket::shutdown(self.fd.as_raw_fd(), socket::Shutdown::Both).map_err(io::Error::from)
    }

    /// Receives one message into `buf` (which should be longer than
    /// [`MSG_LEN`], so that a longer message shows as one), waiting at
    /// most `timeout`.
    pub fn recv(&self, buf: &mut [u8], timeout: Duration) -> io::Result<Received> {
        if !readable(self.fd.as_fd(), timeout)? {
            return Ok(Received::Nothing);
        }
        let mut space = nix::cmsg_space!([RawFd; 4]);
        let mut iov = [IoSliceMut::new(buf)];
        let msg = loop {
            match socket::recvmsg::<()>(
                self.fd.as_raw_fd(),
                &mut iov,
                Some(&mut space),
                MsgFlags::MSG_CMSG_CLOEXEC,
            ) {
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
                Ok(m) => break m,
            }
        };
        let mut fds: Vec<OwnedFd> = Vec::new();
        if let Ok(cmsgs) = msg.cmsgs() {
            for c in cmsgs {
                if let ControlMessageOwned::ScmRights(raw) = c {
                    // SAFETY: the kernel just installed these descriptors
                    // in our table for this message; nothing else owns
                    // them.
                    fds.extend(raw.into_iter().map(|f| unsafe { OwnedFd::from_raw_fd(f) }));
                }
            }
        }
        if msg.bytes == 0 && fds.is_empty() {
            return Ok(Received::Eof);
        }
        // A longer message than the buffer is cut by the kernel and
        // flagged: report it longer than any valid one.
        let len = if msg.flags.contains(MsgFlags::MSG_TRUNC) {
            msg.bytes.max(MSG_LEN + 1)
        } else {
            msg.bytes
        };
        let fd = if fds.is_empty() {
            None
        } else {
            Some(fds.swap_remove(0))
        };
        Ok(Received::Msg { len, fd })
    }

    /// Sends `msg`, with `fd` attached if given.
    pub fn send(&self, msg: &MsgRepr, fd: Option<BorrowedFd<'_>>) -> io::Result<()> {
        let bytes = msg.emit();
        self.send_bytes(&bytes, fd)
    }

    /// Sends raw bytes as one message (tests send malformed ones). Never
    /// waits: a peer that stops reading fills its socket buffer and gets
    /// an error here (`WouldBlock`), not our thread; a peer that has gone
    /// gets an error, not a SIGPIPE.
    pub fn send_bytes(&self, bytes: &[u8], fd: Option<BorrowedFd<'_>>) -> io::Result<()> {
        let iov = [IoSlice::new(bytes)];
        let raw = fd.map(|f| [f.as_raw_fd()]);
        let cmsg: Vec<ControlMessage<'_>> = raw
            .as_ref()
            .map(|r| vec![ControlMessage::ScmRights(r)])
            .unwrap_or_default();
        loop {
            match socket::sendmsg::<()>(
                self.fd.as_raw_fd(),
                &iov,
                &cmsg,
                MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL,
                None,
            ) {
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
                Ok(_) => return Ok(()),
            }
        }
    }
}

impl AsFd for Listener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsFd for Conn {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
