//! Large tables a PMD reaches at random (the connection tracker's slab and
//! index) on transparent huge pages, faulted in before the first packet.
//!
//! At a million connections nearly every access to such a table on 4 KiB
//! pages also misses the TLB; 2 MiB pages spare those walks, and faulting
//! the table in up front spares the PMD the page faults it took whenever a
//! connection landed on a fresh page (`bench/README.md`, "The tracked path
//! in one body, and the connection table on huge pages": the setup rate
//! rose, the lookups' walks were already hidden behind their prefetches).
//! The tables are plain `Vec`s reserved once and never resized;
//! [`vec_on_huge_pages`] asks the kernel to back the whole capacity with
//! huge pages (`madvise(MADV_HUGEPAGE)`, honoured when
//! `/sys/kernel/mm/transparent_hugepage/enabled` says `always` or
//! `madvise`) and touches every page, so that the faults — and whatever
//! compaction the kernel does to find a huge page — happen at
//! construction, never on a PMD's fast path. Where the kernel has no huge
//! pages to give, the table is on 4 KiB pages as before, still faulted in.

/// The size of an x86-64 transparent huge page.
pub const HUGE_PAGE: usize = 2 << 20;
const PAGE: usize = 4096;

/// An empty `Vec` with room for `capacity` values, its memory advised for
/// huge pages and every page of it faulted in. Returns with it whether
/// the kernel accepted the advice (false when no 2 MiB-aligned stretch
/// fits in the allocation, or the kernel has no transparent huge pages);
/// the `Vec` is usable either way.
pub fn vec_on_huge_pages<T>(capacity: usize) -> (Vec<T>, bool) {
    let mut v: Vec<T> = Vec::with_capacity(capacity);
    let bytes = v.capacity() * std::mem::size_of::<T>();
    if bytes == 0 {
        return (v, false);
    }
    let base = v.as_mut_ptr().cast::<u8>();
    let start = (base as usize).next_multiple_of(HUGE_PAGE);
    let end = (base as usize + bytes) / HUGE_PAGE * HUGE_PAGE;
    let advised = end > start && {
        // SAFETY: MADV_HUGEPAGE changes neither the contents nor the
        // protection of a range, only the page size the kernel backs it
        // with; [start, end) lies inside the allocation `v` owns.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) == 0 }
    };
    // One write a page, from the allocation's first byte on.
    let first_page = (base as usize).next_multiple_of(PAGE) - base as usize;
    for off in std::iter::once(0).chain((first_page..bytes).step_by(PAGE)) {
        // SAFETY: `off < bytes`, inside the allocation `v` owns and holds
        // no value yet (`v` is empty): writing a byte there is writing
        // into raw memory of ours. Volatile, so the touch is not elided.
        unsafe { base.add(off).write_volatile(0) };
    }
    (v, advised)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pages of `[p, p + len)` that are resident, by `mincore`.
    fn resident_pages(p: *const u8, len: usize) -> (usize, usize) {
        let start = (p as usize) / PAGE * PAGE;
        let end = (p as usize + len).next_multiple_of(PAGE);
        let pages = (end - start) / PAGE;
        let mut vec = vec![0u8; pages];
        // SAFETY: the range is page-aligned and mapped (it covers a live
        // allocation); `vec` has one byte per page as mincore writes.
        let rc =
            unsafe { libc::mincore(start as *mut libc::c_void, end - start, vec.as_mut_ptr()) };
        assert_eq!(rc, 0, "mincore: {}", std::io::Error::last_os_error());
        (vec.iter().filter(|&&b| b & 1 != 0).count(), pages)
    }

    /// Every page of the capacity is resident before a value is pushed,
    /// for tables below, at and well above a huge page; the `Vec` then
    /// takes its capacity's worth of values without moving.
    #[test]
    fn the_whole_capacity_is_faulted_in_and_usable() {
        let cases = [
            (1usize, "one value"),
            (300_000, "2.4 MB of u64"),
            (3_000_000, "24 MB of u64"),
        ];
        for (capacity, what) in cases {
            let (mut v, advised) = vec_on_huge_pages::<u64>(capacity);
            assert!(v.is_empty() && v.capacity() >= capacity, "{what}");
            let (resident, pages) = resident_pages(v.as_ptr().cast(), capacity * 8);
            assert_eq!(resident, pages, "{what}: every page faulted in");
            let base = v.as_ptr();
            v.extend((0..capacity as u64).map(|i| i * 3));
            assert_eq!(v.as_ptr(), base, "{what}: no reallocation");
            assert_eq!(v[capacity - 1], (capacity as u64 - 1) * 3, "{what}");
            if capacity * 8 < HUGE_PAGE {
                assert!(!advised, "{what}: no whole huge page inside");
            }
            eprintln!("{what}: advised for huge pages: {advised}");
        }
    }

    #[test]
    fn an_empty_or_zero_sized_table_is_left_alone() {
        let (v, advised) = vec_on_huge_pages::<u64>(0);
        assert!(v.is_empty() && !advised);
        let (v, advised) = vec_on_huge_pages::<()>(1 << 20);
        assert!(v.capacity() >= 1 << 20 && !advised);
    }
}
