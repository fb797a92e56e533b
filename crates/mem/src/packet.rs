//! The packet handle: 32 bytes that move by value through batches.
//!
//! A `Packet` points at one buffer (usually a frame of the switch's pool,
//! possibly foreign memory such as a guest's buffer) and records where the
//! data starts and how long it is. It owns that buffer exclusively until it
//! is freed: through a [`crate::PoolCache`] on the fast path, or — if it is
//! simply dropped — through its owner's registry entry (slow but never a
//! leak).
//!
//! A packet may be *split* (one-copy forwarding): its head — at least the
//! headers the switch reads and edits — is in its own buffer, and the rest
//! of the frame (the tail) is still in the sender's buffer, for example a
//! guest's transmit buffer, which the receiving port copies straight into
//! its destination. The tail is only borrowed: it stays valid until the
//! rx queue that produced the packet ends its burst
//! (`nfv_ports::RxQueue::burst_done`). Ports that keep packets past their
//! tx burst get whole packets ([`Packet::join_tail`] is applied by the
//! datapath for them).

use crate::owner::{self, OFFLOAD_META, OwnerId};
use std::ptr::NonNull;

/// Bytes of the frame a split packet's head holds at least (when the frame
/// is longer): every header the switch reads or edits — Ethernet, two VLAN
/// tags, IPv4 with options and the transport ports take 86 (`nfv_datapath`
/// checks this against `nfv_wire`'s layouts at compile time).
pub const SPLIT_HEAD: usize = 128;

/// Bytes reserved before the data of a fresh packet, for pushing headers
/// (VLAN, tunnels) without moving the payload.
pub const HEADROOM: usize = 128;

/// Bytes at the very start of a buffer that hold a packet's offload
/// metadata while it has some ([`Packet::offload`]); headers pushed in
/// front of the data never reach them.
pub const OFFLOAD_META_LEN: usize = 16;

/// Length of the offload metadata: the first 10 bytes of a virtio-net
/// header (`flags`, `gso_type`, `hdr_len`, `gso_size`, `csum_start`,
/// `csum_offset`, little endian) — the form virtio, TAP and AF_PACKET's
/// `PACKET_VNET_HDR` all use, so ports pass it on without translating.
pub const OFFLOAD_HDR_LEN: usize = 10;

/// Packets per burst, as in DPDK and OVS.
pub const BATCH: usize = 32;

/// Up to [`BATCH`] packets. Fixed capacity: never allocates.
pub type Batch = arrayvec::ArrayVec<Packet, BATCH>;

/// 32 bytes (two 16-byte moves): the buffer's capacity is stored minus one
/// in 16 bits (pool frames are at most 64 KiB). Offload metadata, rare and
/// 10 bytes long, does not widen it: it lives at the start of the buffer's
/// headroom, flagged by a bit of the owner field ([`Packet::offload`]).
pub struct Packet {
    buf: NonNull<u8>,
    /// The borrowed rest of the frame (see the module doc); `tail_len` 0
    /// when the packet is whole.
    tail: *const u8,
    token: u32,
    data_off: u16,
    len: u16,
    owner: OwnerId,
    in_port: u16,
    cap_minus_one: u16,
    tail_len: u16,
}

const _: () = assert!(std::mem::size_of::<Packet>() == 32);

// SAFETY: a `Packet` is the unique handle to its buffer (pool invariant:
// each frame is in exactly one place — a free list or one `Packet`), and
// the memory stays mapped while any packet exists, so moving the handle to
// another thread is sound. A split packet's tail is only read through
// `ptr::copy` by whoever holds the packet, within the producer's burst
// (`set_tail` contract); ports that hand packets to other threads get
// joined ones.
unsafe impl Send for Packet {}

impl Packet {
    /// Builds a handle over `cap` bytes at `buf`.
    ///
    /// # Safety
    /// `buf..buf+cap` must be valid for reads and writes for as long as the
    /// packet lives, no other live `Packet` or reference may alias it, and
    /// `owner.release(token)` must be the right way to give it back.
    /// `data_off + len <= cap` and `1 <= cap <= 65536` must hold.
    #[inline(always)]
    pub unsafe fn from_raw(
        buf: NonNull<u8>,
        cap: u32,
        data_off: u16,
        len: u16,
        owner: OwnerId,
        token: u32,
    ) -> Packet {
        debug_assert!(data_off as u32 + len as u32 <= cap);
        debug_assert!((1..=1 << 16).contains(&cap));
        Packet {
            buf,
            cap_minus_one: (cap - 1) as u16,
            data_off,
            len,
            owner,
            in_port: 0,
            token,
            tail: std::ptr::null(),
            tail_len: 0,
        }
    }

    /// Bytes in the buffer.
    #[inline(always)]
    fn cap(&self) -> usize {
        self.cap_minus_one as usize + 1
    }

    /// Attaches the rest of the frame, `tail_len` bytes at `tail`, that
    /// stay in the sender's buffer (one-copy forwarding).
    ///
    /// # Safety
    /// `tail..tail+tail_len` must stay readable until the packet is freed
    /// or joined, or until the burst that produced it ends, whichever the
    /// producing port documents; bytes may change under us (a guest's
    /// buffer), so readers copy them with `ptr::copy`, never borrow them.
    /// `len() + tail_len` must not exceed [`Packet::max_len`], and the head
    /// must hold at least [`SPLIT_HEAD`] bytes.
    #[inline(always)]
    pub unsafe fn set_tail(&mut self, tail: *const u8, tail_len: u32) {
        debug_assert!(self.len as usize + tail_len as usize <= self.max_len());
        debug_assert!(tail_len == 0 || self.len as usize >= SPLIT_HEAD);
        self.tail = tail;
        // Cannot truncate: head + tail <= max_len <= u16::MAX.
        self.tail_len = tail_len as u16;
    }

    /// The borrowed rest of the frame: start and length (0 when whole).
    #[inline(always)]
    pub fn tail(&self) -> (*const u8, usize) {
        (self.tail, self.tail_len as usize)
    }

    /// True when part of the frame is still in the sender's buffer.
    #[inline(always)]
    pub fn is_split(&self) -> bool {
        self.tail_len != 0
    }

    /// Length of the whole frame: head ([`Packet::len`]) plus tail. What
    /// byte counters and size limits count.
    #[inline(always)]
    pub fn frame_len(&self) -> usize {
        self.len as usize + self.tail_len as usize
    }

    /// Copies the tail behind the head so the packet is whole (for ports
    /// that keep packets past their burst). False, and unchanged, when the
    /// buffer cannot hold the whole frame.
    #[cold]
    pub fn join_tail(&mut self) -> bool {
        if self.tail_len == 0 {
            return true;
        }
        let (len, tail_len) = (self.len as usize, self.tail_len as usize);
        if len + tail_len > self.max_len() {
            return false;
        }
        // SAFETY: the destination `len..len+tail_len` after the data start
        // is inside the buffer (checked just above) and exclusively ours;
        // the source is readable (`set_tail` contract) and may be written
        // by its owner meanwhile, which `copy` (no reference made)
        // tolerates; it never overlaps our buffer.
        unsafe {
            let dst = self.buf.as_ptr().add(self.data_off as usize + len);
            std::ptr::copy(self.tail, dst, tail_len);
        }
        self.len = (len + tail_len) as u16;
        self.tail = std::ptr::null();
        self.tail_len = 0;
        true
    }

    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len as usize
    }
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The buffer is borrowed (see [`owner::BORROWED`]): valid only until
    /// the producing rx queue's burst ends.
    #[inline(always)]
    pub fn is_borrowed(&self) -> bool {
        self.owner & owner::BORROWED != 0
    }
    #[inline(always)]
    pub fn owner(&self) -> OwnerId {
        self.owner & !OFFLOAD_META
    }

    /// True when the packet carries offload metadata (a partial checksum
    /// to complete, or a segment to cut in several): see
    /// [`Packet::offload`].
    #[inline(always)]
    pub fn has_offload(&self) -> bool {
        self.owner & OFFLOAD_META != 0
    }

    /// Attaches offload metadata: the first [`OFFLOAD_HDR_LEN`] bytes of a
    /// virtio-net header whose `csum_start` counts from the current data
    /// start. Stored in the first [`OFFLOAD_META_LEN`] bytes of the buffer
    /// with the data offset of this moment, so that headers pushed or
    /// popped later move `csum_start` with the data ([`Packet::offload`]
    /// rebases it). False, and nothing stored, when the buffer is not the
    /// switch's to write there (borrowed) or its headroom is too small.
    pub fn set_offload(&mut self, hdr: [u8; OFFLOAD_HDR_LEN]) -> bool {
        if self.is_borrowed() || (self.data_off as usize) < OFFLOAD_META_LEN {
            return false;
        }
        let mut meta = [0u8; OFFLOAD_META_LEN];
        meta[..OFFLOAD_HDR_LEN].copy_from_slice(&hdr);
        meta[OFFLOAD_HDR_LEN..OFFLOAD_HDR_LEN + 2].copy_from_slice(&self.data_off.to_le_bytes());
        // SAFETY: the first OFFLOAD_META_LEN bytes of the buffer lie before
        // the data (data_off >= OFFLOAD_META_LEN, checked) and are ours
        // (not borrowed; constructor contract).
        unsafe {
            std::ptr::copy_nonoverlapping(meta.as_ptr(), self.buf.as_ptr(), OFFLOAD_META_LEN)
        };
        self.owner |= OFFLOAD_META;
        true
    }

    /// The offload metadata, `csum_start` counted from the current data
    /// start; `None` when the packet has none. Consumers validate it
    /// against the frame before acting on it (it came from a guest).
    #[inline]
    pub fn offload(&self) -> Option<[u8; OFFLOAD_HDR_LEN]> {
        if !self.has_offload() {
            return None;
        }
        let mut meta = [0u8; OFFLOAD_META_LEN];
        // SAFETY: set by `set_offload`, which wrote these bytes; `prepend`
        // keeps the data clear of them while the flag is set.
        unsafe {
            std::ptr::copy_nonoverlapping(self.buf.as_ptr(), meta.as_mut_ptr(), OFFLOAD_META_LEN)
        };
        let then = u16::from_le_bytes([meta[OFFLOAD_HDR_LEN], meta[OFFLOAD_HDR_LEN + 1]]);
        let start = u16::from_le_bytes([meta[6], meta[7]]);
        let rebased = start.wrapping_add(then).wrapping_sub(self.data_off);
        let mut hdr = [0u8; OFFLOAD_HDR_LEN];
        hdr.copy_from_slice(&meta[..OFFLOAD_HDR_LEN]);
        hdr[6..8].copy_from_slice(&rebased.to_le_bytes());
        Some(hdr)
    }

    /// Drops the offload metadata (the checksum was completed, or the
    /// frame was segmented).
    #[inline]
    pub fn clear_offload(&mut self) {
        self.owner &= !OFFLOAD_META;
    }
    #[inline(always)]
    pub fn token(&self) -> u32 {
        self.token
    }
    #[inline(always)]
    pub fn in_port(&self) -> u16 {
        self.in_port
    }
    #[inline(always)]
    pub fn set_in_port(&mut self, port: u16) {
        self.in_port = port;
    }
    #[inline(always)]
    pub fn headroom(&self) -> usize {
        self.data_off as usize
    }
    #[inline(always)]
    pub fn tailroom(&self) -> usize {
        self.cap() - self.data_off as usize - self.len as usize
    }
    /// Largest `len` possible with the current headroom.
    #[inline(always)]
    pub fn max_len(&self) -> usize {
        (self.cap() - self.data_off as usize).min(u16::MAX as usize)
    }
    /// Address of the first data byte (for prefetching and DMA-style copies).
    #[inline(always)]
    pub fn data_ptr(&self) -> *const u8 {
        // SAFETY: data_off <= cap, so the result stays within the buffer.
        unsafe { self.buf.as_ptr().add(self.data_off as usize) }
    }

    #[inline(always)]
    pub fn data(&self) -> &[u8] {
        // SAFETY: `data_off + len <= cap` (kept by every mutator) and the
        // buffer is valid and exclusively ours (constructor contract).
        unsafe { std::slice::from_raw_parts(self.data_ptr(), self.len as usize) }
    }

    #[inline(always)]
    pub fn data_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `data`, and `&mut self` guarantees unique access.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.buf.as_ptr().add(self.data_off as usize),
                self.len as usize,
            )
        }
    }

    /// The whole writable area from the data start to the buffer end, for
    /// filling a fresh packet; follow with [`Packet::set_len`].
    #[inline(always)]
    pub fn room_mut(&mut self) -> &mut [u8] {
        let n = self.max_len();
        // SAFETY: `data_off + n <= cap`; unique access through `&mut self`.
        unsafe { std::slice::from_raw_parts_mut(self.buf.as_ptr().add(self.data_off as usize), n) }
    }

    /// Sets the data length; fails (and changes nothing) beyond the buffer.
    #[inline(always)]
    pub fn set_len(&mut self, len: usize) -> Result<(), usize> {
        if len + self.tail_len as usize > self.max_len() {
            return Err(self.max_len());
        }
        self.len = len as u16;
        Ok(())
    }

    /// [`Packet::set_len`] for a length the caller has already checked
    /// against [`Packet::max_len`] (a packet being filled: no tail yet).
    ///
    /// # Safety
    /// `len` plus the tail's length must not exceed [`Packet::max_len`]:
    /// [`Packet::data`] relies on it.
    #[inline(always)]
    pub unsafe fn set_len_unchecked(&mut self, len: usize) {
        debug_assert!(len + self.tail_len as usize <= self.max_len());
        self.len = len as u16;
    }

    /// Grows the data at the front by `n` bytes (pushing a header) and
    /// returns the new front. `None` if the headroom is too small.
    #[inline]
    pub fn prepend(&mut self, n: usize) -> Option<&mut [u8]> {
        let keep = if self.has_offload() {
            OFFLOAD_META_LEN
        } else {
            0
        };
        if n + keep > self.data_off as usize || self.frame_len() + n > u16::MAX as usize {
            return None;
        }
        self.data_off -= n as u16;
        self.len += n as u16;
        Some(&mut self.data_mut()[..n])
    }

    /// Removes `n` bytes from the front (popping a header).
    #[inline]
    pub fn trim_front(&mut self, n: usize) -> bool {
        if n > self.len as usize {
            return false;
        }
        self.data_off += n as u16;
        self.len -= n as u16;
        true
    }

    /// Gives the buffer back to its owner through the registry. The fast
    /// path is `PoolCache::free`; this is what `Drop` does.
    pub fn release(self) {
        let (owner, token) = (self.owner, self.token);
        std::mem::forget(self);
        if !owner::release(owner, token) {
            crate::stats::note_orphan();
        }
    }

    /// Forgets the handle without returning the buffer: for owners taking a
    /// buffer back themselves (e.g. a port that completed a zero-copy send).
    /// Returns the token.
    #[inline(always)]
    pub fn into_token(self) -> u32 {
        let t = self.token;
        std::mem::forget(self);
        t
    }
}

impl Drop for Packet {
    fn drop(&mut self) {
        if !owner::release(self.owner, self.token) {
            crate::stats::note_orphan();
        }
    }
}

impl std::fmt::Debug for Packet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Packet")
            .field("len", &self.len)
            .field("data_off", &self.data_off)
            .field("owner", &self.owner)
            .field("token", &self.token)
            .field("tail_len", &self.tail_len)
            .field("in_port", &self.in_port)
            .field("offload", &self.offload())
            .finish()
    }
}

/// What moving a batch whole needs to know of its packets, gathered by
/// whoever reads each of them anyway: their bytes, the longest frame, the
/// shortest head, and whether any carries offload metadata or has bytes in
/// a sender's buffer (split or borrowed). The flags are kept as OR-ed
/// bits, so adding a packet takes no branch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchShape {
    bytes: u64,
    longest: usize,
    shortest_head: usize,
    owners: OwnerId,
    tails: u16,
}

impl Default for BatchShape {
    fn default() -> BatchShape {
        BatchShape {
            bytes: 0,
            longest: 0,
            shortest_head: usize::MAX,
            owners: 0,
            tails: 0,
        }
    }
}

impl BatchShape {
    /// Adds one packet.
    #[inline(always)]
    pub fn add(&mut self, p: &Packet) {
        let len = p.frame_len();
        self.bytes += len as u64;
        self.longest = self.longest.max(len);
        self.shortest_head = self.shortest_head.min(p.len as usize);
        self.owners |= p.owner;
        self.tails |= p.tail_len;
    }
    /// The frames' bytes ([`Packet::frame_len`]) together.
    #[inline(always)]
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
    /// The longest frame (0 for no packet).
    #[inline(always)]
    pub fn longest(&self) -> usize {
        self.longest
    }
    /// The shortest head ([`Packet::len`]; `usize::MAX` for no packet).
    #[inline(always)]
    pub fn shortest_head(&self) -> usize {
        self.shortest_head
    }
    /// Some packet carries offload metadata ([`Packet::has_offload`]).
    #[inline(always)]
    pub fn offload(&self) -> bool {
        self.owners & OFFLOAD_META != 0
    }
    /// Some packet is split or borrowed ([`Packet::is_split`],
    /// [`Packet::is_borrowed`]).
    #[inline(always)]
    pub fn split(&self) -> bool {
        self.tails != 0 || self.owners & owner::BORROWED != 0
    }
}
