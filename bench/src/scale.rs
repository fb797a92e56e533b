//! `nfv-bench scale` — the forwarding decision with many flows and many
//! rules (issue 17's table): generator → switch → sink in process on one
//! PMD, flows × rules × mask shape, interleaved round by round. Per trial:
//! Mpps, TSC cycles/packet (all, and the switch's share outside the
//! generator and sink), and where the decisions came from: EMC hits,
//! classifier lookups, table misses.
//!
//! Traffic: the generator's UDP flows, 10.0.0.1:1024 → 10.0.0.2:5001 with
//! the source address and port varied (flow f: source port 1024 + f mod
//! 1024, source address + f / 1024). Rules, `rules` in all, of one shape:
//! * `exact`: 5-tuple rules, one per flow for the first `rules - 1`
//!   flows (priority 100), then a catch-all (priority 1): exact-match
//!   rules in one subtable, as a per-flow policy is written.
//! * `prefix`: `rules - 1` rules on `nw_dst` prefixes /16../32 that the
//!   traffic never matches (17 masks, so 17 subtables the classifier
//!   visits), then the catch-all: the ACL-ahead-of-forwarding shape.
//! * `ports`: `rules - 1` rules on `tp_dst` ranges as OVS users write them
//!   (value/mask pairs), none matching, then the catch-all.
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
}

#[derive(Clone, Copy)]
struct Trial {
    mpps: f64,
    cycles: f64,
    switch_cycles: f64,
    emc: f64,
    /// Decisions that probed the EMC at all (it is bypassed while its hit
    /// rate is low).
    emc_probed: f64,
    megaflow: f64,
    classifier: f64,
    miss: f64,
    /// Packets per second (for the cost per change).
    pps: f64,
    /// Flow-table changes made per second, and the median time one took
    /// on the control side (µs).
    changes_per_s: f64,
    change_us: f64,
}

fn rules_for(shape: Shape, n: u32) -> Vec<String> {
    let mut v = Vec::with_capacity(n as usize);
    let extra = n.saturating_sub(1);
    for i in 0..extra {
        v.push(match shape {
            Shape::Exact => {
                let (ip, port) = (0x0a00_0001u32 + i / 1024, 1024 + i % 1024);
                format!(
                    "priority=100,in_port=1,udp,nw_src={},nw_dst=10.0.0.2,tp_src={port},tp_dst=5001,actions=output:2",
                    std::net::Ipv4Addr::from(ip)
                )
            }
            Shape::Prefix => {
                let len = 16 + i % 17;
                let net = (0xc0a8_0000u32 | (i * 2654435761) & 0xffff) & nfv_prefix(len);
                format!(
                    "priority=100,in_port=1,ip,nw_dst={}/{len},actions=output:2",
                    std::net::Ipv4Addr::from(net)
                )
            }
            Shape::Ports => {
                // A range 2^k wide at a multiple of it, kept above the
                // traffic's destination port 5001.
                let k = i % 8;
                let base = 8192 + (i << k) % 40000;
                let base = base & !((1u32 << k) - 1);
                let mask = 0xffffu32 & !((1u32 << k) - 1);
                format!(
                    "priority=100,in_port=1,udp,tp_dst=0x{base:x}/0x{mask:x},actions=output:2"
                )
            }
        });
    }
    v.push("priority=1,in_port=1,actions=output:2".into());
    v
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

fn trial(
    flows: u32,
    megaflows: usize,
    changes: u32,
    rules: &[nfv_flow::FlowSpec],
    a: &ScaleArgs,
) -> Result<Trial, String> {
    let path = crate::host::checkout().join("examples/gen-sink.toml");
    let mut cfg: NodeConfig = nfv_config::load(&path).map_err(|e| e.to_string())?;
    cfg.name = format!("bench-scale-{}", std::process::id());
    cfg.control_socket = None;
    cfg.api = None;
    if let Some(c) = a.core {
        cfg.pmd.cores = vec![c];
    }
    cfg.pmd.pmu = false;
    cfg.pmd.megaflow_entries = megaflows;
    cfg.flows = rules.to_vec();
    for p in &mut cfg.ports {
        if let nfv_ports::PortKind::Generator(g) = &mut p.kind {
            g.flows = flows;
        }
    }
    let node = Node::start(&cfg).map_err(|e| e.to_string())?;
    std::thread::sleep(Duration::from_millis(500));
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (before, after, elapsed, (changed, mut took)) = std::thread::scope(|sc| {
        let churner = (changes > 0).then(|| sc.spawn(|| churn(&node, changes, &stop)));
        let before = node.datapath().pmd_views()[0].clone();
        let t0 = Instant::now();
        std::thread::sleep(Duration::from_secs_f64(a.seconds));
        let after = node.datapath().pmd_views()[0].clone();
        let elapsed = t0.elapsed().as_secs_f64();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let churned = churner.map_or((0, Vec::new()), |h| h.join().unwrap_or_default());
        (before, after, elapsed, churned)
    });
    node.shutdown();
    let d = after.stats.since(&before.stats);
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
        classifier: 100.0 * d.classifier_hits as f64 / looked,
        miss: 100.0 * d.table_misses as f64 / looked,
        pps: d.rx_packets as f64 / elapsed,
        changes_per_s: changed as f64 / elapsed,
        change_us: {
            took.sort_by(|x, y| x.total_cmp(y));
            took.get(took.len() / 2).copied().unwrap_or(f64::NAN)
        },
    })
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

/// One combination: rules of a shape, flows, megaflow entries, changes
/// per second.
struct Combo {
    shape: Shape,
    rules: u32,
    flows: u32,
    megaflows: usize,
    changes: u32,
    specs: Vec<nfv_flow::FlowSpec>,
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
        for (i, c) in combos.iter().enumerate() {
            let t = trial(c.flows, c.megaflows, c.changes, &c.specs, &a)?;
            println!(
                "  round {} {:?} rules {:>5} flows {:>7} megaflows {:>6} changes/s {:>5} ({:>5.0} made, {:>6.1} us each): {:>6.2} Mpps {:>6.1} cyc/pkt {:>6.1} switch  emc {:>5.1} % (probed {:>5.1} %) mf {:>5.1} % cls {:>5.1} % miss {:>4.1} %",
                round + 1,
                c.shape,
                c.rules,
                c.flows,
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
                t.classifier,
                t.miss
            );
            results[i].push(t);
        }
    }
    print_summary(&combos, &results);
    Ok(())
}

/// Every combination of the arguments, shape by shape, rules, flows,
/// megaflows, changes.
fn combos(a: &ScaleArgs) -> Result<Vec<Combo>, String> {
    let mut combos = Vec::new();
    for &shape in &a.shape {
        for &r in &a.rules {
            let specs: Vec<nfv_flow::FlowSpec> = rules_for(shape, r.max(1))
                .iter()
                .map(|t| nfv_flow::parse_flow(t).map_err(|e| format!("{t}: {e}")))
                .collect::<Result<_, _>>()?;
            for &f in &a.flows {
                if !(1..=1_000_000).contains(&f) {
                    return Err(format!("--flows {f}: 1..=1000000"));
                }
                for &m in &a.megaflows {
                    for &c in &a.changes {
                        combos.push(Combo {
                            shape,
                            rules: r.max(1),
                            flows: f,
                            megaflows: m,
                            changes: c,
                            specs: specs.clone(),
                        });
                    }
                }
            }
        }
    }
    Ok(combos)
}

/// The medians of each combination's trials, with the Mpps ratio to the
/// first and, with changes, the PMD cycles each change cost.
fn print_summary(combos: &[Combo], results: &[Vec<Trial>]) {
    println!(
        "\nshape   rules   flows megaflows changes/s     Mpps  cyc/pkt  switch cyc/pkt  EMC %  megaflow %  classifier %  x Mpps of first  PMD cycles per change"
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
    for (i, (c, ts)) in combos.iter().zip(results).enumerate() {
        let m = |g: fn(&Trial) -> f64| median(ts.iter().map(g).collect());
        let mpps = m(|t| t.mpps);
        let base = *first.get_or_insert(mpps);
        // Against the same combination without changes, if it was run.
        let calm = combos.iter().position(|c2| {
            (c2.shape, c2.rules, c2.flows, c2.megaflows) == (c.shape, c.rules, c.flows, c.megaflows)
                && c2.changes == 0
        });
        let per_change = match calm {
            Some(j) if c.changes > 0 => {
                let (sw, pps) = medians[i];
                let extra = (sw - medians[j].0) * pps;
                format!("{:.0}", extra / m(|t| t.changes_per_s))
            }
            _ => "-".into(),
        };
        println!(
            "{:<7} {:>5} {:>7} {:>9} {:>9}  {:>7.2} {:>8.1} {:>15.1} {:>6.1} {:>10.1} {:>13.1}  {:>15.2}  {:>21}",
            format!("{:?}", c.shape).to_lowercase(),
            c.rules,
            c.flows,
            c.megaflows,
            c.changes,
            mpps,
            m(|t| t.cycles),
            m(|t| t.switch_cycles),
            m(|t| t.emc),
            m(|t| t.megaflow),
            m(|t| t.classifier),
            mpps / base,
            per_change
        );
    }
}
