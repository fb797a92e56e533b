//! What the tracker answers for a packet: the `ct_state` bits and the
//! connection fields that `ct_mark`, `ct_label` and `ct_nw_src/…` match on.

use crate::key::ConnKey;

/// `ct_state` bits, as OpenFlow's `ct_state` match names them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CtState(pub u8);

impl CtState {
    pub const NEW: u8 = 0x01;
    pub const ESTABLISHED: u8 = 0x02;
    pub const RELATED: u8 = 0x04;
    pub const REPLY: u8 = 0x08;
    pub const INVALID: u8 = 0x10;
    pub const TRACKED: u8 = 0x20;

    pub fn has(self, bits: u8) -> bool {
        self.0 & bits == bits
    }
}

/// A handle on a connection's slot. The generation makes a handle kept
/// across an expiry or a reopen harmlessly stale instead of pointing at a
/// stranger's connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConnId {
    pub(crate) index: u32,
    pub(crate) generation: u32,
}

/// The tracker's answer for one packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    pub state: CtState,
    pub mark: u32,
    pub label: u128,
    /// The connection's original-direction tuple (`ct_nw_src`, `ct_tp_dst`,
    /// …); `None` when the packet belongs to no connection.
    pub orig: Option<ConnKey>,
    /// The connection the packet belongs to (the parent, for related ICMP
    /// errors).
    pub conn: Option<ConnId>,
    /// A closed TCP connection that a new SYN on the same tuple will replace
    /// once committed.
    pub(crate) replaces: Option<ConnId>,
}

impl Verdict {
    pub(crate) fn bits(bits: u8) -> Self {
        Verdict {
            state: CtState(CtState::TRACKED | bits),
            ..Verdict::default()
        }
    }
}
