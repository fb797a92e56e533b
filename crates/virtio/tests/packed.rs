//! Packed virtqueues (`VIRTIO_F_RING_PACKED`): the device and driver sides
//! round-trip frames byte-exact under every feature combination, on ring
//! sizes that are not powers of two and across many wraps; a hand-written
//! driver checks the device against hostile descriptors (the split ring's
//! hostile table, ported), event suppression and restarts.

mod common;

use common::{Loopback, LoopbackCfg, Mock, frame};
use nfv_mem::Batch;
use nfv_virtio::layout::{
    VIRTIO_F_IN_ORDER as IN_ORDER, VIRTIO_F_RING_PACKED as PACKED, VIRTIO_F_VERSION_1 as V1,
    VIRTIO_NET_F_MRG_RXBUF as MRG, VIRTIO_RING_F_EVENT_IDX as EVIDX,
};
use nfv_virtio::packed::{
    DESC_F_AVAIL, DESC_F_INDIRECT, DESC_F_NEXT, DESC_F_WRITE, EVENT_F_DESC, EVENT_F_DISABLE,
    EVENT_F_ENABLE, PackedDesc, avail_flags, encode_base, is_used, layout_packed,
    packed_area_bytes, used_flags,
};
use nfv_virtio::{DeviceQueue, QueueErrors};
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU16, Ordering};

const SIZES: &[usize] = &[60, 64, 65, 128, 1500, 1514, 1518, 2048, 4000, 9000];

fn frames(seed: u32) -> Vec<Vec<u8>> {
    SIZES
        .iter()
        .enumerate()
        .map(|(i, &l)| frame(l, seed + i as u32))
        .collect()
}

fn loopback(size: u16, features: u64, rx_buf_len: u32) -> Loopback {
    Loopback::new(LoopbackCfg {
        size,
        features: features | PACKED | V1,
        frame_size: 16384,
        frames: 1024,
        rx_buf_len,
        ..Default::default()
    })
}

#[test]
fn frames_round_trip_on_packed_rings_for_every_feature_set_and_odd_ring_size() {
    for features in [
        0,
        MRG,
        IN_ORDER,
        MRG | IN_ORDER,
        EVIDX,
        MRG | EVIDX | IN_ORDER,
    ] {
        // 13: fewer slots than a burst and not a power of two, so every
        // round wraps; 1000: the size DPDK's fix for modulo arithmetic used.
        for size in [13u16, 256, 1000] {
            let bufs: &[u32] = if features & MRG != 0 && size >= 256 {
                &[0, 1536, 200]
            } else {
                &[0]
            };
            for &rx_buf_len in bufs {
                let mut l = loopback(size, features, rx_buf_len);
                let rounds = 8;
                for round in 0..rounds {
                    let sent = frames(round * 100);
                    let got = l.vnf_to_switch(&sent);
                    assert!(got == sent, "vnf→switch {features:#x} size {size}");
                    let back = l.switch_to_vnf(&got);
                    assert!(back == sent, "switch→vnf {features:#x} size {size}");
                }
                for (what, e) in [
                    ("tx_dev", l.tx_dev.errors().total()),
                    ("rx_dev", l.rx_dev.errors().total()),
                    ("tx_drv", l.tx_drv.errors().total()),
                    ("rx_drv", l.rx_drv.errors().total()),
                ] {
                    assert_eq!(e, 0, "{what} errors, {features:#x} size {size}");
                }
                let n = rounds as u64 * SIZES.len() as u64;
                assert_eq!(l.tx_dev.stats().packets, n);
                assert_eq!(l.rx_drv.stats().rx_packets, n);
                if size == 13 {
                    // 80 chains through 13 slots: the ring wrapped 6 times.
                    assert!(n > 3 * size as u64);
                }
                assert!(l.tx_dev.is_packed() && l.rx_drv.is_packed());
            }
        }
    }
}

#[test]
fn a_device_rebuilt_from_its_base_continues_where_it_stopped() {
    let mut l = loopback(13, MRG, 0);
    for round in 0..5 {
        let sent = frames(round);
        assert!(l.vnf_to_switch(&sent) == sent, "vnf→switch, round {round}");
        assert!(l.switch_to_vnf(&sent) == sent, "switch→vnf, round {round}");
        // What GET_VRING_BASE reports: slot and wrap counter. A new queue
        // built from it (SET_VRING_BASE after a reconnect) picks up there.
        for (dev, i) in [(&mut l.tx_dev, 1), (&mut l.rx_dev, 0)] {
            let base = dev.last_avail_idx();
            let mut fresh = rebuild(dev, &l.mem, base, &l.rings, i);
            std::mem::swap(dev, &mut fresh);
        }
    }
    assert_eq!(l.tx_dev.errors().total() + l.rx_drv.errors().total(), 0);
}

/// A device queue on the same ring as `old` at position `base`.
fn rebuild(
    old: &DeviceQueue,
    mem: &std::sync::Arc<nfv_virtio::GuestMemory>,
    base: u16,
    rings: &common::Guarded,
    i: usize,
) -> DeviceQueue {
    // Queue 0 (VNF RX) is the loopback's first ring area, queue 1 the second.
    let per = packed_area_bytes(old.size());
    let a = layout_packed(rings.ptr() as u64 + (i * per) as u64, per, old.size()).unwrap();
    DeviceQueue::new(nfv_virtio::QueueSetup {
        mem: mem.clone(),
        size: old.size(),
        desc_uva: a.desc,
        avail_uva: a.avail,
        used_uva: a.used,
        last_avail_idx: base,
        features: old.features(),
        call: None,
    })
    .unwrap()
}

#[test]
fn a_device_restarted_in_the_wrong_lap_takes_nothing_and_counts_nothing() {
    // A backend that crashed loses the wrap counter; restarting at slot 0
    // in lap 1 while the driver is in lap 0 must not take stale or used
    // descriptors as new ones: the queue stays idle (the frontend has to
    // reset the device), with no error and no garbage frame.
    let mut l = loopback(13, 0, 0);
    for round in 0..2 {
        let sent = frames(round);
        assert!(l.vnf_to_switch(&sent) == sent);
    }
    // 20 chains through 13 slots: the driver is in lap 0 now.
    assert_eq!(l.tx_dev.last_avail_idx(), encode_base(7, false));
    let mut stale = rebuild(&l.tx_dev, &l.mem, encode_base(0, true), &l.rings, 1);
    let mut b = Batch::new();
    let mut p = l.drv.alloc().unwrap();
    p.set_len(100).unwrap();
    b.push(p);
    assert_eq!(l.tx_drv.transmit_burst(&mut b, &mut l.drv), 1);
    let mut got = Batch::new();
    assert_eq!(stale.dequeue_burst(&mut got, &mut l.sw), 0);
    assert_eq!(stale.errors().total(), 0);
    // The queue that kept its base still works.
    assert_eq!(l.tx_dev.dequeue_burst(&mut got, &mut l.sw), 1);
    l.sw.free_batch(&mut got);
}

#[test]
fn one_copy_on_packed_rings_returns_the_chains_when_the_burst_completes() {
    let mut l = loopback(256, MRG, 0);
    l.tx_dev.set_one_copy(true);
    // Lending and keeping are split-ring only: refused, never half-done.
    assert_eq!(l.rx_dev.lendable(), Err(nfv_virtio::NotLendable::Packed));
    assert!(!l.tx_dev.set_keep(true));
    let sent: Vec<_> = (0..10u32)
        .map(|i| frame(if i % 2 == 0 { 1500 } else { 100 }, i))
        .collect();
    let mut b = Batch::new();
    for f in &sent {
        let mut p = l.drv.alloc().unwrap();
        p.set_len(f.len()).unwrap();
        p.data_mut().copy_from_slice(f);
        b.push(p);
    }
    assert_eq!(l.tx_drv.transmit_burst(&mut b, &mut l.drv), 10);
    let mut got = Batch::new();
    assert_eq!(l.tx_dev.dequeue_burst(&mut got, &mut l.sw), 10);
    // The five long frames are split: their tails are read from the
    // driver's buffers, so no chain of the burst goes back yet.
    assert_eq!(l.tx_dev.stats().one_copy, 5);
    assert!(l.tx_dev.holds_chains());
    assert_eq!(l.tx_drv.reclaim_tx(&mut l.drv), 0);
    for (p, f) in got.iter_mut().zip(&sent) {
        assert_eq!(p.is_split(), f.len() == 1500);
        assert!(p.join_tail());
        assert!(p.data() == &f[..], "frame of {} B", f.len());
    }
    l.sw.free_batch(&mut got);
    l.tx_dev.complete_held();
    assert!(!l.tx_dev.holds_chains());
    assert_eq!(
        l.tx_drv.reclaim_tx(&mut l.drv),
        10,
        "all returned, in order"
    );
    assert_eq!(l.tx_drv.errors().total() + l.tx_dev.errors().total(), 0);
}

// ---- a hand-written packed driver ------------------------------------------

/// Writes packed descriptor `slot` (flags last, with release).
fn put(m: &Mock, slot: u16, addr: u64, len: u32, id: u16, flags: u16) {
    let p = (m.host.desc as *mut PackedDesc).wrapping_add(slot as usize);
    // SAFETY: `slot < size`, inside the mock's descriptor area; the flags
    // are stored last with release, as a driver must.
    unsafe {
        std::ptr::addr_of_mut!((*p).addr).write_volatile(addr);
        std::ptr::addr_of_mut!((*p).len).write_volatile(len);
        std::ptr::addr_of_mut!((*p).id).write_volatile(id);
        AtomicU16::from_ptr(std::ptr::addr_of_mut!((*p).flags)).store(flags, Ordering::Release);
    }
}

fn get(m: &Mock, slot: u16) -> PackedDesc {
    // SAFETY: inside the mock's descriptor area.
    unsafe {
        (m.host.desc as *const PackedDesc)
            .add(slot as usize)
            .read_volatile()
    }
}

/// The flags of a descriptor available in lap 1 (the first).
const A: u16 = DESC_F_AVAIL;

fn tx_frame(m: &mut Mock, len: usize, seed: u32) -> (u64, Vec<u8>) {
    let f = frame(len, seed);
    let mut b = vec![0u8; 12];
    b.extend_from_slice(&f);
    (m.buf_with(&b), f)
}

/// A descriptor as a test writes it: addr, len, id, flags (without AVAIL).
type RawDesc = (u64, u32, u16, u16);

/// One row of the hostile table (TX: the device dequeues).
struct Case {
    name: &'static str,
    /// Descriptors from slot 0.
    build: fn(&mut Mock) -> Vec<RawDesc>,
    frames: usize,
    error: fn(&QueueErrors) -> u64,
    /// Slot the device stops at, and whether it quarantined the queue.
    next: u16,
    quarantined: bool,
}

fn none(_: &QueueErrors) -> u64 {
    0
}

fn hostile_cases() -> Vec<Case> {
    vec![
        Case {
            name: "one good buffer",
            build: |m| vec![(tx_frame(m, 64, 1).0, 76, 5, 0)],
            frames: 1,
            error: none,
            next: 1,
            quarantined: false,
        },
        Case {
            name: "header and frame in two buffers, id in the last",
            build: |m| {
                let h = m.buf_with(&[0; 12]);
                let f = m.buf_with(&frame(100, 2));
                vec![(h, 12, 0, DESC_F_NEXT), (f, 100, 9, 0)]
            },
            frames: 1,
            error: none,
            next: 2,
            quarantined: false,
        },
        Case {
            name: "address outside guest memory",
            build: |m| vec![(m.gpa_end(), 64, 1, 0)],
            frames: 0,
            error: |e| e.desc_out_of_memory,
            next: 1,
            quarantined: false,
        },
        Case {
            name: "bad address mid-chain: the rest is skipped",
            build: |m| {
                let h = m.buf_with(&[0; 12]);
                vec![
                    (h, 12, 0, DESC_F_NEXT),
                    (0, 64, 0, DESC_F_NEXT),
                    (h, 4, 3, 0),
                ]
            },
            frames: 0,
            error: |e| e.desc_out_of_memory,
            next: 3,
            quarantined: false,
        },
        Case {
            name: "device-writable buffer in a TX chain",
            build: |m| vec![(tx_frame(m, 64, 3).0, 76, 1, DESC_F_WRITE)],
            frames: 0,
            error: |e| e.wrong_direction,
            next: 1,
            quarantined: false,
        },
        Case {
            name: "shorter than the virtio-net header",
            build: |m| vec![(m.buf_with(&[0; 8]), 8, 1, 0)],
            frames: 0,
            error: |e| e.short_chain,
            next: 1,
            quarantined: false,
        },
        Case {
            name: "indirect table of length 0",
            build: |m| vec![(m.buf_with(&[0; 16]), 0, 1, DESC_F_INDIRECT)],
            frames: 0,
            error: |e| e.indirect_bad_len,
            next: 1,
            quarantined: false,
        },
        Case {
            name: "indirect table length not a multiple of 16",
            build: |m| vec![(m.buf_with(&[0; 32]), 17, 1, DESC_F_INDIRECT)],
            frames: 0,
            error: |e| e.indirect_bad_len,
            next: 1,
            quarantined: false,
        },
        Case {
            name: "indirect table outside guest memory",
            build: |m| vec![(m.gpa_end() - 8, 32, 1, DESC_F_INDIRECT)],
            frames: 0,
            error: |e| e.indirect_out_of_memory,
            next: 1,
            quarantined: false,
        },
        Case {
            name: "good indirect table (only WRITE counts in its entries)",
            build: |m| {
                let (f, _) = tx_frame(m, 200, 4);
                let t = table(m, &[(f, 12, 0xffff, DESC_F_NEXT), (f + 12, 200, 7, 0)]);
                vec![(t, 32, 2, DESC_F_INDIRECT)]
            },
            frames: 1,
            error: none,
            next: 1,
            quarantined: false,
        },
        Case {
            name: "300 descriptors: over the per-chain cap, returned whole",
            build: |m| {
                let b = m.buf_with(&[0; 12]);
                (0..300)
                    .map(|i| (b, 0, i, if i < 299 { DESC_F_NEXT } else { 0 }))
                    .collect()
            },
            frames: 0,
            error: |e| e.chain_too_long,
            next: 300,
            quarantined: false,
        },
        Case {
            name: "NEXT on every slot of the ring: no end, quarantined",
            build: |m| {
                let b = m.buf_with(&[0; 12]);
                (0..512).map(|i| (b, 1, i, DESC_F_NEXT)).collect()
            },
            frames: 0,
            error: |e| e.chain_too_long,
            next: 0,
            quarantined: true,
        },
        Case {
            name: "lengths summing past 4 GiB",
            build: |_| {
                vec![
                    (common::HOLE_GPA, 0x8000_0000, 0, DESC_F_NEXT),
                    (common::HOLE_GPA, 0x8000_0000, 1, 0),
                ]
            },
            frames: 0,
            error: |e| e.len_overflow,
            next: 2,
            quarantined: false,
        },
    ]
}

/// An indirect table of packed descriptors: its gpa.
fn table(m: &mut Mock, descs: &[RawDesc]) -> u64 {
    let (g, p) = m.buf(16 * descs.len());
    for (i, &(addr, len, id, flags)) in descs.iter().enumerate() {
        // SAFETY: inside the buffer just reserved, 16-aligned.
        unsafe {
            p.cast::<PackedDesc>().add(i).write(PackedDesc {
                addr,
                len,
                id,
                flags,
            })
        };
    }
    g
}

#[test]
fn hostile_tx_descriptors_are_counted_skipped_and_never_read_out_of_bounds() {
    let sw = common::pool("switch", 16384, 256);
    let mut sc = sw.cache();
    for c in hostile_cases() {
        let mut m = Mock::with_hole(512, 1 << 16, 1 << 33);
        let descs = (c.build)(&mut m);
        // The head goes last, as a driver publishes a chain.
        for (i, &(addr, len, id, flags)) in descs.iter().enumerate().skip(1) {
            put(&m, i as u16, addr, len, id, flags | A);
        }
        let (addr, len, id, flags) = descs[0];
        put(&m, 0, addr, len, id, flags | A);
        let mut q = m.device_at(V1 | PACKED, encode_base(0, true));
        let mut b = Batch::new();
        let mut got = 0;
        for _ in 0..200 {
            got += q.dequeue_burst(&mut b, &mut sc);
            sc.free_batch(&mut b);
        }
        assert_eq!(got, c.frames, "{}: frames", c.name);
        assert_eq!((c.error)(q.errors()), 1 - c.frames as u64, "{}", c.name);
        assert_eq!(q.is_quarantined(), c.quarantined, "{}", c.name);
        if !c.quarantined {
            assert_eq!(
                q.last_avail_idx(),
                encode_base(c.next, true),
                "{}: position",
                c.name
            );
            // The chain went back: a used descriptor in its first slot,
            // with the id of its last descriptor.
            let u = get(&m, 0);
            assert!(
                is_used(u.flags, true),
                "{}: used flags {:#x}",
                c.name,
                u.flags
            );
            assert_eq!(u.id, descs.last().unwrap().2, "{}: used id", c.name);
        }
    }
}

/// With IN_ORDER a TX burst goes back as one used descriptor in the
/// burst's first slot carrying the last chain's id (§2.8.20); the other
/// slots keep what the driver wrote. Without it, one per chain.
#[test]
fn in_order_tx_bursts_go_back_as_one_used_descriptor() {
    let sw = common::pool("switch", 2048, 64);
    let mut sc = sw.cache();
    for (features, one_per_burst) in [(V1 | PACKED | IN_ORDER, true), (V1 | PACKED, false)] {
        let mut m = Mock::new(16, 1 << 16);
        // Five chains: ids 10..15 (a two-descriptor chain in the middle).
        let mut slot = 0u16;
        for k in 0..5u16 {
            let (f, _) = tx_frame(&mut m, 64, k as u32);
            if k == 2 {
                put(&m, slot + 1, f + 12, 64, 10 + k, A);
                put(&m, slot, f, 12, 99, DESC_F_NEXT | A);
                slot += 2;
            } else {
                put(&m, slot, f, 76, 10 + k, A);
                slot += 1;
            }
        }
        let mut q = m.device_at(features, encode_base(0, true));
        let mut b = Batch::new();
        assert_eq!(q.dequeue_burst(&mut b, &mut sc), 5);
        sc.free_batch(&mut b);
        assert_eq!(q.last_avail_idx(), encode_base(6, true));
        let first = get(&m, 0);
        assert!(is_used(first.flags, true));
        if one_per_burst {
            assert_eq!(first.id, 14, "the last chain's id");
            for s in 1..6 {
                assert!(!is_used(get(&m, s).flags, true), "slot {s} untouched");
            }
        } else {
            assert_eq!(first.id, 10);
            let used: Vec<u16> = (0..6)
                .filter(|&s| is_used(get(&m, s).flags, true))
                .map(|s| get(&m, s).id)
                .collect();
            assert_eq!(
                used,
                vec![10, 11, 12, 13, 14],
                "one per chain, in its first slot"
            );
        }
        assert_eq!(q.errors().total(), 0);
    }
}

#[test]
fn a_descriptor_not_marked_available_is_not_taken() {
    let sw = common::pool("switch", 2048, 64);
    let mut sc = sw.cache();
    let mut m = Mock::new(8, 1 << 14);
    let (f, _) = tx_frame(&mut m, 64, 1);
    let mut q = m.device_at(V1 | PACKED, encode_base(0, true));
    let mut b = Batch::new();
    // AVAIL == USED (a used descriptor of lap 1), lap 0's available flags,
    // and all zeros: none is available in lap 1.
    for flags in [used_flags(true), avail_flags(false), 0] {
        put(&m, 0, f, 76, 1, flags);
        assert!(!q.has_avail());
        assert_eq!(q.dequeue_burst(&mut b, &mut sc), 0, "flags {flags:#x}");
    }
    put(&m, 0, f, 76, 1, avail_flags(true));
    assert!(q.has_avail());
    assert_eq!(q.dequeue_burst(&mut b, &mut sc), 1);
    sc.free_batch(&mut b);
    assert_eq!(q.errors().total(), 0);
}

#[test]
fn rx_into_hostile_and_short_buffers() {
    let sw = common::pool("switch", 16384, 256);
    let mut sc = sw.cache();
    let send = |q: &mut DeviceQueue, sc: &mut nfv_mem::PoolCache, len: usize| {
        let mut b = Batch::new();
        let mut p = sc.alloc().unwrap();
        p.set_len(len).unwrap();
        p.data_mut().copy_from_slice(&frame(len, len as u32));
        b.push(p);
        let n = q.enqueue_burst(&mut b, sc);
        let left = b.len();
        sc.free_batch(&mut b);
        (n, left)
    };
    // A read-only buffer offered for receive: dropped, returned empty.
    let mut m = Mock::new(8, 1 << 16);
    let (g, _) = m.buf(2048);
    put(&m, 0, g, 2048, 4, A);
    let mut q = m.device_at(V1 | PACKED, encode_base(0, true));
    assert_eq!(send(&mut q, &mut sc, 100), (0, 0));
    assert_eq!(q.errors().wrong_direction, 1);
    assert_eq!(q.stats().bad_chain_drops, 1);
    let u = get(&m, 0);
    assert!(is_used(u.flags, true) && u.id == 4 && u.len == 0);

    // Without MRG_RXBUF, a buffer too small stays for the next packet.
    let mut m = Mock::new(8, 1 << 16);
    let (g, p) = m.buf(200);
    put(&m, 0, g, 200, 6, A | DESC_F_WRITE);
    let mut q = m.device_at(V1 | PACKED, encode_base(0, true));
    assert_eq!(send(&mut q, &mut sc, 1000), (0, 0));
    assert_eq!(q.stats().no_room, 1);
    assert_eq!(q.last_avail_idx(), encode_base(0, true));
    assert_eq!(send(&mut q, &mut sc, 150), (1, 0));
    let u = get(&m, 0);
    assert!(is_used(u.flags, true) && u.id == 6 && u.len == 162);
    assert_eq!(m.read(p.wrapping_add(12), 150), frame(150, 150));

    // With MRG_RXBUF a packet spreads over three buffers: num_buffers = 3,
    // a used descriptor per buffer with its length.
    let mut m = Mock::new(8, 1 << 16);
    let bufs: Vec<_> = (0..3).map(|_| m.buf(512)).collect();
    for (i, (g, _)) in bufs.iter().enumerate().rev() {
        put(&m, i as u16, *g, 512, 10 + i as u16, A | DESC_F_WRITE);
    }
    let mut q = m.device_at(V1 | PACKED | MRG, encode_base(0, true));
    assert_eq!(send(&mut q, &mut sc, 1200), (1, 0));
    let lens: Vec<_> = (0..3).map(|i| (get(&m, i).id, get(&m, i).len)).collect();
    assert_eq!(lens, [(10, 512), (11, 512), (12, 188)]);
    assert_eq!(m.read(bufs[0].1.wrapping_add(10), 2), [3, 0], "num_buffers");
    let mut rx = m.read(bufs[0].1.wrapping_add(12), 500);
    rx.extend(m.read(bufs[1].1, 512));
    rx.extend(m.read(bufs[2].1, 188));
    assert_eq!(rx, frame(1200, 1200));

    // Not enough buffers for the packet: nothing written, the packet stays.
    let mut m = Mock::new(8, 1 << 16);
    let (g, _) = m.buf(512);
    put(&m, 0, g, 512, 1, A | DESC_F_WRITE);
    let mut q = m.device_at(V1 | PACKED | MRG, encode_base(0, true));
    assert_eq!(send(&mut q, &mut sc, 1200), (0, 1));
    assert_eq!(get(&m, 0).flags, A | DESC_F_WRITE, "still available");
    assert_eq!(q.errors().total(), 0);
}

fn eventfd() -> OwnedFd {
    // SAFETY: plain syscall; the fd is checked and owned.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    assert!(fd >= 0);
    // SAFETY: a fresh fd we own.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

#[test]
fn interrupts_follow_the_driver_event_area_and_kicks_the_device_area() {
    let mut l = Loopback::new(LoopbackCfg {
        size: 64,
        features: V1 | PACKED | EVIDX,
        rx_call: Some(eventfd()),
        ..Default::default()
    });
    let per = packed_area_bytes(64);
    let driver_area = layout_packed(l.rings.ptr() as u64, per, 64).unwrap().avail;
    // SAFETY: the driver event area of queue 0 inside the loopback's rings.
    let (off_wrap, flags) = unsafe {
        (
            AtomicU16::from_ptr(driver_area as *mut u16),
            AtomicU16::from_ptr((driver_area as *mut u16).add(1)),
        )
    };
    let one = |l: &mut Loopback| {
        let before = l.rx_dev.stats().interrupts;
        assert_eq!(l.switch_to_vnf(&[frame(64, 1)]).len(), 1);
        l.rx_dev.stats().interrupts - before
    };
    // The driver starts in poll mode (DISABLE): no interrupts.
    assert_eq!(flags.load(Ordering::Relaxed), EVENT_F_DISABLE);
    assert_eq!(one(&mut l), 0);
    l.rx_drv.enable_interrupts();
    assert_eq!(flags.load(Ordering::Relaxed), EVENT_F_ENABLE);
    assert_eq!(one(&mut l), 1);
    // DESC: an interrupt only when the used position passes slot 5.
    off_wrap.store(encode_base(5, true), Ordering::Relaxed);
    flags.store(EVENT_F_DESC, Ordering::Relaxed);
    let fired: Vec<u64> = (0..6).map(|_| one(&mut l)).collect();
    // Slots 2..=7 were used one per packet: only the one at slot 5 fires.
    assert_eq!(fired, [0, 0, 0, 1, 0, 0]);

    // Kicks: the device asks for them or not in its event area.
    let mut b = Batch::new();
    let mut p = l.drv.alloc().unwrap();
    p.set_len(64).unwrap();
    b.push(p);
    l.tx_dev.set_kick_wanted(false);
    l.tx_drv.transmit_burst(&mut b, &mut l.drv);
    assert!(!l.tx_drv.needs_kick());
    l.tx_dev.set_kick_wanted(true);
    let mut p = l.drv.alloc().unwrap();
    p.set_len(64).unwrap();
    b.push(p);
    l.tx_drv.transmit_burst(&mut b, &mut l.drv);
    assert!(l.tx_drv.needs_kick());
    assert!(!l.tx_drv.needs_kick(), "nothing new posted");
}
