//! Service chains: `[[chain]]` tables naming an ingress port, an ordered
//! list of VNF ports and an egress port. The switch installs the steering
//! rules itself (one `in_port=hop,actions=output:next` per hop), so a
//! chain is data, not a pile of hand-written flows.
//!
//! ```toml
//! [[chain]]
//! name = "ns1"            # unique
//! ingress = "gen0"        # any port: a "physical" port (north-south) or a VNF (east-west)
//! vnfs = ["vnf1", "vnf2"] # vhost-user ports, in traversal order (may be empty)
//! egress = "sink0"        # any port
//! priority = 1000         # of the steering rules; default 1000
//! ```

use nfv_ports::config::PortConfig;

use crate::check::{self, Result};
use crate::error::Doc;
use crate::raw::{RawChain, S};

/// A validated chain; ports are given by name and by id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainConfig {
    pub name: String,
    /// `[ingress, vnfs..., egress]` as (name, port id).
    pub hops: Vec<(String, u16)>,
    pub priority: u16,
}

impl ChainConfig {
    pub fn ingress(&self) -> &(String, u16) {
        &self.hops[0]
    }
    pub fn egress(&self) -> &(String, u16) {
        &self.hops[self.hops.len() - 1]
    }
    /// The VNF hops (everything between ingress and egress).
    pub fn vnfs(&self) -> &[(String, u16)] {
        &self.hops[1..self.hops.len() - 1]
    }
    /// The steering rules, in ovs-ofctl syntax.
    pub fn steering_rules(&self) -> Vec<String> {
        self.hops
            .windows(2)
            .map(|w| {
                format!(
                    "priority={},in_port={},actions=output:{}",
                    self.priority, w[0].1, w[1].1
                )
            })
            .collect()
    }
}

pub const DEFAULT_CHAIN_PRIORITY: i64 = 1000;

/// Validates every chain against the ports and against each other: names
/// unique, ports exist, VNFs are vhost-user ports, a port appears once per
/// chain, and no port feeds two chains (steering is by in_port).
pub(crate) fn chains(
    doc: &Doc<'_>,
    raw: &[S<RawChain>],
    ports: &[PortConfig],
) -> Result<Vec<ChainConfig>> {
    let mut out: Vec<ChainConfig> = Vec::new();
    // Port id → (chain name) of the chain whose steering reads from it.
    let mut feeds: Vec<(u16, String)> = Vec::new();
    for (i, c) in raw.iter().enumerate() {
        let prefix = format!("chain[{i}]");
        let c = c.get_ref();
        let name = check::name(doc, &c.name, &check::path(&prefix, "name"), 32)?;
        if out.iter().any(|o| o.name == name) {
            return Err(doc.err(
                c.name.span(),
                check::path(&prefix, "name"),
                format!("duplicate chain name {name:?}"),
            ));
        }
        let hops = hops(doc, &prefix, c, ports)?;
        check_repeats(doc, &hops)?;
        // Every hop but the egress feeds the chain.
        let feeding = &hops[..hops.len() - 1];
        check_feeds(doc, feeding, &feeds)?;
        feeds.extend(feeding.iter().map(|h| (h.id, name.clone())));
        let priority = match &c.priority {
            Some(p) => check::int_in(doc, p, &check::path(&prefix, "priority"), 0..=65535)? as u16,
            None => DEFAULT_CHAIN_PRIORITY as u16,
        };
        out.push(ChainConfig {
            name,
            hops: hops.into_iter().map(|h| (h.name, h.id)).collect(),
            priority,
        });
    }
    Ok(out)
}

/// One port of a chain, and the key that names it.
struct Hop<'a> {
    name: String,
    id: u16,
    at: &'a S<String>,
    field: String,
}

/// The chain's ports in order: ingress, the VNFs (each a port that faces
/// a VNF), egress.
fn hops<'a>(
    doc: &Doc<'_>,
    prefix: &str,
    c: &'a RawChain,
    ports: &[PortConfig],
) -> Result<Vec<Hop<'a>>> {
    let mut hops = vec![hop(doc, ports, &c.ingress, check::path(prefix, "ingress"))?.0];
    for (j, v) in c.vnfs.iter().enumerate() {
        let (hop, faces_vnf) = hop(doc, ports, v, format!("{prefix}.vnfs[{j}]"))?;
        if !faces_vnf {
            return Err(doc.err(
                v.span(),
                hop.field,
                format!("port {:?} is not a vhost-user port", hop.name),
            ));
        }
        hops.push(hop);
    }
    hops.push(hop(doc, ports, &c.egress, check::path(prefix, "egress"))?.0);
    Ok(hops)
}

/// The port `v` names, and whether it faces a VNF.
fn hop<'a>(
    doc: &Doc<'_>,
    ports: &[PortConfig],
    v: &'a S<String>,
    field: String,
) -> Result<(Hop<'a>, bool)> {
    match ports.iter().find(|p| p.name == *v.get_ref()) {
        Some(p) => Ok((
            Hop {
                name: p.name.clone(),
                id: p.id,
                at: v,
                field,
            },
            p.kind.faces_vnf(),
        )),
        None => Err(doc.err(
            v.span(),
            field,
            format!(
                "no port named {:?} (ports: {})",
                v.get_ref(),
                port_list(ports)
            ),
        )),
    }
}

/// A port appears once in a chain.
fn check_repeats(doc: &Doc<'_>, hops: &[Hop]) -> Result<()> {
    for k in 1..hops.len() {
        if hops[..k].iter().any(|h| h.id == hops[k].id) {
            return Err(doc.err(
                hops[k].at.span(),
                hops[k].field.clone(),
                format!("port {:?} appears twice in the chain", hops[k].name),
            ));
        }
    }
    Ok(())
}

/// No port of `feeding` already feeds another chain (`feeds`).
fn check_feeds(doc: &Doc<'_>, feeding: &[Hop], feeds: &[(u16, String)]) -> Result<()> {
    for h in feeding {
        if let Some((_, other)) = feeds.iter().find(|(id, _)| *id == h.id) {
            return Err(doc.err(
                h.at.span(),
                h.field.clone(),
                format!(
                    "port {:?} already feeds chain {other:?}; a port can feed only one chain",
                    h.name
                ),
            ));
        }
    }
    Ok(())
}

fn port_list(ports: &[PortConfig]) -> String {
    let names: Vec<&str> = ports.iter().take(8).map(|p| p.name.as_str()).collect();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}
