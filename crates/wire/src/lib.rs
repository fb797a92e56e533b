//! Wire formats for nfvswitch, in the style of smoltcp's `wire` module.
//!
//! One module per protocol. Each has:
//!
//! * a zero-copy view `Xxx<T: AsRef<[u8]>>` over a byte buffer, with field
//!   offsets as `const` ranges in a public `field` module, getters for
//!   `T: AsRef<[u8]>` and setters for `T: AsMut<[u8]>`;
//! * `new_unchecked` (no validation: accessors may panic on a short buffer) and
//!   `new_checked` (validates length and the fields that other offsets depend
//!   on, after which **no accessor panics**);
//! * a high-level `XxxRepr` with `parse` (never panics, even on an unchecked
//!   view) and `emit` (writes into a buffer of at least `buffer_len()` bytes).
//!
//! The crate is `no_std`, allocates nothing, does no I/O and contains no
//! `unsafe`. It is meant for the per-packet path as well as for tests.
//!
//! It is the single owner of header layout in nfvswitch: flow extraction,
//! the datapath's actions, the traffic stamp and the generator read and
//! write headers through these views and `field` ranges (all compile-time
//! constants), never through offsets of their own. How many VLAN tags are
//! skipped before the network header is decided once, in [`l2`].
//!
//! Setters write the field and nothing else: changing a length or header-length
//! field on a checked view can invalidate the check, so call `check_len` again
//! before trusting the other accessors.
#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(test)]
extern crate std;

pub mod arp;
pub mod checksum;
pub mod ethernet;
pub mod icmpv4;
pub mod ipv4;
pub mod l2;
pub mod memif;
pub mod tcp;
pub mod udp;
pub mod vlan;
pub mod vxlan;

use core::fmt;

pub use arp::{ArpOperation, ArpPacket, ArpRepr};
pub use ethernet::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr};
pub use ipv4::{IpProtocol, Ipv4Packet, Ipv4Repr};
pub use l2::{L2Info, MAX_VLAN_TAGS};
pub use tcp::{TcpFlags, TcpPacket};
pub use udp::{UdpPacket, UdpRepr};
pub use vlan::{VlanRepr, VlanTag};
pub use vxlan::{VxlanPacket, VxlanRepr};

/// `Ipv4Addr` as used by every accessor of this crate (re-exported from `core::net`).
pub use core::net::Ipv4Addr;

/// A byte range of a fixed-size header field.
pub type Field = core::ops::Range<usize>;
/// The byte range from a fixed offset to the end of the buffer.
pub type Rest = core::ops::RangeFrom<usize>;

/// Why a buffer could not be viewed or parsed as a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Error {
    /// The buffer is shorter than the header, or than a length field says.
    Truncated,
    /// A field holds a value this crate does not accept (bad version, length
    /// field smaller than the header, wrong checksum, unsupported address
    /// type, ...).
    Malformed,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Truncated => f.write_str("truncated packet"),
            Error::Malformed => f.write_str("malformed packet"),
        }
    }
}

impl core::error::Error for Error {}

/// Result type of this crate.
pub type Result<T> = core::result::Result<T, Error>;

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
pub(crate) fn get_ipv4(b: &[u8]) -> Ipv4Addr {
    Ipv4Addr::new(b[0], b[1], b[2], b[3])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;

    #[test]
    fn error_display() {
        assert_eq!(Error::Truncated.to_string(), "truncated packet");
        assert_eq!(Error::Malformed.to_string(), "malformed packet");
        let e: &dyn core::error::Error = &Error::Malformed;
        assert!(e.source().is_none());
    }

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
