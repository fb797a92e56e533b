//! The test payload stamp: 22 bytes at the start of the UDP payload that
//! let a receiver tell which stream a frame belongs to, where it was in
//! that stream and when it was sent.
//!
//! ```text
//! offset  size  field
//!  0      2     magic  0x4E54 ("NT"), big-endian
//!  2      4     stream id, big-endian (the generator uses port << 8 | rx queue)
//!  6      6     sequence number (48 bits), big-endian, 0 for a stream's first frame
//! 12      8     TSC at transmission, big-endian
//! 20      2     check: XOR of magic, stream, sequence and TSC (as 64-bit
//!               numbers), folded to 16 bits, big-endian
//! ```
//!
//! With 14 bytes of Ethernet, 20 of IPv4 and 8 of UDP header a 64-byte
//! frame (this switch counts frames without FCS) has exactly 22 bytes of
//! payload, so every frame the generator makes can carry a stamp. 48 bits
//! of sequence last 32 days at 100 Mpps per stream.
//!
//! A frame is taken as stamped only if the magic *and* the check match
//! (a false accept of an unstamped payload is about 1 in 2^32). Frames are
//! found by walking Ethernet and VLAN tags by `nfv_wire::l2`'s rule (the
//! same the flow key uses: up to two tags), IPv4 (any header length, first
//! fragment only) and UDP, so stamps survive VLAN push/strip and IP
//! options. No I/O, no allocation, no `unsafe`, no panics on any input.

use nfv_wire::{EtherType, IpProtocol, Ipv4Packet, ethernet, ipv4, udp};

/// Bytes a stamp occupies.
pub const STAMP_LEN: usize = 22;
/// The first two bytes of every stamp.
pub const MAGIC: u16 = 0x4E54;
/// Where the generator puts the stamp: right after an untagged
/// Ethernet/IPv4 (no options)/UDP header.
pub const STAMP_OFFSET: usize = ethernet::HEADER_LEN + ipv4::HEADER_LEN + udp::HEADER_LEN;
/// Largest sequence number a stamp holds.
pub const SEQ_MAX: u64 = (1 << 48) - 1;

mod field {
    use std::ops::Range;
    pub const MAGIC: Range<usize> = 0..2;
    pub const STREAM: Range<usize> = 2..6;
    pub const SEQ: Range<usize> = 6..12;
    pub const TSC: Range<usize> = 12..20;
    pub const CHECK: Range<usize> = 20..22;
}

/// Why a frame carries no (valid) stamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StampError {
    /// Not Ethernet/IPv4/UDP (or a non-first IP fragment).
    NotUdp,
    /// Fewer than [`STAMP_LEN`] bytes of UDP payload.
    Truncated,
    /// The first two bytes are not [`MAGIC`].
    BadMagic,
    /// Magic present but the check does not match (corrupted or random).
    BadCheck,
}

/// A decoded stamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    pub stream: u32,
    /// Only the low 48 bits are carried.
    pub seq: u64,
    pub tsc: u64,
}

/// Stream id of a generator's rx queue: `port << 8 | queue`.
#[inline]
pub fn stream_id(port: u16, queue: u8) -> u32 {
    (u32::from(port) << 8) | u32::from(queue)
}

/// The port part of a [`stream_id`].
#[inline]
pub fn stream_port(stream: u32) -> u16 {
    (stream >> 8) as u16
}

/// The queue part of a [`stream_id`].
#[inline]
pub fn stream_queue(stream: u32) -> u8 {
    stream as u8
}

#[inline]
fn check(stream: u32, seq: u64, tsc: u64) -> u16 {
    let mut x = u64::from(MAGIC) ^ u64::from(stream) ^ seq ^ tsc;
    x ^= x >> 32;
    x ^= x >> 16;
    x as u16
}

impl Stamp {
    /// Writes the stamp (about ten stores; no checks beyond the type).
    #[inline]
    pub fn emit(&self, buf: &mut [u8; STAMP_LEN]) {
        let seq = self.seq & SEQ_MAX;
        buf[field::MAGIC].copy_from_slice(&MAGIC.to_be_bytes());
        buf[field::STREAM].copy_from_slice(&self.stream.to_be_bytes());
        buf[field::SEQ].copy_from_slice(&seq.to_be_bytes()[2..]);
        buf[field::TSC].copy_from_slice(&self.tsc.to_be_bytes());
        buf[field::CHECK].copy_from_slice(&check(self.stream, seq, self.tsc).to_be_bytes());
    }

    /// Reads a stamp from the start of `buf` (a UDP payload).
    #[inline]
    pub fn parse(buf: &[u8]) -> Result<Stamp, StampError> {
        let Some(b) = buf.first_chunk::<STAMP_LEN>() else {
            return Err(StampError::Truncated);
        };
        if u16::from_be_bytes([b[0], b[1]]) != MAGIC {
            return Err(StampError::BadMagic);
        }
        let stream = u32::from_be_bytes([b[2], b[3], b[4], b[5]]);
        let seq = u64::from_be_bytes([0, 0, b[6], b[7], b[8], b[9], b[10], b[11]]);
        let mut tsc = [0u8; 8];
        tsc.copy_from_slice(&b[field::TSC]);
        let tsc = u64::from_be_bytes(tsc);
        if u16::from_be_bytes([b[20], b[21]]) != check(stream, seq, tsc) {
            return Err(StampError::BadCheck);
        }
        Ok(Stamp { stream, seq, tsc })
    }

    /// Finds and reads the stamp of an Ethernet frame.
    #[inline]
    pub fn from_frame(frame: &[u8]) -> Result<Stamp, StampError> {
        let off = udp_payload_offset(frame).ok_or(StampError::NotUdp)?;
        Stamp::parse(&frame[off..])
    }
}

/// Offset of the UDP payload in an Ethernet frame: Ethernet II with VLAN
/// tags skipped by `nfv_wire::l2`'s rule, IPv4 (header length from IHL,
/// first fragment only), UDP. `None` for anything else or a frame cut short.
#[inline]
pub fn udp_payload_offset(frame: &[u8]) -> Option<usize> {
    let l2 = nfv_wire::l2::walk(frame)?;
    if l2.ethertype != EtherType::IPV4 {
        return None;
    }
    let ip = Ipv4Packet::new_unchecked(frame.get(l2.l3_offset..)?);
    if ip.as_ref().len() < ipv4::HEADER_LEN {
        return None;
    }
    let ihl = usize::from(ip.header_len());
    if ip.version() != 4 || ihl < ipv4::HEADER_LEN {
        return None;
    }
    if ip.frag_offset() != 0 || ip.protocol() != IpProtocol::UDP {
        return None;
    }
    let payload = l2.l3_offset + ihl + udp::HEADER_LEN;
    (payload <= frame.len()).then_some(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 64-byte Ethernet/IPv4/UDP frame (no checksums needed here).
    fn frame(payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 42];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[23] = 17;
        f.extend_from_slice(payload);
        f.resize(64.max(f.len()), 0);
        f
    }

    #[test]
    fn layout_is_the_documented_bytes() {
        let s = Stamp {
            stream: 0x0102_0304,
            seq: 0x0000_0506_0708_090a,
            tsc: 0x1112_1314_1516_1718,
        };
        let mut b = [0u8; STAMP_LEN];
        s.emit(&mut b);
        let x = 0x4e54u64 ^ 0x0102_0304 ^ 0x0506_0708_090a ^ 0x1112_1314_1516_1718;
        let x = x ^ (x >> 32);
        let c = ((x ^ (x >> 16)) as u16).to_be_bytes();
        assert_eq!(
            b,
            [
                0x4e, 0x54, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16,
                0x17, 0x18, c[0], c[1]
            ]
        );
        assert_eq!(Stamp::parse(&b), Ok(s));
    }

    #[test]
    fn round_trip_and_fits_a_64_byte_frame() {
        for (stream, seq, tsc) in [
            (0u32, 0u64, 0u64),
            (stream_id(1, 0), 1, 123_456_789),
            (stream_id(65279, 63), SEQ_MAX, u64::MAX),
            (u32::MAX, 42, 1 << 63),
        ] {
            let s = Stamp { stream, seq, tsc };
            let mut f = frame(&[0; STAMP_LEN]);
            assert_eq!(f.len(), 64);
            s.emit(f[STAMP_OFFSET..].first_chunk_mut().unwrap());
            assert_eq!(Stamp::from_frame(&f), Ok(s), "{s:?}");
        }
        // Sequence numbers wrap at 48 bits.
        let mut b = [0; STAMP_LEN];
        Stamp {
            stream: 1,
            seq: SEQ_MAX + 2,
            tsc: 7,
        }
        .emit(&mut b);
        assert_eq!(Stamp::parse(&b).unwrap().seq, 1);
        assert_eq!(
            (
                stream_port(stream_id(300, 7)),
                stream_queue(stream_id(300, 7))
            ),
            (300, 7)
        );
    }

    #[test]
    fn rejects() {
        let good = {
            let mut b = [0u8; STAMP_LEN];
            Stamp {
                stream: 9,
                seq: 5,
                tsc: 77,
            }
            .emit(&mut b);
            b
        };
        let flip = |i: usize| {
            let mut b = good;
            b[i] ^= 0x01;
            b
        };
        // The generator's unstamped payload counts up from 0.
        let counting: Vec<u8> = (0..22).collect();
        let cases: Vec<(&str, Vec<u8>, StampError)> = vec![
            ("empty", vec![], StampError::Truncated),
            ("21 bytes", good[..21].to_vec(), StampError::Truncated),
            ("zeros", vec![0; 22], StampError::BadMagic),
            ("counting payload", counting, StampError::BadMagic),
            ("magic flipped", flip(1).to_vec(), StampError::BadMagic),
            ("stream flipped", flip(3).to_vec(), StampError::BadCheck),
            ("seq flipped", flip(11).to_vec(), StampError::BadCheck),
            ("tsc flipped", flip(15).to_vec(), StampError::BadCheck),
            ("check flipped", flip(21).to_vec(), StampError::BadCheck),
        ];
        for (name, bytes, want) in cases {
            assert_eq!(Stamp::parse(&bytes), Err(want), "{name}");
        }
    }

    #[test]
    fn finds_the_payload_behind_vlan_tags_and_ip_options() {
        let plain = frame(&[]);
        assert_eq!(udp_payload_offset(&plain), Some(42));
        let mut tagged = plain.clone();
        tagged.splice(12..12, [0x81, 0x00, 0x00, 0x05]);
        assert_eq!(udp_payload_offset(&tagged), Some(46));
        let mut qinq = tagged.clone();
        qinq.splice(12..12, [0x88, 0xa8, 0x00, 0x07]);
        assert_eq!(udp_payload_offset(&qinq), Some(50));
        // nfv_wire::l2's rule: a third tag is not skipped.
        let mut three_tags = qinq.clone();
        three_tags.splice(12..12, [0x81, 0x00, 0x00, 0x09]);
        assert_eq!(udp_payload_offset(&three_tags), None);
        assert_eq!(nfv_wire::MAX_VLAN_TAGS, 2);
        let mut opts = plain.clone();
        opts[14] = 0x46;
        opts.splice(34..34, [1, 1, 1, 0]);
        assert_eq!(udp_payload_offset(&opts), Some(46));

        let edit = |i: usize, v: u8| {
            let mut f = plain.clone();
            f[i] = v;
            f
        };
        let not_udp: Vec<(&str, Vec<u8>)> = vec![
            ("empty", vec![]),
            ("runt", plain[..13].to_vec()),
            ("header cut", plain[..41].to_vec()),
            ("ipv6 ethertype", edit(12, 0x86)),
            ("ip version 6", edit(14, 0x65)),
            ("ihl 4", edit(14, 0x44)),
            ("tcp", edit(23, 6)),
            ("later fragment", edit(21, 0x10)),
        ];
        for (name, f) in not_udp {
            assert_eq!(udp_payload_offset(&f), None, "{name}");
            assert_eq!(Stamp::from_frame(&f), Err(StampError::NotUdp), "{name}");
        }
        assert_eq!(Stamp::from_frame(&plain[..50]), Err(StampError::Truncated));
    }
}
