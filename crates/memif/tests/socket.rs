//! The server side over a real `SOCK_SEQPACKET` socket against a scripted
//! client: what reaches the handshake from the socket (long messages,
//! descriptors, the peer closing or stalling) and what the client hears.

use nfv_memif::handshake::{Limits, Offer, Refusal};
use nfv_memif::serve::{HandshakeError, serve};
use nfv_memif::socket::{Conn, Listener, Received, SocketPath};
use nfv_wire::memif::{Direction, MSG_LEN, MsgRepr, Name, Secret, VERSION};
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

/// A region's file: an unlinked temporary file of `size` bytes.
fn memfd(size: u64) -> OwnedFd {
    let p = std::env::temp_dir().join(format!("nfv-memif-region-{}", std::process::id()));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&p)
        .unwrap();
    f.set_len(size).unwrap();
    std::fs::remove_file(&p).unwrap();
    f.into()
}

fn init() -> MsgRepr {
    MsgRepr::Init {
        version: VERSION,
        id: 1,
        mode: 0,
        secret: Secret::EMPTY,
        name: Name::new(b"script"),
    }
}

/// A client step: a message's bytes and whether a memfd goes with it.
enum Out {
    Msg(Vec<u8>, bool),
    Close,
    Stall,
}

fn msg(m: MsgRepr) -> Out {
    Out::Msg(m.emit().to_vec(), m.msg_type().carries_fd())
}

/// (name, script, what `serve` returns: Ok = connected, else the error's
/// text contains this)
fn cases() -> Vec<(&'static str, Vec<Out>, Result<(), &'static str>)> {
    let region = MsgRepr::AddRegion {
        index: 0,
        size: 1 << 20,
    };
    let ring = |direction, offset| MsgRepr::AddRing {
        direction,
        other_flags: 0,
        index: 0,
        region: 0,
        offset,
        log2_ring_size: 8,
        private_hdr_size: 0,
    };
    let connect = MsgRepr::Connect {
        if_name: Name::new(b"c0"),
    };
    let mut long = init().emit().to_vec();
    long.resize(MSG_LEN + 72, 0);
    vec![
        (
            "a whole handshake",
            vec![
                msg(init()),
                msg(region),
                msg(ring(Direction::C2s, 0)),
                msg(ring(Direction::S2c, 8192)),
                msg(connect),
            ],
            Ok(()),
        ),
        (
            "a message longer than 128 bytes",
            vec![Out::Msg(long, false)],
            Err("Invalid message size"),
        ),
        (
            "a message past the receive buffer",
            vec![Out::Msg(vec![3; 4096], false)],
            Err("Invalid message size"),
        ),
        (
            "a descriptor on INIT is ignored",
            vec![Out::Msg(init().emit().to_vec(), true), Out::Close],
            Err("closed the connection"),
        ),
        (
            "the client closes half way",
            vec![msg(init()), msg(region), Out::Close],
            Err("closed the connection"),
        ),
        (
            "the client stalls",
            vec![msg(init()), Out::Stall],
            Err("no CONNECT"),
        ),
    ]
}

#[test]
fn the_socket_feeds_the_handshake_and_ends_every_way() {
    let dir = std::env::temp_dir().join(format!("nfv-memif-sock-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = SocketPath::File(dir.join("s.sock"));
    let listener = Listener::bind(&path).unwrap();
    let offer = |id: u32| {
        (id == 1).then_some(Offer {
            secret: None,
            taken: false,
        })
    };
    for (name, script, want) in cases() {
        let client = std::thread::spawn({
            let path = path.clone();
            move || {
                let c = Conn::connect(&path).unwrap();
                let mut buf = [0u8; 256];
                // HELLO first.
                assert!(matches!(
                    c.recv(&mut buf, Duration::from_secs(5)).unwrap(),
                    Received::Msg { len: MSG_LEN, .. }
                ));
                for step in script {
                    match step {
                        Out::Msg(bytes, with_fd) => {
                            let fd = with_fd.then(|| memfd(1 << 20));
                            c.send_bytes(&bytes, fd.as_ref().map(|f| f.as_fd()))
                                .unwrap();
                            // Each accepted message is answered; a refusal
                            // ends the script.
                            match c.recv(&mut buf, Duration::from_secs(5)).unwrap() {
                                Received::Msg { len, .. } => {
                                    let m = MsgRepr::parse(&buf[..len]).unwrap();
                                    if matches!(m, MsgRepr::Disconnect { .. }) {
                                        return Some(m);
                                    }
                                }
                                other => panic!("no answer: {other:?}"),
                            }
                        }
                        Out::Close => return None,
                        Out::Stall => {
                            std::thread::sleep(Duration::from_millis(700));
                            return None;
                        }
                    }
                }
                None
            }
        });
        let conn = listener.accept(Duration::from_secs(5)).unwrap().unwrap();
        let got = serve(
            &conn,
            Limits::default(),
            "nfvswitch",
            "nfv0",
            offer,
            Duration::from_millis(500),
        );
        let heard = client.join().unwrap();
        match (got, want) {
            (Ok(setup), Ok(())) => {
                assert_eq!((setup.c2s.len(), setup.s2c.len()), (1, 1), "{name}");
            }
            (Err(e), Err(text)) => {
                assert!(e.to_string().contains(text), "{name}: {e}");
                if let HandshakeError::Refused(r) = e {
                    let Some(MsgRepr::Disconnect { reason, .. }) = heard else {
                        panic!("{name}: the client heard no DISCONNECT");
                    };
                    assert_eq!(reason.as_bytes(), r.reason().as_bytes(), "{name}");
                    assert_ne!(r, Refusal::Unexpected, "{name}");
                }
            }
            (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
        }
    }
    drop(listener);
    assert!(!dir.join("s.sock").exists(), "the socket file is removed");
    let _ = std::fs::remove_dir_all(&dir);
}
