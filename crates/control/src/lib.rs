//! The control plane of a node: assembling a running switch from its
//! validated config and stopping it ([`node`]), its ports (`ports.rs`),
//! request handling (`requests.rs`) and reports (`reports.rs`), typed
//! errors ([`error`]), the control protocol ([`protocol`]), the unix
//! control socket ([`server`]), rate sampling ([`rates`]) and RFC 2544
//! trials against a running node ([`trial`]).
//!
//! No module imports one that imports it back (`scripts/mod-cycles
//! crates/control`). Below [`node`] is what needs no node: [`protocol`],
//! [`error`], [`access`], [`attachments`] (with `attachment_limits`),
//! [`attachment_state`], [`rates`], [`chains`], [`pmu`], [`vnf_figures`],
//! `socket_path` and the parts the node holds (`balance`, `expiry`,
//! `routes`). Above it is what takes a node: the `impl Node` modules
//! (`ports`, `requests`, `reports`, `attach`, `rebalance`), the threads
//! (`sampling`, `rebalance`, `expiry_thread`), `openflow` (the agent's view
//! of the node), [`trial`] and [`server`].
//! A part whose work needs the node is split in two, its state below and
//! its node side above: `rates` and `sampling`, `balance` and
//! `rebalance`, `expiry` and `expiry_thread`, `attachments` and `attach`.

pub mod access;
mod attach;
mod attachment_limits;
pub mod attachment_state;
pub mod attachments;
mod balance;
pub mod chains;
mod conntrack_report;
pub mod error;
mod expiry;
mod expiry_thread;
pub mod node;
mod openflow;
pub mod pmu;
mod ports;
pub mod protocol;
pub mod rates;
mod rebalance;
mod reports;
mod requests;
mod routes;
mod sampling;
pub mod server;
mod socket_path;
pub mod trial;
pub mod vnf_figures;

pub use access::Caller;
pub use error::{NodeError, RequestError};
pub use node::Node;
pub use protocol::{Request, Response};
pub use server::{ControlServer, request};
pub use socket_path::default_socket;
