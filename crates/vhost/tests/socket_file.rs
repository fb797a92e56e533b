//! The server socket's file: a port never takes a path over from a live
//! listener, a link or any other file, replaces what a crashed run left,
//! and on close removes the path only if it is still the socket it bound.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;

use nfv_testutil::TempDir;
use nfv_vhost::{VhostUserConfig, VhostUserMode, VhostUserPort};

fn cfg(socket: &Path) -> VhostUserConfig {
    VhostUserConfig {
        socket: socket.to_path_buf(),
        mode: VhostUserMode::Server,
        queues: 1,
        mrg_rxbuf: true,
        tx_retries: VhostUserConfig::DEFAULT_TX_RETRIES,
        one_copy: true,
        packed_ring: true,
        offloads: nfv_vhost::Offloads::ALL,
        max_guest_memory: nfv_vhost::DEFAULT_MAX_GUEST_MEMORY,
        mtu: None,
    }
}

fn open_err(socket: &Path) -> String {
    match VhostUserPort::open("v0", &cfg(socket)) {
        Ok(_) => panic!("{} was taken over", socket.display()),
        Err(e) => e.to_string(),
    }
}

fn inode(p: &Path) -> (u64, u64) {
    let m = std::fs::symlink_metadata(p).unwrap();
    (m.dev(), m.ino())
}

#[test]
fn a_live_foreign_listener_is_refused_and_keeps_its_socket() {
    let dir = TempDir::new("vhost-sockfile", "live");
    let p = dir.0.join("v.sock");
    let foreign = UnixListener::bind(&p).unwrap();
    let before = inode(&p);
    let e = open_err(&p);
    assert!(e.contains("in use by another process"), "{e}");
    assert!(
        e.contains(&p.display().to_string()),
        "the error names the path: {e}"
    );
    assert_eq!(inode(&p), before);
    // Still the foreign listener's: a client reaches it.
    let _c = UnixStream::connect(&p).unwrap();
    foreign.accept().unwrap();
}

#[test]
fn a_stale_socket_is_replaced() {
    let dir = TempDir::new("vhost-sockfile", "stale");
    let p = dir.0.join("v.sock");
    drop(UnixListener::bind(&p).unwrap());
    assert!(UnixStream::connect(&p).is_err(), "stale: nobody listens");
    let port = VhostUserPort::open("v0", &cfg(&p)).unwrap();
    UnixStream::connect(&p).expect("the port listens");
    drop(port);
    assert!(std::fs::symlink_metadata(&p).is_err(), "removed at close");
}

#[test]
fn a_regular_file_or_a_link_is_refused_and_left_intact() {
    let dir = TempDir::new("vhost-sockfile", "notsock");
    let file = dir.0.join("f.sock");
    std::fs::write(&file, b"someone's data").unwrap();
    let e = open_err(&file);
    assert!(e.contains("not a socket"), "{e}");
    assert_eq!(std::fs::read(&file).unwrap(), b"someone's data");

    // A link to a stale socket elsewhere: not followed, not removed.
    let target = dir.0.join("target.sock");
    drop(UnixListener::bind(&target).unwrap());
    let link = dir.0.join("l.sock");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let e = open_err(&link);
    assert!(e.contains("symbolic link"), "{e}");
    let lm = std::fs::symlink_metadata(&link).unwrap();
    assert!(lm.file_type().is_symlink());
    assert!(
        std::fs::symlink_metadata(&target)
            .unwrap()
            .file_type()
            .is_socket()
    );
}

#[test]
fn a_socket_rebound_by_another_process_is_not_removed_at_close() {
    let dir = TempDir::new("vhost-sockfile", "rebound");
    let p = dir.0.join("v.sock");
    let port = VhostUserPort::open("v0", &cfg(&p)).unwrap();
    // Someone removes our file and binds the path for themselves.
    std::fs::remove_file(&p).unwrap();
    let theirs = UnixListener::bind(&p).unwrap();
    let before = inode(&p);
    drop(port);
    assert_eq!(inode(&p), before, "the other process's socket stays");
    let _c = UnixStream::connect(&p).unwrap();
    theirs.accept().unwrap();
}
