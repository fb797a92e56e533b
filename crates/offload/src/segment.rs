//! Software GSO: cutting a TSO/USO frame into the segments a NIC would
//! have sent.
//!
//! Each segment is the frame's headers followed by at most `gso_size`
//! payload bytes, with the headers fixed as Linux's software GSO fixes
//! them: IPv4 total length, identification (+ segment index) and header
//! checksum; IPv6 payload length; TCP sequence number (+ payload offset),
//! FIN and PSH on the last segment only, CWR on the first only (the ECN
//! rule, RFC 3168 section 6.1.2); for USO a UDP length per datagram. The
//! transport checksum is computed in full, or left partial (the
//! pseudo-header sum in the field) for an output that takes
//! `NEEDS_CSUM` frames.

use nfv_wire::checksum as wire_csum;
use nfv_wire::ipv4::Ipv4Packet;
use nfv_wire::tcp::{TcpFlags, TcpPacket};
use nfv_wire::udp::UdpPacket;

use crate::checksum::{complete_checksum, pseudo_header_v6};
use crate::validate::{Layout, ipv6};

/// Number of segments [`segment`] produces for a frame of `frame_len`
/// bytes: the payload divided by `gso_size`, rounded up, and at least one
/// (a payload of at most `gso_size` bytes, or none, is one segment).
/// `gso_size` 0 (refused by [`crate::validate`]) counts as one.
pub fn segment_count(frame_len: usize, layout: &Layout, gso_size: usize) -> usize {
    let payload = frame_len.saturating_sub(layout.payload);
    if gso_size == 0 {
        return 1;
    }
    payload.div_ceil(gso_size).max(1)
}

/// Length of segment `index` (headers included), or `None` past the last.
pub fn segment_len(
    frame_len: usize,
    layout: &Layout,
    gso_size: usize,
    index: usize,
) -> Option<usize> {
    if index >= segment_count(frame_len, layout, gso_size) {
        return None;
    }
    let payload = frame_len.saturating_sub(layout.payload);
    let start = index * gso_size;
    Some(layout.payload + gso_size.min(payload - start.min(payload)))
}

/// Software GSO: writes segment number `index` of `frame` into `dst` and
/// returns its length.
///
/// `layout` and `gso_size` come from a header [`crate::validate`] accepted
/// with GSO (so the frame is TCP or UDP over IPv4 or IPv6 and every
/// segment fits its length fields); `index` is below [`segment_count`].
/// `dst` must hold `layout.payload + gso_size` bytes (the segment's
/// length, [`segment_len`], is enough).
///
/// With `full_csum` the transport checksum is computed in full; otherwise
/// the field holds the pseudo-header sum, as a `NEEDS_CSUM` receiver
/// expects ([`Layout::partial_csum_meta`] is the header to send with it).
///
/// # Panics
///
/// On a caller bug: `index` past the last segment, `dst` too short, or a
/// `layout` that is not this frame's.
///
/// Cost: one copy of the segment and, with `full_csum`, one checksum pass
/// over its transport header and payload.
pub fn segment(
    frame: &[u8],
    layout: &Layout,
    gso_size: usize,
    index: usize,
    dst: &mut [u8],
    full_csum: bool,
) -> usize {
    let count = segment_count(frame.len(), layout, gso_size);
    assert!(index < count, "segment {index} of {count}");
    let hdr = layout.payload;
    let start = index * gso_size;
    let len = gso_size.min(frame.len() - hdr - start.min(frame.len() - hdr));
    let out = &mut dst[..hdr + len];
    out[..hdr].copy_from_slice(&frame[..hdr]);
    out[hdr..].copy_from_slice(&frame[hdr + start..hdr + start + len]);

    let l4_len = out.len() - layout.l4;
    let pseudo = if layout.ipv6 {
        fix_ipv6(out, layout)
    } else {
        fix_ipv4(out, layout, index, l4_len)
    };
    let l4 = &mut out[layout.l4..];
    if layout.tcp {
        fix_tcp(l4, start, index == 0, index + 1 == count);
    } else {
        UdpPacket::new_unchecked(l4).set_len(l4_len as u16);
    }
    let field = layout.l4 + layout.csum_offset();
    out[field..field + 2].copy_from_slice(&pseudo.to_be_bytes());
    if full_csum {
        complete_checksum(out, layout.l4, layout.csum_offset());
    }
    out.len()
}

/// Sets total length, identification and header checksum of the segment's
/// IPv4 header; returns its pseudo-header sum.
fn fix_ipv4(out: &mut [u8], layout: &Layout, index: usize, l4_len: usize) -> u16 {
    let hlen = layout.l4 - layout.l3;
    let mut ip = Ipv4Packet::new_unchecked(&mut out[layout.l3..layout.l4]);
    ip.set_total_len((hlen + l4_len) as u16);
    ip.set_ident(ip.ident().wrapping_add(index as u16));
    ip.fill_checksum();
    wire_csum::pseudo_header(ip.src_addr(), ip.dst_addr(), ip.protocol(), l4_len as u32)
}

/// Sets the payload length of the segment's IPv6 header; returns its
/// pseudo-header sum.
fn fix_ipv6(out: &mut [u8], layout: &Layout) -> u16 {
    let ip = &mut out[layout.l3..];
    let payload_len = ip.len() - ipv6::HEADER_LEN;
    ip[ipv6::PAYLOAD_LEN].copy_from_slice(&(payload_len as u16).to_be_bytes());
    let mut addrs = [0u8; 32];
    addrs.copy_from_slice(&ip[ipv6::ADDRS]);
    let l4_len = out.len() - layout.l4;
    pseudo_header_v6(&addrs, out[layout.l3 + ipv6::NEXT_HEADER], l4_len as u32)
}

/// Advances the sequence number by the payload offset and keeps FIN/PSH
/// for the last segment, CWR for the first.
fn fix_tcp(l4: &mut [u8], offset: usize, first: bool, last: bool) {
    let mut t = TcpPacket::new_unchecked(l4);
    t.set_seq_number(t.seq_number().wrapping_add(offset as u32));
    let mut clear = 0;
    if !last {
        clear |= TcpFlags::FIN.0 | TcpFlags::PSH.0;
    }
    if !first {
        clear |= TcpFlags::CWR.0;
    }
    t.set_flags(TcpFlags(t.flags().0 & !clear));
}

#[cfg(test)]
mod tests;
