//! The soak's pass/fail checks and the printed tables. Pure functions of
//! what was measured, so each rule is tested here.

use crate::report;

/// One check of the summary.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Check {
    pub what: String,
    pub ok: bool,
    pub detail: String,
}

impl Check {
    pub fn new(what: &str, ok: bool, detail: impl Into<String>) -> Check {
        Check {
            what: what.to_string(),
            ok,
            detail: detail.into(),
        }
    }
}

/// How much a memory figure may grow after the warm-up: 4 MiB or 3 %,
/// whichever is more (allocator and page-cache noise, lazily touched
/// guest pages of a new session).
pub fn tolerance_kib(base_kib: u64) -> u64 {
    (4 * 1024).max(base_kib * 3 / 100)
}

/// RSS is stable when, after the warm-up (samples before `warm_secs` are
/// ignored), no sample exceeds the first one after the warm-up by more
/// than [`tolerance_kib`]. `samples`: (seconds since start, KiB).
pub fn memory_stable(what: &str, samples: &[(f64, u64)], warm_secs: f64) -> Check {
    let post: Vec<(f64, u64)> = samples
        .iter()
        .copied()
        .filter(|(t, _)| *t >= warm_secs)
        .collect();
    let Some(&(t0, base)) = post.first() else {
        return Check::new(what, false, "no sample after the warm-up");
    };
    if post.len() < 2 {
        return Check::new(what, false, "one sample after the warm-up: no trend");
    }
    let (tmax, max) = post
        .iter()
        .copied()
        .max_by_key(|(_, v)| *v)
        .unwrap_or((t0, base));
    let last = post.last().map_or(base, |s| s.1);
    let tol = tolerance_kib(base);
    let grew = max.saturating_sub(base);
    Check::new(
        what,
        grew <= tol,
        format!(
            "{} at {:.0} s -> max {} at {:.0} s, end {} (+{} allowed)",
            mib(base),
            t0,
            mib(max),
            tmax,
            mib(last),
            mib(tol)
        ),
    )
}

/// Before and after counts must be equal (fds, mappings).
pub fn unchanged(what: &str, before: usize, after: usize) -> Check {
    Check::new(
        what,
        before == after,
        format!("{before} before, {after} after"),
    )
}

pub fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// The checks as a table, and whether all passed.
pub fn table(checks: &[Check]) -> (String, bool) {
    let rows: Vec<Vec<String>> = checks
        .iter()
        .map(|c| {
            vec![
                if c.ok { "PASS" } else { "FAIL" }.to_string(),
                c.what.clone(),
                c.detail.clone(),
            ]
        })
        .collect();
    (
        report::text_table(&["", "check", "figures"], &rows),
        checks.iter().all(|c| c.ok),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_trend_rules() {
        const M: u64 = 1024;
        // (samples in MiB at 0, 60, 120, ... s, warm-up s, stable?)
        let cases: [(&[u64], f64, bool); 6] = [
            (&[40, 60, 61, 61, 62], 60.0, true), // growth only in the warm-up
            (&[40, 60, 61, 66, 70], 60.0, false), // +10 MiB after it
            (&[40, 60, 58, 63, 60], 60.0, true), // +3 MiB peak is noise
            (&[500, 500, 512, 514], 60.0, true), // 3 % of 500 MiB = 15 MiB
            (&[500, 500, 520, 520], 60.0, false), // +20 MiB
            (&[40, 41], 120.0, false),           // nothing after the warm-up
        ];
        for (mibs, warm, stable) in cases {
            let samples: Vec<(f64, u64)> = mibs
                .iter()
                .enumerate()
                .map(|(i, v)| (60.0 * i as f64, v * M))
                .collect();
            let c = memory_stable("rss", &samples, warm);
            assert_eq!(c.ok, stable, "{mibs:?}: {}", c.detail);
        }
    }

    #[test]
    fn table_fails_when_one_check_fails() {
        let (_, ok) = table(&[unchanged("fds", 5, 5), unchanged("maps", 9, 9)]);
        assert!(ok);
        let (text, ok) = table(&[unchanged("fds", 5, 5), unchanged("maps", 9, 10)]);
        assert!(!ok);
        assert!(
            text.contains("FAIL  maps") && text.contains("9 before, 10 after"),
            "{text}"
        );
    }
}
