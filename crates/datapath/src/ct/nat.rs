//! Applying a connection's translation ([`NatRewrite`]) to a packet: one
//! end's address and port (or an ICMP query's identifier), with every
//! checksum that covers them updated incrementally (RFC 1624) — through
//! the same rewrites as `mod_nw_src`/`mod_tp_dst`, so a checksum offload's
//! partial sum is handled alike.
//!
//! An ICMP error related to a translated connection quotes a packet that
//! was translated on its way: the outer header gets the address only, the
//! quoted header the opposite rewrite ([`NatRewrite::swapped`]) with its
//! IPv4 header checksum, and the ICMP checksum is computed afresh over the
//! message (ICMPv6's with the pseudo-header of the new outer addresses).
//! The quoted transport checksum is left as it is: the quote is often cut
//! short of the data it covers, and nothing checks it (Linux and OVS leave
//! it too).

use super::summary::Parsed;
use crate::actions;
use nfv_conntrack::nat::{NatKind, NatRewrite};
use nfv_conntrack::{Family, L4};
use nfv_mem::Packet;
use nfv_ports::DropReason;
use nfv_wire::{IpProtocol, checksum, ipv4, ipv6};

/// Rewrites `pkt` (parsed as `parsed`) as `rw` says.
pub fn apply(pkt: &mut Packet, parsed: &Parsed, rw: &NatRewrite) -> Result<(), DropReason> {
    let family = parsed.summary.key.family;
    let src = rw.end == NatKind::Src;
    set_addr(pkt, family, src, rw.addr)?;
    match parsed.summary.l4 {
        L4::Icmp { inner: Some(_), .. } => icmp_error_inner(pkt, parsed, &rw.swapped()),
        L4::Icmp { inner: None, .. } => {
            if let Some(id) = rw.port {
                set_icmp_id(pkt, parsed.l4, id);
            }
            Ok(())
        }
        L4::Tcp(_) | L4::Other => match rw.port {
            Some(port) => actions::set_tp_port(pkt, src, port),
            None => Ok(()),
        },
    }
}

fn set_addr(pkt: &mut Packet, family: Family, src: bool, addr: u128) -> Result<(), DropReason> {
    match family {
        Family::V4 => actions::set_nw_addr(pkt, src, addr as u32),
        Family::V6 => actions::set_ipv6_addr(pkt, src, addr.to_be_bytes()),
    }
}

fn get16(d: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([d[at], d[at + 1]])
}

fn put16(d: &mut [u8], at: usize, v: u16) {
    d[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// An ICMP or ICMPv6 query's identifier (bytes 4-5 of the message) and
/// the checksum over it (the pseudo-header of ICMPv6 does not hold it).
fn set_icmp_id(pkt: &mut Packet, l4: usize, id: u16) {
    let d = pkt.data_mut();
    if d.len() < l4 + 8 {
        return;
    }
    let old = get16(d, l4 + 4);
    if old == id {
        return;
    }
    put16(d, l4 + 4, id);
    put16(d, l4 + 2, checksum::update16(get16(d, l4 + 2), old, id));
}

/// The quoted packet of an ICMP error: `rw` (already swapped to the
/// quote's direction) applied to its header, then the ICMP checksum.
fn icmp_error_inner(pkt: &mut Packet, parsed: &Parsed, rw: &NatRewrite) -> Result<(), DropReason> {
    let family = parsed.summary.key.family;
    let (l3, l4) = (parsed.l3, parsed.l4);
    let d = pkt.data_mut();
    let q = l4 + 8;
    let src = rw.end == NatKind::Src;
    let end = match family {
        Family::V4 => {
            let total = usize::from(get16(d, l3 + 2));
            let end = (l3 + total).min(d.len());
            let ihl = usize::from(d[q] & 0x0f) * 4;
            let at = q + if src { 12 } else { 16 };
            let old = u32::from_be_bytes([d[at], d[at + 1], d[at + 2], d[at + 3]]);
            let new = rw.addr as u32;
            d[at..at + 4].copy_from_slice(&new.to_be_bytes());
            let csum = q + ipv4::field::CHECKSUM.start;
            put16(d, csum, checksum::update32(get16(d, csum), old, new));
            let proto = d[q + ipv4::field::PROTOCOL];
            quoted_port(d, q + ihl, end, proto, family, src, rw.port);
            end
        }
        Family::V6 => {
            let plen = usize::from(get16(d, l3 + 4));
            let end = (l3 + ipv6::HEADER_LEN + plen).min(d.len());
            let at = q + if src { 8 } else { 24 };
            d[at..at + 16].copy_from_slice(&rw.addr.to_be_bytes());
            let rest = &d[q + ipv6::HEADER_LEN..end];
            let up = ipv6::upper_layer(IpProtocol(d[q + 6]), rest);
            let inner_l4 = q + ipv6::HEADER_LEN + up.offset;
            quoted_port(d, inner_l4, end, up.protocol.0, family, src, rw.port);
            end
        }
    };
    // The ICMP checksum afresh, over the message as it now is.
    put16(d, l4 + 2, 0);
    let sum = match family {
        Family::V4 => checksum::data(&d[l4..end]),
        Family::V6 => {
            let s = u128::from_be_bytes(d[l3 + 8..l3 + 24].try_into().unwrap_or([0; 16]));
            let t = u128::from_be_bytes(d[l3 + 24..l3 + 40].try_into().unwrap_or([0; 16]));
            let pseudo = checksum::pseudo_header_v6(s, t, IpProtocol::ICMPV6, (end - l4) as u32);
            checksum::combine(&[pseudo, checksum::data(&d[l4..end])])
        }
    };
    put16(d, l4 + 2, !sum);
    Ok(())
}

/// The quoted transport header's port (TCP, UDP) or identifier (an
/// ICMP query), when the quote holds it.
fn quoted_port(
    d: &mut [u8],
    at: usize,
    end: usize,
    proto: u8,
    family: Family,
    src: bool,
    port: Option<u16>,
) {
    let Some(port) = port else { return };
    let icmp = match family {
        Family::V4 => proto == IpProtocol::ICMP.0,
        Family::V6 => proto == IpProtocol::ICMPV6.0,
    };
    let field = if icmp {
        at + 4
    } else if proto == IpProtocol::TCP.0 || proto == IpProtocol::UDP.0 {
        at + if src { 0 } else { 2 }
    } else {
        return;
    };
    if field + 2 <= end {
        put16(d, field, port);
    }
}
