//! dpdk-testpmd as a child process of the testpmd interop tests: its
//! command line, spawning it with its output read by threads, killing it
//! (also on panic) and cleaning up after it, and reading its EAL errors and
//! final counters.

pub mod ports;

use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A running testpmd; killed (SIGINT, then SIGKILL) when dropped, and
/// its DPDK runtime directory removed. Its stdout and stderr are read by
/// two threads as it runs (a long run printing statistics every second
/// must never block on a full pipe).
pub struct TestPmd {
    child: Option<Child>,
    prefix: String,
    out: Option<JoinHandle<String>>,
    err: Option<JoinHandle<String>>,
}

/// Reads `r` to its end on a thread.
fn drain_pipe(r: Option<impl Read + Send + 'static>) -> Option<JoinHandle<String>> {
    let mut r = r?;
    Some(std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = r.read_to_end(&mut v);
        String::from_utf8_lossy(&v).into_owned()
    }))
}

impl TestPmd {
    pub fn start(args: &[String], prefix: &str) -> std::io::Result<TestPmd> {
        let mut child = Command::new("dpdk-testpmd")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let out = drain_pipe(child.stdout.take());
        let err = drain_pipe(child.stderr.take());
        Ok(TestPmd {
            child: Some(child),
            prefix: prefix.to_string(),
            out,
            err,
        })
    }

    pub fn alive(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    pub fn pid(&self) -> Option<libc::pid_t> {
        self.child.as_ref().map(|c| c.id() as libc::pid_t)
    }

    /// Stops it (SIGINT makes it print its final statistics) and returns
    /// its stdout and stderr.
    pub fn stop(&mut self) -> (String, String) {
        self.end(libc::SIGINT)
    }

    /// Kills it with SIGKILL (no goodbye on the vhost-user sockets: the
    /// kernel closes them) and returns its stdout and stderr.
    pub fn kill_hard(&mut self) -> (String, String) {
        self.end(libc::SIGKILL)
    }

    /// Sends `sig`, waits up to 10 s, then SIGKILLs; reaps the process,
    /// collects its output and removes its runtime directory.
    fn end(&mut self, sig: libc::c_int) -> (String, String) {
        let Some(mut c) = self.child.take() else {
            return Default::default();
        };
        let pid = c.id() as libc::pid_t;
        if matches!(c.try_wait(), Ok(None)) {
            // SAFETY: signals our own child, which has not been reaped yet
            // (try_wait just saw it running), so `pid` is still ours.
            unsafe { libc::kill(pid, sig) };
        }
        let end = Instant::now() + Duration::from_secs(10);
        while matches!(c.try_wait(), Ok(None)) && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
        }
        if matches!(c.try_wait(), Ok(None)) {
            let _ = c.kill();
        }
        let _ = c.wait();
        let join =
            |h: Option<JoinHandle<String>>| h.and_then(|h| h.join().ok()).unwrap_or_default();
        let (out, err) = (join(self.out.take()), join(self.err.take()));
        remove_runtime_dir(&self.prefix);
        (out, err)
    }
}

impl Drop for TestPmd {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Removes the DPDK runtime directory of `--file-prefix=prefix`.
fn remove_runtime_dir(prefix: &str) {
    let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/{prefix}"));
}

/// The testpmd tests run one at a time: each starts a busy-polling
/// testpmd and a PMD thread, which is all this small machine has.
static SERIAL: Mutex<()> = Mutex::new(());

pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// testpmd's command line: EAL without PCI or hugepages, DPDK runtime
/// files under `--file-prefix=prefix`, the two virtio-user devices `vdev0`
/// and `vdev1` (whole `--vdev=` options), then io forwarding of `q` queue
/// pairs on one core, ports paired, statistics every second.
pub fn testpmd_args(prefix: &str, vdev0: String, vdev1: String, q: usize) -> Vec<String> {
    testpmd_args_n(prefix, vec![vdev0, vdev1], q)
}

/// [`testpmd_args`] with any even number of virtio-user devices: ports
/// 0↔1, 2↔3, ... forward to each other (a chain of VNFs in one process).
pub fn testpmd_args_n(prefix: &str, vdevs: Vec<String>, q: usize) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "--no-pci".into(),
        "--no-huge".into(),
        "-m".into(),
        "512".into(),
        format!("--file-prefix={prefix}"),
        "-l".into(),
        "0,1".into(),
    ];
    args.extend(vdevs);
    args.extend([
        "--".into(),
        "--forward-mode=io".into(),
        "--port-topology=paired".into(),
        "--nb-cores=1".into(),
        format!("--rxq={q}"),
        format!("--txq={q}"),
        "--stats-period=1".into(),
        "--total-num-mbufs=16384".into(),
        "--no-lsc-interrupt".into(),
    ]);
    args
}

/// `RX-packets`/`TX-packets` of `port` in testpmd's final statistics.
pub fn testpmd_count(out: &str, port: usize, what: &str) -> Option<u64> {
    let head = format!("Forward statistics for port {port} ");
    let at = out.rfind(&head)?;
    let rest = &out[at..];
    let k = rest.find(&format!("{what}:"))?;
    rest[k + what.len() + 1..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Why a run did not pass.
pub enum Failure {
    /// testpmd cannot run on this machine (never reached our ports).
    Skip(String),
    Fail(String),
}

impl From<String> for Failure {
    fn from(s: String) -> Failure {
        Failure::Fail(s)
    }
}

/// The first EAL error line testpmd printed.
pub fn eal_error(stderr: &str) -> Option<&str> {
    stderr.lines().find(|l| {
        l.starts_with("EAL: ")
            && (l.contains("Cannot") || l.contains("Error") || l.contains("error"))
    })
}

/// Removes files (the sockets testpmd created in server=1 mode) and DPDK
/// runtime directories when dropped, also on panic.
#[derive(Default)]
pub struct Leftovers {
    pub files: Vec<PathBuf>,
    pub prefixes: Vec<String>,
}

impl Drop for Leftovers {
    fn drop(&mut self) {
        for f in &self.files {
            let _ = std::fs::remove_file(f);
        }
        for p in &self.prefixes {
            remove_runtime_dir(p);
        }
    }
}
