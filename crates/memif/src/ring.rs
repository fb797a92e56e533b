//! One memif ring in the client's shared memory, as the server touches it.
//!
//! The client may write any byte of its memory at any time, so nothing
//! here forms a Rust reference to it: head, tail and flags are accessed as
//! atomics (the protocol's acquire/release pairs), descriptors are read
//! and written as 16 raw bytes, and every value read is a *claim* that the
//! caller checks (`crate::rx`, `crate::tx`). Layout: `nfv_wire::memif::ring`.

use nfv_wire::memif::{self, DescRepr};
use std::sync::atomic::{AtomicU16, AtomicU32, Ordering::*};

/// A ring the connection has checked: placed inside its region, aligned,
/// with the cookie in place. Valid for as long as the memory it points
/// into stays mapped (the [`crate::connection::Connection`] that owns
/// both).
#[derive(Debug)]
pub(crate) struct RingView {
    header: *mut u8,
    mask: u16,
}

// SAFETY: `header` points into a mapping owned by the same `Connection`
// that owns this view, which outlives every use; all accesses go through
// atomics or raw volatile copies, never references, so sharing the pointer
// between threads is as sound as sharing the mapping.
unsafe impl Send for RingView {}
// SAFETY: as above.
unsafe impl Sync for RingView {}

impl RingView {
    /// A view of the ring at `header` with 2^`log2` slots.
    ///
    /// # Safety
    /// `header` must be 8-byte aligned and the start of
    /// `memif::ring::len(log2)` mapped, writable bytes that stay mapped
    /// for the life of the view.
    pub unsafe fn new(header: *mut u8, log2: u8) -> RingView {
        debug_assert!(log2 <= memif::ring::MAX_LOG2_SIZE);
        RingView {
            header,
            mask: ((1u32 << log2) - 1) as u16,
        }
    }

    /// Where the header is (the client computes ring offsets from it).
    pub fn header(&self) -> *mut u8 {
        self.header
    }

    /// The producer's position, relaxed (the producer reading its own).
    pub fn head_relaxed(&self) -> u16 {
        self.u16_at(memif::ring::HEAD.start).load(Relaxed)
    }

    /// Slots in the ring.
    pub fn size(&self) -> u16 {
        self.mask.wrapping_add(1)
    }

    fn u16_at(&self, off: usize) -> &AtomicU16 {
        // SAFETY: `off` is one of the header's u16 fields (6, 4, 64), so
        // the pointer is 2-byte aligned (the header is 8-aligned) and
        // inside the mapping (`new`'s contract). An atomic is the only way
        // the client's concurrent writes are not a data race on our side.
        unsafe { &*(self.header.add(off) as *const AtomicU16) }
    }

    /// The ring's cookie (checked once, at connect).
    pub fn cookie(&self) -> u32 {
        // SAFETY: offset 0 is the header's aligned u32 cookie, inside the
        // mapping (`new`'s contract).
        unsafe { &*(self.header as *const AtomicU32) }.load(Relaxed)
    }

    /// The producer's position (the client's, on both rings), with
    /// acquire: the descriptors up to it are visible after the load.
    #[inline(always)]
    pub fn head(&self) -> u16 {
        self.u16_at(memif::ring::HEAD.start).load(Acquire)
    }

    /// The consumer's position as stored in the ring (ours on both rings;
    /// read when a queue starts on the ring).
    pub fn tail(&self) -> u16 {
        self.u16_at(memif::ring::TAIL.start).load(Relaxed)
    }

    /// The consumer's position with acquire (the client side: the
    /// server's writes up to it are visible after the load).
    #[inline(always)]
    pub fn tail_acquire(&self) -> u16 {
        self.u16_at(memif::ring::TAIL.start).load(Acquire)
    }

    /// Publishes the producer's position (the client side) with release.
    #[inline(always)]
    pub fn set_head(&self, head: u16) {
        self.u16_at(memif::ring::HEAD.start).store(head, Release)
    }

    /// Writes a whole header: cookie, flags, head and tail (the client,
    /// before it announces the ring).
    pub fn init(&self, flags: u16) {
        // SAFETY: offset 0 is the header's aligned u32 cookie, inside the
        // mapping (`new`'s contract).
        unsafe { &*(self.header as *const AtomicU32) }.store(memif::COOKIE, Relaxed);
        self.set_flags(flags);
        self.u16_at(memif::ring::HEAD.start).store(0, Relaxed);
        self.u16_at(memif::ring::TAIL.start).store(0, Release);
    }

    /// Publishes our position with release: our descriptor and buffer
    /// writes before it are visible to the client that loads it.
    #[inline(always)]
    pub fn set_tail(&self, tail: u16) {
        self.u16_at(memif::ring::TAIL.start).store(tail, Release)
    }

    #[inline(always)]
    pub fn flags(&self) -> u16 {
        self.u16_at(memif::ring::FLAGS.start).load(Relaxed)
    }

    pub fn set_flags(&self, flags: u16) {
        self.u16_at(memif::ring::FLAGS.start).store(flags, Relaxed)
    }

    fn desc_ptr(&self, slot: u16) -> *mut u8 {
        // SAFETY: `slot & mask` < the ring's slot count, so the 16 bytes
        // lie inside the ring (`new`'s contract).
        unsafe {
            self.header
                .add(memif::ring::desc_offset(usize::from(slot & self.mask)))
        }
    }

    /// Descriptor `slot` (taken modulo the ring size), as read now.
    #[inline(always)]
    pub fn desc(&self, slot: u16) -> DescRepr {
        // SAFETY: `desc_ptr` is inside the mapping; a volatile copy of the
        // bytes never forms a reference the client could race with.
        let b: [u8; memif::ring::DESC_LEN] =
            unsafe { std::ptr::read_volatile(self.desc_ptr(slot) as *const _) };
        // 16 bytes always parse.
        DescRepr::parse(&b).unwrap_or_default()
    }

    /// Writes all of descriptor `slot` (the client side).
    #[inline(always)]
    pub fn set_desc(&self, slot: u16, d: &DescRepr) {
        // SAFETY: `desc_ptr` is inside the mapping; a volatile write of the
        // 16 bytes.
        unsafe {
            std::ptr::write_volatile(
                self.desc_ptr(slot) as *mut [u8; memif::ring::DESC_LEN],
                d.emit(),
            )
        }
    }

    /// Sets descriptor `slot`'s flags and length (what a server writes on
    /// S2C; region and offset stay the client's).
    #[inline(always)]
    pub fn set_desc_len(&self, slot: u16, length: u32, next: bool) {
        let flags = if next {
            memif::ring::desc::FLAG_NEXT
        } else {
            0
        };
        let p = self.desc_ptr(slot);
        // SAFETY: both fields lie inside the descriptor (`desc_ptr`);
        // unaligned volatile writes of plain integers.
        unsafe {
            std::ptr::write_volatile(
                p.add(memif::ring::desc::FLAGS.start) as *mut [u8; 2],
                flags.to_le_bytes(),
            );
            std::ptr::write_volatile(
                p.add(memif::ring::desc::LENGTH.start) as *mut [u8; 4],
                length.to_le_bytes(),
            );
        }
    }
}
