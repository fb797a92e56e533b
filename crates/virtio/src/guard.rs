//! Surviving SIGBUS in guest memory.
//!
//! A frontend that shrinks (`ftruncate`, hole punching) the file behind
//! guest memory after we mapped it turns our next access to the lost pages
//! into SIGBUS, which would kill the whole switch. A process-wide SIGBUS
//! handler, installed once by the first [`register`], looks the faulting
//! address up in a lock-free table of guest mappings. When it belongs to
//! one, the handler maps anonymous zero memory over that **whole mapping**
//! (`mmap` with `MAP_FIXED`: a plain syscall, safe in a signal handler),
//! flags the mapping as faulted and returns: the interrupted access is
//! retried and reads zeros (writes go to private memory nobody sees). The
//! ring code already treats guest memory as hostile, so zeros are just one
//! more bad input. The owner of the queues notices through
//! [`fault_epoch`] (one relaxed load per burst) and quarantines the rings
//! of that memory; other ports are untouched.
//!
//! A fault outside every registered mapping is passed to the handler that
//! was installed before ours (Rust's stack-overflow handler, or the
//! default action, which ends the process as it would have anyway).
//!
//! Registration and removal race with faults on other threads: a handler
//! counts itself in [`IN_FLIGHT`] *before* it reads the table, and removal
//! clears the entry and then waits until no handler is in flight before
//! the caller may unmap. So a handler either saw the entry cleared, or the
//! range is still mapped (and ours) while it remaps it; no stale entry can
//! make it map zeros over memory that has been reused since.
//!
//! Limits: faults in memory mapped by [`GuestMemory::from_raw`] (the driver
//! side's own memory) are not covered; the table holds [`SLOTS`] mappings;
//! a second SIGBUS handler installed later by someone else replaces ours.
//!
//! [`GuestMemory::from_raw`]: crate::memory::GuestMemory::from_raw

use std::sync::Once;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering::*};

/// Most guest mappings guarded at once (each region of each port's
/// memory table is one).
pub const SLOTS: usize = 1024;

const FREE: u32 = 0;
const CLAIMED: u32 = 1;
const LIVE: u32 = 2;

struct Entry {
    state: AtomicU32,
    start: AtomicUsize,
    len: AtomicUsize,
    faulted: AtomicBool,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Entry = Entry {
    state: AtomicU32::new(FREE),
    start: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    faulted: AtomicBool::new(false),
};

static TABLE: [Entry; SLOTS] = [EMPTY; SLOTS];
/// SIGBUS handlers currently reading the table.
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);
/// Bumped by every handled fault.
static FAULTS: AtomicU64 = AtomicU64::new(0);
/// The handler that was installed before ours (a leaked `sigaction`).
static PREVIOUS: AtomicPtr<libc::sigaction> = AtomicPtr::new(std::ptr::null_mut());
static INSTALL: Once = Once::new();

/// Changes whenever a fault in guest memory was survived. Cheap to poll
/// (a line that is written only on faults).
#[inline(always)]
pub fn fault_epoch() -> u64 {
    FAULTS.load(Relaxed)
}

/// Guard of one mapping; drop it *before* unmapping.
#[derive(Debug)]
pub struct Guarded {
    idx: usize,
}

impl Guarded {
    /// True once a SIGBUS in this mapping was survived (its contents are
    /// zeros from then on).
    pub fn faulted(&self) -> bool {
        TABLE[self.idx].faulted.load(Acquire)
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        TABLE[self.idx].state.store(FREE, SeqCst);
        // A handler that may have seen the entry live finishes before the
        // caller unmaps. Handlers are short (one mmap), so this spins
        // briefly, and only while some thread is handling a fault.
        while IN_FLIGHT.load(SeqCst) != 0 {
            std::hint::spin_loop();
        }
    }
}

/// Guards `[start, start+len)`, a `MAP_SHARED` mapping of a guest memory
/// file. `None` when the table is full.
pub fn register(start: *mut u8, len: usize) -> Option<Guarded> {
    INSTALL.call_once(install);
    for (idx, e) in TABLE.iter().enumerate() {
        if e.state
            .compare_exchange(FREE, CLAIMED, Acquire, Relaxed)
            .is_ok()
        {
            e.start.store(start as usize, Relaxed);
            e.len.store(len, Relaxed);
            e.faulted.store(false, Relaxed);
            e.state.store(LIVE, SeqCst);
            return Some(Guarded { idx });
        }
    }
    None
}

fn install() {
    // SAFETY: `sa` is fully initialised from zeroed memory; the handler is
    // an `extern "C"` function with the SA_SIGINFO signature; `old` is
    // leaked so the handler can read it for the life of the process.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigbus as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        let old: *mut libc::sigaction = Box::into_raw(Box::new(std::mem::zeroed()));
        if libc::sigaction(libc::SIGBUS, &sa, old) == 0 {
            PREVIOUS.store(old, Release);
        }
    }
}

/// Replaces the guarded mapping that contains `addr` with zero memory.
/// Async-signal-safe: atomics and one `mmap` syscall, no allocation.
fn rescue(addr: usize) -> bool {
    for e in TABLE.iter() {
        if e.state.load(SeqCst) != LIVE {
            continue;
        }
        let (start, len) = (e.start.load(Relaxed), e.len.load(Relaxed));
        if addr.wrapping_sub(start) >= len {
            continue;
        }
        // SAFETY: `[start, start+len)` is a live guest mapping of ours
        // (the entry is live and its owner waits for us before unmapping);
        // MAP_FIXED replaces it in place with private zero pages.
        let p = unsafe {
            libc::mmap(
                start as *mut libc::c_void,
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p as usize != start {
            return false;
        }
        e.faulted.store(true, Release);
        FAULTS.fetch_add(1, Release);
        return true;
    }
    false
}

extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    IN_FLIGHT.fetch_add(1, SeqCst);
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers;
    // si_addr is the faulting address for SIGBUS.
    let addr = unsafe { (*info).si_addr() } as usize;
    let handled = rescue(addr);
    IN_FLIGHT.fetch_sub(1, SeqCst);
    if !handled {
        chain(sig, info, ctx);
    }
}

/// Hands a fault that is not ours to the previous handler.
fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let prev = PREVIOUS.load(Acquire);
    // SAFETY: `prev` is null or the leaked sigaction saved at install.
    let Some(prev) = (unsafe { prev.as_ref() }) else {
        // SAFETY: restoring the default action; the access faults again
        // when we return and the process ends as it would without us.
        unsafe { libc::signal(sig, libc::SIG_DFL) };
        return;
    };
    let h = prev.sa_sigaction;
    if h == libc::SIG_DFL || h == libc::SIG_IGN {
        // SAFETY: as above: re-installs the previous disposition; the
        // faulting access repeats on return and gets it.
        unsafe { libc::sigaction(sig, prev, std::ptr::null_mut()) };
    } else if prev.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the previous handler was installed with SA_SIGINFO, so
        // it has this signature.
        let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute(h) };
        f(sig, info, ctx);
    } else {
        // SAFETY: a classic one-argument handler.
        let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(h) };
        f(sig);
    }
}
