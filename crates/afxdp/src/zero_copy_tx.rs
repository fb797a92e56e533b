//! VNF → kernel port with no switch copy: on a zero-copy queue's socket
//! (its UMEM is the VNF's memory, `zero_copy.rs`), a frame the VNF sent
//! goes out with its tail read by the kernel straight from the guest's
//! transmit buffer.
//!
//! What the switch sends: the frame arrives split (one-copy mode of the
//! VNF's vhost-user port: the head, every header the flow decision read or
//! an action edited, in a switch buffer; the tail still in the guest's
//! buffer). The head is copied into an own tx frame and posted with
//! `XDP_PKT_CONTD`, the tail as a second descriptor at its place in the
//! UMEM (the socket is bound with `XDP_USE_SG`, Linux 6.6+). The guest's
//! chain is kept past the burst (`nfv_virtio::lend::TxKeep`) and goes back
//! when the kernel completes the tail's descriptor; a revoke closes the
//! socket first, then every kept chain goes back.
//!
//! Bounded: at most half the guest's transmit ring (and half our tx ring)
//! is kept at once, so a slow or stalled link never takes the guest's last
//! descriptors; past it (and for whole frames, frames from other ports, or
//! a tail outside the UMEM) the frame is copied into an own tx frame as on
//! any socket; on a copy bind at most [`COPY_BIND_CAP`].

use crate::umem::{TX_OFFSET, Umem};
use crate::xsk::{TxState, Xsk, bump};
use nfv_mem::{Batch, PoolCache};
use nfv_virtio::GuestMemory;
use nfv_virtio::lend::TxKeep;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Chains kept at most on a copy bind. There the kernel copies the tail
/// into a page of its own and completes it only when the skb it built is
/// freed — by the receiving softirq, for local traffic (a veth into a
/// namespace) — and each such skb is charged to the socket's send buffer
/// (a head and a page, about 5 KB: some 40 fit the default 208 KiB);
/// past that the kernel leaves descriptors on the tx ring for a later
/// kick (`tx.rs`). A TCP stream through veth that stalled with more than
/// about 80 tails out (`afxdp_sends_vnf_frames_in_place`) was most likely
/// such descriptors waiting for a kick that only the next frame to the
/// port gave, fixed there. More tails out than the send buffer takes
/// would only keep more of the guest's descriptors waiting on our ring,
/// so 64 stays the bound. A zero-copy driver completes at DMA time and
/// may keep half the guest's ring.
const COPY_BIND_CAP: usize = 64;

/// The tx side of a guest socket bound with `XDP_USE_SG`.
pub(crate) struct TxInPlace {
    /// Tails on the tx ring, in posting order: UMEM address and the head
    /// of the guest chain they belong to.
    inflight: VecDeque<(u64, u16)>,
}

impl TxInPlace {
    /// For a socket with `ring_size` tx descriptors: each frame in place
    /// takes two, so at most half that many tails are in flight.
    pub fn new(ring_size: u32) -> TxInPlace {
        TxInPlace {
            inflight: VecDeque::with_capacity(ring_size as usize / 2),
        }
    }

    pub fn inflight(&self) -> usize {
        self.inflight.len()
    }
}

/// Counters of the in-place tx path (single writer: whoever holds the
/// queue's socket).
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct TxInPlaceCounters {
    /// Frames whose tail the kernel read from the guest's buffer.
    pub sent_in_place: AtomicU64,
    /// Split frames copied because as many chains as allowed were out.
    pub cap_reached: AtomicU64,
    /// Split frames copied because their tail was not in this socket's
    /// UMEM or not a chain of the lender's current burst (another VNF's
    /// frame, or memory that changed).
    pub not_lender: AtomicU64,
    /// Completions for tails that were not in flight (ignored).
    pub stray_completions: AtomicU64,
    /// Chains in flight after the last burst.
    pub inflight: AtomicU64,
}

/// Where a send in place gets its facts: the lender's memory and ring.
pub(crate) struct Source<'a> {
    pub mem: &'a GuestMemory,
    pub keep: &'a TxKeep,
    /// The lease holds: new chains may be taken.
    pub take: bool,
}

/// Takes the completion ring: own frames back to the free list, tails'
/// chains reported sent.
#[inline]
pub(crate) fn reap(
    xsk: &Xsk,
    st: &mut TxState,
    z: &mut TxInPlace,
    keep: &TxKeep,
    c: &TxInPlaceCounters,
) {
    let own = xsk.umem.frame_addr(0);
    let done = st.comp.available(xsk.ring_size.saturating_mul(2));
    for i in 0..done {
        let addr = st.comp.read(i);
        if addr >= own {
            st.free.push(Umem::chunk_of(addr));
            continue;
        }
        // Tails complete in posting order (nearly always the oldest).
        let pos = match z.inflight.front() {
            Some(&(a, _)) if a == addr => Some(0),
            _ => z.inflight.iter().position(|&(a, _)| a == addr),
        };
        match pos.and_then(|p| z.inflight.remove(p)) {
            Some((_, head)) => keep.sent(head),
            None => bump(&c.stray_completions, 1),
        }
    }
    st.comp.release(done);
}

/// One tx burst on a guest socket bound with `XDP_USE_SG`: split frames of
/// the lender's current burst go out with their tails in place, the rest
/// are copied (see the module doc). Sends a prefix of `batch`; returns how
/// many were sent.
#[inline]
pub(crate) fn transmit_in_place(
    xsk: &Xsk,
    max_frame: usize,
    z: &mut TxInPlace,
    src: &Source<'_>,
    c: &TxInPlaceCounters,
    batch: &mut Batch,
    pool: &mut PoolCache,
) -> usize {
    if batch.is_empty() {
        return 0;
    }
    let mut guard = xsk.tx.lock();
    let st = &mut *guard;
    reap(xsk, st, z, src.keep, c);
    let area = xsk.umem.guest().map(|(a, _)| a);
    let mut hint = 0usize;
    // Two ring slots per frame at most.
    let slots = st.tx.free(2 * batch.len() as u32);
    let mut slot = 0u32;
    let mut done = 0usize;
    let mut sent = 0usize;
    let mut in_place = 0u64;
    let mut cap = src.keep.cap().min(xsk.ring_size as usize / 2);
    if xsk.bind == crate::xsk::Bind::Copy {
        cap = cap.min(COPY_BIND_CAP);
    }
    for i in 0..batch.len() {
        if slot + 1 > slots {
            break;
        }
        let p = &batch[i];
        let len = p.frame_len();
        if len > max_frame {
            bump(&xsk.tx_counters.too_big, 1);
            done += 1;
            continue;
        }
        let Some(frame) = st.free.pop() else {
            break;
        };
        let addr = frame + TX_OFFSET as u64;
        let (tail, tail_len) = p.tail();
        if tail_len != 0 && z.inflight.len() >= cap {
            bump(&c.cap_reached, 1);
        } else if tail_len != 0 {
            // The tail's place in the UMEM, if it is the lender's memory.
            let off = src
                .mem
                .host_to_gpa_hinted(tail, tail_len, &mut hint)
                .and_then(|gpa| area?.umem_offset(gpa, tail_len as u64))
                .filter(|&off| {
                    // A zero-copy driver maps the UMEM page by page: a
                    // tail must not cross a page boundary of its region.
                    let page = area.map_or(4096, |a| a.page_at(off));
                    xsk.bind != crate::xsk::Bind::ZeroCopy
                        || off / page == (off + tail_len as u64 - 1) / page
                });
            let room = slot + 2 <= slots;
            if !src.take {
                bump(&c.not_lender, 1);
            } else if let Some(off) = off
                && room
                && xsk.umem.write_from(addr, p.data())
            {
                // Taken last: a taken chain is kept until its tail's
                // completion, so it must be posted.
                if let Some(head) = src.keep.take(tail) {
                    st.tx.write(
                        slot,
                        libc::xdp_desc {
                            addr,
                            len: p.len() as u32,
                            options: libc::XDP_PKT_CONTD,
                        },
                    );
                    st.tx.write(
                        slot + 1,
                        libc::xdp_desc {
                            addr: off,
                            len: tail_len as u32,
                            options: 0,
                        },
                    );
                    slot += 2;
                    z.inflight.push_back((off, head));
                    in_place += 1;
                    done += 1;
                    sent += 1;
                    continue;
                }
                bump(&c.not_lender, 1);
            } else if off.is_none() {
                bump(&c.not_lender, 1);
            }
        }
        // The copy: the whole frame into the own tx frame.
        if !xsk.umem.write_frame(addr, p) {
            st.free.push(frame);
            bump(&xsk.tx_counters.too_big, 1);
            done += 1;
            continue;
        }
        st.tx.write(
            slot,
            libc::xdp_desc {
                addr,
                len: len as u32,
                options: 0,
            },
        );
        slot += 1;
        done += 1;
        sent += 1;
    }
    st.tx.submit(slot);
    crate::tx::kick(xsk, st, slot);
    drop(guard);
    if in_place != 0 {
        bump(&c.sent_in_place, in_place);
    }
    c.inflight.store(z.inflight.len() as u64, Relaxed);
    for p in batch.drain(..done) {
        pool.free(p);
    }
    sent
}
