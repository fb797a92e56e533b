//! Several tables: a rule whose actions include `goto_table:N`,
//! `resubmit(,N)` or `write_metadata` continues the packet's lookup in a
//! later table, as OpenFlow pipelines and OVS's `resubmit` do.
//!
//! Every table lives in the one classifier (the key's `table` field says
//! which, [`crate::key`]), so a table lookup is a classifier lookup with
//! that field set. [`resolve`] follows one packet key through the
//! pipeline on the slow path — when no cache answers it — and returns the
//! whole pipeline's decision as one rule:
//! * its actions are every consulted rule's actions in the order they run,
//!   with the pipeline actions taken out (what they did is already decided),
//!   so a PMD runs them as it runs any rule's;
//! * its `parts` are the consulted rules, which the PMD credits with the
//!   packets (and a table that missed, with its miss counter);
//! * the mask the decision depended on is the union of every lookup's, as
//!   OVS's megaflows cache a whole pipeline: packets equal on it take the
//!   same path, so a 3-table pipeline costs one megaflow probe on a hit.
//!
//! The union is exact for fields no action rewrote before a lookup and
//! conservative (narrower megaflows) for those that one did: a later
//! table's dependence on a rewritten field is recorded against the
//! packet's own field. Lookups go forward only (a rule refers to tables
//! above its own, checked at parse time) and at most [`MAX_LOOKUPS`] run
//! per packet, so a pipeline cannot loop; past the bound the rest is
//! dropped and counted as the table's miss.
//!
//! A table that misses ends the pipeline: what the earlier tables' rules
//! applied still happens (an output before the `goto_table` sends), then
//! nothing — OpenFlow 1.3's default table-miss behaviour, drop. A
//! `dec_ttl` that finds the TTL run out inside a `resubmit` ends only
//! that table's actions, the outer ones go on (OVS's rule; found by the
//! differential test): decided here, with the TTL in the mask.

use crate::action::Action;
use crate::classifier::{Classifier, PassThrough};
use crate::key::{FlowKey, VLAN_PRESENT, VLAN_VID_MASK};
use crate::rule::{FlowSpec, Match, Rule};
use nfv_wire::{EtherType, IpProtocol};
use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::Arc;

/// Table lookups one packet may take (the first included).
pub const MAX_LOOKUPS: usize = 16;

/// One table's answer on the way.
#[derive(Clone, Debug)]
pub struct Stage {
    pub table: u8,
    /// The key looked up (as the earlier actions left it).
    pub key: FlowKey,
    /// The rule that matched; `None`: the table missed.
    pub rule: Option<Arc<Rule>>,
}

/// The whole pipeline's decision for one packet.
#[derive(Clone, Debug)]
pub struct Resolution {
    /// Every table consulted, in order.
    pub stages: Vec<Stage>,
    /// What runs on the packet: the rules' actions, pipeline actions out.
    pub actions: Vec<Action>,
    /// The union of the lookups' masks (what the decision depended on).
    pub mask: FlowKey,
    /// Whether [`MAX_LOOKUPS`] cut the pipeline short.
    pub truncated: bool,
    /// A `dec_ttl` inside a resubmit found the TTL run out and ended that
    /// table's actions (the outer ones went on).
    pub ttl_stopped: bool,
}

/// What a walk through the tables keeps: every stage and action (the
/// trace's [`Resolution`]) or only the rules' identities (the PMD's
/// [`Resolver`]), and what every walk works out.
trait Record {
    fn stage(&mut self, table: u8, key: &FlowKey, rule: Option<&Arc<Rule>>);
    fn action(&mut self, action: &Action);
    fn lookups(&self) -> usize;
    fn outcome(&mut self) -> &mut Outcome;
}

/// What every walk works out, whatever it records.
#[derive(Clone, Copy, Debug)]
struct Outcome {
    mask: FlowKey,
    truncated: bool,
    ttl_stopped: bool,
}

/// Follows `key` from `first` (the rule table 0 matched, whose lookup
/// depended on `first_mask`) through the later tables of `classifier`.
pub fn resolve(
    classifier: &Classifier,
    key: &FlowKey,
    first: &Arc<Rule>,
    first_mask: FlowKey,
) -> Resolution {
    let mut walk = Walked {
        stages: Vec::new(),
        actions: Vec::with_capacity(first.spec.actions.len()),
        outcome: Outcome {
            mask: first_mask,
            truncated: false,
            ttl_stopped: false,
        },
    };
    walk.stage(key.table(), key, Some(first));
    let mut k = *key;
    run(classifier, &first.spec.actions, &mut k, &mut walk, 0);
    let Walked {
        stages,
        actions,
        outcome,
    } = walk;
    Resolution {
        stages,
        actions,
        mask: outcome.mask,
        truncated: outcome.truncated,
        ttl_stopped: outcome.ttl_stopped,
    }
}

/// The trace's record: everything.
struct Walked {
    stages: Vec<Stage>,
    actions: Vec<Action>,
    outcome: Outcome,
}

impl Record for Walked {
    fn stage(&mut self, table: u8, key: &FlowKey, rule: Option<&Arc<Rule>>) {
        self.stages.push(Stage {
            table,
            key: *key,
            rule: rule.cloned(),
        });
    }
    fn action(&mut self, action: &Action) {
        self.actions.push(action.clone());
    }
    fn lookups(&self) -> usize {
        self.stages.len()
    }
    fn outcome(&mut self) -> &mut Outcome {
        &mut self.outcome
    }
}

/// Composites a PMD keeps; past this the cache starts over.
pub const COMPOSITES: usize = 4096;

/// A PMD's pipeline resolver: walks the tables recording only what each
/// lookup found (no allocation, no reference count touched) and answers
/// with the composite rule it made the first time that sequence of
/// outcomes came up. Packets that reach the classifier behind a pipeline
/// (those no megaflow is made for: per-connection rules) so cost the
/// table lookups and one map probe, and consecutive ones share one rule
/// to credit. A walk's actions depend on every lookup's outcome in order
/// — misses included: the same rules matched at other lookups run their
/// actions in another order — except where a `dec_ttl` inside a resubmit
/// stopped them (those go the allocating way every time). Emptied when
/// the flow table changes ([`Resolver::sync_version`]), so no composite
/// keeps a replaced rule alive.
#[derive(Default)]
pub struct Resolver {
    cache: HashMap<u64, Cached, BuildHasherDefault<PassThrough>>,
    version: u64,
    /// Composites made (cache misses), for tests and figures.
    pub made: u64,
}

/// A composite and the walk it was made from.
struct Cached {
    walk: Walk,
    rule: Arc<Rule>,
}

/// Every lookup's outcome in order: the matched rule's address, 0 for a
/// miss. Identity only: the composite holds its rules, so while it is
/// cached no other rule can take their addresses.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Walk {
    outcomes: [usize; MAX_LOOKUPS],
    lookups: usize,
    /// The key's metadata where the walk started: a recirculated packet
    /// brings its own, which a `ct(table=T)` of the walk passes on.
    metadata: u64,
}

impl Walk {
    fn fingerprint(&self) -> u64 {
        self.outcomes[..self.lookups]
            .iter()
            .fold(0x9e37_79b9_7f4a_7c15 ^ self.metadata, |h, &r| {
                (h ^ r as u64)
                    .wrapping_mul(0xff51_afd7_ed55_8ccd)
                    .rotate_left(29)
            })
    }
}

/// The fast path's record: the walk.
struct Chain {
    walk: Walk,
    outcome: Outcome,
}

impl Record for Chain {
    fn stage(&mut self, _table: u8, _key: &FlowKey, rule: Option<&Arc<Rule>>) {
        let w = &mut self.walk;
        w.outcomes[w.lookups] = rule.map_or(0, |r| Arc::as_ptr(r) as usize);
        w.lookups += 1;
    }
    fn action(&mut self, _action: &Action) {}
    fn lookups(&self) -> usize {
        self.walk.lookups
    }
    fn outcome(&mut self) -> &mut Outcome {
        &mut self.outcome
    }
}

impl Resolver {
    /// Forgets every composite when the flow table is a new generation.
    pub fn sync_version(&mut self, table_version: u64) {
        if self.version != table_version {
            self.cache.clear();
            self.version = table_version;
        }
    }

    /// [`resolve`] and [`composite`] for a PMD: the rule to run and the
    /// mask the decision depended on.
    pub fn resolve(
        &mut self,
        classifier: &Classifier,
        key: &FlowKey,
        first: &Arc<Rule>,
        first_mask: FlowKey,
    ) -> (Arc<Rule>, FlowKey) {
        let mut chain = Chain {
            walk: Walk {
                outcomes: [0; MAX_LOOKUPS],
                lookups: 0,
                metadata: key.metadata(),
            },
            outcome: Outcome {
                mask: first_mask,
                truncated: false,
                ttl_stopped: false,
            },
        };
        chain.stage(key.table(), key, Some(first));
        let mut k = *key;
        run(classifier, &first.spec.actions, &mut k, &mut chain, 0);
        let mask = chain.outcome.mask;
        let fingerprint = chain.walk.fingerprint();
        if !chain.outcome.ttl_stopped
            && let Some(c) = self.cache.get(&fingerprint)
            && c.walk == chain.walk
        {
            return (c.rule.clone(), mask);
        }
        let made = composite(first, &resolve(classifier, key, first, first_mask));
        self.made += 1;
        if !chain.outcome.ttl_stopped {
            if self.cache.len() >= COMPOSITES {
                self.cache.clear();
            }
            let cached = Cached {
                walk: chain.walk,
                rule: made.clone(),
            };
            self.cache.insert(fingerprint, cached);
        }
        (made, mask)
    }
}

/// Runs `actions` on the key, descending into the tables they name;
/// `depth` counts the `resubmit`s it is inside.
fn run<R: Record>(
    classifier: &Classifier,
    actions: &[Action],
    k: &mut FlowKey,
    r: &mut R,
    depth: usize,
) {
    for a in actions {
        match *a {
            Action::GotoTable(t) | Action::Resubmit(t) => {
                if r.lookups() >= MAX_LOOKUPS {
                    r.outcome().truncated = true;
                    return;
                }
                let mut probe = *k;
                probe.set_table(t);
                let found = classifier.lookup_with_mask(&probe);
                for (m, f) in r.outcome().mask.w.iter_mut().zip(found.mask.w) {
                    *m |= f;
                }
                r.stage(t, &probe, found.rule);
                let Some(rule) = found.rule else {
                    // A miss ends the pipeline (goto_table is last anyway;
                    // after a resubmit that missed, the rest still runs).
                    if matches!(a, Action::GotoTable(_)) {
                        return;
                    }
                    continue;
                };
                // The later table sees the packet as the actions left it;
                // back in this table, the key goes on from there too.
                let mut inner = probe;
                let nested = depth + usize::from(matches!(a, Action::Resubmit(_)));
                run(classifier, &rule.spec.actions, &mut inner, r, nested);
                inner.set_table(k.table());
                *k = inner;
                if r.outcome().truncated {
                    return;
                }
            }
            Action::WriteMetadata { value, mask } => {
                k.set_metadata((k.metadata() & !mask) | (value & mask));
            }
            // Inside a resubmit, a TTL that runs out ends that table's
            // actions and the outer ones go on, as in OVS (at the top
            // level the packet is dropped, by the interpreter). Decided
            // here, so the decision depends on the TTL: into the mask.
            Action::DecTtl if depth > 0 => {
                let o = r.outcome();
                o.mask.set_dl_type(0xffff);
                o.mask.set_nw_ttl(0xff);
                let ip = matches!(EtherType(k.dl_type()), EtherType::IPV4 | EtherType::IPV6);
                if ip && k.nw_ttl() <= 1 {
                    o.ttl_stopped = true;
                    return;
                }
                edit_key(k, a);
                r.action(a);
            }
            // ct(table=T): the tracked copy starts over from table T (not
            // walked here) with the metadata the pipeline has now, which
            // may be the packet's own (a recirculated packet's): so the
            // decision depends on it.
            Action::Ct(ref ct) if ct.table.is_some() => {
                r.outcome().mask.set_metadata(!0);
                let stamped = Action::Ct(Box::new(crate::ct::CtAction {
                    recirc_metadata: k.metadata(),
                    ..(**ct).clone()
                }));
                edit_key(k, a);
                r.action(&stamped);
            }
            // ct (without table=) and ct_clear clear the key's ct_*
            // fields (edit_key) and are kept for the PMD.
            _ => {
                edit_key(k, a);
                r.action(a);
            }
        }
    }
}

/// The one rule a PMD runs for a resolved pipeline: the resolution's
/// actions, the consulted rules as its parts (credited with its
/// packets), the first rule's priority and cookie.
pub fn composite(first: &Arc<Rule>, res: &Resolution) -> Arc<Rule> {
    let spec = FlowSpec {
        priority: first.spec.priority,
        cookie: first.spec.cookie,
        timeouts: Default::default(),
        matches: Match {
            key: first.spec.matches.key,
            mask: first.spec.matches.mask,
        },
        tun_id: first.spec.tun_id,
        actions: res.actions.clone(),
    };
    let parts = res.stages.iter().filter_map(|s| s.rule.clone()).collect();
    Arc::new(Rule::composite(spec, first.seq, parts))
}

/// What `action` does to the fields of `k` (the key a later table sees,
/// and what `ctl trace` prints after each step). Actions that change no
/// key field (outputs, groups, tunnels) leave it alone; a rewrite that
/// does not apply to the packet (an IPv4 address on IPv6) too.
pub fn edit_key(k: &mut FlowKey, action: &Action) {
    let ipv4 = k.dl_type() == EtherType::IPV4.0;
    let ipv6 = k.dl_type() == EtherType::IPV6.0;
    let ip = ipv4 || ipv6;
    let tcp_udp = matches!(IpProtocol(k.nw_proto()), IpProtocol::TCP | IpProtocol::UDP);
    let later = k.ip_frag() & crate::key::FRAG_LATER != 0;
    match *action {
        Action::SetDlSrc(m) => k.set_dl_src(m),
        Action::SetDlDst(m) => k.set_dl_dst(m),
        Action::SetVlanVid(vid) => {
            let tci = k.vlan_tci();
            let pcp = if tci & VLAN_PRESENT != 0 {
                tci & 0xe000
            } else {
                0
            };
            k.set_vlan_tci(pcp | VLAN_PRESENT | (vid & VLAN_VID_MASK));
        }
        Action::PushVlan(_) => k.set_vlan_tci(VLAN_PRESENT),
        Action::StripVlan => k.set_vlan_tci(0),
        Action::SetNwSrc(a) if ipv4 => k.set_nw_src(a),
        Action::SetNwDst(a) if ipv4 => k.set_nw_dst(a),
        Action::SetIpv6Src(a) if ipv6 => k.set_ipv6_src(u128::from_be_bytes(a)),
        Action::SetIpv6Dst(a) if ipv6 => k.set_ipv6_dst(u128::from_be_bytes(a)),
        Action::SetIpv6Label(l) if ipv6 => k.set_ipv6_label(l),
        // A later fragment has no ports to rewrite.
        Action::SetTpSrc(p) if ip && tcp_udp && !later => k.set_tp_src(p),
        Action::SetTpDst(p) if ip && tcp_udp && !later => k.set_tp_dst(p),
        Action::SetNwTos(t) if ip => k.set_nw_tos((k.nw_tos() & 0x03) | (t & 0xfc)),
        Action::SetNwEcn(e) if ip => k.set_nw_tos((k.nw_tos() & 0xfc) | (e & 0x03)),
        Action::SetNwTtl(t) if ip => k.set_nw_ttl(t),
        Action::DecTtl if ip && k.nw_ttl() > 1 => k.set_nw_ttl(k.nw_ttl() - 1),
        Action::WriteMetadata { value, mask } => {
            k.set_metadata((k.metadata() & !mask) | (value & mask));
        }
        // The packet that goes on after ct(...) has its ct_* fields
        // cleared, as in OVS (they are set only in the tracked copy that
        // ct's table= looks up again); ct_clear clears them.
        Action::Ct(_) | Action::CtClear => k.clear_ct(),
        _ => {}
    }
}

#[cfg(test)]
#[path = "pipeline_tests.rs"]
mod tests;
