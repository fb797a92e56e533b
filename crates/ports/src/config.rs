//! Validated port settings (plain data): those of the types this crate
//! implements as [`PortKind`] variants, and [`PortSettings`] for the types
//! other crates implement. Each type's [`crate::PortType::parse`] produces
//! them from its `[[port]]` table; its [`crate::PortType::open`] consumes
//! them.

use std::any::Any;
use std::fmt::Debug;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// OpenFlow port number (1..=65279).
pub type PortNo = u16;

/// Longest port name.
pub const MAX_PORT_NAME: usize = 32;

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
    /// A sink that reads the generator's payload stamps and accounts loss,
    /// reordering and latency per stream (`crate::receiver`).
    Receiver,
    Pcap(PcapConfig),
    /// One end of an in-process loopback pair; `peer` names the other end.
    Ring(RingConfig),
    /// A type defined in its own crate (vhost-user, AF_XDP, AF_PACKET,
    /// TAP, ...): its settings, read back with [`PortKind::settings`].
    Typed(TypedSettings),
}

impl PortKind {
    /// Settings of a type from another crate.
    pub fn typed(settings: impl PortSettings) -> PortKind {
        PortKind::Typed(TypedSettings(Arc::new(settings)))
    }

    pub fn type_name(&self) -> &'static str {
        match self {
            PortKind::Generator(_) => "generator",
            PortKind::Sink => "sink",
            PortKind::Receiver => "receiver",
            PortKind::Pcap(_) => "pcap",
            PortKind::Ring(_) => "ring",
            PortKind::Typed(t) => t.0.type_name(),
        }
    }

    /// The settings of a [`PortKind::Typed`] port if they are a `T`.
    pub fn settings<T: PortSettings>(&self) -> Option<&T> {
        match self {
            PortKind::Typed(t) => (t.0.as_ref() as &dyn Any).downcast_ref::<T>(),
            _ => None,
        }
    }

    /// See [`PortSettings::socket`].
    pub fn socket(&self) -> Option<&Path> {
        match self {
            PortKind::Typed(t) => t.0.socket(),
            _ => None,
        }
    }

    /// See [`PortSettings::socket_share`].
    pub fn socket_share(&self) -> Option<SocketShare> {
        match self {
            PortKind::Typed(t) => t.0.socket_share(),
            _ => None,
        }
    }

    /// See [`PortSettings::iface`].
    pub fn iface(&self) -> Option<&str> {
        match self {
            PortKind::Typed(t) => t.0.iface(),
            _ => None,
        }
    }

    /// See [`PortSettings::tunnel_id`].
    pub fn tunnel_id(&self) -> Option<u32> {
        match self {
            PortKind::Typed(t) => t.0.tunnel_id(),
            _ => None,
        }
    }

    /// See [`PortSettings::borrows_from`].
    pub fn borrows_from(&self) -> Option<&str> {
        match self {
            PortKind::Typed(t) => t.0.borrows_from(),
            _ => None,
        }
    }

    /// See [`PortSettings::lends`].
    pub fn lends(&self) -> bool {
        match self {
            PortKind::Typed(t) => t.0.lends(),
            _ => false,
        }
    }

    /// See [`PortSettings::faces_vnf`].
    pub fn faces_vnf(&self) -> bool {
        matches!(self, PortKind::Typed(t) if t.0.faces_vnf())
    }

    /// See [`PortSettings::rxqs`].
    pub fn fixed_rxqs(&self) -> Option<usize> {
        match self {
            PortKind::Typed(t) => t.0.rxqs(),
            _ => None,
        }
    }
}

/// Which ports may share a socket ([`PortSettings::socket_share`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SocketShare {
    /// Ports share only within a group (e.g. "memif server").
    pub group: &'static str,
    /// And each must be a different member (e.g. the memif interface id).
    pub member: u64,
    /// What a member is called in messages (the config key).
    pub member_name: &'static str,
}

/// The validated settings of a port type that lives in its own crate. The
/// node's cross-port checks ask them only these questions; everything
/// else is the type's business.
pub trait PortSettings: Any + Debug + Send + Sync {
    /// The `type` value (the [`crate::PortType::name`] that parsed them).
    fn type_name(&self) -> &'static str;
    /// The Unix socket the port serves or connects to: no two ports of a
    /// node share one.
    fn socket(&self) -> Option<&Path> {
        None
    }
    /// How this port may share its socket with other ports: ports whose
    /// shares name the same `group` and differ in `member` may (memif
    /// servers, one interface id each); `None`: the socket is its alone.
    fn socket_share(&self) -> Option<SocketShare> {
        None
    }
    /// The kernel interface the port binds: one port per interface.
    fn iface(&self) -> Option<&str> {
        None
    }
    /// The one tunnel id (VXLAN VNI) a tunnel port receives and sends
    /// with: rules' `tun_id` resolve to such ports (`nfv_flow::tunnel`).
    fn tunnel_id(&self) -> Option<u32> {
        None
    }
    /// Whether the port leads to a VNF (may be a hop of a `[[chain]]`).
    fn faces_vnf(&self) -> bool {
        false
    }
    /// The port whose guest receive buffers this port's rx queues borrow
    /// (AF_XDP `zero_copy`): it must exist and lend (`lends()`).
    fn borrows_from(&self) -> Option<&str> {
        None
    }
    /// Whether other ports may borrow this port's guest receive buffers
    /// (vhost-user).
    fn lends(&self) -> bool {
        false
    }
    /// The rx queue count when the settings fix it (a vhost-user port has
    /// one per guest queue pair) instead of `rxqs`.
    fn rxqs(&self) -> Option<usize> {
        None
    }
    /// Equality with settings of any type (false across types); the
    /// usual body is [`same_settings`]`(self, other)`.
    fn eq_settings(&self, other: &dyn PortSettings) -> bool;
}

/// `a == other` when `other` is a `T` too.
pub fn same_settings<T: PortSettings + PartialEq>(a: &T, other: &dyn PortSettings) -> bool {
    (other as &dyn Any).downcast_ref::<T>() == Some(a)
}

/// Shared, immutable settings of a [`PortKind::Typed`] port.
#[derive(Clone, Debug)]
pub struct TypedSettings(Arc<dyn PortSettings>);

impl PartialEq for TypedSettings {
    fn eq(&self, other: &TypedSettings) -> bool {
        self.0.eq_settings(other.0.as_ref())
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct GeneratorConfig {
    /// Ethernet frame length without FCS, 64..=9000 (ignored with `imix`).
    pub frame_size: usize,
    /// Frame sizes follow the simple IMIX, 7:4:1 of 64/594/1518 bytes
    /// (`nfv_traffic::mix::SIMPLE_IMIX`), instead of `frame_size`.
    pub imix: bool,
    /// Distinct 5-tuples, 1..=1_000_000 (UDP source port and source IP vary).
    pub flows: u32,
    /// The order the flows are sent in.
    pub flow_order: FlowOrder,
    /// Ethernet/IPv4/UDP frames (from `src_ip` to `dst_ip`) or
    /// Ethernet/IPv6/UDP ones (from `src_ip6` to `dst_ip6`).
    pub family: IpFamily,
    /// Packets per second over all queues; `None` = as fast as possible
    /// (unless `rate_percent` is set).
    pub rate_pps: Option<u64>,
    /// Rate as a percentage of `line_rate_gbps` (exclusive with
    /// `rate_pps`), counting 24 bytes of FCS, preamble and inter-frame gap
    /// per frame (`nfv_traffic::mix`).
    pub rate_percent: Option<f64>,
    /// The line rate `rate_percent` refers to, in Gbit/s. Default 10.
    pub line_rate_gbps: f64,
    /// Write a test stamp (stream = port id << 8 | rx queue, sequence per
    /// queue from 0, TSC) into every frame's UDP payload, for a
    /// `receiver` port (`nfv_traffic::stamp`).
    pub stamp: bool,
    /// Stop after this many packets; `None` = forever.
    pub count: Option<u64>,
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    pub src_ip: Ipv4Addr,
    pub dst_ip: Ipv4Addr,
    /// The addresses of [`IpFamily::Ipv6`] frames.
    pub src_ip6: Ipv6Addr,
    pub dst_ip6: Ipv6Addr,
    pub src_port: u16,
    pub dst_port: u16,
}

/// The order a generator sends its flows in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FlowOrder {
    /// Flow 0, 1, 2, …: consecutive frames share the source address
    /// (1,024 source ports per address), as a sweep of one client's
    /// connections arrives.
    #[default]
    RoundRobin,
    /// Each frame about 0.618 × `flows` flows after the one before (a
    /// stride coprime with `flows`, so every flow still comes once per
    /// cycle): consecutive frames differ in source address once `flows`
    /// exceeds 2,048, as many clients' traffic arrives interleaved.
    Scattered,
}

/// The IP version of a generator's frames.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IpFamily {
    #[default]
    Ipv4,
    Ipv6,
}

impl Default for GeneratorConfig {
    fn default() -> Self {
        GeneratorConfig {
            frame_size: 64,
            imix: false,
            flows: 1,
            flow_order: FlowOrder::RoundRobin,
            family: IpFamily::Ipv4,
            rate_pps: None,
            rate_percent: None,
            line_rate_gbps: 10.0,
            stamp: false,
            count: None,
            src_mac: [0x02, 0, 0, 0, 0, 0x01],
            dst_mac: [0x02, 0, 0, 0, 0, 0x02],
            src_ip: Ipv4Addr::new(10, 0, 0, 1),
            dst_ip: Ipv4Addr::new(10, 0, 0, 2),
            src_ip6: Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1),
            dst_ip6: Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2),
            src_port: 1024,
            dst_port: 5001,
        }
    }
}

impl GeneratorConfig {
    /// The (size, weight) mix of frames this generator sends.
    pub fn mix(&self) -> Vec<(usize, u32)> {
        if self.imix {
            nfv_traffic::mix::SIMPLE_IMIX.to_vec()
        } else {
            vec![(self.frame_size, 1)]
        }
    }
    /// Mean frame size in bytes (without FCS).
    pub fn mean_frame_size(&self) -> f64 {
        nfv_traffic::mix::mean_size(&self.mix())
    }
    /// Largest frame it sends.
    pub fn max_frame_size(&self) -> usize {
        self.mix()
            .iter()
            .map(|&(s, _)| s)
            .max()
            .unwrap_or(self.frame_size)
    }
    /// The configured rate in packets per second (at least 1), from
    /// `rate_pps` or `rate_percent`; `None` = as fast as possible.
    pub fn effective_rate_pps(&self) -> Option<u64> {
        let rate = match (self.rate_pps, self.rate_percent) {
            (Some(p), _) => nfv_traffic::mix::Rate::Pps(p),
            (None, Some(percent)) => nfv_traffic::mix::Rate::LinePercent {
                percent,
                line_gbps: self.line_rate_gbps,
            },
            (None, None) => return None,
        };
        Some((rate.pps(self.mean_frame_size()).round() as u64).max(1))
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

pub use nfv_settings::MAX_IFACE_NAME;
