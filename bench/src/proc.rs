//! Processes the benchmark starts, and Ctrl-C.
//!
//! Every process is owned by a [`Proc`] guard that stops it *by PID* when
//! dropped (its stop signal, then SIGKILL after a grace period), so an
//! error, a panic or Ctrl-C never leaves a busy-polling testpmd or switch
//! behind. Children run in their own process group (a terminal Ctrl-C
//! reaches only us, and we stop them in order) and with
//! `PR_SET_PDEATHSIG = SIGKILL`, so even a SIGKILLed benchmark takes its
//! children with it. Nothing is ever killed by name.
//!
//! Ctrl-C/SIGTERM/SIGHUP are blocked in every thread and received by one
//! thread ([`install_signal_thread`]) that only sets a flag; every wait in
//! the benchmark polls it through [`check`] and returns an error, so the
//! guards unwind in order (processes first, then the hugepage setting).
//!
//! Thread safety: [`Proc`] is owned by the thread that spawned it (which
//! must stay alive while it runs: PDEATHSIG is tied to the spawning
//! thread — everything is spawned from the main thread).

use nix::sys::signal::{SigSet, Signal, kill};
use nix::unistd::Pid;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

static STOP: AtomicBool = AtomicBool::new(false);

/// Blocks the stop signals in the calling thread (call it first in `main`,
/// before any thread exists, so every thread inherits the mask) and starts
/// the thread that turns them into the stop flag.
pub fn install_signal_thread() {
    let mut set = SigSet::empty();
    set.add(Signal::SIGINT);
    set.add(Signal::SIGTERM);
    set.add(Signal::SIGHUP);
    if set.thread_block().is_err() {
        return;
    }
    let _ = std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let mut n = 0;
            while let Ok(sig) = set.wait() {
                n += 1;
                STOP.store(true, Ordering::SeqCst);
                if n == 1 {
                    eprintln!("\nnfv-bench: {sig:?}: stopping every process it started, then restoring the system");
                } else {
                    eprintln!("nfv-bench: {sig:?}: still cleaning up (every wait is bounded)");
                }
            }
        });
}

/// True once Ctrl-C (or SIGTERM/SIGHUP) arrived.
pub fn interrupted() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// `Err("interrupted")` once a stop signal arrived.
pub fn check() -> Result<(), String> {
    if interrupted() {
        Err("interrupted".into())
    } else {
        Ok(())
    }
}

/// Sleeps `d` in small steps; `Err` if interrupted meanwhile.
pub fn sleep(d: Duration) -> Result<(), String> {
    let end = Instant::now() + d;
    loop {
        check()?;
        let now = Instant::now();
        if now >= end {
            return Ok(());
        }
        std::thread::sleep((end - now).min(Duration::from_millis(50)));
    }
}

/// Own process group, and SIGKILL when the benchmark (the spawning
/// thread) dies.
fn detach_from_terminal(cmd: &mut Command) {
    cmd.process_group(0);
    // SAFETY: the closure runs in the forked child before exec and only
    // makes async-signal-safe calls (prctl, sigemptyset, sigprocmask,
    // signal) on its own stack variables.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
            // The mask we block SIGINT/SIGTERM/SIGHUP with is inherited
            // through exec (std does not reset it here): without this
            // testpmd never sees the SIGINT that makes it stop cleanly.
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
            for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
                libc::signal(s, libc::SIG_DFL);
            }
            Ok(())
        });
    }
}

fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// A running child process; stopped by PID when dropped.
pub struct Proc {
    pub name: String,
    child: Option<Child>,
    status: Option<ExitStatus>,
    stop_signal: Signal,
    grace: Duration,
    pub log: PathBuf,
}

impl Proc {
    /// Starts `cmd` with stdout and stderr appended to `log` (stdin null).
    /// `stop_signal` is what makes it exit cleanly (SIGINT for testpmd,
    /// which then prints its final statistics).
    pub fn spawn(
        name: &str,
        mut cmd: Command,
        log: &Path,
        stop_signal: Signal,
    ) -> Result<Proc, String> {
        check()?;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| format!("{}: {e}", log.display()))?;
        let cmdline = describe(&cmd);
        // The exact command first, to reproduce by hand.
        let _ = writeln!(f, "# {cmdline}");
        let f2 = f.try_clone().map_err(|e| e.to_string())?;
        cmd.stdin(Stdio::null()).stdout(f).stderr(f2);
        detach_from_terminal(&mut cmd);
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {name} ({cmdline}): {e}"))?;
        Ok(Proc {
            name: name.to_string(),
            child: Some(child),
            status: None,
            stop_signal,
            grace: Duration::from_secs(10),
            log: log.to_path_buf(),
        })
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// Still running? (Reaps it if it exited.)
    pub fn alive(&mut self) -> bool {
        let Some(c) = self.child.as_mut() else {
            return false;
        };
        match c.try_wait() {
            Ok(None) => true,
            Ok(Some(st)) => {
                self.status = Some(st);
                self.child = None;
                false
            }
            Err(_) => false,
        }
    }

    /// `Err` naming the process and the end of its log if it exited.
    pub fn ensure_alive(&mut self) -> Result<(), String> {
        if self.alive() {
            return Ok(());
        }
        Err(format!(
            "{} exited early ({}); last lines of {}:\n{}",
            self.name,
            self.status.map_or("?".into(), |s| s.to_string()),
            self.log.display(),
            tail(&self.log, 15)
        ))
    }

    /// Waits up to `d` for it to exit by itself; true if it did.
    pub fn wait_exit(&mut self, d: Duration) -> bool {
        let end = Instant::now() + d;
        while self.alive() {
            if Instant::now() >= end {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        true
    }

    /// Stops it: the stop signal, up to the grace period, then SIGKILL.
    /// Returns how it ended (None if it was already reaped before).
    pub fn stop(&mut self) -> Option<ExitStatus> {
        let Some(pid) = self.pid() else {
            return self.status;
        };
        if self.alive() {
            let _ = kill(Pid::from_raw(pid as i32), self.stop_signal);
            if !self.wait_exit(self.grace) {
                eprintln!(
                    "nfv-bench: {} (pid {pid}) ignored {:?} for {:?}: SIGKILL",
                    self.name, self.stop_signal, self.grace
                );
                let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
                self.wait_exit(Duration::from_secs(5));
            }
        }
        self.status
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The last `n` lines of a file (for error messages).
pub fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Output of a finished command.
pub struct Output {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    pub fn ok(&self) -> bool {
        self.status.success()
    }
}

/// Runs a short command to completion with a deadline; on timeout or
/// Ctrl-C it is killed by PID. (No `timeout(1)` wrapper: a SIGKILL of the
/// wrapper would orphan the command.)
pub fn run(cmd: Command, limit: Duration) -> Result<Output, String> {
    check()?;
    run_inner(cmd, limit, true)
}

/// [`run`] that Ctrl-C does not cut short (package installation: an
/// interrupted dpkg leaves the system needing `dpkg --configure -a`).
pub fn run_to_end(cmd: Command, limit: Duration) -> Result<Output, String> {
    run_inner(cmd, limit, false)
}

fn run_inner(mut cmd: Command, limit: Duration, interruptible: bool) -> Result<Output, String> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    detach_from_terminal(&mut cmd);
    let what = describe(&cmd);
    let mut child = cmd.spawn().map_err(|e| format!("cannot run {what}: {e}"))?;
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let t_out = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out.read_to_end(&mut s);
        String::from_utf8_lossy(&s).into_owned()
    });
    let t_err = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        String::from_utf8_lossy(&s).into_owned()
    });
    let end = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) => {}
            Err(e) => return Err(format!("{what}: {e}")),
        }
        let why = if interruptible && interrupted() {
            Some("interrupted".to_string())
        } else if Instant::now() >= end {
            Some(format!("timed out after {limit:?}"))
        } else {
            None
        };
        if let Some(why) = why {
            let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
            let t = Instant::now();
            while matches!(child.try_wait(), Ok(None)) && t.elapsed() < Duration::from_secs(3) {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{what}: {why}"));
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Ok(Output {
        status,
        stdout: t_out.join().unwrap_or_default(),
        stderr: t_err.join().unwrap_or_default(),
    })
}

/// [`run`], and `Err` with its output unless it exited with status 0.
pub fn run_ok(cmd: Command, limit: Duration) -> Result<Output, String> {
    let what = describe(&cmd);
    let o = run(cmd, limit)?;
    if o.ok() {
        Ok(o)
    } else {
        Err(format!(
            "{what}: {}\n{}{}",
            o.status,
            o.stdout.trim_end(),
            o.stderr.trim_end()
        ))
    }
}
