//! [`Clock`]: the clock of the ports that pace or timestamp.

/// The clock of ports that pace or timestamp: the TSC in the switch, a
/// fake clock in tests. Read once per burst.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    pub now: fn() -> u64,
    /// Ticks per second.
    pub hz: u64,
}

impl Clock {
    pub fn tsc() -> Clock {
        Clock {
            now: nfv_tsc::now,
            hz: nfv_tsc::hz(),
        }
    }
}
