//! ICMPv4 (RFC 792): field offsets only. The switch reads type and code
//! into a flow key (OVS keeps them in `tp_src`/`tp_dst`); nothing in
//! nfvswitch builds or checks ICMP messages yet, so there is no view or
//! repr until something does.

/// Field offsets of the ICMPv4 header.
pub mod field {
    use crate::Field;
    /// Message type.
    pub const TYPE: usize = 0;
    /// Message code.
    pub const CODE: usize = 1;
    /// Checksum over the whole message.
    pub const CHECKSUM: Field = 2..4;
    /// Rest of the header (identifier/sequence, pointer, unused...).
    pub const REST: Field = 4..8;
}

/// Length of the ICMPv4 header.
pub const HEADER_LEN: usize = field::REST.end;
