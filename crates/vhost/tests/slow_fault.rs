//! No lock a PMD needs is held across a guest page fault (issue 36, item
//! 3). A migrating frontend's dirty log whose page faults do not complete
//! (a FUSE file whose reads are never answered; here a userfaultfd holds
//! the fault) blocks the protocol thread while it rebuilds the guest's RX
//! virtqueue for `VHOST_F_LOG_ALL`. The PMD serving that port and a
//! healthy neighbour must not wait for it: its tx bursts into the port
//! being rebuilt send nothing (counted `tx_busy`), the neighbour keeps
//! forwarding, and once the fault completes the port works and logs.
//! Removing the port while its protocol thread is stuck does not wait for
//! the fault either.

mod common;
mod hostile_support;
mod uffd_support;

use std::ffi::CStr;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd};
use std::time::{Duration, Instant};

use common::*;
use hostile_support::*;
use nfv_vhost::VhostUserMode::Server;
use nfv_virtio::dirty_log::LOG_PAGE;
use nfv_virtio::layout::VHOST_F_LOG_ALL;
use uffd_support::{SlowPage, find_mapping};
use vhost::VhostBackend;
use vhost::VhostUserDirtyLogRegion;
use vhost::vhost_user::message::VhostUserHeaderFlag;
use vhost::vhost_user::{VhostUserFrontend, VhostUserProtocolFeatures};

/// Guest-physical = host addresses: the log covers the user address space
/// (4 GiB of sparse memfd; only marked pages are allocated).
const LOG_BYTES: u64 = 1 << 32;

/// A log memfd named `name` (each test its own: the switch's mapping of
/// it is found by name).
fn log_memfd(name: &CStr) -> File {
    // SAFETY: a NUL-terminated name; the fd is taken over by the File.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), 0) };
    assert!(fd >= 0);
    // SAFETY: a fresh fd we own.
    let f = unsafe { File::from_raw_fd(fd) };
    f.set_len(LOG_BYTES).unwrap();
    f
}

/// Sends `log` (SET_LOG_BASE) and holds the first fault on the log page
/// with the bits of the guest RX ring's used ring — the first thing the
/// protocol thread marks when it rebuilds that ring for LOG_ALL. Returns
/// the hold and the page's offset in the log; `Err` when userfaultfd is
/// not usable here.
fn hold_used_ring_bits(g: &Guest, log: &File, name: &CStr) -> Result<(SlowPage, u64), String> {
    g.fe.set_log_base(
        0,
        Some(VhostUserDirtyLogRegion {
            mmap_size: LOG_BYTES,
            mmap_offset: 0,
            mmap_handle: log.as_raw_fd(),
        }),
    )
    .expect("SET_LOG_BASE");
    // The switch's own mapping of the log (the test never maps it).
    let name = name.to_str().unwrap();
    let (map, _) = find_mapping(name).expect("the switch mapped the log");
    let page = (g.ring_addrs[0].used / LOG_PAGE / 8) & !(4096 - 1);
    Ok((SlowPage::register(map + page)?, page))
}

/// Acks LOG_ALL without asking for a reply (the protocol thread is about
/// to block in the fault and could not give one) and waits until it
/// faulted.
fn start_migration(g: &mut Guest, slow: &SlowPage) {
    g.fe.set_hdr_flags(VhostUserHeaderFlag::empty());
    g.fe.set_features(g.features | VHOST_F_LOG_ALL)
        .expect("SET_FEATURES");
    slow.wait_fault(WAIT)
        .expect("the protocol thread touched the slow log page");
}

/// A guest that negotiated what a migration needs (LOG_SHMFD), rings up.
fn migrating_guest(path: &std::path::Path, tag: &str) -> Guest {
    let mut fe = connect(path);
    fe.set_owner().unwrap();
    let f = guest_features(fe.get_features().unwrap());
    fe.set_features(f).unwrap();
    let want = VhostUserProtocolFeatures::MQ
        | VhostUserProtocolFeatures::REPLY_ACK
        | VhostUserProtocolFeatures::LOG_SHMFD;
    fe.set_protocol_features(want).unwrap();
    fe.set_hdr_flags(VhostUserHeaderFlag::NEED_REPLY);
    let opts = GuestOpts::default();
    let mut g = Guest::memory(fe, tag, &opts, f);
    g.send_mem_table().unwrap();
    for i in 0..2 {
        g.start_vring(i, &opts).unwrap();
    }
    g
}

#[test]
fn a_dirty_log_that_faults_slowly_does_not_stall_the_pmd() {
    let (mut b, b_side) = Healthy::new("slowlog");
    let path = sock("slowlog-a");
    let a_side = SwitchSide::open("slowlog-a", &cfg(&path, Server, 1, true), 1);
    let a = a_side.port.clone();
    let mut g = migrating_guest(&path, "slowlog-a");
    wait_status(&a, "pair up", |s| s.pairs_enabled == 1);
    let _pmd = EchoPmd::spawn(vec![a_side, b_side]);
    echo_round_trip(&mut g, &[frame(64, 1), frame(1500, 2)]);
    b.check();

    let name = c"nfv-slow-fault-log";
    let log = log_memfd(name);
    let (slow, log_page) = match hold_used_ring_bits(&g, &log, name) {
        Ok(s) => s,
        Err(why) => {
            println!("SKIPPED: {why}");
            return;
        }
    };
    start_migration(&mut g, &slow);

    // While the fault is held: the attacker's frames reach its port's tx
    // queue on the shared PMD, which skips the ring being rebuilt...
    assert_eq!(g.send(0, &[frame(64, 3), frame(64, 4)]), 2);
    wait_status(&a, "a skipped tx burst", |s| s.tx_busy >= 1);
    // ... and the neighbour on the same PMD keeps forwarding.
    for _ in 0..5 {
        b.check();
    }
    assert!(
        slow.wait_fault(Duration::ZERO).is_none(),
        "nothing else faulted on the page meanwhile"
    );

    // The fault completes: the port logs and forwards.
    slow.release();
    // A request with a reply: answered once SET_FEATURES is done.
    g.fe.get_features().expect("GET_FEATURES after the fault");
    g.fe.set_hdr_flags(VhostUserHeaderFlag::NEED_REPLY);
    wait_status(&a, "logging", |s| s.dirty_logging() && s.pairs_enabled == 1);
    echo_round_trip(&mut g, &[frame(64, 5), frame(1500, 6)]);
    let mut bits = vec![0u8; 4096];
    std::os::unix::fs::FileExt::read_exact_at(&log, &mut bits, log_page).unwrap();
    assert!(bits.iter().any(|b| *b != 0), "the used ring was logged");
    b.check();
    let gauges = nfv_ports::Port::gauges(&*a);
    assert!(
        gauges.count("tx_busy").is_some_and(|n| n != 0),
        "{gauges:?}"
    );
    drop(slow);
}

#[test]
fn removing_a_port_stuck_in_a_fault_does_not_wait_for_it() {
    let path = sock("slowdrop");
    let a_side = SwitchSide::open("slowdrop", &cfg(&path, Server, 1, true), 1);
    let mut g = migrating_guest(&path, "slowdrop");
    wait_status(&a_side.port, "pair up", |s| s.pairs_enabled == 1);
    let name = c"nfv-slow-drop-log";
    let log = log_memfd(name);
    let (slow, _) = match hold_used_ring_bits(&g, &log, name) {
        Ok(s) => s,
        Err(why) => {
            println!("SKIPPED: {why}");
            return;
        }
    };
    start_migration(&mut g, &slow);
    // `ctl del-port` while the protocol thread is stuck: the queues go,
    // then the port, without waiting for the fault.
    let t = Instant::now();
    drop(a_side);
    assert!(
        t.elapsed() < Duration::from_secs(4),
        "port removal waited {:?} for the fault",
        t.elapsed()
    );
    assert!(path.exists(), "the stuck thread still owns its socket");
    // The fault completes: the left-behind thread ends, removing the
    // socket file.
    slow.release();
    wait("the protocol thread to end", || !path.exists());
}
