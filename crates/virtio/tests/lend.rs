//! Lending guest RX buffers (`DeviceQueue::lend_*`): which chains may be
//! lent, what completing and returning write into the ring, and that every
//! lent head comes back exactly once, whatever the order — alongside the
//! copy path on the same ring.

mod common;

use common::{Mock, frame, pool};
use nfv_mem::Batch;
use nfv_virtio::layout::{
    Desc, VIRTIO_F_IN_ORDER, VIRTIO_F_VERSION_1 as V1, VIRTIO_NET_F_MRG_RXBUF as MRG,
    VIRTQ_DESC_F_INDIRECT as INDIRECT, VIRTQ_DESC_F_NEXT as NEXT, VIRTQ_DESC_F_WRITE as WRITE,
};
use nfv_virtio::{DeviceQueue, Lent, NotLendable};
use proptest::prelude::*;
use std::collections::HashSet;

const SIZE: u16 = 64;
const HDR: usize = 12;

fn desc(addr: u64, len: u32, flags: u16, next: u16) -> Desc {
    Desc {
        addr,
        len,
        flags,
        next,
    }
}

/// Posts one writable buffer of `len` bytes at head `h`; its host pointer.
fn post(m: &mut Mock, h: u16, len: usize) -> *mut u8 {
    let (a, p) = m.buf(len);
    m.set_desc(h, desc(a, len as u32, WRITE, 0));
    m.push_avail(h);
    p
}

/// Peeks and takes every pending lendable chain.
fn lend_all(dq: &mut DeviceQueue) -> Vec<Lent> {
    let n = dq.lend_pending();
    let mut got = Vec::new();
    for k in 0..n {
        match dq.lend_peek(k) {
            Ok(l) => got.push(l),
            Err(_) => break,
        }
    }
    dq.lend_take(&got);
    got
}

#[test]
fn which_chains_are_lent() {
    type Post = fn(&mut Mock, u16);
    let rows: Vec<(&str, Post, Result<(), NotLendable>)> = vec![
        (
            "one writable buffer",
            |m, h| {
                post(m, h, 2048);
            },
            Ok(()),
        ),
        (
            "read-only buffer",
            |m, h| {
                let (a, _) = m.buf(2048);
                m.set_desc(h, desc(a, 2048, 0, 0));
                m.push_avail(h);
            },
            Err(NotLendable::Shape),
        ),
        (
            "two descriptors",
            |m, h| {
                let (a, _) = m.buf(12);
                let (b, _) = m.buf(2048);
                m.set_desc(h, desc(a, 12, WRITE | NEXT, h + 1));
                m.set_desc(h + 1, desc(b, 2048, WRITE, 0));
                m.push_avail(h);
            },
            Err(NotLendable::Shape),
        ),
        (
            "indirect table",
            |m, h| {
                let (b, _) = m.buf(2048);
                let (t, tl) = m.table(&[desc(b, 2048, WRITE, 0)]);
                m.set_desc(h, desc(t, tl, INDIRECT | WRITE, 0));
                m.push_avail(h);
            },
            Err(NotLendable::Shape),
        ),
        (
            "zero length",
            |m, h| {
                let (a, _) = m.buf(16);
                m.set_desc(h, desc(a, 0, WRITE, 0));
                m.push_avail(h);
            },
            Err(NotLendable::Shape),
        ),
        (
            "outside guest memory",
            |m, h| {
                let end = m.gpa_end();
                m.set_desc(h, desc(end - 100, 2048, WRITE, 0));
                m.push_avail(h);
            },
            Err(NotLendable::BadChain),
        ),
        (
            "head out of range",
            |m, _| {
                m.push_avail(SIZE + 3);
            },
            Err(NotLendable::BadChain),
        ),
    ];
    for (name, setup, want) in rows {
        let mut m = Mock::new(SIZE, 1 << 16);
        let mut dq = m.device(V1 | MRG);
        setup(&mut m, 4);
        assert_eq!(dq.lend_pending(), 1, "{name}");
        let got = dq.lend_peek(0).map(|_| ());
        assert_eq!(got, want, "{name}");
        // Peeking takes nothing: the chain is still pending.
        assert_eq!(dq.last_avail_idx(), 0, "{name}");
    }
}

#[test]
fn in_order_rings_do_not_lend() {
    let mut m = Mock::new(SIZE, 1 << 16);
    let mut dq = m.device(V1 | MRG | VIRTIO_F_IN_ORDER);
    post(&mut m, 0, 2048);
    assert_eq!(dq.lendable(), Err(NotLendable::InOrder));
    assert_eq!(dq.lend_pending(), 0);
    assert_eq!(dq.lend_peek(0), Err(NotLendable::InOrder));
}

#[test]
fn completing_writes_header_and_used_entry_and_never_the_frame() {
    let mut m = Mock::new(SIZE, 1 << 16);
    let mut dq = m.device(V1 | MRG);
    let bufs: Vec<*mut u8> = (0..4).map(|h| post(&mut m, h, 2048)).collect();
    let lent = lend_all(&mut dq);
    assert_eq!(lent.len(), 4);
    assert_eq!(dq.last_avail_idx(), 4);
    assert_eq!(dq.lent_outstanding(), 4);
    // The "kernel" writes frames after the header room of buffers 2 and 0
    // (in that order); stale header bytes must be overwritten.
    for (i, &h) in [2u16, 0].iter().enumerate() {
        let f = frame(60 + 100 * i, i as u32);
        // SAFETY: the mock buffer holds 2048 bytes.
        unsafe {
            std::ptr::write_bytes(bufs[h as usize], 0xaa, HDR);
            std::ptr::copy_nonoverlapping(f.as_ptr(), bufs[h as usize].add(HDR), f.len());
        }
        let before = m.read(bufs[h as usize], HDR + f.len());
        assert!(dq.complete_lent(h, f.len() as u32));
        let after = m.read(bufs[h as usize], HDR + f.len());
        assert_eq!(&after[HDR..], &before[HDR..], "frame bytes untouched");
        let mut hdr = [0u8; HDR];
        hdr[10] = 1; // num_buffers
        assert_eq!(&after[..HDR], &hdr, "virtio-net header");
    }
    // Buffer 3 is returned (frame sent elsewhere); 1 stays lent.
    assert!(dq.return_lent(3));
    assert_eq!(m.used_idx(), 0, "nothing published yet");
    dq.publish();
    let used: Vec<(u32, u32)> = (0..m.used_idx())
        .map(|i| (m.used(i).id, m.used(i).len))
        .collect();
    assert_eq!(
        used,
        vec![(2, HDR as u32 + 60), (0, HDR as u32 + 160), (3, 0)]
    );
    // Twice, or a head never lent: refused, nothing written.
    assert!(!dq.complete_lent(2, 60));
    assert!(!dq.return_lent(3));
    assert!(!dq.complete_lent(40, 60));
    assert!(!dq.complete_lent(SIZE + 1, 60));
    assert_eq!(dq.stats().lent_stale, 4);
    // The ring stops: the last lent buffer goes back empty.
    assert_eq!(dq.return_all_lent(), 1);
    assert_eq!(m.used_idx(), 4);
    assert_eq!((m.used(3).id, m.used(3).len), (1, 0));
    assert_eq!(dq.lent_outstanding(), 0);
    let s = dq.stats();
    assert_eq!((s.lent, s.zero_copy, s.lent_returned), (4, 2, 2));
}

#[test]
fn a_head_posted_again_while_lent_is_not_lent_twice() {
    let mut m = Mock::new(SIZE, 1 << 16);
    let mut dq = m.device(V1 | MRG);
    post(&mut m, 5, 2048);
    assert_eq!(lend_all(&mut dq).len(), 1);
    // A hostile driver posts head 5 again before it was used.
    m.push_avail(5);
    assert_eq!(dq.lend_pending(), 1);
    assert_eq!(dq.lend_peek(0), Err(NotLendable::BadChain));
}

#[test]
fn the_copy_path_uses_the_buffers_after_the_lent_ones() {
    let mut m = Mock::new(SIZE, 1 << 16);
    let mut dq = m.device(V1 | MRG);
    let bufs: Vec<*mut u8> = (0..4).map(|h| post(&mut m, h, 2048)).collect();
    let p = pool("lend-copy", 2048, 64);
    let mut cache = p.cache();
    let got: Vec<Lent> = (0..2).map(|k| dq.lend_peek(k).unwrap()).collect();
    dq.lend_take(&got);
    let mut b = Batch::new();
    let f = frame(100, 7);
    let mut pkt = cache.alloc().unwrap();
    pkt.set_len(f.len()).unwrap();
    pkt.data_mut().copy_from_slice(&f);
    b.push(pkt);
    assert_eq!(dq.enqueue_burst(&mut b, &mut cache), 1);
    assert_eq!((m.used(0).id, m.used(0).len), (2, (HDR + 100) as u32));
    assert_eq!(&m.read(bufs[2], HDR + 100)[HDR..], &f[..]);
    assert!(dq.complete_lent(0, 64));
    dq.publish();
    assert_eq!(m.used_idx(), 2);
    assert_eq!(m.used(1).id, 0);
}

proptest! {
    /// Random interleavings of lending, completing, returning and copy
    /// deliveries: every posted head is used exactly once, never while
    /// still lent, and lent buffers carry their own length.
    #[test]
    fn every_head_comes_back_exactly_once(ops in proptest::collection::vec(0u8..4, 1..200)) {
        let mut m = Mock::new(SIZE, 1 << 18);
        let mut dq = m.device(V1 | MRG);
        let p = pool("lend-prop", 2048, 256);
        let mut cache = p.cache();
        let mut next_head = 0u16;
        let mut posted = 0usize;
        let mut lent: Vec<u16> = Vec::new();
        let mut completed: Vec<(u16, u32)> = Vec::new();
        let mut x = 12345u32;
        for op in ops {
            x = x.wrapping_mul(1103515245).wrapping_add(12345);
            match op {
                0 => {
                    // Post up to 3 buffers, each head once (so a head in
                    // the used ring twice is a bug, not reuse).
                    for _ in 0..3 {
                        if posted >= SIZE as usize - 1 {
                            break;
                        }
                        let h = next_head % SIZE;
                        next_head = next_head.wrapping_add(1);
                        post(&mut m, h, 2048);
                        posted += 1;
                    }
                }
                1 => {
                    let n = dq.lend_pending().min(4);
                    let got: Vec<Lent> = (0..n).map_while(|k| dq.lend_peek(k).ok()).collect();
                    dq.lend_take(&got);
                    lent.extend(got.iter().map(|l| l.head));
                }
                2 if !lent.is_empty() => {
                    let i = x as usize % lent.len();
                    let h = lent.swap_remove(i);
                    if x & 0x100 != 0 {
                        let len = 60 + x % 1400;
                        prop_assert!(dq.complete_lent(h, len));
                        completed.push((h, len + HDR as u32));
                    } else {
                        prop_assert!(dq.return_lent(h));
                        completed.push((h, 0));
                    }
                    dq.publish();
                }
                _ => {
                    let mut b = Batch::new();
                    let mut pkt = cache.alloc().unwrap();
                    pkt.set_len(64).unwrap();
                    b.push(pkt);
                    dq.enqueue_burst(&mut b, &mut cache);
                    cache.free_batch(&mut b);
                }
            }
        }
        dq.return_all_lent();
        for h in lent.drain(..) {
            completed.push((h, 0));
        }
        // Every used entry names a distinct head.
        let used: Vec<(u32, u32)> = (0..m.used_idx()).map(|i| (m.used(i).id, m.used(i).len)).collect();
        let ids: HashSet<u32> = used.iter().map(|u| u.0).collect();
        prop_assert_eq!(ids.len(), used.len(), "a head used twice: {:?}", used);
        // Lent heads carry the length they were completed with.
        for (h, len) in completed {
            prop_assert!(used.contains(&(h as u32, len)), "head {} len {} missing", h, len);
        }
        // Everything taken came back.
        prop_assert_eq!(m.used_idx(), dq.last_avail_idx());
        prop_assert_eq!(dq.lent_outstanding(), 0);
    }
}
