//! The fast path's byte copy: [`copy_span`].
//!
//! Every packet is copied at least twice on a vhost-user hop (its head into
//! the switch, then into the receiver's buffer), most of them 64-128 bytes.
//! `ptr::copy` sends each to libc's `memmove` through the PLT, whose call
//! and size dispatch cost about as much as a 64-byte copy itself. Spans of
//! 16-128 bytes are copied inline here (`virtq_bench`, 64 B frames: the
//! device's dequeue + enqueue ~50 → ~46 cycles a packet); longer spans
//! still go to `memmove`, which is the better copy for them.

/// Copies `len` bytes from `src` to `dst` with `ptr::copy`'s meaning:
/// the spans may overlap, and no reference is made to either (the source
/// may be guest memory that its owner is writing).
///
/// A span of 16-128 bytes is moved as unaligned 16-byte loads covering it
/// (the last ones overlapping the first when `len` is not a multiple of
/// 16), all issued before the first store, so an overlap reads only
/// bytes not yet written, as `memmove` does.
///
/// # Safety
/// As [`std::ptr::copy`]: `src..src + len` readable, `dst..dst + len`
/// writable.
#[inline(always)]
pub unsafe fn copy_span(src: *const u8, dst: *mut u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    if (16..=128).contains(&len) {
        // SAFETY: `16 <= len <= 128` bytes at `src` and at `dst` (the
        // caller's guarantee); every access below lies inside them.
        unsafe { copy_16_to_128(src, dst, len) };
        return;
    }
    // SAFETY: the caller's guarantee, as `ptr::copy` wants it.
    unsafe { std::ptr::copy(src, dst, len) };
}

/// [`copy_span`] for `16 <= len <= 128`.
///
/// # Safety
/// `16 <= len <= 128`; `src..src + len` readable, `dst..dst + len` writable.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn copy_16_to_128(src: *const u8, dst: *mut u8, len: usize) {
    use core::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_storeu_si128};
    // Every offset `o` passed below has `o + 16 <= len`.
    // SAFETY: the 16 bytes at `src + o` lie inside the caller's readable
    // span; MOVDQU takes any alignment (SSE2: the x86_64 baseline).
    let load = |o: usize| unsafe { _mm_loadu_si128(src.add(o).cast::<__m128i>()) };
    // SAFETY: the 16 bytes at `dst + o` lie inside the caller's writable
    // span; any alignment.
    let store = |o: usize, v| unsafe { _mm_storeu_si128(dst.add(o).cast::<__m128i>(), v) };
    if len <= 32 {
        let (a, b) = (load(0), load(len - 16));
        store(0, a);
        store(len - 16, b);
    } else if len <= 64 {
        let (a, b, c, d) = (load(0), load(16), load(len - 32), load(len - 16));
        store(0, a);
        store(16, b);
        store(len - 32, c);
        store(len - 16, d);
    } else {
        let (a, b, c, d) = (load(0), load(16), load(32), load(48));
        let (e, f, g, h) = (
            load(len - 64),
            load(len - 48),
            load(len - 32),
            load(len - 16),
        );
        store(0, a);
        store(16, b);
        store(32, c);
        store(48, d);
        store(len - 64, e);
        store(len - 48, f);
        store(len - 32, g);
        store(len - 16, h);
    }
}

#[cfg(test)]
mod tests {
    use super::copy_span;

    /// A buffer of distinct bytes.
    fn pattern(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + 3) as u8).collect()
    }

    #[test]
    fn every_length_copies_exactly_its_span() {
        for len in 0..=300 {
            let src = pattern(len);
            let mut dst = vec![0xAAu8; len + 64];
            // SAFETY: `len` bytes each side, 32 bytes of margin kept.
            unsafe { copy_span(src.as_ptr(), dst.as_mut_ptr().add(32), len) };
            assert_eq!(&dst[32..32 + len], &src[..], "len {len}");
            assert!(
                dst[..32].iter().all(|&b| b == 0xAA),
                "len {len}: wrote before"
            );
            assert!(
                dst[32 + len..].iter().all(|&b| b == 0xAA),
                "len {len}: wrote after"
            );
        }
    }

    #[test]
    fn overlapping_spans_copy_as_memmove_does() {
        // (length, source offset, destination offset) in one buffer:
        // forwards and backwards by less than, equal to and more than a
        // 16-byte load, at each length class.
        for len in [16, 17, 31, 32, 33, 48, 63, 64, 65, 100, 127, 128, 129] {
            for (s, d) in [
                (0, 1),
                (1, 0),
                (0, 15),
                (15, 0),
                (0, 16),
                (16, 0),
                (0, 40),
                (40, 0),
            ] {
                let start = pattern(len + 64);
                let mut want = start.clone();
                want.copy_within(s..s + len, d);
                let mut got = start.clone();
                let p = got.as_mut_ptr();
                // SAFETY: both spans lie inside `got` (`len + 40 < len + 64`).
                unsafe { copy_span(p.add(s), p.add(d), len) };
                assert_eq!(got, want, "len {len}, {s} -> {d}");
            }
        }
    }
}
