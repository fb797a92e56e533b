//! Automatic load balancing (OVS's `pmd-auto-lb`): when to move rx
//! queues on their own, decided once per measurement interval.

use crate::assign::{Algorithm, Placement, assign, moves, pmd_loads, variance};
use crate::history::INTERVALS;
use crate::types::{Pmd, RxqId, RxqLoad};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;

/// `[pmd]` auto load balance settings (defaults as OVS's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AutoLbConfig {
    pub enabled: bool,
    /// A PMD is overloaded when busy at least this percentage in every
    /// interval of the history (OVS `pmd-auto-lb-load-threshold`, 95).
    pub load_threshold: u8,
    /// The dry run must improve the variance of the PMDs' loads by at
    /// least this percentage (`pmd-auto-lb-improvement-threshold`, 25).
    pub improvement_threshold: u8,
    /// Seconds between two rebalances at least (`pmd-auto-lb-rebal-interval`,
    /// one minute).
    pub interval_s: u64,
}

impl Default for AutoLbConfig {
    fn default() -> AutoLbConfig {
        AutoLbConfig {
            enabled: false,
            load_threshold: 95,
            improvement_threshold: 25,
            interval_s: 60,
        }
    }
}

/// A placement computed but not applied, with the loads before and after
/// as estimated from the queues' measured cycles.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DryRun {
    pub algorithm: Algorithm,
    #[serde(skip)]
    pub placement: Placement,
    /// (queue, from PMD, to PMD).
    pub moves: Vec<(RxqId, usize, usize)>,
    /// Per PMD (in the order given), percent of the window.
    pub current_loads: Vec<f64>,
    pub estimated_loads: Vec<f64>,
    pub current_variance: f64,
    pub estimated_variance: f64,
    /// How much lower the estimated variance is, in percent of the
    /// current one (0 when the current one is 0).
    pub improvement: f64,
}

/// The dry run of `algo` over the measured loads.
pub fn dry_run(
    algo: Algorithm,
    pmds: &[Pmd],
    rxqs: &[RxqLoad],
    current: &Placement,
    window: u64,
) -> DryRun {
    let placement = assign(algo, pmds, rxqs);
    let current_loads = pmd_loads(pmds, rxqs, current, window);
    let estimated_loads = pmd_loads(pmds, rxqs, &placement, window);
    let current_variance = variance(&current_loads);
    let estimated_variance = variance(&estimated_loads);
    let improvement = if current_variance > 0.0 {
        100.0 * (current_variance - estimated_variance) / current_variance
    } else {
        0.0
    };
    DryRun {
        algorithm: algo,
        moves: moves(current, &placement),
        placement,
        current_loads,
        estimated_loads,
        current_variance,
        estimated_variance,
        improvement,
    }
}

/// Why auto load balancing left the queues where they are.
#[derive(Clone, Debug, PartialEq)]
pub enum Skip {
    Disabled,
    /// `roundrobin` ignores loads: nothing to balance with.
    RoundRobin,
    TooFewPmds,
    NoPmdWithSeveralRxqs,
    /// No PMD was over the threshold in all of the last [`INTERVALS`].
    NotOverloaded,
    TooSoon {
        wait_s: u64,
    },
    NoMoves,
    SmallImprovement {
        improvement: f64,
        threshold: u8,
    },
}

/// What one auto load balancing check decided.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    Rebalance(DryRun),
    Skip(Skip),
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Decision::Rebalance(d) => write!(
                f,
                "rebalancing: variance improvement {:.0} % ({:.1} -> {:.1}), {} queue(s) move",
                d.improvement,
                d.current_variance,
                d.estimated_variance,
                d.moves.len()
            ),
            Decision::Skip(s) => match s {
                Skip::Disabled => f.write_str("auto load balance is off"),
                Skip::RoundRobin => {
                    f.write_str("nothing to do: roundrobin assignment ignores load")
                }
                Skip::TooFewPmds => f.write_str("nothing to do: fewer than 2 PMDs"),
                Skip::NoPmdWithSeveralRxqs => {
                    f.write_str("nothing to do: no PMD polls more than one rx queue")
                }
                Skip::NotOverloaded => write!(
                    f,
                    "nothing to do: no PMD over the load threshold in all of the last {INTERVALS} intervals"
                ),
                Skip::TooSoon { wait_s } => {
                    write!(
                        f,
                        "not yet: the last rebalance was too recent ({wait_s} s to wait)"
                    )
                }
                Skip::NoMoves => f.write_str("dry run moves no queue"),
                Skip::SmallImprovement {
                    improvement,
                    threshold,
                } => write!(
                    f,
                    "dry run: variance improvement {improvement:.0} % is below the {threshold} % threshold"
                ),
            },
        }
    }
}

/// The auto load balancer's state: consecutive overloaded intervals per
/// PMD and when it last moved queues.
#[derive(Clone, Debug)]
pub struct AutoLb {
    pub cfg: AutoLbConfig,
    overloaded: BTreeMap<usize, usize>,
    last_rebalance_s: Option<u64>,
}

impl AutoLb {
    pub fn new(cfg: AutoLbConfig) -> AutoLb {
        AutoLb {
            cfg,
            overloaded: BTreeMap::new(),
            last_rebalance_s: None,
        }
    }

    /// An interval ended with these PMD busy percentages: a PMD's count of
    /// consecutive intervals at or over the threshold grows, or restarts.
    pub fn interval_done(&mut self, busy: &[(usize, f64)]) {
        let mut next = BTreeMap::new();
        for &(pmd, pct) in busy {
            let n = self.overloaded.get(&pmd).copied().unwrap_or(0);
            next.insert(
                pmd,
                if pct >= f64::from(self.cfg.load_threshold) {
                    n + 1
                } else {
                    0
                },
            );
        }
        self.overloaded = next;
    }

    /// Whether to move queues now (`now_s`: the caller's clock, seconds).
    /// A `Rebalance` is taken as done: the clock of the interval restarts
    /// and overload must build up again.
    pub fn decide(
        &mut self,
        now_s: u64,
        algo: Algorithm,
        pmds: &[Pmd],
        rxqs: &[RxqLoad],
        current: &Placement,
        window: u64,
    ) -> Decision {
        let skip = |s| Decision::Skip(s);
        if !self.cfg.enabled {
            return skip(Skip::Disabled);
        }
        if algo == Algorithm::RoundRobin {
            return skip(Skip::RoundRobin);
        }
        if pmds.len() < 2 {
            return skip(Skip::TooFewPmds);
        }
        let several = pmds
            .iter()
            .any(|p| current.values().filter(|&&v| v == p.index).count() > 1);
        if !several {
            return skip(Skip::NoPmdWithSeveralRxqs);
        }
        if !self.overloaded.values().any(|&n| n >= INTERVALS) {
            return skip(Skip::NotOverloaded);
        }
        if let Some(last) = self.last_rebalance_s {
            let since = now_s.saturating_sub(last);
            if since < self.cfg.interval_s {
                return skip(Skip::TooSoon {
                    wait_s: self.cfg.interval_s - since,
                });
            }
        }
        let d = dry_run(algo, pmds, rxqs, current, window);
        if d.moves.is_empty() {
            return skip(Skip::NoMoves);
        }
        if d.improvement < f64::from(self.cfg.improvement_threshold) {
            return skip(Skip::SmallImprovement {
                improvement: d.improvement,
                threshold: self.cfg.improvement_threshold,
            });
        }
        self.rebalanced(now_s);
        Decision::Rebalance(d)
    }

    /// Queues moved at `now_s` (by this or by hand).
    pub fn rebalanced(&mut self, now_s: u64) {
        self.last_rebalance_s = Some(now_s);
        self.overloaded.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pmds(n: usize) -> Vec<Pmd> {
        (0..n)
            .map(|index| Pmd {
                index,
                core: Some(index),
            })
            .collect()
    }

    fn rxq(queue: usize, cycles: u64) -> RxqLoad {
        RxqLoad {
            id: RxqId { port: 1, queue },
            cycles,
        }
    }

    /// Two PMDs, PMD 0 polling three queues (60 + 20 + 18 = 98 % of a
    /// window of 100), PMD 1 one idle queue.
    struct World {
        pmds: Vec<Pmd>,
        rxqs: Vec<RxqLoad>,
        current: Placement,
    }

    fn world() -> World {
        let rxqs = vec![rxq(0, 60), rxq(1, 20), rxq(2, 18), rxq(3, 0)];
        let current = rxqs
            .iter()
            .map(|r| (r.id, if r.id.queue < 3 { 0 } else { 1 }))
            .collect();
        World {
            pmds: pmds(2),
            rxqs,
            current,
        }
    }

    fn on() -> AutoLbConfig {
        AutoLbConfig {
            enabled: true,
            ..AutoLbConfig::default()
        }
    }

    /// Feeds `n` intervals with PMD 0 at `busy0` percent, PMD 1 at 5.
    fn feed(lb: &mut AutoLb, n: usize, busy0: f64) {
        for _ in 0..n {
            lb.interval_done(&[(0, busy0), (1, 5.0)]);
        }
    }

    fn decide(lb: &mut AutoLb, w: &World, now: u64, algo: Algorithm) -> Decision {
        lb.decide(now, algo, &w.pmds, &w.rxqs, &w.current, 100)
    }

    #[test]
    fn twelve_overloaded_intervals_and_a_good_dry_run_rebalance() {
        let w = world();
        let mut lb = AutoLb::new(on());
        feed(&mut lb, INTERVALS, 98.0);
        let Decision::Rebalance(d) = decide(&mut lb, &w, 60, Algorithm::Group) else {
            panic!("no rebalance");
        };
        // Group: 60 alone on one PMD, 20 + 18 + 0 on the other.
        assert_eq!(d.estimated_loads.iter().sum::<f64>(), 98.0);
        assert!(d.estimated_loads.contains(&60.0) && d.estimated_loads.contains(&38.0));
        assert_eq!(d.current_loads, [98.0, 0.0]);
        assert!(d.improvement > 90.0, "{}", d.improvement);
        assert!(!d.moves.is_empty());
        assert!(
            Decision::Rebalance(d.clone())
                .to_string()
                .starts_with("rebalancing: variance improvement")
        );
    }

    #[test]
    fn one_interval_under_the_threshold_restarts_the_count() {
        let w = world();
        let mut lb = AutoLb::new(on());
        feed(&mut lb, 6, 98.0);
        feed(&mut lb, 1, 94.9);
        feed(&mut lb, INTERVALS - 1, 98.0);
        assert_eq!(
            decide(&mut lb, &w, 60, Algorithm::Cycles),
            Decision::Skip(Skip::NotOverloaded)
        );
        feed(&mut lb, 1, 95.0);
        assert!(matches!(
            decide(&mut lb, &w, 60, Algorithm::Cycles),
            Decision::Rebalance(_)
        ));
    }

    #[test]
    fn the_improvement_threshold_is_a_floor() {
        // What cycles gives on this world; a threshold just above it
        // refuses, one equal to it accepts.
        let w = world();
        let d = dry_run(Algorithm::Cycles, &w.pmds, &w.rxqs, &w.current, 100);
        let got = d.improvement;
        let floor = got.floor() as u8;
        for (threshold, moves) in [(floor + 1, false), (floor, true)] {
            let mut lb = AutoLb::new(AutoLbConfig {
                improvement_threshold: threshold,
                ..on()
            });
            feed(&mut lb, INTERVALS, 99.0);
            let r = decide(&mut lb, &w, 0, Algorithm::Cycles);
            assert_eq!(
                matches!(r, Decision::Rebalance(_)),
                moves,
                "{threshold}: {r}"
            );
        }
        // A hand-made case: loads 75/25 now; group puts 40 on one PMD and
        // 35 + 25 on the other: variance 625 → 100, 84 % better.
        let rxqs = vec![rxq(0, 40), rxq(1, 35), rxq(2, 25)];
        let current: Placement = [(rxqs[0].id, 0), (rxqs[1].id, 0), (rxqs[2].id, 1)].into();
        let d = dry_run(Algorithm::Group, &w.pmds, &rxqs, &current, 100);
        assert_eq!((d.current_variance, d.estimated_variance), (625.0, 100.0));
        assert_eq!(d.improvement, 84.0);
        for (threshold, moves) in [(85, false), (84, true)] {
            let mut lb = AutoLb::new(AutoLbConfig {
                improvement_threshold: threshold,
                ..on()
            });
            feed(&mut lb, INTERVALS, 99.0);
            let r = lb.decide(0, Algorithm::Group, &w.pmds, &rxqs, &current, 100);
            assert_eq!(
                matches!(r, Decision::Rebalance(_)),
                moves,
                "{threshold}: {r}"
            );
        }
    }

    #[test]
    fn preconditions_and_the_rebalance_interval() {
        let w = world();
        let mut off = AutoLb::new(AutoLbConfig::default());
        feed(&mut off, INTERVALS, 99.0);
        assert_eq!(
            decide(&mut off, &w, 0, Algorithm::Cycles),
            Decision::Skip(Skip::Disabled)
        );
        let mut lb = AutoLb::new(on());
        feed(&mut lb, INTERVALS, 99.0);
        assert_eq!(
            decide(&mut lb, &w, 0, Algorithm::RoundRobin),
            Decision::Skip(Skip::RoundRobin)
        );
        let one = pmds(1);
        assert_eq!(
            lb.decide(0, Algorithm::Cycles, &one, &w.rxqs, &w.current, 100),
            Decision::Skip(Skip::TooFewPmds)
        );
        let spread: Placement = w.rxqs[..2].iter().map(|r| (r.id, r.id.queue)).collect();
        assert_eq!(
            lb.decide(0, Algorithm::Cycles, &w.pmds, &w.rxqs[..2], &spread, 100),
            Decision::Skip(Skip::NoPmdWithSeveralRxqs)
        );
        assert!(matches!(
            decide(&mut lb, &w, 1000, Algorithm::Group),
            Decision::Rebalance(_)
        ));
        // Overloaded again right away: the interval holds it back.
        feed(&mut lb, INTERVALS, 99.0);
        assert_eq!(
            decide(&mut lb, &w, 1059, Algorithm::Group),
            Decision::Skip(Skip::TooSoon { wait_s: 1 })
        );
        assert!(matches!(
            decide(&mut lb, &w, 1060, Algorithm::Group),
            Decision::Rebalance(_)
        ));
    }

    #[test]
    fn a_placement_already_best_moves_nothing() {
        let w = world();
        let best = assign(Algorithm::Group, &w.pmds, &w.rxqs);
        let mut lb = AutoLb::new(on());
        feed(&mut lb, INTERVALS, 99.0);
        assert_eq!(
            lb.decide(0, Algorithm::Group, &w.pmds, &w.rxqs, &best, 100),
            Decision::Skip(Skip::NoMoves)
        );
    }
}
