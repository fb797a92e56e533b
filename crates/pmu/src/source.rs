//! What a sampler reads counters from: [`CounterSource`], implemented by
//! [`PerfSource`](crate::PerfSource) and [`FakeSource`](crate::FakeSource).

use crate::event::{N_EVENTS, Reading};

/// Reads every counter's running total. Implementations are used by one
/// thread (the measured one) and must not allocate in `read`.
pub trait CounterSource: Send {
    /// Totals since the source was opened, indexed by [`Event::index`](crate::Event::index).
    fn read(&mut self) -> [Reading; N_EVENTS];
    /// Bit [`Event::index`](crate::Event::index) set: that counter counts user space only.
    fn user_only(&self) -> u16 {
        0
    }
}
