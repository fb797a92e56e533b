//! Figures derived from the counts of one interval.

use crate::{Event, PmuDelta, Reading};

/// A derived figure, or why there is none.
#[derive(Clone, Debug, PartialEq)]
pub enum Metric {
    Value(f64),
    Unavailable(String),
}

impl Metric {
    pub fn value(&self) -> Option<f64> {
        match self {
            Metric::Value(v) => Some(*v),
            Metric::Unavailable(_) => None,
        }
    }
    pub fn reason(&self) -> Option<&str> {
        match self {
            Metric::Value(_) => None,
            Metric::Unavailable(r) => Some(r),
        }
    }
}

/// What `pmd-perf-show` users look at.
#[derive(Clone, Debug, PartialEq)]
pub struct Derived {
    /// Instructions per cycle.
    pub ipc: Metric,
    /// 100 × cache misses / cache references.
    pub cache_miss_pct: Metric,
    pub llc_misses_per_pkt: Metric,
    pub dtlb_misses_per_pkt: Metric,
    pub context_switches_per_s: Metric,
}

fn input(d: &PmuDelta, e: Event) -> Result<f64, String> {
    match d.get(e) {
        Reading::Value(v) => Ok(v as f64),
        Reading::Unsupported(u) => Err(format!("{} unsupported: {}", e.name(), u.reason(e))),
    }
}

/// `scale × num / den`; an unsupported input wins over a zero denominator.
fn ratio(num: Result<f64, String>, den: Result<f64, String>, zero: &str, scale: f64) -> Metric {
    match (num, den) {
        (Err(r), _) | (_, Err(r)) => Metric::Unavailable(r),
        (Ok(_), Ok(d)) if d <= 0.0 => Metric::Unavailable(zero.to_string()),
        (Ok(n), Ok(d)) => Metric::Value(scale * n / d),
    }
}

impl PmuDelta {
    pub fn derived(&self) -> Derived {
        let packets = Ok(self.packets as f64);
        let no_packets = "no packets in the interval";
        Derived {
            ipc: ratio(
                input(self, Event::Instructions),
                input(self, Event::Cycles),
                "no cycles counted in the interval",
                1.0,
            ),
            cache_miss_pct: ratio(
                input(self, Event::CacheMisses),
                input(self, Event::CacheReferences),
                "no cache references in the interval",
                100.0,
            ),
            llc_misses_per_pkt: ratio(
                input(self, Event::LlcReadMisses),
                packets.clone(),
                no_packets,
                1.0,
            ),
            dtlb_misses_per_pkt: ratio(
                input(self, Event::DtlbLoadMisses),
                packets,
                no_packets,
                1.0,
            ),
            context_switches_per_s: ratio(
                input(self, Event::ContextSwitches),
                Ok(self.secs),
                "empty interval",
                1.0,
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{Event, N_EVENTS, PmuDelta, Reading, Unsupported};

    fn delta(secs: f64, packets: u64, vals: &[(Event, u64)]) -> PmuDelta {
        let mut readings = [Reading::Value(0); N_EVENTS];
        for &(e, v) in vals {
            readings[e.index()] = Reading::Value(v);
        }
        PmuDelta {
            secs,
            packets,
            user_only: 0,
            readings,
        }
    }

    #[test]
    fn ratios_and_per_packet_figures() {
        let d = delta(
            2.0,
            1_000,
            &[
                (Event::Instructions, 3_000),
                (Event::Cycles, 2_000),
                (Event::CacheReferences, 400),
                (Event::CacheMisses, 10),
                (Event::LlcReadMisses, 50),
                (Event::DtlbLoadMisses, 5),
                (Event::ContextSwitches, 7),
            ],
        )
        .derived();
        assert_eq!(d.ipc.value(), Some(1.5));
        assert_eq!(d.cache_miss_pct.value(), Some(2.5));
        assert_eq!(d.llc_misses_per_pkt.value(), Some(0.05));
        assert_eq!(d.dtlb_misses_per_pkt.value(), Some(0.005));
        assert_eq!(d.context_switches_per_s.value(), Some(3.5));
    }

    #[test]
    fn a_missing_counter_makes_only_its_figures_unavailable() {
        // A VM without a PMU: every hardware counter fails to open.
        let mut d = delta(1.0, 500, &[(Event::ContextSwitches, 3)]);
        for e in Event::ALL.iter().filter(|e| e.is_hardware()) {
            d.readings[e.index()] = Reading::Unsupported(Unsupported::Open(libc::ENOENT));
        }
        let m = d.derived();
        for x in [
            &m.ipc,
            &m.cache_miss_pct,
            &m.llc_misses_per_pkt,
            &m.dtlb_misses_per_pkt,
        ] {
            let r = x.reason().expect("unavailable");
            assert!(r.contains("not supported by this CPU/VM"), "{r}");
        }
        assert!(m.ipc.reason().unwrap().starts_with("instructions"));
        assert_eq!(m.context_switches_per_s.value(), Some(3.0));

        // Only the LLC counter missing (as on some AMD guests).
        let mut d = delta(
            1.0,
            100,
            &[
                (Event::Instructions, 10),
                (Event::Cycles, 5),
                (Event::DtlbLoadMisses, 20),
            ],
        );
        d.readings[Event::LlcReadMisses.index()] =
            Reading::Unsupported(Unsupported::Open(libc::ENOENT));
        let m = d.derived();
        assert!(
            m.llc_misses_per_pkt
                .reason()
                .unwrap()
                .starts_with("llc-load-misses unsupported")
        );
        assert_eq!(m.ipc.value(), Some(2.0));
        assert_eq!(m.dtlb_misses_per_pkt.value(), Some(0.2));
    }

    #[test]
    fn zero_denominators_are_unavailable_not_nan() {
        let m = delta(0.0, 0, &[(Event::Instructions, 10)]).derived();
        assert_eq!(m.ipc.reason(), Some("no cycles counted in the interval"));
        assert_eq!(
            m.llc_misses_per_pkt.reason(),
            Some("no packets in the interval")
        );
        assert_eq!(m.context_switches_per_s.reason(), Some("empty interval"));
        // Unsupported wins over zero.
        let mut d = delta(1.0, 0, &[]);
        d.readings[Event::DtlbLoadMisses.index()] = Reading::Unsupported(Unsupported::Disabled);
        let r = d.derived().dtlb_misses_per_pkt;
        assert!(r.reason().unwrap().contains("switched off"), "{r:?}");
    }
}
