//! `ovs-ofctl`-style text for rules, matches, filters and actions.
//!
//! The output parses back with [`crate::parse_flow`] / [`crate::parse_filter`]
//! to the same value. Order is stable: priority, cookie, tun_id, protocol shorthand
//! (`udp` for dl_type=0x0800,nw_proto=17) or dl_type, in_port, metadata,
//! the connection tracker's fields (as OVS orders them), VLAN, MACs, IPv4,
//! nw_proto, L4 ports, then `actions=`. Items are separated by commas.
//!
//! Masks that the parser cannot produce (a partial mask on in_port,
//! dl_type or nw_proto) are still printed, as `field=0xV/0xM`, for
//! debugging; such text does not parse back.

use crate::action::Action;
use crate::fields::{CT_STATE_NAMES, DSCP_MASK, ECN_MASK, PROTOCOLS, TCP_FLAG_NAMES};
use crate::key::{FRAG_ANY, FRAG_LATER, VLAN_PRESENT, VLAN_VID_MASK};
use crate::parse::FlowFilter;
use crate::rule::{FlowSpec, Match};
use crate::values::{prefix_mask, prefix_mask128};
use core::fmt;
use core::net::{Ipv4Addr, Ipv6Addr};
use nfv_wire::{EtherType, EthernetAddress};

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Action::Ct(ref ct) => write!(f, "{ct}"),
            Action::CtClear => f.write_str("ct_clear"),
            Action::Output(p) => write!(f, "output:{p}"),
            Action::SetDlSrc(m) => write!(f, "mod_dl_src:{}", EthernetAddress(m)),
            Action::SetDlDst(m) => write!(f, "mod_dl_dst:{}", EthernetAddress(m)),
            Action::SetVlanVid(v) => write!(f, "mod_vlan_vid:{v}"),
            Action::PushVlan(t) => write!(f, "push_vlan:0x{t:04x}"),
            Action::StripVlan => f.write_str("strip_vlan"),
            Action::Normal => f.write_str("normal"),
            Action::InPort => f.write_str("in_port"),
            Action::Flood => f.write_str("flood"),
            Action::All => f.write_str("all"),
            Action::Controller(n) => write!(f, "CONTROLLER:{n}"),
            Action::Group(g) => write!(f, "group:{g}"),
            Action::SetTunnel(vni) => write!(f, "set_field:0x{vni:x}->tun_id"),
            Action::SetNwSrc(a) => write!(f, "mod_nw_src:{}", Ipv4Addr::from(a)),
            Action::SetNwDst(a) => write!(f, "mod_nw_dst:{}", Ipv4Addr::from(a)),
            Action::SetIpv6Src(a) => write!(f, "set_field:{}->ipv6_src", Ipv6Addr::from(a)),
            Action::SetIpv6Dst(a) => write!(f, "set_field:{}->ipv6_dst", Ipv6Addr::from(a)),
            Action::SetIpv6Label(l) => write!(f, "set_field:0x{l:x}->ipv6_label"),
            Action::SetTpSrc(p) => write!(f, "mod_tp_src:{p}"),
            Action::SetTpDst(p) => write!(f, "mod_tp_dst:{p}"),
            Action::SetNwTos(t) => write!(f, "mod_nw_tos:{t}"),
            Action::SetNwEcn(e) => write!(f, "mod_nw_ecn:{e}"),
            Action::SetNwTtl(t) => write!(f, "mod_nw_ttl:{t}"),
            Action::DecTtl => f.write_str("dec_ttl"),
            Action::GotoTable(t) => write!(f, "goto_table:{t}"),
            Action::Meter(m) => write!(f, "meter:{m}"),
            Action::Resubmit(t) => write!(f, "resubmit(,{t})"),
            Action::WriteMetadata { value, mask } if mask == u64::MAX => {
                write!(f, "write_metadata:0x{value:x}")
            }
            Action::WriteMetadata { value, mask } => {
                write!(f, "write_metadata:0x{value:x}/0x{mask:x}")
            }
        }
    }
}

/// Displays an action list: comma separated, or `drop` when empty.
pub struct ActionList<'a>(pub &'a [Action]);

impl fmt::Display for ActionList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("drop");
        }
        for (i, a) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{a}")?;
        }
        Ok(())
    }
}

/// Writes comma-separated items.
struct Items<'a, 'b> {
    f: &'a mut fmt::Formatter<'b>,
    first: bool,
}

impl Items<'_, '_> {
    fn item(&mut self, args: fmt::Arguments<'_>) -> fmt::Result {
        if !self.first {
            self.f.write_str(",")?;
        }
        self.first = false;
        self.f.write_fmt(args)
    }

    /// An integer field: omitted when wildcarded, `name=V` when exact,
    /// `name=0xV/0xM` otherwise.
    fn uint(&mut self, name: &str, v: u64, m: u64, full: u64) -> fmt::Result {
        match m {
            0 => Ok(()),
            m if m == full => self.item(format_args!("{name}={v}")),
            m => self.item(format_args!("{name}=0x{v:x}/0x{m:x}")),
        }
    }

    fn mac(&mut self, name: &str, v: [u8; 6], m: [u8; 6]) -> fmt::Result {
        match m {
            [0, 0, 0, 0, 0, 0] => Ok(()),
            [0xff, 0xff, 0xff, 0xff, 0xff, 0xff] => {
                self.item(format_args!("{name}={}", EthernetAddress(v)))
            }
            m => self.item(format_args!(
                "{name}={}/{}",
                EthernetAddress(v),
                EthernetAddress(m)
            )),
        }
    }

    fn ipv4(&mut self, name: &str, v: u32, m: u32) -> fmt::Result {
        let a = Ipv4Addr::from(v);
        match m {
            0 => Ok(()),
            u32::MAX => self.item(format_args!("{name}={a}")),
            m if prefix_mask(m.leading_ones()) == m => {
                self.item(format_args!("{name}={a}/{}", m.leading_ones()))
            }
            m => self.item(format_args!("{name}={a}/{}", Ipv4Addr::from(m))),
        }
    }

    fn ipv6(&mut self, name: &str, v: u128, m: u128) -> fmt::Result {
        let a = Ipv6Addr::from(v);
        match m {
            0 => Ok(()),
            u128::MAX => self.item(format_args!("{name}={a}")),
            m if prefix_mask128(m.leading_ones()) == m => {
                self.item(format_args!("{name}={a}/{}", m.leading_ones()))
            }
            m => self.item(format_args!("{name}={a}/{}", Ipv6Addr::from(m))),
        }
    }

    /// `nw_tos=` for the DSCP bits, `nw_ecn=` for the ECN bits; any other
    /// mask as `nw_tos=0xV/0xM` (for debugging: it does not parse back).
    fn tos(&mut self, v: u8, m: u8) -> fmt::Result {
        match m {
            0 => Ok(()),
            DSCP_MASK => self.item(format_args!("nw_tos={v}")),
            ECN_MASK => self.item(format_args!("nw_ecn={v}")),
            0xff => {
                self.item(format_args!("nw_tos={}", v & DSCP_MASK))?;
                self.item(format_args!("nw_ecn={}", v & ECN_MASK))
            }
            m => self.item(format_args!("nw_tos=0x{v:x}/0x{m:x}")),
        }
    }

    /// `nw_frag=` in OVS's words.
    fn frag(&mut self, v: u8, m: u8) -> fmt::Result {
        let word = match (v, m) {
            (_, 0) => return Ok(()),
            (0, FRAG_ANY) => "no",
            (FRAG_ANY, FRAG_ANY) => "yes",
            (FRAG_ANY, 3) => "first",
            (3, 3) => "later",
            (0, FRAG_LATER) => "not_later",
            // `no` with the LATER bit too: still "not a fragment".
            (0, 3) => "no",
            _ => return self.item(format_args!("nw_frag=0x{v:x}/0x{m:x}")),
        };
        self.item(format_args!("nw_frag={word}"))
    }

    /// `tcp_flags=+syn-ack` (OVS's form) when every masked bit has a
    /// name, else `tcp_flags=0xV/0xM`.
    fn tcp_flags(&mut self, v: u16, m: u16) -> fmt::Result {
        if m == 0 {
            return Ok(());
        }
        let named: u16 = TCP_FLAG_NAMES.iter().map(|f| f.1).sum();
        if m & !named != 0 {
            return self.item(format_args!("tcp_flags=0x{v:03x}/0x{m:03x}"));
        }
        let mut text = String::new();
        for &(name, bit) in TCP_FLAG_NAMES {
            if m & bit != 0 {
                text.push(if v & bit != 0 { '+' } else { '-' });
                text.push_str(name);
            }
        }
        self.item(format_args!("tcp_flags={text}"))
    }

    /// `ct_state` as OVS prints it: for an exact match the states set
    /// joined by `|` (`0`: untracked), else `+trk-new...` for the masked
    /// bits, in bit order.
    fn ct_state(&mut self, v: u8, m: u8) -> fmt::Result {
        if m == 0 {
            return Ok(());
        }
        let mut text = String::new();
        for &(name, bit) in CT_STATE_NAMES {
            let bit = bit as u8;
            if m == 0xff && v & bit != 0 {
                if !text.is_empty() {
                    text.push('|');
                }
                text.push_str(name);
            } else if m != 0xff && m & bit != 0 {
                text.push(if v & bit != 0 { '+' } else { '-' });
                text.push_str(name);
            }
        }
        if text.is_empty() {
            text.push('0');
        }
        self.item(format_args!("ct_state={text}"))
    }

    /// A field OVS prints in hexadecimal (`ct_mark`, `ct_label`): `0x`
    /// and the digits (`0` for zero), and `/MASK` so unless the mask is
    /// `full`; omitted when wildcarded.
    fn hex(&mut self, name: &str, v: u128, m: u128, full: u128) -> fmt::Result {
        let h = |x: u128| {
            if x == 0 {
                "0".to_string()
            } else {
                format!("0x{x:x}")
            }
        };
        match m {
            0 => Ok(()),
            m if m == full => self.item(format_args!("{name}={}", h(v))),
            m => self.item(format_args!("{name}={}/{}", h(v), h(m))),
        }
    }

    fn vlan(&mut self, v: u16, m: u16) -> fmt::Result {
        const PCP: u16 = 0xe000;
        if m == 0 {
            return Ok(());
        }
        if m == VLAN_PRESENT && v == 0 {
            return self.item(format_args!("dl_vlan=0xffff"));
        }
        // dl_vlan and/or dl_vlan_pcp: "tagged" plus full VID and/or PCP bits.
        let rest = m & !VLAN_PRESENT;
        let tagged = v & VLAN_PRESENT != 0 && m & VLAN_PRESENT != 0;
        if tagged && (rest == VLAN_VID_MASK || rest == PCP || rest == VLAN_VID_MASK | PCP) {
            if rest & VLAN_VID_MASK != 0 {
                self.item(format_args!("dl_vlan={}", v & VLAN_VID_MASK))?;
            }
            if rest & PCP != 0 {
                self.item(format_args!("dl_vlan_pcp={}", v >> 13))?;
            }
            return Ok(());
        }
        self.item(format_args!("vlan_tci=0x{v:04x}/0x{m:04x}"))
    }
}

/// The match's fields; `table=N` first when the mask holds the table,
/// except table 0 when `implicit_table_0` (a rule's own table: a rule text
/// without `table=` is in table 0, a filter's selects every table).
fn write_match(items: &mut Items<'_, '_>, m: &Match, implicit_table_0: bool) -> fmt::Result {
    let (k, mk) = (&m.key, &m.mask);
    match mk.table() {
        0 => {}
        0xff if implicit_table_0 && k.table() == 0 => {}
        0xff => items.item(format_args!("table={}", k.table()))?,
        mt => items.item(format_args!("table=0x{:x}/0x{mt:x}", k.table()))?,
    }
    let mut proto_done = false;
    let dl_type = (mk.dl_type() == 0xffff).then(|| k.dl_type());
    match mk.dl_type() {
        0 => {}
        0xffff => {
            let t = k.dl_type();
            let proto = (mk.nw_proto() == 0xff).then(|| k.nw_proto());
            let short = PROTOCOLS
                .iter()
                .find(|p| p.1 == t && p.2.is_some() && p.2 == proto)
                .or_else(|| PROTOCOLS.iter().find(|p| p.1 == t && p.2.is_none()));
            match short {
                Some(&(name, _, p)) => {
                    proto_done = p.is_some();
                    items.item(format_args!("{name}"))?;
                }
                None => items.item(format_args!("dl_type=0x{t:04x}"))?,
            }
        }
        mt => items.item(format_args!("dl_type=0x{:04x}/0x{mt:04x}", k.dl_type()))?,
    }
    items.uint("in_port", k.in_port().into(), mk.in_port().into(), 0xffff)?;
    items.uint("metadata", k.metadata(), mk.metadata(), u64::MAX)?;
    write_ct(items, m)?;
    items.vlan(k.vlan_tci(), mk.vlan_tci())?;
    items.mac("dl_src", k.dl_src(), mk.dl_src())?;
    items.mac("dl_dst", k.dl_dst(), mk.dl_dst())?;
    write_l3_l4(items, m, dl_type, proto_done)
}

/// The connection tracker's fields of [`write_match`], in OVS's order.
/// (OVS leaves `ct_tp_src`/`ct_tp_dst` out of its text unless
/// `ct_nw_proto` is matched too; here they are always printed, so that
/// the text parses back to the same match.)
fn write_ct(items: &mut Items<'_, '_>, m: &Match) -> fmt::Result {
    let (k, mk) = (&m.key, &m.mask);
    items.ct_state(k.ct_state(), mk.ct_state())?;
    items.uint("ct_zone", k.ct_zone().into(), mk.ct_zone().into(), 0xffff)?;
    items.hex(
        "ct_mark",
        k.ct_mark().into(),
        mk.ct_mark().into(),
        u32::MAX.into(),
    )?;
    items.hex("ct_label", k.ct_label(), mk.ct_label(), u128::MAX)?;
    items.ipv4("ct_nw_src", k.ct_nw_src(), mk.ct_nw_src())?;
    items.ipv6("ct_ipv6_src", k.ct_ipv6_src(), mk.ct_ipv6_src())?;
    items.ipv4("ct_nw_dst", k.ct_nw_dst(), mk.ct_nw_dst())?;
    items.ipv6("ct_ipv6_dst", k.ct_ipv6_dst(), mk.ct_ipv6_dst())?;
    items.uint(
        "ct_nw_proto",
        k.ct_nw_proto().into(),
        mk.ct_nw_proto().into(),
        0xff,
    )?;
    items.uint(
        "ct_tp_src",
        k.ct_tp_src().into(),
        mk.ct_tp_src().into(),
        0xffff,
    )?;
    items.uint(
        "ct_tp_dst",
        k.ct_tp_dst().into(),
        mk.ct_tp_dst().into(),
        0xffff,
    )
}

/// The network and transport fields of [`write_match`], named as OVS
/// names them for the packet's EtherType (`arp_spa`, `icmp_type`, `nd_sll`).
fn write_l3_l4(
    items: &mut Items<'_, '_>,
    m: &Match,
    dl_type: Option<u16>,
    proto_done: bool,
) -> fmt::Result {
    let (k, mk) = (&m.key, &m.mask);
    let arp = dl_type == Some(EtherType::ARP.0);
    let v6 = dl_type == Some(EtherType::IPV6.0);
    let (src, dst, proto) = if arp {
        ("arp_spa", "arp_tpa", "arp_op")
    } else {
        ("nw_src", "nw_dst", "nw_proto")
    };
    items.ipv4(src, k.nw_src(), mk.nw_src())?;
    items.ipv4(dst, k.nw_dst(), mk.nw_dst())?;
    items.ipv6("ipv6_src", k.ipv6_src(), mk.ipv6_src())?;
    items.ipv6("ipv6_dst", k.ipv6_dst(), mk.ipv6_dst())?;
    items.uint(
        "ipv6_label",
        k.ipv6_label().into(),
        mk.ipv6_label().into(),
        0xf_ffff,
    )?;
    if !proto_done {
        items.uint(proto, k.nw_proto().into(), mk.nw_proto().into(), 0xff)?;
    }
    items.tos(k.nw_tos(), mk.nw_tos())?;
    items.uint("nw_ttl", k.nw_ttl().into(), mk.nw_ttl().into(), 0xff)?;
    items.frag(k.ip_frag(), mk.ip_frag())?;
    let icmp = dl_type.is_some()
        && mk.nw_proto() == 0xff
        && matches!((k.dl_type(), k.nw_proto()), (0x0800, 1) | (0x86dd, 58));
    // ICMP type and code by their names when exact and a byte (the names
    // take no mask and no larger value).
    let name = |icmp_name, port_name, v: u16, m: u16| {
        if icmp && m == 0xffff && v <= 0xff {
            icmp_name
        } else {
            port_name
        }
    };
    let (v, m) = (k.tp_src(), mk.tp_src());
    items.uint(
        name("icmp_type", "tp_src", v, m),
        v.into(),
        m.into(),
        0xffff,
    )?;
    let (v, m) = (k.tp_dst(), mk.tp_dst());
    items.uint(
        name("icmp_code", "tp_dst", v, m),
        v.into(),
        m.into(),
        0xffff,
    )?;
    items.tcp_flags(k.tcp_flags(), mk.tcp_flags())?;
    items.ipv6("nd_target", k.nd_target(), mk.nd_target())?;
    let (sha, tha) = if v6 {
        ("nd_sll", "nd_tll")
    } else {
        ("arp_sha", "arp_tha")
    };
    items.mac(sha, k.arp_sha(), mk.arp_sha())?;
    items.mac(tha, k.arp_tha(), mk.arp_tha())
}

/// Match fields only; the empty string for [`Match::ANY`].
impl fmt::Display for Match {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_match(&mut Items { f, first: true }, self, true)
    }
}

/// `priority=N[,cookie=0xC][,idle_timeout=S][,hard_timeout=S],<match>,actions=<actions>`.
impl fmt::Display for FlowSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut items = Items { f, first: true };
        items.item(format_args!("priority={}", self.priority))?;
        if self.cookie != 0 {
            items.item(format_args!("cookie=0x{:x}", self.cookie))?;
        }
        if self.timeouts.idle != 0 {
            items.item(format_args!("idle_timeout={}", self.timeouts.idle))?;
        }
        if self.timeouts.hard != 0 {
            items.item(format_args!("hard_timeout={}", self.timeouts.hard))?;
        }
        if let Some(vni) = self.tun_id {
            items.item(format_args!("tun_id=0x{vni:x}"))?;
        }
        write_match(&mut items, &self.matches, true)?;
        items.item(format_args!("actions={}", ActionList(&self.actions)))
    }
}

/// `[priority=N,][cookie=0xV/0xM,]<match>`; the empty string selects
/// every rule.
impl fmt::Display for FlowFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut items = Items { f, first: true };
        if let Some(p) = self.priority {
            items.item(format_args!("priority={p}"))?;
        }
        if let Some(c) = self.cookie {
            items.item(format_args!("cookie=0x{:x}/0x{:x}", c.value, c.mask))?;
        }
        write_match(&mut items, &self.matches, false)
    }
}

#[cfg(test)]
mod tests {
    use crate::parse::{parse_filter, parse_flow};

    #[test]
    fn canonical_text() {
        let cases = [
            ("actions=drop", "priority=32768,actions=drop"),
            (
                "in_port=1 ,dl_type=0x0800, nw_proto=17,tp_dst=53 actions=output:2",
                "priority=32768,udp,in_port=1,tp_dst=53,actions=output:2",
            ),
            (
                "priority=5,cookie=0x1f,arp,nw_proto=2,nw_dst=10.0.0.0/255.0.255.0,actions=normal",
                "priority=5,cookie=0x1f,arp,arp_tpa=10.0.0.0/255.0.255.0,arp_op=2,actions=normal",
            ),
            (
                "dl_type=0x0800,nw_proto=99,nw_src=10.1.2.3/16,actions=3,4",
                "priority=32768,ip,nw_src=10.1.0.0/16,nw_proto=99,actions=output:3,output:4",
            ),
            (
                "dl_vlan=7,dl_vlan_pcp=3,dl_dst=01:00:00:00:00:00/01:00:00:00:00:00,actions=strip_vlan,NORMAL",
                "priority=32768,dl_vlan=7,dl_vlan_pcp=3,dl_dst=01:00:00:00:00:00/01:00:00:00:00:00,\
                 actions=strip_vlan,normal",
            ),
            (
                "dl_type=0x88cc,dl_vlan=0xffff,actions=push_vlan:0x88a8,mod_vlan_vid:9,mod_dl_src:2:0:0:0:0:1",
                "priority=32768,dl_type=0x88cc,dl_vlan=0xffff,\
                 actions=push_vlan:0x88a8,mod_vlan_vid:9,mod_dl_src:02:00:00:00:00:01",
            ),
            (
                "vlan_tci=0x1000/0x1000,actions=drop",
                "priority=32768,vlan_tci=0x1000/0x1000,actions=drop",
            ),
            (
                "tcp,tp_src=0x400/0xfc00,actions=drop",
                "priority=32768,tcp,tp_src=0x400/0xfc00,actions=drop",
            ),
        ];
        for (input, want) in cases {
            let spec = parse_flow(input).unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(spec.to_string(), want, "{input}");
        }
    }

    #[test]
    fn filters() {
        for (input, want) in [
            ("", ""),
            ("priority=7", "priority=7"),
            ("tcp tp_dst=80 in_port=3", "tcp,in_port=3,tp_dst=80"),
            (
                "priority=0,ip,nw_dst=10.0.0.0/8",
                "priority=0,ip,nw_dst=10.0.0.0/8",
            ),
        ] {
            let filter = parse_filter(input).unwrap();
            assert_eq!(filter.to_string(), want, "{input}");
            assert_eq!(parse_filter(&filter.to_string()).unwrap(), filter);
        }
    }
}
