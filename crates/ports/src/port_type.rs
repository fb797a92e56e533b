//! A port type as the node sees it: a name and a way to open a port of
//! that type ([`PortType`]). Each type's crate defines one `static`
//! implementing it; `nfv-control` lists them once (`port_types.rs`) and
//! opens every port through that list, so the node has no match over the
//! types.
//!
//! Why this shape: the validated settings stay in the [`crate::PortKind`]
//! enum (one variant per type, plain data) because the cross-port checks,
//! the reports and the tests read them by variant; a type-erased settings
//! box would make every one of those a downcast. What a type *does* with
//! its settings, opening, lives behind the trait in its own crate.
//!
//! Shared state a type needs at open time comes in [`OpenContext`]: the
//! node's memory layout (frame room) and the built-in types' factory
//! (ring inboxes shared by the two ends of a ring).

use crate::Port;
use crate::config::PortConfig;
use crate::open::PortFactory;
use nfv_mem::MemoryConfig;
use std::sync::Arc;

/// The node's state a port may need when it opens.
pub struct OpenContext<'a> {
    pub memory: &'a MemoryConfig,
    pub factory: &'a PortFactory,
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

/// One port type: the `type = "..."` of a `[[port]]` table and how to open
/// a port of it. Implementations are `static`s in the type's crate.
pub trait PortType: Sync {
    /// The `type` value, equal to [`crate::PortKind::type_name`] of the
    /// configs this type opens.
    fn name(&self) -> &'static str;
    /// Opens the port `cfg` describes (its kind is this type's variant).
    fn open(&self, cfg: &PortConfig, cx: &OpenContext<'_>) -> Result<Arc<dyn Port>, PortOpenError>;
}

/// The types this crate implements, opened by [`PortFactory`].
pub struct BuiltinType(&'static str);

pub static GENERATOR: BuiltinType = BuiltinType("generator");
pub static SINK: BuiltinType = BuiltinType("sink");
pub static RECEIVER: BuiltinType = BuiltinType("receiver");
pub static PCAP: BuiltinType = BuiltinType("pcap");
pub static RING: BuiltinType = BuiltinType("ring");

impl PortType for BuiltinType {
    fn name(&self) -> &'static str {
        self.0
    }
    fn open(&self, cfg: &PortConfig, cx: &OpenContext<'_>) -> Result<Arc<dyn Port>, PortOpenError> {
        cx.factory.open(cfg).map_err(PortOpenError::failed)
    }
}
