//! `ct(table=T)` followed: the tracked copies a trace looks up again, the
//! connection states they come back with (`--ct-next`, else `trk|new`),
//! the fields OVS's `ofproto/trace` gives them, the order they take, and
//! the datapath's recirculation limits.

use super::*;
use nfv_flow::key::ct_state::{EST, INV, REL, RPL};

/// A security-group pipeline: table 0 sends every IP packet through the
/// tracker in zone 5, table 1 decides by the connection's state.
const SECURITY_GROUP: &[&str] = &[
    "priority=10,ip,actions=ct(table=1,zone=5)",
    "table=1,priority=10,ip,ct_state=+trk+new,actions=ct(commit,zone=5),output:2",
    "table=1,priority=20,ip,ct_state=+trk+est,actions=output:3",
    "table=1,priority=20,ip,ct_state=+trk+rel,actions=output:4",
    "table=1,priority=30,ip,ct_state=+trk+inv,actions=drop",
];

struct CtCase {
    name: &'static str,
    rules: &'static [&'static str],
    packet: &'static str,
    ct_next: &'static [u8],
    outputs: &'static [Output],
    /// Each recirculation in the order followed: (round, table looked up,
    /// ct_state it came back with, whether --ct-next gave it).
    recirculations: &'static [(usize, u8, u8, bool)],
}

const CT_CASES: &[CtCase] = &[
    CtCase {
        name: "a new connection by default: committed, to port 2",
        rules: SECURITY_GROUP,
        packet: "in_port=1,tcp,nw_dst=10.0.0.2,tp_dst=80",
        ct_next: &[],
        outputs: &[Output::Port(2)],
        recirculations: &[(1, 1, TRK | NEW, false)],
    },
    CtCase {
        name: "--ct-next trk,est: the established rule",
        rules: SECURITY_GROUP,
        packet: "in_port=1,tcp,nw_dst=10.0.0.2,tp_dst=80",
        ct_next: &[TRK | EST],
        outputs: &[Output::Port(3)],
        recirculations: &[(1, 1, TRK | EST, true)],
    },
    CtCase {
        name: "--ct-next trk,rel,rpl: the related rule",
        rules: SECURITY_GROUP,
        packet: "in_port=1,icmp",
        ct_next: &[TRK | REL | RPL],
        outputs: &[Output::Port(4)],
        recirculations: &[(1, 1, TRK | REL | RPL, true)],
    },
    CtCase {
        name: "--ct-next trk,inv: dropped",
        rules: SECURITY_GROUP,
        packet: "in_port=1,udp",
        ct_next: &[TRK | INV],
        outputs: &[],
        recirculations: &[(1, 1, TRK | INV, true)],
    },
    CtCase {
        name: "the packet goes on untracked, its copy's outputs come after its own",
        rules: &[
            "ip,actions=ct(table=1),output:3",
            "table=1,ip,ct_state=-trk,actions=output:4",
            "table=1,ip,ct_state=+trk,actions=output:2",
        ],
        packet: "in_port=1,ip",
        ct_next: &[],
        outputs: &[Output::Port(3), Output::Port(2)],
        recirculations: &[(1, 1, TRK | NEW, false)],
    },
    CtCase {
        // As OVS's trace queue: both copies of the packet's own actions
        // (round 1) take the first two states, then the one a round-1
        // copy forks (round 2) the default.
        name: "round by round: the states go to the copies in the order they are looked up",
        rules: &[
            "ip,actions=ct(table=1),ct(table=2)",
            "table=1,ip,ct_state=+est,actions=output:2,ct(table=2)",
            "table=1,ip,ct_state=-est,actions=output:4",
            "table=2,ip,ct_state=+rel,actions=output:10",
            "table=2,ip,ct_state=+new,actions=output:11",
        ],
        packet: "in_port=1,ip",
        ct_next: &[TRK | EST, TRK | REL],
        outputs: &[Output::Port(2), Output::Port(10), Output::Port(11)],
        recirculations: &[
            (1, 1, TRK | EST, true),
            (1, 2, TRK | REL, true),
            (2, 2, TRK | NEW, false),
        ],
    },
    CtCase {
        name: "a copy that no rule of table T takes is dropped",
        rules: &["ip,actions=ct(table=2)", "table=1,ip,actions=output:2"],
        packet: "in_port=1,ip",
        ct_next: &[],
        outputs: &[],
        recirculations: &[(1, 2, TRK | NEW, false)],
    },
    CtCase {
        // A table may send its copy back to itself: the datapath looks
        // it up MAX_RECIRC_DEPTH times, then drops it (recirc_limit).
        name: "past the datapath's rounds the copy is not followed",
        rules: &["ip,actions=ct(table=1)", "table=1,ip,actions=ct(table=1)"],
        packet: "in_port=1,ip",
        ct_next: &[],
        outputs: &[Output::Recirculate(1)],
        recirculations: &[
            (1, 1, TRK | NEW, false),
            (2, 1, TRK | NEW, false),
            (3, 1, TRK | NEW, false),
            (4, 1, TRK | NEW, false),
            (5, 1, TRK | NEW, false),
            (6, 1, TRK | NEW, false),
        ],
    },
    CtCase {
        name: "a ct without table= forks nothing",
        rules: &["ip,actions=ct(commit,zone=3),output:2"],
        packet: "in_port=1,ip",
        ct_next: &[TRK | EST],
        outputs: &[Output::Port(2)],
        recirculations: &[],
    },
];

#[test]
fn tracked_copies_are_followed_with_the_states_given() {
    for c in CT_CASES {
        let t = trace_tracked(&table(c.rules), packet(c.packet), &|_| true, c.ct_next);
        assert_eq!(t.outputs, c.outputs, "{}", c.name);
        let got: Vec<(usize, u8, u8, bool)> = t
            .recirculations
            .iter()
            .map(|r| (r.round, r.packet.table(), r.ct_state, r.given))
            .collect();
        assert_eq!(got, c.recirculations, "{}", c.name);
        for r in &t.recirculations {
            assert_eq!(r.packet.ct_state(), r.ct_state, "{}", c.name);
            assert_eq!(r.stages[0].table, r.packet.table(), "{}", c.name);
        }
        // Every followed copy hangs off exactly one ct step.
        let mut forked = Vec::new();
        collect_forks(&t.steps, &mut forked);
        for r in &t.recirculations {
            collect_forks(&r.steps, &mut forked);
        }
        forked.sort_unstable();
        let all: Vec<usize> = (0..t.recirculations.len()).collect();
        assert_eq!(forked, all, "{}", c.name);
    }
}

/// The recirculation indices `steps` (and their buckets) forked.
fn collect_forks(steps: &[Step], into: &mut Vec<usize>) {
    for s in steps {
        into.extend(s.recirculation);
        for b in &s.buckets {
            collect_forks(&b.steps, into);
        }
    }
}

/// The tracked copy's fields, as OVS's trace sets them: the headers as
/// the actions left them, the action's zone, ct_mark and ct_label as the
/// packet had them with the action's exec(set_field...) applied, the
/// pipeline's metadata, table T; the packet itself goes on with every ct
/// field cleared.
#[test]
fn the_tracked_copy_has_the_fields_ovs_trace_gives_it() {
    let rules = [
        "priority=10,ip,actions=mod_nw_dst:10.0.0.9,write_metadata:0x7,goto_table:1",
        "table=1,ip,actions=ct(commit,zone=7,table=2,exec(set_field:0x5/0xff->ct_mark,\
         set_field:0x10->ct_label)),output:3",
        "table=2,priority=10,ip,metadata=0x7,nw_dst=10.0.0.9,ct_state=+trk+new,ct_zone=7,\
         ct_mark=0x305,ct_label=0x10,actions=output:2",
        "table=2,priority=1,ip,actions=output:4",
    ];
    let p = packet("in_port=1,ip,nw_dst=10.0.0.1,ct_mark=0x3ff,ct_label=0xab00");
    let t = trace_up(&table(&rules), p);
    assert_eq!(t.outputs, vec![Output::Port(3), Output::Port(2)]);
    let copy = &t.recirculations[0].packet;
    assert_eq!(
        (
            copy.table(),
            copy.metadata(),
            copy.nw_dst(),
            copy.ct_state(),
            copy.ct_zone(),
            copy.ct_mark(),
            copy.ct_label()
        ),
        (2, 0x7, 0x0a00_0009, TRK | NEW, 7, 0x305, 0x10)
    );
    let ct = t
        .steps
        .iter()
        .find(|s| matches!(s.action, Action::Ct(_)))
        .expect("a ct step");
    assert_eq!(
        (
            ct.after.ct_state(),
            ct.after.ct_zone(),
            ct.after.ct_mark(),
            ct.after.ct_label()
        ),
        (0, 0, 0, 0)
    );
    assert_eq!(ct.recirculation, Some(0));
}

/// A second ct in the same actions meets the packet with its ct fields
/// cleared by the first (as in OVS: its copy has no mark or label), and a
/// copy's own ct passes the copy's fields on.
#[test]
fn a_later_ct_sees_the_fields_the_earlier_ones_left() {
    let rules = [
        "ip,actions=ct(commit,zone=2,table=1,exec(set_field:0x9->ct_mark)),ct(zone=4,table=2)",
        "table=1,ip,actions=ct(table=2)",
        "table=2,ip,actions=output:2",
    ];
    let t = trace_up(&table(&rules), packet("in_port=1,ip"));
    let fields: Vec<(u8, u16, u32)> = t
        .recirculations
        .iter()
        .map(|r| (r.packet.table(), r.packet.ct_zone(), r.packet.ct_mark()))
        .collect();
    assert_eq!(fields, vec![(1, 2, 0x9), (2, 4, 0), (2, 0, 0x9)]);
}

/// The datapath queues at most a batch of copies per round and drops the
/// rest (recirc_limit): the trace follows as many.
#[test]
fn past_a_rounds_batch_the_copies_are_not_followed() {
    let many = vec!["ct(table=1)"; BATCH + 3].join(",");
    let rule: &'static str = Box::leak(format!("ip,actions={many}").into_boxed_str());
    let t = trace_up(
        &table(&[rule, "table=1,ip,actions=output:2"]),
        packet("in_port=1,ip"),
    );
    assert_eq!(t.recirculations.len(), BATCH);
    let mut want = vec![Output::Recirculate(1); 3];
    want.extend(vec![Output::Port(2); BATCH]);
    assert_eq!(t.outputs, want);
    let last = t.steps.last().unwrap();
    assert_eq!(last.recirculation, None);
    assert!(
        last.note.as_deref().unwrap().contains("recirc_limit"),
        "{:?}",
        last.note
    );
}

/// The note of a followed ct step names the recirculation and where its
/// state comes from.
#[test]
fn the_ct_step_says_which_recirculation_and_state() {
    let t = trace_tracked(
        &table(SECURITY_GROUP),
        packet("in_port=1,tcp"),
        &|_| true,
        &[TRK | EST],
    );
    let note = t.steps[0].note.as_deref().unwrap();
    assert!(
        note.contains("zone 5")
            && note.contains("recirculation 1")
            && note.contains("ct_state=est|trk, --ct-next 1"),
        "{note}"
    );
    let t = trace_up(&table(SECURITY_GROUP), packet("in_port=1,tcp"));
    let note = t.steps[0].note.as_deref().unwrap();
    assert!(note.contains("ct_state=new|trk, the default"), "{note}");
}
