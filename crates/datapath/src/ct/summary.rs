//! Frame bytes → what the connection tracker needs to know about a packet
//! ([`nfv_conntrack::PacketSummary`]), plus where its network and
//! transport headers start (NAT rewrites them).
//!
//! The tracker never reads packet memory; this is the one place that does
//! for it. Every read is bounds-checked (a hostile guest writes these
//! bytes), lengths come from the IP header, not the frame (short frames
//! are padded to 60 bytes on the wire), and whatever cannot be tracked is
//! said so with a reason instead of guessed at:
//! * not IPv4 or IPv6 (ARP, LLDP, …): [`Untrackable::NotIp`];
//! * an IPv4 or IPv6 fragment: [`Untrackable::Fragment`] — this switch does
//!   not reassemble (OVS's userspace tracker does, in `ipf`), so a
//!   fragment cannot be matched to its connection's ports;
//! * a header cut short, or lengths that contradict each other, or an
//!   IPv4 header checksum that does not verify: [`Untrackable::Malformed`].
//!
//! The datapath answers all three `+trk+inv`, as a tracker that sees a
//! packet it cannot parse does. Transport checksums are not verified (OVS
//! verifies them unless a NIC did; a vhost-user guest's frames often carry
//! a partial checksum the switch may not check, and verifying a 1,500-byte
//! payload costs more than tracking it): a segment with a wrong TCP
//! checksum is tracked as if it were right, and dropped by its receiver.

use nfv_conntrack::{ConnKey, Family, L4, PacketSummary, TcpFlags, TcpSegment};
use nfv_wire::{EtherType, IpProtocol, Ipv4Packet, Ipv6Packet, ipv4, ipv6};

/// Why a packet cannot be tracked (the datapath counts each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Untrackable {
    NotIp,
    Fragment,
    Malformed,
}

/// A packet the tracker can classify.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parsed {
    pub summary: PacketSummary,
    /// Offset of the IP header in the frame.
    pub l3: usize,
    /// Offset of the transport header (TCP, UDP, ICMP, …) in the frame.
    pub l4: usize,
}

const TCP_MIN: usize = 20;
const UDP_LEN: usize = 8;
/// ICMP and ICMPv6 headers: type, code, checksum, and the four bytes that
/// hold a query's identifier and sequence or an error's unused word.
const ICMP_LEN: usize = 8;
/// TCP option kinds (RFC 9293 §3.1, RFC 7323 §2.2).
const OPT_END: u8 = 0;
const OPT_NOP: u8 = 1;
const OPT_WSCALE: u8 = 3;

/// Reads what the tracker needs from `frame`, keyed in `zone`.
pub fn summarise(frame: &[u8], zone: u16) -> Result<Parsed, Untrackable> {
    match plain_ipv4(frame, zone) {
        Some(parsed) => Ok(parsed),
        None => summarise_walked(frame, zone),
    }
}

/// The shortcut of [`summarise`] alone, inlined into the caller: for the
/// batch's staging, which hashes the key next. A summary returned through
/// memory had its key stored field by field and read back by wider loads
/// (the hash's, the staging copy's) that the CPU cannot forward from
/// several smaller stores: each waited for those stores to reach the
/// cache. Kept in registers, the fields go to the hash and the staging
/// slot directly. `None`: the general way, [`summarise_walked`].
#[inline(always)]
pub fn summarise_plain(frame: &[u8], zone: u16) -> Option<Parsed> {
    plain_ipv4(frame, zone)
}

/// Where the shortcut puts the headers: untagged Ethernet, IPv4 without
/// options.
const PLAIN_L3: usize = 14;
const PLAIN_L4: usize = PLAIN_L3 + ipv4::HEADER_LEN;

/// The shortcut for most tracked packets: an untagged IPv4 frame without
/// IP options carrying UDP or TCP, not a fragment, its header checksum
/// right. Anything else, valid or not, is `None` and goes the general
/// way ([`summarise_walked`]), which also gives every reason for a
/// refusal; where both answer, they answer alike (a test compares them
/// frame by frame). It saves the VLAN walk, the IPv6 and ICMP branches
/// and the moves between them: about a tenth of what tracking a packet
/// costs.
#[inline(always)]
fn plain_ipv4(frame: &[u8], zone: u16) -> Option<Parsed> {
    let head = frame.first_chunk::<PLAIN_L4>()?;
    // EtherType IPv4, then version 4 with a 20-byte header.
    if head[12..15] != [0x08, 0x00, 0x45] {
        return None;
    }
    // Fixed-size views: each field one load, no bounds checks.
    let (_, h) = head.split_last_chunk::<{ ipv4::HEADER_LEN }>()?;
    let [_, _, t0, t1, _, _, f0, f1, _, proto, ..] = *h;
    let total = usize::from(u16::from_be_bytes([t0, t1]));
    let frag = u16::from_be_bytes([f0, f1]) & 0x3fff;
    if total < ipv4::HEADER_LEN || total > frame.len() - PLAIN_L3 || frag != 0 {
        return None;
    }
    if nfv_wire::checksum::data(h) != 0xffff {
        return None;
    }
    let src = u32::from_be_bytes(*h[12..].first_chunk::<4>()?);
    let dst = u32::from_be_bytes(*h[16..].first_chunk::<4>()?);
    let l4b = &frame[PLAIN_L4..PLAIN_L3 + total];
    let (sport, dport, l4) = if proto == IpProtocol::UDP.0 {
        let ports = l4b.first_chunk::<4>()?;
        if l4b.len() < UDP_LEN {
            return None;
        }
        let [s0, s1, d0, d1] = *ports;
        (
            u16::from_be_bytes([s0, s1]),
            u16::from_be_bytes([d0, d1]),
            L4::Other,
        )
    } else if proto == IpProtocol::TCP.0 {
        let (sport, dport, seg) = tcp_segment(l4b).ok()?;
        (sport, dport, L4::Tcp(seg))
    } else {
        return None;
    };
    let key = ConnKey::new(
        zone,
        Family::V4,
        proto,
        src.into(),
        dst.into(),
        sport,
        dport,
    );
    Some(Parsed {
        summary: PacketSummary { key, l4 },
        l3: PLAIN_L3,
        l4: PLAIN_L4,
    })
}

/// [`summarise`] for any frame: the Ethernet walk (VLAN tags), IPv4 with
/// options or IPv6 with extension headers, every transport. (The
/// staging calls it for the frames [`summarise_plain`] declined.)
pub fn summarise_walked(frame: &[u8], zone: u16) -> Result<Parsed, Untrackable> {
    let l2 = nfv_wire::l2::walk(frame).ok_or(Untrackable::Malformed)?;
    let l3b = &frame[l2.l3_offset..];
    let (ip, l4_rel) = if l2.ethertype == EtherType::IPV4 {
        ipv4_layer(l3b)?
    } else if l2.ethertype == EtherType::IPV6 {
        ipv6_layer(l3b)?
    } else {
        return Err(Untrackable::NotIp);
    };
    let l4b = &l3b[l4_rel..l4_rel + ip.payload_len];
    let summary = transport(zone, &ip, l4b)?;
    Ok(Parsed {
        summary,
        l3: l2.l3_offset,
        l4: l2.l3_offset + l4_rel,
    })
}

/// The network layer's share of a summary.
struct Ip {
    family: Family,
    proto: u8,
    src: u128,
    dst: u128,
    /// Bytes from the transport header to the end of the IP packet.
    payload_len: usize,
}

/// An IPv4 header: its fields and the transport header's offset. Read
/// from a fixed 20-byte array (one bounds check for the fixed part) rather
/// than through `Ipv4Packet`'s checked accessors: this runs for every
/// tracked packet. The checks are `Ipv4Packet::check_len`'s (version 4,
/// IHL at least 5, the header and total length within the bytes, total
/// length not below the header), then the header checksum, then
/// fragments; every failure of the first two is `Malformed`.
fn ipv4_layer(l3b: &[u8]) -> Result<(Ip, usize), Untrackable> {
    let h = l3b
        .first_chunk::<{ ipv4::HEADER_LEN }>()
        .ok_or(Untrackable::Malformed)?;
    let ihl = usize::from(h[0] & 0x0f) * 4;
    let total = usize::from(be16(h, 2));
    if h[0] >> 4 != 4 || ihl < ipv4::HEADER_LEN || total < ihl || total > l3b.len() {
        return Err(Untrackable::Malformed);
    }
    if nfv_wire::checksum::data(&l3b[..ihl]) != 0xffff {
        return Err(Untrackable::Malformed);
    }
    // More-fragments flag or a fragment offset.
    if be16(h, 6) & 0x3fff != 0 {
        return Err(Untrackable::Fragment);
    }
    Ok((
        Ip {
            family: Family::V4,
            proto: h[9],
            src: u128::from(be32(h, 12)),
            dst: u128::from(be32(h, 16)),
            payload_len: total - ihl,
        },
        ihl,
    ))
}

/// An IPv6 header and its extension headers: the fields and the upper
/// layer's offset.
fn ipv6_layer(l3b: &[u8]) -> Result<(Ip, usize), Untrackable> {
    let ip = Ipv6Packet::new_checked(l3b).map_err(|_| Untrackable::Malformed)?;
    let payload = usize::from(ip.payload_len());
    let rest = l3b
        .get(ipv6::HEADER_LEN..ipv6::HEADER_LEN + payload)
        .ok_or(Untrackable::Malformed)?;
    let up = ipv6::upper_layer(ip.next_header(), rest);
    if up.fragment != ipv6::Fragment::No {
        return Err(Untrackable::Fragment);
    }
    if !up.complete || up.offset > rest.len() {
        return Err(Untrackable::Malformed);
    }
    Ok((
        Ip {
            family: Family::V6,
            proto: up.protocol.0,
            src: ip.src_u128(),
            dst: ip.dst_u128(),
            payload_len: rest.len() - up.offset,
        },
        ipv6::HEADER_LEN + up.offset,
    ))
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn is_icmp(family: Family, proto: u8) -> bool {
    match family {
        Family::V4 => proto == IpProtocol::ICMP.0,
        Family::V6 => proto == IpProtocol::ICMPV6.0,
    }
}

/// The transport layer `l4b` (exactly the IP payload) of a packet.
fn transport(zone: u16, ip: &Ip, l4b: &[u8]) -> Result<PacketSummary, Untrackable> {
    let key = |sport, dport| ConnKey::new(zone, ip.family, ip.proto, ip.src, ip.dst, sport, dport);
    if ip.proto == IpProtocol::TCP.0 {
        tcp_segment(l4b).map(|(sport, dport, seg)| PacketSummary::tcp(key(sport, dport), seg))
    } else if ip.proto == IpProtocol::UDP.0 {
        if l4b.len() < UDP_LEN {
            return Err(Untrackable::Malformed);
        }
        Ok(PacketSummary::other(key(be16(l4b, 0), be16(l4b, 2))))
    } else if is_icmp(ip.family, ip.proto) {
        icmp(zone, ip, l4b)
    } else {
        // SCTP, GRE, ESP, …: tracked by addresses alone, as OVS's "other".
        Ok(PacketSummary::other(key(0, 0)))
    }
}

/// Ports and the fields window tracking reads from a TCP header.
fn tcp_segment(l4b: &[u8]) -> Result<(u16, u16, TcpSegment), Untrackable> {
    if l4b.len() < TCP_MIN {
        return Err(Untrackable::Malformed);
    }
    let hlen = usize::from(l4b[12] >> 4) * 4;
    if hlen < TCP_MIN || hlen > l4b.len() {
        return Err(Untrackable::Malformed);
    }
    let flags = TcpFlags(l4b[13]);
    let wscale = if flags.has(TcpFlags::SYN) {
        window_scale(&l4b[TCP_MIN..hlen])
    } else {
        None
    };
    Ok((
        be16(l4b, 0),
        be16(l4b, 2),
        TcpSegment {
            flags,
            seq: be32(l4b, 4),
            ack: be32(l4b, 8),
            window: be16(l4b, 14),
            wscale,
            payload_len: (l4b.len() - hlen) as u32,
        },
    ))
}

/// The window-scale option's shift, if `opts` carries a well-formed one.
/// Malformed options end the walk (the segment is still tracked).
fn window_scale(opts: &[u8]) -> Option<u8> {
    let mut at = 0;
    while at < opts.len() {
        match opts[at] {
            OPT_END => return None,
            OPT_NOP => at += 1,
            kind => {
                let len = usize::from(*opts.get(at + 1)?);
                if len < 2 || at + len > opts.len() {
                    return None;
                }
                if kind == OPT_WSCALE && len == 3 {
                    return Some(opts[at + 2]);
                }
                at += len;
            }
        }
    }
    None
}

/// An ICMP or ICMPv6 message: a query or answer keyed by its identifier,
/// an error with the tuple of the packet it quotes, or another type (the
/// tracker answers those `+inv`).
fn icmp(zone: u16, ip: &Ip, l4b: &[u8]) -> Result<PacketSummary, Untrackable> {
    if l4b.len() < ICMP_LEN {
        return Err(Untrackable::Malformed);
    }
    let (ty, code) = (l4b[0], l4b[1]);
    match nfv_conntrack::key::icmp_kind(ip.family, ty) {
        nfv_conntrack::IcmpKind::Error => {
            let inner = quoted(zone, ip.family, &l4b[ICMP_LEN..])?;
            Ok(PacketSummary::icmp_error(
                zone, ip.family, ip.src, ip.dst, ty, code, inner,
            ))
        }
        _ => Ok(PacketSummary {
            key: ConnKey::icmp(zone, ip.family, ip.src, ip.dst, be16(l4b, 4), ty, code),
            l4: L4::Icmp {
                ty,
                code,
                inner: None,
            },
        }),
    }
}

/// The tuple of the packet an ICMP error quotes: its IP header and the
/// first eight bytes after it (RFC 792 requires them, RFC 4443 as many as
/// fit). The quote is usually cut short, so only the headers read must be
/// present; its own lengths are not checked against what follows.
fn quoted(zone: u16, family: Family, q: &[u8]) -> Result<ConnKey, Untrackable> {
    let (proto, src, dst, l4) = match family {
        Family::V4 => {
            if q.len() < ipv4::HEADER_LEN {
                return Err(Untrackable::Malformed);
            }
            let ip = Ipv4Packet::new_unchecked(q);
            let ihl = usize::from(ip.header_len());
            if ip.version() != 4 || ihl < ipv4::HEADER_LEN || ip.frag_offset() != 0 {
                return Err(Untrackable::Malformed);
            }
            let l4 = q.get(ihl..).ok_or(Untrackable::Malformed)?;
            (
                ip.protocol().0,
                u128::from(u32::from(ip.src_addr())),
                u128::from(u32::from(ip.dst_addr())),
                l4,
            )
        }
        Family::V6 => {
            let fixed = q.get(..ipv6::HEADER_LEN).ok_or(Untrackable::Malformed)?;
            let ip = Ipv6Packet::new_unchecked(fixed);
            if ip.version() != 6 {
                return Err(Untrackable::Malformed);
            }
            let rest = &q[ipv6::HEADER_LEN..];
            let up = ipv6::upper_layer(ip.next_header(), rest);
            if !up.complete || up.fragment == ipv6::Fragment::Later {
                return Err(Untrackable::Malformed);
            }
            let l4 = rest.get(up.offset..).ok_or(Untrackable::Malformed)?;
            (up.protocol.0, ip.src_u128(), ip.dst_u128(), l4)
        }
    };
    // Ports, or an ICMP query's identifier, type and code: all in the
    // first eight bytes.
    let head = l4.get(..8).ok_or(Untrackable::Malformed)?;
    Ok(if is_icmp(family, proto) {
        ConnKey::icmp(zone, family, src, dst, be16(head, 4), head[0], head[1])
    } else if proto == IpProtocol::TCP.0 || proto == IpProtocol::UDP.0 {
        ConnKey::new(zone, family, proto, src, dst, be16(head, 0), be16(head, 2))
    } else {
        ConnKey::new(zone, family, proto, src, dst, 0, 0)
    })
}

#[cfg(test)]
#[path = "summary_tests.rs"]
mod tests;
