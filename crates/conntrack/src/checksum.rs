//! The Internet checksum (RFC 1071) and its incremental update (RFC 1624),
//! for rewriting headers after NAT without summing the packet again.
//!
//! Pure functions over values, independent of the rest of the crate (and of
//! any packet type), so the datapath can use them or its own. A checksum is
//! handled as the 16-bit value read big-endian from its header field, and
//! the words it covers likewise.
//!
//! RFC 1624 §3 gives the update for a checksum `HC` when a 16-bit word `m`
//! of the covered data becomes `m'`: `HC' = ~(~HC + ~m + m')` in ones'
//! complement arithmetic (eqn. 3). The older form of RFC 1141,
//! `HC' = HC + m + ~m'`, can give `0xFFFF` where summing the data afresh
//! gives `0x0000`; eqn. 3 agrees with the fresh sum. A change of several
//! words adds one `~m + m'` pair per word.
//!
//! What covers what, for NAT:
//! * IPv4 header checksum: the addresses (not ports); IPv6 has none.
//! * TCP and UDP checksums: the ports, and through the pseudo-header the
//!   addresses, for both families; ICMPv6 likewise covers the addresses
//!   (pseudo-header), ICMPv4 does not. An ICMP identifier is covered by the
//!   ICMP checksum.
//! * UDP over IPv4 may carry checksum 0, meaning "none": leave it 0. A
//!   computed UDP checksum of 0 is sent as `0xFFFF` (RFC 768); see
//!   [`udp_nonzero`]. Over IPv6 a UDP checksum is mandatory (RFC 8200 §8.1).

use std::net::{Ipv4Addr, Ipv6Addr};

/// Adds the 16-bit big-endian words of `data` to `sum` (an odd last byte
/// is padded with a zero byte). The sum is not folded: fold with [`fold`].
pub fn ones_sum(data: &[u8], mut sum: u64) -> u64 {
    let mut words = data.chunks_exact(2);
    for w in &mut words {
        sum += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = words.remainder() {
        sum += u64::from(*last) << 8;
    }
    sum
}

/// Folds the carries of a sum into 16 bits (end-around carry).
pub fn fold(mut sum: u64) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// The checksum of `data` from scratch: the complement of the folded sum.
/// With the checksum field zeroed in `data`, this is the value to store.
pub fn checksum(data: &[u8]) -> u16 {
    !fold(ones_sum(data, 0))
}

/// RFC 1624 eqn. 3 for byte strings of equal, even length: the checksum
/// `check` after the covered bytes `old` became `new`.
///
/// # Panics
///
/// If the lengths differ or are odd.
pub fn update_bytes(check: u16, old: &[u8], new: &[u8]) -> u16 {
    assert_eq!(old.len(), new.len(), "replaced bytes differ in length");
    assert_eq!(
        old.len() % 2,
        0,
        "replaced bytes must be whole 16-bit words"
    );
    let mut sum = u64::from(!check);
    for (o, n) in old.chunks_exact(2).zip(new.chunks_exact(2)) {
        sum += u64::from(!u16::from_be_bytes([o[0], o[1]]));
        sum += u64::from(u16::from_be_bytes([n[0], n[1]]));
    }
    !fold(sum)
}

/// One 16-bit word changed.
pub fn update16(check: u16, old: u16, new: u16) -> u16 {
    !fold(u64::from(!check) + u64::from(!old) + u64::from(new))
}

/// One 32-bit word changed (two 16-bit words, aligned).
pub fn update32(check: u16, old: u32, new: u32) -> u16 {
    update_bytes(check, &old.to_be_bytes(), &new.to_be_bytes())
}

/// A port (or ICMP identifier) changed.
pub fn update_port(check: u16, old: u16, new: u16) -> u16 {
    update16(check, old, new)
}

/// An IPv4 address changed: for the IPv4 header checksum and for the
/// pseudo-header of TCP/UDP.
pub fn update_ipv4(check: u16, old: Ipv4Addr, new: Ipv4Addr) -> u16 {
    update_bytes(check, &old.octets(), &new.octets())
}

/// An IPv6 address changed: for the pseudo-header of TCP/UDP/ICMPv6.
pub fn update_ipv6(check: u16, old: Ipv6Addr, new: Ipv6Addr) -> u16 {
    update_bytes(check, &old.octets(), &new.octets())
}

/// The value to store in a UDP checksum field: a computed 0 is sent as
/// `0xFFFF`, since 0 means "no checksum" (RFC 768).
pub fn udp_nonzero(check: u16) -> u16 {
    if check == 0 { 0xffff } else { check }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3: the words 0001 f203 f4f5 f6f7 sum to ddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(ones_sum(&data, 0)), 0xddf2);
        assert_eq!(checksum(&data), !0xddf2);
        // An odd trailing byte counts as the high byte of a word.
        assert_eq!(fold(ones_sum(&[0x12], 0)), 0x1200);
    }

    #[test]
    fn eqn3_agrees_with_a_fresh_sum_where_rfc1141_does_not() {
        // The rest of the data sums to 0xCD7A; a word 0x5555 becomes
        // 0x3285, so the new sum is 0xFFFF and the fresh checksum 0x0000.
        let before = !fold(0xcd7a + 0x5555);
        assert_eq!(before, 0xdd2f);
        let fresh = !fold(0xcd7a + 0x3285);
        assert_eq!(fresh, 0x0000);
        assert_eq!(update16(before, 0x5555, 0x3285), fresh);
        let rfc1141 = fold(u64::from(before) + 0x5555 + u64::from(!0x3285u16));
        assert_eq!(rfc1141, 0xffff, "the older form gives the other zero");
        // Unchanged words leave the checksum as it is.
        for check in [0x0000, 0x1234, 0xfffe] {
            assert_eq!(update16(check, 0xabcd, 0xabcd), check);
        }
    }
}
