//! The driver side of a split virtqueue, as DPDK's virtio-user does it: the
//! driver (a VNF process) owns the memory — rings laid out with
//! [`crate::layout::layout_rings`] in an area it allocated, packet buffers
//! in its pool — and describes it with a [`GuestMemory`] built by
//! [`GuestMemory::from_raw`] with guest-physical = user = host address (its
//! own virtual addresses), which is also what it sends to the device.
//!
//! Every descriptor carries exactly one pool packet, kept in a slot table
//! (indexed by descriptor id) until the device returns it, so buffers come
//! back as [`Packet`]s. RX: [`DriverQueue::refill_rx`] /
//! [`DriverQueue::receive_burst`] (in `rx.rs`); TX:
//! [`DriverQueue::transmit_burst`] / [`DriverQueue::reclaim_tx`] (in
//! `tx.rs`). A queue is used for one direction only, as virtio-net queues
//! are.
//!
//! The device is untrusted too: used ids, lengths, `num_buffers` and
//! `used.idx` are validated and counted in [`DriverErrors`]; an impossible
//! `used.idx` quarantines the queue.

mod packed;
mod rx;
mod tx;

use crate::layout::{
    RingAddrs, UsedElem, VIRTIO_F_RING_PACKED, VIRTIO_NET_F_MRG_RXBUF, VIRTIO_RING_F_EVENT_IDX,
    VIRTQ_AVAIL_F_NO_INTERRUPT, VIRTQ_USED_F_NO_NOTIFY, avail_ring_bytes, desc_table_bytes,
    used_ring_bytes,
};
use crate::memory::GuestMemory;
use crate::ring::{Ring, SetupError, need_event};
use nfv_mem::Packet;
use std::sync::Arc;
use std::sync::atomic::{Ordering, fence};

/// Smallest RX buffer offered (`rx_buf_len` below it is raised).
pub const MIN_RX_BUF: u32 = 64;

#[derive(Debug)]
pub struct DriverSetup {
    /// The driver's shared memory (rings and packet pool).
    pub mem: Arc<GuestMemory>,
    /// Split ring: a power of two, 1..=32768; packed: any of 1..=32768.
    pub size: u16,
    /// Guest-physical ring addresses (with virtio-user: our own VAs); for
    /// a packed ring (`VIRTIO_F_RING_PACKED` in `features`) the ring and
    /// the driver and device event areas
    /// ([`crate::packed::layout_packed`]).
    pub rings: RingAddrs,
    /// Negotiated virtio features.
    pub features: u64,
    /// Bytes offered per RX buffer, header included; 0 = all the room of a
    /// pool packet. Smaller buffers make the device merge (MRG_RXBUF).
    pub rx_buf_len: u32,
}

/// Protocol violations by the device, one counter per kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DriverErrors {
    /// `used.idx` more entries ahead than we have outstanding: the queue is
    /// quarantined.
    pub used_idx_jump: u64,
    /// A used id >= the queue size.
    pub used_id_out_of_range: u64,
    /// A used id we had not posted (or that was already returned).
    pub used_id_not_posted: u64,
    /// A used length larger than the buffer posted.
    pub used_len_too_long: u64,
    /// An RX used length shorter than the virtio-net header.
    pub short_used: u64,
    /// `num_buffers` 0 or more than the buffers outstanding.
    pub bad_num_buffers: u64,
    /// `num_buffers` > 1 although MRG_RXBUF was not negotiated.
    pub merge_without_mrg: u64,
}

impl DriverErrors {
    pub fn total(&self) -> u64 {
        self.used_idx_jump
            + self.used_id_out_of_range
            + self.used_id_not_posted
            + self.used_len_too_long
            + self.short_used
            + self.bad_num_buffers
            + self.merge_without_mrg
    }
}

/// Traffic counters (single writer).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DriverStats {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    /// Merged RX packets too long for one pool packet; dropped.
    pub rx_oversize: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// TX packets neither in shared memory nor copyable into it; dropped.
    pub tx_dropped: u64,
    /// Refills that found the pool empty.
    pub alloc_failures: u64,
    /// Times `needs_kick` said yes.
    pub kicks: u64,
}

/// One virtqueue driven by this process. Owned by one thread (`Send`).
pub struct DriverQueue {
    ring: Ring,
    mem: Arc<GuestMemory>,
    hint: usize,
    /// Free descriptor ids (a stack).
    free: Vec<u16>,
    /// Scratch for the ids of an in-order batch of used TX buffers.
    batch_ids: Vec<u16>,
    /// The packet posted under each descriptor id.
    slots: Vec<Option<Packet>>,
    /// Bytes offered under each descriptor id.
    posted_len: Vec<u32>,
    /// Next avail index to fill (published at the end of each burst).
    avail_idx: u16,
    last_used: u16,
    /// `avail_idx` at the last `needs_kick`.
    kick_old: u16,
    hdr_len: usize,
    mrg: bool,
    /// GUEST_CSUM acked: received headers may carry offloads.
    offloads: bool,
    event_idx: bool,
    features: u64,
    rx_buf_len: u32,
    interrupts: bool,
    /// `last_used` when `used_event` was last written.
    used_event_base: u16,
    quarantined: bool,
    errors: DriverErrors,
    stats: DriverStats,
    /// Set for a packed ring (`packed.rs`).
    packed: Option<Box<packed::PackedDriver>>,
    /// The stand-in split ring of a packed queue (see `new`).
    _dummy: Option<Box<[u64; 8]>>,
}

// SAFETY: the raw ring pointers point into `mem`, kept alive by the `Arc`
// (the driver's memory, which outlives its queues by `from_raw`'s
// contract); packets are `Send`; one thread uses the queue at a time.
unsafe impl Send for DriverQueue {}

impl std::fmt::Debug for DriverQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DriverQueue")
            .field("size", &self.ring.size)
            .field("avail_idx", &self.avail_idx)
            .field("last_used", &self.last_used)
            .field("outstanding", &self.outstanding())
            .field("quarantined", &self.quarantined)
            .field("errors", &self.errors)
            .finish()
    }
}

impl DriverQueue {
    /// Checks the ring addresses against `mem`, zeroes the rings and starts
    /// with interrupts disabled (poll mode). No allocation after this.
    pub fn new(setup: DriverSetup) -> Result<DriverQueue, SetupError> {
        let event_idx = setup.features & VIRTIO_RING_F_EVENT_IDX != 0;
        let r = setup.rings;
        let size = setup.size;
        let (ring, packed, dummy) = if setup.features & VIRTIO_F_RING_PACKED != 0 {
            let pr =
                crate::packed::PackedRing::new(&setup.mem, size, [r.desc, r.avail, r.used], false)?;
            // SAFETY: `PackedRing::new` checked these ranges are inside
            // our memory; nobody uses the ring before the device is told.
            unsafe {
                std::ptr::write_bytes(pr.desc.cast::<u8>(), 0, 16 * size as usize);
                std::ptr::write_bytes(pr.driver.cast::<u8>(), 0, 4);
                std::ptr::write_bytes(pr.device.cast::<u8>(), 0, 4);
            }
            // As on the device side: the split-ring code never runs on a
            // packed queue, and would find a one-entry ring of its own.
            let (ring, dummy) = Ring::stand_in();
            (
                ring,
                Some(Box::new(packed::PackedDriver::new(pr))),
                Some(dummy),
            )
        } else {
            let ring = Ring::new(
                &setup.mem,
                size,
                [r.desc, r.avail, r.used],
                event_idx,
                false,
            )?;
            let ev = if event_idx { 0 } else { 2 };
            // SAFETY: `Ring::new` checked these exact ranges are inside our
            // memory; nobody uses the rings before the device is told of them.
            unsafe {
                std::ptr::write_bytes(ring.desc.cast::<u8>(), 0, desc_table_bytes(size));
                std::ptr::write_bytes(ring.avail.cast::<u8>(), 0, avail_ring_bytes(size) - ev);
                std::ptr::write_bytes(ring.used, 0, used_ring_bytes(size) - ev);
            }
            (ring, None, None)
        };
        let mut q = DriverQueue {
            ring,
            mem: setup.mem,
            hint: 0,
            free: (0..size).rev().collect(),
            batch_ids: Vec::with_capacity(size as usize),
            slots: (0..size).map(|_| None).collect(),
            posted_len: vec![0; size as usize],
            avail_idx: 0,
            last_used: 0,
            kick_old: 0,
            hdr_len: crate::net::hdr_len(setup.features),
            mrg: setup.features & VIRTIO_NET_F_MRG_RXBUF != 0,
            offloads: setup.features & crate::layout::VIRTIO_NET_F_GUEST_CSUM != 0,
            event_idx,
            features: setup.features,
            rx_buf_len: if setup.rx_buf_len == 0 {
                u32::MAX
            } else {
                setup.rx_buf_len.max(MIN_RX_BUF)
            },
            interrupts: true,
            used_event_base: 0,
            quarantined: false,
            errors: DriverErrors::default(),
            stats: DriverStats::default(),
            packed,
            _dummy: dummy,
        };
        q.disable_interrupts();
        Ok(q)
    }

    pub fn size(&self) -> u16 {
        match &self.packed {
            Some(p) => p.ring.size,
            None => self.ring.size,
        }
    }
    /// Whether the ring is packed.
    pub fn is_packed(&self) -> bool {
        self.packed.is_some()
    }
    pub fn features(&self) -> u64 {
        self.features
    }
    pub fn errors(&self) -> &DriverErrors {
        &self.errors
    }
    pub fn stats(&self) -> &DriverStats {
        &self.stats
    }
    pub fn is_quarantined(&self) -> bool {
        self.quarantined
    }
    /// Descriptors posted and not yet returned by the device.
    pub fn outstanding(&self) -> usize {
        self.slots.len() - self.free.len()
    }
    /// Next avail index (what the device's `last_avail_idx` will reach;
    /// on a packed ring the slot with the wrap counter in bit 15).
    pub fn avail_idx(&self) -> u16 {
        match &self.packed {
            Some(p) => crate::packed::encode_base(p.avail, p.avail_wrap),
            None => self.avail_idx,
        }
    }

    /// After posting (`refill_rx`, `transmit_burst`): whether the device
    /// wants a kick for what was posted since the last call — honouring
    /// `VIRTQ_USED_F_NO_NOTIFY`, or `avail_event` with EVENT_IDX. The kick
    /// itself (an eventfd write) is the caller's.
    pub fn needs_kick(&mut self) -> bool {
        if self.packed.is_some() {
            let kick = !self.quarantined && self.needs_kick_packed();
            self.stats.kicks += u64::from(kick);
            return kick;
        }
        let (new, old) = (self.avail_idx, self.kick_old);
        self.kick_old = new;
        if new == old || self.quarantined {
            return false;
        }
        // Our avail.idx store must be visible before we read the device's
        // wish (store→load).
        fence(Ordering::SeqCst);
        let kick = if self.event_idx {
            need_event(self.ring.avail_event().load(Ordering::Relaxed), new, old)
        } else {
            self.ring.used_flags().load(Ordering::Relaxed) & VIRTQ_USED_F_NO_NOTIFY == 0
        };
        if kick {
            self.stats.kicks += 1;
        }
        kick
    }

    /// Asks the device to interrupt (signal our call eventfd) when it
    /// returns the next buffer. Afterwards check [`DriverQueue::has_used`]
    /// once more before sleeping: a buffer returned just before the device
    /// saw the change brings no interrupt.
    pub fn enable_interrupts(&mut self) {
        self.interrupts = true;
        if self.quarantined {
            return;
        }
        if self.packed.is_some() {
            return self.set_interrupts_packed(true);
        }
        self.ring.avail_flags().store(0, Ordering::Relaxed);
        if self.event_idx {
            self.write_used_event();
        }
        fence(Ordering::SeqCst);
    }

    /// Poll mode: asks the device not to interrupt (`NO_INTERRUPT`, or with
    /// EVENT_IDX a `used_event` it will not reach).
    pub fn disable_interrupts(&mut self) {
        self.interrupts = false;
        if self.quarantined {
            return;
        }
        if self.packed.is_some() {
            return self.set_interrupts_packed(false);
        }
        self.ring
            .avail_flags()
            .store(VIRTQ_AVAIL_F_NO_INTERRUPT, Ordering::Relaxed);
        if self.event_idx {
            self.write_used_event();
        }
    }

    /// True when the device has returned buffers we have not harvested.
    pub fn has_used(&self) -> bool {
        if self.quarantined {
            return false;
        }
        if self.packed.is_some() {
            return self.has_used_packed();
        }
        fence(Ordering::SeqCst);
        self.ring.used_idx().load(Ordering::Acquire) != self.last_used
    }

    /// Interrupts on: `used_event = last_used` (next entry). Off:
    /// `last_used - 1`, out of the device's reach until we have moved
    /// 0x4000 further; `after_harvest` refreshes it long before.
    fn write_used_event(&mut self) {
        let v = if self.interrupts {
            self.last_used
        } else {
            self.last_used.wrapping_sub(1)
        };
        self.ring.used_event().store(v, Ordering::Relaxed);
        self.used_event_base = self.last_used;
    }

    #[inline(always)]
    fn after_harvest(&mut self) {
        if self.event_idx && self.packed.is_none() {
            let moved = self.last_used.wrapping_sub(self.used_event_base);
            if (self.interrupts && moved != 0) || moved >= 0x4000 {
                self.write_used_event();
            }
        }
    }

    /// Used entries to harvest, or `None` (and quarantine) when the device
    /// claims more than we have outstanding.
    #[inline(always)]
    fn used_pending(&mut self) -> Option<u16> {
        if self.packed.is_some() {
            // Counted by polling flags: it cannot claim too much.
            return Some(self.used_pending_packed());
        }
        let idx = self.ring.used_idx().load(Ordering::Acquire);
        let n = idx.wrapping_sub(self.last_used);
        if n as usize > self.outstanding() {
            self.errors.used_idx_jump += 1;
            self.quarantined = true;
            return None;
        }
        Some(n)
    }

    /// The used entry at the harvest position (validated by the caller).
    #[inline(always)]
    fn peek_used(&self) -> UsedElem {
        if self.packed.is_some() {
            return self.peek_used_packed();
        }
        // SAFETY: `used_elem` masks the index into the used ring; one
        // volatile copy, validated by the caller.
        unsafe { self.ring.used_elem(self.last_used).read_volatile() }
    }

    /// Moves the harvest position past one used entry.
    #[inline(always)]
    fn skip_used(&mut self) {
        if self.packed.is_some() {
            return self.skip_used_packed();
        }
        self.last_used = self.last_used.wrapping_add(1);
    }

    /// The used entry at the harvest position, moving past it.
    #[inline(always)]
    fn pop_used(&mut self) -> UsedElem {
        let e = self.peek_used();
        self.skip_used();
        e
    }

    /// Validates a used id; `Some(id)` when it names a posted descriptor.
    #[inline(always)]
    fn check_used_id(&mut self, id: u32) -> Option<usize> {
        let id = id as usize;
        match self.slots.get(id) {
            Some(Some(_)) => Some(id),
            Some(None) => {
                self.errors.used_id_not_posted += 1;
                None
            }
            None => {
                self.errors.used_id_out_of_range += 1;
                None
            }
        }
    }

    /// Takes the packet of a validated id back and frees the descriptor.
    #[inline(always)]
    fn take_slot(&mut self, id: usize) -> Option<Packet> {
        let p = self.slots.get_mut(id)?.take()?;
        self.free.push(id as u16);
        Some(p)
    }

    /// Posts one single-descriptor buffer (not yet published).
    #[inline(always)]
    fn post(&mut self, id: u16, gpa: u64, len: u32, flags: u16, pkt: Packet) {
        self.posted_len[id as usize] = len;
        self.slots[id as usize] = Some(pkt);
        if self.packed.is_some() {
            return self.post_packed(id, gpa, len, flags);
        }
        let d = crate::layout::Desc {
            addr: gpa,
            len,
            flags,
            next: 0,
        };
        // SAFETY: `desc_ptr` and `avail_entry_ptr` mask their index into the
        // rings, which are our own memory; the device reads them only after
        // the release store of `avail.idx`.
        unsafe {
            self.ring.desc_ptr(id).write(d);
            self.ring.avail_entry_ptr(self.avail_idx).write(id);
        }
        self.avail_idx = self.avail_idx.wrapping_add(1);
    }

    #[inline(always)]
    fn publish_avail(&mut self) {
        if self.packed.is_some() {
            // Each descriptor was published by its own flags.
            return;
        }
        self.ring
            .avail_idx()
            .store(self.avail_idx, Ordering::Release);
    }
}
