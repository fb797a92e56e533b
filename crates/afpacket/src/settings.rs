//! The `afpacket` port type: its settings, its `[[port]]` keys and its
//! registration ([`AFPACKET`]).

use std::sync::Arc;

use nfv_ports::config::{PortConfig, PortKind, PortSettings, same_settings};
use nfv_ports::{OpenContext, Port, PortOpenError, PortType};
use nfv_settings::{PortTable, SettingError};

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

/// The `afpacket` port type, listed in `nfv-port-types`. Its open errors are
/// [`PortOpenError::Unavailable`]: the interface, a permission or the NIC
/// may be missing, and the node runs without the port.
pub static AFPACKET: AfPacketType = AfPacketType;

pub struct AfPacketType;

impl PortType for AfPacketType {
    fn name(&self) -> &'static str {
        "afpacket"
    }
    fn keys(&self) -> &'static [&'static str] {
        &["iface", "ring_size"]
    }
    fn parse(&self, t: &PortTable<'_>) -> Result<PortKind, SettingError> {
        let d = AfPacketConfig::new("");
        Ok(PortKind::typed(AfPacketConfig {
            iface: t.iface()?,
            ring_size: t.pow2_or("ring_size", 64..=65536, d.ring_size)?,
        }))
    }
    fn open(&self, cfg: &PortConfig, cx: &OpenContext<'_>) -> Result<Arc<dyn Port>, PortOpenError> {
        crate::open_with(cfg, cx.max_frame()).map_err(PortOpenError::unavailable)
    }
}
