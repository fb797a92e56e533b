//! VXLAN headers (RFC 7348 §5): 8 bytes after a UDP header whose
//! destination port is the tunnel's (IANA 4789).
//!
//! ```text
//!  0               1               2               3
//! |R|R|R|R|I|R|R|R|           Reserved                            |
//! |          VXLAN Network Identifier (VNI)       |   Reserved    |
//! ```
//!
//! The I flag must be set; RFC 7348 says the reserved fields "MUST be set
//! to zero on transmission and ignored on receipt", but the receivers
//! users compare with (Open vSwitch's userspace datapath, `netdev-native-tnl.c`)
//! drop frames whose flags word is not exactly `0x08000000` or whose last
//! reserved byte is set, so [`VxlanRepr::parse`] offers both answers.

use core::fmt;

use crate::bytes::{get_u32, put_u32};
use crate::error::{Error, Result};

/// Field offsets of the VXLAN header.
pub mod field {
    use crate::Field;
    /// Flags (one byte) and 24 reserved bits.
    pub const FLAGS: Field = 0..4;
    /// VNI (24 bits) and 8 reserved bits.
    pub const VNI: Field = 4..8;
}

/// Length of the VXLAN header.
pub const HEADER_LEN: usize = field::VNI.end;

/// The UDP destination port IANA assigned to VXLAN.
pub const UDP_PORT: u16 = 4789;

/// The flags word of a plain VXLAN header: only the I (valid VNI) flag.
pub const FLAGS_VNI_VALID: u32 = 0x0800_0000;

/// Largest VNI (24 bits).
pub const MAX_VNI: u32 = (1 << 24) - 1;

/// A zero-copy view of a VXLAN header and the inner frame after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VxlanPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> VxlanPacket<T> {
    /// Wraps `buffer` without checks; accessors panic if it is shorter
    /// than [`HEADER_LEN`].
    pub const fn new_unchecked(buffer: T) -> Self {
        VxlanPacket { buffer }
    }

    /// Wraps `buffer` after checking it holds the header
    /// ([`Error::Truncated`]). No accessor panics on the result.
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Self::new_unchecked(buffer))
    }

    /// The first word: flags byte and 24 reserved bits.
    pub fn flags_word(&self) -> u32 {
        get_u32(&self.buffer.as_ref()[field::FLAGS])
    }

    /// The VXLAN Network Identifier.
    pub fn vni(&self) -> u32 {
        get_u32(&self.buffer.as_ref()[field::VNI]) >> 8
    }

    /// The reserved byte after the VNI.
    pub fn vni_reserved(&self) -> u8 {
        self.buffer.as_ref()[field::VNI.end - 1]
    }

    /// The encapsulated Ethernet frame.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> VxlanPacket<T> {
    /// Sets the first word.
    pub fn set_flags_word(&mut self, v: u32) {
        put_u32(&mut self.buffer.as_mut()[field::FLAGS], v);
    }

    /// Sets the VNI (its low 24 bits) and clears the reserved byte.
    pub fn set_vni(&mut self, vni: u32) {
        put_u32(&mut self.buffer.as_mut()[field::VNI], (vni & MAX_VNI) << 8);
    }
}

/// How strictly [`VxlanRepr::parse`] reads the reserved bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strictness {
    /// RFC 7348's receive rule: only the I flag is checked.
    Rfc,
    /// Open vSwitch's rule: flags word exactly [`FLAGS_VNI_VALID`], the
    /// reserved byte after the VNI zero.
    Exact,
}

/// Why a VXLAN header was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VxlanError {
    /// Fewer than 8 bytes.
    Truncated,
    /// The I flag is clear, or (strictly) other flag or reserved bits are set.
    BadFlags,
    /// (Strictly) the reserved byte after the VNI is not zero.
    ReservedVni,
}

impl From<VxlanError> for Error {
    fn from(e: VxlanError) -> Error {
        match e {
            VxlanError::Truncated => Error::Truncated,
            _ => Error::Malformed,
        }
    }
}

/// The contents of a VXLAN header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VxlanRepr {
    /// VXLAN Network Identifier (24 bits).
    pub vni: u32,
}

impl VxlanRepr {
    /// Reads the header at the start of `buf`.
    pub fn parse(buf: &[u8], strictness: Strictness) -> core::result::Result<Self, VxlanError> {
        let p = VxlanPacket::new_checked(buf).map_err(|_| VxlanError::Truncated)?;
        let flags = p.flags_word();
        let ok = match strictness {
            Strictness::Rfc => flags & FLAGS_VNI_VALID != 0,
            Strictness::Exact => flags == FLAGS_VNI_VALID,
        };
        if !ok {
            return Err(VxlanError::BadFlags);
        }
        if strictness == Strictness::Exact && p.vni_reserved() != 0 {
            return Err(VxlanError::ReservedVni);
        }
        Ok(VxlanRepr { vni: p.vni() })
    }

    /// Bytes the header needs.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header (reserved bits zero).
    ///
    /// # Panics
    /// If the buffer is shorter than [`HEADER_LEN`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut VxlanPacket<T>) {
        packet.set_flags_word(FLAGS_VNI_VALID);
        packet.set_vni(self.vni);
    }
}

impl fmt::Display for VxlanRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "VXLAN vni={}", self.vni)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header as Linux's vxlan driver sends it for VNI 100 (flags
    /// 0x08, VNI 0x000064 in the top 24 bits of the second word).
    const VNI_100: [u8; 8] = [0x08, 0, 0, 0, 0x00, 0x00, 0x64, 0x00];

    #[test]
    fn golden_bytes_round_trip() {
        let r = VxlanRepr::parse(&VNI_100, Strictness::Exact).unwrap();
        assert_eq!(r, VxlanRepr { vni: 100 });
        let mut buf = [0xffu8; 8];
        r.emit(&mut VxlanPacket::new_unchecked(&mut buf[..]));
        assert_eq!(buf, VNI_100);
    }

    #[test]
    fn the_largest_vni_fills_24_bits() {
        let mut buf = [0u8; 8];
        VxlanRepr { vni: MAX_VNI }.emit(&mut VxlanPacket::new_unchecked(&mut buf[..]));
        assert_eq!(buf, [0x08, 0, 0, 0, 0xff, 0xff, 0xff, 0]);
        assert_eq!(
            VxlanRepr::parse(&buf, Strictness::Exact).unwrap().vni,
            MAX_VNI
        );
    }

    #[test]
    fn refusals_by_strictness() {
        struct Case {
            name: &'static str,
            bytes: &'static [u8],
            rfc: core::result::Result<u32, VxlanError>,
            exact: core::result::Result<u32, VxlanError>,
        }
        let cases = [
            Case {
                name: "plain",
                bytes: &VNI_100,
                rfc: Ok(100),
                exact: Ok(100),
            },
            Case {
                name: "seven bytes",
                bytes: &VNI_100[..7],
                rfc: Err(VxlanError::Truncated),
                exact: Err(VxlanError::Truncated),
            },
            Case {
                name: "I flag clear",
                bytes: &[0, 0, 0, 0, 0, 0, 0x64, 0],
                rfc: Err(VxlanError::BadFlags),
                exact: Err(VxlanError::BadFlags),
            },
            Case {
                name: "another flag set (GBP's G bit)",
                bytes: &[0x88, 0, 0, 0, 0, 0, 0x64, 0],
                rfc: Ok(100),
                exact: Err(VxlanError::BadFlags),
            },
            Case {
                name: "reserved bits of the first word",
                bytes: &[0x08, 0, 0x01, 0, 0, 0, 0x64, 0],
                rfc: Ok(100),
                exact: Err(VxlanError::BadFlags),
            },
            Case {
                name: "reserved byte after the VNI",
                bytes: &[0x08, 0, 0, 0, 0, 0, 0x64, 0x01],
                rfc: Ok(100),
                exact: Err(VxlanError::ReservedVni),
            },
        ];
        for c in cases {
            let got = |s| VxlanRepr::parse(c.bytes, s).map(|r| r.vni);
            assert_eq!(got(Strictness::Rfc), c.rfc, "{} (RFC)", c.name);
            assert_eq!(got(Strictness::Exact), c.exact, "{} (exact)", c.name);
        }
    }

    #[test]
    fn payload_follows_the_header() {
        let mut buf = [0u8; 12];
        buf[..8].copy_from_slice(&VNI_100);
        buf[8..].copy_from_slice(&[1, 2, 3, 4]);
        assert_eq!(
            VxlanPacket::new_checked(&buf[..]).unwrap().payload(),
            &[1, 2, 3, 4]
        );
    }
}
