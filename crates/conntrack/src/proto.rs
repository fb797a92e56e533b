//! Per-protocol connection state: TCP's window tracker, and the
//! pseudo-connections of UDP (and every other protocol) and ICMP queries.

use crate::packet::{L4, PacketSummary};
use crate::tcp::{self, TcpConn, TcpUpdate};
use crate::timeouts::TimeoutClass;

/// UDP and other protocols, as OVS's `lib/conntrack-other.c` counts them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OtherState {
    /// One packet seen.
    First,
    /// More packets, all in the original direction.
    Multiple,
    /// Packets seen both ways.
    Bidir,
}

impl OtherState {
    #[inline(always)]
    fn timeout_class(self) -> TimeoutClass {
        match self {
            OtherState::First => TimeoutClass::UdpFirst,
            OtherState::Multiple => TimeoutClass::UdpSingle,
            OtherState::Bidir => TimeoutClass::UdpMultiple,
        }
    }
}

/// ICMP echo (and other query) pseudo-connections, keyed by identifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IcmpState {
    Request,
    Replied,
}

impl IcmpState {
    #[inline(always)]
    fn timeout_class(self) -> TimeoutClass {
        match self {
            IcmpState::Request => TimeoutClass::IcmpFirst,
            IcmpState::Replied => TimeoutClass::IcmpReply,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProtoState {
    Tcp(TcpConn),
    Other(OtherState),
    Icmp(IcmpState),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Update {
    Accept(TimeoutClass),
    Reject,
    Reopen,
}

impl ProtoState {
    /// The state a first packet starts, or `None` if it may not start one.
    pub(crate) fn open(pkt: &PacketSummary, tcp_pickup: bool) -> Option<ProtoState> {
        match pkt.l4 {
            L4::Tcp(seg) => TcpConn::open(&seg, tcp_pickup).map(ProtoState::Tcp),
            L4::Other => Some(ProtoState::Other(OtherState::First)),
            // Only queries reach here; of those, only requests open.
            L4::Icmp { ty, .. } => {
                let kind = crate::key::icmp_kind(pkt.key.family, ty);
                (kind == crate::key::IcmpKind::Request)
                    .then_some(ProtoState::Icmp(IcmpState::Request))
            }
        }
    }

    pub(crate) fn valid_new(pkt: &PacketSummary, tcp_pickup: bool) -> bool {
        match pkt.l4 {
            L4::Tcp(seg) => tcp::valid_new(&seg, tcp_pickup),
            _ => Self::open(pkt, tcp_pickup).is_some(),
        }
    }

    pub fn timeout_class(&self) -> TimeoutClass {
        match self {
            ProtoState::Tcp(conn) => conn.timeout_class(),
            ProtoState::Other(state) => state.timeout_class(),
            ProtoState::Icmp(state) => state.timeout_class(),
        }
    }

    /// Runs a later packet of the connection through its state machine.
    #[inline(always)]
    pub(crate) fn update(&mut self, l4: &L4, reply: bool) -> Update {
        match (self, l4) {
            (ProtoState::Tcp(conn), L4::Tcp(seg)) => match conn.update(seg, reply) {
                TcpUpdate::Accept => Update::Accept(conn.timeout_class()),
                TcpUpdate::Reject => Update::Reject,
                TcpUpdate::Reopen => Update::Reopen,
            },
            // The class from the state alone, inline: through
            // `ProtoState::timeout_class` (a call) it cost an established
            // UDP packet ~12 instructions.
            (ProtoState::Other(state), L4::Other) => {
                *state = match (*state, reply) {
                    (_, true) | (OtherState::Bidir, false) => OtherState::Bidir,
                    (OtherState::First | OtherState::Multiple, false) => OtherState::Multiple,
                };
                Update::Accept(state.timeout_class())
            }
            (ProtoState::Icmp(state), L4::Icmp { .. }) => {
                if reply {
                    *state = IcmpState::Replied;
                }
                Update::Accept(state.timeout_class())
            }
            // The key's protocol and the layer-4 detail disagree: the
            // datapath's mistake, never a reason to touch the connection.
            _ => Update::Reject,
        }
    }
}
