//! Pipelines resolved over a classifier: which rules a packet passes, the
//! actions they add up to, the union mask, the bound on lookups, and the
//! parse-time checks (forward only, goto last).

use super::*;
use crate::parse::{parse_filter, parse_flow};

fn classifier(rules: &[&str]) -> Classifier {
    let mut c = Classifier::new();
    for (i, r) in rules.iter().enumerate() {
        let spec = parse_flow(r).unwrap_or_else(|e| panic!("{r}: {e}"));
        c.insert(Arc::new(Rule::new(spec, i as u64)));
    }
    c
}

/// A UDP packet's key: in_port 1, 10.0.0.1:1000 -> 10.0.0.2:53.
fn udp_key() -> FlowKey {
    let mut k = FlowKey::ZERO;
    k.set_in_port(1);
    k.set_dl_type(0x0800);
    k.set_nw_proto(17);
    k.set_nw_src(0x0a00_0001);
    k.set_nw_dst(0x0a00_0002);
    k.set_tp_src(1000);
    k.set_tp_dst(53);
    k
}

fn resolve_key(c: &Classifier, k: &FlowKey) -> Option<Resolution> {
    let found = c.lookup_with_mask(k);
    let first = found.rule?.clone();
    Some(resolve(c, k, &first, found.mask))
}

#[test]
fn a_three_table_pipeline_adds_up_its_actions_and_masks() {
    let c = classifier(&[
        "table=0,in_port=1,actions=write_metadata:0x5/0xff,goto_table:1",
        "table=1,metadata=0x5/0xff,udp,actions=mod_nw_dst:10.9.9.9,goto_table:2",
        // Table 2 sees the rewritten address.
        "table=2,ip,nw_dst=10.9.9.9,actions=output:3",
        "table=2,ip,nw_dst=10.0.0.2,actions=output:4",
    ]);
    let r = resolve_key(&c, &udp_key()).unwrap();
    assert_eq!(
        r.stages.iter().map(|s| s.table).collect::<Vec<_>>(),
        vec![0, 1, 2]
    );
    assert!(r.stages.iter().all(|s| s.rule.is_some()));
    assert_eq!(
        r.actions,
        vec![Action::SetNwDst(0x0a09_0909), Action::Output(3)]
    );
    assert!(!r.truncated);
    // The union: in_port (table 0), dl_type, nw_proto (table 1), nw_dst
    // (table 2), metadata (table 1), and every stage's table field.
    assert_eq!(r.mask.in_port(), 0xffff);
    assert_eq!(r.mask.nw_proto(), 0xff);
    assert_ne!(r.mask.nw_dst(), 0);
    assert_eq!(r.mask.metadata() & 0xff, 0xff);
    assert_eq!(r.mask.table(), 0xff);
    assert_eq!(r.mask.tp_src(), 0, "no table looked at the source port");
}

#[test]
fn a_miss_in_a_later_table_keeps_what_ran_before() {
    let c = classifier(&[
        "in_port=1,actions=output:2,goto_table:5",
        "table=5,tcp,actions=output:3",
    ]);
    let r = resolve_key(&c, &udp_key()).unwrap();
    assert_eq!(r.stages.len(), 2);
    assert!(r.stages[1].rule.is_none(), "table 5 has no rule for UDP");
    assert_eq!(r.actions, vec![Action::Output(2)]);
}

#[test]
fn resubmit_runs_the_other_table_here_and_goes_on() {
    let c = classifier(&[
        "in_port=1,actions=mod_dl_src:02:00:00:00:00:aa,resubmit(,3),output:2",
        "table=3,actions=mod_dl_dst:02:00:00:00:00:bb,output:7",
    ]);
    let r = resolve_key(&c, &udp_key()).unwrap();
    assert_eq!(
        r.actions,
        vec![
            Action::SetDlSrc([2, 0, 0, 0, 0, 0xaa]),
            Action::SetDlDst([2, 0, 0, 0, 0, 0xbb]),
            Action::Output(7),
            Action::Output(2),
        ]
    );
}

#[test]
fn lookups_are_bounded() {
    // Each table resubmits to the next twice: 2^n lookups unbounded.
    let mut rules = Vec::new();
    for t in 0..20 {
        rules.push(format!(
            "table={t},actions=resubmit(,{}),resubmit(,{})",
            t + 1,
            t + 1
        ));
    }
    let rules: Vec<&str> = rules.iter().map(String::as_str).collect();
    let c = classifier(&rules);
    let r = resolve_key(&c, &udp_key()).unwrap();
    assert!(r.truncated);
    assert_eq!(r.stages.len(), MAX_LOOKUPS);
}

#[test]
fn composite_credits_every_rule_it_passed() {
    let c = classifier(&["in_port=1,actions=goto_table:1", "table=1,actions=output:2"]);
    let k = udp_key();
    let found = c.lookup_with_mask(&k);
    let first = found.rule.unwrap().clone();
    let res = resolve(&c, &k, &first, found.mask);
    let rule = composite(&first, &res);
    assert_eq!(rule.single_output, Some(2));
    assert!(!rule.pipeline);
    rule.credit(3, 192, 1);
    for part in &rule.parts {
        assert_eq!(
            part.stats
                .packets
                .load(std::sync::atomic::Ordering::Relaxed),
            3
        );
    }
    assert_eq!(rule.parts.len(), 2);
}

#[test]
fn table_numbers_in_rules_and_filters() {
    // A rule is in table 0 unless it says otherwise, and matches it exactly.
    let r = parse_flow("actions=drop").unwrap();
    assert_eq!((r.matches.key.table(), r.matches.mask.table()), (0, 0xff));
    let r = parse_flow("table=7,ip,actions=goto_table:9").unwrap();
    assert_eq!(r.matches.key.table(), 7);
    assert_eq!(
        r.to_string(),
        "priority=32768,table=7,ip,actions=goto_table:9"
    );
    assert_eq!(parse_flow(&r.to_string()).unwrap(), r);
    // A filter without table= selects every table.
    let f = parse_filter("ip").unwrap();
    assert_eq!(f.matches.mask.table(), 0);
    assert!(f.selects(&r));
    assert!(!parse_filter("table=3").unwrap().selects(&r));
    assert!(parse_filter("table=7").unwrap().selects(&r));
    // Strict without table=: the rule's match, whatever its table.
    assert!(parse_filter("priority=32768,ip").unwrap().selects(&r));
    for (text, want) in [
        (
            "table=3,actions=goto_table:3",
            "the pipeline only goes forward",
        ),
        (
            "table=3,actions=resubmit(,1)",
            "the pipeline only goes forward",
        ),
        (
            "actions=goto_table:1,output:2",
            "goto_table must be the last action",
        ),
        (
            "actions=resubmit(1,2)",
            "only resubmit(,TABLE) is supported",
        ),
        ("table=255,actions=drop", "\"255\" is not a table number"),
        ("actions=goto_table:255", "\"255\" is not a table number"),
    ] {
        let e = parse_flow(text).unwrap_err().to_string();
        assert!(e.contains(want), "{text}: {e}");
    }
    let w = parse_flow("actions=write_metadata:0x12/0xff,resubmit(,4),goto_table:5").unwrap();
    assert_eq!(
        w.to_string(),
        "priority=32768,actions=write_metadata:0x12/0xff,resubmit(,4),goto_table:5"
    );
}

#[test]
fn edit_key_follows_the_rewrites_a_later_table_sees() {
    let mut k = udp_key();
    k.set_nw_ttl(64);
    for a in [
        Action::SetNwSrc(0x0b00_0001),
        Action::SetTpDst(5353),
        Action::DecTtl,
        Action::SetNwTos(0xb8),
        Action::SetVlanVid(7),
        Action::SetIpv6Dst([0xff; 16]),
    ] {
        edit_key(&mut k, &a);
    }
    assert_eq!(k.nw_src(), 0x0b00_0001);
    assert_eq!(k.tp_dst(), 5353);
    assert_eq!(k.nw_ttl(), 63);
    assert_eq!(k.nw_tos(), 0xb8);
    assert_eq!(k.vlan_tci(), VLAN_PRESENT | 7);
    assert_eq!(k.ipv6_dst(), 0, "an IPv6 rewrite leaves an IPv4 key alone");
}

/// A `dec_ttl` that runs out inside a resubmitted table ends that table's
/// actions and the outer ones go on (OVS's rule, which the differential
/// test found nfvswitch breaking); with TTL left it decrements as usual.
/// Either way the decision depended on the TTL: it is in the mask.
#[test]
fn a_ttl_running_out_inside_a_resubmit_ends_only_that_table() {
    let c = classifier(&[
        "table=0,in_port=1,actions=output:2,resubmit(,1),output:3",
        "table=1,ip,actions=dec_ttl,output:4",
    ]);
    let mut k = udp_key();
    k.set_nw_ttl(1);
    let r = resolve_key(&c, &k).unwrap();
    assert_eq!(r.actions, vec![Action::Output(2), Action::Output(3)]);
    assert!(r.ttl_stopped);
    assert_eq!(r.mask.nw_ttl(), 0xff);
    k.set_nw_ttl(64);
    let r = resolve_key(&c, &k).unwrap();
    assert_eq!(
        r.actions,
        vec![
            Action::Output(2),
            Action::DecTtl,
            Action::Output(4),
            Action::Output(3)
        ]
    );
    assert!(!r.ttl_stopped);
    assert_eq!(r.mask.nw_ttl(), 0xff);
}

/// The PMD's resolver answers as `resolve` + `composite` do, makes one
/// composite per chain of rules and hands the same one back after, never
/// keeps one a stopped TTL decided, and starts over on a new table.
#[test]
fn the_resolver_makes_one_composite_per_chain() {
    let c = classifier(&[
        "table=0,in_port=1,actions=write_metadata:0x1/0xff,goto_table:1",
        "table=1,priority=100,udp,tp_src=1000,actions=goto_table:2",
        "table=1,priority=1,actions=mod_nw_tos:8,goto_table:2",
        "table=2,ip,actions=output:3",
        "table=2,priority=0,actions=drop",
    ]);
    let mut resolver = Resolver::default();
    let mut decide = |k: &FlowKey| {
        let found = c.lookup_with_mask(k);
        let first = found.rule.unwrap().clone();
        let want = resolve(&c, k, &first, found.mask);
        let (rule, mask) = resolver.resolve(&c, k, &first, found.mask);
        assert_eq!(rule.spec.actions, want.actions, "{k:?}");
        assert_eq!(mask, want.mask, "{k:?}");
        let parts: Vec<_> = want.stages.iter().filter_map(|s| s.rule.clone()).collect();
        assert!(
            rule.parts
                .iter()
                .zip(&parts)
                .all(|(a, b)| Arc::ptr_eq(a, b))
                && rule.parts.len() == parts.len()
        );
        rule
    };
    let a = udp_key();
    let mut b = a;
    b.set_tp_src(2000);
    let mut b2 = b;
    b2.set_nw_src(0x0a00_0099);
    let ra = decide(&a);
    let rb = decide(&b);
    assert!(!Arc::ptr_eq(&ra, &rb), "two chains, two composites");
    assert!(Arc::ptr_eq(&rb, &decide(&b2)), "the same chain's composite");
    assert!(Arc::ptr_eq(&ra, &decide(&a)));
    // (made so far: a, b)
    let made = 2;
    let mut expired = a;
    expired.set_nw_ttl(1);
    let stopped = classifier(&[
        "table=0,in_port=1,actions=output:2,resubmit(,1),output:3",
        "table=1,ip,actions=dec_ttl,output:4",
    ]);
    let found = stopped.lookup_with_mask(&expired);
    let first = found.rule.unwrap().clone();
    let mut r2 = Resolver::default();
    let (x, _) = r2.resolve(&stopped, &expired, &first, found.mask);
    let (y, _) = r2.resolve(&stopped, &expired, &first, found.mask);
    assert!(!Arc::ptr_eq(&x, &y), "a stopped TTL is never cached");
    assert_eq!(x.spec.actions, vec![Action::Output(2), Action::Output(3)]);
    assert_eq!(resolver.made, made);
    resolver.sync_version(7);
    let found = c.lookup_with_mask(&a);
    let first = found.rule.unwrap().clone();
    let (again, _) = resolver.resolve(&c, &a, &first, found.mask);
    assert!(
        !Arc::ptr_eq(&again, &ra),
        "a new table generation starts over"
    );
    assert_eq!(resolver.made, made + 1);
}

/// Two walks that match the same rules at different lookups (a
/// resubmit that missed, then one that matched, and the other way round)
/// run their actions in different orders: the resolver tells them apart
/// (found by review: it keyed composites by the matched rules alone).
#[test]
fn the_resolver_keys_composites_by_every_lookups_outcome() {
    let c = classifier(&[
        "table=0,actions=resubmit(,1),output:1,mod_dl_src:02:00:00:00:00:01,resubmit(,1),output:2",
        "table=1,dl_src=02:00:00:00:00:01,dl_dst=02:00:00:00:00:0d,actions=mod_dl_dst:02:00:00:00:00:0e",
    ]);
    let packet = |src: u64| {
        let mut k = udp_key();
        k.set_dl_src(src.to_be_bytes()[2..].try_into().unwrap());
        k.set_dl_dst([2, 0, 0, 0, 0, 0x0d]);
        k
    };
    let mut resolver = Resolver::default();
    // (dl_src): the first resubmit matches, then the second.
    for src in [0x0200_0000_0001u64, 0x0200_0000_0000] {
        let k = packet(src);
        let found = c.lookup_with_mask(&k);
        let first = found.rule.unwrap().clone();
        let want = resolve(&c, &k, &first, found.mask);
        let (rule, _) = resolver.resolve(&c, &k, &first, found.mask);
        assert_eq!(rule.spec.actions, want.actions, "dl_src {src:#x}");
    }
    assert_eq!(resolver.made, 2, "two walks, two composites");
}

mod resolver_model {
    use super::*;
    use proptest::prelude::*;

    /// A rule of a small pipeline: table 0-2, a match on dl_src/dl_dst
    /// from a pool of three values each, and actions from a pool that
    /// rewrites the matched fields, outputs and continues in later tables.
    fn arb_rule() -> impl Strategy<Value = String> {
        let mac = |i: u8| format!("02:00:00:00:00:0{i}");
        (
            0u8..3,
            0u16..4,
            prop::option::weighted(0.8, 0u8..3),
            prop::option::weighted(0.8, 0u8..3),
            prop::collection::vec(0u8..7, 0..6),
        )
            .prop_map(move |(table, prio, src, dst, acts)| {
                let mut r = format!("table={table},priority={prio}");
                if let Some(s) = src {
                    r += &format!(",dl_src={}", mac(s));
                }
                if let Some(d) = dst {
                    r += &format!(",dl_dst={}", mac(d));
                }
                let later = (table + 1..3).collect::<Vec<_>>();
                let mut list: Vec<String> = Vec::new();
                for a in acts {
                    list.push(match a {
                        0 | 1 => format!("mod_dl_src:{}", mac(a)),
                        2 => format!("mod_dl_dst:{}", mac(1)),
                        3 | 4 => format!("output:{}", a),
                        _ => match later.first() {
                            Some(t) => format!("resubmit(,{t})"),
                            None => "output:9".into(),
                        },
                    });
                }
                if list.is_empty() {
                    list.push("drop".into());
                }
                r + ",actions=" + &list.join(",")
            })
    }

    proptest! {
        // Walks that match the same rules at other lookups are rare
        // among random rule sets: enough cases to meet them (the bug
        // review found fails here within ~3,000).
        #![proptest_config(ProptestConfig::with_cases(3000))]

        /// One resolver over many packets answers each as a fresh
        /// resolution would: the same actions, the same mask.
        #[test]
        fn the_resolver_answers_as_resolve_does(
            rules in prop::collection::vec(arb_rule(), 1..12),
            packets in prop::collection::vec((0u8..3, 0u8..3), 1..60),
        ) {
            let mut c = Classifier::new();
            for (i, r) in rules.iter().enumerate() {
                if let Ok(spec) = parse_flow(r) {
                    c.insert(Arc::new(Rule::new(spec, i as u64)));
                }
            }
            let mut resolver = Resolver::default();
            for (s, d) in packets {
                let mut k = udp_key();
                k.set_dl_src([2, 0, 0, 0, 0, s]);
                k.set_dl_dst([2, 0, 0, 0, 0, d]);
                let found = c.lookup_with_mask(&k);
                let Some(first) = found.rule.cloned() else { continue };
                if !first.pipeline {
                    continue;
                }
                let want = resolve(&c, &k, &first, found.mask);
                let (rule, mask) = resolver.resolve(&c, &k, &first, found.mask);
                prop_assert_eq!(&rule.spec.actions, &want.actions, "{:?}", k);
                prop_assert_eq!(mask, want.mask);
            }
        }
    }
}
