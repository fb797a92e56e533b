//! The Internet checksum (RFC 1071) and its incremental update (RFC 1624).
//!
//! Conventions (as in smoltcp): [`data`], [`combine`] and [`pseudo_header`]
//! return the folded one's-complement *sum*; the value stored in a checksum
//! field is its complement, `!combine(&[...])`. A received header verifies when
//! the sum over it, checksum field included, is `0xffff`.

use crate::ip::IpProtocol;
use core::net::Ipv4Addr;

/// Folds a wide one's-complement accumulator down to 16 bits.
#[inline]
fn fold(mut acc: u64) -> u16 {
    // Two rounds bring any u64 below 0x1_ffff; the third absorbs the last carry.
    acc = (acc & 0xffff_ffff) + (acc >> 32);
    acc = (acc & 0xffff) + (acc >> 16);
    acc = (acc & 0xffff) + (acc >> 16);
    acc = (acc & 0xffff) + (acc >> 16);
    acc as u16
}

/// One's-complement sum of `data` taken as big-endian 16-bit words; an odd
/// trailing byte is padded with a zero byte (RFC 1071 section 4.1).
///
/// Cost: one add per 4 bytes into a 64-bit accumulator, one fold at the end.
pub fn data(data: &[u8]) -> u16 {
    let mut acc: u64 = 0;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        acc += u64::from(u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
    }
    let rem = chunks.remainder();
    // Headers (IPv4's 20 bytes, TCP's) leave none: skip the copy.
    if !rem.is_empty() {
        let mut last = [0u8; 4];
        last[..rem.len()].copy_from_slice(rem);
        acc += u64::from(u32::from_be_bytes(last));
    }
    fold(acc)
}

/// One's-complement sum of several partial sums.
pub fn combine(sums: &[u16]) -> u16 {
    fold(sums.iter().map(|&s| u64::from(s)).sum())
}

/// One's-complement sum of the IPv4 pseudo-header used by UDP and TCP
/// (RFC 768, RFC 793): source, destination, zero + protocol, and `length`,
/// the length of the transport header plus payload.
pub fn pseudo_header(src: Ipv4Addr, dst: Ipv4Addr, protocol: IpProtocol, length: u32) -> u16 {
    let s = u32::from(src);
    let d = u32::from(dst);
    let acc = u64::from(s >> 16)
        + u64::from(s & 0xffff)
        + u64::from(d >> 16)
        + u64::from(d & 0xffff)
        + u64::from(protocol.0)
        + u64::from(length >> 16)
        + u64::from(length & 0xffff);
    fold(acc)
}

/// One's-complement sum of the IPv6 pseudo-header (RFC 8200 section 8.1)
/// used by UDP, TCP and ICMPv6: source, destination, the upper-layer
/// `length` and the next header value `protocol`.
pub fn pseudo_header_v6(src: u128, dst: u128, protocol: IpProtocol, length: u32) -> u16 {
    let acc = words128(src) + words128(dst) + u64::from(length >> 16) + u64::from(length & 0xffff);
    fold(acc + u64::from(protocol.0))
}

/// Sum of the eight 16-bit words of a 128-bit value.
#[inline]
fn words128(v: u128) -> u64 {
    (0..8).map(|i| ((v >> (16 * i)) & 0xffff) as u64).sum()
}

/// RFC 1624 incremental update (eqn. 3): the new value of a checksum *field*
/// `old_csum` after one 16-bit word covered by it changes from `old_word` to
/// `new_word`. `HC' = ~(~HC + ~m + m')`.
pub fn update16(old_csum: u16, old_word: u16, new_word: u16) -> u16 {
    let acc = u64::from(!old_csum) + u64::from(!old_word) + u64::from(new_word);
    !fold(acc)
}

/// [`update16`] for a 32-bit value (two words), e.g. an IPv4 address rewritten
/// by NAT.
#[inline]
pub fn update32(old_csum: u16, old_value: u32, new_value: u32) -> u16 {
    let acc = u64::from(!old_csum)
        + u64::from(!(old_value >> 16) & 0xffff)
        + u64::from(!old_value & 0xffff)
        + u64::from(new_value >> 16)
        + u64::from(new_value & 0xffff);
    !fold(acc)
}

/// [`update16`] for a 64-bit value (four words), e.g. the low half of an
/// IPv6 address when only that half changed: half the work of
/// [`update128`].
#[inline]
pub fn update64(old_csum: u16, old_value: u64, new_value: u64) -> u16 {
    let old = !old_value;
    let acc = u64::from(!old_csum)
        + (old & 0xffff_ffff)
        + (old >> 32)
        + (new_value & 0xffff_ffff)
        + (new_value >> 32);
    !fold(acc)
}

/// [`update16`] for a 128-bit value (eight words): an IPv6 address
/// rewritten under a TCP, UDP or ICMPv6 checksum.
#[inline]
pub fn update128(old_csum: u16, old_value: u128, new_value: u128) -> u16 {
    let acc = u64::from(!old_csum) + words128(!old_value) + words128(new_value);
    !fold(acc)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Straightforward reference: 16-bit words, end-around carry per add.
    fn reference(bytes: &[u8]) -> u16 {
        let mut sum: u32 = 0;
        for pair in bytes.chunks(2) {
            let w = u32::from(pair[0]) << 8 | u32::from(*pair.get(1).unwrap_or(&0));
            sum += w;
            sum = (sum & 0xffff) + (sum >> 16);
        }
        sum as u16
    }

    #[test]
    fn known_vectors() {
        // (input, folded sum)
        let table: &[(&[u8], u16)] = &[
            (&[], 0),
            (&[0x01], 0x0100),
            (&[0x00, 0x01], 0x0001),
            // RFC 1071 section 3 example: sum 0xddf2, checksum 0x220d.
            (&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7], 0xddf2),
            // Odd length: RFC example plus one byte.
            (
                &[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7, 0x01],
                0xdef2,
            ),
            (&[0xff, 0xff], 0xffff),
            (&[0xff, 0xff, 0x00, 0x01], 0x0001),
            (&[0xff; 9], 0xff00),
        ];
        for (i, (input, sum)) in table.iter().enumerate() {
            assert_eq!(data(input), reference(input), "row {i} vs reference");
            assert_eq!(data(input), *sum, "row {i}");
        }
        assert_eq!(
            !data(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
            0x220d
        );
    }

    #[test]
    fn long_input_matches_reference() {
        let mut buf = [0u8; 1501];
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (i * 7 + 3) as u8;
        }
        for len in [0, 1, 2, 3, 4, 5, 63, 64, 65, 1499, 1500, 1501] {
            assert_eq!(data(&buf[..len]), reference(&buf[..len]), "len {len}");
        }
        let ones = [0xffu8; 4096];
        assert_eq!(data(&ones), 0xffff);
    }

    #[test]
    fn ipv4_header_vector() {
        // Widely used example header, checksum field 0xb861.
        let hdr = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(data(&hdr), 0xffff);
        let mut zeroed = hdr;
        zeroed[10] = 0;
        zeroed[11] = 0;
        assert_eq!(!data(&zeroed), 0xb861);
        // Split sums combine to the whole.
        assert_eq!(
            combine(&[data(&zeroed[..10]), data(&zeroed[10..])]),
            data(&zeroed)
        );
    }

    #[test]
    fn pseudo_header_vector() {
        let src = Ipv4Addr::new(192, 168, 0, 1);
        let dst = Ipv4Addr::new(192, 168, 0, 199);
        let bytes = [192, 168, 0, 1, 192, 168, 0, 199, 0, 17, 0x00, 0x5f];
        assert_eq!(pseudo_header(src, dst, IpProtocol::UDP, 0x5f), data(&bytes));
    }

    #[test]
    fn rfc1624_example() {
        // RFC 1624 section 4: HC = 0xdd2f, m = 0x5555 -> m' = 0x3285 gives 0x0000.
        assert_eq!(update16(0xdd2f, 0x5555, 0x3285), 0x0000);
    }

    #[test]
    fn incremental_update_matches_recompute() {
        let mut hdr = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        // Decrement TTL (word at offset 8: ttl|proto) over many steps.
        for _ in 0..64 {
            let old = u16::from_be_bytes([hdr[8], hdr[9]]);
            hdr[8] -= 1;
            let new = u16::from_be_bytes([hdr[8], hdr[9]]);
            let c = update16(u16::from_be_bytes([hdr[10], hdr[11]]), old, new);
            hdr[10..12].copy_from_slice(&c.to_be_bytes());
            assert_eq!(data(&hdr), 0xffff);
        }
        // Rewrite the source address (NAT).
        let old = u32::from_be_bytes([hdr[12], hdr[13], hdr[14], hdr[15]]);
        let new: u32 = 0x0a00_0001;
        hdr[12..16].copy_from_slice(&new.to_be_bytes());
        let c = update32(u16::from_be_bytes([hdr[10], hdr[11]]), old, new);
        hdr[10..12].copy_from_slice(&c.to_be_bytes());
        assert_eq!(data(&hdr), 0xffff);
    }

    #[test]
    fn ipv6_pseudo_header_and_update128_agree_with_etherparse() {
        let src: u128 = 0x2001_0db8_0000_0000_0000_0000_0000_0001;
        let dst: u128 = 0xfe80_0000_0000_0000_1234_5678_9abc_def0;
        let payload = [0x12u8, 0x34, 0x56, 0x78, 0xff, 0xfe, 1, 2, 3];
        let udp = etherparse::UdpHeader::with_ipv6_checksum(
            1000,
            2000,
            &etherparse::Ipv6Header {
                traffic_class: 0,
                flow_label: Default::default(),
                payload_length: (8 + payload.len()) as u16,
                next_header: etherparse::IpNumber::UDP,
                hop_limit: 64,
                source: src.to_be_bytes(),
                destination: dst.to_be_bytes(),
            },
            &payload,
        )
        .unwrap();
        let mut hdr = udp.to_bytes();
        hdr[6] = 0;
        hdr[7] = 0;
        let len = (8 + payload.len()) as u32;
        let ours = !combine(&[
            pseudo_header_v6(src, dst, IpProtocol::UDP, len),
            data(&[&hdr[..], &payload[..]].concat()),
        ]);
        assert_eq!(ours, udp.checksum);
        // Rewriting the destination: the incremental update equals a recomputation.
        let dst2: u128 = 0x2001_0db8_ffff_0000_0000_0000_0000_00ff;
        let full = !combine(&[
            pseudo_header_v6(src, dst2, IpProtocol::UDP, len),
            data(&[&hdr[..], &payload[..]].concat()),
        ]);
        assert_eq!(update128(ours, dst, dst2), full);
        // Only the low half changing: update64 on that half agrees.
        for dst3 in [
            dst ^ 0xffff_0000_1234_0001,
            dst & !0xffff_ffff_ffff_ffff,
            dst | 0xffff_ffff_ffff_ffff,
        ] {
            let full = !combine(&[
                pseudo_header_v6(src, dst3, IpProtocol::UDP, len),
                data(&[&hdr[..], &payload[..]].concat()),
            ]);
            let by64 = update64(ours, dst as u64, dst3 as u64);
            // 0 and 0xffff are the same one's-complement number.
            assert_eq!(by64 % 0xffff, full % 0xffff, "{dst3:x}");
            assert_eq!(by64, update128(ours, dst, dst3), "{dst3:x}");
        }
    }
}
