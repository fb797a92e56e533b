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
//!
//! A hop may also be a VNF scaled out, `{ select = ["fw1", "fw2"] }` (a
//! select group spreads flows over the instances, each flow staying on
//! one while it is live; an instance that disconnects or stops polling
//! has its flows spread over the others), or a VNF with a standby, `{ primary = "fw1", backup = "fw2" }` (a
//! fast_failover group: the backup gets the traffic while the primary is
//! not live). The switch installs those groups too, with ids
//! [`chain_group_id`]; the instances' traffic goes on to the next hop.

use nfv_ports::config::PortConfig;

use crate::check::{self, Result};
use crate::error::Doc;
use crate::raw::{RawChain, S};

/// A validated chain; ports are given by name and by id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainConfig {
    pub name: String,
    /// `[ingress, vnfs..., egress]` as (name, port id), every instance of
    /// a scaled-out or standby hop in turn.
    pub hops: Vec<(String, u16)>,
    pub priority: u16,
    /// How each stage (ingress, each VNF hop, egress) takes its packets
    /// and which of `hops` it spans.
    pub stages: Vec<Stage>,
}

/// A stage of a chain: `len` ports of `hops` from `first`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stage {
    pub kind: StageKind,
    pub first: usize,
    pub len: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StageKind {
    One,
    /// `{ select = [...] }`: a select group over the instances.
    Select,
    /// `{ primary, backup }`: a fast_failover group, primary first.
    Failover,
}

/// The id of the group stage `stage` of chain `chain` (its index in the
/// config) sends through: far above ids people pick, below OpenFlow's
/// reserved ones.
pub fn chain_group_id(chain: usize, stage: usize) -> u32 {
    0xc000_0000 | ((chain as u32 & 0xffff) << 8) | (stage as u32 & 0xff)
}

impl ChainConfig {
    /// A chain of single ports (no scaled-out or standby hop).
    pub fn new(name: String, hops: Vec<(String, u16)>, priority: u16) -> ChainConfig {
        let stages = (0..hops.len())
            .map(|first| Stage {
                kind: StageKind::One,
                first,
                len: 1,
            })
            .collect();
        ChainConfig {
            name,
            hops,
            priority,
            stages,
        }
    }

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
    /// The steering rules of chain number `index` (its place in the
    /// config), in ovs-ofctl syntax: every port of a stage sends to the
    /// next stage (its port, or its group).
    pub fn steering_rules_of(&self, index: usize) -> Vec<String> {
        let mut out = Vec::new();
        for (s, w) in self.stages.windows(2).enumerate() {
            let (from, to) = (w[0], w[1]);
            let action = match to.kind {
                StageKind::One => format!("output:{}", self.hops[to.first].1),
                _ => format!("group:{}", chain_group_id(index, s + 1)),
            };
            for (_, port) in &self.hops[from.first..from.first + from.len] {
                out.push(format!(
                    "priority={},in_port={port},actions={action}",
                    self.priority
                ));
            }
        }
        out
    }

    /// [`Self::steering_rules_of`] for a chain whose hops are all single
    /// ports (no group ids involved).
    pub fn steering_rules(&self) -> Vec<String> {
        self.steering_rules_of(0)
    }

    /// The groups chain number `index` sends through, as `add-group`
    /// text: one per scaled-out or standby hop.
    pub fn groups_of(&self, index: usize) -> Vec<String> {
        self.stages
            .iter()
            .enumerate()
            .filter_map(|(s, st)| {
                let ports = &self.hops[st.first..st.first + st.len];
                let id = chain_group_id(index, s);
                match st.kind {
                    StageKind::One => None,
                    StageKind::Select => Some(format!(
                        "group_id={id},type=select{}",
                        ports
                            .iter()
                            .map(|(_, p)| format!(",bucket=watch_port:{p},output:{p}"))
                            .collect::<String>()
                    )),
                    StageKind::Failover => Some(format!(
                        "group_id={id},type=fast_failover{}",
                        ports
                            .iter()
                            .map(|(_, p)| format!(",bucket=watch_port:{p},output:{p}"))
                            .collect::<String>()
                    )),
                }
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
        let (hops, stages) = hops(doc, &prefix, c, ports)?;
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
            stages,
        });
    }
    Ok(out)
}

/// One port of a chain, and the key that names it.
struct Hop {
    name: String,
    id: u16,
    span: std::ops::Range<usize>,
    field: String,
}

/// The chain's ports in order: ingress, the VNFs (each a port that faces
/// a VNF; a scaled-out or standby hop's instances in turn), egress; and
/// the stages they form.
fn hops(
    doc: &Doc<'_>,
    prefix: &str,
    c: &RawChain,
    ports: &[PortConfig],
) -> Result<(Vec<Hop>, Vec<Stage>)> {
    let mut hops = vec![hop(doc, ports, &c.ingress, check::path(prefix, "ingress"))?.0];
    let mut stages = vec![Stage {
        kind: StageKind::One,
        first: 0,
        len: 1,
    }];
    let vnf = |v: &S<String>, field: String| -> Result<Hop> {
        let (hop, faces_vnf) = hop(doc, ports, v, field)?;
        if !faces_vnf {
            return Err(doc.err(
                v.span(),
                hop.field,
                format!("port {:?} is not a vhost-user port", hop.name),
            ));
        }
        Ok(hop)
    };
    for (j, v) in c.vnfs.iter().enumerate() {
        let first = hops.len();
        let kind = vnf_stage(doc, v, format!("{prefix}.vnfs[{j}]"), &vnf, &mut hops)?;
        stages.push(Stage {
            kind,
            first,
            len: hops.len() - first,
        });
    }
    stages.push(Stage {
        kind: StageKind::One,
        first: hops.len(),
        len: 1,
    });
    hops.push(hop(doc, ports, &c.egress, check::path(prefix, "egress"))?.0);
    Ok((hops, stages))
}

/// One VNF hop `v`: its ports pushed on `hops` (each checked by `vnf`),
/// and how the stage takes packets.
fn vnf_stage(
    doc: &Doc<'_>,
    v: &S<toml::Value>,
    field: String,
    vnf: &dyn Fn(&S<String>, String) -> Result<Hop>,
    hops: &mut Vec<Hop>,
) -> Result<StageKind> {
    // A name, or a table: every name in it is placed at the table.
    let named = |name: &toml::Value, sub: String| -> Result<Hop> {
        match name.as_str() {
            Some(n) => vnf(&S::new(v.span(), n.to_string()), sub),
            None => Err(doc.err(v.span(), sub, format!("{name} is not a port name"))),
        }
    };
    Ok(match v.get_ref() {
        toml::Value::String(_) => {
            hops.push(named(v.get_ref(), field)?);
            StageKind::One
        }
        toml::Value::Table(t) if t.len() == 1 && t.contains_key("select") => {
            let list = t["select"].as_array().cloned().unwrap_or_default();
            if list.len() < 2 || list.len() > nfv_flow::group::MAX_BUCKETS {
                return Err(doc.err(
                    v.span(),
                    field,
                    format!(
                        "select names {} instances: give 2 to {}",
                        list.len(),
                        nfv_flow::group::MAX_BUCKETS
                    ),
                ));
            }
            for (k, name) in list.iter().enumerate() {
                hops.push(named(name, format!("{field}.select[{k}]"))?);
            }
            StageKind::Select
        }
        toml::Value::Table(t)
            if t.len() == 2 && t.contains_key("primary") && t.contains_key("backup") =>
        {
            hops.push(named(&t["primary"], format!("{field}.primary"))?);
            hops.push(named(&t["backup"], format!("{field}.backup"))?);
            StageKind::Failover
        }
        _ => {
            return Err(doc.err(
                v.span(),
                field,
                "a VNF hop is a port name, { select = [\"a\", \"b\", ...] } or \
                 { primary = \"a\", backup = \"b\" }"
                    .to_string(),
            ));
        }
    })
}

/// The port `v` names, and whether it faces a VNF.
fn hop(doc: &Doc<'_>, ports: &[PortConfig], v: &S<String>, field: String) -> Result<(Hop, bool)> {
    match ports.iter().find(|p| p.name == *v.get_ref()) {
        Some(p) => Ok((
            Hop {
                name: p.name.clone(),
                id: p.id,
                span: v.span(),
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
                hops[k].span.clone(),
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
                h.span.clone(),
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

/// A chain's groups take ids of their own ([`chain_group_id`]): none may
/// be one of the config's `groups`.
pub(crate) fn check_group_ids(
    doc: &Doc<'_>,
    raw: &[S<RawChain>],
    chains: &[ChainConfig],
    groups: &std::collections::BTreeSet<u32>,
) -> Result<()> {
    for (i, c) in chains.iter().enumerate() {
        for (s, st) in c.stages.iter().enumerate() {
            let id = chain_group_id(i, s);
            if st.kind != StageKind::One && groups.contains(&id) {
                return Err(doc.err(
                    raw[i].span(),
                    format!("chain[{i}]"),
                    format!(
                        "the chain's group id {id} is one of `groups`: give that group another id"
                    ),
                ));
            }
        }
    }
    Ok(())
}
