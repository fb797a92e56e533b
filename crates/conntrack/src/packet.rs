//! What the datapath tells the tracker about one packet. The datapath parses
//! headers (through `nfv-wire`); the tracker never reads packet memory.

use crate::key::{ConnKey, Family};

/// TCP header flags, in their wire bit positions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpFlags(pub u8);

impl TcpFlags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
    pub const URG: u8 = 0x20;

    pub fn has(self, bits: u8) -> bool {
        self.0 & bits == bits
    }
}

/// The TCP fields window tracking needs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpSegment {
    pub flags: TcpFlags,
    pub seq: u32,
    pub ack: u32,
    /// The raw 16-bit window field (not yet scaled).
    pub window: u16,
    /// The window-scale option's shift count, if the segment carried one
    /// (only meaningful on SYN segments, RFC 7323 §2.2).
    pub wscale: Option<u8>,
    /// Bytes of TCP payload.
    pub payload_len: u32,
}

/// Layer-4 detail of a packet summary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum L4 {
    Tcp(TcpSegment),
    /// UDP and every protocol without a state machine of its own.
    Other,
    /// An ICMP/ICMPv6 message. `inner` is the tuple quoted by an error
    /// message, written as the quoted packet travelled (its own source and
    /// destination), with the outer packet's zone.
    Icmp {
        ty: u8,
        code: u8,
        inner: Option<ConnKey>,
    },
}

/// One packet as the tracker sees it: the key of its own direction and the
/// layer-4 detail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketSummary {
    pub key: ConnKey,
    pub l4: L4,
}

impl PacketSummary {
    pub fn tcp(key: ConnKey, seg: TcpSegment) -> Self {
        PacketSummary {
            key,
            l4: L4::Tcp(seg),
        }
    }

    pub fn other(key: ConnKey) -> Self {
        PacketSummary { key, l4: L4::Other }
    }

    /// An ICMP query or answer carrying identifier `id`.
    pub fn icmp_query(zone: u16, family: Family, src: u128, dst: u128, id: u16, ty: u8) -> Self {
        let key = ConnKey::icmp(zone, family, src, dst, id, ty, 0);
        PacketSummary {
            key,
            l4: L4::Icmp {
                ty,
                code: 0,
                inner: None,
            },
        }
    }

    /// An ICMP error quoting `inner`.
    pub fn icmp_error(
        zone: u16,
        family: Family,
        src: u128,
        dst: u128,
        ty: u8,
        code: u8,
        inner: ConnKey,
    ) -> Self {
        let key = ConnKey::icmp(zone, family, src, dst, 0, ty, code);
        PacketSummary {
            key,
            l4: L4::Icmp {
                ty,
                code,
                inner: Some(inner),
            },
        }
    }
}
