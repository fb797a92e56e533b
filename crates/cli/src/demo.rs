//! `nfvswitch demo`: the main job on a fresh machine — no root, no
//! hugepages. For each topology, VNF count and frame size it starts the
//! test bed of [`crate::topology`] (a node in this process, N VNF
//! processes over vhost-user, the service chains installed) and shows live
//! per-VNF gauges — the seed test bed's GUI — in the terminal and on the
//! web dashboard ([`dashboard`]: its URL is the first line printed; it
//! follows the demo from one run to the next), then a summary table of
//! the means over each run's window. `--hold` keeps the last run up until
//! SIGINT/SIGTERM so a person can look.
//!
//! SIGINT/SIGTERM are caught: the first stops the demo after the current
//! run (or ends `--hold`), cleaning up VNFs, node and sockets; a second
//! ends the process at once.

mod dashboard;

use crate::ctl::{chains_text, pmd_table};
use crate::pmu_text::{notes, pmu_figures};
use crate::topology::{Cores, Run, Setup, Testbed, Topology, validate};
use clap::Args;
use dashboard::Dashboard;
use nfv_vnf_interface::VnfInterface;
use nix::sys::signal::Signal;
use std::collections::BTreeSet;
use std::sync::mpsc;
use std::time::Duration;

#[derive(Args)]
pub struct DemoArgs {
    /// Topologies: ns (VNFs in parallel, north-south), ew (a chain, east-west).
    #[arg(long, value_delimiter = ',', default_values_t = [Topology::Ns, Topology::Ew])]
    topology: Vec<Topology>,
    /// Numbers of VNFs (1..=8).
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 2, 4])]
    vnfs: Vec<usize>,
    /// Frame sizes in bytes (64..=1518).
    #[arg(long, value_delimiter = ',', default_values_t = [64usize, 1518])]
    sizes: Vec<usize>,
    /// Seconds of live gauges per run.
    #[arg(long, default_value_t = 3)]
    seconds: u64,
    /// Switch PMD threads, each on a core of its own (default: as many as
    /// are left once each VNF has a core; at least 1).
    #[arg(long)]
    pmds: Option<usize>,
    /// Offered load per generator in packets/s (0 = as fast as possible).
    #[arg(long, default_value_t = 0)]
    rate_pps: u64,
    /// VNF application: io, macswap or l2fwd.
    #[arg(long, default_value = "macswap")]
    app: String,
    /// VNF poll mode: adaptive (poll while busy, sleep when idle) or busy.
    #[arg(long, default_value = "adaptive")]
    poll: String,
    /// How the VNFs reach the switch: vhost-user (or vhost) or memif.
    #[arg(long, default_value_t = VnfInterface::VhostUser)]
    interface: VnfInterface,
    /// Web dashboard address: IP:PORT (port 0: any free port),
    /// localhost:PORT or "off" (default: 127.0.0.1:9180, or any free port
    /// when that one is taken).
    #[arg(long, value_name = "ADDR|off")]
    api: Option<String>,
    /// Keep the last run up (traffic, VNFs, dashboard) until Ctrl-C
    /// (SIGINT) or SIGTERM, then clean up.
    #[arg(long)]
    hold: bool,
}

fn gauge(mpps: f64, scale: f64) -> String {
    let n = ((mpps / scale) * 20.0).round().clamp(0.0, 20.0) as usize;
    format!("{}{}", "#".repeat(n), ".".repeat(20 - n))
}

/// Prints the gauges of second `t` (the node's rates over its last
/// interval).
fn gauges(t: u64, bed: &Testbed) {
    let chains = bed.node().show_chains();
    let scale = chains
        .iter()
        .flat_map(|c| c.vnfs.iter().map(|v| v.rx_mpps))
        .fold(1.0, f64::max);
    println!("  t={t}s");
    for c in &chains {
        for v in &c.vnfs {
            println!(
                "    {:<5} {:<6} [{}] rx {:>6.3} Mpps {:>6.2} Gbps | tx {:>6.3} Mpps {:>6.2} Gbps | drops switch {:>10} vnf {:>8}",
                c.name,
                v.name,
                gauge(v.rx_mpps, scale),
                v.rx_mpps,
                v.rx_gbps,
                v.tx_mpps,
                v.tx_gbps,
                v.drops,
                bed.vnf_drops(&v.name)
            );
        }
    }
}

/// SIGINT/SIGTERM, blocked in every thread and waited for by a thread of
/// their own; the demo reads them between runs.
struct Signals {
    rx: mpsc::Receiver<Signal>,
    caught: Option<Signal>,
}

impl Signals {
    /// Must run before any other thread starts (they inherit the mask).
    fn watch() -> Signals {
        let set = crate::run::block_shutdown_signals();
        let (tx, rx) = mpsc::channel();
        let _ = std::thread::Builder::new()
            .name("demo-signals".into())
            .spawn(move || {
                let mut seen = 0;
                while let Ok(sig) = set.wait() {
                    seen += 1;
                    if seen > 1 {
                        eprintln!("nfvswitch demo: {sig:?} again: exiting now");
                        std::process::exit(130);
                    }
                    eprintln!(
                        "\nnfvswitch demo: {sig:?}: stopping (after the run under way) and cleaning up \
                         (again: exit at once)"
                    );
                    let _ = tx.send(sig);
                }
            });
        Signals { rx, caught: None }
    }

    fn caught(&mut self) -> Option<Signal> {
        if self.caught.is_none() {
            self.caught = self.rx.try_recv().ok();
        }
        self.caught
    }

    fn wait(&mut self) -> Option<Signal> {
        if self.caught().is_none() {
            self.caught = self.rx.recv().ok();
        }
        self.caught
    }
}

/// The lines of `text` not printed before in this demo (PMU notes: each
/// reason once per demo, not after every run).
fn unseen(seen: &mut BTreeSet<String>, text: &str) -> String {
    text.lines()
        .filter(|l| seen.insert(l.to_string()))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// Every (topology, N, size) of the arguments, in the order they run.
fn runs(args: &DemoArgs) -> Vec<Run> {
    let mut runs = Vec::new();
    for &topology in &args.topology {
        for &vnfs in &args.vnfs {
            for &size in &args.sizes {
                runs.push(Run {
                    topology,
                    vnfs,
                    size,
                });
            }
        }
    }
    runs
}

pub fn demo(args: DemoArgs) -> Result<(), String> {
    validate(&args.vnfs, &args.sizes)?;
    if args.topology.is_empty() {
        return Err("--topology needs at least one of ns, ew".into());
    }
    let cores = Cores::detect(args.pmds, args.vnfs.iter().copied().max().unwrap_or(1))?;
    let setup = Setup {
        app: args.app.clone(),
        poll: args.poll.clone(),
        interface: args.interface,
        rate_pps: args.rate_pps,
        // Skip the first interval (connection, ring fill).
        warmup: Duration::from_millis(1500),
    };
    setup.check()?;
    let runs = runs(&args);
    let mut signals = Signals::watch();
    let mut dash = Dashboard::bind(args.api.as_deref(), runs.len(), args.seconds, args.hold)?;
    match dash.url() {
        Some(url) => println!(
            "nfvswitch demo: dashboard at {url} (gauges per VNF and per chain; it follows the demo \
             from run to run{})",
            if args.hold {
                ", and the last run stays up until Ctrl-C"
            } else {
                ""
            }
        ),
        None => println!("nfvswitch demo: dashboard off"),
    }
    println!("nfvswitch demo: {}", cores.describe(&setup));
    let mut seen_notes = BTreeSet::new();
    let mut summary = Vec::new();
    let mut held = None;
    for (k, run) in runs.iter().enumerate() {
        if signals.caught().is_some() {
            break;
        }
        println!(
            "\n== [{}/{}] {} with {} VNF(s), {} B frames ==",
            k + 1,
            runs.len(),
            run.topology.describe(),
            run.vnfs,
            run.size
        );
        dash.starting(k + 1, run);
        let bed = Testbed::start_with(&setup, run, &cores, |node| dash.show(node))?;
        dash.measuring();
        let m = bed.measure(args.seconds, gauges);
        print!("{}", chains_text(&bed.node().show_chains()));
        let pmds = bed.node().show_pmd();
        print!("{}{}", pmd_table(&pmds), pmu_figures(&pmds));
        print!("{}", unseen(&mut seen_notes, &notes(&pmds)));
        dash.done(run, &m);
        summary.push((*run, m));
        if args.hold && k + 1 == runs.len() {
            held = Some(bed);
        }
    }
    print_summary(&summary, args.seconds);
    if let Some(bed) = held
        && signals.caught().is_none()
    {
        dash.holding();
        let run = &summary[summary.len() - 1].0;
        println!(
            "\nholding {} with {} VNF(s), {} B frames{}: Ctrl-C (SIGINT) or SIGTERM stops it",
            run.topology.describe(),
            run.vnfs,
            run.size,
            dash.url()
                .map_or(String::new(), |u| format!(" (dashboard at {u})"))
        );
        signals.wait();
        drop(bed);
    }
    dash.finished();
    Ok(())
}

fn print_summary(summary: &[(Run, crate::topology::Measurement)], seconds: u64) {
    println!(
        "\n== summary: delivered to the sinks (mean over {} s of each run) ==",
        seconds.max(1)
    );
    let mut t = crate::table::Table::new(&[
        "topology",
        "VNFs",
        "frame B",
        "Mpps",
        "Gbps",
        "per-VNF rx Mpps",
        "PMD busy",
        "PMD cycles/pkt",
    ]);
    for (run, m) in summary {
        t.row(vec![
            run.topology.to_string(),
            run.vnfs.to_string(),
            run.size.to_string(),
            format!("{:.3}", m.mpps),
            format!("{:.2}", m.gbps),
            m.vnfs
                .iter()
                .map(|v| format!("{:.2}", v.rx_mpps))
                .collect::<Vec<_>>()
                .join(" "),
            crate::topology::PmdMeasurement::busy_list(&m.per_pmd, &m.pmd),
            m.pmd
                .cycles_per_packet
                .map_or("-".into(), |c| format!("{c:.0}")),
        ]);
    }
    print!("{t}");
}
