//! `nfv-bench openflow` — what the OpenFlow agent costs and carries.
//!
//! * Packet-in rate: a generator's packets all miss to the controller
//!   (`priority=0,actions=controller:128`, the packet-in limit raised out
//!   of the way); a minimal controller in this process, on the node's
//!   `punix:` socket, counts the `PACKET_IN`s it receives per second —
//!   what OVS reports as the rate a controller sees. The switch's own
//!   counters say where the rest went (rate limit, full queue, a slow
//!   controller's send queue).
//! * Idle agent cost: `nfv-bench switch`'s 1-rule trial with no OpenFlow
//!   and with the agent listening and a controller connected and idle,
//!   interleaved A/B/A/B; medians and the difference.

use nfv_config::NodeConfig;
use nfv_control::Node;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

fn config(
    dir: &Path,
    tag: &str,
    openflow: bool,
    rate_pps: Option<u64>,
) -> Result<NodeConfig, String> {
    let path = crate::host::checkout().join("examples/gen-sink.toml");
    let mut cfg = nfv_config::load(&path).map_err(|e| e.to_string())?;
    cfg.name = format!("bench-of-{tag}-{}", std::process::id());
    cfg.control_socket = Some(dir.join(format!("{tag}.ctl")));
    cfg.api = None;
    if openflow {
        cfg.openflow.listen = vec![nfv_openflow::Target::Unix(dir.join(format!("{tag}.of")))];
        cfg.openflow.packet_in_rate = 1_000_000;
        cfg.openflow.packet_in_burst = 100_000;
    }
    if let Some(pps) = rate_pps {
        for p in &mut cfg.ports {
            if let nfv_ports::PortKind::Generator(g) = &mut p.kind {
                g.rate_pps = Some(pps);
            }
        }
    }
    Ok(cfg)
}

/// A controller that says hello, answers echoes and counts packet-ins.
struct Controller {
    packet_ins: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    stream: UnixStream,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Controller {
    fn connect(path: &Path) -> Result<Controller, String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        let stream = loop {
            match UnixStream::connect(path) {
                Ok(s) => break s,
                Err(e) if Instant::now() > deadline => {
                    return Err(format!("{}: {e}", path.display()));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        let mut w = stream.try_clone().map_err(|e| e.to_string())?;
        // HELLO, version 1.3 with a version bitmap.
        w.write_all(&[4, 0, 0, 16, 0, 0, 0, 1, 0, 1, 0, 8, 0, 0, 0, 0x10])
            .map_err(|e| e.to_string())?;
        let packet_ins = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (count, halt) = (packet_ins.clone(), stop.clone());
        // Buffered: a controller reads many messages per system call.
        let mut r = std::io::BufReader::with_capacity(
            256 * 1024,
            stream.try_clone().map_err(|e| e.to_string())?,
        );
        let thread = std::thread::spawn(move || {
            let mut buf = vec![0u8; 1 << 16];
            let mut head = [0u8; 8];
            while !halt.load(Relaxed) {
                if r.read_exact(&mut head).is_err() {
                    return;
                }
                let len = usize::from(u16::from_be_bytes([head[2], head[3]]));
                if len < 8 || r.read_exact(&mut buf[..len - 8]).is_err() {
                    return;
                }
                match head[1] {
                    10 => {
                        count.fetch_add(1, Relaxed);
                    }
                    // ECHO_REQUEST: the same back as ECHO_REPLY.
                    2 => {
                        let mut reply = head;
                        reply[1] = 3;
                        let _ = w
                            .write_all(&reply)
                            .and_then(|_| w.write_all(&buf[..len - 8]));
                    }
                    _ => {}
                }
            }
        });
        Ok(Controller {
            packet_ins,
            stop,
            stream,
            thread: Some(thread),
        })
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn tempdir() -> Result<PathBuf, String> {
    let d = std::env::temp_dir().join(format!("nfv-bench-openflow-{}", std::process::id()));
    std::fs::create_dir_all(&d).map_err(|e| e.to_string())?;
    Ok(d)
}

/// Packet-ins a connected controller receives per second, `rounds`
/// trials of `seconds`, the generator at `offered` packets a second.
pub fn packet_in_rate(rounds: usize, seconds: f64, offered: u64) -> Result<(), String> {
    let dir = tempdir()?;
    println!(
        "nfv-bench openflow --packet-in: table miss to the controller (64 B frames, {offered} offered/s), \
         packet_in_rate 1,000,000; {rounds} trials x {seconds} s"
    );
    let mut rates = Vec::new();
    for round in 0..rounds {
        let cfg = config(&dir, "pin", true, Some(offered))?;
        let node = Node::start(&cfg).map_err(|e| e.to_string())?;
        node.del_flows("").map_err(|e| e.to_string())?;
        let ctl = Controller::connect(&dir.join("pin.of"))?;
        std::thread::sleep(Duration::from_millis(300));
        node.add_flows(&["priority=0,actions=controller:128".to_string()])
            .map_err(|e| e.to_string())?;
        std::thread::sleep(Duration::from_millis(500));
        let c0 = ctl.packet_ins.load(Relaxed);
        let t0 = Instant::now();
        std::thread::sleep(Duration::from_secs_f64(seconds));
        let got = ctl.packet_ins.load(Relaxed) - c0;
        let rate = got as f64 / t0.elapsed().as_secs_f64();
        let shown = node.show_controllers();
        println!(
            "  trial {}: {:>9.0} packet-ins/s received; switch: {}",
            round + 1,
            rate,
            shown["packet_in"]
        );
        rates.push(rate);
        drop(ctl);
        node.shutdown();
    }
    rates.sort_by(|a, b| a.total_cmp(b));
    println!(
        "median {:.0} packet-ins/s (min {:.0}, max {:.0})",
        rates[rates.len() / 2],
        rates[0],
        rates[rates.len() - 1]
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// 1 rule, gen → sink: no OpenFlow vs the agent with an idle controller,
/// interleaved; switch cycles/packet medians.
pub fn idle_cost(rounds: usize, seconds: f64, core: Option<usize>) -> Result<(), String> {
    let dir = tempdir()?;
    println!(
        "nfv-bench openflow --idle-ab: 1 rule, 64 B, {rounds} interleaved rounds x {seconds} s, TSC {:.3} GHz",
        nfv_tsc::hz() as f64 / 1e9
    );
    let modes = [("no OpenFlow", false), ("agent + idle controller", true)];
    let mut cycles: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    let mut mpps: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    for r in 0..rounds {
        for (i, (name, on)) in modes.iter().enumerate() {
            let mut cfg = config(&dir, "idle", *on, None)?;
            if let Some(c) = core {
                cfg.pmd.cores = vec![c];
            }
            let node = Node::start(&cfg).map_err(|e| e.to_string())?;
            let _ctl = if *on {
                Some(Controller::connect(&dir.join("idle.of"))?)
            } else {
                None
            };
            std::thread::sleep(Duration::from_millis(500));
            let before = node.datapath().pmd_views()[0].clone();
            let t0 = Instant::now();
            std::thread::sleep(Duration::from_secs_f64(seconds));
            let after = node.datapath().pmd_views()[0].clone();
            let elapsed = t0.elapsed().as_secs_f64();
            node.shutdown();
            let d = after.stats.since(&before.stats);
            let c = d.switch_cycles_per_packet().unwrap_or(f64::NAN);
            let m = d.rx_packets as f64 / elapsed / 1e6;
            println!(
                "  round {} {:<24} {:>7.2} Mpps {:>6.1} switch cyc/pkt",
                r + 1,
                name,
                m,
                c
            );
            if c.is_finite() {
                cycles[i].push(c);
                mpps[i].push(m);
            }
        }
    }
    let med = |mut v: Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        if v.is_empty() {
            f64::NAN
        } else {
            v[v.len() / 2]
        }
    };
    let (c0, c1) = (med(cycles[0].clone()), med(cycles[1].clone()));
    let (m0, m1) = (med(mpps[0].clone()), med(mpps[1].clone()));
    println!(
        "\nmedians: no OpenFlow {c0:.1} switch cyc/pkt ({m0:.2} Mpps); agent + idle controller {c1:.1} ({m1:.2} Mpps); difference {:+.1} %",
        100.0 * (c1 - c0) / c0
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
