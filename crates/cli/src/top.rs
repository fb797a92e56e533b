//! `nfvswitch top`: a live view of a running node over its control socket,
//! in the manner of `snabb top` and OVS `dpif-netdev/pmd-perf-show`: per
//! PMD busy %, Mpps, cycles/packet and PMU figures (IPC, cache and TLB
//! misses, context switches); per port rx/tx Mpps and Gbps and drops by
//! reason; per chain and VNF rates. Every figure is the node's own rate
//! over its last one-second sampling interval.
//!
//! Redraws every `--interval` seconds (ANSI clear and home; on a terminal
//! in the alternate screen, left on Ctrl-C or SIGTERM). `--once` prints one
//! frame without escapes and exits, for scripts and tests.

use crate::ctl::{chains_text, drops_text, locate_socket};
use crate::pmu_text::{CACHE_MISS, CTX, DTLB, IPC, LLC, metric, notes};
use crate::table::{Table, fmt_opt};
use clap::Args;
use nfv_control::protocol::{ChainReport, PmdReport, PortReport};
use nfv_control::{Request, Response, request};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct TopArgs {
    /// Control socket of the node (default: $NFVSWITCH_SOCKET, the
    /// socket of --config, or the only nfvswitch socket found).
    #[arg(long, short = 's', env = "NFVSWITCH_SOCKET")]
    socket: Option<PathBuf>,
    /// Find the socket from this node config.
    #[arg(long, short = 'c')]
    config: Option<PathBuf>,
    /// Seconds between frames.
    #[arg(long, default_value_t = 1.0)]
    interval: f64,
    /// Print one frame and exit.
    #[arg(long)]
    once: bool,
}

fn call<T: serde::de::DeserializeOwned>(socket: &Path, req: &Request) -> Result<T, String> {
    match request(socket, req)? {
        Response::Ok { data } => {
            serde_json::from_value(data).map_err(|e| format!("unexpected response: {e}"))
        }
        Response::Error { message } => Err(message),
    }
}

/// Everything one frame shows.
pub struct Frame {
    pub pmds: Vec<PmdReport>,
    pub ports: Vec<PortReport>,
    /// `None` when the node cannot report chains.
    pub chains: Option<Vec<ChainReport>>,
}

impl Frame {
    pub fn fetch(socket: &Path) -> Result<Frame, String> {
        Ok(Frame {
            pmds: call(socket, &Request::ShowPmd)?,
            ports: call(socket, &Request::ShowPorts)?,
            chains: call(socket, &Request::ShowChains).ok(),
        })
    }

    pub fn render(&self, title: &str) -> String {
        let mut out = format!("{title}\n\n");
        let mut t = Table::new(&[
            "pmd",
            "core",
            "busy %",
            "Mpps",
            "cyc/pkt",
            "switch cyc/pkt",
            "pkts/iter",
            "IPC",
            "cache miss %",
            "LLC miss/pkt",
            "dTLB miss/pkt",
            "ctx sw/s",
        ]);
        for p in &self.pmds {
            let (u, d) = (&p.pmu, &p.pmu.derived);
            t.row(vec![
                p.index.to_string(),
                p.core.map_or("-".into(), |c| c.to_string()),
                format!("{:.1}", p.busy_percent),
                format!("{:.3}", p.mpps),
                fmt_opt(p.cycles_per_packet, 1),
                fmt_opt(p.switch_cycles_per_packet, 1),
                format!("{:.1}", p.packets_per_batch),
                metric(u, &d.ipc, IPC, 2),
                metric(u, &d.cache_miss_pct, CACHE_MISS, 2),
                metric(u, &d.llc_misses_per_pkt, LLC, 3),
                metric(u, &d.dtlb_misses_per_pkt, DTLB, 3),
                metric(u, &d.context_switches_per_s, CTX, 1),
            ]);
        }
        out.push_str(&t.to_string());
        out.push_str(&notes(&self.pmds));
        out.push('\n');

        let mut t = Table::new(&[
            "port", "name", "type", "rx Mpps", "rx Gbps", "tx Mpps", "tx Gbps", "rx drops",
            "tx drops",
        ]);
        for p in &self.ports {
            t.row(vec![
                p.no.to_string(),
                p.name.clone(),
                p.type_name.clone(),
                format!("{:.3}", p.rx.mpps),
                format!("{:.3}", p.rx.gbps),
                format!("{:.3}", p.tx.mpps),
                format!("{:.3}", p.tx.gbps),
                drops_text(&p.rx.drops),
                drops_text(&p.tx.drops),
            ]);
        }
        out.push_str(&t.to_string());
        out.push_str("(drops: totals by reason)\n\n");
        match &self.chains {
            Some(c) => out.push_str(&chains_text(c)),
            None => out.push_str("chains: not reported by this node\n"),
        }
        out
    }
}

/// Hours, minutes and seconds of the UTC day.
fn clock() -> String {
    let s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format!("{:02}:{:02}:{:02} UTC", s / 3600 % 24, s / 60 % 60, s % 60)
}

/// Leaves the alternate screen however `top` ends.
struct Screen {
    alternate: bool,
}

impl Screen {
    fn enter(alternate: bool) -> Screen {
        if alternate {
            print!("\x1b[?1049h");
        }
        Screen { alternate }
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        if self.alternate {
            print!("\x1b[?1049l");
            let _ = std::io::stdout().flush();
        }
    }
}

pub fn top(args: TopArgs) -> Result<(), String> {
    if !(args.interval > 0.0 && args.interval.is_finite()) {
        return Err(format!(
            "--interval {}: must be a positive number of seconds",
            args.interval
        ));
    }
    let socket = locate_socket(args.socket.as_deref(), args.config.as_deref())?;
    if !socket.exists() {
        return Err(format!(
            "no control socket at {}: is the node running? (start one with `nfvswitch run NODE.toml`)",
            socket.display()
        ));
    }
    let title = |when: &str| {
        format!(
            "nfvswitch top — {} — {when} — rates over the node's last second",
            socket.display()
        )
    };
    if args.once {
        print!("{}", Frame::fetch(&socket)?.render(&title(&clock())));
        return Ok(());
    }

    // Ctrl-C and SIGTERM end the loop (and restore the screen) instead of
    // killing the process mid-frame.
    let signals = crate::run::block_shutdown_signals();
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        std::thread::Builder::new()
            .name("top-signals".into())
            .spawn(move || {
                let _ = signals.wait();
                stop.store(true, Ordering::Relaxed);
            })
            .map_err(|e| e.to_string())?;
    }
    let tty = std::io::stdout().is_terminal();
    let screen = Screen::enter(tty);
    let period = Duration::from_secs_f64(args.interval);
    let mut result = Ok(());
    while !stop.load(Ordering::Relaxed) {
        let started = Instant::now();
        let frame = match Frame::fetch(&socket) {
            Ok(f) => f,
            Err(e) => {
                result = Err(format!("node went away: {e}"));
                break;
            }
        };
        let text = frame.render(&title(&format!(
            "{} — every {} s, Ctrl-C quits",
            clock(),
            args.interval
        )));
        let mut out = std::io::stdout().lock();
        let ok = if tty {
            write!(out, "\x1b[H\x1b[2J{text}")
        } else {
            writeln!(out, "{text}")
        }
        .and_then(|()| out.flush());
        drop(out);
        if ok.is_err() {
            break; // stdout closed (e.g. `| head`): nothing left to show
        }
        while !stop.load(Ordering::Relaxed) && started.elapsed() < period {
            std::thread::sleep(Duration::from_millis(50).min(period));
        }
    }
    drop(screen);
    result
}
