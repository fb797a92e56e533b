//! Actions, in the common subset of `ovs-ofctl` syntax.

pub use crate::ct::{CtAction, Nat, NatAddrs, NatRange, PortPick};
use crate::key::PortNo;

/// Largest group id (`OFPG_MAX`) a `group:N` action may name; the ids above
/// are reserved.
pub const MAX_GROUP_ID: u32 = 0xffff_ff00;

/// Largest meter id (`OFPM_MAX`) a `meter:N` action may name.
pub const MAX_METER_ID: u32 = 0xffff_0000;

/// One action of a rule. An empty action list means `drop`.
///
/// Not `Copy`: `ct(...)` holds its arguments in a box, which keeps every
/// action three words ([`ACTION_SIZE`]) where the arguments (a NAT range,
/// a 128-bit label and its mask) would make each several lines long.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// `output:N` — send to port N (skipped, and counted, when N is the
    /// packet's own in_port, as OpenFlow requires).
    Output(PortNo),
    /// `mod_dl_src:MAC`
    SetDlSrc([u8; 6]),
    /// `mod_dl_dst:MAC`
    SetDlDst([u8; 6]),
    /// `mod_vlan_vid:VID` — set the VID; push an 802.1Q tag (PCP 0) first
    /// when the frame has none, as OVS does.
    SetVlanVid(u16),
    /// `push_vlan:ETHERTYPE` — push a new outer tag (TPID 0x8100 or 0x88a8)
    /// with VID 0 and PCP 0.
    PushVlan(u16),
    /// `strip_vlan` — pop the outer 802.1Q tag, if any.
    StripVlan,
    /// `normal` — MAC-learning L2 switching.
    Normal,
    /// `in_port` (or `output:in_port`) — back out of the port the packet
    /// came in on, the one output `Output` never takes.
    InPort,
    /// `flood` — to every port but the in_port (as `normal` floods an
    /// unknown destination).
    Flood,
    /// `all` — to every port but the in_port. The same set as `flood`
    /// here: no port is configured out of flooding.
    All,
    /// `group:N` — hand the packet to group N (`crate::group`), which
    /// runs one, several or none of its buckets' action lists.
    Group(u32),
    /// `set_field:VNI->tun_id` (or `set_tunnel:VNI`) — the VNI the
    /// following tunnel outputs send with. Each tunnel port carries one
    /// VNI, so this is checked when the rule is installed
    /// ([`crate::tunnel::resolve`]) and does nothing to the packet.
    SetTunnel(u32),
    /// `mod_nw_src:A.B.C.D` — IPv4 source address (host order here), the
    /// IPv4 and TCP/UDP checksums updated incrementally. Other packets
    /// pass unchanged.
    SetNwSrc(u32),
    /// `mod_nw_dst:A.B.C.D` — as `SetNwSrc`, the destination.
    SetNwDst(u32),
    /// `set_field:ADDR->ipv6_src` — IPv6 source address (bytes in network
    /// order), the TCP, UDP or ICMPv6 checksum updated incrementally
    /// (RFC 1624 over the pseudo-header). Other packets pass unchanged.
    SetIpv6Src([u8; 16]),
    /// `set_field:ADDR->ipv6_dst` — as `SetIpv6Src`, the destination.
    SetIpv6Dst([u8; 16]),
    /// `set_field:LABEL->ipv6_label` — the IPv6 flow label (20 bits).
    SetIpv6Label(u32),
    /// `mod_tp_src:PORT` — TCP or UDP source port of an IPv4 or IPv6 packet
    /// (not of a later fragment, which has no L4 header), checksum updated.
    SetTpSrc(u16),
    /// `mod_tp_dst:PORT` — as `SetTpSrc`, the destination port.
    SetTpDst(u16),
    /// `mod_nw_tos:TOS` — the DSCP bits of the IPv4 TOS byte or the IPv6
    /// traffic class (`TOS` is the byte value, a multiple of 4, as OVS
    /// takes it); ECN kept.
    SetNwTos(u8),
    /// `mod_nw_ecn:ECN` — the two ECN bits of the TOS / traffic class.
    SetNwEcn(u8),
    /// `mod_nw_ttl:TTL` — the IPv4 TTL or IPv6 hop limit.
    SetNwTtl(u8),
    /// `dec_ttl` — decrements the IPv4 TTL or IPv6 hop limit; a packet whose TTL is 0 or 1
    /// is dropped (counted as `ttl_expired`) instead, as a router would
    /// (OVS sends it to the controller; nfvswitch has none yet).
    DecTtl,
    /// `goto_table:N` — look the packet (as the actions before changed it)
    /// up in table N, a later table; the rule's last action.
    GotoTable(u8),
    /// `resubmit(,N)` — look the packet up in table N (a later one) and
    /// run that rule's actions here, then go on with the ones after.
    Resubmit(u8),
    /// `write_metadata:VALUE[/MASK]` — sets the masked bits of the
    /// `metadata` field the later tables match.
    WriteMetadata { value: u64, mask: u64 },
    /// `meter:N` — the packet goes on only if meter N's rate allows it;
    /// else it is dropped (`meter_drop`) and counted on the meter's band.
    Meter(u32),
    /// `controller[:MAX_LEN]` (`output:CONTROLLER`) — a copy of the packet,
    /// its first `MAX_LEN` bytes (65535: all of it), goes to the OpenFlow
    /// controllers as a `PACKET_IN`, rate-limited and never waiting (see
    /// `nfv_datapath::controller`).
    Controller(u16),
    /// `ct(...)` — through the connection tracker ([`crate::ct`]). Parsed,
    /// checked and printed; the datapath does not run the tracker yet, so
    /// a rule holding it is refused when installed
    /// ([`crate::tunnel::resolve`]).
    Ct(Box<CtAction>),
    /// `ct_clear` — the packet's `ct_*` fields zeroed (untracked), as
    /// [`crate::key::FlowKey::clear_ct`] does to the key.
    CtClear,
}

/// The size of an [`Action`]: a tag and two words.
pub const ACTION_SIZE: usize = 24;
const _: () = assert!(core::mem::size_of::<Action>() == ACTION_SIZE);

/// `controller` without a length: the whole packet (`OFPCML_NO_BUFFER`).
pub const CONTROLLER_WHOLE: u16 = 0xffff;

impl Action {
    /// True for the actions that continue the pipeline ([`crate::pipeline`]):
    /// a rule with one is never run as it is, but resolved into the
    /// actions of every table the packet passes.
    pub fn is_pipeline(&self) -> bool {
        matches!(
            self,
            Action::GotoTable(_) | Action::Resubmit(_) | Action::WriteMetadata { .. }
        )
    }

    /// True for actions that send the packet somewhere: the interpreter
    /// applies nothing after the last of them. `ct(table=T)` sends the
    /// tracked packet back to table T.
    pub fn is_output(&self) -> bool {
        matches!(
            self,
            Action::Output(_)
                | Action::Normal
                | Action::InPort
                | Action::Flood
                | Action::All
                | Action::Group(_)
                | Action::Controller(_)
        ) || self.recirculates()
    }

    /// `ct(table=T)`: the tracked packet is looked up again from table T
    /// (recirculated).
    pub fn recirculates(&self) -> bool {
        matches!(self, Action::Ct(c) if c.table.is_some())
    }

    /// True for actions that change packet bytes (`SetTunnel` does not:
    /// the tunnel port writes its own VNI).
    pub fn modifies_packet(&self) -> bool {
        matches!(
            self,
            Action::SetDlSrc(_)
                | Action::SetDlDst(_)
                | Action::SetVlanVid(_)
                | Action::PushVlan(_)
                | Action::StripVlan
                | Action::SetNwSrc(_)
                | Action::SetNwDst(_)
                | Action::SetIpv6Src(_)
                | Action::SetIpv6Dst(_)
                | Action::SetIpv6Label(_)
                | Action::SetTpSrc(_)
                | Action::SetTpDst(_)
                | Action::SetNwTos(_)
                | Action::SetNwEcn(_)
                | Action::SetNwTtl(_)
                | Action::DecTtl
        )
    }
}
