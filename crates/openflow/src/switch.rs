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

/// A packet a rule sent to the controllers.
#[derive(Clone, Copy, Debug)]
pub struct PacketIn<'a> {
    pub in_port: u16,
    pub table: u8,
    pub cookie: u64,
    /// `ofp_packet_in_reason`: 0 table miss, 1 action.
    pub reason: u8,
    pub total_len: u16,
    /// The packet's first bytes (as many as the action asked for).
    pub data: &'a [u8],
}

/// A packet a controller sends (`PACKET_OUT`), decoded and checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PacketOut {
    /// The port it counts as having come in on (0xfffd: the controller).
    pub in_port: u16,
    pub actions: Vec<nfv_flow::Action>,
    /// An `output:TABLE`: looked up in the flow table instead.
    pub to_table: bool,
    pub data: Vec<u8>,
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

    /// Hands every packet rules sent up since the last call to `f`
    /// (never waits); returns how many.
    fn poll_packet_ins(&self, _f: &mut dyn FnMut(&PacketIn<'_>)) -> usize {
        0
    }

    /// Whether some controller takes packet-ins now: until one does,
    /// `controller` actions send nothing up.
    fn set_packet_in_listening(&self, _on: bool) {}

    /// Sends a controller's packet; `BAD_PORT` for an output to a port
    /// that does not exist (as `resolve`).
    fn packet_out(&self, _po: PacketOut) -> Result<(), OfError> {
        Err(crate::wire::err::REQUEST_EPERM)
    }
}
