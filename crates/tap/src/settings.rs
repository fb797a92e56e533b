//! The `tap` port type: its settings, its `[[port]]` keys and its
//! registration ([`TAP`]).

use std::sync::Arc;

use nfv_ports::config::{PortConfig, PortKind, PortSettings, same_settings};
use nfv_ports::{OpenContext, Port, PortOpenError, PortType};
use nfv_settings::{PortTable, SettingError};

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

/// The `tap` port type, listed in `nfv-port-types`. Its open errors are
/// [`PortOpenError::Unavailable`]: the interface, a permission or the NIC
/// may be missing, and the node runs without the port.
pub static TAP: TapType = TapType;

pub struct TapType;

impl PortType for TapType {
    fn name(&self) -> &'static str {
        "tap"
    }
    fn keys(&self) -> &'static [&'static str] {
        &["iface"]
    }
    fn parse(&self, t: &PortTable<'_>) -> Result<PortKind, SettingError> {
        Ok(PortKind::typed(TapConfig { iface: t.iface()? }))
    }
    fn open(&self, cfg: &PortConfig, cx: &OpenContext<'_>) -> Result<Arc<dyn Port>, PortOpenError> {
        crate::open_with(cfg, cx.max_frame()).map_err(PortOpenError::unavailable)
    }
}
