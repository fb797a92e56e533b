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
mod event;
mod fake;
mod perf;
mod sampler;
mod shared;
mod snapshot;
mod source;

pub use derived::{Derived, Metric};
pub use event::{Event, N_EVENTS, Reading, Unsupported};
pub use fake::FakeSource;
pub use perf::PerfSource;
pub use sampler::PmuSampler;
pub use shared::SharedPmu;
pub use snapshot::{PmuDelta, PmuSnapshot};
pub use source::CounterSource;
