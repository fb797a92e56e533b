//! Target `flow_actions`: the datapath's packet-editing actions
//! (`nfv_datapath::actions`: set_dl_src/dst, push_vlan, strip_vlan,
//! set_vlan_vid) in any order on hostile frames, each followed by the key
//! extraction the next PMD would run. Only public functions, so the target
//! follows the actions wherever they move.
//!
//! Input: a byte with the number of actions (0-15) and each action (an
//! opcode byte and its operand bytes), then the frame. Checks, per action
//! that succeeds: the bytes it promises (MACs, TPID, VID) and the length
//! change; an action that fails leaves the frame unchanged.

use crate::bytes::Bytes;
use nfv_datapath::actions::{push_vlan, set_dl_dst, set_dl_src, set_vlan_vid, strip_vlan};
use nfv_flow::extract::extract;
use nfv_mem::{HugepageMode, MemoryConfig, Packet, PacketPool, PoolCache};
use std::cell::RefCell;
use std::sync::Arc;

thread_local! {
    static POOL: RefCell<Option<(Arc<PacketPool>, PoolCache)>> = const { RefCell::new(None) };
}

fn tagged(d: &[u8]) -> bool {
    d.len() >= 18 && matches!(u16::from_be_bytes([d[12], d[13]]), 0x8100 | 0x88a8)
}

fn apply(b: &mut Bytes, pkt: &mut Packet) {
    let before = pkt.data().to_vec();
    let op = b.u8() % 5;
    let mac = [b.u8(), b.u8(), b.u8(), b.u8(), b.u8(), b.u8()];
    let arg = b.u16();
    let r = match op {
        0 => set_dl_src(pkt, &mac),
        1 => set_dl_dst(pkt, &mac),
        2 => push_vlan(pkt, arg),
        3 => strip_vlan(pkt),
        _ => set_vlan_vid(pkt, arg),
    };
    let d = pkt.data();
    if r.is_err() {
        assert_eq!(d, &before[..], "op {op} failed but changed the frame");
        return;
    }
    match op {
        0 => assert!(d.len() == before.len() && d[6..12] == mac && d[..6] == before[..6]),
        1 => assert!(d.len() == before.len() && d[..6] == mac && d[6..] == before[6..]),
        2 => {
            assert_eq!(d.len(), before.len() + 4);
            assert_eq!(d[12..14], arg.to_be_bytes());
            assert_eq!(d[..12], before[..12]);
            assert_eq!(d[16..], before[12..]);
        }
        3 if tagged(&before) => {
            assert_eq!(d.len(), before.len() - 4);
            assert_eq!(d[..12], before[..12]);
            assert_eq!(d[12..], before[16..]);
        }
        3 => assert_eq!(d, &before[..], "strip_vlan on an untagged frame"),
        _ => {
            assert!(tagged(d), "set_vlan_vid left no tag");
            let tci = u16::from_be_bytes([d[14], d[15]]);
            assert_eq!(tci & 0x0fff, arg & 0x0fff);
            let grew = if tagged(&before) { 0 } else { 4 };
            assert_eq!(d.len(), before.len() + grew);
        }
    }
    let _ = extract(pkt.in_port(), pkt.data());
}

pub fn run(data: &[u8]) {
    let mut b = Bytes::new(data);
    let n = b.u8() % 16;
    let ops: Vec<u8> = (0..n as usize * 9).map(|_| b.u8()).collect();
    let frame = b.rest();
    POOL.with(|p| {
        let mut p = p.borrow_mut();
        let (_, cache) = p.get_or_insert_with(|| {
            let cfg = MemoryConfig {
                frame_size: 2048,
                frames: 1024,
                hugepages: HugepageMode::Never,
            };
            let pool = PacketPool::new("fuzz-actions", &cfg).expect("pool");
            let cache = pool.cache();
            (pool, cache)
        });
        let mut pkt = cache.alloc().expect("a free packet");
        let len = frame.len().min(pkt.max_len());
        if pkt.set_len(len).is_ok() {
            pkt.data_mut().copy_from_slice(&frame[..len]);
            let mut ob = Bytes::new(&ops);
            for _ in 0..n {
                apply(&mut ob, &mut pkt);
            }
        }
        cache.free(pkt);
    });
}
