//! VIRTIO_F_IN_ORDER (offered by the vhost-user port): the device must use
//! chains in the order they were made available — including bad chains
//! (returned with length 0) and chains too small for a packet (left for
//! the next one). In-order drivers (DPDK's virtio PMD) match used entries
//! to their own descriptors by position, so one chain out of order would
//! hand them the wrong buffer. Each row scrambles the heads, plants a
//! problem and checks the used ring against the avail order.

mod common;

use common::{Mock, frame, pool};
use nfv_mem::{Batch, PoolCache};
use nfv_virtio::layout::{
    Desc, VIRTIO_F_IN_ORDER, VIRTIO_F_VERSION_1 as V1, VIRTIO_NET_F_MRG_RXBUF as MRG,
    VIRTQ_DESC_F_WRITE as WRITE,
};

const SIZE: u16 = 16;
/// Heads posted, in avail order (deliberately not ascending).
const HEADS: [u16; 5] = [5, 2, 7, 0, 3];

#[derive(Clone, Copy, Debug)]
enum Problem {
    None,
    /// The chain of this head points at guest address 0 (bad memory).
    BadChain(u16),
    /// The chain of this head is 20 bytes: no room for header + frame.
    TooSmall(u16),
}

#[derive(Clone, Copy, Debug)]
enum Dir {
    /// Driver TX: the device dequeues every chain.
    Tx,
    /// Driver RX: the device delivers this many 100-byte packets.
    Rx { packets: usize, features: u64 },
}

struct Row {
    name: &'static str,
    dir: Dir,
    problem: Problem,
    /// Used ring after the burst: (id, length or None for "any > 0").
    used: &'static [(u16, Option<u32>)],
}

fn rows() -> Vec<Row> {
    vec![
        Row {
            name: "tx: every chain returned in avail order",
            dir: Dir::Tx,
            problem: Problem::None,
            used: &[
                (5, Some(0)),
                (2, Some(0)),
                (7, Some(0)),
                (0, Some(0)),
                (3, Some(0)),
            ],
        },
        Row {
            name: "tx: a bad chain keeps its place",
            dir: Dir::Tx,
            problem: Problem::BadChain(7),
            used: &[
                (5, Some(0)),
                (2, Some(0)),
                (7, Some(0)),
                (0, Some(0)),
                (3, Some(0)),
            ],
        },
        Row {
            name: "rx: packets fill chains in avail order",
            dir: Dir::Rx {
                packets: 4,
                features: V1 | VIRTIO_F_IN_ORDER,
            },
            problem: Problem::None,
            used: &[
                (5, Some(112)),
                (2, Some(112)),
                (7, Some(112)),
                (0, Some(112)),
            ],
        },
        Row {
            name: "rx: a bad chain is returned empty in its place",
            dir: Dir::Rx {
                packets: 4,
                features: V1 | VIRTIO_F_IN_ORDER,
            },
            problem: Problem::BadChain(7),
            used: &[(5, Some(112)), (2, Some(112)), (7, Some(0)), (0, Some(112))],
        },
        Row {
            name: "rx without MRG_RXBUF: a chain too small stays for the next packet",
            dir: Dir::Rx {
                packets: 3,
                features: V1 | VIRTIO_F_IN_ORDER,
            },
            problem: Problem::TooSmall(2),
            // A packet that does not fit is dropped and the small chain is
            // not skipped over, so the next (same-sized) packets are
            // dropped too: nothing after it is used out of order.
            used: &[(5, Some(112))],
        },
        Row {
            name: "rx with MRG_RXBUF: a small chain is merged, in order",
            dir: Dir::Rx {
                packets: 2,
                features: V1 | MRG | VIRTIO_F_IN_ORDER,
            },
            problem: Problem::TooSmall(2),
            used: &[(5, Some(112)), (2, Some(20)), (7, Some(92))],
        },
    ]
}

fn run(row: &Row) {
    let mut m = Mock::new(SIZE, 64 * 1024);
    let tx_buf = {
        let mut v = vec![0u8; 12];
        v.extend(frame(88, 7));
        v
    };
    for &h in &HEADS {
        let (addr, len) = match row.problem {
            Problem::BadChain(b) if b == h => (0, 100),
            Problem::TooSmall(s) if s == h => (m.buf(20).0, 20),
            _ => match row.dir {
                Dir::Tx => (m.buf_with(&tx_buf), tx_buf.len() as u32),
                Dir::Rx { .. } => (m.buf(2048).0, 2048),
            },
        };
        let flags = match row.dir {
            Dir::Tx => 0,
            Dir::Rx { .. } => WRITE,
        };
        m.set_desc(
            h,
            Desc {
                addr,
                len,
                flags,
                next: 0,
            },
        );
        m.push_avail(h);
    }
    let p = pool(row.name, 2048, 64);
    let mut cache: PoolCache = p.cache();
    let mut batch = Batch::new();
    match row.dir {
        Dir::Tx => {
            let mut q = m.device(V1 | VIRTIO_F_IN_ORDER);
            q.dequeue_burst(&mut batch, &mut cache);
            cache.free_batch(&mut batch);
        }
        Dir::Rx { packets, features } => {
            let mut q = m.device(features);
            for i in 0..packets {
                let mut pkt = cache.alloc().unwrap();
                pkt.room_mut()[..100].copy_from_slice(&frame(100, i as u32));
                pkt.set_len(100).unwrap();
                batch.push(pkt);
            }
            q.enqueue_burst(&mut batch, &mut cache);
            cache.free_batch(&mut batch);
        }
    }
    let got = m.used_in_order(&HEADS);
    if let Dir::Tx = row.dir {
        // Chains the device read go back as one entry per burst (virtio
        // 1.2 §2.7.9): at the burst's first slot, the last chain's id.
        let first = m.used(0);
        assert_eq!(
            (first.id as u16, first.len),
            (*HEADS.last().unwrap(), 0),
            "{}: one used entry for the burst",
            row.name
        );
    }
    assert_eq!(got.len(), row.used.len(), "{}: used ring {got:?}", row.name);
    for (k, (&(id, len), want)) in got.iter().zip(row.used).enumerate() {
        assert_eq!(id, want.0, "{}: used[{k}] in {got:?}", row.name);
        match want.1 {
            Some(l) => assert_eq!(len, l, "{}: used[{k}] length in {got:?}", row.name),
            None => assert!(len > 0, "{}: used[{k}] in {got:?}", row.name),
        }
    }
}

#[test]
fn chains_are_used_in_avail_order() {
    for row in rows() {
        run(&row);
    }
}
