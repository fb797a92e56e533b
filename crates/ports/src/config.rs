//! Validated settings of each port type (plain data). The TOML layer in
//! `nfv-control` produces these; `open_port` consumes them.

use std::net::Ipv4Addr;
use std::path::PathBuf;

/// OpenFlow port number (1..=65279).
pub type PortNo = u16;

#[derive(Clone, Debug, PartialEq)]
pub struct PortConfig {
    pub name: String,
    pub id: PortNo,
    /// Number of rx queues (1..=64); tx queues are one per PMD thread.
    pub rxqs: usize,
    pub kind: PortKind,
}

#[derive(Clone, Debug, PartialEq)]
pub enum PortKind {
    Generator(GeneratorConfig),
    Sink,
    Pcap(PcapConfig),
    /// One end of an in-process loopback pair; `peer` names the other end.
    Ring(RingConfig),
}

impl PortKind {
    pub fn type_name(&self) -> &'static str {
        match self {
            PortKind::Generator(_) => "generator",
            PortKind::Sink => "sink",
            PortKind::Pcap(_) => "pcap",
            PortKind::Ring(_) => "ring",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct GeneratorConfig {
    /// Ethernet frame length without FCS, 64..=9000.
    pub frame_size: usize,
    /// Distinct 5-tuples, 1..=1_000_000 (UDP source port and source IP vary).
    pub flows: u32,
    /// Packets per second over all queues; `None` = as fast as possible.
    pub rate_pps: Option<u64>,
    /// Stop after this many packets; `None` = forever.
    pub count: Option<u64>,
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    pub src_ip: Ipv4Addr,
    pub dst_ip: Ipv4Addr,
    pub src_port: u16,
    pub dst_port: u16,
}

impl Default for GeneratorConfig {
    fn default() -> Self {
        GeneratorConfig {
            frame_size: 64,
            flows: 1,
            rate_pps: None,
            count: None,
            src_mac: [0x02, 0, 0, 0, 0, 0x01],
            dst_mac: [0x02, 0, 0, 0, 0, 0x02],
            src_ip: Ipv4Addr::new(10, 0, 0, 1),
            dst_ip: Ipv4Addr::new(10, 0, 0, 2),
            src_port: 1024,
            dst_port: 5001,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Default)]
pub struct PcapConfig {
    /// Frames to replay as this port's rx (classic pcap, Ethernet link type).
    pub replay: Option<PathBuf>,
    /// Where this port's tx is written (classic pcap, readable by tshark).
    pub capture: Option<PathBuf>,
    /// Replay the file this many times; 0 = forever. Default 1.
    pub loops: u64,
    /// Replay rate limit in packets per second.
    pub rate_pps: Option<u64>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct RingConfig {
    pub peer: String,
    /// Slots per direction (power of two, 32..=65536). Default 1024.
    pub size: usize,
}
