//! `nfvswitch vnf`: the built-in VNF, a virtio-net driver in its own
//! process (like DPDK virtio-user) running io, macswap or l2fwd between its
//! rx and tx virtqueues. The work is done by `nfv-vnf`; this file maps
//! flags to its options, handles signals and prints the final counters.

use clap::Args;
use nfv_vnf::{VnfConfig, VnfOptions, VnfStats};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

#[derive(Args)]
pub struct VnfArgs {
    /// The switch's vhost-user socket (client mode) or the one to listen
    /// on (server mode).
    #[arg(long, required_unless_present = "memif", conflicts_with = "memif")]
    socket: Option<PathBuf>,
    /// Reach the switch over memif instead: the switch's memif port socket
    /// (a path, or @name for an abstract one). The VNF is the memif client.
    #[arg(long, value_name = "SOCKET")]
    memif: Option<PathBuf>,
    /// The memif interface id to ask for (the port's `interface_id`).
    #[arg(long, default_value_t = 0, requires = "memif")]
    memif_id: u32,
    /// client: connect to the switch, retrying until the socket appears;
    /// server: listen and let the switch connect (testpmd `server=1`).
    #[arg(long, default_value = "client", value_parser = ["client", "server"])]
    mode: String,
    /// What to do with each packet: io (forward unchanged), macswap (swap
    /// MACs), l2fwd (dst := --next-hop, src := --mac).
    #[arg(long, default_value = "io", value_parser = ["io", "macswap", "l2fwd"])]
    app: String,
    /// Destination MAC for --app l2fwd.
    #[arg(long)]
    next_hop: Option<String>,
    /// The VNF's own MAC (default: derived from the socket path).
    #[arg(long)]
    mac: Option<String>,
    /// Queue pairs (rx virtqueue 2i, tx virtqueue 2i+1).
    #[arg(long, default_value_t = 1)]
    queues: u32,
    /// Descriptors per virtqueue (power of two).
    #[arg(long, default_value_t = 1024)]
    ring_size: u32,
    /// Ask for VIRTIO_NET_F_MRG_RXBUF.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    mrg_rxbuf: bool,
    /// Use packed virtqueues (VIRTIO_F_RING_PACKED; the switch must offer
    /// them) instead of split ones.
    #[arg(long)]
    packed: bool,
    /// busy: spin; adaptive: spin while packets flow, sleep on the call
    /// eventfd when idle.
    #[arg(long, default_value = "adaptive", value_parser = ["busy", "adaptive"])]
    poll: String,
    /// Empty polls in a row before an adaptive VNF sleeps.
    #[arg(long, default_value_t = 1000)]
    idle_polls: u32,
    /// Print a stats line every SECS seconds (0: only the final counters).
    #[arg(long, default_value_t = 1.0, value_name = "SECS")]
    stats_every: f64,
    /// Pin the poll thread to this CPU.
    #[arg(long)]
    cpu: Option<usize>,
    /// Stop by itself after this many seconds.
    #[arg(long, value_name = "SECS")]
    exit_after: Option<f64>,
    /// Write the counters as JSON to FILE (replaced every interval).
    #[arg(long, value_name = "FILE")]
    json_stats: Option<PathBuf>,
}

impl From<VnfArgs> for VnfOptions {
    fn from(a: VnfArgs) -> VnfOptions {
        VnfOptions {
            socket: a.socket.unwrap_or_default(),
            memif: a.memif,
            memif_id: a.memif_id,
            mode: a.mode,
            app: a.app,
            next_hop: a.next_hop,
            mac: a.mac,
            queues: a.queues,
            ring_size: a.ring_size,
            mrg_rxbuf: a.mrg_rxbuf,
            packed: a.packed,
            poll: a.poll,
            idle_polls: a.idle_polls,
            stats_every: a.stats_every,
            cpu: a.cpu,
            exit_after: a.exit_after,
            json_stats: a.json_stats,
        }
    }
}

pub fn vnf(args: VnfArgs) -> Result<(), String> {
    let cfg = VnfConfig::try_from(VnfOptions::from(args)).map_err(|e| e.to_string())?;
    // SIGINT/SIGTERM are blocked here (and in the threads started later)
    // and taken by a waiter thread that asks the poll loop to stop.
    let signals = crate::run::block_shutdown_signals();
    static STOP: AtomicBool = AtomicBool::new(false);
    std::thread::Builder::new()
        .name("vnf-signals".into())
        .spawn(move || {
            if let Ok(sig) = signals.wait() {
                tracing::info!("{sig:?}: stopping");
                STOP.store(true, Ordering::Relaxed);
            }
        })
        .map_err(|e| e.to_string())?;
    let stats = Arc::new(VnfStats::new(cfg.queues as usize));
    let started = Instant::now();
    let app = cfg.app.name();
    let r = nfv_vnf::run(&cfg, &STOP, &stats);
    // Final counters even after an error: they say what got through.
    print!(
        "{}",
        nfv_vnf::stats::final_report(app, &stats.snapshot(), started.elapsed())
    );
    r.map(|_| ()).map_err(|e| e.to_string())
}
