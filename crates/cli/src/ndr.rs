//! `nfvswitch ndr`: an RFC 2544 throughput search in this process. Starts
//! the node of a config (the generator idle), then for each trial offers
//! a rate from the generator for `--trial-secs`, counts what the receiver
//! got (`nfv_control::trial`) and bisects to NDR (no loss) and PDR
//! (≤ `--pdr-loss` %). Progress goes to stderr, the result to stdout.

use clap::Args;
use nfv_config::NodeConfig;
use nfv_control::trial::{TrialOutcome, TrialRunner};
use nfv_control::{ControlServer, Node};
use nfv_ports::PortKind;
use nfv_traffic::LatencySummary;
use nfv_traffic::search::{Bounds, Found, Progress, Resolution, SearchConfig, search};
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Args)]
pub struct NdrArgs {
    /// Node config (TOML) with the generator, the receiver and the rules
    /// between them.
    config: PathBuf,
    /// The generator port (name or number); it must have `stamp = true`.
    #[arg(long)]
    generator: String,
    /// The receiver port (name or number).
    #[arg(long)]
    receiver: String,
    /// Length of each trial in seconds.
    #[arg(long, default_value_t = 2.0)]
    trial_secs: f64,
    /// Stop when NDR and PDR are known this closely: packets per second
    /// ("5000") or percent of the maximum rate ("0.5%").
    #[arg(long, default_value = "0.5%", value_parser = parse_resolution)]
    resolution: Resolution,
    /// Highest rate to try (packets per second). Default: the rate the
    /// switch forwards unthrottled, measured first, plus 5 %.
    #[arg(long)]
    max_rate_pps: Option<u64>,
    /// Lowest rate to try (packets per second).
    #[arg(long, default_value_t = 1000)]
    min_rate_pps: u64,
    /// Loss PDR tolerates, in percent.
    #[arg(long, default_value_t = 0.5)]
    pdr_loss: f64,
    /// Packets the generator may fall behind the offered rate before it
    /// drops the excess, like a NIC rx ring (0 = never drop).
    #[arg(long, default_value_t = 4096)]
    backlog: u64,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

fn parse_resolution(s: &str) -> Result<Resolution, String> {
    let (num, pct) = match s.trim().strip_suffix('%') {
        Some(n) => (n, true),
        None => (s.trim(), false),
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number of packets/s or a percentage like 0.5%"))?;
    if !(v > 0.0 && v.is_finite()) || (pct && v > 100.0) {
        return Err(format!("{s:?} is out of range"));
    }
    Ok(if pct {
        Resolution::Percent(v)
    } else {
        Resolution::Pps(v)
    })
}

/// Checks the two ports and makes the generator start idle; returns the
/// generator's mean frame size and line rate.
fn prepare(cfg: &mut NodeConfig, args: &NdrArgs) -> Result<(f64, f64), String> {
    let find = |want: &str| {
        cfg.ports
            .iter()
            .position(|p| p.name == want || p.id.to_string() == want)
            .ok_or_else(|| format!("{}: no port {want:?}", args.config.display()))
    };
    let rx = find(&args.receiver)?;
    if cfg.ports[rx].kind != PortKind::Receiver {
        return Err(format!(
            "port {:?} is of type {:?}; --receiver needs a port of type \"receiver\"",
            cfg.ports[rx].name,
            cfg.ports[rx].kind.type_name()
        ));
    }
    let g = find(&args.generator)?;
    let name = cfg.ports[g].name.clone();
    let PortKind::Generator(gen_cfg) = &mut cfg.ports[g].kind else {
        return Err(format!(
            "port {name:?} is of type {:?}; --generator needs a port of type \"generator\"",
            cfg.ports[g].kind.type_name()
        ));
    };
    if !gen_cfg.stamp {
        return Err(format!(
            "generator {name:?} does not stamp its frames; set `stamp = true` on it"
        ));
    }
    gen_cfg.count = Some(0);
    gen_cfg.rate_pps = None;
    gen_cfg.rate_percent = None;
    Ok((gen_cfg.mean_frame_size(), gen_cfg.line_rate_gbps))
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

fn latency_text(l: &Option<LatencySummary>) -> String {
    match l {
        Some(l) => format!(
            "latency us min {:.2} mean {:.2} p50 {:.2} p99 {:.2} p99.9 {:.2} max {:.2}",
            us(l.min_ns),
            l.mean_ns / 1e3,
            us(l.p50_ns),
            us(l.p99_ns),
            us(l.p999_ns),
            us(l.max_ns)
        ),
        None => "no latency samples".into(),
    }
}

fn bounds_text(b: &Bounds) -> String {
    let f = |x: Option<f64>| x.map_or("-".into(), |r| format!("{:.4}", r / 1e6));
    format!("[{}, {}) Mpps", f(b.pass), f(b.fail))
}

pub fn ndr(args: NdrArgs) -> Result<(), String> {
    check_args(&args)?;
    let mut cfg = nfv_config::load(&args.config).map_err(|e| e.to_string())?;
    let (mean, line_gbps) = prepare(&mut cfg, &args)?;
    let node = Node::start(&cfg).map_err(|e| format!("{}: {e}", args.config.display()))?;
    let _server = control_server(&cfg, &node);
    let result = run_search(&node, &args, mean, line_gbps);
    node.shutdown();
    let (search_result, outcomes) = result?;
    let report = Report {
        args: &args,
        mean,
        line_gbps,
        result: &search_result,
        outcomes: &outcomes,
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report.json()).unwrap_or_default()
        );
    } else {
        print!("{}", report.text());
    }
    Ok(())
}

fn check_args(args: &NdrArgs) -> Result<(), String> {
    if !(args.trial_secs > 0.0 && args.trial_secs <= 3600.0) {
        return Err("--trial-secs must be above 0 and at most 3600".into());
    }
    if !(args.pdr_loss >= 0.0 && args.pdr_loss < 100.0) {
        return Err("--pdr-loss must be a percentage in 0..100".into());
    }
    Ok(())
}

/// Serves the node's control socket while the search runs (`None`, with
/// a word on stderr, when it cannot).
fn control_server(cfg: &NodeConfig, node: &Arc<Node>) -> Option<ControlServer> {
    let socket = cfg
        .control_socket
        .clone()
        .unwrap_or_else(|| nfv_control::default_socket(&cfg.name));
    match ControlServer::start(&socket, node.clone(), cfg.access.group.as_deref()) {
        Ok(s) => {
            eprintln!(
                "control socket {} (try: nfvswitch ctl show traffic)",
                socket.display()
            );
            Some(s)
        }
        Err(e) => {
            eprintln!(
                "no control socket ({}: {e}); running without",
                socket.display()
            );
            None
        }
    }
}

/// A finished search, for stdout.
struct Report<'a> {
    args: &'a NdrArgs,
    /// The generator's mean frame size, bytes.
    mean: f64,
    line_gbps: f64,
    result: &'a nfv_traffic::SearchResult,
    /// Of each trial of `result`, in order.
    outcomes: &'a [TrialOutcome],
}

impl Report<'_> {
    /// The trial that found `f`.
    fn outcome(&self, f: &Option<Found>) -> Option<&TrialOutcome> {
        let f = f.as_ref()?;
        let i = self
            .result
            .trials
            .iter()
            .position(|(t, r)| t.rate_pps == f.rate_pps && *r == f.result)?;
        self.outcomes.get(i)
    }

    /// NDR, PDR and how they were found.
    fn text(&self) -> String {
        let args = self.args;
        format!(
            "{}\n{}\n({} trials of {} s; frames of {:.1} B mean; the wire adds 24 B per frame)\n",
            self.line("NDR (0 loss)       ", &self.result.ndr),
            self.line(
                &format!("PDR (<= {} % loss)", args.pdr_loss),
                &self.result.pdr
            ),
            self.result.trials.len(),
            args.trial_secs,
            self.mean
        )
    }

    /// One rate found (or not).
    fn line(&self, what: &str, f: &Option<Found>) -> String {
        let line_gbps = self.line_gbps;
        match f {
            Some(f) => {
                let (l2, wire) = nfv_traffic::mix::gbps(f.rate_pps, self.mean);
                format!(
                    "{what} {:>9.4} Mpps  {:>7.3} Gbps ({:>7.3} Gbps on the wire, {:.2} % of {line_gbps} Gbps)  lost {} of {}  {}",
                    f.rate_pps / 1e6,
                    l2,
                    wire,
                    100.0 * wire / line_gbps,
                    f.result.lost(),
                    f.result.sent,
                    latency_text(&self.outcome(&Some(*f)).and_then(|o| o.latency))
                )
            }
            None => format!(
                "{what} not found: even {} pps lost too much",
                self.args.min_rate_pps
            ),
        }
    }

    fn json(&self) -> serde_json::Value {
        let j = |f: &Option<Found>| {
            f.map(|f| {
                let (l2, wire) = nfv_traffic::mix::gbps(f.rate_pps, self.mean);
                serde_json::json!({
                    "rate_pps": f.rate_pps, "gbps": l2, "wire_gbps": wire,
                    "sent": f.result.sent, "received": f.result.received,
                    "latency_ns": self.outcome(&Some(f)).and_then(|o| o.latency),
                })
            })
        };
        let trials: Vec<_> = self
            .result
            .trials
            .iter()
            .map(|(t, r)| {
                serde_json::json!({"goal": t.goal.as_str(), "rate_pps": t.rate_pps,
                    "sent": r.sent, "received": r.received})
            })
            .collect();
        serde_json::json!({
            "ndr": j(&self.result.ndr), "pdr": j(&self.result.pdr),
            "mean_frame_bytes": self.mean, "trial_secs": self.args.trial_secs, "trials": trials,
        })
    }
}

type Searched = (nfv_traffic::SearchResult, Vec<TrialOutcome>);

fn run_search(node: &Node, args: &NdrArgs, mean: f64, line_gbps: f64) -> Result<Searched, String> {
    let mut runner =
        TrialRunner::new(node, &args.generator, &args.receiver).map_err(|e| e.to_string())?;
    runner.backlog_limit = args.backlog;
    let max_rate = match args.max_rate_pps {
        Some(m) => m as f64,
        None => {
            let secs = args.trial_secs.min(1.0);
            eprintln!("measuring the unthrottled rate for {secs} s ...");
            let r = runner.max_rate(secs);
            eprintln!(
                "unthrottled: {:.4} Mpps; searching up to {:.4} Mpps",
                r / 1e6,
                r * 1.05 / 1e6
            );
            (r * 1.05).round()
        }
    };
    let min_rate = args.min_rate_pps as f64;
    if max_rate <= min_rate {
        return Err(format!(
            "the maximum rate ({max_rate} pps) is not above --min-rate-pps ({min_rate})"
        ));
    }
    let cfg = SearchConfig {
        min_rate,
        max_rate,
        resolution: args.resolution,
        trial_secs: args.trial_secs,
        ndr_loss: 0.0,
        pdr_loss: args.pdr_loss / 100.0,
    };
    let mut outcomes = Vec::new();
    let result = search(
        &cfg,
        |t| {
            let o = runner.run(t.rate_pps, t.secs);
            eprintln!(
                "    sent {} received {} lost {} ({:.4} %), missed {}, reordered {}, {}",
                o.result.sent,
                o.result.received,
                o.result.lost(),
                100.0 * o.result.loss_ratio(),
                o.missed,
                o.reordered,
                latency_text(&o.latency)
            );
            let r = o.result;
            outcomes.push(o);
            r
        },
        |p| match p {
            Progress::Start(t) => {
                let (_, wire) = nfv_traffic::mix::gbps(t.rate_pps, mean);
                eprintln!(
                    "trial {:>2} [{}] {:.4} Mpps ({:.2} % of {line_gbps} Gbps) for {} s",
                    t.index,
                    t.goal.as_str(),
                    t.rate_pps / 1e6,
                    100.0 * wire / line_gbps,
                    t.secs
                );
            }
            Progress::Done { ndr, pdr, .. } => {
                eprintln!(
                    "    NDR in {}  PDR in {}",
                    bounds_text(ndr),
                    bounds_text(pdr)
                );
            }
        },
    );
    Ok((result, outcomes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolutions() {
        assert_eq!(parse_resolution("0.5%"), Ok(Resolution::Percent(0.5)));
        assert_eq!(parse_resolution(" 2 % "), Ok(Resolution::Percent(2.0)));
        assert_eq!(parse_resolution("10000"), Ok(Resolution::Pps(10000.0)));
        for bad in ["", "%", "abc", "0", "-1", "101%", "nan", "inf"] {
            assert!(parse_resolution(bad).is_err(), "{bad}");
        }
    }
}
