//! Helpers for tests: reporting a test as SKIPPED (never a silent pass),
//! waiting for a condition with a deadline (never a fixed sleep), network
//! namespaces and a raw socket as the far side of the wire, QEMU guests
//! driven through their serial shell (with iperf3 between them).

pub mod chromium;
pub mod netns;
pub mod offload;
pub mod pki;
pub mod qemu;
pub mod rawsock;
pub mod stuck;

use std::io::Write;
use std::time::{Duration, Instant};

/// A fresh directory under the system temp dir, named after the test
/// process and `tag` (emptied first if a crashed run left it), removed on
/// drop — also when the test fails, unless [`KEEP_DIR_ENV`] is set: then a
/// failing test leaves it (consoles, logs, sockets) for a post-mortem.
/// Wrapping an existing path (`TempDir(path)`) gives it the same drop.
pub struct TempDir(pub std::path::PathBuf);

/// Set, a failing test keeps its [`TempDir`].
pub const KEEP_DIR_ENV: &str = "NFVSWITCH_KEEP_TEST_DIR";

impl TempDir {
    /// `prefix` names the test (`nfv-{prefix}-{pid}-{tag}`).
    pub fn new(prefix: &str, tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("nfv-{prefix}-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("temp dir");
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::thread::panicking() && std::env::var_os(KEEP_DIR_ENV).is_some() {
            eprintln!("{KEEP_DIR_ENV}: kept {}", self.0.display());
            return;
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Reports that `test` did not run and why. The message goes to stderr
/// and, when `NFVSWITCH_SKIP_LOG` names a file, is appended there so the
/// test script can list every skipped test at the end of a run.
pub fn skip(test: &str, reason: &str) {
    let msg = format!("SKIPPED {test}: {reason}");
    eprintln!("{msg}");
    if let Some(path) = std::env::var_os("NFVSWITCH_SKIP_LOG")
        && let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
    {
        let _ = writeln!(f, "{msg}");
    }
}

/// Polls `cond` every 10 ms until it holds or `timeout` passes; returns
/// whether it held.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// True when running as root.
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// Finds an executable on PATH.
pub fn which(cmd: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| std::path::Path::new(d).join(cmd))
        .find(|p| p.is_file())
}
