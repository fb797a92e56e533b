//! Field ranges and big-endian reads and writes shared by the header views.

/// A byte range of a fixed-size header field.
pub type Field = core::ops::Range<usize>;
/// The byte range from a fixed offset to the end of the buffer.
pub type Rest = core::ops::RangeFrom<usize>;

/// Reads a big-endian `u16` from the first two bytes of `b`.
#[inline]
pub(crate) fn get_u16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

/// Reads a big-endian `u32` from the first four bytes of `b`.
#[inline]
pub(crate) fn get_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// Writes `v` big-endian into the first two bytes of `b`.
#[inline]
pub(crate) fn put_u16(b: &mut [u8], v: u16) {
    b[..2].copy_from_slice(&v.to_be_bytes());
}

/// Writes `v` big-endian into the first four bytes of `b`.
#[inline]
pub(crate) fn put_u32(b: &mut [u8], v: u32) {
    b[..4].copy_from_slice(&v.to_be_bytes());
}

/// Reads an IPv4 address from the first four bytes of `b`.
#[inline]
pub(crate) fn get_ipv4(b: &[u8]) -> core::net::Ipv4Addr {
    core::net::Ipv4Addr::new(b[0], b[1], b[2], b[3])
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::Ipv4Addr;

    #[test]
    fn byte_helpers() {
        let mut b = [0u8; 4];
        put_u16(&mut b, 0x1234);
        assert_eq!(b, [0x12, 0x34, 0, 0]);
        assert_eq!(get_u16(&b), 0x1234);
        put_u32(&mut b, 0xdead_beef);
        assert_eq!(get_u32(&b), 0xdead_beef);
        assert_eq!(get_ipv4(&[10, 0, 0, 1]), Ipv4Addr::new(10, 0, 0, 1));
    }
}
