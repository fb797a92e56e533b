//! The VNF's options: [`VnfOptions`] is what a user typed (strings and
//! numbers, every field with its default), [`VnfConfig`] the validated
//! form the runtime works with. Errors name the command-line flag.

use nfv_wire::EthernetAddress;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

/// Who opens the vhost-user socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Connect to the switch's listening socket, retrying until it appears
    /// and again after every disconnect (DPDK virtio-user's default).
    Client,
    /// Listen on the socket and wait for the switch to connect
    /// (testpmd's `server=1`).
    Server,
}

/// How the VNF reaches the switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interface {
    /// vhost-user: the VNF is the virtio-net driver (`--socket`).
    VhostUser,
    /// memif: the VNF is the memif client of the switch's memif port
    /// (`--memif`), asking for interface `id` (`--memif-id`).
    Memif { id: u32 },
}

/// Which app runs between the rx and tx virtqueues.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppKind {
    /// Forward unchanged.
    Io,
    /// Swap source and destination MAC.
    MacSwap,
    /// Destination MAC := next hop, source MAC := the VNF's own MAC.
    L2Fwd,
}

impl AppKind {
    pub fn name(&self) -> &'static str {
        match self {
            AppKind::Io => "io",
            AppKind::MacSwap => "macswap",
            AppKind::L2Fwd => "l2fwd",
        }
    }
}

/// How the VNF waits for packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PollMode {
    /// Spin forever (one core at 100%).
    Busy,
    /// Spin while packets flow; after `idle_polls` empty polls ask the
    /// switch for an interrupt and sleep on the call eventfd.
    Adaptive,
}

/// A MAC address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize)]
pub struct Mac(pub [u8; 6]);

impl FromStr for Mac {
    type Err = String;
    /// `02:00:00:00:00:01` (or with `-`), as `nfv_wire::EthernetAddress`
    /// reads it.
    fn from_str(s: &str) -> Result<Mac, String> {
        s.parse::<EthernetAddress>()
            .map(|a| Mac(a.0))
            .map_err(|_| format!("{s:?} is not a MAC address like 02:00:00:00:00:01"))
    }
}

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        EthernetAddress(self.0).fmt(f)
    }
}

impl Mac {
    /// A stable, locally administered unicast MAC derived from `seed`
    /// (the socket path), so VNFs on different sockets differ.
    pub fn derived(seed: &[u8]) -> Mac {
        // FNV-1a: tiny and stable across releases (unlike `DefaultHasher`).
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for &b in seed {
            h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
        let b = h.to_le_bytes();
        Mac([0x02, b[0], b[1], b[2], b[3], b[4]])
    }
}

/// Options as typed, before validation (see `nfvswitch vnf --help`).
#[derive(Clone, Debug)]
pub struct VnfOptions {
    pub socket: PathBuf,
    /// A memif socket instead of `socket` (the VNF is then a memif
    /// client).
    pub memif: Option<PathBuf>,
    pub memif_id: u32,
    pub mode: String,
    pub app: String,
    pub next_hop: Option<String>,
    pub mac: Option<String>,
    pub queues: u32,
    pub ring_size: u32,
    pub mrg_rxbuf: bool,
    /// Ask for packed virtqueues (VIRTIO_F_RING_PACKED).
    pub packed: bool,
    pub poll: String,
    pub idle_polls: u32,
    pub stats_every: f64,
    pub cpu: Option<usize>,
    pub exit_after: Option<f64>,
    pub json_stats: Option<PathBuf>,
}

impl Default for VnfOptions {
    fn default() -> Self {
        VnfOptions {
            socket: PathBuf::new(),
            memif: None,
            memif_id: 0,
            mode: "client".into(),
            app: "io".into(),
            next_hop: None,
            mac: None,
            queues: 1,
            ring_size: 1024,
            mrg_rxbuf: true,
            packed: false,
            poll: "adaptive".into(),
            idle_polls: 1000,
            stats_every: 1.0,
            cpu: None,
            exit_after: None,
            json_stats: None,
        }
    }
}

/// The largest number of queue pairs the VNF sets up.
pub const MAX_QUEUES: u32 = 16;

/// A validated VNF configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct VnfConfig {
    /// The vhost-user or memif socket (`interface` says which).
    pub socket: PathBuf,
    pub interface: Interface,
    pub mode: Mode,
    pub app: AppKind,
    /// Destination MAC for `l2fwd` (required there, rejected elsewhere).
    pub next_hop: Option<Mac>,
    /// The VNF's own MAC (`l2fwd` source address).
    pub mac: Mac,
    /// Queue pairs: rx virtqueue 2i, tx virtqueue 2i+1.
    pub queues: u16,
    /// Descriptors per virtqueue (power of two).
    pub ring_size: u16,
    pub mrg_rxbuf: bool,
    /// Packed virtqueues instead of split ones (vhost-user only).
    pub packed: bool,
    pub poll: PollMode,
    /// Empty polls in a row before an adaptive VNF goes to sleep.
    pub idle_polls: u32,
    /// Stats line period; `None` prints only the final counters.
    pub stats_every: Option<Duration>,
    pub cpu: Option<usize>,
    pub exit_after: Option<Duration>,
    pub json_stats: Option<PathBuf>,
}

/// A rejected option; names the flag.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("--{flag}: {msg}")]
pub struct ConfigError {
    pub flag: &'static str,
    pub msg: String,
}

fn bad(flag: &'static str, msg: impl Into<String>) -> ConfigError {
    ConfigError {
        flag,
        msg: msg.into(),
    }
}

fn seconds(flag: &'static str, v: f64) -> Result<Duration, ConfigError> {
    Duration::try_from_secs_f64(v).map_err(|_| bad(flag, format!("{v} is not a number of seconds")))
}

impl TryFrom<VnfOptions> for VnfConfig {
    type Error = ConfigError;

    /// Checks the options in the order the flags are documented; the
    /// first refusal wins.
    fn try_from(o: VnfOptions) -> Result<VnfConfig, ConfigError> {
        let (socket, interface) = socket_and_interface(o.memif, o.socket, o.memif_id)?;
        let mode = mode(&o.mode)?;
        check_interface(interface, mode, o.packed, o.ring_size)?;
        let app = app(&o.app)?;
        let poll = poll(&o.poll)?;
        let next_hop = next_hop(o.next_hop.as_deref(), app)?;
        let mac = mac(o.mac.as_deref(), &socket)?;
        check_sizes(o.queues, o.ring_size, o.idle_polls)?;
        let stats_every = stats_every(o.stats_every)?;
        let exit_after = o.exit_after.map(|v| seconds("exit-after", v)).transpose()?;
        if let Some(c) = o.cpu
            && c >= libc::CPU_SETSIZE as usize
        {
            return Err(bad("cpu", format!("{c} is not a CPU number")));
        }
        Ok(VnfConfig {
            socket,
            interface,
            mode,
            app,
            next_hop,
            mac,
            queues: o.queues as u16,
            ring_size: o.ring_size as u16,
            mrg_rxbuf: o.mrg_rxbuf,
            packed: o.packed,
            poll,
            idle_polls: o.idle_polls,
            stats_every,
            cpu: o.cpu,
            exit_after,
            json_stats: o.json_stats,
        })
    }
}

/// `--socket` (vhost-user) or `--memif` (with `--memif-id`): exactly one.
fn socket_and_interface(
    memif: Option<PathBuf>,
    socket: PathBuf,
    memif_id: u32,
) -> Result<(PathBuf, Interface), ConfigError> {
    match (memif, socket.as_os_str().is_empty()) {
        (Some(_), false) => Err(bad(
            "memif",
            "give --socket (vhost-user) or --memif, not both",
        )),
        (Some(m), true) if m.as_os_str().is_empty() => {
            Err(bad("memif", "a memif socket path (or @name) is required"))
        }
        (Some(m), true) => Ok((m, Interface::Memif { id: memif_id })),
        (None, true) => Err(bad(
            "socket",
            "a vhost-user socket path is required (or --memif SOCKET)",
        )),
        (None, false) => Ok((socket, Interface::VhostUser)),
    }
}

fn mode(s: &str) -> Result<Mode, ConfigError> {
    match s {
        "client" => Ok(Mode::Client),
        "server" => Ok(Mode::Server),
        m => Err(bad("mode", format!("{m:?} is not client or server"))),
    }
}

/// What a memif VNF cannot do: listen, packed virtqueues, rings larger
/// than memif's.
fn check_interface(
    interface: Interface,
    mode: Mode,
    packed: bool,
    ring_size: u32,
) -> Result<(), ConfigError> {
    if mode == Mode::Server && interface != Interface::VhostUser {
        return Err(bad(
            "mode",
            "a memif VNF is always the client (the switch's memif port listens)",
        ));
    }
    if packed && interface != Interface::VhostUser {
        return Err(bad("packed", "packed virtqueues are a vhost-user feature"));
    }
    if let Interface::Memif { .. } = interface
        && ring_size > 1 << nfv_wire::memif::ring::MAX_LOG2_SIZE
    {
        return Err(bad(
            "ring-size",
            format!("{ring_size} is more than a memif ring holds (16384)"),
        ));
    }
    Ok(())
}

fn app(s: &str) -> Result<AppKind, ConfigError> {
    match s {
        "io" => Ok(AppKind::Io),
        "macswap" => Ok(AppKind::MacSwap),
        "l2fwd" => Ok(AppKind::L2Fwd),
        a => Err(bad("app", format!("{a:?} is not io, macswap or l2fwd"))),
    }
}

fn poll(s: &str) -> Result<PollMode, ConfigError> {
    match s {
        "busy" => Ok(PollMode::Busy),
        "adaptive" => Ok(PollMode::Adaptive),
        p => Err(bad("poll", format!("{p:?} is not busy or adaptive"))),
    }
}

/// `--next-hop`: required by `l2fwd`, refused by every other app.
fn next_hop(s: Option<&str>, app: AppKind) -> Result<Option<Mac>, ConfigError> {
    match (s, app) {
        (Some(s), AppKind::L2Fwd) => Ok(Some(s.parse().map_err(|e| bad("next-hop", e))?)),
        (None, AppKind::L2Fwd) => Err(bad("next-hop", "required by --app l2fwd")),
        (Some(_), _) => Err(bad("next-hop", "only used by --app l2fwd")),
        (None, _) => Ok(None),
    }
}

/// `--mac`, else one derived from the socket path; never multicast.
fn mac(s: Option<&str>, socket: &Path) -> Result<Mac, ConfigError> {
    let mac: Mac = match s {
        Some(s) => s.parse().map_err(|e| bad("mac", e))?,
        None => Mac::derived(socket.as_os_str().as_encoded_bytes()),
    };
    if mac.0[0] & 1 != 0 {
        return Err(bad("mac", format!("{mac} is a multicast address")));
    }
    Ok(mac)
}

fn check_sizes(queues: u32, ring_size: u32, idle_polls: u32) -> Result<(), ConfigError> {
    if !(1..=MAX_QUEUES).contains(&queues) {
        return Err(bad(
            "queues",
            format!("{queues} is not in 1..={MAX_QUEUES}"),
        ));
    }
    if !ring_size.is_power_of_two() || !(64..=32768).contains(&ring_size) {
        return Err(bad(
            "ring-size",
            format!("{ring_size} is not a power of two in 64..=32768"),
        ));
    }
    if idle_polls == 0 {
        return Err(bad("idle-polls", "must be at least 1"));
    }
    Ok(())
}

/// `--stats-every`: 0 (off) or at least 10 ms.
fn stats_every(v: f64) -> Result<Option<Duration>, ConfigError> {
    let stats_every = match v {
        0.0 => None,
        v => Some(seconds("stats-every", v)?),
    };
    if stats_every.is_some_and(|d| d < Duration::from_millis(10)) {
        return Err(bad("stats-every", "must be 0 (off) or at least 0.01 s"));
    }
    Ok(stats_every)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> VnfOptions {
        VnfOptions {
            socket: "/tmp/x.sock".into(),
            ..Default::default()
        }
    }

    #[test]
    fn defaults_validate() {
        let c = VnfConfig::try_from(opts()).unwrap();
        assert_eq!(c.mode, Mode::Client);
        assert_eq!(c.app, AppKind::Io);
        assert_eq!(c.poll, PollMode::Adaptive);
        assert_eq!((c.queues, c.ring_size), (1, 1024));
        assert_eq!(c.stats_every, Some(Duration::from_secs(1)));
        assert_eq!(c.mac.0[0], 0x02, "locally administered unicast");
        assert_eq!(c.mac, VnfConfig::try_from(opts()).unwrap().mac, "stable");
    }

    #[test]
    fn errors_name_the_flag() {
        type Edit = fn(&mut VnfOptions);
        let cases: Vec<(Edit, &str)> = vec![
            (|o| o.socket = PathBuf::new(), "socket"),
            (|o| o.mode = "peer".into(), "mode"),
            (|o| o.app = "nat".into(), "app"),
            (|o| o.poll = "lazy".into(), "poll"),
            (|o| o.app = "l2fwd".into(), "next-hop"),
            (
                |o| o.next_hop = Some("02:00:00:00:00:01".into()),
                "next-hop",
            ),
            (|o| o.mac = Some("01:00:5e:00:00:01".into()), "mac"),
            (|o| o.mac = Some("02:00:00:00:00".into()), "mac"),
            (|o| o.queues = 0, "queues"),
            (|o| o.queues = 17, "queues"),
            (|o| o.ring_size = 1000, "ring-size"),
            (|o| o.ring_size = 65536, "ring-size"),
            (|o| o.stats_every = -1.0, "stats-every"),
            (|o| o.stats_every = 0.001, "stats-every"),
            (|o| o.exit_after = Some(f64::NAN), "exit-after"),
            (|o| o.memif = Some("/tmp/m.sock".into()), "memif"),
            (
                |o| {
                    o.socket = PathBuf::new();
                    o.memif = Some("/tmp/m.sock".into());
                    o.mode = "server".into();
                },
                "mode",
            ),
            (
                |o| {
                    o.socket = PathBuf::new();
                    o.memif = Some("/tmp/m.sock".into());
                    o.ring_size = 32768;
                },
                "ring-size",
            ),
        ];
        for (edit, flag) in cases {
            let mut o = opts();
            edit(&mut o);
            let e = VnfConfig::try_from(o).unwrap_err();
            assert_eq!(e.flag, flag, "{e}");
            assert!(e.to_string().starts_with(&format!("--{flag}: ")));
        }
    }

    #[test]
    fn l2fwd_takes_next_hop() {
        let mut o = opts();
        o.app = "l2fwd".into();
        o.next_hop = Some("aa-bb-cc-dd-ee-0f".into());
        o.mac = Some("02:00:00:00:00:09".into());
        let c = VnfConfig::try_from(o).unwrap();
        assert_eq!(c.next_hop, Some(Mac([0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0x0f])));
        assert_eq!(c.mac.to_string(), "02:00:00:00:00:09");
    }

    #[test]
    fn memif_takes_its_socket_and_id() {
        let o = VnfOptions {
            memif: Some("@/run/memif.sock".into()),
            memif_id: 4,
            ..Default::default()
        };
        let c = VnfConfig::try_from(o).unwrap();
        assert_eq!(c.interface, Interface::Memif { id: 4 });
        assert_eq!(c.socket, PathBuf::from("@/run/memif.sock"));
    }

    #[test]
    fn zero_stats_every_is_off() {
        let mut o = opts();
        o.stats_every = 0.0;
        assert_eq!(VnfConfig::try_from(o).unwrap().stats_every, None);
    }
}
