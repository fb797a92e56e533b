//! Match fields in rule text: their names (as `ovs-ofctl` spells them),
//! the protocol keywords, how each value parses, and the OpenFlow
//! prerequisites each field needs. [`MatchFields`] collects the fields of
//! one rule or filter and builds its [`Match`].
//!
//! Several names write one key field, as in OVS: `icmp_type`/`icmpv6_type`
//! and `tp_src`; `arp_op` and `nw_proto`; `arp_spa`/`arp_tpa` and
//! `nw_src`/`nw_dst`; `nd_sll`/`nd_tll` and `arp_sha`/`arp_tha`;
//! `ip_dscp` and `nw_tos`. Each name keeps its own prerequisite.
//!
//! The connection tracker's fields (`ct_state`, `ct_zone`, `ct_mark`,
//! `ct_label` and the original-direction tuple `ct_nw_src`, `ct_nw_dst`,
//! `ct_ipv6_src`, `ct_ipv6_dst`, `ct_nw_proto`, `ct_tp_src`, `ct_tp_dst`)
//! are spelled, masked and checked as `ovs-fields`(7) has them: `ct_zone`
//! and `ct_nw_proto` match exactly, the others take masks; the tuple
//! fields need a match on a valid connection ([`Need::Ct`]) and nothing
//! else — OVS asks for no `dl_type` beside them, as a valid connection
//! implies IPv4 or IPv6.

use crate::key::ct_state::{DNAT, EST, INV, NEW, REL, RPL, SNAT, TRK};
use crate::key::{FRAG_ANY, FRAG_LATER, FlowKey, VLAN_PRESENT, VLAN_VID_MASK, mac_from_u64};
use crate::rule::Match;
use crate::values::{
    E, bad, invalid, ipv4_masked, ipv6_masked, mac_masked, port, uint, uint_in, uint_masked,
    uint128_masked,
};
use nfv_wire::{EtherType, IpProtocol};

// The key stores these as plain numbers; named here for use in patterns.
const ETHERTYPE_IPV4: u16 = EtherType::IPV4.0;
const ETHERTYPE_IPV6: u16 = EtherType::IPV6.0;
const ETHERTYPE_ARP: u16 = EtherType::ARP.0;
const IPPROTO_ICMP: u8 = IpProtocol::ICMP.0;
const IPPROTO_TCP: u8 = IpProtocol::TCP.0;
const IPPROTO_UDP: u8 = IpProtocol::UDP.0;
const IPPROTO_SCTP: u8 = IpProtocol::SCTP.0;
const IPPROTO_ICMPV6: u8 = IpProtocol::ICMPV6.0;
const ND_SOLICIT: u16 = nfv_wire::icmpv6::NEIGHBOR_SOLICIT as u16;
const ND_ADVERT: u16 = nfv_wire::icmpv6::NEIGHBOR_ADVERT as u16;

/// VLAN PCP bits of `vlan_tci`.
const VLAN_PCP_MASK: u16 = 0xe000;
/// The DSCP bits of `nw_tos` (`nw_tos=`, `ip_dscp=`) and the ECN bits
/// (`nw_ecn=`, `ip_ecn=`).
pub(crate) const DSCP_MASK: u8 = 0xfc;
pub(crate) const ECN_MASK: u8 = 0x03;
/// The TCP flag bits a rule may match (OVS's `tcp_flags`: twelve bits).
pub(crate) const TCP_FLAGS_BITS: u16 = 0x0fff;

/// Protocol shorthands: keyword, dl_type, nw_proto. The formatter prints
/// the first entry that fits, so specific ones come before `ip`/`ipv6`.
pub(crate) const PROTOCOLS: &[(&str, u16, Option<u8>)] = &[
    ("icmp", ETHERTYPE_IPV4, Some(IPPROTO_ICMP)),
    ("tcp", ETHERTYPE_IPV4, Some(IPPROTO_TCP)),
    ("udp", ETHERTYPE_IPV4, Some(IPPROTO_UDP)),
    ("sctp", ETHERTYPE_IPV4, Some(IPPROTO_SCTP)),
    ("ip", ETHERTYPE_IPV4, None),
    ("icmp6", ETHERTYPE_IPV6, Some(IPPROTO_ICMPV6)),
    ("tcp6", ETHERTYPE_IPV6, Some(IPPROTO_TCP)),
    ("udp6", ETHERTYPE_IPV6, Some(IPPROTO_UDP)),
    ("sctp6", ETHERTYPE_IPV6, Some(IPPROTO_SCTP)),
    ("ipv6", ETHERTYPE_IPV6, None),
    ("arp", ETHERTYPE_ARP, None),
];

/// TCP flag names for `tcp_flags=+syn-ack` (OVS's spelling), by bit.
pub(crate) const TCP_FLAG_NAMES: &[(&str, u16)] = &[
    ("fin", 0x001),
    ("syn", 0x002),
    ("rst", 0x004),
    ("psh", 0x008),
    ("ack", 0x010),
    ("urg", 0x020),
    ("ece", 0x040),
    ("cwr", 0x080),
    ("ns", 0x100),
];

/// `ct_state` flag names (OVS's spelling), by bit: every bit has one.
pub(crate) const CT_STATE_NAMES: &[(&str, u16)] = &[
    ("new", NEW as u16),
    ("est", EST as u16),
    ("rel", REL as u16),
    ("rpl", RPL as u16),
    ("inv", INV as u16),
    ("trk", TRK as u16),
    ("snat", SNAT as u16),
    ("dnat", DNAT as u16),
];

/// A key field (or part of one) that rule text sets. Two names that set
/// one slot conflict unless they give the same value and mask.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Slot {
    InPort,
    Metadata,
    DlSrc,
    DlDst,
    DlType,
    DlVlan,
    DlVlanPcp,
    VlanTci,
    NwSrc,
    NwDst,
    Ipv6Src,
    Ipv6Dst,
    Ipv6Label,
    NwProto,
    NwDscp,
    NwEcn,
    NwTtl,
    IpFrag,
    TpSrc,
    TpDst,
    TcpFlags,
    NdTarget,
    ArpSha,
    ArpTha,
    CtState,
    CtZone,
    CtMark,
    CtLabel,
    CtNwSrc,
    CtNwDst,
    CtIpv6Src,
    CtIpv6Dst,
    CtNwProto,
    CtTpSrc,
    CtTpDst,
}
const N_SLOTS: usize = 35;

/// What a field needs earlier in the match (OpenFlow prerequisites, as
/// `ovs-ofctl` checks them).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Need {
    Nothing,
    /// `dl_type` IPv4 or ARP (`nw_src`, `nw_dst`).
    Ipv4OrArp,
    /// `dl_type` IPv4 (`ip_src`, `ip_dst`: OpenFlow 1.2's IPv4-only names).
    Ipv4,
    /// `dl_type` IPv4, IPv6 or ARP (`nw_proto`).
    IpOrArp,
    /// `dl_type` IPv4 or IPv6.
    Ip,
    Ipv6,
    Arp,
    /// IPv4 or IPv6 with `nw_proto` TCP, UDP, SCTP, ICMP or ICMPv6.
    L4,
    /// ICMP or ICMPv6 (`icmp_type`, `icmp_code`).
    AnyIcmp,
    Icmpv6,
    Tcp,
    Udp,
    Sctp,
    /// ICMPv6 with `icmp_type` 135 or 136.
    Nd,
    NdSolicit,
    NdAdvert,
    /// A packet of a valid tracked connection (OVS's `CT` prerequisite of
    /// the original-direction tuple fields): `ct_state` matching one of
    /// `+new`, `+est`, `+rel`, `+rpl`, `+snat`, `+dnat`, or `+trk` with
    /// `-inv`.
    Ct,
}

impl Need {
    fn reason(self) -> &'static str {
        match self {
            Need::Nothing => "",
            Need::Ipv4OrArp => "needs ip or arp first (dl_type=0x0800 or 0x0806)",
            Need::Ipv4 => "needs ip first (dl_type=0x0800)",
            Need::IpOrArp => "needs ip or arp first (or ipv6: dl_type=0x0800, 0x0806 or 0x86dd)",
            Need::Ip => "needs ip or ipv6 first (dl_type=0x0800 or 0x86dd)",
            Need::Ipv6 => "needs ipv6 first (dl_type=0x86dd)",
            Need::Arp => "needs arp first (dl_type=0x0806)",
            Need::L4 => {
                "needs tcp, udp, sctp or icmp first (or tcp6, udp6, sctp6, icmp6: nw_proto=6, \
                 17, 132, 1 or 58)"
            }
            Need::AnyIcmp => "needs icmp or icmp6 first (nw_proto=1 or 58)",
            Need::Icmpv6 => "needs icmp6 first (ipv6 with nw_proto=58)",
            Need::Tcp => "needs tcp or tcp6 first (nw_proto=6)",
            Need::Udp => "needs udp or udp6 first (nw_proto=17)",
            Need::Sctp => "needs sctp or sctp6 first (nw_proto=132)",
            Need::Nd => {
                "needs icmp6 with icmp_type=135 or 136 first, and icmp_code 0 (neighbor \
                 discovery)"
            }
            Need::NdSolicit => {
                "needs icmp6 with icmp_type=135 first, and icmp_code 0 (a neighbor solicitation)"
            }
            Need::NdAdvert => {
                "needs icmp6 with icmp_type=136 first, and icmp_code 0 (a neighbor advertisement)"
            }
            Need::Ct => {
                "needs a tracked connection first (ct_state with +new, +est, +rel, +rpl, +snat \
                 or +dnat, or +trk-inv)"
            }
        }
    }

    /// True when `m` (its exact `dl_type`, `nw_proto` and `tp_src`) meets it.
    fn met(self, m: &Match) -> bool {
        let exact = |mask: u64, full: u64, v: u64| (mask == full).then_some(v);
        let dl_type = exact(m.mask.dl_type().into(), 0xffff, m.key.dl_type().into());
        let proto = exact(m.mask.nw_proto().into(), 0xff, m.key.nw_proto().into());
        let ip = matches!(dl_type, Some(0x0800 | 0x86dd));
        let v4 = dl_type == Some(ETHERTYPE_IPV4.into());
        let v6 = dl_type == Some(ETHERTYPE_IPV6.into());
        let icmp = (v4 && proto == Some(IPPROTO_ICMP.into()))
            || (v6 && proto == Some(IPPROTO_ICMPV6.into()));
        let icmp6 = v6 && proto == Some(IPPROTO_ICMPV6.into());
        let nd_type = exact(m.mask.tp_src().into(), 0xffff, m.key.tp_src().into());
        // Neighbor discovery has code 0: packets with another code carry
        // no ND fields (flow extraction, as OVS's, skips them), and OVS
        // drops ND fields from a match that pins another code.
        let nd = icmp6 && m.key.tp_dst() == 0;
        match self {
            Need::Nothing => true,
            Need::Ipv4OrArp => matches!(dl_type, Some(0x0800 | 0x0806)),
            Need::Ipv4 => v4,
            Need::IpOrArp => matches!(dl_type, Some(0x0800 | 0x0806 | 0x86dd)),
            Need::Ip => ip,
            Need::Ipv6 => v6,
            Need::Arp => dl_type == Some(ETHERTYPE_ARP.into()),
            Need::L4 => ip && matches!(proto, Some(6 | 17 | 132)) || icmp,
            Need::AnyIcmp => icmp,
            Need::Icmpv6 => icmp6,
            Need::Tcp => ip && proto == Some(IPPROTO_TCP.into()),
            Need::Udp => ip && proto == Some(IPPROTO_UDP.into()),
            Need::Sctp => ip && proto == Some(IPPROTO_SCTP.into()),
            Need::Nd => nd && matches!(nd_type, Some(135 | 136)),
            Need::NdSolicit => nd && nd_type == Some(ND_SOLICIT.into()),
            Need::NdAdvert => nd && nd_type == Some(ND_ADVERT.into()),
            Need::Ct => {
                // The key is masked: a bit set in it is matched as set.
                let (v, mk) = (m.key.ct_state(), m.mask.ct_state());
                v & (NEW | EST | REL | RPL | SNAT | DNAT) != 0
                    || (v & TRK != 0 && mk & INV != 0 && v & INV == 0)
            }
        }
    }
}

/// Every field name: the slot it sets and what it needs.
const FIELDS: &[(&str, Slot, Need)] = &[
    ("in_port", Slot::InPort, Need::Nothing),
    ("metadata", Slot::Metadata, Need::Nothing),
    ("dl_src", Slot::DlSrc, Need::Nothing),
    ("dl_dst", Slot::DlDst, Need::Nothing),
    ("dl_type", Slot::DlType, Need::Nothing),
    ("dl_vlan", Slot::DlVlan, Need::Nothing),
    ("dl_vlan_pcp", Slot::DlVlanPcp, Need::Nothing),
    ("vlan_tci", Slot::VlanTci, Need::Nothing),
    ("nw_src", Slot::NwSrc, Need::Ipv4OrArp),
    ("nw_dst", Slot::NwDst, Need::Ipv4OrArp),
    ("ipv6_src", Slot::Ipv6Src, Need::Ipv6),
    ("ipv6_dst", Slot::Ipv6Dst, Need::Ipv6),
    ("ipv6_label", Slot::Ipv6Label, Need::Ipv6),
    ("nw_proto", Slot::NwProto, Need::IpOrArp),
    ("nw_tos", Slot::NwDscp, Need::Ip),
    ("ip_dscp", Slot::NwDscp, Need::Ip),
    ("nw_ecn", Slot::NwEcn, Need::Ip),
    ("ip_ecn", Slot::NwEcn, Need::Ip),
    ("nw_ttl", Slot::NwTtl, Need::Ip),
    ("ip_frag", Slot::IpFrag, Need::Ip),
    ("nw_frag", Slot::IpFrag, Need::Ip),
    ("tp_src", Slot::TpSrc, Need::L4),
    ("tp_dst", Slot::TpDst, Need::L4),
    ("icmp_type", Slot::TpSrc, Need::AnyIcmp),
    ("icmp_code", Slot::TpDst, Need::AnyIcmp),
    ("icmpv6_type", Slot::TpSrc, Need::Icmpv6),
    ("icmpv6_code", Slot::TpDst, Need::Icmpv6),
    ("tcp_flags", Slot::TcpFlags, Need::Tcp),
    ("nd_target", Slot::NdTarget, Need::Nd),
    ("nd_sll", Slot::ArpSha, Need::NdSolicit),
    ("nd_tll", Slot::ArpTha, Need::NdAdvert),
    ("arp_op", Slot::NwProto, Need::Arp),
    ("arp_spa", Slot::NwSrc, Need::Arp),
    ("arp_tpa", Slot::NwDst, Need::Arp),
    ("arp_sha", Slot::ArpSha, Need::Arp),
    ("arp_tha", Slot::ArpTha, Need::Arp),
    // OpenFlow 1.2+ (OXM) spellings, as ovs-ofctl takes them; the
    // protocol-specific ones need their protocol, as in OVS.
    ("eth_src", Slot::DlSrc, Need::Nothing),
    ("eth_dst", Slot::DlDst, Need::Nothing),
    ("eth_type", Slot::DlType, Need::Nothing),
    ("ip_src", Slot::NwSrc, Need::Ipv4),
    ("ip_dst", Slot::NwDst, Need::Ipv4),
    ("ip_proto", Slot::NwProto, Need::Ip),
    ("tcp_src", Slot::TpSrc, Need::Tcp),
    ("tcp_dst", Slot::TpDst, Need::Tcp),
    ("udp_src", Slot::TpSrc, Need::Udp),
    ("udp_dst", Slot::TpDst, Need::Udp),
    ("sctp_src", Slot::TpSrc, Need::Sctp),
    ("sctp_dst", Slot::TpDst, Need::Sctp),
    // The connection tracker's (ovs-fields(7), "Connection Tracking Fields").
    ("ct_state", Slot::CtState, Need::Nothing),
    ("ct_zone", Slot::CtZone, Need::Nothing),
    ("ct_mark", Slot::CtMark, Need::Nothing),
    ("ct_label", Slot::CtLabel, Need::Nothing),
    ("ct_nw_src", Slot::CtNwSrc, Need::Ct),
    ("ct_nw_dst", Slot::CtNwDst, Need::Ct),
    ("ct_ipv6_src", Slot::CtIpv6Src, Need::Ct),
    ("ct_ipv6_dst", Slot::CtIpv6Dst, Need::Ct),
    ("ct_nw_proto", Slot::CtNwProto, Need::Ct),
    ("ct_tp_src", Slot::CtTpSrc, Need::Ct),
    ("ct_tp_dst", Slot::CtTpDst, Need::Ct),
];

/// True for a match field's name (for "missing value" messages).
pub(crate) fn is_field(name: &str) -> bool {
    FIELDS.iter().any(|f| f.0 == name)
}

/// One slot's value and mask, and the name that set it (for duplicate,
/// conflict and prerequisite messages).
#[derive(Clone, Copy, Debug)]
struct Setting {
    origin: &'static str,
    need: Need,
    value: u128,
    mask: u128,
}

/// The match fields of one rule or filter, as read so far.
pub(crate) struct MatchFields {
    slots: [Option<Setting>; N_SLOTS],
}

impl Default for MatchFields {
    fn default() -> Self {
        MatchFields {
            slots: [None; N_SLOTS],
        }
    }
}

impl MatchFields {
    fn set(
        &mut self,
        slot: Slot,
        origin: &'static str,
        need: Need,
        v: u128,
        m: u128,
    ) -> Result<(), E> {
        let new = Setting {
            origin,
            need,
            value: v & m,
            mask: m,
        };
        match self.slots[slot as usize] {
            None => {
                self.slots[slot as usize] = Some(new);
                Ok(())
            }
            Some(old) if old.origin == origin => Err(E::DuplicateField(origin.into())),
            // `tcp,nw_proto=6` or `ip,tcp`: the same value twice is fine.
            Some(old) if old.value == new.value && old.mask == new.mask => Ok(()),
            Some(old) => Err(invalid(
                origin,
                format!("conflicts with earlier \"{}\"", old.origin),
            )),
        }
    }

    fn get(&self, slot: Slot) -> Option<Setting> {
        self.slots[slot as usize]
    }

    /// A protocol keyword (`tcp`, `ipv6`, ...): false when `word` is none.
    pub(crate) fn keyword(&mut self, word: &str) -> Result<bool, E> {
        let Some(&(name, dl_type, proto)) = PROTOCOLS.iter().find(|p| p.0 == word) else {
            return Ok(false);
        };
        self.set(Slot::DlType, name, Need::Nothing, dl_type.into(), 0xffff)?;
        if let Some(p) = proto {
            self.set(Slot::NwProto, name, Need::Nothing, p.into(), 0xff)?;
        }
        Ok(true)
    }

    /// A packet field `name=value` ([`FIELDS`]).
    pub(crate) fn field(&mut self, name: &str, value: &str) -> Result<(), E> {
        let Some(&(origin, slot, need)) = FIELDS.iter().find(|f| f.0 == name) else {
            if PROTOCOLS.iter().any(|p| p.0 == name) {
                return Err(invalid(name, "is a keyword and takes no value"));
            }
            return Err(E::UnknownField(name.into()));
        };
        let (v, m) = slot_value(slot, name, value)?;
        self.set(slot, origin, need, v, m)
    }

    /// Builds the (pre-masked) match and checks VLAN consistency and
    /// each field's prerequisites.
    pub(crate) fn finish(&self) -> Result<Match, E> {
        let mut key = FlowKey::ZERO;
        let mut mask = FlowKey::ZERO;
        let val = |s: Slot| self.get(s).map_or((0, 0), |x| (x.value, x.mask));
        macro_rules! put {
            ($slot:expr, $set:ident, $ty:ty) => {{
                let (v, m) = val($slot);
                key.$set(v as $ty);
                mask.$set(m as $ty);
            }};
        }
        put!(Slot::InPort, set_in_port, u16);
        put!(Slot::Metadata, set_metadata, u64);
        put!(Slot::DlType, set_dl_type, u16);
        put!(Slot::NwSrc, set_nw_src, u32);
        put!(Slot::NwDst, set_nw_dst, u32);
        put!(Slot::Ipv6Src, set_ipv6_src, u128);
        put!(Slot::Ipv6Dst, set_ipv6_dst, u128);
        put!(Slot::Ipv6Label, set_ipv6_label, u32);
        put!(Slot::NwProto, set_nw_proto, u8);
        put!(Slot::NwTtl, set_nw_ttl, u8);
        put!(Slot::IpFrag, set_ip_frag, u8);
        put!(Slot::TpSrc, set_tp_src, u16);
        put!(Slot::TpDst, set_tp_dst, u16);
        put!(Slot::TcpFlags, set_tcp_flags, u16);
        put!(Slot::NdTarget, set_nd_target, u128);
        put!(Slot::CtState, set_ct_state, u8);
        put!(Slot::CtZone, set_ct_zone, u16);
        put!(Slot::CtMark, set_ct_mark, u32);
        put!(Slot::CtLabel, set_ct_label, u128);
        put!(Slot::CtNwSrc, set_ct_nw_src, u32);
        put!(Slot::CtNwDst, set_ct_nw_dst, u32);
        put!(Slot::CtIpv6Src, set_ct_ipv6_src, u128);
        put!(Slot::CtIpv6Dst, set_ct_ipv6_dst, u128);
        put!(Slot::CtNwProto, set_ct_nw_proto, u8);
        put!(Slot::CtTpSrc, set_ct_tp_src, u16);
        put!(Slot::CtTpDst, set_ct_tp_dst, u16);
        let mac = |s: Slot| {
            let (v, m) = val(s);
            (mac_from_u64(v as u64), mac_from_u64(m as u64))
        };
        for (slot, set) in [
            (
                Slot::DlSrc,
                FlowKey::set_dl_src as fn(&mut FlowKey, [u8; 6]),
            ),
            (Slot::DlDst, FlowKey::set_dl_dst),
            (Slot::ArpSha, FlowKey::set_arp_sha),
            (Slot::ArpTha, FlowKey::set_arp_tha),
        ] {
            let (v, m) = mac(slot);
            set(&mut key, v);
            set(&mut mask, m);
        }
        // DSCP and ECN share the TOS byte.
        let ((dv, dm), (ev, em)) = (val(Slot::NwDscp), val(Slot::NwEcn));
        key.set_nw_tos((dv | ev) as u8);
        mask.set_nw_tos((dm | em) as u8);
        let (v, m) = self.vlan_tci()?;
        key.set_vlan_tci(v);
        mask.set_vlan_tci(m);

        let matches = Match {
            key: key.masked(&mask),
            mask,
        };
        for s in self.slots.iter().flatten() {
            if !s.need.met(&matches) {
                return Err(invalid(s.origin, s.need.reason()));
            }
        }
        check_prerequisites(&matches)?;
        Ok(matches)
    }

    /// `vlan_tci` from `vlan_tci=`, or from `dl_vlan=` and `dl_vlan_pcp=`.
    fn vlan_tci(&self) -> Result<(u16, u16), E> {
        let vid = self.get(Slot::DlVlan);
        let pcp = self.get(Slot::DlVlanPcp);
        if self.get(Slot::VlanTci).is_some() && (vid.is_some() || pcp.is_some()) {
            return Err(invalid(
                "vlan_tci",
                "cannot be combined with dl_vlan or dl_vlan_pcp",
            ));
        }
        if vid.is_some_and(|s| s.value == 0) && pcp.is_some() {
            return Err(invalid(
                "dl_vlan_pcp",
                "conflicts with dl_vlan=0xffff (no tag)",
            ));
        }
        let (mut v, mut m) = self
            .get(Slot::VlanTci)
            .map_or((0, 0), |x| (x.value, x.mask));
        for s in [vid, pcp].into_iter().flatten() {
            v |= s.value;
            m |= s.mask;
        }
        Ok((v as u16, m as u16))
    }
}

/// Checks the OpenFlow prerequisites of a match by its key fields, by
/// the loosest name of each (`tp_src` as a port or an ICMP type): `nw_*`
/// need IPv4 or ARP, IPv6 fields IPv6, `tp_*` a transport protocol, ND
/// fields a neighbor solicitation or advertisement. Fields with an
/// all-zero mask are wildcards and need nothing.
pub fn check_prerequisites(m: &Match) -> Result<(), E> {
    let mk = &m.mask;
    let v6 = Need::Ipv6.met(m);
    let arp = Need::Arp.met(m);
    let used: [(&str, bool, Need); 21] = [
        ("nw_src", mk.nw_src() != 0, Need::Ipv4OrArp),
        ("nw_dst", mk.nw_dst() != 0, Need::Ipv4OrArp),
        ("nw_proto", mk.nw_proto() != 0, Need::IpOrArp),
        ("nw_tos", mk.nw_tos() != 0, Need::Ip),
        ("nw_ttl", mk.nw_ttl() != 0, Need::Ip),
        ("ip_frag", mk.ip_frag() != 0, Need::Ip),
        ("ipv6_src", mk.ipv6_src() != 0, Need::Ipv6),
        ("ipv6_dst", mk.ipv6_dst() != 0, Need::Ipv6),
        ("ipv6_label", mk.ipv6_label() != 0, Need::Ipv6),
        ("tp_src", mk.tp_src() != 0, Need::L4),
        ("tp_dst", mk.tp_dst() != 0, Need::L4),
        ("tcp_flags", mk.tcp_flags() != 0, Need::Tcp),
        ("nd_target", mk.nd_target() != 0, Need::Nd),
        ("ct_nw_src", mk.ct_nw_src() != 0, Need::Ct),
        ("ct_nw_dst", mk.ct_nw_dst() != 0, Need::Ct),
        ("ct_ipv6_src", mk.ct_ipv6_src() != 0, Need::Ct),
        ("ct_ipv6_dst", mk.ct_ipv6_dst() != 0, Need::Ct),
        ("ct_nw_proto", mk.ct_nw_proto() != 0, Need::Ct),
        ("ct_tp_src", mk.ct_tp_src() != 0, Need::Ct),
        ("ct_tp_dst", mk.ct_tp_dst() != 0, Need::Ct),
        (
            if v6 { "nd_sll" } else { "arp_sha" },
            mk.arp_sha() != [0; 6] || mk.arp_tha() != [0; 6],
            if v6 || !arp { Need::Nd } else { Need::Arp },
        ),
    ];
    for (field, used, need) in used {
        if used && !need.met(m) {
            return Err(invalid(field, need.reason()));
        }
    }
    // A later fragment carries no TCP, UDP or SCTP header: OVS refuses
    // their fields beside ip_frag=later (OFPBMC_BAD_PREREQ). ICMP's type
    // and code it takes (they never match a later fragment either).
    let later = mk.ip_frag() & FRAG_LATER != 0 && m.key.ip_frag() & FRAG_LATER != 0;
    let ports = mk.nw_proto() == 0xff
        && matches!(m.key.nw_proto(), IPPROTO_TCP | IPPROTO_UDP | IPPROTO_SCTP);
    for (field, used) in [
        ("tp_src", ports && mk.tp_src() != 0),
        ("tp_dst", ports && mk.tp_dst() != 0),
        ("tcp_flags", mk.tcp_flags() != 0),
    ] {
        if used && later {
            return Err(invalid(
                field,
                "a later fragment (ip_frag=later) has no TCP, UDP or SCTP header to match",
            ));
        }
    }
    Ok(())
}

/// The value and mask `value` gives packet field `name` (in `slot`).
fn slot_value(slot: Slot, name: &str, value: &str) -> Result<(u128, u128), E> {
    let wide = |(v, m): (u64, u64)| (u128::from(v), u128::from(m));
    Ok(match slot {
        Slot::InPort => (port(name, value)?.into(), 0xffff),
        Slot::Metadata => wide(uint_masked(name, value, u64::MAX, "a 64-bit number")?),
        Slot::DlSrc | Slot::DlDst | Slot::ArpSha | Slot::ArpTha => wide(mac_masked(name, value)?),
        Slot::DlType => (
            uint_in(name, value, 0xffff, "an Ethertype (0..0xffff)")?.into(),
            0xffff,
        ),
        Slot::DlVlan => wide(dl_vlan(name, value)?),
        Slot::DlVlanPcp => {
            let pcp = uint_in(name, value, 7, "a VLAN priority (0..7)")?;
            wide((
                u64::from(VLAN_PRESENT) | pcp << 13,
                u64::from(VLAN_PRESENT | VLAN_PCP_MASK),
            ))
        }
        Slot::VlanTci => wide(uint_masked(name, value, 0xffff, "a 16-bit TCI")?),
        Slot::NwSrc | Slot::NwDst => wide(ipv4_masked(name, value)?),
        Slot::Ipv6Src | Slot::Ipv6Dst | Slot::NdTarget => ipv6_masked(name, value)?,
        Slot::Ipv6Label => wide(uint_masked(
            name,
            value,
            0xf_ffff,
            "a flow label (0..0xfffff)",
        )?),
        Slot::NwProto if name == "arp_op" => (
            uint_in(name, value, 0xff, "an ARP opcode (0..255)")?.into(),
            0xff,
        ),
        Slot::NwProto => (
            uint_in(name, value, 0xff, "an IP protocol (0..255)")?.into(),
            0xff,
        ),
        Slot::NwDscp => (dscp(name, value)?.into(), DSCP_MASK.into()),
        Slot::NwEcn => (
            uint_in(name, value, 3, "an ECN value (0..3)")?.into(),
            ECN_MASK.into(),
        ),
        Slot::NwTtl => (uint_in(name, value, 0xff, "a TTL (0..255)")?.into(), 0xff),
        Slot::IpFrag => wide(ip_frag(name, value)?),
        Slot::TpSrc | Slot::TpDst if name.starts_with("icmp") => (
            uint_in(name, value, 0xff, "an ICMP type or code (0..255)")?.into(),
            0xffff,
        ),
        Slot::TpSrc | Slot::TpDst => wide(uint_masked(name, value, 0xffff, "a port (0..65535)")?),
        Slot::TcpFlags => wide(tcp_flags(name, value)?),
        Slot::CtState => wide(ct_state(name, value)?),
        Slot::CtZone => (
            exact(name, value)
                .and_then(|v| uint_in(name, v, 0xffff, "a connection tracking zone (0..65535)"))?
                .into(),
            0xffff,
        ),
        Slot::CtMark => wide(uint_masked(name, value, u32::MAX.into(), "a 32-bit mark")?),
        Slot::CtLabel => uint128_masked(name, value, "a 128-bit label")?,
        Slot::CtNwSrc | Slot::CtNwDst => wide(ipv4_masked(name, value)?),
        Slot::CtIpv6Src | Slot::CtIpv6Dst => ipv6_masked(name, value)?,
        Slot::CtNwProto => (
            exact(name, value)
                .and_then(|v| uint_in(name, v, 0xff, "an IP protocol (0..255)"))?
                .into(),
            0xff,
        ),
        Slot::CtTpSrc | Slot::CtTpDst => {
            wide(uint_masked(name, value, 0xffff, "a port (0..65535)")?)
        }
    })
}

/// `value` of a field OVS does not let a rule mask (`ct_zone`,
/// `ct_nw_proto`): refused with a `/`.
fn exact<'a>(name: &str, value: &'a str) -> Result<&'a str, E> {
    if value.contains('/') {
        return Err(invalid(
            name,
            format!("\"{value}\": this field takes no mask (it matches exactly)"),
        ));
    }
    Ok(value)
}

/// `dl_vlan=VID`, or `0xffff` for "no tag".
fn dl_vlan(name: &str, value: &str) -> Result<(u64, u64), E> {
    let vid = uint(value)
        .filter(|&v| v <= VLAN_VID_MASK.into() || v == 0xffff)
        .ok_or_else(|| bad(name, value, "a VLAN ID (0..4095, or 0xffff for no tag)"))?;
    Ok(if vid == 0xffff {
        (0, VLAN_PRESENT.into())
    } else {
        (
            u64::from(VLAN_PRESENT) | vid,
            u64::from(VLAN_PRESENT | VLAN_VID_MASK),
        )
    })
}

/// `nw_tos=TOS` (the DSCP bits of the TOS byte: a multiple of 4, as
/// OVS requires) or `ip_dscp=DSCP` (0..63): the TOS byte's value.
fn dscp(name: &str, value: &str) -> Result<u8, E> {
    if name == "ip_dscp" {
        return Ok((uint_in(name, value, 63, "a DSCP value (0..63)")? as u8) << 2);
    }
    let tos = uint_in(name, value, 0xff, "a TOS value (0..255)")? as u8;
    if tos & ECN_MASK != 0 {
        return Err(invalid(
            name,
            format!(
                "{tos} has ECN bits set (nw_tos matches the DSCP bits: a multiple of 4; use nw_ecn for ECN)"
            ),
        ));
    }
    Ok(tos)
}

/// `ip_frag=no|yes|first|later|not_later` as OVS spells its states.
fn ip_frag(name: &str, value: &str) -> Result<(u64, u64), E> {
    let (any, later) = (u64::from(FRAG_ANY), u64::from(FRAG_LATER));
    Ok(match value {
        "no" => (0, any),
        "yes" => (any, any),
        "first" => (any, any | later),
        "later" => (any | later, any | later),
        "not_later" => (0, later),
        _ => return Err(bad(name, value, "no, yes, first, later or not_later")),
    })
}

/// `tcp_flags=N[/M]` (12 bits), `+flag-flag...` (`+` must be set, `-`
/// must be clear) or `flag|flag...` (exactly these set, the other bits
/// clear), as OVS writes and reads them. A flag is a name from
/// [`TCP_FLAG_NAMES`] or, for the bits without one, `[HEX]` (`[800]`).
fn tcp_flags(name: &str, value: &str) -> Result<(u64, u64), E> {
    const EXPECTED: &str = "TCP flags (N[/M] up to 0xfff, +syn-ack... or syn|ack...)";
    flags(name, value, TCP_FLAG_NAMES, TCP_FLAGS_BITS, EXPECTED)
}

/// `ct_state=N[/M]` (8 bits), `+trk+est-new...` (`+` must be set, `-`
/// must be clear: only the named bits are matched) or `trk|est...`
/// (exactly these set, the others clear), as OVS reads it; the names are
/// [`CT_STATE_NAMES`].
fn ct_state(name: &str, value: &str) -> Result<(u64, u64), E> {
    const EXPECTED: &str = "connection states (N[/M] up to 0xff, +trk+est-new... or trk|est...; \
         the states: new, est, rel, rpl, inv, trk, snat, dnat)";
    flags(name, value, CT_STATE_NAMES, 0xff, EXPECTED)
}

/// The connection states a tracker reports for one packet, as OVS's
/// `ofproto/trace --ct-next FLAGS` takes them: state names separated by
/// commas or spaces (`trk,new`, `trk est`), and, for the same set, the
/// forms a `ct_state=` match writes with every named flag set
/// (`+trk+est`, `trk|est`). Refused as OVS's `validate_ct_state()`
/// refuses them: a state without `trk` (bar none at all: `""` is an
/// untracked packet), `inv` beside anything but `trk`, `new` beside
/// `est` or `rpl` — states no tracker reports.
pub fn parse_ct_states(text: &str) -> Result<u8, E> {
    const FIELD: &str = "ct states";
    const EXPECTED: &str = "connection states (names separated by commas or spaces: trk,new; or \
         +trk+est, trk|est; the states: new, est, rel, rpl, inv, trk, snat, dnat)";
    let mut state = 0u8;
    let plus = text.trim_start().starts_with('+');
    let names = text
        .split(|c: char| c == ',' || c == ' ' || c == '|' || (plus && c == '+'))
        .filter(|n| !n.is_empty());
    for name in names {
        let bit = CT_STATE_NAMES
            .iter()
            .find(|f| f.0 == name)
            .map(|f| f.1 as u8)
            .ok_or_else(|| bad(FIELD, text, EXPECTED))?;
        state |= bit;
    }
    let clash = if state != 0 && state & TRK == 0 {
        Some("without trk no other state can be set")
    } else if state & INV != 0 && state & !(TRK | INV) != 0 {
        Some("inv goes with trk alone")
    } else if state & NEW != 0 && state & EST != 0 {
        Some("new and est exclude each other")
    } else if state & NEW != 0 && state & RPL != 0 {
        Some("new and rpl exclude each other")
    } else {
        None
    };
    match clash {
        Some(why) => Err(invalid(FIELD, format!("{text:?}: {why}"))),
        None => Ok(state),
    }
}

/// `state` as OVS's trace prints a tracker's answer: the state names set,
/// in bit order, joined by `|` (`trk|new` is `new|trk`); `0` for none.
pub fn ct_states_text(state: u8) -> String {
    let names: Vec<&str> = CT_STATE_NAMES
        .iter()
        .filter(|f| state & f.1 as u8 != 0)
        .map(|f| f.0)
        .collect();
    if names.is_empty() {
        "0".into()
    } else {
        names.join("|")
    }
}

/// A set of flags in OVS's three forms: `N[/M]` (at most `all`),
/// `+a-b...` (the named bits set or clear, only they matched) and `a|b`
/// (exactly these set). A flag is a name from `names` or, for a bit
/// without one, `[HEX]` (`[800]`).
fn flags(
    name: &str,
    value: &str,
    names: &[(&str, u16)],
    all: u16,
    expected: &'static str,
) -> Result<(u64, u64), E> {
    let bit = |flag: &str| -> Result<u64, E> {
        let b = match flag.strip_prefix('[').and_then(|f| f.strip_suffix(']')) {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => names.iter().find(|f| f.0 == flag).map(|f| u64::from(f.1)),
        };
        b.filter(|b| b.is_power_of_two() && *b <= u64::from(all))
            .ok_or_else(|| bad(name, value, expected))
    };
    if value.starts_with(|c: char| c.is_ascii_digit()) {
        return uint_masked(name, value, all.into(), expected);
    }
    let (mut v, mut m) = (0u64, 0u64);
    if !value.starts_with(['+', '-']) {
        for flag in value.split('|') {
            let b = bit(flag)?;
            if v & b != 0 {
                return Err(invalid(name, format!("{flag} is named twice")));
            }
            v |= b;
        }
        return Ok((v, all.into()));
    }
    let mut rest = value;
    while let Some(sign) = rest.chars().next() {
        let body = &rest[1..];
        let end = body.find(['+', '-']).unwrap_or(body.len());
        let flag = &body[..end];
        let b = bit(flag)?;
        if m & b != 0 {
            return Err(invalid(name, format!("{flag} is named twice")));
        }
        m |= b;
        if sign == '+' {
            v |= b;
        }
        rest = &body[end..];
    }
    Ok((v, m))
}

#[cfg(test)]
#[path = "fields_tests.rs"]
mod tests;
