//! Checksum offload and software segmentation (GSO) for the virtio-net
//! header: pure functions over frames, no I/O, no allocation, no `unsafe`.
//!
//! # Why
//!
//! A guest that negotiated the checksum and TSO/USO features hands the
//! switch frames the way a NIC driver would: with a *partial* transport
//! checksum (the header says where it starts and where the field is; the
//! field holds only the pseudo-header sum) and, for TSO/USO, frames of up
//! to 64 KiB that a NIC would cut into MSS-sized segments. An output that
//! negotiated the same features takes them as they are. Every other
//! output needs the work done in software first: the checksum completed,
//! or the frame segmented. That is this crate.
//!
//! # Which outputs do the work in software
//!
//! Any output whose [`OffloadCaps`] does not [`accept`](OffloadCaps::accepts)
//! the frame's header; [`OffloadCaps::plan`] says what to do. A
//! vhost-user guest that did not negotiate `GUEST_CSUM` gets completed
//! checksums, one without `GUEST_TSO4`/`GUEST_TSO6`/`GUEST_USO*` gets
//! segments (left partial if it has `GUEST_CSUM`, complete otherwise);
//! ports that carry no virtio-net header at all (AF_XDP, AF_PACKET, tap
//! without a vnet header, memif, pcap) are [`OffloadCaps::NONE`] and get
//! complete, segmented frames.
//!
//! # How it is used
//!
//! 1. [`OffloadMeta::from_virtio_hdr`] on the header a guest sent;
//! 2. [`validate`] it against the frame (hostile input: every offset and
//!    type is checked, refusals are [`OffloadError`]s, each with a counter
//!    name); this gives the [`Layout`] of the headers;
//! 3. per output, [`OffloadCaps::plan`], then [`complete_checksum`] or
//!    [`segment_count`] and [`segment`] as the plan says.
//!
//! Supported: Ethernet with up to two VLAN tags, IPv4 (options allowed;
//! fragments refused for GSO) or IPv6 (no extension headers for GSO),
//! TCP or UDP. UFO (`GSO_UDP`, IP fragmentation) is refused.
//!
//! # Sources
//!
//! The virtio 1.x specification: section 5.1.6 (device operation, the
//! `virtio_net_hdr` layout), 5.1.6.2 (packet transmission: `NEEDS_CSUM`,
//! `csum_start`/`csum_offset`, the GSO types and `gso_size`), 5.1.6.4
//! (processing of incoming packets: `DATA_VALID`), 5.1.3 (the feature bits
//! behind [`OffloadCaps`]). The checksum: RFC 1071 (computation), RFC 1624
//! (incremental update), RFC 768 (UDP zero), RFC 8200 section 8.1 (IPv6
//! pseudo-header). Segment fixes follow what Linux's software GSO does
//! (RFC 3168 section 6.1.2 for CWR on the first segment).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod checksum;
mod error;
mod meta;
mod segment;
mod validate;

#[cfg(test)]
mod test_frames;

pub use checksum::complete_checksum;
pub use error::OffloadError;
pub use meta::{
    F_DATA_VALID, F_NEEDS_CSUM, GSO_ECN, GSO_NONE, GSO_TCPV4, GSO_TCPV6, GSO_UDP, GSO_UDP_L4,
    OffloadCaps, OffloadMeta, TxPlan,
};
pub use segment::{segment, segment_count, segment_len};
pub use validate::{Layout, validate};
