//! `nfv-bench scale` — the forwarding decision with many flows and many
//! rules (issue 17's table): generator → switch → sink in process on one
//! PMD, flows × rules × mask shape, interleaved round by round. Per trial:
//! Mpps, TSC cycles/packet (all, and the switch's share outside the
//! generator and sink), and where the decisions came from: EMC hits,
//! classifier lookups, table misses.
//!
//! Traffic: the generator's UDP flows, 10.0.0.1:1024 → 10.0.0.2:5001 with
//! the source address and port varied (flow f: source port 1024 + f mod
//! 1024, source address + f / 1024); with `--family ipv6`, the same over
//! IPv6, fd00::1:1024 → [fd00::2]:5001 (the generator's `family = "ipv6"`,
//! its UDP checksum patched per flow). `--order round-robin` (default) sends
//! flows 0, 1, 2, …, so 1,024 consecutive frames share a source address
//! and, behind rules that part traffic by address, a megaflow: a run the
//! decision answers without a probe (the "runs %" column); `--order
//! scattered` sends each frame ~0.618 × flows flows after the last, so
//! consecutive frames come from other addresses, as many clients' traffic
//! arrives interleaved. Give both to see what the runs are worth. Rules,
//! `rules` in all, of one
//! shape, written for the family's traffic:
//! * `exact`: 5-tuple rules (`udp` / `udp6`), one per flow for the first
//!   `rules - 1` flows (priority 100), then a catch-all (priority 1):
//!   exact-match rules in one subtable, as a per-flow policy is written.
//! * `prefix`: `rules - 1` rules on `nw_dst` prefixes /16../32 (IPv6:
//!   `ipv6_dst` /112../128) that the traffic never matches (17 masks, so
//!   17 subtables the classifier visits), then the catch-all: the
//!   ACL-ahead-of-forwarding shape.
//! * `ports`: `rules - 1` rules on `tp_dst` ranges as OVS users write them
//!   (value/mask pairs), none matching, then the catch-all.
//! * `pipeline`: `exact`'s decision over 3 tables: table 0 matches
//!   `in_port` and goes on with `write_metadata` and `goto_table:1`;
//!   table 1 holds the `rules - 1` 5-tuple rules (without `in_port`) and
//!   the catch-all, all `goto_table:2`; table 2 outputs. `rules + 2` rules
//!   in all. The metadata is written, not matched: a match on it would put
//!   `metadata` into every megaflow's mask, and a mask past the key's base
//!   words makes IPv4 megaflows full-key ones (IPv6's cost). Against
//!   `exact` with the same family, rules, flows, megaflows and changes,
//!   the summary gives the ratio of 3 tables to 1 ("x 1 table").
//!
//! * `conntrack`: a stateful firewall over the same traffic (`rules`
//!   ignored): table 0 sends every IP packet through `ct(zone=1,table=1)`;
//!   table 1 outputs `+trk+est` packets, commits and outputs `+trk+new`
//!   ones, drops the rest. Each flow is a connection (committed by its
//!   first packet; `+est` from its second, as OVS's userspace datapath
//!   answers), so `flows` is the number of connections tracked. The
//!   trial's window opens once all of them are committed (a warm-up line
//!   says how long that took), so it measures established traffic. Against
//!   `exact` with the same family, rules, flows, megaflows, changes and
//!   order, the summary gives the ratio to that stateless table ("x
//!   stateless"; `--rules 2` makes it one 5-tuple rule and a catch-all,
//!   looked up per packet like the firewall).
//!
//! Churn (`--changes R`, A/B'd like `--megaflows`): while traffic runs, a
//! control thread changes the flow table R times a second — adding, then
//! deleting, a /32 drop rule the traffic never matches — as a controller
//! reprogramming ACLs would. Each change is a new table generation, which
//! empties every PMD's EMC and megaflow cache; the trial reports the
//! changes made, the control-side time per change, and (in the summary)
//! the PMD cycles each change cost: the extra switch cycles per packet
//! against the same combination without changes, times packets, over
//! changes.
//!
//! PMDs (`--pmds K`, A/B'd like `--megaflows`): K PMD threads on the last
//! K CPUs this process may use (from `--core` up when given), each polling
//! a generator of its own (rx queues placed round-robin: generator i on
//! PMD i), all sending to the one sink. The flows are split among the
//! generators, each on source addresses of its own, so a trial carries
//! `flows` flows (connections) in all whatever K, as RSS would spread one
//! node's clients over its PMDs; every rule that names the first
//! generator's port is repeated for the others. Each PMD's connection
//! table is sized for all `flows` (per-PMD tables: an operator sizes
//! `[conntrack] capacity` for the node's connections, not knowing the
//! split). Figures are the PMDs' sums; the summary's "x 1 PMD" is the rate
//! against the same combination on one PMD: the scaling figure, which
//! needs a core for each PMD besides this process's other threads.
//!
//! Ratios are against the first combination given (by default 1 flow,
//! 1 rule). A figure for the lead, not a test.

use nfv_config::NodeConfig;
use nfv_control::Node;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Shape {
    Exact,
    Prefix,
    Ports,
    Pipeline,
    Conntrack,
}

/// The order the generator sends its flows in
/// (`nfv_ports::config::FlowOrder`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Order {
    /// Flow 0, 1, 2, …: 1,024 consecutive frames share a source address.
    RoundRobin,
    /// Consecutive frames ~0.618 x flows apart: other source addresses.
    Scattered,
}

impl Order {
    fn label(self) -> &'static str {
        match self {
            Order::RoundRobin => "round-robin",
            Order::Scattered => "scattered",
        }
    }
}

/// The IP version of the generator's traffic (and of the rules).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Family {
    Ipv4,
    Ipv6,
}

#[derive(clap::Args)]
pub struct ScaleArgs {
    /// Distinct flows the generator cycles through (1..=1000000).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1,1000,10000,100000,1000000"
    )]
    flows: Vec<u32>,
    /// Rules installed (the last one the catch-all).
    #[arg(long, value_delimiter = ',', default_value = "1,1000,10000")]
    rules: Vec<u32>,
    /// Mask shapes of the rules.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "exact")]
    shape: Vec<Shape>,
    /// IP version of the traffic and the rules.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "ipv4")]
    family: Vec<Family>,
    /// Interleaved rounds.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Measured seconds per trial (after 0.5 s warm-up).
    #[arg(long, default_value_t = 1.5)]
    seconds: f64,
    /// CPU of the PMD (default: the last CPU).
    #[arg(long)]
    core: Option<usize>,
    /// Megaflow cache entries per PMD; several values are A/B'd within
    /// each round (0 = off).
    #[arg(long, value_delimiter = ',', default_value = "65536")]
    megaflows: Vec<usize>,
    /// Flow-table changes per second during the trial (each a rule added
    /// or deleted); several values are A/B'd within each round.
    #[arg(long, value_delimiter = ',', default_value = "0")]
    changes: Vec<u32>,
    /// The generator's flow order; several values are A/B'd within each
    /// round. Round-robin sends runs of one source address (which share a
    /// megaflow), scattered interleaves them.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "round-robin")]
    order: Vec<Order>,
    /// Exact-match cache entries per PMD (0 = off; default: the
    /// configuration's). One value: A/B it by running the command twice.
    #[arg(long)]
    emc_entries: Option<usize>,
    /// PMD threads, each with a generator of its own (the flows split
    /// among them); several values are A/B'd within each round.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pmds: Vec<usize>,
}

#[derive(Clone)]
struct Trial {
    mpps: f64,
    cycles: f64,
    switch_cycles: f64,
    emc: f64,
    /// Decisions that probed the EMC at all (it is bypassed while its hit
    /// rate is low).
    emc_probed: f64,
    megaflow: f64,
    /// Megaflow hits taken from an earlier packet of the batch in the same
    /// megaflow (no probe), as a share of decisions.
    runs: f64,
    classifier: f64,
    miss: f64,
    /// Packets per second (for the cost per change).
    pps: f64,
    /// Flow-table changes made per second, and the median time one took
    /// on the control side (µs).
    changes_per_s: f64,
    change_us: f64,
    /// Each PMD's busy share, "100/98 %".
    busy: String,
}

/// The generator's IPv6 addresses (its defaults; examples/gen-sink.toml
/// sets only the IPv4 ones).
fn ipv6_addrs() -> (u128, std::net::Ipv6Addr) {
    let g = nfv_ports::config::GeneratorConfig::default();
    (u128::from(g.src_ip6), g.dst_ip6)
}

/// Flow `i`'s 5-tuple match (source address + i / 1024, source port
/// 1024 + i % 1024), without `in_port`.
fn five_tuple(family: Family, i: u32) -> String {
    let port = 1024 + i % 1024;
    match family {
        Family::Ipv4 => format!(
            "udp,nw_src={},nw_dst=10.0.0.2,tp_src={port},tp_dst=5001",
            std::net::Ipv4Addr::from(0x0a00_0001u32 + i / 1024)
        ),
        Family::Ipv6 => {
            let (src, dst) = ipv6_addrs();
            format!(
                "udp6,ipv6_src={},ipv6_dst={dst},tp_src={port},tp_dst=5001",
                std::net::Ipv6Addr::from(src + u128::from(i / 1024))
            )
        }
    }
}

fn rules_for(shape: Shape, family: Family, n: u32) -> Vec<String> {
    let mut v = Vec::with_capacity(n as usize + 2);
    let extra = n.saturating_sub(1);
    if shape == Shape::Conntrack {
        let ip = match family {
            Family::Ipv4 => "ip",
            Family::Ipv6 => "ipv6",
        };
        return vec![
            format!("table=0,priority=100,in_port=1,{ip},actions=ct(zone=1,table=1)"),
            format!("table=1,priority=100,ct_state=+trk+est,{ip},actions=output:2"),
            format!(
                "table=1,priority=90,ct_state=+trk+new,{ip},actions=ct(commit,zone=1),output:2"
            ),
            "table=1,priority=1,actions=drop".into(),
        ];
    }
    if shape == Shape::Pipeline {
        v.push("table=0,priority=1,in_port=1,actions=write_metadata:0x1/0xff,goto_table:1".into());
        for i in 0..extra {
            v.push(format!(
                "table=1,priority=100,{},actions=goto_table:2",
                five_tuple(family, i)
            ));
        }
        v.push("table=1,priority=1,actions=goto_table:2".into());
        v.push("table=2,priority=1,actions=output:2".into());
        return v;
    }
    for i in 0..extra {
        v.push(match (shape, family) {
            (Shape::Exact, _) => format!(
                "priority=100,in_port=1,{},actions=output:2",
                five_tuple(family, i)
            ),
            (Shape::Prefix, Family::Ipv6) => {
                // The IPv4 shape's nets, under 2001:db8::/112.
                let len = 112 + i % 17;
                let low = (i.wrapping_mul(2654435761) & 0xffff) as u128;
                let net =
                    (0x2001_0db8u128 << 96 | low) & !(u128::MAX.checked_shr(len).unwrap_or(0));
                format!(
                    "priority=100,in_port=1,ipv6,ipv6_dst={}/{len},actions=output:2",
                    std::net::Ipv6Addr::from(net)
                )
            }
            (Shape::Prefix, Family::Ipv4) => {
                let len = 16 + i % 17;
                let net = (0xc0a8_0000u32 | i.wrapping_mul(2654435761) & 0xffff) & nfv_prefix(len);
                format!(
                    "priority=100,in_port=1,ip,nw_dst={}/{len},actions=output:2",
                    std::net::Ipv4Addr::from(net)
                )
            }
            (Shape::Ports, _) => {
                // A range 2^k wide at a multiple of it, kept above the
                // traffic's destination port 5001.
                let k = i % 8;
                let base = 8192 + (i << k) % 40000;
                let base = base & !((1u32 << k) - 1);
                let mask = 0xffffu32 & !((1u32 << k) - 1);
                let udp = match family {
                    Family::Ipv4 => "udp",
                    Family::Ipv6 => "udp6",
                };
                format!(
                    "priority=100,in_port=1,{udp},tp_dst=0x{base:x}/0x{mask:x},actions=output:2"
                )
            }
            (Shape::Pipeline | Shape::Conntrack, _) => unreachable!("returned above"),
        });
    }
    v.push("priority=1,in_port=1,actions=output:2".into());
    v
}

/// The port numbers of `--pmds k`'s generators: the configuration's
/// generator (port 1), then 3, 4, … (port 2 is the sink).
fn generator_ports(k: usize) -> Vec<u16> {
    std::iter::once(1)
        .chain((3..).take(k.saturating_sub(1)))
        .collect()
}

/// `rules` with every rule that names the first generator's port
/// (`in_port=1,`) repeated for each other generator, in order.
fn for_generators(rules: Vec<String>, generators: &[u16]) -> Vec<String> {
    let mut out = Vec::with_capacity(rules.len() * generators.len());
    for r in rules {
        let others: Vec<String> = if r.contains("in_port=1,") {
            generators[1..]
                .iter()
                .map(|g| r.replace("in_port=1,", &format!("in_port={g},")))
                .collect()
        } else {
            Vec::new()
        };
        out.push(r);
        out.extend(others);
    }
    out
}

/// The PMDs' CPUs: `k` of those this process may use, from `core` up
/// when given, else the last `k`.
fn pmd_cores(allowed: &[usize], core: Option<usize>, k: usize) -> Result<Vec<usize>, String> {
    let pick: Vec<usize> = match core {
        Some(c) => allowed
            .iter()
            .copied()
            .filter(|&x| x >= c)
            .take(k)
            .collect(),
        None => allowed[allowed.len().saturating_sub(k)..].to_vec(),
    };
    if k == 0 || pick.len() < k || core.is_some_and(|c| pick.first() != Some(&c)) {
        return Err(format!(
            "--pmds {k}{}: this process may run on CPUs {allowed:?}",
            core.map(|c| format!(" from --core {c}"))
                .unwrap_or_default()
        ));
    }
    Ok(pick)
}

/// Generator `i` of `k` sharing `flows`: its flow count and how far its
/// source addresses are moved from the first generator's (each generator
/// covers at most `ceil(flows / k) / 1024` addresses, rounded up, so the
/// generators' flows are disjoint).
fn generator_share(flows: u32, k: usize, i: usize) -> (u32, u32) {
    let k32 = k as u32;
    let mine = flows / k32 + u32::from((i as u32) < flows % k32);
    let most = flows.div_ceil(k32);
    (mine, i as u32 * most.div_ceil(1024))
}

fn nfv_prefix(len: u32) -> u32 {
    u32::MAX.checked_shl(32 - len).unwrap_or(0)
}

/// Changes the flow table `rate` times a second until `stop`: a rule
/// added, then deleted (never matched by the traffic). Returns how many
/// changes were made and each one's duration in µs.
fn churn(node: &Node, rate: u32, stop: &std::sync::atomic::AtomicBool) -> (u64, Vec<f64>) {
    use std::sync::atomic::Ordering::Relaxed;
    let rule = "priority=50,ip,nw_dst=203.0.113.7/32,actions=drop".to_string();
    let period = Duration::from_secs_f64(1.0 / f64::from(rate));
    let mut next = Instant::now();
    let (mut done, mut took) = (0u64, Vec::new());
    while !stop.load(Relaxed) {
        let t = Instant::now();
        let ok = if done % 2 == 0 {
            node.add_flows(std::slice::from_ref(&rule)).is_ok()
        } else {
            node.del_flows("ip,nw_dst=203.0.113.7/32").is_ok()
        };
        if ok {
            took.push(t.elapsed().as_secs_f64() * 1e6);
            done += 1;
        }
        next += period;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else {
            next = now;
        }
    }
    (done, took)
}

fn trial(combo: &Combo, a: &ScaleArgs) -> Result<Trial, String> {
    let c = &combo.settings;
    let (flows, megaflows, changes) = (c.flows, c.megaflows, c.changes);
    let path = crate::host::checkout().join("examples/gen-sink.toml");
    // The file's `cores` are replaced below by CPUs of this process's
    // mask: read it as if every CPU were allowed (`load` refuses CPU 1
    // under `taskset -c 3,9`).
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut cfg: NodeConfig =
        nfv_config::parse_str(&text, &path, 4096usize).map_err(|e| e.to_string())?;
    cfg.name = format!("bench-scale-{}", std::process::id());
    cfg.control_socket = None;
    cfg.api = None;
    let allowed = nfv_config::CpuSet::of_this_process();
    cfg.pmd.cores = pmd_cores(allowed.ids(), a.core, c.pmds)?;
    cfg.pmd.rxq_assign = nfv_sched::Algorithm::RoundRobin;
    cfg.pmd.pmu = false;
    cfg.pmd.megaflow_entries = megaflows;
    if let Some(n) = a.emc_entries {
        cfg.pmd.emc_entries = n;
    }
    cfg.flows = combo.specs.clone();
    // Every flow a connection, with room to spare: the tracker's index is
    // laid out for its capacity, so a table sized far above its load
    // spreads the connections over more cache lines than they need.
    cfg.conntrack.capacity = (flows + flows / 4).max(1024);
    let generators = generator_ports(c.pmds);
    let first = cfg
        .ports
        .iter()
        .find(|p| p.id == generators[0])
        .cloned()
        .ok_or("examples/gen-sink.toml: no port 1")?;
    for (i, &id) in generators.iter().enumerate().skip(1) {
        cfg.ports.push(nfv_ports::config::PortConfig {
            name: format!("gen{i}"),
            id,
            ..first.clone()
        });
    }
    let mut i = 0;
    for p in &mut cfg.ports {
        if let nfv_ports::PortKind::Generator(g) = &mut p.kind {
            let (share, moved) = generator_share(flows, c.pmds, i);
            i += 1;
            g.flows = share;
            g.src_ip = std::net::Ipv4Addr::from(u32::from(g.src_ip) + moved);
            g.src_ip6 = std::net::Ipv6Addr::from(u128::from(g.src_ip6) + u128::from(moved));
            g.flow_order = match c.order {
                Order::RoundRobin => nfv_ports::config::FlowOrder::RoundRobin,
                Order::Scattered => nfv_ports::config::FlowOrder::Scattered,
            };
            g.family = match c.family {
                Family::Ipv4 => nfv_ports::config::IpFamily::Ipv4,
                Family::Ipv6 => nfv_ports::config::IpFamily::Ipv6,
            };
        }
    }
    let node = Node::start(&cfg).map_err(|e| e.to_string())?;
    std::thread::sleep(Duration::from_millis(500));
    if c.shape == Shape::Conntrack {
        warm_connections(&node, flows)?;
    }
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (before, after, elapsed, (changed, mut took)) = std::thread::scope(|sc| {
        let churner = (changes > 0).then(|| sc.spawn(|| churn(&node, changes, &stop)));
        let before = node.datapath().pmd_views();
        let t0 = Instant::now();
        std::thread::sleep(Duration::from_secs_f64(a.seconds));
        let after = node.datapath().pmd_views();
        let elapsed = t0.elapsed().as_secs_f64();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let churned = churner.map_or((0, Vec::new()), |h| h.join().unwrap_or_default());
        (before, after, elapsed, churned)
    });
    node.shutdown();
    let each: Vec<nfv_datapath::stats::PmdSnapshot> = after
        .iter()
        .zip(&before)
        .map(|(a, b)| a.stats.since(&b.stats))
        .collect();
    let d = each
        .iter()
        .fold(nfv_datapath::stats::PmdSnapshot::default(), |t, s| {
            t.plus(s)
        });
    let busy: Vec<String> = each
        .iter()
        .map(|s| format!("{:.0}", s.busy_percent()))
        .collect();
    let looked =
        (d.emc_hits + d.megaflow_hits + d.port_wide_hits + d.classifier_hits + d.table_misses)
            .max(1) as f64;
    Ok(Trial {
        mpps: d.rx_packets as f64 / elapsed / 1e6,
        cycles: d.cycles_per_packet().unwrap_or(f64::NAN),
        switch_cycles: d.switch_cycles_per_packet().unwrap_or(f64::NAN),
        emc: 100.0 * d.emc_hits as f64 / looked,
        emc_probed: 100.0 * d.emc_probes as f64 / looked,
        megaflow: 100.0 * d.megaflow_hits as f64 / looked,
        runs: 100.0 * d.megaflow_runs as f64 / looked,
        classifier: 100.0 * d.classifier_hits as f64 / looked,
        miss: 100.0 * d.table_misses as f64 / looked,
        pps: d.rx_packets as f64 / elapsed,
        changes_per_s: changed as f64 / elapsed,
        change_us: {
            took.sort_by(|x, y| x.total_cmp(y));
            took.get(took.len() / 2).copied().unwrap_or(f64::NAN)
        },
        busy: format!("{} %", busy.join("/")),
    })
}

/// Waits until every flow's connection is committed, so that a trial
/// measures established traffic (the figure) rather than a mix
/// weighted by how long the first pass over the flows took: at 1M
/// connections and ~1.5 Mpps a one-second trial would be mostly commits.
/// The setup rate is printed on the way (`process_bench` measures the
/// tracker's alone).
fn warm_connections(node: &Node, flows: u32) -> Result<(), String> {
    let all = || {
        node.datapath()
            .pmd_views()
            .iter()
            .fold(nfv_datapath::stats::PmdSnapshot::default(), |t, v| {
                t.plus(&v.stats)
            })
    };
    let committed = || all().ct_committed;
    let (t0, first) = (Instant::now(), committed());
    let limit = Duration::from_secs(60);
    loop {
        let n = all().ct_connections;
        if n >= u64::from(flows) {
            let secs = t0.elapsed().as_secs_f64();
            println!(
                "    warm-up: {n} connections tracked after {secs:.1} s ({:.2} M commits/s while the PMDs also forwarded)",
                (committed() - first) as f64 / secs.max(1e-3) / 1e6
            );
            return Ok(());
        }
        if t0.elapsed() > limit {
            return Err(format!(
                "warm-up: {n} of {flows} connections tracked after {} s",
                limit.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        return f64::NAN;
    }
    if v.len() % 2 == 1 {
        v[v.len() / 2]
    } else {
        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
    }
}

/// One combination: rules of a shape for a family's traffic, flows,
/// megaflow entries, changes per second.
struct Combo {
    settings: Settings,
    specs: Vec<nfv_flow::FlowSpec>,
}

/// A combination's settings (its rules follow from them): what the
/// summary compares to find a combination's counterparts.
#[derive(Clone, Copy, PartialEq)]
struct Settings {
    shape: Shape,
    /// PMD threads, a generator each.
    pmds: usize,
    family: Family,
    rules: u32,
    flows: u32,
    megaflows: usize,
    changes: u32,
    order: Order,
}

pub fn scale(a: ScaleArgs) -> Result<(), String> {
    let combos = combos(&a)?;
    println!(
        "nfv-bench scale: 64 B, {} combination(s) x {} interleaved round(s) x {} s, TSC {:.3} GHz",
        combos.len(),
        a.rounds,
        a.seconds,
        nfv_tsc::hz() as f64 / 1e9
    );
    let mut results: Vec<Vec<Trial>> = vec![Vec::new(); combos.len()];
    for round in 0..a.rounds {
        for (i, combo) in combos.iter().enumerate() {
            let t = trial(combo, &a)?;
            let c = &combo.settings;
            println!(
                "  round {} {:?} pmds {} {:?} rules {:>5} flows {:>7} {:?} megaflows {:>6} changes/s {:>5} ({:>5.0} made, {:>6.1} us each): {:>6.2} Mpps {:>6.1} cyc/pkt {:>6.1} switch  emc {:>5.1} % (probed {:>5.1} %) mf {:>5.1} % (runs {:>5.1} %) cls {:>5.1} % miss {:>4.1} %  busy {}",
                round + 1,
                c.shape,
                c.pmds,
                c.family,
                c.rules,
                c.flows,
                c.order,
                c.megaflows,
                c.changes,
                t.changes_per_s,
                t.change_us,
                t.mpps,
                t.cycles,
                t.switch_cycles,
                t.emc,
                t.emc_probed,
                t.megaflow,
                t.runs,
                t.classifier,
                t.miss,
                t.busy
            );
            results[i].push(t);
        }
    }
    print_summary(&combos, &results);
    Ok(())
}

/// The rules `rules_for` writes for `pmds` generators, parsed.
fn specs_for(
    shape: Shape,
    family: Family,
    n: u32,
    pmds: usize,
) -> Result<Vec<nfv_flow::FlowSpec>, String> {
    for_generators(rules_for(shape, family, n), &generator_ports(pmds))
        .iter()
        .map(|t| nfv_flow::parse_flow(t).map_err(|e| format!("{t}: {e}")))
        .collect()
}

/// Every combination of the arguments, family by family, shape by shape,
/// rules, flows, megaflows, changes.
fn combos(a: &ScaleArgs) -> Result<Vec<Combo>, String> {
    let mut combos = Vec::new();
    for &family in &a.family {
        for &shape in &a.shape {
            for &r in &a.rules {
                for &f in &a.flows {
                    if !(1..=1_000_000).contains(&f) {
                        return Err(format!("--flows {f}: 1..=1000000"));
                    }
                    let rest = a.megaflows.iter().flat_map(|&m| {
                        let orders = a.order.iter().map(move |&o| (m, o));
                        a.changes
                            .iter()
                            .flat_map(move |&c| orders.clone().map(move |(m, o)| (m, c, o)))
                    });
                    for (m, c, order) in rest {
                        for &pmds in &a.pmds {
                            if pmds == 0 || pmds > f as usize {
                                return Err(format!(
                                    "--pmds {pmds}: at least 1, and at most --flows ({f})"
                                ));
                            }
                            combos.push(Combo {
                                settings: Settings {
                                    shape,
                                    pmds,
                                    family,
                                    rules: r.max(1),
                                    flows: f,
                                    megaflows: m,
                                    changes: c,
                                    order,
                                },
                                specs: specs_for(shape, family, r.max(1), pmds)?,
                            });
                        }
                    }
                }
            }
        }
    }
    Ok(combos)
}

/// The medians of each combination's trials, with the Mpps ratio to the
/// first, a pipeline's to the same combination in one table (`exact`),
/// and, with changes, the PMD cycles each change cost.
fn print_summary(combos: &[Combo], results: &[Vec<Trial>]) {
    println!(
        "\nshape    PMDs family rules   flows order       megaflows changes/s     Mpps  cyc/pkt  switch cyc/pkt  EMC %  megaflow % (runs %)  classifier %  x Mpps of first  x 1 table (pipeline) / x stateless (conntrack)  PMD cycles per change  x 1 PMD"
    );
    let mut first = None;
    let medians: Vec<(f64, f64)> = results
        .iter()
        .map(|ts| {
            (
                median(ts.iter().map(|t| t.switch_cycles).collect()),
                median(ts.iter().map(|t| t.pps).collect()),
            )
        })
        .collect();
    for (i, (combo, ts)) in combos.iter().zip(results).enumerate() {
        let c = &combo.settings;
        let m = |g: fn(&Trial) -> f64| median(ts.iter().map(g).collect());
        let mpps = m(|t| t.mpps);
        let base = *first.get_or_insert(mpps);
        // The combination run with one setting changed, if it was run:
        // without changes, on one PMD, in one table (`exact`, for a
        // pipeline's or the tracker's ratio).
        let run_with = |changed: Settings| combos.iter().position(|c2| c2.settings == changed);
        let calm = run_with(Settings { changes: 0, ..*c });
        let one_pmd = run_with(Settings { pmds: 1, ..*c });
        let one_table = run_with(Settings {
            shape: Shape::Exact,
            ..*c
        });
        let ratio_to = |j: usize| {
            format!(
                "{:.2}",
                mpps / median(results[j].iter().map(|t| t.mpps).collect())
            )
        };
        let vs_one_table = match one_table {
            Some(j) if matches!(c.shape, Shape::Pipeline | Shape::Conntrack) => ratio_to(j),
            _ => "-".into(),
        };
        let per_change = match calm {
            Some(j) if c.changes > 0 => {
                let (sw, pps) = medians[i];
                let extra = (sw - medians[j].0) * pps;
                format!("{:.0}", extra / m(|t| t.changes_per_s))
            }
            _ => "-".into(),
        };
        let vs_one_pmd = match one_pmd {
            Some(j) if c.pmds > 1 => ratio_to(j),
            _ => "-".into(),
        };
        println!(
            "{:<8} {:>4} {:<6} {:>5} {:>7} {:<11} {:>9} {:>9}  {:>7.2} {:>8.1} {:>15.1} {:>6.1} {:>10.1} {:>9.1}  {:>13.1}  {:>15.2}  {:>9}  {:>21}  {:>7}",
            format!("{:?}", c.shape).to_lowercase(),
            c.pmds,
            format!("{:?}", c.family).to_lowercase(),
            c.rules,
            c.flows,
            c.order.label(),
            c.megaflows,
            c.changes,
            mpps,
            m(|t| t.cycles),
            m(|t| t.switch_cycles),
            m(|t| t.emc),
            m(|t| t.megaflow),
            m(|t| t.runs),
            m(|t| t.classifier),
            mpps / base,
            vs_one_table,
            per_change,
            vs_one_pmd
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nfv_flow::{Action, Classifier, Rule};
    use nfv_ports::config::{GeneratorConfig, IpFamily};
    use nfv_ports::generator::{stamp_flow, stamp_flow6, template};
    use std::sync::Arc;

    fn classifier(specs: Vec<nfv_flow::FlowSpec>) -> Classifier {
        let mut c = Classifier::new();
        for (i, s) in specs.into_iter().enumerate() {
            c.insert(Arc::new(Rule::new(s, i as u64)));
        }
        c
    }

    /// Flow `f` of examples/gen-sink.toml's generator (the defaults) in
    /// `family`.
    fn frame(family: Family, f: u32) -> Vec<u8> {
        let g = GeneratorConfig {
            flows: 1_000_000,
            family: match family {
                Family::Ipv4 => IpFamily::Ipv4,
                Family::Ipv6 => IpFamily::Ipv6,
            },
            ..Default::default()
        };
        let t = template(&g);
        let mut d = t.clone();
        match family {
            Family::Ipv4 => stamp_flow(&mut d, &t, &g, f),
            Family::Ipv6 => stamp_flow6(&mut d, &t, &g, f),
        }
        d
    }

    /// The 5-tuple rules match the generator's flows one for one, in one
    /// table (`exact`) and in the pipeline's table 1, and the rest take the
    /// catch-all; the pipeline's decision is `exact`'s.
    #[test]
    fn five_tuple_rules_match_the_generators_flows() {
        let n = 3000;
        for family in [Family::Ipv4, Family::Ipv6] {
            let exact = classifier(specs_for(Shape::Exact, family, n, 1).unwrap());
            let pipeline = classifier(specs_for(Shape::Pipeline, family, n, 1).unwrap());
            for f in [0, 1, 1023, 1024, 2047, 2998, 2999, 3000, 99_999] {
                let k = nfv_flow::extract(1, &frame(family, f));
                let want = if f < n - 1 { 100 } else { 1 };
                let r = exact.lookup(&k).expect("exact: a rule");
                assert_eq!(r.spec.priority, want, "{family:?} exact flow {f}");
                assert_eq!(r.spec.actions, vec![Action::Output(2)]);
                let found = pipeline.lookup_with_mask(&k);
                let first = found.rule.expect("pipeline: a table-0 rule").clone();
                let res = nfv_flow::pipeline::resolve(&pipeline, &k, &first, found.mask);
                let stages: Vec<(u8, Option<u16>)> = res
                    .stages
                    .iter()
                    .map(|s| (s.table, s.rule.as_ref().map(|r| r.spec.priority)))
                    .collect();
                assert_eq!(
                    stages,
                    vec![(0, Some(1)), (1, Some(want)), (2, Some(1))],
                    "{family:?} pipeline flow {f}"
                );
                assert_eq!(res.actions, vec![Action::Output(2)]);
            }
        }
    }

    /// Every shape's rules parse in both families, `rules` of them (the
    /// pipeline two more), and none of the ACL shapes' rules matches the
    /// traffic.
    #[test]
    fn every_shape_parses_in_both_families() {
        for family in [Family::Ipv4, Family::Ipv6] {
            for shape in [
                Shape::Exact,
                Shape::Prefix,
                Shape::Ports,
                Shape::Pipeline,
                Shape::Conntrack,
            ] {
                for n in [1, 2, 1000] {
                    let specs = specs_for(shape, family, n, 1).unwrap();
                    let want = match shape {
                        Shape::Pipeline => n + 2,
                        Shape::Conntrack => 4,
                        _ => n,
                    };
                    assert_eq!(specs.len() as u32, want, "{shape:?} {family:?} {n}");
                    if matches!(shape, Shape::Prefix | Shape::Ports) {
                        let c = classifier(specs);
                        for f in [0, 1, 5000] {
                            let k = nfv_flow::extract(1, &frame(family, f));
                            assert_eq!(c.lookup(&k).unwrap().spec.priority, 1);
                        }
                    }
                }
            }
        }
    }

    /// `--pmds k`: the generators' flows are `flows` in all and disjoint
    /// (no 5-tuple twice), every generator port has the rules the first
    /// one has (its traffic decided alike), and the PMDs' CPUs are taken
    /// from those this process may use.
    #[test]
    fn several_generators_split_the_flows_and_share_the_rules() {
        for (flows, k) in [(1, 1), (3000, 2), (3001, 3), (10_000, 4), (2048, 2)] {
            let mut seen = std::collections::HashSet::new();
            let mut total = 0;
            for i in 0..k {
                let (share, moved) = generator_share(flows, k, i);
                total += share;
                let g = GeneratorConfig {
                    flows: share,
                    src_ip: std::net::Ipv4Addr::from(0x0a00_0001 + moved),
                    ..Default::default()
                };
                let t = template(&g);
                for f in 0..share {
                    let mut d = t.clone();
                    stamp_flow(&mut d, &t, &g, f);
                    let key = nfv_flow::extract(1, &d);
                    assert!(
                        seen.insert(key),
                        "flows {flows} k {k}: generator {i} flow {f} twice"
                    );
                }
            }
            assert_eq!(total, flows, "flows {flows} k {k}");
        }
        let ports = generator_ports(3);
        assert_eq!(ports, vec![1, 3, 4]);
        for family in [Family::Ipv4, Family::Ipv6] {
            let one = specs_for(Shape::Exact, family, 2, 1).unwrap();
            let three = classifier(specs_for(Shape::Exact, family, 2, 3).unwrap());
            assert_eq!(three.len(), 3 * one.len(), "{family:?}");
            for &p in &ports {
                let k = nfv_flow::extract(p, &frame(family, 5000));
                let r = three.lookup(&k).expect("a rule for every generator");
                assert_eq!(
                    r.spec.actions,
                    vec![Action::Output(2)],
                    "{family:?} port {p}"
                );
            }
            let ct = specs_for(Shape::Conntrack, family, 2, 3).unwrap();
            assert_eq!(ct.len(), 4 + 2, "{family:?}: table 0's rule per generator");
        }
        let allowed = [0, 1, 2, 3];
        for (core, k, want) in [
            (None, 1, Some(vec![3])),
            (None, 2, Some(vec![2, 3])),
            (Some(1), 2, Some(vec![1, 2])),
            (Some(3), 2, None),
            (None, 5, None),
            (Some(5), 1, None),
            (None, 0, None),
        ] {
            assert_eq!(pmd_cores(&allowed, core, k).ok(), want, "{core:?} {k}");
        }
    }
}
