//! The real source: one `perf_event_open` counter per event for the
//! calling thread (pid 0, any CPU, not inherited), kernel and user mode.

use crate::{CounterSource, Event, N_EVENTS, Reading, Unsupported};
use perf_event::events::{Cache, CacheId, CacheOp, CacheResult, Hardware, Software};
use perf_event::{Builder, Counter};

enum Slot {
    Open(Counter),
    Failed(Unsupported),
}

/// Counters of the thread that called [`PerfSource::open`]; read them from
/// that thread. Each counter is opened on its own (no group), so one the
/// PMU lacks does not take the others down, and the kernel multiplexes
/// them when there are more events than hardware counters (values are
/// then scaled by time enabled / time running, as `perf stat` does).
pub struct PerfSource {
    slots: [Slot; N_EVENTS],
    user_only: u16,
}

fn builder(e: Event) -> Builder<'static> {
    match e {
        Event::Instructions => Builder::new(Hardware::INSTRUCTIONS),
        Event::Cycles => Builder::new(Hardware::CPU_CYCLES),
        Event::CacheReferences => Builder::new(Hardware::CACHE_REFERENCES),
        Event::CacheMisses => Builder::new(Hardware::CACHE_MISSES),
        Event::LlcReadMisses => Builder::new(Cache {
            which: CacheId::LL,
            operation: CacheOp::READ,
            result: CacheResult::MISS,
        }),
        Event::DtlbLoadMisses => Builder::new(Cache {
            which: CacheId::DTLB,
            operation: CacheOp::READ,
            result: CacheResult::MISS,
        }),
        Event::ContextSwitches => Builder::new(Software::CONTEXT_SWITCHES),
        Event::TaskClock => Builder::new(Software::TASK_CLOCK),
        Event::PageFaults => Builder::new(Software::PAGE_FAULTS),
    }
}

fn errno(e: &std::io::Error) -> i32 {
    match e.raw_os_error() {
        Some(n) => n,
        // The crate turns E2BIG (attr too new for this kernel) into its own error.
        None if e.kind() == std::io::ErrorKind::Unsupported => libc::E2BIG,
        None => libc::EIO,
    }
}

/// Opens one counter, enabled. Kernel mode is counted too when allowed
/// (ports spend time in syscalls); when `perf_event_paranoid` forbids it
/// the counter falls back to user space only — except context switches,
/// which happen in the kernel and would read a meaningless 0.
fn open_one(e: Event) -> Result<(Counter, bool), Unsupported> {
    let mut b = builder(e);
    b.observe_self()
        .any_cpu()
        .inherit(false)
        .exclude_kernel(false)
        .exclude_hv(true)
        .enabled(true);
    match b.build() {
        Ok(c) => Ok((c, false)),
        Err(err)
            if matches!(err.raw_os_error(), Some(libc::EACCES | libc::EPERM))
                && e != Event::ContextSwitches =>
        {
            b.exclude_kernel(true);
            b.build()
                .map(|c| (c, true))
                .map_err(|e| Unsupported::Open(errno(&e)))
        }
        Err(err) => Err(Unsupported::Open(errno(&err))),
    }
}

/// Scales a multiplexed count to the whole enabled time.
pub(crate) fn scale(count: u64, enabled_ns: u64, running_ns: u64) -> Reading {
    if running_ns == 0 {
        if enabled_ns == 0 {
            Reading::Value(count)
        } else {
            Reading::Unsupported(Unsupported::NotScheduled)
        }
    } else if running_ns >= enabled_ns {
        Reading::Value(count)
    } else {
        Reading::Value((count as u128 * enabled_ns as u128 / running_ns as u128) as u64)
    }
}

impl PerfSource {
    /// Opens every counter for the calling thread. Never fails as a whole:
    /// a counter that cannot be opened reads as unsupported, with the
    /// kernel's errno.
    pub fn open() -> PerfSource {
        let mut user_only = 0u16;
        let slots = Event::ALL.map(|e| match open_one(e) {
            Ok((c, user)) => {
                if user {
                    user_only |= 1 << e.index();
                }
                Slot::Open(c)
            }
            Err(u) => Slot::Failed(u),
        });
        PerfSource { slots, user_only }
    }

    /// Counters that could not be opened, and why.
    pub fn failures(&self) -> Vec<(Event, Unsupported)> {
        Event::ALL
            .iter()
            .zip(&self.slots)
            .filter_map(|(e, s)| match s {
                Slot::Failed(u) => Some((*e, *u)),
                Slot::Open(_) => None,
            })
            .collect()
    }
}

impl CounterSource for PerfSource {
    fn read(&mut self) -> [Reading; N_EVENTS] {
        let mut out = [Reading::Unsupported(Unsupported::NotYetRead); N_EVENTS];
        for (o, slot) in out.iter_mut().zip(self.slots.iter_mut()) {
            *o = match slot {
                Slot::Failed(u) => Reading::Unsupported(*u),
                Slot::Open(c) => match c.read_count_and_time() {
                    Ok(ct) => scale(ct.count, ct.time_enabled, ct.time_running),
                    Err(e) => Reading::Unsupported(Unsupported::Read(errno(&e))),
                },
            };
        }
        out
    }

    fn user_only(&self) -> u16 {
        self.user_only
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Reading, Unsupported};

    #[test]
    fn multiplexed_counts_are_scaled() {
        assert_eq!(scale(100, 0, 0), Reading::Value(100));
        assert_eq!(scale(100, 1_000, 1_000), Reading::Value(100));
        assert_eq!(scale(100, 1_000, 250), Reading::Value(400));
        // No overflow for big counts.
        assert_eq!(
            scale(u64::MAX / 2, 4_000, 2_000),
            Reading::Value(u64::MAX - 1)
        );
        assert_eq!(
            scale(0, 1_000, 0),
            Reading::Unsupported(Unsupported::NotScheduled)
        );
    }
}
