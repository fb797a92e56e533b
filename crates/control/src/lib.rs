//! The control plane of a node: assembling a running switch from its
//! validated config ([`node`]), the typed control protocol ([`protocol`]),
//! the unix control socket ([`server`]), rate sampling ([`rates`]) and
//! RFC 2544 trials against a running node ([`trial`]).

pub mod chains;
pub mod node;
pub mod pmu;
pub mod protocol;
pub mod rates;
pub mod server;
pub mod trial;

pub use node::{Node, NodeError};
pub use protocol::{Request, Response};
pub use server::{ControlServer, request};

/// Where the control socket lives when the config does not say.
pub fn default_socket(node_name: &str) -> std::path::PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(d) => std::path::Path::new(&d).join(format!("nfvswitch-{node_name}.sock")),
        None => std::path::PathBuf::from(format!("/tmp/nfvswitch-{node_name}.sock")),
    }
}
