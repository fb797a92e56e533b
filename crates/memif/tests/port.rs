//! The memif port against our own client ([`nfv_memif::client`]): frames
//! both ways, then a hostile client — every kind of bad descriptor, head
//! and chain written straight into its rings, its memory shrunk under the
//! port, a second client, a message out of turn. Each must end as a
//! counter (or a DISCONNECT with a reason), never a crash or a hang, and
//! the port must carry good frames afterwards.

use nfv_mem::{Batch, HugepageMode, MemoryConfig, PacketPool, PoolCache};
use nfv_memif::client::{Client, ClientConfig, ClientError};
use nfv_memif::socket::SocketPath;
use nfv_memif::{MemifConfig, MemifPort};
use nfv_ports::{Port, RxQueue, TxQueue};
use nfv_testutil::TempDir;
use nfv_wire::memif::DescRepr;
use std::sync::Arc;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(10);

struct Rig {
    port: Arc<MemifPort>,
    client: Client,
    rx: Box<dyn RxQueue>,
    tx: Box<dyn TxQueue>,
    cache: PoolCache,
    _dir: TempDir,
}

fn rig(tag: &str) -> Rig {
    let dir = std::env::temp_dir().join(format!("nfv-memif-port-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("m.sock");
    let cfg = MemifConfig {
        id: 3,
        ..MemifConfig::new(&sock)
    };
    let port = MemifPort::open("m0", &cfg, 2048 - nfv_mem::HEADROOM).unwrap();
    let client = Client::connect(
        &ClientConfig {
            id: 3,
            log2_ring: 6,
            // Frames over 1024 B are chained both ways.
            buffer_size: 1024,
            // Unsealed, so a test can shrink it under the port.
            seal: false,
            ..ClientConfig::new(SocketPath::File(sock))
        },
        WAIT,
    )
    .unwrap();
    let pool = PacketPool::new(
        &format!("memif-{tag}"),
        &MemoryConfig {
            frame_size: 2048,
            frames: 1024,
            hugepages: HugepageMode::Never,
        },
    )
    .unwrap();
    assert!(nfv_testutil::wait_until(WAIT, || port.is_connected()));
    Rig {
        rx: port.open_rxq(0),
        tx: port.open_txq(0),
        port,
        client,
        cache: pool.cache(),
        _dir: TempDir(dir),
    }
}

impl Rig {
    /// What one rx burst of the port delivers.
    fn receive(&mut self) -> Vec<Vec<u8>> {
        let mut b = Batch::new();
        self.rx.rx_burst(&mut b, &mut self.cache);
        let out = b.iter_mut().map(whole).collect();
        self.cache.free_batch(&mut b);
        self.rx.burst_done();
        out
    }

    /// Sends `frames` from the port; returns how many went.
    fn transmit(&mut self, frames: &[Vec<u8>]) -> usize {
        let mut b = Batch::new();
        for f in frames {
            let mut p = self.cache.alloc().unwrap();
            p.room_mut()[..f.len()].copy_from_slice(f);
            p.set_len(f.len()).unwrap();
            b.push(p);
        }
        let n = self.tx.tx_burst(&mut b, &mut self.cache);
        self.cache.free_batch(&mut b);
        n
    }

    fn client_receives(&mut self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        self.client.recv(0, 64, |f| out.push(f.to_vec()));
        out
    }

    /// A good frame each way still goes through.
    fn still_works(&mut self, what: &str) {
        let f = frame(100, 7);
        assert_eq!(self.client.send(0, [f.as_slice()]), 1, "{what}");
        assert!(self.receive() == vec![f.clone()], "{what}: c2s after");
        assert_eq!(self.transmit(std::slice::from_ref(&f)), 1, "{what}");
        assert!(self.client_receives() == vec![f], "{what}: s2c after");
    }
}

fn frame(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

#[test]
fn frames_go_both_ways_chained_when_longer_than_a_buffer() {
    let mut r = rig("both");
    // Over the client's 1024 B buffers: 1514 and 1800 B take two slots.
    let frames: Vec<Vec<u8>> = [60, 64, 1514, 1800]
        .iter()
        .map(|&l| frame(l, l as u8))
        .collect();
    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    assert_eq!(r.client.send(0, refs), 4);
    assert!(r.receive() == frames, "c2s frames changed");
    assert_eq!(r.transmit(&frames), 4);
    assert!(r.client_receives() == frames, "s2c frames changed");
    // Larger than a switch buffer (2048 B with headroom): dropped, counted.
    let big = frame(2000, 1);
    assert_eq!(r.client.send(0, [big.as_slice()]), 1);
    assert!(r.receive().is_empty());
    assert_eq!(r.port.counter("too_big"), 1);
    // Fill the client's S2C ring (64 slots): the port sends what fits and
    // leaves the rest in the batch.
    let many: Vec<Vec<u8>> = (0..32).map(|i| frame(64, i)).collect();
    assert_eq!(r.transmit(&many), 32);
    assert_eq!(r.transmit(&many), 32);
    assert_eq!(r.transmit(&many), 0, "ring full");
    assert_eq!(r.client_receives().len(), 64);
    r.still_works("after a full ring");
    assert_eq!(r.port.gauges().count("bad_desc"), Some(0));

    // One copy: a frame in one buffer comes as a split packet whose tail
    // stays in the client's buffer, and the slot goes back only when the
    // burst ends.
    let f = frame(1000, 9);
    assert_eq!(r.client.send(0, [f.as_slice()]), 1);
    let head = r.client.raw().c2s_head(0);
    let mut b = Batch::new();
    r.rx.rx_burst(&mut b, &mut r.cache);
    assert_eq!(b.len(), 1);
    assert!(b[0].is_split(), "a 1000 B frame in one buffer was copied");
    assert_eq!(b[0].frame_len(), 1000);
    assert_ne!(
        r.client.raw().c2s_tail(0),
        head,
        "slot given back mid-burst"
    );
    // The port sends it on (split) to the client, then the burst ends.
    assert_eq!(r.tx.tx_burst(&mut b, &mut r.cache), 1);
    r.rx.burst_done();
    assert_eq!(r.client.raw().c2s_tail(0), head, "slot not given back");
    assert!(r.client_receives() == vec![f], "the split frame changed");
    assert_eq!(r.port.gauges().count("one_copy_packets"), Some(1));
}

/// A hostile C2S ring: (case, what to write, counter that must move).
struct Hostile {
    name: &'static str,
    /// Descriptors from the current head, then the new head's offset.
    descs: fn(&Client) -> Vec<DescRepr>,
    counter: &'static str,
}

fn good(c: &Client, len: u32) -> DescRepr {
    let slot = c.raw().c2s_head(0);
    DescRepr {
        region: 0,
        offset: c.raw().c2s_buffer(0, slot),
        length: len,
        ..DescRepr::default()
    }
}

const HOSTILE_C2S: &[Hostile] = &[
    Hostile {
        name: "region that does not exist",
        descs: |c| {
            vec![DescRepr {
                region: 5,
                ..good(c, 64)
            }]
        },
        counter: "bad_desc",
    },
    Hostile {
        name: "buffer past the region's end",
        descs: |c| {
            vec![DescRepr {
                offset: c.raw().region_len() as u32 - 10,
                ..good(c, 64)
            }]
        },
        counter: "bad_desc",
    },
    Hostile {
        name: "offset and length that overflow 32 bits",
        descs: |c| {
            vec![DescRepr {
                offset: u32::MAX - 8,
                ..good(c, 64)
            }]
        },
        counter: "bad_desc",
    },
    Hostile {
        name: "huge length",
        descs: |c| vec![good(c, u32::MAX)],
        counter: "bad_desc",
    },
    Hostile {
        name: "zero-length frame",
        descs: |c| vec![good(c, 0)],
        counter: "empty",
    },
    Hostile {
        name: "chain longer than a switch buffer",
        descs: |c| {
            let d = DescRepr {
                next: true,
                ..good(c, 1500)
            };
            vec![d, d, DescRepr { next: false, ..d }]
        },
        counter: "too_big",
    },
    Hostile {
        name: "NEXT on the last published slot",
        descs: |c| {
            vec![DescRepr {
                next: true,
                ..good(c, 64)
            }]
        },
        counter: "bad_chain",
    },
];

#[test]
fn a_hostile_client_costs_a_counter_and_the_port_goes_on() {
    let mut r = rig("hostile");
    for h in HOSTILE_C2S {
        let before = r.port.counter(h.counter);
        let descs = (h.descs)(&r.client);
        let head = r.client.raw().c2s_head(0);
        for (i, d) in descs.iter().enumerate() {
            r.client
                .raw()
                .set_c2s_desc(0, head.wrapping_add(i as u16), d);
        }
        let new_head = head.wrapping_add(descs.len() as u16);
        r.client.raw().set_c2s_head(0, new_head);
        assert!(r.receive().is_empty(), "{}: a frame came through", h.name);
        assert_eq!(r.port.counter(h.counter), before + 1, "{}", h.name);
        assert_eq!(
            r.client.raw().c2s_tail(0),
            new_head,
            "{}: slots not given back",
            h.name
        );
        // Our client's own head must follow what we wrote behind its back.
        resync_client_head(&mut r, new_head);
        r.still_works(h.name);
    }

    // A head claiming more than the ring holds: nothing is read, and the
    // ring works again once the head is sane.
    let head = r.client.raw().c2s_head(0);
    r.client.raw().set_c2s_head(0, head.wrapping_add(1000));
    assert!(r.receive().is_empty());
    assert_eq!(r.port.counter("bad_head"), 1);
    r.client.raw().set_c2s_head(0, head);
    r.still_works("after a head past the ring");

    // S2C: a posted buffer outside the region stops the ring (counted);
    // valid buffers posted again bring it back.
    let tail = r.client.raw().s2c_tail(0);
    r.client.raw().set_s2c_desc(
        0,
        tail,
        &DescRepr {
            region: 9,
            length: 2048,
            ..DescRepr::default()
        },
    );
    assert_eq!(r.transmit(&[frame(64, 1)]), 0);
    assert_eq!(r.port.counter("bad_desc"), 5);
    // The client's next receive re-posts every slot it owns with its own
    // buffer (nothing arrived, so it re-posts none): post the slot again.
    r.client.raw().set_s2c_desc(
        0,
        tail,
        &DescRepr {
            region: 0,
            offset: r.client.raw().s2c_buffer(0, tail),
            length: 2048,
            ..DescRepr::default()
        },
    );
    assert_eq!(r.transmit(&[frame(64, 1)]), 1);
    assert_eq!(r.client_receives(), vec![frame(64, 1)]);
    r.still_works("after a bad S2C buffer");
}

/// Moves the client's private C2S position to `head` (the test wrote
/// descriptors and the head behind its back).
fn resync_client_head(r: &mut Rig, head: u16) {
    // Sending nothing re-reads nothing; the client keeps its position in
    // the ring's head, which the raw writes already moved.
    assert_eq!(r.client.raw().c2s_head(0), head);
    r.client.resync();
}

#[test]
fn memory_shrunk_under_the_port_disconnects_the_client() {
    let mut r = rig("shrink");
    r.still_works("before");
    nix::unistd::ftruncate(r.client.raw().region_fd(), 0).unwrap();
    // The port's next access faults, is survived, and the port lets go.
    // (The client must not touch its memory now: its own mapping has no
    // guard, and it shares this process.)
    let _ = r.receive();
    let _ = r.transmit(&[frame(64, 3)]);
    assert!(
        nfv_testutil::wait_until(WAIT, || !r.port.is_connected()),
        "still connected after its memory shrank"
    );
    assert!(
        nfv_testutil::wait_until(WAIT, || r
            .client
            .disconnected()
            .is_some_and(|why| why.contains("memory"))),
        "the client was not told"
    );
    assert!(
        r.port
            .gauges()
            .text("last_event")
            .is_some_and(|e| e.contains("memory")),
        "{:?}",
        r.port.gauges()
    );
}

/// A client that closes its socket and connects again at once is taken
/// back every time, also when its new handshake ends before the thread
/// serving the old connection has seen the close.
#[test]
fn a_client_that_reconnects_at_once_is_taken_back() {
    let Rig {
        port, client, _dir, ..
    } = rig("again");
    let cfg = ClientConfig {
        id: 3,
        ..ClientConfig::new(port.config().socket_path())
    };
    let mut client = Some(client);
    for i in 0..20 {
        // Close, then connect again at once.
        drop(client.take());
        let c = Client::connect(&cfg, WAIT).unwrap_or_else(|e| panic!("reconnect {i}: {e}"));
        client = Some(c);
    }
    assert!(nfv_testutil::wait_until(WAIT, || port
        .gauges()
        .count("reconnects")
        == Some(20)));
    assert_eq!(port.gauges().count("refused"), Some(0));
    drop(client);
}

#[test]
fn a_second_client_is_refused_and_a_message_out_of_turn_ends_the_first() {
    let r = rig("second");
    let sock = r.port.config().socket_path();
    let second = Client::connect(
        &ClientConfig {
            id: 3,
            ..ClientConfig::new(sock.clone())
        },
        WAIT,
    );
    match second {
        Err(ClientError::Refused(why)) => assert_eq!(why, "Already connected"),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("a second client connected"),
    }
    assert!(
        r.port.is_connected(),
        "the first client lost its connection"
    );
    assert_eq!(r.port.gauges().count("refused"), Some(1));

    // CONNECT again, out of turn: the port ends the connection.
    r.client
        .raw()
        .conn()
        .send(
            &nfv_wire::memif::MsgRepr::Connect {
                if_name: nfv_wire::memif::Name::new(b"again"),
            },
            None,
        )
        .unwrap();
    assert!(nfv_testutil::wait_until(WAIT, || !r.port.is_connected()));
    assert!(nfv_testutil::wait_until(WAIT, || r
        .client
        .disconnected()
        .is_some_and(|why| why == "Unexpected message")));
    // And the next client is welcome.
    let third = Client::connect(
        &ClientConfig {
            id: 3,
            ..ClientConfig::new(sock)
        },
        WAIT,
    )
    .unwrap();
    assert!(nfv_testutil::wait_until(WAIT, || r.port.is_connected()));
    assert_eq!(r.port.gauges().count("reconnects"), Some(1));
    drop(third);
    assert!(nfv_testutil::wait_until(WAIT, || !r.port.is_connected()));
}

/// Interrupt mode: a client that unmasks its S2C ring is signalled when
/// the port sends (through the notifier thread), and only then.
#[test]
fn an_unmasked_s2c_ring_is_signalled_and_a_masked_one_is_not() {
    let mut r = rig("irq");
    let readable = |c: &Client, ms: i32| {
        let mut p = libc::pollfd {
            fd: std::os::fd::AsRawFd::as_raw_fd(&c.s2c_eventfd(0)),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one initialised pollfd on the client's own eventfd.
        unsafe { libc::poll(&mut p, 1, ms) > 0 }
    };
    // Masked (the client polls): no signal.
    assert_eq!(r.transmit(&[frame(64, 1)]), 1);
    assert!(!readable(&r.client, 200), "signalled while masked");
    assert_eq!(r.port.counter("interrupts"), 0);
    assert_eq!(r.client_receives().len(), 1);
    // Unmasked with nothing pending: the next send wakes the client.
    assert!(!r.client.arm(0), "frames pending after they were read");
    assert_eq!(r.transmit(&[frame(64, 2)]), 1);
    assert!(readable(&r.client, 5000), "not signalled while unmasked");
    r.client.drain_eventfd(0);
    assert_eq!(r.port.counter("interrupts"), 1);
    // A frame that came before the request is seen by arm() itself.
    r.client.disarm(0);
    assert_eq!(r.transmit(&[frame(64, 3)]), 1);
    assert!(r.client.arm(0), "a pending frame was missed");
    r.client.disarm(0);
    assert_eq!(r.client_receives().len(), 2);
}

/// The client role against the server role, both ports of this process:
/// frames both ways (chained over the client port's 512 B buffers), the
/// server port removed and opened again (the client reconnects).
#[test]
fn a_client_role_port_talks_to_a_server_role_port() {
    use nfv_memif::MemifRole;
    let dir = std::env::temp_dir().join(format!("nfv-memif-roles-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let _cleanup = TempDir(dir.clone());
    let sock = dir.join("s.sock");
    let max = 2048 - nfv_mem::HEADROOM;
    let server_cfg = MemifConfig {
        id: 9,
        secret: Some("pw".into()),
        ..MemifConfig::new(&sock)
    };
    let client_cfg = MemifConfig {
        role: MemifRole::Client,
        ring_size: 128,
        buffer_size: 512,
        ..server_cfg.clone()
    };
    // The client first: it retries until the server is there.
    let client = MemifPort::open("c0", &client_cfg, max).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(!client.is_connected());
    let server = MemifPort::open("s0", &server_cfg, max).unwrap();
    assert!(nfv_testutil::wait_until(WAIT, || client.is_connected() && server.is_connected()));
    assert_eq!(client.gauges().text("role").as_deref(), Some("client"));
    let pool = PacketPool::new(
        "memif-roles",
        &MemoryConfig {
            frame_size: 2048,
            frames: 1024,
            hugepages: HugepageMode::Never,
        },
    )
    .unwrap();
    let mut cache = pool.cache();
    let frames: Vec<Vec<u8>> = [60, 600, 1514].iter().map(|&l| frame(l, l as u8)).collect();
    let send = |port: &MemifPort, cache: &mut PoolCache| {
        let mut tx = port.open_txq(0);
        let mut b = Batch::new();
        for f in &frames {
            let mut p = cache.alloc().unwrap();
            p.room_mut()[..f.len()].copy_from_slice(f);
            p.set_len(f.len()).unwrap();
            b.push(p);
        }
        let n = tx.tx_burst(&mut b, cache);
        cache.free_batch(&mut b);
        n
    };
    let recv = |port: &MemifPort, cache: &mut PoolCache| {
        let mut rx = port.open_rxq(0);
        let mut got = Vec::new();
        assert!(nfv_testutil::wait_until(WAIT, || {
            let mut b = Batch::new();
            rx.rx_burst(&mut b, cache);
            got.extend(b.iter_mut().map(whole));
            cache.free_batch(&mut b);
            got.len() >= 3
        }));
        got
    };
    assert_eq!(send(&client, &mut cache), 3);
    assert!(recv(&server, &mut cache) == frames, "client -> server");
    assert_eq!(send(&server, &mut cache), 3);
    assert!(recv(&client, &mut cache) == frames, "server -> client");
    // The server goes away and comes back: the client follows.
    drop(server);
    assert!(nfv_testutil::wait_until(WAIT, || !client.is_connected()));
    let server = MemifPort::open("s0", &server_cfg, max).unwrap();
    assert!(nfv_testutil::wait_until(WAIT, || client.is_connected()));
    assert_eq!(send(&client, &mut cache), 3);
    assert!(recv(&server, &mut cache) == frames, "after the reconnect");
    assert_eq!(client.gauges().count("reconnects"), Some(1));
    for c in ["bad_desc", "bad_chain", "too_big", "empty", "bad_head"] {
        assert_eq!(client.counter(c) + server.counter(c), 0, "{c}");
    }
}

/// A received packet's whole frame (a split packet's tail joined to its
/// head first, as the datapath does for ports that need whole frames).
fn whole(p: &mut nfv_mem::Packet) -> Vec<u8> {
    assert!(p.join_tail(), "a split packet that does not fit its buffer");
    p.data().to_vec()
}

/// Several interfaces on one socket, told apart by id: each client
/// reaches its own port, an unknown id is refused, one port can leave
/// while the other serves on, and the socket file goes with the last.
#[test]
fn ports_share_a_socket_by_interface_id() {
    let dir = std::env::temp_dir().join(format!("nfv-memif-shared-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let _cleanup = TempDir(dir.clone());
    let sock = dir.join("shared.sock");
    let max = 2048 - nfv_mem::HEADROOM;
    let port = |name: &str, id: u32| {
        let cfg = MemifConfig {
            id,
            ..MemifConfig::new(&sock)
        };
        MemifPort::open(name, &cfg, max).unwrap()
    };
    let a = port("a", 1);
    let b = port("b", 2);
    // The same id again is refused at open.
    let dup = MemifPort::open(
        "c",
        &MemifConfig {
            id: 2,
            ..MemifConfig::new(&sock)
        },
        max,
    );
    assert!(
        matches!(&dup, Err(e) if e.to_string().contains("already serves interface_id 2 for port \"b\"")),
        "{:?}",
        dup.err().map(|e| e.to_string())
    );
    let client = |id: u32| {
        Client::connect(
            &ClientConfig {
                id,
                ..ClientConfig::new(SocketPath::File(sock.clone()))
            },
            WAIT,
        )
    };
    let mut ca = client(1).unwrap();
    let mut cb = client(2).unwrap();
    assert_eq!(ca.server_if_name, "a");
    assert_eq!(cb.server_if_name, "b");
    match client(3) {
        Err(ClientError::Refused(why)) => assert_eq!(why, "ID not found"),
        other => panic!("id 3: {:?}", other.err()),
    }
    assert!(nfv_testutil::wait_until(WAIT, || a.is_connected() && b.is_connected()));
    let pool = PacketPool::new(
        "memif-shared",
        &MemoryConfig {
            frame_size: 2048,
            frames: 1024,
            hugepages: HugepageMode::Never,
        },
    )
    .unwrap();
    let mut cache = pool.cache();
    // Each client's frames reach its own port only.
    let fa = frame(100, 1);
    let fb = frame(100, 2);
    assert_eq!(ca.send(0, [fa.as_slice()]), 1);
    assert_eq!(cb.send(0, [fb.as_slice()]), 1);
    let receive = |p: &MemifPort, cache: &mut PoolCache| {
        let mut rx = p.open_rxq(0);
        let mut b = Batch::new();
        rx.rx_burst(&mut b, cache);
        let out: Vec<Vec<u8>> = b.iter_mut().map(whole).collect();
        cache.free_batch(&mut b);
        rx.burst_done();
        out
    };
    assert!(receive(&a, &mut cache) == vec![fa.clone()], "port a");
    assert!(receive(&b, &mut cache) == vec![fb.clone()], "port b");
    // Port a leaves: its client is told, b's keeps working.
    drop(a);
    assert!(nfv_testutil::wait_until(WAIT, || ca
        .disconnected()
        .is_some_and(|w| w == "Interface deleted")));
    assert!(b.is_connected());
    assert_eq!(cb.send(0, [fb.as_slice()]), 1);
    assert!(receive(&b, &mut cache) == vec![fb], "port b after a left");
    assert!(sock.exists(), "the socket went while b still serves it");
    drop(b);
    assert!(!sock.exists(), "the socket file outlived its last port");
    // The path can be served again at once.
    let again = port("a2", 1);
    assert!(client(1).is_ok());
    drop(again);
}

/// A memif server that listens but never accepts, its backlog full: the
/// client-role port retries without blocking in connect, and removing it
/// (which joins its thread) returns at once.
#[test]
fn client_role_port_removal_does_not_hang_on_a_peer_that_never_accepts() {
    let dir = std::env::temp_dir().join(format!("nfv-memif-stuck-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let _cleanup = TempDir(dir.clone());
    let sock = dir.join("stuck.sock");
    let _stuck =
        nfv_testutil::stuck::StuckListener::new(&sock, nix::sys::socket::SockType::SeqPacket);
    let cfg = MemifConfig {
        role: nfv_memif::MemifRole::Client,
        ..MemifConfig::new(&sock)
    };
    let port = MemifPort::open("stuck", &cfg, 2048 - nfv_mem::HEADROOM).unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!port.is_connected());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(port);
        let _ = tx.send(());
    });
    assert!(
        rx.recv_timeout(Duration::from_secs(5)).is_ok(),
        "dropping the port hung (its thread is stuck in connect)"
    );
}
