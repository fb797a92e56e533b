//! Hostile memif clients (`nfv_memif`'s client side and control socket,
//! as its tests use them), each a loop until `stop`:
//!
//! * [`unmappable_region`]: a whole handshake whose region is a file on
//!   disk or a pipe;
//! * [`hoarders`]: more silent connections than a socket has handshake
//!   slots, renewed;
//! * [`legit_reconnects`]: the well-behaved tenant of the hoarded socket,
//!   connecting again and again (its success rate is measured);
//! * [`ring_overrun`]: a connected client whose C2S head runs past the
//!   buffers it was given (off by one, far ahead, backwards), put back
//!   in between.

use super::{Tally, memfd, until};
use nfv_memif::client::{Client, ClientConfig};
use nfv_memif::socket::{Conn, Received, SocketPath};
use nfv_wire::memif::{Direction, MsgRepr, Name, Secret, VERSION};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(3);

/// The server's next message (`None`: it closed or said nothing in time).
fn next(c: &Conn) -> Option<MsgRepr> {
    let mut buf = [0u8; 256];
    match c.recv(&mut buf, WAIT) {
        Ok(Received::Msg { len, .. }) => MsgRepr::parse(&buf[..len]).ok(),
        _ => None,
    }
}

/// A whole client handshake for interface `id` with `region` as region
/// 0's fd: `Ok(())` when CONNECTED, `Err(reason)` otherwise.
fn handshake(sock: &SocketPath, id: u32, region: &OwnedFd) -> Result<(), String> {
    let c = Conn::connect(sock).map_err(|e| format!("connect: {e}"))?;
    match next(&c) {
        Some(MsgRepr::Hello { .. }) => {}
        other => return Err(format!("no HELLO: {other:?}")),
    }
    let ring = |direction, offset| MsgRepr::AddRing {
        direction,
        other_flags: 0,
        index: 0,
        region: 0,
        offset,
        log2_ring_size: 8,
        private_hdr_size: 0,
    };
    let ev = || memfd(c"soak-memif-ev", 8).map(OwnedFd::from).ok();
    let steps: Vec<(MsgRepr, Option<OwnedFd>)> = vec![
        (
            MsgRepr::Init {
                version: VERSION,
                id,
                mode: 0,
                secret: Secret::EMPTY,
                name: Name::new(b"soak-attacker"),
            },
            None,
        ),
        (
            MsgRepr::AddRegion {
                index: 0,
                size: 1 << 20,
            },
            None,
        ),
        (ring(Direction::C2s, 0), ev()),
        (ring(Direction::S2c, 8192), ev()),
        (
            MsgRepr::Connect {
                if_name: Name::new(b"att0"),
            },
            None,
        ),
    ];
    for (i, (m, fd)) in steps.iter().enumerate() {
        let fd = if i == 1 {
            Some(region.as_fd())
        } else {
            fd.as_ref().map(|f| f.as_fd())
        };
        c.send(m, fd).map_err(|e| format!("send: {e}"))?;
        match next(&c) {
            Some(MsgRepr::Disconnect { reason, .. }) => {
                return Err(String::from_utf8_lossy(reason.as_bytes()).into_owned());
            }
            Some(MsgRepr::Connected { .. }) => return Ok(()),
            Some(_) => {}
            None => return Err("no answer".into()),
        }
    }
    Err("neither connected nor refused".into())
}

/// Handshakes whose region is `files` in turn (a disk file, a pipe).
/// The last refusal reasons heard go into the tally's notes.
pub fn unmappable_region(
    sock: &SocketPath,
    id: u32,
    files: &[OwnedFd],
    stop: &AtomicBool,
) -> Tally {
    let mut t = Tally::default();
    let mut heard = std::collections::BTreeSet::new();
    while !stop.load(Ordering::Relaxed) {
        for f in files {
            t.tries += 1;
            match handshake(sock, id, f) {
                Ok(()) => t.accepted += 1,
                Err(why) => {
                    t.refused += 1;
                    heard.insert(why);
                }
            }
        }
        until(stop, Duration::from_millis(20));
    }
    for why in heard {
        t.note(format!("heard: {why}"));
    }
    t
}

/// `slots` silent connections (each waits for its HELLO, then says
/// nothing), all dropped and opened again every `renew`.
pub fn hoarders(sock: &SocketPath, slots: usize, renew: Duration, stop: &AtomicBool) -> Tally {
    let mut t = Tally::default();
    while !stop.load(Ordering::Relaxed) {
        let mut held = Vec::new();
        for _ in 0..slots {
            t.tries += 1;
            let Ok(c) = Conn::connect(sock) else {
                t.refused += 1;
                continue;
            };
            match next(&c) {
                Some(MsgRepr::Hello { .. }) => {
                    t.accepted += 1;
                    held.push(c);
                }
                _ => t.refused += 1,
            }
        }
        until(stop, renew);
    }
    t
}

/// Counts of the legitimate client's attempts, read by the soak per
/// phase.
#[derive(Default)]
pub struct Attempts {
    pub tries: AtomicU64,
    pub connected: AtomicU64,
}

/// The legitimate tenant: connect (interface `id`), hold the connection
/// 50 ms, drop it, again.
pub fn legit_reconnects(sock: &SocketPath, id: u32, n: &Attempts, stop: &AtomicBool) {
    let cfg = ClientConfig {
        id,
        log2_ring: 8,
        ..ClientConfig::new(sock.clone())
    };
    while !stop.load(Ordering::Relaxed) {
        n.tries.fetch_add(1, Ordering::Relaxed);
        if let Ok(c) = Client::connect(&cfg, WAIT) {
            n.connected.fetch_add(1, Ordering::Relaxed);
            until(stop, Duration::from_millis(50));
            drop(c);
        }
        until(stop, Duration::from_millis(20));
    }
}

/// A client that posts its C2S head off by one past a full ring, far
/// ahead and behind what the switch consumed, each for a few ms, and
/// puts it back in between (sending a few good frames).
pub fn ring_overrun(sock: &SocketPath, id: u32, stop: &AtomicBool) -> Tally {
    let mut t = Tally::default();
    let cfg = ClientConfig {
        id,
        log2_ring: 8,
        ..ClientConfig::new(sock.clone())
    };
    let size: u16 = 1 << cfg.log2_ring;
    let frame = [0x02u8; 64];
    while !stop.load(Ordering::Relaxed) {
        let mut c = match Client::connect(&cfg, WAIT) {
            Ok(c) => c,
            Err(e) => {
                t.note(format!("connect: {e}"));
                until(stop, Duration::from_millis(200));
                continue;
            }
        };
        let end = Instant::now() + Duration::from_secs(2);
        while !stop.load(Ordering::Relaxed) && Instant::now() < end {
            c.send(0, [&frame[..]; 4]);
            until(stop, Duration::from_millis(5));
            let raw = c.raw();
            let (head, tail) = (raw.c2s_head(0), raw.c2s_tail(0));
            let bad = match t.tries % 3 {
                0 => tail.wrapping_add(size + 1),
                1 => tail.wrapping_add(30_000),
                _ => tail.wrapping_sub(5),
            };
            raw.set_c2s_head(0, bad);
            t.tries += 1;
            until(stop, Duration::from_millis(10));
            c.raw().set_c2s_head(0, head);
            until(stop, Duration::from_millis(10));
        }
        if let Some(why) = c.disconnected() {
            t.note(format!("disconnected: {why}"));
        }
    }
    t
}
