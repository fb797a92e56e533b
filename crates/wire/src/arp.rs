//! ARP (RFC 826) for Ethernet hardware and IPv4 protocol addresses.
//!
//! The view uses the fixed 28-byte Ethernet/IPv4 layout; `new_checked`
//! rejects packets whose address lengths are not 6 and 4. [`ArpRepr::parse`]
//! additionally requires hardware type 1 and protocol type IPv4.

use core::fmt;

use crate::bytes::{get_ipv4, get_u16, put_u16};
use crate::error::{Error, Result};
use crate::{EtherType, EthernetAddress};
use core::net::Ipv4Addr;

/// An ARP operation code. A newtype so that unknown values pass through.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ArpOperation(pub u16);

impl ArpOperation {
    /// Request.
    pub const REQUEST: ArpOperation = ArpOperation(1);
    /// Reply.
    pub const REPLY: ArpOperation = ArpOperation(2);
    /// Reverse request (RARP, RFC 903; the same layout under
    /// [`EtherType::RARP`]).
    pub const REVERSE_REQUEST: ArpOperation = ArpOperation(3);
}

impl fmt::Display for ArpOperation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::REQUEST => f.write_str("request"),
            Self::REPLY => f.write_str("reply"),
            Self::REVERSE_REQUEST => f.write_str("reverse request"),
            ArpOperation(n) => write!(f, "op {n}"),
        }
    }
}

impl fmt::Debug for ArpOperation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ArpOperation({self})")
    }
}

/// Hardware type for Ethernet.
pub const HTYPE_ETHERNET: u16 = 1;

/// Field offsets of an Ethernet/IPv4 ARP packet.
pub mod field {
    use crate::Field;
    /// Hardware type.
    pub const HTYPE: Field = 0..2;
    /// Protocol type (an EtherType).
    pub const PTYPE: Field = 2..4;
    /// Hardware address length.
    pub const HLEN: usize = 4;
    /// Protocol address length.
    pub const PLEN: usize = 5;
    /// Operation.
    pub const OPER: Field = 6..8;
    /// Sender hardware address.
    pub const SHA: Field = 8..14;
    /// Sender protocol address.
    pub const SPA: Field = 14..18;
    /// Target hardware address.
    pub const THA: Field = 18..24;
    /// Target protocol address.
    pub const TPA: Field = 24..28;
}

/// Length of an Ethernet/IPv4 ARP packet (Ethernet pads it to 46 bytes).
pub const PACKET_LEN: usize = field::TPA.end;

/// A zero-copy view of an Ethernet/IPv4 ARP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    /// Wraps `buffer` without checks; accessors panic if it is too short.
    pub const fn new_unchecked(buffer: T) -> Self {
        ArpPacket { buffer }
    }

    /// Wraps `buffer` after [`ArpPacket::check_len`]. No accessor panics on
    /// the result.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks: the buffer holds 8 bytes and then 28 bytes
    /// ([`Error::Truncated`]); the address lengths are 6 and 4
    /// ([`Error::Malformed`]), so that the fixed offsets are right.
    pub fn check_len(&self) -> Result<()> {
        let data = self.buffer.as_ref();
        if data.len() < field::OPER.end {
            return Err(Error::Truncated);
        }
        if data[field::HLEN] != 6 || data[field::PLEN] != 4 {
            return Err(Error::Malformed);
        }
        if data.len() < PACKET_LEN {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Unwraps the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Hardware type (1 for Ethernet).
    #[inline]
    pub fn hardware_type(&self) -> u16 {
        get_u16(&self.buffer.as_ref()[field::HTYPE])
    }

    /// Protocol type (IPv4 expected).
    #[inline]
    pub fn protocol_type(&self) -> EtherType {
        EtherType(get_u16(&self.buffer.as_ref()[field::PTYPE]))
    }

    /// Hardware address length (6 on a checked view).
    #[inline]
    pub fn hardware_len(&self) -> u8 {
        self.buffer.as_ref()[field::HLEN]
    }

    /// Protocol address length (4 on a checked view).
    #[inline]
    pub fn protocol_len(&self) -> u8 {
        self.buffer.as_ref()[field::PLEN]
    }

    /// Operation.
    #[inline]
    pub fn operation(&self) -> ArpOperation {
        ArpOperation(get_u16(&self.buffer.as_ref()[field::OPER]))
    }

    fn mac(&self, f: crate::Field) -> EthernetAddress {
        let b = &self.buffer.as_ref()[f];
        EthernetAddress([b[0], b[1], b[2], b[3], b[4], b[5]])
    }

    /// Sender hardware address.
    #[inline]
    pub fn sha(&self) -> EthernetAddress {
        self.mac(field::SHA)
    }

    /// Sender protocol address.
    #[inline]
    pub fn spa(&self) -> Ipv4Addr {
        get_ipv4(&self.buffer.as_ref()[field::SPA])
    }

    /// Target hardware address.
    #[inline]
    pub fn tha(&self) -> EthernetAddress {
        self.mac(field::THA)
    }

    /// Target protocol address.
    #[inline]
    pub fn tpa(&self) -> Ipv4Addr {
        get_ipv4(&self.buffer.as_ref()[field::TPA])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ArpPacket<T> {
    /// Sets the hardware type.
    #[inline]
    pub fn set_hardware_type(&mut self, v: u16) {
        put_u16(&mut self.buffer.as_mut()[field::HTYPE], v);
    }

    /// Sets the protocol type.
    #[inline]
    pub fn set_protocol_type(&mut self, v: EtherType) {
        put_u16(&mut self.buffer.as_mut()[field::PTYPE], v.0);
    }

    /// Sets the hardware address length.
    #[inline]
    pub fn set_hardware_len(&mut self, v: u8) {
        self.buffer.as_mut()[field::HLEN] = v;
    }

    /// Sets the protocol address length.
    #[inline]
    pub fn set_protocol_len(&mut self, v: u8) {
        self.buffer.as_mut()[field::PLEN] = v;
    }

    /// Sets the operation.
    #[inline]
    pub fn set_operation(&mut self, op: ArpOperation) {
        put_u16(&mut self.buffer.as_mut()[field::OPER], op.0);
    }

    /// Sets the sender hardware address.
    #[inline]
    pub fn set_sha(&mut self, a: EthernetAddress) {
        self.buffer.as_mut()[field::SHA].copy_from_slice(&a.0);
    }

    /// Sets the sender protocol address.
    #[inline]
    pub fn set_spa(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::SPA].copy_from_slice(&a.octets());
    }

    /// Sets the target hardware address.
    #[inline]
    pub fn set_tha(&mut self, a: EthernetAddress) {
        self.buffer.as_mut()[field::THA].copy_from_slice(&a.0);
    }

    /// Sets the target protocol address.
    #[inline]
    pub fn set_tpa(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::TPA].copy_from_slice(&a.octets());
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for ArpPacket<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// The high-level contents of an Ethernet/IPv4 ARP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ArpRepr {
    /// Operation.
    pub op: ArpOperation,
    /// Sender hardware address.
    pub sha: EthernetAddress,
    /// Sender protocol address.
    pub spa: Ipv4Addr,
    /// Target hardware address.
    pub tha: EthernetAddress,
    /// Target protocol address.
    pub tpa: Ipv4Addr,
}

impl ArpRepr {
    /// Validates the view (as `new_checked` does), then requires hardware
    /// type Ethernet and protocol type IPv4 ([`Error::Malformed`]).
    pub fn parse<T: AsRef<[u8]>>(packet: &ArpPacket<T>) -> Result<Self> {
        packet.check_len()?;
        if packet.hardware_type() != HTYPE_ETHERNET || packet.protocol_type() != EtherType::IPV4 {
            return Err(Error::Malformed);
        }
        Ok(ArpRepr {
            op: packet.operation(),
            sha: packet.sha(),
            spa: packet.spa(),
            tha: packet.tha(),
            tpa: packet.tpa(),
        })
    }

    /// Bytes the packet needs.
    pub const fn buffer_len(&self) -> usize {
        PACKET_LEN
    }

    /// Writes the whole packet.
    ///
    /// # Panics
    /// If the buffer is shorter than [`Self::buffer_len`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut ArpPacket<T>) {
        packet.set_hardware_type(HTYPE_ETHERNET);
        packet.set_protocol_type(EtherType::IPV4);
        packet.set_hardware_len(6);
        packet.set_protocol_len(4);
        packet.set_operation(self.op);
        packet.set_sha(self.sha);
        packet.set_spa(self.spa);
        packet.set_tha(self.tha);
        packet.set_tpa(self.tpa);
    }

    /// The reply to this request from the owner of `tpa`, whose hardware
    /// address is `mac`: sender and target swapped, operation REPLY.
    pub fn reply(&self, mac: EthernetAddress) -> ArpRepr {
        ArpRepr {
            op: ArpOperation::REPLY,
            sha: mac,
            spa: self.tpa,
            tha: self.sha,
            tpa: self.spa,
        }
    }
}

impl fmt::Display for ArpRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ARP {} sha={} spa={} tha={} tpa={}",
            self.op, self.sha, self.spa, self.tha, self.tpa
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EthernetFrame, EthernetRepr};
    use std::string::ToString;

    const HOST: EthernetAddress = EthernetAddress::new(0x52, 0x54, 0x00, 0x12, 0x34, 0x56);
    const GW: EthernetAddress = EthernetAddress::new(0x00, 0x1b, 0x21, 0xaa, 0xbb, 0xcc);

    /// "Who has 10.0.0.2? Tell 10.0.0.1", as a Linux host broadcasts it:
    /// Ethernet header, 28-byte ARP, 18 bytes of zero padding.
    const REQUEST_FRAME: [u8; 60] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x08,
        0x06, // eth
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, // htype, ptype, hlen, plen, op
        0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x0a, 0x00, 0x00, 0x01, // sha, spa
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x02, // tha, tpa
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // padding
    ];

    /// "10.0.0.2 is at 00:1b:21:aa:bb:cc".
    const REPLY: [u8; 28] = [
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x02, 0x00, 0x1b, 0x21, 0xaa, 0xbb, 0xcc, 0x0a,
        0x00, 0x00, 0x02, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x0a, 0x00, 0x00, 0x01,
    ];

    fn request() -> ArpRepr {
        ArpRepr {
            op: ArpOperation::REQUEST,
            sha: HOST,
            spa: Ipv4Addr::new(10, 0, 0, 1),
            tha: EthernetAddress::ZERO,
            tpa: Ipv4Addr::new(10, 0, 0, 2),
        }
    }

    #[test]
    fn parse_request_frame() {
        let eth = EthernetFrame::new_checked(&REQUEST_FRAME[..]).unwrap();
        assert_eq!(eth.ethertype(), EtherType::ARP);
        let p = ArpPacket::new_checked(eth.payload()).unwrap();
        assert_eq!(p.hardware_type(), 1);
        assert_eq!(p.protocol_type(), EtherType::IPV4);
        assert_eq!((p.hardware_len(), p.protocol_len()), (6, 4));
        assert_eq!(p.operation(), ArpOperation::REQUEST);
        assert_eq!(ArpRepr::parse(&p).unwrap(), request());

        let theirs = etherparse::ArpPacketSlice::from_slice(eth.payload()).unwrap();
        assert_eq!(theirs.operation().0, p.operation().0);
        assert_eq!(theirs.sender_hw_addr(), &p.sha().0);
        assert_eq!(theirs.target_protocol_addr(), &p.tpa().octets());
    }

    #[test]
    fn emit_table() {
        let reply = request().reply(GW);
        // (repr, expected bytes)
        let table = [(request(), &REQUEST_FRAME[14..42]), (reply, &REPLY[..])];
        for (repr, bytes) in table {
            let mut buf = [0xeeu8; 28];
            repr.emit(&mut ArpPacket::new_unchecked(&mut buf[..]));
            assert_eq!(&buf[..], bytes, "{repr}");
            assert_eq!(
                ArpRepr::parse(&ArpPacket::new_checked(&buf[..]).unwrap()).unwrap(),
                repr
            );
        }
    }

    #[test]
    fn emit_whole_frame() {
        let mut buf = [0u8; 60];
        let mut eth = EthernetFrame::new_unchecked(&mut buf[..]);
        EthernetRepr {
            src: HOST,
            dst: EthernetAddress::BROADCAST,
            ethertype: EtherType::ARP,
        }
        .emit(&mut eth);
        request().emit(&mut ArpPacket::new_unchecked(eth.payload_mut()));
        assert_eq!(buf, REQUEST_FRAME);
    }

    #[test]
    fn bad_inputs() {
        let mut hlen8 = REPLY;
        hlen8[4] = 8;
        let mut plen16 = REPLY;
        plen16[5] = 16;
        let mut htype6 = REPLY;
        htype6[1] = 6;
        let mut ptype_v6 = REPLY;
        ptype_v6[2..4].copy_from_slice(&[0x86, 0xdd]);
        // (bytes, view error, parse error)
        let table: &[(&[u8], Option<Error>, Error)] = &[
            (&[], Some(Error::Truncated), Error::Truncated),
            (&REPLY[..7], Some(Error::Truncated), Error::Truncated),
            (&REPLY[..8], Some(Error::Truncated), Error::Truncated),
            (&REPLY[..27], Some(Error::Truncated), Error::Truncated),
            (&hlen8[..], Some(Error::Malformed), Error::Malformed),
            (&hlen8[..8], Some(Error::Malformed), Error::Malformed),
            (&plen16[..], Some(Error::Malformed), Error::Malformed),
            (&htype6[..], None, Error::Malformed),
            (&ptype_v6[..], None, Error::Malformed),
        ];
        for (bytes, view_err, parse_err) in table {
            assert_eq!(
                ArpPacket::new_checked(*bytes).err(),
                *view_err,
                "{bytes:x?}"
            );
            assert_eq!(
                ArpRepr::parse(&ArpPacket::new_unchecked(*bytes)),
                Err(*parse_err)
            );
        }
    }

    #[test]
    fn display() {
        assert_eq!(
            request().to_string(),
            "ARP request sha=52:54:00:12:34:56 spa=10.0.0.1 tha=00:00:00:00:00:00 tpa=10.0.0.2"
        );
        assert_eq!(ArpOperation(9).to_string(), "op 9");
        assert_eq!(
            std::format!("{:?}", ArpOperation::REPLY),
            "ArpOperation(reply)"
        );
    }
}
