//! Signalling a peer's eventfd (a vhost-user call fd, a VNF's kick fd)
//! without ever blocking the thread that wants the signal sent.
//!
//! # Why not a plain `write(2)` on the PMD
//!
//! The fd comes from the peer, and so does its *open file description*:
//! an eventfd whose counter the peer has pushed to its maximum, or the
//! write end of a pipe nobody reads, blocks `write` for as long as the peer
//! likes. Setting `O_NONBLOCK` is no fix: the flag lives on the shared open
//! file description and the peer can clear it again at any moment. The
//! other ways to get a private non-blocking write were checked and do not
//! cover eventfds, the fd type every real frontend uses:
//!
//! * reopening `/proc/self/fd/N` gives a private description for pipes and
//!   FIFOs, but fails with `ENXIO` for anonymous inodes (eventfd);
//! * `pwritev2(..., RWF_NOWAIT)` is refused with `EOPNOTSUPP` by eventfd
//!   (checked on Linux 6.18);
//! * `MSG_DONTWAIT` applies to sockets only;
//! * `poll(POLLOUT)` then `write` is a race the peer can win on purpose.
//!
//! # What we do instead
//!
//! A PMD never writes a peer's fd. It marks the fd's [`Call`] *pending*
//! (one atomic swap) and, only if the notifier thread is asleep, wakes it
//! by writing an eventfd that we created and nobody else holds (non-blocking
//! on a description only we have, so it cannot block). The process-wide
//! notifier thread then writes the peer fds. Requests that arrive while one
//! is still pending coalesce into one write, as interrupts may.
//!
//! The notifier itself must not hang on one hostile fd either, or every
//! other port's interrupts would stop: while it has writes to make it keeps
//! a periodic per-thread timer armed ([`WATCHDOG`], `timer_create` with
//! `SIGEV_THREAD_ID`) whose signal has a no-op handler installed without
//! `SA_RESTART`. A write that would block is therefore interrupted within
//! one period (`EINTR`); a write that does not block is never affected (the
//! signal only ends a *sleep*). Such an fd is marked *stuck* and ignored
//! from then on: no well-behaved peer can fill an eventfd (2^64 - 2
//! signals) or uses a pipe it does not read, and a peer that wants
//! interrupts again sends a new fd (SET_VRING_CALL), which gets a fresh
//! [`Call`]. Signals for a stuck fd are counted by the caller (the vhost
//! port shows them as `call_blocked`).
//!
//! # Limits
//!
//! * One extra thread hop per interrupt: a few microseconds while a core
//!   is free, more when every core is busy. The PMD side costs one atomic
//!   swap, and the wake-up syscall only when the notifier sleeps (under
//!   load it usually does not, so PMDs make fewer syscalls than before).
//! * A hostile fd can delay other fds' signals by up to one watchdog
//!   period, once per fd it hands over.
//! * The notifier uses one real-time signal ([`watchdog_signal`]); a
//!   program that uses the same signal for something else must not link
//!   this module.
//! * Writing to a pipe whose reader is gone raises `SIGPIPE`; Rust
//!   programs ignore it by default (then the write fails with `EPIPE` and
//!   the fd is marked stuck).
//!
//! Thread safety: [`Call`] is `Send + Sync`; `signal` may be called from
//! any thread. The registry mutex is taken only to add or remove a `Call`
//! and by the notifier to copy the list, never across a write.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Period of the watchdog timer that interrupts a blocked write.
pub const WATCHDOG: Duration = Duration::from_millis(1);
/// The notifier wakes at least this often to drop retired fds.
const IDLE_WAKE_MS: i32 = 100;

/// One peer fd to signal. Dropping it retires the fd (the notifier closes
/// its copy on its next pass).
#[derive(Debug)]
pub struct Call {
    slot: Arc<Slot>,
}

#[derive(Debug)]
struct Slot {
    fd: OwnedFd,
    pending: AtomicBool,
    /// A write would have blocked (or failed): the fd is ignored.
    stuck: AtomicBool,
    retired: AtomicBool,
    /// Completed writes.
    writes: AtomicU64,
    /// Writes that failed for a reason other than blocking.
    failures: AtomicU64,
}

impl Call {
    /// Takes over `fd` (our own duplicate of the peer's) and registers it
    /// with the notifier, starting the notifier thread on first use.
    pub fn new(fd: OwnedFd) -> Call {
        let slot = Arc::new(Slot {
            fd,
            pending: AtomicBool::new(false),
            stuck: AtomicBool::new(false),
            retired: AtomicBool::new(false),
            writes: AtomicU64::new(0),
            failures: AtomicU64::new(0),
        });
        notifier().register(slot.clone());
        Call { slot }
    }

    /// Asks for one signal on the fd. Never blocks; makes a syscall only
    /// when the notifier thread sleeps. Returns false, sending nothing,
    /// when the fd is stuck.
    #[inline]
    pub fn signal(&self) -> bool {
        if self.slot.stuck.load(Relaxed) {
            return false;
        }
        // SeqCst swap and load: pairs with the notifier's store of
        // `sleeping` followed by its scan of `pending` (either it sees our
        // request or we see it asleep and wake it).
        if !self.slot.pending.swap(true, SeqCst) {
            notifier().wake_if_sleeping();
        }
        true
    }

    /// True once a write to the fd would have blocked or failed.
    pub fn is_stuck(&self) -> bool {
        self.slot.stuck.load(Relaxed)
    }

    /// Signals written so far.
    pub fn writes(&self) -> u64 {
        self.slot.writes.load(Relaxed)
    }

    /// Writes that failed with an error other than blocking (the fd is
    /// then stuck too).
    pub fn failures(&self) -> u64 {
        self.slot.failures.load(Relaxed)
    }

    /// The raw fd (for tests and diagnostics; the notifier writes it).
    pub fn raw_fd(&self) -> i32 {
        self.slot.fd.as_raw_fd()
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        self.slot.retired.store(true, Release);
        notifier().changed.store(true, Release);
    }
}

/// Waits until every signal requested before the call has been written
/// (or found stuck); for tests and orderly shutdown. Gives up after
/// `timeout` and returns false.
pub fn flush(timeout: Duration) -> bool {
    let n = notifier();
    let target = n.passes.load(Acquire) + 2;
    let deadline = Instant::now() + timeout;
    while n.passes.load(Acquire) < target {
        n.force_wake();
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_micros(50));
    }
    true
}

/// The real-time signal the notifier's watchdog uses.
pub fn watchdog_signal() -> i32 {
    libc::SIGRTMAX() - 3
}

struct Notifier {
    /// Our own eventfd (non-blocking, shared with nobody).
    wake: OwnedFd,
    sleeping: AtomicBool,
    slots: Mutex<Vec<Arc<Slot>>>,
    changed: AtomicBool,
    /// Passes completed (for [`flush`]).
    passes: AtomicU64,
}

fn notifier() -> &'static Notifier {
    static N: OnceLock<&'static Notifier> = OnceLock::new();
    N.get_or_init(|| {
        // SAFETY: plain syscall; the result is checked.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        assert!(
            fd >= 0,
            "cannot create the notifier's eventfd: {}",
            std::io::Error::last_os_error()
        );
        let n: &'static Notifier = Box::leak(Box::new(Notifier {
            // SAFETY: `fd` was just created and is owned by nothing else.
            wake: unsafe { OwnedFd::from_raw_fd(fd) },
            sleeping: AtomicBool::new(false),
            slots: Mutex::new(Vec::new()),
            changed: AtomicBool::new(false),
            passes: AtomicU64::new(0),
        }));
        std::thread::Builder::new()
            .name("nfv-notify".into())
            .spawn(move || n.run())
            .expect("cannot start the notifier thread");
        n
    })
}

impl Notifier {
    fn register(&self, slot: Arc<Slot>) {
        let mut v = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        v.retain(|s| !s.retired.load(Acquire));
        v.push(slot);
        drop(v);
        self.changed.store(true, Release);
    }

    #[inline]
    fn wake_if_sleeping(&self) {
        if self.sleeping.load(SeqCst) && self.sleeping.swap(false, SeqCst) {
            self.force_wake();
        }
    }

    fn force_wake(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live local to our own non-blocking
        // eventfd; EAGAIN (counter full) means a wake-up is pending anyway.
        unsafe { libc::write(self.wake.as_raw_fd(), (&raw const one).cast(), 8) };
    }

    fn run(&self) {
        let mut watchdog = Watchdog::new();
        let mut local: Vec<Arc<Slot>> = Vec::new();
        loop {
            if self.changed.swap(false, AcqRel) {
                let mut v = self.slots.lock().unwrap_or_else(|p| p.into_inner());
                v.retain(|s| !s.retired.load(Acquire));
                local.clone_from(&v);
            }
            self.sleeping.store(true, SeqCst);
            let busy = local.iter().any(|s| s.pending.load(SeqCst));
            if busy {
                self.sleeping.store(false, SeqCst);
            } else {
                self.sleep();
            }
            self.pass(&local, &mut watchdog);
            self.passes.fetch_add(1, Release);
        }
    }

    /// Waits for a wake-up (or the idle period) and drains the wake fd.
    fn sleep(&self) {
        let mut pfd = libc::pollfd {
            fd: self.wake.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd; EINTR (watchdog) just ends the wait.
        unsafe { libc::poll(&mut pfd, 1, IDLE_WAKE_MS) };
        let mut v = 0u64;
        // SAFETY: reads 8 bytes into a local from our non-blocking eventfd.
        unsafe { libc::read(self.wake.as_raw_fd(), (&raw mut v).cast(), 8) };
        self.sleeping.store(false, SeqCst);
    }

    fn pass(&self, local: &[Arc<Slot>], watchdog: &mut Watchdog) {
        let mut armed = false;
        for s in local {
            if !s.pending.swap(false, AcqRel) || s.stuck.load(Relaxed) || s.retired.load(Relaxed) {
                continue;
            }
            if !armed {
                watchdog.arm(true);
                armed = true;
            }
            deliver(s);
        }
        if armed {
            watchdog.arm(false);
        }
    }
}

/// One write of 1 to the slot's fd; a block (interrupted by the watchdog)
/// or a failure marks it stuck.
fn deliver(s: &Slot) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live local to an fd the slot owns.
    let r = unsafe { libc::write(s.fd.as_raw_fd(), (&raw const one).cast(), 8) };
    if r == 8 {
        s.writes.fetch_add(1, Relaxed);
        return;
    }
    let err = std::io::Error::last_os_error().raw_os_error();
    let blocked = r < 0 && matches!(err, Some(libc::EINTR) | Some(libc::EAGAIN));
    if !blocked {
        s.failures.fetch_add(1, Relaxed);
    }
    s.stuck.store(true, Relaxed);
}

/// A periodic per-thread timer whose signal interrupts a blocked write.
struct Watchdog {
    timer: Option<libc::timer_t>,
}

extern "C" fn on_watchdog(_: libc::c_int) {}

impl Watchdog {
    fn new() -> Watchdog {
        let sig = watchdog_signal();
        // SAFETY: installs a no-op handler (async-signal-safe) without
        // SA_RESTART, so a blocked write returns EINTR; `sa` is fully
        // initialised from zeroed memory.
        let timer = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_watchdog as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            sa.sa_flags = 0;
            if libc::sigaction(sig, &sa, std::ptr::null_mut()) != 0 {
                None
            } else {
                let mut sev: libc::sigevent = std::mem::zeroed();
                sev.sigev_notify = libc::SIGEV_THREAD_ID;
                sev.sigev_signo = sig;
                sev.sigev_notify_thread_id = libc::gettid();
                let mut t: libc::timer_t = std::ptr::null_mut();
                (libc::timer_create(libc::CLOCK_MONOTONIC, &mut sev, &mut t) == 0).then_some(t)
            }
        };
        Watchdog { timer }
    }

    /// Starts (`on`) or stops the periodic timer.
    fn arm(&mut self, on: bool) {
        let Some(t) = self.timer else { return };
        let period = libc::timespec {
            tv_sec: 0,
            tv_nsec: if on {
                WATCHDOG.as_nanos() as libc::c_long
            } else {
                0
            },
        };
        let spec = libc::itimerspec {
            it_interval: period,
            it_value: period,
        };
        // SAFETY: `t` is our timer; `spec` is a valid itimerspec.
        unsafe { libc::timer_settime(t, 0, &spec, std::ptr::null_mut()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eventfd(flags: i32) -> OwnedFd {
        // SAFETY: plain syscall; checked, then owned.
        let fd = unsafe { libc::eventfd(0, flags | libc::EFD_CLOEXEC) };
        assert!(fd >= 0);
        // SAFETY: fresh fd.
        unsafe { OwnedFd::from_raw_fd(fd) }
    }

    fn write_u64(fd: &OwnedFd, v: u64) {
        // SAFETY: 8 bytes from a local.
        let r = unsafe { libc::write(fd.as_raw_fd(), (&raw const v).cast(), 8) };
        assert_eq!(r, 8);
    }

    fn read_u64(fd: &OwnedFd) -> u64 {
        let mut v = 0u64;
        // SAFETY: 8 bytes into a local.
        let r = unsafe { libc::read(fd.as_raw_fd(), (&raw mut v).cast(), 8) };
        if r == 8 { v } else { 0 }
    }

    #[test]
    fn signals_reach_the_fd_and_coalesce_while_pending() {
        let fd = eventfd(libc::EFD_NONBLOCK);
        let call = Call::new(fd.try_clone().unwrap());
        assert!(call.signal());
        assert!(flush(Duration::from_secs(5)));
        assert_eq!(read_u64(&fd), 1);
        for _ in 0..100 {
            call.signal();
        }
        assert!(flush(Duration::from_secs(5)));
        let got = read_u64(&fd);
        assert!((1..=100).contains(&got), "{got}");
        assert_eq!(call.writes(), 1 + got);
        assert!(!call.is_stuck());
    }

    /// The notifier must come back from fds that block, whichever way
    /// they do, and keep serving a healthy fd.
    #[test]
    fn blocking_fds_are_marked_stuck_and_others_keep_working() {
        // An eventfd at its maximum count, in blocking mode.
        let full = eventfd(0);
        write_u64(&full, u64::MAX - 1);
        // A pipe nobody reads, filled up, in blocking mode.
        let mut p = [0; 2];
        // SAFETY: valid array of two ints.
        assert_eq!(unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: both fds are fresh and ours.
        let (pr, pw) = unsafe { (OwnedFd::from_raw_fd(p[0]), OwnedFd::from_raw_fd(p[1])) };
        // SAFETY: fcntl on our fd.
        unsafe { libc::fcntl(pw.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
        let chunk = [0u8; 4096];
        // SAFETY: writes from a live buffer until the pipe is full.
        while unsafe { libc::write(pw.as_raw_fd(), chunk.as_ptr().cast(), chunk.len()) } > 0 {}
        // SAFETY: back to blocking mode, as a hostile peer would leave it.
        unsafe { libc::fcntl(pw.as_raw_fd(), libc::F_SETFL, 0) };
        let good_fd = eventfd(libc::EFD_NONBLOCK);
        let good = Call::new(good_fd.try_clone().unwrap());
        for (what, fd) in [("full eventfd", full), ("full pipe", pw)] {
            let bad = Call::new(fd);
            assert!(bad.signal());
            good.signal();
            assert!(flush(Duration::from_secs(5)), "{what}: notifier hung");
            assert!(bad.is_stuck(), "{what}");
            assert!(!bad.signal(), "{what}: a stuck fd is ignored");
            assert_eq!(read_u64(&good_fd), 1, "{what}");
        }
        drop(pr);
    }
}
