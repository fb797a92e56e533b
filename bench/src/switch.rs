//! `nfv-bench switch` — in-process generator → switch → sink on one PMD
//! thread, for several variants (1 rule, 1,000 rules, many flows), repeated
//! in interleaved rounds (A/B/C/A/B/C…) because these machines are noisy.
//! Each trial reads the PMD's TSC counters over a fixed window after a
//! warm-up and reports Mpps, total busy cycles/packet and "switch"
//! cycles/packet (busy cycles outside the generator's and sink's bursts:
//! key extraction, lookup, actions, batching, counters). Medians with
//! min..max; ratios against the first variant last.
//!
//! `--pmu-ab` instead measures what the PMD's PMU counters cost: the
//! 1-rule variant with counters read every ~100 ms (the default) and with
//! them switched off, interleaved A/B/A/B.

use nfv_config::NodeConfig;
use nfv_control::Node;
use std::path::PathBuf;
use std::time::{Duration, Instant};

struct Variant {
    name: &'static str,
    config: PathBuf,
    flows: u32,
}

#[derive(Clone, Copy)]
struct Trial {
    mpps: f64,
    cycles: f64,
    switch_cycles: f64,
    /// Instructions per cycle over the window (PMU on and supported).
    ipc: Option<f64>,
}

fn examples() -> PathBuf {
    crate::host::checkout().join("examples")
}

fn trial(
    v: &Variant,
    size: usize,
    core: Option<usize>,
    secs: f64,
    pmu: bool,
) -> Result<Trial, String> {
    let mut cfg: NodeConfig = nfv_config::load(&v.config).map_err(|e| e.to_string())?;
    cfg.name = format!("bench-{}", std::process::id());
    if let Some(c) = core {
        cfg.pmd.cores = vec![c];
    }
    for p in &mut cfg.ports {
        if let nfv_ports::PortKind::Generator(g) = &mut p.kind {
            g.frame_size = size;
            g.flows = v.flows;
        }
    }
    let node = Node::start(&cfg).map_err(|e| e.to_string())?;
    // Nodes start with PMU counting on; off closes the PMD's counters.
    node.datapath().set_pmu(pmu);
    std::thread::sleep(Duration::from_millis(500));
    let before = node.datapath().pmd_views()[0].clone();
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(secs));
    let after = node.datapath().pmd_views()[0].clone();
    let elapsed = t0.elapsed().as_secs_f64();
    node.shutdown();
    let d = after.stats.since(&before.stats);
    Ok(Trial {
        mpps: d.rx_packets as f64 / elapsed / 1e6,
        cycles: d.cycles_per_packet().unwrap_or(f64::NAN),
        switch_cycles: d.switch_cycles_per_packet().unwrap_or(f64::NAN),
        ipc: after.pmu.since(&before.pmu).derived().ipc.value(),
    })
}

fn median(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.total_cmp(b));
    let m = if v.len() % 2 == 1 {
        v[v.len() / 2]
    } else {
        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
    };
    (m, v[0], v[v.len() - 1])
}

pub fn switch(rounds: usize, seconds: f64, size: usize, core: Option<usize>) -> Result<(), String> {
    let variants = [
        Variant {
            name: "1 rule, 1 flow",
            config: examples().join("gen-sink.toml"),
            flows: 1,
        },
        Variant {
            name: "1000 rules, 1 flow",
            config: examples().join("gen-sink-1000-rules.toml"),
            flows: 1,
        },
        Variant {
            name: "1000 rules, 1000 flows",
            config: examples().join("gen-sink-1000-rules.toml"),
            flows: 1000,
        },
    ];
    println!(
        "nfv-bench switch: {size} B, {rounds} interleaved rounds x {seconds} s, TSC {:.3} GHz",
        nfv_tsc::hz() as f64 / 1e9
    );
    let mut results: Vec<Vec<Trial>> = vec![Vec::new(); variants.len()];
    for r in 0..rounds {
        for (i, v) in variants.iter().enumerate() {
            let t = trial(v, size, core, seconds, true)?;
            println!(
                "  round {} {:<24} {:>7.2} Mpps  {:>6.1} cyc/pkt  {:>6.1} switch cyc/pkt",
                r + 1,
                v.name,
                t.mpps,
                t.cycles,
                t.switch_cycles
            );
            results[i].push(t);
        }
    }
    println!(
        "\nvariant                    Mpps (min..max)              cyc/pkt (min..max)        switch cyc/pkt (min..max)"
    );
    let mut med = Vec::new();
    for (v, ts) in variants.iter().zip(&results) {
        let m = median(ts.iter().map(|t| t.mpps).collect());
        let c = median(ts.iter().map(|t| t.cycles).collect());
        let s = median(ts.iter().map(|t| t.switch_cycles).collect());
        println!(
            "{:<24} {:>7.2} ({:>6.2}..{:>6.2})   {:>6.1} ({:>5.1}..{:>5.1})   {:>6.1} ({:>5.1}..{:>5.1})",
            v.name, m.0, m.1, m.2, c.0, c.1, c.2, s.0, s.1, s.2
        );
        med.push((m.0, c.0, s.0));
    }
    println!("\nratios vs {:?} (medians):", variants[0].name);
    for (v, m) in variants.iter().zip(&med).skip(1) {
        println!(
            "  {:<24} Mpps x{:.2}   cyc/pkt x{:.2}   switch cyc/pkt x{:.2}",
            v.name,
            m.0 / med[0].0,
            m.1 / med[0].1,
            m.2 / med[0].2
        );
    }
    println!(
        "target: single-rule switch work <= 60 TSC cycles/packet -> {:.1} ({})",
        med[0].2,
        if med[0].2 <= 60.0 { "met" } else { "NOT met" }
    );
    Ok(())
}

/// PMU reading on vs off, 1 rule, interleaved A/B/A/B: medians and the
/// difference in switch cycles/packet.
pub fn pmu_ab(rounds: usize, seconds: f64, size: usize, core: Option<usize>) -> Result<(), String> {
    let v = Variant {
        name: "1 rule, 1 flow",
        config: examples().join("gen-sink.toml"),
        flows: 1,
    };
    println!(
        "nfv-bench switch --pmu-ab: {}, {size} B, {rounds} interleaved rounds x {seconds} s, TSC {:.3} GHz",
        v.name,
        nfv_tsc::hz() as f64 / 1e9
    );
    let modes = [("PMU on", true), ("PMU off", false)];
    let mut results: [Vec<Trial>; 2] = [Vec::new(), Vec::new()];
    for r in 0..rounds {
        for (i, (name, on)) in modes.iter().enumerate() {
            let t = trial(&v, size, core, seconds, *on)?;
            println!(
                "  round {} {:<8} {:>7.2} Mpps  {:>6.1} cyc/pkt  {:>6.1} switch cyc/pkt  IPC {}",
                r + 1,
                name,
                t.mpps,
                t.cycles,
                t.switch_cycles,
                t.ipc.map_or("-".into(), |x| format!("{x:.2}"))
            );
            results[i].push(t);
        }
    }
    println!(
        "\nmode       Mpps (min..max)              cyc/pkt (min..max)        switch cyc/pkt (min..max)"
    );
    let mut med = Vec::new();
    for ((name, _), ts) in modes.iter().zip(&results) {
        // A trial without packets means the PMD was not scheduled in its
        // window (a busy machine): it says nothing about the PMU.
        let ts: Vec<Trial> = ts
            .iter()
            .copied()
            .filter(|t| t.cycles.is_finite())
            .collect();
        if ts.is_empty() {
            return Err(format!("{name}: no trial forwarded any packet"));
        }
        let m = median(ts.iter().map(|t| t.mpps).collect());
        let c = median(ts.iter().map(|t| t.cycles).collect());
        let s = median(ts.iter().map(|t| t.switch_cycles).collect());
        println!(
            "{:<8} {:>7.2} ({:>6.2}..{:>6.2})   {:>6.1} ({:>5.1}..{:>5.1})   {:>6.1} ({:>5.1}..{:>5.1})",
            name, m.0, m.1, m.2, c.0, c.1, c.2, s.0, s.1, s.2
        );
        if ts.len() < rounds {
            println!(
                "         ({} of {rounds} trials forwarded nothing: PMD not scheduled; left out)",
                rounds - ts.len()
            );
        }
        med.push((m.0, c.0, s.0));
    }
    let pct = |on: f64, off: f64| 100.0 * (on - off) / off;
    println!(
        "\nPMU on vs off (medians): switch cyc/pkt {:+.1} %, cyc/pkt {:+.1} %, Mpps {:+.1} %",
        pct(med[0].2, med[1].2),
        pct(med[0].1, med[1].1),
        pct(med[0].0, med[1].0)
    );
    Ok(())
}
