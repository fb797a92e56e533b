//! `nfvswitch sweep`: the seed test bed's topology sweeps. For every
//! (topology, N, frame size) it runs the demo's test bed
//! ([`crate::topology`]) for a window, prints one progress line, and
//! writes `sweep.json` (after every run, so an interrupted sweep keeps
//! what it measured), `sweep.md` and the PNG charts `mpps_vs_n.png` and
//! `gbps_vs_n.png` into the output directory.

pub mod chart;
pub mod report;

use crate::topology::{Cores, Run, Setup, Testbed, Topology, validate};
use clap::Args;
use nfv_vnf_interface::VnfInterface;
use report::{Machine, Parameters, RunResult, SweepReport};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct SweepArgs {
    /// Topologies: ns (N VNFs in parallel, north-south/PVP), ew (N VNFs in
    /// one chain, east-west).
    #[arg(long, value_delimiter = ',', default_values_t = [Topology::Ns, Topology::Ew])]
    topology: Vec<Topology>,
    /// Numbers of VNFs (1..=8).
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 2, 3, 4, 5, 6, 7, 8])]
    vnfs: Vec<usize>,
    /// Frame sizes in bytes (64..=1518).
    #[arg(long, value_delimiter = ',', default_values_t = [64usize, 128, 256, 512, 1024, 1518])]
    sizes: Vec<usize>,
    /// Measurement window per run in seconds (one sample a second; the
    /// results are the means).
    #[arg(long, default_value_t = 3)]
    seconds: u64,
    /// Seconds of traffic before each window (connection, ring fill).
    #[arg(long, default_value_t = 1.5)]
    warmup: f64,
    /// Output directory (created if missing).
    #[arg(long, default_value = "sweep-results")]
    out: PathBuf,
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
    /// Switch PMD counts to sweep over, each PMD on a core of its own
    /// (default: one count, as many PMDs as are left once each VNF has a
    /// core). Several counts (`--pmds 1,2,4`) add a scaling table: Mpps
    /// per count and the efficiency Mpps(k) / (k · Mpps(1)).
    #[arg(long, value_delimiter = ',')]
    pmds: Vec<usize>,
    /// Run nothing: rewrite sweep.md and the charts from the sweep.json
    /// already in --out (after installing a font, say).
    #[arg(long)]
    redraw: bool,
}

/// Writes `sweep.md` and the charts of `report` into `dir`; returns the
/// paths written and whether the charts have text.
fn write_outputs(dir: &Path, report: &SweepReport) -> Result<(Vec<PathBuf>, bool), String> {
    let mut files = vec![report::write_markdown(dir, report)?];
    let font = chart::load_font();
    files.extend(chart::draw_all(report, dir, font.is_some())?);
    Ok((files, font.is_some()))
}

const NO_FONT: &str = "note: no TrueType font found, so the charts have no text; install \
    fonts-dejavu-core (Debian/Ubuntu) or set NFVSWITCH_FONT=/path/to/font.ttf, then run again \
    with --redraw";

fn redraw(dir: &Path) -> Result<(), String> {
    let path = dir.join("sweep.json");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let report: SweepReport =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let (files, text) = write_outputs(dir, &report)?;
    for f in files {
        println!("wrote {}", f.display());
    }
    if !text {
        println!("{NO_FONT}");
    }
    Ok(())
}

fn progress(k: usize, total: usize, run: &Run, r: &RunResult, took: Duration) -> String {
    let head = format!(
        "[{k:>w$}/{total}] {} N={} {:>4} B{}:",
        run.topology,
        run.vnfs,
        run.size,
        if r.pmds > 1 {
            format!(" {} PMDs", r.pmds)
        } else {
            String::new()
        },
        w = total.to_string().len()
    );
    match (&r.result, &r.error) {
        (Some(m), _) => {
            let per: Vec<String> = m.vnfs.iter().map(|v| format!("{:.2}", v.rx_mpps)).collect();
            let own: u64 = m.vnfs.iter().map(|v| v.vnf_drops).sum();
            let mut drops: Vec<String> = m.drops.iter().map(|(r, n)| format!("{r} {n}")).collect();
            drops.push(format!("in VNFs {own}"));
            format!(
                "{head} {:>6.3} Mpps {:>6.2} Gbps (offered {:.3}, loss {:.1} %) | VNF rx Mpps {} | drops {} | PMD {} busy, {} cycles/pkt | {:.1} s",
                m.mpps,
                m.gbps,
                m.offered_mpps,
                m.loss_percent,
                per.join(" "),
                drops.join(", "),
                crate::topology::PmdMeasurement::busy_list(&m.per_pmd, &m.pmd),
                m.pmd
                    .cycles_per_packet
                    .map_or("-".to_string(), |c| format!("{c:.0}")),
                took.as_secs_f64()
            )
        }
        (None, e) => format!("{head} FAILED: {}", e.as_deref().unwrap_or("no result")),
    }
}

/// Whether a sweep over PMD counts can show scaling here: only when
/// every PMD and every VNF has a core of its own.
fn scaling_caveat(layouts: &[Cores], max_vnfs: usize) -> String {
    let most = layouts.iter().map(|c| c.pmds.len()).max().unwrap_or(1);
    let allowed = &layouts[0].allowed;
    if layouts.iter().any(|c| c.vnfs_share(max_vnfs)) {
        format!(
            "note: this sweep cannot show scaling with PMDs: {} PMD(s) and {max_vnfs} VNF(s) \
             need {} cores, and this process may run on {} ({allowed}); PMDs and VNFs share \
             cores, so more PMDs take time from the VNFs",
            most,
            most + max_vnfs,
            allowed.len()
        )
    } else {
        format!(
            "scaling: up to {most} PMD(s) and {max_vnfs} VNF(s), each on a core of its own \
             ({} CPUs allowed: {allowed})",
            allowed.len()
        )
    }
}

pub fn sweep(args: SweepArgs) -> Result<(), String> {
    if args.redraw {
        return redraw(&args.out);
    }
    check_args(&args)?;
    let seconds = args.seconds.max(1);
    let max_vnfs = args.vnfs.iter().copied().max().unwrap_or(1);
    let layouts = layouts(&args, max_vnfs)?;
    let cores = &layouts[0];
    let setup = Setup {
        app: args.app.clone(),
        poll: args.poll.clone(),
        interface: args.interface,
        rate_pps: args.rate_pps,
        warmup: Duration::from_secs_f64(args.warmup),
    };
    setup.check()?;
    std::fs::create_dir_all(&args.out).map_err(|e| format!("--out {}: {e}", args.out.display()))?;
    let mut report = SweepReport::new(Machine::here(cores), parameters(&args, seconds));
    let runs = runs(&args, &layouts);
    println!(
        "nfvswitch sweep: {} runs of {seconds} s (+{} s warm-up) into {}. {}",
        runs.len(),
        args.warmup,
        args.out.display(),
        cores.describe(&setup)
    );
    if layouts.len() > 1 {
        println!("{}", scaling_caveat(&layouts, max_vnfs));
    }
    let started = Instant::now();
    for (k, (run, layout)) in runs.iter().enumerate() {
        let t0 = Instant::now();
        let measured =
            Testbed::start(&setup, run, layout).map(|bed| bed.measure(seconds, |_, _| {}));
        let r = RunResult::new(run, layout, measured);
        println!("{}", progress(k + 1, runs.len(), run, &r, t0.elapsed()));
        report.runs.push(r);
        report::write_json(&args.out, &report)?;
    }
    finish(&args.out, report, started)
}

/// The arguments `sweep` refuses before it starts anything.
fn check_args(args: &SweepArgs) -> Result<(), String> {
    validate(&args.vnfs, &args.sizes)?;
    if args.topology.is_empty() {
        return Err("--topology needs at least one of ns, ew".into());
    }
    if !(0.0..=60.0).contains(&args.warmup) {
        return Err(format!(
            "--warmup: {} is not in 0..=60 seconds",
            args.warmup
        ));
    }
    Ok(())
}

/// The core layout of each `--pmds` count (one, the default count, when
/// none is given).
fn layouts(args: &SweepArgs, max_vnfs: usize) -> Result<Vec<Cores>, String> {
    if args.pmds.is_empty() {
        Ok(vec![Cores::detect(None, max_vnfs)?])
    } else {
        args.pmds
            .iter()
            .map(|&k| Cores::detect(Some(k), max_vnfs))
            .collect()
    }
}

/// What the report says the sweep was asked to do.
fn parameters(args: &SweepArgs, seconds: u64) -> Parameters {
    Parameters {
        topologies: args.topology.clone(),
        vnfs: args.vnfs.clone(),
        sizes: args.sizes.clone(),
        seconds,
        warmup_secs: args.warmup,
        app: args.app.clone(),
        poll: args.poll.clone(),
        interface: args.interface,
        rate_pps: args.rate_pps,
    }
}

/// Every run, in order: layout, then topology, then N, then frame size.
fn runs<'a>(args: &SweepArgs, layouts: &'a [Cores]) -> Vec<(Run, &'a Cores)> {
    let mut runs = Vec::new();
    for layout in layouts {
        for &topology in &args.topology {
            for &vnfs in &args.vnfs {
                for &size in &args.sizes {
                    let run = Run {
                        topology,
                        vnfs,
                        size,
                    };
                    runs.push((run, layout));
                }
            }
        }
    }
    runs
}

/// Writes the finished report, sweep.md and the charts into `out`, prints
/// the summary and the tables; fails when every run failed.
fn finish(out: &Path, mut report: SweepReport, started: Instant) -> Result<(), String> {
    report.finished = Some(report::rfc3339(std::time::SystemTime::now()));
    let json = report::write_json(out, &report)?;
    let (files, text) = write_outputs(out, &report)?;
    println!(
        "\nsweep done in {:.0} s: {}, {}",
        started.elapsed().as_secs_f64(),
        json.display(),
        files
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    if !text {
        println!("{NO_FONT}");
    }
    print!("\n{}", report::markdown_tables(&report));
    let failed = report.runs.iter().filter(|r| r.result.is_none()).count();
    if failed == report.runs.len() {
        return Err(format!("all {failed} runs failed"));
    }
    if failed > 0 {
        println!("{failed} run(s) failed; see {}", files[0].display());
    }
    Ok(())
}
