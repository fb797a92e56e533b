//! The fuzz targets' logic, one function per target, each taking the raw
//! input bytes and panicking (or faulting) on a bug. `fuzz/fuzz_targets/`
//! wraps each in `fuzz_target!` for cargo-fuzz (nightly); `tests/replay.rs`
//! feeds every file of `fuzz/corpus/<target>/` through the same function
//! with plain `cargo test`, so CI replays the corpora (and the regression
//! seeds kept there) without nightly or cargo-fuzz.

pub mod attach_request;
mod bytes;
pub mod cni_input;
pub mod config_parse;
pub mod flow_actions;
pub mod flow_extract;
mod guest;
pub mod memif_handshake;
pub mod memif_rings;
pub mod state_file;
pub mod vhost_messages;
pub mod virtio_burst;
pub mod vxlan_underlay;

/// A target's function: the raw input, a panic on a bug.
pub type Target = fn(&[u8]);

/// Every target: its name (= `fuzz/fuzz_targets/<name>.rs` and
/// `fuzz/corpus/<name>/`) and its function.
pub const TARGETS: &[(&str, Target)] = &[
    ("virtio_burst", virtio_burst::run),
    ("flow_extract", flow_extract::run),
    ("flow_actions", flow_actions::run),
    ("config_parse", config_parse::run),
    ("vhost_messages", vhost_messages::run),
    ("cni_input", cni_input::run),
    ("attach_request", attach_request::run),
    ("state_file", state_file::run),
    ("vxlan_underlay", vxlan_underlay::run),
    ("memif_handshake", memif_handshake::run),
    ("memif_rings", memif_rings::run),
];
