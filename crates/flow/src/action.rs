//! Actions, in the common subset of `ovs-ofctl` syntax.

use crate::key::PortNo;

/// One action of a rule. An empty action list means `drop`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
    /// `set_field:VNI->tun_id` (or `set_tunnel:VNI`) — the VNI the
    /// following tunnel outputs send with. Each tunnel port carries one
    /// VNI, so this is checked when the rule is installed
    /// ([`crate::tunnel::resolve`]) and does nothing to the packet.
    SetTunnel(u32),
}

impl Action {
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
        )
    }
}
