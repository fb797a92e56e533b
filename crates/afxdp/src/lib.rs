//! `afxdp`: an AF_XDP port on a kernel interface — the OVS `afxdp`
//! netdev, without libbpf or clang.
//!
//! One AF_XDP socket per rx queue (NIC queue `q` for `q in 0..rxqs`), each
//! with its own UMEM of `2 × ring_size` frames of 2 KiB: half for rx (all
//! of them on the fill ring to start with), half for tx. A built-in
//! six-instruction XDP program redirects each queue's frames to its socket
//! through an XSKMAP; it is attached with a `bpf_link`, native mode first,
//! generic (SKB) mode if the driver has no XDP, and detached when the port
//! is dropped (or the process dies). Sockets bind zero-copy or copy as
//! configured (`auto`: zero-copy if the driver can, logged if not) and
//! always with need-wakeup, so the fast path makes a syscall only when a
//! ring's flag asks for one — at most one per burst.
//!
//! Modules, one concern each: [`ring`] (index arithmetic over the shared
//! rings), [`umem`] (frame memory and mappings), [`xsk`] (socket set-up),
//! [`bpf`] (program, map, link), [`rx`] and [`tx`] (the bursts), [`port`]
//! (opening, errors, `show ports` facts and the kernel's drop counters).
//!
//! Rx copies each frame into a switch pool packet and refills the fill
//! ring in the same burst (`rx.rs` explains why); tx copies packets into
//! tx frames (`tx.rs`, including how PMD threads share a socket).

pub mod bpf;
pub mod guest_umem;
pub mod port;
pub mod ring;
pub mod rx;
mod settings;
pub mod tx;
pub mod umem;
pub mod xsk;
pub mod zero_copy;
mod zero_copy_choice;
mod zero_copy_rx;
pub mod zero_copy_tx;

pub use bpf::AttachMode;
pub use port::AfXdpPort;
pub use settings::{AFXDP, AfXdpConfig, AfXdpType, SendInPlace, XdpBindMode, ZeroCopy};
pub use xsk::Bind;

use nfv_netdev::IfaceError;
use nfv_ports::{Port, PortConfig};
use nfv_virtio::lend::Lenders;
use std::io;
use std::sync::Arc;

/// Why a port could not be opened. Every message names the port, and the
/// interface when there is one, and says what to do.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("port {port}: not an afxdp port (type {kind:?})")]
    WrongKind { port: String, kind: &'static str },
    #[error("port {port}: {msg}")]
    Config { port: String, msg: String },
    #[error("port {port}: {err}")]
    Iface { port: String, err: IfaceError },
    #[error(
        "port {port}: interface {iface:?} has MTU {mtu}, too big for AF_XDP frames of {chunk} \
         bytes (a received frame must fit in {frame_max} bytes including the Ethernet header and \
         a VLAN tag): set the MTU to {fits} or less (`ip link set dev {iface} mtu {fits}`)"
    )]
    MtuTooBig {
        port: String,
        iface: String,
        mtu: usize,
        chunk: usize,
        frame_max: usize,
        fits: usize,
    },
    #[error(
        "port {port}: interface {iface:?} has {rx} rx and {tx} tx queue(s), the port wants {want} \
         (rxqs); lower rxqs or add queues (`ethtool -L {iface} combined {want}`)"
    )]
    TooFewQueues {
        port: String,
        iface: String,
        rx: usize,
        tx: usize,
        want: usize,
    },
    #[error(
        "port {port}: interface {iface:?}: {what}: permission denied (AF_XDP needs root, or \
         CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF)"
    )]
    Permission {
        port: String,
        iface: String,
        what: &'static str,
    },
    #[error(
        "port {port}: interface {iface:?} already has an XDP program attached (another port, \
         another AF_XDP application or `ip link set ... xdp`); see `ip link show dev {iface}` \
         (prog/xdp id N) and `bpftool net show dev {iface}`"
    )]
    AlreadyAttached { port: String, iface: String },
    #[error(
        "port {port}: interface {iface:?} queue {queue} is already used by another AF_XDP socket"
    )]
    QueueBusy {
        port: String,
        iface: String,
        queue: u32,
    },
    #[error(
        "port {port}: interface {iface:?} queue {queue}: zero-copy was requested (mode = \
         \"zero-copy\") but the driver does not support it ({err}); use mode = \"copy\" or \"auto\""
    )]
    ZeroCopyUnsupported {
        port: String,
        iface: String,
        queue: u32,
        err: io::Error,
    },
    #[error(
        "port {port}: interface {iface:?}: registering the UMEM: {err} (locked-memory limit? \
         run as root, or raise it: `ulimit -l unlimited`)"
    )]
    Memlock {
        port: String,
        iface: String,
        err: io::Error,
    },
    #[error("port {port}: the kernel rejected the XDP program: {err}; verifier log:\n{log}")]
    Verifier {
        port: String,
        err: io::Error,
        log: String,
    },
    #[error("port {port}: interface {iface:?}: {what}: {err}")]
    Os {
        port: String,
        iface: String,
        what: &'static str,
        err: io::Error,
    },
}

impl OpenError {
    /// Wraps an OS error of step `what`: EPERM/EACCES become
    /// [`OpenError::Permission`], ENODEV/ENXIO a missing interface.
    pub fn from_os(port: &str, iface: &str, what: &'static str, err: io::Error) -> OpenError {
        match err.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => OpenError::Permission {
                port: port.to_string(),
                iface: iface.to_string(),
                what,
            },
            Some(libc::ENODEV) | Some(libc::ENXIO) => OpenError::Iface {
                port: port.to_string(),
                err: IfaceError::Missing(iface.to_string()),
            },
            _ => OpenError::Os {
                port: port.to_string(),
                iface: iface.to_string(),
                what,
                err,
            },
        }
    }
}

/// Opens a port of this type from its validated config, on its own: a
/// `zero_copy` queue finds no VNF port to borrow from (it copies), and
/// `auto` no route.
pub fn open(cfg: &PortConfig) -> Result<Arc<dyn Port>, OpenError> {
    open_with(cfg, Arc::new(nfv_ports::NoRoutes), &Arc::default())
}

/// [`open`] in a node: `routes` answers `zero_copy = "auto"`, and a
/// zero-copy queue finds the VNF port it borrows from in `lenders`
/// (looked up by name while it has none: the port may be added later).
pub fn open_with(
    cfg: &PortConfig,
    routes: Arc<dyn nfv_ports::Routes>,
    lenders: &Arc<Lenders>,
) -> Result<Arc<dyn Port>, OpenError> {
    let Some(x) = cfg.kind.settings::<AfXdpConfig>() else {
        return Err(OpenError::WrongKind {
            port: cfg.name.clone(),
            kind: cfg.kind.type_name(),
        });
    };
    let target = match &x.zero_copy {
        ZeroCopy::Off => None,
        ZeroCopy::Into(p) => Some(zero_copy::Target::Port(p.clone())),
        ZeroCopy::Auto => Some(zero_copy::Target::Auto {
            routes,
            port: cfg.id,
        }),
    };
    Ok(Arc::new(AfXdpPort::open(
        &cfg.name, cfg.rxqs, x, target, lenders,
    )?))
}
