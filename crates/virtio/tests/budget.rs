//! Bounded work: the cap on descriptors per chain (`MAX_CHAIN_DESCS`) and
//! the per-burst descriptor budget (`BURST_DESC_BUDGET`), in both
//! directions. The cap table crafts legal-but-huge and just-legal chains
//! and checks the exact counters and used entries; the huge tables are
//! followed by PROT_NONE pages, so a walk that went past the cap would
//! fault instead of passing. The budget table posts chains of a given
//! cost and checks, burst by burst, how many are taken against a model
//! of the rule, that none is lost or reordered and that the queue itself
//! always gets going again.

mod common;

use common::{Mock, PAGE, frame};
use nfv_mem::{BATCH, Batch, PoolCache};
use nfv_virtio::device::{
    BURST_DESC_BUDGET, LONG_CHAIN_DESCS, MAX_CHAIN_DESCS, RX_BURST_DESC_BUDGET, chain_cost,
};
use nfv_virtio::layout::{
    Desc, VIRTIO_F_VERSION_1 as V1, VIRTIO_NET_F_MRG_RXBUF as MRG, VIRTQ_DESC_F_INDIRECT as IND,
    VIRTQ_DESC_F_NEXT as NEXT, VIRTQ_DESC_F_WRITE as WRITE,
};
use nfv_virtio::{DeviceQueue, QueueErrors};

const SIZE: u16 = 256;
const HDR: usize = 12;
/// Room for a 65,536-entry table (1 MiB) plus buffers.
const DATA: usize = 4 << 20;

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
    /// The driver's RX queue (device enqueues one 100-byte packet).
    Rx,
}

/// An indirect table of `entries` (chained with NEXT), page aligned, with
/// every page after the first `readable` entries made PROT_NONE: a walk
/// that reads further faults. Returns the table's gpa and byte length.
fn guarded_table(m: &mut Mock, entries: &[Desc], readable: usize) -> (u64, u32) {
    let bytes = 16 * entries.len();
    let (_, p) = m.buf(bytes + PAGE);
    let host = (p as usize).div_ceil(PAGE) * PAGE;
    for (i, e) in entries.iter().enumerate() {
        // SAFETY: inside the buffer just reserved (one spare page covers
        // the alignment), 16-aligned.
        unsafe { (host as *mut Desc).add(i).write(*e) };
    }
    let keep = (16 * readable).div_ceil(PAGE) * PAGE;
    if keep < bytes {
        // SAFETY: whole pages of the mock's own mapping, past the part the
        // walk may read; the mock unmaps the whole area on drop.
        let r = unsafe {
            libc::mprotect(
                (host + keep) as *mut libc::c_void,
                (bytes - keep).div_ceil(PAGE) * PAGE,
                libc::PROT_NONE,
            )
        };
        assert_eq!(r, 0);
    }
    (m.gpa(host as *const u8), bytes as u32)
}

/// `n` table entries, chained: `lead` zero-length ones, then (if `last`
/// is given) one buffer of `last` bytes at gpa `at`.
fn entries(lead: usize, zero_at: u64, last: Option<(u64, u32)>, flags: u16) -> Vec<Desc> {
    let mut v: Vec<Desc> = (0..lead)
        .map(|i| d(zero_at, 0, flags | NEXT, (i as u16).wrapping_add(1)))
        .collect();
    if let Some((g, l)) = last {
        v.push(d(g, l, flags, 0));
    } else if let Some(e) = v.last_mut() {
        e.flags &= !NEXT;
    }
    v
}

/// A TX buffer holding the virtio-net header and a 64-byte frame.
fn tx_frame(m: &mut Mock, seed: u32) -> (u64, u32) {
    let mut v = vec![0u8; HDR];
    v.extend(frame(64, seed));
    (m.buf_with(&v), v.len() as u32)
}

struct CapRow {
    name: &'static str,
    dir: Dir,
    features: u64,
    /// Crafts the chains and pushes their heads.
    craft: fn(&mut Mock),
    /// Frames (TX) or packets (RX) the burst must deliver.
    delivered: usize,
    /// Used entries the burst must publish.
    used: u16,
    /// `chain_too_long` after the burst (every other error 0).
    too_long: u64,
}

fn cap_rows() -> Vec<CapRow> {
    vec![
        CapRow {
            name: "TX: indirect table of 65,536 zero-length entries",
            dir: Dir::Tx,
            features: V1,
            craft: |m| {
                let (z, _) = m.buf(16);
                let e = entries(65536, z, None, 0);
                let (t, l) = guarded_table(m, &e, MAX_CHAIN_DESCS as usize);
                m.set_desc(0, d(t, l, IND, 0));
                m.push_avail(0);
            },
            delivered: 0,
            used: 1,
            too_long: 1,
        },
        CapRow {
            name: "TX: just at the cap (indirect descriptor + cap-1 entries)",
            dir: Dir::Tx,
            features: V1,
            craft: |m| {
                let (z, _) = m.buf(16);
                let f = tx_frame(m, 1);
                let e = entries(MAX_CHAIN_DESCS as usize - 2, z, Some(f), 0);
                let (t, l) = guarded_table(m, &e, e.len());
                m.set_desc(0, d(t, l, IND, 0));
                m.push_avail(0);
            },
            delivered: 1,
            used: 1,
            too_long: 0,
        },
        CapRow {
            name: "TX: one over the cap",
            dir: Dir::Tx,
            features: V1,
            craft: |m| {
                let (z, _) = m.buf(16);
                let f = tx_frame(m, 1);
                let e = entries(MAX_CHAIN_DESCS as usize - 1, z, Some(f), 0);
                let (t, l) = guarded_table(m, &e, e.len());
                m.set_desc(0, d(t, l, IND, 0));
                m.push_avail(0);
            },
            delivered: 0,
            used: 1,
            too_long: 1,
        },
        CapRow {
            name: "TX: direct descriptors before the indirect one count",
            dir: Dir::Tx,
            features: V1,
            craft: |m| {
                let (z, _) = m.buf(16);
                let f = tx_frame(m, 1);
                // 3 direct + 1 indirect + (cap - 4) entries = cap: legal;
                // the second chain has one entry more.
                for (head, extra) in [(0u16, 0usize), (8, 1)] {
                    let e = entries(MAX_CHAIN_DESCS as usize - 5 + extra, z, Some(f), 0);
                    let (t, l) = guarded_table(m, &e, e.len());
                    for i in 0..3 {
                        m.set_desc(head + i, d(z, 0, NEXT, head + i + 1));
                    }
                    m.set_desc(head + 3, d(t, l, IND, 0));
                    m.push_avail(head);
                }
            },
            delivered: 1,
            used: 2,
            too_long: 1,
        },
        CapRow {
            name: "RX: indirect table of 65,536 zero-length writable entries",
            dir: Dir::Rx,
            features: V1,
            craft: |m| {
                let (z, _) = m.buf(16);
                let e = entries(65536, z, None, WRITE);
                let (t, l) = guarded_table(m, &e, MAX_CHAIN_DESCS as usize);
                m.set_desc(0, d(t, l, IND, 0));
                m.push_avail(0);
            },
            delivered: 0,
            used: 1,
            too_long: 1,
        },
        CapRow {
            name: "RX: just at the cap, the buffer last",
            dir: Dir::Rx,
            features: V1,
            craft: |m| {
                let (z, _) = m.buf(16);
                let (g, _) = m.buf(2048);
                let e = entries(MAX_CHAIN_DESCS as usize - 2, z, Some((g, 2048)), WRITE);
                let (t, l) = guarded_table(m, &e, e.len());
                m.set_desc(0, d(t, l, IND, 0));
                m.push_avail(0);
            },
            delivered: 1,
            used: 1,
            too_long: 0,
        },
        CapRow {
            name: "RX, MRG_RXBUF: one packet's chains together over the cap",
            dir: Dir::Rx,
            features: V1 | MRG,
            craft: |m| {
                // Chains of one indirect descriptor and cap/3 zero-length
                // entries before a 40-byte buffer; the 112-byte packet
                // needs three of them: 3 * (cap/3 + 2) > cap.
                let (z, _) = m.buf(16);
                for head in 0..3u16 {
                    let (g, _) = m.buf(40);
                    let e = entries(MAX_CHAIN_DESCS as usize / 3, z, Some((g, 40)), WRITE);
                    let (t, l) = guarded_table(m, &e, e.len());
                    m.set_desc(head, d(t, l, IND, 0));
                    m.push_avail(head);
                }
            },
            delivered: 0,
            used: 3,
            too_long: 1,
        },
        CapRow {
            name: "RX, MRG_RXBUF: a packet's chains together under the cap",
            dir: Dir::Rx,
            features: V1 | MRG,
            craft: |m| {
                // Three chains of cap/3 - 1 descriptors each.
                let (z, _) = m.buf(16);
                for head in 0..3u16 {
                    let (g, _) = m.buf(40);
                    let e = entries(MAX_CHAIN_DESCS as usize / 3 - 3, z, Some((g, 40)), WRITE);
                    let (t, l) = guarded_table(m, &e, e.len());
                    m.set_desc(head, d(t, l, IND, 0));
                    m.push_avail(head);
                }
            },
            delivered: 1,
            used: 3,
            too_long: 0,
        },
    ]
}

/// One burst in `dir`; returns what it delivered.
fn burst(q: &mut DeviceQueue, dir: Dir, sc: &mut PoolCache, room: usize) -> usize {
    let mut b = Batch::new();
    match dir {
        Dir::Tx => {
            // Only `room` free places in the batch.
            for _ in 0..BATCH - room {
                b.push(sc.alloc().unwrap());
            }
            let n = q.dequeue_burst(&mut b, sc);
            sc.free_batch(&mut b);
            n
        }
        Dir::Rx => {
            for _ in 0..room {
                let mut p = sc.alloc().unwrap();
                p.set_len(100).unwrap();
                b.push(p);
            }
            let n = q.enqueue_burst(&mut b, sc);
            sc.free_batch(&mut b);
            n
        }
    }
}

#[test]
fn chains_over_the_cap_are_returned_as_errors() {
    let sw = common::pool("switch", 2048, 256);
    let mut sc = sw.cache();
    for row in cap_rows() {
        let mut m = Mock::new(SIZE, DATA);
        let mut q = m.device(row.features);
        (row.craft)(&mut m);
        // One packet per RX burst; as many bursts as the budget needs
        // (a chain at the cap takes a whole burst and leaves a debt).
        let mut got = 0;
        for _ in 0..1000 {
            got += burst(&mut q, row.dir, &mut sc, 1);
        }
        assert_eq!(got, row.delivered, "{}", row.name);
        assert_eq!(m.used_idx(), row.used, "{}: chains returned", row.name);
        let want = QueueErrors {
            chain_too_long: row.too_long,
            ..Default::default()
        };
        assert_eq!(*q.errors(), want, "{}", row.name);
        if row.too_long != 0 {
            for i in 0..row.used {
                assert_eq!(m.used(i).len, 0, "{}: an error is returned empty", row.name);
            }
        }
        assert!(!q.is_quarantined(), "{}", row.name);
        assert_eq!(q.last_avail_idx(), row.used, "{}", row.name);
    }
}

/// The rule the device follows, written out as a reference: per burst
/// the chains taken (at most `room`; none while repaying debt) and whether
/// the budget cut it short (chains left that it would otherwise take).
fn model(costs: &[u32], room: usize, budget: u32) -> Vec<(usize, bool)> {
    let (mut out, mut next, mut debt) = (Vec::new(), 0, 0u32);
    while next < costs.len() {
        if debt > 0 {
            // Skipped bursts repay the receive budget in both directions.
            debt = debt.saturating_sub(BURST_DESC_BUDGET);
            out.push((0, false));
            continue;
        }
        let (mut spent, mut taken) = (0, 0);
        while taken < room && next < costs.len() && spent < budget {
            spent += chain_cost(costs[next]);
            next += 1;
            taken += 1;
        }
        let cut = spent >= budget && taken < room && next < costs.len();
        debt = spent.saturating_sub(budget);
        out.push((taken, cut));
    }
    out
}

/// Posts chains `0..n` costing `cost(i)` descriptors each, all legal: a
/// 64-byte frame (TX) or a 2 KiB buffer (RX) behind zero-length entries.
fn post(m: &mut Mock, dir: Dir, costs: &[u32]) {
    let (z, _) = m.buf(16);
    for (i, &c) in costs.iter().enumerate() {
        let head = i as u16;
        let last = match dir {
            Dir::Tx => tx_frame(m, i as u32),
            Dir::Rx => (m.buf(2048).0, 2048),
        };
        let flags = if dir == Dir::Rx { WRITE } else { 0 };
        if c == 1 {
            m.set_desc(head, d(last.0, last.1, flags, 0));
        } else {
            let e = entries(c as usize - 2, z, Some(last), flags);
            let (t, l) = m.table(&e);
            m.set_desc(head, d(t, l, IND, 0));
        }
        m.push_avail(head);
    }
}

struct BudgetRow {
    name: &'static str,
    /// Descriptors per chain, chain by chain.
    costs: Vec<u32>,
    /// Packets offered (RX) or batch room (TX) per burst.
    room: usize,
}

/// The budget of a burst in direction `dir` (our receive: the driver's TX
/// chains; our transmit: its RX chains).
fn budget_of(dir: Dir) -> u32 {
    match dir {
        Dir::Tx => BURST_DESC_BUDGET,
        Dir::Rx => RX_BURST_DESC_BUDGET,
    }
}

fn budget_rows(b: u32) -> Vec<BudgetRow> {
    let cap = MAX_CHAIN_DESCS;
    let per_chain = |c: u32, n: usize| vec![c; n];
    vec![
        BudgetRow {
            name: "one descriptor per chain: full bursts",
            costs: per_chain(1, 64),
            room: BATCH,
        },
        BudgetRow {
            name: "budget / 32 descriptors per chain: still full bursts",
            costs: per_chain(b / BATCH as u32, 64),
            room: BATCH,
        },
        BudgetRow {
            name: "one more: bursts cut short, a little debt",
            costs: per_chain(b / BATCH as u32 + 1, 64),
            room: BATCH,
        },
        BudgetRow {
            name: "chains one past the long-chain mark: weighted debt",
            costs: per_chain(LONG_CHAIN_DESCS + 1, 12),
            room: BATCH,
        },
        BudgetRow {
            name: "chains at the cap",
            costs: per_chain(cap, 6),
            room: BATCH,
        },
        BudgetRow {
            name: "half the budget plus one (at most the cap)",
            costs: per_chain((b / 2 + 1).min(cap), 9),
            room: BATCH,
        },
        BudgetRow {
            name: "mixed: cheap chains behind and between expensive ones",
            costs: [
                vec![cap, 1, 1, 1],
                vec![1; 40],
                vec![cap / 2; 3],
                vec![2; 20],
            ]
            .concat(),
            room: BATCH,
        },
        BudgetRow {
            name: "a small batch is not cut",
            costs: per_chain(2, 30),
            room: 3,
        },
    ]
}

#[test]
fn bursts_stop_at_the_budget_and_lose_nothing() {
    let sw = common::pool("switch", 2048, 512);
    let mut sc = sw.cache();
    for dir in [Dir::Tx, Dir::Rx] {
        let budget = budget_of(dir);
        for row in budget_rows(budget) {
            let name = format!("{dir:?} {}", row.name);
            let mut m = Mock::new(SIZE, DATA);
            let mut q = m.device(V1);
            post(&mut m, dir, &row.costs);
            let want = model(&row.costs, row.room, budget);
            let mut got = Vec::new();
            while (m.used_idx() as usize) < row.costs.len() {
                let before = m.used_idx();
                let n = burst(&mut q, dir, &mut sc, row.room);
                assert_eq!(n, m.used_idx().wrapping_sub(before) as usize, "{name}");
                got.push(n);
                assert!(got.len() <= 100 * row.costs.len(), "{name}: no progress");
            }
            let taken: Vec<usize> = want.iter().map(|w| w.0).collect();
            assert_eq!(got, taken, "{name}: chains taken per burst");
            let cuts = want.iter().filter(|w| w.1).count() as u64;
            assert_eq!(q.stats().budget_exhausted, cuts, "{name}");
            // Chains no longer than LONG_CHAIN_DESCS never cost more than
            // one skipped burst (the last chain's overshoot).
            let longest_skip = got.split(|&n| n != 0).map(|s| s.len()).max();
            if row.costs.iter().all(|&c| c <= LONG_CHAIN_DESCS) {
                assert!(longest_skip.unwrap_or(0) <= 1, "{name}: {got:?}");
            }
            // Every chain returned once, in avail order, none an error
            // (RX: each holds a packet; TX chains are returned empty).
            for i in 0..row.costs.len() as u16 {
                assert_eq!(m.used(i).id, i as u32, "{name}");
                assert_eq!(m.used(i).len != 0, dir == Dir::Rx, "{name}");
            }
            assert_eq!(q.errors().total(), 0, "{name}");
        }
    }
}
