//! The device side of a split virtqueue: the switch's vhost-user port.
//!
//! The driver (a VM or VNF) posts chains; we copy frames out of its TX
//! queue ([`DeviceQueue::dequeue_burst`], in `tx.rs`) and into its RX queue
//! ([`DeviceQueue::enqueue_burst`], in `rx.rs`). Per burst: one acquire load
//! of `avail.idx`, used elements collected in a shadow ring, one release
//! store of `used.idx`, at most one interrupt request. No allocation after
//! [`DeviceQueue::new`].
//!
//! Interrupts: the call eventfd is the driver's, so its `write` could block
//! (see [`crate::notify`]); the queue hands it to a [`Call`] and an
//! interrupt is one [`Call::signal`] (an atomic swap, plus a wake-up of
//! the notifier thread when it sleeps). A call fd found blocking is
//! ignored from then on and every interrupt it would have carried is
//! counted in [`QueueStats::call_blocked`].
//!
//! The driver is hostile: every violation is counted in [`QueueErrors`] and
//! the offending chain is returned unused; an `avail.idx` more than `size`
//! ahead is unrecoverable and quarantines the queue (bursts return 0 and
//! touch no memory). Nothing here panics or loops without bound.

mod chain;
mod keep;
mod lend;
mod offload;
mod packed;
mod rx;
mod tx;

use crate::dirty_log::DirtyLog;
use crate::layout::{
    UsedElem, VIRTIO_F_RING_PACKED, VIRTIO_NET_F_MRG_RXBUF, VIRTIO_RING_F_EVENT_IDX,
    VIRTQ_AVAIL_F_NO_INTERRUPT, VIRTQ_USED_F_NO_NOTIFY,
};
use crate::memory::GuestMemory;
use crate::notify::Call;
use crate::ring::{Ring, SetupError, need_event, prefetch_write};
use chain::ChainError;
pub use chain::{
    BURST_DESC_BUDGET, LONG_CHAIN_DESCS, LONG_CHAIN_WEIGHT, MAX_CHAIN_DESCS, RX_BURST_DESC_BUDGET,
    chain_cost,
};
pub use lend::{Lent, NotLendable};
use nfv_mem::PoolCache;
use nfv_offload::OffloadCaps;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::{Ordering, fence};
pub use tx::{SPLIT_HEAD, SPLIT_MIN_TAIL};

/// What `VHOST_USER_SET_VRING_*` told us about one queue.
#[derive(Debug)]
pub struct QueueSetup {
    pub mem: Arc<GuestMemory>,
    /// Power of two, 1..=32768.
    pub size: u16,
    /// Ring addresses in the frontend's user address space
    /// (`VHOST_USER_SET_VRING_ADDR`), translated with
    /// [`GuestMemory::translate_uva`].
    pub desc_uva: u64,
    pub avail_uva: u64,
    pub used_uva: u64,
    /// `VHOST_USER_SET_VRING_BASE`.
    pub last_avail_idx: u16,
    /// Negotiated virtio features.
    pub features: u64,
    /// Eventfd to signal the driver (`VHOST_USER_SET_VRING_CALL`), written
    /// by the notifier thread, never by the queue's owner. `None`: the
    /// driver polls; it is never interrupted (and the per-burst fence and
    /// interrupt check are skipped).
    pub call: Option<OwnedFd>,
}

/// Protocol violations by the driver, one counter per kind. Plain fields:
/// the queue has a single owner (its PMD thread); copy them out to publish.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueErrors {
    /// `avail.idx` more than `size` ahead of us: the queue is quarantined.
    pub avail_idx_jump: u64,
    /// A head (avail ring entry) or `next` index >= the queue (or indirect
    /// table) size.
    pub desc_id_out_of_range: u64,
    /// A buffer (`addr`, `len`) not inside one guest memory region.
    pub desc_out_of_memory: u64,
    /// A chain of more than [`MAX_CHAIN_DESCS`] descriptors (on RX with
    /// MRG_RXBUF: the chains of one packet together), or longer than its
    /// table (a loop).
    pub chain_too_long: u64,
    /// An indirect table whose length is 0, not a multiple of 16 or more
    /// than 65536 entries.
    pub indirect_bad_len: u64,
    /// An indirect descriptor inside an indirect table.
    pub indirect_nested: u64,
    /// An indirect table outside guest memory (or not 8-byte aligned).
    pub indirect_out_of_memory: u64,
    /// Descriptor lengths summing past `u32::MAX` (virtio §2.7.5).
    pub len_overflow: u64,
    /// A device-writable buffer in a TX chain, or a read-only one in RX.
    pub wrong_direction: u64,
    /// A TX chain shorter than the virtio-net header.
    pub short_chain: u64,
    /// TX: a virtio-net header asking for an offload that was not
    /// negotiated, or whose checksum offsets or GSO fields do not fit its
    /// frame (`nfv_offload::validate`); the frame is dropped.
    pub bad_offload: u64,
}

impl QueueErrors {
    pub fn total(&self) -> u64 {
        self.avail_idx_jump
            + self.desc_id_out_of_range
            + self.desc_out_of_memory
            + self.chain_too_long
            + self.indirect_bad_len
            + self.indirect_nested
            + self.indirect_out_of_memory
            + self.len_overflow
            + self.wrong_direction
            + self.short_chain
            + self.bad_offload
    }

    #[cold]
    fn record(&mut self, e: ChainError) {
        let c = match e {
            ChainError::DescId => &mut self.desc_id_out_of_range,
            ChainError::BadAddr => &mut self.desc_out_of_memory,
            ChainError::TooLong => &mut self.chain_too_long,
            ChainError::IndirectLen => &mut self.indirect_bad_len,
            ChainError::IndirectNested => &mut self.indirect_nested,
            ChainError::IndirectAddr => &mut self.indirect_out_of_memory,
            ChainError::LenOverflow => &mut self.len_overflow,
            ChainError::WrongDirection => &mut self.wrong_direction,
            ChainError::Short => &mut self.short_chain,
        };
        *c += 1;
    }
}

/// Traffic counters of one queue (single writer, like [`QueueErrors`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Frames moved (dequeued from the driver, or delivered to it).
    pub packets: u64,
    pub bytes: u64,
    /// TX: frame longer than a pool packet's room; dropped.
    pub oversize: u64,
    /// RX without MRG_RXBUF: the guest's next chain cannot hold header +
    /// frame; the packet is dropped (the chain stays for the next one).
    pub no_room: u64,
    /// RX: packets dropped because their chain was bad (see errors).
    pub bad_chain_drops: u64,
    /// TX: the pool was empty; the burst stopped early.
    pub alloc_failures: u64,
    /// Interrupts requested (handed to the notifier, which may coalesce
    /// requests that arrive while one is pending). Without a call fd the
    /// driver is taken to poll and none are requested.
    pub interrupts: u64,
    /// Writes to the call eventfd that failed (other than by blocking),
    /// as the notifier last reported them.
    pub interrupt_errors: u64,
    /// Interrupts not sent because the call fd was found blocking (or
    /// failing) and is ignored until the driver hands over a new one.
    pub call_blocked: u64,
    /// Times the queue was stopped because its guest memory faulted
    /// (SIGBUS survived; see [`DeviceQueue::quarantine_memory_fault`]).
    pub memory_faults: u64,
    /// Bursts that stopped taking chains because they had visited
    /// [`BURST_DESC_BUDGET`] descriptors (the rest waited for the next
    /// burst). Normal traffic never does: a driver posting long chains.
    pub budget_exhausted: u64,
    /// TX in one-copy mode: frames handed out split (head copied, tail
    /// left in the guest's buffer for the receiving port to copy).
    pub one_copy: u64,
    /// RX: buffers lent to a borrower (see `lend.rs`).
    pub lent: u64,
    /// RX: lent buffers completed in place (header and used entry only).
    pub zero_copy: u64,
    /// RX: lent buffers given back empty (frame sent elsewhere, dropped,
    /// or the borrower stopped).
    pub lent_returned: u64,
    /// RX: completions or returns for heads that were not lent (from a
    /// borrower that outlived a ring restart); refused.
    pub lent_stale: u64,
    /// TX: split chains kept past their burst for a port that sends their
    /// tails in place (see `keep.rs`).
    pub kept: u64,
    /// TX: kept chains returned.
    pub kept_returned: u64,
    /// TX: frames that came with a partial checksum or as a large segment
    /// (offload metadata attached, see `offload.rs`).
    pub offloaded: u64,
    /// TX: large segments (longer than a pool packet) taken into the
    /// queue's large-segment pool.
    pub large_segments: u64,
    /// TX: large segments dropped because the large-segment pool was
    /// empty or the queue has none (the guest's TCP retransmits).
    pub large_pool_empty: u64,
    /// RX: packets whose offload this guest did not negotiate (its
    /// features changed after the switch decided); dropped.
    pub offload_refused: u64,
    /// TX: returns for heads that were not kept; refused.
    pub kept_stale: u64,
}

/// Used elements collected before being copied to the used ring.
const SHADOW: usize = 64;

/// One queue of a vhost-user device. Owned by one PMD thread (`Send`, not
/// `Sync`): all methods take `&mut self`.
pub struct DeviceQueue {
    ring: Ring,
    mem: Arc<GuestMemory>,
    /// Region that matched the last translation.
    hint: usize,
    last_avail: u16,
    /// `used.idx` as last stored.
    published: u16,
    /// `used.idx` up to which the driver's interrupt wish was checked
    /// (behind `published` while a check is deferred).
    checked: u16,
    /// Interrupt checks wait for the next burst or
    /// [`DeviceQueue::settle_interrupts`] (see `set_defer_interrupts`).
    defer_interrupts: bool,
    shadow: [UsedElem; SHADOW],
    shadow_len: usize,
    /// Used index of `shadow[0]`.
    shadow_base: u16,
    hdr_len: usize,
    mrg: bool,
    event_idx: bool,
    features: u64,
    call: Option<Call>,
    kick_wanted: bool,
    /// `last_avail` when `avail_event` was last written.
    avail_event_base: u16,
    quarantined: bool,
    /// `avail.idx - last_avail` as read at the start of the last burst.
    last_pending: u16,
    /// Chains consumed with a head id out of range (split ring): there is
    /// no id to return them under, so `used.idx` stays behind the avail
    /// position by this much (wrapping), by the driver's doing.
    unreturnable: u16,
    errors: QueueErrors,
    stats: QueueStats,
    /// What the last bursts cost ([`chain_cost`]) beyond their budget,
    /// not yet repaid by skipped bursts (see [`DeviceQueue::owe`]).
    debt: u32,
    /// TX: split long frames (see `tx.rs`, one-copy mode).
    one_copy: bool,
    /// TX: the last burst's chains are taken but not yet published,
    /// because split packets still read them.
    held: bool,
    /// TX with `VIRTIO_F_IN_ORDER` on a split ring: each flush writes one
    /// used entry for the whole run of chains (see `flush_shadow`).
    used_batch: bool,
    /// RX: the buffer address of each lent head (`u64::MAX`: not lent);
    /// empty until the first lend (see `lend.rs`).
    lent: Vec<u64>,
    lent_count: u32,
    /// TX: split chains may be kept past their burst (see `keep.rs`).
    keep: bool,
    /// TX, keep mode: the held burst's split chains, head and tail
    /// address, whose used entries wait for `complete_held_keeping`.
    splits: [(u16, usize); nfv_mem::BATCH],
    n_splits: usize,
    /// TX: a bit per kept head; empty until keep mode first starts.
    kept: Vec<u64>,
    kept_count: u32,
    /// Set for a packed ring (`packed.rs`): every entry point goes there.
    packed: Option<Box<packed::PackedState>>,
    /// The stand-in split ring of a packed queue (see `new`).
    _dummy: Option<Box<[u64; 8]>>,
    /// While the guest migrates: every write into its memory is marked
    /// here (see [`crate::dirty_log`]).
    dirty_log: Option<Arc<DirtyLog>>,
    /// TX: what the driver may send (CSUM, HOST_*); with `csum` false the
    /// header is not read at all.
    host_offloads: OffloadCaps,
    /// RX: what the driver may be given (GUEST_CSUM, GUEST_*).
    guest_offloads: OffloadCaps,
    /// TX: the offload fields of the header of the chain just read (only
    /// when `host_offloads.csum`).
    tx_hdr: [u8; nfv_mem::OFFLOAD_HDR_LEN],
    /// TX: buffers for large segments (see `offload.rs`).
    large_pool: Option<PoolCache>,
}

// SAFETY: the raw pointers point into `mem`, which the queue keeps alive
// through its `Arc`; the queue is used by one thread at a time (`&mut self`
// everywhere), so moving it to the PMD thread that owns it is sound.
unsafe impl Send for DeviceQueue {}

impl std::fmt::Debug for DeviceQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceQueue")
            .field("size", &self.ring.size)
            .field("last_avail", &self.last_avail)
            .field("used", &self.published)
            .field("quarantined", &self.quarantined)
            .field("errors", &self.errors)
            .finish()
    }
}

impl DeviceQueue {
    /// Validates the ring addresses against guest memory and takes the
    /// queue over. `used.idx` is read from the ring (after a reconnect it is
    /// where the driver expects the next used entry). Kicks are turned off
    /// (poll mode); see [`DeviceQueue::set_kick_wanted`].
    pub fn new(setup: QueueSetup) -> Result<DeviceQueue, SetupError> {
        let event_idx = setup.features & VIRTIO_RING_F_EVENT_IDX != 0;
        let addrs = [setup.desc_uva, setup.avail_uva, setup.used_uva];
        let mut last_avail = setup.last_avail_idx;
        let (ring, packed, dummy) = if setup.features & VIRTIO_F_RING_PACKED != 0 {
            let pr = crate::packed::PackedRing::new(&setup.mem, setup.size, addrs, true)?;
            let (idx, wrap) = crate::packed::decode_base(setup.last_avail_idx);
            if idx >= setup.size {
                return Err(SetupError::PackedBase {
                    idx,
                    size: setup.size,
                });
            }
            last_avail = idx;
            // The split-ring code never runs on a packed queue (every
            // entry point checks `packed` first); should it, it finds a
            // one-entry split ring of its own here, not guest memory.
            let (ring, dummy) = Ring::stand_in();
            let st = packed::PackedState::new(pr, idx, wrap);
            (ring, Some(Box::new(st)), Some(dummy))
        } else {
            let ring = Ring::new(&setup.mem, setup.size, addrs, event_idx, true)?;
            (ring, None, None)
        };
        let used = if packed.is_some() {
            0
        } else {
            ring.used_idx().load(Ordering::Acquire)
        };
        let mut q = DeviceQueue {
            ring,
            mem: setup.mem,
            hint: 0,
            last_avail,
            published: used,
            checked: used,
            defer_interrupts: false,
            shadow: [UsedElem::default(); SHADOW],
            shadow_len: 0,
            shadow_base: used,
            // Packed rings imply VERSION_1: the 12-byte header, even when a
            // hostile frontend did not say VERSION_1.
            hdr_len: if packed.is_some() {
                crate::net::HDR_LEN_V1
            } else {
                crate::net::hdr_len(setup.features)
            },
            mrg: setup.features & VIRTIO_NET_F_MRG_RXBUF != 0,
            event_idx,
            features: setup.features,
            call: setup.call.map(Call::new),
            kick_wanted: true,
            avail_event_base: last_avail,
            quarantined: false,
            last_pending: 0,
            unreturnable: 0,
            errors: QueueErrors::default(),
            stats: QueueStats::default(),
            debt: 0,
            one_copy: false,
            held: false,
            used_batch: false,
            lent: Vec::new(),
            lent_count: 0,
            keep: false,
            splits: [(0, 0); nfv_mem::BATCH],
            n_splits: 0,
            kept: Vec::new(),
            kept_count: 0,
            packed,
            _dummy: dummy,
            dirty_log: None,
            host_offloads: crate::net::host_caps(setup.features),
            guest_offloads: crate::net::guest_caps(setup.features),
            tx_hdr: [0; nfv_mem::OFFLOAD_HDR_LEN],
            large_pool: None,
        };
        q.set_kick_wanted(false);
        Ok(q)
    }

    /// On a TX queue: hand out frames longer than [`SPLIT_HEAD`] +
    /// [`SPLIT_MIN_TAIL`] as split packets (one copy per hop; see
    /// `tx.rs`). Off by default. Switching it off returns held chains.
    pub fn set_one_copy(&mut self, on: bool) {
        if !on {
            self.complete_held();
        }
        self.one_copy = on;
    }

    /// Whether the ring is packed (`VIRTIO_F_RING_PACKED`).
    pub fn is_packed(&self) -> bool {
        self.packed.is_some()
    }

    /// Where the next chain will be taken from (`VHOST_USER_GET_VRING_BASE`).
    /// Every chain taken has been returned once the burst that took it
    /// ended ([`DeviceQueue::complete_held`]): no chain stays in flight
    /// between bursts.
    /// On a packed ring: the slot in bits 0-14 and the avail wrap counter
    /// in bit 15, as vhost-user encodes it.
    pub fn last_avail_idx(&self) -> u16 {
        match &self.packed {
            Some(p) => crate::packed::encode_base(self.last_avail, p.avail_wrap),
            None => self.last_avail,
        }
    }
    /// The split ring's `used.idx` as last published (read from the ring
    /// when the queue was built); on a packed ring the used slot and wrap
    /// counter, encoded as [`DeviceQueue::last_avail_idx`] is. For the logs
    /// of ring starts and stops: the two positions a frontend resumes from.
    pub fn used_position(&self) -> u16 {
        match &self.packed {
            Some(p) => crate::packed::encode_base(p.used, p.used_wrap),
            None => self.published,
        }
    }
    /// What guest memory holds now just before this ring's positions,
    /// oldest first, as log text: on a split ring the ids of the last `n`
    /// used entries before the published `used.idx` and the last `n`
    /// heads the driver made available before our avail position; on a
    /// packed ring the id and flags of the `n` descriptor slots before our
    /// used position. For the logs of ring starts and stops: a migration's
    /// source and destination then show whether the destination's copy of
    /// the ring is the one the source left (a write that escaped the dirty
    /// log shows as a difference).
    #[cold]
    pub fn ring_history(&self, n: u16) -> String {
        if let Some(p) = &self.packed {
            let n = n.min(p.ring.size);
            let size = p.ring.size;
            let slots: Vec<String> = (1..=n)
                .rev()
                .map(|k| {
                    let i = (p.used + size - k) % size;
                    let (_, _, id) = p.ring.read(i);
                    format!("{id}/{:#06x}", p.ring.flags(i))
                })
                .collect();
            return format!("last descriptors (id/flags) [{}]", slots.join(", "));
        }
        let n = n.min(self.ring.size);
        let used: Vec<u32> = (1..=n)
            .rev()
            .map(|k| {
                let slot = self.ring.used_elem(self.published.wrapping_sub(k));
                // SAFETY: `used_elem` masks the index: the slot is inside
                // the used ring, mapped for the queue's lifetime; a volatile
                // read of a slot the driver only reads.
                unsafe { slot.read_volatile() }.id
            })
            .collect();
        let avail: Vec<u16> = (1..=n)
            .rev()
            .map(|k| self.ring.avail_entry(self.last_avail.wrapping_sub(k)))
            .collect();
        format!("last used ids {used:?}, last avail heads {avail:?}")
    }
    /// Chains this queue consumed without returning them because their
    /// head id was out of range (wrapping; split rings): with
    /// [`DeviceQueue::used_position`] it accounts for every chain taken.
    pub fn unreturnable(&self) -> u16 {
        self.unreturnable
    }
    pub fn size(&self) -> u16 {
        match &self.packed {
            Some(p) => p.ring.size,
            None => self.ring.size,
        }
    }
    pub fn features(&self) -> u64 {
        self.features
    }
    pub fn errors(&self) -> &QueueErrors {
        &self.errors
    }
    pub fn stats(&self) -> &QueueStats {
        &self.stats
    }
    pub fn is_quarantined(&self) -> bool {
        self.quarantined
    }
    /// Chains the driver had posted and we had not yet taken when the last
    /// burst that looked at the ring started (`avail.idx - last_avail_idx`
    /// as read then): on a TX queue the driver's backlog, on an RX queue
    /// the receive buffers it had free. 0 before the first such burst and
    /// once quarantined. A burst with nothing to do (empty batch to
    /// deliver, no room to dequeue into) does not read the ring and leaves
    /// it unchanged.
    pub fn last_pending(&self) -> u16 {
        self.last_pending
    }

    /// Asks the driver to kick us (`on`, for a PMD about to sleep on the
    /// kick eventfd) or not to (poll mode, the default). With EVENT_IDX this
    /// is `avail_event`, else `VIRTQ_USED_F_NO_NOTIFY`. After turning kicks
    /// on, check [`DeviceQueue::has_avail`] once more before sleeping: a
    /// chain posted just before the driver saw the change brings no kick.
    pub fn set_kick_wanted(&mut self, on: bool) {
        self.kick_wanted = on;
        if self.quarantined {
            return;
        }
        if self.packed.is_some() {
            return self.set_kick_wanted_packed(on);
        }
        let flags = if on { 0 } else { VIRTQ_USED_F_NO_NOTIFY };
        self.ring.used_flags().store(flags, Ordering::Relaxed);
        self.logged(self.ring.used_flags().as_ptr().cast(), 2);
        if self.event_idx {
            self.write_avail_event();
        }
        fence(Ordering::SeqCst);
    }

    /// Logs every later write into guest memory in `log` (the guest is
    /// migrating, `VHOST_F_LOG_ALL`), or stops logging (`None`). Buffers
    /// are not lent while logging (see [`DeviceQueue::lendable`]).
    pub fn set_dirty_log(&mut self, log: Option<Arc<DirtyLog>>) {
        let on = log.is_some();
        self.dirty_log = log;
        if on {
            // The queue wrote its notification fields (used flags or the
            // device event area, avail_event) when it was built, before
            // it had a log: write them again, logged.
            self.set_kick_wanted(self.kick_wanted);
        }
    }

    /// True while writes are logged.
    pub fn dirty_logging(&self) -> bool {
        self.dirty_log.is_some()
    }

    /// Marks `[ptr, ptr + len)`, just written, in the dirty log if there
    /// is one: one predictable branch when there is none.
    #[inline(always)]
    fn logged(&self, ptr: *const u8, len: usize) {
        if self.dirty_log.is_some() {
            self.log_write(ptr, len);
        }
    }

    /// The marking itself, out of line: the packet path only carries the
    /// branch (inlined, the translation and bit loops cost the copy loops
    /// registers and code space even when nothing is logged).
    #[cold]
    #[inline(never)]
    fn log_write(&self, ptr: *const u8, len: usize) {
        if let Some(log) = &self.dirty_log {
            log.mark_host(&self.mem, ptr, len);
        }
    }

    /// Logs the `num_buffers` bytes a merged packet patched.
    #[inline(always)]
    fn logged_num_buffers(&self, fill: &rx::Fill) {
        if self.dirty_log.is_some() {
            for p in fill.num_buffers_at() {
                self.logged(p, 1);
            }
        }
    }

    /// Replaces the eventfd used to interrupt the driver
    /// (`VHOST_USER_SET_VRING_CALL` may arrive at any time); `None`: the
    /// driver polls.
    pub fn set_call(&mut self, call: Option<OwnedFd>) {
        // A deferred check goes to the fd it was due on.
        self.settle_interrupts();
        self.call = call.map(Call::new);
    }

    /// Split rings: after publishing used entries, leave the check of
    /// whether the driver wants an interrupt (and the full fence before
    /// it) to the queue's next burst — [`DeviceQueue::enqueue_burst`]
    /// checks first, [`DeviceQueue::dequeue_burst`] last — or to
    /// [`DeviceQueue::settle_interrupts`], which the owner must then call
    /// within a poll iteration or so when no burst comes, and before it
    /// lets the queue go. On a TX queue this also holds every burst's
    /// chains until [`DeviceQueue::complete_held`]. Off by default.
    ///
    /// Why: the fence waits for the `used.idx` store, whose line the
    /// driver polls, to take that line back from the driver's core — a
    /// cross-core round trip at every burst's end. A burst later the store
    /// has long completed and the fence costs next to nothing; the
    /// interrupt goes out one poll iteration later, and one check covers
    /// everything published since the last (virtio 1.2 §2.7.10: the
    /// driver's `used_event` is compared with the whole window).
    pub fn set_defer_interrupts(&mut self, on: bool) {
        if !on {
            self.settle_interrupts();
        }
        self.defer_interrupts = on;
    }

    /// Runs the interrupt check a deferred burst left (see
    /// [`DeviceQueue::set_defer_interrupts`]); a compare when none is due.
    #[inline(always)]
    pub fn settle_interrupts(&mut self) {
        if self.checked != self.published {
            self.check_interrupt();
        }
    }

    /// The interrupt check for everything published since the last one.
    #[inline(never)]
    fn check_interrupt(&mut self) {
        let (old, new) = (self.checked, self.published);
        self.checked = new;
        // Without a call fd the driver polls (vhost-user's "no call fd"):
        // nobody to interrupt, so no fence and no check.
        if self.call.is_some() && old != new {
            self.maybe_interrupt(old, new);
        }
    }

    /// True when the call fd was found blocking and is being ignored.
    pub fn call_stuck(&self) -> bool {
        self.call.as_ref().is_some_and(Call::is_stuck)
    }

    /// The guest memory the queue works in.
    pub fn memory(&self) -> &Arc<GuestMemory> {
        &self.mem
    }

    /// Stops the queue for good because its guest memory faulted
    /// ([`GuestMemory::faulted`]): bursts return 0 and touch no memory.
    /// Counted in [`QueueStats::memory_faults`] (once per queue, even if
    /// the burst that hit the fault already quarantined the queue for
    /// what it read: zeros).
    #[cold]
    pub fn quarantine_memory_fault(&mut self) {
        self.stats.memory_faults = 1;
        self.quarantined = true;
        self.last_pending = 0;
    }

    /// True when the driver has posted chains we have not taken.
    pub fn has_avail(&self) -> bool {
        if self.quarantined {
            return false;
        }
        if self.packed.is_some() {
            return self.has_avail_packed();
        }
        fence(Ordering::SeqCst);
        self.ring.avail_idx().load(Ordering::Acquire) != self.last_avail
    }

    /// Chains available this burst, or `None` (and quarantine) when the
    /// driver moved `avail.idx` impossibly far.
    #[inline(always)]
    fn pending(&mut self) -> Option<u16> {
        let idx = self.ring.avail_idx().load(Ordering::Acquire);
        let n = idx.wrapping_sub(self.last_avail);
        if n > self.ring.size {
            self.quarantine();
            return None;
        }
        self.last_pending = n;
        Some(n)
    }

    #[cold]
    fn quarantine(&mut self) {
        self.errors.avail_idx_jump += 1;
        self.quarantined = true;
        self.last_pending = 0;
    }

    /// Next used index to be written.
    #[inline(always)]
    fn used_cursor(&self) -> u16 {
        self.shadow_base.wrapping_add(self.shadow_len as u16)
    }

    /// Asks for ownership of the used-ring lines the next `n` entries and
    /// `used.idx` will be written to. The driver reads those lines, so each
    /// store would otherwise wait for a cross-core round trip — and the
    /// fence before the interrupt check waits for all of them. Issued at
    /// the start of a burst, the round trips overlap the copies.
    #[inline(always)]
    fn warm_used(&self, n: usize) {
        let from = self.used_cursor();
        prefetch_write(self.ring.used_idx());
        if self.used_batch {
            // One entry per burst (`flush_shadow`), at the cursor.
            prefetch_write(self.ring.used_elem(from));
            return;
        }
        let mut k = 0;
        while k < n {
            prefetch_write(self.ring.used_elem(from.wrapping_add(k as u16)));
            k += 8;
        }
        prefetch_write(
            self.ring
                .used_elem(from.wrapping_add(n as u16).wrapping_sub(1)),
        );
    }

    #[inline(always)]
    fn push_used(&mut self, id: u16, len: u32) {
        if self.shadow_len == SHADOW {
            self.flush_shadow();
        }
        self.shadow[self.shadow_len] = UsedElem { id: id as u32, len };
        self.shadow_len += 1;
    }

    /// Copies the shadow entries into the used ring (not yet published).
    #[inline(always)]
    fn flush_shadow(&mut self) {
        if self.used_batch && self.shadow_len > 1 {
            // Virtio 1.2 §2.7.9 (split ring, IN_ORDER): a batch of chains
            // used in order is returned as one entry, at the batch's first
            // slot, carrying the head id of its last chain; `used.idx`
            // still moves by the whole batch. Only for chains the device
            // read: their lengths are 0 and the driver ignores them, where
            // on RX each length is the packet's. One used-ring line moves
            // per burst instead of four.
            let last = self.shadow[self.shadow_len - 1];
            let slot = self.ring.used_elem(self.shadow_base);
            // SAFETY: as below: `used_elem` masks the index, and the driver
            // reads the slot only after `used.idx` is released past it.
            unsafe { slot.write(last) };
        } else {
            self.write_shadow();
        }
        if self.dirty_log.is_some() {
            self.log_used_elems();
        }
        self.shadow_base = self.used_cursor();
        self.shadow_len = 0;
    }

    /// Every shadow entry into its used-ring slot.
    #[inline(always)]
    fn write_shadow(&self) {
        for (i, e) in self.shadow[..self.shadow_len].iter().enumerate() {
            let slot = self.ring.used_elem(self.shadow_base.wrapping_add(i as u16));
            // SAFETY: `used_elem` masks the index, so the slot is inside the
            // used ring; the driver reads it only after `used.idx` is
            // released past it.
            unsafe { slot.write(*e) };
        }
    }

    /// Marks the used entries `flush_shadow` is writing.
    #[cold]
    fn log_used_elems(&self) {
        for i in 0..self.shadow_len {
            let slot = self.ring.used_elem(self.shadow_base.wrapping_add(i as u16));
            self.logged(slot.cast(), 8);
        }
    }

    /// Forgets used entries from `mark` on (not yet published).
    #[cold]
    fn rollback_used(&mut self, mark: u16) {
        let d = mark.wrapping_sub(self.shadow_base) as usize;
        if d <= self.shadow_len {
            self.shadow_len = d;
        } else {
            // Already flushed to the ring but unpublished: overwrite later.
            self.shadow_base = mark;
            self.shadow_len = 0;
        }
    }

    /// Publishes the burst's used entries (one release store), interrupts
    /// the driver if it asked for it, and keeps kick suppression current.
    #[inline(always)]
    fn finish_burst(&mut self) {
        self.flush_shadow();
        let new = self.shadow_base;
        let old = self.published;
        if new != old {
            self.ring.used_idx().store(new, Ordering::Release);
            self.logged(self.ring.used_idx().as_ptr().cast(), 2);
            self.published = new;
            // Deferred (`set_defer_interrupts`) unless the window since the
            // last check could wrap `need_event`'s arithmetic.
            if !self.defer_interrupts || new.wrapping_sub(self.checked) >= self.ring.size {
                self.check_interrupt();
            }
        }
        if self.event_idx {
            let moved = self.last_avail.wrapping_sub(self.avail_event_base);
            if (self.kick_wanted && moved != 0) || moved >= 0x4000 {
                self.write_avail_event();
            }
        }
    }

    /// Kicks wanted: `avail_event = last_avail` (kick for the next chain).
    /// Not wanted: `last_avail - 1`, which the driver cannot reach before
    /// we have moved 0x4000 further (its window is at most `size` <= 0x8000
    /// wide) — `finish_burst` refreshes it long before that.
    fn write_avail_event(&mut self) {
        let v = if self.kick_wanted {
            self.last_avail
        } else {
            self.last_avail.wrapping_sub(1)
        };
        self.ring.avail_event().store(v, Ordering::Relaxed);
        self.logged(self.ring.avail_event().as_ptr().cast(), 2);
        self.avail_event_base = self.last_avail;
    }

    /// virtio §2.7.7/§2.7.10: after publishing `[old, new)`, interrupt when
    /// the driver's `used_event` is in that window (EVENT_IDX) or when it
    /// has not set `VIRTQ_AVAIL_F_NO_INTERRUPT`.
    #[inline(always)]
    fn maybe_interrupt(&mut self, old: u16, new: u16) {
        // The used.idx store must be visible before we read the driver's
        // wish, or we could miss its enabling interrupts (store→load).
        fence(Ordering::SeqCst);
        let want = if self.event_idx {
            need_event(self.ring.used_event().load(Ordering::Relaxed), new, old)
        } else {
            self.ring.avail_flags().load(Ordering::Relaxed) & VIRTQ_AVAIL_F_NO_INTERRUPT == 0
        };
        if want {
            self.interrupt();
        }
    }

    #[cold]
    fn interrupt(&mut self) {
        self.stats.interrupts += 1;
        if let Some(c) = &self.call
            && !c.signal()
        {
            self.stats.call_blocked += 1;
            self.stats.interrupt_errors = c.failures();
        }
    }
}
