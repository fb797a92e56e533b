//! One measurement: start the device under test, start the endpoint,
//! wait for `warm` non-zero 1-s samples at the sink, take the switch's
//! PMD counters (and optionally a perf profile of its PMD thread) over the
//! next `secs` samples, stop everything.
//!
//! Mpps = mean of the sink's `Rx-pps` samples in the window (testpmd
//! computes each over the real elapsed TSC interval); Gbps = Mpps × size ×
//! 8 / 1000 (frame bytes without FCS, as carried in virtio buffers).

use crate::dut::{Dut, Layout, PmdFigures, TestPmd};
use crate::host::CpuLoad;
use crate::proc::{self, Proc};
use crate::testpmd::{self, Mem};
use nix::sys::signal::Signal;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
pub struct Spec {
    pub size: usize,
    pub chain: usize,
    pub warm: usize,
    pub secs: usize,
    pub switch_cpu: usize,
    /// The switches' PMD CPUs (the first is `switch_cpu`).
    pub pmd_cpus: Vec<usize>,
    /// Wait (at most this long) until the vCPUs are placed so before the
    /// trial starts (`compare --placement`).
    pub placement: Option<(crate::placement::Placement, Duration)>,
    pub endpoint_cpu: usize,
    pub mem: Mem,
    /// `[memory] hugepages` of nfvswitch's node config.
    pub switch_hugepages: &'static str,
    /// (other CPU % below which the machine counts as quiet, longest wait
    /// in seconds) before the trial starts.
    pub quiet: (f64, u64),
    /// perf event for a profile of the PMD thread over the window.
    pub perf: Option<String>,
    /// Comma-separated events for `perf stat` of the PMD thread over the
    /// window (reported per packet the PMD received).
    pub perf_stat: Option<String>,
    /// The endpoint's virtio-user ports ask for packed virtqueues
    /// (`packed_vq=1`) in every vhost-user scenario.
    pub packed: bool,
    /// The endpoint's virtio-user ports turn on checksum and TSO offloads
    /// ([`testpmd::offload_commands`]).
    pub offloads: bool,
}

impl Spec {
    pub fn nports(&self) -> usize {
        2 + 2 * self.chain
    }
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Outcome {
    pub mpps: f64,
    pub gbps: f64,
    pub min_1s: f64,
    pub max_1s: f64,
    /// The 1-s sink samples of the window (Mpps).
    pub samples: Vec<f64>,
    pub pmd: Option<PmdFigures>,
    /// CPU used by processes that are not part of the trial, % of one CPU.
    pub other_cpu_percent: f64,
    /// CPU stolen by the hypervisor, % of one CPU.
    pub steal_percent: f64,
    /// Cache-line round trip between the endpoint's and the switch's CPU
    /// just before the trial, ns (every vring crossing pays it).
    pub c2c_ns: Option<f64>,
    /// Seconds waited for the machine to become quiet before the trial.
    pub quiet_wait_secs: f64,
    /// Seconds from the start of the switch to the first traffic.
    pub startup_secs: f64,
    /// `perf stat` of the PMD thread over the window: (event, count per
    /// packet the PMD received).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub perf_stat: Vec<(String, f64)>,
    /// `perf report` of the PMD thread (when asked for).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<PathBuf>,
    pub dir: PathBuf,
}

/// Starts the device under test of a trial.
pub type StartDut<'a> = &'a dyn Fn(&Layout) -> Result<Box<dyn Dut>, String>;

/// Runs one trial in `dir` with the switch that `start` starts.
pub fn run(
    dir: &Path,
    prefix: &str,
    spec: &Spec,
    vnif: testpmd::Vnif,
    start: StartDut<'_>,
) -> Result<Outcome, String> {
    let (lay, vnif, pcap) = layout(dir, prefix, spec, vnif)?;
    let quiet_wait_secs = crate::host::wait_quiet(spec.quiet.0, Duration::from_secs(spec.quiet.1))?;
    let c2c_ns = match spec.placement {
        Some((want, wait)) => wait_placement(spec, want, wait),
        None => crate::host::cache_line_round_trip_ns(spec.endpoint_cpu, spec.switch_cpu),
    };
    let t0 = Instant::now();
    let mut dut = start(&lay)?;
    let mut ep = Endpoint::start(dir, prefix, spec, vnif, &pcap, &lay.sock_dir)?;
    let (started, window) = wait_window(dir, spec, dut.as_mut(), &mut ep, t0)?;
    let pmd = dut.window_end()?;
    let (other, steal) = window.load.end(&pids(dut.as_ref(), &ep.testpmd));
    ep.testpmd.stop();
    dut.stop();
    let perf_stat = match window.stat {
        Some(p) => {
            let pkts = pmd.map_or(0.0, |f| f.pmd_mpps * 1e6 * spec.secs as f64);
            per_packet_stat(p, &dir.join("perf-stat.csv"), pkts)
        }
        None => Vec::new(),
    };
    let mut profile = None;
    if let (Some(mut p), Some(data)) = (window.perf, window.perf_data) {
        if !p.wait_exit(Duration::from_secs(15)) {
            p.stop();
        }
        profile = Some(perf_report(&data, &dir.join("perf.txt"))?);
    }
    let s = ep.samples(spec.warm + spec.secs);
    let w = &s[spec.warm.min(s.len())..];
    if w.is_empty() {
        return Err("no samples in the window".into());
    }
    let mpps = w.iter().sum::<f64>() / w.len() as f64;
    Ok(Outcome {
        mpps,
        gbps: mpps * spec.size as f64 * 8.0 / 1000.0,
        min_1s: w.iter().copied().fold(f64::INFINITY, f64::min),
        max_1s: w.iter().copied().fold(0.0, f64::max),
        samples: w.to_vec(),
        pmd,
        other_cpu_percent: other,
        steal_percent: steal,
        c2c_ns,
        quiet_wait_secs,
        startup_secs: started.unwrap_or(f64::NAN),
        perf_stat,
        profile,
        dir: dir.to_path_buf(),
    })
}

/// The trial's layout in `dir` (its socket directory made, its frame
/// written to `frame.pcap`), the endpoint's VNF interface (packed when
/// the spec says so) and the pcap's path.
fn layout(
    dir: &Path,
    prefix: &str,
    spec: &Spec,
    vnif: testpmd::Vnif,
) -> Result<(Layout, testpmd::Vnif, PathBuf), String> {
    let sock_dir = dir.join("sock");
    std::fs::create_dir_all(&sock_dir).map_err(|e| format!("{}: {e}", sock_dir.display()))?;
    let pcap = dir.join("frame.pcap");
    crate::frame::write_pcap(spec.size, &pcap)?;
    let vnif = match vnif {
        testpmd::Vnif::Vhost if spec.packed => testpmd::Vnif::VhostPacked,
        v => v,
    };
    let lay = Layout {
        dir: dir.to_path_buf(),
        sock_dir,
        nports: spec.nports(),
        switch_cpu: spec.switch_cpu,
        pmd_cpus: spec.pmd_cpus.clone(),
        endpoint_cpu: spec.endpoint_cpu,
        mem: spec.mem,
        switch_hugepages: spec.switch_hugepages,
        prefix: prefix.to_string(),
        packed: vnif == testpmd::Vnif::VhostPacked,
    };
    Ok((lay, vnif, pcap))
}

/// The trial's testpmd: generator, the VNFs' io streams and the sink.
struct Endpoint {
    testpmd: TestPmd,
    log: PathBuf,
    /// The sink's port number.
    sink: usize,
}

impl Endpoint {
    fn start(
        dir: &Path,
        prefix: &str,
        spec: &Spec,
        vnif: testpmd::Vnif,
        pcap: &Path,
        sock_dir: &Path,
    ) -> Result<Endpoint, String> {
        let ep_prefix = format!("{prefix}_ep");
        let mut args = testpmd::endpoint_args(
            &ep_prefix,
            spec.mem,
            pcap,
            sock_dir,
            spec.nports(),
            spec.endpoint_cpu,
            spec.switch_cpu,
            vnif,
        );
        if spec.offloads && vnif != testpmd::Vnif::Memif {
            let file = dir.join("offloads.cmd");
            std::fs::write(&file, testpmd::offload_commands(spec.nports()))
                .map_err(|e| format!("{}: {e}", file.display()))?;
            args.push(format!("--cmdline-file={}", file.display()));
        }
        let log = dir.join("endpoint.log");
        let testpmd = TestPmd::spawn("testpmd (endpoint)", args, &ep_prefix, &log)?;
        Ok(Endpoint {
            testpmd,
            log,
            sink: testpmd::sink_port(spec.nports()),
        })
    }

    /// The sink's first `n` 1-s samples (Mpps) in the log.
    fn samples(&self, n: usize) -> Vec<f64> {
        let text = std::fs::read(&self.log).unwrap_or_default();
        let mut s = testpmd::rx_samples(&String::from_utf8_lossy(&text), self.sink);
        s.truncate(n);
        s
    }
}

/// The trial's processes: the switch's and the endpoint's.
fn pids(dut: &dyn Dut, ep: &TestPmd) -> Vec<u32> {
    let mut p = dut.pids();
    p.extend(ep.proc.pid());
    p
}

/// What runs over the measured window.
struct Window {
    load: CpuLoad,
    /// `perf record` of the PMD thread, and its data file.
    perf: Option<Proc>,
    perf_data: Option<PathBuf>,
    /// `perf stat` of the PMD thread.
    stat: Option<Proc>,
}

/// Waits for the sink's `warm` samples, starts the window, then waits
/// for its `secs` samples; returns when traffic first arrived (seconds
/// after `t0`) and the window. Fails when a process dies, no traffic
/// comes or the samples stall.
fn wait_window(
    dir: &Path,
    spec: &Spec,
    dut: &mut dyn Dut,
    ep: &mut Endpoint,
    t0: Instant,
) -> Result<(Option<f64>, Window), String> {
    let first_traffic_limit = Duration::from_secs(60 + 5 * spec.nports() as u64);
    let mut started: Option<f64> = None;
    let mut window: Option<Window> = None;
    let want = spec.warm + spec.secs;
    loop {
        proc::sleep(Duration::from_millis(100))?;
        dut.ensure_alive()?;
        ep.testpmd.proc.ensure_alive()?;
        let n = ep.samples(usize::MAX).len();
        if n > 0 && started.is_none() {
            started = Some(t0.elapsed().as_secs_f64());
        }
        if started.is_none() && t0.elapsed() > first_traffic_limit {
            return Err(format!(
                "no traffic at the sink after {first_traffic_limit:?}; endpoint log {}:\n{}",
                ep.log.display(),
                proc::tail(&ep.log, 12)
            ));
        }
        if window.is_none() && n >= spec.warm {
            dut.window_start()?;
            let (perf, perf_data) = perf_record(dir, spec, dut)?;
            let stat = perf_stat(dir, spec, dut)?;
            window = Some(Window {
                load: CpuLoad::start(&pids(dut, &ep.testpmd)),
                perf,
                perf_data,
                stat,
            });
        }
        if n >= want {
            break;
        }
        if started.is_some_and(|s| t0.elapsed().as_secs_f64() > s + 2.0 * want as f64 + 30.0) {
            return Err(format!(
                "only {n} of {want} 1-s samples in {:.0} s (testpmd stalled?); {}",
                t0.elapsed().as_secs_f64(),
                ep.log.display()
            ));
        }
    }
    let window = window.expect("window started before it ended");
    Ok((started, window))
}

/// With `--perf`: `perf record` of the PMD thread over the window, and
/// the data file it writes.
fn perf_record(
    dir: &Path,
    spec: &Spec,
    dut: &dyn Dut,
) -> Result<(Option<Proc>, Option<PathBuf>), String> {
    let Some(ev) = &spec.perf else {
        return Ok((None, None));
    };
    let Some(tid) = dut.pmd_tid() else {
        eprintln!("nfv-bench: no PMD thread found for perf");
        return Ok((None, None));
    };
    let data = dir.join("perf.data");
    let mut c = Command::new("perf");
    c.args(["record", "-e", ev, "-F", "999", "-g", "-t"])
        .arg(tid.to_string())
        .arg("-o")
        .arg(&data)
        .args(["--", "sleep"])
        .arg(spec.secs.to_string());
    let p = Proc::spawn("perf record", c, &dir.join("perf.log"), Signal::SIGINT)?;
    Ok((Some(p), Some(data)))
}

/// With `--perf-stat`: `perf stat` of the PMD thread over the window,
/// into `perf-stat.csv`.
fn perf_stat(dir: &Path, spec: &Spec, dut: &dyn Dut) -> Result<Option<Proc>, String> {
    let (Some(ev), Some(tid)) = (&spec.perf_stat, dut.pmd_tid()) else {
        return Ok(None);
    };
    let mut c = Command::new("perf");
    c.args(["stat", "-x", ",", "-e", ev, "-t"])
        .arg(tid.to_string())
        .arg("-o")
        .arg(dir.join("perf-stat.csv"))
        .args(["--", "sleep"])
        .arg(spec.secs.to_string());
    let p = Proc::spawn("perf stat", c, &dir.join("perf-stat.log"), Signal::SIGINT)?;
    Ok(Some(p))
}

/// Waits for `perf stat` (stops it after 15 s) and divides its counts by
/// the `pkts` the PMD received (NaN without packets).
fn per_packet_stat(mut p: Proc, stat_file: &Path, pkts: f64) -> Vec<(String, f64)> {
    if !p.wait_exit(Duration::from_secs(15)) {
        p.stop();
    }
    parse_perf_stat(&std::fs::read_to_string(stat_file).unwrap_or_default())
        .into_iter()
        .map(|(e, n)| (e, if pkts > 0.0 { n / pkts } else { f64::NAN }))
        .collect()
}

/// `perf report` by symbol (flat, self time) into `out`.
fn perf_report(data: &Path, out: &Path) -> Result<PathBuf, String> {
    let mut c = Command::new("perf");
    c.arg("report").arg("-i").arg(data).args([
        "--no-children",
        "--sort",
        "dso,symbol",
        "--stdio",
        "-g",
        "none",
        "--percent-limit",
        "0.5",
    ]);
    let o = proc::run(c, Duration::from_secs(120))?;
    std::fs::write(out, format!("{}{}", o.stdout, o.stderr)).map_err(|e| e.to_string())?;
    Ok(out.to_path_buf())
}

/// `perf stat -x ,` output: "count,unit,event,..." per line; events that
/// were not counted ("<not supported>") are left out.
fn parse_perf_stat(text: &str) -> Vec<(String, f64)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let n = f.first()?.trim().parse::<f64>().ok()?;
            Some((f.get(2)?.trim().to_string(), n))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn perf_stat_csv() {
        let t = "# started on Sat\n\n5698012922,,cycles,3001198761,100.00,,\n<not supported>,,dTLB-load-misses,0,100.00,,\n62201482,,L1-dcache-load-misses,3001,100.00,1.22,of all L1-dcache accesses\n";
        assert_eq!(
            super::parse_perf_stat(t),
            vec![
                ("cycles".to_string(), 5698012922.0),
                ("L1-dcache-load-misses".to_string(), 62201482.0)
            ]
        );
    }
}

/// Measures the vCPUs' cache-line round trip every 0.5 s until it says
/// `want` or `wait` has passed (then says so); returns the last figure,
/// which the trial records either way.
fn wait_placement(spec: &Spec, want: crate::placement::Placement, wait: Duration) -> Option<f64> {
    let t0 = Instant::now();
    loop {
        let c2c = crate::host::cache_line_round_trip_ns(spec.endpoint_cpu, spec.switch_cpu);
        let got = crate::placement::Placement::of(c2c);
        if got == Some(want) {
            if t0.elapsed() > Duration::from_secs(1) {
                println!(
                    "      placement {} after {:.0} s",
                    want.name(),
                    t0.elapsed().as_secs_f64()
                );
            }
            return c2c;
        }
        if got.is_none() || t0.elapsed() >= wait {
            println!(
                "      placement {} not reached in {:.0} s (round trip {}): running anyway",
                want.name(),
                t0.elapsed().as_secs_f64(),
                c2c.map_or("unmeasured".into(), |n| format!("{n:.0} ns"))
            );
            return c2c;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}
