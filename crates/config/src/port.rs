//! `[[port]]` tables → [`PortConfig`]: the keys every port has here, the
//! rest by the port's type (`nfv_port_types`), then the checks that need
//! all of them (unique names and ids, ring peers).

use std::path::Path;

use nfv_mem::MemoryConfig;
use nfv_ports::config::PortConfig;
use nfv_settings::PortTable;

use crate::check::{self, Result, path};
use crate::error::Doc;
use crate::port_set::{
    ConflictKind, Peers, check_port_set, port_iface, port_ring_peer, port_ring_size,
};
use crate::raw::{RawPort, S};

/// Highest OpenFlow port number a port may have (0xff00 and up are
/// reserved ports).
pub const MAX_PORT_ID: u16 = 0xfeff;
pub use nfv_ports::config::MAX_PORT_NAME;
/// Most rx queues per port.
pub const MAX_RXQS: usize = 64;

/// The keys every port has, whatever its type.
const COMMON_KEYS: &[&str] = &["name", "id", "type", "rxqs"];

/// Validates one port on its own. `prefix` is its path (`port[2]`, or empty
/// for an inline table); relative paths are resolved against `base`.
pub(crate) fn port(
    doc: &Doc<'_>,
    prefix: &str,
    raw: &S<RawPort>,
    memory: &MemoryConfig,
    base: &Path,
) -> Result<PortConfig> {
    let p = raw.get_ref();
    let f = |key: &str| path(prefix, key);

    let name = check::name(doc, &p.name, &f("name"), MAX_PORT_NAME)?;
    let id = check::int_in(doc, &p.id, &f("id"), 1..=i64::from(MAX_PORT_ID))? as u16;
    let Some(ty) = nfv_port_types::port_type(p.kind.get_ref()) else {
        let names: Vec<(&str, ())> = nfv_port_types::PORT_TYPES
            .iter()
            .map(|t| (t.name(), ()))
            .collect();
        let message = nfv_settings::check::one_of(p.kind.get_ref(), &names)
            .err()
            .unwrap_or_default();
        return Err(doc.err(p.kind.span(), f("type"), message));
    };
    let table = PortTable::new(ty.name(), &name, raw.span(), &p.rest, memory, base);
    let setting_error = |e: nfv_settings::SettingError| {
        let is_array = matches!(table.value(&e.key), Some(toml::Value::Array(_)));
        let message = match crate::error::hint(&e.key, is_array) {
            Some(hint) if e.message.starts_with("invalid type") => {
                format!("{} ({hint})", e.message)
            }
            _ => e.message,
        };
        doc.err(e.span, f(&e.key), message)
    };
    let rxqs = table
        .int_or("rxqs", 1..=MAX_RXQS as i64, 1usize)
        .map_err(setting_error)?;

    for (key, v) in &p.rest {
        if COMMON_KEYS.contains(&key.as_str()) || ty.keys().contains(&key.as_str()) {
            continue;
        }
        let takers: Vec<String> = nfv_port_types::types_with_key(key)
            .map(|t| format!("{:?}", t.name()))
            .collect();
        let message = if takers.is_empty() {
            let known: Vec<String> = COMMON_KEYS
                .iter()
                .chain(ty.keys())
                .map(|k| format!("`{k}`"))
                .collect();
            format!(
                "unknown field `{key}`, expected one of {}",
                known.join(", ")
            )
        } else {
            format!(
                "not valid for a port of type {:?} (only for type {})",
                ty.name(),
                takers.join(" or ")
            )
        };
        return Err(doc.err(v.span(), f(key), message));
    }

    let kind = ty.parse(&table).map_err(setting_error)?;
    Ok(PortConfig {
        name,
        id,
        rxqs: kind.fixed_rxqs().unwrap_or(rxqs),
        kind,
    })
}

/// Checks across all ports of a file ([`check_port_set`]), reported at
/// the line of the offending key.
pub(crate) fn check_set(doc: &Doc<'_>, raws: &[S<RawPort>], ports: &[PortConfig]) -> Result<()> {
    let Err(c) = check_port_set(ports, Peers::Complete) else {
        return Ok(());
    };
    let (i, raw) = (c.port, raws[c.port].get_ref());
    let span = match c.kind {
        ConflictKind::Name => raw.name.span(),
        ConflictKind::Id => raw.id.span(),
        // The key, else the port's table.
        kind => raw.span_of(kind.field()).unwrap_or(raws[i].span()),
    };
    let j = c.other.unwrap_or(0);
    let pair = Pair {
        kind: c.kind,
        j,
        p: &ports[i],
        other: &ports[j],
        other_raw: raws[j].get_ref(),
    };
    Err(doc.err(
        span,
        format!("port[{i}].{}", c.kind.field()),
        pair.message(doc),
    ))
}

/// A conflict of port `p` with port `j` (`other`; port 0 when there is
/// none).
struct Pair<'a> {
    kind: ConflictKind,
    j: usize,
    p: &'a PortConfig,
    other: &'a PortConfig,
    other_raw: &'a RawPort,
}

impl Pair<'_> {
    fn message(&self, doc: &Doc<'_>) -> String {
        let (j, p, other) = (self.j, self.p, self.other);
        match self.kind {
            ConflictKind::Name | ConflictKind::Id => self.duplicate(doc),
            ConflictKind::Socket => crate::port_set::socket_conflict(
                p,
                Some(&other.kind),
                &format!("port[{j}] {:?}", other.name),
            ),
            ConflictKind::Iface => format!(
                "interface {:?} is already used by port[{j}] {:?}; one port per kernel interface",
                port_iface(p).unwrap_or_default(),
                other.name
            ),
            ConflictKind::NoPeer
            | ConflictKind::PeerNotRing
            | ConflictKind::PeerNotReciprocal
            | ConflictKind::PeerSize => self.ring_peer(),
            ConflictKind::NoLender | ConflictKind::NotLender | ConflictKind::LenderTaken => {
                self.lender()
            }
        }
    }

    /// A name or id an earlier port has.
    fn duplicate(&self, doc: &Doc<'_>) -> String {
        let (j, p, other, other_raw) = (self.j, self.p, self.other, self.other_raw);
        if self.kind == ConflictKind::Name {
            format!(
                "{:?} is already the name of port[{j}] (line {})",
                p.name,
                doc.line_of(other_raw.name.span().start)
            )
        } else {
            format!(
                "{} is already the id of port[{j}] {:?} (line {})",
                p.id,
                other.name,
                doc.line_of(other_raw.id.span().start)
            )
        }
    }

    /// A ring port's `peer` (or `size`) that does not fit.
    fn ring_peer(&self) -> String {
        let (p, other) = (self.p, self.other);
        match self.kind {
            ConflictKind::NoPeer => format!(
                "no port is named {:?}",
                port_ring_peer(p).unwrap_or_default()
            ),
            ConflictKind::PeerNotRing => format!(
                "port {:?} is of type {:?}, not \"ring\"",
                other.name,
                other.kind.type_name()
            ),
            ConflictKind::PeerNotReciprocal => format!(
                "ring port {:?} names {:?} as its peer, not {:?}; the two ends must name each other",
                other.name,
                port_ring_peer(other).unwrap_or_default(),
                p.name
            ),
            _ => format!(
                "{} differs from the size of its peer {:?} ({})",
                port_ring_size(p).unwrap_or(0),
                other.name,
                port_ring_size(other).unwrap_or(0)
            ),
        }
    }

    /// A `zero_copy` port's lender that does not fit.
    fn lender(&self) -> String {
        let (j, p, other) = (self.j, self.p, self.other);
        match self.kind {
            ConflictKind::NoLender => format!(
                "no port is named {:?}",
                p.kind.borrows_from().unwrap_or_default()
            ),
            ConflictKind::NotLender => format!(
                "port[{j}] {:?} is of type {:?}; zero_copy needs a vhost-user port",
                other.name,
                other.kind.type_name()
            ),
            _ => format!(
                "port[{j}] {:?} already receives into {:?}'s buffers; one borrower per VNF",
                other.name,
                p.kind.borrows_from().unwrap_or_default()
            ),
        }
    }
}
