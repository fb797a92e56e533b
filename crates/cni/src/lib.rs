//! The CNI plugin `nfvswitch-cni` as a library: [`run`] is the whole
//! plugin (the binary calls it); the parsers of everything it reads from
//! outside (the network config, the node's answers, an IPAM plugin's
//! output, `prevResult`) are public and pure, so the fuzz target
//! (`fuzz/harness/src/cni_input.rs`) drives them without a node.

mod cni;
pub mod device_info;
pub mod error;
pub mod ipam;
pub mod key;
pub mod netconf;
pub mod node;
pub mod result;

#[cfg(test)]
mod cni_tests;
#[cfg(test)]
mod fake_node;

pub use cni::run;
