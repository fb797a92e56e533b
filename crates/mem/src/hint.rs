//! Cache hints for the fast path: the one `prefetch` and `prefetch_write`
//! that ring and packet code share (the datapath, AF_XDP, virtqueues).
//!
//! Both are hints: they never fault, whatever the address (descriptor
//! addresses come from guests unchecked), read or write no architectural
//! state, and compile to nothing on other architectures.

/// Prefetch for reading into all cache levels (PREFETCHT0).
#[inline(always)]
pub fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: PREFETCHT0 is a hint: it does not fault on any address.
        // (SSE is part of the x86_64 baseline.)
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Prefetch with intent to write (PREFETCHW): asks for the line in an
/// exclusive state, so the store that follows does not pay a second
/// cross-core round trip to take ownership of a line another core has
/// read.
///
/// Written as `asm!` on purpose: `_mm_prefetch::<_MM_HINT_ET0>` emits
/// PREFETCHW only when the whole crate is built with the `prfchw` target
/// feature and otherwise silently compiles to a read prefetch. CPUs
/// without PREFETCHW execute its opcode (0F 0D /1) as a NOP.
#[inline(always)]
pub fn prefetch_write<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint: it does not fault on any address, reads
    // or writes no architectural state, and touches neither stack nor flags.
    unsafe {
        core::arch::asm!("prefetchw [{}]", in(reg) p, options(nostack, preserves_flags, readonly));
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefetches_never_fault_and_write_nothing() {
        let local = [0u8; 128];
        for p in [
            std::ptr::null::<u8>(),
            usize::MAX as *const u8,
            0x1000 as *const u8,
            local.as_ptr(),
        ] {
            prefetch(p);
            prefetch_write(p);
        }
        assert_eq!(local, [0u8; 128], "a prefetch writes nothing");
    }
}
