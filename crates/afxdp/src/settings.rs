//! The `afxdp` port's settings: its `[[port]]` keys, their parsing and
//! the limits `open` checks again (a `PortConfig` may be built in code,
//! without the config file's checks). The port type, which hands its keys
//! over to here, is in `port.rs`.

use nfv_ports::config::{PortSettings, same_settings};
use nfv_settings::{PortTable, SettingError};

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
    /// Whose guest receive buffers this port's rx queues receive into
    /// (`zero_copy`, see `zero_copy.rs`).
    pub zero_copy: ZeroCopy,
    /// With `zero_copy`: whether frames that VNF sends out of this port
    /// go with their tails read by the kernel from its transmit buffers
    /// (`zero_copy_tx.rs`). `auto`: on a zero-copy driver bind only — on
    /// a copy bind (veth, generic XDP) the kernel copies every frame
    /// anyway and its multi-buffer path costs more than the switch's copy
    /// (bench/README.md).
    pub send_in_place: SendInPlace,
    /// With `zero_copy`: a queue whose frames average less than this many
    /// bytes (over a second) receives on a copy socket instead — below
    /// ~256 B lending a guest buffer costs more than the copy it saves
    /// (bench/README.md) — and goes back to zero copy once they average
    /// 64 B more. 0: always zero copy. Default [`MIN_FRAME_DEFAULT`].
    pub zero_copy_min_frame: u32,
}

/// Default of [`AfXdpConfig::zero_copy_min_frame`].
pub const MIN_FRAME_DEFAULT: u32 = 224;

/// `zero_copy`: where an AF_XDP port's rx queues receive.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum ZeroCopy {
    /// Every frame is copied into the switch's packets (no key).
    #[default]
    Off,
    /// Into the guest receive buffers of this vhost-user port
    /// (`zero_copy = "vnf1"`).
    Into(String),
    /// Into those of the vhost-user port the flow table sends every frame
    /// of this port to, while there is one (`zero_copy = "auto"`; the
    /// queues follow rule changes, copying while no single port gets
    /// everything).
    Auto,
}

impl ZeroCopy {
    /// The `zero_copy` value that asks for [`ZeroCopy::Auto`] (so no
    /// vhost-user port called `auto` can be named).
    pub const AUTO: &'static str = "auto";
}

/// See [`AfXdpConfig::send_in_place`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendInPlace {
    Auto,
    On,
    Off,
}

impl AfXdpConfig {
    pub fn new(iface: impl Into<String>) -> AfXdpConfig {
        AfXdpConfig {
            iface: iface.into(),
            mode: XdpBindMode::Auto,
            ring_size: 2048,
            zero_copy: ZeroCopy::Off,
            send_in_place: SendInPlace::Auto,
            zero_copy_min_frame: MIN_FRAME_DEFAULT,
        }
    }
}

impl PortSettings for AfXdpConfig {
    fn type_name(&self) -> &'static str {
        "afxdp"
    }
    fn iface(&self) -> Option<&str> {
        Some(&self.iface)
    }
    fn borrows_from(&self) -> Option<&str> {
        match &self.zero_copy {
            ZeroCopy::Into(p) => Some(p),
            ZeroCopy::Off | ZeroCopy::Auto => None,
        }
    }
    fn eq_settings(&self, other: &dyn PortSettings) -> bool {
        same_settings(self, other)
    }
}

/// The `[[port]]` keys an `afxdp` port reads besides `name`, `id`, `type`
/// and `rxqs`.
pub const KEYS: &[&str] = &[
    "iface",
    "ring_size",
    "xdp_mode",
    "zero_copy",
    "send_in_place",
    "zero_copy_min_frame",
];

/// Reads an `afxdp` port's keys.
pub fn parse(t: &PortTable<'_>) -> Result<AfXdpConfig, SettingError> {
    let d = AfXdpConfig::new("");
    Ok(AfXdpConfig {
        iface: t.iface()?,
        mode: t.one_of_or(
            "xdp_mode",
            &[
                ("auto", XdpBindMode::Auto),
                ("copy", XdpBindMode::Copy),
                ("zero-copy", XdpBindMode::ZeroCopy),
            ],
            d.mode,
        )?,
        ring_size: t.pow2_or("ring_size", 64..=16384, d.ring_size)?,
        zero_copy: match t.name("zero_copy", nfv_ports::config::MAX_PORT_NAME)? {
            None => ZeroCopy::Off,
            Some(a) if a == ZeroCopy::AUTO => ZeroCopy::Auto,
            Some(p) => ZeroCopy::Into(p),
        },
        send_in_place: t.one_of_or(
            "send_in_place",
            &[
                ("auto", SendInPlace::Auto),
                ("on", SendInPlace::On),
                ("off", SendInPlace::Off),
            ],
            d.send_in_place,
        )?,
        zero_copy_min_frame: t.int_or("zero_copy_min_frame", 0..=9216, d.zero_copy_min_frame)?,
    })
}

/// Checks the ring size and the port's rx queue count against what the
/// port allows.
pub fn check(cfg: &AfXdpConfig, rxqs: usize) -> Result<(), String> {
    if !cfg.ring_size.is_power_of_two() || !(64..=16384).contains(&cfg.ring_size) {
        return Err(format!(
            "ring_size {} must be a power of two in 64..=16384",
            cfg.ring_size
        ));
    }
    if !(1..=64).contains(&rxqs) {
        return Err(format!("rxqs {rxqs} must be in 1..=64"));
    }
    Ok(())
}
