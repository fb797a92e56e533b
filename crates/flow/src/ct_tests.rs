//! Tests of [`super`]: `ct(...)` and `ct_clear` parsed to what they say,
//! printed back in `ovs-ofctl`'s words, refused with the reason.

use super::*;
use crate::action::Action;
use crate::parse::parse_flow;
use proptest::prelude::*;

/// A `ct` built from its defaults.
fn ct(build: impl FnOnce(&mut CtAction)) -> Action {
    let mut c = CtAction::default();
    build(&mut c);
    Action::Ct(Box::new(c))
}

fn v4(a: &str, b: &str) -> Option<NatAddrs> {
    Some(NatAddrs::V4(a.parse().unwrap(), b.parse().unwrap()))
}

fn v6(a: &str, b: &str) -> Option<NatAddrs> {
    Some(NatAddrs::V6(a.parse().unwrap(), b.parse().unwrap()))
}

/// (the rule's match, its actions, the actions as parsed, the canonical
/// text of the actions).
fn good() -> Vec<(&'static str, &'static str, Vec<Action>, &'static str)> {
    vec![
        ("ip", "ct", vec![ct(|_| {})], "ct()"),
        ("ip", "ct()", vec![ct(|_| {})], "ct()"),
        (
            "ip",
            "CT(table=1)",
            vec![ct(|c| c.table = Some(1))],
            "ct(table=1)",
        ),
        (
            "ipv6",
            "ct(zone=5,table=0)",
            vec![ct(|c| {
                c.zone = 5;
                c.table = Some(0);
            })],
            "ct(table=0,zone=5)",
        ),
        (
            "ip",
            "ct(zone=0x10)",
            vec![ct(|c| c.zone = 16)],
            "ct(zone=16)",
        ),
        // zone=0 is the default and not printed.
        ("ip", "ct(zone=0)", vec![ct(|_| {})], "ct()"),
        (
            "tcp",
            "ct(commit),output:2",
            vec![ct(|c| c.commit = true), Action::Output(2)],
            "ct(commit),output:2",
        ),
        (
            "ip",
            "ct(force,commit,zone=7,table=254)",
            vec![ct(|c| {
                c.commit = true;
                c.force = true;
                c.zone = 7;
                c.table = Some(254);
            })],
            "ct(commit,force,table=254,zone=7)",
        ),
        (
            "ip",
            "ct( commit , table=2 ),output:3",
            vec![
                ct(|c| {
                    c.commit = true;
                    c.table = Some(2);
                }),
                Action::Output(3),
            ],
            "ct(commit,table=2),output:3",
        ),
        (
            "ip",
            "ct(nat,table=3)",
            vec![ct(|c| {
                c.nat = Some(Nat::Existing);
                c.table = Some(3);
            })],
            "ct(table=3,nat)",
        ),
        (
            "ip",
            "ct(nat())",
            vec![ct(|c| c.nat = Some(Nat::Existing))],
            "ct(nat)",
        ),
        (
            "ip",
            "ct(commit,nat(src=10.0.0.1))",
            vec![ct(|c| {
                c.commit = true;
                c.nat = Some(Nat::Src(NatRange {
                    addrs: v4("10.0.0.1", "10.0.0.1"),
                    ..NatRange::default()
                }));
            })],
            "ct(commit,nat(src=10.0.0.1))",
        ),
        // One address given as a range of one prints as one.
        (
            "ip",
            "ct(commit,nat(src=10.0.0.1-10.0.0.1))",
            vec![ct(|c| {
                c.commit = true;
                c.nat = Some(Nat::Src(NatRange {
                    addrs: v4("10.0.0.1", "10.0.0.1"),
                    ..NatRange::default()
                }));
            })],
            "ct(commit,nat(src=10.0.0.1))",
        ),
        (
            "tcp",
            "ct(commit,nat(dst=10.0.0.1-10.0.0.9:8000-8080,random,persistent))",
            vec![ct(|c| {
                c.commit = true;
                c.nat = Some(Nat::Dst(NatRange {
                    addrs: v4("10.0.0.1", "10.0.0.9"),
                    ports: Some((8000, 8080)),
                    persistent: true,
                    pick: PortPick::Random,
                }));
            })],
            "ct(commit,nat(dst=10.0.0.1-10.0.0.9:8000-8080,persistent,random))",
        ),
        (
            "udp",
            "ct(commit,nat(src=192.168.0.1:53,hash))",
            vec![ct(|c| {
                c.commit = true;
                c.nat = Some(Nat::Src(NatRange {
                    addrs: v4("192.168.0.1", "192.168.0.1"),
                    ports: Some((53, 53)),
                    pick: PortPick::Hash,
                    ..NatRange::default()
                }));
            })],
            "ct(commit,nat(src=192.168.0.1:53,hash))",
        ),
        (
            "ip",
            "ct(commit,nat(src))",
            vec![ct(|c| {
                c.commit = true;
                c.nat = Some(Nat::Src(NatRange::default()));
            })],
            "ct(commit,nat(src))",
        ),
        // IPv6: brackets before a port (and printed so), bare without.
        (
            "tcp6",
            "ct(commit,nat(dst=[fe80::1]:80))",
            vec![ct(|c| {
                c.commit = true;
                c.nat = Some(Nat::Dst(NatRange {
                    addrs: v6("fe80::1", "fe80::1"),
                    ports: Some((80, 80)),
                    ..NatRange::default()
                }));
            })],
            "ct(commit,nat(dst=[fe80::1]:80))",
        ),
        (
            "ipv6",
            "ct(commit,nat(src=[2001:db8::1]-[2001:db8::ff]))",
            vec![ct(|c| {
                c.commit = true;
                c.nat = Some(Nat::Src(NatRange {
                    addrs: v6("2001:db8::1", "2001:db8::ff"),
                    ..NatRange::default()
                }));
            })],
            "ct(commit,nat(src=2001:db8::1-2001:db8::ff))",
        ),
        (
            "ipv6",
            "ct(commit,nat(src=2001:db8::1-2001:db8::ff))",
            vec![ct(|c| {
                c.commit = true;
                c.nat = Some(Nat::Src(NatRange {
                    addrs: v6("2001:db8::1", "2001:db8::ff"),
                    ..NatRange::default()
                }));
            })],
            "ct(commit,nat(src=2001:db8::1-2001:db8::ff))",
        ),
        (
            "udp6",
            "ct(commit,nat(src=[::ffff:10.0.0.1]-[::ffff:10.0.0.2]:1024-2048))",
            vec![ct(|c| {
                c.commit = true;
                c.nat = Some(Nat::Src(NatRange {
                    addrs: v6("::ffff:10.0.0.1", "::ffff:10.0.0.2"),
                    ports: Some((1024, 2048)),
                    ..NatRange::default()
                }));
            })],
            "ct(commit,nat(src=[::ffff:10.0.0.1]-[::ffff:10.0.0.2]:1024-2048))",
        ),
        (
            "ip",
            "ct(commit,exec(set_field:0x1->ct_mark))",
            vec![ct(|c| {
                c.commit = true;
                c.mark = Some((1, u32::MAX));
            })],
            "ct(commit,exec(set_field:0x1->ct_mark))",
        ),
        // exec prints ct_mark first; values are masked; zero is "0".
        (
            "ip",
            "ct(commit,exec(set_field:0x1234/0xff->ct_label,set_field:0/0xf0->ct_mark))",
            vec![ct(|c| {
                c.commit = true;
                c.mark = Some((0, 0xf0));
                c.label = Some((0x34, 0xff));
            })],
            "ct(commit,exec(set_field:0/0xf0->ct_mark,set_field:0x34/0xff->ct_label))",
        ),
        (
            "ip",
            "ct(commit,zone=1,nat(src=10.0.0.1),exec(set_field:5->ct_mark,\
             SET_FIELD:0xffffffffffffffffffffffffffffffff->ct_label)),output:1",
            vec![
                ct(|c| {
                    c.commit = true;
                    c.zone = 1;
                    c.nat = Some(Nat::Src(NatRange {
                        addrs: v4("10.0.0.1", "10.0.0.1"),
                        ..NatRange::default()
                    }));
                    c.mark = Some((5, u32::MAX));
                    c.label = Some((u128::MAX, u128::MAX));
                }),
                Action::Output(1),
            ],
            "ct(commit,zone=1,nat(src=10.0.0.1),exec(set_field:0x5->ct_mark,\
             set_field:0xffffffffffffffffffffffffffffffff->ct_label)),output:1",
        ),
        // exec() with nothing in it sets nothing (and needs no commit).
        ("ip", "ct(exec())", vec![ct(|_| {})], "ct()"),
        // An invalid packet may go through the tracker, not commit.
        (
            "ip,ct_state=+trk+inv",
            "ct(table=1)",
            vec![ct(|c| c.table = Some(1))],
            "ct(table=1)",
        ),
        (
            "ip,ct_state=+trk-inv",
            "ct(commit)",
            vec![ct(|c| c.commit = true)],
            "ct(commit)",
        ),
        // ct(table=T) may go to this table or an earlier one (the tracked
        // copy starts over there); the rule is in table 0 here.
        (
            "ip",
            "ct(table=0),ct_clear,output:2",
            vec![
                ct(|c| c.table = Some(0)),
                Action::CtClear,
                Action::Output(2),
            ],
            "ct(table=0),ct_clear,output:2",
        ),
        // ct_clear needs no IP match.
        (
            "arp",
            "CT_CLEAR,normal",
            vec![Action::CtClear, Action::Normal],
            "ct_clear,normal",
        ),
        ("", "ct_clear", vec![Action::CtClear], "ct_clear"),
    ]
}

#[test]
fn ct_actions_parse_and_print_as_ovs_writes_them() {
    for (m, acts, want, canonical) in good() {
        let text = format!("{m},actions={acts}");
        let spec = parse_flow(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(spec.actions, want, "{text}");
        let printed = crate::format::ActionList(&spec.actions).to_string();
        assert_eq!(printed, canonical, "{text}");
        let again = parse_flow(&spec.to_string()).unwrap_or_else(|e| panic!("{spec}: {e}"));
        assert_eq!(again, spec, "{text}");
    }
}

/// A rule in table 5 may send the tracked copy to table 5 or 1: ct's
/// table= is not a step forward through the pipeline.
#[test]
fn ct_table_may_name_this_table_or_an_earlier_one() {
    for t in [0, 1, 5, 6, 254] {
        let text = format!("table=5,ip,actions=ct(table={t})");
        assert!(parse_flow(&text).is_ok(), "{text}");
    }
    // resubmit still only goes forward.
    assert!(parse_flow("table=5,ip,actions=ct(table=1),resubmit(,5)").is_err());
}

/// (the rule's match, its actions, the start of the error message).
const BAD: &[(&str, &str, &str)] = &[
    (
        "",
        "ct(commit)",
        "actions: ct: the rule must match ip or ipv6 (dl_type=0x0800 or 0x86dd): the tracker \
         follows IP connections",
    ),
    (
        "arp",
        "ct(table=1)",
        "actions: ct: the rule must match ip or ipv6",
    ),
    (
        "dl_type=0x0806",
        "ct(commit)",
        "actions: ct: the rule must match ip or ipv6",
    ),
    ("ip", "ct(force)", "actions: ct: \"force\" needs \"commit\""),
    (
        "ip",
        "ct(exec(set_field:1->ct_mark))",
        "actions: ct: exec(...) needs \"commit\" (ct_mark and ct_label are stored with a \
         connection being committed)",
    ),
    (
        "ip",
        "ct(nat(src=10.0.0.1))",
        "actions: ct: nat(src...) and nat(dst...) need \"commit\"",
    ),
    (
        "ip",
        "ct(table=1,nat(dst))",
        "actions: ct: nat(src...) and nat(dst...) need \"commit\"",
    ),
    (
        "ip",
        "ct(commit,commit)",
        "actions: ct: \"commit\" is given twice",
    ),
    (
        "ip",
        "ct(table=1,table=2)",
        "actions: ct: \"table\" is given twice",
    ),
    ("ip", "ct(nat,nat)", "actions: ct: \"nat\" is given twice"),
    (
        "ip",
        "ct(zone=NXM_NX_REG0[0..15])",
        "actions: ct: zone=NXM_NX_REG0[0..15]: a zone from a field or register is not \
         supported (this switch has no registers); give the zone as a number (0..65535)",
    ),
    (
        "ip",
        "ct(zone=reg0)",
        "actions: ct: zone=reg0: a zone from a field or register is not supported",
    ),
    (
        "ip",
        "ct(zone=-1)",
        "actions: ct: zone: \"-1\" is not a zone (0..65535)",
    ),
    (
        "ip",
        "ct(zone=65536)",
        "actions: ct: zone: \"65536\" is not a zone (0..65535)",
    ),
    (
        "ip",
        "ct(zone)",
        "actions: ct: \"zone\" needs a value (zone=...)",
    ),
    (
        "ip",
        "ct(table=255)",
        "actions: ct: table: \"255\" is not a table number (0..254)",
    ),
    (
        "ip",
        "ct(table=x)",
        "actions: ct: table: \"x\" is not a table number (0..254)",
    ),
    (
        "tcp",
        "ct(commit,alg=ftp)",
        "actions: ct: alg=ftp: application layer gateways (alg=ftp, alg=tftp) are not \
         supported",
    ),
    (
        "ip",
        "ct(commit=1)",
        "actions: ct: \"commit\" takes no value",
    ),
    (
        "ip",
        "ct(bogus)",
        "actions: ct: \"bogus\" is not a ct argument (commit, force, zone=N, table=T, nat, \
         nat(...), exec(...))",
    ),
    (
        "ip",
        "ct(commit",
        "actions: ct: \"ct(commit\" is not ct(ARGUMENT,...)",
    ),
    (
        "ip",
        "ct(commit,exec(output:1))",
        "actions: ct: exec: \"output:1\": only set_field:VALUE[/MASK]->ct_mark and \
         set_field:VALUE[/MASK]->ct_label may run inside exec(...)",
    ),
    (
        "ip",
        "ct(commit,exec(set_field:1->nw_ttl))",
        "actions: ct: exec: \"set_field:1->nw_ttl\": only set_field",
    ),
    (
        "ip",
        "ct(commit,exec(set_field:1->ct_mark,set_field:2->ct_mark))",
        "actions: ct: exec: ct_mark is set twice",
    ),
    (
        "ip",
        "ct(commit,exec(set_field:0x100000000->ct_mark))",
        "actions: ct: exec: \"0x100000000\" is not a 32-bit mark (V[/M])",
    ),
    (
        "ip",
        "ct(commit,exec(set_field:0xg->ct_label))",
        "actions: ct: exec: \"0xg\" is not a 128-bit label (V[/M])",
    ),
    (
        "ip",
        "ct(commit,nat(src=10.0.0.1,dst=10.0.0.2))",
        "actions: ct: nat: give one of src and dst, once",
    ),
    (
        "ip",
        "ct(commit,nat(persistent))",
        "actions: ct: nat: persistent, hash and random need src or dst",
    ),
    (
        "ip",
        "ct(commit,nat(src=10.0.0.1,hash,random))",
        "actions: ct: nat: \"hash\" and \"random\" exclude each other",
    ),
    (
        "ip",
        "ct(commit,nat(src=10.0.0.1,sticky))",
        "actions: ct: nat: \"sticky\" is not a nat argument",
    ),
    (
        "ip",
        "ct(commit,nat(src=10.0.0.9-10.0.0.1))",
        "actions: ct: nat: \"10.0.0.9-10.0.0.1\": the range ends below its start",
    ),
    (
        "ip",
        "ct(commit,nat(src=10.0.0.1:90-80))",
        "actions: ct: nat: \"10.0.0.1:90-80\": the port range ends below its start",
    ),
    (
        "ip",
        "ct(commit,nat(src=10.0.0.1-[::1]))",
        "actions: ct: nat: \"10.0.0.1-[::1]\": both ends of a range must be IPv4, or both IPv6",
    ),
    (
        "ip",
        "ct(commit,nat(src=10.0.0.1:0))",
        "actions: ct: nat: \"0\" is not a port (1..65535)",
    ),
    (
        "ip",
        "ct(commit,nat(src=10.0.0.1:65536))",
        "actions: ct: nat: \"65536\" is not a port (1..65535)",
    ),
    (
        "ip",
        "ct(commit,nat(src=10.0.0))",
        "actions: ct: nat: \"10.0.0\" is not an address range",
    ),
    (
        "ip",
        "ct(commit,nat(src=10.0.0.1x))",
        "actions: ct: nat: \"10.0.0.1x\" is not an address range",
    ),
    (
        "ipv6",
        "ct(commit,nat(dst=[fe80::1:80))",
        "actions: ct: nat: \"[fe80::1:80\" is not an address range",
    ),
    (
        "ipv6",
        "ct(commit,nat(src=10.0.0.1))",
        "actions: ct: nat with an IPv4 range in a rule that matches ipv6",
    ),
    (
        "ip",
        "ct(commit,nat(dst=[fe80::1]:80))",
        "actions: ct: nat with an IPv6 range in a rule that matches ip",
    ),
    (
        "ip,ct_state=+trk+inv",
        "ct(commit)",
        "actions: ct: commit in a rule that matches ct_state=+inv",
    ),
    (
        "ip",
        "ct_clear:1",
        "actions: \"ct_clear\" takes no argument",
    ),
];

#[test]
fn bad_ct_actions_are_refused_with_the_reason() {
    for (m, acts, want) in BAD {
        let text = format!("{m},actions={acts}");
        match parse_flow(&text) {
            Ok(spec) => panic!("{text}: accepted as {spec}"),
            Err(e) => assert!(
                e.to_string().starts_with(want),
                "{text}: got \"{e}\", want \"{want}...\""
            ),
        }
    }
}

/// A group bucket holds ct_clear (which an action set beside an output
/// never runs, as in OVS) but not ct.
#[test]
fn group_buckets_take_ct_clear_but_not_ct() {
    let g = crate::parse_group("group_id=1,type=all,bucket=actions=ct_clear,output:2").unwrap();
    assert_eq!(g.buckets[0].actions, [Action::CtClear, Action::Output(2)]);
    assert_eq!(g.buckets[0].run, [Action::Output(2)]);
    let e = crate::parse_group("group_id=1,type=select,bucket=actions=ct(commit),output:2")
        .unwrap_err()
        .to_string();
    assert!(e.contains("a bucket may not hold ct(...)"), "{e}");
}

fn arb_range() -> impl Strategy<Value = NatRange> {
    let addrs = prop_oneof![
        Just(None),
        (any::<u32>(), any::<u32>()).prop_map(|(a, b)| {
            let (a, b) = (a.min(b), a.max(b));
            Some(NatAddrs::V4(a.into(), b.into()))
        }),
        (any::<u128>(), any::<u128>()).prop_map(|(a, b)| {
            let (a, b) = (a.min(b), a.max(b));
            Some(NatAddrs::V6(a.into(), b.into()))
        }),
    ];
    let pick = prop_oneof![
        Just(PortPick::Default),
        Just(PortPick::Hash),
        Just(PortPick::Random)
    ];
    (
        addrs,
        prop::option::of((1..=u16::MAX, 1..=u16::MAX)),
        any::<bool>(),
        pick,
    )
        .prop_map(|(addrs, ports, persistent, pick)| NatRange {
            addrs,
            ports: ports
                .filter(|_| addrs.is_some())
                .map(|(a, b)| (a.min(b), a.max(b))),
            persistent,
            pick,
        })
}

prop_compose! {
    fn arb_ct()(
        commit in any::<bool>(),
        force in any::<bool>(),
        zone in prop_oneof![Just(0u16), any::<u16>()],
        table in prop::option::of(0..=254u8),
        nat in prop::option::of(prop_oneof![
            Just(Nat::Existing),
            arb_range().prop_map(Nat::Src),
            arb_range().prop_map(Nat::Dst),
        ]),
        mark in prop::option::of(any::<(u32, u32)>()),
        label in prop::option::of(any::<(u128, u128)>()),
    ) -> CtAction {
        let nat = nat.filter(|n| commit || *n == Nat::Existing);
        CtAction {
            commit,
            force: force && commit,
            zone,
            table,
            nat,
            mark: mark.filter(|_| commit).map(|(v, m)| (v & m, m)),
            label: label.filter(|_| commit).map(|(v, m)| (v & m, m)),
            recirc_metadata: 0,
        }
    }
}

proptest! {
    /// Any ct the parser could make prints to text that parses back to
    /// it, in a rule of the family its NAT range needs.
    #[test]
    fn any_ct_round_trips(c in arb_ct()) {
        let family = match c.nat {
            Some(Nat::Src(r) | Nat::Dst(r)) => match r.addrs {
                Some(NatAddrs::V6(..)) => "ipv6",
                _ => "ip",
            },
            _ => "ip",
        };
        let text = format!("{family},actions={c},output:1");
        let spec = parse_flow(&text).map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
        prop_assert_eq!(&spec.actions[0], &Action::Ct(Box::new(c)), "{}", text);
    }

    #[test]
    fn the_ct_parser_never_panics(text in "ct\\([a-z_=,:./0-9x()\\[\\]>-]{0,40}\\)") {
        let _ = parse_flow(&format!("ip,actions={text}"));
    }
}
