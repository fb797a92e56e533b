//! What the datapath would do with one packet (`nfvswitch ctl trace`, the
//! counterpart of OVS's `ofproto/trace`): which tier decides it, the rule
//! it hits, each action with the packet's fields after it, the ports it
//! leaves by, and what the PMD's caches would keep. It runs on the
//! control plane over the current table snapshot and uses the decision's
//! own rules ([`crate::decision::megaflow_of`], [`nfv_flow::port_wide`]),
//! so it cannot drift from what the PMDs do. It sends nothing and learns
//! nothing.
//!
//! A `group:N` step runs the buckets the PMD would
//! ([`crate::group_choice::choose`], the interpreter's own choice), each
//! on its own copy of the packet: every bucket of an `all` group, the one
//! of an `indirect`, the bucket a `select` group's hash picks for this
//! packet, the first live bucket of a `fast_failover`. Liveness is what
//! the caller says (the control plane: the port exists and its peer, if
//! it has one, is connected). A `meter:N` step is noted and passed: the
//! trace has no rate history to say whether the packet would be within it.

use crate::decision::megaflow_of;
use crate::group_choice::{Choice, choose, select_hash};
use nfv_flow::key::VLAN_PRESENT;
use nfv_flow::pipeline::{self, Stage};
use nfv_flow::table::{FlowTable, Groups};
use nfv_flow::{Action, FlowKey, Group, GroupType, Match, PortNo, Rule};
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
    /// `group:N`: the buckets that ran (none for other actions, and for a
    /// group that ran none).
    pub buckets: Vec<BucketRun>,
}

/// One bucket of a group, run on its own copy of the packet (its edits
/// stay in the copy: the actions after `group:N` see the packet as it
/// came to the group).
#[derive(Clone, Debug, PartialEq)]
pub struct BucketRun {
    /// The bucket's place in the group (0 first), as dump-groups lists it.
    pub index: usize,
    pub steps: Vec<Step>,
    /// The bucket's actions never applied (after its last output, or after
    /// `dec_ttl` dropped its copy).
    pub unused: Vec<Action>,
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
    /// Where the packet (or a copy) leaves, in order; a group's buckets'
    /// outputs where the group's step is.
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
    /// `ct(table=T)`: the tracked copy is looked up again from table T
    /// (where it goes depends on the tracker's answer, which a trace
    /// cannot know).
    Recirculate(u8),
}

/// What the actions of one packet's trace may consult besides the fields.
struct Cx<'a> {
    in_port: PortNo,
    groups: &'a Groups,
    /// Whether a port is live (a `fast_failover` bucket's watch_port).
    live: &'a dyn Fn(PortNo) -> bool,
}

/// Traces `packet` (its `in_port` set) through `table`; `live` says
/// whether a port is live, for `fast_failover` groups.
pub fn trace(table: &FlowTable, packet: FlowKey, live: &dyn Fn(PortNo) -> bool) -> Trace {
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
    let cx = Cx {
        in_port,
        groups: &table.groups,
        live,
    };
    let mut k = packet;
    // The tags a push_vlan covered, innermost first: the key holds only
    // the outer one, and strip_vlan brings the one below back.
    let mut covered = Vec::new();
    (t.steps, t.unused) = run(&cx, &actions, &mut k, &mut covered, &mut t.outputs);
    t
}

/// Runs `actions` as the interpreter does on a packet with the fields `k`
/// (edited in place); adds where copies leave to `outputs`. Returns the
/// steps and the actions never applied.
fn run(
    cx: &Cx,
    actions: &[Action],
    k: &mut FlowKey,
    covered: &mut Vec<u16>,
    outputs: &mut Vec<Output>,
) -> (Vec<Step>, Vec<Action>) {
    // As the interpreter: nothing after the last output is applied.
    let last = actions.iter().rposition(Action::is_output);
    let applied = last.map_or(0, |l| l + 1);
    let mut unused = actions[applied..].to_vec();
    let mut steps = Vec::with_capacity(applied);
    for (i, action) in actions[..applied].iter().enumerate() {
        // As the interpreter: an expired TTL drops the packet, and no
        // later action applies (copies already sent stay sent).
        let expired = *action == Action::DecTtl && is_ip(k) && k.nw_ttl() <= 1;
        let (note, buckets) = match *action {
            Action::Group(g) => run_group(cx, g, k, covered, outputs),
            _ => (apply(k, action, cx.in_port, covered, outputs), Vec::new()),
        };
        steps.push(Step {
            action: action.clone(),
            after: *k,
            note,
            buckets,
        });
        if expired {
            unused = actions[i + 1..].to_vec();
            break;
        }
    }
    (steps, unused)
}

/// `group:N` on a packet with the fields `k`: the buckets the PMD would
/// run, each on its own copy, their outputs added to `outputs`; and a
/// note saying how the group chose.
fn run_group(
    cx: &Cx,
    id: u32,
    k: &FlowKey,
    covered: &[u16],
    outputs: &mut Vec<Output>,
) -> (Option<String>, Vec<BucketRun>) {
    let Some(group) = cx.groups.get(&id) else {
        return (
            Some(format!(
                "group {id} does not exist: nothing takes the packet"
            )),
            Vec::new(),
        );
    };
    let choice = choose(group, || *k, |p| (cx.live)(p));
    let picked = match choice {
        Choice::Every => 0..group.buckets.len(),
        Choice::One(b) => b..b + 1,
        Choice::Nothing => 0..0,
    };
    let buckets = picked
        .map(|index| {
            let mut copy = *k;
            let mut covered = covered.to_vec();
            let (steps, unused) = run(
                cx,
                &group.buckets[index].run,
                &mut copy,
                &mut covered,
                outputs,
            );
            BucketRun {
                index,
                steps,
                unused,
            }
        })
        .collect();
    (Some(group_note(group, choice, k)), buckets)
}

fn is_ip(k: &FlowKey) -> bool {
    k.dl_type() == EtherType::IPV4.0 || k.dl_type() == EtherType::IPV6.0
}

/// `action`'s effect on the fields `k` ([`nfv_flow::pipeline::edit_key`],
/// as the later tables see them), its outputs, and a note.
fn apply(
    k: &mut FlowKey,
    action: &Action,
    in_port: PortNo,
    covered: &mut Vec<u16>,
    outputs: &mut Vec<Output>,
) -> Option<String> {
    let before = *k;
    nfv_flow::pipeline::edit_key(k, action);
    match *action {
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
        Action::Ct(ref ct) => {
            let commit = if ct.commit {
                ", committing a new connection"
            } else {
                ""
            };
            let nat = if ct.nat.is_some() {
                "; translated as its connection says (nat)"
            } else {
                ""
            };
            if let Some(t) = ct.table {
                outputs.push(Output::Recirculate(t));
            }
            return Some(match ct.table {
                Some(t) => format!(
                    "to the connection tracker (zone {}{commit}{nat}), then looked up again from \
                     table {t} with the ct fields the tracker gives: a trace cannot know them \
                     (trace again with ct_state=..., table={t} in the packet to follow that \
                     lookup); this copy goes on untracked, its ct fields cleared",
                    ct.zone
                ),
                None => format!(
                    "tracked in zone {}{commit}{nat}; the packet goes on, its ct fields not \
                     visible to later actions (only ct(table=N) looks it up again)",
                    ct.zone
                ),
            });
        }
        Action::CtClear => return Some("connection tracking fields cleared (untracked)".into()),
        Action::Meter(m) => {
            return Some(format!(
                "meter {m}: passed here (a trace cannot know the meter's recent traffic); the \
                 PMD drops the packet (meter_drop) while the meter is over its rate"
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
        // Run by `run_group`.
        Action::Group(_) => {}
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
fn ip_note(k: &FlowKey, action: &Action) -> String {
    let ipv4 = k.dl_type() == EtherType::IPV4.0;
    let ipv6 = k.dl_type() == EtherType::IPV6.0;
    let l4 = matches!(IpProtocol(k.nw_proto()), IpProtocol::TCP | IpProtocol::UDP);
    match *action {
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

/// What `controller` does, as a note.
fn controller_note(n: u16) -> String {
    format!(
        "a copy of its first {n} bytes to the OpenFlow controllers (PACKET_IN), within the \
         packet-in rate"
    )
}
/// How `group` chose `choice` for a packet with the fields `k`, in words.
fn group_note(group: &Group, choice: Choice, k: &FlowKey) -> String {
    let n = group.buckets.len();
    let head = format!("{} group of {n} bucket(s)", group.kind.as_str());
    let how = match (group.kind, choice) {
        (_, Choice::Nothing) if n == 0 => "no buckets: dropped".to_string(),
        (GroupType::All, _) => "every bucket runs on its own copy".into(),
        (GroupType::Indirect, _) => "its bucket runs".into(),
        (GroupType::Select, Choice::One(b)) => format!(
            "bucket {b} runs: picked by weight, among the buckets whose watch_port (if \
             any) is live, by the hash 0x{:08x} of the packet's addresses, protocol, \
             ports, EtherType and MACs (the PMD's select hash)",
            select_hash(k)
        ),
        (GroupType::Select, _) => {
            "no live bucket with a weight (every watch_port down, or every weight 0): \
             dropped"
                .into()
        }
        (GroupType::FastFailover, choice) => failover_note(group, choice),
    };
    format!("{head}: {how}")
}

/// Which fast_failover bucket runs and why: the watch_ports before it are
/// down.
fn failover_note(group: &Group, choice: Choice) -> String {
    let down: Vec<String> = group
        .buckets
        .iter()
        .enumerate()
        .take_while(|(i, _)| Choice::One(*i) != choice)
        .filter_map(|(i, b)| Some(format!("bucket {i} watches port {} (down)", b.watch_port?)))
        .collect();
    let down = if down.is_empty() {
        String::new()
    } else {
        format!(" ({})", down.join(", "))
    };
    match choice {
        Choice::One(b) => format!(
            "bucket {b} runs, the first whose watch_port ({}) is live{down}",
            group.buckets[b].watch_port.unwrap_or_default()
        ),
        _ => format!("no bucket's watch_port is live: dropped{down}"),
    }
}

#[cfg(test)]
#[path = "trace_tests.rs"]
mod tests;
