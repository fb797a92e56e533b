//! IPv6 packets (RFC 8200): the fixed header, and the walk over extension
//! headers to the upper-layer header that flow extraction and the
//! checksum rewrites need.

use crate::bytes::{get_u16, get_u32, put_u16, put_u32};
use crate::error::{Error, Result};
use crate::ip::IpProtocol;
use core::net::Ipv6Addr;

/// Field offsets of the fixed IPv6 header.
pub mod field {
    use crate::Field;
    /// Version (4 bits), traffic class (8), flow label (20).
    pub const VER_TC_FLOW: Field = 0..4;
    /// Payload length: the bytes after this fixed header.
    pub const PAYLOAD_LEN: Field = 4..6;
    /// Next header.
    pub const NEXT_HEADER: usize = 6;
    /// Hop limit.
    pub const HOP_LIMIT: usize = 7;
    /// Source address.
    pub const SRC_ADDR: Field = 8..24;
    /// Destination address.
    pub const DST_ADDR: Field = 24..40;
}

/// Length of the fixed IPv6 header.
pub const HEADER_LEN: usize = field::DST_ADDR.end;

/// Extension headers skipped before the walk gives up. A legal packet has
/// at most a handful (RFC 8200 section 4.1 orders six kinds, each once but
/// destination options twice); the bound keeps a hostile chain from costing
/// more than a few reads.
pub const MAX_EXTENSION_HEADERS: usize = 8;

/// Hop-by-hop options (RFC 8200 section 4.3).
pub const HOP_BY_HOP: IpProtocol = IpProtocol(0);
/// Routing header (section 4.4).
pub const ROUTING: IpProtocol = IpProtocol(43);
/// Fragment header (section 4.5).
pub const FRAGMENT: IpProtocol = IpProtocol(44);
/// Encapsulating security payload (RFC 4303): opaque, the walk stops there.
pub const ESP: IpProtocol = IpProtocol(50);
/// Authentication header (RFC 4302): skipped, its length is in 4-byte units.
pub const AUTH: IpProtocol = IpProtocol(51);
/// No next header.
pub const NO_NEXT_HEADER: IpProtocol = IpProtocol(59);
/// Destination options (section 4.6).
pub const DEST_OPTIONS: IpProtocol = IpProtocol(60);

/// A zero-copy view of an IPv6 packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Wraps `buffer` without checks; accessors panic if it is shorter than
    /// [`HEADER_LEN`].
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv6Packet { buffer }
    }

    /// Wraps `buffer` after [`Ipv6Packet::check_len`]. No accessor panics on
    /// the result.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks: the buffer holds the fixed header ([`Error::Truncated`]);
    /// the version is 6 ([`Error::Malformed`]); the buffer holds the payload
    /// length's bytes after the header ([`Error::Truncated`]; it may hold
    /// more, e.g. Ethernet padding).
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 6 {
            return Err(Error::Malformed);
        }
        if len < HEADER_LEN + usize::from(self.payload_len()) {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Unwraps the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn ver_tc_flow(&self) -> u32 {
        get_u32(&self.buffer.as_ref()[field::VER_TC_FLOW])
    }

    /// Version (6 for a valid packet).
    #[inline]
    pub fn version(&self) -> u8 {
        (self.ver_tc_flow() >> 28) as u8
    }

    /// Traffic class: DSCP in the top six bits, ECN in the low two (the
    /// byte IPv4 calls TOS).
    #[inline]
    pub fn traffic_class(&self) -> u8 {
        (self.ver_tc_flow() >> 20) as u8
    }

    /// Flow label (20 bits).
    #[inline]
    pub fn flow_label(&self) -> u32 {
        self.ver_tc_flow() & 0x000f_ffff
    }

    /// Payload length (everything after the fixed header).
    #[inline]
    pub fn payload_len(&self) -> u16 {
        get_u16(&self.buffer.as_ref()[field::PAYLOAD_LEN])
    }

    /// Next header: the first extension header or the upper layer.
    #[inline]
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[field::NEXT_HEADER])
    }

    /// Hop limit.
    #[inline]
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    /// Source address as a number (big-endian order: the first byte is the
    /// most significant).
    #[inline]
    pub fn src_u128(&self) -> u128 {
        addr_u128(&self.buffer.as_ref()[field::SRC_ADDR])
    }

    /// Destination address as a number.
    #[inline]
    pub fn dst_u128(&self) -> u128 {
        addr_u128(&self.buffer.as_ref()[field::DST_ADDR])
    }

    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.src_u128())
    }

    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.dst_u128())
    }

    /// The bytes after the fixed header, up to the payload length (or the
    /// buffer's end, if shorter).
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        let end = (HEADER_LEN + usize::from(self.payload_len())).min(b.len());
        &b[HEADER_LEN.min(end)..end]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    fn set_ver_tc_flow(&mut self, v: u32) {
        put_u32(&mut self.buffer.as_mut()[field::VER_TC_FLOW], v);
    }

    /// Sets the version.
    #[inline]
    pub fn set_version(&mut self, version: u8) {
        let v = self.ver_tc_flow();
        self.set_ver_tc_flow((v & 0x0fff_ffff) | (u32::from(version & 0xf) << 28));
    }

    /// Sets the traffic class (DSCP and ECN).
    #[inline]
    pub fn set_traffic_class(&mut self, tc: u8) {
        let v = self.ver_tc_flow();
        self.set_ver_tc_flow((v & 0xf00f_ffff) | (u32::from(tc) << 20));
    }

    /// Sets the flow label (the low 20 bits of `label`).
    #[inline]
    pub fn set_flow_label(&mut self, label: u32) {
        let v = self.ver_tc_flow();
        self.set_ver_tc_flow((v & 0xfff0_0000) | (label & 0x000f_ffff));
    }

    /// Sets the payload length.
    #[inline]
    pub fn set_payload_len(&mut self, len: u16) {
        put_u16(&mut self.buffer.as_mut()[field::PAYLOAD_LEN], len);
    }

    /// Sets the next header.
    #[inline]
    pub fn set_next_header(&mut self, next: IpProtocol) {
        self.buffer.as_mut()[field::NEXT_HEADER] = next.0;
    }

    /// Sets the hop limit.
    #[inline]
    pub fn set_hop_limit(&mut self, hops: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = hops;
    }

    /// Sets the source address.
    #[inline]
    pub fn set_src_addr(&mut self, addr: Ipv6Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&addr.octets());
    }

    /// Sets the destination address.
    #[inline]
    pub fn set_dst_addr(&mut self, addr: Ipv6Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&addr.octets());
    }

    /// The payload, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let len = self.buffer.as_ref().len();
        let end = (HEADER_LEN + usize::from(self.payload_len())).min(len);
        &mut self.buffer.as_mut()[HEADER_LEN.min(end)..end]
    }
}

#[inline]
fn addr_u128(b: &[u8]) -> u128 {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[..16]);
    u128::from_be_bytes(a)
}

/// Where a packet sits in a fragmented datagram (OVS's `ip_frag`, for
/// IPv4 and IPv6 alike).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fragment {
    /// Not a fragment.
    #[default]
    No,
    /// The first fragment (offset 0): it holds the upper-layer header.
    First,
    /// A later fragment: no upper-layer header.
    Later,
}

/// What the walk over the extension headers found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpperLayer {
    /// The protocol of the first header that is not a skipped extension
    /// header: TCP, UDP, ICMPv6, ..., or ESP, or the extension header the
    /// walk stopped at (truncated, or past [`MAX_EXTENSION_HEADERS`]), or,
    /// for a later fragment, the fragment header's next header.
    pub protocol: IpProtocol,
    /// Offset of that header from the end of the fixed header.
    pub offset: usize,
    /// Fragment header seen, and which part.
    pub fragment: Fragment,
    /// True when `offset` is the start of a complete walk: the header at
    /// `offset` is the upper layer's (false when the walk stopped early,
    /// at ESP, at a later fragment or on a truncated or overlong chain).
    pub complete: bool,
}

/// Walks the extension headers that follow a fixed header whose next
/// header is `first`, over `rest` (the bytes after the fixed header).
/// Skips hop-by-hop, routing, destination-options, authentication and
/// fragment headers, at most [`MAX_EXTENSION_HEADERS`] of them; stops at
/// ESP (encrypted) and at a later fragment. Never panics and reads each
/// extension header's first two bytes (four for a fragment header) once.
pub fn upper_layer(first: IpProtocol, rest: &[u8]) -> UpperLayer {
    let mut protocol = first;
    let mut offset = 0usize;
    let mut fragment = Fragment::No;
    for _ in 0..MAX_EXTENSION_HEADERS {
        let len = match protocol {
            HOP_BY_HOP | ROUTING | DEST_OPTIONS | AUTH | FRAGMENT => {
                let Some(h) = rest.get(offset..offset + 8) else {
                    break;
                };
                if protocol == FRAGMENT {
                    let off_flags = get_u16(&h[2..4]);
                    if off_flags & 0xfff8 != 0 {
                        return UpperLayer {
                            protocol: IpProtocol(h[0]),
                            offset: offset + 8,
                            fragment: Fragment::Later,
                            complete: false,
                        };
                    }
                    fragment = Fragment::First;
                    8
                } else if protocol == AUTH {
                    (usize::from(h[1]) + 2) * 4
                } else {
                    (usize::from(h[1]) + 1) * 8
                }
            }
            _ => {
                return UpperLayer {
                    protocol,
                    offset,
                    fragment,
                    complete: protocol != ESP,
                };
            }
        };
        protocol = IpProtocol(rest[offset]);
        offset += len;
    }
    UpperLayer {
        protocol,
        offset,
        fragment,
        complete: false,
    }
}

/// High-level representation of the fixed IPv6 header (no extension
/// headers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Repr {
    /// Source address.
    pub src_addr: Ipv6Addr,
    /// Destination address.
    pub dst_addr: Ipv6Addr,
    /// Next header.
    pub next_header: IpProtocol,
    /// Payload length.
    pub payload_len: u16,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
}

impl Ipv6Repr {
    /// Parses a checked view's fixed header.
    pub fn parse<T: AsRef<[u8]>>(packet: &Ipv6Packet<T>) -> Result<Self> {
        packet.check_len()?;
        Ok(Ipv6Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: packet.payload_len(),
            hop_limit: packet.hop_limit(),
            traffic_class: packet.traffic_class(),
            flow_label: packet.flow_label(),
        })
    }

    /// Bytes [`Ipv6Repr::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the fixed header into the first [`HEADER_LEN`] bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Ipv6Packet<T>) {
        packet.set_ver_tc_flow(
            6 << 28 | u32::from(self.traffic_class) << 20 | (self.flow_label & 0x000f_ffff),
        );
        packet.set_payload_len(self.payload_len);
        packet.set_next_header(self.next_header);
        packet.set_hop_limit(self.hop_limit);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec;
    use std::vec::Vec;

    fn repr() -> Ipv6Repr {
        Ipv6Repr {
            src_addr: "2001:db8::1".parse().unwrap(),
            dst_addr: "2001:db8::2".parse().unwrap(),
            next_header: IpProtocol::UDP,
            payload_len: 8,
            hop_limit: 64,
            traffic_class: 0xb9,
            flow_label: 0xabcde,
        }
    }

    #[test]
    fn emit_agrees_with_etherparse_and_parses_back() {
        let r = repr();
        let mut b = vec![0u8; HEADER_LEN + 8];
        r.emit(&mut Ipv6Packet::new_unchecked(&mut b[..]));
        let (h, _) = etherparse::Ipv6Header::from_slice(&b).unwrap();
        assert_eq!(h.source, r.src_addr.octets());
        assert_eq!(h.destination, r.dst_addr.octets());
        assert_eq!(h.traffic_class, 0xb9);
        assert_eq!(h.flow_label.value(), 0xabcde);
        assert_eq!(h.hop_limit, 64);
        assert_eq!(h.payload_length, 8);
        assert_eq!(h.next_header.0, 17);
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Ipv6Repr::parse(&p).unwrap(), r);
        assert_eq!(p.payload().len(), 8);
    }

    #[test]
    fn etherparse_headers_read_the_same() {
        let mut h = etherparse::Ipv6Header {
            traffic_class: 0x2e,
            flow_label: etherparse::Ipv6FlowLabel::try_new(0x12345).unwrap(),
            payload_length: 0,
            next_header: etherparse::IpNumber(6),
            hop_limit: 3,
            source: [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8],
            destination: [0xff; 16],
        };
        h.payload_length = 0;
        let mut b = Vec::new();
        h.write(&mut b).unwrap();
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.traffic_class(), 0x2e);
        assert_eq!(p.flow_label(), 0x12345);
        assert_eq!(p.hop_limit(), 3);
        assert_eq!(p.next_header(), IpProtocol::TCP);
        assert_eq!(p.src_addr().octets(), h.source);
        assert_eq!(p.dst_u128(), u128::MAX);
    }

    #[test]
    fn setters_touch_only_their_field() {
        let mut b = [0u8; HEADER_LEN];
        repr().emit(&mut Ipv6Packet::new_unchecked(&mut b[..]));
        let mut p = Ipv6Packet::new_unchecked(&mut b[..]);
        p.set_traffic_class(0x04);
        assert_eq!(
            (p.version(), p.traffic_class(), p.flow_label()),
            (6, 0x04, 0xabcde)
        );
        p.set_flow_label(0xfff12345);
        assert_eq!(
            (p.version(), p.traffic_class(), p.flow_label()),
            (6, 0x04, 0x12345)
        );
        p.set_hop_limit(1);
        p.set_dst_addr("::9".parse().unwrap());
        assert_eq!(p.dst_u128(), 9);
        assert_eq!(p.src_addr(), repr().src_addr);
    }

    #[test]
    fn checks_refuse_short_and_wrong_version() {
        let mut b = [0u8; HEADER_LEN + 4];
        repr().emit(&mut Ipv6Packet::new_unchecked(&mut b[..]));
        assert_eq!(
            Ipv6Packet::new_checked(&b[..HEADER_LEN - 1]).err(),
            Some(Error::Truncated)
        );
        // The payload length says 8; 4 are there.
        assert_eq!(
            Ipv6Packet::new_checked(&b[..]).err(),
            Some(Error::Truncated)
        );
        b[0] = 0x45;
        assert_eq!(
            Ipv6Packet::new_checked(&b[..]).err(),
            Some(Error::Malformed)
        );
    }

    /// An extension header of `len` bytes (a multiple of 8) whose next
    /// header is `next`.
    fn ext(next: u8, len: usize) -> Vec<u8> {
        let mut h = vec![0u8; len];
        h[0] = next;
        h[1] = (len / 8 - 1) as u8;
        h
    }

    fn frag(next: u8, offset: u16, more: bool) -> Vec<u8> {
        let mut h = vec![0u8; 8];
        h[0] = next;
        let v = offset << 3 | u16::from(more);
        h[2..4].copy_from_slice(&v.to_be_bytes());
        h
    }

    #[test]
    fn extension_walk_table() {
        let tcp = [0u8; 20];
        let mut ah = vec![0u8; 12];
        ah[0] = 6;
        ah[1] = 1; // (1 + 2) * 4 = 12 bytes
        let cases: Vec<(&str, IpProtocol, Vec<u8>, UpperLayer)> = vec![
            (
                "no extension",
                IpProtocol::TCP,
                tcp.to_vec(),
                UpperLayer {
                    protocol: IpProtocol::TCP,
                    offset: 0,
                    fragment: Fragment::No,
                    complete: true,
                },
            ),
            (
                "hop-by-hop, routing, dest-opts",
                HOP_BY_HOP,
                [ext(43, 8), ext(60, 24), ext(17, 16), tcp.to_vec()].concat(),
                UpperLayer {
                    protocol: IpProtocol::UDP,
                    offset: 48,
                    fragment: Fragment::No,
                    complete: true,
                },
            ),
            (
                "first fragment",
                FRAGMENT,
                [frag(6, 0, true), tcp.to_vec()].concat(),
                UpperLayer {
                    protocol: IpProtocol::TCP,
                    offset: 8,
                    fragment: Fragment::First,
                    complete: true,
                },
            ),
            (
                "later fragment",
                DEST_OPTIONS,
                [ext(44, 8), frag(6, 185, false), tcp.to_vec()].concat(),
                UpperLayer {
                    protocol: IpProtocol::TCP,
                    offset: 16,
                    fragment: Fragment::Later,
                    complete: false,
                },
            ),
            (
                "authentication header",
                AUTH,
                [ah.clone(), tcp.to_vec()].concat(),
                UpperLayer {
                    protocol: IpProtocol::TCP,
                    offset: 12,
                    fragment: Fragment::No,
                    complete: true,
                },
            ),
            (
                "esp stops",
                HOP_BY_HOP,
                [ext(50, 8), tcp.to_vec()].concat(),
                UpperLayer {
                    protocol: ESP,
                    offset: 8,
                    fragment: Fragment::No,
                    complete: false,
                },
            ),
            (
                "truncated extension",
                HOP_BY_HOP,
                ext(6, 8)[..5].to_vec(),
                UpperLayer {
                    protocol: HOP_BY_HOP,
                    offset: 0,
                    fragment: Fragment::No,
                    complete: false,
                },
            ),
            (
                "length past the end",
                ROUTING,
                [ext(60, 64)[..8].to_vec()].concat(),
                UpperLayer {
                    protocol: DEST_OPTIONS,
                    offset: 64,
                    fragment: Fragment::No,
                    complete: false,
                },
            ),
            (
                "loop of destination options",
                DEST_OPTIONS,
                (0..20).flat_map(|_| ext(60, 8)).collect(),
                UpperLayer {
                    protocol: DEST_OPTIONS,
                    offset: 8 * MAX_EXTENSION_HEADERS,
                    fragment: Fragment::No,
                    complete: false,
                },
            ),
        ];
        for (name, first, bytes, want) in cases {
            assert_eq!(upper_layer(first, &bytes), want, "{name}");
        }
    }

    #[test]
    fn walk_agrees_with_etherparse_on_what_both_skip() {
        // Hop-by-hop + destination options + UDP: etherparse's sliced
        // extension headers end where ours say the upper layer starts.
        let payload = [ext(60, 16), ext(17, 8), vec![0u8; 8]].concat();
        let mut b = vec![0u8; HEADER_LEN];
        let mut r = repr();
        r.next_header = HOP_BY_HOP;
        r.payload_len = payload.len() as u16;
        r.emit(&mut Ipv6Packet::new_unchecked(&mut b[..]));
        b.extend_from_slice(&payload);
        let s = etherparse::Ipv6Slice::from_slice(&b).unwrap();
        let ours = upper_layer(HOP_BY_HOP, &b[HEADER_LEN..]);
        assert_eq!(ours.protocol.0, s.payload().ip_number.0);
        assert_eq!(ours.offset, payload.len() - s.payload().payload.len());
    }
}
