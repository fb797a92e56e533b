//! Raw access to a split ring in shared memory (virtio §2.7), used by both
//! sides. The pointers are validated once, when a queue is set up
//! ([`Ring::new`]); afterwards every index is masked with `size - 1`, so no
//! accessor can leave the ring whatever the other side writes.
//!
//! Indexes shared with the other side (`avail.idx`, `used.idx`, flags and
//! event fields) are accessed as atomics; ring entries and descriptors are
//! read once with volatile loads into locals (the other side may change
//! them at any time: we validate the copy, never re-read).

use crate::layout::{
    Desc, LayoutError, UsedElem, avail_ring_bytes, check_queue_size, desc_table_bytes,
    used_ring_bytes,
};
use crate::memory::GuestMemory;
use std::sync::atomic::AtomicU16;

#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(transparent)]
    Layout(#[from] LayoutError),
    #[error("{ring} ring at {addr:#x} ({len} bytes) is not inside one guest memory region")]
    NotMapped {
        ring: &'static str,
        addr: u64,
        len: usize,
    },
    #[error("{ring} ring at {addr:#x} is not {align}-byte aligned")]
    Misaligned {
        ring: &'static str,
        addr: u64,
        align: usize,
    },
    #[error("packed virtqueues (VIRTIO_F_RING_PACKED) are not supported here")]
    PackedRing,
    #[error("packed ring position {idx} is outside the ring of {size}")]
    PackedBase { idx: u16, size: u16 },
}

/// Translates the three parts of a ring (`(name, bytes, alignment)` at
/// `addrs`, through the user-address table when `uva`, else
/// guest-physical): each must lie entirely in one region, aligned.
pub(crate) fn map_parts(
    mem: &GuestMemory,
    parts: &[(&'static str, usize, usize); 3],
    addrs: [u64; 3],
    uva: bool,
) -> Result<[*mut u8; 3], SetupError> {
    let mut host = [std::ptr::null_mut::<u8>(); 3];
    for (i, &(ring, len, align)) in parts.iter().enumerate() {
        let addr = addrs[i];
        let p = if uva {
            mem.translate_uva(addr, len)
        } else {
            mem.translate(addr, len)
        };
        let p = p.ok_or(SetupError::NotMapped { ring, addr, len })?;
        if (p as usize) & (align - 1) != 0 || addr & (align as u64 - 1) != 0 {
            return Err(SetupError::Misaligned { ring, addr, align });
        }
        host[i] = p;
    }
    Ok(host)
}

/// Host pointers to the three ring parts.
#[derive(Debug)]
pub(crate) struct Ring {
    /// `size` descriptors.
    pub desc: *mut Desc,
    /// `flags, idx, ring[size], used_event` (the last only with EVENT_IDX).
    pub avail: *mut u16,
    /// `flags, idx, ring[size] of UsedElem, avail_event` (ditto).
    pub used: *mut u8,
    pub size: u16,
    pub mask: u16,
}

impl Ring {
    /// Translates and checks the three ring addresses (`uva`: through the
    /// user-address table, as vhost-user sends them; else guest-physical):
    /// each part must lie entirely in one region, with the spec's alignment
    /// (16/2/4), including the event fields when `event_idx`.
    pub fn new(
        mem: &GuestMemory,
        size: u16,
        addrs: [u64; 3],
        event_idx: bool,
        uva: bool,
    ) -> Result<Ring, SetupError> {
        check_queue_size(size)?;
        let ev = if event_idx { 0 } else { 2 };
        let parts = [
            ("descriptor", desc_table_bytes(size), 16),
            ("avail", avail_ring_bytes(size) - ev, 2),
            ("used", used_ring_bytes(size) - ev, 4),
        ];
        let host = map_parts(mem, &parts, addrs, uva)?;
        Ok(Ring {
            desc: host[0].cast(),
            avail: host[1].cast(),
            used: host[2],
            size,
            mask: size - 1,
        })
    }

    /// A one-entry split ring in a small box of its own, for a queue that
    /// runs a packed ring: the split-ring code never runs on such a queue
    /// (every entry point checks for the packed ring first), and should it
    /// ever, it touches this box, never guest memory. Keep the box as long
    /// as the ring.
    pub fn stand_in() -> (Ring, Box<[u64; 8]>) {
        let mut b = Box::new([0u64; 8]);
        let p = b.as_mut_ptr().cast::<u8>();
        // SAFETY: offsets 16 and 32 (desc: 16 bytes; avail: 6 + event;
        // used: 4 + 8 + event) are inside the 64-byte box, whose heap
        // allocation does not move when the box does.
        let (avail, used) = unsafe { (p.add(16).cast(), p.add(32)) };
        let ring = Ring {
            desc: p.cast(),
            avail,
            used,
            size: 1,
            mask: 0,
        };
        (ring, b)
    }

    #[inline(always)]
    pub fn avail_flags(&self) -> &AtomicU16 {
        // SAFETY: `avail` is valid and 2-aligned for the queue's lifetime
        // (checked in `new`; the queue keeps the memory alive).
        unsafe { AtomicU16::from_ptr(self.avail) }
    }
    #[inline(always)]
    pub fn avail_idx(&self) -> &AtomicU16 {
        // SAFETY: as in `avail_flags`; offset 2 is inside the avail ring.
        unsafe { AtomicU16::from_ptr(self.avail.add(1)) }
    }
    /// The avail ring entry for free-running index `i`.
    #[inline(always)]
    pub fn avail_entry(&self, i: u16) -> u16 {
        // SAFETY: `i & mask < size`, so the entry is inside the avail ring.
        unsafe { self.avail.add(2 + (i & self.mask) as usize).read_volatile() }
    }
    #[inline(always)]
    pub fn avail_entry_ptr(&self, i: u16) -> *mut u16 {
        // SAFETY: as in `avail_entry`.
        unsafe { self.avail.add(2 + (i & self.mask) as usize) }
    }
    /// `used_event`, at the end of the avail ring. Only with EVENT_IDX.
    #[inline(always)]
    pub fn used_event(&self) -> &AtomicU16 {
        // SAFETY: with EVENT_IDX `new` checked the field is mapped; callers
        // only use it then. 2-aligned as the ring is.
        unsafe { AtomicU16::from_ptr(self.avail.add(2 + self.size as usize)) }
    }
    #[inline(always)]
    pub fn used_flags(&self) -> &AtomicU16 {
        // SAFETY: `used` is valid and 4-aligned for the queue's lifetime.
        unsafe { AtomicU16::from_ptr(self.used.cast()) }
    }
    #[inline(always)]
    pub fn used_idx(&self) -> &AtomicU16 {
        // SAFETY: as in `used_flags`; offset 2 is inside the used ring.
        unsafe { AtomicU16::from_ptr(self.used.add(2).cast()) }
    }
    /// The used ring slot for free-running index `i`.
    #[inline(always)]
    pub fn used_elem(&self, i: u16) -> *mut UsedElem {
        // SAFETY: `i & mask < size`: the slot is inside the used ring, and
        // 4 + 8k keeps the 4-byte alignment of `UsedElem`.
        unsafe { self.used.add(4 + 8 * (i & self.mask) as usize).cast() }
    }
    /// `avail_event`, at the end of the used ring. Only with EVENT_IDX.
    #[inline(always)]
    pub fn avail_event(&self) -> &AtomicU16 {
        // SAFETY: with EVENT_IDX `new` checked the field is mapped; offset
        // 4 + 8*size is 2-aligned.
        unsafe { AtomicU16::from_ptr(self.used.add(4 + 8 * self.size as usize).cast()) }
    }
    /// Warms the first buffer of chain `head` for reading: the lines of
    /// its first bytes after `skip` (the virtio-net header when it will
    /// not be read; see [`GuestMemory::prefetch_read_span`]). `head` may
    /// be any value: it is masked, and the address and length read are
    /// only used for prefetching, never dereferenced.
    #[inline(always)]
    pub fn prefetch_buffer(&self, mem: &GuestMemory, head: u16, hint: usize, skip: usize) {
        let d = self.desc_ptr(head);
        // SAFETY: `desc_ptr` masks the index into the table; volatile
        // copies of two fields of one descriptor.
        let (addr, len) = unsafe {
            (
                std::ptr::addr_of!((*d).addr).read_volatile(),
                std::ptr::addr_of!((*d).len).read_volatile(),
            )
        };
        mem.prefetch_read_span(
            addr.wrapping_add(skip as u64),
            (len as usize).saturating_sub(skip),
            hint,
        );
    }

    /// Warms chain `head`'s first buffer, about to take a virtio-net
    /// header of `hdr_len` bytes and a frame (see
    /// [`GuestMemory::prefetch_rx_buffer`]); `head` may be any value, as
    /// for [`Self::prefetch_buffer`].
    #[inline(always)]
    pub fn prefetch_buffer_write(&self, mem: &GuestMemory, head: u16, hint: usize, hdr_len: usize) {
        // SAFETY: as in `prefetch_buffer`.
        let addr = unsafe { std::ptr::addr_of!((*self.desc_ptr(head)).addr).read_volatile() };
        mem.prefetch_rx_buffer(addr, hint, hdr_len);
    }

    /// Warms the rest of chain `head`'s first buffer for writing, up to
    /// `bytes` (see [`GuestMemory::prefetch_rest_write`]); `head` may be any
    /// value, as for [`Self::prefetch_buffer`].
    #[inline(always)]
    pub fn prefetch_buffer_rest_write(
        &self,
        mem: &GuestMemory,
        head: u16,
        hint: usize,
        bytes: usize,
    ) {
        // SAFETY: as in `prefetch_buffer`.
        let addr = unsafe { std::ptr::addr_of!((*self.desc_ptr(head)).addr).read_volatile() };
        mem.prefetch_rest_write(addr, hint, bytes);
    }

    /// The descriptor-table slot `i & mask`.
    #[inline(always)]
    pub fn desc_ptr(&self, i: u16) -> *mut Desc {
        // SAFETY: the masked index is inside the table.
        unsafe { self.desc.add((i & self.mask) as usize) }
    }
}

/// `vring_need_event` (virtio §2.7.10): true when `event` lies in
/// `[old, new)`, i.e. the other side asked to hear about one of the entries
/// just published.
#[inline(always)]
pub fn need_event(event: u16, new: u16, old: u16) -> bool {
    new.wrapping_sub(event).wrapping_sub(1) < new.wrapping_sub(old)
}

// The shared cache hints (`nfv_mem::hint`), under the names the device
// code imports from here.
pub(crate) use nfv_mem::hint::{prefetch, prefetch_write};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn need_event_matches_the_spec_window() {
        // Published entries [old, new): notify iff event is one of them.
        assert!(need_event(5, 6, 5));
        assert!(!need_event(6, 6, 5));
        assert!(!need_event(4, 6, 5));
        assert!(need_event(0xffff, 2, 0xfffe), "wraps");
        assert!(need_event(1, 2, 0xfffe));
        assert!(!need_event(2, 2, 0xfffe));
        assert!(!need_event(7, 7, 7), "nothing published");
    }
}
