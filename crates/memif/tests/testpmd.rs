//! Interop of the memif server side with DPDK testpmd's `net_memif` client
//! (Debian package `dpdk-dev`, 22.11): the handshake to CONNECTED with a
//! secret, the regions and rings it sets up (ring cookies read through
//! our own mapping of its memfd), and a wrong secret refused with the
//! reason testpmd logs. SKIPPED when testpmd is missing or cannot start.

use nfv_memif::handshake::{Limits, Offer, Refusal};
use nfv_memif::serve::{HandshakeError, serve};
use nfv_memif::socket::{Listener, SocketPath};
use nfv_wire::memif::{COOKIE, Secret, ring};
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const ID: u32 = 7;

struct TestPmd {
    child: Child,
    log: PathBuf,
}

impl TestPmd {
    /// A testpmd `net_memif` client of `sock` with `secret`.
    fn client(
        dir: &std::path::Path,
        sock: &std::path::Path,
        secret: &str,
    ) -> std::io::Result<Self> {
        let log = dir.join(format!("testpmd-{secret}.log"));
        let out = std::fs::File::create(&log)?;
        let child = Command::new("dpdk-testpmd")
            .args([
                "--no-pci",
                "--no-huge",
                "-m",
                "512",
                "-l",
                "0-1",
                &format!("--file-prefix=nfvmemif{}{secret}", std::process::id()),
                "--log-level=pmd.net.memif:8",
                &format!(
                    "--vdev=net_memif0,role=client,socket={},socket-abstract=no,id={ID},\
                     secret={secret},rsize=10,bsize=2048",
                    sock.display()
                ),
                "--",
                "--forward-mode=rxonly",
                "--nb-cores=1",
                "--total-num-mbufs=16384",
                "--no-lsc-interrupt",
                "--stats-period",
                "10",
            ])
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()?;
        Ok(TestPmd { child, log })
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for TestPmd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("nfv-memif-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
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
    let dir = TempDir::new("hs");
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
