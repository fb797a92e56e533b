//! Traces of packets described as matches, against rule sets written in
//! flow syntax: the tier, the rule, each action's effect, the outputs.

use super::*;
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
        let t = trace(&table(c.rules), packet(c.packet));
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
    let t = trace(
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
    let t = trace(
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
    // One subtable: an exact-match cache entry only.
    let t = trace(
        &table(&["priority=1,ip,actions=output:2"]),
        packet("in_port=1,ip"),
    );
    assert_eq!(
        t.tier,
        Tier::Classifier {
            probes: 1,
            megaflow: None
        }
    );
}

/// As the interpreter: `dec_ttl` on a TTL of 0 or 1 drops the packet
/// there; copies sent before stay sent, nothing after applies (OVS's
/// `ofproto/trace` agrees: the invalid-TTL exception ends the actions).
#[test]
fn an_expired_ttl_ends_the_actions() {
    let rules = ["in_port=1,actions=output:2,dec_ttl,mod_dl_dst:02:00:00:00:00:09,output:3"];
    let t = trace(&table(&rules), packet("in_port=1,udp,nw_ttl=1"));
    assert_eq!(t.outputs, vec![Output::Port(2)]);
    assert_eq!((t.steps.len(), t.unused.len()), (2, 2));
    assert!(t.steps[1].note.as_deref().unwrap().contains("ttl_expired"));
    // A TTL of 2 goes on, decremented.
    let t = trace(&table(&rules), packet("in_port=1,udp,nw_ttl=2"));
    assert_eq!(t.outputs, vec![Output::Port(2), Output::Port(3)]);
    assert_eq!(t.steps[3].after.nw_ttl(), 1);
    // Not IP: nothing to decrement, nothing dropped.
    let t = trace(&table(&rules), packet("in_port=1,arp"));
    assert_eq!(t.outputs.len(), 2);
}

/// strip_vlan after push_vlan on a tagged packet brings the original tag
/// back (the key holds one tag; the trace remembers the ones covered).
#[test]
fn strip_vlan_uncovers_the_tag_push_vlan_covered() {
    let rules =
        ["in_port=1,actions=push_vlan:0x88a8,output:2,strip_vlan,output:3,strip_vlan,output:4"];
    let t = trace(&table(&rules), packet("in_port=1,dl_vlan=5,dl_vlan_pcp=3"));
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
    let t = trace(&table(&rules), packet("in_port=1,udp,ip_frag=later"));
    assert_eq!(t.steps[0].after.tp_dst(), 0);
    let t = trace(
        &table(&rules),
        packet("in_port=1,udp,ip_frag=first,tp_dst=53"),
    );
    assert_eq!(t.steps[0].after.tp_dst(), 22);
}
