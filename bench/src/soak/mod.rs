//! `nfv-bench soak --minutes N`: a running nfvswitch with traffic through
//! vhost-user VNFs (built-in `nfvswitch vnf` processes and, when
//! installed, DPDK testpmd) while a seeded random schedule SIGKILLs and
//! restarts VNFs, stops and restarts them cleanly (each new session sends
//! a new memory table), adds and removes ports through the control
//! socket and churns flow rules. Then every disruption is undone and the
//! switch process is checked: traffic recovered on every chain, open fds
//! and mappings as before, RSS without an upward trend after the warm-up,
//! the packet pool back to full once traffic stops, no panic in any log,
//! the flow table back to its rules, a clean exit. Exit status non-zero
//! when a check fails. Not a CI test: it runs for minutes.
//!
//! With `--attacks`, a hostile tenant then grows beside the VNFs, one
//! attack at a time between quiet phases ([`attacks`]), before the same
//! final checks.
//!
//! The topology is in [`node`]; the disruptions in [`events`].

mod attacks;
mod events;
mod node;
mod peers;
mod procfs;
mod schedule;
mod verdict;

use crate::{host, proc, report, scenario};
use events::Soak;
use node::Switch;
use peers::Peer;
use procfs::Resources;
use std::path::Path;
use std::time::{Duration, Instant};
use verdict::Check;

#[derive(clap::Args, Clone, Debug)]
pub struct SoakArgs {
    /// Minutes of disruption before the checks.
    #[arg(long, default_value_t = 30.0)]
    pub minutes: f64,
    /// Seed of the schedule (default: from the clock; printed, so a run
    /// can be repeated).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Mean pause between disruptions, seconds.
    #[arg(long, default_value_t = 3.0)]
    pub every: f64,
    /// Packets per second of each long-lived generator.
    #[arg(long, default_value_t = 20_000)]
    pub rate_pps: u64,
    /// Seconds between resource samples of the switch process.
    #[arg(long, default_value_t = 60.0)]
    pub sample_every: f64,
    /// CPU of the switch's PMD (default: the last CPU).
    #[arg(long)]
    pub pmd_cpu: Option<usize>,
    /// CPU of testpmd's forwarding lcore.
    #[arg(long, default_value_t = 0)]
    pub testpmd_cpu: usize,
    /// Leave testpmd out even when it is installed.
    #[arg(long)]
    pub no_testpmd: bool,
    /// The nfvswitch binary (default: target/release/nfvswitch).
    #[arg(long)]
    pub nfvswitch: Option<std::path::PathBuf>,
    /// Where the JSON and markdown results go (default: bench/results/).
    #[arg(long)]
    pub results: Option<std::path::PathBuf>,
    /// After the disruptions, run every attack of issue 36 in turn beside
    /// the VNFs (quiet, attack, quiet; see `soak/attacks.rs`).
    #[arg(long)]
    pub attacks: bool,
    /// Seconds of each phase of an attack (quiet, attack, quiet).
    #[arg(long, default_value_t = 6.0)]
    pub attack_secs: f64,
    /// Only these attacks, by number in the printed list, in this order
    /// (repeats allowed: `--attack-only 6,7,6,7`).
    #[arg(long, value_delimiter = ',')]
    pub attack_only: Vec<usize>,
}

/// One reading of the switch process and its pool.
#[derive(Clone, Debug, serde::Serialize)]
struct Sample {
    secs: f64,
    #[serde(flatten)]
    res: Resources,
    free_frames: usize,
    frames: usize,
    /// Packets delivered to the sinks so far.
    delivered: u64,
}

/// What the run measured, for the checks and the tables.
#[derive(Default)]
struct Outcome {
    samples: Vec<Sample>,
    before: Option<Sample>,
    after: Option<Sample>,
    flows: (usize, usize),
    died: Option<String>,
    recovered: Option<Result<f64, String>>,
    drained: Option<Result<(usize, usize), String>>,
    exit: Option<String>,
    traffic: Vec<Vec<String>>,
    mem_tables: u64,
    /// `/proc/PID/maps` of the switch before and after.
    maps: (String, String),
    /// `--attacks`: one result per attack.
    attacks: Vec<attacks::AttackResult>,
}

/// The switch's `/proc/PID/maps`, also kept in the run directory.
fn save_maps(s: &Soak, when: &str) -> String {
    let text = std::fs::read_to_string(format!("/proc/{}/maps", s.sw.pid)).unwrap_or_default();
    let _ = std::fs::write(s.dir.join(format!("maps-{when}.txt")), &text);
    text
}

pub fn soak(a: SoakArgs) -> Result<(), String> {
    if !(a.minutes > 0.0
        && a.every > 0.0
        && a.sample_every > 0.0
        && a.rate_pps > 0
        && a.attack_secs > 0.0)
    {
        return Err(
            "--minutes, --every, --sample-every, --rate-pps and --attack-secs must be positive"
                .into(),
        );
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pmd_cpu = a.pmd_cpu.unwrap_or(cpus - 1);
    let dir = host::run_dir()?;
    let (bin, source) = scenario::nfvswitch_binary(a.nfvswitch.clone())
        .and_then(|b| scenario::snapshot(&b, &dir))?;
    let testpmd_skip = if a.no_testpmd {
        Some("--no-testpmd".to_string())
    } else {
        host::which("dpdk-testpmd")
            .is_none()
            .then(|| "dpdk-testpmd not installed (Debian: dpdk-dev)".to_string())
    };
    let seed = a.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    println!(
        "nfv-bench soak: {} min, seed {seed}, a disruption every ~{} s, {} pps per generator, PMD on CPU {pmd_cpu}\n  nfvswitch: {source}\n  run directory: {}",
        a.minutes,
        a.every,
        a.rate_pps,
        dir.display()
    );
    if let Some(why) = &testpmd_skip {
        println!("  testpmd chain: SKIPPED: {why}");
    }
    let with_testpmd = testpmd_skip.is_none();
    let config = node::config(&node::Plan {
        dir: &dir,
        name: &format!("soak-{}", std::process::id()),
        pmd_cpu,
        rate_pps: a.rate_pps,
        with_testpmd,
    });
    let sw = Switch::start(&bin, &dir, &config)?;
    let peers = long_lived(&bin, &dir, with_testpmd, a.testpmd_cpu, pmd_cpu);
    let mut s = Soak::new(sw, &dir, &bin, peers, node::steering(with_testpmd), seed);
    let started = Instant::now();
    let out = run(&mut s, &a, started)?;
    finish(&a, seed, &s, &out, started)
}

fn long_lived(bin: &Path, dir: &Path, testpmd: bool, cpu: usize, main_cpu: usize) -> Vec<Peer> {
    let builtin = |name: &str, app| {
        let socket = node::socket(dir, name);
        Peer::new(name, peers::Kind::Builtin { socket, app }, bin, dir)
    };
    let mut v = vec![builtin("vnf1", "io"), builtin("vnf2", "macswap")];
    if testpmd {
        let kind = peers::Kind::TestPmd {
            server: node::socket(dir, "tp1"),
            client: node::socket(dir, "tp2"),
            cpu,
            main_cpu,
        };
        v.push(Peer::new("testpmd", kind, bin, dir));
    }
    v
}

/// Start, the schedule, undo, and the measurements at the end.
fn run(s: &mut Soak, a: &SoakArgs, started: Instant) -> Result<Outcome, String> {
    let mut out = Outcome::default();
    for p in s.peers.iter_mut() {
        p.start()?;
    }
    let t = wait_flowing(s, Duration::from_secs(60))
        .map_err(|e| format!("traffic never flowed through every chain: {e}"))?;
    println!("  every chain forwards ({t:.1} s after start); baseline in 3 s");
    proc::sleep(Duration::from_secs(3))?;
    let before = sample(s, started)?;
    out.flows.0 = s.sw.flow_count()?;
    print_sample("start", &before, s);
    out.samples.push(before.clone());
    out.before = Some(before);
    out.maps.0 = save_maps(s, "before");
    out.died = schedule(s, a, started, &mut out.samples)?;
    if out.died.is_some() {
        return Ok(out);
    }
    println!("  undoing every disruption still in place");
    s.undo_all();
    out.recovered = Some(wait_flowing(s, Duration::from_secs(90)));
    proc::sleep(Duration::from_secs(3))?;
    if a.attacks {
        out.attacks = attacks::run_all(s, a.attack_secs, &a.attack_only)?;
        if let Err(e) = s.sw.proc.ensure_alive() {
            out.died = Some(e);
            return Ok(out);
        }
    }
    let after = sample(s, started)?;
    print_sample("end", &after, s);
    out.samples.push(after.clone());
    out.after = Some(after);
    out.maps.1 = save_maps(s, "after");
    out.flows.1 = s.sw.flow_count()?;
    let ports = s.sw.ports()?;
    out.traffic = traffic_rows(&ports);
    out.mem_tables = [node::VNF1, node::VNF2, node::TP1, node::TP2]
        .iter()
        .map(|&p| node::info_u64(&ports, p, "reconnects"))
        .sum();
    out.drained = Some(drain(s));
    for p in s.peers.iter_mut() {
        p.stop();
    }
    let status = s.sw.proc.stop();
    out.exit = Some(status.map_or("not reaped".into(), |st| st.to_string()));
    Ok(out)
}

/// The disruptions until the time is up. `Some(why)` if the switch died.
fn schedule(
    s: &mut Soak,
    a: &SoakArgs,
    started: Instant,
    samples: &mut Vec<Sample>,
) -> Result<Option<String>, String> {
    let end = started + Duration::from_secs_f64(a.minutes * 60.0);
    let every = Duration::from_secs_f64(a.every);
    let period = Duration::from_secs_f64(a.sample_every);
    let mut events = schedule::Schedule::new(&mut s.rng, every);
    let (gap, mut kind) = events.next();
    let mut next_event = Instant::now() + gap;
    let mut next_sample = started + period;
    loop {
        if let Err(e) = s.sw.proc.ensure_alive() {
            println!("  THE SWITCH DIED: {e}");
            return Ok(Some(e));
        }
        let now = Instant::now();
        if now >= end {
            return Ok(None);
        }
        s.restarts_due(false);
        if now >= next_event {
            s.apply(kind);
            let (gap, k) = events.next();
            (next_event, kind) = (Instant::now() + gap, k);
        }
        if now >= next_sample {
            let x = sample(s, started)?;
            print_sample(&format!("{:.0} s", x.secs), &x, s);
            samples.push(x);
            next_sample += period;
        }
        proc::sleep(Duration::from_millis(100))?;
    }
}

fn sample(s: &Soak, started: Instant) -> Result<Sample, String> {
    let res = Resources::read(s.sw.pid)?;
    let node = s.sw.node()?;
    let ports = s.sw.ports()?;
    Ok(Sample {
        secs: started.elapsed().as_secs_f64(),
        res,
        free_frames: node.memory.free_frames,
        frames: node.memory.frames,
        delivered: node::tx_packets(&ports, node::SINK0) + node::tx_packets(&ports, node::SINK1),
    })
}

fn print_sample(label: &str, x: &Sample, s: &Soak) {
    let n = &s.n;
    println!(
        "  {label:>6}: RSS {} (guest memory {}, anon {}), fds {}, maps {}, threads {}, pool {}/{} free, delivered {:.2} M; kills {}, reconnects {}, ports +{}/-{}, rules +{}/-{}",
        verdict::mib(x.res.rss_kib),
        verdict::mib(x.res.guest_kib),
        verdict::mib(x.res.anon_kib),
        x.res.fds,
        x.res.maps,
        x.res.threads,
        x.free_frames,
        x.frames,
        x.delivered as f64 / 1e6,
        n.kills,
        n.reconnects,
        n.ports_added,
        n.ports_removed,
        n.flows_added,
        n.flows_deleted
    );
}

/// Waits until every long-lived vhost-user port is connected and every
/// sink receives; `Ok(seconds waited)` or what was still missing.
fn wait_flowing(s: &Soak, limit: Duration) -> Result<f64, String> {
    let t0 = Instant::now();
    let sinks = [node::SINK0, node::SINK1];
    let mut last: Option<Vec<u64>> = None;
    let mut missing = String::from("no report yet");
    while t0.elapsed() < limit {
        proc::check()?;
        let ports = s.sw.ports()?;
        let now: Vec<u64> = sinks.iter().map(|&p| node::tx_packets(&ports, p)).collect();
        let vhosts = [node::VNF1, node::VNF2, node::TP1, node::TP2];
        let down: Vec<String> = vhosts
            .iter()
            .filter(|&&p| ports.iter().any(|r| r.no == p) && !node::connected(&ports, p))
            .map(|p| format!("port {p} not connected"))
            .collect();
        let still: Vec<String> = sinks
            .iter()
            .zip(&now)
            .enumerate()
            .filter(|(i, (p, n))| {
                ports.iter().any(|r| r.no == **p) && last.as_ref().is_none_or(|l| l[*i] == **n)
            })
            .map(|(_, (p, _))| format!("sink {p} receives nothing"))
            .collect();
        if down.is_empty() && still.is_empty() && last.is_some() {
            return Ok(t0.elapsed().as_secs_f64());
        }
        missing = down.into_iter().chain(still).collect::<Vec<_>>().join(", ");
        last = Some(now);
        proc::sleep(Duration::from_secs(1))?;
    }
    Err(format!("after {limit:?}: {missing}"))
}

/// Stops the traffic (removes the generators) and waits for every frame
/// to come home: `Ok((free, frames))` or how many stayed out.
fn drain(s: &mut Soak) -> Result<(usize, usize), String> {
    for g in ["gen0", "gen1"] {
        if s.sw.ports()?.iter().any(|p| p.name == g) {
            s.sw.del_port(g)?;
        }
    }
    let t0 = Instant::now();
    loop {
        let m = s.sw.node()?.memory;
        if m.free_frames == m.frames {
            return Ok((m.free_frames, m.frames));
        }
        if t0.elapsed() > Duration::from_secs(15) {
            return Err(format!(
                "{} of {} frames free 15 s after the traffic stopped: {} held",
                m.free_frames,
                m.frames,
                m.frames - m.free_frames
            ));
        }
        proc::sleep(Duration::from_millis(200))?;
    }
}

/// Per port of the long-lived topology: packets and bytes both ways and
/// drops.
fn traffic_rows(ports: &[nfv_control::protocol::PortReport]) -> Vec<Vec<String>> {
    ports
        .iter()
        .filter(|p| p.no < 1000)
        .map(|p| {
            let drops = |d: &std::collections::BTreeMap<String, u64>| {
                d.iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            vec![
                format!("{} ({})", p.name, p.no),
                p.type_name.clone(),
                format!("{} / {:.2} GB", p.rx.packets, p.rx.bytes as f64 / 1e9),
                format!("{} / {:.2} GB", p.tx.packets, p.tx.bytes as f64 / 1e9),
                format!("{} {}", drops(&p.rx.drops), drops(&p.tx.drops))
                    .trim()
                    .to_string(),
            ]
        })
        .collect()
}

fn checks(s: &Soak, o: &Outcome, warm_secs: f64) -> Vec<Check> {
    let mut v = vec![Check::new(
        "switch alive through the soak",
        o.died.is_none(),
        o.died.clone().unwrap_or_else(|| "never exited".into()),
    )];
    let (n, shown) = procfs::panics(&s.sw.proc.log, 3);
    v.push(Check::new(
        "no panic in the switch log",
        n == 0,
        format!("{n} {}", shown.join(" | ")),
    ));
    let vnf_panics: usize = s.logs.iter().map(|l| procfs::panics(l, 0).0).sum();
    v.push(Check::new(
        "no panic in the VNF logs",
        vnf_panics == 0,
        format!("{vnf_panics} in {} logs", s.logs.len()),
    ));
    if o.died.is_none() {
        v.extend(resource_checks(o, warm_secs));
        v.extend(state_checks(s, o));
    }
    v
}

/// fds, threads, mappings before and after; RSS trends.
fn resource_checks(o: &Outcome, warm_secs: f64) -> Vec<Check> {
    let mut v = Vec::new();
    if let (Some(b), Some(a)) = (&o.before, &o.after) {
        v.push(verdict::unchanged(
            "open fds (/proc/PID/fd)",
            b.res.fds,
            a.res.fds,
        ));
        v.push(verdict::unchanged("threads", b.res.threads, a.res.threads));
        v.push(maps_check(o, b, a));
    }
    let series = |f: fn(&Resources) -> u64| -> Vec<(f64, u64)> {
        o.samples.iter().map(|x| (x.secs, f(&x.res))).collect()
    };
    v.push(verdict::memory_stable(
        "RSS stable (VmRSS without guest memory)",
        &series(|r| r.rss_kib - r.guest_kib.min(r.rss_kib)),
        warm_secs,
    ));
    v.push(verdict::memory_stable(
        "heap stable (RssAnon)",
        &series(|r| r.anon_kib),
        warm_secs,
    ));
    v
}

/// Pool, recovery, flow table, control answers, VNFs, exit.
fn state_checks(s: &Soak, o: &Outcome) -> Vec<Check> {
    let mut v = Vec::new();
    v.push(match &o.drained {
        Some(Ok((free, frames))) => Check::new(
            "packet pool back to full",
            true,
            format!("{free}/{frames} frames free"),
        ),
        Some(Err(e)) => Check::new("packet pool back to full", false, e.clone()),
        None => Check::new("packet pool back to full", false, "not measured"),
    });
    v.push(match &o.recovered {
        Some(Ok(t)) => Check::new(
            "traffic recovered on every chain",
            true,
            format!("{t:.1} s after the last disruption"),
        ),
        Some(Err(e)) => Check::new("traffic recovered on every chain", false, e.clone()),
        None => Check::new("traffic recovered on every chain", false, "not measured"),
    });
    v.push(Check::new(
        "flow table back to its rules",
        o.flows.0 == o.flows.1,
        format!("{} rules before, {} after", o.flows.0, o.flows.1),
    ));
    v.push(Check::new(
        "every control request answered as expected",
        s.errors.is_empty(),
        format!(
            "{} refused or wrong{}",
            s.errors.len(),
            s.errors
                .first()
                .map_or(String::new(), |e| format!("; first: {e}"))
        ),
    ));
    v.push(Check::new(
        "no VNF exited by itself",
        s.n.unexpected_exits == 0,
        format!("{} unexpected exits", s.n.unexpected_exits),
    ));
    let leak = std::fs::read_to_string(&s.sw.proc.log)
        .unwrap_or_default()
        .contains("frames in use");
    let clean = o
        .exit
        .as_deref()
        .is_some_and(|e| e.contains("exit status: 0"));
    v.push(Check::new(
        "clean exit on SIGINT, no frame held at exit",
        clean && !leak,
        format!(
            "{}{}",
            o.exit.as_deref().unwrap_or("?"),
            if leak {
                "; pool dropped with frames in use"
            } else {
                ""
            }
        ),
    ));
    v
}

/// Mappings: everything but glibc's allocator caches exactly as before;
/// those within glibc's bounds (see [`procfs::MapsCensus`]).
fn maps_check(o: &Outcome, b: &Sample, a: &Sample) -> Check {
    let (cb, ca) = (procfs::census(&o.maps.0), procfs::census(&o.maps.1));
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let arena_bound = 8 * cpus;
    // Each live thread has a stack and a signal stack (both above a
    // guard page); glibc caches up to 40 MiB of exited threads' 2 MiB
    // stacks.
    let stack_bound = 2 * a.res.threads + 20;
    let diff = procfs::other_maps_diff(&cb, &ca);
    let ok = diff.is_empty() && ca.arenas <= arena_bound && ca.stacks <= stack_bound;
    Check::new(
        "no mapping leaked (/proc/PID/maps)",
        ok,
        format!(
            "{} lines before, {} after; malloc arenas {} -> {} (glibc keeps <= {arena_bound}), \
             thread stacks {} -> {} (thread and signal stacks, live and cached, <= {stack_bound}); other mappings {}",
            b.res.maps,
            a.res.maps,
            cb.arenas,
            ca.arenas,
            cb.stacks,
            ca.stacks,
            if diff.is_empty() {
                "unchanged".to_string()
            } else {
                format!("changed: {diff}")
            }
        ),
    )
}

fn events_rows(s: &Soak, o: &Outcome) -> Vec<Vec<String>> {
    let n = &s.n;
    let row = |k: &str, v: u64, d: &str| vec![k.to_string(), v.to_string(), d.to_string()];
    vec![
        row("VNF kills (SIGKILL)", n.kills, "built-in VNFs and testpmd"),
        row("VNF restarts after a kill", n.restarts, ""),
        row(
            "VNF clean stop + start",
            n.reconnects,
            "SIGINT, new session",
        ),
        row(
            "memory tables re-sent",
            o.mem_tables,
            "reconnects the switch counted on the long-lived ports",
        ),
        row(
            "ports added",
            n.ports_added,
            "vhost-user + generator, through the control socket",
        ),
        row("ports removed", n.ports_removed, ""),
        row(
            "  removed with the VNF connected",
            n.removed_while_connected,
            "",
        ),
        row("rules added", n.flows_added, ""),
        row("rules deleted", n.flows_deleted, ""),
        row("flow requests", n.flow_requests, ""),
        row("steering overrides set/unset", n.steering_flaps, ""),
        row("unexpected VNF exits", n.unexpected_exits, ""),
    ]
}

/// The check that each kind of disruption happened at least once.
fn exercised(n: &events::Counts) -> Check {
    let counts = [
        n.kills,
        n.reconnects,
        n.ports_added,
        n.ports_removed,
        n.flows_added,
        n.flows_deleted,
        n.steering_flaps,
    ];
    Check::new(
        "every kind of disruption happened",
        counts.iter().all(|&c| c > 0),
        "kill, clean restart, port add and remove, rule add and delete, steering override",
    )
}

/// `--attacks`: one check per attack (its verdict), or one failed check
/// if none ran.
fn attack_checks(a: &SoakArgs, o: &Outcome) -> Vec<Check> {
    if !a.attacks {
        return Vec::new();
    }
    if o.attacks.is_empty() {
        return vec![Check::new("attacks", false, "no attack ran")];
    }
    o.attacks
        .iter()
        .map(|r| {
            let rates: Vec<String> = r
                .rates
                .iter()
                .map(|c| {
                    format!(
                        "{} {:.2}",
                        c.chain.split(':').next().unwrap_or(""),
                        c.ratio()
                    )
                })
                .collect();
            let detail = format!(
                "attack/quiet {}{}",
                rates.join(", "),
                if r.why.is_empty() {
                    String::new()
                } else {
                    format!("; {}", r.why)
                }
            );
            Check::new(&format!("attack: {}", r.name), r.ok, detail)
        })
        .collect()
}

const TRAFFIC_HEAD: [&str; 5] = [
    "port",
    "type",
    "rx packets / bytes",
    "tx packets / bytes",
    "drops",
];

/// Prints the summary, writes the results, and `Err` if a check failed.
fn finish(a: &SoakArgs, seed: u64, s: &Soak, o: &Outcome, started: Instant) -> Result<(), String> {
    let warm_secs = (a.minutes * 60.0 / 5.0).clamp(60.0, 300.0);
    let mut checks = checks(s, o, warm_secs);
    checks.push(exercised(&s.n));
    checks.extend(attack_checks(a, o));
    let (check_table, ok) = verdict::table(&checks);
    let ev = events_rows(s, o);
    let ev_table = report::text_table(&["event", "count", ""], &ev);
    let tr_table = report::text_table(&TRAFFIC_HEAD, &o.traffic);
    let delivered = o.after.as_ref().map_or(0, |x| x.delivered);
    let rss: Vec<String> = o
        .samples
        .iter()
        .map(|x| {
            let (r, g) = (verdict::mib(x.res.rss_kib), verdict::mib(x.res.guest_kib));
            format!("{:.0}s={r} ({g} guest)", x.secs)
        })
        .collect();
    let at_table = if o.attacks.is_empty() {
        String::new()
    } else {
        format!(
            "\nAttacks (innocent chains' rate quiet / under attack; each {:.0} s)\n{}",
            a.attack_secs,
            report::text_table(&attacks::SUMMARY_HEAD, &attacks::summary_rows(&o.attacks))
        )
    };
    println!(
        "\nnfv-bench soak: {:.1} min, seed {seed}; {:.2} M packets delivered to the sinks\n\nEvents\n{ev_table}\nTraffic (switch's view, whole run)\n{tr_table}{at_table}\nVmRSS (warm-up {warm_secs:.0} s ignored for the trends): {}\n\nChecks\n{check_table}",
        started.elapsed().as_secs_f64() / 60.0,
        delivered as f64 / 1e6,
        rss.join(" "),
    );
    let (warns, errs) = procfs::warnings_and_errors(&s.sw.proc.log);
    println!(
        "switch log: {warns} WARN and {errs} ERROR lines ({})",
        s.sw.proc.log.display()
    );
    for e in s.errors.iter().take(10) {
        println!("  error: {e}");
    }
    write_results(a, seed, s, o, &checks, &ev);
    if ok {
        Ok(())
    } else {
        Err("soak: a check failed (see the table above)".into())
    }
}

/// bench/results/soak-<time>.json (every sample and count) and .md.
fn write_results(
    a: &SoakArgs,
    seed: u64,
    s: &Soak,
    o: &Outcome,
    checks: &[Check],
    ev: &[Vec<String>],
) {
    let ts = host::timestamp();
    let delivered = o.after.as_ref().map_or(0, |x| x.delivered);
    let json = serde_json::json!({
        "kind": "soak", "timestamp_utc": ts, "seed": seed, "minutes": a.minutes, "every_secs": a.every,
        "rate_pps": a.rate_pps, "samples": o.samples, "counts": s.n, "memory_tables": o.mem_tables,
        "checks": checks, "errors": s.errors, "delivered": delivered, "attacks": o.attacks,
        "attack_secs": a.attack_secs,
    });
    let check_rows: Vec<Vec<String>> = checks
        .iter()
        .map(|c| {
            let verdict = if c.ok { "PASS" } else { "FAIL" };
            vec![verdict.to_string(), c.what.clone(), c.detail.clone()]
        })
        .collect();
    let at = if o.attacks.is_empty() {
        String::new()
    } else {
        report::md_table(&attacks::SUMMARY_HEAD, &attacks::summary_rows(&o.attacks))
    };
    let md = format!(
        "# nfv-bench soak {ts}\n\n{} min, seed {seed}.\n\n{}\n{}\n{at}\n{}",
        a.minutes,
        report::md_table(&["event", "count", ""], ev),
        report::md_table(&TRAFFIC_HEAD, &o.traffic),
        report::md_table(&["", "check", "figures"], &check_rows),
    );
    let dir = report::results_dir(a.results.clone());
    report::save_results(&dir, &format!("soak-{ts}"), &json, &md);
}
