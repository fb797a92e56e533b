//! Parser for the common subset of `ovs-ofctl add-flow` syntax.
//!
//! ```text
//! flow    := item* "actions" "=" action-list      (actions= must come last)
//! filter  := item*                                (no actions; empty = all)
//! item    := keyword | name "=" value             (separated by "," or spaces)
//! keyword := ip | arp | icmp | tcp | udp | sctp
//! ```
//!
//! Fields: `priority`, `cookie` (in filters `cookie=V/M`: rules whose
//! cookie has V's bits under mask M), `idle_timeout` and `hard_timeout`
//! (seconds; not in filters), `table` (0 only), `in_port`, `dl_src`,
//! `dl_dst` (MAC[/MASK]), `dl_type`, `dl_vlan` (VID, or 0xffff for "no
//! tag"), `dl_vlan_pcp`, `vlan_tci` (TCI[/MASK]), `nw_src`, `nw_dst`
//! (A.B.C.D[/PREFIX|/MASK]), `nw_proto`, `tp_src`, `tp_dst` (N[/MASK]),
//! `tun_id` (a VNI, exact; not in filters).
//! Numbers are decimal or `0x` hex. Actions: `output:N` or bare `N`,
//! `drop` (alone), `mod_dl_src:MAC`, `mod_dl_dst:MAC`, `mod_vlan_vid:VID`,
//! `push_vlan:0x8100|0x88a8`, `strip_vlan`, `normal`,
//! `set_field:VNI->tun_id` or `set_tunnel:VNI` (action names are
//! case-insensitive, as in OVS). An empty action list means drop.
//! `tun_id` in a match and in `set_field` are resolved against the
//! tunnel ports when the rule is installed ([`crate::tunnel`]).
//!
//! OpenFlow prerequisites are enforced as `ovs-ofctl` does: `nw_*` fields
//! need `ip` or `arp`; `tp_*` fields need `ip` with `nw_proto` tcp, udp,
//! sctp or icmp (for icmp, `tp_src`/`tp_dst` are type/code).

use crate::action::Action;
use crate::key::{FlowKey, PortNo, VLAN_PRESENT, VLAN_VID_MASK, mac_from_u64};
use crate::rule::{DEFAULT_PRIORITY, FlowSpec, Match, Timeouts};
use core::net::Ipv4Addr;
use nfv_wire::{EtherType, EthernetAddress, IpProtocol};

// The key stores these as plain numbers; named here for use in patterns.
const ETHERTYPE_IPV4: u16 = EtherType::IPV4.0;
const ETHERTYPE_ARP: u16 = EtherType::ARP.0;
const IPPROTO_ICMP: u8 = IpProtocol::ICMP.0;
const IPPROTO_TCP: u8 = IpProtocol::TCP.0;
const IPPROTO_UDP: u8 = IpProtocol::UDP.0;
const IPPROTO_SCTP: u8 = IpProtocol::SCTP.0;

/// Highest port number a rule may name (OpenFlow 1.0 `OFPP_MAX` - 1);
/// port 0 is invalid.
pub const MAX_PORT: PortNo = 0xfeff;

/// VLAN PCP bits of `vlan_tci`.
const VLAN_PCP_MASK: u16 = 0xe000;

/// Why a flow or filter string was rejected. Every message names the
/// offending field or token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlowParseError {
    #[error("unknown field \"{0}\"")]
    UnknownField(String),
    #[error("duplicate field \"{0}\"")]
    DuplicateField(String),
    #[error("missing actions=")]
    MissingActions,
    #[error("actions= is not allowed in a filter (match fields and priority only)")]
    ActionsInFilter,
    #[error("{0}: missing value (expected {0}=...)")]
    MissingValue(String),
    #[error("{field}: \"{value}\" is not {expected}")]
    BadValue {
        field: String,
        value: String,
        expected: &'static str,
    },
    #[error("actions: unknown action \"{0}\"")]
    UnknownAction(String),
    /// Anything else: a range, a prerequisite or a conflict.
    #[error("{field}: {reason}")]
    Invalid { field: String, reason: String },
}

use FlowParseError as E;

fn bad(field: &str, value: &str, expected: &'static str) -> FlowParseError {
    E::BadValue {
        field: field.into(),
        value: value.into(),
        expected,
    }
}

fn invalid(field: &str, reason: impl Into<String>) -> FlowParseError {
    E::Invalid {
        field: field.into(),
        reason: reason.into(),
    }
}

/// A `del-flows`/`dump-flows` selection: match fields, optionally a
/// cookie (`cookie=V/M`: rules whose cookie has V's bits under M) and,
/// for strict deletion, a priority.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct FlowFilter {
    pub matches: Match,
    pub priority: Option<u16>,
    pub cookie: Option<CookieMatch>,
}

/// `cookie=VALUE/MASK` in a filter (no mask: all 64 bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CookieMatch {
    pub value: u64,
    pub mask: u64,
}

impl CookieMatch {
    pub fn selects(&self, cookie: u64) -> bool {
        cookie & self.mask == self.value
    }
}

impl FlowFilter {
    /// Whether the filter's cookie (if any) selects a rule with `cookie`.
    pub fn cookie_selects(&self, cookie: u64) -> bool {
        self.cookie.is_none_or(|c| c.selects(cookie))
    }

    /// Whether the filter selects the rule `spec` (what `del-flows` with
    /// it removes, what `dump-flows` with it shows): with a priority
    /// (strict) the rule with exactly this match and priority, else every
    /// rule whose match the filter's covers; the cookie filter too.
    pub fn selects(&self, spec: &crate::rule::FlowSpec) -> bool {
        let matched = match self.priority {
            Some(p) => spec.priority == p && spec.matches == self.matches,
            None => spec.matches.is_covered_by(&self.matches),
        };
        matched && self.cookie_selects(spec.cookie)
    }
}

/// Parses an `add-flow` string such as
/// `priority=10,in_port=1,dl_type=0x0800,nw_dst=10.0.0.0/8,actions=output:2`.
pub fn parse_flow(text: &str) -> Result<FlowSpec, FlowParseError> {
    let (b, actions) = parse_items(text, false)?;
    let actions = parse_actions(actions.ok_or(E::MissingActions)?)?;
    Ok(FlowSpec {
        priority: b.priority.unwrap_or(DEFAULT_PRIORITY),
        cookie: b.cookie.map_or(0, |c| c.value),
        timeouts: b.timeouts,
        matches: b.finish()?,
        tun_id: b.tun_id,
        actions,
    })
}

/// Parses a `del-flows` filter: match fields only (and optional `priority=`,
/// which makes the deletion strict). The empty string selects every rule.
pub fn parse_filter(text: &str) -> Result<FlowFilter, FlowParseError> {
    let (b, _) = parse_items(text, true)?;
    Ok(FlowFilter {
        priority: b.priority,
        matches: b.finish()?,
        cookie: b.cookie,
    })
}

impl core::str::FromStr for FlowSpec {
    type Err = FlowParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_flow(s)
    }
}

impl core::str::FromStr for FlowFilter {
    type Err = FlowParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_filter(s)
    }
}

/// Checks OpenFlow prerequisites of a match: `nw_*` fields need dl_type ip
/// or arp; `tp_*` fields need ip with nw_proto tcp, udp, sctp or icmp.
/// Fields with an all-zero mask are wildcards and need nothing.
pub fn check_prerequisites(m: &Match) -> Result<(), FlowParseError> {
    let dl_type = (m.mask.dl_type() == 0xffff).then(|| m.key.dl_type());
    let ip_or_arp = matches!(dl_type, Some(ETHERTYPE_IPV4 | ETHERTYPE_ARP));
    for (field, used) in [
        ("nw_src", m.mask.nw_src() != 0),
        ("nw_dst", m.mask.nw_dst() != 0),
        ("nw_proto", m.mask.nw_proto() != 0),
    ] {
        if used && !ip_or_arp {
            return Err(invalid(
                field,
                "needs ip or arp first (dl_type=0x0800 or 0x0806)",
            ));
        }
    }
    let l4 = dl_type == Some(ETHERTYPE_IPV4)
        && m.mask.nw_proto() == 0xff
        && matches!(
            m.key.nw_proto(),
            IPPROTO_TCP | IPPROTO_UDP | IPPROTO_SCTP | IPPROTO_ICMP
        );
    for (field, used) in [
        ("tp_src", m.mask.tp_src() != 0),
        ("tp_dst", m.mask.tp_dst() != 0),
    ] {
        if used && !l4 {
            return Err(invalid(
                field,
                "needs tcp, udp, sctp or icmp first (ip with nw_proto=6, 17, 132 or 1)",
            ));
        }
    }
    Ok(())
}

/// Protocol shorthands: keyword, dl_type, nw_proto. The formatter prints
/// the first entry that fits, so specific ones come before `ip`.
pub(crate) const PROTOCOLS: &[(&str, u16, Option<u8>)] = &[
    ("icmp", ETHERTYPE_IPV4, Some(IPPROTO_ICMP)),
    ("tcp", ETHERTYPE_IPV4, Some(IPPROTO_TCP)),
    ("udp", ETHERTYPE_IPV4, Some(IPPROTO_UDP)),
    ("sctp", ETHERTYPE_IPV4, Some(IPPROTO_SCTP)),
    ("ip", ETHERTYPE_IPV4, None),
    ("arp", ETHERTYPE_ARP, None),
];

/// Match fields, each one a slot of [`Builder`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Slot {
    InPort,
    DlSrc,
    DlDst,
    DlType,
    DlVlan,
    DlVlanPcp,
    VlanTci,
    NwSrc,
    NwDst,
    NwProto,
    TpSrc,
    TpDst,
}
const N_SLOTS: usize = 12;

const FIELDS: &[(&str, Slot)] = &[
    ("in_port", Slot::InPort),
    ("dl_src", Slot::DlSrc),
    ("dl_dst", Slot::DlDst),
    ("dl_type", Slot::DlType),
    ("dl_vlan", Slot::DlVlan),
    ("dl_vlan_pcp", Slot::DlVlanPcp),
    ("vlan_tci", Slot::VlanTci),
    ("nw_src", Slot::NwSrc),
    ("nw_dst", Slot::NwDst),
    ("nw_proto", Slot::NwProto),
    ("tp_src", Slot::TpSrc),
    ("tp_dst", Slot::TpDst),
];

/// One field's value and mask, and the token that set it (a field name or
/// a protocol keyword), for duplicate and conflict messages.
#[derive(Clone, Copy, Debug)]
struct Setting {
    origin: &'static str,
    value: u64,
    mask: u64,
}

#[derive(Default)]
struct Builder {
    slots: [Option<Setting>; N_SLOTS],
    priority: Option<u16>,
    cookie: Option<CookieMatch>,
    timeouts: Timeouts,
    idle_set: bool,
    hard_set: bool,
    table: bool,
    tun_id: Option<u32>,
}

impl Builder {
    fn set(&mut self, slot: Slot, origin: &'static str, value: u64, mask: u64) -> Result<(), E> {
        let new = Setting {
            origin,
            value: value & mask,
            mask,
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

    fn keyword(&mut self, word: &str) -> Result<(), E> {
        if let Some(&(name, dl_type, proto)) = PROTOCOLS.iter().find(|p| p.0 == word) {
            self.set(Slot::DlType, name, dl_type.into(), 0xffff)?;
            if let Some(p) = proto {
                self.set(Slot::NwProto, name, p.into(), 0xff)?;
            }
            return Ok(());
        }
        let known = FIELDS.iter().any(|f| f.0 == word)
            || matches!(
                word,
                "priority" | "cookie" | "table" | "tun_id" | "idle_timeout" | "hard_timeout"
            );
        Err(if known {
            E::MissingValue(word.into())
        } else {
            E::UnknownField(word.into())
        })
    }

    fn field(&mut self, name: &str, value: &str, filter: bool) -> Result<(), E> {
        match name {
            "priority" => self.priority(name, value),
            "cookie" => self.cookie(name, value, filter),
            "idle_timeout" | "hard_timeout" => self.timeout(name, value, filter),
            "tun_id" => self.tun_id(name, value, filter),
            "table" => {
                uint_in(name, value, 0, "0 (the only table)")?;
                if std::mem::replace(&mut self.table, true) {
                    return Err(E::DuplicateField(name.into()));
                }
                Ok(())
            }
            _ => self.match_field(name, value),
        }
    }

    fn priority(&mut self, name: &str, value: &str) -> Result<(), E> {
        let p = uint_in(name, value, 0xffff, "a priority (0..65535)")? as u16;
        if self.priority.replace(p).is_some() {
            return Err(E::DuplicateField(name.into()));
        }
        Ok(())
    }

    /// `cookie=V`, or in a filter `cookie=V/MASK`.
    fn cookie(&mut self, name: &str, value: &str, filter: bool) -> Result<(), E> {
        let (v, m) = match value.split_once('/') {
            Some(_) if !filter => {
                return Err(invalid(
                    name,
                    "a mask only selects rules (del-flows, dump-flows)",
                ));
            }
            Some((v, m)) => (
                uint_in(name, v, u64::MAX, "a 64-bit number")?,
                uint_in(name, m, u64::MAX, "a 64-bit mask")?,
            ),
            None => (uint_in(name, value, u64::MAX, "a 64-bit number")?, u64::MAX),
        };
        let c = CookieMatch {
            value: v & m,
            mask: m,
        };
        if self.cookie.replace(c).is_some() {
            return Err(E::DuplicateField(name.into()));
        }
        Ok(())
    }

    /// `idle_timeout` or `hard_timeout` (not in a filter).
    fn timeout(&mut self, name: &str, value: &str, filter: bool) -> Result<(), E> {
        if filter {
            return Err(invalid(name, "not supported in a filter"));
        }
        let secs = uint_in(name, value, 0xffff, "seconds (0..65535, 0: none)")? as u16;
        let (slot, set) = if name == "idle_timeout" {
            (&mut self.timeouts.idle, &mut self.idle_set)
        } else {
            (&mut self.timeouts.hard, &mut self.hard_set)
        };
        if std::mem::replace(set, true) {
            return Err(E::DuplicateField(name.into()));
        }
        *slot = secs;
        Ok(())
    }

    /// `tun_id=VNI`, unmasked (not in a filter).
    fn tun_id(&mut self, name: &str, value: &str, filter: bool) -> Result<(), E> {
        if filter {
            return Err(invalid(
                name,
                "not supported in a filter (select the tunnel port with in_port=)",
            ));
        }
        if value.contains('/') {
            return Err(invalid(
                name,
                "masks are not supported (each tunnel port carries one VNI)",
            ));
        }
        let vni = vni(name, value)?;
        if self.tun_id.replace(vni).is_some() {
            return Err(E::DuplicateField(name.into()));
        }
        Ok(())
    }

    /// A packet field ([`FIELDS`]).
    fn match_field(&mut self, name: &str, value: &str) -> Result<(), E> {
        let Some(&(origin, slot)) = FIELDS.iter().find(|f| f.0 == name) else {
            if PROTOCOLS.iter().any(|p| p.0 == name) {
                return Err(invalid(name, "is a keyword and takes no value"));
            }
            return Err(E::UnknownField(name.into()));
        };
        let (v, m) = slot_value(slot, name, value)?;
        self.set(slot, origin, v, m)
    }

    /// Builds the (pre-masked) match and checks VLAN consistency and
    /// prerequisites.
    fn finish(&self) -> Result<Match, E> {
        let mut key = FlowKey::ZERO;
        let mut mask = FlowKey::ZERO;
        let val = |s: Slot| self.get(s).map_or((0, 0), |x| (x.value, x.mask));
        let (v, m) = val(Slot::InPort);
        key.set_in_port(v as u16);
        mask.set_in_port(m as u16);
        let (v, m) = val(Slot::DlType);
        key.set_dl_type(v as u16);
        mask.set_dl_type(m as u16);
        let (v, m) = val(Slot::DlSrc);
        key.set_dl_src(mac_from_u64(v));
        mask.set_dl_src(mac_from_u64(m));
        let (v, m) = val(Slot::DlDst);
        key.set_dl_dst(mac_from_u64(v));
        mask.set_dl_dst(mac_from_u64(m));
        let (v, m) = val(Slot::NwSrc);
        key.set_nw_src(v as u32);
        mask.set_nw_src(m as u32);
        let (v, m) = val(Slot::NwDst);
        key.set_nw_dst(v as u32);
        mask.set_nw_dst(m as u32);
        let (v, m) = val(Slot::NwProto);
        key.set_nw_proto(v as u8);
        mask.set_nw_proto(m as u8);
        let (v, m) = val(Slot::TpSrc);
        key.set_tp_src(v as u16);
        mask.set_tp_src(m as u16);
        let (v, m) = val(Slot::TpDst);
        key.set_tp_dst(v as u16);
        mask.set_tp_dst(m as u16);

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
        let (mut v, mut m) = val(Slot::VlanTci);
        for s in [vid, pcp].into_iter().flatten() {
            v |= s.value;
            m |= s.mask;
        }
        key.set_vlan_tci(v as u16);
        mask.set_vlan_tci(m as u16);

        let matches = Match {
            key: key.masked(&mask),
            mask,
        };
        check_prerequisites(&matches)?;
        Ok(matches)
    }
}

/// The value and mask `value` gives packet field `name` (in `slot`).
fn slot_value(slot: Slot, name: &str, value: &str) -> Result<(u64, u64), E> {
    Ok(match slot {
        Slot::InPort => (port(name, value)?.into(), 0xffff),
        Slot::DlSrc | Slot::DlDst => mac_masked(name, value)?,
        Slot::DlType => (
            uint_in(name, value, 0xffff, "an Ethertype (0..0xffff)")?,
            0xffff,
        ),
        Slot::DlVlan => {
            let vid = uint(value)
                .filter(|&v| v <= VLAN_VID_MASK.into() || v == 0xffff)
                .ok_or_else(|| bad(name, value, "a VLAN ID (0..4095, or 0xffff for no tag)"))?;
            if vid == 0xffff {
                (0, VLAN_PRESENT.into())
            } else {
                (
                    u64::from(VLAN_PRESENT) | vid,
                    u64::from(VLAN_PRESENT | VLAN_VID_MASK),
                )
            }
        }
        Slot::DlVlanPcp => {
            let pcp = uint_in(name, value, 7, "a VLAN priority (0..7)")?;
            (
                u64::from(VLAN_PRESENT) | pcp << 13,
                u64::from(VLAN_PRESENT | VLAN_PCP_MASK),
            )
        }
        Slot::VlanTci => uint_masked(name, value, 0xffff, "a 16-bit TCI")?,
        Slot::NwSrc | Slot::NwDst => ipv4_masked(name, value)?,
        Slot::NwProto => (uint_in(name, value, 0xff, "an IP protocol (0..255)")?, 0xff),
        Slot::TpSrc | Slot::TpDst => uint_masked(name, value, 0xffff, "a port (0..65535)")?,
    })
}

fn is_sep(b: u8) -> bool {
    b == b',' || b.is_ascii_whitespace()
}

/// Reads `text` item by item into a [`Builder`]; returns the text after
/// `actions=`, if present.
fn parse_items(text: &str, filter: bool) -> Result<(Builder, Option<&str>), E> {
    let s = text.as_bytes();
    let mut b = Builder::default();
    let mut pos = 0;
    loop {
        while pos < s.len() && is_sep(s[pos]) {
            pos += 1;
        }
        if pos == s.len() {
            return Ok((b, None));
        }
        let start = pos;
        while pos < s.len() && !is_sep(s[pos]) && s[pos] != b'=' {
            pos += 1;
        }
        let name = &text[start..pos];
        // `name = value` with spaces around `=` is accepted too.
        let mut eq = pos;
        while eq < s.len() && s[eq].is_ascii_whitespace() {
            eq += 1;
        }
        if eq == s.len() || s[eq] != b'=' {
            if name == "actions" {
                return Err(if filter {
                    E::ActionsInFilter
                } else {
                    E::MissingValue(name.into())
                });
            }
            b.keyword(name)?;
            continue;
        }
        if name.is_empty() {
            let tok = text[eq..]
                .split(|c: char| c == ',' || c.is_ascii_whitespace())
                .next();
            return Err(invalid(
                tok.unwrap_or("="),
                "expected a field name before \"=\"",
            ));
        }
        pos = eq + 1;
        if name == "actions" {
            if filter {
                return Err(E::ActionsInFilter);
            }
            return Ok((b, Some(&text[pos..])));
        }
        while pos < s.len() && s[pos].is_ascii_whitespace() {
            pos += 1;
        }
        let vstart = pos;
        while pos < s.len() && !is_sep(s[pos]) {
            pos += 1;
        }
        let value = &text[vstart..pos];
        if value.is_empty() {
            return Err(E::MissingValue(name.into()));
        }
        b.field(name, value, filter)?;
    }
}

/// An action list on its own (a group bucket's).
pub(crate) fn parse_action_list(text: &str) -> Result<Vec<Action>, FlowParseError> {
    parse_actions(text)
}

fn parse_actions(text: &str) -> Result<Vec<Action>, E> {
    let mut out = Vec::new();
    let mut drop = false;
    for tok in text
        .split(|c: char| c == ',' || c.is_ascii_whitespace())
        .filter(|t| !t.is_empty())
    {
        if drop {
            return Err(invalid("actions", "\"drop\" must be the only action"));
        }
        match action(tok)? {
            Some(a) => out.push(a),
            None if !out.is_empty() => {
                return Err(invalid("actions", "\"drop\" must be the only action"));
            }
            None => drop = true,
        }
    }
    Ok(out)
}

/// One action (`NAME`, `NAME:ARG` or a bare port number); `None`: `drop`.
fn action(tok: &str) -> Result<Option<Action>, E> {
    if tok.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(Some(Action::Output(port("actions: output", tok)?)));
    }
    let (name, arg) = match tok.split_once(':') {
        Some((n, a)) => (n, Some(a)),
        None => (tok, None),
    };
    let lname = name.to_ascii_lowercase();
    let need = |what: &str| match arg {
        Some(a) if !a.is_empty() => Ok(a),
        _ => Err(invalid("actions", format!("\"{tok}\" needs {what}"))),
    };
    let none = |a: Action| match arg {
        None => Ok(a),
        Some(_) => Err(invalid("actions", format!("\"{name}\" takes no argument"))),
    };
    Ok(Some(match lname.as_str() {
        "drop" => {
            if arg.is_some() {
                return Err(invalid("actions", "\"drop\" takes no argument"));
            }
            return Ok(None);
        }
        "output" => output(need("a port number")?)?,
        "mod_dl_src" => Action::SetDlSrc(mac("actions: mod_dl_src", need("a MAC address")?)?),
        "mod_dl_dst" => Action::SetDlDst(mac("actions: mod_dl_dst", need("a MAC address")?)?),
        "mod_vlan_vid" => {
            let a = need("a VLAN ID")?;
            let vid = uint_in(
                "actions: mod_vlan_vid",
                a,
                VLAN_VID_MASK.into(),
                "a VLAN ID (0..4095)",
            )?;
            Action::SetVlanVid(vid as u16)
        }
        "push_vlan" => push_vlan(need("an Ethertype (0x8100 or 0x88a8)")?)?,
        "strip_vlan" => none(Action::StripVlan)?,
        "set_tunnel" => Action::SetTunnel(vni("actions: set_tunnel", need("a VNI")?)?),
        "set_field" => set_field(need("VALUE->FIELD")?)?,
        "normal" => none(Action::Normal)?,
        _ => l3_l4_action(&lname, tok, arg, &lname)?,
    }))
}

/// `push_vlan:TPID`: 0x8100 or 0x88a8.
fn push_vlan(a: &str) -> Result<Action, E> {
    match uint(a).and_then(|t| u16::try_from(t).ok()).map(EtherType) {
        Some(tpid) if tpid.is_vlan() => Ok(Action::PushVlan(tpid.0)),
        _ => Err(bad("actions: push_vlan", a, "0x8100 or 0x88a8")),
    }
}

/// `set_field:VALUE->FIELD`.
fn set_field(a: &str) -> Result<Action, E> {
    match a.split_once("->") {
        Some((v, "tun_id")) => Ok(Action::SetTunnel(vni("actions: set_field", v)?)),
        Some((v, field)) => set_field_of(v, field),
        None => Err(bad("actions: set_field", a, "VALUE->FIELD")),
    }
}

/// The IPv4 and L4 rewrites (`mod_nw_*`, `mod_tp_*`, `dec_ttl`): `name`
/// lower-cased, `tok` the whole token, `arg` what follows its `:`.
/// Errors name `label`'s field (`actions: NAME`, or `actions: set_field`).
fn l3_l4_action(name: &str, tok: &str, arg: Option<&str>, label: &str) -> Result<Action, E> {
    let field = format!("actions: {label}");
    let need = |what: &str| match arg {
        Some(a) if !a.is_empty() => Ok(a),
        _ => Err(invalid("actions", format!("\"{tok}\" needs {what}"))),
    };
    let byte = |what: &'static str, max: u64| -> Result<u8, E> {
        Ok(uint_in(&field, need(what)?, max, what)? as u8)
    };
    let addr = || -> Result<u32, E> {
        let a = need("an IPv4 address")?;
        a.parse::<Ipv4Addr>()
            .map(u32::from)
            .map_err(|_| bad(&field, a, "an IPv4 address"))
    };
    Ok(match name {
        "mod_nw_src" => Action::SetNwSrc(addr()?),
        "mod_nw_dst" => Action::SetNwDst(addr()?),
        "mod_tp_src" => Action::SetTpSrc(port_number(&field, need("a port number (0..65535)")?)?),
        "mod_tp_dst" => Action::SetTpDst(port_number(&field, need("a port number (0..65535)")?)?),
        "mod_nw_tos" => {
            let tos = byte("a TOS byte (0..255, a multiple of 4)", 255)?;
            if tos & 0x03 != 0 {
                return Err(invalid(
                    &field,
                    format!(
                        "{tos} sets ECN bits: the TOS must be a multiple of 4 (mod_nw_ecn sets ECN)"
                    ),
                ));
            }
            Action::SetNwTos(tos)
        }
        "mod_nw_ecn" => Action::SetNwEcn(byte("an ECN value (0..3)", 3)?),
        "mod_nw_ttl" => Action::SetNwTtl(byte("a TTL (0..255)", 255)?),
        "in_port" | "flood" | "all" => match arg {
            None => output(name)?,
            Some(_) => return Err(invalid("actions", format!("\"{name}\" takes no argument"))),
        },
        "group" => {
            let a = need("a group id")?;
            let id = uint_in(&field, a, crate::action::MAX_GROUP_ID.into(), "a group id")?;
            Action::Group(id as u32)
        }
        "dec_ttl" => match arg {
            None => Action::DecTtl,
            Some(_) => return Err(invalid("actions", "\"dec_ttl\" takes no argument")),
        },
        _ => return Err(E::UnknownAction(tok.into())),
    })
}

/// `output:` a port number, or one of the reserved ports `in_port`,
/// `flood`, `all`, `normal` (as `ovs-ofctl` takes them).
fn output(arg: &str) -> Result<Action, E> {
    Ok(match arg.to_ascii_lowercase().as_str() {
        "in_port" => Action::InPort,
        "flood" => Action::Flood,
        "all" => Action::All,
        "normal" => Action::Normal,
        _ => Action::Output(port("actions: output", arg)?),
    })
}

/// `set_field:VALUE->FIELD` for the writable fields other than `tun_id`:
/// the same actions as their `mod_*` forms (OpenFlow 1.2+ names too).
fn set_field_of(value: &str, field: &str) -> Result<Action, E> {
    let name = match field {
        "dl_src" | "eth_src" => "mod_dl_src",
        "dl_dst" | "eth_dst" => "mod_dl_dst",
        "vlan_vid" | "dl_vlan" => "mod_vlan_vid",
        "nw_src" | "ip_src" => "mod_nw_src",
        "nw_dst" | "ip_dst" => "mod_nw_dst",
        "tp_src" | "tcp_src" | "udp_src" => "mod_tp_src",
        "tp_dst" | "tcp_dst" | "udp_dst" => "mod_tp_dst",
        "nw_ttl" => "mod_nw_ttl",
        "nw_ecn" | "ip_ecn" => "mod_nw_ecn",
        "nw_tos" => "mod_nw_tos",
        // OpenFlow's ip_dscp is the six-bit value, mod_nw_tos the byte.
        "ip_dscp" => {
            let dscp = uint_in("actions: set_field", value, 63, "a DSCP value (0..63)")?;
            return Ok(Action::SetNwTos((dscp as u8) << 2));
        }
        _ => {
            return Err(invalid(
                "actions: set_field",
                format!(
                    "field \"{field}\" is not supported (writable: eth_src, eth_dst, vlan_vid, \
                     nw_src, nw_dst, tp_src, tp_dst, nw_tos, ip_dscp, nw_ecn, nw_ttl, tun_id)"
                ),
            ));
        }
    };
    let tok = format!("{name}:{value}");
    match name {
        "mod_dl_src" => Ok(Action::SetDlSrc(mac("actions: set_field", value)?)),
        "mod_dl_dst" => Ok(Action::SetDlDst(mac("actions: set_field", value)?)),
        "mod_vlan_vid" => {
            // OpenFlow 1.2+ writes the VID with its present bit (0x1000).
            let vid = uint_in("actions: set_field", value, 0x1fff, "a VLAN ID (0..4095)")?;
            Ok(Action::SetVlanVid(vid as u16 & VLAN_VID_MASK))
        }
        _ => l3_l4_action(name, &tok, Some(value), "set_field"),
    }
}

/// A TCP/UDP port number: 16 bits.
fn port_number(field: &str, s: &str) -> Result<u16, E> {
    Ok(uint_in(field, s, 0xffff, "a port number (0..65535)")? as u16)
}

/// A VXLAN network identifier: 24 bits.
fn vni(field: &str, s: &str) -> Result<u32, E> {
    Ok(uint_in(field, s, 0xff_ffff, "a VNI (0..16777215)")? as u32)
}

/// Decimal or `0x` hex, digits only (no sign, no spaces).
fn uint(s: &str) -> Option<u64> {
    let (digits, radix) = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => (h, 16),
        None => (s, 10),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

fn uint_in(field: &str, s: &str, max: u64, expected: &'static str) -> Result<u64, E> {
    uint(s)
        .filter(|&v| v <= max)
        .ok_or_else(|| bad(field, s, expected))
}

/// `N` or `N/MASK`, both at most `max`.
fn uint_masked(field: &str, s: &str, max: u64, expected: &'static str) -> Result<(u64, u64), E> {
    match s.split_once('/') {
        None => Ok((uint_in(field, s, max, expected)?, max)),
        Some((v, m)) => Ok((
            uint_in(field, v, max, expected)?,
            uint_in(field, m, max, expected)?,
        )),
    }
}

fn port(field: &str, s: &str) -> Result<PortNo, E> {
    uint(s)
        .filter(|&p| (1..=u64::from(MAX_PORT)).contains(&p))
        .map(|p| p as PortNo)
        .ok_or_else(|| bad(field, s, "a port number (1..65279)"))
}

/// A MAC address (`xx:xx:xx:xx:xx:xx`, one or two hex digits an octet)
/// as the 48-bit number the flow key stores.
fn mac_u64(s: &str) -> Option<u64> {
    s.parse::<EthernetAddress>()
        .ok()
        .map(EthernetAddress::to_u64)
}

fn mac(field: &str, s: &str) -> Result<[u8; 6], E> {
    mac_u64(s)
        .map(mac_from_u64)
        .ok_or_else(|| bad(field, s, "a MAC address (xx:xx:xx:xx:xx:xx)"))
}

fn mac_masked(field: &str, s: &str) -> Result<(u64, u64), E> {
    let (v, m) = match s.split_once('/') {
        None => (s, None),
        Some((v, m)) => (v, Some(m)),
    };
    let expected = "a MAC address (xx:xx:xx:xx:xx:xx)";
    let value = mac_u64(v).ok_or_else(|| bad(field, v, expected))?;
    let mask = match m {
        None => (1 << 48) - 1,
        Some(m) => mac_u64(m).ok_or_else(|| bad(field, m, expected))?,
    };
    Ok((value, mask))
}

fn ipv4_masked(field: &str, s: &str) -> Result<(u64, u64), E> {
    let (a, m) = match s.split_once('/') {
        None => (s, None),
        Some((a, m)) => (a, Some(m)),
    };
    let addr: Ipv4Addr = a.parse().map_err(|_| bad(field, a, "an IPv4 address"))?;
    let mask = match m {
        None => u32::MAX,
        Some(m) if m.contains('.') => u32::from(
            m.parse::<Ipv4Addr>()
                .map_err(|_| bad(field, m, "a prefix length or netmask"))?,
        ),
        Some(m) => {
            if m.is_empty() || !m.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad(field, m, "a prefix length or netmask"));
            }
            match m.parse::<u32>() {
                Ok(n) if n <= 32 => prefix_mask(n),
                _ => {
                    return Err(invalid(
                        field,
                        format!("prefix length {m} out of range 0..32"),
                    ));
                }
            }
        }
    };
    Ok((u32::from(addr).into(), mask.into()))
}

/// The netmask of an `n`-bit prefix (`n` ≤ 32).
pub(crate) fn prefix_mask(n: u32) -> u32 {
    u32::MAX.checked_shl(32 - n).unwrap_or(0)
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
