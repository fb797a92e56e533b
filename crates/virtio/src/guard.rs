//! Surviving SIGBUS in guest memory.
//!
//! A frontend that shrinks (`ftruncate`, hole punching) the file behind
//! guest memory after we mapped it turns our next access to the lost pages
//! into SIGBUS, which would kill the whole switch. A process-wide SIGBUS
//! handler, installed once by the first [`register`], looks the faulting
//! address up in a lock-free table of guest mappings. When it belongs to
//! one, the handler maps anonymous zero memory over that **whole mapping**
//! ([`nfv_mem::mapping::overlay_raw`]: one `mmap` with `MAP_FIXED`, a
//! plain syscall without allocation, safe in a signal handler),
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
//! The table grows with the ports: it is a fixed array of [`CHUNKS`]
//! pointers to chunks of [`CHUNK`] entries. The first chunk is static;
//! [`register`] allocates another (outside any signal handler) when every
//! entry is taken and publishes it with one pointer store. Chunks are
//! never freed, so the handler walks them with atomic loads only — no
//! allocation and no lock in the handler. A vhost-user port holds up to
//! 2 × its regions + 1 entries during a table swap and a memif connection
//! one per region, so the [`SLOTS`] entries in all serve thousands of
//! ports; should they still run out, the port whose table or log needed
//! the entry is refused (counted in [`refusals`] and by the port), never
//! the node.
//!
//! Limits: faults in memory mapped by [`GuestMemory::from_raw`] (the driver
//! side's own memory) are not covered; a second SIGBUS handler installed
//! later by someone else replaces ours.
//!
//! [`GuestMemory::from_raw`]: crate::memory::GuestMemory::from_raw

use nfv_mem::mapping::{Commit, Pages, Populate, overlay_raw};
use std::sync::Once;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering::*};

/// Entries per chunk of the table.
pub const CHUNK: usize = 1024;
/// Most chunks (the first one static).
pub const CHUNKS: usize = 64;
/// Most guest mappings guarded at once (each region of each port's
/// memory table is one, and each dirty log).
pub const SLOTS: usize = CHUNK * CHUNKS;

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

type Chunk = [Entry; CHUNK];

static FIRST: Chunk = [EMPTY; CHUNK];
#[allow(clippy::declare_interior_mutable_const)]
const NO_CHUNK: AtomicPtr<Entry> = AtomicPtr::new(std::ptr::null_mut());
/// Chunks after the first, filled in order; a chunk once published is
/// never freed or moved.
static MORE: [AtomicPtr<Entry>; CHUNKS - 1] = [NO_CHUNK; CHUNKS - 1];
/// Registrations refused because every chunk was full.
static REFUSED: AtomicU64 = AtomicU64::new(0);

/// Chunk `i`, if it exists. Async-signal-safe (one atomic load).
fn chunk(i: usize) -> Option<&'static Chunk> {
    if i == 0 {
        return Some(&FIRST);
    }
    let p = MORE[i - 1].load(Acquire);
    // SAFETY: a non-null pointer here came from `Box::leak` of a `Chunk`
    // (see `grow`) and is never freed; `Entry` is all atomics.
    (!p.is_null()).then(|| unsafe { &*p.cast::<Chunk>() })
}

/// Every entry of every chunk published so far.
fn entries() -> impl Iterator<Item = &'static Entry> {
    (0..CHUNKS).map_while(chunk).flatten()
}

/// Entry `idx` (of a [`Guarded`]: its chunk exists).
fn entry(idx: usize) -> &'static Entry {
    &chunk(idx / CHUNK).expect("a guarded entry's chunk exists")[idx % CHUNK]
}

/// Registrations refused since the process started because the table was
/// full (each also refused the memory table or log that needed it).
pub fn refusals() -> u64 {
    REFUSED.load(Relaxed)
}

/// Entries in use now (for tests and gauges).
pub fn in_use() -> usize {
    entries().filter(|e| e.state.load(Relaxed) != FREE).count()
}

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
        entry(self.idx).faulted.load(Acquire)
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        entry(self.idx).state.store(FREE, SeqCst);
        // A handler that may have seen the entry live finishes before the
        // caller unmaps. Handlers are short (one mmap), so this spins
        // briefly, and only while some thread is handling a fault.
        while IN_FLIGHT.load(SeqCst) != 0 {
            std::hint::spin_loop();
        }
    }
}

/// Guards `[start, start+len)`, a `MAP_SHARED` mapping of a guest memory
/// file. `None` (counted in [`refusals`]) when all [`SLOTS`] entries are
/// taken.
pub fn register(start: *mut u8, len: usize) -> Option<Guarded> {
    INSTALL.call_once(install);
    for c in 0..CHUNKS {
        let chunk = match chunk(c) {
            Some(ch) => ch,
            None => grow(c),
        };
        for (i, e) in chunk.iter().enumerate() {
            if e.state
                .compare_exchange(FREE, CLAIMED, Acquire, Relaxed)
                .is_ok()
            {
                e.start.store(start as usize, Relaxed);
                e.len.store(len, Relaxed);
                e.faulted.store(false, Relaxed);
                e.state.store(LIVE, SeqCst);
                return Some(Guarded { idx: c * CHUNK + i });
            }
        }
    }
    REFUSED.fetch_add(1, Relaxed);
    None
}

/// Publishes chunk `c` (`c >= 1`), or returns the one another thread
/// published first. Never called from the signal handler.
#[cold]
fn grow(c: usize) -> &'static Chunk {
    let new: &'static mut Chunk = Box::leak(Box::new([EMPTY; CHUNK]));
    let p = new.as_mut_ptr();
    match MORE[c - 1].compare_exchange(std::ptr::null_mut(), p, AcqRel, Acquire) {
        Ok(_) => new,
        Err(_) => {
            // SAFETY: `p` is ours from `Box::leak` above and was never
            // published.
            drop(unsafe { Box::from_raw(p.cast::<Chunk>()) });
            chunk(c).expect("published by the thread that won")
        }
    }
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
/// Async-signal-safe: atomics and one `mmap` syscall, no allocation, no
/// lock (chunks are walked through their published pointers).
fn rescue(addr: usize) -> bool {
    for e in entries() {
        if e.state.load(SeqCst) != LIVE {
            continue;
        }
        let (start, len) = (e.start.load(Relaxed), e.len.load(Relaxed));
        if addr.wrapping_sub(start) >= len {
            continue;
        }
        let zeros = Pages::Zeros {
            populate: Populate::OnTouch,
            commit: Commit::NoReserve,
        };
        // SAFETY: `[start, start+len)` is a live, page-aligned guest mapping
        // of ours (the entry is live and its owner waits for us before
        // unmapping it, and still unmaps it afterwards); its contents are
        // lost anyway, which is why we are here. `overlay_raw` is one
        // MAP_FIXED `mmap`, without allocation: async-signal-safe.
        if unsafe { overlay_raw(start as *mut u8, len, zeros) }.is_err() {
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

#[cfg(test)]
mod tests {
    use super::*;
    use nfv_mem::Mapping;
    use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

    #[test]
    fn the_table_grows_past_the_old_limit_and_still_catches_faults() {
        // A reserved, inaccessible range no other mapping can take: the
        // stand-in registrations point into it, so a fault elsewhere never
        // matches them. Declared first, so it is unmapped last, after the
        // registrations (also when an assertion fails).
        let stand_in = Mapping::reserve(4096).unwrap();
        let many: Vec<Guarded> = (0..5 * CHUNK)
            .map(|_| register(stand_in.as_ptr(), 4096).expect("the table grows"))
            .collect();
        assert!(many.iter().any(|g| g.idx >= 4 * CHUNK));
        assert!(in_use() >= 5 * CHUNK);

        // A guest file mapped now lands behind them, in a later chunk
        // (unless other tests freed entries meanwhile), and a fault in it
        // is still survived.
        // SAFETY: a literal name; the fd is taken over.
        let fd = unsafe { OwnedFd::from_raw_fd(libc::memfd_create(c"guard-grow".as_ptr(), 0)) };
        // SAFETY: plain syscalls on our fd.
        assert_eq!(unsafe { libc::ftruncate(fd.as_raw_fd(), 2 * 4096) }, 0);
        let map = Mapping::shared(fd.as_fd(), 2 * 4096, 0, Populate::OnTouch).unwrap();
        let p = map.as_ptr();
        let g = register(p, 2 * 4096).expect("registered");
        // SAFETY: inside our mapping, which is live.
        unsafe { p.add(4096).write_volatile(7) };
        let epoch = fault_epoch();
        // SAFETY: the frontend's attack, on our own fd.
        assert_eq!(unsafe { libc::ftruncate(fd.as_raw_fd(), 0) }, 0);
        // SAFETY: still our mapping; the access raises SIGBUS, which the
        // guard turns into a read of zero.
        assert_eq!(unsafe { p.add(4096).read_volatile() }, 0);
        assert!(g.faulted(), "entry {} caught the fault", g.idx);
        assert_ne!(fault_epoch(), epoch);
        drop(many);
        // Unregistered before it is unmapped (now private zeros).
        drop(g);
        drop(map);
    }
}
