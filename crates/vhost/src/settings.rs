//! The `vhost-user` port's settings: its `[[port]]` keys, their parsing,
//! and the frame limits that follow from them (the port type, which hands
//! its keys over to here, is in `port.rs`).

use std::path::{Path, PathBuf};

use nfv_ports::config::{PortSettings, same_settings};
use nfv_settings::{PortTable, SettingError};

use crate::memtable::{DEFAULT_MAX_GUEST_MEMORY, NODE_BUDGET_MAX_GIB};

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
    /// Offer packed virtqueues (VIRTIO_F_RING_PACKED); the frontend
    /// chooses which layout to use. Packed rings are not lent to AF_XDP
    /// ports (`zero_copy` falls back to copying). Default true.
    pub packed_ring: bool,
    /// Which checksum and segmentation offloads the port offers (each on
    /// by default; see [`Offloads`]).
    pub offloads: Offloads,
    /// Most guest memory (bytes of address space mapped, see
    /// `crate::memtable`) a memory table of this port may make the switch
    /// map; a table over it is refused and counted (`mem_over_budget`),
    /// the port keeps its old one. Key `max_guest_memory_gib`, default
    /// [`crate::DEFAULT_MAX_GUEST_MEMORY`] (1 TiB).
    pub max_guest_memory: u64,
    /// The port's MTU (key `mtu`, 68 up to the largest frame the port
    /// sends less 18 bytes: 8982 with `mrg_rxbuf`, else 1500). Set, the
    /// port offers VIRTIO_NET_F_MTU (the frontend's guest then learns its
    /// MTU from the device: QEMU's `host_mtu`), accepts NET_SET_MTU up to
    /// it, and sends the guest no frame longer than MTU + 18 (one VLAN
    /// tag), as OVS drops frames over a vhost port's MTU; large TCP/UDP
    /// segments of a guest that negotiated them are not bound by it.
    /// Default: not set (F_MTU not offered, frames up to [`max_frame`]).
    pub mtu: Option<u16>,
}

/// The offloads a vhost-user port offers its guest, each switchable off
/// (`csum`, `tso`, `ecn`, `uso` keys, default true). Each covers both
/// directions: the guest may send partial checksums / large segments
/// (CSUM, HOST_*) and may be given them (GUEST_CSUM, GUEST_*). The
/// frontend then acks what it wants (QEMU: the `csum`, `host_tso4`, …
/// device properties; Linux: `ethtool -K`). Without `csum` none of the
/// others is offered (virtio-net §5.1.3.1: segmentation needs checksum
/// offload).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Offloads {
    /// VIRTIO_NET_F_CSUM and GUEST_CSUM.
    pub csum: bool,
    /// HOST_TSO4/6 and GUEST_TSO4/6: TCP segments up to 64 KiB.
    pub tso: bool,
    /// HOST_ECN and GUEST_ECN: TSO segments with CWR set (needs `tso`).
    pub ecn: bool,
    /// HOST_USO and GUEST_USO4/6: UDP segmentation (GSO_UDP_L4).
    pub uso: bool,
}

impl Offloads {
    pub const ALL: Offloads = Offloads {
        csum: true,
        tso: true,
        ecn: true,
        uso: true,
    };
    pub const NONE: Offloads = Offloads {
        csum: false,
        tso: false,
        ecn: false,
        uso: false,
    };
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
            packed_ring: true,
            offloads: Offloads::ALL,
            max_guest_memory: DEFAULT_MAX_GUEST_MEMORY,
            mtu: None,
        }
    }
}

impl PortSettings for VhostUserConfig {
    fn type_name(&self) -> &'static str {
        "vhost-user"
    }
    fn socket(&self) -> Option<&Path> {
        Some(&self.socket)
    }
    fn faces_vnf(&self) -> bool {
        true
    }
    fn lends(&self) -> bool {
        true
    }
    fn rxqs(&self) -> Option<usize> {
        Some(self.queues)
    }
    fn eq_settings(&self, other: &dyn PortSettings) -> bool {
        same_settings(self, other)
    }
}

/// The `[[port]]` keys a `vhost-user` port reads besides `name`, `id`
/// and `type` (`rxqs` is refused: see [`parse`]).
pub const KEYS: &[&str] = &[
    "socket",
    "mode",
    "queues",
    "mrg_rxbuf",
    "tx_retries",
    "one_copy",
    "packed_ring",
    "csum",
    "tso",
    "ecn",
    "uso",
    "max_guest_memory_gib",
    "mtu",
];

/// Reads a `vhost-user` port's keys.
pub fn parse(t: &PortTable<'_>) -> Result<VhostUserConfig, SettingError> {
    if t.has("rxqs") {
        return Err(t.error(
            "rxqs",
            "not valid for a port of type \"vhost-user\": its rx queues are the guest's \
             queue pairs; set `queues`",
        ));
    }
    let socket = t.socket_path("socket")?;
    let socket: PathBuf = t.required(
        "socket",
        socket,
        "a vhost-user port needs `socket`, the path of its unix socket",
    )?;
    let d = VhostUserConfig::new("", VhostUserMode::default());
    let mrg_rxbuf = t.bool_or("mrg_rxbuf", d.mrg_rxbuf)?;
    let mtu = if t.has("mtu") {
        let most = frame_limit(mrg_rxbuf) - MTU_OVERHEAD;
        Some(t.int_or::<u16>("mtu", 68..=most as i64, 1500)?)
    } else {
        None
    };
    Ok(VhostUserConfig {
        socket,
        mode: t.one_of_or(
            "mode",
            &[
                ("server", VhostUserMode::Server),
                ("client", VhostUserMode::Client),
            ],
            d.mode,
        )?,
        queues: t.int_or("queues", 1..=VhostUserConfig::MAX_QUEUES as i64, d.queues)?,
        mrg_rxbuf,
        tx_retries: t.int_or(
            "tx_retries",
            0..=VhostUserConfig::MAX_TX_RETRIES as i64,
            d.tx_retries,
        )?,
        one_copy: t.bool_or("one_copy", d.one_copy)?,
        packed_ring: t.bool_or("packed_ring", d.packed_ring)?,
        offloads: Offloads {
            csum: t.bool_or("csum", d.offloads.csum)?,
            tso: t.bool_or("tso", d.offloads.tso)?,
            ecn: t.bool_or("ecn", d.offloads.ecn)?,
            uso: t.bool_or("uso", d.offloads.uso)?,
        },
        max_guest_memory: t.int_or::<u64>(
            "max_guest_memory_gib",
            1..=(NODE_BUDGET_MAX_GIB as i64),
            d.max_guest_memory >> 30,
        )? << 30,
        mtu,
    })
}

/// Largest frame sent to a guest that negotiated MRG_RXBUF.
pub const MAX_FRAME_MRG: usize = 9000;
/// Largest frame without MRG_RXBUF: what a guest's single receive buffer is
/// sized for (Linux virtio-net small buffers and DPDK mbufs both hold an
/// untagged 1500-byte-MTU frame, 1518 bytes).
pub const MAX_FRAME_NO_MRG: usize = 1518;

/// Bytes a frame may carry beyond its MTU: Ethernet header and one VLAN
/// tag (14 + 4), as the port's frame limits count them.
pub const MTU_OVERHEAD: usize = 18;

/// The largest frame a guest's receive buffers take, with or without
/// MRG_RXBUF.
pub fn frame_limit(mrg_rxbuf: bool) -> usize {
    if mrg_rxbuf {
        MAX_FRAME_MRG
    } else {
        MAX_FRAME_NO_MRG
    }
}

/// `TxQueue::max_frame` for a port with this config (fixed when the port
/// opens, before any guest negotiates): the port's `mtu` + 18 when set.
pub fn max_frame(cfg: &VhostUserConfig) -> usize {
    let limit = frame_limit(cfg.mrg_rxbuf);
    match cfg.mtu {
        Some(mtu) => (usize::from(mtu) + MTU_OVERHEAD).min(limit),
        None => limit,
    }
}
