//! Switch → driver RX queue: copy packets into guest buffers with a
//! virtio-net header (virtio-net §5.1.6.3/§5.1.6.4 from the device's side),
//! merging several buffers per packet with MRG_RXBUF.
//!
//! A packet is written into buffers that are not yet published; if the
//! guest runs out of buffers mid-packet we roll back (the chains stay
//! available) and leave the packet and the rest of the batch to the caller.

use super::DeviceQueue;
use super::chain::{Chain, ChainError, RX_BURST_DESC_BUDGET, Seg, Walk, chain_cost};
use super::tx::PREFETCH_AHEAD;
use crate::layout::{VIRTQ_DESC_F_INDIRECT, VIRTQ_DESC_F_NEXT};
use crate::ring::prefetch;
use nfv_mem::{BATCH, Batch, OFFLOAD_HDR_LEN, Packet, PoolCache};

/// Outcome of delivering one packet.
pub(super) enum Rx {
    Delivered,
    Dropped,
    NoBuffers,
}

impl DeviceQueue {
    /// Delivers packets from the front of `batch` into the driver's RX
    /// queue, in order. Delivered packets (and packets dropped because the
    /// guest's buffers were bad or, without MRG_RXBUF, too small) are
    /// removed from `batch` and freed to `pool`; when the guest has no
    /// buffers left the rest stays in `batch` (the caller counts them as
    /// tx_full). Returns the number delivered. Like
    /// [`DeviceQueue::dequeue_burst`], a burst stops after the packet that
    /// took it past [`RX_BURST_DESC_BUDGET`] descriptors, and a queue that
    /// went over skips its next bursts until the excess is repaid.
    #[inline]
    pub fn enqueue_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        self.settle_interrupts();
        if self.packed.is_some() {
            return self.enqueue_packed(batch, pool);
        }
        if self.quarantined || batch.is_empty() || self.in_debt() {
            return 0;
        }
        let Some(avail) = self.pending() else {
            return 0;
        };
        if avail == 0 {
            return 0;
        }
        // The avail cursor lives in a register for the burst (a field
        // re-read right after a narrower store stalls store forwarding).
        let mut cur = self.last_avail;
        let end = cur.wrapping_add(avail);
        let mut done = 0;
        let mut delivered = 0;
        let mut bytes = 0u64;
        // Warm the chains this burst will most likely use (one per packet
        // is the common case) in two overlapped passes, as dequeue does:
        // read the heads and prefetch their descriptors, then prefetch the
        // buffers the descriptors point to. Everything here was written by
        // the driver's core; issuing all misses before the first copy
        // overlaps them instead of paying them one packet at a time.
        let warm = (avail as usize).min(batch.len()).min(BATCH);
        let mut heads = [0u16; BATCH];
        for (k, h) in heads[..warm].iter_mut().enumerate() {
            *h = self.ring.avail_entry(cur.wrapping_add(k as u16));
            prefetch(self.ring.desc_ptr(*h));
        }
        for &h in &heads[..warm] {
            self.ring
                .prefetch_buffer_write(&self.mem, h, self.hint, self.hdr_len);
        }
        self.warm_used(warm);
        let first = cur;
        let mut spent = 0u32;
        while done < batch.len() {
            if spent >= RX_BURST_DESC_BUDGET {
                if cur != end {
                    self.stats.budget_exhausted += 1;
                }
                break;
            }
            // Beyond the warmed chains (merged packets), keep prefetching
            // a little ahead.
            // (`first` is `last_avail`, which moves only after the loop.)
            if cur.wrapping_sub(first) >= warm as u16
                && end.wrapping_sub(cur) > PREFETCH_AHEAD as u16
            {
                let h = self
                    .ring
                    .avail_entry(cur.wrapping_add(PREFETCH_AHEAD as u16));
                self.ring
                    .prefetch_buffer_write(&self.mem, h, self.hint, self.hdr_len);
            }
            if let Some(next) = batch.get(done + 1) {
                prefetch(next.data_ptr());
                // The next packet most likely lands in the next warmed
                // chain: for a large frame, own its buffer's lines before
                // the copy needs them.
                let bytes = self.hdr_len + next.frame_len();
                if bytes > 128
                    && let Some(&h) =
                        heads[..warm].get(cur.wrapping_add(1).wrapping_sub(first) as usize)
                {
                    self.ring
                        .prefetch_buffer_rest_write(&self.mem, h, self.hint, bytes);
                }
            }
            let mut steps = 0;
            let r = self.rx_packet(
                &batch[done],
                &mut cur,
                end,
                first,
                &heads[..warm],
                &mut steps,
            );
            spent += chain_cost(steps);
            match r {
                Rx::Delivered => {
                    bytes += batch[done].frame_len() as u64;
                    delivered += 1;
                }
                Rx::Dropped => {}
                Rx::NoBuffers => break,
            }
            done += 1;
        }
        self.last_avail = cur;
        self.stats.packets += delivered as u64;
        self.stats.bytes += bytes;
        pool.free_front(batch, done);
        self.owe(spent, RX_BURST_DESC_BUDGET);
        self.finish_burst();
        delivered
    }

    /// Writes header + frame of `pkt` into the chains available from
    /// `*cur` up to `end` (advancing `*cur` past those it uses): one chain
    /// without MRG_RXBUF, as many as needed with it. `heads` holds the avail
    /// entries from `first` on that were already read this burst: using
    /// them, rather than re-reading a ring line the driver keeps writing
    /// (refilling behind us), avoids a cross-core miss per packet.
    /// `*steps` counts the descriptors visited for the packet, all its
    /// chains together, which [`super::MAX_CHAIN_DESCS`] caps.
    #[inline(always)]
    fn rx_packet(
        &mut self,
        pkt: &Packet,
        cur: &mut u16,
        end: u16,
        first: u16,
        heads: &[u16],
        steps: &mut u32,
    ) -> Rx {
        let Ok(meta) = self.rx_offload(pkt) else {
            return Rx::Dropped;
        };
        // The common case first: the next chain's first buffer takes the
        // header and the whole frame. Nothing else (the general walk's
        // state, the rollback marks) is built for it.
        if *cur != end
            && let Some(&head) = heads.get(cur.wrapping_sub(first) as usize)
            && head < self.ring.size
        {
            // SAFETY: `head < size` indexes the queue's descriptor table,
            // validated and aligned at setup; one volatile copy, and only
            // the copy is used.
            let d = unsafe { self.ring.desc_ptr(head).read_volatile() };
            // One writable descriptor (what Linux and DPDK post with
            // MRG_RXBUF) is read here without the walker; any other chain
            // goes through it (a probe: nothing written unless it fits).
            let total = if d.flags & (VIRTQ_DESC_F_NEXT | VIRTQ_DESC_F_INDIRECT) == 0 {
                match Seg::of(&self.mem, d.addr, d.len, d.flags, &mut self.hint) {
                    Ok(seg) => self
                        .rx_into_buffer(&seg, pkt, meta)
                        .map(|t| (t, *steps + 1)),
                    Err(_) => None,
                }
            } else {
                let mut chain = Chain::new(self.ring.desc, self.ring.size, head, *steps);
                self.rx_into_first_buffer(&mut chain, pkt, meta)
                    .map(|t| (t, chain.steps()))
            };
            if let Some((total, walked)) = total {
                *cur = cur.wrapping_add(1);
                *steps = walked;
                // total <= 12 + 65535: fits u32.
                self.push_used(head, total as u32);
                return Rx::Delivered;
            }
        }
        self.rx_packet_walk(pkt, meta, cur, end, first, heads, steps)
    }

    /// [`Self::rx_packet`] when the first buffer does not take the whole
    /// packet (or the head was not read ahead): walks every buffer of as
    /// many chains as the packet needs, and reports bad ones.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn rx_packet_walk(
        &mut self,
        pkt: &Packet,
        meta: Option<[u8; OFFLOAD_HDR_LEN]>,
        cur: &mut u16,
        end: u16,
        first: u16,
        heads: &[u16],
        steps: &mut u32,
    ) -> Rx {
        let mut fill = Fill::new(pkt, self.hdr_len, meta);
        let mark_avail = *cur;
        let mark_used = self.used_cursor();
        let mut nbufs: u16 = 0;
        loop {
            if *cur == end {
                *cur = mark_avail;
                self.rollback_used(mark_used);
                return Rx::NoBuffers;
            }
            let head = match heads.get(cur.wrapping_sub(first) as usize) {
                Some(&h) => h,
                None => self.ring.avail_entry(*cur),
            };
            *cur = cur.wrapping_add(1);
            if head >= self.ring.size {
                self.errors.desc_id_out_of_range += 1;
                *steps += 1;
                return self.rx_fail(mark_avail, *cur, mark_used);
            }
            let mut chain = Chain::new(self.ring.desc, self.ring.size, head, *steps);
            let mut written = 0usize;
            while !fill.complete() {
                let seg = match chain.next(&self.mem, &mut self.hint) {
                    Ok(Some(s)) => s,
                    Ok(None) => break,
                    Err(e) => {
                        self.errors.record(e);
                        *steps = chain.steps();
                        return self.rx_fail(mark_avail, *cur, mark_used);
                    }
                };
                if !seg.write {
                    self.errors.record(ChainError::WrongDirection);
                    *steps = chain.steps();
                    return self.rx_fail(mark_avail, *cur, mark_used);
                }
                let n = fill.fill(seg.ptr, seg.len as usize);
                self.logged(seg.ptr, n);
                written += n;
            }
            *steps = chain.steps();
            nbufs += 1;
            // written <= 12 + 65535: fits u32.
            self.push_used(head, written as u32);
            if fill.complete() {
                break;
            }
            if !self.mrg {
                // The chain stays available for the next (smaller) packet.
                *cur = mark_avail;
                self.rollback_used(mark_used);
                self.stats.no_room += 1;
                return Rx::Dropped;
            }
        }
        if self.mrg && nbufs > 1 {
            fill.set_num_buffers(nbufs);
            self.logged_num_buffers(&fill);
        }
        Rx::Delivered
    }

    /// The common case of [`Self::rx_packet`]: the chain's first buffer is
    /// writable and takes the header and the whole frame (what Linux and
    /// DPDK post with or without MRG_RXBUF for frames that fit a buffer).
    /// Writes them and returns the bytes written; `None` (nothing written,
    /// `chain` untouched) sends the packet down the general walk, which
    /// reads the descriptor again and reports whatever is wrong with it.
    #[inline(always)]
    pub(super) fn rx_into_first_buffer<W: Walk>(
        &mut self,
        chain: &mut W,
        pkt: &Packet,
        meta: Option<[u8; OFFLOAD_HDR_LEN]>,
    ) -> Option<usize> {
        let mut probe = *chain;
        let seg = probe.next(&self.mem, &mut self.hint).ok()??;
        let total = self.rx_into_buffer(&seg, pkt, meta)?;
        *chain = probe;
        Some(total)
    }

    /// Writes header and frame of `pkt` into `seg` when it is writable
    /// and takes them all; returns the bytes written, or `None` (nothing
    /// written).
    #[inline(always)]
    fn rx_into_buffer(
        &mut self,
        seg: &Seg,
        pkt: &Packet,
        meta: Option<[u8; OFFLOAD_HDR_LEN]>,
    ) -> Option<usize> {
        let hdr_len = self.hdr_len;
        let (tail, tail_len) = pkt.tail();
        let data_len = pkt.len();
        let total = hdr_len + data_len + tail_len;
        if !seg.write || (seg.len as usize) < total {
            return None;
        }
        let p = seg.ptr;
        // SAFETY: `total <= seg.len` bytes of the translated buffer are
        // written: the header (`write_header`: two words read and stored
        // where they differ, num_buffers = 1 when the header has it; its first OFFLOAD_HDR_LEN <= hdr_len bytes
        // then overwritten from our array when the packet has offload
        // metadata), then the packet's data and its tail, both
        // readable spans (`Packet::tail`); `copy` tolerates overlap and
        // makes no reference to bytes a guest may be writing.
        unsafe {
            write_header(p, hdr_len);
            if let Some(m) = meta {
                std::ptr::copy_nonoverlapping(m.as_ptr(), p, OFFLOAD_HDR_LEN);
            }
            nfv_mem::copy_span(pkt.data_ptr(), p.add(hdr_len), data_len);
            if tail_len != 0 {
                nfv_mem::copy_span(tail, p.add(hdr_len + data_len), tail_len);
            }
        }
        self.logged(p, total);
        Some(total)
    }

    /// A chain of this packet was bad: drop the packet and return every
    /// chain taken for it (`mark_avail..cur`) with length 0.
    #[cold]
    fn rx_fail(&mut self, mark_avail: u16, cur: u16, mark_used: u16) -> Rx {
        self.rollback_used(mark_used);
        let mut i = mark_avail;
        while i != cur {
            let h = self.ring.avail_entry(i);
            // Read again: the id pushed (or not) is the one accounted for.
            if h < self.ring.size {
                self.push_used(h, 0);
            } else {
                self.unreturnable = self.unreturnable.wrapping_add(1);
            }
            i = i.wrapping_add(1);
        }
        self.stats.bad_chain_drops += 1;
        Rx::Dropped
    }
}

/// Makes the `hdr_len` (10 or 12) bytes at `p` a virtio-net header with
/// no offloads and num_buffers = 1 when the header has it, storing only
/// the words that differ from what the buffer already holds (DPDK's vhost
/// writes its header fields the same way).
///
/// Why not simply store: a driver that reuses its buffers (DPDK's mbufs)
/// finds the last header still in place, and its header sits on a line of
/// its own at the end of the mbuf headroom. Stored every packet, that line
/// crossed to this core (a read-for-ownership) and back to the driver's
/// (its receive reads num_buffers) once a packet; left as it is, both
/// cores keep reading their shared copy. A buffer whose header shares a
/// line with the frame (Linux) is written anyway; the loads cost it two
/// compares.
///
/// # Safety
/// `p..p + hdr_len` must be readable and writable (a translated guest
/// buffer).
#[inline(always)]
pub(super) unsafe fn write_header(p: *mut u8, hdr_len: usize) {
    // SAFETY: the caller guarantees `hdr_len` readable and writable bytes
    // at `p`; the accesses cover 12 bytes when `hdr_len` is 12 and 10
    // otherwise, unaligned (guest buffers have any alignment). A guest
    // that rewrites its own buffer meanwhile gets the header it wrote.
    unsafe {
        let front = p.cast::<u64>();
        if front.read_unaligned() != 0 {
            front.write_unaligned(0);
        }
        if hdr_len == 12 {
            let back = p.add(8).cast::<u32>();
            if back.read_unaligned() != 1 << 16 {
                back.write_unaligned(1 << 16);
            }
        } else {
            let back = p.add(8).cast::<u16>();
            if back.read_unaligned() != 0 {
                back.write_unaligned(0);
            }
        }
    }
}

/// Writing one packet — virtio-net header, then its data and tail — into
/// guest buffers handed over one at a time, whatever their sizes (a
/// header may straddle buffers). Shared by the split and packed rings.
pub(super) struct Fill {
    hdr: [u8; 12],
    hdr_len: usize,
    hdr_done: usize,
    /// The header carries offload fields (not all zero).
    offload: bool,
    /// Where the header's `num_buffers` bytes landed (patched for merged
    /// packets).
    nb_at: [*mut u8; 2],
    /// The span being copied (data, then tail) and what follows it.
    src: *const u8,
    left: usize,
    tail: *const u8,
    tail_left: usize,
}

impl Fill {
    #[inline(always)]
    pub(super) fn new(pkt: &Packet, hdr_len: usize, meta: Option<[u8; OFFLOAD_HDR_LEN]>) -> Fill {
        // virtio-net header: the packet's offload fields if any (checked
        // against the driver's features, `offload.rs`); num_buffers = 1
        // (virtio 1.x wants it set even without MRG_RXBUF); patched for
        // merged packets.
        let mut hdr = [0u8; 12];
        if let Some(m) = meta {
            hdr[..OFFLOAD_HDR_LEN].copy_from_slice(&m);
        }
        if hdr_len == 12 {
            hdr[10] = 1;
        }
        let (tail, tail_left) = pkt.tail();
        Fill {
            hdr,
            hdr_len,
            hdr_done: 0,
            offload: meta.is_some(),
            nb_at: [std::ptr::null_mut(); 2],
            src: pkt.data_ptr(),
            left: pkt.len(),
            tail,
            tail_left,
        }
    }

    /// True once header and frame are all written.
    #[inline(always)]
    pub(super) fn complete(&self) -> bool {
        self.hdr_done == self.hdr_len && self.left == 0
    }

    /// Writes what fits of the rest into the `room` writable bytes at `p`
    /// (a translated, device-writable guest buffer); returns the bytes
    /// written.
    #[inline(always)]
    pub(super) fn fill(&mut self, mut p: *mut u8, mut room: usize) -> usize {
        let hdr_len = self.hdr_len;
        let mut written = 0;
        if self.hdr_done == 0 && room >= hdr_len {
            // SAFETY: `hdr_len <= room` bytes of the buffer; the offload
            // fields are its first OFFLOAD_HDR_LEN <= hdr_len bytes.
            unsafe {
                write_header(p, hdr_len);
                if self.offload {
                    std::ptr::copy_nonoverlapping(self.hdr.as_ptr(), p, OFFLOAD_HDR_LEN);
                }
            }
            self.nb_at = [p.wrapping_add(10), p.wrapping_add(11)];
            self.hdr_done = hdr_len;
            p = p.wrapping_add(hdr_len);
            room -= hdr_len;
            written += hdr_len;
        } else if self.hdr_done < hdr_len {
            let done = self.hdr_done;
            let n = (hdr_len - done).min(room);
            for (b, at) in self.nb_at.iter_mut().enumerate() {
                let pos = 10 + b;
                if (done..done + n).contains(&pos) {
                    *at = p.wrapping_add(pos - done);
                }
            }
            // SAFETY: `n <= room`, inside the translated buffer; the
            // source is our local header.
            unsafe { std::ptr::copy_nonoverlapping(self.hdr.as_ptr().add(done), p, n) };
            self.hdr_done += n;
            p = p.wrapping_add(n);
            room -= n;
            written += n;
        }
        loop {
            let n = self.left.min(room);
            if n != 0 {
                // SAFETY: `n <= room` bytes remain in the guest buffer and
                // `n <= left` in the packet's current span (data or tail:
                // readable, `Packet::set_tail`); `copy` tolerates overlap,
                // should the packet live in guest memory, and makes no
                // reference to bytes a guest may be writing.
                unsafe { nfv_mem::copy_span(self.src, p, n) };
                self.src = self.src.wrapping_add(n);
                p = p.wrapping_add(n);
                self.left -= n;
                room -= n;
                written += n;
            }
            if self.left != 0 || self.tail_left == 0 {
                break;
            }
            (self.src, self.left, self.tail_left) = (self.tail, self.tail_left, 0);
        }
        written
    }

    /// Where `num_buffers` was written (for the dirty log).
    #[inline(always)]
    pub(super) fn num_buffers_at(&self) -> [*mut u8; 2] {
        self.nb_at
    }

    /// Patches `num_buffers` of a packet merged into `n` buffers.
    #[inline(always)]
    pub(super) fn set_num_buffers(&self, n: u16) {
        let v = n.to_le_bytes();
        // SAFETY: with MRG_RXBUF the header is 12 bytes and was fully
        // written (`complete`), so both pointers were set to bytes inside
        // buffers of this packet.
        unsafe {
            self.nb_at[0].write(v[0]);
            self.nb_at[1].write(v[1]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::write_header;

    /// The header `write_header` leaves: no offloads, num_buffers = 1 in a
    /// 12-byte header.
    fn wanted(hdr_len: usize) -> Vec<u8> {
        let mut h = vec![0u8; hdr_len];
        if hdr_len == 12 {
            h[10] = 1;
        }
        h
    }

    /// A header already in place is not stored again (the point: its line
    /// stays shared with the driver's core), and any other bytes are
    /// replaced. The first case ends the header at the last byte of a
    /// read-only page, so a store would fault the test.
    #[test]
    fn a_header_in_place_is_left_alone_and_any_other_is_rewritten() {
        const PAGE: usize = 4096;
        // SAFETY: a fresh anonymous mapping of two pages, checked below,
        // used only through `base` and unmapped at the end.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                2 * PAGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED);
        let protect = |prot| {
            // SAFETY: the mapping's first page, ours.
            assert_eq!(unsafe { libc::mprotect(base, PAGE, prot) }, 0);
        };
        let page = base.cast::<u8>();
        for hdr_len in [10, 12] {
            let want = wanted(hdr_len);
            // SAFETY: `hdr_len` bytes at the end of the first page (still
            // writable), filled with the header wanted.
            let h = unsafe {
                let h = page.add(PAGE - hdr_len);
                std::ptr::copy_nonoverlapping(want.as_ptr(), h, hdr_len);
                h
            };
            protect(libc::PROT_READ);
            // SAFETY: readable bytes; none differs, so none is stored.
            unsafe { write_header(h, hdr_len) };
            protect(libc::PROT_READ | libc::PROT_WRITE);
            // Every other first word and last word is rewritten.
            for junk in [0x01u8, 0x80, 0xff] {
                for at in [0, 7, 8, hdr_len - 1] {
                    // SAFETY: `hdr_len` bytes of the second page, writable
                    // and readable, initialised before they are read.
                    let got = unsafe {
                        let q = page.add(PAGE + 64);
                        std::ptr::copy_nonoverlapping(want.as_ptr(), q, hdr_len);
                        q.add(at).write(junk ^ want[at]);
                        write_header(q, hdr_len);
                        std::slice::from_raw_parts(q, hdr_len).to_vec()
                    };
                    assert_eq!(got, want, "hdr_len {hdr_len}, byte {at} was {junk:#x}");
                }
            }
        }
        // SAFETY: the mapping made above, no longer used.
        assert_eq!(unsafe { libc::munmap(base, 2 * PAGE) }, 0);
    }
}
