//! Why the node did not start ([`NodeError`]) or refused a request
//! ([`RequestError`]) or an attachment ([`AttachError`]). A refusal leaves
//! the running switch as it was; its text is what `ctl` prints and what
//! the REST API returns. The three nest (a start fails on an attachment,
//! an attachment on its port's request), so they live together here.

use crate::attachment_limits::FIRST_ATTACHMENT_ID;
use nfv_flow::{FlowParseError, PortNo};
use std::path::PathBuf;

/// The node could not start, or a port could not open.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The state file's attachments could not be read back.
    #[error(transparent)]
    Attachments(Box<AttachError>),
    /// A service chain's steering rule does not parse.
    #[error("chain {chain}: {source}")]
    Chain {
        chain: String,
        source: FlowParseError,
    },
    #[error(transparent)]
    Pool(#[from] nfv_mem::PoolError),
    #[error(transparent)]
    Datapath(#[from] nfv_datapath::DatapathError),
    /// A port failed to open (its type's error, which names the port).
    #[error(transparent)]
    Open(Box<dyn std::error::Error + Send + Sync>),
    /// A port that depends on something outside the switch (AF_XDP,
    /// AF_PACKET, TAP: an interface, a permission) failed to open; the
    /// message names the port and the interface. The node runs without it.
    #[error("{0}")]
    KernelPort(String),
    /// No type in `nfv_port_types::PORT_TYPES` opens ports of this `type`.
    #[error("port type {0:?} is not registered in nfv-control")]
    UnregisteredType(&'static str),
    /// A group or meter of the config that the table refused (a config
    /// built in code skips the file's checks).
    #[error("{0}")]
    Config(String),
}

/// A control request the node refused.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// Rule `index` (1-based, counted when several were given) does not
    /// parse.
    #[error("{}{source}", flow_prefix(*index))]
    Flow {
        index: Option<usize>,
        source: FlowParseError,
    },
    /// Rule `index`'s `tun_id` selects no tunnel port, or contradicts its
    /// `in_port` or a tunnel output.
    #[error("{}{source}", flow_prefix(*index))]
    FlowTunnel {
        index: Option<usize>,
        source: nfv_flow::TunnelError,
    },
    /// Rule `index` matches on (`what` = `in_port=`) or outputs to
    /// (`output:`) a port that does not exist.
    #[error("{}{what}{port}: no such port", flow_prefix(*index))]
    FlowPort {
        index: Option<usize>,
        what: &'static str,
        port: PortNo,
    },
    #[error(transparent)]
    Filter(FlowParseError),
    /// A group text that does not parse.
    #[error("group: {0}")]
    GroupText(#[from] nfv_flow::group::GroupParseError),
    /// A group edit or a rule naming a group the table refused.
    #[error("{0}")]
    Group(#[from] nfv_flow::table::GroupError),
    /// A meter text that does not parse.
    #[error("{0}")]
    MeterText(#[from] nfv_flow::meter::MeterParseError),
    /// A meter edit the table refused.
    #[error("{0}")]
    Meter(#[from] nfv_flow::table::MeterError),
    /// A trace's packet description is not a packet (a wildcard, a
    /// priority, no in_port).
    #[error("trace: {0}")]
    Trace(&'static str),
    /// The port table of `add-port` is invalid on its own.
    #[error(transparent)]
    PortConfig(#[from] nfv_config::ConfigError),
    /// The port conflicts with one present (`field: message`).
    #[error("{0}")]
    PortConflict(String),
    /// The port could not open.
    #[error(transparent)]
    Open(#[from] NodeError),
    #[error("no port {0:?}")]
    NoSuchPort(String),
    /// The caller may not do this (`crate::access`): the REST API adding
    /// a kernel-facing port, or a pcap file outside `[node] pcap_dir`.
    #[error("{0}")]
    Forbidden(String),
    #[error("port {0:?} is not a generator")]
    NotGenerator(String),
    #[error("port {0:?} is not a receiver")]
    NotReceiver(String),
    /// A trial needs a generator that stamps its frames.
    #[error("generator {0:?} does not stamp its frames; set `stamp = true` on it")]
    NotStamping(String),
    #[error(transparent)]
    Datapath(#[from] nfv_datapath::DatapathError),
    /// A report could not be encoded.
    #[error("cannot encode the reply: {0}")]
    Encode(#[from] serde_json::Error),
}

#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    #[error("{0}")]
    Invalid(String),
    #[error(
        "{container_id}/{ifname} is attached already with another request (port {port}); \
         detach it first"
    )]
    Conflict {
        container_id: String,
        ifname: String,
        port: String,
    },
    #[error("no free port number from {FIRST_ATTACHMENT_ID} up")]
    NoFreeId,
    #[error(transparent)]
    Port(#[from] RequestError),
    #[error("state file {path}: {err}")]
    State { path: PathBuf, err: String },
}

fn flow_prefix(index: Option<usize>) -> String {
    index.map_or_else(String::new, |i| format!("flow {i}: "))
}

impl From<AttachError> for NodeError {
    fn from(e: AttachError) -> NodeError {
        NodeError::Attachments(Box::new(e))
    }
}
