//! Target `virtio_burst`: the device side of a split virtqueue
//! (`DeviceQueue::dequeue_burst` and `enqueue_burst`, the code the PMD
//! runs on a VNF's rings) over a ring and buffers the input writes, in a
//! guarded mapping, optionally with a second thread rewriting the rings
//! and buffers during the bursts. Half the inputs run in one-copy mode:
//! long frames leave dequeue split, their tails borrowed from the fuzzed
//! buffers and read (joined) before the chains are returned.
//!
//! Input: a header (queue size, features, start index, whether the
//! rewriting thread runs and its seed), every descriptor of the table and
//! 256 entries of an indirect-table area (each a choice of where it
//! points, how long, flags, next), the avail entries, then up to 16
//! bursts (direction, packets and their sizes, more avail entries).
//!
//! Checks: no access outside guest memory (the guard pages), no panic, no
//! more chains returned than taken nor taken than posted, a quarantine
//! only with its counter, and — single-threaded, TX only — nothing of
//! guest memory written but the used ring.

use crate::bytes::Bytes;
use crate::guest::{Guarded, scribble};
use nfv_mem::{Batch, HugepageMode, MemoryConfig, PacketPool, PoolCache};
use nfv_virtio::layout::{
    Desc, VIRTIO_F_VERSION_1, VIRTIO_NET_F_MRG_RXBUF, VIRTIO_RING_F_EVENT_IDX,
    VIRTIO_RING_F_INDIRECT_DESC, layout_rings, ring_area_bytes,
};
use nfv_virtio::{DeviceQueue, GuestMemory, QueueSetup};
use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};

/// Mapping layout: rings, indirect tables, then 64 KiB of buffers (a second
/// guest region, at a distant address, so translations cross regions).
const INDIRECT_AT: usize = 32 << 10;
const INDIRECT_ENTRIES: usize = 256;
const DATA_AT: usize = 64 << 10;
const DATA_LEN: usize = 64 << 10;
const GPA0: u64 = 0x1000_0000;
const GPA1: u64 = 0x8_0000_0000;
const UVA: u64 = 0x7f00_0000_0000;

thread_local! {
    static POOL: RefCell<Option<(Arc<PacketPool>, PoolCache)>> = const { RefCell::new(None) };
}

fn with_pool<R>(f: impl FnOnce(&mut PoolCache) -> R) -> R {
    POOL.with(|p| {
        let mut p = p.borrow_mut();
        let (_, cache) = p.get_or_insert_with(|| {
            let cfg = MemoryConfig {
                frame_size: 2048,
                frames: 1024,
                hugepages: HugepageMode::Never,
            };
            let pool = PacketPool::new("fuzz", &cfg).expect("fuzz pool");
            let cache = pool.cache();
            (pool, cache)
        });
        f(cache)
    })
}

/// Guest-physical address of mapping offset `off`.
fn gpa(off: usize) -> u64 {
    if off < DATA_AT {
        GPA0 + off as u64
    } else {
        GPA1 + (off - DATA_AT) as u64
    }
}

/// One descriptor as the input chooses it.
fn desc(b: &mut Bytes, ring_bytes: usize) -> Desc {
    let sel = b.u8();
    let addr = match sel & 7 {
        0..=2 => gpa(DATA_AT + b.u16() as usize),
        3 => gpa(INDIRECT_AT + 16 * b.u8() as usize),
        4 => gpa(DATA_AT + DATA_LEN - (b.u8() as usize)),
        5 => gpa(b.u16() as usize % ring_bytes.max(1)),
        6 => u64::from(b.u32()) << (b.u8() & 31),
        _ => GPA0 + DATA_AT as u64 - (b.u8() as u64), // the end of region 0
    };
    let len = match (sel >> 3) & 3 {
        0 => 0,
        1 => b.u8() as u32,
        2 => b.u16() as u32,
        _ => b.u32(),
    };
    Desc {
        addr,
        len,
        flags: (b.u8() & 7) as u16,
        next: b.u8() as u16,
    }
}

struct Ring {
    mem: Guarded,
    size: u16,
    desc: u64,
    avail: u64,
    used: u64,
    ring_bytes: usize,
}

impl Ring {
    fn new(size: u16) -> Ring {
        let ring_bytes = ring_area_bytes(size);
        assert!(ring_bytes <= INDIRECT_AT);
        let mem = Guarded::new(DATA_AT + DATA_LEN);
        let r = layout_rings(mem.ptr() as u64, ring_bytes, size).expect("ring layout");
        Ring {
            mem,
            size,
            desc: r.desc,
            avail: r.avail,
            used: r.used,
            ring_bytes,
        }
    }
    fn off(&self, host: u64) -> usize {
        (host - self.mem.ptr() as u64) as usize
    }
    fn write_desc(&self, at: *mut Desc, d: Desc) {
        // SAFETY: callers pass slots inside the table or indirect area.
        unsafe { at.write_volatile(d) };
    }
    fn u16_at(&self, host: u64) -> &AtomicU16 {
        // SAFETY: ring fields inside the mapping, 2-aligned.
        unsafe { AtomicU16::from_ptr(host as *mut u16) }
    }
    fn push_avail(&self, idx: u16, head: u16) {
        let slot = self.avail + 4 + 2 * (idx & (self.size - 1)) as u64;
        self.u16_at(slot).store(head, Ordering::Relaxed);
    }
    fn set_avail_idx(&self, v: u16) {
        self.u16_at(self.avail + 2).store(v, Ordering::Release);
    }
    fn used_idx(&self) -> u16 {
        self.u16_at(self.used + 2).load(Ordering::Acquire)
    }
    fn device(&self, features: u64, start: u16) -> Option<DeviceQueue> {
        let p = self.mem.ptr();
        let regions = [
            (GPA0, UVA, p, DATA_AT),
            (GPA1, UVA + (1 << 32), p.wrapping_add(DATA_AT), DATA_LEN),
        ];
        // SAFETY: both ranges are inside `self.mem`, which outlives the
        // queue (the queue is dropped before the ring in `run`).
        let gm = Arc::new(unsafe { GuestMemory::from_raw(&regions) }.ok()?);
        let uva = |h: u64| UVA + (h - p as u64);
        DeviceQueue::new(QueueSetup {
            mem: gm,
            size: self.size,
            desc_uva: uva(self.desc),
            avail_uva: uva(self.avail),
            used_uva: uva(self.used),
            last_avail_idx: start,
            features,
            call: None,
        })
        .ok()
    }
}

pub fn run(data: &[u8]) {
    let mut b = Bytes::new(data);
    let h = b.u8();
    let size = 1u16 << (h % 9);
    let mut features = VIRTIO_RING_F_INDIRECT_DESC;
    for (bit, f) in [
        (0x10, VIRTIO_F_VERSION_1),
        (0x20, VIRTIO_NET_F_MRG_RXBUF),
        (0x40, VIRTIO_RING_F_EVENT_IDX),
    ] {
        if h & bit != 0 {
            features |= f;
        }
    }
    let scribbler = h & 0x80 != 0;
    let seed = b.u32();
    let start = b.u16();
    let ring = Ring::new(size);
    // Every descriptor of the table, then the indirect area (where
    // chains of zero-length entries are one choice: the cap's case).
    for i in 0..size {
        let d = desc(&mut b, ring.ring_bytes);
        ring.write_desc((ring.desc as *mut Desc).wrapping_add(i as usize), d);
    }
    let ind = ring.mem.ptr().wrapping_add(INDIRECT_AT).cast::<Desc>();
    let pattern = b.u8();
    for i in 0..INDIRECT_ENTRIES {
        let d = if pattern & 1 != 0 && i + 1 < INDIRECT_ENTRIES {
            let zero = gpa(DATA_AT);
            Desc {
                addr: zero,
                len: 0,
                flags: 1 | (pattern as u16 & 2),
                next: i as u16 + 1,
            }
        } else {
            desc(&mut b, ring.ring_bytes)
        };
        ring.write_desc(ind.wrapping_add(i), d);
    }
    let Some(mut q) = ring.device(features, start) else {
        return;
    };
    // One-copy mode (split packets borrowing the fuzzed guest buffers)
    // for half the inputs; the seed's low bit is otherwise unused.
    q.set_one_copy(seed & 1 != 0);
    let mut posted = start;
    let jumped = std::cell::Cell::new(false);
    let mut post = |b: &mut Bytes, ring: &Ring, posted: &mut u16| {
        let n = b.u8() as u16 % (ring.size + 1);
        for _ in 0..n {
            ring.push_avail(*posted, b.u8() as u16 % (ring.size + 2));
            *posted = posted.wrapping_add(1);
        }
        // Sometimes a jump, forward or back: impossible ones must
        // quarantine the queue.
        if b.u8() == 0xff {
            *posted = posted.wrapping_add(b.u16());
            jumped.set(true);
        }
        ring.set_avail_idx(*posted);
    };
    post(&mut b, &ring, &mut posted);
    // Memory only the driver writes: the descriptor table, indirect
    // tables and buffers (not the avail ring: `bursts` posts more).
    let driver_owned = |r: &Ring| {
        let mut v = r.mem.snapshot(0, r.off(r.avail));
        v.extend(r.mem.snapshot(INDIRECT_AT, r.mem.len()));
        v
    };
    let before = (!scribbler).then(|| driver_owned(&ring));
    let stop = AtomicBool::new(false);
    let mut wrote = false;
    std::thread::scope(|s| {
        if scribbler {
            let (mem, end) = (&ring.mem, ring.mem.len());
            let stop = &stop;
            s.spawn(move || scribble(mem, 0, end, seed, stop));
        }
        wrote = with_pool(|pool| bursts(&mut b, &mut q, pool, &ring, &mut posted, &mut post));
        stop.store(true, Ordering::Relaxed);
    });
    check(&q, &ring, start, posted, scribbler || jumped.get());
    if let Some(before) = before
        && !wrote
    {
        assert!(
            before == driver_owned(&ring),
            "TX bursts wrote driver-owned memory"
        );
    }
    drop(q);
}

fn bursts(
    b: &mut Bytes,
    q: &mut DeviceQueue,
    pool: &mut PoolCache,
    ring: &Ring,
    posted: &mut u16,
    post: &mut impl FnMut(&mut Bytes, &Ring, &mut u16),
) -> bool {
    let mut batch = Batch::new();
    let mut rx = false;
    for _ in 0..16 {
        if b.is_empty() {
            break;
        }
        let op = b.u8();
        if op & 1 == 0 {
            q.dequeue_burst(&mut batch, pool);
            // Split packets: read their borrowed tails (what a receiving
            // port does) before the chains go back, or leave the next
            // burst to return them.
            for p in batch.iter_mut() {
                assert!(p.join_tail(), "a split packet's buffer holds its frame");
            }
            pool.free_batch(&mut batch);
            if op & 0x40 != 0 {
                q.complete_held();
            }
        } else {
            for _ in 0..(op >> 1) % 33 {
                let Some(mut p) = pool.alloc() else { break };
                let len = b.u16() as usize % (p.max_len() + 1);
                let _ = p.set_len(len);
                batch.push(p);
            }
            // Even a failed RX burst may have written buffers.
            rx |= !batch.is_empty();
            q.enqueue_burst(&mut batch, pool);
            pool.free_batch(&mut batch);
        }
        if op & 0x80 != 0 {
            post(b, ring, posted);
        }
    }
    q.complete_held();
    rx
}

/// Whole-run invariants. `posted`: the last `avail.idx` published.
/// `anything_goes`: the rings were rewritten behind the device's back (the
/// scribbling thread, or `avail.idx` moved back after the device took
/// chains), so only the quarantine rule holds.
fn check(q: &DeviceQueue, ring: &Ring, start: u16, posted: u16, anything_goes: bool) {
    if q.is_quarantined() {
        assert!(
            q.errors().avail_idx_jump >= 1,
            "quarantined without its counter"
        );
        return;
    }
    if anything_goes {
        return;
    }
    let taken = q.last_avail_idx().wrapping_sub(start);
    assert!(
        taken <= posted.wrapping_sub(start),
        "took chains never posted"
    );
    // The used ring started at 0 (fresh mapping); every chain is returned
    // at most once, and a packet needs at least one chain.
    assert!(ring.used_idx() <= taken, "returned more chains than taken");
    assert!(
        q.stats().packets <= u64::from(taken),
        "more packets than chains"
    );
}
