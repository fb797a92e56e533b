use nfv_mem::{BATCH, Batch, HEADROOM, HugepageMode, MemoryConfig, PacketPool};

fn pool(frames: usize) -> std::sync::Arc<PacketPool> {
    PacketPool::new(
        "test",
        &MemoryConfig {
            frame_size: 2048,
            frames,
            hugepages: HugepageMode::Never,
        },
    )
    .unwrap()
}

#[test]
fn every_frame_can_be_allocated_once_then_the_pool_is_empty() {
    let p = pool(256);
    let mut c = p.cache();
    let mut all = Vec::new();
    while let Some(pkt) = c.alloc() {
        all.push(pkt);
    }
    assert_eq!(all.len(), 256);
    assert_eq!(c.alloc_failures(), 1);
    let mut tokens: Vec<u32> = all.iter().map(|p| p.token()).collect();
    tokens.sort();
    tokens.dedup();
    assert_eq!(tokens.len(), 256, "each frame handed out once");
    for pkt in all {
        c.free(pkt);
    }
    drop(c);
    assert_eq!(p.shared_free(), 256);
}

#[test]
fn dropped_packets_return_to_the_pool_through_the_owner_registry() {
    let p = pool(64);
    let mut c = p.cache();
    let pkt = c.alloc().unwrap();
    drop(c);
    assert_eq!(p.shared_free(), 63);
    drop(pkt);
    assert_eq!(p.shared_free(), 64);
}

#[test]
fn batches_alloc_and_free_in_bulk() {
    let p = pool(128);
    let mut c = p.cache();
    let mut b = Batch::new();
    assert_eq!(c.alloc_into(&mut b, 100), BATCH);
    assert!(b.iter().all(|p| p.is_empty() && p.headroom() == HEADROOM));
    c.free_batch(&mut b);
    assert!(b.is_empty());
    drop(c);
    assert_eq!(p.shared_free(), 128);
}

#[test]
fn headroom_prepend_and_trim_keep_bounds() {
    let p = pool(64);
    let mut c = p.cache();
    let mut pkt = c.alloc().unwrap();
    assert_eq!(pkt.max_len(), 2048 - HEADROOM);
    assert!(pkt.set_len(2048 - HEADROOM + 1).is_err());
    pkt.set_len(60).unwrap();
    pkt.data_mut().fill(0xab);
    pkt.prepend(4).unwrap().copy_from_slice(&[1, 2, 3, 4]);
    assert_eq!(pkt.len(), 64);
    assert_eq!(&pkt.data()[..5], &[1, 2, 3, 4, 0xab]);
    assert!(pkt.prepend(HEADROOM).is_none(), "only HEADROOM-4 left");
    assert!(pkt.trim_front(4));
    assert_eq!(pkt.data()[0], 0xab);
    assert!(!pkt.trim_front(61));
    let copy = c.copy(&pkt).unwrap();
    assert_eq!(copy.data(), pkt.data());
    assert_ne!(copy.token(), pkt.token());
    c.free(copy);
    c.free(pkt);
}

#[test]
fn threads_exchange_packets_without_losing_frames() {
    let p = pool(4096);
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<nfv_mem::Packet>>(16);
    let p2 = p.clone();
    let producer = std::thread::spawn(move || {
        let mut c = p2.cache();
        for round in 0..2000u32 {
            let mut v = Vec::new();
            for _ in 0..32 {
                if let Some(mut pkt) = c.alloc() {
                    pkt.set_len(4).unwrap();
                    pkt.data_mut().copy_from_slice(&round.to_le_bytes());
                    v.push(pkt);
                }
            }
            tx.send(v).unwrap();
        }
    });
    let mut c = p.cache();
    let mut seen = 0;
    while let Ok(v) = rx.recv() {
        for pkt in v {
            seen += 1;
            c.free(pkt);
        }
    }
    producer.join().unwrap();
    drop(c);
    assert_eq!(seen, 64_000);
    assert_eq!(p.shared_free(), 4096);
}

#[test]
fn bad_geometry_is_refused() {
    for (fs, n) in [(3000, 1024), (1024, 1024), (2048, 10), (131072, 1024)] {
        let r = PacketPool::new(
            "bad",
            &MemoryConfig {
                frame_size: fs,
                frames: n,
                hugepages: HugepageMode::Never,
            },
        );
        assert!(r.is_err(), "{fs} x {n} accepted");
    }
}

/// A virtio-net header prefix with NEEDS_CSUM, TCPv4 GSO and the given
/// `csum_start`.
fn offload_hdr(csum_start: u16) -> [u8; nfv_mem::OFFLOAD_HDR_LEN] {
    let mut h = [0u8; nfv_mem::OFFLOAD_HDR_LEN];
    h[0] = 1; // NEEDS_CSUM
    h[1] = 1; // GSO_TCPV4
    h[4..6].copy_from_slice(&1448u16.to_le_bytes());
    h[6..8].copy_from_slice(&csum_start.to_le_bytes());
    h[8..10].copy_from_slice(&16u16.to_le_bytes());
    h
}

#[test]
fn offload_metadata_follows_the_data_through_pushes_copies_and_frees() {
    let p = pool(64);
    let mut c = p.cache();
    let mut pkt = c.alloc().unwrap();
    pkt.set_len(100).unwrap();
    pkt.data_mut().fill(0xab);
    assert_eq!(pkt.offload(), None);
    assert!(pkt.set_offload(offload_hdr(34)));
    assert!(pkt.has_offload());
    assert_eq!(pkt.owner(), p.owner(), "owner id unchanged");
    assert_eq!(pkt.offload(), Some(offload_hdr(34)));
    // A pushed header (a VLAN tag) moves the checksum start with the data.
    assert!(pkt.prepend(4).is_some());
    assert_eq!(pkt.offload(), Some(offload_hdr(38)));
    assert!(pkt.trim_front(4));
    assert_eq!(pkt.offload(), Some(offload_hdr(34)));
    // Pushes never reach the metadata at the buffer's start.
    let room = pkt.headroom() - nfv_mem::OFFLOAD_META_LEN;
    assert!(pkt.prepend(room + 1).is_none());
    assert!(pkt.prepend(room).is_some());
    assert!(pkt.trim_front(room));
    assert_eq!(pkt.offload(), Some(offload_hdr(34)));
    // A copy (flooding) carries it; the data bytes are untouched by it.
    let copy = c.copy(&pkt).unwrap();
    assert_eq!(copy.offload(), Some(offload_hdr(34)));
    assert!(copy.data().iter().all(|&b| b == 0xab));
    pkt.clear_offload();
    assert_eq!(pkt.offload(), None);
    // Flagged packets still go back to their pool, through the cache.
    c.free(copy);
    c.free(pkt);
    drop(c);
    assert_eq!(p.shared_free(), 64);
}

#[test]
fn a_batch_shape_says_what_reading_each_packet_says() {
    // (name, frame lengths, packet with offload metadata, packet split
    // with a tail of this many bytes)
    type Case = (
        &'static str,
        &'static [usize],
        Option<usize>,
        Option<(usize, u32)>,
    );
    let cases: &[Case] = &[
        ("empty", &[], None, None),
        ("plain", &[60, 1514, 64], None, None),
        ("a runt", &[64, 10, 64], None, None),
        ("offload metadata", &[64, 64, 64], Some(2), None),
        ("a split packet", &[128, 64], None, Some((0, 1000))),
        ("both", &[128, 64, 70], Some(1), Some((0, 300))),
    ];
    static TAIL: [u8; 1024] = [0; 1024];
    let p = pool(64);
    let mut c = p.cache();
    for &(name, lens, offloaded, split) in cases {
        let mut batch = Batch::new();
        for (i, &len) in lens.iter().enumerate() {
            let mut pkt = c.alloc().unwrap();
            pkt.set_len(len).unwrap();
            if offloaded == Some(i) {
                let mut hdr = [0u8; nfv_mem::OFFLOAD_HDR_LEN];
                hdr[0] = 1;
                assert!(pkt.set_offload(hdr), "{name}");
            }
            if let Some((at, tail)) = split
                && at == i
            {
                // SAFETY: a static buffer, readable for as long as the
                // packet lives; head (>= SPLIT_HEAD) + tail fit the frame.
                unsafe { pkt.set_tail(TAIL.as_ptr(), tail) };
            }
            batch.push(pkt);
        }
        let mut shape = nfv_mem::BatchShape::default();
        batch.iter().for_each(|p| shape.add(p));
        let frames = batch.iter().map(|p| p.frame_len());
        assert_eq!(
            shape.bytes(),
            frames.clone().sum::<usize>() as u64,
            "{name}"
        );
        assert_eq!(shape.longest(), frames.max().unwrap_or(0), "{name}");
        assert_eq!(
            shape.shortest_head(),
            batch.iter().map(|p| p.len()).min().unwrap_or(usize::MAX),
            "{name}"
        );
        assert_eq!(
            shape.offload(),
            batch.iter().any(|p| p.has_offload()),
            "{name}"
        );
        assert_eq!(
            shape.split(),
            batch.iter().any(|p| p.is_split() || p.is_borrowed()),
            "{name}"
        );
        assert_eq!(
            shape.offload(),
            offloaded.is_some(),
            "{name}: the case has what it says"
        );
        assert_eq!(
            shape.split(),
            split.is_some(),
            "{name}: the case has what it says"
        );
        c.free_batch(&mut batch);
    }
}
