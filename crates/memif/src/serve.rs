//! The server side of one control connection, from accept to CONNECTED:
//! [`crate::handshake`] driven over a [`Conn`].

use crate::handshake::{Limits, Offer, Refusal, ServerHandshake, Setup, Step};
use crate::socket::{Conn, Received};
use nfv_wire::memif::{MsgRepr, Name};
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

/// Why a connection did not come up.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    /// We refused the client (and told it why).
    #[error("refused: {}", .0.reason())]
    Refused(Refusal),
    /// The client disconnected, saying why.
    #[error("the client left: {0}")]
    PeerLeft(String),
    /// The client closed the socket.
    #[error("the client closed the connection")]
    Eof,
    /// The client did not finish within the time given.
    #[error("no CONNECT within {0:?}")]
    Timeout(Duration),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Sends HELLO (`name`: ours, e.g. "nfvswitch 0.1.0"), runs the handshake
/// and answers CONNECT with CONNECTED (`if_name`: our interface's name).
/// A client that does not finish within `timeout` is dropped (it must not
/// hold the socket's thread).
pub fn serve(
    conn: &Conn,
    limits: Limits,
    name: &str,
    if_name: &str,
    offer: impl Fn(u32) -> Option<Offer>,
    timeout: Duration,
) -> Result<Setup<OwnedFd>, HandshakeError> {
    let setup = until_connect(conn, limits, name, offer, timeout)?;
    confirm(conn, if_name)?;
    Ok(setup)
}

/// Answers CONNECT with CONNECTED (`if_name`: our interface's name).
pub fn confirm(conn: &Conn, if_name: &str) -> std::io::Result<()> {
    conn.send(
        &MsgRepr::Connected {
            if_name: Name::new(if_name.as_bytes()),
        },
        None,
    )
}

/// [`serve`] up to the client's CONNECT, left unanswered: the caller maps
/// the regions and checks the rings first, then sends [`confirm`] or a
/// DISCONNECT.
pub fn until_connect(
    conn: &Conn,
    limits: Limits,
    name: &str,
    offer: impl Fn(u32) -> Option<Offer>,
    timeout: Duration,
) -> Result<Setup<OwnedFd>, HandshakeError> {
    conn.send(&limits.hello(name), None)?;
    let mut h = ServerHandshake::new(limits);
    let mut buf = [0u8; 256];
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(HandshakeError::Timeout(timeout));
        }
        let (len, fd) = match conn.recv(&mut buf, left)? {
            Received::Nothing => continue,
            Received::Eof => return Err(HandshakeError::Eof),
            Received::Msg { len, fd } => (len, fd),
        };
        match h.on_message(&buf[..len.min(buf.len())], fd, &offer) {
            Step::Reply(m) => conn.send(&m, None)?,
            Step::Connect(setup) => return Ok(*setup),
            Step::Refuse(r) => {
                // The client may be gone already: the refusal stands.
                let _ = conn.send(&r.message(), None);
                return Err(HandshakeError::Refused(r));
            }
            Step::PeerLeft(reason) => {
                return Err(HandshakeError::PeerLeft(
                    String::from_utf8_lossy(reason.as_bytes()).into_owned(),
                ));
            }
            Step::Ignore => {}
        }
    }
}
