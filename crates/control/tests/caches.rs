//! The decision caches (EMC, megaflows) never outlive a rule: with
//! traffic running over 10,000 flows behind rules on several masks (so
//! both caches serve), deleting the rule that sends to the receiver stops
//! the receiver's traffic for good, and adding it back starts it again.
//!
//! PMD threads busy-poll, so the tests run one at a time.

use nfv_control::Node;
use nfv_control::protocol::{PmdReport, Request, Response, TrafficReport};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

const DEADLINE: Duration = Duration::from_secs(30);

fn ask(node: &Node, req: Request) -> serde_json::Value {
    match node.handle(&req) {
        Response::Ok { data } => data,
        Response::Error { message } => panic!("{req:?} refused: {message}"),
    }
}

fn received(node: &Node) -> u64 {
    let r: Vec<TrafficReport> = serde_json::from_value(ask(node, Request::ShowTraffic)).unwrap();
    r[0].streams.iter().map(|s| s.received).sum()
}

fn node() -> Arc<Node> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let text = "flows = [\
         \"priority=9,udp,tp_dst=7,actions=drop\", \
         \"priority=9,ip,nw_dst=10.9.9.0/24,actions=drop\", \
         \"priority=9,arp,actions=drop\", \
         \"priority=5,in_port=1,actions=output:2\", \
         \"priority=1,in_port=1,actions=output:3\"]\n\
         [memory]\nframes = 8192\nhugepages = \"never\"\n\
         [[port]]\nname = \"gen\"\nid = 1\ntype = \"generator\"\nstamp = true\n\
         rate_pps = 200000\nflows = 10000\n\
         [[port]]\nname = \"rx\"\nid = 2\ntype = \"receiver\"\n\
         [[port]]\nname = \"sink\"\nid = 3\ntype = \"sink\"\n";
    let cfg = nfv_config::parse_str(text, Path::new("caches.toml"), cpus)
        .unwrap_or_else(|e| panic!("{e}"));
    Node::start(&cfg).expect("node starts")
}

#[test]
fn no_packet_follows_a_deleted_rule_out_of_a_cache() {
    let _g = serial();
    let n = node();
    assert!(
        nfv_testutil::wait_until(DEADLINE, || received(&n) > 20_000),
        "traffic never reached the receiver"
    );
    let pmd: Vec<PmdReport> = serde_json::from_value(ask(&n, Request::ShowPmd)).unwrap();
    assert!(
        pmd[0].figures.megaflow_hits > 0 && pmd[0].figures.emc_hits > 0,
        "both caches serve: {pmd:?}"
    );
    // The caches' memory is reported: at least the EMC's slots, and far
    // below what an unbounded per-flow cache of 10,000 flows would reach
    // (a megaflow covers many flows here).
    // A slot is a cache line (base key words, hash, rule) plus the 80
    // bytes of the key's extended words, kept apart (IPv6/ARP only).
    let emc = nfv_config::DEFAULT_EMC_ENTRIES as u64 * (64 + 80);
    assert!(
        (emc..emc + (1 << 20)).contains(&pmd[0].figures.cache_bytes),
        "cache bytes {} (EMC slots alone {emc})",
        pmd[0].figures.cache_bytes
    );
    ask(
        &n,
        Request::DelFlows {
            filter: "priority=5,in_port=1".into(),
        },
    );
    // The PMD takes the new table within a few iterations; then nothing
    // more may reach the receiver.
    std::thread::sleep(Duration::from_millis(300));
    let after_delete = received(&n);
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(
        received(&n),
        after_delete,
        "packets still follow the deleted rule"
    );
    let sink_tx = |n: &Node| {
        n.show_ports()
            .iter()
            .find(|p| p.name == "sink")
            .unwrap()
            .tx
            .packets
    };
    let s0 = sink_tx(&n);
    assert!(
        nfv_testutil::wait_until(DEADLINE, || sink_tx(&n) > s0 + 10_000),
        "the catch-all takes the traffic"
    );
    ask(
        &n,
        Request::AddFlows {
            flows: vec!["priority=5,in_port=1,actions=output:2".into()],
        },
    );
    assert!(
        nfv_testutil::wait_until(DEADLINE, || received(&n) > after_delete + 10_000),
        "the re-added rule is followed again"
    );
    n.shutdown();
}

/// A megaflow cache too small for the traffic keeps what it has and says
/// so: `show pmd` reports it full and counts the megaflows it refused.
/// (Rules on `tp_src` and on ARP ahead of the catch-all: three probes, one
/// megaflow per source port, 1,024 of them, for a cache of 100.)
#[test]
fn a_full_megaflow_cache_reports_what_it_refused() {
    let _g = serial();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let text = "flows = [\
         \"priority=9,udp,tp_src=7,actions=drop\", \
         \"priority=9,arp,actions=drop\", \
         \"priority=1,in_port=1,actions=output:2\"]\n\
         [pmd]\nmegaflow_entries = 100\n\
         [memory]\nframes = 8192\nhugepages = \"never\"\n\
         [[port]]\nname = \"gen\"\nid = 1\ntype = \"generator\"\nstamp = true\n\
         rate_pps = 200000\nflows = 10000\n\
         [[port]]\nname = \"rx\"\nid = 2\ntype = \"receiver\"\n";
    let cfg =
        nfv_config::parse_str(text, Path::new("full.toml"), cpus).unwrap_or_else(|e| panic!("{e}"));
    let n = Node::start(&cfg).expect("node starts");
    let pmd = |n: &Node| -> PmdReport {
        let mut v: Vec<PmdReport> = serde_json::from_value(ask(n, Request::ShowPmd)).unwrap();
        v.remove(0)
    };
    assert!(
        nfv_testutil::wait_until(DEADLINE, || pmd(&n).figures.megaflow_refused > 1000),
        "refusals are counted: {:?}",
        pmd(&n)
    );
    let p = pmd(&n);
    assert_eq!(
        p.figures.megaflows, 100,
        "the cache is full and keeps its entries"
    );
    assert!(p.figures.megaflow_hits > 0, "and still serves them: {p:?}");
    assert!(received(&n) > 0, "traffic is forwarded throughout");
    n.shutdown();
}
