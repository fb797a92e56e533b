//! Checksum and segmentation offloads on a device queue (virtio-net
//! §5.1.6.2 and §5.1.6.4 from the device's side).
//!
//! TX (driver → switch): when the driver negotiated `CSUM` the first 10
//! bytes of each chain's virtio-net header are kept while the chain is
//! read (`tx.rs`). A header asking for nothing costs one test. One asking
//! for a partial checksum or a large segment is checked here — against
//! the features the driver acked and against the frame, in the switch's
//! copy of it (`nfv_offload::validate`: a hostile header is refused and
//! counted in [`super::QueueErrors::bad_offload`], never trusted into an
//! offset) — and attached to the packet as offload metadata
//! (`nfv_mem::Packet::offload`) rebuilt from what was validated: the
//! driver's `hdr_len` and stray flag bits never travel on.
//!
//! Large segments (TSO/USO frames, up to 64 KiB) do not fit a pool packet;
//! the chain of one is read a second time into a packet of the queue's
//! large-segment pool ([`DeviceQueue::set_large_pool`]), whole: the
//! switch reads and edits its headers and may cut it into segments for
//! an output that cannot take it, so none of it stays in guest memory.
//! Split packets (one-copy mode) with a partial checksum are joined for
//! the same reason.
//!
//! RX (switch → driver): a packet with offload metadata is written with
//! it in its header when the driver acked what it needs (`GUEST_CSUM`,
//! `GUEST_TSO4`, …; the fabric segments or checksums in software before
//! the packet gets here otherwise). Should the driver's features have
//! changed since (a driver reload), the packet is dropped and counted in
//! [`super::QueueStats::offload_refused`] rather than handed over with a
//! header it cannot parse.

use super::DeviceQueue;
use super::chain::{ChainError, Walk};
use super::tx::Tx;
use nfv_mem::{OFFLOAD_HDR_LEN, Packet, PoolCache};
use nfv_offload::{F_NEEDS_CSUM, OffloadCaps, OffloadMeta};

impl DeviceQueue {
    /// Gives a TX queue buffers for large segments (frames longer than a
    /// pool packet whose header asks for TSO or USO); `None` drops them,
    /// counted in [`super::QueueStats::large_pool_empty`]. The pool's
    /// frames should hold 64 KiB.
    pub fn set_large_pool(&mut self, pool: Option<PoolCache>) {
        self.large_pool = pool;
    }

    /// What the driver may send (the CSUM and HOST_* features it acked).
    pub fn host_offloads(&self) -> OffloadCaps {
        self.host_offloads
    }

    /// What the driver may be given (GUEST_CSUM, GUEST_*).
    pub fn guest_offloads(&self) -> OffloadCaps {
        self.guest_offloads
    }

    /// Keeps header bytes `at..at + n` (read at `src`, in a translated
    /// guest buffer) that fall within the offload fields.
    #[inline(always)]
    pub(super) fn keep_tx_hdr(&mut self, src: *const u8, n: usize, at: usize) {
        if at >= OFFLOAD_HDR_LEN {
            return;
        }
        let k = n.min(OFFLOAD_HDR_LEN - at);
        // SAFETY: `src..src+k` is inside a translated buffer of the chain
        // (`k <= n`, the caller's span); the destination is our own array
        // (`at + k <= OFFLOAD_HDR_LEN`). `copy` makes no reference to
        // bytes the guest may be writing.
        unsafe { std::ptr::copy(src, self.tx_hdr.as_mut_ptr().add(at), k) };
    }

    /// Bytes at the start of a transmitted chain that dequeue will not
    /// read: the virtio-net header, unless checksum offload was negotiated
    /// (then `keep_tx_hdr` reads it). What the buffer prefetch skips.
    #[inline(always)]
    pub(super) fn unread_header(&self) -> usize {
        if self.host_offloads.csum {
            0
        } else {
            self.hdr_len
        }
    }

    /// True when the header of the chain just read asks for an offload.
    #[inline(always)]
    pub(super) fn tx_hdr_asks(&self) -> bool {
        self.host_offloads.csum && (self.tx_hdr[0] & F_NEEDS_CSUM != 0 || self.tx_hdr[1] != 0)
    }

    /// Checks the offload the header of the chain just read asks for and
    /// attaches it to `pkt` (its frame, read into the switch's memory).
    /// [`Tx::Refused`] (counted) when the header is hostile or asks for
    /// what was not negotiated.
    #[cold]
    #[inline(never)]
    pub(super) fn take_offload(&mut self, pkt: &mut Packet) -> Tx {
        let meta = OffloadMeta::from_virtio_hdr(&self.tx_hdr);
        if meta.is_empty() {
            return Tx::Frame;
        }
        if !self.host_offloads.accepts(&meta) {
            self.errors.bad_offload += 1;
            return Tx::Refused;
        }
        // Checked and later edited in the switch's copy: a split frame's
        // tail is still the guest's. Cannot fail for packets split here
        // (their buffer holds the whole frame).
        if pkt.is_split() && !pkt.join_tail() {
            self.errors.bad_offload += 1;
            return Tx::Refused;
        }
        let layout = match nfv_offload::validate(&meta, pkt.data()) {
            Ok(l) => l,
            Err(_) => {
                self.errors.bad_offload += 1;
                return Tx::Refused;
            }
        };
        // What travels on is rebuilt from what was checked: the partial
        // checksum flag, the type and size, the offsets; `hdr_len` is the
        // switch's own count of the headers.
        let clean = OffloadMeta {
            flags: F_NEEDS_CSUM,
            gso_type: meta.gso_type,
            hdr_len: layout.payload as u16,
            gso_size: if meta.is_gso() { meta.gso_size } else { 0 },
            csum_start: meta.csum_start,
            csum_offset: meta.csum_offset,
        };
        if !pkt.set_offload(clean.to_virtio_hdr()) {
            // Pool packets always have the room; anything else gets its
            // checksum now, or is refused when it needed segmenting.
            if meta.is_gso() {
                self.errors.bad_offload += 1;
                return Tx::Refused;
            }
            nfv_offload::complete_checksum(
                pkt.data_mut(),
                meta.csum_start as usize,
                meta.csum_offset as usize,
            );
            return Tx::Frame;
        }
        self.stats.offloaded += 1;
        Tx::Frame
    }

    /// What a chain read as `r` into `pkt` becomes when its header asks
    /// for an offload: the offload checked and attached, or the chain read
    /// again (`again`, a fresh walk of it) into a large-segment packet;
    /// `spent` grows by that walk's cost. Out of line: the packet path only
    /// carries the call.
    #[cold]
    #[inline(never)]
    pub(super) fn offloaded<W: Walk>(
        &mut self,
        r: Result<Tx, ChainError>,
        mut again: W,
        pkt: &mut Packet,
        pool: &mut PoolCache,
        spent: &mut u32,
    ) -> Result<Tx, ChainError> {
        match r {
            Ok(Tx::Frame | Tx::Split) => Ok(self.take_offload(pkt)),
            Ok(Tx::Oversize) => {
                let r = self.read_large(&mut again, pkt, pool);
                *spent += super::chain::chain_cost(again.steps());
                r
            }
            r => r,
        }
    }

    /// A chain whose frame did not fit a pool packet: when its header asks
    /// for a large segment, `chain` (a fresh walk of the same chain) is
    /// read again into a packet of the large-segment pool, which replaces
    /// `pkt` (freed to `pool`).
    #[cold]
    #[inline(never)]
    pub(super) fn read_large<W: Walk>(
        &mut self,
        chain: &mut W,
        pkt: &mut Packet,
        pool: &mut PoolCache,
    ) -> Result<Tx, ChainError> {
        if self.tx_hdr[1] == 0 {
            return Ok(Tx::Oversize);
        }
        let Some(mut large) = self.large_pool.as_mut().and_then(|p| p.alloc()) else {
            self.stats.large_pool_empty += 1;
            return Ok(Tx::Refused);
        };
        // Whole: never split (see the module doc).
        let one_copy = std::mem::replace(&mut self.one_copy, false);
        let r = self.read_tx_chain(chain, &mut large);
        self.one_copy = one_copy;
        match r {
            Ok(Tx::Frame) => {
                pool.free(std::mem::replace(pkt, large));
                self.stats.large_segments += 1;
                Ok(self.take_offload(pkt))
            }
            other => {
                if let Some(p) = self.large_pool.as_mut() {
                    p.free(large);
                }
                other.map(|_| Tx::Oversize)
            }
        }
    }

    /// RX: the header fields for `pkt`'s offload metadata, `Ok(None)` when
    /// it has none, `Err(())` (counted) when this driver did not negotiate
    /// what it needs.
    #[inline(always)]
    pub(super) fn rx_offload(&mut self, pkt: &Packet) -> Result<Option<[u8; OFFLOAD_HDR_LEN]>, ()> {
        if !pkt.has_offload() {
            return Ok(None);
        }
        self.rx_offload_slow(pkt)
    }

    #[cold]
    #[inline(never)]
    fn rx_offload_slow(&mut self, pkt: &Packet) -> Result<Option<[u8; OFFLOAD_HDR_LEN]>, ()> {
        let Some(hdr) = pkt.offload() else {
            return Ok(None);
        };
        if self
            .guest_offloads
            .accepts(&OffloadMeta::from_virtio_hdr(&hdr))
        {
            Ok(Some(hdr))
        } else {
            self.stats.offload_refused += 1;
            Err(())
        }
    }
}
