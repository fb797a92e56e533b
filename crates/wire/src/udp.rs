//! UDP datagrams (RFC 768) and their IPv4 checksum.

use core::fmt;

use crate::bytes::{get_u16, put_u16};
use crate::error::{Error, Result};
use crate::{IpProtocol, checksum};
use core::net::Ipv4Addr;

/// Field offsets of the UDP header.
pub mod field {
    use crate::Field;
    /// Source port.
    pub const SRC_PORT: Field = 0..2;
    /// Destination port.
    pub const DST_PORT: Field = 2..4;
    /// Length (header + payload).
    pub const LENGTH: Field = 4..6;
    /// Checksum.
    pub const CHECKSUM: Field = 6..8;
}

/// Length of the UDP header.
pub const HEADER_LEN: usize = field::CHECKSUM.end;

/// A zero-copy view of a UDP datagram.
///
/// The buffer may be longer than the length field says;
/// [`UdpPacket::payload`] stops at the length field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Wraps `buffer` without checks; accessors panic if it is too short or
    /// the length field is inconsistent.
    pub const fn new_unchecked(buffer: T) -> Self {
        UdpPacket { buffer }
    }

    /// Wraps `buffer` after [`UdpPacket::check_len`]. No accessor panics on the
    /// result. The checksum is not checked.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks: the buffer holds 8 bytes ([`Error::Truncated`]); the length
    /// field is at least 8 ([`Error::Malformed`]); the buffer holds length
    /// field bytes ([`Error::Truncated`]).
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let field_len = usize::from(self.len());
        if field_len < HEADER_LEN {
            return Err(Error::Malformed);
        }
        if len < field_len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Unwraps the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Source port.
    #[inline]
    pub fn src_port(&self) -> u16 {
        get_u16(&self.buffer.as_ref()[field::SRC_PORT])
    }

    /// Destination port.
    #[inline]
    pub fn dst_port(&self) -> u16 {
        get_u16(&self.buffer.as_ref()[field::DST_PORT])
    }

    /// Length field (header + payload).
    #[inline]
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u16 {
        get_u16(&self.buffer.as_ref()[field::LENGTH])
    }

    /// Checksum field (0 means "not computed" over IPv4).
    #[inline]
    pub fn checksum(&self) -> u16 {
        get_u16(&self.buffer.as_ref()[field::CHECKSUM])
    }

    /// Payload: from the end of the header to the length field.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..usize::from(self.len())]
    }

    /// True if the checksum is zero (not computed, allowed over IPv4) or
    /// correct for the IPv4 pseudo-header `src`, `dst`.
    pub fn verify_checksum(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        if self.checksum() == 0 {
            return true;
        }
        let len = self.len();
        let sum = checksum::combine(&[
            checksum::pseudo_header(src, dst, IpProtocol::UDP, u32::from(len)),
            checksum::data(&self.buffer.as_ref()[..usize::from(len)]),
        ]);
        sum == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    /// Sets the source port.
    #[inline]
    pub fn set_src_port(&mut self, port: u16) {
        put_u16(&mut self.buffer.as_mut()[field::SRC_PORT], port);
    }

    /// Sets the destination port.
    #[inline]
    pub fn set_dst_port(&mut self, port: u16) {
        put_u16(&mut self.buffer.as_mut()[field::DST_PORT], port);
    }

    /// Sets the length field.
    #[inline]
    pub fn set_len(&mut self, len: u16) {
        put_u16(&mut self.buffer.as_mut()[field::LENGTH], len);
    }

    /// Sets the checksum field.
    #[inline]
    pub fn set_checksum(&mut self, csum: u16) {
        put_u16(&mut self.buffer.as_mut()[field::CHECKSUM], csum);
    }

    /// Computes and stores the checksum over the IPv4 pseudo-header, header
    /// and payload (up to the length field). A computed 0 is sent as 0xffff.
    pub fn fill_checksum(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        self.set_checksum(0);
        let len = self.len();
        let csum = !checksum::combine(&[
            checksum::pseudo_header(src, dst, IpProtocol::UDP, u32::from(len)),
            checksum::data(&self.buffer.as_ref()[..usize::from(len)]),
        ]);
        self.set_checksum(if csum == 0 { 0xffff } else { csum });
    }

    /// Mutable payload (up to the length field).
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = usize::from(self.len());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for UdpPacket<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// The high-level contents of a UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Payload length in bytes.
    pub payload_len: usize,
}

impl UdpRepr {
    /// Header length.
    pub const HEADER_LEN: usize = HEADER_LEN;
    /// Largest `payload_len` that fits the 16-bit length field.
    pub const MAX_PAYLOAD_LEN: usize = u16::MAX as usize - HEADER_LEN;

    /// Validates the view (as `new_checked` does) and the checksum against the
    /// IPv4 pseudo-header ([`Error::Malformed`] if non-zero and wrong), then
    /// reads the header.
    pub fn parse<T: AsRef<[u8]>>(
        packet: &UdpPacket<T>,
        src: Ipv4Addr,
        dst: Ipv4Addr,
    ) -> Result<Self> {
        packet.check_len()?;
        if !packet.verify_checksum(src, dst) {
            return Err(Error::Malformed);
        }
        Ok(UdpRepr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            payload_len: usize::from(packet.len()) - HEADER_LEN,
        })
    }

    /// Bytes header and payload need.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Writes the header with a zero (absent) checksum; the payload is left
    /// untouched. Use this when the checksum is offloaded or filled later.
    ///
    /// # Panics
    /// If the buffer is shorter than [`HEADER_LEN`] or `payload_len` exceeds
    /// [`Self::MAX_PAYLOAD_LEN`].
    pub fn emit_header<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut UdpPacket<T>) {
        assert!(
            self.payload_len <= Self::MAX_PAYLOAD_LEN,
            "UDP payload too long"
        );
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_len((HEADER_LEN + self.payload_len) as u16);
        packet.set_checksum(0);
    }

    /// Writes the header, lets `emit_payload` fill the `payload_len` payload
    /// bytes, then fills the checksum for the IPv4 pseudo-header `src`, `dst`.
    ///
    /// # Panics
    /// If the buffer is shorter than [`Self::buffer_len`] or `payload_len`
    /// exceeds [`Self::MAX_PAYLOAD_LEN`].
    pub fn emit<T, F>(
        &self,
        packet: &mut UdpPacket<T>,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        emit_payload: F,
    ) where
        T: AsRef<[u8]> + AsMut<[u8]>,
        F: FnOnce(&mut [u8]),
    {
        self.emit_header(packet);
        emit_payload(packet.payload_mut());
        packet.fill_checksum(src, dst);
    }
}

impl fmt::Display for UdpRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "UDP src={} dst={} len={}",
            self.src_port, self.dst_port, self.payload_len
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr, Ipv4Packet, Ipv4Repr};
    use std::string::ToString;
    use std::vec::Vec;

    const SRC: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const DST: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    /// A complete Ethernet/IPv4/UDP frame, 10.0.0.1:1234 -> 10.0.0.2:5678,
    /// payload "hello". Checksums worked out by hand (and checked against
    /// etherparse below): IPv4 words 4500+0021+0000+4000+4011+0a00+0001+0a00
    /// +0002 = 0xd935 -> field 0x26ca. UDP: pseudo-header 0a00+0001+0a00+0002
    /// +0011+000d, header 04d2+162e+000d, payload 6865+6c6c+6f00 -> sum 0x7300
    /// -> field 0x8cff.
    const FRAME: [u8; 47] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, // dst mac
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // src mac
        0x08, 0x00, // IPv4
        0x45, 0x00, 0x00, 0x21, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x26, 0xca, // ip
        0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x00, 0x02, // ip addrs
        0x04, 0xd2, 0x16, 0x2e, 0x00, 0x0d, 0x8c, 0xff, // udp
        b'h', b'e', b'l', b'l', b'o',
    ];

    #[test]
    fn parse_known_frame() {
        let eth = EthernetFrame::new_checked(&FRAME[..]).unwrap();
        assert_eq!(eth.ethertype(), EtherType::IPV4);
        let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
        let ip_repr = Ipv4Repr::parse(&ip).unwrap();
        assert_eq!(
            ip_repr,
            Ipv4Repr {
                src: SRC,
                dst: DST,
                protocol: IpProtocol::UDP,
                payload_len: 13,
                ttl: 64
            }
        );
        let udp = UdpPacket::new_checked(ip.payload()).unwrap();
        assert_eq!(udp.src_port(), 1234);
        assert_eq!(udp.dst_port(), 5678);
        assert_eq!(udp.len(), 13);
        assert_eq!(udp.checksum(), 0x8cff);
        assert!(udp.verify_checksum(SRC, DST));
        assert!(!udp.verify_checksum(DST, Ipv4Addr::new(10, 0, 0, 3)));
        assert_eq!(udp.payload(), b"hello");
        assert_eq!(
            UdpRepr::parse(&udp, SRC, DST).unwrap(),
            UdpRepr {
                src_port: 1234,
                dst_port: 5678,
                payload_len: 5
            }
        );
    }

    #[test]
    fn etherparse_agrees_on_frame() {
        // Independent implementation builds the same bytes.
        let builder = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4(SRC.octets(), DST.octets(), 64)
            .udp(1234, 5678);
        let mut theirs = Vec::new();
        builder.write(&mut theirs, b"hello").unwrap();
        assert_eq!(theirs, FRAME);
    }

    #[test]
    fn emit_full_frame() {
        let mut buf = [0u8; 47];
        let udp_repr = UdpRepr {
            src_port: 1234,
            dst_port: 5678,
            payload_len: 5,
        };
        let ip_repr = Ipv4Repr {
            src: SRC,
            dst: DST,
            protocol: IpProtocol::UDP,
            payload_len: udp_repr.buffer_len(),
            ttl: 64,
        };
        let mut eth = EthernetFrame::new_unchecked(&mut buf[..]);
        EthernetRepr {
            src: EthernetAddress::new(2, 0, 0, 0, 0, 1),
            dst: EthernetAddress::new(2, 0, 0, 0, 0, 2),
            ethertype: EtherType::IPV4,
        }
        .emit(&mut eth);
        let mut ip = Ipv4Packet::new_unchecked(eth.payload_mut());
        ip_repr.emit(&mut ip);
        let mut udp = UdpPacket::new_unchecked(ip.payload_mut());
        udp_repr.emit(&mut udp, SRC, DST, |p| p.copy_from_slice(b"hello"));
        assert_eq!(buf, FRAME);
    }

    #[test]
    fn round_trip_table() {
        let table = [
            (
                UdpRepr {
                    src_port: 0,
                    dst_port: 0,
                    payload_len: 0,
                },
                SRC,
                DST,
            ),
            (
                UdpRepr {
                    src_port: 68,
                    dst_port: 67,
                    payload_len: 300,
                },
                Ipv4Addr::UNSPECIFIED,
                Ipv4Addr::BROADCAST,
            ),
            (
                UdpRepr {
                    src_port: 53,
                    dst_port: 40000,
                    payload_len: 1,
                },
                DST,
                SRC,
            ),
            (
                UdpRepr {
                    src_port: 65535,
                    dst_port: 4789,
                    payload_len: 1472,
                },
                SRC,
                DST,
            ),
        ];
        let mut buf = [0u8; 1480];
        for (repr, src, dst) in table {
            let len = repr.buffer_len();
            let mut p = UdpPacket::new_unchecked(&mut buf[..len]);
            repr.emit(&mut p, src, dst, |pl| {
                for (i, b) in pl.iter_mut().enumerate() {
                    *b = (i * 13) as u8;
                }
            });
            let p = UdpPacket::new_checked(&buf[..len]).unwrap();
            assert_ne!(p.checksum(), 0);
            assert_eq!(UdpRepr::parse(&p, src, dst).unwrap(), repr);
            // Independent check of the checksum.
            let (h, payload) = etherparse::UdpHeader::from_slice(&buf[..len]).unwrap();
            let ip = etherparse::Ipv4Header::new(
                len as u16,
                64,
                etherparse::IpNumber::UDP,
                src.octets(),
                dst.octets(),
            )
            .unwrap();
            assert_eq!(h.calc_checksum_ipv4(&ip, payload).unwrap(), p.checksum());
        }
    }

    #[test]
    fn zero_checksum_is_accepted_and_ffff_is_sent() {
        let b = [
            0x04, 0xd2, 0x16, 0x2e, 0x00, 0x0d, 0x00, 0x00, b'h', b'e', b'l', b'l', b'o',
        ];
        let p = UdpPacket::new_checked(&b[..]).unwrap();
        assert!(p.verify_checksum(SRC, DST), "0 means no checksum");
        assert!(UdpRepr::parse(&p, Ipv4Addr::BROADCAST, SRC).is_ok());

        // Pick a 2-byte payload that makes the one's-complement sum 0xffff, so
        // the computed checksum is 0 and must be sent as 0xffff.
        let mut d = [0x04, 0xd2, 0x16, 0x2e, 0x00, 0x0a, 0x00, 0x00, 0x00, 0x00];
        let rest = checksum::combine(&[
            checksum::pseudo_header(SRC, DST, IpProtocol::UDP, 10),
            checksum::data(&d),
        ]);
        d[8..].copy_from_slice(&(!rest).to_be_bytes());
        let mut p = UdpPacket::new_checked(&mut d[..]).unwrap();
        p.fill_checksum(SRC, DST);
        assert_eq!(p.checksum(), 0xffff);
        assert!(p.verify_checksum(SRC, DST));
    }

    #[test]
    fn setters() {
        let mut buf = [0u8; 10];
        let mut p = UdpPacket::new_unchecked(&mut buf[..]);
        p.set_src_port(1);
        p.set_dst_port(2);
        p.set_len(10);
        p.payload_mut().copy_from_slice(&[0xab, 0xcd]);
        p.set_checksum(0x1234);
        assert_eq!(p.into_inner(), &[0, 1, 0, 2, 0, 10, 0x12, 0x34, 0xab, 0xcd]);
    }

    #[test]
    fn bad_inputs() {
        // (bytes, expected)
        let table: &[(&[u8], Error)] = &[
            (&[], Error::Truncated),
            (
                &[0x04, 0xd2, 0x16, 0x2e, 0x00, 0x0d, 0x73],
                Error::Truncated,
            ),
            (
                &[0x04, 0xd2, 0x16, 0x2e, 0x00, 0x07, 0x00, 0x00],
                Error::Malformed,
            ),
            (
                &[0x04, 0xd2, 0x16, 0x2e, 0x00, 0x00, 0x00, 0x00],
                Error::Malformed,
            ),
            (
                &[0x04, 0xd2, 0x16, 0x2e, 0x00, 0x09, 0x00, 0x00],
                Error::Truncated,
            ),
            (
                &[0x04, 0xd2, 0x16, 0x2e, 0xff, 0xff, 0x00, 0x00, 0x00],
                Error::Truncated,
            ),
        ];
        for (bytes, err) in table {
            assert_eq!(
                UdpPacket::new_checked(*bytes).err(),
                Some(*err),
                "{bytes:x?}"
            );
            let p = UdpPacket::new_unchecked(*bytes);
            assert_eq!(UdpRepr::parse(&p, SRC, DST), Err(*err), "{bytes:x?}");
        }
        // Wrong checksum.
        let mut b = [0u8; 13];
        b.copy_from_slice(&FRAME[34..]);
        b[7] ^= 0x01;
        let p = UdpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(UdpRepr::parse(&p, SRC, DST), Err(Error::Malformed));
        // Trailing bytes beyond the length field are ignored.
        let mut long = [0u8; 20];
        long[..13].copy_from_slice(&FRAME[34..]);
        long[13..].fill(0x55);
        let p = UdpPacket::new_checked(&long[..]).unwrap();
        assert_eq!(p.payload(), b"hello");
        assert!(p.verify_checksum(SRC, DST));
    }

    #[test]
    fn display() {
        let r = UdpRepr {
            src_port: 1,
            dst_port: 2,
            payload_len: 3,
        };
        assert_eq!(r.to_string(), "UDP src=1 dst=2 len=3");
    }
}
