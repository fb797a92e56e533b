//! What every trial of `nfv-bench kernel-port` is built from, whichever
//! way it measures (a port's rx or tx in `kernel_port.rs`, the VNF hops in
//! `kernel_vnf.rs`): the command's arguments, the packet pool, the pinned
//! polling thread, the measured window, the port counters that moved, the
//! frame sent and the trial's result.

use crate::kernel_traffic::pin;
use crate::proc;
use nfv_mem::{MemoryConfig, PacketPool};
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
    pub(crate) fn as_str(&self) -> &'static str {
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
    pub(crate) fn vnf_hop(&self) -> Option<(bool, bool)> {
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
    pub(crate) types: Vec<PortType>,
    /// Interleaved rounds.
    #[arg(long, default_value_t = 3)]
    pub(crate) rounds: usize,
    /// Measured seconds per trial (after 0.5 s warm-up).
    #[arg(long, default_value_t = 3.0)]
    pub(crate) seconds: f64,
    /// Frame size in bytes (without FCS).
    #[arg(long, default_value_t = 64)]
    pub(crate) size: usize,
    /// Only measure one direction.
    #[arg(long, value_parser = ["rx", "tx"])]
    pub(crate) only: Option<String>,
    /// AF_XDP bind mode (veth is copy-only: auto falls back to copy).
    #[arg(long, value_enum, default_value = "auto")]
    pub(crate) xdp_mode: XdpMode,
    /// AF_XDP descriptors per ring / AF_PACKET ring frames.
    #[arg(long)]
    pub(crate) ring_size: Option<usize>,
    /// CPU of the port's polling thread (default: the last CPU).
    #[arg(long)]
    pub(crate) poll_core: Option<usize>,
    /// Pace the namespace sender (thousand frames per second): for the VNF
    /// hop types on a machine where the VNF shares the sender's CPU, so
    /// both modes carry the same load and cycles/packet compare.
    #[arg(long)]
    pub(crate) rate_kpps: Option<f64>,
    /// CPU of the namespace sender (default: the first CPU).
    #[arg(long)]
    pub(crate) sender_core: Option<usize>,
    /// VNF hop types: the poller waits this long between polls (as a PMD
    /// busy with its other queues would), so frames arrive in bursts of
    /// about rate x gap, and every poll's cycles count, empty ones
    /// included: work a queue does outside its packet bursts (topping up
    /// its fill ring) is then in the figure. Without it only polls that
    /// moved packets count.
    #[arg(long)]
    pub(crate) poll_gap_us: Option<u64>,
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
