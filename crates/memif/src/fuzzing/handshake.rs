//! The `memif_handshake` target: a hostile client's control messages
//! (see the parent module).

use super::*;

/// One message a client sends: its bytes and the descriptors with it.
struct Msg {
    bytes: Vec<u8>,
    fds: Vec<OwnedFd>,
}

/// Builds the client's messages from the input.
///
/// Each message: a selector byte — `sel % 8` the kind (0 INIT, 1
/// ADD_REGION, 2 ADD_RING, 3 CONNECT, 4 DISCONNECT, 5 a message only a
/// server sends, 6 raw bytes of any length, 7 a known type code followed
/// by input bytes), `(sel >> 3) & 3` the descriptors attached (none, a
/// memfd, an eventfd, both), bit 5 memfd filled with ring cookies — then
/// the kind's fields. A memfd's size is the next byte × 4 KiB (at most
/// 64 KiB).
fn messages(b: &mut Bytes) -> Vec<Msg> {
    let mut out = Vec::new();
    while !b.is_empty() && out.len() < 24 {
        let sel = b.u8();
        let bytes = match sel % 8 {
            0 => {
                let f = b.u8();
                let secret = match f & 3 {
                    0 => Secret::new(SECRET),
                    1 => Secret::EMPTY,
                    2 => Secret::new(b"abd"),
                    _ => Secret::new(&b.bytes(24)),
                };
                MsgRepr::Init {
                    version: if f & 4 == 0 { VERSION } else { b.u16() },
                    id: if f & 8 == 0 { ID } else { b.u32() },
                    mode: if f & 16 == 0 { 0 } else { b.u8() },
                    secret,
                    name: Name::new(b"fuzz"),
                }
                .emit()
                .to_vec()
            }
            1 => {
                let f = b.u8();
                let size = match f & 3 {
                    0 => u64::from(b.u8() % 17) * PAGE,
                    1 => u64::from(b.u32()),
                    2 => u64::from(b.u32()) << 24,
                    _ => u64::from(b.u16()),
                };
                MsgRepr::AddRegion {
                    index: u16::from(f >> 2),
                    size,
                }
                .emit()
                .to_vec()
            }
            2 => {
                let f = b.u8();
                let offset = match (f >> 2) & 3 {
                    0 => u32::from(b.u8()) * 128,
                    1 => u32::from(b.u16()),
                    2 => b.u32(),
                    _ => u32::from(b.u8()) * 16_512,
                };
                MsgRepr::AddRing {
                    direction: if f & 1 == 0 {
                        Direction::C2s
                    } else {
                        Direction::S2c
                    },
                    other_flags: 0,
                    index: u16::from((f >> 1) & 1) + if f & 0x80 != 0 { b.u16() } else { 0 },
                    region: u16::from((f >> 4) & 3),
                    offset,
                    log2_ring_size: b.u8() % 16,
                    private_hdr_size: 0,
                }
                .emit()
                .to_vec()
            }
            3 => MsgRepr::Connect {
                if_name: Name::new(b"fuzz0"),
            }
            .emit()
            .to_vec(),
            4 => MsgRepr::Disconnect {
                code: 0,
                reason: Reason::new(&b.bytes(8)),
            }
            .emit()
            .to_vec(),
            5 => match b.u8() % 3 {
                0 => MsgRepr::Ack,
                1 => Limits::default().hello("fuzz"),
                _ => MsgRepr::Connected {
                    if_name: Name::new(b"x"),
                },
            }
            .emit()
            .to_vec(),
            6 => {
                let n = usize::from(b.u8());
                b.bytes(n)
            }
            _ => {
                let mut m = vec![0u8; memif::MSG_LEN];
                m[0] = b.u8() % 10;
                let n = usize::from(b.u8()) % (memif::MSG_LEN - 1);
                for x in &mut m[2..2 + n] {
                    *x = b.u8();
                }
                m
            }
        };
        let cookies = sel & 0x20 != 0;
        let mut fds = Vec::new();
        let kinds = (sel >> 3) & 3;
        if kinds & 1 != 0 {
            let size = u64::from(b.u8() % 17) * PAGE;
            fds.extend(memfd(size, cookies));
        }
        if kinds & 2 != 0 {
            fds.extend(eventfd());
        }
        // A message of no bytes and no descriptor reads as the end of
        // the connection on a socket: send one byte instead.
        let bytes = if bytes.is_empty() && fds.is_empty() {
            vec![0]
        } else {
            bytes
        };
        out.push(Msg { bytes, fds });
    }
    out
}

thread_local! {
    static LISTENER: RefCell<Option<(SocketPath, Listener)>> = const { RefCell::new(None) };
}

/// A connected pair (client end, server end) on this thread's listener.
pub(super) fn pair() -> Option<(Conn, Conn)> {
    LISTENER.with(|l| {
        let mut l = l.borrow_mut();
        if l.is_none() {
            let path = SocketPath::Abstract(format!(
                "nfv-fuzz-memif-{}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            let listener = Listener::bind(&path).ok()?;
            *l = Some((path, listener));
        }
        let (path, listener) = l.as_ref()?;
        let client = Conn::connect(path).ok()?;
        let server = listener.accept(Duration::from_secs(1)).ok()??;
        Some((client, server))
    })
}

/// What a handshake came to, in comparable form.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// CONNECT accepted: (region sizes, c2s rings, s2c rings) as
    /// (region, offset, log2).
    Connected(Vec<u64>, Vec<(u16, u32, u8)>, Vec<(u16, u32, u8)>),
    Refused(Refusal),
    PeerLeft(Vec<u8>),
    /// The messages ran out first.
    Eof,
}

fn outcome_of<F>(setup: &Setup<F>) -> Outcome {
    let rings = |v: &[crate::handshake::Ring<F>]| {
        v.iter()
            .map(|r| (r.region, r.offset, r.log2_size))
            .collect::<Vec<_>>()
    };
    Outcome::Connected(
        setup.regions.iter().map(|r| r.size).collect(),
        rings(&setup.c2s),
        rings(&setup.s2c),
    )
}

/// The state machine alone: its outcome and the ACKs before it. Checks
/// that only ACKs are replies and that nothing follows the end.
fn direct(msgs: &[Msg], limits: Limits, offer: &impl Fn(u32) -> Option<Offer>) -> (Outcome, usize) {
    let mut h = ServerHandshake::<usize>::new(limits);
    let mut acks = 0;
    let mut end = None;
    for (i, m) in msgs.iter().enumerate() {
        let step = h.on_message(&m.bytes, (!m.fds.is_empty()).then_some(i), offer);
        if end.is_some() {
            assert_eq!(
                step,
                Step::Ignore,
                "a message after the end was not ignored"
            );
            continue;
        }
        end = match step {
            Step::Reply(MsgRepr::Ack) => {
                acks += 1;
                None
            }
            Step::Reply(other) => panic!("the server replied {other:?}"),
            Step::Connect(setup) => {
                check_setup(&setup, limits, offer);
                Some(outcome_of(&setup))
            }
            Step::Refuse(r) => Some(Outcome::Refused(r)),
            Step::PeerLeft(reason) => Some(Outcome::PeerLeft(reason.as_bytes().to_vec())),
            Step::Ignore => panic!("ignored before the end"),
        };
    }
    (end.unwrap_or(Outcome::Eof), acks)
}

/// What a CONNECT may set up: within the limits, rings numbered from 0
/// each way, each inside an added region, the interface on offer.
fn check_setup<F>(s: &Setup<F>, limits: Limits, offer: &impl Fn(u32) -> Option<Offer>) {
    let o = offer(s.id).expect("connected to an interface not on offer");
    assert!(!o.taken, "connected to a taken interface");
    assert!(s.regions.len() <= usize::from(limits.max_regions));
    assert!(s.regions.iter().all(|r| r.size > 0), "an empty region");
    for rings in [&s.c2s, &s.s2c] {
        assert!(!rings.is_empty() && rings.len() <= usize::from(limits.max_rings));
        for r in rings {
            assert!(r.log2_size <= limits.max_log2_ring);
            let len = memif::ring::len(r.log2_size).expect("a ring size") as u64;
            let region = &s.regions[usize::from(r.region)];
            assert!(
                u64::from(r.offset) + len <= region.size,
                "a ring past its region"
            );
        }
    }
}

/// Runs one input through the server side of the handshake, directly and
/// over a socket, and opens the connection CONNECT set up.
///
/// Input: a header byte (bits 0-1: regions allowed − 1; bit 2: two ring
/// pairs allowed; bits 3-4: largest ring 2^(4 + 2x); bit 5: a 64 KiB cap
/// on the port's shared memory instead of 1 GiB; bit 6: the interface
/// has a secret; bit 7: another client holds it), then messages (see
/// `messages`). Checks: the state machine replies only ACK and ignores
/// everything after its end; a CONNECT it accepts is within the limits,
/// rings numbered from 0 each way inside added regions, the interface on
/// offer; the socket path ends exactly as the state machine does, and
/// says HELLO, one ACK per accepted message and DISCONNECT after a
/// refusal, nothing else; the connection opens only over files that hold
/// their regions, within the cap, with every ring's cookie in place.
pub fn handshake(data: &[u8]) {
    let mut b = Bytes { data, at: 0 };
    let h = b.u8();
    let limits = Limits {
        max_regions: 1 + u16::from(h & 3),
        max_rings: 1 + u16::from((h >> 2) & 1),
        max_log2_ring: 4 + 2 * ((h >> 3) & 3),
    };
    let secret = (h & 0x40 != 0).then(|| Secret::new(SECRET));
    let taken = h & 0x80 != 0;
    let offer = move |id| (id == ID).then_some(Offer { secret, taken });
    let msgs = messages(&mut b);
    let (want, acks) = direct(&msgs, limits, &offer);
    let Some((client, server)) = pair() else {
        return;
    };
    for m in &msgs {
        let raw: Vec<_> = m.fds.iter().map(|f| f.as_fd()).collect();
        if !send_all(&client, &m.bytes, &raw) {
            return;
        }
    }
    // The messages end here: the server reads the end after the last.
    // SAFETY: shutdown on a socket we own.
    unsafe { libc::shutdown(client.as_fd().as_raw_fd(), libc::SHUT_WR) };
    drop(msgs);
    // The client has said all it will and closed its side, so the server
    // meets the end without waiting; its deadline only expires when this
    // process stalls (a starved `nice` fuzzer), which says nothing of the
    // handshake: such a run is not compared.
    let r = serve::until_connect(&server, limits, "nfvswitch", offer, Duration::from_secs(8));
    let got = match &r {
        Err(HandshakeError::Timeout(_) | HandshakeError::Silent(_)) => return,
        Ok(setup) => outcome_of(setup),
        Err(HandshakeError::Refused(why)) => Outcome::Refused(*why),
        Err(HandshakeError::PeerLeft(s)) => Outcome::PeerLeft(s.as_bytes().to_vec()),
        Err(HandshakeError::Eof) => Outcome::Eof,
        Err(e) => panic!("handshake over the socket: {e}"),
    };
    // The socket path reports the peer's reason as lossy UTF-8.
    let same = match (&want, &got) {
        (Outcome::PeerLeft(a), Outcome::PeerLeft(b)) => {
            String::from_utf8_lossy(a).as_bytes() == b.as_slice()
        }
        (a, b) => a == b,
    };
    assert!(same, "state machine: {want:?}, over the socket: {got:?}");
    check_replies(&client, acks, matches!(want, Outcome::Refused(_)));
    if let Ok(setup) = r {
        // The port's cap on shared memory: 64 KiB or 1 GiB.
        open(setup, if h & 0x20 != 0 { 64 << 10 } else { 1 << 30 });
    }
}

/// Sends one message with its descriptors (all of them, unlike
/// [`Conn::send_bytes`]).
fn send_all(c: &Conn, bytes: &[u8], fds: &[std::os::fd::BorrowedFd]) -> bool {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    let raw: Vec<i32> = fds.iter().map(|f| f.as_raw_fd()).collect();
    let cmsg = [ControlMessage::ScmRights(&raw)];
    let cmsgs: &[ControlMessage] = if raw.is_empty() { &[] } else { &cmsg };
    sendmsg::<()>(
        c.as_fd().as_raw_fd(),
        &[std::io::IoSlice::new(bytes)],
        cmsgs,
        MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL,
        None,
    )
    .is_ok()
}

/// What the server said: HELLO, an ACK per accepted message, and a
/// DISCONNECT after a refusal (CONNECTED is the caller's to send).
fn check_replies(c: &Conn, acks: usize, refused: bool) {
    let mut buf = [0u8; 256];
    let mut said = Vec::new();
    while let Ok(Received::Msg { len, .. }) = c.recv(&mut buf, Duration::ZERO) {
        said.push(MsgRepr::parse(&buf[..len.min(buf.len())]).expect("the server speaks memif"));
    }
    assert!(
        matches!(said.first(), Some(MsgRepr::Hello { .. })),
        "{said:?}"
    );
    let n_acks = said.iter().filter(|m| **m == MsgRepr::Ack).count();
    assert_eq!(n_acks, acks, "ACKs: {said:?}");
    let last_is_disconnect = matches!(said.last(), Some(MsgRepr::Disconnect { .. }));
    assert_eq!(last_is_disconnect, refused, "{said:?}");
    assert_eq!(said.len(), 1 + acks + usize::from(refused), "{said:?}");
}

/// Maps what CONNECT set up: it works only when every region's file
/// holds its size, and then every ring lies inside the mapping.
fn open(setup: Setup<OwnedFd>, cap: u64) {
    let fits = setup.regions.iter().all(|r| {
        nix::sys::stat::fstat(&r.fd).is_ok_and(|st| st.st_size as u64 >= r.size) && r.size < 1 << 40
    });
    let total: u64 = setup.regions.iter().map(|r| r.size).sum();
    let (c2s, s2c) = (setup.c2s.len(), setup.s2c.len());
    if let Ok(conn) = Connection::open(setup, cap) {
        assert!(fits, "a region mapped past its file");
        assert!(total <= cap, "regions over the port's cap mapped");
        assert_eq!((conn.rx.len(), conn.tx.len()), (c2s, s2c));
        let views = conn.rx.iter().map(|r| &r.view);
        for view in views.chain(conn.tx.iter().map(|r| &r.view)) {
            assert_eq!(view.cookie(), memif::COOKIE);
            let _ = (view.head(), view.tail(), view.desc(view.size() - 1));
        }
    }
}
