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
//! `tun_id` (a VNI, exact; not in filters), the connection tracker's
//! `ct_state` (`+trk+est-new`, `est|trk` or `0xV/0xM`), `ct_zone`,
//! `ct_mark`, `ct_label` and original-direction tuple (`ct_nw_src`, ...;
//! see [`crate::fields`]).
//! Numbers are decimal or `0x` hex. Actions: `output:N` or bare `N`,
//! `drop` (alone), `mod_dl_src:MAC`, `mod_dl_dst:MAC`, `mod_vlan_vid:VID`,
//! `push_vlan:0x8100|0x88a8`, `strip_vlan`, `normal`,
//! `set_field:VNI->tun_id` or `set_tunnel:VNI`, `ct(...)` and `ct_clear`
//! ([`crate::ct`]) (action names are case-insensitive, as in OVS). An
//! empty action list means drop.
//! `tun_id` in a match and in `set_field` are resolved against the
//! tunnel ports when the rule is installed ([`crate::tunnel`]).
//!
//! OpenFlow prerequisites are enforced as `ovs-ofctl` does: `nw_*` fields
//! need `ip` or `arp`; `tp_*` fields need `ip` with `nw_proto` tcp, udp,
//! sctp or icmp (for icmp, `tp_src`/`tp_dst` are type/code).

use crate::action::Action;
use crate::key::VLAN_VID_MASK;
use crate::rule::{DEFAULT_PRIORITY, FlowSpec, Match, Timeouts};
use core::net::Ipv4Addr;
use nfv_wire::EtherType;

pub use crate::fields::check_prerequisites;
use crate::fields::{MatchFields, is_field};
use crate::values::{E, bad, invalid, mac, port, uint, uint_in, uint_masked, vni};
pub use crate::values::{FlowParseError, MAX_PORT};

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
    /// Strict selection: the filter's match exactly, the table included
    /// only when the filter names one (without `table=` a strict
    /// `del-flows` acts in every table).
    pub fn same_match(&self, m: &Match) -> bool {
        if self.matches.mask.table() != 0 {
            return *m == self.matches;
        }
        let mut m = *m;
        m.key.set_table(0);
        m.mask.set_table(0);
        m == self.matches
    }

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
            Some(p) => spec.priority == p && self.same_match(&spec.matches),
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
    let table = b.table.unwrap_or(0);
    // A rule matches its table's number exactly (see `crate::key`).
    let mut matches = b.fields.finish()?;
    matches.key.set_table(table);
    matches.mask.set_table(u8::MAX);
    let dl_type = (matches.mask.dl_type() == 0xffff).then(|| matches.key.dl_type());
    for a in &actions {
        if let Action::Ct(ct) = a {
            crate::ct::check_against(ct, dl_type, matches.key.ct_state())?;
        }
    }
    for a in &actions {
        if let Action::GotoTable(n) | Action::Resubmit(n) = a
            && *n <= table
        {
            return Err(invalid(
                "actions",
                format!(
                    "{a} from table {table}: the pipeline only goes forward (to a table above {table})"
                ),
            ));
        }
    }
    Ok(FlowSpec {
        priority: b.priority.unwrap_or(DEFAULT_PRIORITY),
        cookie: b.cookie.map_or(0, |c| c.value),
        timeouts: b.timeouts,
        matches,
        tun_id: b.tun_id,
        actions,
    })
}

/// Parses a `del-flows` filter: match fields only (and optional `priority=`,
/// which makes the deletion strict). The empty string selects every rule;
/// without `table=` the filter selects rules in every table.
pub fn parse_filter(text: &str) -> Result<FlowFilter, FlowParseError> {
    let (b, _) = parse_items(text, true)?;
    let mut matches = b.fields.finish()?;
    if let Some(t) = b.table {
        matches.key.set_table(t);
        matches.mask.set_table(u8::MAX);
    }
    Ok(FlowFilter {
        priority: b.priority,
        matches,
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

#[derive(Default)]
struct Builder {
    fields: MatchFields,
    priority: Option<u16>,
    cookie: Option<CookieMatch>,
    timeouts: Timeouts,
    idle_set: bool,
    hard_set: bool,
    table: Option<u8>,
    tun_id: Option<u32>,
}

impl Builder {
    fn keyword(&mut self, word: &str) -> Result<(), E> {
        if self.fields.keyword(word)? {
            return Ok(());
        }
        let known = is_field(word)
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
                let t = table_id(name, value)?;
                if self.table.replace(t).is_some() {
                    return Err(E::DuplicateField(name.into()));
                }
                Ok(())
            }
            _ => self.fields.field(name, value),
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
    for tok in action_tokens(text).filter(|t| !t.is_empty()) {
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
    if let Some(i) = out.iter().position(|a| matches!(a, Action::GotoTable(_)))
        && i + 1 != out.len()
    {
        return Err(invalid(
            "actions",
            "goto_table must be the last action (it is an instruction: nothing runs after it)",
        ));
    }
    Ok(out)
}

/// The action list split at commas and spaces outside parentheses
/// (`resubmit(,2)` is one token).
fn action_tokens(text: &str) -> impl Iterator<Item = &str> {
    let mut depth = 0u32;
    text.split(move |c: char| {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ => {}
        }
        depth == 0 && (c == ',' || c.is_ascii_whitespace())
    })
}

/// One action (`NAME`, `NAME:ARG` or a bare port number); `None`: `drop`.
fn action(tok: &str) -> Result<Option<Action>, E> {
    if tok.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(Some(Action::Output(port("actions: output", tok)?)));
    }
    // Before the split at ':': ct's arguments may hold `set_field:`.
    if tok.eq_ignore_ascii_case("ct") || tok.get(..3).is_some_and(|t| t.eq_ignore_ascii_case("ct("))
    {
        return Ok(Some(Action::Ct(Box::new(crate::ct::parse_ct(tok)?))));
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
        "controller" => controller(arg)?,
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
        "strip_vlan" | "pop_vlan" => none(Action::StripVlan)?,
        "set_tunnel" => Action::SetTunnel(vni("actions: set_tunnel", need("a VNI")?)?),
        "set_field" => set_field(need("VALUE->FIELD")?)?,
        "normal" => none(Action::Normal)?,
        "ct_clear" => none(Action::CtClear)?,
        "goto_table" => {
            Action::GotoTable(table_id("actions: goto_table", need("a table number")?)?)
        }
        "meter" => {
            let id = uint_in(
                "actions: meter",
                need("a meter id")?,
                crate::action::MAX_METER_ID.into(),
                "a meter id (1..4294901760)",
            )?;
            if id == 0 {
                return Err(bad("actions: meter", "0", "a meter id (1..4294901760)"));
            }
            Action::Meter(id as u32)
        }
        "write_metadata" => {
            let (value, mask) = uint_masked(
                "actions: write_metadata",
                need("VALUE[/MASK]")?,
                u64::MAX,
                "a 64-bit number",
            )?;
            Action::WriteMetadata {
                value: value & mask,
                mask,
            }
        }
        _ if lname.starts_with("resubmit(") => resubmit(tok)?,
        _ => l3_l4_action(&lname, tok, arg, &lname)?,
    }))
}

/// A table number: 0..254 (255 is OpenFlow's "all tables").
fn table_id(field: &str, s: &str) -> Result<u8, E> {
    Ok(uint_in(field, s, 254, "a table number (0..254)")? as u8)
}

/// `resubmit(,N)`: the packet looked up in table N, here. The port form
/// (`resubmit(PORT,N)`, `resubmit:PORT`) changes the in_port and is not
/// supported.
fn resubmit(tok: &str) -> Result<Action, E> {
    let inner = tok
        .strip_prefix("resubmit(")
        .and_then(|t| t.strip_suffix(')'))
        .ok_or_else(|| bad("actions: resubmit", tok, "resubmit(,TABLE)"))?;
    match inner.split_once(',') {
        Some(("", t)) => Ok(Action::Resubmit(table_id("actions: resubmit", t.trim())?)),
        _ => Err(invalid(
            "actions: resubmit",
            format!("\"{tok}\": only resubmit(,TABLE) is supported (no in_port change)"),
        )),
    }
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

/// `controller`, `controller:N` or `controller:max_len=N`: the whole
/// packet, or its first N bytes, to the OpenFlow controllers.
fn controller(arg: Option<&str>) -> Result<Action, E> {
    let Some(a) = arg else {
        return Ok(Action::Controller(crate::action::CONTROLLER_WHOLE));
    };
    let a = a
        .strip_prefix("max_len=")
        .or_else(|| a.strip_prefix("(max_len="))
        .map(|a| a.trim_end_matches(')'))
        .unwrap_or(a);
    let n = uint_in("actions: controller", a, 0xffff, "a length (0..65535)")?;
    Ok(Action::Controller(n as u16))
}

/// `output:` a port number, or one of the reserved ports `in_port`,
/// `flood`, `all`, `normal` (as `ovs-ofctl` takes them).
fn output(arg: &str) -> Result<Action, E> {
    Ok(match arg.to_ascii_lowercase().as_str() {
        "in_port" => Action::InPort,
        "flood" => Action::Flood,
        "all" => Action::All,
        "normal" => Action::Normal,
        "controller" => Action::Controller(crate::action::CONTROLLER_WHOLE),
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
        "ipv6_src" | "ipv6_dst" => {
            let a: core::net::Ipv6Addr = value
                .parse()
                .map_err(|_| bad("actions: set_field", value, "an IPv6 address"))?;
            return Ok(if field == "ipv6_src" {
                Action::SetIpv6Src(a.octets())
            } else {
                Action::SetIpv6Dst(a.octets())
            });
        }
        "ipv6_label" => {
            let l = uint_in(
                "actions: set_field",
                value,
                0xf_ffff,
                "a flow label (0..0xfffff)",
            )?;
            return Ok(Action::SetIpv6Label(l as u32));
        }
        _ => {
            return Err(invalid(
                "actions: set_field",
                format!(
                    "field \"{field}\" is not supported (writable: eth_src, eth_dst, vlan_vid, \
                     nw_src, nw_dst, ipv6_src, ipv6_dst, ipv6_label, tp_src, tp_dst, nw_tos, ip_dscp, nw_ecn, \
                     nw_ttl, tun_id)"
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
#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
