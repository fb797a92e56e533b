//! Property test: random packed rings — descriptors with random flags
//! (biased to "available in this lap"), addresses, lengths and ids, random
//! indirect tables (the data area's noise), random ring sizes (not only
//! powers of two) and start positions — thrown at the device side in both
//! directions. It must never panic, never touch memory outside guest
//! memory (the area is fenced by PROT_NONE pages), never write guest
//! buffers when reading a TX queue, keep its position inside the ring,
//! return every switch packet to its pool, and account for every chain
//! it takes.

mod common;

use common::{GPA, Mock, UVA};
use nfv_mem::Batch;
use nfv_virtio::layout::{
    VIRTIO_F_RING_PACKED as PACKED, VIRTIO_F_VERSION_1 as V1, VIRTIO_NET_F_MRG_RXBUF as MRG,
    VIRTIO_RING_F_EVENT_IDX as EVIDX,
};
use nfv_virtio::packed::{
    DESC_F_INDIRECT, DESC_F_NEXT, DESC_F_WRITE, PackedDesc, avail_flags, decode_base, encode_base,
};
use nfv_virtio::{DeviceQueue, QueueSetup};
use proptest::prelude::*;
use std::sync::atomic::{AtomicU16, Ordering};

const DATA: usize = 32 << 10;
const MOCK_SIZE: u16 = 64;

#[derive(Clone, Debug)]
struct Case {
    size: u16,
    start: u16,
    wrap: bool,
    /// addr (offset into data, or raw), len, id, flag bits, available?
    descs: Vec<(Option<u32>, u64, u32, u16, u16, bool)>,
    features: u64,
    noise: Vec<u8>,
    rx_lens: Vec<u16>,
}

fn case() -> impl Strategy<Value = Case> {
    (1u16..=MOCK_SIZE).prop_flat_map(|size| {
        let desc = (
            prop_oneof![6 => (0u32..DATA as u32).prop_map(Some), 1 => Just(None)],
            any::<u64>(),
            prop_oneof![3 => 0u32..2048, 1 => 0u32..=DATA as u32, 1 => any::<u32>()],
            any::<u16>(),
            prop_oneof![
                4 => Just(0u16),
                2 => Just(DESC_F_NEXT),
                2 => Just(DESC_F_WRITE),
                1 => Just(DESC_F_NEXT | DESC_F_WRITE),
                1 => Just(DESC_F_INDIRECT),
                1 => any::<u16>().prop_map(|f| f & 7),
            ],
            prop_oneof![5 => Just(true), 1 => Just(false)],
        );
        (
            Just(size),
            0..size,
            any::<bool>(),
            proptest::collection::vec(desc, size as usize),
            prop_oneof![Just(V1), Just(V1 | MRG), Just(V1 | EVIDX | MRG)],
            proptest::collection::vec(any::<u8>(), 4096),
            proptest::collection::vec(1u16..3000, 1..8),
        )
            .prop_map(
                |(size, start, wrap, descs, features, noise, rx_lens)| Case {
                    size,
                    start,
                    wrap,
                    descs,
                    features,
                    noise,
                    rx_lens,
                },
            )
    })
}

fn build(c: &Case) -> Mock {
    let mut m = Mock::new(MOCK_SIZE, DATA);
    let data = GPA + m.ring_bytes() as u64;
    let (_, p) = m.buf(c.noise.len());
    // SAFETY: `buf` reserved these bytes in the area.
    unsafe { std::ptr::copy_nonoverlapping(c.noise.as_ptr(), p, c.noise.len()) };
    for (i, &(off, raw, len, id, flags, avail)) in c.descs.iter().enumerate() {
        // Slots before the start were made available in this lap too (the
        // device must not see them as new: they are behind it).
        let lap = if (i as u16) < c.start {
            !c.wrap
        } else {
            c.wrap
        };
        let f = flags
            | if avail {
                avail_flags(lap)
            } else {
                avail_flags(!lap)
            };
        let addr = off.map_or(raw, |o| data + o as u64);
        let d = (m.host.desc as *mut PackedDesc).wrapping_add(i);
        // SAFETY: slot `i < size <= MOCK_SIZE` of the mock's descriptor
        // area; flags stored last with release, as a driver does.
        unsafe {
            std::ptr::addr_of_mut!((*d).addr).write(addr);
            std::ptr::addr_of_mut!((*d).len).write(len);
            std::ptr::addr_of_mut!((*d).id).write(id);
            AtomicU16::from_ptr(std::ptr::addr_of_mut!((*d).flags)).store(f, Ordering::Release);
        }
    }
    m
}

fn device(m: &Mock, c: &Case) -> DeviceQueue {
    let uva = |host: u64| host - m.area.ptr() as u64 + UVA;
    DeviceQueue::new(QueueSetup {
        mem: m.mem.clone(),
        size: c.size,
        desc_uva: uva(m.host.desc),
        avail_uva: uva(m.host.avail),
        used_uva: uva(m.host.used),
        last_avail_idx: encode_base(c.start, c.wrap),
        features: c.features | PACKED,
        call: None,
    })
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn device_survives_random_packed_rings(c in case()) {
        let sw = common::pool("fuzz-packed", 4096, 128);
        let mut sc = sw.cache();
        for dir in 0..2 {
            let m = build(&c);
            let mut q = device(&m, &c);
            let data_before = m.area.bytes()[m.ring_bytes()..].to_vec();
            let mut outcomes = 0u64;
            let mut moved = false;
            for _ in 0..3 {
                let start = q.last_avail_idx();
                if dir == 0 {
                    let mut b = Batch::new();
                    q.dequeue_burst(&mut b, &mut sc);
                    for p in b.iter() {
                        prop_assert!(p.len() <= p.max_len());
                    }
                    sc.free_batch(&mut b);
                    q.complete_held();
                } else {
                    let mut b = Batch::new();
                    for &l in &c.rx_lens {
                        let mut p = sc.alloc().unwrap();
                        p.set_len(l as usize).unwrap();
                        b.push(p);
                    }
                    let before = b.len();
                    let n = q.enqueue_burst(&mut b, &mut sc);
                    prop_assert!(n + b.len() <= before);
                    sc.free_batch(&mut b);
                }
                let (idx, _) = decode_base(q.last_avail_idx());
                prop_assert!(idx < c.size, "position {} outside a ring of {}", idx, c.size);
                moved |= q.last_avail_idx() != start;
            }
            let (st, e) = (q.stats(), q.errors());
            if dir == 0 {
                prop_assert!(
                    m.area.bytes()[m.ring_bytes()..] == data_before[..],
                    "TX wrote guest buffers"
                );
                outcomes += st.packets + st.oversize + e.total();
            } else {
                outcomes += st.packets + st.no_room + st.bad_chain_drops + e.total();
            }
            // Every chain taken became a packet, a drop or a counted error.
            if moved {
                prop_assert!(outcomes > 0, "chains taken without an outcome");
            }
        }
        drop(sc);
        prop_assert_eq!(sw.shared_free(), 128, "every switch packet went home");
    }
}
