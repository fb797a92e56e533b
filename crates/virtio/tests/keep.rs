//! TX chains kept past their burst (`DeviceQueue::set_keep`): split chains
//! a port took stay out of the used ring until returned, the others go back
//! at the burst's end; every chain comes back exactly once, in whatever
//! order the sends complete; keep mode is refused with IN_ORDER; a return
//! for a head not kept is refused and counted.

mod common;

use common::{Mock, frame, pool};
use nfv_mem::{Batch, PoolCache};
use nfv_virtio::DeviceQueue;
use nfv_virtio::layout::{Desc, VIRTIO_F_IN_ORDER, VIRTIO_F_VERSION_1 as V1};
use proptest::prelude::*;
use std::collections::HashSet;

const SIZE: u16 = 64;
const HDR: usize = 12;
/// Long enough to be split (head 128 + tail ≥ 128).
const LONG: usize = 1000;
const SHORT: usize = 100;

/// Posts a frame of `len` bytes (after a zero header) as one-buffer TX
/// chain `h`.
fn post_tx(m: &mut Mock, h: u16, len: usize) {
    let mut b = vec![0u8; HDR];
    b.extend_from_slice(&frame(len, h as u32));
    let a = m.buf_with(&b);
    m.set_desc(
        h,
        Desc {
            addr: a,
            len: b.len() as u32,
            flags: 0,
            next: 0,
        },
    );
    m.push_avail(h);
}

fn keeping(m: &Mock, features: u64) -> DeviceQueue {
    let mut dq = m.device(features);
    dq.set_one_copy(true);
    dq.set_keep(true);
    dq
}

/// Used ids from `from` to the published index.
fn used_ids(m: &Mock, from: u16) -> Vec<u16> {
    (from..m.used_idx()).map(|i| m.used(i).id as u16).collect()
}

/// One burst of `lens` frames; `take` says which split chains (by head)
/// a port took. Returns the used ids published at the burst's end.
fn burst(
    m: &mut Mock,
    dq: &mut DeviceQueue,
    cache: &mut PoolCache,
    first: u16,
    lens: &[usize],
    take: &[u16],
) -> Vec<u16> {
    for (i, &l) in lens.iter().enumerate() {
        post_tx(m, first + i as u16, l);
    }
    let before = m.used_idx();
    let mut b = Batch::new();
    assert_eq!(dq.dequeue_burst(&mut b, cache), lens.len());
    let splits: Vec<u16> = dq.burst_splits().iter().map(|s| s.0).collect();
    let expect: Vec<u16> = lens
        .iter()
        .enumerate()
        .filter(|(_, l)| **l >= LONG)
        .map(|(i, _)| first + i as u16)
        .collect();
    assert_eq!(splits, expect, "split chains of the burst");
    // Tails are where the packets say.
    for (p, s) in b.iter().filter(|p| p.is_split()).zip(dq.burst_splits()) {
        assert_eq!(p.tail().0 as usize, s.1);
    }
    if !expect.is_empty() {
        // Held while split packets read their tails.
        assert_eq!(m.used_idx(), before, "nothing published during the burst");
    }
    dq.complete_held_keeping(|_, h| take.contains(&h));
    cache.free_batch(&mut b);
    used_ids(m, before)
}

#[test]
fn kept_chains_stay_out_until_returned() {
    struct Row {
        what: &'static str,
        lens: &'static [usize],
        take: &'static [u16],
        /// Used at the burst's end, in order.
        used: &'static [u16],
        /// Returned later, one by one, and what each publishes.
        returns: &'static [(u16, bool)],
    }
    let rows = [
        Row {
            what: "nothing taken: all back at the burst's end",
            lens: &[LONG, SHORT, LONG],
            take: &[],
            used: &[1, 0, 2],
            returns: &[(0, false)],
        },
        Row {
            what: "one taken, returned later",
            lens: &[LONG, SHORT, LONG],
            take: &[2],
            used: &[1, 0],
            returns: &[(2, true), (2, false)],
        },
        Row {
            what: "all taken, returned out of order",
            lens: &[LONG, LONG, LONG],
            take: &[0, 1, 2],
            used: &[],
            returns: &[(2, true), (0, true), (1, true)],
        },
        Row {
            what: "a short frame cannot be taken",
            lens: &[SHORT, SHORT],
            take: &[0, 1],
            used: &[0, 1],
            returns: &[(0, false), (1, false)],
        },
    ];
    let pool = pool("keep", 2048, 256);
    for r in rows {
        let mut m = Mock::new(SIZE, 1 << 20);
        let mut dq = keeping(&m, V1);
        assert!(dq.keeps(), "{}", r.what);
        let mut cache = pool.cache();
        let got = burst(&mut m, &mut dq, &mut cache, 0, r.lens, r.take);
        // Unsplit chains go back as they are read; split ones at the end.
        let mut want: Vec<u16> = r.used.to_vec();
        want.sort();
        let mut got_sorted = got.clone();
        got_sorted.sort();
        assert_eq!(got_sorted, want, "{}: used at the burst's end", r.what);
        for &(h, ok) in r.returns {
            let before = m.used_idx();
            assert_eq!(dq.return_kept(h), ok, "{}: return {h}", r.what);
            dq.publish_kept();
            let ids = used_ids(&m, before);
            assert_eq!(ids, if ok { vec![h] } else { vec![] }, "{}: {h}", r.what);
        }
        assert_eq!(dq.kept_outstanding(), 0, "{}", r.what);
        let stale = r.returns.iter().filter(|x| !x.1).count() as u64;
        assert_eq!(dq.stats().kept_stale, stale, "{}", r.what);
    }
}

#[test]
fn refused_with_in_order() {
    let m = Mock::new(SIZE, 1 << 16);
    let mut dq = m.device(V1 | VIRTIO_F_IN_ORDER);
    assert!(!dq.set_keep(true));
    assert!(!dq.keeps());
}

#[test]
fn return_all_gives_back_every_kept_chain_once() {
    let pool = pool("keep-all", 2048, 256);
    let mut m = Mock::new(SIZE, 1 << 20);
    let mut dq = keeping(&m, V1);
    let mut cache = pool.cache();
    let got = burst(&mut m, &mut dq, &mut cache, 0, &[LONG; 4], &[0, 1, 3]);
    assert_eq!(got, vec![2]);
    assert_eq!(dq.kept_outstanding(), 3);
    // Keep mode off: the kept ones stay kept until returned.
    dq.set_keep(false);
    assert_eq!(dq.kept_outstanding(), 3);
    let before = m.used_idx();
    assert_eq!(dq.return_all_kept(), 3);
    dq.publish_kept();
    let mut ids = used_ids(&m, before);
    ids.sort();
    assert_eq!(ids, vec![0, 1, 3]);
    assert!(!dq.return_kept(1), "returned twice");
    assert_eq!(dq.return_all_kept(), 0);
}

proptest! {
    /// Random bursts, takes and completion orders: every chain taken from
    /// the ring is used exactly once; a kept one only after its return.
    #[test]
    fn every_chain_comes_back_once(
        bursts in prop::collection::vec(
            prop::collection::vec((any::<bool>(), any::<bool>()), 1..8), 1..12),
        order in any::<u64>(),
    ) {
        let pool = pool("keep-prop", 2048, 512);
        let mut m = Mock::new(SIZE, 4 << 20);
        let mut dq = keeping(&m, V1);
        let mut cache = pool.cache();
        let mut next = 0u16;
        // Heads posted and not yet used; kept ones among them.
        let mut out: HashSet<u16> = HashSet::new();
        let mut kept: Vec<u16> = Vec::new();
        let mut posted = 0usize;
        let mut rng = order;
        let take_used = |ids: Vec<u16>, out: &mut HashSet<u16>, kept: &[u16]| {
            for id in ids {
                prop_assert!(out.remove(&id), "head {} used twice or never posted", id);
                prop_assert!(!kept.contains(&id), "kept head {} used before its return", id);
            }
            Ok(())
        };
        for b in bursts {
            // Only heads that came back are posted again.
            let free = (SIZE as usize) - out.len();
            if b.len() > free.min(16) {
                continue;
            }
            let mut heads = Vec::new();
            let mut h = next;
            while heads.len() < b.len() {
                if !out.contains(&h) {
                    heads.push(h);
                }
                h = (h + 1) % SIZE;
            }
            next = h;
            let before = m.used_idx();
            let mut batch = Batch::new();
            for (&head, &(long, _)) in heads.iter().zip(&b) {
                post_tx(&mut m, head, if long { LONG } else { SHORT });
                out.insert(head);
                posted += 1;
            }
            prop_assert_eq!(dq.dequeue_burst(&mut batch, &mut cache), b.len());
            let take: HashSet<u16> = heads
                .iter()
                .zip(&b)
                .filter(|(_, (long, t))| *long && *t)
                .map(|(h, _)| *h)
                .collect();
            dq.complete_held_keeping(|_, h| take.contains(&h));
            cache.free_batch(&mut batch);
            kept.extend(take.iter().copied());
            take_used(used_ids(&m, before), &mut out, &kept)?;
            // Some sends complete, in a random order.
            let mut back = Vec::new();
            kept.retain(|&h| {
                rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                if rng >> 63 == 1 { back.push(h); false } else { true }
            });
            let before = m.used_idx();
            for &h in &back {
                prop_assert!(dq.return_kept(h));
            }
            dq.publish_kept();
            let mut ids = used_ids(&m, before);
            let mut want = back.clone();
            ids.sort();
            want.sort();
            prop_assert_eq!(&ids, &want);
            take_used(ids, &mut out, &kept)?;
            prop_assert_eq!(dq.kept_outstanding() as usize, kept.len());
        }
        let before = m.used_idx();
        prop_assert_eq!(dq.return_all_kept() as usize, kept.len());
        dq.publish_kept();
        kept.clear();
        take_used(used_ids(&m, before), &mut out, &kept)?;
        prop_assert!(out.is_empty(), "never used: {:?}", out);
        prop_assert_eq!(m.used_idx() as usize, posted);
        prop_assert_eq!(dq.kept_outstanding(), 0);
    }
}
