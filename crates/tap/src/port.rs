//! The `tap` port: its type ([`TAP`], registered in `nfv-port-types`),
//! opening (attaching to or creating the interface, in named steps) and
//! closing (dropping the descriptors), and its gauges.

use crate::dev::{self, DevError};
use crate::rx::TapRx;
use crate::settings::{self, TapConfig};
use crate::shared::{Counters, VNET_HDR_LEN};
use crate::tx::TapTx;
use nfv_mem::HEADROOM;
use nfv_netdev::IfaceError;
use nfv_ports::config::{PortConfig, PortKind};
use nfv_ports::{Gauge, OpenContext, Port, PortGauges, PortOpenError, PortType, RxQueue, TxQueue};
use nfv_settings::{PortTable, SettingError};
use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};

/// The `tap` port type, listed in `nfv-port-types`. Its open errors are
/// [`PortOpenError::Unavailable`]: the interface, a permission or the NIC
/// may be missing, and the node runs without the port.
pub static TAP: TapType = TapType;

pub struct TapType;

impl PortType for TapType {
    fn name(&self) -> &'static str {
        "tap"
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
    #[error("port {port}: not a tap port (type {kind})")]
    WrongType { port: String, kind: &'static str },
    #[error("port {port}: {msg}")]
    Config { port: String, msg: String },
    #[error("port {port}: {err}")]
    Iface { port: String, err: IfaceError },
    #[error(
        "port {port}: cannot open TAP {iface:?}: /dev/net/tun does not exist (load the tun \
         module with `modprobe tun`; in a container, pass the device in, e.g. \
         `--device /dev/net/tun`)"
    )]
    NoTunDevice { port: String, iface: String },
    #[error(
        "port {port}: cannot open TAP {iface:?}: /dev/net/tun has no driver (load the tun \
         module with `modprobe tun`)"
    )]
    NoTunDriver { port: String, iface: String },
    #[error("port {port}: {what} TAP {iface:?}: permission denied (needs root or CAP_NET_ADMIN)")]
    Permission {
        port: String,
        iface: String,
        what: &'static str,
    },
    #[error(
        "port {port}: interface {iface:?} already exists and is {kind}, not a TAP; choose \
         another name or remove it"
    )]
    NotTap {
        port: String,
        iface: String,
        kind: String,
    },
    #[error(
        "port {port}: TAP {iface:?} is already in use by another process (a single-queue TAP \
         can be attached once)"
    )]
    Busy { port: String, iface: String },
    #[error(
        "port {port}: TAP {iface:?} exists {existing}, but the port has rxqs = {rxqs}; \
         recreate it (`ip tuntap add dev {iface} mode tap{mq}`) or change rxqs"
    )]
    QueueMismatch {
        port: String,
        iface: String,
        existing: &'static str,
        rxqs: usize,
        mq: &'static str,
    },
    #[error("port {port}: {what} TAP {iface:?}: {err}")]
    Io {
        port: String,
        iface: String,
        what: &'static str,
        err: std::io::Error,
    },
}

/// Opens a TAP port, assuming the default packet buffer size
/// ([`DEFAULT_MAX_FRAME`]).
pub fn open(cfg: &PortConfig) -> Result<Arc<dyn Port>, OpenError> {
    open_with(cfg, DEFAULT_MAX_FRAME)
}

/// Opens a TAP port for a switch whose packet buffers hold frames of up
/// to `max_frame` bytes (`memory.frame_size - nfv_mem::HEADROOM`).
pub fn open_with(cfg: &PortConfig, max_frame: usize) -> Result<Arc<dyn Port>, OpenError> {
    Ok(Arc::new(TapPort::open(cfg, max_frame)?))
}

/// A TAP port. Closing it (dropping the port and its queues) closes the
/// descriptors, which removes the interface if the switch created it.
///
/// Thread safety: `Sync`; queues share the descriptors (`Arc`), the
/// mutex is taken only when a tx queue opens and by `info`.
pub struct TapPort {
    name: String,
    iface: String,
    created: bool,
    mac: [u8; 6],
    max_frame: usize,
    fds: Vec<Arc<OwnedFd>>,
    rx_counters: Vec<Arc<Counters>>,
    tx_counters: Mutex<Vec<Arc<Counters>>>,
}

impl TapPort {
    /// Opens (creating if needed) the TAP of `cfg`.
    pub fn open(cfg: &PortConfig, max_frame: usize) -> Result<TapPort, OpenError> {
        let Some(tc) = cfg.kind.settings::<TapConfig>() else {
            return Err(OpenError::WrongType {
                port: cfg.name.clone(),
                kind: cfg.kind.type_name(),
            });
        };
        let port = cfg.name.clone();
        let iface = tc.iface.clone();
        let rxqs = cfg.rxqs;
        let os_err = |err: IfaceError| OpenError::Iface {
            port: port.clone(),
            err,
        };
        nfv_netdev::check_name(&iface).map_err(os_err)?;
        settings::check_rxqs(rxqs).map_err(|msg| OpenError::Config {
            port: port.clone(),
            msg,
        })?;
        let existed = existing_tap(&port, &iface)?;
        let dev_err = |e: DevError| dev_error(e, &port, &iface, rxqs);
        let fds = attach_queues(&iface, rxqs, existed, dev_err)?;
        // From here on, an error closes the descriptors, which removes the
        // interface again if we created it.
        let flags = dev::flags(&fds[0]).map_err(dev_err)?;
        let created = !existed && flags & libc::IFF_PERSIST == 0;
        // Frames are read behind their virtio-net header.
        let mtu = nfv_netdev::mtu_fitting(&iface, max_frame - VNET_HDR_LEN).map_err(os_err)?;
        let need = mtu + 18;
        nfv_netdev::set_up(&iface).map_err(os_err)?;
        let mac = nfv_netdev::mac(&iface).map_err(os_err)?;
        tracing::info!(
            "port {port}: TAP {iface} ({}, {rxqs} queue(s), MTU {mtu})",
            if created { "created" } else { "existing" }
        );
        Ok(TapPort {
            name: port,
            iface,
            created,
            mac,
            max_frame: need,
            rx_counters: (0..rxqs).map(|_| Arc::default()).collect(),
            fds,
            tx_counters: Mutex::new(Vec::new()),
        })
    }

    /// Whether the switch created the interface (and so removes it).
    pub fn created(&self) -> bool {
        self.created
    }

    pub fn iface(&self) -> &str {
        &self.iface
    }
}

/// Whether `iface` exists already (then it is attached to, and left in
/// place on close); an error if it exists and is not a TAP.
fn existing_tap(port: &str, iface: &str) -> Result<bool, OpenError> {
    let os_err = |err: IfaceError| OpenError::Iface {
        port: port.to_string(),
        err,
    };
    let existed = match nfv_netdev::index(iface) {
        Ok(_) => true,
        Err(IfaceError::Missing(_)) => false,
        Err(e) => return Err(os_err(e)),
    };
    if existed {
        let d = nfv_netdev::driver_info(iface).map_err(os_err)?;
        let kind = match (d.driver.as_str(), d.bus_info.as_str()) {
            ("tun", "tap") => None,
            ("tun", _) => Some("a TUN (layer 3) device".to_string()),
            ("", _) => Some("an interface without ethtool driver info".to_string()),
            (drv, _) => Some(format!("a {drv} interface")),
        };
        if let Some(kind) = kind {
            return Err(OpenError::NotTap {
                port: port.to_string(),
                iface: iface.to_string(),
                kind,
            });
        }
    }
    Ok(existed)
}

/// One tun descriptor per rx queue, each attached to `iface` (creating
/// it with the first if it did not exist). Errors are mapped by
/// `dev_err` while the descriptors opened so far are still open, so a
/// mismatch is explained against the interface as it then stood.
fn attach_queues(
    iface: &str,
    rxqs: usize,
    existed: bool,
    dev_err: impl Fn(DevError) -> OpenError,
) -> Result<Vec<Arc<OwnedFd>>, OpenError> {
    let mut fds = Vec::with_capacity(rxqs);
    for _ in 0..rxqs {
        let fd = dev::open_tun().map_err(&dev_err)?;
        let what = if existed { "attaching to" } else { "creating" };
        dev::attach(&fd, iface, rxqs > 1, what).map_err(&dev_err)?;
        fds.push(Arc::new(fd));
    }
    Ok(fds)
}

/// The open error for a failed step with the tun device: what the user
/// of port `port` (TAP `iface`, `rxqs` queues) must change.
fn dev_error(e: DevError, port: &str, iface: &str, rxqs: usize) -> OpenError {
    let (port, iface) = (port.to_string(), iface.to_string());
    match e {
        DevError::NoDevice => OpenError::NoTunDevice { port, iface },
        DevError::NoDriver => OpenError::NoTunDriver { port, iface },
        DevError::Permission(what) => OpenError::Permission { port, iface, what },
        DevError::Busy => OpenError::Busy { port, iface },
        DevError::Mismatch => {
            let mq = multi_queue_of(&iface);
            match mq {
                Some(mq) if mq != (rxqs > 1) => OpenError::QueueMismatch {
                    port,
                    iface,
                    existing: if mq {
                        "with multi_queue"
                    } else {
                        "without multi_queue"
                    },
                    rxqs,
                    mq: if rxqs > 1 { " multi_queue" } else { "" },
                },
                _ => OpenError::NotTap {
                    port,
                    iface,
                    kind: "an interface the tun driver would not attach to".into(),
                },
            }
        }
        DevError::Other(what, err) => OpenError::Io {
            port,
            iface,
            what,
            err,
        },
    }
}

/// Whether an existing TUN/TAP interface was made multi-queue, from
/// sysfs (`None` if unknown).
fn multi_queue_of(iface: &str) -> Option<bool> {
    let s = std::fs::read_to_string(format!("/sys/class/net/{iface}/tun_flags")).ok()?;
    let flags = i64::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok()?;
    Some(flags & i64::from(libc::IFF_MULTI_QUEUE) != 0)
}

impl Port for TapPort {
    fn name(&self) -> &str {
        &self.name
    }
    fn type_name(&self) -> &'static str {
        "tap"
    }
    fn n_rxq(&self) -> usize {
        self.fds.len()
    }
    fn open_rxq(&self, q: usize) -> Box<dyn RxQueue> {
        let i = q % self.fds.len();
        Box::new(TapRx {
            fd: self.fds[i].clone(),
            counters: self.rx_counters[i].clone(),
        })
    }
    fn open_txq(&self, q: usize) -> Box<dyn TxQueue> {
        let counters = Arc::new(Counters::default());
        self.tx_counters
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(counters.clone());
        Box::new(TapTx {
            fd: self.fds[q % self.fds.len()].clone(),
            max_frame: self.max_frame,
            counters,
        })
    }
    fn gauges(&self) -> PortGauges {
        let rx = |f: fn(&Counters) -> &std::sync::atomic::AtomicU64| -> u64 {
            self.rx_counters.iter().map(|c| f(c).load(Relaxed)).sum()
        };
        let txc = self.tx_counters.lock().unwrap_or_else(|p| p.into_inner());
        let tx = |f: fn(&Counters) -> &std::sync::atomic::AtomicU64| -> u64 {
            txc.iter().map(|c| f(c).load(Relaxed)).sum()
        };
        let created = if self.created {
            "yes (removed when the port closes)"
        } else {
            "no (existing TAP, left in place)"
        };
        let kernel_drops = dev::kernel_tx_dropped(&self.iface)
            .map_or_else(|| Gauge::from("n/a (not in this namespace)"), Gauge::from);
        PortGauges::default()
            .with("iface", self.iface.as_str())
            .with("created", created)
            .with("queues", self.fds.len())
            .with("mac", nfv_wire::EthernetAddress(self.mac).to_string())
            .with("max_frame", self.max_frame)
            .with(
                "syscalls",
                "one read()/write() per frame (a TAP has no batched I/O)",
            )
            .with("kernel_drops", kernel_drops)
            .with("rx_truncated", rx(|c| &c.rx_truncated))
            .with("rx_errors", rx(|c| &c.rx_errors))
            .with("tx_eagain", tx(|c| &c.tx_eagain))
            .with("tx_short_writes", tx(|c| &c.tx_short))
            .with("tx_refused", tx(|c| &c.tx_refused))
            .with("tx_errors", tx(|c| &c.tx_errors))
            .with("tx_gso_frames", tx(|c| &c.tx_gso_frames))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_port_the_interface_and_the_remedy() {
        let (port, iface) = ("host0".to_string(), "tap0".to_string());
        let cases: Vec<(OpenError, &str)> = vec![
            (
                OpenError::NoTunDevice {
                    port: port.clone(),
                    iface: iface.clone(),
                },
                "port host0: cannot open TAP \"tap0\": /dev/net/tun does not exist (load the tun \
                 module with `modprobe tun`; in a container, pass the device in, e.g. \
                 `--device /dev/net/tun`)",
            ),
            (
                OpenError::NoTunDriver {
                    port: port.clone(),
                    iface: iface.clone(),
                },
                "port host0: cannot open TAP \"tap0\": /dev/net/tun has no driver (load the tun \
                 module with `modprobe tun`)",
            ),
            (
                OpenError::Permission {
                    port: port.clone(),
                    iface: iface.clone(),
                    what: "opening /dev/net/tun for",
                },
                "port host0: opening /dev/net/tun for TAP \"tap0\": permission denied (needs \
                 root or CAP_NET_ADMIN)",
            ),
            (
                OpenError::Busy { port, iface },
                "port host0: TAP \"tap0\" is already in use by another process (a single-queue \
                 TAP can be attached once)",
            ),
        ];
        for (e, want) in cases {
            assert_eq!(e.to_string(), want);
        }
    }
}
