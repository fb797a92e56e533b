//! The sweep's results as data (`sweep.json`) and as markdown tables
//! (`sweep.md`). Pure: no I/O but the two `write_*` functions.

use crate::topology::{Cores, Measurement, Run, Topology};
use nfv_vnf_interface::VnfInterface;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// Facts about the machine a sweep ran on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    pub cpus: usize,
    pub cpu_model: Option<String>,
    pub kernel: Option<String>,
    pub tsc_ghz: f64,
    /// Cores the sweep used (the switch's and the VNFs').
    pub cores_used: Vec<usize>,
    /// The core the switch's (first) PMD thread busy-polls.
    pub switch_core: usize,
    /// The cores the switch's PMD threads busy-poll (of the first PMD
    /// count swept; each run records its own count).
    #[serde(default)]
    pub pmd_cores: Vec<usize>,
    /// The cores the VNF processes share.
    pub vnf_cores: Vec<usize>,
    /// 1, 5 and 15 minute load averages when the sweep started (other
    /// busy processes make the figures low and noisy).
    #[serde(default)]
    pub load_average: Option<[f64; 3]>,
}

impl Machine {
    /// This machine, with the cores the sweep will use.
    pub fn here(cores: &Cores) -> Machine {
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        });
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .ok()
            .map(|s| s.trim().to_string());
        let load_average = std::fs::read_to_string("/proc/loadavg").ok().and_then(|s| {
            let v: Vec<f64> = s
                .split_whitespace()
                .take(3)
                .filter_map(|x| x.parse().ok())
                .collect();
            v.try_into().ok()
        });
        let mut used = cores.vnf_cores();
        used.extend(&cores.pmds);
        used.sort_unstable();
        used.dedup();
        Machine {
            cpus: cores.allowed.len(),
            cpu_model,
            kernel,
            tsc_ghz: nfv_tsc::hz() as f64 / 1e9,
            cores_used: used,
            switch_core: cores.pmds[0],
            pmd_cores: cores.pmds.clone(),
            vnf_cores: cores.vnf_cores(),
            load_average,
        }
    }
}

/// What the sweep was asked to do.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Parameters {
    pub topologies: Vec<Topology>,
    pub vnfs: Vec<usize>,
    pub sizes: Vec<usize>,
    /// Measurement window per run (one sample a second).
    pub seconds: u64,
    /// Traffic before each window.
    pub warmup_secs: f64,
    pub app: String,
    pub poll: String,
    /// vhost-user or memif between the switch and the VNFs (sweeps from
    /// before memif existed were vhost-user). Written `"vhost"` or
    /// `"memif"`, as sweep.json always said.
    #[serde(default, serialize_with = "nfv_vnf_interface::serialize_short")]
    pub interface: VnfInterface,
    /// Offered load per generator, packets/s; 0 = as fast as possible.
    pub rate_pps: u64,
}

/// One (topology, N, size) point: its measurement or why it failed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    pub topology: Topology,
    pub vnfs: usize,
    pub size: usize,
    /// Switch PMD threads in the run (sweeps from before several PMDs: 1).
    #[serde(default = "one")]
    pub pmds: usize,
    /// True when the VNFs did not each have a core of their own (then a
    /// PMD count's figures show the sharing, not the switch).
    #[serde(default)]
    pub cores_shared: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Measurement>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

fn one() -> usize {
    1
}

impl RunResult {
    pub fn new(run: &Run, cores: &Cores, r: Result<Measurement, String>) -> RunResult {
        let (result, error) = match r {
            Ok(m) => (Some(m), None),
            Err(e) => (None, Some(e)),
        };
        RunResult {
            topology: run.topology,
            vnfs: run.vnfs,
            size: run.size,
            pmds: cores.pmds.len(),
            cores_shared: cores.vnfs_share(run.vnfs),
            result,
            error,
        }
    }
}

/// Everything `sweep.json` holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepReport {
    pub tool: String,
    pub version: String,
    /// UTC, RFC 3339.
    pub started: String,
    pub finished: Option<String>,
    pub machine: Machine,
    pub parameters: Parameters,
    pub runs: Vec<RunResult>,
}

impl SweepReport {
    pub fn new(machine: Machine, parameters: Parameters) -> SweepReport {
        SweepReport {
            tool: "nfvswitch sweep".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            started: rfc3339(SystemTime::now()),
            finished: None,
            machine,
            parameters,
            runs: Vec::new(),
        }
    }

    /// The measurement of one point (at the first PMD count swept), if
    /// it ran and succeeded.
    pub fn get(&self, topology: Topology, vnfs: usize, size: usize) -> Option<&Measurement> {
        self.find(topology, vnfs, size, self.first_pmds())
            .and_then(|r| r.result.as_ref())
    }

    /// The run of one point at `pmds` PMDs.
    pub fn find(
        &self,
        topology: Topology,
        vnfs: usize,
        size: usize,
        pmds: usize,
    ) -> Option<&RunResult> {
        self.runs
            .iter()
            .find(|r| r.topology == topology && r.vnfs == vnfs && r.size == size && r.pmds == pmds)
    }

    /// The PMD count of the first run (the one the per-topology tables
    /// and the charts show).
    pub fn first_pmds(&self) -> usize {
        self.runs.first().map_or(1, |r| r.pmds)
    }

    /// The PMD counts swept, in the order they ran.
    pub fn pmd_counts(&self) -> Vec<usize> {
        let mut v: Vec<usize> = Vec::new();
        for r in &self.runs {
            if !v.contains(&r.pmds) {
                v.push(r.pmds);
            }
        }
        v
    }

    /// The topologies, VNF counts and sizes that have a run, in order.
    pub fn axes(&self) -> (Vec<Topology>, Vec<usize>, Vec<usize>) {
        let mut t: Vec<Topology> = self.runs.iter().map(|r| r.topology).collect();
        let mut n: Vec<usize> = self.runs.iter().map(|r| r.vnfs).collect();
        let mut s: Vec<usize> = self.runs.iter().map(|r| r.size).collect();
        for v in [&mut n, &mut s] {
            v.sort_unstable();
            v.dedup();
        }
        t.sort_unstable();
        t.dedup();
        (t, n, s)
    }
}

/// `t` as UTC in RFC 3339 (seconds precision).
pub fn rfc3339(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Days since 1970-01-01 to a civil date (H. Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The markdown report: a header of facts, per topology one table (rows
/// N, columns frame sizes, cells "Mpps / Gbps"), then every run in detail.
pub fn markdown(r: &SweepReport) -> String {
    let p = &r.parameters;
    let m = &r.machine;
    let mut s = String::new();
    s.push_str("# nfvswitch sweep\n\n");
    s.push_str(&format!(
        "{} · nfvswitch {} · {} CPU(s){} · TSC {:.2} GHz{}{}  \n",
        r.started,
        r.version,
        m.cpus,
        m.cpu_model
            .as_deref()
            .map_or(String::new(), |c| format!(" ({c})")),
        m.tsc_ghz,
        m.kernel
            .as_deref()
            .map_or(String::new(), |k| format!(" · Linux {k}")),
        m.load_average.map_or(String::new(), |l| format!(
            " · load average at start {:.2} {:.2} {:.2}",
            l[0], l[1], l[2]
        )),
    ));
    s.push_str(&format!(
        "Switch PMD(s) busy-poll core(s) {:?}; VNFs (`{}`, {} poll, over {}) share core(s) {:?}. \
         Each run: {} s window (mean of 1 s samples) after {} s of warm-up; offered load {}.\n\n",
        if m.pmd_cores.is_empty() {
            vec![m.switch_core]
        } else {
            m.pmd_cores.clone()
        },
        p.app,
        p.poll,
        p.interface,
        m.vnf_cores,
        p.seconds,
        p.warmup_secs,
        if p.rate_pps == 0 {
            "as fast as the switch takes it".to_string()
        } else {
            format!("{} pps per generator", p.rate_pps)
        }
    ));
    s.push_str(
        "Delivered to the sinks, all chains together, in Mpps / Gbps \
         (Gbps counts frame bytes without FCS).\n\n",
    );
    s.push_str(&markdown_tables(r));
    s.push_str(&scaling_table(r));
    s.push_str(&details(r));
    s
}

/// With several PMD counts: per point, Mpps at each count and the
/// efficiency Mpps(k) / (k · Mpps(1)) (1.00: perfect scaling). Empty
/// with one count.
pub fn scaling_table(r: &SweepReport) -> String {
    let counts = r.pmd_counts();
    if counts.len() < 2 {
        return String::new();
    }
    let (topologies, vnfs, sizes) = r.axes();
    let mut s = String::from("\n## Scaling with PMD threads\n\n");
    s.push_str(
        "Delivered Mpps per PMD count; in brackets Mpps(k) / (k · Mpps(1)). A * marks runs \
         whose VNFs shared cores (the figure then shows the sharing, not the switch).\n\n",
    );
    s.push_str("| topology | N | frame B |");
    for k in &counts {
        s.push_str(&format!(" {k} PMD{} |", if *k == 1 { "" } else { "s" }));
    }
    s.push_str("\n|---|--:|--:|");
    s.push_str(&"--:|".repeat(counts.len()));
    s.push('\n');
    for &t in &topologies {
        for &n in &vnfs {
            for &size in &sizes {
                let mpps = |k: usize| {
                    r.find(t, n, size, k)
                        .and_then(|x| x.result.as_ref().map(|m| (m.mpps, x.cores_shared)))
                };
                if counts.iter().all(|&k| mpps(k).is_none()) {
                    continue;
                }
                let base = mpps(1).map(|(m, _)| m).filter(|m| *m > 0.0);
                s.push_str(&format!("| {t} | {n} | {size} |"));
                for &k in &counts {
                    let cell = match (mpps(k), base) {
                        (None, _) => "–".to_string(),
                        (Some((m, shared)), b) => {
                            let star = if shared { "*" } else { "" };
                            match b.filter(|_| k > 1) {
                                Some(b) => format!("{m:.3}{star} ({:.2})", m / (k as f64 * b)),
                                None => format!("{m:.3}{star}"),
                            }
                        }
                    };
                    s.push_str(&format!(" {cell} |"));
                }
                s.push('\n');
            }
        }
    }
    s
}

/// The per-topology tables alone (rows N, columns frame sizes, cells
/// "Mpps / Gbps").
pub fn markdown_tables(r: &SweepReport) -> String {
    let (topologies, vnfs, sizes) = r.axes();
    let mut s = String::new();
    for (k, &t) in topologies.iter().enumerate() {
        if k > 0 {
            s.push('\n');
        }
        s.push_str(&format!("## {}: N = {}\n\n", t.describe(), n_meaning(t)));
        s.push_str("| N |");
        for size in &sizes {
            s.push_str(&format!(" {size} B |"));
        }
        s.push_str("\n|--:|");
        s.push_str(&"--:|".repeat(sizes.len()));
        s.push('\n');
        for &n in &vnfs {
            s.push_str(&format!("| {n} |"));
            for &size in &sizes {
                let cell = match r.find(t, n, size, r.first_pmds()) {
                    None => "–".to_string(),
                    Some(RunResult {
                        result: Some(m), ..
                    }) => format!("{:.3} / {:.2}", m.mpps, m.gbps),
                    Some(_) => "failed".to_string(),
                };
                s.push_str(&format!(" {cell} |"));
            }
            s.push('\n');
        }
    }
    s
}

/// Every run with offered load, loss, PMD figures and per-VNF rates.
fn details(r: &SweepReport) -> String {
    let mut s = String::new();
    s.push_str("\n## Every run\n\n");
    s.push_str(
        "| topology | N | frame B | PMDs | Mpps | Gbps | offered Mpps | loss % | PMD busy | PMD cycles/pkt | per-VNF rx Mpps | drops switch / VNF |\n\
         |---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|--:|\n",
    );
    for run in &r.runs {
        let head = format!(
            "| {} | {} | {} | {} |",
            run.topology, run.vnfs, run.size, run.pmds
        );
        match (&run.result, &run.error) {
            (Some(m), _) => {
                let per: Vec<String> = m.vnfs.iter().map(|v| format!("{:.2}", v.rx_mpps)).collect();
                let sw: u64 = m.vnfs.iter().map(|v| v.switch_drops).sum();
                let own: u64 = m.vnfs.iter().map(|v| v.vnf_drops).sum();
                s.push_str(&format!(
                    "{head} {:.3} | {:.2} | {:.3} | {:.1} | {} | {} | {} | {sw} / {own} |\n",
                    m.mpps,
                    m.gbps,
                    m.offered_mpps,
                    m.loss_percent,
                    crate::topology::PmdMeasurement::busy_list(&m.per_pmd, &m.pmd),
                    m.pmd
                        .cycles_per_packet
                        .map_or("–".to_string(), |c| format!("{c:.0}")),
                    per.join(" "),
                ));
            }
            (None, e) => s.push_str(&format!(
                "{head} failed: {} | | | | | | | |\n",
                e.as_deref().unwrap_or("no result").replace('|', "/")
            )),
        }
    }
    s
}

fn n_meaning(t: Topology) -> &'static str {
    match t {
        Topology::Ns => "parallel chains gen_i → vnf_i → sink_i",
        Topology::Ew => "VNFs in one chain gen → vnf1 → … → vnfN → sink",
    }
}

/// Writes `dir/sweep.json`.
pub fn write_json(dir: &Path, r: &SweepReport) -> Result<PathBuf, String> {
    let path = dir.join("sweep.json");
    let text = serde_json::to_string_pretty(r).map_err(|e| e.to_string())?;
    std::fs::write(&path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

/// Writes `dir/sweep.md`.
pub fn write_markdown(dir: &Path, r: &SweepReport) -> Result<PathBuf, String> {
    let path = dir.join("sweep.md");
    std::fs::write(&path, markdown(r)).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use crate::topology::{PmdMeasurement, VnfMeasurement};

    /// A synthetic sweep: N-S flat at the switch's limit, E-W falling
    /// with N, one failed run.
    pub fn synthetic() -> SweepReport {
        let machine = Machine {
            cpus: 2,
            cpu_model: Some("Test CPU".into()),
            kernel: Some("6.1.0".into()),
            tsc_ghz: 2.5,
            cores_used: vec![0, 1],
            switch_core: 1,
            pmd_cores: vec![1],
            vnf_cores: vec![0],
            load_average: Some([0.5, 0.25, 0.1]),
        };
        let params = Parameters {
            topologies: vec![Topology::Ns, Topology::Ew],
            vnfs: vec![1, 2, 4],
            sizes: vec![64, 1518],
            seconds: 2,
            warmup_secs: 1.5,
            app: "macswap".into(),
            poll: "adaptive".into(),
            interface: VnfInterface::VhostUser,
            rate_pps: 0,
        };
        let mut r = SweepReport::new(machine, params);
        for t in [Topology::Ns, Topology::Ew] {
            for n in [1usize, 2, 4] {
                for size in [64usize, 1518] {
                    let mpps = match t {
                        Topology::Ns => 3.0 / (size as f64 / 64.0).sqrt(),
                        Topology::Ew => 3.0 / (n as f64 + 1.0) / (size as f64 / 64.0).sqrt(),
                    };
                    let gbps = mpps * size as f64 * 8.0 / 1000.0;
                    let run = Run {
                        topology: t,
                        vnfs: n,
                        size,
                    };
                    let m = Measurement {
                        seconds: 2.0,
                        mpps,
                        gbps,
                        offered_mpps: mpps * 1.01,
                        loss_percent: 1.0,
                        samples_mpps: vec![mpps, mpps],
                        samples_gbps: vec![gbps, gbps],
                        vnfs: (1..=n)
                            .map(|i| VnfMeasurement {
                                name: format!("vnf{i}"),
                                chain: "c".into(),
                                rx_mpps: mpps,
                                rx_gbps: gbps,
                                tx_mpps: mpps,
                                switch_drops: 7,
                                vnf_drops: 1,
                            })
                            .collect(),
                        pmd: PmdMeasurement {
                            core: None,
                            rx_mpps: mpps * 2.0,
                            busy_percent: 99.0,
                            cycles_per_packet: Some(400.0),
                        },
                        per_pmd: vec![],
                        drops: [("tx_full".to_string(), 7 * n as u64)].into(),
                    };
                    let res = if t == Topology::Ew && n == 4 && size == 1518 {
                        Err("VNFs did not connect within 10 s".to_string())
                    } else {
                        Ok(m)
                    };
                    r.runs.push(RunResult::new(&run, &two_cpus(1), res));
                }
            }
        }
        r.finished = Some(r.started.clone());
        r
    }

    fn two_cpus(pmds: usize) -> Cores {
        Cores::place(nfv_config::CpuSet::first(2), Some(pmds), 1).unwrap()
    }

    /// A sweep over 1, 2 and 4 PMDs of one point: 2.0, 3.6 and 6.4 Mpps
    /// (efficiency 0.90 and 0.80); the 4-PMD run's VNF shared a core.
    #[test]
    fn a_sweep_over_pmd_counts_has_a_scaling_table() {
        let mut r = synthetic();
        r.runs.clear();
        assert_eq!(scaling_table(&r), "", "no runs, no table");
        let run = Run {
            topology: Topology::Ns,
            vnfs: 1,
            size: 64,
        };
        for (k, mpps) in [(1, 2.0), (2, 3.6), (4, 6.4)] {
            let allowed = nfv_config::CpuSet::first(if k == 4 { 4 } else { 8 });
            let cores = Cores::place(allowed, Some(k), 1).unwrap();
            let mut m = synthetic().runs[0].result.clone().unwrap();
            m.mpps = mpps;
            r.runs.push(RunResult::new(&run, &cores, Ok(m)));
        }
        assert_eq!(r.pmd_counts(), vec![1, 2, 4]);
        assert_eq!(r.get(Topology::Ns, 1, 64).unwrap().mpps, 2.0, "first count");
        let t = scaling_table(&r);
        assert!(
            t.contains("| topology | N | frame B | 1 PMD | 2 PMDs | 4 PMDs |"),
            "{t}"
        );
        assert!(
            t.contains("| ns | 1 | 64 | 2.000 | 3.600 (0.90) | 6.400* (0.80) |"),
            "{t}"
        );
        assert!(markdown(&r).contains("## Scaling with PMD threads"));
        r.runs.truncate(1);
        assert_eq!(scaling_table(&r), "", "one count, no table");
    }

    #[test]
    fn rfc3339_known_dates() {
        let at = |s: u64| rfc3339(UNIX_EPOCH + std::time::Duration::from_secs(s));
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(1_798_761_599), "2026-12-31T23:59:59Z");
    }

    #[test]
    fn json_round_trips_and_has_the_facts() {
        let r = synthetic();
        let dir = std::env::temp_dir().join(format!("nfvswitch-report-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = write_json(&dir, &r).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let back: SweepReport = serde_json::from_str(&text).unwrap();
        // (serde_json parses floats to within an ulp, not exactly.)
        assert_eq!(
            (&back.machine, &back.parameters),
            (&r.machine, &r.parameters)
        );
        assert_eq!(back.runs.len(), r.runs.len());
        for (a, b) in back.runs.iter().zip(&r.runs) {
            assert_eq!(
                (a.topology, a.vnfs, a.size, &a.error),
                (b.topology, b.vnfs, b.size, &b.error)
            );
            let (x, y) = (
                a.result.as_ref().map(|m| m.gbps),
                b.result.as_ref().map(|m| m.gbps),
            );
            assert!(x.zip(y).is_none_or(|(x, y)| (x - y).abs() < 1e-12));
        }
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["machine"]["cpus"], 2);
        assert_eq!(v["machine"]["tsc_ghz"], 2.5);
        assert_eq!(v["parameters"]["sizes"], serde_json::json!([64, 1518]));
        assert_eq!(v["runs"][0]["topology"], "ns");
        // The spelling sweep.json has always had; `--redraw` reads it and
        // the long one alike.
        assert_eq!(v["parameters"]["interface"], "vhost");
        for spelling in ["vhost", "vhost-user"] {
            let mut p = v["parameters"].clone();
            p["interface"] = spelling.into();
            let p: Parameters = serde_json::from_value(p).unwrap();
            assert_eq!(p.interface, VnfInterface::VhostUser, "{spelling}");
        }
        assert!(v["runs"][0]["result"]["mpps"].as_f64().unwrap() > 0.0);
        assert!(v["runs"][0].get("error").is_none());
        let failed = v["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x.get("error").is_some());
        assert!(failed.unwrap().get("result").is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn markdown_has_one_table_per_topology() {
        let md = markdown(&synthetic());
        assert!(md.starts_with("# nfvswitch sweep\n"));
        assert!(md.contains("## north-south (PVP, VNFs in parallel)"));
        assert!(md.contains("## east-west (chain of VNFs)"));
        assert!(md.contains("| N | 64 B | 1518 B |\n|--:|--:|--:|\n"));
        // N-S, N = 1: 3 Mpps at 64 B, 1.536 Gbps.
        assert!(md.contains("| 1 | 3.000 / 1.54 |"), "{md}");
        // E-W, N = 4, 1518 B failed; N = 1, 64 B is half of N-S.
        assert!(md.contains("| 4 | 0.600 / 0.31 | failed |"), "{md}");
        assert!(md.contains("| 1 | 1.500 / 0.77 |"), "{md}");
        // Every run, failed one included.
        assert!(md.contains("| ew | 4 | 1518 | 1 | failed: VNFs did not connect"));
        assert!(
            md.contains(
                "| ns | 2 | 64 | 1 | 3.000 | 1.54 | 3.030 | 1.0 | 99 % | 400 | 3.00 3.00 | 14 / 2 |"
            ),
            "{md}"
        );
        // Tables in the same column count as their header.
        for line in md
            .lines()
            .filter(|l| l.starts_with("| ns ") || l.starts_with("| ew "))
        {
            assert_eq!(line.matches('|').count(), 13, "{line}");
        }
    }
}
