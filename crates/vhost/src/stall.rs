//! A VNF that stays connected but stops taking packets (its process
//! stopped, its poll loop wedged) is not live for a fast_failover group:
//! when transmit bursts find no room in the guest's receive ring for
//! [`STALL`], the port counts as down for a hold, and traffic a
//! fast_failover group sends it goes to the next bucket meanwhile. The
//! hold starts at [`HOLD_MIN`] and doubles while stalls repeat (at most
//! [`HOLD_MAX`]): a VNF that stays stopped costs one [`STALL`] of traffic
//! every hold, one that resumes is live again at the end of its hold and
//! its first delivered burst resets the hold.
//!
//! All of it is atomics the PMDs touch on the transmit path: two relaxed
//! loads per delivered burst, a TSC read only on a burst that delivered
//! nothing, and the liveness check a load against the PMD's coarse clock.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

/// No room in the guest's rings this long makes the port not live.
pub const STALL: std::time::Duration = std::time::Duration::from_millis(100);
pub const HOLD_MIN: std::time::Duration = std::time::Duration::from_secs(1);
pub const HOLD_MAX: std::time::Duration = std::time::Duration::from_secs(8);

#[derive(Debug, Default)]
pub(crate) struct Stall {
    /// TSC when bursts began to find no room (0: they find room).
    full_since: AtomicU64,
    /// The port is not live before this TSC.
    until: AtomicU64,
    /// The last hold, in TSC cycles (0: no stall since the last
    /// delivery).
    hold: AtomicU64,
    /// Stalls seen (for `show ports`).
    pub stalls: AtomicU64,
}

fn cycles(d: std::time::Duration) -> u64 {
    (u128::from(nfv_tsc::hz()) * d.as_nanos() / 1_000_000_000) as u64
}

impl Stall {
    /// A burst put packets into the guest.
    #[inline]
    pub fn delivered(&self) {
        if self.full_since.load(Relaxed) != 0 {
            self.full_since.store(0, Relaxed);
        }
        if self.hold.load(Relaxed) != 0 {
            self.hold.store(0, Relaxed);
        }
    }

    /// A burst found no room for any of its packets.
    #[cold]
    pub fn refused(&self) {
        let now = nfv_tsc::now();
        let since = self.full_since.load(Relaxed);
        if since == 0 {
            self.full_since.store(now, Relaxed);
            return;
        }
        if now.saturating_sub(since) < cycles(STALL) || now < self.until.load(Relaxed) {
            return;
        }
        let hold = match self.hold.load(Relaxed) {
            0 => cycles(HOLD_MIN),
            h => (2 * h).min(cycles(HOLD_MAX)),
        };
        self.hold.store(hold, Relaxed);
        self.until.store(now + hold, Relaxed);
        // The next stall is timed from the end of this hold.
        self.full_since.store(0, Relaxed);
        self.stalls.fetch_add(1, Relaxed);
    }

    /// Whether the port is live at TSC `now` (a PMD's coarse clock).
    #[inline]
    pub fn is_live(&self, now: u64) -> bool {
        now >= self.until.load(Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Refusals shorter than STALL change nothing; a longer run makes the
    /// port not live for the hold; a delivery resets the hold.
    #[test]
    fn a_guest_that_stops_taking_packets_is_down_for_a_hold() {
        let s = Stall::default();
        let t0 = nfv_tsc::now();
        s.refused();
        s.refused();
        assert!(s.is_live(nfv_tsc::now()), "down before STALL passed");
        s.delivered();
        s.refused();
        std::thread::sleep(STALL + std::time::Duration::from_millis(20));
        s.refused();
        let now = nfv_tsc::now();
        assert!(!s.is_live(now), "live after a stall");
        assert!(s.is_live(now + cycles(HOLD_MIN)), "down past the hold");
        assert_eq!(s.stalls.load(Relaxed), 1);
        s.delivered();
        assert_eq!(s.hold.load(Relaxed), 0);
        assert!(t0 > 0);
    }
}
