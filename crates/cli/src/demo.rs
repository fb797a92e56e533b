//! `nfvswitch demo`: the main job on a fresh machine — no root, no
//! hugepages. For each topology, VNF count and frame size it starts a node
//! in this process (generator and sink ports stand in for the physical
//! ports), N VNF processes (`nfvswitch vnf`, connected over vhost-user),
//! installs the service chains and shows live per-VNF gauges — the seed
//! test bed's GUI, in a terminal — then a summary table.
//!
//! - `ns` (north-south, PVP): N chains in parallel, gen_i → vnf_i → sink_i.
//! - `ew` (east-west): one chain gen → vnf1 → … → vnfN → sink.
//!
//! On a 2-core machine busy pollers that share a core starve each other,
//! so the switch's PMD owns the last core and the VNFs share the others in
//! adaptive poll/sleep mode; the output says which cores are used.

use crate::ctl::{chains_text, pmd_text};
use clap::Args;
use nfv_config::{ChainConfig, NodeConfig, PmdConfig};
use nfv_control::Node;
use nfv_control::protocol::ChainReport;
use nfv_mem::MemoryConfig;
use nfv_ports::config::{GeneratorConfig, PortConfig, PortKind, VhostUserConfig, VhostUserMode};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct DemoArgs {
    /// Topologies: ns (VNFs in parallel, north-south), ew (a chain, east-west).
    #[arg(long, value_delimiter = ',', default_values_t = ["ns".to_string(), "ew".to_string()])]
    topology: Vec<String>,
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
}

struct Run {
    topology: &'static str,
    vnfs: usize,
    size: usize,
}

struct Vnf {
    child: Child,
    stats: PathBuf,
}

impl Drop for Vnf {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn port(name: String, id: u16, kind: PortKind) -> PortConfig {
    PortConfig {
        name,
        id,
        rxqs: 1,
        kind,
    }
}

fn node_config(run: &Run, dir: &Path, rate: u64, switch_core: usize) -> NodeConfig {
    let generator = |i: usize| {
        let g = GeneratorConfig {
            frame_size: run.size,
            rate_pps: (rate > 0).then_some(rate),
            src_ip: std::net::Ipv4Addr::new(10, 0, i as u8, 1),
            ..Default::default()
        };
        port(format!("gen{i}"), 100 + i as u16, PortKind::Generator(g))
    };
    let sink = |i: usize| port(format!("sink{i}"), 200 + i as u16, PortKind::Sink);
    let vnf = |i: usize| {
        let v = VhostUserConfig {
            socket: dir.join(format!("vnf{i}.sock")),
            mode: VhostUserMode::Server,
            queues: 1,
            mrg_rxbuf: true,
        };
        port(format!("vnf{i}"), 10 + i as u16, PortKind::VhostUser(v))
    };
    let mut ports = Vec::new();
    let mut chains = Vec::new();
    let hop = |p: &PortConfig| (p.name.clone(), p.id);
    if run.topology == "ns" {
        for i in 1..=run.vnfs {
            let (g, v, s) = (generator(i), vnf(i), sink(i));
            chains.push(ChainConfig {
                name: format!("ns{i}"),
                hops: vec![hop(&g), hop(&v), hop(&s)],
                priority: 1000,
            });
            ports.extend([g, v, s]);
        }
    } else {
        let (g, s) = (generator(1), sink(1));
        let vnfs: Vec<PortConfig> = (1..=run.vnfs).map(vnf).collect();
        let mut hops = vec![hop(&g)];
        hops.extend(vnfs.iter().map(hop));
        hops.push(hop(&s));
        chains.push(ChainConfig {
            name: "ew".into(),
            hops,
            priority: 1000,
        });
        ports.push(g);
        ports.extend(vnfs);
        ports.push(s);
    }
    NodeConfig {
        source: "demo".into(),
        name: format!("demo-{}", std::process::id()),
        control_socket: Some(dir.join("ctl.sock")),
        memory: MemoryConfig {
            frames: 65536,
            ..Default::default()
        },
        pmd: PmdConfig {
            cores: vec![switch_core],
            emc_entries: 8192,
        },
        ports,
        flows: vec![],
        chains,
    }
}

fn spawn_vnf(args: &DemoArgs, dir: &Path, i: usize, cores: &[usize]) -> Result<Vnf, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let stats = dir.join(format!("vnf{i}.json"));
    let mut cmd = Command::new(exe);
    cmd.args(["--log", "warn", "vnf", "--socket"])
        .arg(dir.join(format!("vnf{i}.sock")))
        .args([
            "--mode",
            "client",
            "--app",
            &args.app,
            "--poll",
            &args.poll,
            "--stats-every",
            "1",
        ])
        .arg("--json-stats")
        .arg(&stats)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if args.app == "l2fwd" {
        cmd.args(["--next-hop", "02:00:00:00:00:02"]);
    }
    if !cores.is_empty() {
        cmd.args(["--cpu", &cores[(i - 1) % cores.len()].to_string()]);
    }
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot start VNF {i}: {e}"))?;
    Ok(Vnf { child, stats })
}

/// The VNF's own drop counters (from its --json-stats file).
fn vnf_drops(v: &Vnf) -> u64 {
    let Ok(text) = std::fs::read(&v.stats) else {
        return 0;
    };
    let Ok(j) = serde_json::from_slice::<serde_json::Value>(&text) else {
        return 0;
    };
    j["total"]["drops"]
        .as_object()
        .map_or(0, |d| d.values().filter_map(|x| x.as_u64()).sum())
}

fn gauge(mpps: f64, scale: f64) -> String {
    let n = ((mpps / scale) * 20.0).round().clamp(0.0, 20.0) as usize;
    format!("{}{}", "#".repeat(n), ".".repeat(20 - n))
}

fn run_one(
    args: &DemoArgs,
    run: &Run,
    switch_core: usize,
    vnf_cores: &[usize],
) -> Result<Vec<ChainReport>, String> {
    let dir = std::env::temp_dir().join(format!("nfvswitch-demo-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let cfg = node_config(run, &dir, args.rate_pps, switch_core);
    let node = Node::start(&cfg).map_err(|e| e.to_string())?;
    let vnfs: Vec<Vnf> = (1..=run.vnfs)
        .map(|i| spawn_vnf(args, &dir, i, vnf_cores))
        .collect::<Result<_, _>>()?;
    // Wait until every VNF has connected and negotiated.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !node
        .show_chains()
        .iter()
        .all(|c| c.vnfs.iter().all(|v| v.connected))
    {
        if Instant::now() > deadline {
            return Err("VNFs did not connect within 10 s".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // Skip the first interval (connection, ring fill).
    std::thread::sleep(Duration::from_millis(1500));
    let mut last = Vec::new();
    for t in 1..=args.seconds {
        std::thread::sleep(Duration::from_secs(1));
        last = node.show_chains();
        let scale = last
            .iter()
            .flat_map(|c| c.vnfs.iter().map(|v| v.rx_mpps))
            .fold(1.0, f64::max);
        println!("  t={t}s");
        for c in &last {
            for v in &c.vnfs {
                let i: usize = v.name.trim_start_matches("vnf").parse().unwrap_or(1);
                let own = vnfs.get(i - 1).map_or(0, vnf_drops);
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
                    own
                );
            }
        }
    }
    print!("{}", chains_text(&last));
    print!("{}", pmd_text(&node.show_pmd()));
    drop(vnfs);
    node.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
    Ok(last)
}

pub fn demo(args: DemoArgs) -> Result<(), String> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    for t in &args.topology {
        if t != "ns" && t != "ew" {
            return Err(format!("--topology: {t:?} is not ns or ew"));
        }
    }
    if let Some(n) = args.vnfs.iter().find(|&&n| !(1..=8).contains(&n)) {
        return Err(format!("--vnfs: {n} is not in 1..=8"));
    }
    if let Some(s) = args.sizes.iter().find(|&&s| !(64..=1518).contains(&s)) {
        return Err(format!("--sizes: {s} is not in 64..=1518"));
    }
    let switch_core = cpus - 1;
    let vnf_cores: Vec<usize> = (0..cpus.saturating_sub(1)).collect();
    println!(
        "nfvswitch demo: {cpus} CPU(s). Switch PMD busy-polls core {switch_core} (generators and sinks are its ports); \
         VNFs ({} mode, app {}) share core(s) {:?}. Cores used: {}.",
        args.poll,
        args.app,
        if vnf_cores.is_empty() {
            vec![switch_core]
        } else {
            vnf_cores.clone()
        },
        cpus
    );
    let mut summary = Vec::new();
    for topo in &args.topology {
        let topology = if topo == "ns" { "ns" } else { "ew" };
        for &n in &args.vnfs {
            for &size in &args.sizes {
                let run = Run {
                    topology,
                    vnfs: n,
                    size,
                };
                println!(
                    "\n== {} with {n} VNF(s), {size} B frames ==",
                    if topology == "ns" {
                        "north-south (PVP, VNFs in parallel)"
                    } else {
                        "east-west (chain of VNFs)"
                    }
                );
                let chains = run_one(&args, &run, switch_core, &vnf_cores)?;
                let egress: f64 = chains.iter().map(|c| c.egress_mpps).sum();
                let gbps: f64 = chains.iter().map(|c| c.egress_gbps).sum();
                let per_vnf: Vec<f64> = chains
                    .iter()
                    .flat_map(|c| c.vnfs.iter().map(|v| v.rx_mpps))
                    .collect();
                summary.push((topology, n, size, egress, gbps, per_vnf));
            }
        }
    }
    println!("\n== summary: delivered to the sinks (last second of each run) ==");
    let mut t = crate::table::Table::new(&[
        "topology",
        "VNFs",
        "frame B",
        "Mpps",
        "Gbps",
        "per-VNF rx Mpps",
    ]);
    for (topo, n, size, mpps, gbps, per) in summary {
        t.row(vec![
            topo.to_string(),
            n.to_string(),
            size.to_string(),
            format!("{mpps:.3}"),
            format!("{gbps:.2}"),
            per.iter()
                .map(|m| format!("{m:.2}"))
                .collect::<Vec<_>>()
                .join(" "),
        ]);
    }
    print!("{t}");
    Ok(())
}
