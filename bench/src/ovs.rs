//! OVS-DPDK 3.1 (Debian `openvswitch-switch-dpdk`) as the device under
//! test: a private ovsdb-server and `ovs-vswitchd-dpdk`, both our children
//! (no `--detach`: we own their PIDs), all state under the trial directory
//! (`OVS_RUNDIR/LOGDIR/DBDIR`), a netdev bridge with `dpdkvhostuserclient`
//! ports p1..pn, rules p(2j-1) -> p(2j), one PMD on the switch CPU.
//!
//! Facts from ../../shared/peers/NOTES.md: run the DPDK binary directly
//! with a fixed `--unixctl` path (pitfalls 2, 3); `--no-pci` (5); OVS adds
//! `--in-memory` itself (6); `ovs-appctl exit` returns before the daemon
//! is gone, so wait for the PID (18). PMD figures are OVS's own:
//! `pmd-stats-clear` at the window start, `pmd-perf-show` at its end.

use crate::dut::{Dut, Layout, PmdFigures, find_pmd_thread};
use crate::proc::{self, Proc, run, run_ok};
use crate::testpmd;
use nix::sys::signal::Signal;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

pub const VSWITCHD: &str = "/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk";
const SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";
/// MB of hugepage memory OVS's DPDK takes (`dpdk-socket-mem`).
pub const SOCKET_MEM_MB: u64 = 512;

/// Installs OVS-DPDK if needed. `Err` = why the OVS scenario is skipped.
pub fn prepare() -> Result<(), String> {
    crate::host::ensure_packages(&[
        (VSWITCHD, "openvswitch-switch-dpdk"),
        ("ovs-vsctl", "openvswitch-switch-dpdk"),
        ("ovsdb-server", "openvswitch-switch-dpdk"),
        ("ovsdb-tool", "openvswitch-switch-dpdk"),
        ("ovs-appctl", "openvswitch-switch-dpdk"),
        ("ovs-ofctl", "openvswitch-switch-dpdk"),
    ])?;
    if !Path::new(SCHEMA).is_file() {
        return Err(format!("{SCHEMA} missing (openvswitch-common broken?)"));
    }
    Ok(())
}

/// A private OVS-DPDK's two daemons, our children (no `--detach`), their
/// state in `<dir>/ovs/{run,log,db}` through `OVS_RUNDIR/LOGDIR/DBDIR`:
/// what the `compare` DUT ([`Ovs`]) and `vm-tcp` both start. Dropping it
/// stops ovs-vswitchd (waiting for its PID) and then ovsdb-server.
pub struct OvsDaemons {
    run_dir: PathBuf,
    log_dir: PathBuf,
    db_dir: PathBuf,
    /// Where the daemons' stdout/stderr go.
    out_dir: PathBuf,
    // Field order = drop order: vswitchd before ovsdb-server.
    pub vswitchd: Option<Proc>,
    pub ovsdb: Option<Proc>,
}

const T: Duration = Duration::from_secs(30);

/// DPDK settings of an [`OvsDaemons::start`].
pub struct DpdkSetup<'a> {
    /// CPU of OVS's main (non-PMD) lcore, and of its PMD threads.
    pub lcore_cpu: usize,
    pub pmd_cpus: Vec<usize>,
    /// `--file-prefix` of DPDK's hugepage files (unique per run).
    pub file_prefix: String,
    /// More `other_config:key=value` settings (e.g. userspace TSO).
    pub other_config: &'a [&'a str],
}

impl OvsDaemons {
    /// Creates the database and starts ovsdb-server, then sets DPDK up as
    /// `dpdk` says and starts ovs-vswitchd-dpdk, waiting until DPDK has
    /// initialised. State under `dir/ovs`, daemon output in `dir`.
    pub fn start(dir: &Path, dpdk: &DpdkSetup<'_>) -> Result<OvsDaemons, String> {
        let d = dir.join("ovs");
        let mut o = OvsDaemons {
            run_dir: d.join("run"),
            log_dir: d.join("log"),
            db_dir: d.join("db"),
            out_dir: dir.to_path_buf(),
            vswitchd: None,
            ovsdb: None,
        };
        for p in [&o.run_dir, &o.log_dir, &o.db_dir] {
            std::fs::create_dir_all(p).map_err(|e| format!("{}: {e}", p.display()))?;
        }
        o.start_db()?;
        o.start_vswitchd(dpdk)?;
        Ok(o)
    }

    pub fn cmd(&self, prog: &str) -> Command {
        let mut c = Command::new(prog);
        c.env("OVS_RUNDIR", &self.run_dir)
            .env("OVS_LOGDIR", &self.log_dir)
            .env("OVS_DBDIR", &self.db_dir);
        c
    }

    pub fn vsctl(&self, args: &[&str]) -> Result<String, String> {
        let mut c = self.cmd("ovs-vsctl");
        c.arg(format!("--db=unix:{}", self.db_sock().display()))
            .arg("--timeout=30")
            .args(args);
        Ok(run_ok(c, T)?.stdout)
    }

    pub fn ofctl(&self, args: &[&str]) -> Result<String, String> {
        let mut c = self.cmd("ovs-ofctl");
        c.args(args);
        Ok(run_ok(c, T)?.stdout)
    }

    pub fn appctl(&self, args: &[&str]) -> Result<String, String> {
        let mut c = self.cmd("ovs-appctl");
        c.arg("-t")
            .arg(self.ctl_path())
            .arg("--timeout=10")
            .args(args);
        Ok(run_ok(c, Duration::from_secs(15))?.stdout)
    }

    fn ctl_path(&self) -> PathBuf {
        self.run_dir.join("ovs-vswitchd.ctl")
    }

    fn db_sock(&self) -> PathBuf {
        self.run_dir.join("db.sock")
    }

    /// A fresh database and its ovsdb-server, initialised.
    fn start_db(&mut self) -> Result<(), String> {
        let db = self.db_dir.join("conf.db");
        let mut c = self.cmd("ovsdb-tool");
        c.arg("create").arg(&db).arg(SCHEMA);
        run_ok(c, T)?;
        let sock = self.db_sock();
        let mut c = self.cmd("ovsdb-server");
        c.arg(&db)
            .arg(format!("--remote=punix:{}", sock.display()))
            .arg(format!(
                "--unixctl={}/ovsdb-server.ctl",
                self.run_dir.display()
            ))
            .arg(format!(
                "--log-file={}/ovsdb-server.log",
                self.log_dir.display()
            ));
        self.ovsdb = Some(Proc::spawn(
            "ovsdb-server",
            c,
            &self.out_dir.join("ovsdb-server.out"),
            Signal::SIGTERM,
        )?);
        let end = Instant::now() + Duration::from_secs(20);
        while !sock.exists() {
            self.ovsdb.as_mut().map_or(Ok(()), Proc::ensure_alive)?;
            if Instant::now() > end {
                return Err("ovsdb-server: no db.sock after 20 s".into());
            }
            proc::sleep(Duration::from_millis(20))?;
        }
        self.vsctl(&["--no-wait", "init"]).map(|_| ())
    }

    /// DPDK's settings, then the daemon, until DPDK has initialised.
    fn start_vswitchd(&mut self, dpdk: &DpdkSetup<'_>) -> Result<(), String> {
        let socket_mem = format!("other_config:dpdk-socket-mem={SOCKET_MEM_MB}");
        let lcore = format!("other_config:dpdk-lcore-mask={:#x}", 1u64 << dpdk.lcore_cpu);
        let mask = dpdk.pmd_cpus.iter().fold(0u128, |m, &c| m | 1u128 << c);
        let pmd = format!("other_config:pmd-cpu-mask={mask:#x}");
        let extra = format!(
            "other_config:dpdk-extra=--no-pci --file-prefix={}",
            dpdk.file_prefix
        );
        let mut args = vec![
            "--no-wait",
            "set",
            "Open_vSwitch",
            ".",
            "other_config:dpdk-init=true",
            &socket_mem,
            &lcore,
            &pmd,
            "other_config:dpdk-hugepage-dir=/dev/hugepages",
            &extra,
        ];
        args.extend_from_slice(dpdk.other_config);
        self.vsctl(&args)?;
        let mut c = self.cmd(VSWITCHD);
        c.arg(format!("unix:{}", self.db_sock().display()))
            .arg(format!("--unixctl={}", self.ctl_path().display()))
            .arg(format!(
                "--log-file={}/ovs-vswitchd.log",
                self.log_dir.display()
            ));
        self.vswitchd = Some(Proc::spawn(
            "ovs-vswitchd-dpdk",
            c,
            &self.out_dir.join("ovs-vswitchd.out"),
            Signal::SIGTERM,
        )?);
        self.vsctl(&["wait-until", "Open_vSwitch", ".", "dpdk_initialized=true"])
            .map_err(|e| format!("DPDK did not initialise in OVS: {e}\n{}", self.log_tail()))?;
        Ok(())
    }

    pub fn log_tail(&self) -> String {
        proc::tail(&self.log_dir.join("ovs-vswitchd.log"), 15)
    }

    pub fn ensure_alive(&mut self) -> Result<(), String> {
        for p in [&mut self.ovsdb, &mut self.vswitchd].into_iter().flatten() {
            p.ensure_alive()?;
        }
        Ok(())
    }

    /// Stops ovs-vswitchd (`ovs-appctl exit` returns before the daemon is
    /// gone: its PID is waited for), then ovsdb-server.
    pub fn stop(&mut self) {
        if let Some(mut v) = self.vswitchd.take() {
            if v.alive() {
                let mut c = self.cmd("ovs-appctl");
                c.arg("-t")
                    .arg(self.ctl_path())
                    .args(["--timeout=10", "exit"]);
                let _ = run(c, Duration::from_secs(15));
                v.wait_exit(Duration::from_secs(10));
            }
            v.stop();
        }
        if let Some(mut d) = self.ovsdb.take() {
            d.stop();
        }
    }
}

impl Drop for OvsDaemons {
    fn drop(&mut self) {
        self.stop();
    }
}

/// OVS-DPDK as the `compare` device under test.
pub struct Ovs {
    daemons: OvsDaemons,
    dir: PathBuf,
}

impl Ovs {
    /// Ports p1..pn, rules p(2j-1) -> p(2j) and a drop rule below them.
    pub fn start(lay: &Layout) -> Result<Ovs, String> {
        let mut flows = vec!["priority=0,actions=drop".to_string()];
        flows.extend(crate::dut::pair_flows(lay.nports));
        Self::start_with_flows(lay, &flows)
    }

    /// Ports p1..pn and the rules `flows` (`ovs-ofctl add-flow` syntax),
    /// nothing else.
    pub fn start_with_flows(lay: &Layout, flows: &[String]) -> Result<Ovs, String> {
        let daemons = OvsDaemons::start(
            &lay.dir,
            &DpdkSetup {
                lcore_cpu: lay.endpoint_cpu,
                pmd_cpus: lay.pmd_cpus.clone(),
                file_prefix: format!("{}_ovs", lay.prefix),
                other_config: &[],
            },
        )?;
        let mut o = Ovs {
            daemons,
            dir: lay.dir.clone(),
        };
        let d = &o.daemons;
        d.vsctl(&[
            "add-br",
            "br0",
            "--",
            "set",
            "bridge",
            "br0",
            "datapath_type=netdev",
        ])?;
        for i in 1..=lay.nports {
            let name = format!("p{i}");
            d.vsctl(&[
                "add-port",
                "br0",
                &name,
                "--",
                "set",
                "Interface",
                &name,
                "type=dpdkvhostuserclient",
                &format!(
                    "options:vhost-server-path={}",
                    testpmd::sock(&lay.sock_dir, i)
                ),
                &format!("ofport_request={i}"),
            ])?;
        }
        d.ofctl(&["del-flows", "br0"])?;
        for f in flows {
            d.ofctl(&["add-flow", "br0", f])?;
        }
        let show = d.vsctl(&["show"])?;
        let _ = std::fs::write(lay.dir.join("ovs-show.txt"), show);
        o.ensure_alive()?;
        Ok(o)
    }
}

impl Ovs {
    /// Raises the userspace connection tracker's limit
    /// (`dpctl/ct-set-maxconns`) to at least `n`; returns the limit.
    pub fn ensure_ct_maxconns(&self, n: u64) -> Result<u64, String> {
        let d = &self.daemons;
        let max = parse_count(&d.appctl(&["dpctl/ct-get-maxconns"])?)?;
        if max >= n {
            return Ok(max);
        }
        d.appctl(&["dpctl/ct-set-maxconns", &n.to_string()])?;
        parse_count(&d.appctl(&["dpctl/ct-get-maxconns"])?)
    }
}

/// The number `dpctl/ct-get-nconns` and `ct-get-maxconns` print.
fn parse_count(out: &str) -> Result<u64, String> {
    out.split_whitespace()
        .last()
        .and_then(|w| w.parse().ok())
        .ok_or_else(|| format!("not a count: {out:?}"))
}

/// Figures of `dpif-netdev/pmd-perf-show`.
#[derive(Debug, PartialEq)]
pub struct PerfShow {
    pub busy_percent: f64,
    pub cycles_per_packet: f64,
    pub kpps: f64,
    pub rx_per_busy_iteration: Option<f64>,
}

/// Parses `dpif-netdev/pmd-perf-show`: one section per PMD thread,
///
/// ```text
/// pmd thread numa_id 0 core_id 1:
///   - busy iterations:      86923  ( 84.9 % of used cycles)
///   Rx packets:          2399328  (1199 Kpps, 848 cycles/pkt)
/// ```
///
/// With several PMDs (`compare --pmds`): rates summed, cycles per packet
/// weighted by each PMD's rate, busy % averaged, packets per busy
/// iteration over all of them. `None` if no section has traffic figures.
pub fn parse_pmd_perf(text: &str) -> Option<PerfShow> {
    let mut sections: Vec<&str> = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("pmd thread") {
        let next = rest[i + 1..]
            .find("pmd thread")
            .map_or(rest.len(), |j| i + 1 + j);
        sections.push(&rest[i..next]);
        rest = &rest[next..];
    }
    if sections.is_empty() {
        sections.push(text);
    }
    let each: Vec<(PerfShow, Option<(f64, f64)>)> =
        sections.iter().filter_map(|t| parse_one_pmd(t)).collect();
    if each.is_empty() {
        return None;
    }
    let kpps: f64 = each.iter().map(|(p, _)| p.kpps).sum();
    let cycles = if kpps > 0.0 {
        each.iter()
            .map(|(p, _)| p.kpps * p.cycles_per_packet)
            .sum::<f64>()
            / kpps
    } else {
        each[0].0.cycles_per_packet
    };
    let busy = each.iter().map(|(p, _)| p.busy_percent).sum::<f64>() / each.len() as f64;
    let counts: Option<Vec<(f64, f64)>> = each.iter().map(|(_, c)| *c).collect();
    let per_iter = counts.and_then(|c| {
        let (rx, it) = c.iter().fold((0.0, 0.0), |(r, i), (a, b)| (r + a, i + b));
        (it > 0.0).then(|| rx / it)
    });
    Some(PerfShow {
        busy_percent: busy,
        cycles_per_packet: cycles,
        kpps,
        rx_per_busy_iteration: per_iter,
    })
}

/// One PMD's section: its figures and (Rx packets, busy iterations).
fn parse_one_pmd(text: &str) -> Option<(PerfShow, Option<(f64, f64)>)> {
    fn parens(line: &str) -> Vec<f64> {
        let Some(a) = line.find('(') else {
            return Vec::new();
        };
        let b = line[a..].find(')').map_or(line.len(), |b| a + b);
        line[a + 1..b]
            .split(|c: char| !(c.is_ascii_digit() || c == '.'))
            .filter_map(|w| w.parse().ok())
            .collect()
    }
    fn count(line: &str) -> Option<f64> {
        line.split(':')
            .nth(1)?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    }
    let busy_line = text.lines().find(|l| l.contains("busy iterations:"))?;
    let rx_line = text.lines().find(|l| l.contains("Rx packets:"))?;
    let (busy, rx) = (parens(busy_line), parens(rx_line));
    let counts = match (count(rx_line), count(busy_line)) {
        (Some(p), Some(i)) => Some((p, i)),
        _ => None,
    };
    let per_iter = counts.and_then(|(p, i)| (i > 0.0).then(|| p / i));
    Some((
        PerfShow {
            busy_percent: *busy.first()?,
            cycles_per_packet: *rx.get(1)?,
            kpps: *rx.first()?,
            rx_per_busy_iteration: per_iter,
        },
        counts,
    ))
}

impl Dut for Ovs {
    fn ensure_alive(&mut self) -> Result<(), String> {
        self.daemons.ensure_alive()
    }
    fn window_start(&mut self) -> Result<(), String> {
        self.daemons
            .appctl(&["dpif-netdev/pmd-stats-clear"])
            .map(|_| ())
    }
    fn window_end(&mut self) -> Result<Option<PmdFigures>, String> {
        let d = &self.daemons;
        let perf = d.appctl(&["dpif-netdev/pmd-perf-show"])?;
        let _ = std::fs::write(self.dir.join("ovs-pmd-perf.txt"), &perf);
        if let Ok(s) = d.appctl(&["dpif-netdev/pmd-stats-show"]) {
            let _ = std::fs::write(self.dir.join("ovs-pmd-stats.txt"), s);
        }
        if let Ok(s) = d.ofctl(&["dump-flows", "br0"]) {
            let _ = std::fs::write(self.dir.join("ovs-flows.txt"), s);
        }
        let p = parse_pmd_perf(&perf).ok_or_else(|| {
            format!("cannot parse pmd-perf-show (no traffic through OVS?):\n{perf}")
        })?;
        Ok(Some(PmdFigures {
            cycles_per_packet: p.cycles_per_packet,
            busy_percent: p.busy_percent,
            pmd_mpps: p.kpps / 1e3,
            rx_per_busy_iteration: p.rx_per_busy_iteration,
        }))
    }
    fn pids(&self) -> Vec<u32> {
        [&self.daemons.ovsdb, &self.daemons.vswitchd]
            .into_iter()
            .flatten()
            .filter_map(|p| p.pid())
            .collect()
    }
    fn pmd_tid(&self) -> Option<u32> {
        find_pmd_thread(self.daemons.vswitchd.as_ref()?.pid()?)
    }
    fn stop(&mut self) {
        self.daemons.stop();
    }
    fn connections(&mut self) -> Result<Option<u64>, String> {
        parse_count(&self.daemons.appctl(&["dpctl/ct-get-nconns"])?).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pmd_perf_show() {
        let t = "Time: 19:31:02.123\nMeasurement duration: 10.005 s\n\npmd thread numa_id 0 core_id 1:\n\n  Iterations:            2097375  (4.77 us/it)\n  - Used TSC cycles: 20000000000  (100.0 % of total cycles)\n  - idle iterations:     2010452  ( 15.1 % of used cycles)\n  - busy iterations:       86923  ( 84.9 % of used cycles)\n  Rx packets:          2399328  (1199 Kpps, 848 cycles/pkt)\n  Datapath passes:     2399328  (1.00 passes/pkt)\n";
        let p = parse_pmd_perf(t).unwrap();
        assert_eq!(
            (p.busy_percent, p.cycles_per_packet, p.kpps),
            (84.9, 848.0, 1199.0)
        );
        assert!((p.rx_per_busy_iteration.unwrap() - 2399328.0 / 86923.0).abs() < 1e-9);
        assert_eq!(
            parse_pmd_perf("pmd thread numa_id 0 core_id 1:\n  Iterations: 0\n"),
            None
        );
    }

    /// Two PMDs (`compare --pmds 2`): 1200 Kpps at 800 cycles and 600 at
    /// 1100 make 1800 Kpps at 900 cycles/pkt.
    #[test]
    fn pmd_perf_show_of_two_pmds() {
        let pmd = |core: u32, busy: f64, iters: u64, rx: u64, kpps: u64, cyc: u64| {
            format!(
                "pmd thread numa_id 0 core_id {core}:\n\n  Iterations: 100 (1.0 us/it)\n  \
                 - busy iterations: {iters} ( {busy} % of used cycles)\n  \
                 Rx packets: {rx} ({kpps} Kpps, {cyc} cycles/pkt)\n"
            )
        };
        let t = format!(
            "Time: 19:31:02.123\nMeasurement duration: 10.005 s\n\n{}\n{}",
            pmd(1, 90.0, 1000, 12000, 1200, 800),
            pmd(2, 50.0, 1000, 6000, 600, 1100)
        );
        let p = parse_pmd_perf(&t).unwrap();
        assert_eq!(
            (p.kpps, p.cycles_per_packet, p.busy_percent),
            (1800.0, 900.0, 70.0)
        );
        assert_eq!(p.rx_per_busy_iteration, Some(9.0));
    }
}
