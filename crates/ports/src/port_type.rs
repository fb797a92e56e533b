//! A port type as the node sees it ([`PortType`]): its `type` name, the
//! `[[port]]` keys it accepts, how it reads them into validated settings
//! and how it opens a port from them. Each type's crate defines one
//! `static` implementing it; `nfv-port-types` lists them once, and both
//! the config loader and the node go through that list, so neither has a
//! match over the types.
//!
//! Settings: the types of this crate are [`crate::PortKind`] variants;
//! a type from another crate stores its own settings struct in
//! [`crate::PortKind::Typed`] and reads it back with
//! [`crate::PortKind::settings`]. The node's cross-port checks need only
//! what [`crate::config::PortSettings`] answers (socket, interface).
//!
//! Shared state a type needs at open time comes in [`OpenContext`]: the
//! node's memory layout (frame room), the built-in types' factory (ring
//! inboxes shared by the two ends of a ring), its routes and its lenders
//! (the ports whose guest buffers others may borrow). All of it is the
//! node's: nothing a port finds another port through is process-wide.

use crate::Port;
use crate::builtin_settings as builtin;
use crate::config::{PortConfig, PortKind};
use crate::open::PortFactory;
use nfv_mem::MemoryConfig;
use nfv_settings::{PortTable, SettingError};
pub use nfv_virtio::lend::Lenders;
use std::sync::Arc;

/// The node's state a port may need when it opens.
pub struct OpenContext<'a> {
    pub memory: &'a MemoryConfig,
    pub factory: &'a PortFactory,
    /// Where the flow table sends each port's packets (kept by the port
    /// if it adapts to the rules, as `zero_copy = "auto"` does).
    pub routes: &'a Arc<dyn Routes>,
    /// The node's ports that lend their guests' receive buffers
    /// (`nfv_virtio::lend`): a lending type adds each port it opens; a
    /// borrowing one keeps the directory and finds its lender by name.
    pub lenders: &'a Arc<Lenders>,
}

/// What the node's flow table says about where a port's packets go.
/// Control plane only: an answer may walk every rule.
pub trait Routes: Send + Sync {
    /// The name of the one port every packet received on port number
    /// `port` is sent to, when the rules send them all to one port.
    fn sole_destination(&self, port: u16) -> Option<String>;
}

/// Routes of a node without a flow table (tests, benches): nothing is
/// known.
pub struct NoRoutes;

impl Routes for NoRoutes {
    fn sole_destination(&self, _port: u16) -> Option<String> {
        None
    }
}

impl OpenContext<'_> {
    /// The largest frame a packet buffer of this node holds.
    pub fn max_frame(&self) -> usize {
        self.memory.frame_size - nfv_mem::HEADROOM
    }
}

/// Why a port did not open.
#[derive(Debug, thiserror::Error)]
pub enum PortOpenError {
    /// The switch cannot run this port as configured.
    #[error(transparent)]
    Failed(Box<dyn std::error::Error + Send + Sync>),
    /// Something outside the switch is missing (an interface, a
    /// permission, a busy queue): the node starts without the port and
    /// `show ports` lists the reason.
    #[error("{0}")]
    Unavailable(String),
}

impl PortOpenError {
    pub fn failed(e: impl std::error::Error + Send + Sync + 'static) -> PortOpenError {
        PortOpenError::Failed(Box::new(e))
    }
    pub fn unavailable(e: impl std::fmt::Display) -> PortOpenError {
        PortOpenError::Unavailable(e.to_string())
    }
}

/// One port type: the `type = "..."` of a `[[port]]` table, its keys, and
/// how to open a port of it. Implementations are `static`s in the type's
/// crate.
pub trait PortType: Sync {
    /// The `type` value, equal to [`crate::PortKind::type_name`] of the
    /// configs this type opens.
    fn name(&self) -> &'static str;
    /// The keys of a `[[port]]` table this type reads besides those every
    /// port has (`name`, `id`, `type`, `rxqs`). Any other key is refused
    /// before [`PortType::parse`] runs, naming the types that take it.
    fn keys(&self) -> &'static [&'static str];
    /// Validates the table's keys into this type's settings.
    fn parse(&self, table: &PortTable<'_>) -> Result<PortKind, SettingError>;
    /// Opens the port `cfg` describes (its kind is this type's variant).
    fn open(&self, cfg: &PortConfig, cx: &OpenContext<'_>) -> Result<Arc<dyn Port>, PortOpenError>;
}

/// The types this crate implements, opened by [`PortFactory`].
pub struct BuiltinType {
    name: &'static str,
    keys: &'static [&'static str],
    parse: fn(&PortTable<'_>) -> Result<PortKind, SettingError>,
}

pub static GENERATOR: BuiltinType = BuiltinType {
    name: "generator",
    keys: builtin::GENERATOR_KEYS,
    parse: builtin::generator,
};
pub static SINK: BuiltinType = BuiltinType {
    name: "sink",
    keys: &[],
    parse: builtin::sink,
};
pub static RECEIVER: BuiltinType = BuiltinType {
    name: "receiver",
    keys: &[],
    parse: builtin::receiver,
};
pub static PCAP: BuiltinType = BuiltinType {
    name: "pcap",
    keys: builtin::PCAP_KEYS,
    parse: builtin::pcap,
};
pub static RING: BuiltinType = BuiltinType {
    name: "ring",
    keys: builtin::RING_KEYS,
    parse: builtin::ring,
};

impl PortType for BuiltinType {
    fn name(&self) -> &'static str {
        self.name
    }
    fn keys(&self) -> &'static [&'static str] {
        self.keys
    }
    fn parse(&self, table: &PortTable<'_>) -> Result<PortKind, SettingError> {
        (self.parse)(table)
    }
    fn open(&self, cfg: &PortConfig, cx: &OpenContext<'_>) -> Result<Arc<dyn Port>, PortOpenError> {
        cx.factory.open(cfg).map_err(PortOpenError::failed)
    }
}
