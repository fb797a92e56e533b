//! Interop of the memif server side with DPDK testpmd's `net_memif` client
//! (Debian package `dpdk-dev`, 22.11): the handshake to CONNECTED with a
//! secret, the regions and rings it sets up (ring cookies read through
//! our own mapping of its memfd), and a wrong secret refused with the
//! reason testpmd logs; then the port itself: frames sent through
//! testpmd's io forwarding and back, byte-exact and in order, over one
//! and two queue pairs, file and abstract sockets, 2048 and 1024 B
//! buffers, up to 9000 B frames chained over several buffers both ways,
//! the switch as the client of a testpmd server, a testpmd killed and
//! started again (the port reconnects), and in the client role the port
//! itself closed and opened again (it reaches the same testpmd). SKIPPED
//! when testpmd is missing or cannot start.

use nfv_memif::handshake::{Limits, Offer, Refusal};
use nfv_memif::serve::{HandshakeError, serve};
use nfv_memif::socket::{Listener, SocketPath};
use nfv_testutil::TempDir;
use nfv_wire::memif::{COOKIE, Secret, ring};
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const ID: u32 = 7;

struct TestPmd {
    child: Child,
    log: PathBuf,
    /// EAL's runtime directory (left behind by a killed testpmd).
    runtime: PathBuf,
}

impl TestPmd {
    /// A testpmd `net_memif` client of `sock` with `secret`.
    fn client(
        dir: &std::path::Path,
        sock: &std::path::Path,
        secret: &str,
    ) -> std::io::Result<Self> {
        let vdev = format!(
            "net_memif0,role=client,socket={},socket-abstract=no,id={ID},\
             secret={secret},rsize=10,bsize=2048",
            sock.display()
        );
        Self::spawn(dir, secret, &vdev, &["--forward-mode=rxonly"])
    }

    /// testpmd with one `--vdev` and more testpmd (not EAL) arguments.
    fn spawn(
        dir: &std::path::Path,
        tag: &str,
        vdev: &str,
        extra: &[&str],
    ) -> std::io::Result<Self> {
        let log = dir.join(format!("testpmd-{tag}.log"));
        let out = std::fs::File::create(&log)?;
        let prefix = format!("nfvmemif{}{tag}", std::process::id());
        let child = Command::new("dpdk-testpmd")
            .args([
                "--no-pci",
                "--no-huge",
                "-m",
                "512",
                "-l",
                "0-1",
                &format!("--file-prefix={prefix}"),
                "--log-level=pmd.net.memif:8",
                &format!("--vdev={vdev}"),
                "--",
                "--nb-cores=1",
                "--total-num-mbufs=16384",
                "--no-lsc-interrupt",
                "--stats-period",
                "10",
            ])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()?;
        Ok(TestPmd {
            child,
            log,
            runtime: PathBuf::from("/var/run/dpdk").join(prefix),
        })
    }

    /// testpmd says it forwards.
    fn forwarding(&self) -> bool {
        self.log().contains("start packet forwarding")
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for TestPmd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.runtime);
    }
}

fn offer(id: u32) -> Option<Offer> {
    (id == ID).then_some(Offer {
        secret: Some(Secret::new(b"abc")),
        taken: false,
    })
}

/// Reads the `u32` at `offset` of the memfd `fd` of `size` bytes, through
/// our own read-only mapping.
fn read_u32(fd: std::os::fd::BorrowedFd<'_>, size: u64, offset: u32) -> u32 {
    use nix::sys::mman::{MapFlags, ProtFlags, mmap, munmap};
    let len = std::num::NonZeroUsize::new(size as usize).unwrap();
    // SAFETY: a fresh shared read-only mapping of the peer's memfd; we
    // read 4 bytes inside it (the offset was checked against the region
    // size by the handshake) and unmap it before returning.
    unsafe {
        let p = mmap(None, len, ProtFlags::PROT_READ, MapFlags::MAP_SHARED, fd, 0).unwrap();
        let v = p
            .as_ptr()
            .cast::<u8>()
            .add(offset as usize)
            .cast::<u32>()
            .read_volatile();
        munmap(p, len.get()).unwrap();
        v
    }
}

#[test]
fn a_testpmd_client_connects_and_a_wrong_secret_is_refused() {
    const TEST: &str = "a_testpmd_client_connects_and_a_wrong_secret_is_refused";
    if nfv_testutil::which("dpdk-testpmd").is_none() {
        return nfv_testutil::skip(TEST, "dpdk-testpmd not installed (Debian package dpdk-dev)");
    }
    let dir = TempDir::new("memif", "hs");
    let sock = dir.0.join("memif.sock");
    let listener = Listener::bind(&SocketPath::File(sock.clone())).unwrap();
    let limits = Limits::default();

    let tp = match TestPmd::client(&dir.0, &sock, "abc") {
        Ok(t) => t,
        Err(e) => return nfv_testutil::skip(TEST, &format!("cannot run dpdk-testpmd: {e}")),
    };
    let Some(conn) = listener.accept(Duration::from_secs(30)).unwrap() else {
        let log = tp.log();
        if log.contains("EAL: Error") || log.contains("Cannot init") {
            return nfv_testutil::skip(TEST, &format!("testpmd cannot start here:\n{log}"));
        }
        panic!("testpmd never connected:\n{log}");
    };
    let setup = serve(
        &conn,
        limits,
        "nfvswitch",
        "nfv0",
        offer,
        Duration::from_secs(10),
    )
    .unwrap_or_else(|e| panic!("handshake: {e}\n{}", tp.log()));
    assert_eq!(setup.id, ID);
    assert_eq!(setup.peer_if_name.as_bytes(), b"net_memif0");
    // One queue pair of 1024 slots and 2048-byte buffers: both rings and
    // 2 x 1024 buffers in region 0.
    assert_eq!(setup.regions.len(), 1);
    assert_eq!(
        setup.regions[0].size,
        2 * ring::len(10).unwrap() as u64 + 2 * 1024 * 2048
    );
    assert_eq!((setup.c2s.len(), setup.s2c.len()), (1, 1));
    for r in setup.c2s.iter().chain(&setup.s2c) {
        assert_eq!((r.region, r.log2_size), (0, 10));
        let cookie = read_u32(setup.regions[0].fd.as_fd(), setup.regions[0].size, r.offset);
        assert_eq!(cookie, COOKIE, "ring at {}", r.offset);
    }
    let up = nfv_testutil::wait_until(Duration::from_secs(10), || {
        tp.log().contains("Remote interface nfv0 connected")
    });
    assert!(up, "testpmd never said it connected:\n{}", tp.log());
    drop(conn);
    drop(tp);

    // A client with the wrong secret: refused, and testpmd hears why.
    let bad = TestPmd::client(&dir.0, &sock, "abd").unwrap();
    let conn = listener
        .accept(Duration::from_secs(30))
        .unwrap()
        .unwrap_or_else(|| panic!("the second testpmd never connected:\n{}", bad.log()));
    match serve(
        &conn,
        limits,
        "nfvswitch",
        "nfv0",
        offer,
        Duration::from_secs(10),
    ) {
        Err(HandshakeError::Refused(Refusal::IncorrectSecret)) => {}
        other => panic!("{other:?}\n{}", bad.log()),
    }
    let told = nfv_testutil::wait_until(Duration::from_secs(10), || {
        bad.log().contains("Incorrect secret")
    });
    assert!(told, "testpmd did not log the reason:\n{}", bad.log());
}

// ---- The port: frames through testpmd and back -------------------------

use nfv_mem::{Batch, HugepageMode, MemoryConfig, PacketPool, PoolCache};
use nfv_memif::{MemifConfig, MemifPort, MemifRole};
use nfv_ports::{Port, RxQueue, TxQueue};
use std::sync::Arc;
use std::time::Instant;

/// A frame of `len` bytes carrying `seq` and bytes derived from it.
fn frame(len: usize, seq: u32) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    f[12..14].copy_from_slice(&[0x88, 0xb5]);
    f[14..18].copy_from_slice(&seq.to_be_bytes());
    let mut x = seq.wrapping_mul(2_654_435_761) | 1;
    for b in &mut f[18..] {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        *b = x as u8;
    }
    f
}

fn big_pool(tag: &str) -> Arc<PacketPool> {
    PacketPool::new(
        tag,
        &MemoryConfig {
            frame_size: 16384,
            frames: 4096,
            hugepages: HugepageMode::Never,
        },
    )
    .unwrap()
}

/// Sends `frames` on the port's tx queues (frame i on queue i % queues)
/// and reads them back from its rx queues, with at most `window` frames
/// in flight so testpmd's io forwarding never meets a full ring. Returns
/// the frames received, by rx queue, in arrival order.
fn round_trip(
    port: &MemifPort,
    pool: &Arc<PacketPool>,
    frames: &[Vec<u8>],
    queues: usize,
    window: usize,
) -> Vec<Vec<Vec<u8>>> {
    let mut cache: PoolCache = pool.cache();
    let mut txq: Vec<Box<dyn TxQueue>> = (0..queues).map(|q| port.open_txq(q)).collect();
    let mut rxq: Vec<Box<dyn RxQueue>> = (0..queues).map(|q| port.open_rxq(q)).collect();
    let mut got: Vec<Vec<Vec<u8>>> = vec![Vec::new(); queues];
    let mut sent = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    let received = |got: &Vec<Vec<Vec<u8>>>| got.iter().map(Vec::len).sum::<usize>();
    while received(&got) < frames.len() && Instant::now() < deadline {
        let q = sent % queues;
        let mut batch = Batch::new();
        while sent + batch.len() < frames.len()
            && sent + batch.len() < received(&got) + window
            && !batch.is_full()
            && (sent + batch.len()) % queues == q
        {
            let f = &frames[sent + batch.len()];
            let mut p = cache.alloc().unwrap();
            p.room_mut()[..f.len()].copy_from_slice(f);
            p.set_len(f.len()).unwrap();
            batch.push(p);
            if queues > 1 {
                break;
            }
        }
        if !batch.is_empty() {
            sent += txq[q].tx_burst(&mut batch, &mut cache);
            cache.free_batch(&mut batch);
        }
        for (q, rx) in rxq.iter_mut().enumerate() {
            let mut batch = Batch::new();
            rx.rx_burst(&mut batch, &mut cache);
            got[q].extend(batch.iter_mut().map(whole));
            cache.free_batch(&mut batch);
            rx.burst_done();
        }
    }
    got
}

struct PortRun {
    name: &'static str,
    /// Our port's role (testpmd takes the other).
    role: MemifRole,
    abstract_socket: bool,
    queues: usize,
    rsize: u8,
    bsize: usize,
    sizes: &'static [usize],
}

const PORT_RUNS: &[PortRun] = &[
    PortRun {
        name: "1 queue, file socket, 2048 B buffers, 64..9000 B frames",
        role: MemifRole::Server,
        abstract_socket: false,
        queues: 1,
        rsize: 10,
        bsize: 2048,
        sizes: &[64, 1518, 9000],
    },
    PortRun {
        name: "2 queues, abstract socket, 1024 B buffers, small ring",
        role: MemifRole::Server,
        abstract_socket: true,
        queues: 2,
        rsize: 8,
        bsize: 1024,
        sizes: &[60, 1514, 3000],
    },
    PortRun {
        name: "the switch as client of a testpmd server, 2048 B buffers, 64..9000 B frames",
        role: MemifRole::Client,
        abstract_socket: false,
        queues: 1,
        rsize: 10,
        bsize: 2048,
        sizes: &[64, 1518, 9000],
    },
];

#[test]
fn frames_cross_a_testpmd_client_and_come_back_byte_exact() {
    const TEST: &str = "frames_cross_a_testpmd_client_and_come_back_byte_exact";
    if nfv_testutil::which("dpdk-testpmd").is_none() {
        return nfv_testutil::skip(TEST, "dpdk-testpmd not installed (Debian package dpdk-dev)");
    }
    let dir = TempDir::new("memif", "port");
    for (n, r) in PORT_RUNS.iter().enumerate() {
        let sock = if r.abstract_socket {
            format!("@nfv-memif-{}-{n}", std::process::id())
        } else {
            dir.0.join(format!("p{n}.sock")).display().to_string()
        };
        let cfg = MemifConfig {
            queues: r.queues,
            id: ID,
            role: r.role,
            ring_size: 1 << r.rsize,
            buffer_size: r.bsize as u32,
            ..MemifConfig::new(&sock)
        };
        let pool = big_pool(&format!("memif-port-{n}"));
        let port = MemifPort::open("m0", &cfg, 16384 - nfv_mem::HEADROOM).unwrap();
        let (path, is_abstract) = match sock.strip_prefix('@') {
            Some(name) => (name.to_string(), "yes"),
            None => (sock.clone(), "no"),
        };
        let their_role = match r.role {
            MemifRole::Server => "client",
            MemifRole::Client => "server",
        };
        let vdev = format!(
            "net_memif0,role={their_role},socket={path},socket-abstract={is_abstract},id={ID},\
             rsize={},bsize={}",
            r.rsize, r.bsize
        );
        let q = r.queues.to_string();
        let tp = match TestPmd::spawn(
            &dir.0,
            &format!("io{n}"),
            &vdev,
            &[
                "--forward-mode=io",
                "--port-topology=loop",
                &format!("--rxq={q}"),
                &format!("--txq={q}"),
            ],
        ) {
            Ok(t) => t,
            Err(e) => return nfv_testutil::skip(TEST, &format!("cannot run dpdk-testpmd: {e}")),
        };
        let up = nfv_testutil::wait_until(Duration::from_secs(30), || port.is_connected());
        // (Whether testpmd runs here at all is the handshake test's
        // question: here it must.)
        assert!(up, "{}: testpmd never connected:\n{}", r.name, tp.log());
        // testpmd starts forwarding a little after it connects.
        assert!(
            nfv_testutil::wait_until(Duration::from_secs(30), || tp.forwarding()),
            "{}: testpmd never started forwarding:\n{}",
            r.name,
            tp.log()
        );
        let mut seq = 0u32;
        for &len in r.sizes {
            let frames: Vec<Vec<u8>> = (0..600)
                .map(|_| {
                    seq += 1;
                    frame(len, seq)
                })
                .collect();
            let got = round_trip(&port, &pool, &frames, r.queues, 128);
            let total: usize = got.iter().map(Vec::len).sum();
            assert_eq!(
                total,
                frames.len(),
                "{}: {len} B frames: {total} of {} came back; port {:?}\n{}",
                r.name,
                frames.len(),
                port.gauges(),
                tp.log()
            );
            // Per queue in order, and every frame byte-identical.
            for (q, frames_q) in got.iter().enumerate() {
                let mut last = 0u32;
                for f in frames_q {
                    let s = u32::from_be_bytes(f[14..18].try_into().unwrap());
                    assert!(s > last, "{}: queue {q}: {s} after {last}", r.name);
                    last = s;
                    assert!(
                        *f == frame(len, s),
                        "{}: {len} B frame {s} changed on the way",
                        r.name
                    );
                }
            }
            if r.queues > 1 {
                assert!(
                    got.iter().all(|g| !g.is_empty()),
                    "{}: some queue carried nothing: {:?}",
                    r.name,
                    got.iter().map(Vec::len).collect::<Vec<_>>()
                );
            }
        }
        for name in ["bad_desc", "bad_chain", "too_big", "empty", "bad_head"] {
            assert_eq!(port.counter(name), 0, "{}: {name}", r.name);
        }
        // Frames in one buffer and longer than the head came in one copy.
        let lendable = r.sizes.iter().any(|&l| l > 128 && l <= r.bsize);
        assert_eq!(
            port.counter("one_copy_packets") > 0,
            lendable,
            "{}: one_copy_packets {}",
            r.name,
            port.counter("one_copy_packets")
        );
        // The client goes away: the port says so, and takes the next one.
        drop(tp);
        assert!(
            nfv_testutil::wait_until(Duration::from_secs(10), || !port.is_connected()),
            "{}: still connected after testpmd was killed",
            r.name
        );
        if r.role == MemifRole::Client && !r.abstract_socket {
            // A killed DPDK server leaves its socket file, and a new one
            // will not bind over it (an operator removes it too).
            let _ = std::fs::remove_file(&path);
        }
        let again = TestPmd::spawn(
            &dir.0,
            &format!("io{n}b"),
            &vdev,
            &[
                "--forward-mode=io",
                "--port-topology=loop",
                &format!("--rxq={q}"),
                &format!("--txq={q}"),
            ],
        )
        .unwrap();
        assert!(
            nfv_testutil::wait_until(Duration::from_secs(30), || port.is_connected()),
            "{}: the restarted testpmd never connected:\n{}",
            r.name,
            again.log()
        );
        assert!(
            nfv_testutil::wait_until(Duration::from_secs(30), || again.forwarding()),
            "{}: the restarted testpmd never started forwarding:\n{}",
            r.name,
            again.log()
        );
        let frames: Vec<Vec<u8>> = (0..300).map(|i| frame(200, 100_000 + i)).collect();
        let got = round_trip(&port, &pool, &frames, r.queues, 64);
        assert_eq!(
            got.iter().map(Vec::len).sum::<usize>(),
            frames.len(),
            "{}: after the reconnect; port {:?}\n{}",
            r.name,
            port.gauges(),
            again.log()
        );
        assert_eq!(port.gauges().count("reconnects"), Some(1), "{}", r.name);

        // Now the switch's side goes and comes back (a node restart). As
        // the client we connect again to the testpmd server, still
        // running. (A DPDK 22.11 *client* connects only when its port
        // starts — `memif_dev_start` — so after the switch as server
        // restarts, testpmd needs `port stop`/`port start`: not tested.)
        if r.role != MemifRole::Client {
            continue;
        }
        drop(port);
        let port = MemifPort::open("m0", &cfg, 16384 - nfv_mem::HEADROOM).unwrap();
        assert!(
            nfv_testutil::wait_until(Duration::from_secs(30), || port.is_connected()),
            "{}: the reopened port did not reach testpmd again:\n{}",
            r.name,
            again.log()
        );
        let frames: Vec<Vec<u8>> = (0..300).map(|i| frame(300, 200_000 + i)).collect();
        let got = round_trip(&port, &pool, &frames, r.queues, 64);
        assert_eq!(
            got.iter().map(Vec::len).sum::<usize>(),
            frames.len(),
            "{}: after the port was reopened; port {:?}\n{}",
            r.name,
            port.gauges(),
            again.log()
        );
    }
}

/// A received packet's whole frame (a split packet's tail joined to its
/// head first, as the datapath does for ports that need whole frames).
fn whole(p: &mut nfv_mem::Packet) -> Vec<u8> {
    assert!(p.join_tail(), "a split packet that does not fit its buffer");
    p.data().to_vec()
}
