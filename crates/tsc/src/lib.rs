//! TSC cycles: the datapath's clock. `now()` costs ~20-40 cycles and no
//! syscall; the frequency is calibrated once against the monotonic clock.
//! On non-x86_64 targets the monotonic clock in nanoseconds stands in.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Current TSC value.
#[inline(always)]
pub fn now() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC has no preconditions on x86_64.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        static START: OnceLock<Instant> = OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// TSC ticks per second (calibrated over ~20 ms on first use).
pub fn hz() -> u64 {
    static HZ: OnceLock<u64> = OnceLock::new();
    *HZ.get_or_init(|| {
        if !cfg!(target_arch = "x86_64") {
            return 1_000_000_000;
        }
        // Median of three short calibrations: robust to one preemption.
        let mut v: Vec<u64> = (0..3)
            .map(|_| {
                let t0 = Instant::now();
                let c0 = now();
                while t0.elapsed() < Duration::from_millis(7) {
                    std::hint::spin_loop();
                }
                let c1 = now();
                let dt = t0.elapsed().as_nanos() as u64;
                (c1 - c0) * 1_000_000_000 / dt.max(1)
            })
            .collect();
        v.sort_unstable();
        v[1]
    })
}

/// Converts a cycle count to seconds.
pub fn to_secs(cycles: u64) -> f64 {
    cycles as f64 / hz() as f64
}

#[cfg(test)]
mod tests {
    #[test]
    fn calibrated_frequency_is_plausible_and_counter_advances() {
        let hz = super::hz();
        assert!((100_000_000..20_000_000_000).contains(&hz), "{hz}");
        let a = super::now();
        let b = super::now();
        assert!(b >= a);
    }
}
