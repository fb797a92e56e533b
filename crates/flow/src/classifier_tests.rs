//! Tests of [`super::Classifier`]: table-driven cases written in flow
//! syntax, and a model check against a linear scan.

use super::*;
use crate::key::VLAN_PRESENT;
use crate::parse::{parse_filter, parse_flow};
use crate::rule::{FlowSpec, Match};
use proptest::prelude::*;

/// A classifier holding `rules` in order, rule i with seq i + 1.
fn build(rules: &[&str]) -> Classifier {
    let mut c = Classifier::new();
    for (i, text) in rules.iter().enumerate() {
        let spec = parse_flow(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        c.insert(Arc::new(Rule::new(spec, i as u64 + 1)));
    }
    c
}

/// A packet key written as exact match fields (unnamed fields are zero).
fn key(text: &str) -> FlowKey {
    parse_filter(text)
        .unwrap_or_else(|e| panic!("{text}: {e}"))
        .matches
        .key
}

/// The index (in the `build` list) of the rule `key` hits.
fn hit(c: &Classifier, key_text: &str) -> Option<usize> {
    c.lookup(&key(key_text)).map(|r| r.seq as usize - 1)
}

struct Case {
    name: &'static str,
    rules: &'static [&'static str],
    /// Packet key → index of the expected rule.
    expect: &'static [(&'static str, Option<usize>)],
}

const CASES: &[Case] = &[
    Case {
        name: "empty",
        rules: &[],
        expect: &[("in_port=1", None)],
    },
    Case {
        name: "higher priority wins whatever the order",
        rules: &[
            "priority=1,in_port=1,actions=output:2",
            "priority=9,in_port=1,actions=output:3",
        ],
        expect: &[("in_port=1", Some(1)), ("in_port=2", None)],
    },
    Case {
        name: "catch-all below specific",
        rules: &[
            "priority=0,actions=drop",
            "priority=10,tcp,tp_dst=80,actions=output:1",
        ],
        expect: &[
            ("tcp,tp_dst=80", Some(1)),
            ("tcp,tp_dst=81", Some(0)),
            ("in_port=5", Some(0)),
        ],
    },
    Case {
        name: "longest prefix via priorities",
        rules: &[
            "priority=8,ip,nw_dst=10.0.0.0/8,actions=output:1",
            "priority=24,ip,nw_dst=10.1.2.0/24,actions=output:3",
            "priority=16,ip,nw_dst=10.1.0.0/16,actions=output:2",
            "priority=0,ip,actions=drop",
        ],
        expect: &[
            ("ip,nw_dst=10.1.2.3", Some(1)),
            ("ip,nw_dst=10.1.3.3", Some(2)),
            ("ip,nw_dst=10.2.0.1", Some(0)),
            ("ip,nw_dst=11.0.0.1", Some(3)),
            ("arp,nw_dst=10.1.2.3", None),
        ],
    },
    Case {
        name: "short prefix with higher priority shadows longer",
        rules: &[
            "priority=5,ip,nw_dst=10.1.2.0/24,actions=output:3",
            "priority=50,ip,nw_dst=10.0.0.0/8,actions=drop",
        ],
        expect: &[("ip,nw_dst=10.1.2.3", Some(1))],
    },
    Case {
        name: "overlapping rules on different fields",
        rules: &[
            "priority=100,in_port=1,actions=output:9",
            "priority=200,udp,tp_dst=53,actions=output:8",
            "priority=50,dl_dst=ff:ff:ff:ff:ff:ff,actions=normal",
        ],
        expect: &[
            ("in_port=1,udp,tp_dst=53", Some(1)),
            ("in_port=1,udp,tp_dst=54", Some(0)),
            ("in_port=1,dl_dst=ff:ff:ff:ff:ff:ff", Some(0)),
            ("in_port=2,dl_dst=ff:ff:ff:ff:ff:ff", Some(2)),
            ("in_port=2,dl_dst=ff:ff:ff:ff:ff:fe", None),
        ],
    },
    Case {
        name: "tie across subtables: older rule wins",
        rules: &[
            "priority=5,in_port=1,actions=output:2",
            "priority=5,tcp,actions=output:3",
        ],
        expect: &[("in_port=1,tcp", Some(0)), ("in_port=2,tcp", Some(1))],
    },
    Case {
        name: "tie across subtables, other insertion order",
        rules: &[
            "priority=5,tcp,actions=output:3",
            "priority=5,in_port=1,actions=output:2",
        ],
        expect: &[("in_port=1,tcp", Some(0)), ("in_port=1,udp", Some(1))],
    },
    Case {
        name: "tie: a newer rule in an older subtable loses to an older rule elsewhere",
        rules: &[
            "priority=5,in_port=1,actions=output:1",
            "priority=5,tcp,actions=output:2",
            "priority=5,in_port=2,actions=output:3",
        ],
        expect: &[
            ("in_port=2,tcp", Some(1)),
            ("in_port=2,udp", Some(2)),
            ("in_port=1,tcp", Some(0)),
        ],
    },
    Case {
        name: "tie at default priority among many masks",
        rules: &[
            "udp,tp_dst=1,actions=output:1",
            "in_port=3,actions=output:2",
            "ip,nw_src=10.0.0.0/8,actions=output:3",
            "dl_vlan=9,actions=output:4",
        ],
        expect: &[
            ("in_port=3,udp,nw_src=10.0.0.1,tp_dst=1,dl_vlan=9", Some(0)),
            ("in_port=3,udp,nw_src=10.0.0.1,tp_dst=2,dl_vlan=9", Some(1)),
            ("in_port=4,udp,nw_src=10.0.0.1,tp_dst=2,dl_vlan=9", Some(2)),
            ("in_port=4,udp,nw_src=11.0.0.1,tp_dst=2,dl_vlan=9", Some(3)),
        ],
    },
    Case {
        name: "dl_vlan: tagged VID, untagged, any",
        rules: &[
            "priority=30,dl_vlan=10,actions=output:1",
            "priority=20,dl_vlan=0xffff,actions=output:2",
            "priority=15,dl_vlan_pcp=5,actions=output:4",
            "priority=10,actions=output:3",
        ],
        expect: &[
            ("dl_vlan=10", Some(0)),
            ("dl_vlan=10,dl_vlan_pcp=5", Some(0)),
            ("dl_vlan=11,dl_vlan_pcp=5", Some(2)),
            ("dl_vlan=0", Some(3)),
            ("in_port=1", Some(1)),
        ],
    },
    Case {
        name: "dl_vlan=0 is a tag, not absence",
        rules: &["priority=1,dl_vlan=0,actions=output:1"],
        expect: &[("dl_vlan=0", Some(0)), ("in_port=1", None)],
    },
];

#[test]
fn classification_table() {
    for case in CASES {
        let c = build(case.rules);
        assert_eq!(c.len(), case.rules.len(), "{}", case.name);
        for &(k, want) in case.expect {
            assert_eq!(hit(&c, k), want, "{}: key {k}", case.name);
        }
        // Clones are independent snapshots with the same answers.
        let mut copy = c.clone();
        copy.remove_matching(&FlowFilter::default());
        assert!(copy.is_empty());
        for &(k, want) in case.expect {
            assert_eq!(hit(&c, k), want, "{} after clone: key {k}", case.name);
        }
    }
}

#[test]
fn identical_add_replaces() {
    let mut c = build(&[
        "priority=5,in_port=1,actions=output:2",
        "priority=6,in_port=1,actions=output:3",
    ]);
    let new = Arc::new(Rule::new(
        parse_flow("priority=5,in_port=1,actions=output:7").unwrap(),
        10,
    ));
    let old = c.insert(new.clone()).expect("replaced");
    assert_eq!(old.seq, 1);
    assert_eq!(c.len(), 2);
    // Different priority: a second rule, not a replacement.
    let other = Arc::new(Rule::new(
        parse_flow("priority=4,in_port=1,actions=drop").unwrap(),
        11,
    ));
    assert!(c.insert(other).is_none());
    assert_eq!(c.len(), 3);
    let prios: Vec<(u16, u64)> = c.rules().iter().map(|r| (r.spec.priority, r.seq)).collect();
    assert_eq!(prios, [(6, 2), (5, 10), (4, 11)]);
    assert!(c.remove_matching(&parse_filter("priority=6,in_port=1").unwrap()) == 1);
    assert!(Arc::ptr_eq(c.lookup(&key("in_port=1")).unwrap(), &new));
}

#[test]
fn deletion_strict_and_non_strict() {
    let rules = &[
        "priority=10,tcp,tp_dst=80,actions=output:1",  // 0
        "priority=20,tcp,tp_dst=80,actions=output:2",  // 1
        "priority=10,tcp,tp_dst=443,actions=output:3", // 2
        "priority=10,udp,tp_dst=80,actions=output:4",  // 3
        "priority=10,ip,actions=output:5",             // 4
        "priority=10,in_port=1,tcp,actions=output:6",  // 5
        "priority=10,actions=output:7",                // 6
    ];
    // (filter, removed count, indices left)
    let cases: &[(&str, usize, &[usize])] = &[
        ("", 7, &[]),
        ("tcp", 4, &[3, 4, 6]),
        ("tcp,tp_dst=80", 2, &[2, 3, 4, 5, 6]),
        ("ip", 6, &[6]),
        ("in_port=1", 1, &[0, 1, 2, 3, 4, 6]),
        ("in_port=2", 0, &[0, 1, 2, 3, 4, 5, 6]),
        ("priority=10,tcp,tp_dst=80", 1, &[1, 2, 3, 4, 5, 6]),
        ("priority=30,tcp,tp_dst=80", 0, &[0, 1, 2, 3, 4, 5, 6]),
        ("priority=10,tcp", 0, &[0, 1, 2, 3, 4, 5, 6]),
        ("priority=10", 1, &[0, 1, 2, 3, 4, 5]),
        ("priority=10,ip", 1, &[0, 1, 2, 3, 5, 6]),
    ];
    for &(filter, n, left) in cases {
        let mut c = build(rules);
        assert_eq!(
            c.remove_matching(&parse_filter(filter).unwrap()),
            n,
            "{filter:?}"
        );
        let mut got: Vec<usize> = c.rules().iter().map(|r| r.seq as usize - 1).collect();
        got.sort();
        assert_eq!(got, left, "{filter:?}");
        assert_eq!(c.len(), left.len(), "{filter:?}");
        // Lookups still agree with a linear scan after the removal.
        for k in [
            "tcp,tp_dst=80",
            "in_port=1,tcp,tp_dst=443",
            "udp,tp_dst=80",
            "arp",
        ] {
            let k = key(k);
            assert_eq!(
                c.lookup(&k).map(|r| r.seq),
                linear(&c.rules(), &k).map(|r| r.seq),
                "{filter:?}"
            );
        }
    }
}

#[test]
fn one_hash_probe_for_rules_sharing_a_mask() {
    let mut c = Classifier::new();
    for i in 0..1000u64 {
        let spec = parse_flow(&format!(
            "priority={},udp,in_port={},tp_dst={},actions=output:1",
            i % 7,
            i % 3 + 1,
            i
        ))
        .unwrap();
        assert!(c.insert(Arc::new(Rule::new(spec, i + 1))).is_none());
    }
    assert_eq!((c.len(), c.n_subtables()), (1000, 1));
    let (r, probes) = c.lookup_with_probes(&key("in_port=2,udp,tp_dst=700"));
    assert_eq!((r.map(|r| r.seq), probes), (Some(701), 1));
    let (r, probes) = c.lookup_with_probes(&key("in_port=2,udp,tp_dst=1700"));
    assert_eq!((r.map(|r| r.seq), probes), (None, 1));
}

/// The fields a filter names, as a mask.
/// The mask of the fields `text` names, and the table (every lookup
/// depends on the table it is in).
fn fields(text: &str) -> FlowKey {
    let mut m = parse_filter(text)
        .unwrap_or_else(|e| panic!("{text}: {e}"))
        .matches
        .mask;
    m.set_table(0xff);
    m
}

/// Staged lookup: a miss joins the megaflow's mask with the fields up to
/// the first stage where no rule agrees with the packet. (packet, the
/// fields its answer depends on, the rule it hits.)
#[test]
fn a_miss_depends_only_on_the_stages_up_to_where_no_rule_agrees() {
    let five_tuple = "in_port=1,udp,nw_src=0.0.0.0,nw_dst=0.0.0.0,tp_src=0,tp_dst=0";
    let mut c = build(&[
        "priority=100,in_port=1,udp,nw_src=10.0.0.1,nw_dst=10.0.0.2,tp_src=1024,tp_dst=5001,actions=output:2",
        "priority=100,in_port=1,udp,nw_src=10.0.0.1,nw_dst=10.0.0.2,tp_src=1025,tp_dst=5001,actions=output:2",
        "priority=100,in_port=1,udp,nw_src=10.0.0.9,nw_dst=10.0.0.2,tp_src=7,tp_dst=5001,actions=drop",
        "priority=1,actions=output:3",
    ]);
    let cases: [(&str, &str, &str, Option<usize>); 6] = [
        (
            "its own rule: the whole mask",
            "in_port=1,udp,nw_src=10.0.0.1,nw_dst=10.0.0.2,tp_src=1025,tp_dst=5001",
            five_tuple,
            Some(1),
        ),
        (
            "another port: in_port alone",
            "in_port=2,udp,nw_src=10.0.0.1,nw_dst=10.0.0.2,tp_src=1025,tp_dst=5001",
            "in_port=1",
            Some(3),
        ),
        (
            "not UDP: up to L2",
            "in_port=1,arp",
            "in_port=1,dl_type=0",
            Some(3),
        ),
        (
            "another source address: up to L3",
            "in_port=1,udp,nw_src=10.0.0.5,nw_dst=10.0.0.2,tp_src=1025,tp_dst=5001",
            "in_port=1,udp,nw_src=0.0.0.0,nw_dst=0.0.0.0",
            Some(3),
        ),
        (
            "a known address, another port: the whole mask",
            "in_port=1,udp,nw_src=10.0.0.1,nw_dst=10.0.0.2,tp_src=2000,tp_dst=5001",
            five_tuple,
            Some(3),
        ),
        (
            "the second address's rule",
            "in_port=1,udp,nw_src=10.0.0.9,nw_dst=10.0.0.2,tp_src=7,tp_dst=5001",
            five_tuple,
            Some(2),
        ),
    ];
    for (name, packet, want_mask, want_rule) in cases {
        let found = c.lookup_with_mask(&key(packet));
        assert_eq!(found.mask, fields(want_mask), "{name}: mask");
        assert_eq!(
            found.rule.map(|r| r.seq as usize - 1),
            want_rule,
            "{name}: rule"
        );
        // Narrowed: the 5-tuple subtable's whole mask is not in the answer's.
        let narrowed = want_mask != five_tuple;
        assert_eq!(found.narrowed, narrowed, "{name}: narrowed");
    }
    // Deleted, the second address's rule takes its prefix with it: its
    // traffic now misses at L3, compared against the one prefix left.
    let filter = parse_filter("in_port=1,udp,nw_src=10.0.0.9").unwrap();
    assert_eq!(c.remove_matching(&filter), 1);
    let found = c.lookup_with_mask(&key(
        "in_port=1,udp,nw_src=10.0.0.9,nw_dst=10.0.0.2,tp_src=7,tp_dst=5001",
    ));
    assert_eq!(
        found.mask,
        fields("in_port=1,udp,nw_src=0.0.0.0,nw_dst=0.0.0.0")
    );
    assert_eq!(found.rule.map(|r| r.seq), Some(4));
}

#[test]
fn lookup_stops_at_the_priority_bound() {
    let c = build(&[
        "priority=300,in_port=1,actions=output:1",
        "priority=200,tcp,actions=output:2",
        "priority=100,ip,nw_dst=10.0.0.0/8,actions=output:3",
    ]);
    assert_eq!(c.n_subtables(), 3);
    assert_eq!(c.lookup_with_probes(&key("in_port=1,tcp")).1, 1);
    assert_eq!(c.lookup_with_probes(&key("in_port=2,tcp")).1, 2);
    assert_eq!(c.lookup_with_probes(&key("in_port=2,udp")).1, 3);
}

fn linear<'a>(rules: &'a [Arc<Rule>], key: &FlowKey) -> Option<&'a Arc<Rule>> {
    rules
        .iter()
        .filter(|r| r.spec.matches.matches(key))
        .min_by_key(|r| (std::cmp::Reverse(r.spec.priority), r.seq))
}

// --- model check -----------------------------------------------------------

/// Small value sets so random rules overlap and random keys hit them.
fn arb_match() -> impl Strategy<Value = Match> {
    (
        prop::option::of(1u16..=3),
        prop::option::of(prop::sample::select(vec![0x0800u16, 0x0806])),
        prop::option::of((
            prop::sample::select(vec![0x0a00_0000u32, 0x0a01_0000, 0x0a01_0203]),
            0u32..=32,
        )),
        prop::option::of(prop::sample::select(vec![53u16, 80])),
        prop::option::of(prop::sample::select(vec![
            (0u16, VLAN_PRESENT),
            (VLAN_PRESENT | 1, 0x1fff),
            (VLAN_PRESENT, VLAN_PRESENT),
        ])),
    )
        .prop_map(|(port, dl_type, nw, tp, vlan)| {
            let (mut k, mut m) = (FlowKey::ZERO, FlowKey::ZERO);
            if let Some(p) = port {
                k.set_in_port(p);
                m.set_in_port(0xffff);
            }
            if let Some(t) = dl_type {
                k.set_dl_type(t);
                m.set_dl_type(0xffff);
            }
            if let Some((a, len)) = nw {
                k.set_nw_dst(a);
                m.set_nw_dst(crate::values::prefix_mask(len));
            }
            if let Some(p) = tp {
                k.set_tp_dst(p);
                m.set_tp_dst(0xffff);
            }
            if let Some((v, vm)) = vlan {
                k.set_vlan_tci(v);
                m.set_vlan_tci(vm);
            }
            Match {
                key: k.masked(&m),
                mask: m,
            }
        })
}

fn arb_key() -> impl Strategy<Value = FlowKey> {
    (
        0u16..=3,
        prop::sample::select(vec![0x0800u16, 0x0806, 0x86dd]),
        prop::sample::select(vec![
            0x0a00_0001u32,
            0x0a01_0001,
            0x0a01_0203,
            0x0a01_0204,
            0x0b00_0001,
        ]),
        prop::sample::select(vec![53u16, 80, 443]),
        prop::sample::select(vec![
            0u16,
            VLAN_PRESENT | 1,
            VLAN_PRESENT | 2,
            VLAN_PRESENT | 0x2001,
        ]),
    )
        .prop_map(|(port, t, nw, tp, tci)| {
            let mut k = FlowKey::ZERO;
            k.set_in_port(port);
            k.set_dl_type(t);
            k.set_nw_dst(nw);
            k.set_tp_dst(tp);
            k.set_vlan_tci(tci);
            k
        })
}

#[derive(Clone, Debug)]
enum Op {
    Insert(Match, u16),
    Remove(Match, Option<u16>),
}

fn arb_op() -> impl Strategy<Value = Op> {
    let prio = prop::sample::select(vec![0u16, 1, 5, 32768, 65535]);
    prop_oneof![
        6 => (arb_match(), prio.clone()).prop_map(|(m, p)| Op::Insert(m, p)),
        1 => (arb_match(), prop::option::of(prio)).prop_map(|(m, p)| Op::Remove(m, p)),
    ]
}

proptest! {
    #[test]
    fn lookup_agrees_with_linear_scan(
        ops in prop::collection::vec(arb_op(), 0..60),
        keys in prop::collection::vec(arb_key(), 1..40),
    ) {
        let mut c = Classifier::new();
        let mut model: Vec<Arc<Rule>> = Vec::new();
        for (seq, op) in ops.into_iter().enumerate() {
            match op {
                Op::Insert(matches, priority) => {
                    let spec = FlowSpec { priority, cookie: 0, timeouts: Default::default(), matches, tun_id: None, actions: vec![] };
                    let rule = Arc::new(Rule::new(spec, seq as u64));
                    let same = model.iter().position(|r| r.spec.matches == matches && r.spec.priority == priority);
                    let old = c.insert(rule.clone());
                    match same {
                        Some(i) => {
                            let want = std::mem::replace(&mut model[i], rule);
                            prop_assert!(old.is_some_and(|o| Arc::ptr_eq(&o, &want)));
                        }
                        None => {
                            prop_assert!(old.is_none());
                            model.push(rule);
                        }
                    }
                }
                Op::Remove(matches, priority) => {
                    let before = model.len();
                    let filter = FlowFilter { matches, priority, cookie: None };
                    // What dump-flows shows with the filter is what it deletes.
                    model.retain(|r| !filter.selects(&r.spec));
                    let n = c.remove_matching(&filter);
                    prop_assert_eq!(n, before - model.len());
                }
            }
            prop_assert_eq!(c.len(), model.len());
            let port_wide = crate::port_wide::PortWide::of(&c);
            for k in &keys {
                let want = linear(&model, k).map(|r| r.seq);
                prop_assert_eq!(c.lookup(k).map(|r| r.seq), want, "key {:?}", k);
                // A port-wide rule is the answer for every key of its port.
                if let Some(r) = port_wide.rule_for(k.in_port()) {
                    prop_assert_eq!(Some(r.seq), want, "port-wide rule for {:?}", k);
                }
                // The megaflow mask: every key equal on it gets the same
                // answer (stages kept right through inserts and removals).
                let found = c.lookup_with_mask(k);
                let mask = found.mask;
                prop_assert_eq!(found.rule.map(|r| r.seq), want);
                for other in keys.iter().filter(|o| o.masked(&mask) == k.masked(&mask)) {
                    prop_assert_eq!(
                        linear(&model, other).map(|r| r.seq), want,
                        "{:?} and {:?} agree on {:?}", k, other, mask
                    );
                }
            }
        }
        let mut want = model.clone();
        want.sort_by_key(|r| (std::cmp::Reverse(r.spec.priority), r.seq));
        let got: Vec<u64> = c.rules().iter().map(|r| r.seq).collect();
        prop_assert_eq!(got, want.iter().map(|r| r.seq).collect::<Vec<_>>());
    }
}

/// `sole_output`: (name, rules, in_port, the one port all its packets go to).
const SOLE_OUTPUT_CASES: &[(&str, &[&str], PortNo, Option<PortNo>)] = &[
    ("no rules: a miss", &[], 1, None),
    ("one catch-all", &["in_port=1,actions=output:2"], 1, Some(2)),
    (
        "another port's rule",
        &["in_port=3,actions=output:2"],
        1,
        None,
    ),
    ("any in_port", &["actions=output:2"], 1, Some(2)),
    (
        "the port's own output is skipped",
        &["actions=output:1"],
        1,
        None,
    ),
    (
        "a narrower rule to the same port first",
        &[
            "priority=200,in_port=1,ip,actions=output:2",
            "priority=100,in_port=1,actions=output:2",
        ],
        1,
        Some(2),
    ),
    (
        "a narrower rule elsewhere first",
        &[
            "priority=200,in_port=1,arp,actions=output:3",
            "priority=100,in_port=1,actions=output:2",
        ],
        1,
        None,
    ),
    (
        "a narrower drop first",
        &[
            "priority=200,in_port=1,tcp,actions=drop",
            "priority=100,in_port=1,actions=output:2",
        ],
        1,
        None,
    ),
    (
        "below the catch-all nothing counts",
        &[
            "priority=200,in_port=1,actions=output:2",
            "priority=100,in_port=1,arp,actions=output:3",
        ],
        1,
        Some(2),
    ),
    (
        "other ports' rules above do not count",
        &[
            "priority=300,in_port=4,actions=output:5",
            "in_port=1,actions=output:2",
        ],
        1,
        Some(2),
    ),
    (
        "an edit before the output",
        &["in_port=1,actions=mod_dl_dst:00:00:00:00:00:02,output:2"],
        1,
        None,
    ),
    (
        "two outputs",
        &["in_port=1,actions=output:2,output:3"],
        1,
        None,
    ),
    (
        "a shadowed rule elsewhere does not count",
        &[
            "priority=300,in_port=1,arp,actions=output:2",
            "priority=200,in_port=1,arp,actions=output:3",
            "priority=100,in_port=1,actions=output:2",
        ],
        1,
        Some(2),
    ),
    (
        "a drop above a wider rule still counts",
        &[
            "priority=300,in_port=1,actions=output:2",
            "priority=400,in_port=1,tcp,actions=drop",
        ],
        1,
        None,
    ),
    ("normal", &["in_port=1,actions=normal"], 1, None),
    (
        "only some packets covered",
        &["in_port=1,ip,actions=output:2"],
        1,
        None,
    ),
    (
        "equal priority: an older catch-all shadows a newer rule",
        &[
            "in_port=1,actions=output:2",
            "in_port=1,ip,actions=output:3",
        ],
        1,
        Some(2),
    ),
    (
        "equal priority: an older narrower rule wins over the catch-all",
        &[
            "in_port=1,ip,actions=output:3",
            "in_port=1,actions=output:2",
        ],
        1,
        None,
    ),
];

#[test]
fn sole_output_follows_priorities_down_to_the_catch_all() {
    for &(name, rules, in_port, want) in SOLE_OUTPUT_CASES {
        assert_eq!(build(rules).sole_output(in_port), want, "{name}");
    }
}

/// A copy shares every subtable; an edit copies only the subtables it
/// changes (add, strict and non-strict delete), and the original keeps
/// its rules.
#[test]
fn an_edit_copies_only_the_subtables_it_changes() {
    let base = build(&[
        "priority=100,ip,nw_dst=10.0.0.1,actions=output:1",
        "priority=100,ip,nw_dst=10.0.0.2,actions=output:2",
        "priority=90,ip,nw_src=10.1.0.0/16,actions=output:3",
        "priority=1,actions=output:4",
    ]);
    let mask_of = |c: &Classifier, text: &str| {
        let m = parse_flow(text).unwrap().matches.mask;
        c.subtables.iter().find(|s| s.mask == m).cloned()
    };
    let exact = "ip,nw_dst=10.0.0.9,actions=drop";
    let prefix = "ip,nw_src=10.2.0.0/16,actions=drop";
    let all = "actions=drop";
    // (edit, the subtable it must copy; the others stay shared)
    type Edit = fn(&mut Classifier);
    let cases: [(&str, Edit, &str); 3] = [
        (
            "add to the /32 nw_dst mask",
            |c| {
                let spec = parse_flow("priority=100,ip,nw_dst=10.0.0.3,actions=drop").unwrap();
                c.insert(Arc::new(Rule::new(spec, 99)));
            },
            exact,
        ),
        (
            "strict delete from the nw_src /16 mask",
            |c| {
                let f = parse_filter("priority=90,ip,nw_src=10.1.0.0/16").unwrap();
                assert_eq!(c.remove_matching(&f), 1);
            },
            prefix,
        ),
        (
            "non-strict delete of one nw_dst",
            |c| {
                let f = parse_filter("ip,nw_dst=10.0.0.2").unwrap();
                assert_eq!(c.remove_matching(&f), 1);
            },
            exact,
        ),
    ];
    for (what, edit, changed) in cases {
        let mut copy = base.clone();
        edit(&mut copy);
        for probe in [exact, prefix, all] {
            let (Some(a), b) = (mask_of(&base, probe), mask_of(&copy, probe)) else {
                panic!("{what}: {probe}: no such subtable in the original");
            };
            let shared = b.as_ref().is_some_and(|b| Arc::ptr_eq(&a, b));
            assert_eq!(shared, probe != changed, "{what}: subtable of {probe}");
        }
        assert_eq!(base.len(), 4, "{what}: the original changed");
    }
}

/// A subtable holds one table's rules: rules of several tables with the
/// same mask are apart, and a lookup probes only its own table's
/// subtables (the others are passed by on the number), while the
/// megaflow mask still names the table.
#[test]
fn a_lookup_probes_only_its_own_tables_subtables() {
    let c = build(&[
        "table=0,priority=100,udp,tp_src=1,actions=output:1",
        "table=1,priority=100,udp,tp_src=1,actions=output:2",
        "table=1,priority=50,udp,tp_src=2,actions=output:3",
        "table=2,priority=10,actions=output:4",
    ]);
    assert_eq!(c.n_subtables(), 3, "(mask, table) pairs");
    // (packet, the rule it hits, subtables probed)
    let cases = [
        ("table=0,udp,tp_src=1", Some(0), 1),
        ("table=1,udp,tp_src=1", Some(1), 1),
        ("table=1,udp,tp_src=2", Some(2), 1),
        ("table=2,udp,tp_src=1", Some(3), 1),
        ("table=3,udp,tp_src=1", None, 0),
    ];
    for (text, want, probes) in cases {
        let (r, n) = c.lookup_with_probes(&key(text));
        assert_eq!(r.map(|r| r.seq as usize - 1), want, "{text}");
        assert_eq!(n, probes, "{text}");
        assert_eq!(c.lookup_with_mask(&key(text)).mask.table(), 0xff, "{text}");
    }
}
