//! A hostile frontend: bad memory tables (overlaps, wrong fds, short
//! files), rings outside memory, impossible sizes and indexes, descriptors
//! pointing anywhere, loops, `avail.idx` jumps and garbage messages. The
//! port must answer with errors and counters, quarantine the queue where
//! the ring is beyond repair, never panic — and a healthy port in the same
//! process keeps forwarding throughout.

mod common;

use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU16, Ordering};

use common::*;
use nfv_ports::Port;
use nfv_vhost::VhostUserMode::{Client, Server};
use nfv_virtio::layout::{Desc, VIRTQ_DESC_F_INDIRECT, VIRTQ_DESC_F_NEXT, VIRTQ_DESC_F_WRITE};
use vhost::vhost_user::VhostUserFrontend;
use vhost::{VhostBackend, VringConfigData};

/// A healthy port B with its guest, checked between attacks.
struct Healthy {
    g: Guest,
    sw: SwitchSide,
    n: u32,
}

impl Healthy {
    fn new(tag: &str) -> (Healthy, TestListener) {
        let path = sock(&format!("{tag}-healthy"));
        let l = listen(&path);
        let sw = SwitchSide::open(&format!("{tag}-b"), &cfg(&path, Client, 1, true), 1);
        let g = Guest::setup(accept(&l), &format!("{tag}-b"), &GuestOpts::default());
        (Healthy { g, sw, n: 0 }, l)
    }
    fn check(&mut self) {
        self.n += 1;
        let frames: Vec<_> = (0..20)
            .map(|i| frame(60 + i * 70, self.n * 100 + i as u32))
            .collect();
        round_trip(&mut self.g, &mut self.sw, 0, 0, 0, &frames);
        let st = self.sw.port.status();
        assert_eq!(
            st.protocol_errors + st.ring_errors + st.mem_table_errors,
            0,
            "{st:#?}"
        );
    }
}

fn memfd(len: u64) -> File {
    // SAFETY: valid NUL-terminated name; the new fd is owned by the File.
    let fd = unsafe { libc::memfd_create(c"short".as_ptr(), libc::MFD_CLOEXEC) };
    assert!(fd >= 0);
    // SAFETY: `fd` is fresh and owned by nothing else.
    let f = unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    f.set_len(len).unwrap();
    f
}

#[test]
fn bad_memory_tables_are_refused() {
    let (mut b, _l) = Healthy::new("memtab");
    b.check();
    let path = sock("memtab-a");
    let mut a = SwitchSide::open("memtab-a", &cfg(&path, Server, 1, true), 1);
    let mut fe = connect(&path);
    let features = negotiate(&mut fe, None).unwrap();
    let opts = GuestOpts::default();
    let mut g = Guest::memory(fe, "memtab-a", &opts, features);
    let good = g.regions();
    let devnull = File::open("/dev/null").unwrap();
    let (pr, _pw) = nix::unistd::pipe().unwrap();
    let short = memfd(4096);
    let mut cases = Vec::new();
    // Overlapping guest-physical ranges.
    let mut r = good.clone();
    r[1].guest_phys_addr = r[0].guest_phys_addr + 4096;
    cases.push(("overlap", r, "overlap in guest-physical"));
    // Overlapping frontend addresses.
    let mut r = good.clone();
    r[1].userspace_addr = r[0].userspace_addr;
    cases.push(("uva overlap", r, "overlap in frontend addresses"));
    // Not a file.
    let mut r = good.clone();
    r[0].mmap_handle = devnull.as_raw_fd();
    cases.push(("char device", r, "not a regular file"));
    let mut r = good.clone();
    r[1].mmap_handle = pr.as_raw_fd();
    cases.push(("pipe", r, "not a regular file"));
    // A file shorter than the region (mapping it would SIGBUS later).
    let mut r = good.clone();
    r[1].mmap_handle = short.as_raw_fd();
    cases.push(("short file", r, "past the end of the file"));
    // Offset past the end.
    let mut r = good.clone();
    r[1].mmap_offset = 1 << 40;
    cases.push(("offset", r, "past the end of the file"));
    for (i, (name, regions, msg)) in cases.into_iter().enumerate() {
        let res = g.fe.set_mem_table(&regions);
        assert!(res.is_err(), "{name}: accepted");
        let st = a.port.status();
        assert_eq!(st.mem_table_errors, i as u64 + 1, "{name}: {st:#?}");
        assert!(st.last_error.contains(msg), "{name}: {}", st.last_error);
        assert!(st.connected, "{name}: a refused table keeps the connection");
        assert_eq!(a.poll(), 0);
        b.check();
    }
    // Rings set up without a table stay stopped...
    for i in 0..2 {
        g.start_vring(i, &opts).unwrap();
    }
    assert_eq!(a.port.status().pairs_enabled, 0);
    // ...and start once a good table arrives.
    g.send_mem_table().unwrap();
    wait_status(&a.port, "pair up", |s| s.pairs_enabled == 1);
    round_trip(&mut g, &mut a, 0, 0, 0, &[frame(64, 1), frame(1518, 2)]);
    b.check();
}

#[test]
fn bad_vring_parameters_are_refused() {
    let (mut b, _l) = Healthy::new("vring");
    let path = sock("vring-a");
    let mut a = SwitchSide::open("vring-a", &cfg(&path, Server, 1, true), 1);
    let mut fe = connect(&path);
    let features = negotiate(&mut fe, None).unwrap();
    let opts = GuestOpts::default();
    let mut g = Guest::memory(fe, "vring-a", &opts, features);
    g.send_mem_table().unwrap();
    // Sizes that are not a power of two in 1..=32768.
    for num in [0u16, 3, 65535, 1000] {
        assert!(g.fe.set_vring_num(1, num).is_err(), "size {num}");
    }
    // A vring the port does not have (1 pair = vrings 0 and 1).
    assert!(g.fe.set_vring_num(5, 256).is_err());
    assert!(g.fe.set_vring_enable(7, true).is_err());
    let errors = a.port.status().protocol_errors;
    assert_eq!(errors, 6);
    b.check();
    // Ring addresses outside the memory table, or misaligned: the ring
    // is refused when it would start.
    let a0 = g.ring_addrs[1];
    let bad = [
        VringConfigData {
            desc_table_addr: 0xdead_0000_0000,
            ..ring_cfg(a0, 256)
        },
        VringConfigData {
            used_ring_addr: 0x1000,
            ..ring_cfg(a0, 256)
        },
        VringConfigData {
            // The avail ring runs past the end of the rings region.
            avail_ring_addr: g.rings.base().as_ptr() as u64 + g.rings.len() as u64 - 16,
            ..ring_cfg(a0, 256)
        },
    ];
    let kick = vmm_sys_util::eventfd::EventFd::new(libc::EFD_NONBLOCK).unwrap();
    for c in &bad {
        let before = a.port.status().ring_errors;
        g.fe.set_vring_num(1, 256).unwrap();
        g.fe.set_vring_addr(1, c).unwrap();
        g.fe.set_vring_kick(1, &kick).unwrap();
        g.fe.set_vring_enable(1, true).unwrap();
        let st = a.port.status();
        assert!(st.ring_errors > before, "{:#x}: {st:#?}", c.desc_table_addr);
        assert!(st.last_error.contains("vring 1"), "{}", st.last_error);
        assert_eq!(st.pairs_enabled, 0);
        assert_eq!(a.poll(), 0);
        b.check();
    }
    // A huge but valid size whose rings do not fit the memory.
    let before = a.port.status().ring_errors;
    g.fe.set_vring_num(1, 32768).unwrap();
    g.fe.set_vring_addr(1, &ring_cfg(a0, 32768)).unwrap();
    assert!(a.port.status().ring_errors > before);
    assert_eq!(a.poll(), 0);
    // Fixing the parameters starts the ring.
    g.fe.set_vring_num(1, 256).unwrap();
    g.fe.set_vring_addr(1, &ring_cfg(a0, 256)).unwrap();
    g.start_vring(0, &opts).unwrap();
    wait_status(&a.port, "pair up", |s| s.pairs_enabled == 1);
    round_trip(&mut g, &mut a, 0, 0, 0, &[frame(64, 5)]);
    b.check();
    // A misaligned used ring stops that ring (counted, named in the last
    // error); the connection stays and a fixed address starts it again.
    let before = a.port.status().ring_errors;
    g.fe.set_vring_addr(
        1,
        &VringConfigData {
            used_ring_addr: a0.used + 2,
            ..ring_cfg(a0, 256)
        },
    )
    .unwrap();
    let st = a.port.status();
    assert!(st.ring_errors > before, "{st:#?}");
    assert!(st.last_error.contains("misaligned"), "{}", st.last_error);
    assert_eq!(st.pairs_enabled, 0);
    assert_eq!(st.disconnects, 0);
    assert_eq!(a.poll(), 0);
    g.fe.set_vring_addr(1, &ring_cfg(a0, 256)).unwrap();
    wait_status(&a.port, "pair up again", |s| s.pairs_enabled == 1);
    round_trip(&mut g, &mut a, 0, 0, 0, &[frame(64, 6)]);
    b.check();
}

fn ring_cfg(a: nfv_virtio::RingAddrs, size: u16) -> VringConfigData {
    VringConfigData {
        queue_max_size: size,
        queue_size: size,
        flags: 0,
        desc_table_addr: a.desc,
        used_ring_addr: a.used,
        avail_ring_addr: a.avail,
        log_addr: None,
    }
}

/// Raw writer for a ring the test drives by hand.
struct RawRing {
    desc: *mut Desc,
    avail: *mut u16,
    size: u16,
    idx: u16,
}

impl RawRing {
    fn new(a: nfv_virtio::RingAddrs, size: u16) -> RawRing {
        RawRing {
            desc: a.desc as *mut Desc,
            avail: a.avail as *mut u16,
            size,
            idx: 0,
        }
    }
    fn desc(&self, i: u16, d: Desc) {
        assert!(i < self.size);
        // SAFETY: the ring lies in the guest's rings region, mapped by this
        // test for its whole run; index checked above.
        unsafe { self.desc.add(i as usize).write_volatile(d) };
    }
    /// Makes `head` available.
    fn post(&mut self, head: u16) {
        // SAFETY: avail ring = flags, idx, ring[size]; the slot is masked.
        unsafe {
            self.avail
                .add(2 + (self.idx % self.size) as usize)
                .write_volatile(head)
        };
        self.idx = self.idx.wrapping_add(1);
        self.publish(self.idx);
    }
    fn publish(&self, idx: u16) {
        // SAFETY: `avail.idx` is the second u16 of the avail ring, 2-aligned.
        let a = unsafe { &*(self.avail.add(1) as *const AtomicU16) };
        a.store(idx, Ordering::Release);
    }
}

#[test]
fn hostile_descriptors_are_counted_and_quarantined() {
    let (mut b, _l) = Healthy::new("desc");
    let path = sock("desc-a");
    let mut a = SwitchSide::open("desc-a", &cfg(&path, Server, 1, true), 1);
    let opts = GuestOpts::default();
    let g = Guest::setup(connect(&path), "desc-a", &opts);
    wait_status(&a.port, "pair up", |s| s.pairs_enabled == 1);
    let mut tx = RawRing::new(g.ring_addrs[1], opts.size);
    let pkt = g.pool.region().base().as_ptr() as u64 + 4096;
    let d = |addr: u64, len: u32, flags: u16, next: u16| Desc {
        addr,
        len,
        flags,
        next,
    };
    // The largest indirect table virtio allows (65,536 entries), or what
    // fits in the guest pool behind its first MiB: zero-length entries
    // chained by NEXT, legal one by one and ~250x over the chain cap.
    let region = g.pool.region();
    let table = region.base().as_ptr() as u64 + (1 << 20);
    let entries = (65_536usize).min((region.len() - (1 << 20)) / 16);
    assert!(
        entries > 1024,
        "guest pool too small for the long-chain row"
    );
    // (what the guest does, counter that must move)
    type Attack = Box<dyn Fn(&mut RawRing)>;
    let attacks: Vec<(&str, Attack, &str)> = vec![
        (
            "buffer outside memory",
            Box::new(move |r| {
                r.desc(0, d(0xdead_0000_0000, 100, 0, 0));
                r.post(0);
            }),
            "desc_out_of_memory",
        ),
        (
            "buffer straddling the end of a region",
            Box::new(move |r| {
                r.desc(0, d(pkt + (2 << 20), 1 << 30, 0, 0));
                r.post(0);
            }),
            "desc_out_of_memory",
        ),
        (
            "head out of range",
            Box::new(|r| r.post(999)),
            "desc_id_out_of_range",
        ),
        (
            "next out of range",
            Box::new(move |r| {
                r.desc(0, d(pkt, 12, VIRTQ_DESC_F_NEXT, 4000));
                r.post(0);
            }),
            "desc_id_out_of_range",
        ),
        (
            "descriptor loop",
            Box::new(move |r| {
                r.desc(1, d(pkt, 12, VIRTQ_DESC_F_NEXT, 2));
                r.desc(2, d(pkt, 12, VIRTQ_DESC_F_NEXT, 1));
                r.post(1);
            }),
            "chain_too_long",
        ),
        (
            "indirect table of bad length",
            Box::new(move |r| {
                r.desc(3, d(pkt, 7, VIRTQ_DESC_F_INDIRECT, 0));
                r.post(3);
            }),
            "indirect_bad_len",
        ),
        (
            "indirect table outside memory",
            Box::new(move |r| {
                r.desc(3, d(0x10, 64, VIRTQ_DESC_F_INDIRECT, 0));
                r.post(3);
            }),
            "indirect_out_of_memory",
        ),
        (
            "indirect table of zero-length descriptors far over the chain cap",
            Box::new(move |r| {
                let t = table as *mut Desc;
                for i in 0..entries {
                    // SAFETY: `table + entries * 16` lies inside the guest
                    // pool's mapping (its length was checked above), which
                    // this test owns; Desc is 16 bytes, 16-aligned here.
                    unsafe { t.add(i).write(d(pkt, 0, VIRTQ_DESC_F_NEXT, (i + 1) as u16)) };
                }
                r.desc(7, d(table, (entries * 16) as u32, VIRTQ_DESC_F_INDIRECT, 0));
                r.post(7);
            }),
            "chain_too_long",
        ),
        (
            "device-writable buffer in a TX chain",
            Box::new(move |r| {
                r.desc(4, d(pkt, 100, VIRTQ_DESC_F_WRITE, 0));
                r.post(4);
            }),
            "wrong_direction",
        ),
        (
            "chain shorter than the header",
            Box::new(move |r| {
                r.desc(5, d(pkt, 4, 0, 0));
                r.post(5);
            }),
            "short_chain",
        ),
    ];
    for (name, attack, counter) in &attacks {
        let before = a.port.status().vrings[1].counter(counter);
        attack(&mut tx);
        let mut polled = 0;
        wait(name, || {
            polled += a.poll();
            a.port.status().vrings[1].counter(counter) > before
        });
        assert_eq!(polled, 0, "{name}: a bad chain produced a packet");
        assert!(a.port.status().quarantined().is_empty(), "{name}");
        b.check();
    }
    // A good frame still gets through after all that.
    let hdr_and_frame: Vec<u8> = [vec![0u8; 12], frame(64, 42)].concat();
    // SAFETY: `pkt` is inside the guest pool's mapping (offset 4096 of it).
    unsafe {
        std::ptr::copy_nonoverlapping(hdr_and_frame.as_ptr(), pkt as *mut u8, hdr_and_frame.len())
    };
    tx.desc(6, d(pkt, hdr_and_frame.len() as u32, 0, 0));
    tx.post(6);
    assert_eq!(a.recv(0, 1), vec![frame(64, 42)]);
    // avail.idx far ahead: beyond repair, the queue is quarantined.
    tx.publish(tx.idx.wrapping_add(5000));
    wait("quarantine", || {
        a.poll();
        a.port.status().quarantined() == vec![1]
    });
    for _ in 0..10 {
        assert_eq!(a.poll(), 0);
    }
    let gauges = a.port.gauges();
    assert_eq!(gauges.text("quarantined").as_deref(), Some("[1]"));
    assert!(
        gauges
            .text("vring1")
            .is_some_and(|v| v.contains("avail_idx_jump=1")),
        "{gauges:?}"
    );
    b.check();
    drop(g);
    // A new connection gets a fresh queue.
    let mut g2 = Guest::setup(connect(&path), "desc-a2", &opts);
    wait("pair up, quarantine over", || {
        a.poll();
        let s = a.port.status();
        s.pairs_enabled == 1 && s.quarantined().is_empty()
    });
    round_trip(&mut g2, &mut a, 0, 0, 0, &[frame(64, 43)]);
    b.check();
}

#[test]
fn hostile_receive_buffers_are_counted() {
    let (mut b, _l) = Healthy::new("rxbuf");
    let path = sock("rxbuf-a");
    let mut a = SwitchSide::open("rxbuf-a", &cfg(&path, Server, 1, false), 1);
    let opts = GuestOpts::default();
    let mut fe = connect(&path);
    let features = negotiate(&mut fe, None).unwrap();
    let mut g = Guest::memory(fe, "rxbuf-a", &opts, features);
    g.send_mem_table().unwrap();
    // Start the guest RX ring by hand (no driver refill).
    let a0 = g.ring_addrs[0];
    let kick = vmm_sys_util::eventfd::EventFd::new(libc::EFD_NONBLOCK).unwrap();
    g.fe.set_vring_num(0, 256).unwrap();
    g.fe.set_vring_addr(0, &ring_cfg(a0, 256)).unwrap();
    g.fe.set_vring_kick(0, &kick).unwrap();
    g.fe.set_vring_enable(0, true).unwrap();
    g.start_vring(1, &opts).unwrap();
    wait_status(&a.port, "pair up", |s| s.pairs_enabled == 1);
    let mut rx = RawRing::new(a0, 256);
    let pkt = g.pool.region().base().as_ptr() as u64 + 8192;
    // Read-only receive buffer, then one outside memory, then one too small.
    rx.desc(
        0,
        Desc {
            addr: pkt,
            len: 2048,
            flags: 0,
            next: 0,
        },
    );
    rx.desc(
        1,
        Desc {
            addr: 0xdead_0000_0000,
            len: 2048,
            flags: VIRTQ_DESC_F_WRITE,
            next: 0,
        },
    );
    rx.desc(
        2,
        Desc {
            addr: pkt,
            len: 40,
            flags: VIRTQ_DESC_F_WRITE,
            next: 0,
        },
    );
    for h in 0..3 {
        rx.post(h);
    }
    for _ in 0..3 {
        a.send(0, &[frame(64, 1)]);
    }
    wait_status(&a.port, "rx errors", |s| {
        let v = &s.vrings[0];
        v.counter("wrong_direction") == 1 && v.counter("desc_out_of_memory") == 1
    });
    b.check();
}

#[test]
fn garbage_messages_end_the_connection_not_the_port() {
    let (mut b, _l) = Healthy::new("garbage");
    let path = sock("garbage-a");
    let mut a = SwitchSide::open("garbage-a", &cfg(&path, Server, 1, true), 1);
    let garbage: [&[u8]; 3] = [
        // Unknown request code 9999, version 1, no body.
        &[0x0f, 0x27, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0],
        // GET_FEATURES claiming a 1 MiB body.
        &[1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0x10, 0],
        // Random bytes.
        &[
            0xde, 0xad, 0xbe, 0xef, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4, 5, 6, 7, 8,
        ],
    ];
    for (i, msg) in garbage.iter().enumerate() {
        let mut s = raw_stream(&path);
        s.write_all(msg).unwrap();
        wait_status(&a.port, "protocol error", |st| {
            st.protocol_errors == i as u64 + 1 && st.disconnects == i as u64 + 1
        });
        b.check();
    }
    // GET_VRING_BASE of a vring that does not exist cannot be answered:
    // the connection ends.
    let mut fe = connect(&path);
    negotiate(&mut fe, None).unwrap();
    assert!(fe.get_vring_base(9).is_err());
    wait_status(&a.port, "disconnect", |st| st.disconnects == 4);
    // The port still serves a well-behaved frontend.
    let mut g = Guest::setup(connect(&path), "garbage-a", &GuestOpts::default());
    round_trip(&mut g, &mut a, 0, 0, 0, &[frame(1000, 7)]);
    b.check();
}
