//! `nfv-bench kernel-port` — rx and tx Mpps of ports on a kernel interface
//! (AF_XDP, AF_PACKET) over a veth pair, the other end in a namespace
//! ([`crate::kernel_traffic`]). The port's queue is driven directly by one
//! pinned polling thread, as a PMD would, without the switch around it:
//!
//! * rx: a sender in the namespace blasts frames (AF_PACKET, qdisc
//!   bypass, `sendmmsg`) at the port's interface; the poller counts what
//!   `rx_burst` returns.
//! * tx: the poller fills bursts of 32 packets and calls `tx_burst`; the
//!   figure is what the namespace end received (its `rx_packets`).
//!
//! Besides Mpps, each trial reports the port's own cost: TSC cycles per
//! packet spent inside `rx_burst` calls that returned packets, or inside
//! `tx_burst` calls per accepted packet — comparable between port types
//! even when the namespace side, not the port, limits the rate (on veth
//! the sender usually does for rx).
//!
//! Types are interleaved round by round (A rx, A tx, B rx, B tx, A rx, …)
//! on a fresh veth pair each trial, each trial after waiting for the
//! machine to be quiet (at most 60 s; the load of other processes during
//! the trial is printed); medians with min..max at the end. Counters of
//! the port that moved during a trial (the kernel's drops) are printed
//! with it.

use crate::kernel_traffic::{NsCounters, Sender, Wire};
use crate::kernel_trial::{Poller, PortType, Trial, XdpMode, frame, measure, moved, pool};
use crate::{host, proc};
use nfv_afpacket::AfPacketConfig;
use nfv_afxdp::{AfXdpConfig, XdpBindMode};
use nfv_mem::Batch;
use nfv_ports::{Port, PortConfig, PortKind};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

pub use crate::kernel_trial::KernelPortArgs;

fn open(ty: PortType, iface: &str, a: &KernelPortArgs) -> Result<Arc<dyn Port>, String> {
    let kind = match ty {
        PortType::Afxdp
        | PortType::AfxdpVnf
        | PortType::AfxdpVnfZc
        | PortType::VnfAfxdp
        | PortType::VnfAfxdpZc => {
            let mut c = AfXdpConfig::new(iface);
            c.mode = match a.xdp_mode {
                XdpMode::Auto => XdpBindMode::Auto,
                XdpMode::Copy => XdpBindMode::Copy,
                XdpMode::ZeroCopy => XdpBindMode::ZeroCopy,
            };
            if let Some(r) = a.ring_size {
                c.ring_size = r;
            }
            PortKind::typed(c)
        }
        PortType::Afpacket => {
            let mut c = AfPacketConfig::new(iface);
            if let Some(r) = a.ring_size {
                c.ring_size = r;
            }
            PortKind::typed(c)
        }
    };
    let cfg = PortConfig {
        name: format!("bench-{}", ty.as_str()),
        id: 1,
        rxqs: 1,
        kind,
    };
    match ty {
        PortType::Afpacket => nfv_afpacket::open(&cfg).map_err(|e| e.to_string()),
        _ => nfv_afxdp::open(&cfg).map_err(|e| e.to_string()),
    }
}

/// rx Mpps (delivered by `rx_burst`), the sender's Mpps and the port's
/// busy cycles per packet (in `rx_burst` calls that returned packets).
fn rx_trial(ty: PortType, a: &KernelPortArgs, cores: (usize, usize)) -> Result<Trial, String> {
    let wire = Wire::new()?;
    let port = open(ty, wire.host(), a)?;
    let pool = pool()?;
    let mut rxq = port.open_rxq(0);
    let mut cache = pool.cache();
    let poller = Poller::start(cores.0, move || {
        let mut b = Batch::new();
        let t0 = nfv_tsc::now();
        let n = rxq.rx_burst(&mut b, &mut cache);
        let busy = if n > 0 { nfv_tsc::now() - t0 } else { 0 };
        cache.free_batch(&mut b);
        (n, busy)
    });
    let sender = Sender::start(
        wire.ns.name(),
        &wire.veth.inner,
        frame(a.size),
        Some(cores.1),
    )?;
    let before = port.gauges();
    let [rx, busy, offered] = measure(a.seconds, || {
        Ok([poller.count(), poller.busy(), sender.sent()])
    })?;
    let after = port.gauges();
    sender.stop()?;
    drop(poller);
    Ok(Trial {
        mpps: rx / 1e6,
        cycles: busy / rx,
        detail: format!(
            "sender offered {:.3} Mpps{}",
            offered / 1e6,
            moved(&before, &after)
        ),
        c2c_ns: None,
    })
}

/// tx Mpps (received by the namespace end), what `tx_burst` accepted, and
/// the port's cycles per accepted packet (in `tx_burst` calls).
fn tx_trial(ty: PortType, a: &KernelPortArgs, cores: (usize, usize)) -> Result<Trial, String> {
    let wire = Wire::new()?;
    let port = open(ty, wire.host(), a)?;
    let pool = pool()?;
    let mut txq = port.open_txq(0);
    let mut cache = pool.cache();
    let f = frame(a.size);
    let mut peer = NsCounters::open(wire.ns.name(), &wire.veth.inner)?;
    let poller = Poller::start(cores.0, move || {
        let mut b = Batch::new();
        cache.alloc_into(&mut b, nfv_mem::BATCH);
        for p in b.iter_mut() {
            let _ = p.set_len(f.len());
            p.data_mut().copy_from_slice(&f);
        }
        let t0 = nfv_tsc::now();
        let n = txq.tx_burst(&mut b, &mut cache);
        let busy = nfv_tsc::now() - t0;
        cache.free_batch(&mut b);
        (n, busy)
    });
    let before = port.gauges();
    let drops0 = peer.rx_dropped()?;
    let [delivered, accepted, busy] = measure(a.seconds, || {
        Ok([peer.rx_packets()?, poller.count(), poller.busy()])
    })?;
    let after = port.gauges();
    let drops = peer.rx_dropped()? - drops0;
    drop(poller);
    Ok(Trial {
        mpps: delivered / 1e6,
        cycles: busy / accepted,
        detail: format!(
            "tx_burst accepted {:.3} Mpps, peer rx drops {drops}{}",
            accepted / 1e6,
            moved(&before, &after)
        ),
        c2c_ns: None,
    })
}

/// Median (min..max).
fn stats(mut v: Vec<f64>, unit: &str, prec: usize) -> String {
    if v.is_empty() {
        return "-".into();
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let m = if v.len() % 2 == 1 {
        v[v.len() / 2]
    } else {
        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
    };
    let unit = if unit.is_empty() {
        String::new()
    } else {
        format!(" {unit}")
    };
    format!(
        "{m:.prec$}{unit} ({:.prec$}..{:.prec$})",
        v[0],
        v[v.len() - 1]
    )
}

pub fn kernel_port(a: KernelPortArgs) -> Result<(), String> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cores = (a.poll_core.unwrap_or(cpus - 1), a.sender_core.unwrap_or(0));
    println!(
        "kernel-port: {} B frames over veth, {} s per trial, {} round(s); poller on cpu {}, \
         namespace sender on cpu {}",
        a.size, a.seconds, a.rounds, cores.0, cores.1
    );
    let dirs: Vec<&str> = match a.only.as_deref() {
        Some(d) => vec![d],
        None => vec!["rx", "tx"],
    };
    let mut results: BTreeMap<(usize, &str), Vec<(usize, Trial)>> = BTreeMap::new();
    for round in 1..=a.rounds {
        for (i, &ty) in a.types.iter().enumerate() {
            let dirs: Vec<&str> = if ty.vnf_hop().is_some() {
                vec!["vnf"]
            } else {
                dirs.clone()
            };
            for &dir in &dirs {
                proc::check()?;
                // A compile job on a 2-vCPU box halves a poller: wait.
                host::wait_quiet(25.0, Duration::from_secs(60))?;
                let c2c_ns = host::cache_line_round_trip_ns(cores.0, cores.1);
                let load = host::CpuLoad::start(&[std::process::id()]);
                let r = match (ty.vnf_hop(), dir) {
                    (Some((zc, from_vnf)), _) => {
                        crate::kernel_vnf::vnf_trial(zc, from_vnf, &a, cores)
                    }
                    (None, "rx") => rx_trial(ty, &a, cores),
                    _ => tx_trial(ty, &a, cores),
                };
                match r {
                    Ok(mut t) => {
                        t.c2c_ns = c2c_ns;
                        let (other, steal) = load.end(&[std::process::id()]);
                        println!(
                            "round {round}: {:<8} {dir} {:7.3} Mpps {:6.0} cyc/pkt  ({}; other \
                             processes {other:.0} % CPU, steal {steal:.0} %, c2c {} ns)",
                            ty.as_str(),
                            t.mpps,
                            t.cycles,
                            t.detail,
                            c2c_ns.map_or("-".into(), |c| format!("{c:.0}"))
                        );
                        results.entry((i, dir)).or_default().push((round, t));
                    }
                    Err(e) => {
                        proc::check()?;
                        println!("round {round}: {:<8} {dir} failed: {e}", ty.as_str());
                    }
                }
            }
        }
    }
    println!(
        "\nmedians (min..max), {} B frames, veth, TSC {:.2} GHz:",
        a.size,
        nfv_tsc::hz() as f64 / 1e9
    );
    for (i, ty) in a.types.iter().enumerate() {
        for &dir in &dirs_of(*ty, &dirs) {
            let v = results.get(&(i, dir)).map_or(&[][..], |v| &v[..]);
            println!(
                "  {:<8} {dir}: {}   {}",
                ty.as_str(),
                stats(v.iter().map(|(_, t)| t.mpps).collect(), "Mpps", 3),
                stats(v.iter().map(|(_, t)| t.cycles).collect(), "cyc/pkt", 0)
            );
        }
    }
    print_paired(&a.types, &dirs, &results);
    Ok(())
}

fn dirs_of<'a>(ty: PortType, dirs: &[&'a str]) -> Vec<&'a str> {
    if ty.vnf_hop().is_some() {
        vec!["vnf"]
    } else {
        dirs.to_vec()
    }
}

/// Each type's cycles and Mpps over the first type's, from trials of
/// one round (they ran back to back) that saw the same vCPU placement
/// (see `paired.rs`: on these VMs a far placement can triple a hop's
/// cycles, which swamps any difference between port types).
fn print_paired(
    types: &[PortType],
    dirs: &[&str],
    results: &BTreeMap<(usize, &str), Vec<(usize, Trial)>>,
) {
    use crate::paired::ratios_in;
    use crate::placement::Placement;
    let Some(first) = types.first() else {
        return;
    };
    let mut lines = Vec::new();
    for (i, ty) in types.iter().enumerate().skip(1) {
        for &dir in &dirs_of(*ty, dirs) {
            let (Some(a), Some(b)) = (results.get(&(i, dir)), results.get(&(0, dir))) else {
                continue;
            };
            let pairs: Vec<(&Trial, &Trial)> = a
                .iter()
                .filter_map(|(round, x)| Some((x, &b.iter().find(|(r, _)| r == round)?.1)))
                .collect();
            for placement in [Placement::Near, Placement::Far] {
                let c2c = |t: &Trial| t.c2c_ns;
                let cyc = ratios_in(&pairs, placement, c2c, |t| Some(t.cycles));
                let mpps = ratios_in(&pairs, placement, c2c, |t| Some(t.mpps));
                if !cyc.is_empty() {
                    lines.push(format!(
                        "  {} / {} {dir}, {} vCPUs, {} pair(s): cycles {}, Mpps {}",
                        ty.as_str(),
                        first.as_str(),
                        placement.name(),
                        cyc.len(),
                        stats(cyc, "", 2),
                        stats(mpps, "", 2)
                    ));
                }
            }
        }
    }
    if types.len() > 1 {
        println!("\nratios of paired trials (same round, same vCPU placement), median (min..max):");
        if lines.is_empty() {
            println!("  (no pair of trials saw the same placement)");
        }
        for l in lines {
            println!("{l}");
        }
    }
}
