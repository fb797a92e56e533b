//! One-copy forwarding at the virtqueue level (`DeviceQueue::set_one_copy`):
//! a guest's TX chain is dequeued as a split packet (head copied, tail left
//! in the guest's buffer), delivered into another guest's RX queue straight
//! from that buffer, and the TX chain goes back only when the burst ends
//! (`complete_held`), in avail order, exactly once — whatever happened to
//! the packet (delivered, cloned to several outputs, dropped).

mod common;

use common::{Mock, frame, pool};
use nfv_mem::{Batch, PoolCache};
use nfv_virtio::layout::{
    Desc, VIRTIO_F_IN_ORDER, VIRTIO_F_VERSION_1 as V1, VIRTIO_NET_F_MRG_RXBUF as MRG,
    VIRTQ_DESC_F_INDIRECT as INDIRECT, VIRTQ_DESC_F_NEXT as NEXT, VIRTQ_DESC_F_WRITE as WRITE,
};
use nfv_virtio::{DeviceQueue, SPLIT_HEAD, SPLIT_MIN_TAIL};
use proptest::prelude::*;

const SIZE: u16 = 64;
const HDR: usize = 12;

/// How the guest lays one frame out in its TX chain.
#[derive(Clone, Copy, Debug)]
enum Layout {
    /// Header and frame in one buffer (Linux and DPDK with ANY_LAYOUT).
    OneBuffer,
    /// Header alone, then the frame (legacy drivers).
    HeaderApart,
    /// Header + the first `n` frame bytes, then the rest.
    SplitAt(usize),
    /// Header + frame in one buffer behind a one-entry indirect table.
    Indirect,
}

/// Posts `f` (with a zero virtio-net header) as one TX chain at head `h`.
fn post_tx(m: &mut Mock, h: u16, f: &[u8], layout: Layout) {
    let mut with_hdr = vec![0u8; HDR];
    with_hdr.extend_from_slice(f);
    let d = |addr, len: usize, flags, next| Desc {
        addr,
        len: len as u32,
        flags,
        next,
    };
    match layout {
        Layout::OneBuffer => {
            let a = m.buf_with(&with_hdr);
            m.set_desc(h, d(a, with_hdr.len(), 0, 0));
        }
        Layout::HeaderApart | Layout::SplitAt(_) => {
            let cut = match layout {
                Layout::SplitAt(n) => HDR + n,
                _ => HDR,
            };
            let a = m.buf_with(&with_hdr[..cut]);
            let b = m.buf_with(&with_hdr[cut..]);
            // Second descriptor right after the head's (SIZE is the table).
            let second = h + SIZE / 2;
            m.set_desc(h, d(a, cut, NEXT, second));
            m.set_desc(second, d(b, with_hdr.len() - cut, 0, 0));
        }
        Layout::Indirect => {
            let a = m.buf_with(&with_hdr);
            let (t, tl) = m.table(&[d(a, with_hdr.len(), 0, 0)]);
            m.set_desc(h, d(t, tl as usize, INDIRECT, 0));
        }
    }
    m.push_avail(h);
}

/// Posts `n` RX buffers of `len` bytes at heads 0.. (device-writable).
fn post_rx(m: &mut Mock, n: u16, len: usize) -> Vec<*mut u8> {
    (0..n)
        .map(|h| {
            let (a, p) = m.buf(len);
            m.set_desc(
                h,
                Desc {
                    addr: a,
                    len: len as u32,
                    flags: WRITE,
                    next: 0,
                },
            );
            m.push_avail(h);
            p
        })
        .collect()
}

/// Frames the receiving guest got: (used id, bytes after the header).
fn received(m: &Mock, bufs: &[*mut u8]) -> Vec<Vec<u8>> {
    (0..m.used_idx())
        .map(|i| {
            let e = m.used(i);
            let data = m.read(bufs[e.id as usize], e.len as usize);
            data[HDR..].to_vec()
        })
        .collect()
}

struct Row {
    name: &'static str,
    len: usize,
    layout: Layout,
    one_copy: bool,
    /// The packet is split; its head length.
    split_head: Option<usize>,
}

fn rows() -> Vec<Row> {
    let big = SPLIT_HEAD + SPLIT_MIN_TAIL;
    vec![
        Row {
            name: "64 B frames are copied whole",
            len: 64,
            layout: Layout::OneBuffer,
            one_copy: true,
            split_head: None,
        },
        Row {
            name: "a tail shorter than the minimum is copied with the head",
            len: big - 1,
            layout: Layout::OneBuffer,
            one_copy: true,
            split_head: None,
        },
        Row {
            name: "the shortest split frame",
            len: big,
            layout: Layout::OneBuffer,
            one_copy: true,
            split_head: Some(SPLIT_HEAD),
        },
        Row {
            name: "1518 B in one buffer",
            len: 1518,
            layout: Layout::OneBuffer,
            one_copy: true,
            split_head: Some(SPLIT_HEAD),
        },
        Row {
            name: "1518 B with the header in its own buffer",
            len: 1518,
            layout: Layout::HeaderApart,
            one_copy: true,
            split_head: Some(SPLIT_HEAD),
        },
        Row {
            name: "1518 B behind an indirect table",
            len: 1518,
            layout: Layout::Indirect,
            one_copy: true,
            split_head: Some(SPLIT_HEAD),
        },
        Row {
            name: "a frame cut inside the head: the second buffer is the tail",
            len: 1518,
            layout: Layout::SplitAt(60),
            one_copy: true,
            split_head: Some(SPLIT_HEAD),
        },
        Row {
            name: "a frame cut after the head: the last buffer is the tail",
            len: 1518,
            layout: Layout::SplitAt(600),
            one_copy: true,
            split_head: Some(600),
        },
        Row {
            name: "one_copy off: 1518 B copied whole",
            len: 1518,
            layout: Layout::OneBuffer,
            one_copy: false,
            split_head: None,
        },
    ]
}

/// Each row: one frame through TX (split or not as the row says) into an
/// RX queue with and without MRG_RXBUF, byte-exact; the TX chain is used
/// only at `complete_held` when the packet was split.
#[test]
fn frames_cross_in_one_copy_byte_exact() {
    for row in rows() {
        for (rx_features, rx_buf) in [(V1, 2048), (V1 | MRG, 512)] {
            let what = format!("{} (rx features {rx_features:#x})", row.name);
            let f = frame(row.len, row.len as u32);
            let mut tx = Mock::new(SIZE, 64 * 1024);
            post_tx(&mut tx, 3, &f, row.layout);
            let mut txq = tx.device(V1 | VIRTIO_F_IN_ORDER);
            txq.set_one_copy(row.one_copy);
            let p = pool(row.name, 2048, 64);
            let mut cache: PoolCache = p.cache();
            let mut b = Batch::new();
            assert_eq!(txq.dequeue_burst(&mut b, &mut cache), 1, "{what}");
            let pkt = &b[0];
            assert_eq!(pkt.frame_len(), row.len, "{what}: frame length");
            match row.split_head {
                Some(h) => {
                    assert!(pkt.is_split(), "{what}: split");
                    assert_eq!(pkt.len(), h, "{what}: head length");
                    assert_eq!(pkt.data(), &f[..h], "{what}: head bytes");
                    assert_eq!(tx.used_idx(), 0, "{what}: chain held until the burst ends");
                    assert!(txq.holds_chains(), "{what}");
                }
                None => {
                    assert!(!pkt.is_split(), "{what}: whole");
                    assert_eq!(pkt.data(), &f[..], "{what}: bytes");
                    assert_eq!(tx.used_idx(), 1, "{what}: chain returned at once");
                }
            }
            let mut rx = Mock::new(SIZE, 64 * 1024);
            let bufs = post_rx(&mut rx, 8, rx_buf);
            let mut rxq = rx.device(rx_features);
            assert_eq!(
                rxq.enqueue_burst(&mut b, &mut cache),
                1,
                "{what}: delivered"
            );
            txq.complete_held();
            assert_eq!(tx.used_idx(), 1, "{what}: chain returned");
            assert_eq!(tx.used(0).id, 3, "{what}");
            // With MRG_RXBUF the frame spans buffers: their data in used
            // order, the header only in the first.
            let mut joined = Vec::new();
            for i in 0..rx.used_idx() {
                let e = rx.used(i);
                let d = rx.read(bufs[e.id as usize], e.len as usize);
                joined.extend_from_slice(if i == 0 { &d[HDR..] } else { &d[..] });
            }
            assert_eq!(joined, f, "{what}: received bytes");
        }
    }
}

/// The guest rewrites its TX buffer after the switch took the chain (a
/// hostile guest racing the switch): the headers the switch decided on
/// are what the receiver gets; only the tail shows the new bytes.
#[test]
fn headers_rewritten_after_dequeue_do_not_reach_the_receiver() {
    let f = frame(1000, 9);
    let mut tx = Mock::new(SIZE, 64 * 1024);
    let (a, host) = tx.buf(HDR + f.len());
    // SAFETY: `buf` reserved this many bytes.
    unsafe { std::ptr::copy_nonoverlapping(f.as_ptr(), host.add(HDR), f.len()) };
    tx.set_desc(
        0,
        Desc {
            addr: a,
            len: (HDR + f.len()) as u32,
            flags: 0,
            next: 0,
        },
    );
    tx.push_avail(0);
    let mut txq = tx.device(V1);
    txq.set_one_copy(true);
    let p = pool("rewrite", 2048, 64);
    let mut cache = p.cache();
    let mut b = Batch::new();
    assert_eq!(txq.dequeue_burst(&mut b, &mut cache), 1);
    // SAFETY: the whole buffer is the mock's; the guest scribbles on it.
    unsafe { std::ptr::write_bytes(host.add(HDR), 0xee, f.len()) };
    let mut rx = Mock::new(SIZE, 64 * 1024);
    let bufs = post_rx(&mut rx, 1, 2048);
    let mut rxq = rx.device(V1);
    assert_eq!(rxq.enqueue_burst(&mut b, &mut cache), 1);
    txq.complete_held();
    let got = received(&rx, &bufs).concat();
    assert_eq!(&got[..SPLIT_HEAD], &f[..SPLIT_HEAD], "headers as decided");
    assert!(
        got[SPLIT_HEAD..].iter().all(|&x| x == 0xee),
        "tail as the guest left it"
    );
}

/// What happens to one dequeued packet in the model test.
#[derive(Clone, Copy, Debug)]
enum Fate {
    /// Dropped by the switch (no match, bad header...).
    Drop,
    /// Sent to `k` receiving queues (flood, mirror: clones share the tail).
    Outputs(usize),
}

fn fate() -> impl Strategy<Value = Fate> {
    prop_oneof![Just(Fate::Drop), (1usize..=3).prop_map(Fate::Outputs)]
}

fn seg_len() -> impl Strategy<Value = usize> {
    prop_oneof![60usize..=300, 1000usize..=1518]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Random bursts of random frames with random fates, some receivers
    /// out of buffers: every TX chain is returned exactly once, in avail
    /// order, never before its burst ends; every delivered frame is
    /// byte-exact.
    #[test]
    fn chains_return_once_in_order_at_burst_end(
        bursts in prop::collection::vec(
            prop::collection::vec((seg_len(), fate()), 1..=32), 1..=4),
        rx_room in prop::collection::vec(0u16..=40, 3),
        in_order in any::<bool>(),
    ) {
        let mut tx = Mock::new(128, 512 * 1024);
        let feats = V1 | if in_order { VIRTIO_F_IN_ORDER } else { 0 };
        let mut txq = tx.device(feats);
        txq.set_one_copy(true);
        let p = pool("model", 2048, 512);
        let mut cache = p.cache();
        let mut rx: Vec<(Mock, Vec<*mut u8>, DeviceQueue)> = rx_room
            .iter()
            .map(|&n| {
                let mut m = Mock::new(64, 128 * 1024);
                let bufs = post_rx(&mut m, n, 2048);
                let q = m.device(V1);
                (m, bufs, q)
            })
            .collect();
        let mut posted = Vec::new();
        let mut head = 0u16;
        let mut sent_to: Vec<Vec<Vec<u8>>> = vec![Vec::new(); rx.len()];
        for burst in &bursts {
            let base_used = tx.used_idx();
            for (k, &(len, _)) in burst.iter().enumerate() {
                let f = frame(len, (head as u32) << 8 | k as u32);
                // Heads descend so that avail order is not id order.
                let h = 127 - (head % 64);
                post_tx(&mut tx, h, &f, Layout::OneBuffer);
                posted.push((h, f));
                head += 1;
            }
            let mut b = Batch::new();
            let n = txq.dequeue_burst(&mut b, &mut cache);
            prop_assert_eq!(n, burst.len());
            let any_split = b.iter().any(|p| p.is_split());
            for (pkt, &(_, fate)) in b.drain(..).zip(burst) {
                match fate {
                    Fate::Drop => cache.free(pkt),
                    Fate::Outputs(k) => {
                        for (o, r) in rx.iter_mut().enumerate().take(k) {
                            let mut one = Batch::new();
                            one.push(cache.copy(&pkt).unwrap());
                            let mut whole = cache.copy(&pkt).unwrap();
                            prop_assert!(whole.join_tail());
                            if r.2.enqueue_burst(&mut one, &mut cache) == 1 {
                                sent_to[o].push(whole.data().to_vec());
                            }
                            cache.free(whole);
                            cache.free_batch(&mut one);
                        }
                        cache.free(pkt);
                    }
                }
                if any_split {
                    prop_assert_eq!(tx.used_idx(), base_used, "returned before the burst ended");
                }
            }
            txq.complete_held();
            prop_assert_eq!(tx.used_idx(), base_used.wrapping_add(burst.len() as u16));
            prop_assert!(!txq.holds_chains());
        }
        // Every chain once, in avail order (with IN_ORDER a burst may come
        // back as one entry: read as an in-order driver reads it).
        let want: Vec<u16> = posted.iter().map(|(h, _)| *h).collect();
        let used: Vec<u16> = if in_order {
            tx.used_in_order(&want).iter().map(|&(h, _)| h).collect()
        } else {
            (0..tx.used_idx()).map(|i| tx.used(i).id as u16).collect()
        };
        prop_assert_eq!(used, want);
        // Every delivery byte-exact, in the order it was sent.
        for (o, (m, bufs, _)) in rx.iter().enumerate() {
            prop_assert_eq!(&received(m, bufs), &sent_to[o]);
        }
        prop_assert_eq!(cache.cached() + cache.pool().shared_free(), 512, "pool frames leaked");
    }
}
