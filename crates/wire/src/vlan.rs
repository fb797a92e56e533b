//! IEEE 802.1Q / 802.1ad VLAN tags.
//!
//! The view covers the four bytes that follow a TPID of [`EtherType::VLAN`]
//! or [`EtherType::QINQ`] in an Ethernet header: the tag control information
//! (PCP, DEI, VID) and the inner EtherType, then the inner payload. Hand it
//! `EthernetFrame::payload()` (or the payload of an outer tag for QinQ).

use core::fmt;

use crate::EtherType;
use crate::bytes::{get_u16, put_u16};
use crate::error::{Error, Result};

/// Field offsets of a VLAN tag, relative to the byte after the TPID.
pub mod field {
    use crate::{Field, Rest};
    /// Tag control information: PCP (3 bits), DEI (1 bit), VID (12 bits).
    pub const TCI: Field = 0..2;
    /// Inner EtherType.
    pub const ETHERTYPE: Field = 2..4;
    /// Inner payload.
    pub const PAYLOAD: Rest = 4..;
}

/// Length of a tag after the TPID.
pub const HEADER_LEN: usize = field::PAYLOAD.start;

/// Largest VLAN identifier (0xfff itself is reserved but representable).
pub const VID_MAX: u16 = 0x0fff;

/// A zero-copy view of a VLAN tag (TCI + inner EtherType) and what follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VlanTag<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> VlanTag<T> {
    /// Wraps `buffer` without checks; accessors panic if it is too short.
    pub const fn new_unchecked(buffer: T) -> Self {
        VlanTag { buffer }
    }

    /// Wraps `buffer`, failing with [`Error::Truncated`] if it is shorter than
    /// four bytes. No accessor panics on the result.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let t = Self::new_unchecked(buffer);
        t.check_len()?;
        Ok(t)
    }

    /// Checks that the buffer holds the tag.
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

    /// The raw tag control information.
    #[inline]
    pub fn tci(&self) -> u16 {
        get_u16(&self.buffer.as_ref()[field::TCI])
    }

    /// Priority code point (0..=7).
    #[inline]
    pub fn pcp(&self) -> u8 {
        (self.tci() >> 13) as u8
    }

    /// Drop eligible indicator.
    #[inline]
    pub fn dei(&self) -> bool {
        self.tci() & 0x1000 != 0
    }

    /// VLAN identifier (0..=4095).
    #[inline]
    pub fn vid(&self) -> u16 {
        self.tci() & VID_MAX
    }

    /// The EtherType of the encapsulated payload.
    #[inline]
    pub fn ethertype(&self) -> EtherType {
        EtherType(get_u16(&self.buffer.as_ref()[field::ETHERTYPE]))
    }

    /// The encapsulated payload.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> VlanTag<T> {
    /// Sets the whole TCI.
    #[inline]
    pub fn set_tci(&mut self, tci: u16) {
        put_u16(&mut self.buffer.as_mut()[field::TCI], tci);
    }

    /// Sets the PCP; only the low three bits of `pcp` are used.
    #[inline]
    pub fn set_pcp(&mut self, pcp: u8) {
        let tci = (self.tci() & 0x1fff) | (u16::from(pcp & 7) << 13);
        self.set_tci(tci);
    }

    /// Sets the DEI bit.
    #[inline]
    pub fn set_dei(&mut self, dei: bool) {
        let tci = (self.tci() & !0x1000) | if dei { 0x1000 } else { 0 };
        self.set_tci(tci);
    }

    /// Sets the VID; only the low twelve bits of `vid` are used.
    #[inline]
    pub fn set_vid(&mut self, vid: u16) {
        let tci = (self.tci() & !VID_MAX) | (vid & VID_MAX);
        self.set_tci(tci);
    }

    /// Sets the inner EtherType.
    #[inline]
    pub fn set_ethertype(&mut self, ethertype: EtherType) {
        put_u16(&mut self.buffer.as_mut()[field::ETHERTYPE], ethertype.0);
    }

    /// Mutable inner payload.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD]
    }
}

/// The high-level contents of a VLAN tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VlanRepr {
    /// Priority code point (0..=7).
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN identifier (0..=4095).
    pub vid: u16,
    /// Inner EtherType.
    pub ethertype: EtherType,
}

impl VlanRepr {
    /// Tag length after the TPID.
    pub const HEADER_LEN: usize = HEADER_LEN;

    /// Reads the tag; fails with [`Error::Truncated`] on a short buffer.
    pub fn parse<T: AsRef<[u8]>>(tag: &VlanTag<T>) -> Result<Self> {
        tag.check_len()?;
        Ok(VlanRepr {
            pcp: tag.pcp(),
            dei: tag.dei(),
            vid: tag.vid(),
            ethertype: tag.ethertype(),
        })
    }

    /// The TCI this repr encodes (out-of-range `pcp`/`vid` bits are masked).
    pub const fn tci(&self) -> u16 {
        ((self.pcp as u16 & 7) << 13) | if self.dei { 0x1000 } else { 0 } | (self.vid & VID_MAX)
    }

    /// Bytes the tag needs.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the tag.
    ///
    /// # Panics
    /// If the buffer is shorter than [`Self::buffer_len`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, tag: &mut VlanTag<T>) {
        tag.set_tci(self.tci());
        tag.set_ethertype(self.ethertype);
    }
}

impl fmt::Display for VlanRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "VLAN vid={} pcp={} dei={} type={}",
            self.vid, self.pcp, self.dei as u8, self.ethertype
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EthernetAddress, EthernetFrame, EthernetRepr};
    use std::string::ToString;

    /// A tagged frame: VID 100, PCP 5, DEI 0, inner IPv4 (header start only).
    const TAGGED: [u8; 22] = [
        0x00, 0x1b, 0x21, 0x01, 0x02, 0x03, // dst
        0x52, 0x54, 0x00, 0x12, 0x34, 0x56, // src
        0x81, 0x00, // TPID 802.1Q
        0xa0, 0x64, // PCP 5, DEI 0, VID 100
        0x08, 0x00, // inner IPv4
        0x45, 0x00, 0x00, 0x14,
    ];

    #[test]
    fn parse_table() {
        // (tag bytes, pcp, dei, vid, inner ethertype)
        let table: &[([u8; 4], u8, bool, u16, EtherType)] = &[
            ([0xa0, 0x64, 0x08, 0x00], 5, false, 100, EtherType::IPV4),
            ([0x00, 0x01, 0x08, 0x06], 0, false, 1, EtherType::ARP),
            ([0xff, 0xff, 0x86, 0xdd], 7, true, 4095, EtherType::IPV6),
            ([0x10, 0x00, 0x81, 0x00], 0, true, 0, EtherType::VLAN),
            ([0xef, 0xfe, 0x12, 0x34], 7, false, 4094, EtherType(0x1234)),
        ];
        for (bytes, pcp, dei, vid, et) in table {
            let t = VlanTag::new_checked(&bytes[..]).unwrap();
            let repr = VlanRepr {
                pcp: *pcp,
                dei: *dei,
                vid: *vid,
                ethertype: *et,
            };
            assert_eq!(VlanRepr::parse(&t).unwrap(), repr);
            assert_eq!(t.tci(), repr.tci());
            assert!(t.payload().is_empty());
            let mut out = [0u8; 4];
            repr.emit(&mut VlanTag::new_unchecked(&mut out[..]));
            assert_eq!(&out, bytes);
        }
    }

    #[test]
    fn parse_tagged_frame() {
        let f = EthernetFrame::new_checked(&TAGGED[..]).unwrap();
        assert_eq!(f.ethertype(), EtherType::VLAN);
        let t = VlanTag::new_checked(f.payload()).unwrap();
        assert_eq!(
            VlanRepr::parse(&t).unwrap(),
            VlanRepr {
                pcp: 5,
                dei: false,
                vid: 100,
                ethertype: EtherType::IPV4
            }
        );
        assert_eq!(t.payload(), &[0x45, 0x00, 0x00, 0x14]);

        let (eth, vlan) = etherparse::SingleVlanHeader::from_slice(&TAGGED[14..])
            .map(|(v, _)| (&TAGGED[..14], v))
            .unwrap();
        assert_eq!(eth.len(), 14);
        assert_eq!(vlan.vlan_id.value(), t.vid());
        assert_eq!(vlan.pcp.value(), t.pcp());
        assert_eq!(vlan.drop_eligible_indicator, t.dei());
        assert_eq!(vlan.ether_type.0, t.ethertype().0);
    }

    #[test]
    fn emit_tagged_frame() {
        let mut buf = [0u8; 22];
        buf[18..].copy_from_slice(&TAGGED[18..]);
        let mut f = EthernetFrame::new_unchecked(&mut buf[..]);
        EthernetRepr {
            src: EthernetAddress::new(0x52, 0x54, 0x00, 0x12, 0x34, 0x56),
            dst: EthernetAddress::new(0x00, 0x1b, 0x21, 0x01, 0x02, 0x03),
            ethertype: EtherType::VLAN,
        }
        .emit(&mut f);
        let mut t = VlanTag::new_unchecked(f.payload_mut());
        VlanRepr {
            pcp: 5,
            dei: false,
            vid: 100,
            ethertype: EtherType::IPV4,
        }
        .emit(&mut t);
        assert_eq!(buf, TAGGED);
    }

    #[test]
    fn setters_mask_and_preserve() {
        let mut buf = [0u8; 6];
        let mut t = VlanTag::new_checked(&mut buf[..]).unwrap();
        t.set_vid(0xffff);
        assert_eq!((t.pcp(), t.dei(), t.vid()), (0, false, 0xfff));
        t.set_pcp(0xff);
        assert_eq!((t.pcp(), t.dei(), t.vid()), (7, false, 0xfff));
        t.set_dei(true);
        assert_eq!(t.tci(), 0xffff);
        t.set_vid(42);
        t.set_dei(false);
        t.set_pcp(3);
        assert_eq!((t.pcp(), t.dei(), t.vid()), (3, false, 42));
        t.set_ethertype(EtherType::ARP);
        t.payload_mut().copy_from_slice(&[9, 9]);
        assert_eq!(t.ethertype(), EtherType::ARP);
        assert_eq!(t.into_inner(), &[0x60, 42, 0x08, 0x06, 9, 9]);
        let masked = VlanRepr {
            pcp: 9,
            dei: false,
            vid: 0x1005,
            ethertype: EtherType::IPV4,
        };
        assert_eq!(masked.tci(), (1 << 13) | 5);
    }

    #[test]
    fn truncated() {
        for len in 0..HEADER_LEN {
            assert_eq!(
                VlanTag::new_checked(&TAGGED[14..14 + len]),
                Err(Error::Truncated)
            );
            let t = VlanTag::new_unchecked(&TAGGED[14..14 + len]);
            assert_eq!(VlanRepr::parse(&t), Err(Error::Truncated));
        }
    }

    #[test]
    fn display() {
        let r = VlanRepr {
            pcp: 5,
            dei: true,
            vid: 100,
            ethertype: EtherType::IPV4,
        };
        assert_eq!(r.to_string(), "VLAN vid=100 pcp=5 dei=1 type=IPv4");
    }
}
