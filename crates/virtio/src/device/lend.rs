//! Lending guest RX buffers (IOVTee-style receive): the driver's receive
//! buffers are taken off the avail ring *without* a packet to put in them
//! and handed to someone else — an AF_XDP socket whose UMEM is this
//! guest's memory — who fills them; the queue then only writes the
//! virtio-net header and the used entry ([`DeviceQueue::complete_lent`]),
//! never the frame. A buffer that received a frame the switch sends
//! elsewhere, or that is still lent when the ring stops, goes back with
//! length 0 ([`DeviceQueue::return_lent`]), which Linux and DPDK drivers
//! count as a length error and recycle.
//!
//! Rules:
//! * Only a chain of **one** device-writable descriptor is lent (what Linux
//!   with mergeable buffers and DPDK post); the next pending chain is only
//!   looked at ([`DeviceQueue::lend_peek`]) until the borrower accepts it
//!   ([`DeviceQueue::lend_take`]), so a chain nobody can use stays for the
//!   copy path.
//! * Not with `VIRTIO_F_IN_ORDER`: lent buffers complete in the order the
//!   kernel fills them, and a buffer completed by the copy path must not
//!   wait behind lent ones that may stay empty for a long time.
//! * The queue remembers each lent head and its buffer, so a completion or
//!   return for a head that is not lent (twice, or from before a restart)
//!   is refused and counted (`lent_stale`), never written to the ring.
//!
//! The table of lent heads is allocated on the first lend (cold), `size`
//! entries of 8 bytes; nothing is allocated per buffer.

use super::DeviceQueue;
use crate::layout::{
    Desc, VHOST_F_LOG_ALL, VIRTIO_F_IN_ORDER, VIRTQ_DESC_F_INDIRECT, VIRTQ_DESC_F_NEXT,
    VIRTQ_DESC_F_WRITE,
};

/// A guest receive buffer lent out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lent {
    pub head: u16,
    /// Guest-physical address and length of the buffer (header included).
    pub gpa: u64,
    pub len: u32,
}

/// Why a queue, or its next pending chain, cannot be lent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotLendable {
    /// `VIRTIO_F_IN_ORDER` was negotiated.
    InOrder,
    /// A packed ring: lending is implemented for split rings only.
    Packed,
    /// The queue is quarantined.
    Quarantined,
    /// The chain is not one device-writable buffer (several descriptors,
    /// indirect, read-only or empty): left for the copy path.
    Shape,
    /// A bad head, an address outside guest memory, or a head that is
    /// already lent (a driver posting one buffer twice): left for the copy
    /// path, which returns it with its error counted.
    BadChain,
    /// The guest is migrating (`VHOST_F_LOG_ALL`): the kernel's writes
    /// into lent buffers would escape the dirty log, so frames are copied
    /// (and logged) until logging stops.
    DirtyLog,
}

impl NotLendable {
    pub fn as_str(self) -> &'static str {
        match self {
            NotLendable::InOrder => "in_order",
            NotLendable::Packed => "packed_ring",
            NotLendable::Quarantined => "quarantined",
            NotLendable::Shape => "buffer_shape",
            NotLendable::BadChain => "bad_chain",
            NotLendable::DirtyLog => "dirty_logging",
        }
    }
}

/// Marks a head that is not lent.
const NOT_LENT: u64 = u64::MAX;

impl DeviceQueue {
    /// Whether this queue may lend its buffers at all.
    pub fn lendable(&self) -> Result<(), NotLendable> {
        if self.packed.is_some() {
            return Err(NotLendable::Packed);
        }
        if self.features & VIRTIO_F_IN_ORDER != 0 {
            return Err(NotLendable::InOrder);
        }
        if self.quarantined {
            return Err(NotLendable::Quarantined);
        }
        if self.dirty_log.is_some() || self.features & VHOST_F_LOG_ALL != 0 {
            return Err(NotLendable::DirtyLog);
        }
        Ok(())
    }

    /// The virtio-net header length the driver expects in front of each
    /// frame (10 or 12).
    pub fn hdr_len(&self) -> usize {
        self.hdr_len
    }

    /// Chains the driver has posted that are not taken yet (one acquire
    /// load of `avail.idx`); 0 when the queue cannot lend.
    pub fn lend_pending(&mut self) -> u16 {
        if self.lendable().is_err() {
            return 0;
        }
        self.pending().unwrap_or(0)
    }

    /// The `k`-th pending chain as a lendable buffer, without taking it.
    /// `k` must be below what [`Self::lend_pending`] returned.
    pub fn lend_peek(&mut self, k: u16) -> Result<Lent, NotLendable> {
        self.lendable()?;
        let head = self.ring.avail_entry(self.last_avail.wrapping_add(k));
        if head >= self.ring.size {
            return Err(NotLendable::BadChain);
        }
        // SAFETY: `head < size`, so the descriptor is inside the table,
        // which `Ring::new` checked lies in guest memory; a volatile read
        // of a plain-data struct the driver may be writing.
        let d: Desc = unsafe { self.ring.desc_ptr(head).read_volatile() };
        if d.flags & (VIRTQ_DESC_F_NEXT | VIRTQ_DESC_F_INDIRECT) != 0
            || d.flags & VIRTQ_DESC_F_WRITE == 0
            || d.len == 0
        {
            return Err(NotLendable::Shape);
        }
        if self
            .mem
            .translate_hinted(d.addr, d.len as usize, &mut self.hint)
            .is_none()
        {
            return Err(NotLendable::BadChain);
        }
        if self.lent.get(head as usize).is_some_and(|&g| g != NOT_LENT) {
            return Err(NotLendable::BadChain);
        }
        Ok(Lent {
            head,
            gpa: d.addr,
            len: d.len,
        })
    }

    /// Takes the pending chains `lent` (peeked in order from the first
    /// pending one) off the avail ring: they are the borrower's until
    /// completed or returned.
    pub fn lend_take(&mut self, lent: &[Lent]) {
        if lent.is_empty() {
            return;
        }
        if self.lent.is_empty() {
            self.lent = vec![NOT_LENT; self.ring.size as usize];
        }
        for l in lent {
            self.lent[l.head as usize] = l.gpa;
        }
        self.lent_count += lent.len() as u32;
        self.last_avail = self.last_avail.wrapping_add(lent.len() as u16);
        self.stats.lent += lent.len() as u64;
    }

    /// Takes over `old`'s lent buffers (a queue rebuilt on the same ring,
    /// memory and addresses, e.g. for a new call fd).
    pub fn adopt_lent(&mut self, old: &mut DeviceQueue) {
        if old.lent_count != 0 && old.ring.size == self.ring.size {
            self.lent = std::mem::take(&mut old.lent);
            self.lent_count = std::mem::replace(&mut old.lent_count, 0);
        }
    }

    /// Heads lent and not yet completed or returned.
    pub fn lent_outstanding(&self) -> u32 {
        self.lent_count
    }

    /// Forgets `head`'s loan; its buffer's address, or `None` (counted)
    /// if it was not lent.
    fn unlend(&mut self, head: u16) -> Option<u64> {
        let slot = self.lent.get_mut(head as usize)?;
        let gpa = std::mem::replace(slot, NOT_LENT);
        if gpa == NOT_LENT {
            self.stats.lent_stale += 1;
            return None;
        }
        self.lent_count -= 1;
        Some(gpa)
    }

    /// The borrower filled lent `head` with a `frame_len`-byte frame right
    /// after the header: writes the header (no offloads, one buffer) and
    /// queues the used entry. False (nothing written, counted) when `head`
    /// is not lent or the frame does not fit its buffer. Published by
    /// [`Self::publish`].
    pub fn complete_lent(&mut self, head: u16, frame_len: u32) -> bool {
        if head as usize >= self.lent.len() {
            self.stats.lent_stale += 1;
            return false;
        }
        let Some(gpa) = self.unlend(head) else {
            return false;
        };
        let total = self.hdr_len + frame_len as usize;
        match self
            .mem
            .translate_hinted(gpa, total, &mut self.hint)
            .filter(|_| !self.quarantined)
        {
            Some(p) => {
                // SAFETY: `translate_hinted` checked `total >= hdr_len`
                // bytes at `p` lie in guest memory, writable (MAP_SHARED
                // read/write).
                unsafe { super::rx::write_header(p, self.hdr_len) };
                self.push_used(head, total as u32);
                self.stats.packets += 1;
                self.stats.bytes += frame_len as u64;
                self.stats.zero_copy += 1;
                true
            }
            None => {
                // The buffer was checked when lent; the frame cannot have
                // outgrown it unless the borrower is wrong. Return it empty.
                self.push_used(head, 0);
                self.stats.lent_stale += 1;
                false
            }
        }
    }

    /// Gives lent `head` back unused (length 0). False (counted) if it was
    /// not lent. Published by [`Self::publish`].
    pub fn return_lent(&mut self, head: u16) -> bool {
        if head as usize >= self.lent.len() {
            self.stats.lent_stale += 1;
            return false;
        }
        if self.unlend(head).is_none() {
            return false;
        }
        self.push_used(head, 0);
        self.stats.lent_returned += 1;
        true
    }

    /// Gives every lent buffer back unused (the borrower is gone: its
    /// socket is closed, nothing writes them any more). Returns how many;
    /// published at once.
    pub fn return_all_lent(&mut self) -> u32 {
        let mut n = 0;
        for h in 0..self.lent.len() {
            if self.lent[h] != NOT_LENT {
                self.lent[h] = NOT_LENT;
                if !self.quarantined {
                    self.push_used(h as u16, 0);
                }
                n += 1;
            }
        }
        self.lent_count = 0;
        self.stats.lent_returned += n as u64;
        self.publish();
        n
    }

    /// Publishes the used entries queued by [`Self::complete_lent`] and
    /// [`Self::return_lent`] (one release store, an interrupt if the
    /// driver wants one).
    pub fn publish(&mut self) {
        if self.quarantined {
            self.shadow_len = 0;
            return;
        }
        // The release store of used.idx orders the header writes and the
        // used entries before it.
        self.finish_burst();
    }
}
