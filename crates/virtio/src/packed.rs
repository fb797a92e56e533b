//! Packed virtqueues (virtio 1.1+ §2.8): layout, flags and raw access,
//! used by both sides.
//!
//! One ring of 16-byte descriptors replaces the split ring's three parts:
//! the driver writes a descriptor and marks it available by setting the
//! AVAIL flag to its wrap counter and USED to the inverse; the device
//! overwrites the chain's first slot with a used descriptor whose AVAIL and
//! USED flags both equal its own wrap counter. Both counters start at 1
//! and flip each time their side passes the ring's end. The ring size need
//! not be a power of two (1..=32768), so positions wrap by comparison, not
//! by masking.
//!
//! Two 4-byte event-suppression structures take the place of the split
//! ring's flags and event indexes: the *driver area* (written by the
//! driver: whether and when it wants interrupts) and the *device area*
//! (written by the device: whether it wants kicks).
//!
//! vhost-user passes the three addresses in `SET_VRING_ADDR`'s desc, avail
//! and used fields, in that order, and the position in `SET_VRING_BASE` /
//! `GET_VRING_BASE` as the 15-bit index with the avail wrap counter in bit
//! 15 ([`encode_base`]).

use crate::memory::GuestMemory;
use crate::ring::SetupError;
use std::sync::atomic::AtomicU16;

pub const DESC_F_NEXT: u16 = 1;
pub const DESC_F_WRITE: u16 = 2;
pub const DESC_F_INDIRECT: u16 = 4;
pub const DESC_F_AVAIL: u16 = 1 << 7;
pub const DESC_F_USED: u16 = 1 << 15;

/// Event suppression `flags` values (§2.8.10).
pub const EVENT_F_ENABLE: u16 = 0;
pub const EVENT_F_DISABLE: u16 = 1;
/// Only with `VIRTIO_F_EVENT_IDX`: notify when the position in `off_wrap`
/// is passed.
pub const EVENT_F_DESC: u16 = 2;

/// Largest packed ring (§2.8: up to 2^15 entries).
pub const MAX_PACKED_SIZE: u16 = 1 << 15;

/// A packed descriptor (16 bytes, little-endian; x86 only here).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct PackedDesc {
    pub addr: u64,
    pub len: u32,
    pub id: u16,
    pub flags: u16,
}

/// `VHOST_USER_SET_VRING_BASE` value for position `idx` with wrap counter
/// `wrap`.
pub fn encode_base(idx: u16, wrap: bool) -> u16 {
    (idx & 0x7fff) | (u16::from(wrap) << 15)
}

/// The position and wrap counter in a vhost-user base value.
pub fn decode_base(v: u16) -> (u16, bool) {
    (v & 0x7fff, v & 0x8000 != 0)
}

/// The flags that make a descriptor available under driver wrap counter
/// `wrap`.
#[inline(always)]
pub fn avail_flags(wrap: bool) -> u16 {
    if wrap { DESC_F_AVAIL } else { DESC_F_USED }
}

/// The flags of a used descriptor under device wrap counter `wrap`.
#[inline(always)]
pub fn used_flags(wrap: bool) -> u16 {
    if wrap { DESC_F_AVAIL | DESC_F_USED } else { 0 }
}

/// True when `flags` mark a descriptor made available in the driver's
/// lap `wrap` (AVAIL == wrap, USED != wrap).
#[inline(always)]
pub fn is_avail(flags: u16, wrap: bool) -> bool {
    let a = flags & DESC_F_AVAIL != 0;
    let u = flags & DESC_F_USED != 0;
    a == wrap && u != wrap
}

/// True when `flags` mark a descriptor used in the device's lap `wrap`.
#[inline(always)]
pub fn is_used(flags: u16, wrap: bool) -> bool {
    let a = flags & DESC_F_AVAIL != 0;
    let u = flags & DESC_F_USED != 0;
    a == wrap && u == wrap
}

/// Checks a packed queue size: 1..=32768, any value.
pub fn check_packed_size(size: u16) -> Result<(), crate::layout::LayoutError> {
    if size == 0 || size > MAX_PACKED_SIZE {
        return Err(crate::layout::LayoutError::QueueSize(size));
    }
    Ok(())
}

/// Bytes of a packed ring and its two event areas laid out by
/// [`layout_packed`] (with worst-case alignment padding).
pub fn packed_area_bytes(size: u16) -> usize {
    16 * size as usize + 2 * 4 + 3 * crate::layout::RING_PART_ALIGN
}

/// Lays out a packed ring of `size` descriptors and its driver and device
/// event areas in `len` bytes at `area` (each part on its own cache line),
/// returned as `desc`, `avail` (driver area) and `used` (device area) —
/// the order vhost-user sends them in.
pub fn layout_packed(
    area: u64,
    len: usize,
    size: u16,
) -> Result<crate::layout::RingAddrs, crate::layout::LayoutError> {
    check_packed_size(size)?;
    let a = crate::layout::RING_PART_ALIGN as u64;
    let up = |x: u64| x.checked_add(a - 1).map(|v| v & !(a - 1));
    let too_small = crate::layout::LayoutError::TooSmall {
        size,
        have: len,
        need: packed_area_bytes(size),
    };
    let desc = up(area).ok_or(too_small.clone())?;
    let driver = up(desc + 16 * size as u64).ok_or(too_small.clone())?;
    let device = up(driver + 4).ok_or(too_small.clone())?;
    if device + 4 - area > len as u64 {
        return Err(too_small);
    }
    Ok(crate::layout::RingAddrs {
        desc,
        avail: driver,
        used: device,
    })
}

/// Host pointers to a packed ring and its event areas, checked once at
/// setup. Positions passed to the accessors are `< size` by construction
/// of their callers (the cursors wrap at `size`); they are still reduced
/// modulo `size` so no accessor can leave the ring.
#[derive(Debug)]
pub(crate) struct PackedRing {
    pub desc: *mut PackedDesc,
    /// `off_wrap`, `flags`: written by the driver.
    pub driver: *mut u16,
    /// `off_wrap`, `flags`: written by the device.
    pub device: *mut u16,
    pub size: u16,
}

impl PackedRing {
    /// Translates and checks the ring (16-byte aligned) and both event
    /// areas (4-byte aligned), each inside one memory region. A queue is
    /// only usable when all three are mapped (DPDK learned this the hard
    /// way: a missing event area is a NULL dereference later).
    pub fn new(
        mem: &GuestMemory,
        size: u16,
        addrs: [u64; 3],
        uva: bool,
    ) -> Result<PackedRing, SetupError> {
        check_packed_size(size)?;
        let parts = [
            ("packed descriptor", 16 * size as usize, 16),
            ("driver event", 4, 4),
            ("device event", 4, 4),
        ];
        let host = crate::ring::map_parts(mem, &parts, addrs, uva)?;
        Ok(PackedRing {
            desc: host[0].cast(),
            driver: host[1].cast(),
            device: host[2].cast(),
            size,
        })
    }

    /// Host address of slot `i` (for the dirty log).
    #[inline(always)]
    pub fn slot_ptr(&self, i: u16) -> *const u8 {
        self.slot(i).cast()
    }

    #[inline(always)]
    fn slot(&self, i: u16) -> *mut PackedDesc {
        let i = if i < self.size { i } else { i % self.size };
        // SAFETY: `i < size`: inside the ring checked in `new`.
        unsafe { self.desc.add(i as usize) }
    }

    /// The flags of slot `i`, with acquire ordering: the rest of the
    /// descriptor, read after it, is what the writer published with them.
    #[inline(always)]
    pub fn flags(&self, i: u16) -> u16 {
        // SAFETY: the slot is inside the ring and 16-aligned, so its
        // `flags` (offset 14) is a valid, 2-aligned u16 for the queue's
        // lifetime (the queue keeps the memory mapped).
        unsafe { AtomicU16::from_ptr(std::ptr::addr_of_mut!((*self.slot(i)).flags)) }
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// `addr`, `len` and `id` of slot `i`, one volatile copy each (the
    /// other side may change them at any time: validate the copy).
    #[inline(always)]
    pub fn read(&self, i: u16) -> (u64, u32, u16) {
        let d = self.slot(i);
        // SAFETY: inside the ring (see `slot`); volatile copies of plain
        // integers, never references.
        unsafe {
            (
                std::ptr::addr_of!((*d).addr).read_volatile(),
                std::ptr::addr_of!((*d).len).read_volatile(),
                std::ptr::addr_of!((*d).id).read_volatile(),
            )
        }
    }

    /// Writes `addr`, `len` and `id` of slot `i`, then `flags` with release
    /// ordering: whoever sees the flags sees the rest.
    #[inline(always)]
    pub fn write(&self, i: u16, addr: u64, len: u32, id: u16, flags: u16) {
        let d = self.slot(i);
        // SAFETY: inside the ring (see `slot`); plain stores of integers the
        // other side reads only after it sees the flags.
        unsafe {
            std::ptr::addr_of_mut!((*d).addr).write_volatile(addr);
            std::ptr::addr_of_mut!((*d).len).write_volatile(len);
            std::ptr::addr_of_mut!((*d).id).write_volatile(id);
            AtomicU16::from_ptr(std::ptr::addr_of_mut!((*d).flags))
                .store(flags, std::sync::atomic::Ordering::Release);
        }
    }

    /// A used descriptor: `len` and `id`, then the flags (release); `addr`
    /// is left alone (unused in used descriptors).
    #[inline(always)]
    pub fn write_used(&self, i: u16, len: u32, id: u16, flags: u16) {
        let d = self.slot(i);
        // SAFETY: as in `write`.
        unsafe {
            std::ptr::addr_of_mut!((*d).len).write_volatile(len);
            std::ptr::addr_of_mut!((*d).id).write_volatile(id);
            AtomicU16::from_ptr(std::ptr::addr_of_mut!((*d).flags))
                .store(flags, std::sync::atomic::Ordering::Release);
        }
    }

    /// The driver area's `off_wrap` and `flags`.
    #[inline(always)]
    pub fn driver_event(&self) -> (&AtomicU16, &AtomicU16) {
        // SAFETY: `driver` points at 4 mapped, 4-aligned bytes for the
        // queue's lifetime (checked in `new`).
        unsafe {
            (
                AtomicU16::from_ptr(self.driver),
                AtomicU16::from_ptr(self.driver.add(1)),
            )
        }
    }

    /// The device area's `off_wrap` and `flags`.
    #[inline(always)]
    pub fn device_event(&self) -> (&AtomicU16, &AtomicU16) {
        // SAFETY: as in `driver_event`, for the device area.
        unsafe {
            (
                AtomicU16::from_ptr(self.device),
                AtomicU16::from_ptr(self.device.add(1)),
            )
        }
    }
}

/// Advances position `i` (lap `wrap`) by one slot of a ring of `size`.
#[inline(always)]
pub fn step(i: &mut u16, wrap: &mut bool, size: u16) {
    *i += 1;
    if *i >= size {
        *i = 0;
        *wrap = !*wrap;
    }
}

/// Whether the other side asked (`EVENT_F_DESC`) to be notified once the
/// position `off_wrap` was passed, given that this side moved from
/// `old` to `new` (positions in laps `old_wrap`/`new_wrap`) — the packed
/// form of `vring_need_event` (§2.8.10). Positions are unwrapped into one
/// linear count of slots (lap parity × size + index) before comparing.
pub fn need_event_packed(
    off_wrap: u16,
    old: u16,
    old_wrap: bool,
    new: u16,
    new_wrap: bool,
    size: u16,
) -> bool {
    let size = size as i32;
    let (off, off_w) = ((off_wrap & 0x7fff) as i32, off_wrap & 0x8000 != 0);
    // Unwrap relative to `new`'s lap: positions in the previous lap sit
    // `size` lower.
    let lin = |i: u16, w: bool| -> i32 { i as i32 - if w == new_wrap { 0 } else { size } };
    let (o, n, e) = (
        lin(old, old_wrap),
        new as i32,
        off - if off_w == new_wrap { 0 } else { size },
    );
    // Notify when the event position is in [old, new).
    e >= o && e < n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_follow_the_wrap_counters() {
        assert!(is_avail(avail_flags(true), true));
        assert!(is_avail(avail_flags(false), false));
        assert!(!is_avail(avail_flags(true), false));
        assert!(!is_avail(used_flags(true), true), "used is not avail");
        assert!(is_used(used_flags(true), true));
        assert!(is_used(used_flags(false), false));
        assert!(!is_used(avail_flags(true), true));
        assert!(!is_used(0, true), "a zeroed ring holds nothing in lap 1");
        assert!(!is_avail(0, true));
    }

    #[test]
    fn base_round_trips_with_the_wrap_bit() {
        for (i, w) in [(0u16, true), (0, false), (999, true), (0x7fff, false)] {
            assert_eq!(decode_base(encode_base(i, w)), (i, w));
        }
        assert_eq!(encode_base(5, true), 0x8005);
    }

    #[test]
    fn step_wraps_at_any_size() {
        let (mut i, mut w) = (998u16, true);
        step(&mut i, &mut w, 1000);
        assert_eq!((i, w), (999, true));
        step(&mut i, &mut w, 1000);
        assert_eq!((i, w), (0, false));
        let (mut i, mut w) = (0u16, false);
        step(&mut i, &mut w, 1);
        assert_eq!((i, w), (0, true));
    }

    #[test]
    fn need_event_packed_window() {
        // Moved 5 -> 8 in lap 1 of a ring of 10: events at 5, 6, 7 fire.
        let ev = |i: u16, w: bool| encode_base(i, w);
        assert!(need_event_packed(ev(5, true), 5, true, 8, true, 10));
        assert!(need_event_packed(ev(7, true), 5, true, 8, true, 10));
        assert!(!need_event_packed(ev(8, true), 5, true, 8, true, 10));
        assert!(!need_event_packed(ev(4, true), 5, true, 8, true, 10));
        // Across the end: 8 (lap 1) -> 2 (lap 0).
        assert!(need_event_packed(ev(9, true), 8, true, 2, false, 10));
        assert!(need_event_packed(ev(1, false), 8, true, 2, false, 10));
        assert!(!need_event_packed(ev(2, false), 8, true, 2, false, 10));
        assert!(!need_event_packed(ev(7, true), 8, true, 2, false, 10));
        // An event a whole lap away does not fire.
        assert!(!need_event_packed(ev(6, false), 5, true, 8, true, 10));
    }

    #[test]
    fn packed_layout_fits_and_aligns() {
        for size in [1u16, 3, 256, 1000, 32768] {
            let r = layout_packed(0x1000 + 7, packed_area_bytes(size), size).unwrap();
            assert_eq!(r.desc % 16, 0);
            assert_eq!(r.avail % 4, 0);
            assert_eq!(r.used % 4, 0);
            assert!(r.avail >= r.desc + 16 * size as u64);
            assert!(r.used >= r.avail + 4);
        }
        assert!(layout_packed(0, 1 << 20, 0).is_err());
        assert!(layout_packed(0, 10, 4).is_err());
    }
}
