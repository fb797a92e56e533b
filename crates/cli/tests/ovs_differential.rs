//! Differential test against Open vSwitch (issue 39, item 8): random
//! rule sets and packets, the same rules installed in nfvswitch and in
//! OVS, each packet traced by both — `nfvswitch ctl trace` (the control
//! socket's `trace` request) and OVS's `ofproto/trace` (over its unixctl
//! socket, as `ovs-appctl` sends it) — and the answers compared.
//!
//! # Set-up
//!
//! OVS 3.1 (Debian's `openvswitch-switch`, `scripts/test` installs it as
//! root): a private ovsdb-server and ovs-vswitchd under a temp dir,
//! children of the test stopped by PID when it ends, however it ends
//! (`ovsdiff/ovs.rs`); bridge `br0`, `datapath_type=netdev`, a `dummy`
//! port per number in [`PORTS`] at `ofport_request=N`. Two settings make
//! OVS comparable: its LOCAL port is `no-forward` (nfvswitch has none, so
//! `flood`/`all` reach the same ports), and its fragment handling is
//! `nx-match` (nfvswitch's: a first fragment keeps its L4 ports; OVS's
//! default `normal` zeroes them for every fragment). nfvswitch: `nfvswitch
//! run` with a sink port per number, its PMD (spinning on no queue) moved
//! to SCHED_IDLE. Without root or OVS the test prints SKIPPED.
//!
//! # Cases
//!
//! Each seed draws rule sets of 1 to 20 rules (`ovsdiff/random.rs`) over
//! tables 0 to 2: a protocol class (none, another Ethertype, `arp`,
//! `ip`/`ipv6` with or without a protocol, in keyword or
//! `dl_type`/`nw_proto` spelling), up
//! to five match fields from `FIELDS` in `random/fields.rs` (in_port,
//! dl_src/dl_dst with masks, dl_vlan/dl_vlan_pcp/vlan_tci, nw_src/nw_dst
//! and arp_spa/arp_tpa with prefixes or masks, ipv6_src/ipv6_dst with
//! prefixes or masks, ipv6_label, arp_op, nw_tos/ip_dscp, nw_ecn/ip_ecn,
//! nw_ttl, ip_frag, tp_src/tp_dst with masks, tcp_flags, icmp_type/code,
//! arp_sha/arp_tha, nd_target/nd_sll/nd_tll; in ct rule sets, below,
//! ct_state/ct_zone/ct_mark/ct_label) and up to seven actions from
//! `ACTIONS` in `random/actions.rs` (output:N, N, in_port, flood, all,
//! mod_dl_src/dst, mod_vlan_vid, push_vlan, strip_vlan, mod_nw_src/dst,
//! mod_tp_src/dst, mod_nw_tos/ecn/ttl, dec_ttl, set_field to
//! ipv6_src/ipv6_dst/ipv6_label, goto_table, resubmit(,N), group:N,
//! meter:N; in ct rule sets ct(...) and ct_clear), or drop. Priorities are distinct (OpenFlow leaves ties to
//! the switch). Covering a new field or action (normal, tunnels) is one
//! table entry, and for a new kind of output one arm where
//! `ovsdiff/nfv.rs` reads the trace.
//!
//! Groups and meters (`random/groups.rs`): six rule sets in ten get 1 to
//! 3 groups, installed in both with `add-group` (OVS: `ovs-ofctl -O
//! OpenFlow13`), of type `all`, `indirect`, `select` or `fast_failover`,
//! with 1 to 3 buckets whose actions come from the same table (rewrites,
//! push/strip_vlan, dec_ttl, then one output: output:N, in_port, flood,
//! all). A third of the rule sets get 1 or 2 meters (`add-meter
//! meter=N,kbps,band=type=drop,rate=R`, which OVS 3.1's netdev datapath
//! takes: its trace shows `meter:N` and the datapath action `meter(M)`).
//! Rules name them with `group:N` (anywhere in the list) and `meter:N`
//! (first: an OpenFlow 1.3 instruction). The shapes are what both mean
//! the same way:
//!
//! - A bucket's actions come in any order, with zero, one or two
//!   outputs: both switches run a bucket as an OpenFlow action set
//!   (strip_vlan, push_vlan, dec_ttl, the set-fields, then only the last
//!   output; OVS's `ofpacts_execute_action_set()`, nfvswitch's
//!   `nfv_flow::group::action_set` — the test found nfvswitch running
//!   buckets as lists). No `mod_vlan_vid` in a bucket: with no match to
//!   say the packet is tagged, OpenFlow 1.3 encodes it as a push.
//! - `fast_failover` buckets watch a port both have (live in both: OVS's
//!   dummy ports are up, nfvswitch's sinks take packets and the control
//!   plane reads them as live) or port 20, which neither has (down in
//!   both), so the first live bucket is compared, or none.
//! - `select`: OVS's hash is not nfvswitch's, so a select group's buckets
//!   all carry the same actions (weights differ) and the outcome, which
//!   does not depend on the bucket, is compared; nfvswitch's trace must
//!   run exactly one bucket. OVS gets `selection_method=hash,fields(...)`
//!   (OpenFlow 1.5; nfvswitch takes no selection method and is given the
//!   text without it): OVS's default, `dp_hash`, ends its trace at a
//!   recirculation (`hash(sym_l4(0)),recirc(0x1)`, "no live bucket").
//! - A meter passes in both traces (neither knows the rate history): it is
//!   compared as a step that changes nothing.
//!
//! Connection tracking (`random/fields.rs`, `random/actions.rs`): a third
//! of the rule sets use it. Their IP rules get `ct(...)` actions with any
//! of `commit` (not where the match wants `+inv`: both refuse it),
//! `force`, `zone=N`, `table=T` (a later table only: OVS's trace would
//! follow a copy sent back to its own table without end) and, with
//! `commit`, `exec(set_field:V[/M]->ct_mark, set_field:V[/M]->ct_label)`,
//! in any order; any rule may get `ct_clear`; matches take `ct_state` (in
//! its three forms: `+trk-new`, `est|trk`, `0x21/0x21`), `ct_zone`
//! (exact: OVS takes no mask), `ct_mark`, `ct_label`. No `nat` (OVS's trace
//! makes up a translation of its own), no `ct(table=T)` in a bucket. Most
//! such sets start table 0 with a security group's entry (every IPv4 or
//! IPv6 packet to `ct(table=T)` at a low priority), and most of their
//! later tables' rules test `ct_state`. Each packet of such a set is
//! traced by both with the same `--ct-next` states (`ofproto/trace
//! --ct-next`, `ctl trace --ct-next` in another of its spellings): none
//! (every copy comes back `trk,new`, the default of both), or one to
//! three, mostly the state the rule the packet was made for matches.
//!
//! Then 50 packets per set:
//! 70 % derived from a rule's match (its bits kept, the rest random; a
//! quarter of them with one matched field changed, for near misses), the
//! others random. Values come from small pools mixed with random ones, so
//! random packets hit rules too. Seeds [`FIXED_SEEDS`] run every time,
//! plus one new per run; all are printed, and `NFV_OVSDIFF_SEED=N`
//! replays one (`NFV_OVSDIFF_SETS` sets how many rule sets per seed).
//!
//! Half of the rule sets reach OVS as nfvswitch's `dump-flows` prints
//! them (nfvswitch's formatter read by OVS), the others as generated. A
//! rule needing OpenFlow 1.1+ in OVS (`push_vlan`) goes through
//! `ovs-ofctl -O OpenFlow13`; the generator keeps such rules to what
//! OpenFlow 1.3 means the same way as 1.0 (no `mod_vlan_vid` where the
//! match has no tag — 1.3 would push one —, no L3/L4 rewrite the match
//! does not guarantee a header for, no VLAN mask over part of the PCP,
//! which OVS's OXM encoding widens or drops).
//!
//! # What is compared
//!
//! - The packet each side read from the text (OVS's `Flow:` line,
//!   nfvswitch's key): every field.
//! - The rule that decides, by priority, or that none does.
//! - The outputs: port and every packet field at that port, the copies in
//!   the order they leave, except that back-to-back copies with the same
//!   fields compare as a set (`flood`/`all` order theirs by hash in OVS).
//!   OVS's fields at each output are its input flow with the datapath
//!   actions (`set(...)`, `push_vlan`, `pop_vlan`) applied up to it;
//!   nfvswitch's are the key after the output's step. Not compared: the
//!   TPID of a pushed tag and inner tags (nfvswitch's key holds the outer
//!   TCI only), OVS's controller action for an expired TTL (nfvswitch
//!   drops; both send nothing more).
//!   A group's buckets count where the group is: OVS's datapath actions
//!   hold the copies each bucket sends (its edits undone after it);
//!   nfvswitch's trace runs each bucket on its own copy of the packet and
//!   lists its steps under the group's. An `all` bucket's `dec_ttl` that
//!   runs out ends that bucket's copy only, in both.
//! - The tracked copies `ct(table=T)` forks, which both traces follow in
//!   the same order (OVS's `recirc(0xN)` sections, round by round;
//!   nfvswitch's recirculations): for each, the table, its header fields,
//!   `ct_state` (the `--ct-next` it took), `ct_zone`, `ct_mark`, `ct_label`,
//!   and the rule that takes it; their outputs come after the packet's
//!   own, each OVS section's computed from its `Flow:` and its datapath
//!   actions. The ct fields are not compared at outputs (OVS's datapath
//!   actions do not say what the tracker leaves on a packet).
//! - Every rule OVS holds, as its `dump-flows` prints it, read back with
//!   nfvswitch's parser: the same match nfvswitch made of the generated
//!   text (a "no VLAN tag" match counts the same whatever its VID/PCP
//!   mask: an untagged packet's TCI is 0 in both).
//! - Whether both take each rule.
//!
//! # Known differences
//!
//! A difference is a failure unless one entry of `KNOWN` (outputs) or
//! `KNOWN_REFUSALS` (rules one side refuses) in `ovsdiff/compare.rs`
//! explains it; each entry names the case it applies to tightly (the
//! difference confined to the fields it concerns). The run prints every
//! entry seen with a count and a first example. They are:
//!
//! - `ovs-mod-tp-rewrites-icmp`: OVS's mod_tp_src/dst rewrite an ICMP or
//!   ICMPv6 packet's type/code (the flow keeps them in tp_src/tp_dst);
//!   nfvswitch leaves ICMP alone (OpenFlow 1.0: TCP/UDP ports).
//! - `nfvswitch-no-sctp-port-rewrite`: nfvswitch does not rewrite SCTP
//!   ports (no CRC32c update); OVS does.
//! - `ovs-no-ip-rewrite-for-nw-proto-0`: OVS commits no IPv4/IPv6 header
//!   rewrite for an IP packet whose nw_proto is 0 (commit_set_nw_action()
//!   reads 0 as "no L3 header"); nfvswitch rewrites it. Only the packet's
//!   own outputs keep the fields in OVS: its trace looks a tracked copy up
//!   with the flow, which has the rewrite.
//! - `mod-tp-difference-decides-a-later-table`: the rewrite of one of the
//!   two entries above (ICMP in OVS, SCTP not in nfvswitch) before a
//!   resubmit or goto_table, where a later table's rule tests
//!   tp_src/tp_dst (type/code or ports) and matches the packet as one
//!   switch leaves it and not as the other does.
//! - `ovs-mod-tp-in-the-flow-of-a-ct-copy`: OVS's mod_tp_src/dst write the
//!   flow's tp_src/tp_dst for any IP packet, and its trace looks a later
//!   `ct(table=T)`'s copy up with that flow: the copy carries the rewrite
//!   for ICMP, SCTP and protocols without ports (numbers no header holds),
//!   nfvswitch's copy the packet's own (confined to the copies' tp_src,
//!   tp_dst and, for ND, the fields that hang on the type).
//! - `ovs-set-field-prerequisites` (refusal): OVS refuses set_field to
//!   ipv6_* without an IPv6 match, and mod_nw_ecn/mod_nw_ttl (NXM
//!   set-field for OVS) without an IP one; nfvswitch takes them and leaves
//!   other packets alone.
//! - `ovs-ipv6-mask-with-leading-digit` (refusal): OVS reads an IPv6 mask
//!   written with a leading decimal digit (`::1/34d4:...`) as a prefix
//!   length and refuses the match; nfvswitch reads the mask.
//! - `nfvswitch-refuses-nd-fields-beside-a-nonzero-code` (refusal): ND
//!   fields need icmp_code 0; OVS silently drops them from such a match,
//!   nfvswitch refuses the rule.
//!
//! Fixed in nfvswitch after this test found them: `ctl trace` went on
//! after an expired `dec_ttl`, showed a tag pushed over another as
//! leaving none behind after strip_vlan, and rewrote a later fragment's
//! (absent) ports; the parser took TCP/UDP/SCTP fields beside
//! ip_frag=later and ND fields beside a nonzero code (OVS refuses or
//! drops them), and did not read tcp_flags as OVS prints them (`[800]`,
//! `syn|ack`).

use nfv_testutil::{TempDir, is_root, skip, which};
use std::collections::BTreeMap;
use std::time::Instant;

mod ovsdiff;
use ovsdiff::compare::{self, Case, What};
use ovsdiff::key::Key;
use ovsdiff::random::{self, Extras, PORTS, Rng, Rule};
use ovsdiff::{nfv, ovs};

/// Prints to stderr past the test harness's capture: the seeds and the
/// summary show in every run's log, passing or not.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

const BIN: &str = env!("CARGO_BIN_EXE_nfvswitch");
const TEST: &str = "ovs_differential";

/// Seeds run every time; one more, new each run, is printed for replay.
const FIXED_SEEDS: &[u64] = &[1, 2, 3, 4];
/// Rule sets per seed and packets per rule set: 5 seeds x 50 x 50 =
/// 12,500 cases (under a minute on two idle cores, some three minutes
/// with both busy).
const SETS_PER_SEED: usize = 50;
const PACKETS_PER_SET: usize = 50;
/// Replays one seed alone.
const SEED_ENV: &str = "NFV_OVSDIFF_SEED";
/// Rule sets per seed instead of [`SETS_PER_SEED`].
const SETS_ENV: &str = "NFV_OVSDIFF_SETS";

/// Differences that nothing explains, reported in full up to this many.
const SHOW_UNEXPLAINED: usize = 8;

#[derive(Default)]
struct Tally {
    cases: usize,
    hits: usize,
    outputs: usize,
    rewritten: usize,
    rules: usize,
    /// Rules read back from OVS's dump-flows by nfvswitch's parser.
    read_back: usize,
    /// Groups and meters installed in both.
    groups: usize,
    meters: usize,
    /// Cases whose actions met a group, a meter.
    group_cases: usize,
    meter_cases: usize,
    /// Rule sets using the connection tracker; their cases traced with
    /// `--ct-next` states; cases with a tracked copy followed, and the
    /// copies compared.
    ct_sets: usize,
    ct_next_cases: usize,
    ct_cases: usize,
    recirculations: usize,
    /// Tracked copies a rule took (the others met no rule in their table),
    /// and of those, by a rule matching ct_state.
    recirculations_taken: usize,
    recirculations_by_state: usize,
    /// Known difference name -> (count, first example).
    known: BTreeMap<&'static str, (usize, String)>,
    unexplained: Vec<String>,
    /// Rules one switch took and the other refused, by known reason:
    /// (count, first example).
    refused: BTreeMap<&'static str, (usize, String)>,
}

#[test]
fn nfvswitch_traces_like_ovs_on_random_rules_and_packets() {
    if !is_root() {
        skip(TEST, "needs root (OVS's daemons and dummy netdevs)");
        return;
    }
    let missing: Vec<&str> = ovs::PROGRAMS
        .iter()
        .copied()
        .filter(|p| which(p).is_none())
        .collect();
    if !missing.is_empty() || !std::path::Path::new(ovs::SCHEMA).exists() {
        skip(
            TEST,
            &format!(
                "Open vSwitch not installed (missing {missing:?} or {}): apt-get install \
                 openvswitch-switch (scripts/test does as root)",
                ovs::SCHEMA
            ),
        );
        return;
    }
    let dir = TempDir::new("ovsdiff", "run");
    let mut ovs = ovs::Ovs::start(&dir.0.join("ovs"), PORTS).expect("OVS starts");
    std::fs::create_dir_all(dir.0.join("nfv")).unwrap();
    let mut node = nfv::Node::start(BIN, &dir.0.join("nfv"), PORTS).expect("nfvswitch starts");

    let run_seed = std::env::var(SEED_ENV)
        .ok()
        .map(|s| s.parse::<u64>().expect("NFV_OVSDIFF_SEED: a number"));
    let seeds: Vec<u64> = match run_seed {
        Some(s) => vec![s],
        None => {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap();
            let mut v = FIXED_SEEDS.to_vec();
            v.push(t.as_nanos() as u64 ^ u64::from(std::process::id()));
            v
        }
    };
    let sets: usize = std::env::var(SETS_ENV).ok().map_or(SETS_PER_SEED, |s| {
        s.parse().expect("NFV_OVSDIFF_SETS: a number")
    });
    say!(
        "{TEST}: {} against nfvswitch; seeds {seeds:?} (replay one: {SEED_ENV}=N), \
         {sets} rule sets x {PACKETS_PER_SET} packets each",
        ovs.version
    );
    let started = Instant::now();
    let mut tally = Tally::default();
    for &seed in &seeds {
        let t = Instant::now();
        run_seed_cases(seed, sets, &mut ovs, &mut node, &mut tally);
        say!(
            "{TEST}: seed {seed}: done in {:.1} s",
            t.elapsed().as_secs_f64()
        );
    }
    report(&tally, started);
    assert!(
        tally.unexplained.is_empty(),
        "{} case(s) differ without a known reason (seeds {seeds:?}; replay with {SEED_ENV}=N)",
        tally.unexplained.len()
    );
    assert!(
        tally.cases >= seeds.len() * sets * PACKETS_PER_SET,
        "only {} cases ran",
        tally.cases
    );
}

fn report(t: &Tally, started: Instant) {
    say!(
        "{TEST}: {} cases in {:.1} s: {} hit a rule, {} outputs compared ({} with rewritten \
         fields), {} rules installed ({} read back from OVS's dump-flows)",
        t.cases,
        started.elapsed().as_secs_f64(),
        t.hits,
        t.outputs,
        t.rewritten,
        t.rules,
        t.read_back
    );
    say!(
        "{TEST}: {} groups and {} meters installed; {} cases went through a group, {} through \
         a meter",
        t.groups,
        t.meters,
        t.group_cases,
        t.meter_cases
    );
    say!(
        "{TEST}: {} rule sets used the connection tracker; {} cases traced with --ct-next, {} \
         followed a ct(table=T) ({} tracked copies compared, {} taken by a rule, {} by one \
         matching ct_state)",
        t.ct_sets,
        t.ct_next_cases,
        t.ct_cases,
        t.recirculations,
        t.recirculations_taken,
        t.recirculations_by_state
    );
    for k in compare::KNOWN_REFUSALS {
        if let Some((n, example)) = t.refused.get(k.name) {
            say!(
                "{TEST}: known refusal \"{}\", {n}x ({})\n  e.g. {example}",
                k.name,
                k.why
            );
        }
    }
    for k in compare::KNOWN {
        if let Some((n, example)) = t.known.get(k.name) {
            say!(
                "{TEST}: known difference \"{}\", {n}x ({})\n{example}",
                k.name,
                k.why
            );
        }
    }
    for u in t.unexplained.iter().take(SHOW_UNEXPLAINED) {
        say!("{TEST}: UNEXPLAINED DIFFERENCE\n{u}");
    }
}

/// Replaces both switches' groups and meters (and rules) with `set`'s;
/// returns `rules` less those naming a group or meter one switch refused
/// (each refusal an unexplained difference: the generator makes only
/// what both should take).
fn install_extras(
    set: &Extras,
    rules: Vec<Rule>,
    ovs: &ovs::Ovs,
    node: &mut nfv::Node,
    t: &mut Tally,
) -> Vec<Rule> {
    node.del_flows().expect("nfvswitch del-flows");
    ovs.del_flows().expect("ovs del-flows");
    node.del_groups_and_meters()
        .expect("nfvswitch del-groups, del-meters");
    ovs.del_groups_and_meters()
        .expect("ovs del-groups, del-meters");
    let mut refused = Vec::new();
    for m in &set.meters {
        match (node.add_meter(&m.text()), ovs.add_meter(&m.text())) {
            (Ok(()), Ok(())) => t.meters += 1,
            (n, o) => {
                t.unexplained.push(format!(
                    "a meter is refused: {}\n  nfvswitch: {n:?}\n  ovs: {o:?}",
                    m.text()
                ));
                refused.push(format!("meter:{}", m.id));
            }
        }
    }
    for g in &set.groups {
        match (node.add_group(&g.text()), ovs.add_group(&g.ovs_text())) {
            (Ok(()), Ok(())) => t.groups += 1,
            (n, o) => {
                t.unexplained.push(format!(
                    "a group is refused: {} (OVS given {})\n  nfvswitch: {n:?}\n  ovs: {o:?}",
                    g.text(),
                    g.ovs_text()
                ));
                refused.push(format!("group:{}", g.id));
            }
        }
    }
    rules
        .into_iter()
        .filter(|r| !r.actions.iter().any(|a| refused.contains(a)))
        .collect()
}

/// Installs `rules` in both switches and returns those both took. OVS
/// gets each rule as generated or (`canonical`) as nfvswitch's dump-flows
/// prints it, so that nfvswitch's formatter is read by OVS too. A rule
/// one switch refuses and the other takes is tallied (a known refusal,
/// or unexplained) and left out of both. Then every rule OVS holds, as
/// its dump-flows prints it, is read back with nfvswitch's parser: it
/// must be the match nfvswitch made of the generated text.
fn install(
    rules: Vec<Rule>,
    canonical: bool,
    ovs: &ovs::Ovs,
    node: &mut nfv::Node,
    t: &mut Tally,
) -> Vec<Rule> {
    node.del_flows().expect("nfvswitch del-flows");
    ovs.del_flows().expect("ovs del-flows");
    let texts: Vec<String> = rules.iter().map(Rule::text).collect();
    // nfvswitch: all at once, else one by one to find the refused ones.
    let nfv: Vec<Result<(), String>> = if node.add_flows(&texts).is_ok() {
        rules.iter().map(|_| Ok(())).collect()
    } else {
        texts
            .iter()
            .map(|text| {
                node.del_flows().expect("nfvswitch del-flows");
                node.add_flows(std::slice::from_ref(text))
            })
            .collect()
    };
    let took: Vec<String> = texts
        .iter()
        .zip(&nfv)
        .filter(|(_, r)| r.is_ok())
        .map(|(t, _)| t.clone())
        .collect();
    node.del_flows().expect("nfvswitch del-flows");
    node.add_flows(&took)
        .expect("nfvswitch takes the rules it took one by one");
    // What OVS is given: the text, or nfvswitch's own print of the rule.
    let dumped: BTreeMap<u16, String> = node
        .dump_flows()
        .expect("nfvswitch dump-flows")
        .as_array()
        .expect("dump-flows: a list")
        .iter()
        .map(|f| {
            (
                f["priority"].as_u64().unwrap() as u16,
                f["rule"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let ovs_text = |r: &Rule, nfv_took: bool| match (canonical && nfv_took, dumped.get(&r.priority))
    {
        (true, Some(d)) => d.clone(),
        _ => r.text(),
    };
    let ovs_add = |rs: &[(&Rule, String)]| {
        let of10: Vec<String> = rs
            .iter()
            .filter(|r| !r.0.of13)
            .map(|r| r.1.clone())
            .collect();
        let of13: Vec<String> = rs
            .iter()
            .filter(|r| r.0.of13)
            .map(|r| r.1.clone())
            .collect();
        ovs.add_flows(&of10, false).and(ovs.add_flows(&of13, true))
    };
    let given: Vec<(&Rule, String)> = rules
        .iter()
        .zip(&nfv)
        .map(|(r, n)| (r, ovs_text(r, n.is_ok())))
        .collect();
    let nfv_all = nfv.iter().all(Result::is_ok);
    if nfv_all && ovs_add(&given).is_ok() {
        t.rules += rules.len();
        read_back(&rules, ovs, t);
        return rules;
    }
    // OVS one by one.
    let mut both = Vec::new();
    for ((r, text), n) in given.into_iter().zip(nfv) {
        ovs.del_flows().expect("ovs del-flows");
        let o = ovs_add(&[(r, text.clone())]);
        match (n, o) {
            (Ok(()), Ok(())) => both.push((r.clone(), text)),
            (Err(_), Err(_)) => {}
            (n, o) => {
                let ovs_refused = o.is_err();
                let message = n.err().or(o.err()).unwrap_or_default();
                let shown = format!(
                    "{} refuses {}{}\n    {}",
                    if ovs_refused { "OVS" } else { "nfvswitch" },
                    text,
                    if text != r.text() {
                        format!(" (nfvswitch's print of {})", r.text())
                    } else {
                        String::new()
                    },
                    message
                        .lines()
                        .filter(|l| !l.trim().is_empty())
                        .collect::<Vec<_>>()
                        .join("\n    ")
                );
                match compare::KNOWN_REFUSALS
                    .iter()
                    .find(|k| (k.applies)(r, &message, ovs_refused))
                {
                    Some(k) => {
                        let e = t.refused.entry(k.name).or_insert((0, shown));
                        e.0 += 1;
                    }
                    None => t
                        .unexplained
                        .push(format!("one switch only refuses a rule: {shown}")),
                }
            }
        }
    }
    node.del_flows().expect("nfvswitch del-flows");
    ovs.del_flows().expect("ovs del-flows");
    let texts: Vec<String> = both.iter().map(|(r, _)| r.text()).collect();
    node.add_flows(&texts)
        .expect("nfvswitch takes the rules it took one by one");
    let given: Vec<(&Rule, String)> = both.iter().map(|(r, t)| (r, t.clone())).collect();
    ovs_add(&given).expect("OVS takes the rules it took one by one");
    let both: Vec<Rule> = both.into_iter().map(|(r, _)| r).collect();
    t.rules += both.len();
    read_back(&both, ovs, t);
    both
}

/// `m` with a "no VLAN tag" match written one way: a match that wants
/// the tag-present bit clear matches the same packets whatever else its
/// VLAN mask covers, since an untagged packet's TCI is 0 in both
/// switches (OVS writes `dl_vlan=0xffff` as `vlan_tci=0x0000`, mask
/// 0xffff, or `0x0000/0x1fff` in OpenFlow 1.3; nfvswitch as mask 0x1000).
fn untagged_as_one(mut m: nfv_flow::Match) -> nfv_flow::Match {
    use nfv_flow::key::VLAN_PRESENT;
    if m.mask.vlan_tci() & VLAN_PRESENT != 0 && m.key.vlan_tci() & VLAN_PRESENT == 0 {
        m.mask.set_vlan_tci(0xffff);
        m.key.set_vlan_tci(0);
    }
    m
}

/// Reads OVS's dump-flows with nfvswitch's parser: each rule's match
/// must be what nfvswitch made of the generated text.
fn read_back(rules: &[Rule], ovs: &ovs::Ovs, t: &mut Tally) {
    let dump = ovs.dump_flows().expect("ovs dump-flows");
    let mut seen = 0;
    for line in dump.lines() {
        // " priority=5,tcp,tp_dst=80 actions=drop" (OpenFlow 1.3 replies
        // start with a header line).
        let Some((m, _)) = line.trim_end().split_once("actions=") else {
            continue;
        };
        let m = m.trim().trim_end_matches(',');
        seen += 1;
        let theirs = match nfv_flow::parse_filter(m) {
            Ok(f) => f,
            Err(e) => {
                t.unexplained.push(format!(
                    "nfvswitch cannot read OVS's dump-flows match {m:?}: {e}"
                ));
                continue;
            }
        };
        let priority = theirs.priority.unwrap_or(32768);
        let Some(r) = rules.iter().find(|r| r.priority == priority) else {
            t.unexplained
                .push(format!("OVS dumps a rule nobody added: {line}"));
            continue;
        };
        let ours = nfv_flow::parse_flow(&r.text())
            .expect("nfvswitch took it")
            .matches;
        t.read_back += 1;
        // A filter (OVS's dump read back) names no table; the rule is in
        // table 0, which OVS's single-table dump leaves unsaid.
        let mut theirs_m = theirs.matches;
        theirs_m.key.set_table(ours.key.table());
        theirs_m.mask.set_table(ours.mask.table());
        if untagged_as_one(theirs_m) != untagged_as_one(ours) {
            t.unexplained.push(format!(
                "OVS's dump of a rule reads back as another match\n  added:   {}\n  OVS \
                 dumps: {m}\n  nfvswitch reads the dump as {}, the added text as {}",
                r.text(),
                theirs.matches,
                ours
            ));
        }
    }
    if seen != rules.len() {
        t.unexplained.push(format!(
            "OVS holds {seen} rules, {} were added:\n{dump}",
            rules.len()
        ));
    }
}

fn run_seed_cases(seed: u64, sets: usize, ovs: &mut ovs::Ovs, node: &mut nfv::Node, t: &mut Tally) {
    let mut rng = Rng::new(seed);
    for set in 0..sets {
        let n = 1 + rng.below(20) as usize;
        let (groups, meters) = random::groups::groups_and_meters(&mut rng);
        let ct = rng.chance(35);
        t.ct_sets += usize::from(ct);
        let extras = Extras { groups, meters, ct };
        let rules = random::rules(&mut rng, n, &extras);
        let canonical = rng.chance(50);
        let before = t.unexplained.len();
        let rules = install_extras(&extras, rules, ovs, node, t);
        let rules = install(rules, canonical, ovs, node, t);
        for u in &mut t.unexplained[before..] {
            *u = format!("seed {seed}, rule set {set}: {u}");
        }
        for i in 0..PACKETS_PER_SET {
            let packet: Key = if !rules.is_empty() && rng.chance(70) {
                // In a ct rule set, half the packets are made for a rule of
                // the tables the tracker's copies come to.
                let later: Vec<&Rule> = rules.iter().filter(|r| r.table > 0).collect();
                let r = if extras.ct && !later.is_empty() && rng.chance(50) {
                    later[rng.below(later.len() as u64) as usize]
                } else {
                    &rules[rng.below(rules.len() as u64) as usize]
                };
                let near = rng.chance(25);
                random::packet_for(&mut rng, r, near)
            } else {
                random::random_packet(&mut rng, random::Class::Any)
            };
            // A packet made for a rule that matches ct_state asks the
            // tracker for that state; the packet itself is untracked.
            let wish = packet.ct_state;
            let packet = packet.without_ct();
            let (ovs_ct_next, nfv_ct_next) = if extras.ct {
                let states = random::ct_next(&mut rng, wish);
                random::ct_next_texts(&mut rng, &states)
            } else {
                (Vec::new(), Vec::new())
            };
            t.ct_next_cases += usize::from(!ovs_ct_next.is_empty());
            let where_ = format!("seed {seed}, rule set {set}, packet {i}");
            let ot = ovs
                .trace(&ovs::packet_text(&packet), &ovs_ct_next)
                .and_then(|text| ovs::parse_trace(&text, &ovs.odp_to_of));
            let nt = node.trace(&nfv::packet_text(&packet), &nfv_ct_next);
            let (ot, nt) = match (ot, nt) {
                (Ok(o), Ok(n)) => (o, n),
                (o, n) => {
                    t.cases += 1;
                    t.unexplained.push(format!(
                        "{where_}: a trace failed\n  packet: {packet:?}\n  --ct-next: {ovs_ct_next:?} \
                         (nfvswitch: {nfv_ct_next:?})\n  ovs: {:?}\n  nfvswitch: {:?}\n{}{}",
                        o.err(),
                        n.err(),
                        rules_text(&rules),
                        extras_text(&extras)
                    ));
                    continue;
                }
            };
            t.cases += 1;
            t.group_cases += usize::from(nt.groups > 0);
            t.meter_cases +=
                usize::from(nt.pipeline_actions.iter().any(|a| a.starts_with("meter:")));
            t.hits += usize::from(ot.priority.is_some());
            t.ct_cases += usize::from(!ot.recirculations.is_empty());
            t.recirculations += ot.recirculations.len();
            for p in ot.recirculations.iter().filter_map(|r| r.priority) {
                t.recirculations_taken += 1;
                let by_state = rules.iter().any(|r| {
                    r.priority == p && r.fields.iter().any(|f| f.f == ovsdiff::key::F::CtState)
                });
                t.recirculations_by_state += usize::from(by_state);
            }
            t.outputs += ot.outputs.len();
            t.rewritten += ot
                .outputs
                .iter()
                .filter(|(_, k)| {
                    let mut k = *k;
                    k.in_port = packet.in_port;
                    k != packet
                })
                .count();
            let case = Case {
                rules: &rules,
                packet,
                ct_next: &ovs_ct_next,
                ovs: &ot,
                nfv: &nt,
            };
            let Some(what) = compare::differs(&case) else {
                continue;
            };
            let text = describe(&where_, &case, what) + &extras_text(&extras);
            match compare::explain(&case, what) {
                Some(k) => {
                    let e = t.known.entry(k.name).or_insert((0, text));
                    e.0 += 1;
                }
                None => t.unexplained.push(text),
            }
        }
    }
}

fn rules_text(rules: &[Rule]) -> String {
    let mut s = String::from("  rules:\n");
    for r in rules {
        s += &format!(
            "    {}{}\n",
            r.text(),
            if r.of13 { "   (OpenFlow 1.3)" } else { "" }
        );
    }
    s
}

/// The rule set's groups and meters, for reports.
fn extras_text(set: &Extras) -> String {
    let mut s = String::new();
    for g in &set.groups {
        s += &format!("  group: {}\n", g.text());
        if g.ovs_text() != g.text() {
            s += &format!("    (OVS: {})\n", g.ovs_text());
        }
    }
    for m in &set.meters {
        s += &format!("  meter: {}\n", m.text());
    }
    s
}

fn describe(where_: &str, c: &Case, what: What) -> String {
    let ct_next: String = c
        .ct_next
        .iter()
        .map(|s| format!(" --ct-next '{s}'"))
        .collect();
    let mut s = format!(
        "{where_}: {what:?} differs\n  packet: {:?}\n  ovs trace: ofproto/trace br0 {}{ct_next}\n  \
         nfvswitch trace: ctl trace {}{ct_next}\n",
        c.packet,
        ovs::packet_text(&c.packet),
        nfv::packet_text(&c.packet)
    );
    match what {
        What::Packet => {
            s += &format!(
                "  ovs read:       {:?}\n  nfvswitch read: {:?}\n",
                c.ovs.packet, c.nfv.packet
            );
        }
        What::Rule => {
            s += &format!(
                "  ovs rule:       {:?} (priority {:?})\n  nfvswitch rule: {:?}\n",
                c.ovs.rule, c.ovs.priority, c.nfv.rule
            );
        }
        What::Recirculations => {
            for (side, v) in [
                ("ovs", &c.ovs.recirculations),
                ("nfvswitch", &c.nfv.recirculations),
            ] {
                s += &format!("  {side} tracked copies:\n");
                for r in v {
                    s += &format!("    {r:?}\n");
                }
            }
        }
        What::Outputs => {
            s += &format!("  rule: {:?}\n", c.nfv.rule);
            s += &compare::describe_outputs(c);
        }
    }
    if c.ovs.ttl_exception || c.nfv.ttl_expired {
        s += &format!(
            "  TTL: ovs exception {}, nfvswitch expired {}\n",
            c.ovs.ttl_exception, c.nfv.ttl_expired
        );
    }
    let dp = c
        .ovs
        .text
        .lines()
        .find(|l| l.starts_with("Datapath actions"));
    s += &format!("  ovs {}\n", dp.unwrap_or("(no datapath actions)"));
    // Same rule on both sides: it alone, with the packet, shows the
    // difference (the highest-priority match of a set still matches
    // alone); else the whole set.
    match (what, c.rule()) {
        (What::Outputs, Some(r)) => s + &rules_text(std::slice::from_ref(r)),
        _ => s + &rules_text(c.rules),
    }
}
