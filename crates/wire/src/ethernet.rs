//! Ethernet II frames: addresses, EtherTypes, the frame view and its repr.

use core::fmt;
use core::str::FromStr;

use crate::bytes::{get_u16, put_u16};
use crate::error::{Error, Result};

/// A 48-bit Ethernet (MAC) address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct EthernetAddress(pub [u8; 6]);

impl EthernetAddress {
    /// `ff:ff:ff:ff:ff:ff`.
    pub const BROADCAST: EthernetAddress = EthernetAddress([0xff; 6]);
    /// `00:00:00:00:00:00`.
    pub const ZERO: EthernetAddress = EthernetAddress([0; 6]);

    /// Builds an address from its six octets.
    pub const fn new(a: u8, b: u8, c: u8, d: u8, e: u8, f: u8) -> Self {
        EthernetAddress([a, b, c, d, e, f])
    }

    /// Builds an address from the first six bytes of `data`, or `None` if it
    /// is shorter.
    pub fn from_bytes(data: &[u8]) -> Option<Self> {
        data.get(..6)
            .map(|b| EthernetAddress([b[0], b[1], b[2], b[3], b[4], b[5]]))
    }

    /// The six octets.
    pub const fn as_bytes(&self) -> &[u8; 6] {
        &self.0
    }

    /// `ff:ff:ff:ff:ff:ff`.
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// Group bit set (broadcast included).
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    /// Group bit clear.
    pub const fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }

    /// Locally administered bit set.
    pub const fn is_local(&self) -> bool {
        self.0[0] & 0x02 != 0
    }

    /// The 48-bit big-endian number the address spells
    /// (`00:00:00:00:00:01` is 1): one word to hash, mask or store.
    #[inline(always)]
    pub const fn to_u64(self) -> u64 {
        let b = self.0;
        u64::from_be_bytes([0, 0, b[0], b[1], b[2], b[3], b[4], b[5]])
    }

    /// The inverse of [`Self::to_u64`]; the high 16 bits of `v` are ignored.
    #[inline(always)]
    pub const fn from_u64(v: u64) -> Self {
        let b = v.to_be_bytes();
        EthernetAddress([b[2], b[3], b[4], b[5], b[6], b[7]])
    }
}

impl From<[u8; 6]> for EthernetAddress {
    fn from(b: [u8; 6]) -> Self {
        EthernetAddress(b)
    }
}

impl fmt::Display for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl FromStr for EthernetAddress {
    type Err = Error;

    /// Parses `aa:bb:cc:dd:ee:ff` (or with `-` separators); each octet is one
    /// or two hex digits. Anything else is [`Error::Malformed`].
    fn from_str(s: &str) -> Result<Self> {
        let sep = if s.contains('-') { '-' } else { ':' };
        let mut out = [0u8; 6];
        let mut parts = s.split(sep);
        for o in out.iter_mut() {
            let p = parts.next().ok_or(Error::Malformed)?;
            if p.is_empty() || p.len() > 2 || !p.bytes().all(|c| c.is_ascii_hexdigit()) {
                return Err(Error::Malformed);
            }
            *o = u8::from_str_radix(p, 16).map_err(|_| Error::Malformed)?;
        }
        if parts.next().is_some() {
            return Err(Error::Malformed);
        }
        Ok(EthernetAddress(out))
    }
}

/// An EtherType (or, in a VLAN tag, the inner protocol). A newtype so that
/// unknown values pass through unchanged.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct EtherType(pub u16);

impl EtherType {
    /// IPv4.
    pub const IPV4: EtherType = EtherType(0x0800);
    /// ARP.
    pub const ARP: EtherType = EtherType(0x0806);
    /// IEEE 802.1Q VLAN tag (C-tag).
    pub const VLAN: EtherType = EtherType(0x8100);
    /// IEEE 802.1ad service tag (S-tag, QinQ).
    pub const QINQ: EtherType = EtherType(0x88a8);
    /// IPv6.
    pub const IPV6: EtherType = EtherType(0x86dd);
    /// Reverse ARP (RFC 903): what a migrated guest is announced with.
    pub const RARP: EtherType = EtherType(0x8035);

    /// A short name for the known values.
    pub const fn name(self) -> Option<&'static str> {
        match self {
            Self::IPV4 => Some("IPv4"),
            Self::ARP => Some("ARP"),
            Self::VLAN => Some("VLAN"),
            Self::QINQ => Some("QinQ"),
            Self::IPV6 => Some("IPv6"),
            Self::RARP => Some("RARP"),
            _ => None,
        }
    }

    /// True for the tag protocol identifiers 802.1Q and 802.1ad.
    pub const fn is_vlan(self) -> bool {
        matches!(self, Self::VLAN | Self::QINQ)
    }
}

impl From<u16> for EtherType {
    fn from(v: u16) -> Self {
        EtherType(v)
    }
}

impl From<EtherType> for u16 {
    fn from(v: EtherType) -> Self {
        v.0
    }
}

impl fmt::Display for EtherType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "0x{:04x}", self.0),
        }
    }
}

impl fmt::Debug for EtherType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EtherType({self})")
    }
}

/// Field offsets of the Ethernet II header.
pub mod field {
    use crate::{Field, Rest};
    /// Destination address.
    pub const DESTINATION: Field = 0..6;
    /// Source address.
    pub const SOURCE: Field = 6..12;
    /// EtherType.
    pub const ETHERTYPE: Field = 12..14;
    /// Everything after the header.
    pub const PAYLOAD: Rest = 14..;
}

/// Length of the Ethernet II header (no FCS, no VLAN tag).
pub const HEADER_LEN: usize = field::PAYLOAD.start;

/// A zero-copy view of an Ethernet II frame (without FCS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wraps `buffer` without checks; accessors panic if it is too short.
    pub const fn new_unchecked(buffer: T) -> Self {
        EthernetFrame { buffer }
    }

    /// Wraps `buffer`, failing with [`Error::Truncated`] if it cannot hold the
    /// header. No accessor panics on the result.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let f = Self::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    /// Checks that the buffer holds the whole header.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// Unwraps the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The header length (always [`HEADER_LEN`]).
    pub const fn header_len() -> usize {
        HEADER_LEN
    }

    /// Buffer length needed for a frame with `payload_len` bytes of payload.
    pub const fn buffer_len(payload_len: usize) -> usize {
        HEADER_LEN + payload_len
    }

    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> EthernetAddress {
        let b = &self.buffer.as_ref()[field::DESTINATION];
        EthernetAddress([b[0], b[1], b[2], b[3], b[4], b[5]])
    }

    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> EthernetAddress {
        let b = &self.buffer.as_ref()[field::SOURCE];
        EthernetAddress([b[0], b[1], b[2], b[3], b[4], b[5]])
    }

    /// [`Self::dst_addr`] as [`EthernetAddress::to_u64`] packs it, read
    /// with one 8-byte load (the two bytes past it are the source's first).
    #[inline(always)]
    pub fn dst_addr_u64(&self) -> u64 {
        let b = &self.buffer.as_ref()[field::DESTINATION.start..field::DESTINATION.start + 8];
        u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]) >> 16
    }

    /// [`Self::src_addr`] as [`EthernetAddress::to_u64`] packs it, read
    /// with one 8-byte load (the two bytes past it are the EtherType).
    #[inline(always)]
    pub fn src_addr_u64(&self) -> u64 {
        let b = &self.buffer.as_ref()[field::SOURCE.start..field::SOURCE.start + 8];
        u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]) >> 16
    }

    /// EtherType.
    #[inline]
    pub fn ethertype(&self) -> EtherType {
        EtherType(get_u16(&self.buffer.as_ref()[field::ETHERTYPE]))
    }

    /// Everything after the header.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Sets the destination address.
    #[inline]
    pub fn set_dst_addr(&mut self, addr: EthernetAddress) {
        self.buffer.as_mut()[field::DESTINATION].copy_from_slice(&addr.0);
    }

    /// Sets the source address.
    #[inline]
    pub fn set_src_addr(&mut self, addr: EthernetAddress) {
        self.buffer.as_mut()[field::SOURCE].copy_from_slice(&addr.0);
    }

    /// Sets the EtherType.
    #[inline]
    pub fn set_ethertype(&mut self, ethertype: EtherType) {
        put_u16(&mut self.buffer.as_mut()[field::ETHERTYPE], ethertype.0);
    }

    /// Mutable payload.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for EthernetFrame<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// The high-level contents of an Ethernet II header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EthernetRepr {
    /// Source address.
    pub src: EthernetAddress,
    /// Destination address.
    pub dst: EthernetAddress,
    /// EtherType.
    pub ethertype: EtherType,
}

impl EthernetRepr {
    /// Header length.
    pub const HEADER_LEN: usize = HEADER_LEN;

    /// Reads the header; fails with [`Error::Truncated`] on a short buffer.
    pub fn parse<T: AsRef<[u8]>>(frame: &EthernetFrame<T>) -> Result<Self> {
        frame.check_len()?;
        Ok(EthernetRepr {
            src: frame.src_addr(),
            dst: frame.dst_addr(),
            ethertype: frame.ethertype(),
        })
    }

    /// Bytes the header needs.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header; the payload is left untouched.
    ///
    /// # Panics
    /// If the buffer is shorter than [`Self::buffer_len`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut EthernetFrame<T>) {
        frame.set_dst_addr(self.dst);
        frame.set_src_addr(self.src);
        frame.set_ethertype(self.ethertype);
    }
}

impl fmt::Display for EthernetRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "EthernetII src={} dst={} type={}",
            self.src, self.dst, self.ethertype
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;

    /// Start of a real ARP request broadcast (Ethernet header + ARP + padding).
    const FRAME: [u8; 60] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // dst
        0x52, 0x54, 0x00, 0x12, 0x34, 0x56, // src
        0x08, 0x06, // ARP
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x0a,
        0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x02, // ARP
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // padding to 60
    ];

    const MAC: EthernetAddress = EthernetAddress::new(0x52, 0x54, 0x00, 0x12, 0x34, 0x56);

    #[test]
    fn parse_frame() {
        let f = EthernetFrame::new_checked(&FRAME[..]).unwrap();
        assert_eq!(f.dst_addr(), EthernetAddress::BROADCAST);
        assert_eq!(f.src_addr(), MAC);
        assert_eq!(f.ethertype(), EtherType::ARP);
        assert_eq!(f.payload().len(), 46);
        assert_eq!(&f.payload()[..4], &[0x00, 0x01, 0x08, 0x00]);
        let r = EthernetRepr::parse(&f).unwrap();
        assert_eq!(
            r,
            EthernetRepr {
                src: MAC,
                dst: EthernetAddress::BROADCAST,
                ethertype: EtherType::ARP
            }
        );
    }

    #[test]
    fn emit_and_round_trip() {
        let table = [
            EthernetRepr {
                src: MAC,
                dst: EthernetAddress::BROADCAST,
                ethertype: EtherType::ARP,
            },
            EthernetRepr {
                src: EthernetAddress::new(2, 0, 0, 0, 0, 1),
                dst: EthernetAddress::new(0x01, 0x00, 0x5e, 0, 0, 0xfb),
                ethertype: EtherType::IPV4,
            },
            EthernetRepr {
                src: MAC,
                dst: MAC,
                ethertype: EtherType(0x1234),
            },
        ];
        for repr in table {
            let mut buf = [0xaau8; 20];
            let mut f = EthernetFrame::new_unchecked(&mut buf[..]);
            repr.emit(&mut f);
            assert_eq!(EthernetRepr::parse(&f).unwrap(), repr);
            assert_eq!(&buf[14..], &[0xaa; 6], "payload untouched");
            assert_eq!(&buf[..6], &repr.dst.0);
            assert_eq!(&buf[6..12], &repr.src.0);
            assert_eq!(&buf[12..14], &repr.ethertype.0.to_be_bytes());
        }
        let mut buf = [0u8; 14];
        let mut f = EthernetFrame::new_unchecked(&mut buf[..]);
        EthernetRepr {
            src: MAC,
            dst: EthernetAddress::BROADCAST,
            ethertype: EtherType::ARP,
        }
        .emit(&mut f);
        assert_eq!(buf[..], FRAME[..14]);
    }

    #[test]
    fn setters_and_payload_mut() {
        let mut buf = [0u8; 16];
        let mut f = EthernetFrame::new_checked(&mut buf[..]).unwrap();
        f.set_dst_addr(MAC);
        f.set_src_addr(EthernetAddress::BROADCAST);
        f.set_ethertype(EtherType::VLAN);
        f.payload_mut().copy_from_slice(&[1, 2]);
        assert_eq!(f.dst_addr(), MAC);
        assert_eq!(f.src_addr(), EthernetAddress::BROADCAST);
        assert_eq!(f.ethertype(), EtherType::VLAN);
        assert_eq!(f.payload(), &[1, 2]);
        assert_eq!(f.as_ref().len(), 16);
        assert_eq!(EthernetFrame::<&[u8]>::buffer_len(2), 16);
        assert_eq!(EthernetFrame::<&[u8]>::header_len(), 14);
    }

    #[test]
    fn truncated() {
        for len in 0..HEADER_LEN {
            assert_eq!(
                EthernetFrame::new_checked(&FRAME[..len]),
                Err(Error::Truncated)
            );
            let f = EthernetFrame::new_unchecked(&FRAME[..len]);
            assert_eq!(EthernetRepr::parse(&f), Err(Error::Truncated));
        }
        let f = EthernetFrame::new_checked(&FRAME[..HEADER_LEN]).unwrap();
        assert_eq!(f.dst_addr_u64(), f.dst_addr().to_u64());
        assert_eq!(f.src_addr_u64(), f.src_addr().to_u64());
        assert!(f.payload().is_empty());
    }

    #[test]
    fn address_classes() {
        // (addr, broadcast, multicast, unicast, local)
        let table = [
            (EthernetAddress::BROADCAST, true, true, false, true),
            (
                EthernetAddress::new(0x01, 0x00, 0x5e, 0, 0, 1),
                false,
                true,
                false,
                false,
            ),
            (
                EthernetAddress::new(0x33, 0x33, 0, 0, 0, 1),
                false,
                true,
                false,
                true,
            ),
            (MAC, false, false, true, true),
            (
                EthernetAddress::new(0x00, 0x1b, 0x21, 1, 2, 3),
                false,
                false,
                true,
                false,
            ),
            (EthernetAddress::ZERO, false, false, true, false),
        ];
        for (a, b, m, u, l) in table {
            assert_eq!(
                (
                    a.is_broadcast(),
                    a.is_multicast(),
                    a.is_unicast(),
                    a.is_local()
                ),
                (b, m, u, l),
                "{a}"
            );
        }
    }

    #[test]
    fn address_display_and_parse() {
        assert_eq!(MAC.to_string(), "52:54:00:12:34:56");
        assert_eq!(EthernetAddress::BROADCAST.to_string(), "ff:ff:ff:ff:ff:ff");
        let good = [
            ("52:54:00:12:34:56", MAC),
            ("52-54-00-12-34-56", MAC),
            ("52:54:0:12:34:56", MAC),
            ("FF:ff:Ff:fF:ff:ff", EthernetAddress::BROADCAST),
        ];
        for (s, a) in good {
            assert_eq!(s.parse::<EthernetAddress>(), Ok(a), "{s}");
            assert_eq!(a.to_string().parse::<EthernetAddress>(), Ok(a));
        }
        let bad = [
            "",
            "52:54:00:12:34",
            "52:54:00:12:34:56:78",
            "52:54:00:12:34:",
            "52:54:00:12:34:567",
            "52:54:00:12:34:+5",
            "52:54:00:12:34:5g",
            "52:54-00:12:34:56",
            "52 54 00 12 34 56",
        ];
        for s in bad {
            assert_eq!(s.parse::<EthernetAddress>(), Err(Error::Malformed), "{s:?}");
        }
        for (a, n) in [
            (EthernetAddress::ZERO, 0),
            (EthernetAddress::new(0, 0, 0, 0, 0, 1), 1),
            (MAC, 0x5254_0012_3456),
            (EthernetAddress::BROADCAST, 0xffff_ffff_ffff),
        ] {
            assert_eq!(a.to_u64(), n, "{a}");
            assert_eq!(EthernetAddress::from_u64(n), a);
            assert_eq!(EthernetAddress::from_u64(n | 0xabcd << 48), a);
        }
        assert_eq!(EthernetAddress::from_bytes(&FRAME[6..]), Some(MAC));
        assert_eq!(EthernetAddress::from_bytes(&FRAME[..5]), None);
        assert_eq!(
            EthernetAddress::from([1, 2, 3, 4, 5, 6]).as_bytes(),
            &[1, 2, 3, 4, 5, 6]
        );
    }

    #[test]
    fn ethertype_display() {
        assert_eq!(EtherType::IPV4.to_string(), "IPv4");
        assert_eq!(EtherType(0x88cc).to_string(), "0x88cc");
        assert_eq!(std::format!("{:?}", EtherType::ARP), "EtherType(ARP)");
        assert!(EtherType::QINQ.is_vlan() && EtherType::VLAN.is_vlan());
        assert!(!EtherType::IPV6.is_vlan());
        assert_eq!(u16::from(EtherType::from(0x86dd)), 0x86dd);
        let r = EthernetRepr {
            src: MAC,
            dst: EthernetAddress::BROADCAST,
            ethertype: EtherType::ARP,
        };
        assert_eq!(
            r.to_string(),
            "EthernetII src=52:54:00:12:34:56 dst=ff:ff:ff:ff:ff:ff type=ARP"
        );
    }

    #[test]
    fn agrees_with_etherparse() {
        let h = etherparse::Ethernet2HeaderSlice::from_slice(&FRAME).unwrap();
        let f = EthernetFrame::new_checked(&FRAME[..]).unwrap();
        assert_eq!(h.destination(), f.dst_addr().0);
        assert_eq!(h.source(), f.src_addr().0);
        assert_eq!(h.ether_type().0, f.ethertype().0);
    }
}
