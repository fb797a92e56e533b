//! The connection tracker's actions in rule text: `ct(...)` and
//! `ct_clear`, parsed, checked and printed in `ovs-ofctl`'s syntax
//! (`ovs-actions`(7), "The ct action").
//!
//! ```text
//! ct[([commit][,force][,zone=N][,table=T][,nat[(src|dst[=ADDRS[:PORTS]][,persistent][,hash|,random])]]
//!     [,exec(set_field:V[/M]->ct_mark,set_field:V[/M]->ct_label)])]
//! ADDRS := IPV4[-IPV4] | IPV6[-IPV6] | [IPV6][-[IPV6]]   (brackets needed before :PORTS)
//! PORTS := PORT[-PORT]
//! ```
//!
//! What is refused, and why (each with a message naming it):
//! - `force` without `commit` (as OVS's parser refuses it);
//! - `exec(...)` or `nat(src|dst...)` without `commit`: OVS's decoder
//!   accepts nothing but a bare `nat` in an uncommitted `ct` (a
//!   translation is set up for a connection being committed; a bare `nat`
//!   applies the one the connection already has);
//! - in `exec`, anything but `set_field` to `ct_mark` or `ct_label` (the
//!   only fields OVS lets it write), or one of them twice;
//! - `zone=` from a field or register (`zone=NXM_NX_REG0[0..15]`): this
//!   switch has no registers, so the zone is a number;
//! - `alg=` (FTP/TFTP helpers): not supported;
//! - `nat` with both `src` and `dst`, flags without either, `hash` with
//!   `random`, an address or port range that runs backwards, two address
//!   families in one range, port 0;
//! - checked against the rule's match ([`check_against`]): `ct` needs the
//!   rule to match IPv4 or IPv6 (`dl_type`), a NAT range the same family,
//!   and `ct(commit...)` a rule that does not match `+inv` packets, as
//!   OVS's `MATCH_INCONSISTENT` checks have it.
//!
//! `table=T` may name any table, the rule's own or an earlier one
//! included: OVS allows it, because the tracked packet is looked up again
//! from the start of table T (recirculated), not walked on from here as
//! `goto_table` and `resubmit` walk (which only go forward, see
//! [`crate::pipeline`]).
//!
//! The output parses back to the same [`CtAction`] and is OVS's text,
//! with two differences: `exec` prints `ct_mark` before `ct_label`
//! whatever order they were given in, and `nat`'s `persistent`, `hash`
//! and `random` are printed even without an address range (OVS drops them
//! from its output then).

use crate::values::{E, bad, invalid, uint_in, uint_masked, uint128_masked};
use core::fmt;
use core::net::{Ipv4Addr, Ipv6Addr};

/// `ct(...)`: send the packet through the connection tracker.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct CtAction {
    /// `commit`: store the connection (a new one starts in this
    /// packet's direction).
    pub commit: bool,
    /// `force`: a committed connection in the other direction is ended
    /// and committed anew in this one (needs `commit`).
    pub force: bool,
    /// `zone=N`: the tracker's zone (0 unless given).
    pub zone: u16,
    /// `table=T`: the table the tracked packet is looked up in again,
    /// its `ct_*` fields set; `None`: the tracked copy is not looked up
    /// again. The packet itself goes on with the actions after `ct`, its
    /// `ct_*` fields cleared (as OVS does).
    pub table: Option<u8>,
    /// `nat` or `nat(...)`.
    pub nat: Option<Nat>,
    /// `exec(set_field:V/M->ct_mark)`: value and mask stored with the
    /// committed connection (needs `commit`).
    pub mark: Option<(u32, u32)>,
    /// `exec(set_field:V/M->ct_label)`.
    pub label: Option<(u128, u128)>,
    /// Not written in rule text: the `metadata` the tracked copy goes
    /// back to table T with — the pipeline's value where this `ct` runs,
    /// set when a pipeline is resolved ([`crate::pipeline`]); 0 in a
    /// rule as installed.
    pub recirc_metadata: u64,
}

/// `nat` inside `ct(...)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nat {
    /// A bare `nat`: translate as the connection was set up to.
    Existing,
    /// `nat(src...)`: source translation for a connection being committed.
    Src(NatRange),
    /// `nat(dst...)`: destination translation.
    Dst(NatRange),
}

/// What `nat(src|dst...)` may translate to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct NatRange {
    /// `=ADDR[-ADDR]`; `None`: no address given (`nat(src)`).
    pub addrs: Option<NatAddrs>,
    /// `:PORT[-PORT]` (first, last); only with addresses.
    pub ports: Option<(u16, u16)>,
    /// `persistent`: the same address for a client across restarts.
    pub persistent: bool,
    /// `hash` or `random`: how a port is picked from the range.
    pub pick: PortPick,
}

/// An address range, first to last (equal for one address), one family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NatAddrs {
    V4(Ipv4Addr, Ipv4Addr),
    V6(Ipv6Addr, Ipv6Addr),
}

/// `nat`'s port selection flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PortPick {
    #[default]
    Default,
    Hash,
    Random,
}

/// The field of every error this module returns.
const FIELD: &str = "actions: ct";

/// Splits `s` at commas outside parentheses.
fn args(s: &str) -> impl Iterator<Item = &str> {
    let mut depth = 0u32;
    s.split(move |c: char| {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ => {}
        }
        depth == 0 && c == ','
    })
    .map(str::trim)
    .filter(|a| !a.is_empty())
}

/// `inner` of `name(inner)`, if `arg` has that shape.
fn call<'a>(arg: &'a str, name: &str) -> Option<&'a str> {
    arg.strip_prefix(name)?.strip_prefix('(')?.strip_suffix(')')
}

/// Parses `ct` (`tok` the whole token, `ct` or `ct(...)`, any case for
/// the name). Checks what needs no match; [`check_against`] the rest.
pub(crate) fn parse_ct(tok: &str) -> Result<CtAction, E> {
    let inner = if tok.eq_ignore_ascii_case("ct") {
        ""
    } else {
        tok.get(3..)
            .filter(|_| tok[..3].eq_ignore_ascii_case("ct("))
            .and_then(|t| t.strip_suffix(')'))
            .ok_or_else(|| bad(FIELD, tok, "ct(ARGUMENT,...)"))?
    };
    let mut ct = CtAction::default();
    let mut seen: Vec<&str> = Vec::new();
    let mut once = |key: &'static str| -> Result<(), E> {
        if seen.contains(&key) {
            return Err(invalid(FIELD, format!("\"{key}\" is given twice")));
        }
        seen.push(key);
        Ok(())
    };
    for arg in args(inner) {
        let (key, value) = match arg.split_once('=') {
            Some((k, v)) if !k.contains('(') => (k.trim(), Some(v.trim())),
            _ => (arg, None),
        };
        match (key, value) {
            ("commit", None) => {
                once("commit")?;
                ct.commit = true;
            }
            ("force", None) => {
                once("force")?;
                ct.force = true;
            }
            ("zone", Some(v)) => {
                once("zone")?;
                ct.zone = zone(v)?;
            }
            ("table", Some(v)) => {
                once("table")?;
                ct.table =
                    Some(uint_in("actions: ct: table", v, 254, "a table number (0..254)")? as u8);
            }
            ("alg", Some(v)) => {
                return Err(invalid(
                    FIELD,
                    format!(
                        "alg={v}: application layer gateways (alg=ftp, alg=tftp) are not supported"
                    ),
                ));
            }
            ("nat", None) => {
                once("nat")?;
                ct.nat = Some(Nat::Existing);
            }
            _ if call(arg, "nat").is_some() => {
                once("nat")?;
                ct.nat = Some(nat(call(arg, "nat").unwrap_or_default())?);
            }
            _ if call(arg, "exec").is_some() => {
                once("exec")?;
                exec(call(arg, "exec").unwrap_or_default(), &mut ct)?;
            }
            ("commit" | "force" | "nat", Some(_)) => {
                return Err(invalid(FIELD, format!("\"{key}\" takes no value")));
            }
            ("zone" | "table" | "alg", None) => {
                return Err(invalid(
                    FIELD,
                    format!("\"{key}\" needs a value ({key}=...)"),
                ));
            }
            _ => {
                return Err(invalid(
                    FIELD,
                    format!(
                        "\"{arg}\" is not a ct argument (commit, force, zone=N, table=T, nat, \
                         nat(...), exec(...))"
                    ),
                ));
            }
        }
    }
    if ct.force && !ct.commit {
        return Err(invalid(FIELD, "\"force\" needs \"commit\""));
    }
    if !ct.commit && (ct.mark.is_some() || ct.label.is_some()) {
        return Err(invalid(
            FIELD,
            "exec(...) needs \"commit\" (ct_mark and ct_label are stored with a connection \
             being committed)",
        ));
    }
    if !ct.commit && matches!(ct.nat, Some(Nat::Src(_) | Nat::Dst(_))) {
        return Err(invalid(
            FIELD,
            "nat(src...) and nat(dst...) need \"commit\" (a translation is set up for a \
             connection being committed; a bare \"nat\" applies the one it has)",
        ));
    }
    Ok(ct)
}

/// `zone=N`: a 16-bit number. OVS also takes a field or register here
/// (`zone=NXM_NX_REG0[0..15]`); this switch has none to read.
fn zone(v: &str) -> Result<u16, E> {
    let field = v.starts_with(|c: char| c.is_ascii_alphabetic());
    if field {
        return Err(invalid(
            FIELD,
            format!(
                "zone={v}: a zone from a field or register is not supported (this switch has \
                 no registers); give the zone as a number (0..65535)"
            ),
        ));
    }
    Ok(uint_in("actions: ct: zone", v, 0xffff, "a zone (0..65535)")? as u16)
}

/// The inside of `nat(...)`.
fn nat(inner: &str) -> Result<Nat, E> {
    const F: &str = "actions: ct: nat";
    let mut kind: Option<(bool, NatRange)> = None;
    let mut flags = NatRange::default();
    let mut any_flag = false;
    for arg in args(inner) {
        let (key, value) = match arg.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim())),
            None => (arg, None),
        };
        match (key, value) {
            ("src" | "dst", v) => {
                if kind.is_some() {
                    return Err(invalid(F, "give one of src and dst, once"));
                }
                let range = match v {
                    Some(r) => nat_range(r)?,
                    None => NatRange::default(),
                };
                kind = Some((key == "src", range));
            }
            ("persistent", None) => {
                any_flag = true;
                flags.persistent = true;
            }
            ("hash" | "random", None) => {
                any_flag = true;
                let pick = if key == "hash" {
                    PortPick::Hash
                } else {
                    PortPick::Random
                };
                if flags.pick != PortPick::Default && flags.pick != pick {
                    return Err(invalid(F, "\"hash\" and \"random\" exclude each other"));
                }
                flags.pick = pick;
            }
            _ => {
                return Err(invalid(
                    F,
                    format!(
                        "\"{arg}\" is not a nat argument (src[=ADDRS[:PORTS]], \
                         dst[=ADDRS[:PORTS]], persistent, hash, random)"
                    ),
                ));
            }
        }
    }
    match kind {
        None if any_flag => Err(invalid(
            F,
            "persistent, hash and random need src or dst (a bare \"nat\" takes no flags)",
        )),
        // `nat()`: as OVS, the same as a bare `nat`.
        None => Ok(Nat::Existing),
        Some((src, range)) => {
            let range = NatRange {
                persistent: flags.persistent,
                pick: flags.pick,
                ..range
            };
            Ok(if src {
                Nat::Src(range)
            } else {
                Nat::Dst(range)
            })
        }
    }
}

/// `ADDRS[:PORTS]` of `nat(src=...)`.
fn nat_range(r: &str) -> Result<NatRange, E> {
    const F: &str = "actions: ct: nat";
    const EXPECTED: &str = "an address range (ADDR[-ADDR][:PORT[-PORT]], IPv6 in [] before a port)";
    let whole = r;
    let (first, rest) = nat_addr(r).ok_or_else(|| bad(F, whole, EXPECTED))?;
    let (last, rest) = match rest.strip_prefix('-') {
        Some(t) => nat_addr(t).ok_or_else(|| bad(F, whole, EXPECTED))?,
        None => (first, rest),
    };
    let addrs = match (first, last) {
        (Addr::V4(a), Addr::V4(b)) if a <= b => NatAddrs::V4(a, b),
        (Addr::V6(a), Addr::V6(b)) if a <= b => NatAddrs::V6(a, b),
        (Addr::V4(_), Addr::V4(_)) | (Addr::V6(_), Addr::V6(_)) => {
            return Err(invalid(
                F,
                format!("\"{whole}\": the range ends below its start"),
            ));
        }
        _ => {
            return Err(invalid(
                F,
                format!("\"{whole}\": both ends of a range must be IPv4, or both IPv6"),
            ));
        }
    };
    let ports = match rest.strip_prefix(':') {
        None if rest.is_empty() => None,
        None => return Err(bad(F, whole, EXPECTED)),
        Some(p) => {
            let port = |s: &str| -> Result<u16, E> {
                Ok(
                    uint_in("actions: ct: nat", s, 0xffff, "a port (1..65535)").and_then(|p| {
                        match p {
                            0 => Err(bad("actions: ct: nat", s, "a port (1..65535)")),
                            p => Ok(p),
                        }
                    })? as u16,
                )
            };
            let (lo, hi) = match p.split_once('-') {
                Some((a, b)) => (port(a)?, port(b)?),
                None => (port(p)?, port(p)?),
            };
            if hi < lo {
                return Err(invalid(
                    F,
                    format!("\"{whole}\": the port range ends below its start"),
                ));
            }
            Some((lo, hi))
        }
    };
    Ok(NatRange {
        addrs: Some(addrs),
        ports,
        ..NatRange::default()
    })
}

#[derive(Clone, Copy)]
enum Addr {
    V4(Ipv4Addr),
    V6(Ipv6Addr),
}

/// One address at the start of `s` and what follows it: IPv4, IPv6 in
/// brackets, or IPv6 without (which then runs to the next `-` or the end:
/// a port needs the brackets).
fn nat_addr(s: &str) -> Option<(Addr, &str)> {
    if let Some(t) = s.strip_prefix('[') {
        let (a, rest) = t.split_once(']')?;
        return Some((Addr::V6(a.parse().ok()?), rest));
    }
    let v4_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    if let Ok(a) = s[..v4_end].parse::<Ipv4Addr>()
        && !s[v4_end..].starts_with(|c: char| c.is_ascii_hexdigit())
    {
        return Some((Addr::V4(a), &s[v4_end..]));
    }
    let v6_end = s
        .find(|c: char| !(c.is_ascii_hexdigit() || c == ':' || c == '.'))
        .unwrap_or(s.len());
    let a = s[..v6_end].parse::<Ipv6Addr>().ok()?;
    Some((Addr::V6(a), &s[v6_end..]))
}

/// The inside of `exec(...)`: `set_field:V[/M]->ct_mark` and
/// `set_field:V[/M]->ct_label`, each at most once.
fn exec(inner: &str, ct: &mut CtAction) -> Result<(), E> {
    const F: &str = "actions: ct: exec";
    for a in args(inner) {
        let set = a
            .split_once(':')
            .filter(|(n, _)| n.eq_ignore_ascii_case("set_field"))
            .and_then(|(_, rest)| rest.split_once("->"));
        let twice = |field: &str| invalid(F, format!("{field} is set twice"));
        match set {
            Some((v, "ct_mark")) => {
                let (v, m) = uint_masked(F, v, u32::MAX.into(), "a 32-bit mark (V[/M])")?;
                if ct.mark.replace((v as u32 & m as u32, m as u32)).is_some() {
                    return Err(twice("ct_mark"));
                }
            }
            Some((v, "ct_label")) => {
                let (v, m) = uint128_masked(F, v, "a 128-bit label (V[/M])")?;
                if ct.label.replace((v & m, m)).is_some() {
                    return Err(twice("ct_label"));
                }
            }
            _ => {
                return Err(invalid(
                    F,
                    format!(
                        "\"{a}\": only set_field:VALUE[/MASK]->ct_mark and \
                         set_field:VALUE[/MASK]->ct_label may run inside exec(...)"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Checks `ct` against the rule's match (`dl_type` exact, or `None`;
/// `ct_state` the match's masked value): the tracker follows IPv4 and
/// IPv6 connections only, a NAT range must be of the family the rule
/// matches, and an invalid packet cannot commit (OVS refuses all three
/// as an inconsistency between match and actions).
pub(crate) fn check_against(ct: &CtAction, dl_type: Option<u16>, ct_state: u8) -> Result<(), E> {
    const IPV4: u16 = nfv_wire::EtherType::IPV4.0;
    const IPV6: u16 = nfv_wire::EtherType::IPV6.0;
    if !matches!(dl_type, Some(IPV4 | IPV6)) {
        return Err(invalid(
            FIELD,
            "the rule must match ip or ipv6 (dl_type=0x0800 or 0x86dd): the tracker follows \
             IP connections",
        ));
    }
    if ct.commit && ct_state & crate::key::ct_state::INV != 0 {
        return Err(invalid(
            FIELD,
            "commit in a rule that matches ct_state=+inv: an invalid packet has no connection \
             to commit",
        ));
    }
    let range = match ct.nat {
        Some(Nat::Src(r) | Nat::Dst(r)) => r.addrs,
        _ => None,
    };
    match (range, dl_type) {
        (Some(NatAddrs::V4(..)), Some(IPV6)) => Err(invalid(
            FIELD,
            "nat with an IPv4 range in a rule that matches ipv6",
        )),
        (Some(NatAddrs::V6(..)), Some(IPV4)) => Err(invalid(
            FIELD,
            "nat with an IPv6 range in a rule that matches ip",
        )),
        _ => Ok(()),
    }
}

/// OVS's hexadecimal: `0x` and the digits, `0` for zero.
fn hex(v: u128) -> String {
    if v == 0 {
        "0".into()
    } else {
        format!("0x{v:x}")
    }
}

impl fmt::Display for CtAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = Vec::new();
        if self.commit {
            parts.push("commit".into());
        }
        if self.force {
            parts.push("force".into());
        }
        if let Some(t) = self.table {
            parts.push(format!("table={t}"));
        }
        if self.zone != 0 {
            parts.push(format!("zone={}", self.zone));
        }
        if let Some(n) = &self.nat {
            parts.push(n.to_string());
        }
        let mut exec = Vec::new();
        let masked = |(v, m): (u128, u128), full: u128| {
            if m == full {
                hex(v)
            } else {
                format!("{}/{}", hex(v), hex(m))
            }
        };
        if let Some((v, m)) = self.mark {
            let text = masked((v.into(), m.into()), u32::MAX.into());
            exec.push(format!("set_field:{text}->ct_mark"));
        }
        if let Some(l) = self.label {
            exec.push(format!("set_field:{}->ct_label", masked(l, u128::MAX)));
        }
        if !exec.is_empty() {
            parts.push(format!("exec({})", exec.join(",")));
        }
        write!(f, "ct({})", parts.join(","))
    }
}

impl fmt::Display for Nat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (kind, r) = match self {
            Nat::Existing => return f.write_str("nat"),
            Nat::Src(r) => ("src", r),
            Nat::Dst(r) => ("dst", r),
        };
        write!(f, "nat({kind}")?;
        if let Some(addrs) = r.addrs {
            // IPv6 in brackets when a port follows, as OVS prints it.
            let v6 = |a: Ipv6Addr| {
                if r.ports.is_some() {
                    format!("[{a}]")
                } else {
                    a.to_string()
                }
            };
            match addrs {
                NatAddrs::V4(a, b) if a == b => write!(f, "={a}")?,
                NatAddrs::V4(a, b) => write!(f, "={a}-{b}")?,
                NatAddrs::V6(a, b) if a == b => write!(f, "={}", v6(a))?,
                NatAddrs::V6(a, b) => write!(f, "={}-{}", v6(a), v6(b))?,
            }
            match r.ports {
                Some((lo, hi)) if lo == hi => write!(f, ":{lo}")?,
                Some((lo, hi)) => write!(f, ":{lo}-{hi}")?,
                None => {}
            }
        }
        if r.persistent {
            f.write_str(",persistent")?;
        }
        match r.pick {
            PortPick::Default => {}
            PortPick::Hash => f.write_str(",hash")?,
            PortPick::Random => f.write_str(",random")?,
        }
        f.write_str(")")
    }
}

#[cfg(test)]
#[path = "ct_tests.rs"]
mod tests;
