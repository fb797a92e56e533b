//! Flow rules: `flows = [...]` strings and `[[flow]] rule = "..."` tables,
//! parsed with [`nfv_flow::parse_flow`] and checked against the ports.

use nfv_flow::{Action, FlowSpec};
use nfv_ports::config::PortConfig;

use crate::check::Result;
use crate::error::Doc;
use crate::port::MAX_PORT_ID;
use crate::raw::S;

/// Parses one rule at `field` and checks that every port it names exists.
pub(crate) fn flow(
    doc: &Doc<'_>,
    field: &str,
    rule: &S<String>,
    ports: &[PortConfig],
) -> Result<FlowSpec> {
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
        if let Action::Output(p) = *a
            && !known(p)
        {
            return Err(doc.err(rule.span(), field, no_such_port("output", p, ports)));
        }
    }
    Ok(spec)
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
