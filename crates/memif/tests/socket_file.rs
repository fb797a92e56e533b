//! The server socket's file: a memif port never takes a path over from a
//! live listener, a link or any other file, replaces what a crashed run
//! left, and when its last port goes removes the path only if it is
//! still the socket it bound. Abstract names have no file.

use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::UnixListener;
use std::path::Path;

use nfv_memif::socket::{Conn, SocketPath};
use nfv_memif::{MemifConfig, MemifPort};
use nfv_testutil::TempDir;
use nix::sys::socket::{self, AddressFamily, Backlog, SockFlag, SockType, UnixAddr};

const MAX: usize = 2048 - nfv_mem::HEADROOM;

fn open(socket: &Path) -> Result<std::sync::Arc<MemifPort>, String> {
    let cfg = MemifConfig {
        id: 0,
        ..MemifConfig::new(socket)
    };
    MemifPort::open("m0", &cfg, MAX).map_err(|e| e.to_string())
}

fn open_err(socket: &Path) -> String {
    match open(socket) {
        Ok(_) => panic!("{} was taken over", socket.display()),
        Err(e) => e,
    }
}

fn inode(p: &Path) -> (u64, u64) {
    let m = std::fs::symlink_metadata(p).unwrap();
    (m.dev(), m.ino())
}

/// A foreign memif-style listener (`SOCK_SEQPACKET`), still accepting.
fn seqpacket_listener(p: &Path) -> std::os::fd::OwnedFd {
    let fd = socket::socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .unwrap();
    socket::bind(fd.as_raw_fd(), &UnixAddr::new(p).unwrap()).unwrap();
    socket::listen(&fd, Backlog::new(8).unwrap()).unwrap();
    fd
}

#[test]
fn a_live_foreign_listener_is_refused_and_keeps_its_socket() {
    let dir = TempDir::new("memif-sockfile", "live");
    let p = dir.0.join("m.sock");
    let _foreign = seqpacket_listener(&p);
    let before = inode(&p);
    let e = open_err(&p);
    assert!(e.contains("in use by another process"), "{e}");
    assert!(
        e.contains(&p.display().to_string()),
        "the error names the path: {e}"
    );
    assert_eq!(inode(&p), before);
    Conn::connect(&SocketPath::File(p.clone())).expect("still the foreign listener's");

    // A stream listener (not memif at all) is just as live.
    let q = dir.0.join("s.sock");
    let _stream = UnixListener::bind(&q).unwrap();
    let e = open_err(&q);
    assert!(e.contains("in use by another process"), "{e}");
}

#[test]
fn a_stale_socket_is_replaced() {
    let dir = TempDir::new("memif-sockfile", "stale");
    let p = dir.0.join("m.sock");
    drop(seqpacket_listener(&p));
    let port = open(&p).unwrap();
    Conn::connect(&SocketPath::File(p.clone())).expect("the port listens");
    drop(port);
    assert!(
        std::fs::symlink_metadata(&p).is_err(),
        "removed with the last port"
    );
}

#[test]
fn a_regular_file_or_a_link_is_refused_and_left_intact() {
    let dir = TempDir::new("memif-sockfile", "notsock");
    let file = dir.0.join("f.sock");
    std::fs::write(&file, b"someone's data").unwrap();
    let e = open_err(&file);
    assert!(e.contains("not a socket"), "{e}");
    assert_eq!(std::fs::read(&file).unwrap(), b"someone's data");

    let target = dir.0.join("target.sock");
    drop(seqpacket_listener(&target));
    let link = dir.0.join("l.sock");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let e = open_err(&link);
    assert!(e.contains("symbolic link"), "{e}");
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(
        std::fs::symlink_metadata(&target)
            .unwrap()
            .file_type()
            .is_socket()
    );
}

#[test]
fn a_socket_rebound_by_another_process_is_not_removed_at_close() {
    let dir = TempDir::new("memif-sockfile", "rebound");
    let p = dir.0.join("m.sock");
    let port = open(&p).unwrap();
    std::fs::remove_file(&p).unwrap();
    let _theirs = seqpacket_listener(&p);
    let before = inode(&p);
    drop(port);
    assert_eq!(inode(&p), before, "the other process's socket stays");
    Conn::connect(&SocketPath::File(p.clone())).expect("still theirs");
}

#[test]
fn abstract_names_are_unaffected() {
    let name = format!("nfv-memif-sockfile-{}", std::process::id());
    let port = open(Path::new(&format!("@{name}"))).unwrap();
    Conn::connect(&SocketPath::Abstract(name.clone())).expect("listening");
    drop(port);
    assert!(
        Conn::connect(&SocketPath::Abstract(name)).is_err(),
        "gone with the port"
    );
}
