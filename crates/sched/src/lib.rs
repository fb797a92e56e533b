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

pub use assign::{Algorithm, Placement, assign, moves, pmd_loads, variance};
pub use autolb::{AutoLb, AutoLbConfig, Decision, DryRun, Skip, dry_run};
pub use history::{History, INTERVALS};

use serde::Serialize;

/// An rx queue: a port number and a queue index on that port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct RxqId {
    pub port: u16,
    pub queue: usize,
}

/// A PMD thread as placement sees it: its index in the datapath and the
/// core it is pinned to (the order `cycles` walks; unpinned PMDs come
/// after pinned ones, by index).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pmd {
    pub index: usize,
    pub core: Option<usize>,
}

/// An rx queue and its measured load (cycles over the history).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxqLoad {
    pub id: RxqId,
    pub cycles: u64,
}
