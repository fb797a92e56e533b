//! `nfvswitch`: the switch daemon, its control client, the demo and sweeps.

mod calibrate;
mod ctl;
mod demo;
mod ndr;
mod plan;
mod pmu_text;
mod run;
mod sweep;
mod table;
mod top;
mod topology;
mod vnf;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "nfvswitch",
    version,
    about = "A userspace poll-mode virtual switch for NFV nodes"
)]
struct Cli {
    /// Log filter (error, warn, info, debug, trace or a tracing filter).
    /// (Default: info; warn for `demo`, `sweep` and `ndr`, whose tables are the output.)
    #[arg(long, global = true, env = "NFVSWITCH_LOG")]
    log: Option<String>,
    #[command(subcommand)]
    cmd: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a node in the foreground until SIGINT/SIGTERM.
    Run {
        /// Node config (TOML).
        config: PathBuf,
        /// Stop by itself after this many seconds (and print final counters).
        #[arg(long)]
        exit_after: Option<f64>,
        /// REST API, /metrics and dashboard address: IP:PORT (port 0: any
        /// free port), localhost:PORT or "off" (default: the config's
        /// `[node] api`, else 127.0.0.1:9180).
        #[arg(long, value_name = "ADDR|off")]
        api: Option<String>,
    },
    /// Validate a node config and print what it would run.
    Check { config: PathBuf },
    /// Talk to a running node over its control socket.
    Ctl(ctl::CtlArgs),
    /// The demo test bed (N VNFs north-south, east-west) run by run, with
    /// live gauges in the terminal and on a web dashboard (URL printed first).
    Demo(demo::DemoArgs),
    /// Topology sweeps (N VNFs north-south and east-west, frame sizes):
    /// JSON, markdown tables and PNG charts.
    Sweep(sweep::SweepArgs),
    /// Run the built-in VNF: a virtio-net driver on a vhost-user socket.
    Vnf(vnf::VnfArgs),
    /// RFC 2544 throughput search (NDR and PDR) from a generator to a
    /// receiver port of a node run in this process.
    Ndr(ndr::NdrArgs),
    /// Live view of a running node: PMDs (busy, Mpps, cycles/packet, IPC),
    /// ports (rates, drops by reason), chains and VNFs.
    Top(top::TopArgs),
    /// Measure what a hop costs on this node (cycles/packet per hop type
    /// and frame size) and write a cost profile for `plan`.
    Calibrate(calibrate::CalibrateArgs),
    /// SR-IOV, nfvswitch or both? Predicted rate, bottleneck and cores per
    /// I/O mode for a topology file, and a recommendation.
    Plan(plan::PlanArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let default_log = if matches!(
        cli.cmd,
        Command::Demo(_) | Command::Ndr(_) | Command::Sweep(_) | Command::Calibrate(_)
    ) {
        "warn"
    } else {
        "info"
    };
    let log = cli.log.clone().unwrap_or_else(|| default_log.to_string());
    let filter = tracing_subscriber::EnvFilter::try_new(&log)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let r = match cli.cmd {
        Command::Run {
            config,
            exit_after,
            api,
        } => run::run(&config, exit_after, api.as_deref()),
        Command::Check { config } => run::check(&config),
        Command::Ctl(args) => ctl::ctl(args),
        Command::Demo(args) => demo::demo(args),
        Command::Sweep(args) => sweep::sweep(args),
        Command::Vnf(args) => vnf::vnf(args),
        Command::Ndr(args) => ndr::ndr(args),
        Command::Top(args) => top::top(args),
        Command::Calibrate(args) => calibrate::calibrate(args),
        Command::Plan(args) => plan::plan(args),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nfvswitch: {e}");
            ExitCode::FAILURE
        }
    }
}
