//! Packet-editing actions: the header rewrites a rule can ask for. Each is
//! a small function over one packet so it can be table-tested byte by
//! byte; running an action list (outputs, `normal`) is `interpreter.rs`.
//! Header layout comes from `nfv_wire`; these functions only decide which
//! bytes move.

use nfv_mem::Packet;
use nfv_offload::OffloadMeta;
use nfv_ports::DropReason;
use nfv_wire::l2::TAGGED_HEADER_LEN;
use nfv_wire::{
    EtherType, EthernetAddress, EthernetFrame, IpProtocol, Ipv4Packet, Ipv6Packet, VlanTag,
    checksum, ethernet, icmpv6, ipv4, ipv6, tcp, udp, vlan,
};

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

/// Where an IP packet's headers sit in a frame: the IPv4 or IPv6 header
/// at `l3`, and for TCP, UDP or ICMPv6 (not a later fragment, which
/// carries no L4 header) the L4 checksum field at `l4_csum`, with the
/// protocol. Everything here lies within the packet's data — a split
/// packet's head holds every header (`SPLIT_HEAD`), and nothing past it
/// is read.
struct IpLayout {
    l3: usize,
    v6: bool,
    l4: Option<(usize, IpProtocol)>,
}

/// The layout of `d` if it is an IPv4 packet with a sane header (version
/// 4, header length at least 20 and within the data) or an IPv6 packet
/// (version 6, its extension headers walked as flow extraction walks
/// them); `None` otherwise, and the L3/L4 rewrites leave such frames alone.
fn ip_layout(d: &[u8]) -> Option<IpLayout> {
    let l2 = nfv_wire::l2::walk(d)?;
    let l3 = l2.l3_offset;
    let (l4_at, proto, v6) = if l2.ethertype == EtherType::IPV4 {
        if d.len() < l3 + ipv4::HEADER_LEN {
            return None;
        }
        let ip = Ipv4Packet::new_unchecked(&d[l3..]);
        let ihl = usize::from(ip.header_len());
        if ip.version() != 4 || ihl < ipv4::HEADER_LEN || d.len() < l3 + ihl {
            return None;
        }
        let proto = (ip.frag_offset() == 0).then(|| ip.protocol());
        (l3 + ihl, proto, false)
    } else if l2.ethertype == EtherType::IPV6 {
        if d.len() < l3 + ipv6::HEADER_LEN {
            return None;
        }
        let ip = Ipv6Packet::new_unchecked(&d[l3..]);
        if ip.version() != 6 {
            return None;
        }
        let up = ipv6::upper_layer(ip.next_header(), &d[l3 + ipv6::HEADER_LEN..]);
        let proto = up.complete.then_some(up.protocol);
        (l3 + ipv6::HEADER_LEN + up.offset, proto, true)
    } else {
        return None;
    };
    let l4 = match proto {
        Some(p @ (IpProtocol::TCP | IpProtocol::UDP))
            if d.len() >= l4_at + l4_csum_offset(p) + 2 =>
        {
            Some((l4_at + l4_csum_offset(p), p))
        }
        Some(IpProtocol::ICMPV6) if v6 && d.len() >= l4_at + icmpv6::field::CHECKSUM.end => {
            Some((l4_at + icmpv6::field::CHECKSUM.start, IpProtocol::ICMPV6))
        }
        _ => None,
    };
    Some(IpLayout { l3, v6, l4 })
}

/// True when the frame's L4 checksum field holds a partial checksum (a
/// guest's NEEDS_CSUM offload starting at `l4_start`): that field then
/// covers only the pseudo-header, summed, and the L4 bytes are summed
/// when the checksum is completed, after any rewrite.
fn partial_l4_checksum(pkt: &Packet, l4_start: usize) -> bool {
    pkt.offload().is_some_and(|h| {
        let m = OffloadMeta::from_virtio_hdr(&h);
        m.needs_csum() && usize::from(m.csum_start) == l4_start
    })
}

fn get16(d: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([d[at], d[at + 1]])
}

fn put16(d: &mut [u8], at: usize, v: u16) {
    d[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// Updates the L4 checksum at `at` for a change of the covered 32-bit
/// value `old` → `new` (RFC 1624). A UDP checksum of 0 means "none" and
/// stays 0; a computed 0 is sent as 0xffff (RFC 768).
fn update_l4(d: &mut [u8], at: usize, proto: IpProtocol, old: u32, new: u32) {
    let csum = get16(d, at);
    if proto == IpProtocol::UDP && csum == 0 {
        return;
    }
    let mut updated = checksum::update32(csum, old, new);
    if proto == IpProtocol::UDP && updated == 0 {
        updated = 0xffff;
    }
    put16(d, at, updated);
}

/// [`update_l4`] for an IPv6 address under the L4 checksum (TCP, UDP or
/// ICMPv6 all cover the pseudo-header).
fn update_l4_128(d: &mut [u8], at: usize, proto: IpProtocol, old: u128, new: u128) {
    let csum = get16(d, at);
    if proto == IpProtocol::UDP && csum == 0 {
        return;
    }
    let mut updated = checksum::update128(csum, old, new);
    if proto == IpProtocol::UDP && updated == 0 {
        updated = 0xffff;
    }
    put16(d, at, updated);
}

/// `mod_nw_src` / `mod_nw_dst`: rewrites an IPv4 address and the
/// checksums that cover it (the IPv4 header's; TCP's or UDP's through the
/// pseudo-header, or the partial sum a checksum offload left there).
pub fn set_nw_addr(pkt: &mut Packet, src: bool, addr: u32) -> Result<(), DropReason> {
    let Some(at) = ip_layout(pkt.data()).filter(|a| !a.v6) else {
        return Ok(());
    };
    let partial = at
        .l4
        .is_some_and(|(csum, p)| partial_l4_checksum(pkt, csum - l4_csum_offset(p)));
    let d = pkt.data_mut();
    let field = if src {
        ipv4::field::SRC_ADDR
    } else {
        ipv4::field::DST_ADDR
    };
    let field = at.l3 + field.start..at.l3 + field.end;
    let old = u32::from_be_bytes([
        d[field.start],
        d[field.start + 1],
        d[field.start + 2],
        d[field.start + 3],
    ]);
    if old == addr {
        return Ok(());
    }
    d[field].copy_from_slice(&addr.to_be_bytes());
    let ip_csum = at.l3 + ipv4::field::CHECKSUM.start;
    put16(d, ip_csum, checksum::update32(get16(d, ip_csum), old, addr));
    match at.l4 {
        Some((csum, _)) if partial => {
            let sum = nfv_offload::checksum::partial_update32(get16(d, csum), old, addr);
            put16(d, csum, sum);
        }
        Some((csum, proto)) => update_l4(d, csum, proto, old, addr),
        None => {}
    }
    Ok(())
}

/// `set_field:ADDR->ipv6_src` / `->ipv6_dst`: rewrites an IPv6 address
/// and the TCP, UDP or ICMPv6 checksum over it (or the partial sum a
/// checksum offload left there). IPv6 has no header checksum.
pub fn set_ipv6_addr(pkt: &mut Packet, src: bool, addr: [u8; 16]) -> Result<(), DropReason> {
    let Some(at) = ip_layout(pkt.data()).filter(|a| a.v6) else {
        return Ok(());
    };
    let partial = at
        .l4
        .is_some_and(|(csum, p)| partial_l4_checksum(pkt, csum - l4_csum_offset(p)));
    let field = if src {
        ipv6::field::SRC_ADDR
    } else {
        ipv6::field::DST_ADDR
    };
    let d = pkt.data_mut();
    let bytes = &mut d[at.l3 + field.start..at.l3 + field.end];
    let old = u128::from_be_bytes((&*bytes).try_into().unwrap_or([0; 16]));
    let new = u128::from_be_bytes(addr);
    if old == new {
        return Ok(());
    }
    bytes.copy_from_slice(&addr);
    match at.l4 {
        Some((csum, _)) if partial => {
            put16(d, csum, !checksum::update128(!get16(d, csum), old, new))
        }
        Some((csum, proto)) => update_l4_128(d, csum, proto, old, new),
        None => {}
    }
    Ok(())
}

/// `set_field:LABEL->ipv6_label`: the flow label (no checksum covers it).
pub fn set_ipv6_label(pkt: &mut Packet, label: u32) -> Result<(), DropReason> {
    if let Some(at) = ip_layout(pkt.data()).filter(|a| a.v6) {
        Ipv6Packet::new_unchecked(&mut pkt.data_mut()[at.l3..]).set_flow_label(label);
    }
    Ok(())
}

/// Where the checksum field sits in `proto`'s header.
fn l4_csum_offset(proto: IpProtocol) -> usize {
    match proto {
        IpProtocol::TCP => tcp::field::CHECKSUM.start,
        IpProtocol::ICMPV6 => icmpv6::field::CHECKSUM.start,
        _ => udp::field::CHECKSUM.start,
    }
}

/// `mod_tp_src` / `mod_tp_dst`: rewrites a TCP or UDP port of an IPv4 or
/// IPv6 packet (not a later fragment) and its checksum. A partial
/// checksum (offload) covers the ports only when completed, so it is left
/// alone.
pub fn set_tp_port(pkt: &mut Packet, src: bool, port: u16) -> Result<(), DropReason> {
    let Some((csum, proto)) = ip_layout(pkt.data())
        .and_then(|a| a.l4)
        .filter(|(_, p)| *p != IpProtocol::ICMPV6)
    else {
        return Ok(());
    };
    let l4 = csum - l4_csum_offset(proto);
    let partial = partial_l4_checksum(pkt, l4);
    // Both protocols put source then destination port first.
    let at = l4 + if src { 0 } else { 2 };
    let d = pkt.data_mut();
    let old = get16(d, at);
    if old == port {
        return Ok(());
    }
    put16(d, at, port);
    if !partial {
        update_l4(d, csum, proto, old.into(), port.into());
    }
    Ok(())
}

/// Rewrites the IPv4 header's 16-bit word at `word` (an offset in the
/// header) through `edit`, patching the header checksum (RFC 1624); or,
/// for IPv6, the fixed header through `edit_v6`.
fn edit_ip(
    pkt: &mut Packet,
    word: usize,
    edit: impl FnOnce(u16) -> u16,
    edit_v6: impl FnOnce(&mut Ipv6Packet<&mut [u8]>),
) {
    let Some(at) = ip_layout(pkt.data()) else {
        return;
    };
    let d = pkt.data_mut();
    if at.v6 {
        edit_v6(&mut Ipv6Packet::new_unchecked(&mut d[at.l3..]));
        return;
    }
    let old = get16(d, at.l3 + word);
    let new = edit(old);
    put16(d, at.l3 + word, new);
    let ip_csum = at.l3 + ipv4::field::CHECKSUM.start;
    put16(d, ip_csum, checksum::update16(get16(d, ip_csum), old, new));
}

/// `mod_nw_tos:TOS` — the six DSCP bits (`tos` is the byte with ECN 0) of
/// the IPv4 TOS or the IPv6 traffic class.
pub fn set_nw_tos(pkt: &mut Packet, tos: u8) -> Result<(), DropReason> {
    // Version/IHL and DSCP/ECN form the header's first word.
    edit_ip(
        pkt,
        ipv4::field::VER_IHL,
        |w| (w & 0xff03) | u16::from(tos & 0xfc),
        |ip| ip.set_traffic_class((ip.traffic_class() & 0x03) | (tos & 0xfc)),
    );
    Ok(())
}

/// `mod_nw_ecn:ECN` — the two ECN bits.
pub fn set_nw_ecn(pkt: &mut Packet, ecn: u8) -> Result<(), DropReason> {
    edit_ip(
        pkt,
        ipv4::field::VER_IHL,
        |w| (w & 0xfffc) | u16::from(ecn & 0x03),
        |ip| ip.set_traffic_class((ip.traffic_class() & 0xfc) | (ecn & 0x03)),
    );
    Ok(())
}

/// `mod_nw_ttl:TTL` — the IPv4 TTL or IPv6 hop limit.
pub fn set_nw_ttl(pkt: &mut Packet, ttl: u8) -> Result<(), DropReason> {
    // TTL and protocol form one word.
    edit_ip(
        pkt,
        ipv4::field::TTL,
        |w| (w & 0x00ff) | (u16::from(ttl) << 8),
        |ip| ip.set_hop_limit(ttl),
    );
    Ok(())
}

/// `dec_ttl` — one less TTL (IPv4) or hop limit (IPv6), or a
/// `ttl_expired` drop when the packet arrived with 0 or 1 (a router may
/// not forward it). Not IP: unchanged.
pub fn dec_ttl(pkt: &mut Packet) -> Result<(), DropReason> {
    let Some(at) = ip_layout(pkt.data()) else {
        return Ok(());
    };
    let d = &mut pkt.data_mut()[at.l3..];
    if at.v6 {
        let mut ip = Ipv6Packet::new_unchecked(d);
        if ip.hop_limit() <= 1 {
            return Err(DropReason::TtlExpired);
        }
        ip.set_hop_limit(ip.hop_limit() - 1);
        return Ok(());
    }
    let mut ip = Ipv4Packet::new_unchecked(d);
    if ip.ttl() <= 1 {
        return Err(DropReason::TtlExpired);
    }
    ip.decrement_ttl();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use nfv_mem::{MemoryConfig, PacketPool};

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
        let pool = PacketPool::new("actions", &MemoryConfig::plain(2048, 64)).unwrap();
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
        let pool = PacketPool::new("actions2", &MemoryConfig::plain(2048, 64)).unwrap();
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

#[cfg(test)]
#[path = "actions_ip_tests.rs"]
mod ip_tests;

#[cfg(test)]
#[path = "actions_ipv6_tests.rs"]
mod ipv6_tests;
