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
//!
//! A `ct(table=T)` step forks a tracked copy, which the trace follows as
//! OVS's `ofproto/trace` does (`ofproto-dpif-trace.c`): the copy is
//! looked up again from table T once the packet's own actions are done,
//! copies in the order the datapath recirculates them — round by round,
//! each round in the order its `ct` actions ran, as the element's
//! recirculation queue runs them ([`crate::element`]) and as OVS's trace
//! queue does. The tracker's answer is what the caller says: the n-th copy
//! comes back with the n-th state of `ct_next` (`ctl trace --ct-next`,
//! OVS's option of that name), `trk|new` ([`DEFAULT_CT_STATE`], OVS's
//! default) past the end of the list. Its other fields are those OVS's
//! trace gives it: the headers as the actions left them, `ct_zone` the
//! action's zone, `ct_mark`/`ct_label` as the packet had them before the
//! `ct` with the action's `exec(set_field...)` applied (so 0, or what the
//! given packet had, without one), the original-direction tuple as the
//! packet had it; the pipeline's metadata, table T. A copy past the
//! datapath's [`MAX_RECIRC_DEPTH`] rounds, or past a round's batch of
//! [`BATCH`], is not followed (the datapath drops it, `recirc_limit`): it
//! stays an [`Output::Recirculate`] of its own.

use crate::decision::megaflow_of;
use crate::element::MAX_RECIRC_DEPTH;
use crate::group_choice::{Choice, choose, select_hash};
use nfv_flow::action::CtAction;
use nfv_flow::key::VLAN_PRESENT;
use nfv_flow::key::ct_state::{NEW, TRK};
use nfv_flow::pipeline::{self, Stage};
use nfv_flow::table::{FlowTable, Groups};
use nfv_flow::{Action, FlowKey, Group, GroupType, Match, PortNo, Rule, ct_states_text};
use nfv_mem::BATCH;
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
    /// `ct(table=T)` whose tracked copy the trace followed: its index in
    /// [`Trace::recirculations`].
    pub recirculation: Option<usize>,
}

/// The state a tracked copy comes back with when the caller names none:
/// the first packet of a new connection (OVS's `ofproto/trace` default).
pub const DEFAULT_CT_STATE: u8 = TRK | NEW;

/// A `ct(table=T)`'s tracked copy, looked up again from table T.
#[derive(Clone, Debug)]
pub struct Recirculated {
    /// The round it is looked up in: 1 for a copy the packet's own
    /// actions sent, 2 for one that a round-1 copy sent, and so on.
    pub round: usize,
    /// The `ct_state` the tracker is taken to answer, and whether the
    /// caller gave it (else [`DEFAULT_CT_STATE`]).
    pub ct_state: u8,
    pub given: bool,
    /// The key looked up (see the module doc).
    pub packet: FlowKey,
    /// The rule that matched in table T (`None`: none; the copy is
    /// dropped, `no_match`).
    pub rule: Option<Arc<Rule>>,
    pub stages: Vec<Stage>,
    pub steps: Vec<Step>,
    pub unused: Vec<Action>,
    /// Where this copy leaves (not the copies it forks in turn: they are
    /// recirculations of their own).
    pub outputs: Vec<Output>,
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
    /// outputs where the group's step is; then the tracked copies' outputs,
    /// in the order of [`Trace::recirculations`].
    pub outputs: Vec<Output>,
    /// The tracked copies `ct(table=T)` steps forked and the trace
    /// followed, in the order the datapath looks them up (which is the
    /// order they take the caller's `ct_next` states in).
    pub recirculations: Vec<Recirculated>,
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
    /// `ct(table=T)` whose tracked copy the trace does not follow: it
    /// would be looked up again from table T past the datapath's
    /// recirculation limit, where the datapath drops it (`recirc_limit`).
    Recirculate(u8),
}

/// What the actions of one packet's trace may consult besides the fields.
struct Cx<'a> {
    in_port: PortNo,
    groups: &'a Groups,
    /// Whether a port is live (a `fast_failover` bucket's watch_port).
    live: &'a dyn Fn(PortNo) -> bool,
}

/// What the actions of every pass add up to: where copies leave, and the
/// tracked copies waiting to be looked up.
struct Walk<'a> {
    outputs: Vec<Output>,
    forks: Vec<Fork>,
    /// The tracker's answers the caller gave, one per fork in order.
    ct_next: &'a [u8],
    /// The round of the pass running (0: the packet's own).
    round: usize,
    /// Forks queued per round (index: the round they run in).
    per_round: [usize; MAX_RECIRC_DEPTH + 1],
}

/// A tracked copy waiting for its lookup.
struct Fork {
    key: FlowKey,
    /// The tags a push_vlan covered in the packet it was forked from.
    covered: Vec<u16>,
    round: usize,
    given: bool,
}

impl Walk<'_> {
    /// Queues the tracked copy `ct` forks from a packet with the fields
    /// `before` (as they are when the `ct` runs) for table `t`; its index
    /// in the queue, or `None` where the datapath would drop it.
    fn fork(&mut self, before: &FlowKey, ct: &CtAction, t: u8, covered: &[u16]) -> Option<usize> {
        let round = self.round + 1;
        if round > MAX_RECIRC_DEPTH || self.per_round[round] >= BATCH {
            return None;
        }
        self.per_round[round] += 1;
        let n = self.forks.len();
        let (state, given) = match self.ct_next.get(n) {
            Some(&s) => (s, true),
            None => (DEFAULT_CT_STATE, false),
        };
        self.forks.push(Fork {
            key: tracked_copy(before, ct, t, state),
            covered: covered.to_vec(),
            round,
            given,
        });
        Some(n)
    }
}

/// The key a `ct(table=t)` sends back to table `t` from a packet with the
/// fields `before`, the tracker answering `state`: OVS's trace's (see the
/// module doc).
fn tracked_copy(before: &FlowKey, ct: &CtAction, t: u8, state: u8) -> FlowKey {
    let mut key = *before;
    key.set_table(t);
    key.set_metadata(ct.recirc_metadata);
    key.set_ct_state(state);
    key.set_ct_zone(ct.zone);
    if let Some((v, m)) = ct.mark {
        key.set_ct_mark(key.ct_mark() & !m | v & m);
    }
    if let Some((v, m)) = ct.label {
        key.set_ct_label(key.ct_label() & !m | v & m);
    }
    key.sync_packet_ext();
    key
}

/// Traces `packet` (its `in_port` set) through `table`; `live` says
/// whether a port is live, for `fast_failover` groups. Tracked copies come
/// back as new connections' ([`DEFAULT_CT_STATE`]).
pub fn trace(table: &FlowTable, packet: FlowKey, live: &dyn Fn(PortNo) -> bool) -> Trace {
    trace_tracked(table, packet, live, &[])
}

/// [`trace`], the n-th tracked copy (in the order the datapath looks them
/// up) coming back with the `ct_state` `ct_next[n]` (OVS's `ofproto/trace
/// --ct-next`), those past its end with [`DEFAULT_CT_STATE`].
pub fn trace_tracked(
    table: &FlowTable,
    packet: FlowKey,
    live: &dyn Fn(PortNo) -> bool,
    ct_next: &[u8],
) -> Trace {
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
        recirculations: Vec::new(),
    };
    let Some(rule) = rule else {
        return t;
    };
    let cx = Cx {
        in_port,
        groups: &table.groups,
        live,
    };
    let mut walk = Walk {
        outputs: Vec::new(),
        forks: Vec::new(),
        ct_next,
        round: 0,
        per_round: [0; MAX_RECIRC_DEPTH + 1],
    };
    let (stages, actions, res_mask) = pipeline_of(table, &packet, &rule, mask.unwrap_or_default());
    // A pipeline: the union of the lookups' masks is cached.
    if let (Some(res_mask), Tier::Classifier { megaflow, .. }) = (res_mask, &mut tier) {
        *megaflow = nfv_flow::megaflow::MegaflowCache::worth_caching(&res_mask).then(|| Match {
            key: packet.masked(&res_mask),
            mask: res_mask,
        });
    }
    t.tier = tier;
    t.stages = stages;
    let mut k = packet;
    // The tags a push_vlan covered, innermost first: the key holds only
    // the outer one, and strip_vlan brings the one below back.
    let mut covered = Vec::new();
    (t.steps, t.unused) = run(&cx, &actions, &mut k, &mut covered, &mut walk);
    // The tracked copies, in the order they were queued (a copy's own
    // forks join the end of the queue, as in the datapath's next round).
    let mut next = 0;
    while let Some(fork) = walk.forks.get_mut(next) {
        let key = fork.key;
        let mut covered = std::mem::take(&mut fork.covered);
        let (round, given) = (fork.round, fork.given);
        walk.round = round;
        let first_output = walk.outputs.len();
        // The datapath looks a recirculated key up in the classifier (no
        // port-wide rule: those take whole batches as they arrive).
        let found = table.classifier.lookup_with_mask(&key);
        let rule = found.rule.cloned();
        let mut r = Recirculated {
            round,
            ct_state: key.ct_state(),
            given,
            packet: key,
            rule: rule.clone(),
            stages: vec![Stage {
                table: key.table(),
                key,
                rule: rule.clone(),
            }],
            steps: Vec::new(),
            unused: Vec::new(),
            outputs: Vec::new(),
        };
        if let Some(rule) = rule {
            let (stages, actions, _) = pipeline_of(table, &key, &rule, found.mask);
            r.stages = stages;
            let mut k = key;
            (r.steps, r.unused) = run(&cx, &actions, &mut k, &mut covered, &mut walk);
        }
        r.outputs = walk.outputs[first_output..].to_vec();
        t.recirculations.push(r);
        next += 1;
    }
    t.outputs = walk.outputs;
    t
}

/// The tables a packet with the fields `key` goes through from `rule`
/// (which its first lookup, depending on `mask`, found) and the actions
/// they add up to, as the PMD resolves them; and, for a pipeline, the
/// union of the lookups' masks.
fn pipeline_of(
    table: &FlowTable,
    key: &FlowKey,
    rule: &Arc<Rule>,
    mask: FlowKey,
) -> (Vec<Stage>, Vec<Action>, Option<FlowKey>) {
    if rule.pipeline {
        let res = pipeline::resolve(&table.classifier, key, rule, mask);
        (res.stages, res.actions, Some(res.mask))
    } else {
        let stage = Stage {
            table: key.table(),
            key: *key,
            rule: Some(rule.clone()),
        };
        (vec![stage], rule.spec.actions.clone(), None)
    }
}

/// Runs `actions` as the interpreter does on a packet with the fields `k`
/// (edited in place); adds where copies leave, and the tracked copies
/// forked, to `walk`. Returns the steps and the actions never applied.
fn run(
    cx: &Cx,
    actions: &[Action],
    k: &mut FlowKey,
    covered: &mut Vec<u16>,
    walk: &mut Walk,
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
        let mut step = Step {
            action: action.clone(),
            after: *k,
            note: None,
            buckets: Vec::new(),
            recirculation: None,
        };
        match *action {
            Action::Group(g) => (step.note, step.buckets) = run_group(cx, g, k, covered, walk),
            Action::Ct(ref ct) => {
                let before = *k;
                nfv_flow::pipeline::edit_key(k, action);
                let followed = ct.table.and_then(|t| walk.fork(&before, ct, t, covered));
                step.note = Some(ct_note(ct, followed, walk));
                step.recirculation = followed;
                if let (Some(t), None) = (ct.table, followed) {
                    walk.outputs.push(Output::Recirculate(t));
                }
            }
            _ => step.note = apply(k, action, cx.in_port, covered, &mut walk.outputs),
        }
        step.after = *k;
        steps.push(step);
        if expired {
            unused = actions[i + 1..].to_vec();
            break;
        }
    }
    (steps, unused)
}

/// What a `ct` step did: where the packet went, and the tracked copy
/// (`followed`: its index in the queue of `walk`).
fn ct_note(ct: &CtAction, followed: Option<usize>, walk: &Walk) -> String {
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
    let zone = ct.zone;
    let goes_on = "this packet goes on untracked, its ct fields cleared";
    match (ct.table, followed) {
        (None, _) => format!(
            "tracked in zone {zone}{commit}{nat}; the packet goes on, its ct fields not visible \
             to later actions (only ct(table=N) looks it up again)"
        ),
        (Some(t), Some(n)) => {
            let f = &walk.forks[n];
            let state = ct_states_text(f.key.ct_state());
            let answer = if f.given {
                format!("ct_state={state}, --ct-next {}", n + 1)
            } else {
                format!("ct_state={state}, the default: --ct-next to choose")
            };
            format!(
                "to the connection tracker (zone {zone}{commit}{nat}); a tracked copy is looked \
                 up again from table {t} as recirculation {} ({answer}) once this packet's \
                 actions are done; {goes_on}",
                n + 1
            )
        }
        (Some(t), None) => format!(
            "to the connection tracker (zone {zone}{commit}{nat}); its tracked copy would be \
             looked up again from table {t}, but that is more than the datapath recirculates \
             ({MAX_RECIRC_DEPTH} rounds of at most {BATCH} copies): it drops the copy \
             (recirc_limit); {goes_on}"
        ),
    }
}

/// `group:N` on a packet with the fields `k`: the buckets the PMD would
/// run, each on its own copy, their outputs added to `walk`; and a note
/// saying how the group chose.
fn run_group(
    cx: &Cx,
    id: u32,
    k: &FlowKey,
    covered: &[u16],
    walk: &mut Walk,
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
            let (steps, unused) = run(cx, &group.buckets[index].run, &mut copy, &mut covered, walk);
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
        // Run by `run`, which knows the groups and the queue of tracked
        // copies.
        Action::Group(_) | Action::Ct(_) => {}
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
