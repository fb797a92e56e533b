//! A client whose region is not memory the switch can trust (a FIFO, a
//! file on disk, a memfd shorter than the region it announces) is refused
//! at CONNECT with a DISCONNECT naming what is wrong, counted `refused`,
//! and the next, well-behaved client is served.

use nfv_memif::client::{Client, ClientConfig};
use nfv_memif::socket::{Conn, Received, SocketPath};
use nfv_memif::{MemifConfig, MemifPort};
use nfv_ports::Port;
use nfv_testutil::TempDir;
use nfv_wire::memif::{Direction, MsgRepr, Name, Secret, VERSION};
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(10);
const REGION: u64 = 1 << 20;

fn memfd(len: u64) -> OwnedFd {
    let fd =
        nix::sys::memfd::memfd_create(c"memif-region-test", nix::sys::memfd::MFdFlags::MFD_CLOEXEC)
            .unwrap();
    let f = File::from(fd);
    f.set_len(len).unwrap();
    f.into()
}

/// A regular file on a file system that is not tmpfs/hugetlbfs (the
/// target dir), or `None` when there is none.
fn disk_file(len: u64) -> Option<OwnedFd> {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let path = dir.join(format!("memif-disk-region-{}", std::process::id()));
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
    if t == nix::sys::statfs::TMPFS_MAGIC || t == nix::sys::statfs::HUGETLBFS_MAGIC {
        return None;
    }
    Some(f.into())
}

/// Runs a whole handshake for interface `id` with `region` as region 0's
/// fd; returns the DISCONNECT reason the server answered CONNECT with
/// (`None`: CONNECTED).
fn handshake(sock: &SocketPath, id: u32, region: OwnedFd) -> Option<String> {
    let c = Conn::connect(sock).unwrap();
    let mut buf = [0u8; 256];
    let mut answer = |c: &Conn| match c.recv(&mut buf, WAIT).unwrap() {
        Received::Msg { len, .. } => MsgRepr::parse(&buf[..len]).unwrap(),
        other => panic!("no answer: {other:?}"),
    };
    assert!(matches!(answer(&c), MsgRepr::Hello { .. }));
    let ring = |direction, offset| MsgRepr::AddRing {
        direction,
        other_flags: 0,
        index: 0,
        region: 0,
        offset,
        log2_ring_size: 8,
        private_hdr_size: 0,
    };
    let eventfd = || memfd(8);
    let steps: Vec<(MsgRepr, Option<OwnedFd>)> = vec![
        (
            MsgRepr::Init {
                version: VERSION,
                id,
                mode: 0,
                secret: Secret::EMPTY,
                name: Name::new(b"region-files"),
            },
            None,
        ),
        (
            MsgRepr::AddRegion {
                index: 0,
                size: REGION,
            },
            Some(region),
        ),
        (ring(Direction::C2s, 0), Some(eventfd())),
        (ring(Direction::S2c, 8192), Some(eventfd())),
        (
            MsgRepr::Connect {
                if_name: Name::new(b"c0"),
            },
            None,
        ),
    ];
    for (m, fd) in steps {
        c.send(&m, fd.as_ref().map(|f| f.as_fd())).unwrap();
        match answer(&c) {
            MsgRepr::Disconnect { reason, .. } => {
                return Some(String::from_utf8_lossy(reason.as_bytes()).into_owned());
            }
            MsgRepr::Connected { .. } => return None,
            _ => {}
        }
    }
    panic!("the server neither connected nor refused");
}

#[test]
fn a_client_with_an_unmappable_region_is_refused_and_the_next_is_served() {
    let dir = std::env::temp_dir().join(format!("nfv-memif-regions-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let _dir = TempDir(dir.clone());
    let sock = dir.join("m.sock");
    let cfg = MemifConfig {
        id: 5,
        ..MemifConfig::new(&sock)
    };
    let port = MemifPort::open("m0", &cfg, 2048 - nfv_mem::HEADROOM).unwrap();
    let path = SocketPath::File(sock.clone());
    let (pipe_r, _pipe_w) = nix::unistd::pipe().unwrap();
    let mut cases: Vec<(&str, OwnedFd, &str)> = vec![
        ("a FIFO", pipe_r, "Region fd is a FIFO, not a regular file"),
        (
            "a memfd shorter than the region",
            memfd(REGION / 2),
            "Region file smaller than the region",
        ),
    ];
    match disk_file(REGION) {
        Some(f) => cases.push(("a disk file", f, "Region file is not on tmpfs or hugetlbfs")),
        None => nfv_testutil::skip(
            "memif disk-file region case",
            "the target dir is on tmpfs/hugetlbfs: no disk file system to test with",
        ),
    }
    let n = cases.len() as u64;
    for (i, (what, fd, want)) in cases.into_iter().enumerate() {
        let heard = handshake(&path, 5, fd);
        assert_eq!(heard.as_deref(), Some(want), "{what}");
        assert!(nfv_testutil::wait_until(WAIT, || {
            port.gauges().count("refused") == Some(i as u64 + 1)
        }));
        assert!(!port.is_connected(), "{what}");
    }
    assert_eq!(port.gauges().count("refused"), Some(n));
    // A memfd region of the right size gets as far as the rings (whose
    // cookie this script never wrote): the region check let it through.
    assert_eq!(
        handshake(&path, 5, memfd(REGION)).as_deref(),
        Some("Cookie mismatch")
    );
    // A real client is served.
    let client = Client::connect(
        &ClientConfig {
            id: 5,
            ..ClientConfig::new(path)
        },
        WAIT,
    )
    .unwrap();
    assert!(nfv_testutil::wait_until(WAIT, || port.is_connected()));
    drop(client);
}
