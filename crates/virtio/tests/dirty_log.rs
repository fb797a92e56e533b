//! Dirty-page logging (live migration): after each kind of device write
//! into guest memory — a frame and its header in a receive buffer, a
//! merged packet's `num_buffers`, used ring entries, `used.idx`, packed
//! used descriptors — exactly the guest pages written are marked in the
//! log, on page boundaries too; transmit buffers (only read) never are,
//! and nothing is marked while no log is set.

mod common;

use common::{GPA, Loopback, LoopbackCfg, Mock, frame, pool};
use nfv_mem::{Batch, PoolCache};
use nfv_virtio::dirty_log::{DirtyLog, LOG_PAGE};
use nfv_virtio::layout::{
    Desc, VIRTIO_F_RING_PACKED as PACKED, VIRTIO_F_VERSION_1 as V1, VIRTIO_NET_F_MRG_RXBUF as MRG,
    VIRTIO_RING_F_EVENT_IDX as EVIDX, VIRTQ_DESC_F_WRITE as WRITE,
};
use std::collections::BTreeSet;
use std::fs::File;
use std::os::fd::FromRawFd;
use std::sync::Arc;

const SIZE: u16 = 8;

/// A log covering guest-physical addresses below `end`.
fn log_for(end: u64) -> (File, Arc<DirtyLog>) {
    // SAFETY: a literal name; the fd is taken over by the File.
    let fd = unsafe { libc::memfd_create(c"dirty-log-test".as_ptr(), 0) };
    assert!(fd >= 0, "memfd_create");
    // SAFETY: a fresh fd we own.
    let f = unsafe { File::from_raw_fd(fd) };
    let bytes = (end / LOG_PAGE).div_ceil(8) + 1;
    f.set_len(bytes).unwrap();
    let log = Arc::new(DirtyLog::map(&f, bytes, 0).unwrap());
    (f, log)
}

/// Pages of `[gpa, gpa + len)`.
fn pages(gpa: u64, len: u64) -> impl Iterator<Item = u64> {
    (gpa / LOG_PAGE)..=((gpa + len - 1) / LOG_PAGE)
}

/// The marked pages between `from` and `to` (guest-physical).
fn marked(log: &DirtyLog, from: u64, to: u64) -> BTreeSet<u64> {
    (from / LOG_PAGE..=to / LOG_PAGE)
        .filter(|&p| log.is_marked(p))
        .collect()
}

fn d(addr: u64, len: u32, flags: u16) -> Desc {
    Desc {
        addr,
        len,
        flags,
        next: 0,
    }
}

fn one_packet(len: usize, sc: &mut PoolCache) -> Batch {
    let mut b = Batch::new();
    let mut p = sc.alloc().unwrap();
    p.set_len(len).unwrap();
    p.data_mut().copy_from_slice(&frame(len, 7));
    b.push(p);
    b
}

/// Guest-physical addresses of the split used ring's parts.
struct UsedRing {
    idx: u64,
    elem0: u64,
}

fn used_ring(m: &Mock) -> UsedRing {
    let used = m.gpa(m.host.used as *const u8);
    UsedRing {
        idx: used + 2,
        elem0: used + 4,
    }
}

/// A split receive queue: each row posts receive buffers placed so the
/// written bytes cross (or end on) page boundaries, delivers one packet,
/// and checks the marked pages against the bytes written.
#[test]
fn split_rx_marks_exactly_the_pages_written() {
    struct Row {
        name: &'static str,
        features: u64,
        /// Offset of each posted buffer from a page boundary, and its
        /// length (one descriptor per chain).
        bufs: &'static [(u64, u32)],
        frame: usize,
        /// Bytes written into each buffer, in order.
        written: &'static [u64],
    }
    let rows = [
        Row {
            name: "header and frame in one buffer across a page boundary",
            features: V1,
            bufs: &[(4096 - 48, 2048)],
            frame: 1000,
            written: &[1012],
        },
        Row {
            name: "a frame that ends exactly on a page boundary",
            features: V1,
            bufs: &[(4096 - 80, 2048)],
            frame: 68,
            written: &[80],
        },
        Row {
            name: "merged packet: header split over two buffers, num_buffers patched",
            features: V1 | MRG,
            bufs: &[(4096 - 16, 8), (4096 - 112, 2000)],
            frame: 1500,
            written: &[8, 1504],
        },
        Row {
            name: "merged packet over three buffers on three pages, event index on",
            features: V1 | MRG | EVIDX,
            bufs: &[(4096 - 512, 512), (4096 - 256, 512), (4096 - 16, 1024)],
            frame: 1400,
            written: &[512, 512, 388],
        },
    ];
    let sp = pool("sw", 2048, 64);
    let mut sc = sp.cache();
    for row in rows {
        let mut m = Mock::new(SIZE, 64 * 4096);
        let (_f, log) = log_for(m.gpa_end());
        let mut q = m.device(row.features);
        q.set_dirty_log(Some(log.clone()));
        assert!(q.dirty_logging());
        let mut want = BTreeSet::new();
        for (i, &(off, len)) in row.bufs.iter().enumerate() {
            // Move to the next page boundary, then `off` past it.
            let (g, _) = m.buf(0);
            let page_end = g.div_ceil(4096) * 4096;
            let skip = page_end + off - g;
            m.buf(skip as usize);
            let (gpa, _) = m.buf(len as usize);
            assert_eq!(gpa, page_end + off, "{}: placement", row.name);
            m.set_desc(i as u16, d(gpa, len, WRITE));
            m.push_avail(i as u16);
            want.extend(pages(gpa, row.written[i]));
        }
        let mut b = one_packet(row.frame, &mut sc);
        assert_eq!(q.enqueue_burst(&mut b, &mut sc), 1, "{}", row.name);
        let u = used_ring(&m);
        want.extend(pages(u.idx, 2));
        for i in 0..row.bufs.len() as u64 {
            want.extend(pages(u.elem0 + 8 * i, 8));
        }
        assert_eq!(marked(&log, GPA, m.gpa_end()), want, "{}", row.name);
        assert_eq!(log.out_of_range() + log.untranslated(), 0, "{}", row.name);
    }
}

/// Transmit buffers are only read: a TX burst marks the used ring and
/// nothing else.
#[test]
fn split_tx_marks_only_the_used_ring() {
    let sp = pool("sw", 2048, 64);
    let mut sc = sp.cache();
    let mut m = Mock::new(SIZE, 64 * 4096);
    let (_f, log) = log_for(m.gpa_end());
    let mut q = m.device(V1);
    q.set_dirty_log(Some(log.clone()));
    for i in 0..4u16 {
        let mut v = vec![0u8; 12];
        v.extend(frame(1500, i as u32));
        let g = m.buf_with(&v);
        m.set_desc(i, d(g, v.len() as u32, 0));
        m.push_avail(i);
    }
    let mut b = Batch::new();
    assert_eq!(q.dequeue_burst(&mut b, &mut sc), 4);
    sc.free_batch(&mut b);
    let u = used_ring(&m);
    let want: BTreeSet<u64> = pages(u.idx, 2).chain(pages(u.elem0, 32)).collect();
    // The buffers span pages 0-2; only the ring's (page 0) is marked.
    assert_eq!(marked(&log, GPA, m.gpa_end()), want);
}

/// No log, no marks; a log set later sees only later writes; a log
/// removed stops the marking.
#[test]
fn marking_follows_the_log_being_set_and_removed() {
    let sp = pool("sw", 2048, 64);
    let mut sc = sp.cache();
    let mut m = Mock::new(SIZE, 64 * 4096);
    let (_f, log) = log_for(m.gpa_end());
    let mut q = m.device(V1);
    // Buffers from the second page on: the first holds the rings.
    m.buf(4096);
    let post = |m: &mut Mock, i: u16| {
        let (g, _) = m.buf(8192);
        m.set_desc(i, d(g, 8192, WRITE));
        m.push_avail(i);
        g
    };
    let g0 = post(&mut m, 0);
    let mut b = one_packet(100, &mut sc);
    assert_eq!(q.enqueue_burst(&mut b, &mut sc), 1);
    assert!(!log.is_marked(g0 / LOG_PAGE), "marked without a log");
    q.set_dirty_log(Some(log.clone()));
    let g1 = post(&mut m, 1);
    let mut b = one_packet(100, &mut sc);
    assert_eq!(q.enqueue_burst(&mut b, &mut sc), 1);
    assert!(log.is_marked(g1 / LOG_PAGE));
    assert!(!log.is_marked(g0 / LOG_PAGE));
    q.set_dirty_log(None);
    assert!(!q.dirty_logging());
    let g2 = post(&mut m, 2);
    let mut b = one_packet(100, &mut sc);
    assert_eq!(q.enqueue_burst(&mut b, &mut sc), 1);
    assert!(
        !log.is_marked(g2 / LOG_PAGE),
        "marked after the log was removed"
    );
}

/// A queue writes its notification fields (used flags, avail_event) when
/// it is built, before a log can be attached: attaching one writes them
/// again, marked, so a queue built during a migration leaves no unlogged
/// byte behind.
#[test]
fn attaching_a_log_marks_the_notification_fields_written_at_build() {
    for features in [V1, V1 | EVIDX] {
        let m = Mock::new(SIZE, 64 * 4096);
        let (_f, log) = log_for(m.gpa_end());
        let mut q = m.device(features);
        let used = m.gpa(m.host.used as *const u8);
        assert!(!log.is_marked(used / LOG_PAGE));
        q.set_dirty_log(Some(log.clone()));
        let want: BTreeSet<u64> = pages(used, 2).collect();
        assert!(
            want.iter().all(|&p| log.is_marked(p)),
            "features {features:#x}: used flags not marked"
        );
        if features & EVIDX != 0 {
            // avail_event: right after the used ring's SIZE entries.
            let avail_event = used + 4 + 8 * u64::from(SIZE);
            assert!(log.is_marked(avail_event / LOG_PAGE));
        }
    }
}

/// Packed rings: the frames the driver receives, their headers and the
/// used descriptors are marked; the pool pages holding no received byte
/// are not.
#[test]
fn packed_rx_marks_frames_headers_and_used_descriptors() {
    const BASE: u64 = 0x2_0000_0000;
    for features in [V1, V1 | MRG] {
        let mut l = Loopback::new(LoopbackCfg {
            size: 64,
            features: features | PACKED,
            frame_size: 4096,
            frames: 512,
            gpa_base: BASE,
            ..Default::default()
        });
        let (_f, log) = log_for(BASE + (1 << 32) + (1 << 20));
        l.rx_dev.set_dirty_log(Some(log.clone()));
        let frames: Vec<Vec<u8>> = [60, 1514, 3000, 64]
            .iter()
            .enumerate()
            .map(|(i, &n)| frame(n, i as u32))
            .collect();
        // Keep the received packets so their buffers can be located.
        let mut b = Batch::new();
        for f in &frames {
            let mut p = l.sw.alloc().unwrap();
            p.set_len(f.len()).unwrap();
            p.data_mut().copy_from_slice(f);
            b.push(p);
        }
        l.rx_drv.refill_rx(&mut l.drv);
        assert_eq!(l.rx_dev.enqueue_burst(&mut b, &mut l.sw), frames.len());
        let mut got = Batch::new();
        l.rx_drv.receive_burst(&mut got, &mut l.drv);
        assert_eq!(got.len(), frames.len());
        let mut want = BTreeSet::new();
        for p in got.iter() {
            assert_eq!(p.tail().1, 0);
            let gpa = l.mem.host_to_gpa(p.data_ptr(), p.len()).unwrap();
            want.extend(pages(gpa - 12, p.len() as u64 + 12));
        }
        let pool_end = BASE + l.drv_pool.region().len() as u64;
        assert_eq!(marked(&log, BASE, pool_end - 1), want, "{features:#x}");
        // The used descriptors: the ring's first page.
        assert!(log.is_marked((BASE + (1 << 32)) / LOG_PAGE));
        assert_eq!(log.out_of_range() + log.untranslated(), 0);
        l.drv.free_batch(&mut got);
    }
}
