//! Which rules a table's dispatch keeps, and that each answer it gives is
//! the classifier's for the key the packet would be looked up with.

use super::*;
use crate::key::ct_state;
use crate::parse::parse_flow;

fn classifier(rules: &[&str]) -> Classifier {
    let mut c = Classifier::new();
    for (i, r) in rules.iter().enumerate() {
        let spec = parse_flow(r).unwrap_or_else(|e| panic!("{r}: {e}"));
        c.insert(Arc::new(Rule::new(spec, i as u64)));
    }
    c
}

/// Table 1's prefix, each rule by its cookie.
fn prefix_cookies(rules: &[&str]) -> Option<Vec<u64>> {
    let d = CtDispatch::of(&classifier(rules));
    d.prefix(1)
        .map(|p| p.rules().iter().map(|r| r.spec.cookie).collect())
}

const TO_TABLE_1: &str = "priority=100,ip,actions=ct(zone=1,table=1)";

#[test]
fn the_prefix_is_the_tables_first_rules_that_read_only_what_ct_decided() {
    let decided_ten: Vec<String> = (0..10)
        .map(|i| {
            format!(
                "table=1,cookie={i},priority={},ct_mark={i},ip,actions=output:2",
                100 - i
            )
        })
        .collect();
    let mut ten: Vec<&str> = vec![TO_TABLE_1];
    ten.extend(decided_ten.iter().map(String::as_str));
    let cases: &[(&str, Vec<&str>, Option<Vec<u64>>)] = &[
        (
            "a firewall: established, new, the rest",
            vec![
                TO_TABLE_1,
                "table=1,cookie=1,priority=100,ct_state=+trk+est,ip,actions=output:2",
                "table=1,cookie=2,priority=90,ct_state=+trk+new,ip,actions=ct(commit,zone=1),output:2",
                "table=1,cookie=3,priority=1,actions=drop",
            ],
            Some(vec![1, 2, 3]),
        ),
        (
            "in_port, ct_zone, ct_mark and metadata are decided too; equal priorities in the lookup's order",
            vec![
                TO_TABLE_1,
                "table=1,cookie=1,priority=10,ct_state=+trk+est,ct_zone=1,ip,in_port=1,actions=output:2",
                "table=1,cookie=2,priority=10,ct_mark=0x2a,ip,in_port=2,actions=output:1",
                "table=1,cookie=3,priority=5,metadata=0x7/0xff,actions=output:3",
            ],
            Some(vec![1, 2, 3]),
        ),
        (
            "a port match ends it",
            vec![
                TO_TABLE_1,
                "table=1,cookie=1,priority=100,ct_state=+trk+est,ip,actions=output:2",
                "table=1,cookie=2,priority=90,ct_state=+trk+new,tcp,tp_dst=22,actions=output:2",
                "table=1,cookie=3,priority=1,actions=drop",
            ],
            Some(vec![1]),
        ),
        (
            "an address match first: no prefix",
            vec![
                TO_TABLE_1,
                "table=1,cookie=1,priority=100,ip,nw_src=10.0.0.1,actions=drop",
                "table=1,cookie=2,priority=90,ct_state=+trk+est,ip,actions=output:2",
            ],
            None,
        ),
        (
            "ct_label is not in the word the prefix reads",
            vec![
                TO_TABLE_1,
                "table=1,cookie=1,priority=100,ct_label=0x1,ip,actions=output:2",
            ],
            None,
        ),
        (
            "a rule that goes on through the pipeline ends it",
            vec![
                TO_TABLE_1,
                "table=1,cookie=1,priority=100,ct_state=+trk+est,ip,actions=output:2",
                "table=1,cookie=2,priority=90,ct_state=+trk+new,ip,actions=ct(commit,zone=1,table=2)",
                "table=1,cookie=3,priority=1,actions=drop",
                "table=2,priority=1,actions=output:3",
            ],
            Some(vec![1]),
        ),
        (
            "no ct(table=1) anywhere: nothing for table 1",
            vec![
                "priority=100,ip,actions=goto_table:1",
                "table=1,cookie=1,priority=100,ip,actions=output:2",
            ],
            None,
        ),
        (
            "at most MAX_DISPATCH_RULES",
            ten.clone(),
            Some((0..MAX_DISPATCH_RULES as u64).collect()),
        ),
    ];
    for (what, rules, want) in cases {
        assert_eq!(&prefix_cookies(rules), want, "{what}");
    }
}

/// Every combination of the decided fields a tracked packet can bring:
/// the prefix's answer, when it has one, is the classifier's for the
/// whole key (as the recirculation builds it), and when it has none the
/// classifier's answer lies outside the prefix.
#[test]
fn every_answer_is_the_lookups() {
    let rule_sets: &[&[&str]] = &[
        &[
            TO_TABLE_1,
            "table=1,priority=100,ct_state=+trk+est,ip,actions=output:2",
            "table=1,priority=90,ct_state=+trk+new,ip,actions=ct(commit,zone=1),output:2",
            "table=1,priority=1,actions=drop",
        ],
        &[
            TO_TABLE_1,
            "table=1,priority=10,ct_state=+trk+new,ip,in_port=1,actions=ct(commit,zone=1),output:2",
            "table=1,priority=10,ct_state=+trk+est,ip,in_port=1,actions=output:2",
            "table=1,priority=10,ct_state=+trk+est,ip,in_port=2,actions=output:1",
            "table=1,priority=10,ct_state=+trk+est,ct_mark=0x2a/0xff,ct_zone=2,ip,actions=output:3",
            "table=1,priority=5,ct_state=+trk+rpl,ipv6,actions=output:4",
            "table=1,priority=3,metadata=0x1/0x1,actions=output:5",
            "table=1,priority=2,ct_state=+trk+est,tcp,tp_dst=80,actions=output:6",
            "table=1,priority=0,actions=drop",
        ],
    ];
    let states = [
        ct_state::TRK | ct_state::NEW,
        ct_state::TRK | ct_state::EST,
        ct_state::TRK | ct_state::EST | ct_state::RPL,
        ct_state::TRK | ct_state::INV,
        ct_state::TRK | ct_state::REL,
    ];
    for rules in rule_sets {
        let c = classifier(rules);
        let d = CtDispatch::of(&c);
        let p = d.prefix(1).expect("a prefix");
        let mut answered = 0;
        for in_port in [1u16, 2] {
            for (dl_type, proto) in [(0x0800u16, 17u8), (0x0800, 6), (0x86dd, 6)] {
                for &state in &states {
                    for (zone, mark) in [(1u16, 0u32), (2, 0x2a), (2, 0x12a), (1, 7)] {
                        for metadata in [0u64, 1, 2] {
                            let mut k = FlowKey::ZERO;
                            k.set_in_port(in_port);
                            k.set_dl_type(dl_type);
                            k.set_nw_proto(proto);
                            k.set_tp_dst(80);
                            k.set_table(1);
                            k.set_metadata(metadata);
                            k.set_ct(state, zone, mark, 0, None);
                            let lookup = c.lookup(&k);
                            let ct = FlowKey::ct_word(state, zone, mark);
                            match p.find(k.w[0], metadata, ct) {
                                Some(r) => {
                                    answered += 1;
                                    assert!(
                                        lookup.is_some_and(|l| Arc::ptr_eq(l, r)),
                                        "{k:?}: the prefix answered {}, the lookup {:?}",
                                        r.spec,
                                        lookup.map(|l| l.spec.to_string())
                                    );
                                }
                                None => assert!(
                                    lookup.is_none_or(|l| !p
                                        .rules()
                                        .iter()
                                        .any(|r| Arc::ptr_eq(l, r))),
                                    "{k:?}: the lookup found a prefix rule the prefix missed"
                                ),
                            }
                        }
                    }
                }
            }
        }
        assert!(answered > 0, "the prefix answered some keys");
    }
}
