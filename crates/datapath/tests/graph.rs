//! Whole-graph loopback tests (STYLE lesson 9, layer 3): generator, ring
//! pairs and sinks opened from `nfv_ports::config` through a
//! [`PortFactory`], wired by flow rules in a real [`Datapath`], checked
//! with exact counter arithmetic: every generated packet is either
//! transmitted somewhere or counted as a drop with a reason, and the
//! packet pool gets every frame back.
//!
//! PMD threads busy-poll, so these tests take a process-wide lock and run
//! one at a time (a 2-core machine has no room for several spinning
//! datapaths). Waits poll counters against a generous deadline; no
//! assertion depends on how long anything takes.

use nfv_datapath::{Datapath, DatapathConfig};
use nfv_flow::table::SharedFlowTable;
use nfv_flow::{PortNo, parse_flow};
use nfv_mem::{HugepageMode, MemoryConfig, PacketPool};
use nfv_ports::config::{GeneratorConfig, PortConfig, PortKind, RingConfig};
use nfv_ports::{DropReason, Port, PortFactory, PortStats, QueueSnapshot};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Upper bound for any wait; normally each test is done in well under 2 s.
const DEADLINE: Duration = Duration::from_secs(30);

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

// ---------------------------------------------------------------------------
// Building graphs.

fn pool(name: &str, frames: usize) -> Arc<PacketPool> {
    PacketPool::new(
        name,
        &MemoryConfig {
            frame_size: 2048,
            frames,
            hugepages: HugepageMode::Never,
        },
    )
    .expect("packet pool")
}

fn generator(name: &str, id: PortNo, rxqs: usize, g: GeneratorConfig) -> PortConfig {
    PortConfig {
        name: name.into(),
        id,
        rxqs,
        kind: PortKind::Generator(g),
    }
}

fn sink(name: &str, id: PortNo) -> PortConfig {
    PortConfig {
        name: name.into(),
        id,
        rxqs: 1,
        kind: PortKind::Sink,
    }
}

fn ring(name: &str, id: PortNo, peer: &str, rxqs: usize, size: usize) -> PortConfig {
    PortConfig {
        name: name.into(),
        id,
        rxqs,
        kind: PortKind::Ring(RingConfig {
            peer: peer.into(),
            size,
        }),
    }
}

struct Graph {
    dp: Datapath,
    factory: PortFactory,
}

impl Graph {
    fn start(pool: &Arc<PacketPool>, pmds: usize, rules: &[&str]) -> Graph {
        Self::start_with_emc(pool, pmds, 1024, rules)
    }

    fn start_with_emc(pool: &Arc<PacketPool>, pmds: usize, emc: usize, rules: &[&str]) -> Graph {
        let table = Arc::new(SharedFlowTable::new());
        table.add_flows(
            rules
                .iter()
                .map(|r| parse_flow(r).unwrap_or_else(|e| panic!("{r}: {e}"))),
        );
        let cfg = DatapathConfig {
            pmd_cores: vec![None; pmds],
            emc_entries: emc,
            megaflow_entries: 1024,
            pmu: false,
            packet_in_rate: 1000,
            packet_in_burst: 100,
            conntrack: Default::default(),
        };
        let dp = Datapath::start(&cfg, pool.clone(), table).expect("datapath");
        Graph {
            dp,
            factory: PortFactory::new(),
        }
    }

    /// Opens every port first (so ring ends find their peers), then adds
    /// them in order; put generators last so traffic starts on a complete
    /// graph.
    fn add(&self, cfgs: &[PortConfig]) -> Vec<Arc<dyn Port>> {
        let ports: Vec<_> = cfgs
            .iter()
            .map(|c| self.factory.open(c).expect("open port"))
            .collect();
        for (c, p) in cfgs.iter().zip(&ports) {
            self.dp.add_port(c.id, p.clone()).expect("add_port");
        }
        ports
    }

    fn stats(&self, no: PortNo) -> Arc<PortStats> {
        self.dp
            .port_views()
            .into_iter()
            .find(|v| v.no == no)
            .unwrap_or_else(|| panic!("no port {no}"))
            .stats
    }

    fn rx(&self, no: PortNo) -> QueueSnapshot {
        self.stats(no).rx_total()
    }

    fn tx(&self, no: PortNo) -> QueueSnapshot {
        self.stats(no).tx_total()
    }

    /// Every drop counter of every port, rx and tx.
    fn all_drops(&self) -> u64 {
        self.dp
            .port_views()
            .iter()
            .map(|v| v.stats.rx_total().total_drops() + v.stats.tx_total().total_drops())
            .sum()
    }

    fn pmd_iterations(&self) -> u64 {
        self.dp.pmd_views().iter().map(|p| p.stats.iterations).sum()
    }

    /// Waits until the PMDs have run `n` more iterations: after that, no
    /// packet still being handled when this was called can be in flight.
    fn settle(&self, n: u64) {
        let start = self.pmd_iterations();
        wait_until(
            || format!("PMDs to run {n} iterations"),
            || self.pmd_iterations() >= start + n,
        );
    }
}

fn wait_until(what: impl Fn() -> String, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(
            t0.elapsed() < DEADLINE,
            "timed out after {DEADLINE:?} waiting for {}",
            what()
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn drops_of(s: &QueueSnapshot, r: DropReason) -> u64 {
    s.drops[r as usize]
}

fn info(p: &Arc<dyn Port>, key: &str) -> String {
    p.gauges().text(key).unwrap_or_default()
}

// Port numbers used below.
const GEN: PortNo = 1;
const RING_A: PortNo = 2;
const RING_B: PortNo = 3;
const SINK: PortNo = 4;
const SINK2: PortNo = 5;

// ---------------------------------------------------------------------------
// Tests.

/// How the decision is expected to take the loop's packets.
#[derive(Clone, Copy, PartialEq)]
enum Tier {
    /// Rules on in_port alone: no lookup (`port_wide_hits`).
    PortWide,
    /// Rules that also match the protocol: EMC, megaflows, classifier.
    Lookup,
}

/// generator → ring A ⇒ ring B → sink, one PMD: every packet arrives.
fn one_pmd_ring_loop(name: &str, emc_entries: usize, tier: Tier) {
    let _g = serial();
    const N: u64 = 10_000;
    let pool = pool(name, 8192);
    let rules: &[&str] = match tier {
        Tier::PortWide => &["in_port=1,actions=output:2", "in_port=3,actions=output:4"],
        // The generator sends UDP: the same paths, through the lookup.
        Tier::Lookup => &[
            "in_port=1,udp,actions=output:2",
            "in_port=3,udp,actions=output:4",
        ],
    };
    let g = Graph::start_with_emc(&pool, 1, emc_entries, rules);
    let gen_cfg = GeneratorConfig {
        count: Some(N),
        flows: 16,
        ..Default::default()
    };
    let ports = g.add(&[
        sink("sink", SINK),
        ring("ring-a", RING_A, "ring-b", 1, 1024),
        ring("ring-b", RING_B, "ring-a", 1, 1024),
        generator("gen", GEN, 1, gen_cfg),
    ]);
    wait_until(
        || format!("sink tx == {N}, now {:?}", g.tx(SINK)),
        || g.tx(SINK).packets >= N,
    );
    g.settle(1000);
    let (gen_rx, a, b, sink_tx) = (g.rx(GEN), g.tx(RING_A), g.rx(RING_B), g.tx(SINK));
    assert_eq!(gen_rx.packets, N, "generator rx");
    assert_eq!(gen_rx.bytes, N * 64, "generator rx bytes");
    assert_eq!(
        info(&ports[3], "generated"),
        N.to_string(),
        "generator's own count"
    );
    assert_eq!(a.packets, N, "ring A tx");
    assert_eq!(b.packets, N, "ring B rx");
    assert_eq!(g.rx(RING_A).packets, 0, "nothing comes back on ring A");
    assert_eq!(g.tx(RING_B).packets, 0, "nothing is sent into ring B");
    assert_eq!(sink_tx.packets, N, "sink tx");
    assert_eq!(sink_tx.bytes, N * 64, "sink tx bytes");
    assert_eq!(g.all_drops(), 0, "drops");
    assert_eq!(info(&ports[1], "queued"), "0", "ring B inbox drained");
    for rule in g.dp.table().snapshot().classifier.rules() {
        assert_eq!(rule.stats.packets.load(Relaxed), N, "rule hits");
        assert_eq!(rule.stats.bytes.load(Relaxed), N * 64, "rule bytes");
    }
    let pmd = &g.dp.pmd_views()[0].stats;
    assert_eq!(pmd.rx_packets, 2 * N, "PMD rx = generator + ring B");
    assert_eq!(pmd.table_misses, 0);
    if tier == Tier::PortWide {
        assert_eq!(
            pmd.port_wide_hits,
            2 * N,
            "every packet decided by its port"
        );
        assert_eq!(
            pmd.emc_hits + pmd.emc_probes + pmd.megaflow_hits + pmd.classifier_hits,
            0,
            "and none looked up: {pmd:?}"
        );
        return;
    }
    assert_eq!(pmd.port_wide_hits, 0, "the rules look at the protocol");
    assert_eq!(
        pmd.emc_hits + pmd.megaflow_hits + pmd.classifier_hits,
        2 * N,
        "every packet looked up once"
    );
    if emc_entries == 0 {
        assert_eq!(pmd.emc_hits, 0, "EMC disabled");
    } else {
        // The EMC was consulted; whether it or a megaflow run answers
        // the repeats is the EMC gate's call (two megaflows hold every
        // flow here: runs win).
        assert!(pmd.emc_probes > 0, "EMC probed: {pmd:?}");
        assert!(
            pmd.emc_hits + pmd.megaflow_hits > 100 * pmd.classifier_hits,
            "the caches serve repeated flows: {pmd:?}"
        );
    }
}

#[test]
fn generator_ring_pair_sink_delivers_every_packet() {
    one_pmd_ring_loop("graph-one-pmd", 1024, Tier::Lookup);
}

#[test]
fn generator_ring_pair_sink_without_emc() {
    one_pmd_ring_loop("graph-no-emc", 0, Tier::Lookup);
}

#[test]
fn generator_ring_pair_sink_by_port_wide_rules() {
    one_pmd_ring_loop("graph-port-wide", 1024, Tier::PortWide);
}

/// Several outputs to one port overflow its pending batch within one rx
/// batch (32 packets x 3 copies): the mid-batch send must lose nothing.
#[test]
fn repeated_outputs_to_one_port_overflow_a_batch_without_loss() {
    let _g = serial();
    const N: u64 = 10_000;
    let pool = pool("graph-repeat", 8192);
    let g = Graph::start(&pool, 1, &["in_port=1,actions=output:4,output:4,output:4"]);
    let gen_cfg = GeneratorConfig {
        count: Some(N),
        ..Default::default()
    };
    g.add(&[sink("sink", SINK), generator("gen", GEN, 1, gen_cfg)]);
    wait_until(
        || format!("sink tx == {}, now {:?}", 3 * N, g.tx(SINK)),
        || g.tx(SINK).packets >= 3 * N,
    );
    g.settle(1000);
    assert_eq!(g.rx(GEN).packets, N);
    assert_eq!(g.tx(SINK).packets, 3 * N);
    assert_eq!(g.tx(SINK).bytes, 3 * N * 64);
    assert_eq!(g.all_drops(), 0);
    g.dp.shutdown();
    assert_eq!(pool.shared_free(), pool.frames(), "copies leaked");
}

/// A sink's queue never receives: spreading queues over PMDs does not
/// count it, so the generator and the port after the sink still land on
/// different PMDs (counted, the sink took the second PMD's turn and both
/// busy queues shared the first).
#[test]
fn sinks_do_not_count_when_queues_are_spread() {
    let _g = serial();
    let pool = pool("graph-spread", 4096);
    let g = Graph::start(&pool, 2, &[]);
    let gen_cfg = GeneratorConfig {
        count: Some(1),
        ..Default::default()
    };
    g.add(&[
        generator("gen", GEN, 1, gen_cfg),
        sink("sink", SINK),
        ring("ring-a", RING_A, "ring-b", 1, 1024),
        ring("ring-b", RING_B, "ring-a", 1, 1024),
    ]);
    let views = g.dp.port_views();
    let pmd = |no: PortNo| views.iter().find(|v| v.no == no).unwrap().rxq_pmd.clone();
    assert_eq!(pmd(GEN), vec![0]);
    assert_eq!(pmd(RING_A), vec![1], "after the sink: the other PMD");
    assert_eq!(pmd(RING_B), vec![0]);
}

/// Same graph on two PMDs with a two-queue generator: totals stay exact.
#[test]
fn two_pmds_two_generator_queues_totals_exact() {
    let _g = serial();
    const N: u64 = 10_000;
    let pool = pool("graph-two-pmds", 16384);
    let g = Graph::start(
        &pool,
        2,
        &["in_port=1,actions=output:2", "in_port=3,actions=output:4"],
    );
    let gen_cfg = GeneratorConfig {
        count: Some(N),
        flows: 64,
        ..Default::default()
    };
    // Ring B has a queue per PMD and room for every packet, so no
    // scheduling hiccup can make it overflow.
    g.add(&[
        sink("sink", SINK),
        ring("ring-a", RING_A, "ring-b", 1, 1024),
        ring("ring-b", RING_B, "ring-a", 2, 16384),
        generator("gen", GEN, 2, gen_cfg),
    ]);
    let views = g.dp.port_views();
    let gen_view = views.iter().find(|v| v.no == GEN).unwrap();
    assert_eq!(gen_view.rxq_pmd.len(), 2);
    assert_ne!(
        gen_view.rxq_pmd[0], gen_view.rxq_pmd[1],
        "generator queues on different PMDs"
    );

    wait_until(
        || format!("sink tx == {N}, now {:?}", g.tx(SINK)),
        || g.tx(SINK).packets >= N,
    );
    g.settle(1000);
    let gen_stats = g.stats(GEN);
    assert_eq!(gen_stats.rx_total().packets, N, "generator rx");
    for (q, c) in gen_stats.rx.iter().enumerate() {
        assert_eq!(
            c.snapshot().packets,
            N / 2,
            "generator rxq {q} sends its share"
        );
    }
    assert_eq!(g.tx(RING_A).packets, N, "ring A tx");
    assert_eq!(g.rx(RING_B).packets, N, "ring B rx");
    assert_eq!(g.tx(SINK).packets, N, "sink tx");
    assert_eq!(g.tx(SINK).bytes, N * 64, "sink tx bytes");
    assert_eq!(g.all_drops(), 0, "drops");
    let pmds = g.dp.pmd_views();
    assert_eq!(
        pmds.iter().map(|p| p.stats.rx_packets).sum::<u64>(),
        2 * N,
        "PMD rx total"
    );
    for p in &pmds {
        assert!(p.stats.rx_packets > 0, "PMD {} did no work", p.index);
    }
}

/// A higher-priority rule added while the generator runs moves the traffic
/// to another sink; nothing is lost on the way.
#[test]
fn rule_change_at_run_time_moves_traffic_without_loss() {
    let _g = serial();
    const N: u64 = 200_000;
    let pool = pool("graph-rule-change", 8192);
    let g = Graph::start(&pool, 1, &["priority=10,in_port=1,actions=output:4"]);
    let gen_cfg = GeneratorConfig {
        count: Some(N),
        rate_pps: Some(200_000),
        ..Default::default()
    };
    g.add(&[
        sink("sink", SINK),
        sink("sink2", SINK2),
        generator("gen", GEN, 1, gen_cfg),
    ]);

    wait_until(
        || format!("first sink to receive, now {:?}", g.tx(SINK)),
        || g.tx(SINK).packets >= 1000,
    );
    g.dp.table()
        .add_flows([parse_flow("priority=20,in_port=1,actions=output:5").unwrap()]);
    wait_until(
        || format!("second sink to receive, now {:?}", g.tx(SINK2)),
        || g.tx(SINK2).packets > 0,
    );
    // All packets to the first sink were sent before the first one to the
    // second (one PMD, one table switch), so this is its final count.
    let first = g.tx(SINK).packets;
    assert!(
        first < N,
        "the generator had finished before the rule change took effect"
    );

    let accounted = || g.tx(SINK).packets + g.tx(SINK2).packets + g.all_drops();
    wait_until(
        || format!("all {N} packets accounted for, now {}", accounted()),
        || accounted() >= N,
    );
    g.settle(1000);
    assert_eq!(g.rx(GEN).packets, N, "generated");
    assert_eq!(accounted(), N, "sum of all tx + drops == generated");
    assert_eq!(g.all_drops(), 0, "no reason to drop anything");
    assert_eq!(
        g.tx(SINK).packets,
        first,
        "old rule still used after the switch"
    );
    assert_eq!(g.tx(SINK2).packets, N - first);
}

/// Deleting sinks while traffic flows: their packets become NoPort drops,
/// the remaining sink (whose tx slot moves when an earlier one is removed)
/// keeps getting exactly its flow, and a port can come back under the
/// same number.
fn del_port_while_traffic_flows(pmds: usize) {
    let _g = serial();
    const N: u64 = 150_000;
    const SINK3: PortNo = 6;
    let pool = pool(&format!("graph-del-port-{pmds}"), 8192);
    // Three flows round-robin: UDP source port 1024 → sink, 1025 → sink2,
    // 1026 → sink3. Each generator queue sends a multiple of 3 packets.
    let g = Graph::start(
        &pool,
        pmds,
        &[
            "in_port=1,udp,tp_src=1024,actions=output:4",
            "in_port=1,udp,tp_src=1025,actions=output:5",
            "in_port=1,udp,tp_src=1026,actions=output:6",
        ],
    );
    let gen_cfg = GeneratorConfig {
        count: Some(N),
        flows: 3,
        rate_pps: Some(150_000),
        ..Default::default()
    };
    g.add(&[
        sink("sink", SINK),
        sink("sink2", SINK2),
        sink("sink3", SINK3),
        generator("gen", GEN, pmds, gen_cfg),
    ]);
    let (old1, old2) = (g.stats(SINK), g.stats(SINK2));

    wait_until(
        || format!("sink to receive, now {:?}", old1.tx_total()),
        || old1.tx_total().packets >= 1000,
    );
    // Removing the first port moves the last tx slot into its place.
    assert_eq!(g.dp.del_port("sink").expect("del_port"), SINK);
    assert_eq!(g.dp.resolve_port("sink"), None);
    assert!(g.dp.port_views().iter().all(|v| v.no != SINK));
    wait_until(
        || format!("NoPort drops, now {:?}", g.rx(GEN)),
        || drops_of(&g.rx(GEN), DropReason::NoPort) > 0,
    );
    assert_eq!(g.dp.del_port("5").expect("del_port by number"), SINK2);
    let sink3_at_del = g.tx(SINK3).packets;
    assert!(
        g.rx(GEN).packets < N,
        "the generator had finished before del_port"
    );
    wait_until(
        || "sink3 to keep receiving".into(),
        || g.tx(SINK3).packets > sink3_at_del + 100,
    );

    // Re-adding a port under a deleted number resumes forwarding to it.
    g.add(&[sink("sink-new", SINK)]);
    let accounted = || {
        old1.tx_total().packets
            + old2.tx_total().packets
            + g.tx(SINK).packets
            + g.tx(SINK3).packets
            + drops_of(&g.rx(GEN), DropReason::NoPort)
    };
    wait_until(
        || format!("all {N} packets accounted for, now {}", accounted()),
        || accounted() >= N,
    );
    g.settle(1000);
    let gen_rx = g.rx(GEN);
    let no_port = drops_of(&gen_rx, DropReason::NoPort);
    assert_eq!(gen_rx.packets, N, "generated");
    assert_eq!(gen_rx.total_drops(), no_port, "only NoPort drops");
    assert_eq!(
        g.tx(SINK3).packets,
        N / 3,
        "the untouched flow lost nothing"
    );
    assert_eq!(
        old1.tx_total().packets + old2.tx_total().packets + no_port + g.tx(SINK).packets,
        2 * N / 3,
        "deleted ports' flows: old sinks + NoPort + new sink"
    );
    assert!(g.tx(SINK).packets > 0, "re-added port receives again");
    assert_eq!(accounted(), N);
    assert_eq!(g.all_drops(), no_port);
}

#[test]
fn del_port_while_traffic_flows_one_pmd() {
    del_port_while_traffic_flows(1);
}

#[test]
fn del_port_while_traffic_flows_two_pmds() {
    del_port_while_traffic_flows(2);
}

/// After shutdown the pool has every frame back, whatever path packets
/// took: forwarded through a ring (with VLAN push/pop), copied to two
/// sinks, dropped for NoPort / NoMatch / TxFull, or left queued in a ring
/// whose far end is not attached (returned when the ports are dropped).
#[test]
fn pool_gets_every_frame_back() {
    let _g = serial();
    const N: u64 = 10_000;
    const PER_FLOW: u64 = N / 5;
    const RING_C: PortNo = 6;
    const RING_D: PortNo = 7;
    const STUCK: usize = 256;
    let pool = pool("graph-leaks", 8192);
    let g = Graph::start(
        &pool,
        1,
        &[
            "in_port=1,udp,tp_src=1024,actions=mod_vlan_vid:5,output:2",
            "in_port=3,actions=strip_vlan,output:4",
            "in_port=1,udp,tp_src=1025,actions=output:4,output:5",
            "in_port=1,udp,tp_src=1026,actions=output:99",
            // tp_src=1027: no rule.
            "in_port=1,udp,tp_src=1028,actions=output:6",
        ],
    );
    let gen_cfg = GeneratorConfig {
        count: Some(N),
        flows: 5,
        ..Default::default()
    };
    // Ring D (C's peer) is opened but never attached: its inbox fills up.
    let ring_d = g
        .factory
        .open(&ring("ring-d", RING_D, "ring-c", 1, STUCK))
        .unwrap();
    let ports = g.add(&[
        sink("sink", SINK),
        sink("sink2", SINK2),
        ring("ring-a", RING_A, "ring-b", 1, 1024),
        ring("ring-b", RING_B, "ring-a", 1, 1024),
        ring("ring-c", RING_C, "ring-d", 1, 1024),
        generator("gen", GEN, 1, gen_cfg),
    ]);
    let done = || {
        g.rx(GEN).packets == N
            && g.tx(SINK).packets == 2 * PER_FLOW
            && g.tx(SINK2).packets == PER_FLOW
            && g.tx(RING_C).packets + drops_of(&g.tx(RING_C), DropReason::TxFull) == PER_FLOW
    };
    wait_until(
        || {
            format!(
                "every path to finish: gen {:?} sink {:?}",
                g.rx(GEN),
                g.tx(SINK)
            )
        },
        done,
    );
    g.settle(1000);
    let gen_rx = g.rx(GEN);
    assert_eq!(gen_rx.packets, N);
    assert_eq!(drops_of(&gen_rx, DropReason::NoPort), PER_FLOW, "output:99");
    assert_eq!(
        drops_of(&gen_rx, DropReason::NoMatch),
        PER_FLOW,
        "tp_src=1027"
    );
    assert_eq!(gen_rx.total_drops(), 2 * PER_FLOW);
    assert_eq!(g.tx(RING_A).packets, PER_FLOW);
    assert_eq!(
        g.tx(RING_A).bytes,
        PER_FLOW * 68,
        "tagged on the way into the ring"
    );
    assert_eq!(g.rx(RING_B).packets, PER_FLOW);
    assert_eq!(
        g.tx(SINK).bytes,
        2 * PER_FLOW * 64,
        "untagged again at the sink"
    );
    assert_eq!(
        g.tx(RING_C).packets,
        STUCK as u64,
        "ring D's inbox holds this many"
    );
    assert_eq!(
        drops_of(&g.tx(RING_C), DropReason::TxFull),
        PER_FLOW - STUCK as u64
    );
    assert_eq!(info(&ring_d, "queued"), STUCK.to_string());

    g.dp.shutdown();
    assert_eq!(
        pool.shared_free(),
        pool.frames() - STUCK,
        "after shutdown only the frames queued in ring D are out"
    );
    drop(ports);
    drop(ring_d);
    drop(g);
    assert_eq!(pool.shared_free(), pool.frames(), "frames leaked");
}
