//! What the tracker answers for a packet: the `ct_state` bits and the
//! connection fields that `ct_mark`, `ct_label` and `ct_nw_src/…` match on.

use crate::key::ConnKey;
use crate::nat::{NatKind, NatRewrite};

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
    /// `+snat`: the packet's source was translated (set by the datapath
    /// when it applies a [`NatRewrite`]; see [`Verdict::state_with_nat`]).
    pub const SRC_NAT: u8 = 0x40;
    /// `+dnat`: the packet's destination was translated.
    pub const DST_NAT: u8 = 0x80;

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
    /// What to rewrite in this packet when the `ct` action includes `nat`
    /// (a bare `nat`, or `nat(…)` on a connection already committed): set
    /// for every packet of a translated connection, in either direction,
    /// and for ICMP errors related to one (see [`NatRewrite`] for the
    /// embedded header). `None` for connections without translation.
    pub nat: Option<NatRewrite>,
    /// A closed TCP connection that a new SYN on the same tuple will replace
    /// once committed.
    pub(crate) replaces: Option<ConnId>,
}

impl Verdict {
    /// The `ct_state` the packet reports once the datapath has applied
    /// [`Verdict::nat`]: `state` plus `+snat` and/or `+dnat` for the fields
    /// rewritten. Without a `nat` in the `ct` action the packet is not
    /// rewritten and reports `state` alone.
    pub fn state_with_nat(&self) -> CtState {
        CtState(self.state.0 | self.nat.map_or(0, |r| r.state_bits()))
    }

    pub(crate) fn bits(bits: u8) -> Self {
        Verdict {
            state: CtState(CtState::TRACKED | bits),
            ..Verdict::default()
        }
    }
}

/// Here rather than in `nat`, so that `nat` needs nothing of this module.
impl NatRewrite {
    /// The `ct_state` bit (`+snat` 0x40 or `+dnat` 0x80) a packet gets when
    /// this rewrite is applied to it.
    pub fn state_bits(&self) -> u8 {
        match self.end {
            NatKind::Src => CtState::SRC_NAT,
            NatKind::Dst => CtState::DST_NAT,
        }
    }
}
