//! Walking one descriptor chain (virtio §2.7.5, §2.7.5.3) in hostile
//! memory. Each descriptor is read once (volatile copy) and bounds-checked
//! once; the walk ends with [`ChainError::TooLong`] after
//! [`MAX_CHAIN_DESCS`] descriptors, or earlier when it visits more
//! descriptors than its table holds (a loop). The walker counts what it
//! visited ([`Chain::steps`]) so that bursts can bound their total work
//! ([`BURST_DESC_BUDGET`]).

use crate::layout::{Desc, VIRTQ_DESC_F_INDIRECT, VIRTQ_DESC_F_NEXT, VIRTQ_DESC_F_WRITE};
use crate::memory::GuestMemory;

/// Why a chain was rejected; each maps to one [`super::QueueErrors`] field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ChainError {
    DescId,
    BadAddr,
    TooLong,
    IndirectLen,
    IndirectNested,
    IndirectAddr,
    LenOverflow,
    WrongDirection,
    Short,
}

/// One validated buffer: `len` bytes at host address `ptr`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Seg {
    pub ptr: *mut u8,
    pub len: u32,
    pub write: bool,
}

impl Seg {
    /// The buffer a descriptor names (`flags`: its WRITE bit, 2 in both
    /// ring layouts), checked against guest memory once.
    #[inline(always)]
    pub(crate) fn of(
        mem: &GuestMemory,
        addr: u64,
        len: u32,
        flags: u16,
        hint: &mut usize,
    ) -> Result<Seg, ChainError> {
        let ptr = mem
            .translate_hinted(addr, len as usize, hint)
            .ok_or(ChainError::BadAddr)?;
        Ok(Seg {
            ptr,
            len,
            write: flags & VIRTQ_DESC_F_WRITE != 0,
        })
    }
}

/// Most entries accepted in an indirect table: `next` is a u16, so no
/// chain can use more (Linux vhost has the same limit).
const MAX_INDIRECT: u32 = 65536;

/// Most descriptors one chain may use (direct ones, the indirect one and
/// its table's entries together; zero-length ones count too). On the RX
/// side with MRG_RXBUF the limit holds for all chains of one packet
/// together. A chain over it is returned unused and counted as
/// `chain_too_long`.
///
/// Why 256: without the cap a spec-legal chain may hold 65,536
/// zero-length descriptors (an indirect table), about 1,000 times the
/// work of a normal burst. The peers of this switch need far fewer: our
/// frames are at most a pool frame (no GSO/TSO is negotiated), a Linux
/// guest puts one skb in at most `MAX_SKB_FRAGS + 2` descriptors (19 by
/// default, 47 at the largest configurable value), DPDK's virtio PMD one
/// descriptor per mbuf segment (5 for a 9,000-byte frame in 2 KiB mbufs).
/// DPDK's own vhost library stops at 256 buffer vectors per packet
/// (`BUF_VECTOR_MAX`; it does not count zero-length descriptors, which
/// it bounds by the queue size instead); Linux vhost at 1,024 iovecs
/// (`UIO_MAXIOV`). We take DPDK's figure and count every descriptor, so
/// zero-length ones cannot slip past it.
pub const MAX_CHAIN_DESCS: u32 = 256;

/// Descriptors one burst may visit (as [`chain_cost`] charges them) before
/// it stops taking chains: a burst always finishes the chain it is in and
/// then leaves the rest for the next burst, so it visits fewer than
/// `BURST_DESC_BUDGET + MAX_CHAIN_DESCS`. What a burst spends above the
/// budget is carried as debt (see `DeviceQueue::owe`): the queue's next
/// bursts are skipped until it is repaid, this budget per skipped burst,
/// so on average a queue never takes more than the budget per burst — the
/// other queues of the PMD get their turn, the way a deficit-round-robin
/// scheduler shares a link.
///
/// Why 64 (two per chain of a full burst of 32): normal chains take one
/// descriptor (virtio 1.x drivers put the header in front of the frame;
/// one buffer per RX chain), two with a separate header, so a normal
/// burst is never cut; chains of three (an indirect descriptor with a
/// two-entry table) are taken about 21 per burst, the rest next burst.
/// And it keeps a hostile queue's share of the PMD within what a busy
/// well-behaved neighbour takes: walking 64 descriptors costs less than
/// copying a full burst of 64-byte frames (`nfv-bench starve`,
/// bench/README.md). Linux vhost bounds one run of a queue the same way,
/// by packets and bytes (`vhost_exceeds_weight`).
pub const BURST_DESC_BUDGET: u32 = 64;

/// The budget of a burst into the driver's RX queue (our transmit). Unlike
/// the driver's TX chains, which wait in its ring when a burst stops, the
/// frames a transmit burst does not deliver are dropped by the caller
/// (`tx_full`), so this budget must never cut normal traffic: a full burst
/// of 32 frames of up to 16 buffers each (9,000 bytes in 1 KiB buffers;
/// Linux and DPDK drivers post 1.5–4 KiB buffers) stays within it. It
/// still bounds what a driver posting 256-descriptor RX chains (the per
/// packet cap) costs a burst: 512 descriptors instead of 8,192.
pub const RX_BURST_DESC_BUDGET: u32 = 16 * nfv_mem::BATCH as u32;

/// Descriptors a chain may use before each further one is charged
/// [`LONG_CHAIN_WEIGHT`] times over (see [`chain_cost`]). Every driver we
/// serve stays within it for every frame: a Linux skb takes at most
/// `MAX_SKB_FRAGS + 2` = 19 by default, DPDK one per mbuf segment (5 for
/// a 9,000-byte frame in 2 KiB mbufs), a merged RX packet one per buffer
/// (at most 16 for a full budget burst).
pub const LONG_CHAIN_DESCS: u32 = 20;

/// How many times over a descriptor beyond [`LONG_CHAIN_DESCS`] is
/// charged. Long chains are legal, so they are served, but a queue that
/// posts them gets a share of the PMD in proportion to the packets it
/// moves rather than to the descriptors it makes us walk: a chain at the
/// cap is charged 4,032 descriptors, ~63 bursts of debt, so a queue
/// posting nothing else costs its PMD ~4 descriptors per burst on average
/// — the other queues keep more than 90 % of their throughput
/// (`nfv-bench starve`, bench/README.md). Without the weight such a queue
/// took the whole budget every burst, as much as a busy neighbour.
pub const LONG_CHAIN_WEIGHT: u32 = 16;

/// What a chain that visited `steps` descriptors costs its burst's budget
/// and, beyond it, the queue's debt.
#[inline(always)]
pub fn chain_cost(steps: u32) -> u32 {
    // A compare on the normal path (no chain is long), not the arithmetic.
    if steps <= LONG_CHAIN_DESCS {
        steps
    } else {
        steps + (steps - LONG_CHAIN_DESCS) * LONG_CHAIN_WEIGHT
    }
}

/// A walk over one chain's buffers, split (`Chain`) or packed
/// (`super::packed::PackedChain`): what the copy loops need.
pub(crate) trait Walk: Copy {
    /// The next buffer of the chain, `None` at its end.
    fn next(&mut self, mem: &GuestMemory, hint: &mut usize) -> Result<Option<Seg>, ChainError>;
    /// True once the walk has returned the chain's last buffer.
    fn is_done(&self) -> bool;
    /// Descriptors visited (charged to the burst's budget).
    fn steps(&self) -> u32;
}

impl Walk for Chain {
    #[inline(always)]
    fn next(&mut self, mem: &GuestMemory, hint: &mut usize) -> Result<Option<Seg>, ChainError> {
        Chain::next(self, mem, hint)
    }
    #[inline(always)]
    fn is_done(&self) -> bool {
        self.done
    }
    #[inline(always)]
    fn steps(&self) -> u32 {
        self.steps
    }
}

/// Checks an indirect table of `len` bytes at guest address `addr` (split
/// and packed descriptors are both 16 bytes, 8-aligned): its host address
/// and number of entries, or why it is refused.
#[inline(always)]
pub(crate) fn indirect_table(
    mem: &GuestMemory,
    addr: u64,
    len: u32,
    hint: &mut usize,
) -> Result<(*mut u8, u32), ChainError> {
    if len == 0 || len & 15 != 0 || len / 16 > MAX_INDIRECT {
        return Err(ChainError::IndirectLen);
    }
    let p = mem
        .translate_hinted(addr, len as usize, hint)
        .ok_or(ChainError::IndirectAddr)?;
    if (p as usize) & (std::mem::align_of::<Desc>() - 1) != 0 {
        return Err(ChainError::IndirectAddr);
    }
    Ok((p, len / 16))
}

/// Iterator state over one chain.
#[derive(Clone, Copy)]
pub(crate) struct Chain {
    table: *const Desc,
    table_len: u32,
    next: u32,
    /// Descriptors visited so far.
    steps: u32,
    /// `steps` at which the walk fails: the end of the current table (a
    /// longer walk loops) or the cap, whichever comes first.
    limit: u32,
    indirect: bool,
    done: bool,
}

impl Chain {
    /// A chain starting at `head` (the caller checked `head < size`) in the
    /// queue's descriptor table of `size` entries. `used` descriptors of
    /// the cap are already spent (earlier chains of the same RX packet).
    #[inline(always)]
    pub fn new(desc: *const Desc, size: u16, head: u16, used: u32) -> Chain {
        debug_assert!(head < size);
        Chain {
            table: desc,
            table_len: size as u32,
            next: head as u32,
            steps: used,
            limit: (used + size as u32).min(MAX_CHAIN_DESCS),
            indirect: false,
            done: false,
        }
    }

    /// Descriptors visited, including those of the earlier chains passed
    /// to [`Chain::new`].
    #[inline(always)]
    pub fn steps(&self) -> u32 {
        self.steps
    }

    /// The next buffer of the chain, `None` at its end. An indirect
    /// descriptor is followed into its table (virtio allows zero or more
    /// direct descriptors before it; a NEXT flag on it is ignored, the chain
    /// ends with the table). Indirect tables must be 8-byte aligned.
    #[inline(always)]
    pub fn next(&mut self, mem: &GuestMemory, hint: &mut usize) -> Result<Option<Seg>, ChainError> {
        loop {
            if self.done {
                return Ok(None);
            }
            if self.steps >= self.limit {
                return Err(ChainError::TooLong);
            }
            self.steps += 1;
            // SAFETY: `next < table_len` always holds (checked before it is
            // stored; `new`'s caller checked `head`), `table` points to
            // `table_len` descriptors inside guest memory (the queue's table,
            // validated at setup, or an indirect table validated below), and
            // it is suitably aligned. One volatile copy: we validate the
            // copy and never re-read the descriptor.
            let d = unsafe { self.table.add(self.next as usize).read_volatile() };
            if d.flags & VIRTQ_DESC_F_INDIRECT != 0 {
                if self.indirect {
                    return Err(ChainError::IndirectNested);
                }
                let (p, n) = indirect_table(mem, d.addr, d.len, hint)?;
                self.table = p.cast();
                self.table_len = n;
                self.next = 0;
                self.limit = (self.steps + self.table_len).min(MAX_CHAIN_DESCS);
                self.indirect = true;
                continue;
            }
            if d.flags & VIRTQ_DESC_F_NEXT != 0 {
                if d.next as u32 >= self.table_len {
                    return Err(ChainError::DescId);
                }
                self.next = d.next as u32;
            } else {
                self.done = true;
            }
            return Seg::of(mem, d.addr, d.len, d.flags, hint).map(Some);
        }
    }
}

impl super::DeviceQueue {
    /// True when this burst must be skipped to repay earlier overspending
    /// (and repays [`BURST_DESC_BUDGET`], in both directions: the larger
    /// transmit budget exists so normal merged packets are never cut, not
    /// to let a queue in debt repay faster). One compare on the normal
    /// path.
    #[inline(always)]
    pub(super) fn in_debt(&mut self) -> bool {
        if self.debt == 0 {
            return false;
        }
        self.debt = self.debt.saturating_sub(BURST_DESC_BUDGET);
        true
    }

    /// Ends a burst whose chains cost `spent` ([`chain_cost`]): what it
    /// took beyond the direction's `budget` becomes debt, so the queue's
    /// average stays within [`BURST_DESC_BUDGET`] per burst. Normal
    /// traffic never owes more than the last chain's overshoot (below
    /// [`LONG_CHAIN_DESCS`] descriptors, one skipped burst); chains past
    /// [`LONG_CHAIN_DESCS`] owe in proportion to their weight.
    #[inline(always)]
    pub(super) fn owe(&mut self, spent: u32, budget: u32) {
        self.debt = spent.saturating_sub(budget);
    }
}
