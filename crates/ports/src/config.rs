//! Validated settings of each port type (plain data). The TOML layer in
//! `nfv-config` produces these; each type's [`crate::PortType::open`]
//! consumes them.

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
    /// A sink that reads the generator's payload stamps and accounts loss,
    /// reordering and latency per stream (`crate::receiver`).
    Receiver,
    Pcap(PcapConfig),
    /// One end of an in-process loopback pair; `peer` names the other end.
    Ring(RingConfig),
    /// A vhost-user virtio-net port towards a VM or container VNF. Opened
    /// by the `nfv-vhost` crate, not by [`crate::PortFactory`].
    VhostUser(VhostUserConfig),
    /// An AF_XDP socket per rx queue on a kernel interface (NIC queues
    /// 0..rxqs). Opened by the `nfv-afxdp` crate.
    AfXdp(AfXdpConfig),
    /// An AF_PACKET socket (TPACKET_V3 rx ring) on a kernel interface.
    /// Opened by the `nfv-afpacket` crate.
    AfPacket(AfPacketConfig),
    /// A TAP interface the switch creates (or attaches to) to reach the
    /// host stack. Opened by the `nfv-tap` crate.
    Tap(TapConfig),
}

impl PortKind {
    pub fn type_name(&self) -> &'static str {
        match self {
            PortKind::Generator(_) => "generator",
            PortKind::Sink => "sink",
            PortKind::Receiver => "receiver",
            PortKind::Pcap(_) => "pcap",
            PortKind::Ring(_) => "ring",
            PortKind::VhostUser(_) => "vhost-user",
            PortKind::AfXdp(_) => "afxdp",
            PortKind::AfPacket(_) => "afpacket",
            PortKind::Tap(_) => "tap",
        }
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
    pub src_port: u16,
    pub dst_port: u16,
}

impl Default for GeneratorConfig {
    fn default() -> Self {
        GeneratorConfig {
            frame_size: 64,
            imix: false,
            flows: 1,
            rate_pps: None,
            rate_percent: None,
            line_rate_gbps: 10.0,
            stamp: false,
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

/// Who creates the vhost-user socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum VhostUserMode {
    /// The switch listens on `socket`; the VNF (QEMU, testpmd virtio-user)
    /// connects — OVS `dpdkvhostuser`.
    Server,
    /// The VNF listens on `socket`; the switch connects, retrying every
    /// second while it is absent and after it restarts — OVS
    /// `dpdkvhostuserclient`. The default.
    #[default]
    Client,
}

impl VhostUserMode {
    pub fn as_str(&self) -> &'static str {
        match self {
            VhostUserMode::Server => "server",
            VhostUserMode::Client => "client",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct VhostUserConfig {
    /// The unix socket (at most 107 bytes).
    pub socket: PathBuf,
    pub mode: VhostUserMode,
    /// Most queue pairs the guest may enable, 1..=16. Default 1. The port
    /// has this many rx queues (the guest's transmit virtqueues).
    pub queues: usize,
    /// Offer VIRTIO_NET_F_MRG_RXBUF (frames up to 9000 bytes spread over
    /// several guest buffers). Default true.
    pub mrg_rxbuf: bool,
    /// How many more times a tx burst tries a guest RX virtqueue that ran
    /// out of buffers, as long as each try still delivers something (like
    /// OVS `tx-retries`), before the rest is dropped as `tx_full`. Absorbs
    /// a guest that is refilling at that moment without letting a stalled
    /// guest hold the PMD. Default [`Self::DEFAULT_TX_RETRIES`].
    pub tx_retries: u32,
    /// Forward frames the guest sends with one copy: the switch copies
    /// only their headers and the receiving vhost-user port copies the
    /// rest straight from this guest's buffer into its own guest. False:
    /// every frame is copied into the switch's pool first (two copies per
    /// hop), for A/B comparisons. Default true.
    pub one_copy: bool,
}

impl VhostUserConfig {
    /// Most queue pairs a port may have.
    pub const MAX_QUEUES: usize = 16;
    /// OVS's default for `tx-retries`.
    pub const DEFAULT_TX_RETRIES: u32 = 8;
    /// Upper bound of `tx_retries`: each try costs a cross-core read of
    /// the guest's avail index.
    pub const MAX_TX_RETRIES: u32 = 32;

    pub fn new(socket: impl Into<PathBuf>, mode: VhostUserMode) -> VhostUserConfig {
        VhostUserConfig {
            socket: socket.into(),
            mode,
            queues: 1,
            mrg_rxbuf: true,
            tx_retries: Self::DEFAULT_TX_RETRIES,
            one_copy: true,
        }
    }
}

/// Longest Linux interface name (IFNAMSIZ - 1).
pub const MAX_IFACE_NAME: usize = 15;

/// How an AF_XDP socket binds to its queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum XdpBindMode {
    /// Zero-copy when the driver allows it, otherwise copy (logged).
    #[default]
    Auto,
    /// Always copy mode (`XDP_COPY`); works on every driver, veth included.
    Copy,
    /// Zero-copy only (`XDP_ZEROCOPY`); opening fails if the driver cannot.
    ZeroCopy,
}

impl XdpBindMode {
    pub fn as_str(&self) -> &'static str {
        match self {
            XdpBindMode::Auto => "auto",
            XdpBindMode::Copy => "copy",
            XdpBindMode::ZeroCopy => "zero-copy",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct AfXdpConfig {
    /// Kernel interface name (at most 15 bytes).
    pub iface: String,
    pub mode: XdpBindMode,
    /// Descriptors per ring (rx, tx, fill, completion): power of two,
    /// 64..=16384. Default 2048. Each queue's UMEM holds twice this many
    /// frames so the fill ring can cover every rx slot.
    pub ring_size: usize,
}

impl AfXdpConfig {
    pub fn new(iface: impl Into<String>) -> AfXdpConfig {
        AfXdpConfig {
            iface: iface.into(),
            mode: XdpBindMode::Auto,
            ring_size: 2048,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct AfPacketConfig {
    /// Kernel interface name (at most 15 bytes).
    pub iface: String,
    /// Frames the rx ring holds (power of two, 64..=65536). Default 4096.
    pub ring_size: usize,
}

impl AfPacketConfig {
    pub fn new(iface: impl Into<String>) -> AfPacketConfig {
        AfPacketConfig {
            iface: iface.into(),
            ring_size: 4096,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct TapConfig {
    /// Name of the TAP interface (at most 15 bytes); created if missing,
    /// removed on close if the switch created it.
    pub iface: String,
}
