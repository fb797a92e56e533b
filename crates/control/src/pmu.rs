//! The `pmu` part of `show pmd`: per counter the total and the delta over
//! the last sampling interval, and the derived figures over that interval,
//! each with the reason when it has no value.

use crate::protocol::{MetricReport, PmuCounterReport, PmuDerivedReport, PmuReport};
use nfv_pmu::{Event, Metric, PmuDelta, PmuSnapshot, Reading, Unsupported};

fn metric(m: Metric) -> MetricReport {
    match m {
        Metric::Value(v) => MetricReport {
            value: Some(v),
            reason: None,
        },
        Metric::Unavailable(r) => MetricReport {
            value: None,
            reason: Some(r),
        },
    }
}

/// `now`: the PMD's latest published totals; `interval`: the deltas of
/// the rate sampler's last interval (`None` or empty before the first:
/// then everything since the counters started).
pub fn report(now: &PmuSnapshot, interval: Option<&PmuDelta>) -> PmuReport {
    let basis = match interval {
        Some(d) if d.secs > 0.0 => *d,
        _ => now.totals(),
    };
    let enabled = !now
        .readings
        .contains(&Reading::Unsupported(Unsupported::Disabled));
    let d = basis.derived();
    PmuReport {
        enabled,
        interval_secs: basis.secs,
        interval_packets: basis.packets,
        counters: Event::ALL
            .iter()
            .map(|&e| {
                let total = now.get(e);
                PmuCounterReport {
                    name: e.name().to_string(),
                    unit: e.unit().to_string(),
                    total: total.value(),
                    delta: total.value().and(basis.get(e).value()),
                    unsupported: total.unsupported().map(|u| u.reason(e)),
                    user_only: now.user_only & (1 << e.index()) != 0,
                }
            })
            .collect(),
        derived: PmuDerivedReport {
            ipc: metric(d.ipc),
            cache_miss_pct: metric(d.cache_miss_pct),
            llc_misses_per_pkt: metric(d.llc_misses_per_pkt),
            dtlb_misses_per_pkt: metric(d.dtlb_misses_per_pkt),
            context_switches_per_s: metric(d.context_switches_per_s),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nfv_pmu::{FakeSource, PmuSampler};

    const ENOENT: i32 = 2;

    #[test]
    fn report_has_deltas_totals_and_reasons() {
        let fake = FakeSource::new();
        fake.set(
            Event::LlcReadMisses,
            Reading::Unsupported(Unsupported::Open(ENOENT)),
        );
        let mut s = PmuSampler::new(Some(Box::new(fake.clone())), 0);
        fake.add(Event::Instructions, 1_000);
        fake.add(Event::Cycles, 1_000);
        let a = s.sample(1_000_000_000, 100);
        fake.add(Event::Instructions, 3_000);
        fake.add(Event::Cycles, 1_000);
        fake.add(Event::DtlbLoadMisses, 50);
        fake.add(Event::ContextSwitches, 4);
        let b = s.sample(3_000_000_000, 600);

        let r = report(&b, Some(&b.since(&a)));
        assert!(r.enabled);
        assert_eq!(r.interval_secs, 2.0);
        assert_eq!(r.interval_packets, 500);
        let c = |name: &str| r.counters.iter().find(|c| c.name == name).unwrap();
        assert_eq!(c("instructions").total, Some(4_000));
        assert_eq!(c("instructions").delta, Some(3_000));
        assert_eq!(c("task-clock").unit, "ns");
        let llc = c("llc-load-misses");
        assert_eq!((llc.total, llc.delta), (None, None));
        assert!(llc.unsupported.as_ref().unwrap().contains("CPU/VM"));
        assert_eq!(r.derived.ipc.value, Some(3.0));
        assert_eq!(r.derived.dtlb_misses_per_pkt.value, Some(0.1));
        assert_eq!(r.derived.context_switches_per_s.value, Some(2.0));
        assert!(r.derived.llc_misses_per_pkt.value.is_none());
        assert!(r.derived.llc_misses_per_pkt.reason.is_some());
        assert!(r.derived.cache_miss_pct.reason.is_some()); // no references

        // Before the first interval: totals since the epoch.
        let r = report(&b, None);
        assert_eq!(r.interval_secs, 3.0);
        assert_eq!(r.derived.ipc.value, Some(2.0));

        // The JSON shape: numbers or null, reasons as strings.
        let j = serde_json::to_value(&r).unwrap();
        assert!(j["derived"]["llc_misses_per_pkt"]["value"].is_null());
        assert!(j["derived"]["llc_misses_per_pkt"]["reason"].is_string());
        assert!(j["counters"][0]["delta"].is_u64());

        s.set_source(None, 4_000_000_000);
        let off = report(&s.sample(5_000_000_000, 0), None);
        assert!(!off.enabled);
        assert!(off.counters.iter().all(|c| c.total.is_none()));
    }
}
