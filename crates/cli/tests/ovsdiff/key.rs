//! The packet fields both switches keep, in one model: what a packet is
//! (generated, then read back from each side's trace) and what a rule
//! matches (a value and mask per field). It mirrors nfvswitch's flow key
//! and OVS's `struct flow` where they agree: ARP's opcode in `nw_proto` and
//! its addresses in `nw_src`/`nw_dst`, ICMP type and code in `tp_src` and
//! `tp_dst`, `nd_sll`/`nd_tll` in `arp_sha`/`arp_tha`, `nw_tos` the whole
//! TOS / traffic-class byte, `ip_frag` [`FRAG_ANY`] | [`FRAG_LATER`].
//!
//! The connection tracker's `ct_state`, `ct_zone`, `ct_mark` and
//! `ct_label` are in it
//! for the rules that match them; a packet read from the wire has them 0,
//! and neither switch's outputs carry them (OVS's datapath actions do not
//! say what the tracker leaves on a packet): a generated packet's
//! `ct_state` is what the case asks the tracker to answer (`--ct-next`),
//! and the copies `ct(table=T)` sends back are compared as [`Recirc`]s.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

pub const VLAN_PRESENT: u16 = 0x1000;
pub const FRAG_ANY: u8 = 1;
pub const FRAG_LATER: u8 = 2;

pub const ETH_IPV4: u16 = 0x0800;
pub const ETH_IPV6: u16 = 0x86dd;
pub const ETH_ARP: u16 = 0x0806;
pub const TCP: u8 = 6;
pub const UDP: u8 = 17;
pub const SCTP: u8 = 132;
pub const ICMP: u8 = 1;
pub const ICMPV6: u8 = 58;

/// Every field of a packet.
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    pub in_port: u16,
    pub dl_src: u64,
    pub dl_dst: u64,
    pub dl_type: u16,
    pub vlan_tci: u16,
    pub nw_src: u32,
    pub nw_dst: u32,
    pub nw_proto: u8,
    pub nw_tos: u8,
    pub nw_ttl: u8,
    pub ip_frag: u8,
    pub tp_src: u16,
    pub tp_dst: u16,
    pub tcp_flags: u16,
    pub ipv6_src: u128,
    pub ipv6_dst: u128,
    pub ipv6_label: u32,
    pub nd_target: u128,
    pub arp_sha: u64,
    pub arp_tha: u64,
    pub ct_state: u8,
    pub ct_zone: u16,
    pub ct_mark: u32,
    pub ct_label: u128,
}

/// A tracked copy (`ct(table=T)`) as a trace followed it: where it was
/// looked up again, its headers then, what the tracker was taken to
/// answer and the ct fields the copy had, and the rule that took it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Recirc {
    pub table: u8,
    /// Its header fields (ct fields aside: those are below).
    pub packet: Key,
    pub ct_state: u8,
    pub ct_zone: u16,
    pub ct_mark: u32,
    pub ct_label: u128,
    /// The priority of the rule table T matched (None: none did).
    pub priority: Option<u16>,
}

impl Recirc {
    /// The same copy but for its header fields (compared after `strip`)
    /// and the rule that took it.
    pub fn same_but_headers(&self, other: &Recirc, strip: impl Fn(Key) -> Key) -> bool {
        (
            self.table,
            self.ct_state,
            self.ct_zone,
            self.ct_mark,
            self.ct_label,
            strip(self.packet),
        ) == (
            other.table,
            other.ct_state,
            other.ct_zone,
            other.ct_mark,
            other.ct_label,
            strip(other.packet),
        )
    }
}

/// `ct_state` bits, as both switches number them (`ovs-fields`(7)).
pub mod cs {
    // The bits are OVS's numbering, which nfv_flow writes down once.
    pub use nfv_flow::key::ct_state::*;
    /// Names, by bit, as OVS spells them.
    pub const NAMES: &[(&str, u8)] = &[
        ("new", NEW),
        ("est", EST),
        ("rel", REL),
        ("rpl", RPL),
        ("inv", INV),
        ("trk", TRK),
        ("snat", SNAT),
        ("dnat", DNAT),
    ];
}

/// One field of [`Key`], for masked reads and writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum F {
    InPort,
    DlSrc,
    DlDst,
    DlType,
    VlanTci,
    NwSrc,
    NwDst,
    NwProto,
    NwTos,
    NwTtl,
    IpFrag,
    TpSrc,
    TpDst,
    TcpFlags,
    Ipv6Src,
    Ipv6Dst,
    Ipv6Label,
    NdTarget,
    ArpSha,
    ArpTha,
    CtState,
    CtZone,
    CtMark,
    CtLabel,
}

impl F {
    /// The field's width in bits.
    pub fn bits(self) -> u32 {
        match self {
            F::InPort | F::DlType | F::VlanTci | F::TpSrc | F::TpDst | F::CtZone => 16,
            F::DlSrc | F::DlDst | F::ArpSha | F::ArpTha => 48,
            F::NwSrc | F::NwDst | F::CtMark => 32,
            F::NwProto | F::NwTos | F::NwTtl | F::IpFrag | F::CtState => 8,
            F::TcpFlags => 12,
            F::Ipv6Src | F::Ipv6Dst | F::NdTarget | F::CtLabel => 128,
            F::Ipv6Label => 20,
        }
    }

    pub fn all_ones(self) -> u128 {
        if self.bits() == 128 {
            u128::MAX
        } else {
            (1u128 << self.bits()) - 1
        }
    }
}

impl Key {
    pub fn get(&self, f: F) -> u128 {
        match f {
            F::InPort => self.in_port.into(),
            F::DlSrc => self.dl_src.into(),
            F::DlDst => self.dl_dst.into(),
            F::DlType => self.dl_type.into(),
            F::VlanTci => self.vlan_tci.into(),
            F::NwSrc => self.nw_src.into(),
            F::NwDst => self.nw_dst.into(),
            F::NwProto => self.nw_proto.into(),
            F::NwTos => self.nw_tos.into(),
            F::NwTtl => self.nw_ttl.into(),
            F::IpFrag => self.ip_frag.into(),
            F::TpSrc => self.tp_src.into(),
            F::TpDst => self.tp_dst.into(),
            F::TcpFlags => self.tcp_flags.into(),
            F::Ipv6Src => self.ipv6_src,
            F::Ipv6Dst => self.ipv6_dst,
            F::Ipv6Label => self.ipv6_label.into(),
            F::NdTarget => self.nd_target,
            F::ArpSha => self.arp_sha.into(),
            F::ArpTha => self.arp_tha.into(),
            F::CtState => self.ct_state.into(),
            F::CtZone => self.ct_zone.into(),
            F::CtMark => self.ct_mark.into(),
            F::CtLabel => self.ct_label,
        }
    }

    pub fn set(&mut self, f: F, v: u128) {
        let v = v & f.all_ones();
        match f {
            F::InPort => self.in_port = v as u16,
            F::DlSrc => self.dl_src = v as u64,
            F::DlDst => self.dl_dst = v as u64,
            F::DlType => self.dl_type = v as u16,
            F::VlanTci => self.vlan_tci = v as u16,
            F::NwSrc => self.nw_src = v as u32,
            F::NwDst => self.nw_dst = v as u32,
            F::NwProto => self.nw_proto = v as u8,
            F::NwTos => self.nw_tos = v as u8,
            F::NwTtl => self.nw_ttl = v as u8,
            F::IpFrag => self.ip_frag = v as u8,
            F::TpSrc => self.tp_src = v as u16,
            F::TpDst => self.tp_dst = v as u16,
            F::TcpFlags => self.tcp_flags = v as u16,
            F::Ipv6Src => self.ipv6_src = v,
            F::Ipv6Dst => self.ipv6_dst = v,
            F::Ipv6Label => self.ipv6_label = v as u32,
            F::NdTarget => self.nd_target = v,
            F::ArpSha => self.arp_sha = v as u64,
            F::ArpTha => self.arp_tha = v as u64,
            F::CtState => self.ct_state = v as u8,
            F::CtZone => self.ct_zone = v as u16,
            F::CtMark => self.ct_mark = v as u32,
            F::CtLabel => self.ct_label = v,
        }
    }

    /// The packet with its ct fields zeroed: what leaves a port (see the
    /// module doc), or a packet as read from the wire.
    pub fn without_ct(mut self) -> Key {
        self.ct_state = 0;
        self.ct_zone = 0;
        self.ct_mark = 0;
        self.ct_label = 0;
        self
    }

    pub fn is_ipv4(&self) -> bool {
        self.dl_type == ETH_IPV4
    }
    pub fn is_ipv6(&self) -> bool {
        self.dl_type == ETH_IPV6
    }
    pub fn is_ip(&self) -> bool {
        self.is_ipv4() || self.is_ipv6()
    }
    pub fn later_fragment(&self) -> bool {
        self.ip_frag & FRAG_LATER != 0
    }
    /// TCP, UDP or SCTP (ports) over IP, not a later fragment.
    pub fn has_ports(&self) -> bool {
        self.is_ip() && matches!(self.nw_proto, TCP | UDP | SCTP) && !self.later_fragment()
    }
    /// ICMP over IPv4 or ICMPv6 over IPv6 (type and code), not a later fragment.
    pub fn has_icmp(&self) -> bool {
        ((self.is_ipv4() && self.nw_proto == ICMP) || (self.is_ipv6() && self.nw_proto == ICMPV6))
            && !self.later_fragment()
    }
    /// An ICMPv6 neighbor solicitation (135) or advertisement (136).
    pub fn is_nd(&self) -> bool {
        self.is_ipv6()
            && self.nw_proto == ICMPV6
            && !self.later_fragment()
            && matches!(self.tp_src, 135 | 136)
            && self.tp_dst == 0
    }

    /// Clears what a packet of this kind cannot carry, as both switches'
    /// flow extraction leaves it (and as their trace parsers want it).
    pub fn normalize(&mut self) {
        if self.vlan_tci & VLAN_PRESENT == 0 {
            self.vlan_tci = 0;
        }
        let (ip, v4, v6, arp) = (
            self.is_ip(),
            self.is_ipv4(),
            self.is_ipv6(),
            self.dl_type == ETH_ARP,
        );
        if !(v4 || arp) {
            self.nw_src = 0;
            self.nw_dst = 0;
        }
        if !(ip || arp) {
            self.nw_proto = 0;
        }
        if !ip {
            self.nw_tos = 0;
            self.nw_ttl = 0;
            self.ip_frag = 0;
        }
        if self.ip_frag & FRAG_LATER != 0 {
            self.ip_frag |= FRAG_ANY;
        }
        if !v6 {
            self.ipv6_src = 0;
            self.ipv6_dst = 0;
            self.ipv6_label = 0;
        }
        if !(self.has_ports() || self.has_icmp()) {
            self.tp_src = 0;
            self.tp_dst = 0;
        }
        if self.has_icmp() {
            self.tp_src &= 0xff;
            self.tp_dst &= 0xff;
        }
        if !(self.is_ip() && self.nw_proto == TCP && !self.later_fragment()) {
            self.tcp_flags = 0;
        }
        if !self.is_nd() {
            self.nd_target = 0;
        }
        if !arp && !self.is_nd() {
            self.arp_sha = 0;
            self.arp_tha = 0;
        }
        if self.is_nd() {
            // A solicitation carries a source link-layer address, an
            // advertisement a target one.
            if self.tp_src == 135 {
                self.arp_tha = 0;
            } else {
                self.arp_sha = 0;
            }
        }
    }
}

pub fn mac(v: u64) -> String {
    let b = v.to_be_bytes();
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        b[2], b[3], b[4], b[5], b[6], b[7]
    )
}

pub fn parse_mac(s: &str) -> Option<u64> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        return None;
    }
    let mut v = 0u64;
    for p in parts {
        v = v << 8 | u64::from(u8::from_str_radix(p, 16).ok()?);
    }
    Some(v)
}

pub fn ip4(v: u32) -> Ipv4Addr {
    Ipv4Addr::from(v)
}

pub fn ip6(v: u128) -> Ipv6Addr {
    Ipv6Addr::from(v)
}

/// `ct_state` bits as OVS prints them (`new|trk`; `0` for none).
pub fn ct_state_text(state: u8) -> String {
    let names: Vec<&str> = cs::NAMES
        .iter()
        .filter(|(_, b)| state & b != 0)
        .map(|(n, _)| *n)
        .collect();
    if names.is_empty() {
        "0".into()
    } else {
        names.join("|")
    }
}

/// Reads `new|trk` (OVS's print of a state) or a number.
pub fn parse_ct_state(s: &str) -> Option<u8> {
    if let Some(n) = parse_uint(s) {
        return u8::try_from(n).ok();
    }
    let mut v = 0u8;
    for name in s.split('|') {
        v |= cs::NAMES.iter().find(|(n, _)| *n == name)?.1;
    }
    Some(v)
}

/// A number as OVS and nfvswitch print it: decimal, or `0x` hex.
pub fn parse_uint(s: &str) -> Option<u128> {
    match s.strip_prefix("0x") {
        Some(h) => u128::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

impl fmt::Debug for Key {
    /// Only the fields that mean something for the packet's kind (the
    /// others are zero after [`Key::normalize`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "in_port={} dl_src={} dl_dst={} dl_type=0x{:04x} vlan_tci=0x{:04x}",
            self.in_port,
            mac(self.dl_src),
            mac(self.dl_dst),
            self.dl_type,
            self.vlan_tci
        )?;
        if self.is_ipv4() || self.dl_type == ETH_ARP {
            write!(
                f,
                " nw_src={} nw_dst={}",
                ip4(self.nw_src),
                ip4(self.nw_dst)
            )?;
        }
        if self.is_ipv6() {
            write!(
                f,
                " ipv6_src={} ipv6_dst={} ipv6_label=0x{:05x}",
                ip6(self.ipv6_src),
                ip6(self.ipv6_dst),
                self.ipv6_label
            )?;
        }
        if self.is_ip() || self.dl_type == ETH_ARP {
            write!(f, " nw_proto={}", self.nw_proto)?;
        }
        if self.is_ip() {
            write!(
                f,
                " nw_tos=0x{:02x} nw_ttl={} ip_frag={}",
                self.nw_tos, self.nw_ttl, self.ip_frag
            )?;
        }
        if self.tp_src != 0 || self.tp_dst != 0 {
            write!(f, " tp_src={} tp_dst={}", self.tp_src, self.tp_dst)?;
        }
        if self.tcp_flags != 0 {
            write!(f, " tcp_flags=0x{:03x}", self.tcp_flags)?;
        }
        if self.nd_target != 0 {
            write!(f, " nd_target={}", ip6(self.nd_target))?;
        }
        if self.arp_sha != 0 || self.arp_tha != 0 {
            write!(
                f,
                " arp_sha={} arp_tha={}",
                mac(self.arp_sha),
                mac(self.arp_tha)
            )?;
        }
        if self.ct_state != 0 || self.ct_zone != 0 || self.ct_mark != 0 || self.ct_label != 0 {
            write!(
                f,
                " ct_state={} ct_zone={} ct_mark=0x{:x} ct_label=0x{:x}",
                ct_state_text(self.ct_state),
                self.ct_zone,
                self.ct_mark,
                self.ct_label
            )?;
        }
        Ok(())
    }
}
