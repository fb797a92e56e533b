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
mod bytes;
pub mod checksum;
mod error;
pub mod ethernet;
pub mod icmpv4;
pub mod icmpv6;
pub mod ip;
pub mod ipv4;
pub mod ipv6;
pub mod l2;
pub mod memif;
pub mod tcp;
pub mod udp;
pub mod vlan;
pub mod vxlan;

pub use bytes::{Field, Rest};
pub use error::{Error, Result};

pub use arp::{ArpOperation, ArpPacket, ArpRepr};
pub use ethernet::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr};
pub use ipv4::{IpProtocol, Ipv4Packet, Ipv4Repr};
pub use ipv6::{Ipv6Packet, Ipv6Repr};
pub use l2::{L2Info, MAX_VLAN_TAGS};
pub use tcp::{TcpFlags, TcpPacket};
pub use udp::{UdpPacket, UdpRepr};
pub use vlan::{VlanRepr, VlanTag};
pub use vxlan::{VxlanPacket, VxlanRepr};

/// `Ipv4Addr` as used by every accessor of this crate (re-exported from `core::net`).
pub use core::net::Ipv4Addr;
/// `Ipv6Addr` as used by every accessor of this crate (re-exported from `core::net`).
pub use core::net::Ipv6Addr;
