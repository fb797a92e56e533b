//! What the datapath would do with one packet (`nfvswitch ctl trace`, the
//! counterpart of OVS's `ofproto/trace`): which tier decides it, the rule
//! it hits, each action with the packet's fields after it, the ports it
//! leaves by, and what the PMD's caches would keep. It runs on the
//! control plane over the current table snapshot and uses the decision's
//! own rules ([`crate::decision::megaflow_of`], [`nfv_flow::port_wide`]),
//! so it cannot drift from what the PMDs do. It sends nothing and learns
//! nothing.

use crate::decision::megaflow_of;
use nfv_flow::key::VLAN_PRESENT;
use nfv_flow::pipeline::{self, Stage};
use nfv_flow::table::FlowTable;
use nfv_flow::{Action, FlowKey, Match, PortNo, Rule};
use nfv_wire::{EtherType, IpProtocol};
use std::sync::Arc;

/// How the packet is decided.
#[derive(Clone, Debug, PartialEq)]
pub enum Tier {
    /// Its in_port has a port-wide rule: no key, no lookup, no cache.
    PortWide,
    /// The classifier, after visiting this many subtables; a repeat of
    /// the packet is then an EMC hit, and one differing only outside
    /// `megaflow` a megaflow hit (`None`: not cached as a megaflow).
    Classifier {
        probes: usize,
        megaflow: Option<Match>,
    },
}

/// One action as the packet meets it.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    pub action: Action,
    /// The packet's fields after the action.
    pub after: FlowKey,
    /// What happened, in words, where the action's text does not say it.
    pub note: Option<String>,
}

/// The trace of one packet.
#[derive(Clone, Debug)]
pub struct Trace {
    pub packet: FlowKey,
    pub tier: Tier,
    /// The rule that matched (`None`: no rule matches; dropped and counted
    /// `no_match`).
    pub rule: Option<Arc<Rule>>,
    /// Every table consulted, in order, with the rule each matched (one
    /// stage unless the rule goes on with `goto_table`/`resubmit`).
    pub stages: Vec<Stage>,
    pub steps: Vec<Step>,
    /// Actions after the last output: never applied.
    pub unused: Vec<Action>,
    /// Where the packet (or a copy) leaves, in order.
    pub outputs: Vec<Output>,
}

/// Where a packet leaves.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Output {
    Port(PortNo),
    /// `normal`: the port MAC learning has for dl_dst when the packet
    /// comes (none: every port but the in_port; the in_port: dropped).
    Normal,
    /// `flood` / `all`: every port but the in_port.
    Flood,
    /// `group:N`: the group's buckets decide (see the step's note).
    Group(u32),
}

/// Traces `packet` (its `in_port` set) through `table`.
pub fn trace(table: &FlowTable, packet: FlowKey) -> Trace {
    let in_port = packet.in_port();
    let (mut tier, rule, mask) = match table.port_wide.rule_for(in_port) {
        Some(r) => (Tier::PortWide, Some(r.clone()), None),
        None => {
            let found = table.classifier.lookup_with_mask(&packet);
            // Misses are cached too (the answer "no rule").
            let megaflow = megaflow_of(&found).map(|mask| Match {
                key: packet.masked(&mask),
                mask,
            });
            let tier = Tier::Classifier {
                probes: found.probes,
                megaflow,
            };
            (tier, found.rule.cloned(), Some(found.mask))
        }
    };
    let mut t = Trace {
        packet,
        tier: tier.clone(),
        rule: rule.clone(),
        stages: vec![Stage {
            table: packet.table(),
            key: packet,
            rule: rule.clone(),
        }],
        steps: Vec::new(),
        unused: Vec::new(),
        outputs: Vec::new(),
    };
    let Some(rule) = rule else {
        return t;
    };
    // A pipeline: every table's rule, and the actions they add up to, as
    // the PMD resolves it (with the union of the lookups' masks cached).
    let actions = if rule.pipeline {
        let res = pipeline::resolve(&table.classifier, &packet, &rule, mask.unwrap_or_default());
        if let Tier::Classifier { megaflow, .. } = &mut tier {
            *megaflow =
                nfv_flow::megaflow::MegaflowCache::worth_caching(&res.mask).then(|| Match {
                    key: packet.masked(&res.mask),
                    mask: res.mask,
                });
        }
        t.tier = tier;
        t.stages = res.stages;
        res.actions
    } else {
        rule.spec.actions.clone()
    };
    // As the interpreter: nothing after the last output is applied.
    let last = actions.iter().rposition(Action::is_output);
    let applied = last.map_or(0, |l| l + 1);
    t.unused = actions[applied..].to_vec();
    let mut k = packet;
    // The tags a push_vlan covered, innermost first: the key holds only
    // the outer one, and strip_vlan brings the one below back.
    let mut covered = Vec::new();
    for (i, &action) in actions[..applied].iter().enumerate() {
        // As the interpreter: an expired TTL drops the packet, and no
        // later action applies (copies already sent stay sent).
        let expired = action == Action::DecTtl && is_ip(&k) && k.nw_ttl() <= 1;
        let note = apply(
            &mut k,
            action,
            in_port,
            &table.groups,
            &mut covered,
            &mut t.outputs,
        );
        t.steps.push(Step {
            action,
            after: k,
            note,
        });
        if expired {
            t.unused = actions[i + 1..].to_vec();
            break;
        }
    }
    t
}

fn is_ip(k: &FlowKey) -> bool {
    k.dl_type() == EtherType::IPV4.0 || k.dl_type() == EtherType::IPV6.0
}

/// `action`'s effect on the fields `k` ([`nfv_flow::pipeline::edit_key`],
/// as the later tables see them), its outputs, and a note.
fn apply(
    k: &mut FlowKey,
    action: Action,
    in_port: PortNo,
    groups: &nfv_flow::table::Groups,
    covered: &mut Vec<u16>,
    outputs: &mut Vec<Output>,
) -> Option<String> {
    let before = *k;
    nfv_flow::pipeline::edit_key(k, &action);
    match action {
        Action::PushVlan(_) if before.vlan_tci() & VLAN_PRESENT != 0 => {
            covered.push(before.vlan_tci());
        }
        Action::StripVlan => {
            if before.vlan_tci() & VLAN_PRESENT == 0 {
                return Some("no tag: nothing to strip".into());
            }
            return Some(match covered.pop() {
                Some(tci) => {
                    k.set_vlan_tci(tci);
                    "outer tag removed: the tag it was pushed over is the outer one again".into()
                }
                None => "outer tag removed (an inner tag, if any, is now the outer one)".into(),
            });
        }
        Action::SetNwSrc(_)
        | Action::SetNwDst(_)
        | Action::SetIpv6Src(_)
        | Action::SetIpv6Dst(_)
        | Action::SetIpv6Label(_)
        | Action::SetTpSrc(_)
        | Action::SetTpDst(_)
        | Action::SetNwTos(_)
        | Action::SetNwEcn(_)
        | Action::SetNwTtl(_)
        | Action::DecTtl => return Some(ip_note(&before, action)),
        Action::Meter(m) => {
            return Some(format!(
                "meter {m}: on while within its rate, else dropped (meter_drop)"
            ));
        }
        Action::SetTunnel(vni) => {
            return Some(format!(
                "tunnel outputs send with VNI {vni} (checked against the tunnel port at install)"
            ));
        }
        Action::Output(p) if p == in_port => {
            return Some("skipped: the packet's own in_port (OpenFlow)".into());
        }
        Action::Output(p) => outputs.push(Output::Port(p)),
        Action::Controller(n) => return Some(controller_note(n)),
        Action::InPort => outputs.push(Output::Port(in_port)),
        Action::Group(g) => {
            outputs.push(Output::Group(g));
            return Some(group_note(g, groups));
        }
        Action::Flood | Action::All => {
            outputs.push(Output::Flood);
            return Some("to every port but the in_port".into());
        }
        Action::Normal => {
            outputs.push(Output::Normal);
            return Some(
                "MAC learning: to the port dl_dst was learnt on, flooded if none (or multicast), \
                 dropped if that is the in_port"
                    .into(),
            );
        }
        Action::SetDlSrc(_)
        | Action::SetDlDst(_)
        | Action::SetVlanVid(_)
        | Action::PushVlan(_)
        | Action::GotoTable(_)
        | Action::Resubmit(_)
        | Action::WriteMetadata { .. } => {}
    }
    None
}

/// What an IPv4 or IPv6 rewrite did to a packet with the fields `k`
/// (before it), in words.
fn ip_note(k: &FlowKey, action: Action) -> String {
    let ipv4 = k.dl_type() == EtherType::IPV4.0;
    let ipv6 = k.dl_type() == EtherType::IPV6.0;
    let l4 = matches!(IpProtocol(k.nw_proto()), IpProtocol::TCP | IpProtocol::UDP);
    match action {
        Action::SetNwSrc(_) | Action::SetNwDst(_) if !ipv4 => "not IPv4: unchanged",
        Action::SetNwSrc(_) | Action::SetNwDst(_) => "IPv4 and TCP/UDP checksums updated",
        Action::SetIpv6Src(_) | Action::SetIpv6Dst(_) | Action::SetIpv6Label(_) if !ipv6 => {
            "not IPv6: unchanged"
        }
        Action::SetIpv6Src(_) | Action::SetIpv6Dst(_) => "TCP/UDP/ICMPv6 checksum updated",
        Action::SetIpv6Label(_) => "flow label rewritten",
        Action::SetTpSrc(_) | Action::SetTpDst(_) if !((ipv4 || ipv6) && l4) => {
            "not TCP or UDP over IP: unchanged"
        }
        Action::SetTpSrc(_) | Action::SetTpDst(_) => {
            "checksum updated (a later fragment, without ports, is unchanged)"
        }
        _ if !(ipv4 || ipv6) => "not IP: unchanged",
        Action::DecTtl if k.nw_ttl() <= 1 => "TTL 0 or 1: dropped (ttl_expired)",
        Action::DecTtl => "TTL decremented",
        Action::SetNwTtl(_) => "TTL rewritten",
        Action::SetNwEcn(_) => "ECN rewritten",
        _ => "DSCP rewritten",
    }
    .into()
}

/// What `group:N` does, as a note.
fn controller_note(n: u16) -> String {
    format!(
        "a copy of its first {n} bytes to the OpenFlow controllers (PACKET_IN), within the \
         packet-in rate"
    )
}

fn group_note(g: u32, groups: &nfv_flow::table::Groups) -> String {
    let Some(group) = groups.get(&g) else {
        return format!("group {g} does not exist: nothing takes the packet");
    };
    let how = match group.kind {
        nfv_flow::GroupType::All => "every bucket runs on its own copy",
        nfv_flow::GroupType::Select => "a hash of the 5-tuple picks one bucket by weight",
        nfv_flow::GroupType::Indirect => "its bucket runs",
        nfv_flow::GroupType::FastFailover => "the first bucket whose watch_port is live runs",
    };
    format!(
        "{} group of {} bucket(s): {how}",
        group.kind.as_str(),
        group.buckets.len()
    )
}

#[cfg(test)]
#[path = "trace_tests.rs"]
mod tests;
