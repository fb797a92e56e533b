//! The `memif` port type: its settings, its `[[port]]` keys and its
//! registration ([`MEMIF`]).

use std::path::{Path, PathBuf};

use nfv_ports::config::{PortSettings, SocketShare, same_settings};
use nfv_settings::{PortTable, SettingError};
use nfv_wire::memif::Secret;

use crate::socket::SocketPath;

/// Which side of the memif connection the switch takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum MemifRole {
    /// The switch listens on `socket`; the VNF connects and owns the
    /// shared memory (DPDK `role=client`, VPP slave, libmemif apps).
    #[default]
    Server,
    /// The VNF listens (DPDK `role=server`, VPP master); the switch
    /// connects, retrying every second while it is absent and after it
    /// leaves, and owns the memory (`ring_size`, `buffer_size`).
    Client,
}

impl MemifRole {
    pub fn as_str(self) -> &'static str {
        match self {
            MemifRole::Server => "server",
            MemifRole::Client => "client",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct MemifConfig {
    /// The control socket: a file path, or `@name` for an abstract name
    /// (DPDK's default is `@/run/memif.sock`; abstract names belong to the
    /// network namespace, so pods in their own need a file).
    pub socket: PathBuf,
    /// The interface id the client asks for (key `interface_id`; DPDK
    /// `id=`, VPP `id`). Default 0.
    pub id: u32,
    /// The secret the client must give in INIT (at most 24 bytes; DPDK
    /// `secret=`). Default: none required.
    pub secret: Option<String>,
    /// Server role: most queue pairs (rings per direction) a client may
    /// add; client role: the pairs we ask for. 1..=16, default 1. The
    /// port has this many rx queues.
    pub queues: usize,
    pub role: MemifRole,
    /// Client role: slots per ring, a power of two 2..=16384 (default
    /// 1024, DPDK's).
    pub ring_size: usize,
    /// Client role: bytes per buffer, 128..=65535 (default 2048, DPDK's);
    /// longer frames are chained.
    pub buffer_size: u32,
    /// Forward frames in one copy: a frame received in one buffer is
    /// lent to the switch as a split packet (its head copied, its tail
    /// read from the peer's buffer by the output port) and the buffer goes
    /// back to the peer when the burst ends. False: every frame is copied
    /// into the switch's pool first, for A/B runs. Default true.
    pub one_copy: bool,
    /// Server role: most address space (bytes) one client's regions may
    /// make the switch map (each region rounded to its file's page size);
    /// a client over it is refused ("Shared memory over the port's
    /// limit") and counted (`memory_refused`), the port serves the next.
    /// Key `max_shared_memory_gib`, default
    /// [`crate::DEFAULT_MAX_SHARED_MEMORY`] (64 GiB), at most the node's
    /// default budget (`nfv_vhost::DEFAULT_NODE_GUEST_MEMORY`), which the
    /// mapping is also charged to. The client role maps only its own
    /// memory.
    pub max_shared_memory: u64,
}

impl MemifConfig {
    pub const MAX_QUEUES: usize = 16;
    /// Longest secret memif's INIT carries.
    pub const MAX_SECRET: usize = 24;

    pub fn new(socket: impl Into<PathBuf>) -> MemifConfig {
        MemifConfig {
            socket: socket.into(),
            id: 0,
            secret: None,
            queues: 1,
            role: MemifRole::Server,
            ring_size: 1024,
            buffer_size: 2048,
            one_copy: true,
            max_shared_memory: crate::connection::DEFAULT_MAX_SHARED_MEMORY,
        }
    }

    /// The socket as the control code takes it (file or abstract).
    pub fn socket_path(&self) -> SocketPath {
        SocketPath::parse(&self.socket.to_string_lossy())
    }

    pub(crate) fn secret(&self) -> Option<Secret> {
        self.secret.as_ref().map(|s| Secret::new(s.as_bytes()))
    }
}

impl PortSettings for MemifConfig {
    fn type_name(&self) -> &'static str {
        "memif"
    }
    fn socket(&self) -> Option<&Path> {
        Some(&self.socket)
    }
    /// Server-role ports share a socket when their interface ids differ.
    fn socket_share(&self) -> Option<SocketShare> {
        (self.role == MemifRole::Server).then_some(SocketShare {
            group: "memif server",
            member: u64::from(self.id),
            member_name: "interface_id",
        })
    }
    fn faces_vnf(&self) -> bool {
        true
    }
    fn rxqs(&self) -> Option<usize> {
        Some(self.queues)
    }
    fn eq_settings(&self, other: &dyn PortSettings) -> bool {
        same_settings(self, other)
    }
}

/// The `[[port]]` keys a `memif` port reads besides `name`, `id` and
/// `type` (its rx queues are `queues`, not `rxqs`).
pub const KEYS: &[&str] = &[
    "socket",
    "role",
    "interface_id",
    "secret",
    "queues",
    "ring_size",
    "buffer_size",
    "one_copy",
    "max_shared_memory_gib",
];

/// Reads a `memif` port's keys and checks them against each other.
pub fn parse(t: &PortTable<'_>) -> Result<MemifConfig, SettingError> {
    if t.has("rxqs") {
        return Err(t.error(
            "rxqs",
            "not valid for a port of type \"memif\": its rx queues are the client's \
             rings; set `queues`",
        ));
    }
    let socket = parse_socket(t)?;
    let role = t.one_of_or(
        "role",
        &[("server", MemifRole::Server), ("client", MemifRole::Client)],
        MemifRole::Server,
    )?;
    refuse_other_role_keys(t, role)?;
    let secret = parse_secret(t)?;
    let d = MemifConfig::new("");
    Ok(MemifConfig {
        socket,
        id: t.int_or("interface_id", 0..=i64::from(u32::MAX), d.id)?,
        secret,
        queues: t.int_or("queues", 1..=MemifConfig::MAX_QUEUES as i64, d.queues)?,
        role,
        ring_size: t.pow2_or("ring_size", 2..=16384, d.ring_size)?,
        buffer_size: t.int_or("buffer_size", 128..=65535, d.buffer_size)?,
        one_copy: t.bool_or("one_copy", d.one_copy)?,
        max_shared_memory: t.int_or::<u64>(
            "max_shared_memory_gib",
            1..=((nfv_vhost::DEFAULT_NODE_GUEST_MEMORY >> 30) as i64),
            d.max_shared_memory >> 30,
        )? << 30,
    })
}

/// `socket`, required: a file path (checked as every socket path is) or
/// `@name`, an abstract name that must fit `sun_path`.
fn parse_socket(t: &PortTable<'_>) -> Result<PathBuf, SettingError> {
    let raw: Option<String> = t.get("socket")?;
    let raw = t.required(
        "socket",
        raw,
        "a memif port needs `socket`, the path of its unix socket (or @name for an \
         abstract one)",
    )?;
    Ok(match raw.strip_prefix('@') {
        Some(name) if name.is_empty() || name.len() >= nfv_settings::MAX_SOCKET_PATH => {
            return Err(t.error(
                "socket",
                format!(
                    "an abstract socket name needs 1..{} bytes after the @",
                    nfv_settings::MAX_SOCKET_PATH - 1
                ),
            ));
        }
        Some(_) => PathBuf::from(raw),
        None => t.socket_path("socket")?.unwrap_or_default(),
    })
}

/// Refuses the keys that only the other role reads: a key that would be
/// silently ignored is a mistake the user should hear about.
fn refuse_other_role_keys(t: &PortTable<'_>, role: MemifRole) -> Result<(), SettingError> {
    if role == MemifRole::Server {
        for key in ["ring_size", "buffer_size"] {
            if t.has(key) {
                return Err(t.error(
                    key,
                    "only for role = \"client\": in the server role the client (the \
                     VNF) owns the memory and chooses its rings and buffers",
                ));
            }
        }
    }
    if role == MemifRole::Client && t.has("max_shared_memory_gib") {
        return Err(t.error(
            "max_shared_memory_gib",
            "only for role = \"server\": in the client role the switch maps only the \
             memory it creates",
        ));
    }
    Ok(())
}

/// `secret`, if given: 1..=[`MemifConfig::MAX_SECRET`] bytes (what INIT
/// carries).
fn parse_secret(t: &PortTable<'_>) -> Result<Option<String>, SettingError> {
    let secret: Option<String> = t.get("secret")?;
    if let Some(s) = &secret
        && (s.is_empty() || s.len() > MemifConfig::MAX_SECRET)
    {
        return Err(t.error(
            "secret",
            format!(
                "a memif secret is 1..={} bytes, this one is {}",
                MemifConfig::MAX_SECRET,
                s.len()
            ),
        ));
    }
    Ok(secret)
}
