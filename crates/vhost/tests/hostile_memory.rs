//! A frontend takes its memory away: it shrinks the memfd behind the rings
//! after SET_MEM_TABLE while the switch is serving them, or offers memory
//! on a disk file system. The switch process must survive, quarantine only
//! that port's rings (`memory_fault`) or refuse the table with a NACK, and
//! keep forwarding for a healthy port on the same PMD.

mod common;
mod hostile_support;

use std::fs::File;
use std::os::fd::AsRawFd;

use common::*;
use hostile_support::*;
use nfv_vhost::VhostStatus;
use nfv_vhost::VhostUserMode::Server;
use vhost::VhostBackend;

#[test]
fn a_shrunk_memfd_quarantines_only_that_port() {
    let (mut b, b_side) = Healthy::new("shrink");
    let path = sock("shrink-a");
    let a_side = SwitchSide::open("shrink-a", &cfg(&path, Server, 1, true), 1);
    let a = a_side.port.clone();
    let mut g = Guest::setup(connect(&path), "shrink-a", &GuestOpts::default());
    wait_status(&a, "pair up", |s| s.pairs_enabled == 1);
    let _pmd = EchoPmd::spawn(vec![a_side, b_side]);
    for i in 0..3 {
        echo_round_trip(&mut g, &[frame(64, i), frame(1500, i + 10)]);
        b.check();
    }
    // The attack, while the PMD keeps polling the port's rings. From here
    // on the guest (in this process) must not touch its rings until they
    // are restored: its own mapping would fault too, and it is not guarded.
    let rings = g.rings.fd().as_raw_fd();
    let len = g.rings.len() as libc::off_t;
    // SAFETY: plain syscall on the guest's own memfd.
    assert_eq!(unsafe { libc::ftruncate(rings, 0) }, 0);
    let faulted = |s: &VhostStatus| s.counter("memory_fault") >= 1 && s.quarantined().contains(&1);
    wait_status(&a, "memory fault on the guest TX ring", faulted);
    // The other port, served by the same PMD thread, keeps forwarding; the
    // process is alive to run this at all.
    for _ in 0..3 {
        b.check();
    }
    let st = a.status();
    let gauges = nfv_ports::Port::gauges(&*a);
    assert!(
        gauges.count("memory_faults").is_some_and(|n| n != 0),
        "{gauges:?}"
    );
    assert!(st.connected, "{st:#?}");
    // The guest grows its file back (fresh zero pages for its own mapping)
    // before it tears down.
    // SAFETY: as above.
    assert_eq!(unsafe { libc::ftruncate(rings, len) }, 0);
    // Restarting a ring over the faulted memory does not bring it back.
    g.fe.set_vring_base(1, 0).expect("SET_VRING_BASE");
    wait_status(&a, "refused restart", |s| {
        s.vrings[1].setup_failures >= 1 && s.last_error.contains("faulted")
    });
    drop(g);
    wait_status(&a, "disconnect", |s| !s.connected);
    b.check();
}

/// A regular file on the disk the tests run from (the target dir).
fn disk_file(len: u64) -> Option<File> {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let path = dir.join(format!("hostile-memory-{}", std::process::id()));
    let f = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .expect("create disk file");
    let _ = std::fs::remove_file(&path);
    f.set_len(len).expect("size disk file");
    // SAFETY: plain data, filled in by fstatfs.
    let mut sfs: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid fd and buffer.
    assert_eq!(unsafe { libc::fstatfs(f.as_raw_fd(), &mut sfs) }, 0);
    if sfs.f_type == libc::TMPFS_MAGIC || sfs.f_type == libc::HUGETLBFS_MAGIC {
        nfv_testutil::skip(
            "a_disk_file_is_refused",
            "the target dir is on tmpfs; no disk file system to test with",
        );
        return None;
    }
    Some(f)
}

#[test]
fn a_disk_file_is_refused() {
    let (mut b, b_side) = Healthy::new("diskfile");
    let _pmd = EchoPmd::spawn(vec![b_side]);
    b.check();
    let path = sock("diskfile-a");
    let a = SwitchSide::open("diskfile-a", &cfg(&path, Server, 1, true), 1);
    let mut fe = connect(&path);
    let features = negotiate(&mut fe, None).unwrap();
    let mut g = Guest::memory(fe, "diskfile-a", &GuestOpts::default(), features);
    let mut regions = g.regions();
    let Some(file) = disk_file(regions[1].memory_size) else {
        return;
    };
    regions[1].mmap_handle = file.as_raw_fd();
    assert!(
        g.fe.set_mem_table(&regions).is_err(),
        "a disk file was accepted"
    );
    let st = a.port.status();
    assert_eq!(st.mem_table_errors, 1, "{st:#?}");
    assert_eq!(st.unmappable_fd, 1, "{st:#?}");
    assert!(st.last_error.contains("file system"), "{}", st.last_error);
    assert!(st.connected, "a refused table keeps the connection");
    b.check();
    // A region on a FIFO is refused the same way, naming what it is.
    let (pipe_r, _pipe_w) = nix::unistd::pipe().unwrap();
    regions[1].mmap_handle = pipe_r.as_raw_fd();
    assert!(g.fe.set_mem_table(&regions).is_err(), "a FIFO was accepted");
    let st = a.port.status();
    assert_eq!(st.mem_table_errors, 2, "{st:#?}");
    assert_eq!(st.unmappable_fd, 2, "{st:#?}");
    assert!(
        st.last_error.contains("is a FIFO, not a regular file"),
        "{}",
        st.last_error
    );
    assert!(st.connected, "a refused table keeps the connection");
    // The same table on memfds is fine.
    g.send_mem_table().expect("memfd table");
    b.check();
}
