//! The machine: privileges, packages, hugepages, private run directories
//! and CPU time used by processes that are not ours.
//!
//! Everything changed here is put back by a guard ([`Hugepages`]), also on
//! error and Ctrl-C. Run directories are namespaced by the benchmark's PID
//! (`/tmp/nfv-bench/<pid>/`) so two benchmarks never share sockets, and a
//! later run can tell an abandoned directory (its PID is gone) from a live
//! one.

use crate::proc;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

pub const BASE: &str = "/tmp/nfv-bench";

pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Finds an executable on PATH (or checks an absolute path).
pub fn which(cmd: &str) -> Option<PathBuf> {
    if cmd.contains('/') {
        let p = PathBuf::from(cmd);
        return p.is_file().then_some(p);
    }
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(cmd))
        .find(|p| p.is_file())
}

/// Makes sure `(binary, debian package)` pairs are present, installing the
/// missing packages with apt when root. `Err` is the reason they are not
/// (for a SKIPPED line).
pub fn ensure_packages(needs: &[(&str, &str)]) -> Result<(), String> {
    let mut missing: Vec<&str> = needs
        .iter()
        .filter(|(bin, _)| which(bin).is_none())
        .map(|(_, pkg)| *pkg)
        .collect();
    missing.dedup();
    if missing.is_empty() {
        return Ok(());
    }
    let list = missing.join(" ");
    if !is_root() {
        return Err(format!(
            "{list} not installed and not root (cannot apt-get install)"
        ));
    }
    if which("apt-get").is_none() {
        return Err(format!(
            "{list} not installed and no apt-get on this machine"
        ));
    }
    eprintln!("nfv-bench: installing {list} with apt-get (once)");
    let mut up = Command::new("apt-get");
    up.args(["-q", "update"]);
    let o = proc::run_to_end(up, Duration::from_secs(300))?;
    if !o.ok() {
        eprintln!(
            "nfv-bench: apt-get update failed ({}), trying the install anyway",
            o.status
        );
    }
    let mut inst = Command::new("apt-get");
    inst.env("DEBIAN_FRONTEND", "noninteractive")
        .args(["-q", "-y", "-o", "DPkg::Lock::Timeout=120", "install"])
        .args(&missing);
    let o = proc::run_to_end(inst, Duration::from_secs(900))?;
    if !o.ok() {
        let err: Vec<&str> = o.stderr.lines().rev().take(5).collect();
        return Err(format!(
            "apt-get install {list} failed ({}): {}",
            o.status,
            err.into_iter().rev().collect::<Vec<_>>().join(" | ")
        ));
    }
    let still: Vec<&str> = needs
        .iter()
        .filter(|(bin, _)| which(bin).is_none())
        .map(|(bin, _)| *bin)
        .collect();
    if still.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "installed {list} but {} still missing",
            still.join(", ")
        ))
    }
}

fn meminfo(key: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    s.lines()
        .find(|l| l.starts_with(key) && l[key.len()..].starts_with(':'))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Free 2 MiB hugepages.
pub fn free_hugepages() -> u64 {
    meminfo("HugePages_Free").unwrap_or(0)
}

const NR_HUGEPAGES: &str = "/proc/sys/vm/nr_hugepages";
const HUGE_DIR: &str = "/dev/hugepages";

fn is_hugetlbfs_mount(dir: &str) -> bool {
    std::fs::read_to_string("/proc/mounts").is_ok_and(|m| {
        m.lines().any(|l| {
            let mut f = l.split_whitespace();
            let (_, mp, ty) = (f.next(), f.next(), f.next());
            mp == Some(dir) && ty == Some("hugetlbfs")
        })
    })
}

/// Reserves hugepages (and mounts hugetlbfs on /dev/hugepages if needed);
/// puts `nr_hugepages` back and unmounts what it mounted when dropped.
pub struct Hugepages {
    previous: Option<u64>,
    mounted: bool,
    /// Where the previous setting is also written, so that a run after a
    /// SIGKILLed one (no destructors) can put it back: see [`run_dir`].
    record: PathBuf,
}

const PREV_FILE: &str = "nr_hugepages.prev";
const MOUNTED_FILE: &str = "hugetlbfs.mounted";

impl Hugepages {
    /// At least `pages` 2 MiB pages in total. `Err` says why not.
    pub fn reserve(pages: u64, run_dir: &Path) -> Result<Hugepages, String> {
        let mut g = Hugepages {
            previous: None,
            mounted: false,
            record: run_dir.to_path_buf(),
        };
        let total = meminfo("HugePages_Total").unwrap_or(0);
        if total < pages {
            if !is_root() {
                return Err(format!(
                    "only {total} hugepages reserved and not root (need {pages}: echo {pages} > {NR_HUGEPAGES})"
                ));
            }
            let prev: u64 = std::fs::read_to_string(NR_HUGEPAGES)
                .map_err(|e| format!("{NR_HUGEPAGES}: {e}"))?
                .trim()
                .parse()
                .map_err(|e| format!("{NR_HUGEPAGES}: {e}"))?;
            let _ = std::fs::write(run_dir.join(PREV_FILE), format!("{prev}\n"));
            g.previous = Some(prev);
            std::fs::write(NR_HUGEPAGES, format!("{pages}\n"))
                .map_err(|e| format!("echo {pages} > {NR_HUGEPAGES}: {e}"))?;
            let got = meminfo("HugePages_Total").unwrap_or(0);
            eprintln!("nfv-bench: nr_hugepages {prev} -> {got} (2 MiB pages; restored at exit)");
            if got < pages {
                return Err(format!(
                    "asked for {pages} hugepages, the kernel gave {got} (memory fragmented?)"
                ));
            }
        }
        if !is_hugetlbfs_mount(HUGE_DIR) {
            if !is_root() {
                return Err(format!("{HUGE_DIR} is not a hugetlbfs mount and not root"));
            }
            let _ = std::fs::create_dir_all(HUGE_DIR);
            let mut m = Command::new("mount");
            m.args(["-t", "hugetlbfs", "nodev", HUGE_DIR]);
            proc::run_ok(m, Duration::from_secs(10))?;
            g.mounted = true;
            let _ = std::fs::write(run_dir.join(MOUNTED_FILE), "");
            eprintln!("nfv-bench: mounted hugetlbfs on {HUGE_DIR} (unmounted at exit)");
        }
        Ok(g)
    }
}

impl Drop for Hugepages {
    fn drop(&mut self) {
        restore_hugepages(self.mounted, self.previous);
        let _ = std::fs::remove_file(self.record.join(PREV_FILE));
        let _ = std::fs::remove_file(self.record.join(MOUNTED_FILE));
    }
}

fn restore_hugepages(mounted: bool, previous: Option<u64>) {
    if mounted {
        let mut m = Command::new("umount");
        m.arg(HUGE_DIR);
        // Not interruptible: this is the cleanup.
        let _ = m.status();
    }
    if let Some(prev) = previous {
        match std::fs::write(NR_HUGEPAGES, format!("{prev}\n")) {
            Ok(()) => eprintln!("nfv-bench: nr_hugepages restored to {prev}"),
            Err(e) => eprintln!("nfv-bench: could not restore nr_hugepages to {prev}: {e}"),
        }
    }
}

/// This run's private directory, `/tmp/nfv-bench/<pid>/`. Directories of
/// earlier runs whose benchmark is gone are removed first, and processes
/// still using them (possible only if they survived a SIGKILL of the
/// benchmark despite PDEATHSIG) are killed by PID.
pub fn run_dir() -> Result<PathBuf, String> {
    let base = Path::new(BASE);
    std::fs::create_dir_all(base).map_err(|e| format!("{BASE}: {e}"))?;
    if is_root() {
        // Like /tmp: everyone may make a run directory, only its owner removes it.
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(base, std::fs::Permissions::from_mode(0o1777));
    }
    if let Ok(rd) = std::fs::read_dir(base) {
        for e in rd.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if pid == std::process::id() || bench_alive(pid) {
                continue;
            }
            reap_stale(&e.path());
            // A run killed without its destructors left the system changed.
            let prev = std::fs::read_to_string(e.path().join(PREV_FILE))
                .ok()
                .and_then(|s| s.trim().parse().ok());
            let mounted = e.path().join(MOUNTED_FILE).exists();
            if prev.is_some() || mounted {
                eprintln!("nfv-bench: undoing the hugepage set-up of aborted run {pid}");
                restore_hugepages(mounted, prev);
            }
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
    let dir = base.join(std::process::id().to_string());
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(dir)
}

fn bench_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "nfv-bench")
}

/// Kills (by PID) processes whose command line names `dir`.
fn reap_stale(dir: &Path) {
    let needle = format!("{}/", dir.display());
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return;
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(&needle) {
            eprintln!("nfv-bench: killing pid {pid} left by an aborted run: {cmd}");
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}

/// CPU time of the whole machine vs. of our own processes over a window:
/// how much CPU other work (builds, tests of other people) and the host
/// (steal) took while we measured. On a 2-vCPU box that explains outliers.
pub struct CpuLoad {
    t0: Instant,
    busy0: u64,
    steal0: u64,
    ours0: u64,
}

/// (busy ticks except steal, steal ticks) of all CPUs.
fn system_ticks() -> (u64, u64) {
    let s = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(l) = s.lines().next() else {
        return (0, 0);
    };
    let v: Vec<u64> = l
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    if v.len() < 8 {
        return (0, 0);
    }
    // user nice system idle iowait irq softirq steal
    (v[0] + v[1] + v[2] + v[5] + v[6], v[7])
}

/// utime + stime of a process (all its threads), in ticks.
fn proc_ticks(pid: u32) -> u64 {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0;
    };
    // Fields after the ")" that closes comm: state is field 3; utime 14, stime 15.
    let Some(rest) = s.rfind(')').map(|i| &s[i + 1..]) else {
        return 0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let get = |i: usize| {
        f.get(i - 3)
            .and_then(|x| x.parse::<u64>().ok())
            .unwrap_or(0)
    };
    get(14) + get(15)
}

impl CpuLoad {
    pub fn start(ours: &[u32]) -> CpuLoad {
        let (busy0, steal0) = system_ticks();
        CpuLoad {
            t0: Instant::now(),
            busy0,
            steal0,
            ours0: ours.iter().map(|&p| proc_ticks(p)).sum(),
        }
    }

    /// (other %, steal %) in percent of one CPU over the window.
    pub fn end(&self, ours: &[u32]) -> (f64, f64) {
        let (busy, steal) = system_ticks();
        let ours1: u64 = ours.iter().map(|&p| proc_ticks(p)).sum();
        let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
            .ok()
            .flatten()
            .unwrap_or(100) as f64;
        let secs = self.t0.elapsed().as_secs_f64().max(1e-3);
        let other =
            busy.saturating_sub(self.busy0) as f64 - ours1.saturating_sub(self.ours0) as f64;
        (
            (other / hz / secs * 100.0).max(0.0),
            steal.saturating_sub(self.steal0) as f64 / hz / secs * 100.0,
        )
    }
}

/// Waits until processes other than ours (none run between trials) use
/// less than `below` % of one CPU over 1 s, at most `limit`; returns the
/// seconds waited. On a shared 2-vCPU box one compile job halves a
/// busy poller's CPU, so better wait than measure it.
pub fn wait_quiet(below: f64, limit: Duration) -> Result<f64, String> {
    let t0 = Instant::now();
    let mut said = false;
    loop {
        let l = CpuLoad::start(&[std::process::id()]);
        proc::sleep(Duration::from_secs(1))?;
        let (other, _) = l.end(&[std::process::id()]);
        if other < below {
            return Ok(t0.elapsed().as_secs_f64() - 1.0);
        }
        if t0.elapsed() >= limit {
            eprintln!(
                "nfv-bench: machine still busy ({other:.0} % of a CPU used by others) after {limit:?}; measuring anyway"
            );
            return Ok(t0.elapsed().as_secs_f64());
        }
        if !said {
            eprintln!(
                "nfv-bench: waiting for the machine to calm down ({other:.0} % of a CPU used by other processes)"
            );
            said = true;
        }
    }
}

/// A UTC timestamp `YYYYmmdd-HHMMSS` for result file names.
pub fn timestamp() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Round trip of one cache line between CPUs `a` and `b` (two pinned
/// threads bouncing an atomic), ns, median of 5 bursts. On a VM the
/// vCPUs may sit on cores that share a cache or not (AMD: CCX), and
/// that changes as the host moves them: every vhost-user ring crossing
/// pays it, so it is recorded with each trial.
pub fn cache_line_round_trip_ns(a: usize, b: usize) -> Option<f64> {
    use nix::sched::{CpuSet, sched_setaffinity};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering::*};
    const N: u64 = 20_000;
    fn pin(cpu: usize) -> bool {
        let mut s = CpuSet::new();
        s.set(cpu).is_ok() && sched_setaffinity(nix::unistd::Pid::from_raw(0), &s).is_ok()
    }
    let original = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).ok()?;
    let flag = Arc::new(AtomicU64::new(0));
    let f2 = flag.clone();
    let pong = std::thread::spawn(move || {
        if !pin(b) {
            f2.store(u64::MAX, SeqCst);
            return;
        }
        let mut expect = 1;
        while expect < 5 * 2 * N {
            let v = f2.load(Acquire);
            if v == u64::MAX {
                return;
            }
            if v == expect {
                f2.store(v + 1, Release);
                expect += 2;
            }
            std::hint::spin_loop();
        }
    });
    let mut res = Vec::new();
    let ok = pin(a);
    if ok {
        let mut v = 0;
        'outer: for _ in 0..5 {
            let t = Instant::now();
            let end = v + 2 * N;
            let started = Instant::now();
            while v < end {
                flag.store(v + 1, Release);
                v += 2;
                loop {
                    let x = flag.load(Acquire);
                    if x == v {
                        break;
                    }
                    if x == u64::MAX || started.elapsed() > Duration::from_secs(1) {
                        break 'outer;
                    }
                    std::hint::spin_loop();
                }
            }
            res.push(t.elapsed().as_nanos() as f64 / N as f64);
        }
    }
    flag.store(u64::MAX, SeqCst);
    let _ = pong.join();
    // Unpin ourselves again (the main thread spawns everything).
    let _ = sched_setaffinity(nix::unistd::Pid::from_raw(0), &original);
    if res.len() < 5 {
        return None;
    }
    res.sort_by(|x, y| x.total_cmp(y));
    Some(res[2])
}

/// The nfvswitch checkout the bench works in (its `examples/`, `scripts/`,
/// `bench/results/`): `NFV_BENCH_CHECKOUT` if set; else the first
/// directory holding `examples/gen-sink.toml` and `bench/` above the
/// current directory, then above this binary (a copied binary run from
/// the checkout, or one left in its `target/`); else the path the bench
/// was compiled in.
pub fn checkout() -> PathBuf {
    if let Some(d) = std::env::var_os("NFV_BENCH_CHECKOUT") {
        return PathBuf::from(d);
    }
    let is_checkout =
        |d: &Path| d.join("examples/gen-sink.toml").is_file() && d.join("bench").is_dir();
    let starts = [
        std::env::current_dir().ok(),
        std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(Path::to_path_buf)),
    ];
    for start in starts.into_iter().flatten() {
        if let Some(d) = start.ancestors().find(|d| is_checkout(d)) {
            return d.to_path_buf();
        }
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[cfg(test)]
mod checkout_tests {
    /// A binary copied out of the tree and run from elsewhere still finds
    /// the checkout from its working directory; the compiled-in path is
    /// only the last resort.
    #[test]
    fn the_checkout_is_found_from_the_working_directory() {
        let c = super::checkout();
        assert!(
            c.join("examples/gen-sink.toml").is_file(),
            "{}",
            c.display()
        );
        let here = std::env::current_dir().unwrap();
        assert!(
            here.starts_with(std::fs::canonicalize(&c).unwrap_or(c.clone()))
                || here.starts_with(&c)
        );
    }
}
