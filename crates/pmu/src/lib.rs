//! Performance counters of one thread, for a PMD's "how well is this core
//! doing" figures: hardware instructions, cycles, cache references and
//! misses, last-level-cache read misses and dTLB load misses; software
//! context switches, task clock and page faults.
//!
//! Each counter stands on its own: on a VM without a virtual PMU the
//! hardware counters are [`Unsupported`] (with the kernel's reason) while
//! the software ones still count. Derived figures ([`Derived`]: IPC, cache
//! miss %, misses per packet, context switches per second) come from the
//! difference of two [`PmuSnapshot`]s ([`PmuDelta`]) and are unavailable,
//! with a reason, when any of their inputs is.
//!
//! The pieces:
//! * [`CounterSource`] reads every counter's running total. [`PerfSource`]
//!   is the real one (`perf_event_open` for the calling thread on any CPU);
//!   [`FakeSource`] is set by tests.
//! * [`PmuSampler`], owned by the measured thread, turns a source's totals
//!   into [`PmuSnapshot`]s stamped with time and packets, and handles
//!   clearing and switching counting on and off (totals restart from zero
//!   in a new generation).
//! * [`SharedPmu`]: a cache-line-aligned seqlock of atomics; the measured
//!   thread publishes, any thread loads a consistent snapshot.
//!
//! Cost: reading is one `read(2)` per open counter (a few µs for all of
//! them, more in a VM where PMU accesses trap), so a PMD samples every
//! ~100 ms from its housekeeping, never per packet. Sampling and
//! publishing do not allocate.

mod derived;
mod fake;
mod perf;
mod shared;

pub use derived::{Derived, Metric};
pub use fake::FakeSource;
pub use perf::PerfSource;
pub use shared::SharedPmu;

/// Number of counters ([`Event::ALL`]).
pub const N_EVENTS: usize = 9;

/// One counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Event {
    Instructions,
    Cycles,
    CacheReferences,
    CacheMisses,
    /// Last-level cache read (load) misses (`LLC-load-misses`).
    LlcReadMisses,
    /// Data TLB load misses (`dTLB-load-misses`).
    DtlbLoadMisses,
    ContextSwitches,
    /// CPU time of the thread in nanoseconds.
    TaskClock,
    PageFaults,
}

impl Event {
    pub const ALL: [Event; N_EVENTS] = [
        Event::Instructions,
        Event::Cycles,
        Event::CacheReferences,
        Event::CacheMisses,
        Event::LlcReadMisses,
        Event::DtlbLoadMisses,
        Event::ContextSwitches,
        Event::TaskClock,
        Event::PageFaults,
    ];

    /// Position in [`Event::ALL`] and in snapshot arrays.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Name as `perf list` spells it (lower case).
    pub const fn name(self) -> &'static str {
        match self {
            Event::Instructions => "instructions",
            Event::Cycles => "cycles",
            Event::CacheReferences => "cache-references",
            Event::CacheMisses => "cache-misses",
            Event::LlcReadMisses => "llc-load-misses",
            Event::DtlbLoadMisses => "dtlb-load-misses",
            Event::ContextSwitches => "context-switches",
            Event::TaskClock => "task-clock",
            Event::PageFaults => "page-faults",
        }
    }

    /// Counted by the CPU's PMU (absent on many VMs), as opposed to the
    /// kernel's software counters.
    pub const fn is_hardware(self) -> bool {
        !matches!(
            self,
            Event::ContextSwitches | Event::TaskClock | Event::PageFaults
        )
    }

    /// Unit of the value: "ns" for the task clock, else events.
    pub const fn unit(self) -> &'static str {
        match self {
            Event::TaskClock => "ns",
            _ => "events",
        }
    }
}

/// Why a counter has no value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unsupported {
    /// The measuring thread has not published a reading yet.
    NotYetRead,
    /// Counting is switched off (datapath `pmu = false`).
    Disabled,
    /// `perf_event_open` failed with this errno.
    Open(i32),
    /// Reading the counter failed with this errno.
    Read(i32),
    /// Opened, but the kernel never had a free hardware counter for it.
    NotScheduled,
}

fn os_error(errno: i32) -> String {
    std::io::Error::from_raw_os_error(errno).to_string()
}

fn paranoid() -> String {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .map_or_else(|_| "unknown".into(), |s| s.trim().to_string())
}

impl Unsupported {
    /// A sentence for humans: what happened and, where known, why.
    pub fn reason(self, event: Event) -> String {
        match self {
            Unsupported::NotYetRead => "no reading yet".into(),
            Unsupported::Disabled => "PMU counters are switched off (pmu = false)".into(),
            Unsupported::NotScheduled => {
                "never scheduled: no free hardware counter (all in use by others)".into()
            }
            Unsupported::Read(e) => format!("read failed: {}", os_error(e)),
            Unsupported::Open(e) => {
                let os = os_error(e);
                match e {
                    libc::ENOENT | libc::ENODEV | libc::EOPNOTSUPP | libc::EINVAL
                        if event.is_hardware() =>
                    {
                        format!("hardware event not supported by this CPU/VM ({os})")
                    }
                    libc::EACCES | libc::EPERM => format!(
                        "not permitted (kernel.perf_event_paranoid = {}; needs root or CAP_PERFMON): {os}",
                        paranoid()
                    ),
                    libc::ENOSYS => format!("perf_event_open is not available here ({os})"),
                    _ => format!("cannot open: {os}"),
                }
            }
        }
    }
}

/// One counter's value, or why there is none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reading {
    Value(u64),
    Unsupported(Unsupported),
}

impl Reading {
    pub fn value(self) -> Option<u64> {
        match self {
            Reading::Value(v) => Some(v),
            Reading::Unsupported(_) => None,
        }
    }
    pub fn unsupported(self) -> Option<Unsupported> {
        match self {
            Reading::Value(_) => None,
            Reading::Unsupported(u) => Some(u),
        }
    }
}

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

/// Reads every counter's running total. Implementations are used by one
/// thread (the measured one) and must not allocate in `read`.
pub trait CounterSource: Send {
    /// Totals since the source was opened, indexed by [`Event::index`].
    fn read(&mut self) -> [Reading; N_EVENTS];
    /// Bit [`Event::index`] set: that counter counts user space only.
    fn user_only(&self) -> u16 {
        0
    }
}

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

    #[test]
    fn reasons_name_the_cause() {
        let hw = Unsupported::Open(libc::ENOENT).reason(Event::Cycles);
        assert!(hw.contains("not supported by this CPU/VM"), "{hw}");
        let perm = Unsupported::Open(libc::EACCES).reason(Event::ContextSwitches);
        assert!(perm.contains("perf_event_paranoid"), "{perm}");
        let off = Unsupported::Disabled.reason(Event::TaskClock);
        assert!(off.contains("switched off"), "{off}");
        assert_eq!(Event::ALL.len(), N_EVENTS);
        for (i, e) in Event::ALL.iter().enumerate() {
            assert_eq!(e.index(), i);
        }
    }
}
