//! Hostile tenants for `nfv-bench soak --attacks` (issue 36): small
//! attackers written with the frontend libraries the tests use — the
//! `vhost` crate's frontend ([`vhost`]) and `nfv_memif`'s client side and
//! control socket ([`memif`]). Each runs on its own thread until told to
//! stop and returns a [`Tally`] of what it tried and what the switch
//! answered; the soak measures the innocent traffic around it.

pub mod memif;
pub mod vhost;

use std::ffi::CStr;
use std::fs::File;
use std::os::fd::FromRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What an attacker did, as it saw it.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Tally {
    /// Hostile requests or events sent.
    pub tries: u64,
    /// Those the switch refused (an error reply, a DISCONNECT).
    pub refused: u64,
    /// Those the switch accepted (for a request that must be refused: a
    /// finding).
    pub accepted: u64,
    /// Distinct problems and answers heard (at most 8).
    pub notes: Vec<String>,
}

impl Tally {
    pub fn note(&mut self, s: String) {
        if self.notes.len() < 8 && !self.notes.contains(&s) {
            self.notes.push(s);
        }
    }
}

/// A memfd of `len` bytes (sparse: nothing is allocated until touched).
pub fn memfd(name: &CStr, len: u64) -> std::io::Result<File> {
    // SAFETY: a valid NUL-terminated name; the new fd is owned below.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` is fresh and owned by nothing else.
    let f = unsafe { File::from_raw_fd(fd) };
    f.set_len(len)?;
    Ok(f)
}

/// Puts the calling thread in SCHED_IDLE: on a small machine the
/// attacker's own CPU time must not be what slows its neighbours (a
/// hostile tenant has its own CPUs; here it would share one with a busy
/// poller, and even nice 19 takes ~12 % of a CPU from a nice-10 one);
/// what the switch spends serving it still counts.
pub fn nice_thread() {
    let p = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_setscheduler on the calling thread (tid 0 = self)
    // with a valid sched_param; no memory is handed over.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &p) };
}

/// Sleeps `d` in small steps; `true` if `stop` was set meanwhile.
pub fn until(stop: &AtomicBool, d: Duration) -> bool {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if stop.load(Ordering::Relaxed) {
            return true;
        }
        std::thread::sleep(
            Duration::from_millis(5).min(end.saturating_duration_since(Instant::now())),
        );
    }
    stop.load(Ordering::Relaxed)
}
