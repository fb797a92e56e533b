//! Which PMD thread polls which rx queue, decided from measured loads.
//!
//! Pure decisions, no threads and no clock of their own, so every rule is
//! testable against made-up loads and a simulated clock:
//!
//! * [`assign`]: a placement of rx queues on PMDs by one of OVS's three
//!   algorithms (`pmd-rxq-assign`): `roundrobin`, `cycles` (busiest first,
//!   dealt to PMDs walking up and down their core order, so each PMD gets
//!   the same number of queues) and `group` (busiest first, each to the
//!   PMD with the lowest estimated load so far).
//! * [`History`]: per rx queue and per PMD, the cycles of the last
//!   [`INTERVALS`] measurement intervals.
//! * [`AutoLb`]: OVS's `pmd-auto-lb` rule: when a PMD was over the load
//!   threshold in every interval of the history, a dry run of the
//!   algorithm is made, and the queues move only if the variance of the
//!   PMDs' loads improves by the improvement threshold, and not more often
//!   than the rebalance interval. Every decision comes with its reason.
//!
//! Loads are cycles (TSC) spent processing a queue's bursts. These
//! machines have one NUMA node, so there is no per-NUMA split: all PMDs
//! are balanced as one set.

mod assign;
mod autolb;
mod history;
mod types;

pub use assign::{Algorithm, Placement, assign, moves, pmd_loads, variance};
pub use autolb::{AutoLb, AutoLbConfig, Decision, DryRun, Skip, dry_run};
pub use history::{History, INTERVALS};
pub use types::{Pmd, RxqId, RxqLoad};
