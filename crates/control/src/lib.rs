//! The control plane of a node: assembling a running switch from its
//! validated config and stopping it ([`node`]), its ports (`ports.rs`),
//! request handling (`requests.rs`) and reports (`reports.rs`), typed
//! errors ([`error`]), the control protocol ([`protocol`]), the unix
//! control socket ([`server`]), rate sampling ([`rates`]) and RFC 2544
//! trials against a running node ([`trial`]).

pub mod access;
pub mod attachment_state;
pub mod attachments;
mod balance;
pub mod chains;
pub mod error;
mod expiry;
pub mod node;
pub mod pmu;
mod ports;
pub mod protocol;
pub mod rates;
mod reports;
mod requests;
mod routes;
pub mod server;
pub mod trial;

pub use access::Caller;
pub use error::{NodeError, RequestError};
pub use node::Node;
pub use protocol::{Request, Response};
pub use server::{ControlServer, request};

/// Where the control socket lives when the config does not say.
pub fn default_socket(node_name: &str) -> std::path::PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(d) => std::path::Path::new(&d).join(format!("nfvswitch-{node_name}.sock")),
        None => std::path::PathBuf::from(format!("/tmp/nfvswitch-{node_name}.sock")),
    }
}
