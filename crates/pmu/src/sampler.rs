//! The measured thread's side: [`PmuSampler`] turns a [`CounterSource`]'s
//! totals into [`PmuSnapshot`]s, and clears and switches counting.

use crate::event::{N_EVENTS, Reading, Unsupported};
use crate::snapshot::PmuSnapshot;
use crate::source::CounterSource;

/// The measured thread's side: a counter source (or none: switched off),
/// the baseline of the last clear, and the generation.
pub struct PmuSampler {
    source: Option<Box<dyn CounterSource>>,
    base: [Reading; N_EVENTS],
    generation: u64,
    epoch_ns: u64,
}

impl PmuSampler {
    /// `source` `None` = counting switched off: snapshots say
    /// [`Unsupported::Disabled`] and sampling costs nothing.
    pub fn new(source: Option<Box<dyn CounterSource>>, now_ns: u64) -> PmuSampler {
        PmuSampler {
            source,
            base: [Reading::Value(0); N_EVENTS],
            generation: 1,
            epoch_ns: now_ns,
        }
    }

    pub fn enabled(&self) -> bool {
        self.source.is_some()
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Replaces the source (dropping the old one closes its counters);
    /// totals restart from zero.
    pub fn set_source(&mut self, source: Option<Box<dyn CounterSource>>, now_ns: u64) {
        self.source = source;
        self.base = [Reading::Value(0); N_EVENTS];
        self.generation += 1;
        self.epoch_ns = now_ns;
    }

    /// Totals restart from zero now (clear-stats).
    pub fn clear(&mut self, now_ns: u64) {
        self.base = match &mut self.source {
            Some(s) => s.read(),
            None => [Reading::Value(0); N_EVENTS],
        };
        self.generation += 1;
        self.epoch_ns = now_ns;
    }

    /// Reads the source: totals since the epoch, stamped with `now_ns`
    /// and `packets` (the caller's work count, also reset on clear).
    pub fn sample(&mut self, now_ns: u64, packets: u64) -> PmuSnapshot {
        let (mut readings, user_only) = match &mut self.source {
            Some(s) => (s.read(), s.user_only()),
            None => ([Reading::Unsupported(Unsupported::Disabled); N_EVENTS], 0),
        };
        for (r, b) in readings.iter_mut().zip(&self.base) {
            if let (Reading::Value(v), Reading::Value(b)) = (*r, *b) {
                *r = Reading::Value(v.saturating_sub(b));
            }
        }
        PmuSnapshot {
            generation: self.generation,
            epoch_ns: self.epoch_ns,
            time_ns: now_ns,
            packets,
            user_only,
            readings,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Event;
    use crate::fake::FakeSource;

    #[test]
    fn sampler_clears_switches_off_and_on() {
        let fake = FakeSource::new();
        fake.set(Event::Instructions, Reading::Value(1_000));
        let mut s = PmuSampler::new(Some(Box::new(fake.clone())), 0);
        let a = s.sample(10, 5);
        assert_eq!(a.generation, 1);
        assert_eq!(a.get(Event::Instructions), Reading::Value(1_000));
        assert_eq!((a.time_ns, a.packets), (10, 5));

        s.clear(20);
        fake.add(Event::Instructions, 300);
        let b = s.sample(30, 2);
        assert_eq!(b.generation, 2);
        assert_eq!(b.epoch_ns, 20);
        assert_eq!(b.get(Event::Instructions), Reading::Value(300));

        s.set_source(None, 40);
        assert!(!s.enabled());
        let c = s.sample(50, 9);
        assert_eq!(c.generation, 3);
        assert!(
            c.readings
                .iter()
                .all(|r| *r == Reading::Unsupported(Unsupported::Disabled))
        );

        // Switched on again: a fresh source counts from zero.
        let fresh = FakeSource::new();
        fresh.set(Event::Cycles, Reading::Value(42));
        s.set_source(Some(Box::new(fresh)), 60);
        let d = s.sample(70, 1);
        assert_eq!(d.generation, 4);
        assert_eq!(d.get(Event::Cycles), Reading::Value(42));
        assert_eq!(d.since(&c).get(Event::Cycles), Reading::Value(42));
    }
}
