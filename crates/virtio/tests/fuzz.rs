//! Property test: random descriptor tables, avail rings, indirect tables
//! and indexes thrown at the device side (both directions, every feature
//! set). It must never panic, never touch memory outside guest memory (the
//! guest area is fenced by PROT_NONE pages, so an off-by-one faults),
//! write nothing but the used ring when reading a TX queue (on RX it writes
//! wherever writable descriptors point — guest memory, possibly the
//! guest's own rings), only write used entries with valid ids, and account
//! for every chain it takes.

mod common;

use common::{GPA, Mock};
use nfv_mem::Batch;
use nfv_virtio::layout::{
    Desc, VIRTIO_F_VERSION_1 as V1, VIRTIO_NET_F_MRG_RXBUF as MRG, VIRTIO_RING_F_EVENT_IDX as EVIDX,
};
use proptest::prelude::*;

const DATA: usize = 32 << 10;

#[derive(Clone, Debug)]
enum Addr {
    /// Inside the data area at this offset.
    Data(u32),
    /// Around the end of guest memory.
    End(i16),
    /// Around the start of guest memory.
    Start(i16),
    Any(u64),
}

fn addr() -> impl Strategy<Value = Addr> {
    prop_oneof![
        6 => (0u32..DATA as u32).prop_map(Addr::Data),
        1 => any::<i16>().prop_map(Addr::End),
        1 => any::<i16>().prop_map(Addr::Start),
        1 => any::<u64>().prop_map(Addr::Any),
    ]
}

fn len() -> impl Strategy<Value = u32> {
    prop_oneof![
        3 => 0u32..64,
        3 => 0u32..2048,
        1 => 0u32..=DATA as u32,
        1 => Just(u32::MAX),
        1 => any::<u32>(),
    ]
}

fn desc() -> impl Strategy<Value = (Addr, u32, u16, u16)> {
    (
        addr(),
        len(),
        0u16..8,
        prop_oneof![3 => 0u16..40, 1 => any::<u16>()],
    )
}

#[derive(Clone, Debug)]
struct Case {
    size_log2: u32,
    descs: Vec<(Addr, u32, u16, u16)>,
    avail: Vec<u16>,
    /// avail.idx - last_avail; may exceed the size.
    ahead: u16,
    last_avail: u16,
    features: u64,
    /// Random bytes in the data area (doubling as indirect tables).
    noise: Vec<u8>,
    rx_lens: Vec<u16>,
}

fn case() -> impl Strategy<Value = Case> {
    (0u32..=5).prop_flat_map(|lg| {
        let size = 1usize << lg;
        (
            Just(lg),
            proptest::collection::vec(desc(), size),
            proptest::collection::vec(prop_oneof![4 => 0u16..size as u16, 1 => any::<u16>()], size),
            prop_oneof![8 => 0u16..=size as u16, 1 => any::<u16>()],
            any::<u16>(),
            prop_oneof![Just(V1), Just(V1 | MRG), Just(V1 | EVIDX | MRG), Just(0u64)],
            proptest::collection::vec(any::<u8>(), 4096),
            proptest::collection::vec(1u16..3000, 1..8),
        )
            .prop_map(
                |(size_log2, descs, avail, ahead, last_avail, features, noise, rx_lens)| Case {
                    size_log2,
                    descs,
                    avail,
                    ahead,
                    last_avail,
                    features,
                    noise,
                    rx_lens,
                },
            )
    })
}

fn resolve(m: &Mock, a: &Addr) -> u64 {
    let data = GPA + m.ring_bytes() as u64;
    match *a {
        Addr::Data(o) => data + o as u64,
        Addr::End(d) => m.gpa_end().wrapping_add(d as i64 as u64),
        Addr::Start(d) => GPA.wrapping_add(d as i64 as u64),
        Addr::Any(x) => x,
    }
}

fn build(c: &Case) -> Mock {
    let size = 1u16 << c.size_log2;
    let mut m = Mock::new(size, DATA);
    let (_, p) = m.buf(c.noise.len());
    // SAFETY: `buf` reserved these bytes in the area.
    unsafe { std::ptr::copy_nonoverlapping(c.noise.as_ptr(), p, c.noise.len()) };
    for (i, (a, l, f, n)) in c.descs.iter().enumerate() {
        let addr = resolve(&m, a);
        m.set_desc(
            i as u16,
            Desc {
                addr,
                len: *l,
                flags: *f,
                next: *n,
            },
        );
    }
    m.avail_idx = c.last_avail;
    for &h in c.avail.iter() {
        m.push_avail(h);
    }
    m.set_avail_idx(c.last_avail.wrapping_add(c.ahead));
    m
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn device_survives_random_rings(c in case()) {
        let size = 1u16 << c.size_log2;
        let sw = common::pool("fuzz-switch", 4096, 128);
        let mut sc = sw.cache();

        for dir in 0..2 {
            let m = build(&c);
            let mut q = m.device_at(c.features, c.last_avail);
            let driver_owned = m.driver_owned();
            let data_before = m.area.bytes()[m.ring_bytes()..].to_vec();
            let used_before = m.used_idx();
            let mut taken = 0usize;
            let mut delivered = 0usize;
            let mut dropped = 0usize;
            for _ in 0..3 {
                let start = q.last_avail_idx();
                if dir == 0 {
                    let mut b = Batch::new();
                    delivered += q.dequeue_burst(&mut b, &mut sc);
                    for p in b.iter() {
                        prop_assert!(p.len() <= p.max_len());
                    }
                    sc.free_batch(&mut b);
                } else {
                    let mut b = Batch::new();
                    for &l in &c.rx_lens {
                        let mut p = sc.alloc().unwrap();
                        p.set_len(l as usize).unwrap();
                        b.push(p);
                    }
                    let before = b.len();
                    let n = q.enqueue_burst(&mut b, &mut sc);
                    delivered += n;
                    dropped += before - b.len() - n;
                    sc.free_batch(&mut b);
                }
                taken += q.last_avail_idx().wrapping_sub(start) as usize;
            }
            if dir == 0 {
                prop_assert!(m.driver_owned() == driver_owned, "TX wrote the desc table or avail ring");
                prop_assert!(m.area.bytes()[m.ring_bytes()..] == data_before[..], "TX wrote guest buffers");
            }
            let ahead = c.ahead;
            if ahead > size {
                prop_assert!(q.is_quarantined());
                prop_assert_eq!(taken, 0);
                prop_assert_eq!(m.used_idx(), used_before);
                continue;
            }
            prop_assert!(taken <= ahead as usize);
            // On RX a writable descriptor pointing into the rings has the
            // device write frame bytes over them (legal: it is guest
            // memory): the used ring then holds what the frame said.
            let ring_end = GPA + m.ring_bytes() as u64;
            let scribbled = dir == 1
                && c.descs.iter().any(|(a, l, f, _)| {
                    let s = resolve(&m, a);
                    f & 2 != 0 && s < ring_end && s.saturating_add(*l as u64) > GPA
                });
            if scribbled {
                continue;
            }
            let used = m.used_idx().wrapping_sub(used_before) as usize;
            prop_assert!(used <= taken, "used {} > taken {}", used, taken);
            for i in 0..used {
                let e = m.used(used_before.wrapping_add(i as u16));
                prop_assert!(e.id < size as u32, "used id {} out of range", e.id);
                if dir == 0 {
                    prop_assert_eq!(e.len, 0);
                } else {
                    prop_assert!(e.len as usize <= 12 + 3000);
                }
            }
            let stats = q.stats();
            if dir == 0 {
                prop_assert_eq!(stats.packets as usize, delivered);
                // Every chain taken became a packet, a drop or an error.
                prop_assert_eq!(
                    taken as u64,
                    stats.packets + stats.oversize + q.errors().total()
                );
            } else {
                prop_assert_eq!(stats.packets as usize, delivered);
                prop_assert_eq!((stats.no_room + stats.bad_chain_drops) as usize, dropped);
            }
        }
        drop(sc);
        prop_assert_eq!(sw.shared_free(), 128, "every switch packet went home");
    }
}

/// The driver side against a random device: used entries with random ids
/// and lengths, random `num_buffers` in the headers, random `used.idx`.
mod driver_side {
    use super::common::{self, Guarded};
    use nfv_mem::Batch;
    use nfv_virtio::layout::{
        Desc, VIRTIO_F_VERSION_1 as V1, VIRTIO_NET_F_MRG_RXBUF as MRG, layout_rings,
        ring_area_bytes,
    };
    use nfv_virtio::{DriverQueue, DriverSetup, GuestMemory};
    use proptest::prelude::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU16, Ordering};

    #[derive(Clone, Debug)]
    struct Used {
        id: u32,
        len: u32,
        num_buffers: u16,
    }

    fn used() -> impl Strategy<Value = Used> {
        (
            prop_oneof![4 => 0u32..20, 1 => any::<u32>()],
            prop_oneof![3 => 0u32..2100, 1 => any::<u32>()],
            prop_oneof![4 => 0u16..4, 1 => any::<u16>()],
        )
            .prop_map(|(id, len, num_buffers)| Used {
                id,
                len,
                num_buffers,
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

        #[test]
        fn driver_survives_random_used_rings(
            entries in proptest::collection::vec(used(), 0..24),
            jumps in proptest::collection::vec(0u16..24, 1..4),
            mrg in any::<bool>(),
            tx in any::<bool>(),
        ) {
            const SIZE: u16 = 16;
            let pool = common::pool("fuzz-vnf", 2048, 128);
            let area = Guarded::new(ring_area_bytes(SIZE));
            let r = pool.region();
            let (pb, pl) = (r.base().as_ptr(), r.len());
            // SAFETY: pool region and area outlive the queue (dropped
            // first, below).
            let mem = unsafe {
                GuestMemory::from_raw(&[
                    (pb as u64, pb as u64, pb, pl),
                    (area.ptr() as u64, area.ptr() as u64, area.ptr(), area.len()),
                ])
            }
            .unwrap();
            let rings = layout_rings(area.ptr() as u64, area.len(), SIZE).unwrap();
            let features = if mrg { V1 | MRG } else { V1 };
            let mut q = DriverQueue::new(DriverSetup {
                mem: Arc::new(mem),
                size: SIZE,
                rings,
                features,
                rx_buf_len: 0,
            })
            .unwrap();
            let mut cache = pool.cache();
            if tx {
                let mut b = Batch::new();
                cache.alloc_into(&mut b, 12);
                for p in b.iter_mut() {
                    p.set_len(60).unwrap();
                }
                prop_assert_eq!(q.transmit_burst(&mut b, &mut cache), 12);
            } else {
                prop_assert_eq!(q.refill_rx(&mut cache), SIZE as usize);
            }
            let used = rings.used as *mut u8;
            let desc = rings.desc as *const Desc;
            for (i, e) in entries.iter().enumerate() {
                // SAFETY: slot inside the used ring; for posted ids the
                // descriptor holds a pool buffer of >= 12 bytes.
                unsafe {
                    used.add(4 + 8 * (i % SIZE as usize)).cast::<[u32; 2]>().write([e.id, e.len]);
                    if e.id < SIZE as u32 {
                        let a = desc.add(e.id as usize).read().addr as *mut u8;
                        if !a.is_null() {
                            a.add(10).cast::<[u8; 2]>().write_unaligned(e.num_buffers.to_le_bytes());
                        }
                    }
                }
            }
            let mut idx = 0u16;
            for &j in &jumps {
                idx = idx.wrapping_add(j);
                // SAFETY: used.idx of our ring.
                unsafe { AtomicU16::from_ptr(used.add(2).cast()) }.store(idx, Ordering::Release);
                let mut b = Batch::new();
                if tx {
                    q.reclaim_tx(&mut cache);
                } else {
                    q.receive_burst(&mut b, &mut cache);
                }
                for p in b.iter() {
                    prop_assert!(p.len() <= p.max_len());
                }
                cache.free_batch(&mut b);
                prop_assert!(q.outstanding() <= SIZE as usize);
                if q.is_quarantined() {
                    prop_assert_eq!(q.errors().used_idx_jump, 1);
                }
            }
            drop(q);
            drop(cache);
            prop_assert_eq!(pool.shared_free(), 128, "every packet went home");
        }
    }
}
