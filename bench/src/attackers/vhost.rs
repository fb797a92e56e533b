//! Hostile vhost-user frontends (the `vhost` crate's frontend, as the
//! crate's own tests use it), each a loop that runs until `stop`:
//!
//! * [`huge_tables`]: memory tables of sparse memfds ftruncated to TiBs
//!   (over the port's `max_guest_memory`);
//! * [`unmappable_files`]: memory regions and dirty logs on a file that is
//!   not memory-backed (a regular file on the run directory's disk file
//!   system) and on a pipe;
//! * [`descriptors`]: a guest whose TX ring carries malformed chains,
//!   chain loops, or an `avail.idx` that jumps past the ring;
//! * [`short_lived_session`]: one well-behaved session (a small memory
//!   table, both vrings started) for the short-lived ports attack.
//!
//! The attacker never forwards traffic: it needs no driver queue or
//! packet pool, only a mapped region it writes descriptors into.

use super::{Tally, memfd, until};
use nfv_mem::{HugepageMode, Region};
use nfv_virtio::layout::{
    Desc, VHOST_USER_F_PROTOCOL_FEATURES, VIRTIO_F_VERSION_1, VIRTIO_RING_F_INDIRECT_DESC,
    VIRTQ_DESC_F_INDIRECT, VIRTQ_DESC_F_NEXT, VIRTQ_DESC_F_WRITE,
};
use nfv_virtio::{RingAddrs, layout_rings, ring_area_bytes};
use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::time::Duration;
use vhost::vhost_user::message::VhostUserHeaderFlag;
use vhost::vhost_user::{Frontend, VhostUserFrontend, VhostUserProtocolFeatures};
use vhost::{VhostBackend, VhostUserDirtyLogRegion, VhostUserMemoryRegionInfo, VringConfigData};
use vmm_sys_util::eventfd::EventFd;

/// Every reply is awaited at most this long (a switch that never answers
/// must not hang the bench).
const REPLY_TIMEOUT: Duration = Duration::from_secs(3);

/// Connects to a server-mode port and negotiates: VERSION_1 and protocol
/// features (plus `extra` features where offered), REPLY_ACK and `pf`.
pub fn session(sock: &Path, extra: u64, pf: VhostUserProtocolFeatures) -> Result<Frontend, String> {
    let mut fe = Frontend::connect(sock, 8).map_err(|e| format!("connect: {e}"))?;
    let tv = libc::timeval {
        tv_sec: REPLY_TIMEOUT.as_secs() as libc::time_t,
        tv_usec: 0,
    };
    // SAFETY: setsockopt on the frontend's live socket with a timeval.
    unsafe {
        libc::setsockopt(
            fe.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    let e = |what: &'static str| move |err: vhost::Error| format!("{what}: {err}");
    fe.set_owner().map_err(e("SET_OWNER"))?;
    let offered = fe.get_features().map_err(e("GET_FEATURES"))?;
    let want = VIRTIO_F_VERSION_1 | VHOST_USER_F_PROTOCOL_FEATURES | extra;
    fe.set_features(offered & want).map_err(e("SET_FEATURES"))?;
    let offered_pf = fe
        .get_protocol_features()
        .map_err(e("GET_PROTOCOL_FEATURES"))?;
    fe.set_protocol_features(offered_pf & (VhostUserProtocolFeatures::REPLY_ACK | pf))
        .map_err(e("SET_PROTOCOL_FEATURES"))?;
    fe.set_hdr_flags(VhostUserHeaderFlag::NEED_REPLY);
    Ok(fe)
}

fn region(addr: u64, size: u64, fd: i32) -> VhostUserMemoryRegionInfo {
    VhostUserMemoryRegionInfo {
        guest_phys_addr: addr,
        memory_size: size,
        userspace_addr: addr,
        mmap_offset: 0,
        mmap_handle: fd,
    }
}

/// Tables of sparse memfds that cost the attacker nothing: 4 x 512 GiB
/// (just over the default 1 TiB cap) and 8 x 16 TiB (what exhausted the
/// address space in issue 36). Every one must be refused.
pub fn huge_tables(sock: &Path, stop: &AtomicBool) -> Tally {
    let mut t = Tally::default();
    let tables: Vec<Vec<(File, u64)>> = [(4u64, 512u64 << 30), (8, 16 << 40)]
        .iter()
        .map(|&(n, size)| {
            (0..n)
                .filter_map(|_| memfd(c"soak-huge", size).ok().map(|f| (f, size)))
                .collect()
        })
        .collect();
    if tables.iter().any(|t| t.is_empty()) {
        t.note("cannot ftruncate a memfd to TiBs here".into());
        return t;
    }
    while !stop.load(Ordering::Relaxed) {
        let fe = match session(sock, 0, VhostUserProtocolFeatures::empty()) {
            Ok(fe) => fe,
            Err(e) => {
                t.note(e);
                until(stop, Duration::from_millis(200));
                continue;
            }
        };
        for _ in 0..20 {
            for table in &tables {
                let mut at = 1u64 << 32;
                let regions: Vec<_> = table
                    .iter()
                    .map(|(f, size)| {
                        let r = region(at, *size, f.as_raw_fd());
                        at += size;
                        r
                    })
                    .collect();
                t.tries += 1;
                match fe.set_mem_table(&regions) {
                    Ok(_) => t.accepted += 1,
                    Err(_) => t.refused += 1,
                }
            }
            if until(stop, Duration::from_millis(50)) {
                break;
            }
        }
    }
    t
}

/// A regular file of `len` bytes on `dir`'s file system, unlinked, if
/// that file system is not memory-backed (tmpfs, hugetlbfs).
pub fn disk_file(dir: &Path, len: u64) -> Result<File, String> {
    let path = dir.join(format!("attack-disk-{}", std::process::id()));
    let f = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let _ = std::fs::remove_file(&path);
    f.set_len(len).map_err(|e| e.to_string())?;
    let t = nix::sys::statfs::fstatfs(&f)
        .map_err(|e| e.to_string())?
        .filesystem_type();
    if t == nix::sys::statfs::TMPFS_MAGIC || t == nix::sys::statfs::HUGETLBFS_MAGIC {
        return Err(format!("{} is on tmpfs/hugetlbfs", dir.display()));
    }
    Ok(f)
}

/// Memory regions and dirty logs on a disk file and on a pipe, between
/// good tables (so the log has a table to go with).
pub fn unmappable_files(sock: &Path, dir: &Path, stop: &AtomicBool) -> Tally {
    let mut t = Tally::default();
    const LEN: u64 = 2 << 20;
    let disk = match disk_file(dir, LEN) {
        Ok(f) => f,
        Err(e) => {
            t.note(format!("no disk file: {e}"));
            return t;
        }
    };
    let (pipe_r, _pipe_w) = match nix::unistd::pipe() {
        Ok(p) => p,
        Err(e) => {
            t.note(format!("pipe: {e}"));
            return t;
        }
    };
    let good = match memfd(c"soak-good", LEN) {
        Ok(f) => f,
        Err(e) => {
            t.note(format!("memfd: {e}"));
            return t;
        }
    };
    let pf = VhostUserProtocolFeatures::LOG_SHMFD;
    while !stop.load(Ordering::Relaxed) {
        let fe = match session(sock, 0, pf) {
            Ok(fe) => fe,
            Err(e) => {
                t.note(e);
                until(stop, Duration::from_millis(200));
                continue;
            }
        };
        for _ in 0..20 {
            for fd in [disk.as_raw_fd(), pipe_r.as_raw_fd()] {
                t.tries += 1;
                match fe.set_mem_table(&[region(1 << 32, LEN, fd)]) {
                    Ok(_) => t.accepted += 1,
                    Err(_) => t.refused += 1,
                }
            }
            if let Err(e) = fe.set_mem_table(&[region(1 << 32, LEN, good.as_raw_fd())]) {
                t.note(format!("a good table refused: {e}"));
            }
            for fd in [disk.as_raw_fd(), pipe_r.as_raw_fd()] {
                t.tries += 1;
                let log = VhostUserDirtyLogRegion {
                    mmap_size: 4096,
                    mmap_offset: 0,
                    mmap_handle: fd,
                };
                // The vhost crate's frontend reads SET_LOG_BASE's reply
                // but drops its content: only a broken session is seen
                // here; the switch's `log_errors` says what it refused.
                if fe.set_log_base(0, Some(log)).is_err() {
                    t.refused += 1;
                }
            }
            if until(stop, Duration::from_millis(50)) {
                break;
            }
        }
    }
    t
}

/// Ring size of the descriptor attacker.
const SIZE: u16 = 256;
/// Where packet buffers start in its region (rings before).
const BUFFERS: u64 = 64 << 10;

/// A guest with its memory mapped here and both vrings started; it
/// writes its TX ring (vring 1) by hand.
struct RingGuest {
    fe: Frontend,
    mem: Region,
    rings: [RingAddrs; 2],
    _eventfds: Vec<EventFd>,
    idx: u16,
    /// Heads posted with an id out of range: the switch consumes and
    /// counts them but has no id to return them under.
    unreturnable: u16,
}

impl RingGuest {
    fn new(sock: &Path) -> Result<RingGuest, String> {
        let mut fe = session(
            sock,
            VIRTIO_RING_F_INDIRECT_DESC,
            VhostUserProtocolFeatures::empty(),
        )?;
        let mem = Region::new("soak-attack-rings", 4 << 20, HugepageMode::Never)
            .map_err(|e| format!("region: {e}"))?;
        let base = mem.base().as_ptr() as u64;
        let area = ring_area_bytes(SIZE);
        let layout = |i: u64| layout_rings(base + i * area as u64, area, SIZE);
        let rings = [
            layout(0).map_err(|e| format!("{e:?}"))?,
            layout(1).map_err(|e| format!("{e:?}"))?,
        ];
        let fd: &OwnedFd = mem.fd();
        fe.set_mem_table(&[region(base, mem.len() as u64, fd.as_raw_fd())])
            .map_err(|e| format!("SET_MEM_TABLE: {e}"))?;
        let mut eventfds = Vec::new();
        for (i, a) in rings.iter().enumerate() {
            let (kick, call) = (
                EventFd::new(libc::EFD_NONBLOCK).map_err(|e| e.to_string())?,
                EventFd::new(libc::EFD_NONBLOCK).map_err(|e| e.to_string())?,
            );
            let e = |err: vhost::Error| format!("vring {i}: {err}");
            fe.set_vring_call(i, &call).map_err(e)?;
            fe.set_vring_num(i, SIZE).map_err(e)?;
            fe.set_vring_base(i, 0).map_err(e)?;
            fe.set_vring_addr(
                i,
                &VringConfigData {
                    queue_max_size: SIZE,
                    queue_size: SIZE,
                    flags: 0,
                    desc_table_addr: a.desc,
                    used_ring_addr: a.used,
                    avail_ring_addr: a.avail,
                    log_addr: None,
                },
            )
            .map_err(e)?;
            fe.set_vring_kick(i, &kick).map_err(e)?;
            fe.set_vring_enable(i, true).map_err(e)?;
            eventfds.extend([kick, call]);
        }
        Ok(RingGuest {
            fe,
            mem,
            rings,
            _eventfds: eventfds,
            idx: 0,
            unreturnable: 0,
        })
    }

    fn buffer(&self) -> u64 {
        self.mem.base().as_ptr() as u64 + BUFFERS
    }

    fn desc(&self, i: u16, d: Desc) {
        let at = (self.rings[1].desc as *mut Desc).wrapping_add((i % SIZE) as usize);
        // SAFETY: the TX descriptor table lies in `mem`, mapped while the
        // guest lives; the index is masked to the ring.
        unsafe { at.write_volatile(d) };
    }

    fn u16_at(&self, addr: u64) -> &AtomicU16 {
        // SAFETY: a ring header field inside `mem`, 2-aligned by the
        // ring layout; lives as long as `self`.
        unsafe { &*(addr as *const AtomicU16) }
    }

    /// Chains the switch has not returned yet (those it cannot return,
    /// their head id out of range, not counted).
    fn in_flight(&self) -> u16 {
        let used = self.u16_at(self.rings[1].used + 2).load(Ordering::Acquire);
        self.idx.wrapping_sub(used).wrapping_sub(self.unreturnable)
    }

    fn publish(&self, idx: u16) {
        self.u16_at(self.rings[1].avail + 2)
            .store(idx, Ordering::Release);
    }

    /// Makes `head` available (avail ring = flags, idx, ring[size]).
    fn post(&mut self, head: u16) {
        if head >= SIZE {
            self.unreturnable = self.unreturnable.wrapping_add(1);
        }
        let slot = self.rings[1].avail + 4 + 2 * (self.idx % SIZE) as u64;
        self.u16_at(slot).store(head, Ordering::Relaxed);
        self.idx = self.idx.wrapping_add(1);
        self.publish(self.idx);
    }
}

/// Which descriptor attack.
#[derive(Clone, Copy, Debug)]
pub enum Descriptors {
    /// Buffers outside memory, heads and nexts out of range, writable
    /// buffers in a TX chain, chains shorter than the header, indirect
    /// tables of bad length, in turn.
    Malformed,
    /// Chains whose NEXT links loop.
    Loops,
    /// `avail.idx` published 5000 ahead (the queue is quarantined); then
    /// a new session, and again.
    AvailJump,
}

/// Runs a descriptor attack against the server-mode port at `sock`.
pub fn descriptors(sock: &Path, kind: Descriptors, stop: &AtomicBool) -> Tally {
    let mut t = Tally::default();
    while !stop.load(Ordering::Relaxed) {
        let mut g = match RingGuest::new(sock) {
            Ok(g) => g,
            Err(e) => {
                t.note(e);
                until(stop, Duration::from_millis(200));
                continue;
            }
        };
        match kind {
            Descriptors::AvailJump => {
                until(stop, Duration::from_millis(50));
                g.publish(g.idx.wrapping_add(5000));
                t.tries += 1;
                until(stop, Duration::from_millis(250));
            }
            _ => hostile_chains(&mut g, kind, &mut t, stop),
        }
        drop(g.fe);
    }
    t
}

/// Posts bad chains while fewer than half the ring is out, for at most
/// 2 s per session; a ring that stops returning chains ends the session.
fn hostile_chains(g: &mut RingGuest, kind: Descriptors, t: &mut Tally, stop: &AtomicBool) {
    let pkt = g.buffer();
    let d = |addr, len, flags, next| Desc {
        addr,
        len,
        flags,
        next,
    };
    let end = std::time::Instant::now() + Duration::from_secs(2);
    let mut stalled = 0;
    while !stop.load(Ordering::Relaxed) && std::time::Instant::now() < end {
        if g.in_flight() >= SIZE / 2 {
            stalled += 1;
            if stalled > 200 {
                t.note("the switch stopped returning bad chains".into());
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        stalled = 0;
        let n = t.tries;
        let head = (n % 64) as u16 * 2;
        match kind {
            Descriptors::Loops => {
                g.desc(head, d(pkt, 12, VIRTQ_DESC_F_NEXT, head + 1));
                g.desc(head + 1, d(pkt, 12, VIRTQ_DESC_F_NEXT, head));
                g.post(head);
            }
            _ => match n % 6 {
                0 => {
                    g.desc(head, d(0xdead_0000_0000, 100, 0, 0));
                    g.post(head);
                }
                1 => g.post(999),
                2 => {
                    g.desc(head, d(pkt, 12, VIRTQ_DESC_F_NEXT, 4000));
                    g.post(head);
                }
                3 => {
                    g.desc(head, d(pkt, 100, VIRTQ_DESC_F_WRITE, 0));
                    g.post(head);
                }
                4 => {
                    g.desc(head, d(pkt, 4, 0, 0));
                    g.post(head);
                }
                _ => {
                    g.desc(head, d(pkt, 7, VIRTQ_DESC_F_INDIRECT, 0));
                    g.post(head);
                }
            },
        }
        t.tries += 1;
        if t.tries.is_multiple_of(32) {
            std::thread::sleep(Duration::from_micros(500));
        }
    }
}

/// One short well-behaved session on a fresh port: a 2 MiB table and
/// both vrings started (the port takes guard slots for them), held for
/// `hold`.
pub fn short_lived_session(sock: &Path, hold: Duration, stop: &AtomicBool) -> Result<(), String> {
    let g = RingGuest::new(sock)?;
    until(stop, hold);
    drop(g);
    Ok(())
}
