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

use crate::kernel_traffic::{NsCounters, Sender, Wire, pin};
use crate::{host, proc};
use nfv_afpacket::AfPacketConfig;
use nfv_afxdp::{AfXdpConfig, XdpBindMode};
use nfv_mem::{Batch, MemoryConfig, PacketPool};
use nfv_ports::{Port, PortConfig, PortKind};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PortType {
    Afxdp,
    Afpacket,
    /// AF_XDP → a testpmd VNF behind vhost-user, copying (`kernel_vnf.rs`).
    AfxdpVnf,
    /// The same with `zero_copy` (frames land in the VNF's buffers).
    AfxdpVnfZc,
    /// A testpmd VNF (`txonly`) → AF_XDP, copying.
    VnfAfxdp,
    /// The same with the AF_XDP port's UMEM over the VNF's memory: the
    /// kernel reads each frame's tail from the VNF's transmit buffer.
    VnfAfxdpZc,
}

impl PortType {
    fn as_str(&self) -> &'static str {
        match self {
            PortType::Afxdp => "afxdp",
            PortType::Afpacket => "afpacket",
            PortType::AfxdpVnf => "afxdp-vnf",
            PortType::AfxdpVnfZc => "afxdp-vnf-zc",
            PortType::VnfAfxdp => "vnf-afxdp",
            PortType::VnfAfxdpZc => "vnf-afxdp-zc",
        }
    }

    /// The VNF hop types measure one direction: zero copy or not, and
    /// whether frames come from the VNF.
    fn vnf_hop(&self) -> Option<(bool, bool)> {
        match self {
            PortType::AfxdpVnf => Some((false, false)),
            PortType::AfxdpVnfZc => Some((true, false)),
            PortType::VnfAfxdp => Some((false, true)),
            PortType::VnfAfxdpZc => Some((true, true)),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum XdpMode {
    Auto,
    Copy,
    ZeroCopy,
}

#[derive(clap::Args)]
pub struct KernelPortArgs {
    /// Port types, comma-separated; interleaved round by round.
    /// `afxdp-vnf` / `afxdp-vnf-zc`: the AF_XDP → VNF hop, copying or
    /// zero-copy; `vnf-afxdp` / `vnf-afxdp-zc` the other way (both need
    /// dpdk-testpmd; see `kernel_vnf.rs`).
    #[arg(
        long = "type",
        value_enum,
        value_delimiter = ',',
        default_value = "afxdp"
    )]
    types: Vec<PortType>,
    /// Interleaved rounds.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Measured seconds per trial (after 0.5 s warm-up).
    #[arg(long, default_value_t = 3.0)]
    pub(crate) seconds: f64,
    /// Frame size in bytes (without FCS).
    #[arg(long, default_value_t = 64)]
    pub(crate) size: usize,
    /// Only measure one direction.
    #[arg(long, value_parser = ["rx", "tx"])]
    only: Option<String>,
    /// AF_XDP bind mode (veth is copy-only: auto falls back to copy).
    #[arg(long, value_enum, default_value = "auto")]
    xdp_mode: XdpMode,
    /// AF_XDP descriptors per ring / AF_PACKET ring frames.
    #[arg(long)]
    ring_size: Option<usize>,
    /// CPU of the port's polling thread (default: the last CPU).
    #[arg(long)]
    poll_core: Option<usize>,
    /// Pace the namespace sender (thousand frames per second): for the VNF
    /// hop types on a machine where the VNF shares the sender's CPU, so
    /// both modes carry the same load and cycles/packet compare.
    #[arg(long)]
    pub(crate) rate_kpps: Option<f64>,
    /// CPU of the namespace sender (default: the first CPU).
    #[arg(long)]
    sender_core: Option<usize>,
    /// VNF hop types: the poller waits this long between polls (as a PMD
    /// busy with its other queues would), so frames arrive in bursts of
    /// about rate x gap, and every poll's cycles count, empty ones
    /// included: work a queue does outside its packet bursts (topping up
    /// its fill ring) is then in the figure. Without it only polls that
    /// moved packets count.
    #[arg(long)]
    pub(crate) poll_gap_us: Option<u64>,
}

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

pub(crate) fn pool() -> Result<Arc<PacketPool>, String> {
    let cfg = MemoryConfig {
        frame_size: 2048,
        frames: 16384,
        ..MemoryConfig::default()
    };
    PacketPool::new("bench-kernel-port", &cfg).map_err(|e| e.to_string())
}

/// Port counters (`gauges()`) that changed between two snapshots.
pub(crate) fn moved(before: &nfv_ports::PortGauges, after: &nfv_ports::PortGauges) -> String {
    let mut out = Vec::new();
    for (k, v) in after.entries() {
        if let (Some(x), nfv_ports::Gauge::Count(y)) = (before.count(k), v)
            && y != x
        {
            out.push(format!("{k} +{}", y.wrapping_sub(x)));
        }
    }
    if out.is_empty() {
        String::new()
    } else {
        format!("; port counters: {}", out.join(", "))
    }
}

/// A polling thread: runs `burst` until stopped, publishing its packet
/// count and the TSC cycles it reported as busy (spent in bursts that
/// moved packets, as the PMD counts them).
pub(crate) struct Poller {
    stop: Arc<AtomicBool>,
    count: Arc<AtomicU64>,
    busy: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Poller {
    pub(crate) fn start(
        cpu: usize,
        burst: impl FnMut() -> (usize, u64) + Send + 'static,
    ) -> Poller {
        Poller::start_with_gap(cpu, None, burst)
    }

    /// [`Poller::start`], spinning `gap` between polls (outside the
    /// measured cycles).
    pub(crate) fn start_with_gap(
        cpu: usize,
        gap: Option<Duration>,
        mut burst: impl FnMut() -> (usize, u64) + Send + 'static,
    ) -> Poller {
        let stop = Arc::new(AtomicBool::new(false));
        let count = Arc::new(AtomicU64::new(0));
        let busy = Arc::new(AtomicU64::new(0));
        let (s, c, b) = (stop.clone(), count.clone(), busy.clone());
        let thread = std::thread::spawn(move || {
            if let Err(e) = pin(cpu) {
                eprintln!("nfv-bench: {e}; polling unpinned");
            }
            let (mut n, mut cycles) = (0u64, 0u64);
            while !s.load(Relaxed) {
                let (k, cyc) = burst();
                if let Some(gap) = gap {
                    let until = Instant::now() + gap;
                    while Instant::now() < until {
                        std::hint::spin_loop();
                    }
                }
                n += k as u64;
                cycles += cyc;
                c.store(n, Relaxed);
                b.store(cycles, Relaxed);
            }
        });
        Poller {
            stop,
            count,
            busy,
            thread: Some(thread),
        }
    }
    pub(crate) fn count(&self) -> u64 {
        self.count.load(Relaxed)
    }
    pub(crate) fn busy(&self) -> u64 {
        self.busy.load(Relaxed)
    }
}

impl Drop for Poller {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Samples `N` counters over the measured window (after a 0.5 s
/// warm-up); returns their increase per second.
pub(crate) fn measure<const N: usize>(
    secs: f64,
    mut sample: impl FnMut() -> Result<[u64; N], String>,
) -> Result<[f64; N], String> {
    proc::sleep(Duration::from_millis(500))?;
    let (t0, a) = (Instant::now(), sample()?);
    proc::sleep(Duration::from_secs_f64(secs))?;
    let b = sample()?;
    let dt = t0.elapsed().as_secs_f64();
    Ok(std::array::from_fn(|i| b[i].wrapping_sub(a[i]) as f64 / dt))
}

/// One trial's result.
pub(crate) struct Trial {
    /// rx: delivered by `rx_burst`; tx: received by the namespace end.
    pub mpps: f64,
    /// TSC cycles per packet inside the port's bursts (rx: bursts that
    /// returned packets; tx: every `tx_burst`, per accepted packet).
    pub cycles: f64,
    pub detail: String,
    /// Cache-line round trip between the two CPUs just before the trial
    /// (the vCPUs' placement: see `paired.rs`).
    pub c2c_ns: Option<f64>,
}

pub(crate) fn frame(size: usize) -> Vec<u8> {
    // Not addressed to the peer (02:00:00:00:00:02): the namespace's stack
    // drops it at once, so receiving costs the peer as little as possible.
    let g = nfv_ports::config::GeneratorConfig::default();
    nfv_ports::generator::template_of_size(&g, size)
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
    use crate::paired::{Placement, ratios_in};
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
