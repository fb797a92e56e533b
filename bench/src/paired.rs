//! Ratios from trials that ran back to back with the vCPUs placed alike.
//!
//! Why: on these VMs the host moves the two vCPUs between sharing an L3
//! (a cache-line round trip of ~75 ns) and not (~400 ns), every few
//! minutes. Each vring crossing pays that round trip, so one switch's
//! trial in a near placement against another's in a far one compares the
//! host, not the switches — and medians over a few reps mix the two. So
//! besides the medians, `compare` pairs the trials of one rep and case
//! (they run one after the other) and keeps a pair only when both trials
//! measured the same placement just before they started.

use crate::placement::Placement;
use crate::report::{Record, RecordResult, median};
use crate::trial::Outcome;
use serde::Serialize;

/// The ratios `a / b` of one figure over the pairs of one placement.
#[derive(Clone, Debug, Serialize)]
pub struct Paired {
    pub size: usize,
    pub chain: usize,
    pub placement: Placement,
    pub what: String,
    pub ratios: Vec<f64>,
}

impl Paired {
    pub fn median(&self) -> Option<(f64, f64, f64)> {
        median(&self.ratios)
    }
}

fn outcome<'a>(
    records: &'a [Record],
    scenario: &str,
    size: usize,
    chain: usize,
    rep: usize,
) -> Option<&'a Outcome> {
    records.iter().find_map(|r| match &r.result {
        RecordResult::Ok(o)
            if r.scenario == scenario && r.size == size && r.chain == chain && r.rep == rep =>
        {
            Some(o)
        }
        _ => None,
    })
}

/// `figure(a) / figure(b)` for every rep of case (`size`, `chain`) where
/// both trials succeeded, have the figure and saw the same placement;
/// grouped by placement (near first), placements without pairs left out.
pub fn paired(
    records: &[Record],
    (size, chain): (usize, usize),
    what: &str,
    (a, b): (&str, &str),
    figure: fn(&Outcome) -> Option<f64>,
) -> Vec<Paired> {
    let mut reps: Vec<usize> = records.iter().map(|r| r.rep).collect();
    reps.sort_unstable();
    reps.dedup();
    let pairs: Vec<(&Outcome, &Outcome)> = reps
        .iter()
        .filter_map(|&rep| {
            Some((
                outcome(records, a, size, chain, rep)?,
                outcome(records, b, size, chain, rep)?,
            ))
        })
        .collect();
    [Placement::Near, Placement::Far]
        .into_iter()
        .filter_map(|placement| {
            let ratios = ratios_in(&pairs, placement, |o| o.c2c_ns, figure);
            (!ratios.is_empty()).then(|| Paired {
                size,
                chain,
                placement,
                what: what.to_string(),
                ratios,
            })
        })
        .collect()
}

/// `figure(x) / figure(y)` for each pair `(x, y)` of trials that both saw
/// `placement` just before they started (`c2c`: a trial's round trip)
/// and both have the figure; the rest are left out.
pub fn ratios_in<T>(
    pairs: &[(&T, &T)],
    placement: Placement,
    c2c: impl Fn(&T) -> Option<f64>,
    figure: impl Fn(&T) -> Option<f64>,
) -> Vec<f64> {
    pairs
        .iter()
        .filter_map(|&(x, y)| {
            if Placement::of(c2c(x))? != placement || Placement::of(c2c(y))? != placement {
                return None;
            }
            let (fx, fy) = (figure(x)?, figure(y)?);
            (fy > 0.0 && fx.is_finite()).then(|| fx / fy)
        })
        .collect()
}

pub const HEAD: [&str; 6] = [
    "size",
    "chain",
    "vCPUs",
    "ratio (paired trials)",
    "pairs",
    "median (min..max)",
];

impl Paired {
    pub fn row(&self) -> Vec<String> {
        vec![
            format!("{} B", self.size),
            self.chain.to_string(),
            self.placement.name().to_string(),
            self.what.clone(),
            self.ratios.len().to_string(),
            self.median().map_or("-".into(), |(m, lo, hi)| {
                format!("{m:.2} ({lo:.2}..{hi:.2})")
            }),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(scenario: &str, rep: usize, mpps: f64, c2c: Option<f64>) -> Record {
        Record {
            scenario: scenario.into(),
            size: 64,
            chain: 0,
            rep,
            result: RecordResult::Ok(Outcome {
                mpps,
                c2c_ns: c2c,
                ..Outcome::default()
            }),
        }
    }

    #[test]
    fn pairs_only_trials_of_one_rep_and_one_placement() {
        let records = vec![
            // rep 1: both near -> 20/10
            rec("a", 1, 20.0, Some(70.0)),
            rec("b", 1, 10.0, Some(80.0)),
            // rep 2: placement changed between the trials -> no pair
            rec("a", 2, 30.0, Some(70.0)),
            rec("b", 2, 10.0, Some(400.0)),
            // rep 3: both far -> 8/10
            rec("a", 3, 8.0, Some(390.0)),
            rec("b", 3, 10.0, Some(420.0)),
            // rep 4: b failed -> no pair
            rec("a", 4, 9.0, Some(390.0)),
            Record {
                scenario: "b".into(),
                size: 64,
                chain: 0,
                rep: 4,
                result: RecordResult::Failed("x".into()),
            },
            // rep 5: no round-trip figure -> no pair
            rec("a", 5, 9.0, None),
            rec("b", 5, 9.0, Some(400.0)),
        ];
        let p = paired(&records, (64, 0), "e2e", ("a", "b"), |o| Some(o.mpps));
        assert_eq!(p.len(), 2);
        assert_eq!(
            (p[0].placement, p[0].ratios.clone()),
            (Placement::Near, vec![2.0])
        );
        assert_eq!(
            (p[1].placement, p[1].ratios.clone()),
            (Placement::Far, vec![0.8])
        );
        assert!(paired(&records, (1518, 0), "e2e", ("a", "b"), |o| Some(o.mpps)).is_empty());
    }
}
