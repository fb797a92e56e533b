//! Totals of every counter at one moment ([`PmuSnapshot`]) and counts
//! over an interval between two of them ([`PmuDelta`]).

use crate::event::{Event, N_EVENTS, Reading, Unsupported};

/// Totals of every counter at one moment, with the measuring thread's
/// clock and work count at that moment (so ratios taken between two
/// snapshots use one consistent window).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PmuSnapshot {
    /// Totals restart from zero whenever this changes (counters opened,
    /// switched off or on, cleared); 0 = nothing published yet.
    pub generation: u64,
    /// When the current generation began (the measuring thread's clock, ns).
    pub epoch_ns: u64,
    /// When this reading was taken (same clock).
    pub time_ns: u64,
    /// The thread's unit of work at the reading (a PMD: packets received
    /// since its counters were last cleared).
    pub packets: u64,
    /// Bit [`Event::index`] set: that counter counts user space only (the
    /// kernel refused to count kernel mode).
    pub user_only: u16,
    /// Totals since `epoch_ns`, indexed by [`Event::index`].
    pub readings: [Reading; N_EVENTS],
}

impl Default for PmuSnapshot {
    fn default() -> PmuSnapshot {
        PmuSnapshot {
            generation: 0,
            epoch_ns: 0,
            time_ns: 0,
            packets: 0,
            user_only: 0,
            readings: [Reading::Unsupported(Unsupported::NotYetRead); N_EVENTS],
        }
    }
}

impl PmuSnapshot {
    pub fn get(&self, e: Event) -> Reading {
        self.readings[e.index()]
    }

    /// Counts between `earlier` and `self`. Across a generation change
    /// (or from the empty default) the delta is everything since `self`'s
    /// epoch. Within a generation a counter that went backwards (possible
    /// only for multiplexed, scaled estimates) contributes 0, and one
    /// without an earlier value contributes its whole total.
    pub fn since(&self, earlier: &PmuSnapshot) -> PmuDelta {
        let same = self.generation != 0 && self.generation == earlier.generation;
        let ns = |a: u64, b: u64| a.saturating_sub(b) as f64 / 1e9;
        let mut readings = self.readings;
        if same {
            for (r, e) in readings.iter_mut().zip(&earlier.readings) {
                if let Reading::Value(v) = *r {
                    *r = Reading::Value(v.saturating_sub(e.value().unwrap_or(0)));
                }
            }
        }
        PmuDelta {
            secs: if same {
                ns(self.time_ns, earlier.time_ns)
            } else {
                ns(self.time_ns, self.epoch_ns)
            },
            packets: if same {
                self.packets.saturating_sub(earlier.packets)
            } else {
                self.packets
            },
            user_only: self.user_only,
            readings,
        }
    }

    /// Everything since the epoch: `since` the empty snapshot.
    pub fn totals(&self) -> PmuDelta {
        self.since(&PmuSnapshot::default())
    }
}

/// Counts over an interval; see [`PmuDelta::derived`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PmuDelta {
    /// Length of the interval.
    pub secs: f64,
    /// Work done in it (packets).
    pub packets: u64,
    pub user_only: u16,
    pub readings: [Reading; N_EVENTS],
}

impl PmuDelta {
    pub fn get(&self, e: Event) -> Reading {
        self.readings[e.index()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(generation: u64, time_ns: u64, packets: u64, vals: &[(Event, u64)]) -> PmuSnapshot {
        let mut s = PmuSnapshot {
            generation,
            time_ns,
            packets,
            readings: [Reading::Value(0); N_EVENTS],
            ..Default::default()
        };
        for &(e, v) in vals {
            s.readings[e.index()] = Reading::Value(v);
        }
        s
    }

    #[test]
    fn deltas_within_a_generation() {
        let a = snap(
            3,
            1_000_000_000,
            100,
            &[(Event::Instructions, 1000), (Event::Cycles, 500)],
        );
        let b = snap(
            3,
            3_000_000_000,
            1100,
            &[(Event::Instructions, 5000), (Event::Cycles, 2500)],
        );
        let d = b.since(&a);
        assert_eq!(d.secs, 2.0);
        assert_eq!(d.packets, 1000);
        assert_eq!(d.get(Event::Instructions), Reading::Value(4000));
        assert_eq!(d.get(Event::Cycles), Reading::Value(2000));
        assert_eq!(d.get(Event::PageFaults), Reading::Value(0));
    }

    #[test]
    fn a_new_generation_counts_from_its_epoch() {
        let a = snap(3, 5_000_000_000, 9_000, &[(Event::Instructions, 90_000)]);
        // Cleared at t = 5.5 s: totals and packets restart from zero.
        let mut b = snap(4, 6_000_000_000, 200, &[(Event::Instructions, 700)]);
        b.epoch_ns = 5_500_000_000;
        let d = b.since(&a);
        assert_eq!(d.secs, 0.5);
        assert_eq!(d.packets, 200);
        assert_eq!(d.get(Event::Instructions), Reading::Value(700));
        // The empty default is generation 0: everything since the epoch.
        assert_eq!(b.totals(), d);
    }

    #[test]
    fn scaled_estimate_going_backwards_gives_zero_not_a_wrap() {
        let a = snap(1, 0, 0, &[(Event::CacheMisses, 1_000)]);
        let b = snap(1, 1, 0, &[(Event::CacheMisses, 990)]);
        assert_eq!(b.since(&a).get(Event::CacheMisses), Reading::Value(0));
        // Near the top of u64 the difference is still exact.
        let a = snap(1, 0, 0, &[(Event::Cycles, u64::MAX - 10)]);
        let b = snap(1, 1, 0, &[(Event::Cycles, u64::MAX)]);
        assert_eq!(b.since(&a).get(Event::Cycles), Reading::Value(10));
    }

    #[test]
    fn unsupported_stays_unsupported_and_a_late_value_counts_whole() {
        let mut a = snap(1, 0, 0, &[]);
        a.readings[Event::LlcReadMisses.index()] = Reading::Unsupported(Unsupported::Open(2));
        a.readings[Event::CacheMisses.index()] = Reading::Unsupported(Unsupported::NotScheduled);
        let mut b = snap(1, 1_000_000_000, 10, &[(Event::CacheMisses, 77)]);
        b.readings[Event::LlcReadMisses.index()] = Reading::Unsupported(Unsupported::Open(2));
        let d = b.since(&a);
        assert_eq!(
            d.get(Event::LlcReadMisses),
            Reading::Unsupported(Unsupported::Open(2))
        );
        assert_eq!(d.get(Event::CacheMisses), Reading::Value(77));
    }
}
