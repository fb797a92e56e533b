//! Live migration through the vhost-user protocol, with rust-vmm's
//! frontend standing in for QEMU: the dirty log (`VHOST_F_LOG_ALL`,
//! SET_LOG_BASE with LOG_SHMFD) marks what the switch writes while the
//! frontend asks for it and nothing otherwise; a log that cannot be used
//! stops the rings instead of letting writes escape it; SEND_RARP makes
//! the port announce the guest's MAC.

mod common;

use common::*;
use nfv_ports::Port;
use nfv_vhost::VhostUserMode::Server;
use nfv_vhost::message::{code, encode};
use nfv_vhost::{features, rarp};
use nfv_virtio::dirty_log::LOG_PAGE;
use nfv_virtio::layout::VHOST_F_LOG_ALL;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use vhost::vhost_user::message::VhostUserHeaderFlag;
use vhost::vhost_user::{VhostUserFrontend, VhostUserProtocolFeatures};
use vhost::{VhostBackend, VhostUserDirtyLogRegion};

/// A log for guest-physical = host addresses: the whole user address
/// space, 4 GiB of sparse memfd (only marked pages are ever allocated).
const LOG_BYTES: u64 = 1 << 32;

fn memfd(len: u64) -> File {
    // SAFETY: a literal name; the fd is taken over by the File.
    let fd = unsafe { libc::memfd_create(c"nfv-migration-log".as_ptr(), 0) };
    assert!(fd >= 0);
    // SAFETY: a fresh fd we own.
    let f = unsafe { File::from_raw_fd(fd) };
    f.set_len(len).unwrap();
    f
}

/// SET_LOG_BASE with `size` bytes of `log` (LOG_SHMFD: the fd rides along).
fn send_log_base(g: &Guest, log: &File, size: u64) -> vhost::Result<()> {
    g.fe.set_log_base(
        0,
        Some(VhostUserDirtyLogRegion {
            mmap_size: size,
            mmap_offset: 0,
            mmap_handle: log.as_raw_fd(),
        }),
    )
}

/// Pages marked in `log` for guest-physical `[from, from + len)`.
fn marked_pages(log: &File, from: u64, len: u64) -> u64 {
    let first = from / LOG_PAGE;
    let last = (from + len - 1) / LOG_PAGE;
    let mut bytes = vec![0u8; ((last / 8) - (first / 8) + 1) as usize];
    std::os::unix::fs::FileExt::read_exact_at(log, &mut bytes, first / 8).unwrap();
    (first..=last)
        .filter(|p| bytes[(p / 8 - first / 8) as usize] & (1 << (p % 8)) != 0)
        .count() as u64
}

/// A guest set up with the migration protocol features (LOG_SHMFD, RARP).
fn migrating_guest(tag: &str) -> (SwitchSide, Guest) {
    let path = sock(tag);
    let sw = SwitchSide::open(tag, &cfg(&path, Server, 1, true), 1);
    let mut fe = connect(&path);
    fe.set_owner().unwrap();
    let offered = fe.get_features().unwrap();
    assert_ne!(offered & VHOST_F_LOG_ALL, 0, "LOG_ALL offered");
    let f = guest_features(offered);
    fe.set_features(f).unwrap();
    let pf = fe.get_protocol_features().unwrap();
    let want = VhostUserProtocolFeatures::MQ
        | VhostUserProtocolFeatures::REPLY_ACK
        | VhostUserProtocolFeatures::LOG_SHMFD
        | VhostUserProtocolFeatures::RARP;
    assert_eq!(pf & want, want, "migration protocol features offered");
    fe.set_protocol_features(want).unwrap();
    fe.set_hdr_flags(VhostUserHeaderFlag::NEED_REPLY);
    let opts = GuestOpts::default();
    let mut g = Guest::memory(fe, tag, &opts, f);
    g.send_mem_table().unwrap();
    for i in 0..2 {
        g.start_vring(i, &opts).unwrap();
    }
    wait_status(&sw.port, "pair enabled", |s| s.pairs_enabled == 1);
    (sw, g)
}

fn frames(n: usize, seed: u32) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| frame(64 + i * 23, seed + i as u32))
        .collect()
}

/// Pages marked in the guest's pool (its receive buffers) and its rings.
fn marks(g: &Guest, log: &File) -> (u64, u64) {
    let pool = g.pool.region();
    let pool_marks = marked_pages(log, pool.base().as_ptr() as u64, pool.len() as u64);
    let ring_marks = marked_pages(log, g.rings.base().as_ptr() as u64, g.rings.len() as u64);
    (pool_marks, ring_marks)
}

#[test]
fn the_dirty_log_marks_switch_writes_only_while_the_frontend_asks() {
    let (mut sw, mut g) = migrating_guest("log");
    let log = memfd(LOG_BYTES);
    send_log_base(&g, &log, LOG_BYTES).expect("SET_LOG_BASE answered as rust-vmm expects");
    // A log but no LOG_ALL yet (QEMU sends the log first): not logging.
    round_trip(&mut g, &mut sw, 0, 0, 0, &frames(40, 1));
    assert_eq!(marks(&g, &log), (0, 0), "marked before LOG_ALL");
    assert_eq!(sw.port.gauges().text("dirty_log").unwrap(), "off");

    // Migration starts: LOG_ALL acked, rings rebuilt logging.
    let f = g.features | VHOST_F_LOG_ALL;
    g.fe.set_features(f).unwrap();
    wait_status(&sw.port, "logging", |s| {
        s.dirty_logging() && s.pairs_enabled == 1
    });
    round_trip(&mut g, &mut sw, 0, 0, 0, &frames(40, 100));
    let (pool_marks, ring_marks) = marks(&g, &log);
    assert!(pool_marks > 0, "receive buffers written but not marked");
    assert!(ring_marks > 0, "used rings written but not marked");
    let gauges = sw.port.gauges();
    assert_eq!(
        gauges.text("dirty_log").unwrap(),
        format!("on ({} KiB log)", LOG_BYTES / 1024)
    );
    assert!(gauges.text("features").unwrap().contains("LOG_ALL"));

    // Migration over (or cancelled): LOG_ALL cleared. The queues that
    // logged may still mark the old log while they retire (their last
    // used entries: harmless, the frontend is done with it); after that
    // round, the wiped log stays clean under traffic.
    g.fe.set_features(g.features).unwrap();
    wait_status(&sw.port, "not logging", |s| {
        !s.dirty_logging() && s.pairs_enabled == 1
    });
    round_trip(&mut g, &mut sw, 0, 0, 0, &frames(4, 150));
    log.set_len(0).unwrap();
    log.set_len(LOG_BYTES).unwrap();
    round_trip(&mut g, &mut sw, 0, 0, 0, &frames(40, 200));
    assert_eq!(marks(&g, &log), (0, 0), "marked after LOG_ALL was cleared");
    let st = sw.port.status();
    assert_eq!(
        (st.log_errors, st.protocol_errors, st.ring_errors),
        (0, 0, 0)
    );
}

#[test]
fn log_all_without_a_usable_log_stops_the_rings_and_they_resume_after() {
    let (mut sw, mut g) = migrating_guest("nolog");
    round_trip(&mut g, &mut sw, 0, 0, 0, &frames(8, 1));
    // LOG_ALL before any log: nothing may be written, the rings stop.
    g.fe.set_features(g.features | VHOST_F_LOG_ALL).unwrap();
    wait_status(&sw.port, "rings stopped", |s| s.pairs_enabled == 0);
    let st = sw.port.status();
    assert!(st.last_error.contains("no dirty log"), "{}", st.last_error);
    assert_eq!(
        sw.port.gauges().text("dirty_log").unwrap(),
        "on, but no usable log: rings stopped"
    );
    // A log that cannot be mapped (past the end of its file): still
    // answered (QEMU would abort the VM otherwise), counted, rings stay
    // stopped.
    let small = memfd(4096);
    send_log_base(&g, &small, 8192).expect("a refused log is still answered");
    let st = sw.port.status();
    assert_eq!(st.log_errors, 1);
    assert!(st.last_error.contains("past the end"), "{}", st.last_error);
    assert_eq!(st.pairs_enabled, 0);
    // A good log: the rings run again, logging; the guest's traffic is
    // intact across the stop.
    let log = memfd(LOG_BYTES);
    send_log_base(&g, &log, LOG_BYTES).unwrap();
    wait_status(&sw.port, "rings running", |s| s.pairs_enabled == 1);
    round_trip(&mut g, &mut sw, 0, 0, 0, &frames(8, 50));
    assert!(marks(&g, &log).0 > 0);
}

/// A regular file on the disk the tests run from (the target dir), or
/// `None` (SKIPPED) when that is tmpfs.
fn disk_file(len: u64) -> Option<File> {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let path = dir.join(format!("migration-disk-log-{}", std::process::id()));
    let f = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .expect("create disk file");
    let _ = std::fs::remove_file(&path);
    f.set_len(len).expect("size disk file");
    let t = nix::sys::statfs::fstatfs(&f).unwrap().filesystem_type();
    if t == nix::sys::statfs::TMPFS_MAGIC || t == nix::sys::statfs::HUGETLBFS_MAGIC {
        nfv_testutil::skip(
            "a_dirty_log_that_is_not_memory_is_refused (disk case)",
            "the target dir is on tmpfs; no disk file system to test with",
        );
        return None;
    }
    Some(f)
}

/// A dirty log on disk (its marks, made under the TX ring lock, could wait
/// on I/O or a FUSE server) or on a FIFO is refused like one past the end
/// of its file: answered, counted, rings stopped while LOG_ALL is on; a
/// memfd log then brings them back.
#[test]
fn a_dirty_log_that_is_not_memory_is_refused() {
    let (mut sw, mut g) = migrating_guest("disklog");
    g.fe.set_features(g.features | VHOST_F_LOG_ALL).unwrap();
    wait_status(&sw.port, "rings stopped", |s| s.pairs_enabled == 0);
    let (pipe_r, _pipe_w) = nix::unistd::pipe().unwrap();
    let mut cases: Vec<(&str, File, &str)> = vec![(
        "a FIFO",
        File::from(pipe_r),
        "the fd is a FIFO, not a regular file",
    )];
    if let Some(f) = disk_file(8192) {
        cases.push(("a disk file", f, "not tmpfs/hugetlbfs"));
    }
    for (i, (what, log, want)) in cases.into_iter().enumerate() {
        send_log_base(&g, &log, 8192).expect("a refused log is still answered");
        let st = sw.port.status();
        assert_eq!(st.log_errors, i as u64 + 1, "{what}");
        assert_eq!(st.unmappable_fd, i as u64 + 1, "{what}");
        assert!(st.last_error.contains(want), "{what}: {}", st.last_error);
        assert_eq!(st.pairs_enabled, 0, "{what}");
    }
    let log = memfd(LOG_BYTES);
    send_log_base(&g, &log, LOG_BYTES).unwrap();
    wait_status(&sw.port, "rings running", |s| s.pairs_enabled == 1);
    round_trip(&mut g, &mut sw, 0, 0, 0, &frames(8, 60));
    assert!(marks(&g, &log).0 > 0);
}

/// SEND_RARP (raw, as QEMU sends it after a migration: no reply asked):
/// the port's rx queue 0 hands the switch a broadcast RARP from the MAC,
/// once per request.
#[test]
fn send_rarp_announces_the_mac_once_per_request() {
    let path = sock("rarp");
    let mut sw = SwitchSide::open("rarp", &cfg(&path, Server, 2, true), 1);
    let mut s = raw_stream(&path);
    let mac = [0x52, 0x54, 0x00, 0x12, 0x34, 0x56];
    let mut payload = [0u8; 8];
    payload[..6].copy_from_slice(&mac);
    for round in 1..=2u64 {
        s.write_all(&encode(code::SEND_RARP, false, &payload))
            .unwrap();
        let got = sw.recv(0, 1);
        assert_eq!(got, vec![rarp::frame(mac).to_vec()], "round {round}");
        // Nothing more until the next request.
        for _ in 0..10 {
            assert_eq!(sw.poll(), 0, "a second announcement for one request");
        }
        let st = sw.port.status();
        assert_eq!((st.rarp_requests, st.rarp_sent), (round, round));
    }
    assert_eq!(sw.port.gauges().count("rarp_sent"), Some(2));
    // A short SEND_RARP is a protocol error, not a crash; the port stays.
    s.write_all(&encode(code::SEND_RARP, true, &[1, 2, 3]))
        .unwrap();
    let mut reply = [0u8; 20];
    s.read_exact(&mut reply).unwrap();
    assert_eq!(
        u64::from_le_bytes(reply[12..20].try_into().unwrap()),
        1,
        "NACK"
    );
    assert_eq!(sw.port.status().rarp_requests, 2);
    assert_eq!(features::protocol_offered().bits() & (1 << 2), 1 << 2);
}

/// The rings are rebuilt many times while a migration starts and ends
/// (SET_LOG_BASE, SET_FEATURES and SET_VRING_ADDR each rebuild them).
/// With a PMD thread forwarding the guest's frames back to it the whole
/// time, every frame must come back intact and the guest driver must see
/// no used entry it did not post: a rebuild that resumed at a wrong
/// position would write into buffers the guest owns again.
#[test]
fn ring_rebuilds_under_traffic_keep_every_buffer_accounted_for() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let (sw, mut g) = migrating_guest("storm");
    let log = memfd(LOG_BYTES);
    let stop = AtomicBool::new(false);
    let SwitchSide {
        port,
        mut cache,
        mut rxq,
        mut txq,
    } = sw;
    let addrs = g.ring_addrs.clone();
    std::thread::scope(|s| {
        s.spawn(|| {
            // The PMD: guest TX -> guest RX, what does not fit is dropped.
            while !stop.load(Ordering::Relaxed) {
                let mut b = nfv_mem::Batch::new();
                rxq[0].rx_burst(&mut b, &mut cache);
                txq[0].tx_burst(&mut b, &mut cache);
                cache.free_batch(&mut b);
            }
        });
        let mut sent = 0u32;
        let mut back = 0u64;
        for round in 0..300u32 {
            // Keep about a ring's worth in flight.
            let frames: Vec<Vec<u8>> = (0..64)
                .map(|i| {
                    let seq = sent + i;
                    frame(60 + (seq as usize * 37) % 1400, seq)
                })
                .collect();
            sent += g.send(0, &frames) as u32;
            for f in g.recv(0) {
                let seq = u32::from_be_bytes(f[14..18].try_into().unwrap());
                assert_eq!(f, frame(f.len(), seq), "frame {seq} changed");
                back += 1;
            }
            // A migration starting (every 10th round: ending).
            let logging = round % 10 != 9;
            if logging {
                send_log_base(&g, &log, LOG_BYTES).unwrap();
            }
            let f = if logging {
                g.features | VHOST_F_LOG_ALL
            } else {
                g.features
            };
            g.fe.set_features(f).unwrap();
            for (i, a) in addrs.iter().enumerate().take(2) {
                g.fe.set_vring_addr(
                    i,
                    &vhost::VringConfigData {
                        queue_max_size: 256,
                        queue_size: 256,
                        flags: u32::from(logging),
                        desc_table_addr: a.desc,
                        used_ring_addr: a.used,
                        avail_ring_addr: a.avail,
                        log_addr: logging.then_some(a.used),
                    },
                )
                .unwrap();
            }
        }
        // Drain what is still in flight.
        nfv_testutil::wait_until(WAIT, || {
            back += g.recv(0).len() as u64;
            back as u32 >= sent
        });
        stop.store(true, Ordering::Relaxed);
        let drv = g.rx[0].errors().total() + g.tx[0].errors().total();
        assert_eq!(
            drv,
            0,
            "the guest driver saw bad used entries: rx {:?} tx {:?}",
            g.rx[0].errors(),
            g.tx[0].errors()
        );
        assert!(back > 0);
        eprintln!("storm: {sent} sent, {back} back");
    });
    let st = port.status();
    assert!(st.vrings.iter().all(|v| v.violations() == 0), "{st:#?}");
}
