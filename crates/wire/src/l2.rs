//! Where the network-layer header of an Ethernet frame starts: the one rule
//! for VLAN tags that every reader of frames in nfvswitch follows (flow
//! extraction, the traffic stamp, the generator's receivers).
//!
//! The rule: after the Ethernet II header, up to [`MAX_VLAN_TAGS`] tags are
//! skipped when their TPID is 802.1Q (`0x8100`) or 802.1ad (`0x88a8`), in
//! any order. Two, because the common stacked case in an NFV chain is a
//! C-tagged frame that gets an S-tag pushed on top (QinQ), and the headers
//! inside must stay visible to rules and receivers. A third tag is not
//! skipped: the EtherType reported is then that tag's TPID, and nothing
//! above layer 2 is read. A tag that is cut short (fewer than four bytes
//! left) ends the walk at the TPID as well. The *outer* tag's TCI is the
//! one reported: it is the tag that `dl_vlan` matches and that
//! `mod_vlan_vid` / `strip_vlan` edit.

use crate::bytes::get_u16;
use crate::{EtherType, ethernet, vlan};

/// How many VLAN tags are skipped before the network-layer header.
pub const MAX_VLAN_TAGS: usize = 2;

/// An Ethernet header and one VLAN tag: what a once-tagged frame carries
/// on top of its network-layer packet (interface MTUs allow for this much).
pub const TAGGED_HEADER_LEN: usize = ethernet::HEADER_LEN + vlan::HEADER_LEN;

/// What the layer-2 walk found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct L2Info {
    /// The EtherType after the skipped tags: the network-layer protocol,
    /// or a TPID when a tag was cut short or more than
    /// [`MAX_VLAN_TAGS`] tags are stacked.
    pub ethertype: EtherType,
    /// The outer tag's TCI (PCP, DEI, VID), if the frame has a tag.
    pub outer_tci: Option<u16>,
    /// Offset of the network-layer header (the byte after the last
    /// skipped tag); at most the frame's length.
    pub l3_offset: usize,
}

/// Walks the Ethernet header and up to [`MAX_VLAN_TAGS`] VLAN tags of
/// `frame`. `None` if the frame is shorter than an Ethernet header. Never
/// panics; reads at most the first 22 bytes.
#[inline(always)]
pub fn walk(frame: &[u8]) -> Option<L2Info> {
    let mut ethertype = EtherType(get_u16(frame.get(ethernet::field::ETHERTYPE)?));
    let mut at = ethernet::HEADER_LEN;
    let mut outer_tci = None;
    for _ in 0..MAX_VLAN_TAGS {
        if !ethertype.is_vlan() {
            break;
        }
        let Some(tag) = frame.get(at..at + vlan::HEADER_LEN) else {
            break;
        };
        if outer_tci.is_none() {
            outer_tci = Some(get_u16(&tag[vlan::field::TCI]));
        }
        ethertype = EtherType(get_u16(&tag[vlan::field::ETHERTYPE]));
        at += vlan::HEADER_LEN;
    }
    Some(L2Info {
        ethertype,
        outer_tci,
        l3_offset: at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    /// Ethernet header (zero MACs) with `tags` (TPID, TCI) and then
    /// `inner` as EtherType, followed by four payload bytes.
    fn frame(tags: &[(u16, u16)], inner: u16) -> Vec<u8> {
        let mut f = std::vec![0u8; 12];
        for (tpid, tci) in tags {
            f.extend_from_slice(&tpid.to_be_bytes());
            f.extend_from_slice(&tci.to_be_bytes());
        }
        f.extend_from_slice(&inner.to_be_bytes());
        f.extend_from_slice(&[0x45, 0, 0, 0]);
        f
    }

    #[test]
    fn skips_at_most_two_tags() {
        /// (name, frame, ethertype, outer tci, l3 offset)
        type Case = (&'static str, Vec<u8>, u16, Option<u16>, usize);
        let cases: [Case; 7] = [
            ("untagged", frame(&[], 0x0800), 0x0800, None, 14),
            ("802.1Q", frame(&[(0x8100, 5)], 0x0800), 0x0800, Some(5), 18),
            (
                "802.1ad",
                frame(&[(0x88a8, 6)], 0x0806),
                0x0806,
                Some(6),
                18,
            ),
            (
                "QinQ S+C",
                frame(&[(0x88a8, 7), (0x8100, 8)], 0x0800),
                0x0800,
                Some(7),
                22,
            ),
            (
                "two C-tags",
                frame(&[(0x8100, 9), (0x8100, 10)], 0x0800),
                0x0800,
                Some(9),
                22,
            ),
            (
                "three tags: the third TPID is the EtherType",
                frame(&[(0x88a8, 1), (0x8100, 2), (0x8100, 3)], 0x0800),
                0x8100,
                Some(1),
                22,
            ),
            ("not a tag", frame(&[], 0x86dd), 0x86dd, None, 14),
        ];
        for (name, f, ethertype, tci, l3) in cases {
            let got = walk(&f).unwrap();
            assert_eq!(
                got,
                L2Info {
                    ethertype: EtherType(ethertype),
                    outer_tci: tci,
                    l3_offset: l3
                },
                "{name}"
            );
        }
    }

    #[test]
    fn short_frames_stop_the_walk_without_panicking() {
        let qinq = frame(&[(0x88a8, 7), (0x8100, 8)], 0x0800);
        for len in 0..qinq.len() {
            let got = walk(&qinq[..len]);
            match len {
                0..14 => assert_eq!(got, None, "len {len}"),
                14..18 => assert_eq!(
                    got,
                    Some(L2Info {
                        ethertype: EtherType::QINQ,
                        outer_tci: None,
                        l3_offset: 14
                    }),
                    "len {len}"
                ),
                18..22 => assert_eq!(
                    got,
                    Some(L2Info {
                        ethertype: EtherType::VLAN,
                        outer_tci: Some(7),
                        l3_offset: 18
                    }),
                    "len {len}"
                ),
                _ => assert_eq!(got.unwrap().l3_offset, 22, "len {len}"),
            }
            if let Some(i) = got {
                assert!(i.l3_offset <= len);
            }
        }
    }
}
