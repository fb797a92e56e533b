//! Why an offload header was refused: one variant per hostile case, each
//! a counter.

/// Why [`crate::validate`] refused a header. Each is a drop reason with
/// its own counter ([`OffloadError::counter_name`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum OffloadError {
    /// The frame ends inside a header (Ethernet, VLAN tag, IP, TCP, UDP).
    #[error("headers are cut short by the end of the frame")]
    Truncated,
    /// GSO on a frame that is not IPv4 or IPv6.
    #[error("GSO on a frame that is not IPv4 or IPv6")]
    NotIp,
    /// The IP version nibble is not the EtherType's, or the IPv4 header
    /// length is below 20 bytes.
    #[error("IP header malformed (version, or IPv4 header length below 20)")]
    IpHeaderBad,
    /// The TCP data offset is below 5 words.
    #[error("TCP header malformed (data offset below 20 bytes)")]
    TcpHeaderBad,
    /// GSO on an IPv4 fragment.
    #[error("GSO on an IPv4 fragment")]
    IpFragment,
    /// GSO on IPv6 with extension headers (not supported).
    #[error("GSO on IPv6 with extension headers (not supported)")]
    Ipv6ExtHeaders,
    /// `csum_start + csum_offset + 2` is past the end of the frame.
    #[error("partial checksum field past the end of the frame")]
    CsumPastFrame,
    /// On a TCP or UDP frame, `csum_start` is not the transport header.
    #[error("partial checksum does not start at the TCP/UDP header")]
    CsumStartBad,
    /// On a TCP or UDP frame, `csum_offset` is not the transport checksum
    /// field (16 for TCP, 6 for UDP).
    #[error("partial checksum offset is not the TCP/UDP checksum field")]
    CsumOffsetBad,
    /// GSO with `gso_size` 0.
    #[error("GSO with a segment size of 0")]
    GsoSizeZero,
    /// GSO without `NEEDS_CSUM`.
    #[error("GSO without a partial checksum (NEEDS_CSUM)")]
    GsoWithoutCsum,
    /// TSO on a frame that is not TCP over the IP version of its type.
    #[error("TSO on a frame that is not TCP over the right IP version")]
    GsoNotTcp,
    /// USO on a frame that is not UDP.
    #[error("UDP segmentation on a frame that is not UDP")]
    GsoNotUdp,
    /// `GSO_UDP` (UFO, IP fragmentation) is not supported.
    #[error("UDP fragmentation offload (UFO) is not supported")]
    UfoUnsupported,
    /// A `gso_type` this crate does not know.
    #[error("unknown GSO type")]
    UnknownGsoType,
    /// A segment would not fit the 16-bit IP length field.
    #[error("a segment would exceed the 64 KiB IP length")]
    SegmentTooLong,
}

impl OffloadError {
    /// Every variant, in declaration order (for counter tables).
    pub const ALL: [OffloadError; 16] = [
        OffloadError::Truncated,
        OffloadError::NotIp,
        OffloadError::IpHeaderBad,
        OffloadError::TcpHeaderBad,
        OffloadError::IpFragment,
        OffloadError::Ipv6ExtHeaders,
        OffloadError::CsumPastFrame,
        OffloadError::CsumStartBad,
        OffloadError::CsumOffsetBad,
        OffloadError::GsoSizeZero,
        OffloadError::GsoWithoutCsum,
        OffloadError::GsoNotTcp,
        OffloadError::GsoNotUdp,
        OffloadError::UfoUnsupported,
        OffloadError::UnknownGsoType,
        OffloadError::SegmentTooLong,
    ];

    /// A short snake_case name for counters.
    pub fn counter_name(&self) -> &'static str {
        match self {
            OffloadError::Truncated => "truncated",
            OffloadError::NotIp => "gso_not_ip",
            OffloadError::IpHeaderBad => "ip_header_bad",
            OffloadError::TcpHeaderBad => "tcp_header_bad",
            OffloadError::IpFragment => "gso_ip_fragment",
            OffloadError::Ipv6ExtHeaders => "gso_ipv6_ext_headers",
            OffloadError::CsumPastFrame => "csum_past_frame",
            OffloadError::CsumStartBad => "csum_start_bad",
            OffloadError::CsumOffsetBad => "csum_offset_bad",
            OffloadError::GsoSizeZero => "gso_size_zero",
            OffloadError::GsoWithoutCsum => "gso_without_csum",
            OffloadError::GsoNotTcp => "gso_not_tcp",
            OffloadError::GsoNotUdp => "gso_not_udp",
            OffloadError::UfoUnsupported => "gso_ufo_unsupported",
            OffloadError::UnknownGsoType => "gso_type_unknown",
            OffloadError::SegmentTooLong => "gso_segment_too_long",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn counter_names_are_unique_snake_case_and_messages_nonempty() {
        let mut seen = HashSet::new();
        for e in OffloadError::ALL {
            let n = e.counter_name();
            assert!(seen.insert(n), "duplicate {n}");
            assert!(
                !n.is_empty()
                    && n.bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
                "{n}"
            );
            assert!(!e.to_string().is_empty());
        }
        assert_eq!(seen.len(), OffloadError::ALL.len());
    }
}
