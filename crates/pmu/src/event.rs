//! The counters ([`Event`]) and what one of them reads: a value, or why
//! there is none ([`Reading`], [`Unsupported`]).

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

#[cfg(test)]
mod tests {
    use super::*;

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
