//! Large tables a PMD reaches at random (the connection tracker's slab and
//! index) on transparent huge pages, faulted in before the first packet.
//!
//! At a million connections nearly every access to such a table on 4 KiB
//! pages also misses the TLB; 2 MiB pages spare those walks, and faulting
//! the table in up front spares the PMD the page faults it took whenever a
//! connection landed on a fresh page (`bench/README.md`, "The tracked path
//! in one body, and the connection table on huge pages": the setup rate
//! rose, the lookups' walks were already hidden behind their prefetches).
//! The tables are plain `Vec`s reserved once and never resized; the
//! functions here ask the kernel to back them with huge pages
//! (`madvise(MADV_HUGEPAGE)`, honoured when
//! `/sys/kernel/mm/transparent_hugepage/enabled` says `always` or
//! `madvise`) and touch every page, so that the faults — and whatever
//! compaction the kernel does to find a huge page — happen at
//! construction, never on a PMD's fast path. Where the kernel has no huge
//! pages to give, a table is on 4 KiB pages, still faulted in.
//!
//! An empty table ([`vec_on_huge_pages`], the slab) bigger than a quarter
//! of the memory the kernel reports available (`MemAvailable`) — a
//! `capacity` near its limit on every PMD — is advised only and faults in
//! as it fills, as plain memory does: the switch does not take at start
//! memory the machine cannot spare.

/// The size of an x86-64 transparent huge page.
pub const HUGE_PAGE: usize = 2 << 20;
const PAGE: usize = 4096;

/// What the kernel was asked for a table, and what was done to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backing {
    /// `madvise(MADV_HUGEPAGE)` accepted (false when no 2 MiB-aligned
    /// stretch fits in the allocation, or the kernel has no transparent
    /// huge pages).
    pub advised: bool,
    /// Every page touched at construction.
    pub faulted_in: bool,
}

/// An empty `Vec` with room for `capacity` values, its memory advised for
/// huge pages and, when the machine can spare it, every page faulted in.
/// The `Vec` is usable whatever the [`Backing`].
pub fn vec_on_huge_pages<T>(capacity: usize) -> (Vec<T>, Backing) {
    let mut v: Vec<T> = Vec::with_capacity(capacity);
    let bytes = v.capacity() * std::mem::size_of::<T>();
    let advised = advise(&mut v);
    let faulted_in = bytes > 0 && fault_in_now(bytes);
    if faulted_in {
        let base = v.as_mut_ptr().cast::<u8>();
        // One write a page, from the allocation's first byte on.
        let first_page = (base as usize).next_multiple_of(PAGE) - base as usize;
        for off in std::iter::once(0).chain((first_page..bytes).step_by(PAGE)) {
            // SAFETY: `off < bytes`, inside the allocation `v` owns and
            // holds no value yet (`v` is empty): writing a byte there is
            // writing into raw memory of ours. Volatile, so the touch is
            // not elided.
            unsafe { base.add(off).write_volatile(0) };
        }
    }
    (
        v,
        Backing {
            advised,
            faulted_in,
        },
    )
}

/// `vec![value; len]` advised for huge pages, filled — and so faulted in —
/// now, whatever its size (as `vec!` of a non-zero type writes every
/// element too).
pub fn filled_on_huge_pages<T: Clone>(len: usize, value: T) -> (Vec<T>, Backing) {
    let mut v = Vec::with_capacity(len);
    let advised = advise(&mut v);
    v.resize(len, value);
    let faulted_in = len * std::mem::size_of::<T>() > 0;
    (
        v,
        Backing {
            advised,
            faulted_in,
        },
    )
}

/// Asks for huge pages over the 2 MiB-aligned part of `v`'s allocation.
fn advise<T>(v: &mut Vec<T>) -> bool {
    let bytes = v.capacity() * std::mem::size_of::<T>();
    let base = v.as_mut_ptr() as usize;
    let start = base.next_multiple_of(HUGE_PAGE);
    let end = (base + bytes) / HUGE_PAGE * HUGE_PAGE;
    end > start && {
        // SAFETY: MADV_HUGEPAGE changes neither the contents nor the
        // protection of a range, only the page size the kernel backs it
        // with; [start, end) lies inside the allocation `v` owns.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) == 0 }
    }
}

/// Whether a table of `bytes` is faulted in at construction: at most a
/// quarter of `MemAvailable` (unknown: no).
fn fault_in_now(bytes: usize) -> bool {
    mem_available().is_some_and(|avail| spared(bytes, avail))
}

/// Whether `bytes` is at most a quarter of `avail`.
fn spared(bytes: usize, avail: usize) -> bool {
    bytes <= avail / 4
}

/// `MemAvailable` of `/proc/meminfo`, in bytes.
fn mem_available() -> Option<usize> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_mem_available(&info)
}

fn parse_mem_available(info: &str) -> Option<usize> {
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
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
    /// for tables below, at and well above a huge page (all far below a
    /// quarter of any test machine's memory); the `Vec` then takes its
    /// capacity's worth of values without moving.
    #[test]
    fn the_whole_capacity_is_faulted_in_and_usable() {
        let cases = [
            (1usize, "one value"),
            (300_000, "2.4 MB of u64"),
            (3_000_000, "24 MB of u64"),
        ];
        for (capacity, what) in cases {
            let (mut v, backing) = vec_on_huge_pages::<u64>(capacity);
            assert!(v.is_empty() && v.capacity() >= capacity, "{what}");
            assert!(backing.faulted_in, "{what}");
            let (resident, pages) = resident_pages(v.as_ptr().cast(), capacity * 8);
            assert_eq!(resident, pages, "{what}: every page faulted in");
            let base = v.as_ptr();
            v.extend((0..capacity as u64).map(|i| i * 3));
            assert_eq!(v.as_ptr(), base, "{what}: no reallocation");
            assert_eq!(v[capacity - 1], (capacity as u64 - 1) * 3, "{what}");
            if capacity * 8 < HUGE_PAGE {
                assert!(!backing.advised, "{what}: no whole huge page inside");
            }
            eprintln!("{what}: {backing:?}");
        }
    }

    #[test]
    fn a_filled_table_holds_its_values_and_is_resident() {
        let (v, backing) = filled_on_huge_pages(100_000, [7u64; 8]);
        assert_eq!(v.len(), 100_000);
        assert!(v.iter().all(|b| *b == [7; 8]));
        assert!(backing.faulted_in);
        let (resident, pages) = resident_pages(v.as_ptr().cast(), v.len() * 64);
        assert_eq!(resident, pages);
    }

    #[test]
    fn an_empty_or_zero_sized_table_is_left_alone() {
        let (v, backing) = vec_on_huge_pages::<u64>(0);
        assert!(v.is_empty());
        assert_eq!(
            backing,
            Backing {
                advised: false,
                faulted_in: false
            }
        );
        let (v, backing) = vec_on_huge_pages::<()>(1 << 20);
        assert!(v.capacity() >= 1 << 20 && !backing.advised && !backing.faulted_in);
    }

    /// What the switch may take at start: a table over a quarter of the
    /// available memory is not faulted in, and `MemAvailable` is read as
    /// the kernel writes it.
    #[test]
    fn only_a_table_the_machine_can_spare_is_faulted_in() {
        let info = "MemTotal:       24000000 kB\nMemFree:        19000000 kB\n\
                    MemAvailable:   20000000 kB\nBuffers:  1 kB\n";
        assert_eq!(parse_mem_available(info), Some(20_000_000 * 1024));
        assert_eq!(parse_mem_available("MemTotal: 1 kB\n"), None);
        assert_eq!(parse_mem_available("MemAvailable: lots kB\n"), None);
        let avail = 20_000_000 * 1024;
        let cases = [
            (1 << 20, true),
            (avail / 4, true),
            (avail / 4 + 1, false),
            (avail, false),
            (usize::MAX, false),
        ];
        for (bytes, want) in cases {
            assert_eq!(
                spared(bytes, avail),
                want,
                "{bytes} bytes of {avail} available"
            );
        }
        assert!(
            mem_available().is_some_and(|a| a > 0),
            "this machine's MemAvailable"
        );
    }
}
