//! RFC 2544 §26.1-style throughput search: binary search over the offered
//! rate for the highest rate whose trial loses no more than a tolerance —
//! NDR (no drop rate, 0 loss) and PDR (partial drop rate, by default
//! ≤ 0.5 % loss) in one run.
//!
//! The search is generic over the trial: `trial(&Trial)` offers
//! `rate_pps` for `secs` to whatever is under test and returns how many
//! packets were sent and received, so tests drive it with a synthetic
//! model and `nfvswitch ndr` with a real switch.
//!
//! Procedure: the first trial runs at `max_rate`. Then PDR is bisected
//! between its highest passing and lowest failing rate until they are at
//! most `resolution` apart, then NDR likewise (every trial narrows both
//! bounds: a trial that passes NDR passes PDR, one that fails PDR fails
//! NDR). A bound that has only failures left is checked at `min_rate`;
//! if that fails too the result is `None` ("below min_rate"). Results that
//! contradict the bounds found so far (a noisy switch passing above a
//! failure) are reported but do not move the bounds, so the search always
//! ends, after about log2((max − min) / resolution) trials per goal.

/// Bisection stops when the interval is this narrow.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Resolution {
    Pps(f64),
    /// Percent of `max_rate`.
    Percent(f64),
}

impl Resolution {
    pub fn pps(&self, max_rate: f64) -> f64 {
        match *self {
            Resolution::Pps(p) => p,
            Resolution::Percent(p) => max_rate * p / 100.0,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SearchConfig {
    /// Lowest rate searched (packets per second, > 0).
    pub min_rate: f64,
    /// Highest rate searched, tried first.
    pub max_rate: f64,
    pub resolution: Resolution,
    /// Length of each trial in seconds (passed to the trial).
    pub trial_secs: f64,
    /// Loss ratio NDR tolerates (0: none).
    pub ndr_loss: f64,
    /// Loss ratio PDR tolerates (0.005 = 0.5 %).
    pub pdr_loss: f64,
}

impl Default for SearchConfig {
    fn default() -> Self {
        SearchConfig {
            min_rate: 1000.0,
            max_rate: 1_000_000.0,
            resolution: Resolution::Percent(0.5),
            trial_secs: 2.0,
            ndr_loss: 0.0,
            pdr_loss: 0.005,
        }
    }
}

/// What one trial sent and received.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TrialResult {
    pub sent: u64,
    pub received: u64,
}

impl TrialResult {
    pub fn lost(&self) -> u64 {
        self.sent.saturating_sub(self.received)
    }
    /// Lost / sent (0 when nothing was sent).
    pub fn loss_ratio(&self) -> f64 {
        if self.sent == 0 {
            0.0
        } else {
            self.lost() as f64 / self.sent as f64
        }
    }
    /// Whether the loss is within `tolerance` (a ratio; 0 = no loss).
    pub fn passes(&self, tolerance: f64) -> bool {
        self.lost() as f64 <= tolerance * self.sent as f64
    }
}

/// Which threshold a trial is narrowing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Goal {
    Ndr,
    Pdr,
}

impl Goal {
    pub fn as_str(&self) -> &'static str {
        match self {
            Goal::Ndr => "NDR",
            Goal::Pdr => "PDR",
        }
    }
}

/// A trial to run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Trial {
    /// 1-based.
    pub index: usize,
    pub goal: Goal,
    pub rate_pps: f64,
    pub secs: f64,
}

/// Where a threshold stands: highest passing rate, lowest failing rate.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Bounds {
    pub pass: Option<f64>,
    pub fail: Option<f64>,
}

/// Reported before and after every trial.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Progress {
    Start(Trial),
    Done {
        trial: Trial,
        result: TrialResult,
        ndr: Bounds,
        pdr: Bounds,
    },
}

/// A threshold found: the rate and the trial that passed there.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Found {
    pub rate_pps: f64,
    pub result: TrialResult,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SearchResult {
    /// `None`: even `min_rate` lost packets.
    pub ndr: Option<Found>,
    pub pdr: Option<Found>,
    /// Every trial in order.
    pub trials: Vec<(Trial, TrialResult)>,
}

/// Safety net against a misbehaving trial function (never reached by the
/// bisection itself).
const MAX_TRIALS: usize = 200;

struct Side {
    tolerance: f64,
    pass: Option<Found>,
    fail: Option<f64>,
}

impl Side {
    fn bounds(&self) -> Bounds {
        Bounds {
            pass: self.pass.map(|f| f.rate_pps),
            fail: self.fail,
        }
    }
    /// Narrows the bounds with a trial's outcome (if consistent with them).
    fn update(&mut self, rate: f64, result: TrialResult) {
        let above_pass = self.pass.is_none_or(|p| rate > p.rate_pps);
        let below_fail = self.fail.is_none_or(|f| rate < f);
        if !(above_pass && below_fail) {
            return;
        }
        if result.passes(self.tolerance) {
            self.pass = Some(Found {
                rate_pps: rate,
                result,
            });
        } else {
            self.fail = Some(rate);
        }
    }
    /// The next rate to try, or `None` when this side is settled.
    fn next(&self, cfg: &SearchConfig, resolution: f64) -> Option<f64> {
        let Some(fail) = self.fail else {
            // Only passes so far: the first trial is at max_rate, so a
            // pass means max_rate passed.
            return self.pass.is_none().then_some(cfg.max_rate);
        };
        if fail <= cfg.min_rate {
            return None;
        }
        let lo = self.pass.map_or(cfg.min_rate, |p| p.rate_pps);
        if fail - lo > resolution {
            Some((lo + fail) / 2.0)
        } else if self.pass.is_none() {
            Some(cfg.min_rate)
        } else {
            None
        }
    }
}

/// Runs the search; see the module docs.
pub fn search(
    cfg: &SearchConfig,
    mut trial: impl FnMut(&Trial) -> TrialResult,
    mut progress: impl FnMut(&Progress),
) -> SearchResult {
    let resolution = cfg.resolution.pps(cfg.max_rate).max(f64::MIN_POSITIVE);
    let mut ndr = Side {
        tolerance: cfg.ndr_loss,
        pass: None,
        fail: None,
    };
    let mut pdr = Side {
        tolerance: cfg.pdr_loss,
        pass: None,
        fail: None,
    };
    let mut trials = Vec::new();
    for goal in [Goal::Pdr, Goal::Ndr] {
        while trials.len() < MAX_TRIALS {
            let side = if goal == Goal::Pdr { &pdr } else { &ndr };
            let Some(rate_pps) = side.next(cfg, resolution) else {
                break;
            };
            let t = Trial {
                index: trials.len() + 1,
                goal,
                rate_pps,
                secs: cfg.trial_secs,
            };
            progress(&Progress::Start(t));
            let result = trial(&t);
            ndr.update(rate_pps, result);
            pdr.update(rate_pps, result);
            progress(&Progress::Done {
                trial: t,
                result,
                ndr: ndr.bounds(),
                pdr: pdr.bounds(),
            });
            trials.push((t, result));
        }
    }
    SearchResult {
        ndr: ndr.pass,
        pdr: pdr.pass,
        trials,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A switch that forwards at most `capacity` pps and drops the rest,
    /// plus a constant loss ratio `noise` at any rate.
    fn model(capacity: f64, noise: f64) -> impl FnMut(&Trial) -> TrialResult {
        move |t| {
            let sent = (t.rate_pps * t.secs).round() as u64;
            let through = sent.min((capacity * t.secs).floor() as u64);
            let received = through - (through as f64 * noise).ceil() as u64;
            TrialResult { sent, received }
        }
    }

    fn cfg(min: f64, max: f64, res: Resolution) -> SearchConfig {
        SearchConfig {
            min_rate: min,
            max_rate: max,
            resolution: res,
            trial_secs: 1.0,
            ..Default::default()
        }
    }

    #[test]
    fn finds_ndr_and_pdr_of_a_capacity_model_within_the_resolution() {
        use Resolution::*;
        // (capacity pps, min, max, resolution)
        let cases = [
            (1_000_000.0, 1000.0, 10_000_000.0, Percent(0.5)),
            (1_000_000.0, 1000.0, 10_000_000.0, Pps(1000.0)),
            (123_457.0, 10_000.0, 200_000.0, Pps(100.0)),
            (5_000_000.0, 1.0, 14_880_952.0, Percent(0.1)),
            (999.0, 1.0, 1_000_000.0, Pps(1.0)),
        ];
        for (cap, min, max, res) in cases {
            let c = cfg(min, max, res);
            let r = search(&c, model(cap, 0.0), |_| {});
            let res_pps = res.pps(max);
            let ndr = r.ndr.expect("ndr").rate_pps;
            let pdr = r.pdr.expect("pdr").rate_pps;
            // Loss-free up to the capacity (+ rounding of the packet count).
            assert!(ndr <= cap + 1.0 && ndr >= cap - res_pps, "{cap}: ndr {ndr}");
            // 0.5 % loss where rate = capacity / 0.995.
            let pdr_true = cap / 0.995;
            assert!(
                pdr <= pdr_true + 1.0 && pdr >= pdr_true - res_pps,
                "{cap}: pdr {pdr} vs {pdr_true}"
            );
            assert_eq!(r.ndr.unwrap().result.lost(), 0);
            assert!(r.pdr.unwrap().result.loss_ratio() <= 0.005);
            let steps = ((max - min) / res_pps).log2().ceil() as usize;
            assert!(
                r.trials.len() <= 2 * steps + 3,
                "{cap}: {} trials",
                r.trials.len()
            );
        }
    }

    #[test]
    fn edges() {
        let res = Resolution::Percent(1.0);
        // Capacity above max: one trial at max settles both.
        let r = search(&cfg(1e3, 1e6, res), model(2e6, 0.0), |_| {});
        assert_eq!(r.trials.len(), 1);
        assert_eq!(r.ndr.unwrap().rate_pps, 1e6);
        assert_eq!(r.pdr.unwrap().rate_pps, 1e6);
        // Capacity below min: nothing found; min was tried.
        let r = search(&cfg(1e4, 1e6, res), model(5e3, 0.0), |_| {});
        assert_eq!((r.ndr, r.pdr), (None, None));
        assert!(r.trials.iter().any(|(t, _)| t.rate_pps == 1e4));
        // A constant 0.1 % loss: never loss-free, but within PDR at max.
        let r = search(&cfg(1e3, 1e6, res), model(1e9, 0.001), |_| {});
        assert_eq!(r.ndr, None);
        assert_eq!(r.pdr.unwrap().rate_pps, 1e6);
        // A constant 1 % loss: neither.
        let r = search(&cfg(1e3, 1e6, res), model(1e9, 0.01), |_| {});
        assert_eq!((r.ndr, r.pdr), (None, None));
    }

    #[test]
    fn progress_brackets_every_trial_and_bounds_only_narrow() {
        let mut events = Vec::new();
        // A 20 % PDR tolerance puts PDR (500 kpps) well above NDR (400 kpps).
        let c = SearchConfig {
            pdr_loss: 0.2,
            ..cfg(1e3, 1e6, Resolution::Percent(0.5))
        };
        let r = search(&c, model(400_000.0, 0.0), |p| events.push(*p));
        assert!((r.pdr.unwrap().rate_pps - 500_000.0).abs() <= 5000.0);
        assert!((r.ndr.unwrap().rate_pps - 400_000.0).abs() <= 5000.0);
        assert_eq!(events.len(), 2 * r.trials.len());
        let mut last_pdr = Bounds::default();
        for (i, pair) in events.chunks(2).enumerate() {
            let (
                Progress::Start(t),
                Progress::Done {
                    trial, pdr, ndr, ..
                },
            ) = (pair[0], pair[1])
            else {
                panic!("event order: {pair:?}");
            };
            assert_eq!((t, t.index), (trial, i + 1));
            assert!(ndr.pass.unwrap_or(0.0) <= pdr.pass.unwrap_or(0.0) || pdr.pass.is_none());
            if let (Some(a), Some(b)) = (last_pdr.pass, pdr.pass) {
                assert!(b >= a);
            }
            if let (Some(a), Some(b)) = (last_pdr.fail, pdr.fail) {
                assert!(b <= a);
            }
            last_pdr = pdr;
        }
        // PDR is searched first, then NDR.
        let goals: Vec<Goal> = r.trials.iter().map(|(t, _)| t.goal).collect();
        let first_ndr = goals.iter().position(|g| *g == Goal::Ndr).unwrap();
        assert!(goals[first_ndr..].iter().all(|g| *g == Goal::Ndr));
    }

    #[test]
    fn a_noisy_switch_cannot_make_the_search_run_forever() {
        let mut n = 0u64;
        let r = search(
            &cfg(1.0, 1e9, Resolution::Pps(1e-3)),
            |t| {
                n += 1;
                let sent = (t.rate_pps * t.secs) as u64 + 1;
                TrialResult {
                    sent,
                    received: if n.is_multiple_of(3) { sent } else { sent - 1 },
                }
            },
            |_| {},
        );
        assert!(r.trials.len() <= MAX_TRIALS);
    }
}
