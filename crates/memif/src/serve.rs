//! The server side of one control connection, from accept to CONNECTED:
//! [`crate::handshake`] driven over a [`Conn`].

use crate::handshake::{Limits, Offer, Refusal, ServerHandshake, Setup, Step};
use crate::socket::{Conn, Received};
use nfv_wire::memif::{MsgRepr, Name, Reason};
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

/// Why a connection did not come up.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    /// We refused the client (and told it why).
    #[error("refused: {}", .0.reason())]
    Refused(Refusal),
    /// ADD_REGION past the regions announced in HELLO (a
    /// [`Refusal::RegionIndex`] told apart by [`until_connect_timed`]:
    /// the client needs more memory regions than this side takes). The
    /// DISCONNECT is [`HandshakeError::too_many_regions`].
    #[error("refused: region {index} added, at most {max} regions are taken")]
    TooManyRegions { index: u16, max: u16 },
    /// The client disconnected, saying why.
    #[error("the client left: {0}")]
    PeerLeft(String),
    /// The client closed the socket.
    #[error("the client closed the connection")]
    Eof,
    /// The client did not finish within the time given.
    #[error("no CONNECT within {0:?}")]
    Timeout(Duration),
    /// The client sent nothing within the time given after HELLO.
    #[error("sent nothing within {0:?} of HELLO")]
    Silent(Duration),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl HandshakeError {
    /// The DISCONNECT for [`HandshakeError::TooManyRegions`].
    pub fn too_many_regions(max: u16) -> MsgRepr {
        MsgRepr::Disconnect {
            code: 0,
            reason: Reason::new(format!("Too many regions (at most {max})").as_bytes()),
        }
    }

    /// What to tell the client for a refusal (`None`: not a refusal).
    pub fn refusal_message(&self) -> Option<MsgRepr> {
        match self {
            HandshakeError::Refused(r) => Some(r.message()),
            HandshakeError::TooManyRegions { max, .. } => Some(Self::too_many_regions(*max)),
            _ => None,
        }
    }
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

/// How long a client may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// From HELLO to the client's first message.
    pub first_message: Duration,
    /// From HELLO to CONNECT.
    pub handshake: Duration,
}

impl Timeouts {
    /// One deadline for the whole handshake.
    pub fn whole(handshake: Duration) -> Timeouts {
        Timeouts {
            first_message: handshake,
            handshake,
        }
    }
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
    let r = until_connect_timed(conn, limits, name, offer, Timeouts::whole(timeout), || {})
        .map_err(|e| match e {
            // DPDK's wording and error, as the state machine has it.
            HandshakeError::TooManyRegions { .. } => HandshakeError::Refused(Refusal::RegionIndex),
            e => e,
        });
    if let Err(HandshakeError::Refused(why)) = &r {
        // The client may be gone already: the refusal stands.
        let _ = conn.send(&why.message(), None);
    }
    r
}

/// [`until_connect`] with a shorter deadline for the first message;
/// `spoke` runs when that message arrives (before it is judged). A
/// refusal is returned, not sent: the caller counts it first, then sends
/// [`HandshakeError::refusal_message`], so whoever sees the DISCONNECT
/// sees the count. Unlike [`until_connect`], an ADD_REGION past the
/// regions announced in HELLO is returned as
/// [`HandshakeError::TooManyRegions`] (a budget refusal, counted apart),
/// not as [`Refusal::RegionIndex`].
pub fn until_connect_timed(
    conn: &Conn,
    limits: Limits,
    name: &str,
    offer: impl Fn(u32) -> Option<Offer>,
    timeouts: Timeouts,
    spoke: impl FnOnce(),
) -> Result<Setup<OwnedFd>, HandshakeError> {
    conn.send(&limits.hello(name), None)?;
    let mut h = ServerHandshake::new(limits);
    let mut buf = [0u8; 256];
    let start = Instant::now();
    let deadline = start + timeouts.handshake;
    let mut first = Some((
        start + timeouts.first_message.min(timeouts.handshake),
        spoke,
    ));
    loop {
        let now = Instant::now();
        if let Some((by, _)) = &first
            && now >= *by
        {
            return Err(if timeouts.first_message < timeouts.handshake {
                HandshakeError::Silent(timeouts.first_message)
            } else {
                HandshakeError::Timeout(timeouts.handshake)
            });
        }
        let until = first.as_ref().map_or(deadline, |(by, _)| *by);
        let left = until.saturating_duration_since(now);
        if left.is_zero() {
            return Err(HandshakeError::Timeout(timeouts.handshake));
        }
        let (len, fd) = match conn.recv(&mut buf, left)? {
            Received::Nothing => continue,
            Received::Eof => return Err(HandshakeError::Eof),
            Received::Msg { len, fd } => (len, fd),
        };
        if let Some((_, spoke)) = first.take() {
            spoke();
        }
        match h.on_message(&buf[..len.min(buf.len())], fd, &offer) {
            Step::Reply(m) => conn.send(&m, None)?,
            Step::Connect(setup) => return Ok(*setup),
            Step::Refuse(r) => return Err(refined(r, &buf[..len.min(buf.len())], limits)),
            Step::PeerLeft(reason) => {
                return Err(HandshakeError::PeerLeft(
                    String::from_utf8_lossy(reason.as_bytes()).into_owned(),
                ));
            }
            Step::Ignore => {}
        }
    }
}

/// `r` as returned to the caller: a region index refused for being past
/// the announced limit (not out of order or empty) is told apart.
fn refined(r: Refusal, msg: &[u8], limits: Limits) -> HandshakeError {
    if r == Refusal::RegionIndex
        && let Ok(MsgRepr::AddRegion { index, size }) = MsgRepr::parse(msg)
        && index >= limits.max_regions
        && size != 0
    {
        return HandshakeError::TooManyRegions {
            index,
            max: limits.max_regions,
        };
    }
    HandshakeError::Refused(r)
}
