//! The `afpacket` port: its type ([`AFPACKET`], registered in
//! `nfv-port-types`), opening (the rx sockets and their rings, in named
//! steps; tx sockets as tx queues open) and closing (dropping the port
//! and its queues closes the sockets and unmaps the rings), and its
//! gauges.

use crate::rx::{AfPacketRx, Geometry, RETIRE_BLOCK_MS, RingSlot, RxRing};
use crate::settings::{self, AfPacketConfig};
use crate::shared::{RxCounters, TxCounters};
use crate::sys;
use crate::tx::AfPacketTx;
use nfv_mem::{HEADROOM, Mapping};
use nfv_netdev::IfaceError;
use nfv_ports::config::{PortConfig, PortKind};
use nfv_ports::{OpenContext, Port, PortGauges, PortOpenError, PortType, RxQueue, TxQueue};
use nfv_settings::{PortTable, SettingError};
use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};

/// The `afpacket` port type, listed in `nfv-port-types`. Its open errors are
/// [`PortOpenError::Unavailable`]: the interface, a permission or the NIC
/// may be missing, and the node runs without the port.
pub static AFPACKET: AfPacketType = AfPacketType;

pub struct AfPacketType;

impl PortType for AfPacketType {
    fn name(&self) -> &'static str {
        "afpacket"
    }
    fn keys(&self) -> &'static [&'static str] {
        settings::KEYS
    }
    fn parse(&self, t: &PortTable<'_>) -> Result<PortKind, SettingError> {
        Ok(PortKind::typed(settings::parse(t)?))
    }
    fn open(&self, cfg: &PortConfig, cx: &OpenContext<'_>) -> Result<Arc<dyn Port>, PortOpenError> {
        open_with(cfg, cx.max_frame()).map_err(PortOpenError::unavailable)
    }
}

/// Usable bytes of a switch packet buffer with the default memory config
/// (frame size minus headroom): the frame limit [`open`] assumes.
pub const DEFAULT_MAX_FRAME: usize = 2048 - HEADROOM;

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("port {port}: not an afpacket port (type {kind})")]
    WrongType { port: String, kind: &'static str },
    #[error("port {port}: {msg}")]
    Config { port: String, msg: String },
    #[error("port {port}: {err}")]
    Iface { port: String, err: IfaceError },
}

/// Opens an AF_PACKET port, assuming the default packet buffer size
/// ([`DEFAULT_MAX_FRAME`]).
pub fn open(cfg: &PortConfig) -> Result<Arc<dyn Port>, OpenError> {
    open_with(cfg, DEFAULT_MAX_FRAME)
}

/// Opens an AF_PACKET port for a switch whose packet buffers hold frames
/// of up to `max_frame` bytes (`memory.frame_size - nfv_mem::HEADROOM`).
pub fn open_with(cfg: &PortConfig, max_frame: usize) -> Result<Arc<dyn Port>, OpenError> {
    let Some(ap) = cfg.kind.settings::<AfPacketConfig>() else {
        return Err(OpenError::WrongType {
            port: cfg.name.clone(),
            kind: cfg.kind.type_name(),
        });
    };
    Ok(Arc::new(AfPacketPort::open(cfg, ap, max_frame)?))
}

/// Kernel ring statistics summed over the port's rx sockets (the kernel
/// resets its counters at every read).
#[derive(Debug, Default, Clone, Copy)]
struct KernelTotals {
    packets: u64,
    drops: u64,
    freezes: u64,
}

/// An AF_PACKET port.
///
/// Thread safety: `Sync`. Rings move into rx queues (one PMD each) and
/// back on drop; the mutexes are taken only when queues open or close and
/// by `info` (control plane), never by a burst.
pub struct AfPacketPort {
    name: String,
    iface: String,
    ifindex: u32,
    /// Largest frame the interface sends: MTU + 18.
    tx_max_frame: usize,
    geometry: Geometry,
    rings: Vec<RingSlot>,
    rx_fds: Vec<Arc<OwnedFd>>,
    rx_counters: Vec<Arc<RxCounters>>,
    tx_counters: Mutex<Vec<Arc<TxCounters>>>,
    tx_open_errors: std::sync::atomic::AtomicU64,
    kernel: Mutex<KernelTotals>,
    fanout_id: Option<u16>,
}

impl AfPacketPort {
    fn open(cfg: &PortConfig, ap: &AfPacketConfig, max_frame: usize) -> Result<Self, OpenError> {
        let port = &cfg.name;
        let iface = ap.iface.as_str();
        let os_err = |err: IfaceError| OpenError::Iface {
            port: port.clone(),
            err,
        };
        settings::check(ap, cfg.rxqs).map_err(|msg| OpenError::Config {
            port: port.clone(),
            msg,
        })?;
        let ifindex = nfv_netdev::index(iface).map_err(os_err)?;
        let mtu = nfv_netdev::mtu_fitting(iface, max_frame).map_err(os_err)?;
        let need = mtu + 18;
        nfv_netdev::set_up(iface).map_err(os_err)?;
        let geometry = Geometry::new(ap.ring_size, need, sys::page_size());

        let mut rings = Vec::new();
        let mut rx_fds = Vec::new();
        let mut fanout_id = None;
        for _ in 0..cfg.rxqs {
            let (fd, map) = rx_socket(iface, ifindex, &geometry).map_err(os_err)?;
            if cfg.rxqs > 1 {
                fanout_id = Some(join_fanout(&fd, iface, fanout_id).map_err(os_err)?);
            }
            rings.push(Arc::new(Mutex::new(Some(RxRing::new(
                map,
                geometry,
                fd.clone(),
            )))));
            rx_fds.push(fd);
        }
        tracing::info!(
            "port {port}: AF_PACKET on {iface} (ifindex {ifindex}, MTU {mtu}): {} rx queue(s), \
             ring {} x {} KiB blocks each",
            cfg.rxqs,
            geometry.block_nr,
            geometry.block_size >> 10
        );
        Ok(AfPacketPort {
            name: port.clone(),
            iface: iface.to_string(),
            ifindex,
            tx_max_frame: need,
            geometry,
            rx_counters: (0..cfg.rxqs).map(|_| Arc::default()).collect(),
            rings,
            rx_fds,
            tx_counters: Mutex::new(Vec::new()),
            tx_open_errors: Default::default(),
            kernel: Mutex::new(KernelTotals::default()),
            fanout_id,
        })
    }

    /// A tx socket, and whether it takes a virtio-net header before each
    /// frame (`PACKET_VNET_HDR`: the kernel completes checksums and
    /// segments large frames; without it the queue sends complete frames).
    fn tx_socket(&self) -> Result<(OwnedFd, bool), IfaceError> {
        let fd = sys::packet_socket(&self.iface)?;
        let one: libc::c_int = 1;
        sys::setsockopt(
            &fd,
            libc::SOL_PACKET,
            libc::PACKET_QDISC_BYPASS,
            &one,
            &self.iface,
            "bypassing the qdisc",
        )?;
        let vnet_hdr = match sys::setsockopt(
            &fd,
            libc::SOL_PACKET,
            libc::PACKET_VNET_HDR,
            &one,
            &self.iface,
            "asking for virtio-net headers",
        ) {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(
                    "port {}: {e}; frames go out without offloads (the switch segments them)",
                    self.name
                );
                false
            }
        };
        sys::bind(&fd, self.ifindex, 0, &self.iface)?;
        Ok((fd, vnet_hdr))
    }

    /// Reads the kernel's ring statistics into the running totals.
    fn kernel_totals(&self) -> KernelTotals {
        let mut t = self.kernel.lock().unwrap_or_else(|p| p.into_inner());
        for fd in &self.rx_fds {
            if let Ok(s) = sys::take_stats(fd) {
                t.packets += u64::from(s.tp_packets);
                t.drops += u64::from(s.tp_drops);
                t.freezes += u64::from(s.tp_freeze_q_cnt);
            }
        }
        *t
    }
}

/// The socket of one rx queue: TPACKET_V3 ring of `geometry` created and
/// mapped, the switch's own transmissions ignored, bound to `iface` for
/// every protocol, promiscuous.
fn rx_socket(
    iface: &str,
    ifindex: u32,
    geometry: &Geometry,
) -> Result<(Arc<OwnedFd>, Mapping), IfaceError> {
    let fd = Arc::new(sys::packet_socket(iface)?);
    let v = libc::tpacket_versions::TPACKET_V3 as libc::c_int;
    let packet = libc::SOL_PACKET;
    sys::setsockopt(
        &fd,
        packet,
        libc::PACKET_VERSION,
        &v,
        iface,
        "selecting TPACKET_V3",
    )?;
    sys::setsockopt(
        &fd,
        packet,
        libc::PACKET_RX_RING,
        &geometry.req(),
        iface,
        "creating the rx ring",
    )?;
    let map = sys::map_ring(&fd, geometry.bytes(), iface)?;
    let one: libc::c_int = 1;
    sys::setsockopt(
        &fd,
        packet,
        libc::PACKET_IGNORE_OUTGOING,
        &one,
        iface,
        "ignoring outgoing frames",
    )?;
    sys::bind(&fd, ifindex, libc::ETH_P_ALL as u16, iface)?;
    let mreq = libc::packet_mreq {
        mr_ifindex: ifindex as libc::c_int,
        mr_type: libc::PACKET_MR_PROMISC as u16,
        mr_alen: 0,
        mr_address: [0; 8],
    };
    sys::setsockopt(
        &fd,
        packet,
        libc::PACKET_ADD_MEMBERSHIP,
        &mreq,
        iface,
        "entering promiscuous mode",
    )?;
    Ok((fd, map))
}

/// Puts an rx socket into the port's `PACKET_FANOUT_HASH` group (`None`:
/// the first socket, which creates it); returns the group's id.
fn join_fanout(fd: &OwnedFd, iface: &str, group: Option<u16>) -> Result<u16, IfaceError> {
    let flags = libc::PACKET_FANOUT_HASH | libc::PACKET_FANOUT_FLAG_IGNORE_OUTGOING;
    // The first socket asks the kernel for a group id no one else uses;
    // the others join that group.
    let arg: u32 = match group {
        None => (flags | libc::PACKET_FANOUT_FLAG_UNIQUEID) << 16,
        Some(id) => (flags << 16) | u32::from(id),
    };
    sys::setsockopt(
        fd,
        libc::SOL_PACKET,
        libc::PACKET_FANOUT,
        &arg,
        iface,
        "joining a fanout group",
    )?;
    if let Some(id) = group {
        return Ok(id);
    }
    let got: u32 = sys::getsockopt(fd, libc::PACKET_FANOUT, 0u32)
        .map_err(|e| IfaceError::from_os(iface, "reading the fanout group", e))?;
    Ok(got as u16)
}

impl Port for AfPacketPort {
    fn name(&self) -> &str {
        &self.name
    }
    fn type_name(&self) -> &'static str {
        "afpacket"
    }
    fn n_rxq(&self) -> usize {
        self.rings.len()
    }
    fn open_rxq(&self, q: usize) -> Box<dyn RxQueue> {
        let i = q % self.rings.len();
        let rxq = AfPacketRx::new(self.rings[i].clone(), self.rx_counters[i].clone());
        if !rxq.has_ring() {
            tracing::error!(
                "port {}: rx queue {q} is already open; this second copy receives nothing",
                self.name
            );
        }
        Box::new(rxq)
    }
    fn open_txq(&self, _q: usize) -> Box<dyn TxQueue> {
        let counters = Arc::new(TxCounters::default());
        self.tx_counters
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(counters.clone());
        let (fd, vnet_hdr) = match self.tx_socket() {
            Ok((fd, vnet_hdr)) => (Some(fd), vnet_hdr),
            Err(e) => {
                tracing::error!("port {}: tx queue: {e}; it will send nothing", self.name);
                self.tx_open_errors.fetch_add(1, Relaxed);
                (None, false)
            }
        };
        Box::new(AfPacketTx::new(fd, self.tx_max_frame, vnet_hdr, counters))
    }
    fn gauges(&self) -> PortGauges {
        let k = self.kernel_totals();
        let rx = |f: fn(&RxCounters) -> u64| -> u64 { self.rx_counters.iter().map(|c| f(c)).sum() };
        let txc = self.tx_counters.lock().unwrap_or_else(|p| p.into_inner());
        let tx = |f: fn(&TxCounters) -> u64| -> u64 { txc.iter().map(|c| f(c)).sum() };
        let g = &self.geometry;
        let rx_ring = format!(
            "TPACKET_V3, {} blocks x {} KiB, {} ms block timeout",
            g.block_nr,
            g.block_size >> 10,
            RETIRE_BLOCK_MS
        );
        let rx_fanout = match self.fanout_id {
            Some(id) => format!("hash, group {id}"),
            None => "none (one rx queue)".into(),
        };
        PortGauges::default()
            .with("iface", self.iface.as_str())
            .with("ifindex", u64::from(self.ifindex))
            .with("rx_ring", rx_ring)
            .with("rx_fanout", rx_fanout)
            .with(
                "tx",
                "sendmmsg per burst, qdisc bypass, virtio-net header (kernel checksum and GSO)",
            )
            .with("max_frame", self.tx_max_frame)
            .with("kernel_rx_packets", k.packets)
            .with("kernel_drops", k.drops)
            .with("kernel_ring_freezes", k.freezes)
            .with("rx_truncated", rx(|c| c.truncated.load(Relaxed)))
            .with("rx_oversize", rx(|c| c.oversize.load(Relaxed)))
            .with("rx_bad_blocks", rx(|c| c.bad_blocks.load(Relaxed)))
            .with("rx_bad_frames", rx(|c| c.bad_frames.load(Relaxed)))
            .with("rx_blocks", rx(|c| c.blocks.load(Relaxed)))
            .with("tx_syscalls", tx(|c| c.calls.load(Relaxed)))
            .with("tx_busy", tx(|c| c.busy.load(Relaxed)))
            .with("tx_refused", tx(|c| c.bad_frames.load(Relaxed)))
            .with("tx_errors", tx(|c| c.errors.load(Relaxed)))
            .with("tx_gso_frames", tx(|c| c.gso_frames.load(Relaxed)))
            .with("tx_open_errors", self.tx_open_errors.load(Relaxed))
    }
}
