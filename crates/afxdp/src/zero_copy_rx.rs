//! The rx burst of a zero-copy queue over a guest socket: frames in
//! guest buffers become packets over them, frames in own frames are
//! copied, and the fill ring is topped up with the guest's next buffers
//! (own frames when it has too few). The queue itself, its sockets and
//! its manager are in `zero_copy.rs`.

use crate::guest_umem::Placement;
use crate::shared::{Fallback, ZcCounters, add};
use crate::umem::Umem;
use crate::xsk::{RxRings, Xsk};
use nfv_mem::owner::OwnerId;
use nfv_mem::{BATCH, Batch, PoolCache};
use nfv_virtio::lend::Lender;
use nfv_virtio::{GuestMemory, Lent};
use std::collections::VecDeque;
use std::ptr::NonNull;
use std::sync::Arc;

/// Guest buffers lent per burst at most.
const LEND_BURST: usize = 64;
/// Fill-ring depth the queue keeps with guest buffers (at most half the
/// guest's ring, the rest stays for the copy path: frames from other
/// ports and own-frame fallbacks need guest buffers too). Deep enough for
/// the kernel's bursts: a sender that was descheduled for a few ms
/// catches up with hundreds of frames at once, faster than the PMD tops
/// the ring up — at 128 the kernel dropped 6-23 % of a 100 kpps stream
/// for want of a fill entry while the copy socket (2048 own frames) lost
/// none (bench/README.md).
pub(crate) const FILL_TARGET: u32 = 512;
/// Below this fill-ring depth after lending (the guest has too few
/// buffers posted: a VNF descheduled for a few ms), own frames top it up
/// to twice this, so the kernel copies into them instead of dropping.
const LOW_WATER: u32 = 64;
/// The borrowed side of a guest socket.
pub(crate) struct LendRx {
    pub(crate) lender: Lender,
    pub(crate) owner: OwnerId,
    pub(crate) pair: usize,
    pub(crate) tag: u32,
    pub(crate) mem: Arc<GuestMemory>,
    pub(crate) hdr_len: usize,
    pub(crate) placement: Placement,
    /// Guest buffers on the fill ring, in posting order, with their fill
    /// address. Capacity: the fill ring's size (never grows).
    pub(crate) posted: VecDeque<(u64, Lent)>,
    /// Own rx frames on the fill ring.
    pub(crate) own_posted: u32,
    /// Guest buffers kept on the fill ring: [`FILL_TARGET`], at most half
    /// the guest's receive ring (learnt when lending).
    pub(crate) fill_target: u32,
    /// The lease ended under us (the ring went away without a revoke
    /// yet): stop lending, receive into own frames.
    pub(crate) ended: bool,
}

/// One burst over a guest socket: frames in guest buffers become packets
/// over them, frames in own frames are copied; then the fill ring is
/// topped up with the guest's next buffers (own frames when it has none).
#[inline]
#[allow(clippy::too_many_arguments)]
pub(crate) fn receive_lent(
    c: &ZcCounters,
    xsk: &Xsk,
    r: &mut RxRings,
    l: &mut LendRx,
    own_free: &mut Vec<u64>,
    batch: &mut Batch,
    pool: &mut PoolCache,
) -> usize {
    let room = batch.remaining_capacity().min(BATCH) as u32;
    let n = r.rx.available(room);
    let own_off = xsk.umem.frame_addr(0);
    let lead = crate::umem::XDP_PACKET_HEADROOM as u64 + l.placement.headroom as u64;
    let mut got = 0;
    let mut copied = 0u64;
    let mut bad = 0u64;
    // Buffers to give back empty (bad descriptors): at most one burst.
    let mut back = [0u16; BATCH];
    let mut nback = 0;
    if n > 0 {
        xsk.umem.prefetch(Umem::data_addr(r.rx.read(0).addr));
    }
    for i in 0..n {
        let d = r.rx.read(i);
        if i + 1 < n {
            // The next frame, written by the kernel likely on another
            // core: copied out next, or parsed by the flow lookup.
            xsk.umem.prefetch(Umem::data_addr(r.rx.read(i + 1).addr));
        }
        let fill = Umem::fill_of(d.addr);
        if fill >= own_off {
            // An own frame: copy, as the copy path does.
            l.own_posted = l.own_posted.saturating_sub(1);
            if let Some(mut p) = pool.alloc() {
                let len = d.len as usize;
                let room = p.room_mut();
                if len <= room.len()
                    && xsk
                        .umem
                        .read_into(Umem::data_addr(d.addr), &mut room[..len])
                {
                    let _ = p.set_len(len);
                    batch.push(p);
                    got += 1;
                    copied += 1;
                } else {
                    bad += 1;
                    pool.free(p);
                }
            }
            own_free.push(Umem::chunk_of(fill));
            continue;
        }
        // A guest buffer: nearly always the oldest posted one.
        let pos = match l.posted.front() {
            Some(&(f, _)) if f == fill => Some(0),
            _ => l.posted.iter().position(|&(f, _)| f == fill),
        };
        let Some(pos) = pos else {
            bad += 1;
            continue;
        };
        let (_, lent) = l.posted.remove(pos).expect("found above");
        let len = d.len as usize;
        let fits = Umem::data_addr(d.addr) == fill + lead
            && l.hdr_len + len <= lent.len as usize
            && len <= l.placement.frame_room as usize;
        let host = l
            .mem
            .translate(lent.gpa, lent.len as usize)
            .and_then(NonNull::new);
        match host {
            Some(h) if fits => {
                // SAFETY: `h` translates the lent buffer in the lease's
                // memory, which `l.mem` keeps mapped until a revoke has
                // waited for this burst's packets; the buffer is lent, so
                // no other packet uses it; header + frame fit it (checked).
                let p = unsafe {
                    l.lender
                        .packet(l.owner, l.pair, l.tag, &lent, h, l.hdr_len, len)
                };
                batch.push(p);
                got += 1;
            }
            _ => {
                bad += 1;
                if nback < BATCH {
                    back[nback] = lent.head;
                    nback += 1;
                }
            }
        }
    }
    r.rx.release(n);
    add(&c.zero_copy, (got - copied as usize) as u64);
    if copied != 0 {
        add(&c.fallback[Fallback::NoGuestBuffer as usize], copied);
    }
    if bad != 0 {
        add(&c.bad_descs, bad);
    }
    refill(c, xsk, r, l, own_free, &back[..nback]);
    got
}

/// Tops the fill ring up: the guest's next buffers first, own frames when
/// the guest has too few posted.
#[inline]
fn refill(
    c: &ZcCounters,
    xsk: &Xsk,
    r: &mut RxRings,
    l: &mut LendRx,
    own_free: &mut Vec<u64>,
    back: &[u16],
) {
    let cap = l.posted.capacity();
    // What the kernel still has to fill: posted and not received back,
    // minus frames already waiting on the rx ring (the kernel publishes
    // its fill-ring consumer index lazily, so the fill ring's own count
    // would overstate it).
    let backlog = r.rx.available(u32::MAX);
    let depth = (l.posted.len() as u32 + l.own_posted).saturating_sub(backlog);
    let room = r.fill.free(LEND_BURST as u32).min(LEND_BURST as u32) as usize;
    let want = room
        .min(cap - l.posted.len())
        .min(l.fill_target.saturating_sub(depth) as usize);
    // Lend in batches: lending reads the guest's avail ring, lines the
    // VNF's core writes, and takes its ring's lock — once per burst of a
    // few frames that cost more than the copy it saves (bench/README.md).
    let batch_min = (l.fill_target as usize / 4).clamp(1, LEND_BURST / 2);
    if back.is_empty() && want < batch_min && depth >= LOW_WATER {
        return;
    }
    let mut k = 0u32;
    let mut stop = None;
    let area = xsk.umem.guest().map(|(a, _)| a);
    let placement = l.placement;
    let LendRx {
        lender,
        pair,
        tag,
        posted,
        fill_target,
        ended,
        ..
    } = l;
    let fill = &mut r.fill;
    let done = !*ended
        && lender
            .with_ring(*pair, *tag, |dq| {
                for &h in back {
                    dq.return_lent(h);
                }
                if !back.is_empty() {
                    dq.publish();
                }
                // At most half the guest's ring is lent: the other half
                // stays for frames other ports send this VNF (copied in),
                // however small its ring.
                let half_ring = dq.size() as u32 / 2;
                *fill_target = FILL_TARGET.min(half_ring).max(1);
                let half = half_ring.saturating_sub(dq.lent_outstanding());
                let pending = (dq.lend_pending() as u32).min(want as u32).min(half);
                let Some(area) = area else {
                    return;
                };
                while k < pending {
                    let one = match dq.lend_peek(0) {
                        Ok(x) => x,
                        Err(e) => {
                            stop = Some(Fallback::of_not_lendable(e));
                            break;
                        }
                    };
                    match placement.fill_addr(area, one.gpa, one.len) {
                        Ok(f) => {
                            dq.lend_take(std::slice::from_ref(&one));
                            fill.write(k, f);
                            posted.push_back((f, one));
                            k += 1;
                        }
                        Err(u) => {
                            stop = Some(Fallback::of_unfit(u));
                            break;
                        }
                    }
                }
            })
            .is_some();
    if !done {
        l.ended = true;
    }
    r.fill.submit(k);
    if k != 0 {
        add(&c.lent, k as u64);
    }
    if let Some(f) = stop {
        add(&c.fallback[f as usize], 1);
    }
    // The kernel's reserve: own frames when the guest has too few posted.
    let depth = depth + k;
    if depth < LOW_WATER {
        let n = (2 * LOW_WATER - depth)
            .min(own_free.len() as u32)
            .min(r.fill.free(2 * LOW_WATER));
        for i in 0..n {
            let f = own_free.pop().expect("counted");
            r.fill.write(i, f);
        }
        r.fill.submit(n);
        l.own_posted += n;
    }
}
