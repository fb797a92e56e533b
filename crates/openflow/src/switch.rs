//! What the agent needs from the node it runs in, beyond the flow table
//! it edits directly: ports (their description and counters), the
//! node's identity, and the checks a rule passes before it is installed
//! (ports exist, tunnel matches resolve), the same a `ctl add-flow`
//! passes.

use crate::wire::OfError;
use nfv_flow::FlowSpec;

/// One port as `PORT_DESC` and `PORT_STATS` show it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortInfo {
    pub no: u16,
    pub name: String,
    pub mac: [u8; 6],
    /// The peer is there (a VNF connected, a kernel link up).
    pub live: bool,
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    pub rx_dropped: u64,
    pub tx_dropped: u64,
    pub rx_errors: u64,
    pub tx_errors: u64,
    /// Seconds and nanoseconds the port has existed.
    pub duration: std::time::Duration,
}

/// `OFPMP_DESC`'s strings.
#[derive(Clone, Debug, Default)]
pub struct Description {
    pub manufacturer: String,
    pub hardware: String,
    pub software: String,
    pub serial: String,
    pub datapath: String,
}

pub trait Switch: Send + Sync {
    /// `FEATURES_REPLY`'s datapath id.
    fn datapath_id(&self) -> u64;
    fn description(&self) -> Description;
    /// Every port, by number.
    fn ports(&self) -> Vec<PortInfo>;
    /// Checks `spec` as `add-flow` would and returns the rules to
    /// install (a `tunnel_id` match becomes one rule per tunnel port):
    /// an output to a port that does not exist is `BAD_OUT_PORT`, an
    /// `in_port` that does not exist `BAD_MATCH/BAD_VALUE`.
    fn resolve(&self, spec: FlowSpec) -> Result<Vec<FlowSpec>, OfError>;
}
