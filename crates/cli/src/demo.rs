//! `nfvswitch demo`: the main job on a fresh machine — no root, no
//! hugepages. For each topology, VNF count and frame size it starts the
//! test bed of [`crate::topology`] (a node in this process, N VNF
//! processes over vhost-user, the service chains installed) and shows live
//! per-VNF gauges — the seed test bed's GUI, in a terminal — then a
//! summary table of the means over each run's window.

use crate::ctl::{chains_text, pmd_text};
use crate::topology::{Cores, Measurement, Run, Setup, Testbed, Topology, VnfInterface, validate};
use clap::Args;
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
    /// Offered load per generator in packets/s (0 = as fast as possible).
    #[arg(long, default_value_t = 0)]
    rate_pps: u64,
    /// VNF application: io, macswap or l2fwd.
    #[arg(long, default_value = "macswap")]
    app: String,
    /// VNF poll mode: adaptive (poll while busy, sleep when idle) or busy.
    #[arg(long, default_value = "adaptive")]
    poll: String,
    /// How the VNFs reach the switch: vhost (vhost-user) or memif.
    #[arg(long, default_value_t = VnfInterface::Vhost)]
    interface: VnfInterface,
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

fn run_one(setup: &Setup, run: &Run, cores: &Cores, seconds: u64) -> Result<Measurement, String> {
    let bed = Testbed::start(setup, run, cores)?;
    let m = bed.measure(seconds, gauges);
    print!("{}", chains_text(&bed.node().show_chains()));
    print!("{}", pmd_text(&bed.node().show_pmd()));
    Ok(m)
}

pub fn demo(args: DemoArgs) -> Result<(), String> {
    validate(&args.vnfs, &args.sizes)?;
    let cores = Cores::detect();
    let setup = Setup {
        app: args.app.clone(),
        poll: args.poll.clone(),
        interface: args.interface,
        rate_pps: args.rate_pps,
        // Skip the first interval (connection, ring fill).
        warmup: Duration::from_millis(1500),
    };
    setup.check()?;
    println!("nfvswitch demo: {}", cores.describe(&setup));
    let mut summary = Vec::new();
    for &topology in &args.topology {
        for &vnfs in &args.vnfs {
            for &size in &args.sizes {
                let run = Run {
                    topology,
                    vnfs,
                    size,
                };
                println!(
                    "\n== {} with {vnfs} VNF(s), {size} B frames ==",
                    topology.describe()
                );
                let m = run_one(&setup, &run, &cores, args.seconds)?;
                summary.push((run, m));
            }
        }
    }
    println!(
        "\n== summary: delivered to the sinks (mean over {} s of each run) ==",
        args.seconds.max(1)
    );
    let mut t = crate::table::Table::new(&[
        "topology",
        "VNFs",
        "frame B",
        "Mpps",
        "Gbps",
        "per-VNF rx Mpps",
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
        ]);
    }
    print!("{t}");
    Ok(())
}
