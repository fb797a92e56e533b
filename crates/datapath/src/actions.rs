//! Packet-editing actions: the header rewrites a rule can ask for. Each is
//! a small function over one packet so it can be table-tested byte by
//! byte; running an action list (outputs, `normal`) is `interpreter.rs`.
//! Header layout comes from `nfv_wire`; these functions only decide which
//! bytes move.

use nfv_mem::Packet;
use nfv_ports::DropReason;
use nfv_wire::l2::TAGGED_HEADER_LEN;
use nfv_wire::{EtherType, EthernetAddress, EthernetFrame, VlanTag, ethernet, vlan};

/// The MAC addresses: what moves when a tag is pushed or stripped.
const MACS_LEN: usize = ethernet::field::SOURCE.end;

#[inline(always)]
fn is_tagged(d: &[u8]) -> bool {
    d.len() >= TAGGED_HEADER_LEN && EthernetFrame::new_unchecked(d).ethertype().is_vlan()
}

/// The Ethernet header of `pkt`, or a `runt` drop if it has none.
#[inline(always)]
fn ethernet(pkt: &mut Packet) -> Result<EthernetFrame<&mut [u8]>, DropReason> {
    EthernetFrame::new_checked(pkt.data_mut()).map_err(|_| DropReason::Runt)
}

/// `mod_dl_src:MAC`
#[inline]
pub fn set_dl_src(pkt: &mut Packet, mac: &[u8; 6]) -> Result<(), DropReason> {
    ethernet(pkt)?.set_src_addr(EthernetAddress(*mac));
    Ok(())
}

/// `mod_dl_dst:MAC`
#[inline]
pub fn set_dl_dst(pkt: &mut Packet, mac: &[u8; 6]) -> Result<(), DropReason> {
    ethernet(pkt)?.set_dst_addr(EthernetAddress(*mac));
    Ok(())
}

/// `push_vlan:TPID` — a new outer tag with TCI 0.
pub fn push_vlan(pkt: &mut Packet, tpid: u16) -> Result<(), DropReason> {
    if pkt.len() < ethernet::HEADER_LEN {
        return Err(DropReason::Runt);
    }
    pkt.prepend(vlan::HEADER_LEN)
        .ok_or(DropReason::NoHeadroom)?;
    let d = pkt.data_mut();
    // The MACs move to the new front; the old EtherType stays where it was
    // and becomes the tag's inner EtherType.
    d.copy_within(vlan::HEADER_LEN..vlan::HEADER_LEN + MACS_LEN, 0);
    EthernetFrame::new_unchecked(&mut *d).set_ethertype(EtherType(tpid));
    VlanTag::new_unchecked(&mut d[ethernet::HEADER_LEN..]).set_tci(0);
    Ok(())
}

/// `strip_vlan` — removes the outer tag; untagged frames pass unchanged.
pub fn strip_vlan(pkt: &mut Packet) -> Result<(), DropReason> {
    if !is_tagged(pkt.data()) {
        return Ok(());
    }
    pkt.data_mut().copy_within(..MACS_LEN, vlan::HEADER_LEN);
    pkt.trim_front(vlan::HEADER_LEN);
    Ok(())
}

/// `mod_vlan_vid:VID` — sets the outer tag's VID, pushing an 802.1Q tag
/// (PCP 0) first if the frame has none (OVS semantics).
pub fn set_vlan_vid(pkt: &mut Packet, vid: u16) -> Result<(), DropReason> {
    if !is_tagged(pkt.data()) {
        push_vlan(pkt, EtherType::VLAN.0)?;
    }
    VlanTag::new_unchecked(&mut pkt.data_mut()[ethernet::HEADER_LEN..]).set_vid(vid);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use nfv_mem::{HugepageMode, MemoryConfig, PacketPool};

    const DST: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
    const SRC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];

    fn frame(tag: Option<(u16, u16)>) -> Vec<u8> {
        let mut f = [DST, SRC].concat();
        if let Some((tpid, tci)) = tag {
            f.extend_from_slice(&tpid.to_be_bytes());
            f.extend_from_slice(&tci.to_be_bytes());
        }
        f.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 20]);
        f
    }

    type Edit = fn(&mut Packet) -> Result<(), DropReason>;
    /// (name, input frame, edit, expected output frame or drop reason)
    type Case = (&'static str, Vec<u8>, Edit, Result<Vec<u8>, DropReason>);

    #[test]
    fn edits_produce_the_expected_bytes() {
        let pool = PacketPool::new(
            "actions",
            &MemoryConfig {
                frame_size: 2048,
                frames: 64,
                hugepages: HugepageMode::Never,
            },
        )
        .unwrap();
        let mut cache = pool.cache();
        let new_mac = [0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff];
        let mut with_src = frame(None);
        with_src[6..12].copy_from_slice(&new_mac);
        let mut with_dst = frame(None);
        with_dst[0..6].copy_from_slice(&new_mac);
        let cases: Vec<Case> = vec![
            (
                "mod_dl_src",
                frame(None),
                |p| set_dl_src(p, &[0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff]),
                Ok(with_src),
            ),
            (
                "mod_dl_dst",
                frame(None),
                |p| set_dl_dst(p, &[0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff]),
                Ok(with_dst),
            ),
            (
                "push_vlan 8100",
                frame(None),
                |p| push_vlan(p, 0x8100),
                Ok(frame(Some((0x8100, 0)))),
            ),
            (
                "push_vlan 88a8 over 8100",
                frame(Some((0x8100, 7))),
                |p| push_vlan(p, 0x88a8),
                Ok({
                    let mut f = [DST, SRC].concat();
                    f.extend_from_slice(&[
                        0x88, 0xa8, 0, 0, 0x81, 0x00, 0, 7, 0x08, 0x00, 0x45, 0, 0, 20,
                    ]);
                    f
                }),
            ),
            (
                "strip_vlan",
                frame(Some((0x8100, 100))),
                strip_vlan,
                Ok(frame(None)),
            ),
            (
                "strip_vlan untagged",
                frame(None),
                strip_vlan,
                Ok(frame(None)),
            ),
            (
                "mod_vlan_vid pushes",
                frame(None),
                |p| set_vlan_vid(p, 42),
                Ok(frame(Some((0x8100, 42)))),
            ),
            (
                "mod_vlan_vid keeps pcp",
                frame(Some((0x8100, 0xa000 | 5))),
                |p| set_vlan_vid(p, 4095),
                Ok(frame(Some((0x8100, 0xa000 | 4095)))),
            ),
            (
                "runt mod_dl_src",
                vec![0; 10],
                |p| set_dl_src(p, &[0; 6]),
                Err(DropReason::Runt),
            ),
            (
                "runt push_vlan",
                vec![0; 13],
                |p| push_vlan(p, 0x8100),
                Err(DropReason::Runt),
            ),
        ];
        for (name, input, edit, want) in cases {
            let mut p = cache.alloc().unwrap();
            p.set_len(input.len()).unwrap();
            p.data_mut().copy_from_slice(&input);
            let got = edit(&mut p).map(|_| p.data().to_vec());
            assert_eq!(got, want, "{name}");
            cache.free(p);
        }
    }

    #[test]
    fn push_without_headroom_is_a_counted_drop_not_a_panic() {
        let pool = PacketPool::new(
            "actions2",
            &MemoryConfig {
                frame_size: 2048,
                frames: 64,
                hugepages: HugepageMode::Never,
            },
        )
        .unwrap();
        let mut cache = pool.cache();
        let mut p = cache.alloc().unwrap();
        p.set_len(64).unwrap();
        assert!(p.trim_front(0));
        // Use all the headroom with repeated pushes: 128 / 4 = 32 fit.
        for _ in 0..32 {
            push_vlan(&mut p, 0x8100).unwrap();
        }
        assert_eq!(push_vlan(&mut p, 0x8100), Err(DropReason::NoHeadroom));
        cache.free(p);
    }
}
