//! `nfv-plan`: should a service chain's VNFs use SR-IOV virtual functions,
//! nfvswitch, or both? A planner for one node.
//!
//! - [`topology`]: the TOML file that describes the node (cores, NIC
//!   ports and speed, PCIe generation and lanes, VFs) and the service
//!   (N VNFs north-south, east-west or mixed, frame sizes or IMIX,
//!   offered load); refusals name `file:line: field`.
//! - [`pcie`]: what a frame costs on the NIC's PCIe link, derived TLP by
//!   TLP, and why an SR-IOV hairpin pays it twice per VNF.
//! - [`profile`]: cycles per packet per hop type and frame size on a
//!   node (JSON, written by `nfvswitch calibrate`), with a built-in
//!   default.
//! - [`model`]: per I/O mode (SR-IOV, switch copy, switch one-copy,
//!   hybrid) the predicted rate, the bottleneck by name, the cores
//!   needed, and a recommendation.
//!
//! No I/O beyond reading the topology file; no `unsafe`.

pub mod error;
pub mod model;
pub mod nic;
pub mod pcie;
pub mod profile;
pub mod profile_notes;
pub mod topology;

pub use error::TopologyError;
pub use model::{Bottleneck, Mode, Plan, Point, Prediction, plan};
pub use pcie::Pcie;
pub use profile::{HopKind, HopPoint, HopProfile, Machine, Profile};
pub use topology::{Frames, Nic, Node, Offered, Service, Shape, Topology, VnfPoll};

#[cfg(test)]
mod tests;
