//! Checking a guest's offload header against its frame.
//!
//! A guest writes the virtio-net header and the frame; neither is trusted.
//! [`validate`] finds the headers itself (the guest's `hdr_len` is ignored),
//! then checks every offset and type in the header against what it found.
//! It reads only the frame, never past its end, and never panics.
//!
//! Check order: layer 2 and the network and transport headers (only the
//! ones it knows: Ethernet with up to two VLAN tags per
//! [`nfv_wire::l2::walk`], IPv4, IPv6, TCP, UDP), then the partial
//! checksum, then GSO.

use nfv_wire::ipv4::{self, IpProtocol, Ipv4Packet};
use nfv_wire::{EtherType, l2, tcp, udp};

use crate::meta::{GSO_TCPV4, GSO_TCPV6, GSO_UDP, GSO_UDP_L4, OffloadMeta};
use crate::{F_NEEDS_CSUM, OffloadError};

/// IPv6 header layout (RFC 8200 section 3). nfv-wire has no IPv6 module
/// yet; these move there when it gets one.
pub(crate) mod ipv6 {
    /// Payload length: everything after the fixed header.
    pub const PAYLOAD_LEN: core::ops::Range<usize> = 4..6;
    /// Next header.
    pub const NEXT_HEADER: usize = 6;
    /// Source then destination address.
    pub const ADDRS: core::ops::Range<usize> = 8..40;
    /// Length of the fixed header.
    pub const HEADER_LEN: usize = 40;

    /// True for the next-header values that are extension headers (IANA
    /// registry, RFC 8200 section 4): hop-by-hop, routing, fragment, ESP,
    /// AH, destination options, mobility, HIP, shim6, experimental.
    pub fn is_extension(next_header: u8) -> bool {
        matches!(
            next_header,
            0 | 43 | 44 | 50 | 51 | 60 | 135 | 139 | 140 | 253 | 254
        )
    }
}

/// Where the headers of a frame are, as [`validate`] found them.
///
/// For a frame that is TCP or UDP over IPv4 (not a fragment) or IPv6
/// (no extension headers), `l4` is the transport header and `payload` the
/// first byte after it: [`Layout::has_l4`] is true. Otherwise nothing past
/// the last header understood was parsed: `l4 == payload` is the offset of
/// that header's end (the network header's for IP, `l3` for anything
/// else), and `tcp` is false.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Offset of the network header (after the VLAN tags).
    pub l3: usize,
    /// Offset of the transport header.
    pub l4: usize,
    /// Offset of the transport payload: the length of all headers.
    pub payload: usize,
    /// IPv6 rather than IPv4 (meaningless for a frame that is not IP).
    pub ipv6: bool,
    /// TCP rather than UDP (meaningful only when [`Layout::has_l4`]).
    pub tcp: bool,
}

impl Layout {
    /// True if a TCP or UDP header was found at `l4`.
    pub fn has_l4(&self) -> bool {
        self.payload > self.l4
    }

    /// Offset of the transport checksum field from `l4` (TCP 16, UDP 6).
    pub fn csum_offset(&self) -> usize {
        if self.tcp {
            tcp::field::CHECKSUM.start
        } else {
            udp::field::CHECKSUM.start
        }
    }

    /// The header of a frame that carries a partial transport checksum
    /// and nothing else: what a segment left partial by
    /// [`crate::segment`] leaves with.
    pub fn partial_csum_meta(&self) -> OffloadMeta {
        OffloadMeta {
            flags: F_NEEDS_CSUM,
            csum_start: self.l4 as u16,
            csum_offset: self.csum_offset() as u16,
            ..OffloadMeta::default()
        }
    }
}

/// Which transport was found: the part of the parse that GSO needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Transport {
    /// TCP or UDP header parsed.
    Known,
    /// Not IP (the layer-2 walk ended on another EtherType).
    NotIp,
    /// IPv4 fragment: no transport header to speak of.
    Fragment,
    /// IPv6 whose next header is an extension header.
    Ipv6Ext,
    /// IPv6 carrying another protocol.
    Ipv6Other,
    /// IPv4 carrying another protocol.
    Ipv4Other,
}

/// Finds the headers of `frame`. Errors only for headers that are present
/// but broken or cut short; a protocol it does not know ends the parse.
fn parse(frame: &[u8]) -> Result<(Layout, Transport), OffloadError> {
    let info = l2::walk(frame).ok_or(OffloadError::Truncated)?;
    let l3 = info.l3_offset;
    let opaque = |ipv6, end, t| {
        let layout = Layout {
            l3,
            l4: end,
            payload: end,
            ipv6,
            tcp: false,
        };
        Ok((layout, t))
    };
    let (ipv6, l4, proto) = match info.ethertype {
        EtherType::IPV4 => {
            let ip = frame.get(l3..).ok_or(OffloadError::Truncated)?;
            if ip.len() < ipv4::HEADER_LEN {
                return Err(OffloadError::Truncated);
            }
            let view = Ipv4Packet::new_unchecked(ip);
            let hlen = usize::from(view.header_len());
            if view.version() != 4 || hlen < ipv4::HEADER_LEN {
                return Err(OffloadError::IpHeaderBad);
            }
            if ip.len() < hlen {
                return Err(OffloadError::Truncated);
            }
            if view.is_fragment() {
                return opaque(false, l3 + hlen, Transport::Fragment);
            }
            (false, l3 + hlen, view.protocol())
        }
        EtherType::IPV6 => {
            let ip = frame.get(l3..).ok_or(OffloadError::Truncated)?;
            if ip.len() < ipv6::HEADER_LEN {
                return Err(OffloadError::Truncated);
            }
            if ip[0] >> 4 != 6 {
                return Err(OffloadError::IpHeaderBad);
            }
            (
                true,
                l3 + ipv6::HEADER_LEN,
                IpProtocol(ip[ipv6::NEXT_HEADER]),
            )
        }
        t if t.is_vlan() && frame.len() < l3 + nfv_wire::vlan::HEADER_LEN => {
            // A tag cut short.
            return Err(OffloadError::Truncated);
        }
        _ => return opaque(false, l3, Transport::NotIp),
    };
    let hdr_end = match proto {
        IpProtocol::TCP => {
            let h = frame
                .get(l4..l4 + tcp::HEADER_LEN)
                .ok_or(OffloadError::Truncated)?;
            let doff = usize::from(h[tcp::field::FLAGS.start] >> 4) * 4;
            if doff < tcp::HEADER_LEN {
                return Err(OffloadError::TcpHeaderBad);
            }
            l4 + doff
        }
        IpProtocol::UDP => l4 + udp::HEADER_LEN,
        p if ipv6 && ipv6::is_extension(p.0) => return opaque(true, l4, Transport::Ipv6Ext),
        _ if ipv6 => return opaque(true, l4, Transport::Ipv6Other),
        _ => return opaque(false, l4, Transport::Ipv4Other),
    };
    if hdr_end > frame.len() {
        return Err(OffloadError::Truncated);
    }
    let layout = Layout {
        l3,
        l4,
        payload: hdr_end,
        ipv6,
        tcp: proto == IpProtocol::TCP,
    };
    Ok((layout, Transport::Known))
}

/// Checks a header a guest sent against its frame (`frame` is the whole
/// frame; `frame.len()` is its length) and returns where the headers are.
///
/// Hostile input: never panics, never trusts an offset. The rules:
///
/// * Headers: Ethernet, up to two VLAN tags (802.1Q/802.1ad), then IPv4
///   (options allowed) or IPv6 (fixed header), then TCP (its data offset)
///   or UDP. An IP, TCP or UDP header that is present must be whole and
///   well formed ([`OffloadError::Truncated`], [`OffloadError::IpHeaderBad`],
///   [`OffloadError::TcpHeaderBad`]), whatever the offload asked.
/// * Partial checksum ([`F_NEEDS_CSUM`]): `csum_start + csum_offset + 2`
///   within the frame. On a TCP or UDP frame it must name the transport
///   checksum (`csum_start` the transport header, `csum_offset` 16 or 6).
///   On anything else (not IP, another IP protocol, an IPv4 fragment, IPv6
///   extension headers) any in-bounds pair is accepted: a generic partial
///   checksum, which Linux may use for protocols other than TCP and UDP
///   (the ones'-complement sum is the same whatever the protocol).
/// * GSO: needs [`F_NEEDS_CSUM`] (Linux always sets it with GSO) and
///   `gso_size > 0`. TCPV4 needs TCP over IPv4 (not a fragment), TCPV6 TCP
///   over IPv6, UDP_L4 UDP over either. IPv6 GSO frames may not carry
///   extension headers (refused, not skipped). UFO ([`crate::GSO_UDP`], IP
///   fragmentation) is refused as unsupported, and so is any unknown type.
///   A payload of at most `gso_size` bytes is one segment, which is valid;
///   every segment must fit the 16-bit IP length field.
/// * `hdr_len` is ignored: Linux fills it, DPDK may not; the headers are
///   found here. Flag bits other than the two defined are ignored.
///
/// With nothing to do ([`OffloadMeta::is_empty`]) only the headers are
/// checked: a port need not call it then.
pub fn validate(meta: &OffloadMeta, frame: &[u8]) -> Result<Layout, OffloadError> {
    let (layout, transport) = parse(frame)?;
    if meta.needs_csum() {
        check_csum(meta, frame.len(), &layout)?;
    }
    if meta.is_gso() {
        check_gso(meta, frame.len(), &layout, transport)?;
    }
    Ok(layout)
}

fn check_csum(meta: &OffloadMeta, frame_len: usize, layout: &Layout) -> Result<(), OffloadError> {
    let start = usize::from(meta.csum_start);
    let offset = usize::from(meta.csum_offset);
    if start + offset + 2 > frame_len {
        return Err(OffloadError::CsumPastFrame);
    }
    if layout.has_l4() {
        if start != layout.l4 {
            return Err(OffloadError::CsumStartBad);
        }
        if offset != layout.csum_offset() {
            return Err(OffloadError::CsumOffsetBad);
        }
    }
    Ok(())
}

fn check_gso(
    meta: &OffloadMeta,
    frame_len: usize,
    layout: &Layout,
    transport: Transport,
) -> Result<(), OffloadError> {
    let kind = meta.gso_kind();
    match kind {
        GSO_TCPV4 | GSO_TCPV6 | GSO_UDP_L4 => {}
        GSO_UDP => return Err(OffloadError::UfoUnsupported),
        _ => return Err(OffloadError::UnknownGsoType),
    }
    if !meta.needs_csum() {
        return Err(OffloadError::GsoWithoutCsum);
    }
    if meta.gso_size == 0 {
        return Err(OffloadError::GsoSizeZero);
    }
    match transport {
        Transport::Known => {}
        Transport::NotIp => return Err(OffloadError::NotIp),
        Transport::Fragment => return Err(OffloadError::IpFragment),
        Transport::Ipv6Ext if kind != GSO_TCPV4 => return Err(OffloadError::Ipv6ExtHeaders),
        Transport::Ipv6Ext | Transport::Ipv6Other | Transport::Ipv4Other => {
            return Err(wrong_transport(kind));
        }
    }
    let right = match kind {
        GSO_TCPV4 => layout.tcp && !layout.ipv6,
        GSO_TCPV6 => layout.tcp && layout.ipv6,
        _ => !layout.tcp,
    };
    if !right {
        return Err(wrong_transport(kind));
    }
    // The largest segment: the IPv4 total length, the IPv6 payload length
    // and the UDP length are 16-bit fields.
    let seg = usize::from(meta.gso_size).min(frame_len - layout.payload);
    let ip_len = layout.payload - layout.l3 + seg - if layout.ipv6 { ipv6::HEADER_LEN } else { 0 };
    if ip_len > usize::from(u16::MAX) {
        return Err(OffloadError::SegmentTooLong);
    }
    Ok(())
}

/// The error for a GSO type whose transport (or IP version) is not the
/// frame's.
fn wrong_transport(kind: u8) -> OffloadError {
    if kind == GSO_UDP_L4 {
        OffloadError::GsoNotUdp
    } else {
        OffloadError::GsoNotTcp
    }
}

#[cfg(test)]
mod tests;
