//! The four AF_XDP rings (fill, completion, rx, tx) as seen from user space:
//! single-producer/single-consumer rings of `u32` free-running indices in
//! memory shared with the kernel, as in the kernel's `xsk_queue.h` and
//! libxdp's `xsk.h`.
//!
//! Each side keeps *cached* copies of both indices and reads the other
//! side's index only when its cached view runs short, so a burst costs at
//! most one acquire load and one release store of shared cache lines.
//! Indices are never masked until a slot is addressed (`idx & mask`);
//! differences are taken with wrapping arithmetic, so the u32 wrap-around
//! is harmless (tested below on plain memory).
//!
//! The memory protocol: a producer writes slots, then publishes them with a
//! release store of `producer`; a consumer loads `producer` with acquire,
//! reads the slots, then hands them back with a release store of
//! `consumer`.

use std::sync::atomic::{AtomicU32, Ordering};

/// Where one ring lives: pointers into a mapping shared with the kernel
/// (or, in tests, plain memory).
pub struct RingLayout<T> {
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    slots: *mut T,
    size: u32,
}

impl<T> Clone for RingLayout<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for RingLayout<T> {}

impl<T: Copy> RingLayout<T> {
    /// A ring at `base` with the kernel's offsets (`XDP_MMAP_OFFSETS`).
    ///
    /// # Safety
    /// `base + off.{producer,consumer,flags}` must be 4-byte aligned `u32`s
    /// and `base + off.desc` must hold `size` slots of `T`, all valid for
    /// reads and writes for as long as any cursor made from this layout is
    /// used. `size` must be a power of two.
    pub unsafe fn new(base: *mut u8, off: &libc::xdp_ring_offset, size: u32) -> RingLayout<T> {
        debug_assert!(size.is_power_of_two());
        // SAFETY: the caller guarantees the offsets lie inside the mapping.
        unsafe {
            RingLayout {
                producer: base.add(off.producer as usize).cast(),
                consumer: base.add(off.consumer as usize).cast(),
                flags: base.add(off.flags as usize).cast(),
                slots: base.add(off.desc as usize).cast(),
                size,
            }
        }
    }

    #[inline(always)]
    fn producer(&self) -> &AtomicU32 {
        // SAFETY: valid and aligned for the layout's lifetime (`new`).
        unsafe { &*self.producer }
    }
    #[inline(always)]
    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as in `producer`.
        unsafe { &*self.consumer }
    }
    #[inline(always)]
    fn need_wakeup(&self) -> bool {
        // SAFETY: as in `producer`. The kernel writes the flag with
        // WRITE_ONCE; a relaxed load is what libxdp does too.
        unsafe { (*self.flags).load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0 }
    }
    #[inline(always)]
    fn slot(&self, idx: u32) -> *mut T {
        // SAFETY: the index is masked to `0..size` and `slots` holds
        // `size` elements (`new`).
        unsafe { self.slots.add((idx & (self.size - 1)) as usize) }
    }
}

/// The producing side of a ring (user space fills `fill` and `tx`).
pub struct Producer<T> {
    ring: RingLayout<T>,
    /// Next slot to write.
    cached_prod: u32,
    /// The consumer index last seen, plus `size`: slots up to here are free.
    cached_cons: u32,
}

// SAFETY: a cursor is the only user-space producer of its ring; the ring's
// memory is kept mapped by whoever owns the cursor (see `Xsk`). Moving it
// to another thread moves that exclusive role with it.
unsafe impl<T: Send> Send for Producer<T> {}

impl<T: Copy> Producer<T> {
    /// Takes over the producing side, continuing from the shared indices.
    ///
    /// # Safety
    /// No other producer cursor for this ring may be used while this one is.
    pub unsafe fn new(ring: RingLayout<T>) -> Producer<T> {
        let prod = ring.producer().load(Ordering::Relaxed);
        let cons = ring.consumer().load(Ordering::Acquire);
        Producer {
            ring,
            cached_prod: prod,
            cached_cons: cons.wrapping_add(ring.size),
        }
    }

    /// Free slots: at least `want` if that many are free. Reads the
    /// consumer's index only when the cached view has fewer than `want`.
    #[inline]
    pub fn free(&mut self, want: u32) -> u32 {
        let free = self.cached_cons.wrapping_sub(self.cached_prod);
        if free >= want {
            return free;
        }
        self.cached_cons = self
            .ring
            .consumer()
            .load(Ordering::Acquire)
            .wrapping_add(self.ring.size);
        self.cached_cons.wrapping_sub(self.cached_prod)
    }

    /// Writes the `i`-th slot after the last submitted one. The caller has
    /// seen `free() > i`; the slot is not visible to the consumer before
    /// [`Producer::submit`].
    #[inline(always)]
    pub fn write(&mut self, i: u32, v: T) {
        debug_assert!(i < self.cached_cons.wrapping_sub(self.cached_prod));
        // SAFETY: `slot` stays inside the ring; the slot is free (the
        // consumer is done with it), so nobody reads it concurrently.
        unsafe { self.ring.slot(self.cached_prod.wrapping_add(i)).write(v) }
    }

    /// Publishes the next `n` written slots.
    #[inline]
    pub fn submit(&mut self, n: u32) {
        if n == 0 {
            return;
        }
        debug_assert!(n <= self.cached_cons.wrapping_sub(self.cached_prod));
        self.cached_prod = self.cached_prod.wrapping_add(n);
        self.ring
            .producer()
            .store(self.cached_prod, Ordering::Release);
    }

    /// The kernel asks to be woken (`XDP_RING_NEED_WAKEUP`).
    #[inline(always)]
    pub fn needs_wakeup(&self) -> bool {
        self.ring.need_wakeup()
    }

    /// Slots submitted that the consumer has not taken yet (as of now).
    pub fn outstanding(&self) -> u32 {
        self.cached_prod
            .wrapping_sub(self.ring.consumer().load(Ordering::Acquire))
    }
}

/// The consuming side of a ring (user space drains `rx` and `completion`).
pub struct Consumer<T> {
    ring: RingLayout<T>,
    /// The producer index last seen.
    cached_prod: u32,
    /// Next slot to read.
    cached_cons: u32,
}

// SAFETY: as for `Producer`.
unsafe impl<T: Send> Send for Consumer<T> {}

impl<T: Copy> Consumer<T> {
    /// Takes over the consuming side, continuing from the shared indices.
    ///
    /// # Safety
    /// No other consumer cursor for this ring may be used while this one is.
    pub unsafe fn new(ring: RingLayout<T>) -> Consumer<T> {
        Consumer {
            ring,
            cached_prod: ring.producer().load(Ordering::Acquire),
            cached_cons: ring.consumer().load(Ordering::Relaxed),
        }
    }

    /// Filled slots ready to read, at most `want`. Reads the producer's
    /// index only when the cached view is empty.
    #[inline]
    pub fn available(&mut self, want: u32) -> u32 {
        let mut n = self.cached_prod.wrapping_sub(self.cached_cons);
        if n == 0 {
            self.cached_prod = self.ring.producer().load(Ordering::Acquire);
            n = self.cached_prod.wrapping_sub(self.cached_cons);
        }
        n.min(want)
    }

    /// The `i`-th unread slot. The caller has seen `available() > i`.
    #[inline(always)]
    pub fn read(&self, i: u32) -> T {
        debug_assert!(i < self.cached_prod.wrapping_sub(self.cached_cons));
        // SAFETY: `slot` stays inside the ring; the producer published the
        // slot (acquire in `available`) and will not touch it before
        // `release`.
        unsafe { self.ring.slot(self.cached_cons.wrapping_add(i)).read() }
    }

    /// Hands the next `n` read slots back to the producer.
    #[inline]
    pub fn release(&mut self, n: u32) {
        if n == 0 {
            return;
        }
        debug_assert!(n <= self.cached_prod.wrapping_sub(self.cached_cons));
        self.cached_cons = self.cached_cons.wrapping_add(n);
        self.ring
            .consumer()
            .store(self.cached_cons, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::UnsafeCell;

    /// A ring in plain memory: header then slots, like the kernel's.
    #[repr(C)]
    struct Plain<const N: usize> {
        producer: AtomicU32,
        consumer: AtomicU32,
        flags: AtomicU32,
        _pad: u32,
        slots: UnsafeCell<[u64; N]>,
    }

    const OFF: libc::xdp_ring_offset = libc::xdp_ring_offset {
        producer: 0,
        consumer: 4,
        flags: 8,
        desc: 16,
    };

    fn plain<const N: usize>(start: u32) -> Box<Plain<N>> {
        Box::new(Plain {
            producer: AtomicU32::new(start),
            consumer: AtomicU32::new(start),
            flags: AtomicU32::new(0),
            _pad: 0,
            slots: UnsafeCell::new([0; N]),
        })
    }

    fn cursors<const N: usize>(p: &Plain<N>) -> (Producer<u64>, Consumer<u64>) {
        let base = p as *const Plain<N> as *mut u8;
        // SAFETY: `Plain` has the header at OFF and N slots after it; the
        // box outlives the cursors in every test; one cursor per side.
        unsafe {
            let l = RingLayout::<u64>::new(base, &OFF, N as u32);
            (Producer::new(l), Consumer::new(l))
        }
    }

    #[test]
    fn empty_ring_has_size_free_and_nothing_available() {
        let mem = plain::<8>(0);
        let (mut p, mut c) = cursors(&mem);
        assert_eq!(p.free(1), 8);
        assert_eq!(c.available(32), 0);
    }

    #[test]
    fn indices_wrap_around_u32() {
        for start in [u32::MAX - 3, u32::MAX, 0, 5, u32::MAX - 8] {
            let mem = plain::<8>(start);
            let (mut p, mut c) = cursors(&mem);
            let mut next = 0u64;
            let mut expect = 0u64;
            // 40 rounds of uneven bursts cross the u32 wrap and the ring
            // end many times.
            for round in 0..40u32 {
                let want = round % 7 + 1;
                let n = p.free(want).min(want);
                for i in 0..n {
                    p.write(i, next);
                    next += 1;
                }
                p.submit(n);
                assert!(mem.producer.load(Ordering::Relaxed).wrapping_sub(start) as u64 == next);
                let take = (round % 5 + 1).min(c.available(32));
                for i in 0..take {
                    assert_eq!(c.read(i), expect, "start {start} round {round}");
                    expect += 1;
                }
                c.release(take);
                let used = mem
                    .producer
                    .load(Ordering::Relaxed)
                    .wrapping_sub(mem.consumer.load(Ordering::Relaxed));
                assert!(used <= 8, "start {start}: {used} in flight");
            }
            let rest = c.available(32);
            for i in 0..rest {
                assert_eq!(c.read(i), expect);
                expect += 1;
            }
            c.release(rest);
            assert_eq!(expect, next);
        }
    }

    #[test]
    fn full_ring_reports_no_space_until_consumer_releases() {
        let mem = plain::<4>(u32::MAX - 1);
        let (mut p, mut c) = cursors(&mem);
        assert_eq!(p.free(4), 4);
        for i in 0..4 {
            p.write(i, 100 + i as u64);
        }
        p.submit(4);
        assert_eq!(p.free(1), 0);
        assert_eq!(p.outstanding(), 4);
        assert_eq!(c.available(2), 2);
        assert_eq!(c.read(0), 100);
        assert_eq!(c.read(1), 101);
        c.release(2);
        // The producer's cached view is stale until it asks for more than
        // it believes is free.
        assert_eq!(p.free(1), 2);
        p.write(0, 104);
        p.submit(1);
        // The consumer's cached view still has two unread slots.
        assert_eq!(c.available(32), 2);
        assert_eq!([c.read(0), c.read(1)], [102, 103]);
        c.release(2);
        assert_eq!(c.available(32), 1);
        assert_eq!(c.read(0), 104);
        c.release(1);
        assert_eq!(p.outstanding(), 0);
        assert_eq!(p.free(4), 4);
    }

    #[test]
    fn consumer_sees_new_slots_only_when_its_view_is_empty() {
        let mem = plain::<8>(7);
        let (mut p, mut c) = cursors(&mem);
        p.write(0, 1);
        p.submit(1);
        assert_eq!(c.available(8), 1);
        p.write(0, 2);
        p.submit(1);
        // Cached view still holds one unread slot: no reload yet.
        assert_eq!(c.available(8), 1);
        c.release(1);
        assert_eq!(c.available(8), 1);
        assert_eq!(c.read(0), 2);
    }

    #[test]
    fn need_wakeup_flag_is_read() {
        let mem = plain::<8>(0);
        let (p, _c) = cursors(&mem);
        assert!(!p.needs_wakeup());
        mem.flags
            .store(libc::XDP_RING_NEED_WAKEUP, Ordering::Relaxed);
        assert!(p.needs_wakeup());
    }
}
