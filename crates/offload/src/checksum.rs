//! The Internet checksum over whole segments, and completing a partial one.
//!
//! The conventions are `nfv_wire::checksum`'s: a *sum* is the folded
//! ones'-complement sum; a checksum field holds its complement. The
//! incremental update (RFC 1624) and the IPv4 pseudo-header come from
//! there ([`update16`], [`update32`], `pseudo_header`); this module adds
//! what offload needs on top: a sum fast enough for 64 KiB frames, the
//! IPv6 pseudo-header (nfv-wire has no IPv6 module yet) and
//! [`complete_checksum`].

pub use nfv_wire::checksum::{combine, update16, update32};

/// Folds a 64-bit ones'-complement accumulator to 16 bits.
#[inline]
fn fold64(acc: u64) -> u16 {
    let (s, c) = (acc as u32).overflowing_add((acc >> 32) as u32);
    let acc = u64::from(s) + u64::from(c);
    let acc = (acc & 0xffff) + (acc >> 16);
    let acc = (acc & 0xffff) + (acc >> 16);
    let acc = (acc & 0xffff) + (acc >> 16);
    acc as u16
}

/// Ones'-complement sum of `data` as big-endian 16-bit words, an odd last
/// byte padded with zero (RFC 1071); folded, not complemented. Returns the
/// same value as `nfv_wire::checksum::data`.
///
/// Hot (whole 1500-byte and 64 KiB frames): the bytes are read as native
/// 64-bit words and added with end-around carry, four words per step; the
/// byte order is fixed once at the end (the sum is byte-order independent,
/// RFC 1071 section 2(B)).
pub fn sum(data: &[u8]) -> u16 {
    let mut acc: u64 = 0;
    let mut carries: u64 = 0;
    let mut add = |w: u64| {
        let (s, c) = acc.overflowing_add(w);
        acc = s;
        carries += u64::from(c);
    };
    let word = |b: &[u8]| u64::from_ne_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
    let mut blocks = data.chunks_exact(32);
    for b in &mut blocks {
        add(word(&b[0..8]));
        add(word(&b[8..16]));
        add(word(&b[16..24]));
        add(word(&b[24..32]));
    }
    let mut words = blocks.remainder().chunks_exact(8);
    for w in &mut words {
        add(word(w));
    }
    let rem = words.remainder();
    let mut last = [0u8; 8];
    last[..rem.len()].copy_from_slice(rem);
    add(u64::from_ne_bytes(last));
    // 2^64 is 1 modulo 0xffff: each carry out of bit 63 counts as one.
    let (s, c) = acc.overflowing_add(carries);
    let folded = fold64(s + u64::from(c));
    // The native words summed the big-endian 16-bit words byte-swapped on
    // a little-endian machine; swap the result back.
    u16::from_be(folded)
}

/// [`update16`] for a field that holds a partial checksum (a *sum*, as
/// NEEDS_CSUM leaves it) rather than a complement: the new partial sum
/// after a covered 16-bit word changes from `old_word` to `new_word`.
pub fn partial_update16(partial: u16, old_word: u16, new_word: u16) -> u16 {
    !update16(!partial, old_word, new_word)
}

/// [`partial_update16`] for a 32-bit value (an IPv4 address in the
/// pseudo-header).
pub fn partial_update32(partial: u16, old_value: u32, new_value: u32) -> u16 {
    !update32(!partial, old_value, new_value)
}

/// Ones'-complement sum of the IPv6 pseudo-header (RFC 8200 section 8.1)
/// for an upper-layer packet of `length` bytes and protocol `next_header`;
/// `addrs` is the source then destination address (32 bytes).
pub fn pseudo_header_v6(addrs: &[u8; 32], next_header: u8, length: u32) -> u16 {
    combine(&[
        sum(addrs),
        (length >> 16) as u16,
        length as u16,
        u16::from(next_header),
    ])
}

/// Completes a partial checksum ([`crate::F_NEEDS_CSUM`]): the ones'-complement
/// sum from `csum_start` to the end of `frame`, with the field at
/// `csum_start + csum_offset` included (it holds the pseudo-header sum, as
/// Linux leaves it for `CHECKSUM_PARTIAL`), complemented and stored in that
/// field. A result of 0 is stored as `0xffff` (the same value in ones'
/// complement; UDP requires it, RFC 768, and TCP does not mind).
///
/// For a header [`crate::validate`] accepted. Out of bounds offsets are a
/// caller bug: the frame is left unchanged (and debug builds panic).
pub fn complete_checksum(frame: &mut [u8], csum_start: usize, csum_offset: usize) {
    let Some(at) = csum_start.checked_add(csum_offset) else {
        debug_assert!(false, "checksum offset overflows");
        return;
    };
    if at.checked_add(2).is_none_or(|end| end > frame.len()) {
        debug_assert!(false, "checksum field past the frame");
        return;
    }
    let c = !sum(&frame[csum_start..]);
    let c = if c == 0 { 0xffff } else { c };
    frame[at..at + 2].copy_from_slice(&c.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_frames::{self, Ip, L4};

    /// Straightforward reference: 16-bit big-endian words, end-around carry
    /// per add.
    fn reference(bytes: &[u8]) -> u16 {
        let mut s: u32 = 0;
        for pair in bytes.chunks(2) {
            s += u32::from(u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)]));
            s = (s & 0xffff) + (s >> 16);
        }
        s as u16
    }

    fn pattern(len: usize, seed: u32) -> Vec<u8> {
        // xorshift: carries in every position, not a periodic pattern.
        let mut x = seed | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect()
    }

    #[test]
    fn sum_matches_reference_at_every_length_and_alignment() {
        let buf = pattern(300, 7);
        for start in 0..9 {
            for len in 0..(buf.len() - start) {
                let s = &buf[start..start + len];
                assert_eq!(sum(s), reference(s), "start {start} len {len}");
            }
        }
    }

    #[test]
    fn sum_matches_reference_and_wire_on_large_frames() {
        for (len, seed) in [(1500, 3), (1514, 5), (9000, 11), (65535, 13), (65536, 17)] {
            let b = pattern(len, seed);
            assert_eq!(sum(&b), reference(&b), "len {len}");
            assert_eq!(sum(&b), nfv_wire::checksum::data(&b), "len {len}");
        }
        // Saturated words: every add carries.
        for len in [8, 32, 40, 64 * 1024] {
            assert_eq!(sum(&vec![0xff; len]), 0xffff, "ones {len}");
            assert_eq!(sum(&vec![0; len]), 0, "zeros {len}");
        }
        assert_eq!(sum(&[0xff]), reference(&[0xff]));
    }

    #[test]
    fn pseudo_header_v6_matches_reference() {
        let addrs: [u8; 32] = pattern(32, 23).try_into().unwrap();
        for (nh, len) in [(6u8, 20u32), (17, 1_000), (6, 70_000)] {
            let mut bytes = addrs.to_vec();
            bytes.extend_from_slice(&len.to_be_bytes());
            bytes.extend_from_slice(&[0, 0, 0, nh]);
            assert_eq!(pseudo_header_v6(&addrs, nh, len), reference(&bytes));
        }
    }

    /// Frames built by etherparse carry the full checksum. Replacing it by
    /// the pseudo-header sum (what a NEEDS_CSUM sender leaves) and
    /// completing it must give etherparse's value back.
    #[test]
    fn complete_checksum_matches_etherparse() {
        let mut checked = 0;
        for ip in [Ip::V4, Ip::V4Options, Ip::V6] {
            for l4 in [L4::Tcp, L4::Udp] {
                for len in [0, 1, 2, 17, 1448, 9000] {
                    let f = test_frames::build(&test_frames::Spec {
                        ip,
                        l4,
                        payload: len,
                        ..Default::default()
                    });
                    let (start, off) = (f.l4, l4.csum_offset());
                    let want = u16::from_be_bytes([f.bytes[start + off], f.bytes[start + off + 1]]);
                    let mut partial = f.bytes.clone();
                    let pseudo = test_frames::pseudo_sum(&f.bytes, &f);
                    partial[start + off..start + off + 2].copy_from_slice(&pseudo.to_be_bytes());
                    complete_checksum(&mut partial, start, off);
                    assert_eq!(
                        partial, f.bytes,
                        "{ip:?} {l4:?} payload {len}: checksum {want:#06x}"
                    );
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, 36);
    }

    #[test]
    fn complete_checksum_writes_ffff_for_zero() {
        // Covered bytes that sum to 0xffff complement to zero.
        let mut f = [0x12, 0x34, 0xed, 0xcb, 0, 0];
        complete_checksum(&mut f, 0, 4);
        assert_eq!(&f[4..], &[0xff, 0xff]);
        assert_eq!(reference(&f), 0xffff);
    }

    #[test]
    #[cfg(not(debug_assertions))]
    fn complete_checksum_out_of_bounds_is_a_no_op() {
        let mut f = [1u8; 10];
        complete_checksum(&mut f, 8, 1);
        complete_checksum(&mut f, usize::MAX, 2);
        assert_eq!(f, [1u8; 10]);
    }

    #[test]
    fn incremental_updates_match_recomputation() {
        use test_frames::Spec;
        // A port rewrite: the full checksum updated by RFC 1624 equals the
        // one etherparse computes for the rewritten frame.
        let a = test_frames::build(&Spec {
            payload: 100,
            ..Default::default()
        });
        let b = test_frames::build(&Spec {
            payload: 100,
            dst_port: 8080,
            ..Default::default()
        });
        let field =
            |f: &test_frames::Built| u16::from_be_bytes([f.bytes[f.l4 + 16], f.bytes[f.l4 + 17]]);
        let old = Spec::default().dst_port;
        assert_eq!(update16(field(&a), old, 8080), field(&b));
        // An address rewrite (NAT) under a partial checksum: the field
        // holds a pseudo-header sum, kept in step by partial_update32.
        let c = test_frames::build(&Spec {
            payload: 100,
            src4: [10, 9, 8, 7],
            ..Default::default()
        });
        let old = u32::from_be_bytes(Spec::default().src4);
        let new = u32::from_be_bytes([10, 9, 8, 7]);
        let pa = test_frames::pseudo_sum(&a.bytes, &a);
        let pc = test_frames::pseudo_sum(&c.bytes, &c);
        assert_eq!(partial_update32(pa, old, new), pc);
        let (hi, lo) = ((old >> 16) as u16, (new >> 16) as u16);
        assert_eq!(
            partial_update16(partial_update16(pa, hi, lo), old as u16, new as u16),
            pc
        );
    }
}
