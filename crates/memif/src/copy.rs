//! The byte copies between switch packets and a peer's buffers, for both
//! roles and for the client: a frame as its parts ([`parts`]: a packet's
//! head and, for a split packet, its tail), a range of those parts copied
//! into a buffer ([`copy_range`]: the tx queues and `ClientRings`'s
//! send), and a peer's buffer lent to a packet as its tail ([`lend_tail`]:
//! the rx queues in `one_copy`). A module of its own below `rx.rs`,
//! `tx.rs` and `client.rs`, which all use them: they belong to neither
//! role, and `shared.rs` (which imports `client.rs` for `ClientRings`)
//! could not hold them without a circle.

use nfv_mem::SPLIT_HEAD;

/// A frame as its parts: the packet's head and, for a split packet, the
/// tail still in its sender's buffer.
#[inline(always)]
pub(crate) fn parts(p: &nfv_mem::Packet) -> [(*const u8, usize); 2] {
    [(p.data_ptr(), p.len()), p.tail()]
}

/// Copies `len` bytes of the frame `parts`, from byte `from` on, to `dst`.
///
/// # Safety
/// `dst` must be valid for `len` bytes of writes; the parts must be
/// readable (a split tail within its producer's burst), hold at least
/// `from + len` bytes together, and not overlap `dst`.
#[inline(always)]
pub(crate) unsafe fn copy_range(
    parts: &[(*const u8, usize); 2],
    mut from: usize,
    mut dst: *mut u8,
    mut len: usize,
) {
    for &(p, n) in parts {
        if len == 0 {
            break;
        }
        if from >= n {
            from -= n;
            continue;
        }
        let k = (n - from).min(len);
        // SAFETY: the caller's contract; a peer's bytes are copied, never
        // borrowed (`ptr::copy`: the tail may be in memory the peer also
        // writes).
        unsafe { nfv_mem::copy_span(p.add(from), dst, k) };
        dst = dst.wrapping_add(k);
        len -= k;
        from = 0;
    }
}

/// Makes `pkt` a split packet over the peer's buffer of `len` bytes at
/// `src` (`len > SPLIT_HEAD`): the head is copied into the packet, the rest
/// stays in the buffer as the packet's tail (one copy, `nfv_mem::packet`).
///
/// # Safety
/// `src..src + len` must lie in mapped shared memory that stays mapped,
/// and the buffer must not be handed back to the peer, until the packet's
/// burst is over; `len` must fit the packet (`max_len`).
#[inline(always)]
pub(crate) unsafe fn lend_tail(pkt: &mut nfv_mem::Packet, src: *const u8, len: u32) {
    debug_assert!(len as usize > SPLIT_HEAD);
    // SAFETY: the caller guarantees `len > SPLIT_HEAD` readable bytes at
    // `src` for the packet's burst and room in the packet; `copy` makes no
    // reference to bytes the peer may be writing.
    unsafe {
        nfv_mem::copy_span(src, pkt.room_mut().as_mut_ptr(), SPLIT_HEAD);
        let _ = pkt.set_len(SPLIT_HEAD);
        pkt.set_tail(src.add(SPLIT_HEAD), len - SPLIT_HEAD as u32);
    }
}
