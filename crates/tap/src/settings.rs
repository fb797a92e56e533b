//! The `tap` port's settings: its `[[port]]` keys, their parsing and the
//! limits `open` checks again (a `PortConfig` may be built in code,
//! without the config file's checks).

use nfv_ports::config::{PortSettings, same_settings};
use nfv_settings::{PortTable, SettingError};

/// Most queues a port may have (the tun driver allows 256).
pub const MAX_QUEUES: usize = 64;

#[derive(Clone, Debug, PartialEq)]
pub struct TapConfig {
    /// Name of the TAP interface (at most 15 bytes); created if missing,
    /// removed on close if the switch created it.
    pub iface: String,
}

impl PortSettings for TapConfig {
    fn type_name(&self) -> &'static str {
        "tap"
    }
    fn iface(&self) -> Option<&str> {
        Some(&self.iface)
    }
    fn eq_settings(&self, other: &dyn PortSettings) -> bool {
        same_settings(self, other)
    }
}

/// The `[[port]]` keys a `tap` port reads besides `name`, `id`, `type`
/// and `rxqs`.
pub const KEYS: &[&str] = &["iface"];

/// Reads a `tap` port's keys.
pub fn parse(t: &PortTable<'_>) -> Result<TapConfig, SettingError> {
    Ok(TapConfig { iface: t.iface()? })
}

/// Checks the port's rx queue count against what a TAP allows.
pub fn check_rxqs(rxqs: usize) -> Result<(), String> {
    if !(1..=MAX_QUEUES).contains(&rxqs) {
        return Err(format!("rxqs {rxqs} must be in 1..={MAX_QUEUES}"));
    }
    Ok(())
}
