//! The `null` port's settings: its one `[[port]]` key, its parsing and
//! the limit `open` checks again (a `PortConfig` may be built in code,
//! without the config file's checks).

use std::ops::RangeInclusive;

use nfv_ports::config::{PortSettings, same_settings};
use nfv_settings::{PortTable, SettingError};

#[derive(Clone, Debug, Default, PartialEq)]
pub struct NullConfig {
    /// Largest frame (bytes, no FCS) the port takes; longer ones are
    /// dropped by the datapath as `too_big`. Key `max_frame`, in
    /// [`NullConfig::MAX_FRAME_RANGE`]. Default: not set, every frame is
    /// taken.
    pub max_frame: Option<usize>,
}

impl NullConfig {
    /// What `max_frame` may be: a minimum Ethernet frame up to the largest
    /// a packet buffer can hold (`memory.frame_size` 65536 less headroom).
    pub const MAX_FRAME_RANGE: RangeInclusive<usize> = 60..=65535;
}

impl PortSettings for NullConfig {
    fn type_name(&self) -> &'static str {
        "null"
    }
    fn eq_settings(&self, other: &dyn PortSettings) -> bool {
        same_settings(self, other)
    }
}

/// The `[[port]]` keys a `null` port reads besides `name`, `id`, `type`
/// and `rxqs`.
pub const KEYS: &[&str] = &["max_frame"];

/// Reads a `null` port's keys.
pub fn parse(t: &PortTable<'_>) -> Result<NullConfig, SettingError> {
    let r = &NullConfig::MAX_FRAME_RANGE;
    let max_frame = t.int("max_frame", *r.start() as i64..=*r.end() as i64)?;
    Ok(NullConfig {
        max_frame: max_frame.map(|n| n as usize),
    })
}

/// Checks `max_frame` against [`NullConfig::MAX_FRAME_RANGE`].
pub fn check(cfg: &NullConfig) -> Result<(), String> {
    match cfg.max_frame {
        Some(n) if !NullConfig::MAX_FRAME_RANGE.contains(&n) => {
            let r = &NullConfig::MAX_FRAME_RANGE;
            Err(format!(
                "max_frame {n} is out of range {}..={}",
                r.start(),
                r.end()
            ))
        }
        _ => Ok(()),
    }
}
