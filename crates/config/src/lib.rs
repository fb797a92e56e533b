//! The node config: a TOML file parsed with serde, then validated into
//! [`NodeConfig`], plain typed data the daemon applies (and diffs on reload).
//!
//! Every rejection is a [`ConfigError`] naming the file, the 1-based line
//! and the field: `examples/bad.toml:14: port[1].rate_pps: not valid for a
//! port of type "sink" (only for type "generator" or "pcap")`. Unknown keys
//! are rejected everywhere. Array indices in field paths are 0-based.
//!
//! # Schema
//!
//! ```toml
//! flows = [                        # optional; must come before the first [table]
//!   "priority=10,in_port=1,actions=output:2",
//! ]
//! groups = [                       # optional (ovs-ofctl add-group text); before the first [table]
//!   "group_id=1,type=select,bucket=output:3,bucket=output:4",
//! ]
//! meters = [                       # optional (ovs-ofctl add-meter text); before the first [table]
//!   "meter=1,kbps,band=type=drop,rate=1000",
//! ]
//! # A rule's group:N or meter:N must name one of these.
//!
//! [node]                           # optional
//! name = "gen-sink"                # [a-zA-Z0-9_.-]{1,64}; default: the file stem
//! control_socket = "/tmp/nfvswitch-gen-sink.sock"  # optional; default: chosen by the daemon
//! api = "127.0.0.1:9180"           # REST API, /metrics and dashboard: IP:PORT (port 0: any free
//!                                  #   port), "localhost:PORT", or "off"; default "127.0.0.1:9180";
//!                                  #   loopback only (no TLS: a token in clear is no credential)
//! api_token_file = "/run/nfvswitch/api-token"  # the bearer token mutating API requests need;
//!                                  #   made (0600, random) at first start; default: beside the
//!                                  #   control socket, nfvswitch-<name>.token
//! api_hosts = ["node1.example"]    # Host names the API answers besides its address (and
//!                                  #   localhost on loopback); others get 421
//! api_open_reads = true            # GETs without a token; default: true on loopback only
//! socket_dir = "/run/nfvswitch/pods"  # where attachment sockets are made (requests name a
//!                                  #   file in it); default: none, attachments refused
//! pcap_dir = "/var/lib/nfvswitch/pcap"  # where pcap ports added over REST may read/write;
//!                                  #   default: none, no pcap ports over REST
//! runtime_kernel_ports = false     # afxdp/afpacket/tap/vxlan ports added while running
//! group = "nfvswitch"              # members may use the control socket (0660); default: none
//!
//! [memory]                         # optional
//! frame_size = 2048                # bytes per buffer incl. 128 B headroom: power of two 2048..=65536
//! frames = 32768                   # 1024..=4194304
//! hugepages = "auto"               # "auto" | "require" | "never"
//!
//! [pmd]                            # optional
//! cores = [1]                      # 1..=64 distinct CPU ids < CPU count; default: [last CPU]
//! emc_entries = 8192               # 0 (EMC off) or a power of two up to 1048576
//! megaflow_entries = 65536         # 0 (off) ..= 1048576: megaflow cache between EMC and rules
//! pmu = true                       # read PMU/software counters per PMD (~10 reads/s); default true
//! rxq_assign = "cycles"            # rx queue placement on PMDs: "cycles" | "group" | "roundrobin"
//!                                  #   (OVS's pmd-rxq-assign; `ctl pmd-rebalance` applies it)
//! load_interval_s = 5              # 1..=60: one interval of the per-queue load history (12 kept)
//! auto_lb = false                  # move rx queues when a PMD stays overloaded (OVS pmd-auto-lb):
//! auto_lb_load_threshold = 95      #   busy % (0..=100) in all 12 intervals,
//! auto_lb_improvement_threshold = 25 # and the dry run's load variance better by this % (0..=100),
//! auto_lb_interval_s = 60          #   at most once per this many seconds (1..=1200000)
//!
//! [[port]]                         # any number
//! name = "gen0"                    # required, unique, [a-zA-Z0-9_.-]{1,32}
//! id = 1                           # required, unique OpenFlow port number 1..=65279
//! type = "generator"               # required: "generator" | "sink" | "receiver" | "pcap" | "ring" |
//!                                  #   "vhost-user" | "afxdp" | "afpacket" | "tap" | "memif" |
//!                                  #   "vxlan" | "null" (nfv_port_types::PORT_TYPES)
//! rxqs = 1                         # 1..=64, default 1 (not for "vhost-user": see `queues`)
//! # type = "generator" (all optional):
//! #   frame_size = 64              # 64..=9000, and at most memory.frame_size - 128; or "imix":
//! #                                #   7:4:1 of 64, 594 and 1518 bytes, interleaved
//! #   flows = 1                    # distinct 5-tuples, 1..=1000000
//! #   flow_order = "round-robin"   # | "scattered": each frame ~0.618 x flows flows after the
//! #                                #   last (many clients interleaved, not one client's sweep)
//! #   rate_pps = 1000000           # >= 1; default: as fast as possible
//! #   rate_percent = 50.0          # instead of rate_pps: (0, 100] % of line_rate_gbps, counting
//! #                                #   24 B per frame of FCS, preamble and inter-frame gap
//! #   line_rate_gbps = 10.0        # (0, 10000], default 10
//! #   stamp = false                # write a test stamp (stream, sequence, TSC) into each frame
//! #                                #   for a "receiver" port (loss, reordering, latency)
//! #   count = 1000                 # >= 1; default: forever
//! #   src_mac = "02:00:00:00:00:01"   dst_mac = "02:00:00:00:00:02"  (src must be unicast)
//! #   src_ip = "10.0.0.1"   dst_ip = "10.0.0.2"   src_port = 1024   dst_port = 5001
//! #   family = "ipv4"              # "ipv4": Ethernet/IPv4/UDP frames from src_ip to dst_ip |
//! #                                #   "ipv6": Ethernet/IPv6/UDP from src_ip6 to dst_ip6 (UDP
//! #                                #   checksum filled in; flows count up the source address's
//! #                                #   low bits); the other family's addresses, and stamp with
//! #                                #   "ipv6", are refused
//! #   src_ip6 = "fd00::1"   dst_ip6 = "fd00::2"    (only with family = "ipv6")
//! # type = "receiver": no keys of its own; a sink that accounts stamped frames per stream
//! # type = "null" (nfv_null; takes every frame, receives none, never backpressures):
//! #   max_frame = 1518             # optional, 60..=65535: longer frames are dropped as too_big;
//! #                                #   default: every frame is taken
//! # type = "pcap" (at least one of replay / capture):
//! #   replay = "data/in.pcap"      # frames to receive
//! #   capture = "/tmp/out.pcap"    # where transmitted frames are written
//! #   loops = 1                    # replays of the file, 0 = forever (only with replay)
//! #   rate_pps = 1000              # replay rate limit (only with replay)
//! # type = "ring":
//! #   peer = "ring-b"              # required: another ring port that names this one back
//! #   size = 1024                  # power of two 32..=65536, equal on both ends
//! # type = "vhost-user":
//! #   socket = "/tmp/vm1.sock"     # required; unique; at most 107 bytes
//! #   mode = "client"              # "client" (the VNF serves the socket, like OVS
//! #                                #   dpdkvhostuserclient; default) | "server" (we do)
//! #   queues = 1                   # queue pairs 1..=16; also the number of rx queues
//! #   mrg_rxbuf = true             # offer VIRTIO_NET_F_MRG_RXBUF
//! #   tx_retries = 8               # 0..=32 retries into a full guest RX ring (OVS tx-retries)
//! #   one_copy = true              # frames this guest sends reach another guest in one copy
//! #                                #   (false: through the switch's pool, for A/B runs)
//! #   packed_ring = true           # offer packed virtqueues (VIRTIO_F_RING_PACKED); the guest
//! #                                #   chooses (QEMU packed=on, testpmd packed_vq=1)
//! #   csum = true                  # offer checksum offload both ways (CSUM, GUEST_CSUM)
//! #   tso = true                   # offer TCP segmentation both ways (HOST/GUEST_TSO4/6;
//! #                                #   needs csum): 64 KiB segments cross between guests
//! #                                #   that take them, others get segments cut here
//! #   ecn = true                   # offer HOST/GUEST_ECN (needs tso)
//! #   uso = true                   # offer UDP segmentation (HOST_USO, GUEST_USO4/6)
//! #   max_guest_memory_gib = 1024  # most guest memory one memory table may map (1..=65536);
//! #                                #   a table over it is refused (mem_over_budget)
//! #   mtu = 1500                   # offer VIRTIO_NET_F_MTU (QEMU host_mtu) and send the guest
//! #                                #   frames up to mtu + 18; unset: no F_MTU, frames to 9000
//! # type = "memif":
//! #   socket = "/run/m1.sock"      # required; a file, or "@name" for an abstract socket
//! #                                #   (DPDK's default is @/run/memif.sock); server ports
//! #                                #   may share one if their interface_ids differ
//! #   role = "server"              # "server": we listen, the VNF connects and owns the
//! #                                #   memory (default) | "client": the VNF listens (DPDK
//! #                                #   role=server), we connect, retrying every second
//! #   ring_size = 1024             # client role: slots per ring, power of two 2..=16384
//! #   buffer_size = 2048           # client role: bytes per buffer 128..=65535 (chained beyond)
//! #   one_copy = true              # frames in one buffer reach the next port in one copy
//! #                                #   (false: through the switch's pool, for A/B runs)
//! #   interface_id = 0             # the id the client asks for (DPDK `id=`)
//! #   secret = "s3cr3t"            # 1..=24 bytes the client must give (default: none)
//! #   queues = 1                   # queue pairs 1..=16 a client may add; rx queues
//! #   max_shared_memory_gib = 64   # server role: most memory one client's regions (at most
//! #                                #   8) may make the switch map, 1..=65536; over it the
//! #                                #   client is refused (memory_refused)
//! # type = "afxdp" | "afpacket" | "tap" (kernel-facing; one port per interface):
//! #   iface = "eth0"               # required: 1..=15 bytes without '/', ':' or whitespace
//! #   ring_size = 2048             # afxdp: power of two 64..=16384 (default 2048);
//! #                                #   afpacket: 64..=65536 (default 4096)
//! #   xdp_mode = "auto"            # afxdp: "auto" | "copy" | "zero-copy"
//! #   zero_copy = "vnf1"           # afxdp: receive straight into the buffers of this
//! #                                #   vhost-user port's VNF (one borrower per VNF; the
//! #                                #   VNF sees every frame of the port's queues);
//! #                                #   "auto": of the vhost-user port the flow table
//! #                                #   sends every frame of this port to, while one
//! #                                #   does (copy otherwise)
//! #   send_in_place = "auto"       # afxdp with zero_copy: frames that VNF sends out
//! #                                #   here go with their tails read by the kernel from
//! #                                #   its buffers: "auto" (zero-copy driver binds only)
//! #                                #   | "on" | "off"
//! #   zero_copy_min_frame = 224    # afxdp with zero_copy: a queue whose frames average
//! #                                #   less (over 1 s) copies; zero copy again from 64 B
//! #                                #   more; 0 = always zero copy
//! # Each type reads its own keys (its crate's `PortType::parse`); a key of another
//! # type is refused naming the types that take it.
//!
//! [[flow]]                         # alternative to `flows`, usable anywhere in the file
//! rule = "priority=0,actions=drop"
//! ```
//!
//! Relative paths (`control_socket`, `replay`, `capture`, `socket`) are taken
//! relative to the directory of the config file. Rules from `flows` come
//! first, then those of the `[[flow]]` tables, each in file order. A rule's
//! `in_port=` and `output:` must name the id of a configured port
//! (reserved port numbers 0xff00 and up are not checked).

mod access;
mod chain;
mod check;
mod conntrack;
mod cpus;
mod error;
mod flows;
mod openflow;
mod port;
mod port_set;
mod raw;

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::{Path, PathBuf};

use nfv_mem::{HugepageMode, MemoryConfig};
use nfv_ports::config::PortConfig;

pub use crate::access::AccessConfig;
pub use crate::chain::{ChainConfig, DEFAULT_CHAIN_PRIORITY, Stage, StageKind, chain_group_id};
use crate::check::{Result, path};
pub use crate::cpus::CpuSet;
pub use crate::error::ConfigError;
use crate::error::Doc;
pub use crate::openflow::OpenFlowConfig;
pub use crate::port::{MAX_PORT_ID, MAX_PORT_NAME, MAX_RXQS};
pub use crate::port_set::{ConflictKind, Peers, PortConflict, check_port_set};
use crate::raw::{RawConfig, RawHugepages, RawMemory, RawPmd, RawPort, S};

/// A validated node config.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeConfig {
    /// The file it came from.
    pub source: PathBuf,
    /// `[node] name`; default: the file stem.
    pub name: String,
    /// `[node] control_socket`; `None` = the daemon's default.
    pub control_socket: Option<PathBuf>,
    /// `[node] api`: where the REST API listens; `None` = off. Default
    /// [`DEFAULT_API`].
    pub api: Option<SocketAddr>,
    /// `[node] state_file`: where the node keeps what outlives it (the
    /// ports made for CNI attachments); `None` = nothing is kept.
    pub state_file: Option<PathBuf>,
    /// `[node]`'s access keys: API credential, confined paths.
    pub access: AccessConfig,
    pub memory: MemoryConfig,
    pub pmd: PmdConfig,
    /// In file order.
    pub ports: Vec<PortConfig>,
    /// In file order (`flows` first, then `[[flow]]` tables).
    pub flows: Vec<nfv_flow::FlowSpec>,
    /// `groups` and `meters`, as `add-group`/`add-meter` text (checked at
    /// load: they parse, ids are unique, every `group:N` and `meter:N` of
    /// `flows` names one); the node installs them before the rules.
    pub groups: Vec<String>,
    pub meters: Vec<String>,
    /// Service chains (`[[chain]]` tables), in file order; their steering
    /// rules are installed by the node, not listed in `flows`.
    pub chains: Vec<ChainConfig>,
    /// `[openflow]`: where OpenFlow clients and controllers connect.
    pub openflow: OpenFlowConfig,
    /// `[conntrack]`: each PMD thread's connection table.
    pub conntrack: nfv_conntrack::Config,
}

/// Poll-mode driver threads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PmdConfig {
    /// One PMD thread pinned to each of these CPUs (distinct, in file order).
    pub cores: Vec<usize>,
    /// Exact-match cache entries per PMD thread; 0 disables the EMC.
    pub emc_entries: usize,
    /// Megaflow cache entries per PMD thread; 0 disables it.
    pub megaflow_entries: usize,
    /// Read PMU and software counters on each PMD thread (`perf_event_open`,
    /// about ten reads a second, none per packet).
    pub pmu: bool,
    /// How rx queues are placed on PMDs when rebalanced.
    pub rxq_assign: nfv_sched::Algorithm,
    /// Seconds per interval of the load history.
    pub load_interval_s: u64,
    /// Automatic rebalancing.
    pub auto_lb: nfv_sched::AutoLbConfig,
}

impl PmdConfig {
    /// The default: one PMD on the last CPU this process may use, 8192
    /// EMC entries.
    pub fn default_for(cpus: impl Into<CpuSet>) -> PmdConfig {
        PmdConfig {
            cores: vec![cpus.into().last()],
            emc_entries: DEFAULT_EMC_ENTRIES,
            megaflow_entries: DEFAULT_MEGAFLOW_ENTRIES,
            pmu: true,
            rxq_assign: nfv_sched::Algorithm::default(),
            load_interval_s: DEFAULT_LOAD_INTERVAL_S,
            auto_lb: nfv_sched::AutoLbConfig::default(),
        }
    }
}

/// Default [`PmdConfig::load_interval_s`] (OVS: 5 s).
pub const DEFAULT_LOAD_INTERVAL_S: u64 = 5;

pub const DEFAULT_EMC_ENTRIES: usize = 8192;
pub const DEFAULT_MEGAFLOW_ENTRIES: usize = 65536;
pub const MAX_EMC_ENTRIES: usize = 1 << 20;
/// Most PMD threads.
pub const MAX_PMD_CORES: usize = 64;
/// Longest node name.
pub const MAX_NODE_NAME: usize = 64;
pub use nfv_settings::MAX_SOCKET_PATH;
/// Where the REST API listens unless `[node] api` says otherwise.
pub const DEFAULT_API: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 9180));

/// Parses an API address as `[node] api` and `nfvswitch run --api` take
/// it: `IP:PORT` (`[::1]:PORT` for IPv6), `localhost:PORT`, or `off`
/// (`None`). Port 0 asks for any free port. Loopback only: the API has
/// no TLS, and its token must not cross a network in clear.
pub fn parse_api_addr(text: &str) -> std::result::Result<Option<SocketAddr>, String> {
    let t = text.trim();
    if t == "off" {
        return Ok(None);
    }
    if let Ok(a) = t.parse::<SocketAddr>() {
        if !a.ip().is_loopback() {
            return Err(format!(
                "{a} is not a loopback address: the API serves 127.0.0.1 or [::1] only (it has \
                 no TLS, and its token must not cross a network in clear); reach it from \
                 elsewhere through an SSH tunnel or a TLS proxy"
            ));
        }
        return Ok(Some(a));
    }
    if let Some(port) = t.strip_prefix("localhost:")
        && let Ok(port) = port.parse::<u16>()
    {
        return Ok(Some(SocketAddr::V4(SocketAddrV4::new(
            Ipv4Addr::LOCALHOST,
            port,
        ))));
    }
    Err(format!(
        "{text:?} is not an address: give IP:PORT (\"127.0.0.1:9180\", \"[::1]:9180\"), \
         \"localhost:PORT\" or \"off\""
    ))
}

/// Reads and validates a config file, checking PMD cores against the
/// CPUs this process may run on (its affinity mask: under `taskset -c 1`
/// that is CPU 1 alone).
pub fn load(path: &Path) -> std::result::Result<NodeConfig, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
        file: path.to_path_buf(),
        source,
    })?;
    parse_str(&text, path, CpuSet::of_this_process())
}

/// Validates config text. `source` names the file in errors, supplies the
/// default node name and the directory relative paths are resolved
/// against; `pmd.cores` must lie in `cpus` (a count `n` means CPUs
/// `0..n`, all allowed).
pub fn parse_str(
    text: &str,
    source: &Path,
    cpus: impl Into<CpuSet>,
) -> std::result::Result<NodeConfig, ConfigError> {
    let cpus = cpus.into();
    let doc = Doc {
        file: source,
        text,
        prefix: 0,
    };
    let raw: RawConfig = toml::from_str(text).map_err(|e| doc.toml_error(&e, ""))?;
    let base = source.parent().unwrap_or(Path::new(""));

    let (name, control_socket) = node(&doc, raw.node.as_ref(), base)?;
    let api = match raw.node.as_ref().and_then(|n| n.get_ref().api.as_ref()) {
        Some(v) => parse_api_addr(v.get_ref()).map_err(|m| doc.err(v.span(), "node.api", m))?,
        None => Some(DEFAULT_API),
    };
    let state_file = match raw
        .node
        .as_ref()
        .and_then(|n| n.get_ref().state_file.as_ref())
    {
        Some(v) => Some(check::file_path(&doc, v, "node.state_file", base)?),
        None => None,
    };
    let access = access::access(&doc, raw.node.as_ref().map(|n| n.get_ref()), base)?;
    let memory = memory(&doc, raw.memory.as_ref())?;
    let pmd = pmd(&doc, raw.pmd.as_ref(), &cpus)?;

    let ports = raw
        .port
        .iter()
        .enumerate()
        .map(|(i, p)| port::port(&doc, &format!("port[{i}]"), p, &memory, base))
        .collect::<Result<Vec<_>>>()?;
    port::check_set(&doc, &raw.port, &ports)?;

    let from_list = raw
        .flows
        .iter()
        .enumerate()
        .map(|(i, r)| (format!("flows[{i}]"), r));
    let from_tables = raw
        .flow
        .iter()
        .enumerate()
        .map(|(i, t)| (format!("flow[{i}].rule"), &t.get_ref().rule));
    let (groups, meters, defined) = flows::groups_and_meters(&doc, &raw.groups, &raw.meters)?;
    let flows = from_list
        .chain(from_tables)
        .map(|(field, rule)| flows::flow(&doc, &field, rule, &ports, &defined))
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .flatten()
        .collect();

    let openflow = openflow::openflow(&doc, raw.openflow.as_ref(), &name, base)?;
    let conntrack = conntrack::conntrack(&doc, raw.conntrack.as_ref())?;
    let chains = chain::chains(&doc, &raw.chain, &ports)?;
    chain::check_group_ids(&doc, &raw.chain, &chains, &defined.groups)?;
    Ok(NodeConfig {
        source: source.to_path_buf(),
        name,
        control_socket,
        api,
        state_file,
        access,
        memory,
        pmd,
        chains,
        openflow,
        conntrack,
        ports,
        flows,
        groups,
        meters,
    })
}

/// Validates one port given as an inline TOML table, for `add-port`:
/// `{ name = "s2", id = 3, type = "sink" }`, or the same without the braces
/// (`name="s2",id=3,type="sink"`). The keys are those of a `[[port]]` table.
///
/// Errors name the file `<inline port>`, line 1 (or the line within a
/// multi-line table) and the bare key (`rate_pps`). Checks that need the
/// other ports (unique name, id, socket and interface, ring peers) are
/// [`check_port_set`]'s, with [`Peers::MayBeMissing`]. A generator's `frame_size` is checked against `memory`.
/// Relative paths are made absolute against the current directory.
pub fn parse_port_table(
    text: &str,
    memory: &MemoryConfig,
) -> std::result::Result<PortConfig, ConfigError> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Wrapper {
        port: S<RawPort>,
    }
    let trimmed = text.trim_start();
    let braced = trimmed.starts_with('{');
    let prefix = if braced { "port = " } else { "port = {" };
    let wrapped = format!("{prefix}{text}{}", if braced { "\n" } else { "\n}\n" });
    let file = Path::new("<inline port>");
    let doc = Doc {
        file,
        text: &wrapped,
        prefix: prefix.len(),
    };
    let strip = |mut e: ConfigError| {
        if let ConfigError::Invalid { field, .. } = &mut e {
            *field = field
                .strip_prefix("port")
                .map(|f| f.trim_start_matches('.').to_string())
                .unwrap_or_default();
        }
        e
    };
    let w: Wrapper = toml::from_str(&wrapped).map_err(|e| strip(doc.toml_error(&e, "")))?;
    let base = std::env::current_dir().unwrap_or_default();
    port::port(&doc, "", &w.port, memory, &base)
}

fn node(
    doc: &Doc<'_>,
    raw: Option<&S<raw::RawNode>>,
    base: &Path,
) -> Result<(String, Option<PathBuf>)> {
    let n = raw.map(|r| r.get_ref());
    let name = match n.and_then(|n| n.name.as_ref()) {
        Some(v) => check::name(doc, v, "node.name", MAX_NODE_NAME)?,
        None => {
            let stem = doc
                .file
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            if stem.is_empty() {
                "nfvswitch".to_string()
            } else if check::is_valid_name(&stem, MAX_NODE_NAME) {
                stem
            } else {
                return Err(doc.err(
                    0..0,
                    "node.name",
                    format!(
                        "not given, and the file stem {stem:?} is not a valid name \
                         (1 to {MAX_NODE_NAME} of a-z A-Z 0-9 _ . -); set [node] name"
                    ),
                ));
            }
        }
    };
    let socket = match n.and_then(|n| n.control_socket.as_ref()) {
        Some(v) => Some(check::socket_path(doc, v, "node.control_socket", base)?),
        None => None,
    };
    Ok((name, socket))
}

fn memory(doc: &Doc<'_>, raw: Option<&S<RawMemory>>) -> Result<MemoryConfig> {
    let d = MemoryConfig::default();
    let Some(m) = raw.map(|r| r.get_ref()) else {
        return Ok(d);
    };
    Ok(MemoryConfig {
        frame_size: check::opt_pow2(
            doc,
            &m.frame_size,
            "memory.frame_size",
            2048..=65536,
            false,
            d.frame_size,
        )?,
        frames: check::opt_int(doc, &m.frames, "memory.frames", 1024..=4_194_304, d.frames)?,
        hugepages: match m.hugepages.as_ref().map(|h| *h.get_ref()) {
            None => d.hugepages,
            Some(RawHugepages::Auto) => HugepageMode::Auto,
            Some(RawHugepages::Require) => HugepageMode::Require,
            Some(RawHugepages::Never) => HugepageMode::Never,
        },
    })
}

fn pmd(doc: &Doc<'_>, raw: Option<&S<RawPmd>>, cpus: &CpuSet) -> Result<PmdConfig> {
    let d = PmdConfig::default_for(cpus.clone());
    let Some(p) = raw.map(|r| r.get_ref()) else {
        return Ok(d);
    };
    let cores = match &p.cores {
        None => d.cores,
        Some(list) => pmd_cores(doc, list, cpus)?,
    };
    let emc_entries = check::opt_pow2(
        doc,
        &p.emc_entries,
        "pmd.emc_entries",
        1..=MAX_EMC_ENTRIES as i64,
        true,
        DEFAULT_EMC_ENTRIES,
    )?;
    let rxq_assign = match &p.rxq_assign {
        None => d.rxq_assign,
        Some(v) => v
            .get_ref()
            .parse()
            .map_err(|e: String| doc.err(v.span(), "pmd.rxq_assign", e))?,
    };
    let auto_lb = auto_lb(doc, p, d.auto_lb)?;
    Ok(PmdConfig {
        cores,
        emc_entries,
        megaflow_entries: check::opt_int(
            doc,
            &p.megaflow_entries,
            "pmd.megaflow_entries",
            0..=MAX_EMC_ENTRIES as i64,
            d.megaflow_entries,
        )?,
        pmu: p.pmu.as_ref().is_none_or(|v| *v.get_ref()),
        rxq_assign,
        load_interval_s: check::opt_int(
            doc,
            &p.load_interval_s,
            "pmd.load_interval_s",
            1..=60,
            d.load_interval_s,
        )?,
        auto_lb,
    })
}

/// `pmd.cores`: 1 to [`MAX_PMD_CORES`] distinct CPUs this process may
/// run on.
fn pmd_cores(doc: &Doc<'_>, list: &S<Vec<S<i64>>>, cpus: &CpuSet) -> Result<Vec<usize>> {
    let items = list.get_ref();
    if !(1..=MAX_PMD_CORES).contains(&items.len()) {
        return Err(doc.err(
            list.span(),
            "pmd.cores",
            format!("lists {} CPUs; list 1 to {MAX_PMD_CORES}", items.len()),
        ));
    }
    let mut cores = Vec::with_capacity(items.len());
    for (i, c) in items.iter().enumerate() {
        let field = path("pmd", &format!("cores[{i}]"));
        let n = *c.get_ref();
        if n < 0 || !cpus.contains(n as usize) {
            return Err(doc.err(
                c.span(),
                field,
                format!(
                    "CPU {n} is not one this process may run on: its affinity \
                     mask allows CPUs {cpus}"
                ),
            ));
        }
        let n = n as usize;
        if let Some(j) = cores.iter().position(|&x| x == n) {
            return Err(doc.err(
                c.span(),
                field,
                format!("CPU {n} is already listed as pmd.cores[{j}]"),
            ));
        }
        cores.push(n);
    }
    Ok(cores)
}

/// The `pmd.auto_lb*` keys; `lb` holds the defaults.
fn auto_lb(
    doc: &Doc<'_>,
    p: &RawPmd,
    lb: nfv_sched::AutoLbConfig,
) -> Result<nfv_sched::AutoLbConfig> {
    let pct = |v: &Option<S<i64>>, field, default: u8| -> Result<u8> {
        check::opt_int(doc, v, field, 0..=100, default)
    };
    Ok(nfv_sched::AutoLbConfig {
        enabled: p.auto_lb.as_ref().is_some_and(|v| *v.get_ref()),
        load_threshold: pct(
            &p.auto_lb_load_threshold,
            "pmd.auto_lb_load_threshold",
            lb.load_threshold,
        )?,
        improvement_threshold: pct(
            &p.auto_lb_improvement_threshold,
            "pmd.auto_lb_improvement_threshold",
            lb.improvement_threshold,
        )?,
        interval_s: check::opt_int(
            doc,
            &p.auto_lb_interval_s,
            "pmd.auto_lb_interval_s",
            1..=1_200_000,
            lb.interval_s,
        )?,
    })
}
