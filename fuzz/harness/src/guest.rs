//! Fake guest memory for the virtqueue target: one anonymous mapping with
//! a PROT_NONE page on each side (an access one byte outside faults), and
//! a hostile "second vCPU" that rewrites bytes of it while the device
//! walks the rings.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

pub(crate) const PAGE: usize = 4096;

pub(crate) struct Guarded {
    base: *mut u8,
    len: usize,
}

impl Guarded {
    pub fn new(len: usize) -> Guarded {
        let len = len.div_ceil(PAGE) * PAGE;
        // SAFETY: a fresh anonymous mapping; the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len + 2 * PAGE,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED, "mmap");
        let base = p.cast::<u8>().wrapping_add(PAGE);
        // SAFETY: the middle of the mapping just made.
        let r = unsafe { libc::mprotect(base.cast(), len, libc::PROT_READ | libc::PROT_WRITE) };
        assert_eq!(r, 0, "mprotect");
        Guarded { base, len }
    }
    pub fn ptr(&self) -> *mut u8 {
        self.base
    }
    pub fn len(&self) -> usize {
        self.len
    }
    /// A copy of `range` (test oracle; not while a mutator runs).
    pub fn snapshot(&self, from: usize, to: usize) -> Vec<u8> {
        assert!(from <= to && to <= self.len);
        // SAFETY: inside the readable part of the mapping.
        unsafe { std::slice::from_raw_parts(self.base.add(from), to - from) }.to_vec()
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        // SAFETY: the whole mapping made in `new`.
        unsafe { libc::munmap(self.base.wrapping_sub(PAGE).cast(), self.len + 2 * PAGE) };
    }
}

/// Rewrites random bytes of `[from, to)` of the mapping until `stop`, as a
/// driver on another CPU may at any moment. Byte stores through atomics:
/// the device reads the same memory with volatile copies, as it reads a
/// real guest's.
pub(crate) fn scribble(mem: &Guarded, from: usize, to: usize, seed: u32, stop: &AtomicBool) {
    let mut x = seed | 1;
    let span = (to - from) as u32;
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..64 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let at = from + (x % span) as usize;
            // SAFETY: `at` is inside the readable, writable part of the
            // mapping, which outlives this thread (scoped by the caller).
            let cell = unsafe { AtomicU8::from_ptr(mem.ptr().add(at)) };
            cell.store((x >> 24) as u8, Ordering::Relaxed);
        }
        std::hint::spin_loop();
    }
}

// SAFETY: the mapping is plain memory; threads share it the way a guest's
// vCPUs and the switch do (atomics or volatile accesses only).
unsafe impl Sync for Guarded {}
