//! RX on the driver side: post empty pool packets, harvest filled ones
//! (virtio-net §5.1.6.3, §5.1.6.4), merging MRG_RXBUF buffers by copy.

use super::DriverQueue;
use crate::layout::VIRTQ_DESC_F_WRITE;
use nfv_mem::{Batch, PoolCache};

impl DriverQueue {
    /// Posts empty pool packets as device-writable buffers until the ring
    /// is full or the pool is empty; returns how many. Each buffer starts
    /// `hdr_len` bytes before the packet's data start, so the frame lands
    /// at the usual headroom once the header is stripped.
    pub fn refill_rx(&mut self, pool: &mut PoolCache) -> usize {
        if self.quarantined {
            return 0;
        }
        let mut n = 0;
        while let Some(&id) = self.free.last() {
            let Some(mut pkt) = pool.alloc() else {
                self.stats.alloc_failures += 1;
                break;
            };
            if pkt.prepend(self.hdr_len).is_none() {
                pool.free(pkt);
                break;
            }
            let len = (pkt.max_len() as u32).min(self.rx_buf_len);
            let Some(gpa) =
                self.mem
                    .host_to_gpa_hinted(pkt.data_ptr(), len as usize, &mut self.hint)
            else {
                // The pool is not in the shared memory: nothing to post.
                self.stats.alloc_failures += 1;
                pool.free(pkt);
                break;
            };
            self.free.pop();
            self.post(id, gpa, len, VIRTQ_DESC_F_WRITE, pkt);
            n += 1;
        }
        if n > 0 {
            self.publish_avail();
        }
        n
    }

    /// Harvests filled buffers into `batch` (header stripped, length set),
    /// up to its remaining capacity; returns how many packets were added.
    /// With MRG_RXBUF a packet spread over `num_buffers` buffers is copied
    /// into its first packet (dropped as `rx_oversize` if it does not fit).
    /// Call [`DriverQueue::refill_rx`] afterwards to repost.
    pub fn receive_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        if self.quarantined {
            return 0;
        }
        let Some(mut pending) = self.used_pending() else {
            return 0;
        };
        let hdr = self.hdr_len;
        let mut got = 0;
        while pending > 0 && batch.remaining_capacity() > 0 {
            let e = self.peek_used();
            let Some(id) = self.check_used_id(e.id) else {
                self.skip_used();
                pending -= 1;
                continue;
            };
            let mut bad = false;
            if e.len > self.posted_len[id] {
                self.errors.used_len_too_long += 1;
                bad = true;
            } else if (e.len as usize) < hdr {
                self.errors.short_used += 1;
                bad = true;
            }
            let mut nb = 1u16;
            if !bad && hdr == crate::net::HDR_LEN_V1 {
                if let Some(Some(p)) = self.slots.get(id) {
                    // SAFETY: the buffer starts at `data_ptr` and holds at
                    // least `hdr` (12) bytes written by the device.
                    let b = unsafe { p.data_ptr().add(10).cast::<[u8; 2]>().read_unaligned() };
                    nb = u16::from_le_bytes(b);
                }
                if !self.mrg {
                    if nb > 1 {
                        self.errors.merge_without_mrg += 1;
                        bad = true;
                    }
                    nb = 1;
                } else if nb == 0 || nb as usize > self.outstanding() {
                    self.errors.bad_num_buffers += 1;
                    bad = true;
                } else if nb > pending {
                    // The rest of this packet is not published yet.
                    break;
                }
            }
            self.skip_used();
            pending -= 1;
            let Some(mut pkt) = self.take_slot(id) else {
                continue;
            };
            if bad {
                pool.free(pkt);
                continue;
            }
            // Cannot fail: e.len <= posted <= max_len, and len >= hdr.
            let _ = pkt.set_len(e.len as usize);
            if self.offloads {
                // With GUEST_CSUM the device may hand over a partial
                // checksum or a large segment: kept as the packet's
                // offload metadata (unchecked: whoever acts on it
                // validates it against the frame, `nfv_offload`).
                let mut m = [0u8; nfv_mem::OFFLOAD_HDR_LEN];
                m.copy_from_slice(&pkt.data()[..nfv_mem::OFFLOAD_HDR_LEN]);
                pkt.trim_front(hdr);
                if m[0] & nfv_offload::F_NEEDS_CSUM != 0 || m[1] != 0 {
                    pkt.set_offload(m);
                }
            } else {
                pkt.trim_front(hdr);
            }
            let mut oversize = false;
            for _ in 1..nb {
                let e2 = self.pop_used();
                pending -= 1;
                let Some(id2) = self.check_used_id(e2.id) else {
                    bad = true;
                    continue;
                };
                if e2.len > self.posted_len[id2] {
                    self.errors.used_len_too_long += 1;
                    bad = true;
                }
                let Some(mut part) = self.take_slot(id2) else {
                    continue;
                };
                let (old, add) = (pkt.len(), e2.len as usize);
                if !bad && !oversize {
                    if pkt.set_len(old + add).is_err() {
                        oversize = true;
                    } else {
                        let _ = part.set_len(add);
                        pkt.data_mut()[old..].copy_from_slice(part.data());
                    }
                }
                pool.free(part);
            }
            if bad {
                pool.free(pkt);
                continue;
            }
            if oversize {
                self.stats.rx_oversize += 1;
                pool.free(pkt);
                continue;
            }
            self.stats.rx_packets += 1;
            self.stats.rx_bytes += pkt.len() as u64;
            batch.push(pkt);
            got += 1;
        }
        self.after_harvest();
        got
    }
}
