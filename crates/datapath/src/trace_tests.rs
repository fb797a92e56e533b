//! Traces of packets described as matches, against rule sets written in
//! flow syntax: the tier, the rule, each action's effect, the outputs.

use super::*;
use crate::group_choice::select_hash;
use nfv_flow::parse_filter;
use nfv_flow::table::SharedFlowTable;

fn table(rules: &[&str]) -> Arc<FlowTable> {
    let t = SharedFlowTable::new();
    t.add_flows(
        rules
            .iter()
            .map(|r| nfv_flow::parse_flow(r).unwrap_or_else(|e| panic!("{r}: {e}"))),
    );
    t.snapshot()
}

/// A trace with every port live.
fn trace_up(table: &FlowTable, packet: FlowKey) -> Trace {
    trace(table, packet, &|_| true)
}

fn packet(fields: &str) -> FlowKey {
    parse_filter(fields)
        .unwrap_or_else(|e| panic!("{fields}: {e}"))
        .matches
        .key
}

struct Case {
    name: &'static str,
    rules: &'static [&'static str],
    packet: &'static str,
    port_wide: bool,
    /// The matched rule's text as dump-flows shows it (`None`: no match).
    rule: Option<&'static str>,
    outputs: &'static [Output],
    /// Number of actions applied, and of actions never applied.
    steps: usize,
    unused: usize,
}

const CASES: &[Case] = &[
    Case {
        name: "a chain hop: port-wide, no lookup",
        rules: &["in_port=1,actions=output:2"],
        packet: "in_port=1,udp,tp_dst=80",
        port_wide: true,
        rule: Some("priority=32768,in_port=1,actions=output:2"),
        outputs: &[Output::Port(2)],
        steps: 1,
        unused: 0,
    },
    Case {
        name: "no rule matches",
        rules: &["in_port=1,actions=output:2"],
        packet: "in_port=3,udp",
        port_wide: false,
        rule: None,
        outputs: &[],
        steps: 0,
        unused: 0,
    },
    Case {
        name: "a narrower rule wins by priority",
        rules: &[
            "priority=1,in_port=1,actions=output:2",
            "priority=9,in_port=1,tcp,tp_dst=22,actions=drop",
        ],
        packet: "in_port=1,tcp,tp_dst=22",
        port_wide: false,
        rule: Some("priority=9,tcp,in_port=1,tp_dst=22,actions=drop"),
        outputs: &[],
        steps: 0,
        unused: 0,
    },
    Case {
        name: "edits, two outputs, the in_port skipped, a trailing edit unused",
        rules: &[
            "in_port=1,actions=mod_dl_dst:02:00:00:00:00:09,output:2,output:1,mod_vlan_vid:7,output:3,strip_vlan",
        ],
        packet: "in_port=1,ip",
        port_wide: true,
        rule: None,
        outputs: &[Output::Port(2), Output::Port(3)],
        steps: 5,
        unused: 1,
    },
    Case {
        name: "normal",
        rules: &["priority=5,arp,actions=normal", "priority=1,actions=drop"],
        packet: "in_port=4,arp",
        port_wide: false,
        rule: Some("priority=5,arp,actions=normal"),
        outputs: &[Output::Normal],
        steps: 1,
        unused: 0,
    },
];

#[test]
fn traces_name_the_tier_the_rule_each_action_and_the_outputs() {
    for c in CASES {
        let t = trace_up(&table(c.rules), packet(c.packet));
        assert_eq!(
            t.tier == Tier::PortWide,
            c.port_wide,
            "{}: {:?}",
            c.name,
            t.tier
        );
        if let Some(want) = c.rule {
            let got = t.rule.as_ref().map(|r| r.spec.to_string());
            assert_eq!(got.as_deref(), Some(want), "{}", c.name);
        }
        if c.rule.is_none() && !c.port_wide {
            assert!(t.rule.is_none(), "{}: {:?}", c.name, t.rule);
        }
        assert_eq!(t.outputs, c.outputs, "{}", c.name);
        assert_eq!(
            (t.steps.len(), t.unused.len()),
            (c.steps, c.unused),
            "{}",
            c.name
        );
    }
}

#[test]
fn each_step_shows_the_packet_after_its_action() {
    let t = trace_up(
        &table(&[
            "in_port=1,actions=mod_dl_dst:02:00:00:00:00:09,mod_vlan_vid:7,output:2,strip_vlan,output:3",
        ]),
        packet("in_port=1,ip,dl_dst=02:00:00:00:00:01"),
    );
    let after: Vec<(u16, [u8; 6])> = t
        .steps
        .iter()
        .map(|s| (s.after.vlan_tci(), s.after.dl_dst()))
        .collect();
    let nine = [2, 0, 0, 0, 0, 9];
    assert_eq!(
        after,
        vec![
            (0, nine),
            (VLAN_PRESENT | 7, nine),
            (VLAN_PRESENT | 7, nine),
            (0, nine),
            (0, nine)
        ]
    );
    assert_eq!(t.outputs, vec![Output::Port(2), Output::Port(3)]);
}

#[test]
fn the_megaflow_is_what_the_pmd_would_cache() {
    // Three subtables visited: cached as a megaflow on the fields the
    // answer depends on (not the source port: one megaflow serves every
    // connection to the same place).
    let rules = [
        "priority=9,udp,tp_dst=7,actions=drop",
        "priority=9,ip,nw_dst=10.9.9.0/24,actions=drop",
        "priority=9,arp,actions=drop",
        "priority=1,ip,actions=output:2",
    ];
    let t = trace_up(
        &table(&rules),
        packet("in_port=1,udp,nw_dst=10.0.0.2,tp_src=1000,tp_dst=80"),
    );
    let Tier::Classifier { probes, megaflow } = &t.tier else {
        panic!("{:?}", t.tier)
    };
    assert!(*probes >= 3, "probes {probes}");
    let m = megaflow.expect("cached as a megaflow");
    assert_eq!(m.mask.tp_src(), 0, "the source port is left out: {m}");
    assert_ne!(m.mask.tp_dst(), 0, "the destination port decides: {m}");
    // One subtable on an address: an exact-match cache entry only.
    let t = trace_up(
        &table(&["priority=1,ip,nw_dst=10.0.0.0/8,actions=output:2"]),
        packet("in_port=1,ip,nw_dst=10.0.0.2"),
    );
    assert_eq!(
        t.tier,
        Tier::Classifier {
            probes: 1,
            megaflow: None
        }
    );
    // One subtable that tells no flows apart (`ct_state`, `dl_type`):
    // a megaflow all the same (`decision::coarse`).
    let t = trace_up(
        &table(&["priority=1,ip,actions=output:2"]),
        packet("in_port=1,ip"),
    );
    let Tier::Classifier { probes, megaflow } = &t.tier else {
        panic!("{:?}", t.tier)
    };
    assert_eq!(*probes, 1);
    let m = megaflow.expect("a coarse mask is cached as a megaflow");
    assert_eq!(m.mask.nw_dst(), 0, "{m}");
    assert_ne!(m.mask.dl_type(), 0, "{m}");
}

/// As the interpreter: `dec_ttl` on a TTL of 0 or 1 drops the packet
/// there; copies sent before stay sent, nothing after applies (OVS's
/// `ofproto/trace` agrees: the invalid-TTL exception ends the actions).
#[test]
fn an_expired_ttl_ends_the_actions() {
    let rules = ["in_port=1,actions=output:2,dec_ttl,mod_dl_dst:02:00:00:00:00:09,output:3"];
    let t = trace_up(&table(&rules), packet("in_port=1,udp,nw_ttl=1"));
    assert_eq!(t.outputs, vec![Output::Port(2)]);
    assert_eq!((t.steps.len(), t.unused.len()), (2, 2));
    assert!(t.steps[1].note.as_deref().unwrap().contains("ttl_expired"));
    // A TTL of 2 goes on, decremented.
    let t = trace_up(&table(&rules), packet("in_port=1,udp,nw_ttl=2"));
    assert_eq!(t.outputs, vec![Output::Port(2), Output::Port(3)]);
    assert_eq!(t.steps[3].after.nw_ttl(), 1);
    // Not IP: nothing to decrement, nothing dropped.
    let t = trace_up(&table(&rules), packet("in_port=1,arp"));
    assert_eq!(t.outputs.len(), 2);
}

/// strip_vlan after push_vlan on a tagged packet brings the original tag
/// back (the key holds one tag; the trace remembers the ones covered).
#[test]
fn strip_vlan_uncovers_the_tag_push_vlan_covered() {
    let rules =
        ["in_port=1,actions=push_vlan:0x88a8,output:2,strip_vlan,output:3,strip_vlan,output:4"];
    let t = trace_up(&table(&rules), packet("in_port=1,dl_vlan=5,dl_vlan_pcp=3"));
    let tci: Vec<u16> = t.steps.iter().map(|s| s.after.vlan_tci()).collect();
    let original = VLAN_PRESENT | 5 | 3 << 13;
    assert_eq!(
        tci,
        vec![VLAN_PRESENT, VLAN_PRESENT, original, original, 0, 0]
    );
}

/// A later fragment has no ports: mod_tp_* leave it as the interpreter
/// does (its key's ports stay zero).
#[test]
fn port_rewrites_skip_later_fragments() {
    let rules = ["in_port=1,actions=mod_tp_dst:22,output:2"];
    let t = trace_up(&table(&rules), packet("in_port=1,udp,ip_frag=later"));
    assert_eq!(t.steps[0].after.tp_dst(), 0);
    let t = trace_up(
        &table(&rules),
        packet("in_port=1,udp,ip_frag=first,tp_dst=53"),
    );
    assert_eq!(t.steps[0].after.tp_dst(), 22);
}

fn table_with_groups(groups: &[&str], rules: &[&str]) -> Arc<FlowTable> {
    let t = SharedFlowTable::new();
    for g in groups {
        let g = nfv_flow::parse_group(g).unwrap_or_else(|e| panic!("{g}: {e}"));
        t.add_group(g).unwrap();
    }
    t.add_flows(
        rules
            .iter()
            .map(|r| nfv_flow::parse_flow(r).unwrap_or_else(|e| panic!("{r}: {e}"))),
    );
    t.snapshot()
}

/// The buckets' indexes that ran at each group step.
fn buckets_run(t: &Trace) -> Vec<Vec<usize>> {
    t.steps
        .iter()
        .filter(|s| matches!(s.action, Action::Group(_)))
        .map(|s| s.buckets.iter().map(|b| b.index).collect())
        .collect()
}

/// `all`: every bucket on its own copy; a bucket's edits stay in its
/// copy, the actions after the group see the packet as it came.
#[test]
fn an_all_group_runs_every_bucket_on_its_own_copy() {
    let t = trace_up(
        &table_with_groups(
            &[
                "group_id=1,type=all,bucket=mod_dl_dst:02:00:00:00:00:09,output:2,\
               bucket=mod_vlan_vid:7,output:3,bucket=output:1",
            ],
            &["in_port=1,actions=group:1,output:10"],
        ),
        packet("in_port=1,ip,dl_dst=02:00:00:00:00:01"),
    );
    assert_eq!(
        t.outputs,
        vec![Output::Port(2), Output::Port(3), Output::Port(10)]
    );
    assert_eq!(buckets_run(&t), vec![vec![0, 1, 2]]);
    let b = &t.steps[0].buckets;
    assert_eq!(b[0].steps[1].after.dl_dst(), [2, 0, 0, 0, 0, 9]);
    assert_eq!(b[1].steps[1].after.vlan_tci(), VLAN_PRESENT | 7);
    assert_eq!(b[1].steps[1].after.dl_dst(), [2, 0, 0, 0, 0, 1]);
    assert!(
        b[2].steps[0]
            .note
            .as_deref()
            .unwrap()
            .starts_with("skipped")
    );
    // output:10 sees the packet as it came to the group.
    assert_eq!(t.steps[1].after, t.packet);
    assert!(t.steps[0].note.as_deref().unwrap().contains("every bucket"));
}

/// A `dec_ttl` that runs out ends its bucket's copy only: the other
/// buckets and the rule's later actions go on (as the interpreter, and
/// OVS, do).
#[test]
fn an_expired_ttl_in_a_bucket_ends_that_bucket_only() {
    let t = trace_up(
        &table_with_groups(
            &["group_id=1,type=all,bucket=dec_ttl,output:2,bucket=output:3"],
            &["in_port=1,actions=group:1,output:10"],
        ),
        packet("in_port=1,udp,nw_ttl=1"),
    );
    assert_eq!(t.outputs, vec![Output::Port(3), Output::Port(10)]);
    let b = &t.steps[0].buckets[0];
    assert_eq!((b.steps.len(), b.unused.len()), (1, 1));
    assert!(b.steps[0].note.as_deref().unwrap().contains("ttl_expired"));
}

#[test]
fn an_indirect_group_runs_its_bucket() {
    let t = trace_up(
        &table_with_groups(
            &["group_id=4,type=indirect,bucket=mod_nw_dst:10.9.9.9,output:3"],
            &["in_port=2,actions=group:4"],
        ),
        packet("in_port=2,udp,nw_dst=10.0.0.1"),
    );
    assert_eq!(t.outputs, vec![Output::Port(3)]);
    assert_eq!(buckets_run(&t), vec![vec![0]]);
    assert_eq!(t.steps[0].buckets[0].steps[1].after.nw_dst(), 0x0a09_0909);
}

/// `select`: the bucket the PMD's hash picks for the packet (the group's
/// own choice over the select hash), one per packet, every bucket for
/// some flows.
#[test]
fn a_select_group_runs_the_bucket_the_pmd_hash_picks() {
    let table = table_with_groups(
        &[
            "group_id=2,type=select,bucket=weight:1,output:2,bucket=weight:3,output:3,\
           bucket=weight:2,output:10",
        ],
        &["in_port=1,actions=group:2"],
    );
    let group = table.groups.get(&2).unwrap().clone();
    let mut seen = [false; 3];
    for port in 1000..1100 {
        let p = packet(&format!("in_port=1,tcp,nw_src=10.0.0.1,tp_src={port}"));
        let t = trace_up(&table, p);
        let want = group.select(select_hash(&p)).unwrap();
        assert_eq!(buckets_run(&t), vec![vec![want]], "tp_src {port}");
        assert_eq!(t.outputs.len(), 1);
        seen[want] = true;
        let note = t.steps[0].note.as_deref().unwrap();
        assert!(note.contains(&format!("bucket {want} runs")), "{note}");
        assert!(
            note.contains(&format!("0x{:08x}", select_hash(&p))),
            "{note}"
        );
    }
    assert_eq!(seen, [true; 3], "100 flows reach every bucket");
}

/// `fast_failover`: the first bucket whose watch_port is live, as the
/// caller says; none live: no bucket, nothing sent.
#[test]
fn a_fast_failover_group_runs_its_first_live_bucket() {
    let table = table_with_groups(
        &[
            "group_id=3,type=fast_failover,bucket=watch_port:2,output:2,\
           bucket=watch_port:3,output:3",
        ],
        &["in_port=1,actions=group:3"],
    );
    let p = packet("in_port=1,ip");
    let t = trace(&table, p, &|_| true);
    assert_eq!(
        (buckets_run(&t), t.outputs),
        (vec![vec![0]], vec![Output::Port(2)])
    );
    let t = trace(&table, p, &|port| port != 2);
    assert_eq!(
        (buckets_run(&t), t.outputs),
        (vec![vec![1]], vec![Output::Port(3)])
    );
    let note = t.steps[0].note.as_deref().unwrap();
    assert!(note.contains("bucket 0 watches port 2 (down)"), "{note}");
    let t = trace(&table, p, &|_| false);
    assert_eq!((buckets_run(&t), t.outputs), (vec![vec![]], vec![]));
    assert!(t.steps[0].note.as_deref().unwrap().contains("dropped"));
}

/// `meter:N` is a step the trace notes and passes (it cannot know the
/// meter's recent traffic).
#[test]
fn a_meter_is_noted_and_passed() {
    let t = trace_up(
        &table(&["in_port=1,actions=meter:3,output:2"]),
        packet("in_port=1,ip"),
    );
    assert_eq!(t.outputs, vec![Output::Port(2)]);
    assert!(
        t.steps[0]
            .note
            .as_deref()
            .unwrap()
            .starts_with("meter 3: passed")
    );
}

/// `ct_clear` zeroes the ct fields the later tables see (here of a
/// packet described with them), and says so; after a `ct(table=T)` the
/// packet goes on untracked while its tracked copy is followed (below).
#[test]
fn ct_clear_clears_the_fields_later_tables_see() {
    let rules = [
        "in_port=1,ip,actions=ct_clear,goto_table:1",
        "table=1,ip,ct_state=-trk,actions=output:2",
        "table=1,ip,ct_state=+trk,actions=output:3",
    ];
    let tracked = packet("in_port=1,ip,ct_state=+trk+est,ct_zone=3,ct_mark=9,ct_label=7");
    assert_ne!(tracked.ct_state(), 0);
    let t = trace_up(&table(&rules), tracked);
    assert_eq!(t.outputs, vec![Output::Port(2)]);
    let cleared = &t.steps[0];
    assert_eq!(cleared.action, Action::CtClear);
    assert_eq!(
        (
            cleared.after.ct_state(),
            cleared.after.ct_zone(),
            cleared.after.ct_mark(),
            cleared.after.ct_label()
        ),
        (0, 0, 0, 0)
    );
    assert!(cleared.note.as_deref().unwrap().contains("cleared"));

    // Table 1 has no rule: the tracked copy is looked up and dropped.
    let t = trace_up(
        &table(&["in_port=1,ip,actions=ct(commit,table=1),output:2"]),
        packet("in_port=1,ip"),
    );
    assert_eq!(t.outputs, vec![Output::Port(2)]);
    assert_eq!(t.steps[0].after.ct_state(), 0);
    assert_eq!(t.steps[0].recirculation, Some(0));
    assert!(t.recirculations[0].rule.is_none());
    let note = t.steps[0].note.as_deref().unwrap();
    assert!(
        note.contains("looked up again from table 1 as recirculation 1"),
        "{note}"
    );
}

#[path = "trace_ct_tests.rs"]
mod ct;
