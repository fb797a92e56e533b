//! Hostile peers. Each row of the malicious-driver table crafts one bad
//! ring state and checks the exact counter, that nothing panics, and that a
//! second, healthy queue pair keeps working. The malicious-device table
//! does the same for the driver side.

mod common;

use common::{HOLE_GPA, Loopback, LoopbackCfg, Mock, frame};
use nfv_mem::{Batch, PoolCache};
use nfv_virtio::layout::{
    Desc, VIRTIO_F_VERSION_1 as V1, VIRTIO_NET_F_MRG_RXBUF as MRG, VIRTQ_DESC_F_INDIRECT as IND,
    VIRTQ_DESC_F_NEXT as NEXT, VIRTQ_DESC_F_WRITE as WRITE, layout_rings, ring_area_bytes,
};
use nfv_virtio::{DeviceQueue, DriverErrors, DriverQueue, DriverSetup, GuestMemory, QueueErrors};
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};

const SIZE: u16 = 16;

fn d(addr: u64, len: u32, flags: u16, next: u16) -> Desc {
    Desc {
        addr,
        len,
        flags,
        next,
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Dir {
    /// The driver's TX queue (device dequeues).
    Tx,
    /// The driver's RX queue (device enqueues a 100-byte packet).
    Rx,
}

struct Row {
    name: &'static str,
    dir: Dir,
    /// Crafts the ring; descriptor 0 is the head unless it pushes itself.
    craft: fn(&mut Mock),
    /// The one counter that must read 1 (all others 0).
    counter: fn(&mut QueueErrors) -> &mut u64,
    /// Whether the chain goes back to the used ring (its id was valid).
    returned: bool,
}

/// A well-formed 100-byte TX buffer (header + frame) for chains to reuse.
fn good_tx(m: &mut Mock) -> u64 {
    let mut v = vec![0u8; 12];
    v.extend(frame(88, 1));
    m.buf_with(&v)
}

fn rows() -> Vec<Row> {
    vec![
        Row {
            name: "buffer straddles the end of guest memory",
            dir: Dir::Tx,
            craft: |m| {
                let e = m.gpa_end();
                m.set_desc(0, d(e - 10, 100, 0, 0));
                m.push_avail(0);
            },
            counter: |e| &mut e.desc_out_of_memory,
            returned: true,
        },
        Row {
            name: "buffer at address 0",
            dir: Dir::Tx,
            craft: |m| {
                m.set_desc(0, d(0, 100, 0, 0));
                m.push_avail(0);
            },
            counter: |e| &mut e.desc_out_of_memory,
            returned: true,
        },
        Row {
            name: "addr + len wraps the 64-bit space",
            dir: Dir::Tx,
            craft: |m| {
                m.set_desc(0, d(u64::MAX - 4, 100, 0, 0));
                m.push_avail(0);
            },
            counter: |e| &mut e.desc_out_of_memory,
            returned: true,
        },
        Row {
            name: "second buffer of a chain outside memory",
            dir: Dir::Tx,
            craft: |m| {
                let g = good_tx(m);
                m.set_desc(0, d(g, 12, NEXT, 1));
                m.set_desc(1, d(m.gpa_end(), 1, 0, 0));
                m.push_avail(0);
            },
            counter: |e| &mut e.desc_out_of_memory,
            returned: true,
        },
        Row {
            name: "two-descriptor loop",
            dir: Dir::Tx,
            craft: |m| {
                let g = good_tx(m);
                m.set_desc(0, d(g, 12, NEXT, 1));
                m.set_desc(1, d(g + 12, 1, NEXT, 0));
                m.push_avail(0);
            },
            counter: |e| &mut e.chain_too_long,
            returned: true,
        },
        Row {
            name: "self loop",
            dir: Dir::Tx,
            craft: |m| {
                let g = good_tx(m);
                m.set_desc(0, d(g, 12, NEXT, 0));
                m.push_avail(0);
            },
            counter: |e| &mut e.chain_too_long,
            returned: true,
        },
        Row {
            name: "head id >= queue size",
            dir: Dir::Tx,
            craft: |m| m.push_avail(SIZE),
            counter: |e| &mut e.desc_id_out_of_range,
            returned: false,
        },
        Row {
            name: "head id 0xffff",
            dir: Dir::Rx,
            craft: |m| m.push_avail(0xffff),
            counter: |e| &mut e.desc_id_out_of_range,
            returned: false,
        },
        Row {
            name: "next id >= queue size",
            dir: Dir::Tx,
            craft: |m| {
                let g = good_tx(m);
                m.set_desc(0, d(g, 12, NEXT, 99));
                m.push_avail(0);
            },
            counter: |e| &mut e.desc_id_out_of_range,
            returned: true,
        },
        Row {
            name: "indirect length not a multiple of 16",
            dir: Dir::Tx,
            craft: |m| {
                let g = good_tx(m);
                let (t, _) = m.table(&[d(g, 100, 0, 0), d(0, 0, 0, 0)]);
                m.set_desc(0, d(t, 20, IND, 0));
                m.push_avail(0);
            },
            counter: |e| &mut e.indirect_bad_len,
            returned: true,
        },
        Row {
            name: "empty indirect table",
            dir: Dir::Rx,
            craft: |m| {
                let (t, _) = m.table(&[d(0, 0, 0, 0)]);
                m.set_desc(0, d(t, 0, IND, 0));
                m.push_avail(0);
            },
            counter: |e| &mut e.indirect_bad_len,
            returned: true,
        },
        Row {
            name: "nested indirect table",
            dir: Dir::Tx,
            craft: |m| {
                let g = good_tx(m);
                let (inner, il) = m.table(&[d(g, 100, 0, 0)]);
                let (outer, ol) = m.table(&[d(inner, il, IND, 0)]);
                m.set_desc(0, d(outer, ol, IND, 0));
                m.push_avail(0);
            },
            counter: |e| &mut e.indirect_nested,
            returned: true,
        },
        Row {
            name: "indirect table outside memory",
            dir: Dir::Tx,
            craft: |m| {
                let e = m.gpa_end();
                m.set_desc(0, d(e - 16, 32, IND, 0));
                m.push_avail(0);
            },
            counter: |e| &mut e.indirect_out_of_memory,
            returned: true,
        },
        Row {
            name: "misaligned indirect table",
            dir: Dir::Tx,
            craft: |m| {
                let g = good_tx(m);
                let (t, _) = m.table(&[d(g, 100, 0, 0), d(g, 100, 0, 0)]);
                m.set_desc(0, d(t + 4, 16, IND, 0));
                m.push_avail(0);
            },
            counter: |e| &mut e.indirect_out_of_memory,
            returned: true,
        },
        Row {
            name: "loop inside an indirect table",
            dir: Dir::Rx,
            craft: |m| {
                let (g, _) = m.buf(1);
                let (t, l) = m.table(&[d(g, 1, WRITE | NEXT, 1), d(g, 1, WRITE | NEXT, 0)]);
                m.set_desc(0, d(t, l, IND, 0));
                m.push_avail(0);
            },
            counter: |e| &mut e.chain_too_long,
            returned: true,
        },
        Row {
            name: "next beyond the indirect table",
            dir: Dir::Tx,
            craft: |m| {
                let g = good_tx(m);
                let (t, l) = m.table(&[d(g, 12, NEXT, 2), d(g, 1, 0, 0)]);
                m.set_desc(0, d(t, l, IND, 0));
                m.push_avail(0);
            },
            counter: |e| &mut e.desc_id_out_of_range,
            returned: true,
        },
        Row {
            name: "descriptor lengths summing past u32::MAX",
            dir: Dir::Tx,
            craft: |m| {
                // Five 1 GiB buffers in a region that faults if touched:
                // the sum is caught before anything is read.
                for i in 0..5u16 {
                    let flags = if i < 4 { NEXT } else { 0 };
                    m.set_desc(i, d(HOLE_GPA, 1 << 30, flags, i + 1));
                }
                m.push_avail(0);
            },
            counter: |e| &mut e.len_overflow,
            returned: true,
        },
        Row {
            name: "device-writable buffer on a TX chain",
            dir: Dir::Tx,
            craft: |m| {
                let g = good_tx(m);
                m.set_desc(0, d(g, 100, WRITE, 0));
                m.push_avail(0);
            },
            counter: |e| &mut e.wrong_direction,
            returned: true,
        },
        Row {
            name: "read-only buffer on an RX chain",
            dir: Dir::Rx,
            craft: |m| {
                let (g, _) = m.buf(2048);
                m.set_desc(0, d(g, 2048, 0, 0));
                m.push_avail(0);
            },
            counter: |e| &mut e.wrong_direction,
            returned: true,
        },
        Row {
            name: "RX buffer outside memory",
            dir: Dir::Rx,
            craft: |m| {
                let e = m.gpa_end();
                m.set_desc(0, d(e - 100, 2048, WRITE, 0));
                m.push_avail(0);
            },
            counter: |e| &mut e.desc_out_of_memory,
            returned: true,
        },
        Row {
            name: "RX loop of one-byte buffers",
            dir: Dir::Rx,
            craft: |m| {
                let (g, _) = m.buf(1);
                m.set_desc(0, d(g, 1, WRITE | NEXT, 1));
                m.set_desc(1, d(g, 1, WRITE | NEXT, 0));
                m.push_avail(0);
            },
            counter: |e| &mut e.chain_too_long,
            returned: true,
        },
        Row {
            name: "TX chain shorter than the virtio-net header",
            dir: Dir::Tx,
            craft: |m| {
                let g = good_tx(m);
                m.set_desc(0, d(g, 4, 0, 0));
                m.push_avail(0);
            },
            counter: |e| &mut e.short_chain,
            returned: true,
        },
    ]
}

fn burst(q: &mut DeviceQueue, dir: Dir, sc: &mut PoolCache) -> (usize, usize) {
    let mut b = Batch::new();
    match dir {
        Dir::Tx => {
            let n = q.dequeue_burst(&mut b, sc);
            sc.free_batch(&mut b);
            (n, 0)
        }
        Dir::Rx => {
            let mut p = sc.alloc().unwrap();
            p.set_len(100).unwrap();
            b.push(p);
            let n = q.enqueue_burst(&mut b, sc);
            let left = b.len();
            sc.free_batch(&mut b);
            (n, left)
        }
    }
}

fn healthy_round_trip(l: &mut Loopback, seed: u32) {
    let sent: Vec<Vec<u8>> = (0..8)
        .map(|i| frame(64 + 100 * i, seed + i as u32))
        .collect();
    assert_eq!(l.vnf_to_switch(&sent), sent);
    assert_eq!(l.switch_to_vnf(&sent), sent);
}

#[test]
fn malicious_driver_table() {
    let mut healthy = Loopback::new(LoopbackCfg::default());
    let sw = common::pool("switch", 2048, 256);
    let mut sc = sw.cache();
    for (k, row) in rows().into_iter().enumerate() {
        let mut m = Mock::with_hole(SIZE, 64 << 10, 2 << 30);
        for features in [V1, V1 | MRG] {
            let mut m2;
            let m = if features == V1 {
                &mut m
            } else {
                m2 = Mock::with_hole(SIZE, 64 << 10, 2 << 30);
                &mut m2
            };
            let mut q = m.device(features);
            (row.craft)(m);
            let before = m.driver_owned();
            let (n, left) = burst(&mut q, row.dir, &mut sc);
            assert_eq!(
                (n, left),
                (0, 0),
                "{}: nothing delivered, packet dropped",
                row.name
            );
            let mut want = QueueErrors::default();
            *(row.counter)(&mut want) = 1;
            assert_eq!(*q.errors(), want, "row {k}: {}", row.name);
            assert_eq!(q.errors().total(), 1);
            assert!(!q.is_quarantined(), "{}", row.name);
            assert_eq!(
                m.driver_owned(),
                before,
                "{}: device wrote driver-owned memory",
                row.name
            );
            if row.returned {
                assert_eq!(m.used_idx(), 1, "{}: chain returned", row.name);
                assert_eq!((m.used(0).id, m.used(0).len), (0, 0), "{}", row.name);
            } else {
                assert_eq!(m.used_idx(), 0, "{}", row.name);
            }
            // Every chain taken is returned or accounted as unreturnable
            // (the ring-stop log checks this sum).
            assert_eq!(
                q.used_position().wrapping_add(q.unreturnable()),
                q.last_avail_idx(),
                "{}: chains taken and not accounted for",
                row.name
            );
            assert_eq!(q.unreturnable(), u16::from(!row.returned), "{}", row.name);
            assert_eq!(
                q.last_avail_idx(),
                1,
                "{}: the bad chain was consumed",
                row.name
            );
            // The same queue carries on with a good chain.
            if row.dir == Dir::Tx {
                let g = good_tx(m);
                m.set_desc(1, d(g, 100, 0, 0));
                m.push_avail(1);
                let mut b = Batch::new();
                assert_eq!(q.dequeue_burst(&mut b, &mut sc), 1, "{}", row.name);
                assert_eq!(b[0].data(), &frame(88, 1)[..]);
                sc.free_batch(&mut b);
            }
            healthy_round_trip(&mut healthy, k as u32 * 100);
        }
    }
    assert_eq!(
        healthy.tx_dev.errors().total() + healthy.rx_dev.errors().total(),
        0
    );
}

#[test]
fn avail_idx_jump_quarantines_the_queue_and_nothing_is_touched_after() {
    let mut healthy = Loopback::new(LoopbackCfg::default());
    let sw = common::pool("switch", 2048, 256);
    let mut sc = sw.cache();
    for dir in [Dir::Tx, Dir::Rx] {
        let mut m = Mock::new(SIZE, 64 << 10);
        let mut q = m.device(V1);
        let g = good_tx(&mut m);
        m.set_desc(0, d(g, 100, if dir == Dir::Rx { WRITE } else { 0 }, 0));
        m.set_avail_idx(SIZE + 1);
        let snapshot = m.area.bytes().to_vec();
        let (n, left) = burst(&mut q, dir, &mut sc);
        assert_eq!(n, 0);
        assert_eq!(
            left,
            if dir == Dir::Rx { 1 } else { 0 },
            "the packet stays with the caller"
        );
        assert!(q.is_quarantined());
        let want = QueueErrors {
            avail_idx_jump: 1,
            ..Default::default()
        };
        assert_eq!(*q.errors(), want);
        // Even a now-sane ring is left alone.
        m.set_avail_idx(1);
        let snapshot2 = m.area.bytes().to_vec();
        assert_eq!(burst(&mut q, dir, &mut sc).0, 0);
        q.set_kick_wanted(true);
        assert!(!q.has_avail());
        assert_eq!(
            m.area.bytes(),
            &snapshot2[..],
            "quarantined queue wrote memory"
        );
        assert_ne!(snapshot, snapshot2);
        assert_eq!(*q.errors(), want, "counted once");
        healthy_round_trip(&mut healthy, 7);
    }
}

/// A driver queue whose used ring the test writes by hand (the device).
struct EvilDevice {
    q: DriverQueue,
    used: *mut u8,
    _area: common::Guarded,
    _pool: Arc<nfv_mem::PacketPool>,
    cache: PoolCache,
}

impl EvilDevice {
    fn new(features: u64) -> EvilDevice {
        let pool = common::pool("vnf", 2048, 256);
        let area = common::Guarded::new(ring_area_bytes(SIZE));
        let r = pool.region();
        let (pb, pl) = (r.base().as_ptr(), r.len());
        // SAFETY: pool region and area outlive the queue (struct order).
        let mem = unsafe {
            GuestMemory::from_raw(&[
                (pb as u64, pb as u64, pb, pl),
                (area.ptr() as u64, area.ptr() as u64, area.ptr(), area.len()),
            ])
        }
        .unwrap();
        let rings = layout_rings(area.ptr() as u64, area.len(), SIZE).unwrap();
        let mut q = DriverQueue::new(DriverSetup {
            mem: Arc::new(mem),
            size: SIZE,
            rings,
            features,
            rx_buf_len: 0,
        })
        .unwrap();
        let mut cache = pool.cache();
        assert_eq!(q.refill_rx(&mut cache), SIZE as usize);
        EvilDevice {
            q,
            used: rings.used as *mut u8,
            _area: area,
            _pool: pool,
            cache,
        }
    }

    /// Writes used entry `i` and publishes `used.idx = idx`.
    fn used(&self, i: u16, id: u32, len: u32, idx: u16) {
        // SAFETY: inside the used ring of our guarded area.
        unsafe {
            self.used
                .add(4 + 8 * (i & (SIZE - 1)) as usize)
                .cast::<[u32; 2]>()
                .write([id, len]);
            AtomicU16::from_ptr(self.used.add(2).cast()).store(idx, Ordering::Release);
        }
    }

    /// Writes `bytes` at the start of the buffer posted under `id`
    /// (descriptor `id` holds its address).
    fn fill(&self, id: u16, bytes: &[u8]) {
        let addr = self.desc(id).addr as *mut u8;
        // SAFETY: the buffer is a pool packet posted with >= 2000 bytes.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), addr, bytes.len()) };
    }

    fn desc(&self, id: u16) -> Desc {
        // Descriptor table: first part of the area.
        let table = self._area.ptr().cast::<Desc>();
        // SAFETY: inside the descriptor table (layout_rings puts it first,
        // the area being 64-aligned).
        unsafe { table.add(id as usize).read() }
    }

    fn receive(&mut self) -> usize {
        let mut b = Batch::new();
        let n = self.q.receive_burst(&mut b, &mut self.cache);
        self.cache.free_batch(&mut b);
        n
    }
}

fn hdr(num_buffers: u16) -> Vec<u8> {
    let mut h = vec![0u8; 12];
    h[10..12].copy_from_slice(&num_buffers.to_le_bytes());
    h
}

#[test]
fn malicious_device_table() {
    type Craft = fn(&mut EvilDevice);
    type Counter = fn(&mut DriverErrors) -> &mut u64;
    let rows: Vec<(&str, u64, Craft, Counter)> = vec![
        (
            "used id >= size",
            V1,
            |e| e.used(0, 16, 100, 1),
            |x| &mut x.used_id_out_of_range,
        ),
        (
            "used id huge",
            V1,
            |e| e.used(0, u32::MAX, 100, 1),
            |x| &mut x.used_id_out_of_range,
        ),
        (
            "used id returned twice",
            V1,
            |e| {
                e.fill(0, &hdr(1));
                e.used(0, 0, 100, 1);
                assert_eq!(e.receive(), 1);
                e.used(1, 0, 100, 2);
            },
            |x| &mut x.used_id_not_posted,
        ),
        (
            "used len > posted",
            V1,
            |e| e.used(0, 0, 1 << 20, 1),
            |x| &mut x.used_len_too_long,
        ),
        (
            "used len < header",
            V1,
            |e| e.used(0, 0, 5, 1),
            |x| &mut x.short_used,
        ),
        (
            "num_buffers 0",
            V1 | MRG,
            |e| {
                e.fill(0, &hdr(0));
                e.used(0, 0, 100, 1);
            },
            |x| &mut x.bad_num_buffers,
        ),
        (
            "num_buffers beyond outstanding",
            V1 | MRG,
            |e| {
                e.fill(0, &hdr(17));
                e.used(0, 0, 100, 1);
            },
            |x| &mut x.bad_num_buffers,
        ),
        (
            "num_buffers 2 without MRG_RXBUF",
            V1,
            |e| {
                e.fill(0, &hdr(2));
                e.used(0, 0, 100, 1);
                e.used(1, 1, 100, 2);
            },
            |x| &mut x.merge_without_mrg,
        ),
        (
            "used idx jump",
            V1,
            |e| e.used(0, 0, 100, 17),
            |x| &mut x.used_idx_jump,
        ),
    ];
    let mut healthy = Loopback::new(LoopbackCfg::default());
    for (k, (name, features, craft, counter)) in rows.into_iter().enumerate() {
        let mut e = EvilDevice::new(features);
        craft(&mut e);
        e.receive();
        e.receive();
        let mut want = DriverErrors::default();
        *counter(&mut want) = 1;
        assert_eq!(*e.q.errors(), want, "row {k}: {name}");
        assert_eq!(e.q.is_quarantined(), name == "used idx jump", "{name}");
        healthy_round_trip(&mut healthy, k as u32);
    }
}
