//! A memif client cannot make the switch map more than its budgets
//! allow (issue 36 item 1), nor hand it a region fd that is not memory
//! (item 2): too many regions, regions over the port's
//! `max_shared_memory`, over the node's budget, or on a FIFO, socket or
//! disk file are refused with a DISCONNECT naming why, counted
//! (`refused` and `memory_refused` or `unmappable_fd`), and the next,
//! well-behaved client is served. Sparse memfds: a region of 512 GiB
//! costs nothing until touched (and refused ones are never mapped).
//!
//! Every test here serialises on [`SERIAL`]: one checks the node's
//! budget (`nfv_vhost::NODE_BUDGET`, process-wide), which the others'
//! connections are charged to.

use nfv_memif::client::{Client, ClientConfig};
use nfv_memif::socket::{Conn, Received, SocketPath};
use nfv_memif::{MAX_REGIONS, MemifConfig, MemifPort};
use nfv_ports::Port;
use nfv_testutil::{TempDir, wait_until};
use nfv_vhost::NODE_BUDGET;
use nfv_wire::memif::{Direction, MsgRepr, Name, Secret, VERSION};
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(10);
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn memfd(len: u64) -> OwnedFd {
    let fd =
        nix::sys::memfd::memfd_create(c"memif-budget-test", nix::sys::memfd::MFdFlags::MFD_CLOEXEC)
            .unwrap();
    let f = File::from(fd);
    f.set_len(len).unwrap();
    f.into()
}

/// A regular file on a file system that is not tmpfs/hugetlbfs (the
/// target dir, else the temp dir), or `None` when there is none.
fn disk_file(len: u64) -> Option<OwnedFd> {
    let dirs = [
        std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")),
        std::env::temp_dir(),
    ];
    dirs.iter().find_map(|dir| {
        let path = dir.join(format!("memif-budget-disk-{}", std::process::id()));
        let f = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .ok()?;
        let _ = std::fs::remove_file(&path);
        f.set_len(len).ok()?;
        let t = nix::sys::statfs::fstatfs(f.as_fd()).ok()?.filesystem_type();
        let memory = t == nix::sys::statfs::TMPFS_MAGIC || t == nix::sys::statfs::HUGETLBFS_MAGIC;
        (!memory).then(|| f.into())
    })
}

/// This process's (VmSize, VmRSS) in KiB.
fn vm_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    };
    (field("VmSize:"), field("VmRSS:"))
}

/// A server-role port on a socket of its own.
struct Served {
    port: Arc<MemifPort>,
    path: SocketPath,
    _dir: TempDir,
}

fn serve(tag: &str, cap: Option<u64>) -> Served {
    let dir = TempDir::new("memif-budget", tag);
    let sock = dir.0.join("m.sock");
    let mut cfg = MemifConfig {
        id: 3,
        ..MemifConfig::new(&sock)
    };
    if let Some(cap) = cap {
        cfg.max_shared_memory = cap;
    }
    let port = MemifPort::open(tag, &cfg, 2048 - nfv_mem::HEADROOM).unwrap();
    Served {
        port,
        path: SocketPath::File(sock),
        _dir: dir,
    }
}

impl Served {
    fn count(&self, key: &str) -> u64 {
        self.port.gauges().count(key).unwrap()
    }

    /// Waits for the refusal counters to read `(refused, memory_refused,
    /// unmappable_fd)`.
    fn counts_become(&self, want: (u64, u64, u64)) {
        let now = || {
            (
                self.count("refused"),
                self.count("memory_refused"),
                self.count("unmappable_fd"),
            )
        };
        assert!(
            wait_until(WAIT, || now() == want),
            "{:?} != {want:?}",
            now()
        );
    }

    /// A real client connects, is served and leaves; its memory is
    /// charged to the node's budget while connected and given back after.
    fn a_good_client_is_served(&self) {
        let before = NODE_BUDGET.used();
        let client = Client::connect(
            &ClientConfig {
                id: 3,
                ..ClientConfig::new(self.path.clone())
            },
            WAIT,
        )
        .unwrap();
        assert!(wait_until(WAIT, || self.port.is_connected()));
        let mapped = self.count("shared_memory_mib") * MIB;
        assert!(mapped > 0, "a connected client's memory is reported");
        assert!(NODE_BUDGET.used() >= before + mapped);
        drop(client);
        assert!(wait_until(WAIT, || !self.port.is_connected()));
        assert_eq!(self.count("shared_memory_mib"), 0);
        // Unmapped when the last holder lets go (no queues here: at once).
        assert!(
            wait_until(WAIT, || NODE_BUDGET.used() <= before),
            "the connection's charge was given back: {} > {before}",
            NODE_BUDGET.used()
        );
    }
}

/// What the server answered.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    Connected,
    /// DISCONNECT, with its reason.
    Refused(String),
}

/// Plays a client of interface 3 that adds `regions` (size, fd) and two
/// rings of 256 slots at the start of region 0, then CONNECTs; returns
/// what the server answered and the highest region index its HELLO
/// allowed.
fn script(sock: &SocketPath, regions: Vec<(u64, OwnedFd)>) -> (Answer, u16) {
    let c = Conn::connect(sock).unwrap();
    let mut buf = [0u8; 256];
    let mut answer = |c: &Conn| match c.recv(&mut buf, WAIT).unwrap() {
        Received::Msg { len, .. } => MsgRepr::parse(&buf[..len]).unwrap(),
        other => panic!("no answer: {other:?}"),
    };
    let MsgRepr::Hello { max_region, .. } = answer(&c) else {
        panic!("no HELLO");
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
    let init = MsgRepr::Init {
        version: VERSION,
        id: 3,
        mode: 0,
        secret: Secret::EMPTY,
        name: Name::new(b"memory-budget"),
    };
    let mut steps: Vec<(MsgRepr, Option<OwnedFd>)> = vec![(init, None)];
    for (i, (size, fd)) in regions.into_iter().enumerate() {
        let index = i as u16;
        steps.push((MsgRepr::AddRegion { index, size }, Some(fd)));
    }
    steps.push((ring(Direction::C2s, 0), Some(memfd(8))));
    steps.push((ring(Direction::S2c, 8192), Some(memfd(8))));
    let if_name = Name::new(b"c0");
    steps.push((MsgRepr::Connect { if_name }, None));
    for (m, fd) in steps {
        c.send(&m, fd.as_ref().map(|f| f.as_fd())).unwrap();
        match answer(&c) {
            MsgRepr::Disconnect { reason, .. } => {
                let why = String::from_utf8_lossy(reason.as_bytes()).into_owned();
                return (Answer::Refused(why), max_region);
            }
            MsgRepr::Connected { .. } => return (Answer::Connected, max_region),
            _ => {}
        }
    }
    panic!("the server neither connected nor refused");
}

fn refused(why: &str) -> Answer {
    Answer::Refused(why.into())
}

#[test]
fn a_client_with_too_many_regions_is_refused_and_the_next_is_served() {
    let _s = serial();
    let s = serve("regions", None);
    let n = usize::from(MAX_REGIONS);
    // As many regions as allowed get as far as the rings (whose cookie
    // this script never writes): the count let them through.
    let regions = (0..n).map(|_| (MIB, memfd(MIB))).collect();
    let (heard, max_region) = script(&s.path, regions);
    assert_eq!(max_region, MAX_REGIONS - 1, "HELLO announces the limit");
    assert_eq!(heard, refused("Cookie mismatch"));
    s.counts_become((1, 0, 0));
    // One more is refused at its ADD_REGION, before anything is mapped.
    let regions = (0..=n).map(|_| (MIB, memfd(MIB))).collect();
    let (heard, _) = script(&s.path, regions);
    assert_eq!(heard, refused("Too many regions (at most 8)"));
    s.counts_become((2, 1, 0));
    assert!(
        s.port
            .gauges()
            .text("last_event")
            .unwrap()
            .contains("region 8 added")
    );
    s.a_good_client_is_served();
    s.counts_become((2, 1, 0));
}

#[test]
fn a_client_over_the_ports_memory_cap_is_refused_and_the_next_is_served() {
    let _s = serial();
    // The default cap (64 GiB): three sparse regions of 512 GiB.
    let s = serve("default-cap", None);
    assert_eq!(
        MemifConfig::new("x").max_shared_memory,
        nfv_memif::DEFAULT_MAX_SHARED_MEMORY
    );
    let huge = (0..3).map(|_| (512 * GIB, memfd(512 * GIB))).collect();
    let before = vm_kib();
    let (heard, _) = script(&s.path, huge);
    assert_eq!(heard, refused("Shared memory over the port's limit"));
    s.counts_become((1, 1, 0));
    // Nothing of the 1.5 TiB was mapped (other threads may map a little).
    let after = vm_kib();
    eprintln!("VmSize/VmRSS (KiB) before {before:?}, after the refused 1.5 TiB {after:?}");
    assert!(after.0 < before.0 + (GIB >> 10), "{before:?} -> {after:?}");
    assert!(
        after.1 < before.1 + ((64 * MIB) >> 10),
        "{before:?} -> {after:?}"
    );
    s.a_good_client_is_served();

    // A port capped at 1 GiB: regions are summed (two of 768 MiB), and
    // one region just over the cap is refused too.
    let s = serve("one-gib", Some(GIB));
    let two = (0..2).map(|_| (768 * MIB, memfd(768 * MIB))).collect();
    assert_eq!(
        script(&s.path, two).0,
        refused("Shared memory over the port's limit")
    );
    s.counts_become((1, 1, 0));
    let over = GIB + 4096;
    assert_eq!(
        script(&s.path, vec![(over, memfd(over))]).0,
        refused("Shared memory over the port's limit")
    );
    s.counts_become((2, 2, 0));
    assert!(
        s.port
            .gauges()
            .text("last_event")
            .unwrap()
            .contains("more than the port's max_shared_memory of 1073741824 bytes")
    );
    // Exactly the cap passes the budget (and stops at the rings).
    assert_eq!(
        script(&s.path, vec![(GIB, memfd(GIB))]).0,
        refused("Cookie mismatch")
    );
    s.counts_become((3, 2, 0));
    s.a_good_client_is_served();
}

#[test]
fn a_client_over_the_nodes_budget_is_refused_and_the_next_is_served() {
    let _s = serial();
    let s = serve("node", None);
    let limit = NODE_BUDGET.limit();
    // Room for 1 MiB more than is mapped now.
    NODE_BUDGET.set_limit(NODE_BUDGET.used() + MIB);
    let heard = script(&s.path, vec![(4 * MIB, memfd(4 * MIB))]).0;
    NODE_BUDGET.set_limit(limit);
    assert_eq!(heard, refused("Shared memory over the node's budget"));
    s.counts_become((1, 1, 0));
    s.a_good_client_is_served();
}

#[test]
fn a_region_that_is_not_memory_is_refused_as_unmappable() {
    let _s = serial();
    let s = serve("unmappable", None);
    let (pipe_r, _pipe_w) = nix::unistd::pipe().unwrap();
    let (sock, _peer) = std::os::unix::net::UnixStream::pair().unwrap();
    let mut cases: Vec<(&str, OwnedFd, &str)> = vec![
        ("a FIFO", pipe_r, "Region fd is a FIFO, not a regular file"),
        (
            "a socket",
            sock.into(),
            "Region fd is a socket, not a regular file",
        ),
    ];
    match disk_file(MIB) {
        Some(f) => cases.push(("a disk file", f, "Region file is not on tmpfs or hugetlbfs")),
        None => nfv_testutil::skip(
            "memif unmappable disk-file region case",
            "the target and temp dirs are on tmpfs/hugetlbfs: no disk file system to test with",
        ),
    }
    for (i, (what, fd, want)) in cases.into_iter().enumerate() {
        // A second, good region: the bad one is found whichever it is.
        let regions = vec![(MIB, memfd(MIB)), (MIB, fd)];
        assert_eq!(script(&s.path, regions).0, refused(want), "{what}");
        let k = i as u64 + 1;
        s.counts_become((k, 0, k));
        assert!(!s.port.is_connected(), "{what}");
    }
    s.a_good_client_is_served();
}
