//! One vhost-user connection as a stream of messages: reads a header with
//! the file descriptors that came with it, then the payload; writes
//! replies. Blocking I/O on the port's protocol thread (never a PMD).
//!
//! Hostile frontends: a payload size over [`MAX_PAYLOAD`] ends the
//! connection before anything is buffered; more descriptors than
//! [`MAX_FDS`] (the kernel then truncates the control data and drops the
//! rest) end it too; descriptors are owned as soon as they arrive, so every
//! path closes them. Replies are written with a send timeout, so a
//! frontend that stops reading cannot hold the protocol thread for ever.

use std::io::{self, IoSliceMut, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};

use crate::message::{DecodeError, HEADER_LEN, Header, MAX_FDS, MAX_PAYLOAD};

/// How long a reply may wait for room in the socket buffer.
const SEND_TIMEOUT: Duration = Duration::from_secs(5);

/// A message as read: header, payload bytes, descriptors.
pub(crate) struct Raw {
    pub header: Header,
    pub payload: Vec<u8>,
    pub fds: Vec<OwnedFd>,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum RecvError {
    #[error("the frontend closed the connection")]
    Closed,
    #[error("the connection ended in the middle of a message")]
    Partial,
    #[error("socket error: {0}")]
    Io(io::Error),
    #[error("more than {MAX_FDS} file descriptors with one message")]
    TooManyFds,
    #[error("{0}")]
    Header(DecodeError),
}

pub(crate) struct Channel {
    stream: UnixStream,
}

impl Channel {
    pub fn new(stream: UnixStream) -> io::Result<Channel> {
        stream.set_nonblocking(false)?;
        stream.set_write_timeout(Some(SEND_TIMEOUT))?;
        Ok(Channel { stream })
    }

    /// A second handle on the socket, for shutting it down from another
    /// thread.
    pub fn try_clone(&self) -> io::Result<UnixStream> {
        self.stream.try_clone()
    }

    /// Reads the next message.
    pub fn recv(&mut self) -> Result<Raw, RecvError> {
        let mut head = [0u8; HEADER_LEN];
        let (got, fds) = self.recv_with_fds(&mut head)?;
        if got == 0 {
            return Err(RecvError::Closed);
        }
        self.read_rest(&mut head[got..])?;
        let header = Header::parse(&head).map_err(RecvError::Header)?;
        let mut payload = vec![0u8; header.size as usize];
        debug_assert!(payload.len() <= MAX_PAYLOAD);
        self.read_rest(&mut payload)?;
        Ok(Raw {
            header,
            payload,
            fds,
        })
    }

    /// One `recvmsg` into `buf`, taking ownership of any descriptors.
    fn recv_with_fds(&mut self, buf: &mut [u8]) -> Result<(usize, Vec<OwnedFd>), RecvError> {
        let mut space = nix::cmsg_space!([std::os::fd::RawFd; MAX_FDS]);
        let mut iov = [IoSliceMut::new(buf)];
        let msg = loop {
            match recvmsg::<()>(
                self.stream.as_raw_fd(),
                &mut iov,
                Some(&mut space),
                MsgFlags::MSG_CMSG_CLOEXEC,
            ) {
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(RecvError::Io(e.into())),
                Ok(m) => break m,
            }
        };
        let mut fds = Vec::new();
        if let Ok(cmsgs) = msg.cmsgs() {
            for c in cmsgs {
                if let ControlMessageOwned::ScmRights(raw) = c {
                    for fd in raw {
                        // SAFETY: the kernel just installed `fd` in our
                        // table for this message; nothing else owns it.
                        fds.push(unsafe { OwnedFd::from_raw_fd(fd) });
                    }
                }
            }
        }
        if msg.flags.contains(MsgFlags::MSG_CTRUNC) {
            return Err(RecvError::TooManyFds);
        }
        Ok((msg.bytes, fds))
    }

    fn read_rest(&mut self, mut buf: &mut [u8]) -> Result<(), RecvError> {
        while !buf.is_empty() {
            match self.stream.read(buf) {
                Ok(0) => return Err(RecvError::Partial),
                Ok(n) => buf = &mut buf[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(RecvError::Io(e)),
            }
        }
        Ok(())
    }

    pub fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)
    }
}
