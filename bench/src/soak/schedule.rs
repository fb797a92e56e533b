//! The soak's seeded random schedule: which disruption comes next and
//! when. Pure (no I/O), so one seed gives one sequence of draws; what a
//! draw does can still depend on the state it meets (e.g. no temporary
//! port to remove), which the caller decides deterministically too.

use std::time::Duration;

/// splitmix64: small, fast, and good enough to pick events (not crypto).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        debug_assert!(lo <= hi);
        lo + self.next_u64() % (hi - lo + 1)
    }

    /// Uniform index below `n` (n > 0).
    pub fn index(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// True with probability `percent` / 100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.range(1, 100) <= percent
    }

    /// A duration uniform in `lo..=hi` milliseconds.
    pub fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(self.range(lo, hi))
    }
}

/// The kinds of disruption.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// SIGKILL one long-lived VNF; it is restarted after a random pause.
    KillVnf,
    /// Stop one long-lived VNF cleanly (SIGINT) and start it again at
    /// once: a new session, so the switch gets a new memory table.
    ReconnectVnf,
    /// A temporary vhost-user port with its own generator and VNF.
    AddPort,
    /// Remove a temporary port (its VNF, rules and generator go too, in
    /// a random order, sometimes while traffic still flows into it).
    RemovePort,
    /// Add or delete a batch of rules that match no traffic.
    FlowChurn,
    /// Replace one steering rule of a chain by an equal one of higher
    /// priority, or take that override away again (live traffic moves
    /// between rules; the exact-match caches must follow).
    SteeringFlap,
}

impl Kind {
    pub const ALL: [Kind; 6] = [
        Kind::KillVnf,
        Kind::ReconnectVnf,
        Kind::AddPort,
        Kind::RemovePort,
        Kind::FlowChurn,
        Kind::SteeringFlap,
    ];

    /// Relative weight in the draw.
    fn weight(self) -> u64 {
        match self {
            Kind::KillVnf => 3,
            Kind::ReconnectVnf => 2,
            Kind::AddPort => 2,
            Kind::RemovePort => 2,
            Kind::FlowChurn => 3,
            Kind::SteeringFlap => 2,
        }
    }
}

/// The sequence of events: the first [`Kind::ALL`].len() are every kind
/// once in a shuffled order (so even a short run exercises each), then
/// weighted draws.
pub struct Schedule {
    rng: Rng,
    mean_gap: Duration,
    first: Vec<Kind>,
}

impl Schedule {
    pub fn new(rng: &mut Rng, mean_gap: Duration) -> Schedule {
        let mut first = Kind::ALL.to_vec();
        for j in (1..first.len()).rev() {
            first.swap(j, rng.index(j + 1));
        }
        first.reverse(); // popped from the back
        Schedule {
            rng: Rng::new(rng.next_u64()),
            mean_gap,
            first,
        }
    }

    /// The pause before the next event and its kind.
    pub fn next(&mut self) -> (Duration, Kind) {
        let (gap, drawn) = draw(&mut self.rng, self.mean_gap);
        (gap, self.first.pop().unwrap_or(drawn))
    }
}

/// Draws an event: the pause before it and its kind.
fn draw(rng: &mut Rng, mean_gap: Duration) -> (Duration, Kind) {
    let mean = mean_gap.as_millis().max(2) as u64;
    let gap = rng.millis(mean / 2, mean + mean / 2);
    let total: u64 = Kind::ALL.iter().map(|k| k.weight()).sum();
    let mut pick = rng.range(0, total - 1);
    for k in Kind::ALL {
        if pick < k.weight() {
            return (gap, k);
        }
        pick -= k.weight();
    }
    unreachable!("the weights sum to total")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_seed_one_schedule_and_every_kind_first() {
        let events = |seed| {
            let mut rng = Rng::new(seed);
            let mut s = Schedule::new(&mut rng, Duration::from_secs(2));
            (0..400).map(|_| s.next()).collect::<Vec<_>>()
        };
        let a = events(7);
        assert_eq!(a, events(7));
        assert_ne!(a, events(8));
        let n = Kind::ALL.len();
        for k in Kind::ALL {
            assert_eq!(a[..n].iter().filter(|(_, x)| *x == k).count(), 1, "{k:?}");
            assert!(a[n..].iter().any(|(_, x)| *x == k), "{k:?} never drawn");
        }
        for (gap, _) in &a {
            assert!((1000..=3000).contains(&gap.as_millis()), "{gap:?}");
        }
    }

    #[test]
    fn ranges_stay_inside_their_bounds() {
        let mut rng = Rng::new(1);
        for (lo, hi) in [(0, 0), (3, 9), (1, 100), (u64::MAX - 1, u64::MAX - 1)] {
            for _ in 0..100 {
                let v = rng.range(lo, hi);
                assert!((lo..=hi).contains(&v), "{v} not in {lo}..={hi}");
            }
        }
        assert!((0..5).contains(&rng.index(5)));
    }
}
