//! `[conntrack]` settings reach every PMD's connection table: a node whose
//! zone limit is 10 commits 10 of a generator's 100 UDP flows and refuses
//! the rest (`ct_commit_refused`), whatever the PMDs' default table would
//! have allowed (65,536 connections, no zone limit). Polled with a
//! generous deadline: the figures are counts, not rates, so a loaded
//! machine only makes them arrive later.

use nfv_control::Node;
use nfv_control::protocol::{Request, Response};
use nfv_datapath::stats::PmdSnapshot;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

const FLOWS: u64 = 100;
const ZONE_LIMIT: u64 = 10;

fn node() -> Arc<Node> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let text = format!(
        "[memory]\nframes = 8192\nhugepages = \"never\"\n\
         [conntrack]\ncapacity = 1000\nzone_limit = {ZONE_LIMIT}\n\
         [[port]]\nname = \"gen\"\nid = 1\ntype = \"generator\"\nflows = {FLOWS}\nrate_pps = 20000\n\
         [[port]]\nname = \"sink\"\nid = 2\ntype = \"sink\"\n"
    );
    let cfg = nfv_config::parse_str(&text, Path::new("conntrack.toml"), cpus)
        .unwrap_or_else(|e| panic!("{e}"));
    Node::start(&cfg).expect("node starts")
}

fn totals(node: &Node) -> PmdSnapshot {
    node.datapath()
        .pmd_views()
        .iter()
        .fold(PmdSnapshot::default(), |t, v| t.plus(&v.stats))
}

#[test]
fn the_configured_zone_limit_holds_on_the_pmds_table() {
    let n = node();
    let flows = [
        "table=0,priority=100,in_port=1,ip,actions=ct(zone=1,table=1)",
        "table=1,priority=100,ct_state=+trk+est,ip,actions=output:2",
        "table=1,priority=90,ct_state=+trk+new,ip,actions=ct(commit,zone=1),output:2",
        "table=1,priority=1,actions=drop",
    ];
    match n.handle(&Request::AddFlows {
        flows: flows.iter().map(|f| f.to_string()).collect(),
    }) {
        Response::Ok { .. } => {}
        other => panic!("add-flows: {other:?}"),
    }
    // Every flow has been offered several times once the refusals exceed
    // the flows that found no room.
    let deadline = Instant::now() + Duration::from_secs(60);
    let t = loop {
        let t = totals(&n);
        if t.ct_commit_refused >= 3 * (FLOWS - ZONE_LIMIT) || Instant::now() > deadline {
            break t;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    n.shutdown();
    eprintln!(
        "connections {} committed {} refused {} new {} est {}",
        t.ct_connections, t.ct_committed, t.ct_commit_refused, t.ct_new, t.ct_established
    );
    assert_eq!(t.ct_connections, ZONE_LIMIT, "{t:?}");
    assert_eq!(t.ct_committed, ZONE_LIMIT, "{t:?}");
    assert!(t.ct_commit_refused >= 3 * (FLOWS - ZONE_LIMIT), "{t:?}");
    assert!(
        t.ct_established > 0,
        "the admitted connections' packets: {t:?}"
    );
}
