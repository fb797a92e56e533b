//! `nfvswitch demo`: the main job on a fresh machine — no root, no
//! hugepages. Starts a node in this process (generator → switch → sink),
//! shows live per-port rates and the PMD's cycles/packet, then a summary.

use crate::ctl::{pmd_text, ports_table};
use clap::Args;
use nfv_config::{NodeConfig, PmdConfig};
use nfv_control::Node;
use nfv_flow::parse_flow;
use nfv_mem::MemoryConfig;
use nfv_ports::config::{GeneratorConfig, PortConfig, PortKind};
use std::time::Duration;

#[derive(Args)]
pub struct DemoArgs {
    /// Seconds per frame size.
    #[arg(long, default_value_t = 4)]
    seconds: u64,
    /// Frame sizes to run, in bytes.
    #[arg(long, value_delimiter = ',', default_values_t = [64usize, 512, 1518])]
    sizes: Vec<usize>,
    /// Number of UDP flows the generator cycles through.
    #[arg(long, default_value_t = 1)]
    flows: u32,
}

fn node_config(size: usize, flows: u32) -> Result<NodeConfig, String> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let port = |name: &str, id, kind| PortConfig {
        name: name.into(),
        id,
        rxqs: 1,
        kind,
    };
    Ok(NodeConfig {
        source: "demo".into(),
        name: format!("demo-{}", std::process::id()),
        control_socket: None,
        memory: MemoryConfig {
            frames: 16384,
            ..Default::default()
        },
        pmd: PmdConfig::default_for(cpus),
        ports: vec![
            port(
                "gen0",
                1,
                PortKind::Generator(GeneratorConfig {
                    frame_size: size,
                    flows,
                    ..Default::default()
                }),
            ),
            port("sink0", 2, PortKind::Sink),
        ],
        chains: vec![],
        flows: vec![
            parse_flow("priority=10,in_port=1,actions=output:2").map_err(|e| e.to_string())?,
        ],
    })
}

pub fn demo(args: DemoArgs) -> Result<(), String> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "nfvswitch demo: generator -> switch -> sink, {} flow(s); {} CPU(s) here, 1 PMD thread busy-polling core {}",
        args.flows,
        cpus,
        cpus - 1
    );
    let mut summary = Vec::new();
    for &size in &args.sizes {
        let cfg = node_config(size, args.flows)?;
        let node = Node::start(&cfg).map_err(|e| e.to_string())?;
        println!("\n== {size} B frames ==");
        for s in 1..=args.seconds {
            std::thread::sleep(Duration::from_secs(1));
            let pmd = node.show_pmd();
            let ports = node.show_ports();
            let sink = ports.iter().find(|p| p.name == "sink0");
            println!(
                "t={s:>2}s  sink {:>7.3} Mpps {:>7.3} Gbps   pmd busy {:>5.1}%  {:>6} cyc/pkt ({} switch)",
                sink.map_or(0.0, |p| p.tx.mpps),
                sink.map_or(0.0, |p| p.tx.gbps),
                pmd.first().map_or(0.0, |p| p.busy_percent),
                crate::table::fmt_opt(pmd.first().and_then(|p| p.cycles_per_packet), 1),
                crate::table::fmt_opt(pmd.first().and_then(|p| p.switch_cycles_per_packet), 1),
            );
        }
        let ports = node.show_ports();
        let pmd = node.show_pmd();
        print!("{}", ports_table(&ports));
        print!("{}", pmd_text(&pmd));
        let sink = ports
            .iter()
            .find(|p| p.name == "sink0")
            .map(|p| (p.tx.mpps, p.tx.gbps))
            .unwrap_or_default();
        summary.push((size, sink, pmd.first().and_then(|p| p.cycles_per_packet)));
        node.shutdown();
    }
    println!("\n== summary (last second of each size) ==");
    let mut t = crate::table::Table::new(&["frame B", "Mpps", "Gbps", "cyc/pkt"]);
    for (size, (mpps, gbps), cyc) in summary {
        t.row(vec![
            size.to_string(),
            format!("{mpps:.3}"),
            format!("{gbps:.3}"),
            crate::table::fmt_opt(cyc, 1),
        ]);
    }
    print!("{t}");
    Ok(())
}
