//! Flow rules: `flows = [...]` strings and `[[flow]] rule = "..."` tables,
//! parsed with [`nfv_flow::parse_flow`], checked against the ports, and
//! `tun_id` resolved to the tunnel ports carrying it
//! ([`nfv_flow::tunnel`]).

use nfv_flow::{Action, FlowSpec, TunnelPort};
use nfv_ports::config::PortConfig;

use crate::check::Result;
use crate::error::Doc;
use crate::port::MAX_PORT_ID;
use crate::raw::S;

/// Parses one rule at `field`, checks that every port it names exists
/// and resolves its `tun_id` (one rule per tunnel port it selects).
pub(crate) fn flow(
    doc: &Doc<'_>,
    field: &str,
    rule: &S<String>,
    ports: &[PortConfig],
    defined: &Defined,
) -> Result<Vec<FlowSpec>> {
    let spec = nfv_flow::parse_flow(rule.get_ref()).map_err(|e| {
        doc.err(
            rule.span(),
            field,
            format!("cannot parse {:?}: {e}", rule.get_ref()),
        )
    })?;
    let known = |p: u16| p > MAX_PORT_ID || ports.iter().any(|port| port.id == p);
    let m = &spec.matches;
    if m.mask.in_port() != 0 && !known(m.key.in_port()) {
        return Err(doc.err(
            rule.span(),
            field,
            no_such_port("in_port", m.key.in_port(), ports),
        ));
    }
    for a in &spec.actions {
        let undefined = match *a {
            Action::Group(g) if !defined.groups.contains(&g) => Some(format!("group {g}")),
            Action::Meter(m) if !defined.meters.contains(&m) => Some(format!("meter {m}")),
            _ => None,
        };
        if let Some(what) = undefined {
            return Err(doc.err(
                rule.span(),
                field,
                format!("{what} is not defined (add it to `groups`/`meters`)"),
            ));
        }
        if let Action::Output(p) = *a
            && !known(p)
        {
            return Err(doc.err(rule.span(), field, no_such_port("output", p, ports)));
        }
    }
    nfv_flow::tunnel::resolve(spec, &tunnel_ports(ports))
        .map_err(|e| doc.err(rule.span(), field, e.to_string()))
}

/// The tunnel ports among `ports`, for [`nfv_flow::tunnel::resolve`].
pub(crate) fn tunnel_ports(ports: &[PortConfig]) -> Vec<TunnelPort> {
    ports
        .iter()
        .filter_map(|p| p.kind.tunnel_id().map(|vni| TunnelPort { no: p.id, vni }))
        .collect()
}

fn no_such_port(what: &str, id: u16, ports: &[PortConfig]) -> String {
    let sep = if what == "output" { ':' } else { '=' };
    let mut msg = format!("{what}{sep}{id}: no port has id {id}");
    if ports.is_empty() {
        msg.push_str(" (no ports are configured)");
    } else {
        let list: Vec<String> = ports
            .iter()
            .take(8)
            .map(|p| format!("{} ({})", p.id, p.name))
            .collect();
        let more = if ports.len() > 8 { ", ..." } else { "" };
        msg.push_str(&format!(" (ports: {}{more})", list.join(", ")));
    }
    msg
}

/// The ids `groups` and `meters` define, for the rules' `group:N` and
/// `meter:N`.
#[derive(Default)]
pub(crate) struct Defined {
    pub groups: std::collections::BTreeSet<u32>,
    pub meters: std::collections::BTreeSet<u32>,
}

/// Checks `groups` and `meters` (each parses, ids unique); returns their
/// texts and ids.
pub(crate) fn groups_and_meters(
    doc: &Doc<'_>,
    groups: &[S<String>],
    meters: &[S<String>],
) -> Result<(Vec<String>, Vec<String>, Defined)> {
    let mut defined = Defined::default();
    for (i, g) in groups.iter().enumerate() {
        let field = format!("groups[{i}]");
        let parsed = nfv_flow::parse_group(g.get_ref()).map_err(|e| {
            doc.err(
                g.span(),
                &field,
                format!("cannot parse {:?}: {e}", g.get_ref()),
            )
        })?;
        if !defined.groups.insert(parsed.id) {
            return Err(doc.err(
                g.span(),
                &field,
                format!("group {} is defined twice", parsed.id),
            ));
        }
    }
    for (i, m) in meters.iter().enumerate() {
        let field = format!("meters[{i}]");
        let parsed = nfv_flow::meter::parse_meter(m.get_ref()).map_err(|e| {
            doc.err(
                m.span(),
                &field,
                format!("cannot parse {:?}: {e}", m.get_ref()),
            )
        })?;
        if !defined.meters.insert(parsed.id) {
            return Err(doc.err(
                m.span(),
                &field,
                format!("meter {} is defined twice", parsed.id),
            ));
        }
    }
    let text = |v: &[S<String>]| v.iter().map(|s| s.get_ref().clone()).collect();
    Ok((text(groups), text(meters), defined))
}
