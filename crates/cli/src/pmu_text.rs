//! PMU figures of PMD threads for humans (`ctl show pmd`, `top`):
//! "unsupported" where the machine cannot count an input, "-" where there
//! was nothing to divide by, and the reasons listed once.

use nfv_control::protocol::{MetricReport, PmdReport, PmuReport};
use std::collections::{BTreeMap, BTreeSet};

/// The counters each derived figure needs.
pub const IPC: &[&str] = &["instructions", "cycles"];
pub const CACHE_MISS: &[&str] = &["cache-misses", "cache-references"];
pub const LLC: &[&str] = &["llc-load-misses"];
pub const DTLB: &[&str] = &["dtlb-load-misses"];
pub const CTX: &[&str] = &["context-switches"];

fn supported(p: &PmuReport, inputs: &[&str]) -> bool {
    inputs.iter().all(|n| {
        p.counters
            .iter()
            .any(|c| c.name == *n && c.unsupported.is_none())
    })
}

/// A derived figure: the number, "unsupported", or "-" (no data).
pub fn metric(p: &PmuReport, m: &MetricReport, inputs: &[&str], prec: usize) -> String {
    match m.value {
        Some(v) => format!("{v:.prec$}"),
        None if !p.enabled => "off".into(),
        None if !supported(p, inputs) => "unsupported".into(),
        None => "-".into(),
    }
}

/// Each reason for an unsupported counter once, with the counters it
/// applies to (over all PMDs), and PMDs whose counters skip the kernel.
pub fn notes(pmds: &[PmdReport]) -> String {
    let mut reasons: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut s = String::new();
    for pmd in pmds.iter().filter(|p| p.pmu.enabled) {
        for c in &pmd.pmu.counters {
            if let Some(r) = &c.unsupported {
                reasons.entry(r).or_default().insert(&c.name);
            }
        }
        let user: Vec<&str> = pmd
            .pmu
            .counters
            .iter()
            .filter(|c| c.user_only)
            .map(|c| c.name.as_str())
            .collect();
        if !user.is_empty() {
            s.push_str(&format!(
                "  pmd {}: user space only (kernel not permitted): {}\n",
                pmd.index,
                user.join(", ")
            ));
        }
    }
    for (reason, names) in reasons {
        let names: Vec<&str> = names.into_iter().collect();
        s.push_str(&format!("  unsupported {}: {reason}\n", names.join(", ")));
    }
    s
}

/// One line per PMD, then [`notes`].
pub fn pmu_lines(pmds: &[PmdReport]) -> String {
    pmu_figures(pmds) + &notes(pmds)
}

/// A heading and one line per PMD, without the [`notes`] (the demo prints
/// each note once, not after every run).
pub fn pmu_figures(pmds: &[PmdReport]) -> String {
    if pmds.is_empty() {
        return String::new();
    }
    let secs = pmds.first().map_or(0.0, |p| p.pmu.interval_secs);
    let mut s = format!("PMU (over {secs:.1} s):\n");
    for pmd in pmds {
        let p = &pmd.pmu;
        if !p.enabled {
            s.push_str(&format!("  pmd {}: PMU counters switched off\n", pmd.index));
            continue;
        }
        let d = &p.derived;
        s.push_str(&format!(
            "  pmd {}: IPC {}  cache miss % {}  LLC misses/pkt {}  dTLB misses/pkt {}  ctx switches/s {}\n",
            pmd.index,
            metric(p, &d.ipc, IPC, 2),
            metric(p, &d.cache_miss_pct, CACHE_MISS, 2),
            metric(p, &d.llc_misses_per_pkt, LLC, 3),
            metric(p, &d.dtlb_misses_per_pkt, DTLB, 3),
            metric(p, &d.context_switches_per_s, CTX, 1),
        ));
    }
    s
}
