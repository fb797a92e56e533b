//! Chains a real driver may build but ours never does, crafted by hand:
//! header in its own descriptor, header split across descriptors, data
//! spread over several, indirect tables, direct descriptors followed by an
//! indirect one; and the device's RX side writing into such chains,
//! including MRG_RXBUF's num_buffers.

mod common;

use common::{Mock, frame};
use nfv_mem::Batch;
use nfv_virtio::layout::{
    Desc, VIRTIO_F_VERSION_1 as V1, VIRTIO_NET_F_MRG_RXBUF as MRG, VIRTQ_DESC_F_INDIRECT as IND,
    VIRTQ_DESC_F_NEXT as NEXT, VIRTQ_DESC_F_WRITE as WRITE,
};

fn d(addr: u64, len: u32, flags: u16, next: u16) -> Desc {
    Desc {
        addr,
        len,
        flags,
        next,
    }
}

/// Splits `hdr ++ frame` at `cuts` into buffers of the mock.
fn pieces(m: &mut Mock, bytes: &[u8], cuts: &[usize]) -> Vec<(u64, u32)> {
    let mut out = Vec::new();
    let mut start = 0;
    for &c in cuts.iter().chain(std::iter::once(&bytes.len())) {
        out.push((m.buf_with(&bytes[start..c]), (c - start) as u32));
        start = c;
    }
    out
}

#[test]
fn tx_chains_of_every_shape_yield_the_frame() {
    let f = frame(1000, 7);
    let mut wire = vec![0u8; 12];
    wire.extend_from_slice(&f);
    let sw = common::pool("switch", 2048, 256);
    let mut sc = sw.cache();
    // (cuts, indirect?, direct descriptors before the indirect one)
    let shapes: &[(&[usize], bool, usize)] = &[
        (&[], false, 0),   // header and data together
        (&[12], false, 0), // header alone
        (&[5], false, 0),  // header split over two
        (&[5, 12, 500, 700], false, 0),
        (&[12, 13, 14], false, 0),
        (&[], true, 0), // one indirect descriptor
        (&[12, 600], true, 0),
        (&[12, 600], true, 1), // a direct header, then an indirect table
        (&[4, 12, 600], true, 2),
    ];
    for (k, &(cuts, indirect, direct)) in shapes.iter().enumerate() {
        let mut m = Mock::new(16, 64 << 10);
        let mut q = m.device(V1);
        let bufs = pieces(&mut m, &wire, cuts);
        if indirect {
            for (i, &(g, l)) in bufs[..direct].iter().enumerate() {
                m.set_desc(i as u16, d(g, l, NEXT, i as u16 + 1));
            }
            let rest = &bufs[direct..];
            let table: Vec<Desc> = rest
                .iter()
                .enumerate()
                .map(|(i, &(g, l))| {
                    let last = i + 1 == rest.len();
                    d(g, l, if last { 0 } else { NEXT }, i as u16 + 1)
                })
                .collect();
            let (tg, tl) = m.table(&table);
            m.set_desc(direct as u16, d(tg, tl, IND, 0));
        } else {
            // Scatter the chain over non-consecutive ids.
            let ids: Vec<u16> = (0..bufs.len() as u16).map(|i| (i * 5 + 3) % 16).collect();
            for (i, &(g, l)) in bufs.iter().enumerate() {
                let last = i + 1 == bufs.len();
                let next = if last { 0 } else { ids[i + 1] };
                m.set_desc(ids[i], d(g, l, if last { 0 } else { NEXT }, next));
            }
            m.set_desc(0, m_desc_copy(&m, ids[0]));
        }
        m.push_avail(0);
        let mut b = Batch::new();
        assert_eq!(q.dequeue_burst(&mut b, &mut sc), 1, "shape {k}");
        assert_eq!(b[0].data(), &f[..], "shape {k}");
        assert_eq!(q.errors().total(), 0, "shape {k}");
        assert_eq!(m.used_idx(), 1);
        assert_eq!(
            (m.used(0).id, m.used(0).len),
            (0, 0),
            "returned, nothing written"
        );
        sc.free_batch(&mut b);
    }
}

/// Copies descriptor `i` so the chain can start at id 0.
fn m_desc_copy(m: &Mock, i: u16) -> Desc {
    // SAFETY: inside the mock's descriptor table.
    unsafe { (m.host.desc as *const Desc).add(i as usize).read() }
}

#[test]
fn rx_writes_header_and_frame_across_chains_of_every_shape() {
    let f = frame(1000, 3);
    let sw = common::pool("switch", 2048, 256);
    let mut sc = sw.cache();
    // Writable buffer sizes of one chain; indirect?
    let shapes: &[(&[u32], bool)] = &[
        (&[1012], false), // exactly header + frame: the one-buffer path
        (&[2048], false),
        (&[1011, 1], false), // one byte short of it: the general walk
        (&[12, 1000], false),
        (&[5, 7, 1000], false),
        (&[3, 300, 300, 300, 400], false),
        (&[12, 1000], true),
        (&[1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2000], true),
    ];
    for (k, &(lens, indirect)) in shapes.iter().enumerate() {
        let mut m = Mock::new(16, 64 << 10);
        let mut q = m.device(V1);
        let bufs: Vec<(u64, *mut u8, u32)> = lens
            .iter()
            .map(|&l| {
                let (g, p) = m.buf(l as usize);
                (g, p, l)
            })
            .collect();
        let descs: Vec<Desc> = bufs
            .iter()
            .enumerate()
            .map(|(i, &(g, _, l))| {
                let last = i + 1 == bufs.len();
                d(g, l, WRITE | if last { 0 } else { NEXT }, i as u16 + 1)
            })
            .collect();
        if indirect {
            let (tg, tl) = m.table(&descs);
            m.set_desc(0, d(tg, tl, IND, 0));
        } else {
            for (i, x) in descs.iter().enumerate() {
                m.set_desc(i as u16, *x);
            }
        }
        m.push_avail(0);
        let mut b = Batch::new();
        let mut p = sc.alloc().unwrap();
        p.set_len(f.len()).unwrap();
        p.data_mut().copy_from_slice(&f);
        b.push(p);
        assert_eq!(q.enqueue_burst(&mut b, &mut sc), 1, "shape {k}");
        assert!(b.is_empty());
        let u = m.used(0);
        assert_eq!((u.id, u.len), (0, 1012), "shape {k}");
        let mut got = Vec::new();
        for &(_, p, l) in &bufs {
            got.extend(m.read(p, l as usize));
        }
        let mut want = vec![0u8; 12];
        want[10] = 1; // num_buffers = 1 even without MRG_RXBUF (virtio 1.x)
        want.extend_from_slice(&f);
        assert_eq!(&got[..1012], &want[..], "shape {k}");
        assert_eq!(q.errors().total(), 0);
    }
}

#[test]
fn mergeable_rx_spreads_a_packet_over_buffers_and_counts_them() {
    for hdr_split in [false, true] {
        let mut m = Mock::new(16, 64 << 10);
        let mut q = m.device(V1 | MRG);
        // Three single-descriptor buffers of 1000 bytes (the first one a
        // chain of 6 + 994 when the header is split: num_buffers straddles).
        let mut bufs = Vec::new();
        for i in 0..3u16 {
            if i == 0 && hdr_split {
                let (g1, p1) = m.buf(11);
                let (g2, p2) = m.buf(989);
                m.set_desc(0, d(g1, 11, WRITE | NEXT, 9));
                m.set_desc(9, d(g2, 989, WRITE, 0));
                bufs.push(vec![(p1, 11usize), (p2, 989)]);
            } else {
                let (g, p) = m.buf(1000);
                m.set_desc(i, d(g, 1000, WRITE, 0));
                bufs.push(vec![(p, 1000)]);
            }
            m.push_avail(i);
        }
        let sw = common::pool("switch", 4096, 64);
        let mut sc = sw.cache();
        let f = frame(2500, 11);
        let mut b = Batch::new();
        let mut p = sc.alloc().unwrap();
        p.set_len(f.len()).unwrap();
        p.data_mut().copy_from_slice(&f);
        b.push(p);
        assert_eq!(q.enqueue_burst(&mut b, &mut sc), 1);
        assert_eq!(m.used_idx(), 3);
        let lens: Vec<(u32, u32)> = (0..3).map(|i| (m.used(i).id, m.used(i).len)).collect();
        assert_eq!(lens, [(0, 1000), (1, 1000), (2, 512)]);
        let mut got = Vec::new();
        for parts in &bufs {
            for &(p, l) in parts {
                got.extend(m.read(p, l));
            }
        }
        assert_eq!(u16::from_le_bytes([got[10], got[11]]), 3, "num_buffers");
        assert_eq!(&got[12..2512], &f[..]);
        assert_eq!(q.errors().total(), 0);
    }
}

#[test]
fn legacy_header_without_version_1_is_ten_bytes() {
    let mut m = Mock::new(4, 16 << 10);
    let mut q = m.device(0);
    let f = frame(200, 5);
    let mut wire = vec![0xeeu8; 10];
    wire.extend_from_slice(&f);
    let g = m.buf_with(&wire);
    m.set_desc(0, d(g, wire.len() as u32, 0, 0));
    m.push_avail(0);
    let sw = common::pool("switch", 2048, 64);
    let mut sc = sw.cache();
    let mut b = Batch::new();
    assert_eq!(q.dequeue_burst(&mut b, &mut sc), 1);
    assert_eq!(b[0].data(), &f[..]);
    sc.free_batch(&mut b);
}

#[test]
fn setup_rejects_unmapped_and_misaligned_rings_split_and_packed() {
    use nfv_virtio::{QueueSetup, SetupError};
    let m = Mock::new(8, 4096);
    let base = QueueSetup {
        mem: m.mem.clone(),
        size: 8,
        desc_uva: common::UVA + 64,
        avail_uva: common::UVA + 1024,
        used_uva: common::UVA + 2048,
        last_avail_idx: 0,
        features: V1,
        call: None,
    };
    let try_ = |f: &dyn Fn(&mut QueueSetup)| {
        let mut s = QueueSetup {
            mem: base.mem.clone(),
            call: None,
            ..base
        };
        f(&mut s);
        nfv_virtio::DeviceQueue::new(s).map(|_| ()).unwrap_err()
    };
    assert!(matches!(try_(&|s| s.size = 6), SetupError::Layout(_)));
    assert!(matches!(try_(&|s| s.size = 0), SetupError::Layout(_)));
    assert!(matches!(
        try_(&|s| s.desc_uva += 8),
        SetupError::Misaligned { .. }
    ));
    assert!(matches!(
        try_(&|s| s.used_uva += 2),
        SetupError::Misaligned { .. }
    ));
    assert!(matches!(
        try_(&|s| s.avail_uva = 0),
        SetupError::NotMapped { .. }
    ));
    assert!(matches!(
        try_(&|s| s.used_uva = common::UVA + m.area.len() as u64 - 32),
        SetupError::NotMapped { .. }
    ));
    // Packed: any size up to 32768, the event areas 4-aligned and
    // mapped, the position inside the ring.
    let packed = |f: &dyn Fn(&mut QueueSetup)| {
        try_(&|s| {
            s.features |= nfv_virtio::layout::VIRTIO_F_RING_PACKED;
            f(s)
        })
    };
    assert!(matches!(packed(&|s| s.size = 0), SetupError::Layout(_)));
    assert!(matches!(
        packed(&|s| s.avail_uva += 2),
        SetupError::Misaligned { .. }
    ));
    assert!(matches!(
        packed(&|s| s.used_uva = 0),
        SetupError::NotMapped { .. }
    ));
    assert!(matches!(
        packed(&|s| s.last_avail_idx = 8),
        SetupError::PackedBase { idx: 8, size: 8 }
    ));
    let mut six = QueueSetup {
        mem: base.mem.clone(),
        call: None,
        size: 6,
        features: V1 | nfv_virtio::layout::VIRTIO_F_RING_PACKED,
        last_avail_idx: 0x8005,
        ..base
    };
    let q = nfv_virtio::DeviceQueue::new(six).expect("a packed ring of 6");
    assert!(q.is_packed());
    assert_eq!(q.last_avail_idx(), 0x8005, "slot 5, wrap counter 1");
    six = QueueSetup {
        mem: base.mem.clone(),
        call: None,
        ..base
    };
    assert!(!nfv_virtio::DeviceQueue::new(six).unwrap().is_packed());
    assert!(nfv_virtio::DeviceQueue::new(base).is_ok());
}

/// The one-buffer fast path (header and frame in one descriptor) at its
/// edges, against the same frames split into two buffers (the general
/// walk): an empty frame, the largest frame that fits, one byte more.
#[test]
fn one_buffer_frames_match_the_general_walk_at_the_edges() {
    let sw = common::pool("switch", 2048, 256);
    let mut sc = sw.cache();
    let room = 2048 - nfv_mem::HEADROOM;
    // (frame length, delivered?)
    for (len, delivered) in [(0usize, true), (1, true), (room, true), (room + 1, false)] {
        for cuts in [&[][..], &[12][..]] {
            let f = frame(len.max(1), 3);
            let mut wire = vec![0u8; 12];
            wire.extend_from_slice(&f[..len]);
            let mut m = Mock::new(16, 64 << 10);
            let mut q = m.device(V1);
            let bufs = pieces(&mut m, &wire, cuts);
            for (i, &(g, l)) in bufs.iter().enumerate() {
                let last = i + 1 == bufs.len();
                m.set_desc(i as u16, d(g, l, if last { 0 } else { NEXT }, i as u16 + 1));
            }
            m.push_avail(0);
            let mut b = Batch::new();
            let what = format!("{len} B in {} buffer(s)", bufs.len());
            let got = q.dequeue_burst(&mut b, &mut sc);
            assert_eq!(got, usize::from(delivered), "{what}");
            if delivered {
                assert_eq!(b[0].data(), &f[..len], "{what}");
            } else {
                assert_eq!(q.stats().oversize, 1, "{what}");
            }
            assert_eq!(q.errors().total(), 0, "{what}");
            assert_eq!((m.used_idx(), m.used(0).len), (1, 0), "{what}: returned");
            sc.free_batch(&mut b);
        }
    }
}
