//! Port-wide rules: an in_port whose every packet one rule takes.
//!
//! Service chains are mostly steered by rules such as
//! `in_port=3,actions=output:4`: whatever a VNF sends goes to the next
//! hop. For such a port the flow key decides nothing — extracting it,
//! hashing it and probing the caches would only find the same rule again.
//! So each flow-table generation works out, per in_port, whether one rule
//! takes all its packets, and the PMD's decision then skips key
//! extraction and lookups for that port's batches (counted as
//! `port_wide_hits`).
//!
//! A rule takes every packet of port P when it matches P on `in_port`
//! alone (or matches everything) and no rule that could match a packet of
//! P beats it (priority, then the older rule). The check is conservative:
//! another subtable whose best rule beats the candidate is assumed to hold
//! a rule that could match P, so P falls back to the normal lookup. It
//! costs a walk over the subtables and over the `in_port`-only rules, once
//! per table edit — never per packet.

use crate::classifier::{Classifier, beats};
use crate::key::{FlowKey, PortNo};
use crate::rule::Rule;
use std::sync::Arc;

/// The mask of a match on nothing but its table (every rule matches its
/// table's number: a catch-all's mask).
pub const TABLE_ONLY: FlowKey = FlowKey {
    w: {
        let mut w = [0; crate::key::KEY_WORDS];
        w[4] = 0xff << 52;
        w
    },
};

/// The mask of a match on `in_port` alone (and the table).
pub const IN_PORT_ONLY: FlowKey = FlowKey {
    w: {
        let mut w = TABLE_ONLY.w;
        w[0] = 0xffff;
        w
    },
};

/// Per in_port, the rule that takes all of its packets, if one does.
#[derive(Debug, Default, Clone)]
pub struct PortWide {
    /// Ports an `in_port`-only rule names, sorted: the rule taking all
    /// their packets, or `None` where some other rule may come first.
    named: Vec<(PortNo, Option<Arc<Rule>>)>,
    /// For every port not in `named`: the catch-all rule, when nothing can
    /// come before it.
    others: Option<Arc<Rule>>,
}

impl PortWide {
    /// Works out the port-wide rules of `classifier`.
    pub fn of(classifier: &Classifier) -> PortWide {
        let mut catch_all = None;
        let mut by_port = Vec::new();
        // Bounds (priority, seq) of every other subtable.
        let mut rest = Vec::new();
        // Packets arrive in table 0: only its rules take them. (The other
        // subtables' bounds count whatever table their rules are in:
        // conservative.)
        let table_0 = |r: &&Arc<Rule>| r.spec.matches.key.table() == 0;
        for view in classifier.subtable_views() {
            if view.mask == TABLE_ONLY {
                // One such subtable per table: only table 0's catch-all
                // counts (a later table's must not clear it).
                if let Some(r) = view.best_rules().find(table_0) {
                    catch_all = Some(r);
                }
            } else if view.mask == IN_PORT_ONLY {
                by_port.extend(view.best_rules().filter(table_0));
            } else {
                rest.push(view.bound);
            }
        }
        // A rule that goes on to later tables takes no port whole: its
        // packets are resolved through the pipeline.
        let unbeaten = |r: &Arc<Rule>| {
            !r.pipeline
                && !rest
                    .iter()
                    .any(|&(p, s)| beats(p, s, r.spec.priority, r.seq))
        };
        let mut named: Vec<(PortNo, Option<Arc<Rule>>)> = by_port
            .into_iter()
            .map(|own| {
                let first = match catch_all {
                    Some(c) if beats(c.spec.priority, c.seq, own.spec.priority, own.seq) => c,
                    _ => own,
                };
                let port = own.spec.matches.key.in_port();
                (port, unbeaten(first).then(|| first.clone()))
            })
            .collect();
        named.sort_unstable_by_key(|(p, _)| *p);
        PortWide {
            named,
            others: catch_all.filter(|c| unbeaten(c)).cloned(),
        }
    }

    /// The rule that takes every packet received on `in_port`, if any.
    #[inline]
    pub fn rule_for(&self, in_port: PortNo) -> Option<&Arc<Rule>> {
        match self.named.binary_search_by_key(&in_port, |(p, _)| *p) {
            Ok(i) => self.named[i].1.as_ref(),
            Err(_) => self.others.as_ref(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse_flow;

    /// (name, rules in insertion order, in_port, index of the rule that
    /// takes all its packets).
    const CASES: &[(&str, &[&str], PortNo, Option<usize>)] = &[
        ("no rules", &[], 1, None),
        ("a chain hop", &["in_port=1,actions=output:2"], 1, Some(0)),
        ("another port", &["in_port=1,actions=output:2"], 3, None),
        ("catch-all", &["actions=output:2"], 7, Some(0)),
        (
            "the port's own rule above the catch-all",
            &[
                "priority=1,actions=drop",
                "priority=5,in_port=1,actions=output:2",
            ],
            1,
            Some(1),
        ),
        (
            "the catch-all above the port's rule",
            &[
                "priority=9,actions=drop",
                "priority=5,in_port=1,actions=output:2",
            ],
            1,
            Some(0),
        ),
        (
            "equal priorities: the older rule",
            &[
                "priority=5,actions=drop",
                "priority=5,in_port=1,actions=output:2",
            ],
            1,
            Some(0),
        ),
        (
            "a narrower rule above",
            &[
                "priority=5,in_port=1,actions=output:2",
                "priority=9,in_port=1,udp,actions=drop",
            ],
            1,
            None,
        ),
        (
            "a narrower rule of another port above: conservative",
            &[
                "priority=5,in_port=1,actions=output:2",
                "priority=9,in_port=3,udp,actions=drop",
            ],
            1,
            None,
        ),
        (
            "narrower rules below",
            &[
                "priority=9,in_port=1,actions=output:2",
                "priority=5,in_port=1,udp,actions=drop",
            ],
            1,
            Some(0),
        ),
        (
            "an arp rule above the catch-all",
            &[
                "priority=0,actions=output:2",
                "priority=9,arp,actions=normal",
            ],
            4,
            None,
        ),
        (
            "a later table's catch-all does not hide table 0's (found by review)",
            &[
                "priority=9,actions=drop",
                "priority=5,in_port=1,actions=output:2",
                "table=1,priority=1,actions=output:3",
            ],
            1,
            Some(0),
        ),
        (
            "a later table's catch-all does not hide table 0's pipeline catch-all",
            &[
                "priority=100,actions=goto_table:1",
                "priority=5,in_port=1,actions=output:2",
                "table=1,priority=1,actions=output:3",
            ],
            1,
            None,
        ),
        (
            "other ports keep the catch-all when a named port's rule is above",
            &[
                "priority=0,actions=drop",
                "priority=9,in_port=1,actions=output:2",
            ],
            2,
            Some(0),
        ),
    ];

    #[test]
    fn port_wide_rules_are_found_only_where_they_take_everything() {
        for (name, rules, in_port, want) in CASES {
            let mut c = Classifier::new();
            for (i, text) in rules.iter().enumerate() {
                let spec = parse_flow(text).unwrap_or_else(|e| panic!("{name}: {text}: {e}"));
                c.insert(Arc::new(Rule::new(spec, i as u64 + 1)));
            }
            let got = PortWide::of(&c)
                .rule_for(*in_port)
                .map(|r| r.seq as usize - 1);
            assert_eq!(got, *want, "{name}");
        }
    }
}
