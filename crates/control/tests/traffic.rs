//! Generator → switch → receiver through a real datapath (STYLE layer 3):
//! stamped traffic at a low rate arrives complete, in order, with sane
//! latency; a flow rule that drops one flow in ten makes exactly 10 %
//! loss; clear-stats starts from zero; trials and the RFC 2544 search run
//! against the node.
//!
//! PMD threads busy-poll, so the tests take a lock and run one at a time.
//! Waits poll counters against generous deadlines; nothing asserts how
//! long anything takes.

use nfv_control::Node;
use nfv_control::protocol::{Request, Response, TrafficReport};
use nfv_control::trial::TrialRunner;
use nfv_traffic::search::{Resolution, SearchConfig, search};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

const DEADLINE: Duration = Duration::from_secs(30);

/// gen (port 1, `extra` generator keys) → one rule → rx (port 2).
fn node(extra: &str, flows: &[&str]) -> Arc<Node> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let rules: Vec<String> = flows.iter().map(|f| format!("{f:?}")).collect();
    let text = format!(
        "flows = [{}]\n\
         [memory]\nframes = 8192\nhugepages = \"never\"\n\
         [[port]]\nname = \"gen\"\nid = 1\ntype = \"generator\"\nstamp = true\n{extra}\n\
         [[port]]\nname = \"rx\"\nid = 2\ntype = \"receiver\"\n",
        rules.join(", ")
    );
    let cfg = nfv_config::parse_str(&text, Path::new("traffic.toml"), cpus)
        .unwrap_or_else(|e| panic!("{e}"));
    Node::start(&cfg).expect("node starts")
}

fn traffic(node: &Node) -> TrafficReport {
    let Response::Ok { data } = node.handle(&Request::ShowTraffic) else {
        panic!("show traffic refused")
    };
    let mut reports: Vec<TrafficReport> = serde_json::from_value(data).unwrap();
    assert_eq!(reports.len(), 1);
    reports.remove(0)
}

fn received(node: &Node) -> u64 {
    traffic(node).streams.iter().map(|s| s.received).sum()
}

#[test]
fn low_rate_traffic_arrives_complete_in_order_with_sane_latency() {
    let _g = serial();
    let n = node(
        "rate_pps = 100000\ncount = 20000",
        &["priority=10,in_port=1,actions=output:2"],
    );
    assert!(
        nfv_testutil::wait_until(DEADLINE, || received(&n) >= 20_000),
        "only {} of 20000 arrived",
        received(&n)
    );
    let t = traffic(&n);
    assert_eq!((t.name.as_str(), t.no, t.unstamped), ("rx", 2, 0));
    assert_eq!(t.streams.len(), 1);
    let s = &t.streams[0];
    assert_eq!((s.src_port, s.src_queue), (1, 0));
    assert_eq!(
        (s.received, s.lost, s.reordered, s.duplicates, s.late),
        (20_000, 0, 0, 0, 0)
    );
    let l = s.latency.expect("latency");
    assert_eq!(l.samples, 20_000);
    // Same PMD, same TSC: generated and received within one iteration
    // (or a few when preempted), far below a second.
    assert!(l.min_ns <= l.p50_ns && l.p50_ns <= l.p99_ns && l.p99_ns <= l.p999_ns);
    assert!(l.p999_ns <= l.max_ns && l.max_ns < 1_000_000_000, "{l:?}");
    assert!(l.mean_ns >= l.min_ns as f64 && l.mean_ns <= l.max_ns as f64);
    // Port info carries the same numbers.
    let ports = n.show_ports();
    let rx = ports.iter().find(|p| p.name == "rx").unwrap();
    assert_eq!(rx.info["received"], "20000");
    assert_eq!(rx.info["lost"], "0");
    let g = ports.iter().find(|p| p.name == "gen").unwrap();
    assert_eq!(g.info["generated"], "20000");

    // clear-stats starts the receiver from zero.
    assert!(matches!(
        n.handle(&Request::ClearStats),
        Response::Ok { .. }
    ));
    let s = &traffic(&n).streams[0];
    assert_eq!((s.received, s.lost, s.latency), (0, 0, None));
    n.shutdown();
}

#[test]
fn a_rule_dropping_one_flow_in_ten_makes_exactly_10_percent_loss() {
    let _g = serial();
    // Ten flows round-robin over UDP source ports 1024..=1033; the rule
    // drops 1033, i.e. sequences 9, 19, 29, ...
    let n = node(
        "rate_pps = 100000\ncount = 20000\nflows = 10",
        &[
            "priority=20,udp,tp_src=1033,actions=drop",
            "priority=10,in_port=1,actions=output:2",
        ],
    );
    let g = n.generator_control("gen").unwrap();
    assert!(nfv_testutil::wait_until(DEADLINE, || g.generated() >= 20_000));
    assert!(nfv_testutil::wait_until(DEADLINE, || received(&n) >= 18_000));
    std::thread::sleep(Duration::from_millis(50));
    let s = n.receiver_stats("rx").unwrap().snapshot();
    let s = &s.streams[0];
    assert_eq!(s.received, 18_000);
    assert_eq!(s.loss_given(g.generated()), 2_000, "exactly 10 %");
    // The last sequence (19999) was dropped: only the count sees it.
    assert_eq!((s.lost(), s.reordered, s.duplicates), (1_999, 0, 0));
    let dropped = n
        .show_ports()
        .into_iter()
        .find(|p| p.name == "gen")
        .unwrap();
    assert_eq!(dropped.rx.drops.get("action_drop"), Some(&2_000));
    n.shutdown();
}

/// `show node`'s `free_frames` counts the PMD's pool cache too: with the
/// traffic stopped every frame is free although the shared free list
/// alone is short of the frames the cache keeps.
#[test]
fn free_pool_frames_count_the_pmd_cache_and_return_to_full() {
    let _g = serial();
    let n = node(
        "rate_pps = 100000",
        &["priority=10,in_port=1,actions=output:2"],
    );
    assert!(nfv_testutil::wait_until(DEADLINE, || received(&n) >= 5_000));
    let frames = n.show_node().memory.frames;
    assert!(n.show_node().memory.free_frames <= frames);
    n.del_port("gen").unwrap();
    let full = nfv_testutil::wait_until(DEADLINE, || n.show_node().memory.free_frames == frames);
    let shared = n.datapath().pool().shared_free();
    n.shutdown();
    assert!(full, "free frames never back to {frames}");
    assert!(
        shared < frames,
        "the PMD cache held none: {shared} of {frames} shared"
    );
}

#[test]
fn trials_and_the_search_run_against_the_node() {
    let _g = serial();
    // Idle until the trials drive it.
    let n = node("count = 1", &["priority=10,in_port=1,actions=output:2"]);
    assert!(TrialRunner::new(&n, "rx", "rx").is_err());
    assert!(TrialRunner::new(&n, "gen", "gen").is_err());
    let mut runner = TrialRunner::new(&n, "gen", "rx").unwrap();
    // Generous: a loaded test machine must not turn into packet loss
    // (no backlog limit, plenty of time to finish).
    runner.grace = Duration::from_secs(5);
    runner.backlog_limit = 0;
    let o = runner.run(50_000.0, 0.2);
    assert_eq!(
        (o.result.sent, o.result.received, o.generated),
        (10_000, 10_000, 10_000)
    );
    assert_eq!((o.reordered, o.duplicates, o.missed), (0, 0, 0));
    assert_eq!(o.latency.expect("latency").samples, 10_000);
    // A second trial counts only its own packets.
    let o = runner.run(20_000.0, 0.1);
    assert_eq!((o.result.sent, o.result.received), (2_000, 2_000));

    let cfg = SearchConfig {
        min_rate: 10_000.0,
        max_rate: 40_000.0,
        resolution: Resolution::Percent(50.0),
        trial_secs: 0.1,
        ..Default::default()
    };
    let mut progress = 0;
    let r = search(
        &cfg,
        |t| runner.run(t.rate_pps, t.secs).result,
        |_| progress += 1,
    );
    // Far below what a PMD forwards: loss-free at the maximum, one trial.
    assert_eq!(r.trials.len(), 1);
    assert_eq!(progress, 2);
    assert_eq!(r.ndr.map(|f| f.rate_pps), Some(40_000.0));
    assert_eq!(r.pdr.map(|f| f.rate_pps), Some(40_000.0));
    assert!(runner.max_rate(0.1) > 0.0);
    n.shutdown();
}
