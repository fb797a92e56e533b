//! Target `flow_extract`: `nfv_flow::extract::extract`, which every PMD
//! runs on every frame a VNF or a wire sends, on hostile frames.
//!
//! Input: two bytes of in_port, then the frame. Checks: no panic or
//! out-of-bounds read; the key carries the in_port and, for frames of at
//! least an Ethernet header, the frame's MAC addresses; frames shorter
//! than that give a key with only the in_port; the same bytes give the
//! same key (and hash) wherever they sit in memory.

use crate::bytes::Bytes;
use nfv_flow::FlowKey;
use nfv_flow::extract::{MIN_FRAME, extract};

pub fn run(data: &[u8]) {
    let mut b = Bytes::new(data);
    let port = b.u16();
    let frame = b.rest();
    let k = extract(port, frame);
    assert_eq!(k.in_port(), port);
    if frame.len() < MIN_FRAME {
        let mut only = FlowKey::ZERO;
        only.set_in_port(port);
        assert_eq!(k, only, "short frame");
        return;
    }
    assert_eq!(k.dl_dst(), frame[0..6], "dl_dst");
    assert_eq!(k.dl_src(), frame[6..12], "dl_src");
    // A copy at another alignment: extraction reads bytes, not words.
    let mut moved = vec![0u8; frame.len() + 1];
    moved[1..].copy_from_slice(frame);
    let k2 = extract(port, &moved[1..]);
    assert_eq!(k, k2, "same bytes, other address");
    assert_eq!(k.hash(), k2.hash());
    assert_eq!(k.masked(&FlowKey::ALL), k);
}
