//! IPv4 packets (RFC 791).

use core::fmt;

use crate::bytes::{get_ipv4, get_u16, put_u16};
use crate::checksum;
use crate::error::{Error, Result};
use core::net::Ipv4Addr;

pub use crate::ip::IpProtocol;

/// Field offsets of the fixed IPv4 header.
pub mod field {
    use crate::Field;
    /// Version (high nibble) and IHL (low nibble).
    pub const VER_IHL: usize = 0;
    /// DSCP (high six bits) and ECN (low two bits).
    pub const DSCP_ECN: usize = 1;
    /// Total length.
    pub const LENGTH: Field = 2..4;
    /// Identification.
    pub const IDENT: Field = 4..6;
    /// Flags (high three bits) and fragment offset (in 8-byte units).
    pub const FLG_OFF: Field = 6..8;
    /// Time to live.
    pub const TTL: usize = 8;
    /// Protocol.
    pub const PROTOCOL: usize = 9;
    /// Header checksum.
    pub const CHECKSUM: Field = 10..12;
    /// Source address.
    pub const SRC_ADDR: Field = 12..16;
    /// Destination address.
    pub const DST_ADDR: Field = 16..20;
}

/// Length of the IPv4 header without options.
pub const HEADER_LEN: usize = field::DST_ADDR.end;

const FLAG_DF: u16 = 0x4000;
const FLAG_MF: u16 = 0x2000;
const OFFSET_MASK: u16 = 0x1fff;

/// A zero-copy view of an IPv4 packet.
///
/// The buffer may be longer than `total_len` (e.g. Ethernet padding);
/// [`Ipv4Packet::payload`] stops at `total_len`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wraps `buffer` without checks; accessors panic if it is too short or
    /// its length fields are inconsistent.
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv4Packet { buffer }
    }

    /// Wraps `buffer` after [`Ipv4Packet::check_len`]. No accessor panics on
    /// the result. The header checksum is *not* checked (see
    /// [`Ipv4Packet::verify_checksum`]).
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks, in order: the buffer holds 20 bytes ([`Error::Truncated`]);
    /// version is 4 and IHL is at least 5 ([`Error::Malformed`]); the buffer
    /// holds the header with options ([`Error::Truncated`]); total length is
    /// not below the header length ([`Error::Malformed`]); the buffer holds
    /// total length bytes ([`Error::Truncated`]).
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 4 || self.header_len() < HEADER_LEN as u8 {
            return Err(Error::Malformed);
        }
        let header_len = usize::from(self.header_len());
        if len < header_len {
            return Err(Error::Truncated);
        }
        let total_len = usize::from(self.total_len());
        if total_len < header_len {
            return Err(Error::Malformed);
        }
        if len < total_len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Unwraps the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// IP version (4 on a checked view).
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// Header length in bytes, options included (IHL * 4).
    #[inline]
    pub fn header_len(&self) -> u8 {
        (self.buffer.as_ref()[field::VER_IHL] & 0x0f) * 4
    }

    /// Differentiated services code point.
    #[inline]
    pub fn dscp(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] >> 2
    }

    /// Explicit congestion notification.
    #[inline]
    pub fn ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] & 0x03
    }

    /// Total length (header + payload) in bytes.
    #[inline]
    pub fn total_len(&self) -> u16 {
        get_u16(&self.buffer.as_ref()[field::LENGTH])
    }

    /// Identification.
    #[inline]
    pub fn ident(&self) -> u16 {
        get_u16(&self.buffer.as_ref()[field::IDENT])
    }

    /// The three flag bits (reserved, DF, MF) as a number 0..=7.
    #[inline]
    pub fn flags(&self) -> u8 {
        (get_u16(&self.buffer.as_ref()[field::FLG_OFF]) >> 13) as u8
    }

    /// Don't fragment.
    #[inline]
    pub fn dont_frag(&self) -> bool {
        get_u16(&self.buffer.as_ref()[field::FLG_OFF]) & FLAG_DF != 0
    }

    /// More fragments.
    #[inline]
    pub fn more_frags(&self) -> bool {
        get_u16(&self.buffer.as_ref()[field::FLG_OFF]) & FLAG_MF != 0
    }

    /// Fragment offset in bytes (the field is in 8-byte units).
    #[inline]
    pub fn frag_offset(&self) -> u16 {
        (get_u16(&self.buffer.as_ref()[field::FLG_OFF]) & OFFSET_MASK) << 3
    }

    /// True if MF is set or the fragment offset is non-zero.
    #[inline]
    pub fn is_fragment(&self) -> bool {
        get_u16(&self.buffer.as_ref()[field::FLG_OFF]) & (FLAG_MF | OFFSET_MASK) != 0
    }

    /// Time to live.
    #[inline]
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    /// Protocol of the payload.
    #[inline]
    pub fn protocol(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[field::PROTOCOL])
    }

    /// Header checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        get_u16(&self.buffer.as_ref()[field::CHECKSUM])
    }

    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> Ipv4Addr {
        get_ipv4(&self.buffer.as_ref()[field::SRC_ADDR])
    }

    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> Ipv4Addr {
        get_ipv4(&self.buffer.as_ref()[field::DST_ADDR])
    }

    /// Options (between the fixed header and `header_len`), possibly empty.
    #[inline]
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..usize::from(self.header_len())]
    }

    /// Payload: from `header_len` to `total_len`.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        let range = usize::from(self.header_len())..usize::from(self.total_len());
        &self.buffer.as_ref()[range]
    }

    /// True if the header checksum is correct.
    pub fn verify_checksum(&self) -> bool {
        let header = &self.buffer.as_ref()[..usize::from(self.header_len())];
        checksum::data(header) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Sets the version nibble.
    #[inline]
    pub fn set_version(&mut self, version: u8) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0x0f) | (version << 4);
    }

    /// Sets IHL from a length in bytes (rounded down to a multiple of four;
    /// values above 60 are masked).
    #[inline]
    pub fn set_header_len(&mut self, len: u8) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0xf0) | ((len / 4) & 0x0f);
    }

    /// Sets the DSCP (low six bits used).
    #[inline]
    pub fn set_dscp(&mut self, dscp: u8) {
        let b = &mut self.buffer.as_mut()[field::DSCP_ECN];
        *b = (*b & 0x03) | (dscp << 2);
    }

    /// Sets the ECN (low two bits used).
    #[inline]
    pub fn set_ecn(&mut self, ecn: u8) {
        let b = &mut self.buffer.as_mut()[field::DSCP_ECN];
        *b = (*b & 0xfc) | (ecn & 0x03);
    }

    /// Sets the total length.
    #[inline]
    pub fn set_total_len(&mut self, len: u16) {
        put_u16(&mut self.buffer.as_mut()[field::LENGTH], len);
    }

    /// Sets the identification.
    #[inline]
    pub fn set_ident(&mut self, ident: u16) {
        put_u16(&mut self.buffer.as_mut()[field::IDENT], ident);
    }

    fn update_flg_off(&mut self, keep: u16, set: u16) {
        let b = &mut self.buffer.as_mut()[field::FLG_OFF];
        let v = (get_u16(b) & keep) | set;
        put_u16(b, v);
    }

    /// Sets the three flag bits (low three bits of `flags` used).
    #[inline]
    pub fn set_flags(&mut self, flags: u8) {
        self.update_flg_off(OFFSET_MASK, u16::from(flags & 7) << 13);
    }

    /// Sets or clears DF.
    #[inline]
    pub fn set_dont_frag(&mut self, value: bool) {
        self.update_flg_off(!FLAG_DF, if value { FLAG_DF } else { 0 });
    }

    /// Sets or clears MF.
    #[inline]
    pub fn set_more_frags(&mut self, value: bool) {
        self.update_flg_off(!FLAG_MF, if value { FLAG_MF } else { 0 });
    }

    /// Sets the fragment offset from a byte offset (divided by 8).
    #[inline]
    pub fn set_frag_offset(&mut self, offset: u16) {
        self.update_flg_off(!OFFSET_MASK, (offset >> 3) & OFFSET_MASK);
    }

    /// Sets the TTL.
    #[inline]
    pub fn set_ttl(&mut self, ttl: u8) {
        self.buffer.as_mut()[field::TTL] = ttl;
    }

    /// Sets the protocol.
    #[inline]
    pub fn set_protocol(&mut self, protocol: IpProtocol) {
        self.buffer.as_mut()[field::PROTOCOL] = protocol.0;
    }

    /// Sets the checksum field.
    #[inline]
    pub fn set_checksum(&mut self, csum: u16) {
        put_u16(&mut self.buffer.as_mut()[field::CHECKSUM], csum);
    }

    /// Sets the source address.
    #[inline]
    pub fn set_src_addr(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&addr.octets());
    }

    /// Sets the destination address.
    #[inline]
    pub fn set_dst_addr(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&addr.octets());
    }

    /// Computes and stores the header checksum.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let header_len = usize::from(self.header_len());
        let csum = !checksum::data(&self.buffer.as_ref()[..header_len]);
        self.set_checksum(csum);
    }

    /// Decrements the TTL and patches the checksum incrementally (RFC 1624),
    /// returning the new TTL. A TTL of 0 stays 0. The checksum stays valid if
    /// it was valid.
    pub fn decrement_ttl(&mut self) -> u8 {
        let ttl = self.ttl();
        if ttl == 0 {
            return 0;
        }
        let proto = u16::from(self.protocol().0);
        let old = (u16::from(ttl) << 8) | proto;
        let new = (u16::from(ttl - 1) << 8) | proto;
        let csum = checksum::update16(self.checksum(), old, new);
        self.set_ttl(ttl - 1);
        self.set_checksum(csum);
        ttl - 1
    }

    /// Mutable options.
    #[inline]
    pub fn options_mut(&mut self) -> &mut [u8] {
        let end = usize::from(self.header_len());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }

    /// Mutable payload (from `header_len` to `total_len`).
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let range = usize::from(self.header_len())..usize::from(self.total_len());
        &mut self.buffer.as_mut()[range]
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Ipv4Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// The high-level contents of an IPv4 header.
///
/// Parsing accepts options and fragments but keeps neither: `payload_len` is
/// the length of whatever follows the header (of this fragment). Emitting
/// writes a 20-byte header with DSCP/ECN 0, identification 0, DF set and no
/// fragmentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Repr {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Payload protocol.
    pub protocol: IpProtocol,
    /// Payload length in bytes.
    pub payload_len: usize,
    /// Time to live.
    pub ttl: u8,
}

impl Ipv4Repr {
    /// Length of the header this repr emits.
    pub const HEADER_LEN: usize = HEADER_LEN;
    /// Largest `payload_len` that fits the 16-bit total length.
    pub const MAX_PAYLOAD_LEN: usize = u16::MAX as usize - HEADER_LEN;

    /// Validates the view (as `new_checked` does) and the header checksum
    /// ([`Error::Malformed`] if wrong), then reads the header.
    pub fn parse<T: AsRef<[u8]>>(packet: &Ipv4Packet<T>) -> Result<Self> {
        packet.check_len()?;
        if !packet.verify_checksum() {
            return Err(Error::Malformed);
        }
        Ok(Ipv4Repr {
            src: packet.src_addr(),
            dst: packet.dst_addr(),
            protocol: packet.protocol(),
            payload_len: usize::from(packet.total_len() - u16::from(packet.header_len())),
            ttl: packet.ttl(),
        })
    }

    /// Bytes the header needs (the payload comes on top).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header and its checksum; the payload is left untouched.
    ///
    /// # Panics
    /// If the buffer is shorter than [`Self::buffer_len`] or `payload_len`
    /// exceeds [`Self::MAX_PAYLOAD_LEN`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Ipv4Packet<T>) {
        assert!(
            self.payload_len <= Self::MAX_PAYLOAD_LEN,
            "IPv4 payload too long"
        );
        packet.set_version(4);
        packet.set_header_len(HEADER_LEN as u8);
        packet.set_dscp(0);
        packet.set_ecn(0);
        packet.set_total_len((HEADER_LEN + self.payload_len) as u16);
        packet.set_ident(0);
        packet.update_flg_off(0, FLAG_DF);
        packet.set_ttl(self.ttl);
        packet.set_protocol(self.protocol);
        packet.set_src_addr(self.src);
        packet.set_dst_addr(self.dst);
        packet.fill_checksum();
    }
}

impl fmt::Display for Ipv4Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "IPv4 src={} dst={} proto={} len={} ttl={}",
            self.src, self.dst, self.protocol, self.payload_len, self.ttl
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;

    /// Header of a 115-byte UDP datagram 192.168.0.1 -> 192.168.0.199, with
    /// the well-known checksum 0xb861, followed by the UDP payload bytes.
    fn sample() -> [u8; 115] {
        let mut b = [0u8; 115];
        b[..20].copy_from_slice(&[
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ]);
        for (i, x) in b[20..].iter_mut().enumerate() {
            *x = i as u8;
        }
        b
    }

    fn sample_repr() -> Ipv4Repr {
        Ipv4Repr {
            src: Ipv4Addr::new(192, 168, 0, 1),
            dst: Ipv4Addr::new(192, 168, 0, 199),
            protocol: IpProtocol::UDP,
            payload_len: 95,
            ttl: 64,
        }
    }

    #[test]
    fn parse_known_header() {
        let buf = sample();
        let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(p.version(), 4);
        assert_eq!(p.header_len(), 20);
        assert_eq!((p.dscp(), p.ecn()), (0, 0));
        assert_eq!(p.total_len(), 115);
        assert_eq!(p.ident(), 0);
        assert_eq!(p.flags(), 0b010);
        assert!(p.dont_frag() && !p.more_frags() && !p.is_fragment());
        assert_eq!(p.frag_offset(), 0);
        assert_eq!(p.ttl(), 64);
        assert_eq!(p.protocol(), IpProtocol::UDP);
        assert_eq!(p.checksum(), 0xb861);
        assert!(p.verify_checksum());
        assert_eq!(p.src_addr(), Ipv4Addr::new(192, 168, 0, 1));
        assert_eq!(p.dst_addr(), Ipv4Addr::new(192, 168, 0, 199));
        assert!(p.options().is_empty());
        assert_eq!(p.payload().len(), 95);
        assert_eq!(p.payload()[..3], [0, 1, 2]);
        assert_eq!(Ipv4Repr::parse(&p).unwrap(), sample_repr());
    }

    #[test]
    fn emit_known_header() {
        let mut buf = sample();
        buf[..20].fill(0xee);
        let mut p = Ipv4Packet::new_unchecked(&mut buf[..]);
        sample_repr().emit(&mut p);
        assert_eq!(buf, sample());
    }

    #[test]
    fn round_trip_table() {
        let table = [
            sample_repr(),
            Ipv4Repr {
                src: Ipv4Addr::new(10, 0, 0, 1),
                dst: Ipv4Addr::BROADCAST,
                protocol: IpProtocol::ICMP,
                payload_len: 0,
                ttl: 1,
            },
            Ipv4Repr {
                src: Ipv4Addr::UNSPECIFIED,
                dst: Ipv4Addr::new(224, 0, 0, 251),
                protocol: IpProtocol(253),
                payload_len: 1480,
                ttl: 255,
            },
        ];
        let mut buf = [0u8; 1500];
        for repr in table {
            let len = repr.buffer_len() + repr.payload_len;
            let mut p = Ipv4Packet::new_unchecked(&mut buf[..len]);
            repr.emit(&mut p);
            let p = Ipv4Packet::new_checked(&buf[..len]).unwrap();
            assert!(p.verify_checksum());
            assert_eq!(Ipv4Repr::parse(&p).unwrap(), repr);
            // An independent parser agrees.
            let (h, _) = etherparse::Ipv4Header::from_slice(&buf[..len]).unwrap();
            assert_eq!(h.source, repr.src.octets());
            assert_eq!(h.destination, repr.dst.octets());
            assert_eq!(h.protocol.0, repr.protocol.0);
            assert_eq!(h.time_to_live, repr.ttl);
            assert_eq!(usize::from(h.payload_len().unwrap()), repr.payload_len);
            assert_eq!(h.header_checksum, h.calc_header_checksum());
        }
    }

    #[test]
    fn matches_etherparse_bytes() {
        let repr = sample_repr();
        let h = etherparse::Ipv4Header::new(
            repr.payload_len as u16,
            repr.ttl,
            etherparse::IpNumber(repr.protocol.0),
            repr.src.octets(),
            repr.dst.octets(),
        )
        .unwrap();
        let mut theirs = h.to_bytes();
        let csum = h.calc_header_checksum().to_be_bytes();
        theirs[10..12].copy_from_slice(&csum);
        let mut ours = [0u8; 20];
        repr.emit(&mut Ipv4Packet::new_unchecked(&mut ours[..]));
        assert_eq!(ours[..], theirs[..]);
    }

    #[test]
    fn options_and_padding() {
        // IHL 6 (one 4-byte option: NOP NOP NOP EOL), 4-byte payload, then
        // 6 bytes of link-layer padding.
        let mut buf = [0u8; 34];
        buf[..24].copy_from_slice(&[
            0x46, 0xb8, 0x00, 0x1c, 0x12, 0x34, 0x20, 0x05, 0x10, 0x06, 0x00, 0x00, 10, 0, 0, 1,
            10, 0, 0, 2, 0x01, 0x01, 0x01, 0x00,
        ]);
        buf[24..28].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
        let mut p = Ipv4Packet::new_checked(&mut buf[..]).unwrap();
        p.fill_checksum();
        assert!(p.verify_checksum());
        assert_eq!(p.header_len(), 24);
        assert_eq!((p.dscp(), p.ecn()), (46, 0));
        assert_eq!(p.ident(), 0x1234);
        assert!(p.more_frags() && !p.dont_frag() && p.is_fragment());
        assert_eq!(p.frag_offset(), 5 * 8);
        assert_eq!(p.options(), &[1, 1, 1, 0]);
        assert_eq!(p.payload(), &[0xde, 0xad, 0xbe, 0xef]);
        let r = Ipv4Repr::parse(&p).unwrap();
        assert_eq!(r.payload_len, 4);
        assert_eq!(r.protocol, IpProtocol::TCP);
        p.options_mut()[0] = 0;
        p.payload_mut()[0] = 0;
        assert_eq!(
            Ipv4Repr::parse(&p),
            Err(Error::Malformed),
            "checksum now wrong"
        );
        let (h, _) = etherparse::Ipv4Header::from_slice(&buf).unwrap();
        assert_eq!(h.fragment_offset.value(), 5);
    }

    #[test]
    fn setters() {
        let mut buf = [0u8; 20];
        let mut p = Ipv4Packet::new_unchecked(&mut buf[..]);
        p.set_version(4);
        p.set_header_len(20);
        p.set_dscp(0x3f);
        p.set_ecn(3);
        p.set_ecn(1);
        p.set_total_len(20);
        p.set_ident(0xabcd);
        p.set_flags(0b111);
        p.set_frag_offset(0xffff);
        assert_eq!(p.frag_offset(), 0x1fff << 3);
        p.set_dont_frag(false);
        p.set_more_frags(false);
        assert_eq!(p.flags(), 0b100);
        p.set_flags(0);
        p.set_more_frags(true);
        p.set_frag_offset(1480);
        p.set_ttl(9);
        p.set_protocol(IpProtocol::TCP);
        p.set_src_addr(Ipv4Addr::new(1, 2, 3, 4));
        p.set_dst_addr(Ipv4Addr::new(5, 6, 7, 8));
        p.fill_checksum();
        let p = Ipv4Packet::new_checked(p.into_inner()).unwrap();
        assert_eq!((p.dscp(), p.ecn()), (0x3f, 1));
        assert_eq!(p.ident(), 0xabcd);
        assert_eq!(p.flags(), 0b001);
        assert_eq!(p.frag_offset(), 1480);
        assert!(p.verify_checksum());
        assert!(p.payload().is_empty());
        let (h, _) = etherparse::Ipv4Header::from_slice(p.as_ref()).unwrap();
        assert_eq!(h.dscp.value(), 0x3f);
        assert_eq!(h.ecn.value(), 1);
        assert!(h.more_fragments);
        assert_eq!(h.fragment_offset.value(), 1480 / 8);
        assert_eq!(h.header_checksum, h.calc_header_checksum());
    }

    #[test]
    fn decrement_ttl_keeps_checksum_valid() {
        let mut buf = sample();
        let mut p = Ipv4Packet::new_checked(&mut buf[..]).unwrap();
        for expect in (0..64).rev() {
            assert_eq!(p.decrement_ttl(), expect);
            assert!(p.verify_checksum(), "ttl {expect}");
        }
        assert_eq!(p.decrement_ttl(), 0);
        assert!(p.verify_checksum());
    }

    #[test]
    fn bad_inputs() {
        let good = sample();
        // (description, mutation, expected error)
        type Mutate = fn(&mut [u8; 115]) -> usize;
        let table: &[(&str, Mutate, Error)] = &[
            ("empty", |_| 0, Error::Truncated),
            ("19 bytes", |_| 19, Error::Truncated),
            (
                "version 6",
                |b| {
                    b[0] = 0x65;
                    115
                },
                Error::Malformed,
            ),
            (
                "version 0",
                |b| {
                    b[0] = 0x05;
                    115
                },
                Error::Malformed,
            ),
            (
                "ihl 4",
                |b| {
                    b[0] = 0x44;
                    115
                },
                Error::Malformed,
            ),
            (
                "ihl 0",
                |b| {
                    b[0] = 0x40;
                    115
                },
                Error::Malformed,
            ),
            (
                "ihl 15 in 40 bytes",
                |b| {
                    b[0] = 0x4f;
                    40
                },
                Error::Truncated,
            ),
            (
                "total_len < header",
                |b| {
                    b[3] = 19;
                    115
                },
                Error::Malformed,
            ),
            (
                "total_len 0",
                |b| {
                    b[2] = 0;
                    b[3] = 0;
                    115
                },
                Error::Malformed,
            ),
            ("total_len > buffer", |_| 114, Error::Truncated),
            (
                "total_len 0xffff",
                |b| {
                    b[2] = 0xff;
                    b[3] = 0xff;
                    115
                },
                Error::Truncated,
            ),
        ];
        for (what, mutate, err) in table {
            let mut b = good;
            let len = mutate(&mut b);
            assert_eq!(
                Ipv4Packet::new_checked(&b[..len]).err(),
                Some(*err),
                "{what}"
            );
            assert_eq!(
                Ipv4Repr::parse(&Ipv4Packet::new_unchecked(&b[..len])),
                Err(*err),
                "{what}"
            );
        }
        let mut b = good;
        b[11] ^= 1;
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert!(!p.verify_checksum());
        assert_eq!(Ipv4Repr::parse(&p), Err(Error::Malformed), "bad checksum");
    }

    #[test]
    #[should_panic(expected = "IPv4 payload too long")]
    fn emit_oversize_panics() {
        let mut buf = [0u8; 20];
        let repr = Ipv4Repr {
            payload_len: Ipv4Repr::MAX_PAYLOAD_LEN + 1,
            ..sample_repr()
        };
        repr.emit(&mut Ipv4Packet::new_unchecked(&mut buf[..]));
    }

    #[test]
    fn display() {
        assert_eq!(
            sample_repr().to_string(),
            "IPv4 src=192.168.0.1 dst=192.168.0.199 proto=UDP len=95 ttl=64"
        );
        assert_eq!(IpProtocol(200).to_string(), "200");
        assert_eq!(std::format!("{:?}", IpProtocol::TCP), "IpProtocol(TCP)");
        assert_eq!(u8::from(IpProtocol::from(58)), 58);
    }
}
