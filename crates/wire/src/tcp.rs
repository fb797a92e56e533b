//! TCP segment headers (RFC 9293): a view only, no connection state.

use core::fmt;
use core::ops::{BitOr, BitOrAssign};

use crate::bytes::{get_u16, get_u32, put_u16, put_u32};
use crate::error::{Error, Result};
use crate::{IpProtocol, checksum};
use core::net::Ipv4Addr;

/// Field offsets of the fixed TCP header.
pub mod field {
    use crate::Field;
    /// Source port.
    pub const SRC_PORT: Field = 0..2;
    /// Destination port.
    pub const DST_PORT: Field = 2..4;
    /// Sequence number.
    pub const SEQ_NUM: Field = 4..8;
    /// Acknowledgment number.
    pub const ACK_NUM: Field = 8..12;
    /// Data offset (high nibble of the first byte), reserved bits, flags.
    pub const FLAGS: Field = 12..14;
    /// Window size.
    pub const WIN_SIZE: Field = 14..16;
    /// Checksum.
    pub const CHECKSUM: Field = 16..18;
    /// Urgent pointer.
    pub const URGENT: Field = 18..20;
}

/// Length of the TCP header without options.
pub const HEADER_LEN: usize = field::URGENT.end;

/// The eight classic TCP flag bits (the low byte of the flags field).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TcpFlags(pub u8);

impl TcpFlags {
    /// No more data from sender.
    pub const FIN: TcpFlags = TcpFlags(0x01);
    /// Synchronize sequence numbers.
    pub const SYN: TcpFlags = TcpFlags(0x02);
    /// Reset.
    pub const RST: TcpFlags = TcpFlags(0x04);
    /// Push.
    pub const PSH: TcpFlags = TcpFlags(0x08);
    /// Acknowledgment field significant.
    pub const ACK: TcpFlags = TcpFlags(0x10);
    /// Urgent pointer significant.
    pub const URG: TcpFlags = TcpFlags(0x20);
    /// ECN echo.
    pub const ECE: TcpFlags = TcpFlags(0x40);
    /// Congestion window reduced.
    pub const CWR: TcpFlags = TcpFlags(0x80);

    const NAMES: [(TcpFlags, &'static str); 8] = [
        (Self::FIN, "FIN"),
        (Self::SYN, "SYN"),
        (Self::RST, "RST"),
        (Self::PSH, "PSH"),
        (Self::ACK, "ACK"),
        (Self::URG, "URG"),
        (Self::ECE, "ECE"),
        (Self::CWR, "CWR"),
    ];

    /// True if every bit of `other` is set in `self`.
    pub const fn contains(self, other: TcpFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// True if no flag is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl BitOr for TcpFlags {
    type Output = TcpFlags;
    fn bitor(self, rhs: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 | rhs.0)
    }
}

impl BitOrAssign for TcpFlags {
    fn bitor_assign(&mut self, rhs: TcpFlags) {
        self.0 |= rhs.0;
    }
}

impl fmt::Display for TcpFlags {
    /// `SYN|ACK`; `-` when empty.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("-");
        }
        let mut first = true;
        for (flag, name) in Self::NAMES {
            if self.contains(flag) {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for TcpFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TcpFlags({self})")
    }
}

/// A zero-copy view of a TCP segment.
///
/// TCP has no length field: the segment is the whole buffer, so hand the view
/// exactly the IP payload (e.g. `Ipv4Packet::payload()`), which is also what
/// the checksum covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Wraps `buffer` without checks; accessors panic if it is too short or
    /// the data offset is inconsistent.
    pub const fn new_unchecked(buffer: T) -> Self {
        TcpPacket { buffer }
    }

    /// Wraps `buffer` after [`TcpPacket::check_len`]. No accessor panics on the
    /// result. The checksum is not checked.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks: the buffer holds 20 bytes ([`Error::Truncated`]); the data
    /// offset is at least 5 words ([`Error::Malformed`]); the buffer holds the
    /// header with options ([`Error::Truncated`]).
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let header_len = usize::from(self.header_len());
        if header_len < HEADER_LEN {
            return Err(Error::Malformed);
        }
        if len < header_len {
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

    /// Sequence number.
    #[inline]
    pub fn seq_number(&self) -> u32 {
        get_u32(&self.buffer.as_ref()[field::SEQ_NUM])
    }

    /// Acknowledgment number.
    #[inline]
    pub fn ack_number(&self) -> u32 {
        get_u32(&self.buffer.as_ref()[field::ACK_NUM])
    }

    /// Header length in bytes, options included (data offset * 4).
    #[inline]
    pub fn header_len(&self) -> u8 {
        (self.buffer.as_ref()[field::FLAGS.start] >> 4) * 4
    }

    /// The eight flag bits.
    #[inline]
    pub fn flags(&self) -> TcpFlags {
        TcpFlags(self.buffer.as_ref()[field::FLAGS.start + 1])
    }

    /// FIN set.
    #[inline]
    pub fn fin(&self) -> bool {
        self.flags().contains(TcpFlags::FIN)
    }

    /// SYN set.
    #[inline]
    pub fn syn(&self) -> bool {
        self.flags().contains(TcpFlags::SYN)
    }

    /// RST set.
    #[inline]
    pub fn rst(&self) -> bool {
        self.flags().contains(TcpFlags::RST)
    }

    /// PSH set.
    #[inline]
    pub fn psh(&self) -> bool {
        self.flags().contains(TcpFlags::PSH)
    }

    /// ACK set.
    #[inline]
    pub fn ack(&self) -> bool {
        self.flags().contains(TcpFlags::ACK)
    }

    /// URG set.
    #[inline]
    pub fn urg(&self) -> bool {
        self.flags().contains(TcpFlags::URG)
    }

    /// ECE set.
    #[inline]
    pub fn ece(&self) -> bool {
        self.flags().contains(TcpFlags::ECE)
    }

    /// CWR set.
    #[inline]
    pub fn cwr(&self) -> bool {
        self.flags().contains(TcpFlags::CWR)
    }

    /// Window size (unscaled).
    #[inline]
    pub fn window_len(&self) -> u16 {
        get_u16(&self.buffer.as_ref()[field::WIN_SIZE])
    }

    /// Checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        get_u16(&self.buffer.as_ref()[field::CHECKSUM])
    }

    /// Urgent pointer.
    #[inline]
    pub fn urgent_at(&self) -> u16 {
        get_u16(&self.buffer.as_ref()[field::URGENT])
    }

    /// Options (raw bytes between the fixed header and `header_len`).
    #[inline]
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..usize::from(self.header_len())]
    }

    /// Payload: everything after the header.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[usize::from(self.header_len())..]
    }

    /// True if the checksum over the IPv4 pseudo-header and the whole buffer
    /// is correct.
    pub fn verify_checksum(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        let data = self.buffer.as_ref();
        let sum = checksum::combine(&[
            checksum::pseudo_header(src, dst, IpProtocol::TCP, data.len() as u32),
            checksum::data(data),
        ]);
        sum == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
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

    /// Sets the sequence number.
    #[inline]
    pub fn set_seq_number(&mut self, seq: u32) {
        put_u32(&mut self.buffer.as_mut()[field::SEQ_NUM], seq);
    }

    /// Sets the acknowledgment number.
    #[inline]
    pub fn set_ack_number(&mut self, ack: u32) {
        put_u32(&mut self.buffer.as_mut()[field::ACK_NUM], ack);
    }

    /// Sets the data offset from a length in bytes (rounded down to a
    /// multiple of four; values above 60 are masked). Reserved bits are kept.
    #[inline]
    pub fn set_header_len(&mut self, len: u8) {
        let b = &mut self.buffer.as_mut()[field::FLAGS.start];
        *b = (*b & 0x0f) | ((len / 4) << 4);
    }

    /// Sets the eight flag bits.
    #[inline]
    pub fn set_flags(&mut self, flags: TcpFlags) {
        self.buffer.as_mut()[field::FLAGS.start + 1] = flags.0;
    }

    /// Sets the window size.
    #[inline]
    pub fn set_window_len(&mut self, window: u16) {
        put_u16(&mut self.buffer.as_mut()[field::WIN_SIZE], window);
    }

    /// Sets the checksum field.
    #[inline]
    pub fn set_checksum(&mut self, csum: u16) {
        put_u16(&mut self.buffer.as_mut()[field::CHECKSUM], csum);
    }

    /// Sets the urgent pointer.
    #[inline]
    pub fn set_urgent_at(&mut self, urgent: u16) {
        put_u16(&mut self.buffer.as_mut()[field::URGENT], urgent);
    }

    /// Computes and stores the checksum over the IPv4 pseudo-header and the
    /// whole buffer.
    pub fn fill_checksum(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        self.set_checksum(0);
        let data = self.buffer.as_ref();
        let csum = !checksum::combine(&[
            checksum::pseudo_header(src, dst, IpProtocol::TCP, data.len() as u32),
            checksum::data(data),
        ]);
        self.set_checksum(csum);
    }

    /// Mutable options.
    #[inline]
    pub fn options_mut(&mut self) -> &mut [u8] {
        let end = usize::from(self.header_len());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }

    /// Mutable payload.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = usize::from(self.header_len());
        &mut self.buffer.as_mut()[start..]
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for TcpPacket<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;

    const SRC: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const DST: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    /// A Linux-style SYN 10.0.0.1:45678 -> 10.0.0.2:80 with MSS 1460,
    /// SACK-permitted, timestamps, NOP, window scale 7. Checksum 0x1da1.
    const SYN: [u8; 40] = [
        0xb2, 0x6e, 0x00, 0x50, 0x12, 0x34, 0x56, 0x78, 0x00, 0x00, 0x00, 0x00, 0xa0, 0x02, 0xfa,
        0xf0, 0x1d, 0xa1, 0x00, 0x00, // fixed header
        0x02, 0x04, 0x05, 0xb4, 0x04, 0x02, 0x08, 0x0a, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
        0x00, 0x01, 0x03, 0x03, 0x07, // options
    ];

    /// PSH|ACK carrying "GET /", no options. Checksum 0x3a50.
    const PSH: [u8; 25] = [
        0xb2, 0x6e, 0x00, 0x50, 0x12, 0x34, 0x56, 0x79, 0x9a, 0xbc, 0xde, 0xf0, 0x50, 0x18, 0x01,
        0xf6, 0x3a, 0x50, 0x00, 0x00, b'G', b'E', b'T', b' ', b'/',
    ];

    /// One row of the parse table.
    struct Row {
        bytes: &'static [u8],
        seq: u32,
        ack: u32,
        header_len: u8,
        flags: TcpFlags,
        window: u16,
        checksum: u16,
        payload: &'static [u8],
    }

    #[test]
    fn parse_table() {
        let table = [
            Row {
                bytes: &SYN,
                seq: 0x1234_5678,
                ack: 0,
                header_len: 40,
                flags: TcpFlags::SYN,
                window: 64240,
                checksum: 0x1da1,
                payload: b"",
            },
            Row {
                bytes: &PSH,
                seq: 0x1234_5679,
                ack: 0x9abc_def0,
                header_len: 20,
                flags: TcpFlags(TcpFlags::PSH.0 | TcpFlags::ACK.0),
                window: 502,
                checksum: 0x3a50,
                payload: b"GET /",
            },
        ];
        for row in table {
            let p = TcpPacket::new_checked(row.bytes).unwrap();
            assert_eq!((p.src_port(), p.dst_port()), (45678, 80));
            assert_eq!(p.seq_number(), row.seq);
            assert_eq!(p.ack_number(), row.ack);
            assert_eq!(p.header_len(), row.header_len);
            assert_eq!(p.flags(), row.flags);
            assert_eq!(p.window_len(), row.window);
            assert_eq!(p.checksum(), row.checksum);
            assert_eq!(p.urgent_at(), 0);
            assert_eq!(p.payload(), row.payload);
            assert_eq!(p.options().len(), usize::from(row.header_len) - 20);
            assert!(p.verify_checksum(SRC, DST));
            assert!(!p.verify_checksum(DST, Ipv4Addr::new(10, 0, 0, 3)));

            let (h, rest) = etherparse::TcpHeader::from_slice(row.bytes).unwrap();
            assert_eq!(rest, row.payload);
            assert_eq!(h.sequence_number, p.seq_number());
            assert_eq!(h.acknowledgment_number, p.ack_number());
            let theirs = (h.syn, h.ack, h.psh, h.fin);
            assert_eq!(theirs, (p.syn(), p.ack(), p.psh(), p.fin()));
            let csum = h.calc_checksum_ipv4_raw(SRC.octets(), DST.octets(), rest);
            assert_eq!(csum.unwrap(), row.checksum);
        }
        let p = TcpPacket::new_checked(&SYN[..]).unwrap();
        assert_eq!(p.options()[..4], [2, 4, 5, 0xb4]);
        assert!(p.syn() && !p.ack() && !p.rst() && !p.urg() && !p.ece() && !p.cwr());
    }

    #[test]
    fn build_with_setters() {
        let mut buf = [0u8; 25];
        let mut p = TcpPacket::new_unchecked(&mut buf[..]);
        p.set_src_port(45678);
        p.set_dst_port(80);
        p.set_seq_number(0x1234_5679);
        p.set_ack_number(0x9abc_def0);
        p.set_header_len(20);
        p.set_flags(TcpFlags::ACK | TcpFlags::PSH);
        p.set_window_len(502);
        p.set_urgent_at(0);
        p.payload_mut().copy_from_slice(b"GET /");
        p.fill_checksum(SRC, DST);
        assert_eq!(buf, PSH);

        let mut buf = SYN;
        let mut p = TcpPacket::new_checked(&mut buf[..]).unwrap();
        p.options_mut()[3] = 0xa0; // MSS 1440
        p.set_checksum(0xdead);
        assert!(!p.verify_checksum(SRC, DST));
        p.fill_checksum(SRC, DST);
        assert!(p.verify_checksum(SRC, DST));
        p.set_flags(TcpFlags::ECE | TcpFlags::CWR | TcpFlags::URG | TcpFlags::RST | TcpFlags::FIN);
        assert!(p.ece() && p.cwr() && p.urg() && p.rst() && p.fin() && !p.syn());
    }

    #[test]
    fn bad_inputs() {
        let mut doff4 = PSH;
        doff4[12] = 0x40;
        let mut doff15 = SYN;
        doff15[12] = 0xf0;
        let mut doff0 = PSH;
        doff0[12] = 0x00;
        // (bytes, expected)
        let table: &[(&[u8], Error)] = &[
            (&[], Error::Truncated),
            (&PSH[..19], Error::Truncated),
            (&SYN[..20], Error::Truncated),
            (&SYN[..39], Error::Truncated),
            (&doff4, Error::Malformed),
            (&doff0, Error::Malformed),
            (&doff15, Error::Truncated),
        ];
        for (bytes, err) in table {
            assert_eq!(
                TcpPacket::new_checked(*bytes).err(),
                Some(*err),
                "{bytes:x?}"
            );
        }
    }

    #[test]
    fn flags_display() {
        assert_eq!((TcpFlags::SYN | TcpFlags::ACK).to_string(), "SYN|ACK");
        assert_eq!(
            TcpFlags(0xff).to_string(),
            "FIN|SYN|RST|PSH|ACK|URG|ECE|CWR"
        );
        assert_eq!(TcpFlags::default().to_string(), "-");
        assert_eq!(std::format!("{:?}", TcpFlags::RST), "TcpFlags(RST)");
        let mut f = TcpFlags::FIN;
        f |= TcpFlags::ACK;
        assert!(f.contains(TcpFlags::ACK) && !f.contains(TcpFlags::SYN | TcpFlags::ACK));
    }
}
