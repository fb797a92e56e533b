//! The offload fields of the virtio-net header and what an output accepts.
//!
//! The header is `struct virtio_net_hdr` (virtio 1.x section 5.1.6): its
//! first 10 bytes, little endian, are the ones read here. `num_buffers`
//! (mergeable rx buffers) and the hash fields that may follow are the
//! port's business, not this crate's.

/// `flags`: the checksum from `csum_start` to the end of the frame is
/// partial; the field at `csum_start + csum_offset` holds the
/// pseudo-header sum (section 5.1.6.2).
pub const F_NEEDS_CSUM: u8 = 1;
/// `flags`: the checksums have been verified (device to driver only,
/// section 5.1.6.4); a hint, nothing to do.
pub const F_DATA_VALID: u8 = 2;

/// `gso_type`: not a GSO frame.
pub const GSO_NONE: u8 = 0;
/// `gso_type`: TCP over IPv4, segment to `gso_size` payload bytes (TSO).
pub const GSO_TCPV4: u8 = 1;
/// `gso_type`: UDP fragmentation offload (UFO: IP fragments). Refused here.
pub const GSO_UDP: u8 = 3;
/// `gso_type`: TCP over IPv6 (TSO).
pub const GSO_TCPV6: u8 = 4;
/// `gso_type`: UDP segmentation (USO): one UDP datagram per segment.
pub const GSO_UDP_L4: u8 = 5;
/// `gso_type` bit: the TCP frame has CWR set and the receiver must keep
/// it on the first segment only (ECN, RFC 3168).
pub const GSO_ECN: u8 = 0x80;

/// The offload fields of a virtio-net header (virtio 1.x section 5.1.6,
/// `struct virtio_net_hdr`, first 10 bytes, little endian).
///
/// A plain value: nothing here is checked. [`crate::validate`] checks one
/// against its frame before anything trusts an offset in it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OffloadMeta {
    /// [`F_NEEDS_CSUM`], [`F_DATA_VALID`]; other bits are ignored.
    pub flags: u8,
    /// One of the `GSO_*` types, possibly with [`GSO_ECN`].
    pub gso_type: u8,
    /// Length of the headers, as the sender saw it: a hint only (Linux
    /// fills it, DPDK may not). Never used for an offset here.
    pub hdr_len: u16,
    /// Payload bytes per segment (TSO: the MSS).
    pub gso_size: u16,
    /// Where the partial checksum's coverage starts.
    pub csum_start: u16,
    /// Where the checksum field sits, from `csum_start`.
    pub csum_offset: u16,
}

impl OffloadMeta {
    /// Reads the first 10 bytes of a virtio-net header.
    pub fn from_virtio_hdr(b: &[u8; 10]) -> OffloadMeta {
        let le = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        OffloadMeta {
            flags: b[0],
            gso_type: b[1],
            hdr_len: le(2),
            gso_size: le(4),
            csum_start: le(6),
            csum_offset: le(8),
        }
    }

    /// Writes the first 10 bytes of a virtio-net header.
    pub fn to_virtio_hdr(&self) -> [u8; 10] {
        let mut b = [0u8; 10];
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_le_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_le_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_le_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_le_bytes());
        b
    }

    /// The GSO type without the [`GSO_ECN`] bit.
    pub fn gso_kind(&self) -> u8 {
        self.gso_type & !GSO_ECN
    }

    /// True if the frame is to be segmented (a type other than
    /// [`GSO_NONE`], the ECN bit aside).
    pub fn is_gso(&self) -> bool {
        self.gso_kind() != GSO_NONE
    }

    /// True if the frame carries a partial checksum ([`F_NEEDS_CSUM`]).
    pub fn needs_csum(&self) -> bool {
        self.flags & F_NEEDS_CSUM != 0
    }

    /// True if there is nothing to do: no partial checksum and no GSO.
    /// [`F_DATA_VALID`] alone counts as empty.
    pub fn is_empty(&self) -> bool {
        !self.needs_csum() && !self.is_gso()
    }
}

/// What a port accepts: the offload feature bits its peer negotiated
/// (for a vhost-user port, the guest's `VIRTIO_NET_F_GUEST_*` bits,
/// section 5.1.3). Decides whether a frame may leave with its header as is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OffloadCaps {
    /// Partial checksums (`GUEST_CSUM`).
    pub csum: bool,
    /// TCP over IPv4 GSO frames (`GUEST_TSO4`).
    pub tso4: bool,
    /// TCP over IPv6 GSO frames (`GUEST_TSO6`).
    pub tso6: bool,
    /// TSO frames with the ECN bit (`GUEST_ECN`).
    pub ecn: bool,
    /// UDP segmentation frames (`GUEST_USO4`/`GUEST_USO6`).
    pub uso: bool,
}

/// What an output does with a frame before it leaves: the answer of
/// [`OffloadCaps::plan`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxPlan {
    /// Send the frame and its header unchanged.
    AsIs,
    /// Send the frame with an empty header (flags and GSO cleared): it
    /// carries nothing the output must act on, only a hint the output
    /// cannot take ([`F_DATA_VALID`] without `csum`).
    ClearHeader,
    /// Complete the partial checksum in software
    /// ([`crate::complete_checksum`]) and send with an empty header.
    CompleteChecksum,
    /// Segment in software ([`crate::segment`]). With `full_csum` each
    /// segment gets its checksum and an empty header; without, each keeps
    /// a partial checksum and leaves with [`crate::Layout::partial_csum_meta`].
    Segment {
        /// Compute the L4 checksum of each segment in full.
        full_csum: bool,
    },
}

impl OffloadCaps {
    /// Accepts nothing: every offload is done in software.
    pub const NONE: OffloadCaps = OffloadCaps {
        csum: false,
        tso4: false,
        tso6: false,
        ecn: false,
        uso: false,
    };

    /// Accepts everything this crate knows.
    pub const ALL: OffloadCaps = OffloadCaps {
        csum: true,
        tso4: true,
        tso6: true,
        ecn: true,
        uso: true,
    };

    /// True if a frame with header `m` may leave unchanged: a partial
    /// checksum needs `csum`; GSO needs the flag of its type (and `ecn`
    /// for the ECN bit). UFO and unknown GSO types are never accepted.
    /// [`F_DATA_VALID`] is a hint the spec lets only a `csum` peer see; a
    /// header that has nothing else is accepted by every port (see
    /// [`OffloadCaps::plan`] to clear it).
    pub fn accepts(&self, m: &OffloadMeta) -> bool {
        if m.needs_csum() && !self.csum {
            return false;
        }
        if m.gso_type & GSO_ECN != 0 && m.is_gso() && !self.ecn {
            return false;
        }
        match m.gso_kind() {
            GSO_NONE => true,
            GSO_TCPV4 => self.tso4,
            GSO_TCPV6 => self.tso6,
            GSO_UDP_L4 => self.uso,
            _ => false,
        }
    }

    /// What to do with a frame whose header `m` has been validated.
    pub fn plan(&self, m: &OffloadMeta) -> TxPlan {
        if m.is_gso() && !self.accepts(m) {
            TxPlan::Segment {
                full_csum: !self.csum,
            }
        } else if m.needs_csum() && !self.csum {
            TxPlan::CompleteChecksum
        } else if m.flags & F_DATA_VALID != 0 && !self.csum {
            TxPlan::ClearHeader
        } else {
            TxPlan::AsIs
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip_little_endian() {
        let bytes = [1, 0x81, 0x36, 0x00, 0xa8, 0x05, 0x22, 0x00, 0x10, 0x00];
        let m = OffloadMeta::from_virtio_hdr(&bytes);
        let expect = OffloadMeta {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4 | GSO_ECN,
            hdr_len: u16::from_le_bytes([0x36, 0]),
            gso_size: u16::from_le_bytes([0xa8, 0x05]),
            csum_start: u16::from_le_bytes([0x22, 0]),
            csum_offset: u16::from_le_bytes([0x10, 0]),
        };
        assert_eq!(m, expect);
        assert_eq!(m.to_virtio_hdr(), bytes);
        assert_eq!(OffloadMeta::default().to_virtio_hdr(), [0u8; 10]);
    }

    #[test]
    fn predicates() {
        struct Case {
            name: &'static str,
            flags: u8,
            gso_type: u8,
            gso: bool,
            csum: bool,
            empty: bool,
        }
        let cases = [
            Case {
                name: "zero",
                flags: 0,
                gso_type: GSO_NONE,
                gso: false,
                csum: false,
                empty: true,
            },
            Case {
                name: "data valid",
                flags: F_DATA_VALID,
                gso_type: 0,
                gso: false,
                csum: false,
                empty: true,
            },
            Case {
                name: "csum",
                flags: F_NEEDS_CSUM,
                gso_type: 0,
                gso: false,
                csum: true,
                empty: false,
            },
            Case {
                name: "ecn alone",
                flags: 0,
                gso_type: GSO_ECN,
                gso: false,
                csum: false,
                empty: true,
            },
            Case {
                name: "tso4",
                flags: F_NEEDS_CSUM,
                gso_type: GSO_TCPV4,
                gso: true,
                csum: true,
                empty: false,
            },
            Case {
                name: "tso6+ecn",
                flags: F_NEEDS_CSUM,
                gso_type: GSO_TCPV6 | GSO_ECN,
                gso: true,
                csum: true,
                empty: false,
            },
            Case {
                name: "uso no csum",
                flags: 0,
                gso_type: GSO_UDP_L4,
                gso: true,
                csum: false,
                empty: false,
            },
        ];
        for c in cases {
            let m = OffloadMeta {
                flags: c.flags,
                gso_type: c.gso_type,
                ..Default::default()
            };
            assert_eq!(m.is_gso(), c.gso, "{}", c.name);
            assert_eq!(m.needs_csum(), c.csum, "{}", c.name);
            assert_eq!(m.is_empty(), c.empty, "{}", c.name);
        }
    }

    #[test]
    fn caps_accept_and_plan() {
        let meta = |flags, gso_type| OffloadMeta {
            flags,
            gso_type,
            gso_size: 1448,
            ..Default::default()
        };
        let csum_only = OffloadCaps {
            csum: true,
            ..OffloadCaps::NONE
        };
        let tso4 = OffloadCaps {
            csum: true,
            tso4: true,
            ..OffloadCaps::NONE
        };
        type Case = (&'static str, OffloadCaps, OffloadMeta, bool, TxPlan);
        let cases: [Case; 12] = [
            (
                "empty, none",
                OffloadCaps::NONE,
                meta(0, 0),
                true,
                TxPlan::AsIs,
            ),
            (
                "data valid, none",
                OffloadCaps::NONE,
                meta(F_DATA_VALID, 0),
                true,
                TxPlan::ClearHeader,
            ),
            (
                "data valid, csum",
                csum_only,
                meta(F_DATA_VALID, 0),
                true,
                TxPlan::AsIs,
            ),
            (
                "csum, none",
                OffloadCaps::NONE,
                meta(F_NEEDS_CSUM, 0),
                false,
                TxPlan::CompleteChecksum,
            ),
            (
                "csum, csum",
                csum_only,
                meta(F_NEEDS_CSUM, 0),
                true,
                TxPlan::AsIs,
            ),
            (
                "tso4, none",
                OffloadCaps::NONE,
                meta(F_NEEDS_CSUM, GSO_TCPV4),
                false,
                TxPlan::Segment { full_csum: true },
            ),
            (
                "tso4, csum",
                csum_only,
                meta(F_NEEDS_CSUM, GSO_TCPV4),
                false,
                TxPlan::Segment { full_csum: false },
            ),
            (
                "tso4, tso4",
                tso4,
                meta(F_NEEDS_CSUM, GSO_TCPV4),
                true,
                TxPlan::AsIs,
            ),
            (
                "tso6, tso4",
                tso4,
                meta(F_NEEDS_CSUM, GSO_TCPV6),
                false,
                TxPlan::Segment { full_csum: false },
            ),
            (
                "tso4+ecn, tso4",
                tso4,
                meta(F_NEEDS_CSUM, GSO_TCPV4 | GSO_ECN),
                false,
                TxPlan::Segment { full_csum: false },
            ),
            (
                "ufo, all",
                OffloadCaps::ALL,
                meta(F_NEEDS_CSUM, GSO_UDP),
                false,
                TxPlan::Segment { full_csum: false },
            ),
            (
                "uso, all",
                OffloadCaps::ALL,
                meta(F_NEEDS_CSUM, GSO_UDP_L4),
                true,
                TxPlan::AsIs,
            ),
        ];
        for (name, caps, m, accepts, plan) in cases {
            assert_eq!(caps.accepts(&m), accepts, "{name}");
            assert_eq!(caps.plan(&m), plan, "{name}");
        }
        assert_eq!(OffloadCaps::default(), OffloadCaps::NONE);
    }
}
