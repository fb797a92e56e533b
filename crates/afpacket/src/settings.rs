//! The `afpacket` port's settings: its `[[port]]` keys, their parsing and
//! the limits `open` checks again (a `PortConfig` may be built in code,
//! without the config file's checks).

use nfv_ports::config::{PortSettings, same_settings};
use nfv_settings::{PortTable, SettingError};

/// Most rx queues (fanout group members) a port may have.
pub const MAX_RXQS: usize = 64;

#[derive(Clone, Debug, PartialEq)]
pub struct AfPacketConfig {
    /// Kernel interface name (at most 15 bytes).
    pub iface: String,
    /// Frames the rx ring holds (power of two, 64..=65536). Default 4096.
    pub ring_size: usize,
}

impl AfPacketConfig {
    pub fn new(iface: impl Into<String>) -> AfPacketConfig {
        AfPacketConfig {
            iface: iface.into(),
            ring_size: 4096,
        }
    }
}

impl PortSettings for AfPacketConfig {
    fn type_name(&self) -> &'static str {
        "afpacket"
    }
    fn iface(&self) -> Option<&str> {
        Some(&self.iface)
    }
    fn eq_settings(&self, other: &dyn PortSettings) -> bool {
        same_settings(self, other)
    }
}

/// The `[[port]]` keys an `afpacket` port reads besides `name`, `id`,
/// `type` and `rxqs`.
pub const KEYS: &[&str] = &["iface", "ring_size"];

/// Reads an `afpacket` port's keys.
pub fn parse(t: &PortTable<'_>) -> Result<AfPacketConfig, SettingError> {
    let d = AfPacketConfig::new("");
    Ok(AfPacketConfig {
        iface: t.iface()?,
        ring_size: t.pow2_or("ring_size", 64..=65536, d.ring_size)?,
    })
}

/// Checks the ring size and the port's rx queue count against what the
/// port allows.
pub fn check(ap: &AfPacketConfig, rxqs: usize) -> Result<(), String> {
    if !ap.ring_size.is_power_of_two() || !(64..=65536).contains(&ap.ring_size) {
        return Err(format!(
            "ring_size {} must be a power of two in 64..=65536",
            ap.ring_size
        ));
    }
    if !(1..=MAX_RXQS).contains(&rxqs) {
        return Err(format!("rxqs {rxqs} must be in 1..={MAX_RXQS}"));
    }
    Ok(())
}
