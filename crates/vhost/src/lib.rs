//! `vhost-user`: a virtio-net port towards a VM (QEMU) or a container VNF
//! (DPDK virtio-user, the built-in VNF), like OVS `dpdkvhostuser[client]`.
//!
//! * [`VhostUserPort`] implements [`nfv_ports::Port`]. One protocol thread
//!   per port speaks vhost-user: `message.rs` decodes messages (pure, no
//!   I/O), `channel.rs` reads them with their fds, `dispatch.rs` maps each
//!   to the protocol state in `backend.rs` and answers, `conn.rs` runs the
//!   server and client connection loops with reconnect and backoff. The
//!   message layer is ours, not the `vhost` crate's, so that every order of
//!   requests real frontends send is accepted (see `dispatch.rs`). The
//!   virtqueues themselves are served on the PMD threads by
//!   `nfv_virtio::DeviceQueue` (`queue.rs`).
//! * Queues: rx queue `i` is the guest's TX virtqueue `2i+1` (the port has
//!   `queues` rx queues). Tx queues are per PMD: PMD `q` sends into the
//!   guest RX virtqueue of the `q % n`-th running pair (`n` = running
//!   guest RX virtqueues, respecting SET_VRING_ENABLE). With as many enabled
//!   pairs as PMDs every PMD has its own virtqueue; otherwise PMDs share one
//!   under a per-virtqueue spin lock (see `shared.rs` for why tx uses a lock
//!   and rx does not).
//! * Offered (`features.rs`): VERSION_1, MRG_RXBUF (configurable),
//!   INDIRECT_DESC, EVENT_IDX, MQ, PROTOCOL_FEATURES, LOG_ALL, IN_ORDER
//!   (unless another port borrows the guest's buffers) and RING_PACKED
//!   (`packed_ring`, default on: the frontend chooses split or packed);
//!   protocol features MQ, REPLY_ACK, LOG_SHMFD and RARP. A frontend
//!   acking any bit not offered is refused, counted in
//!   `negotiation_errors` and disconnected; the port waits for the next
//!   connection.
//! * Ring fill, for telling a slow switch from a slow guest: each rx burst
//!   stores the guest TX backlog it found, each tx burst the guest RX
//!   buffers it found free (one relaxed store per burst, see
//!   [`VhostStatus::queued`] and [`VhostStatus::guest_rx_free`]); its
//!   gauges report the sums as `queued` and `guest_rx_free`.
//! * Disconnect: rings stop, rx bursts return 0 and tx bursts send nothing;
//!   guest memory is unmapped once no PMD can touch it any more.
//!
//! # What a hostile frontend can and cannot do to the switch
//!
//! Defended (each below): blocking call fds, memory or dirty-log files
//! that could fault slowly or shrink, locks held across a guest page
//! fault, and log floods; malformed rings are quarantined by
//! `nfv_virtio` (counted per reason). The SIGBUS guard's table grows
//! with the ports (`nfv_virtio::guard`, 65,536 mappings); should it still
//! run out, only the port whose memory table or log needed an entry is
//! refused (`mem_table_errors` or `log_errors`). The size of a memory
//! table is bounded per port and per node (below).
//!
//! What this does *not* promise: a frontend can always stop its own port
//! (bad rings, a memory table refused, a fault that never completes on the
//! protocol thread leaves that port's rings stopped), and a PMD still
//! reads and writes guest memory itself in every burst, so the file checks
//! below are what keep those accesses fast: a mapping whose faults do not
//! complete, were one to get past them, would stall that PMD.
//!
//! * **No lock a PMD needs is held across a guest page fault** (the
//!   invariant): code that reads or writes guest memory or the dirty log
//!   runs either on the PMD that owns the ring, in its burst, or on the
//!   protocol thread with no lock held that a PMD takes. The protocol
//!   thread rebuilds a guest RX ring (new memory table, call fd, features,
//!   `VHOST_F_LOG_ALL` and its dirty log) by taking the ring's state out
//!   of its slot under the ring's lock, retiring the old queue and
//!   building the new one with no lock held, and swapping the result in
//!   under the lock (`Backend::apply_tx`); under the lock it only moves
//!   state. A PMD never waits on the protocol thread: a tx burst that
//!   finds the ring held by it, or out for a rebuild, sends nothing (the
//!   datapath counts the packets as `tx_full`) and is counted in
//!   `tx_busy`. Old memory tables and logs are unmapped outside every
//!   lock. So a log or region whose page faults never complete (a FUSE
//!   file, should one pass the file checks) blocks only that port's
//!   protocol thread; its rings stay stopped, and the PMDs and every other
//!   port go on. Removing that port waits at most 2 s for its protocol
//!   thread, then leaves it to end when the fault completes (its socket
//!   file is removed then).
//! * **Call fds.** The frontend's call eventfd could block a `write` (an
//!   eventfd at its maximum count in blocking mode, a pipe nobody reads),
//!   and `O_NONBLOCK` on its shared open file description is the
//!   frontend's to clear. PMDs therefore never write it: an interrupt is
//!   an atomic swap on a `nfv_virtio::notify::Call`, and the notifier
//!   thread does the write under a 1 ms watchdog timer. A call fd whose
//!   write would block is then ignored: the vring shows `call_stuck`, and
//!   each interrupt not sent counts as `call_blocked`; a new SET_VRING_CALL
//!   brings a fresh fd. No lock is held across any write to a guest fd, so
//!   GET_VRING_BASE, disconnect and port removal never wait for one. Kick
//!   and error fds are not read or written at all (PMDs poll).
//! * **Guest memory and the dirty log.** SET_MEM_TABLE and SET_LOG_BASE
//!   accept only regular files on tmpfs (memfd, shm) and hugetlbfs
//!   (`fstatfs`) that cover the mapped range
//!   (`nfv_virtio::tenant_fd::check_mappable`, the check memif regions
//!   pass too). Anything else is refused — a memory table with a NACK
//!   (the port keeps no table and its rings stay stopped), a log with the
//!   reply QEMU needs to go on, the rings that must log stopping instead —
//!   with a rate-limited log line naming the file type or file system, and
//!   counted in `mem_table_errors` or `log_errors` (and
//!   `protocol_errors`).
//!   A memfd sealed with `F_SEAL_SHRINK` (QEMU's default for
//!   `memory-backend-memfd`) cannot shrink afterwards; unsealed memory
//!   (hugetlbfs files, DPDK virtio-user's memfds) can, and the next access
//!   would raise SIGBUS. The SIGBUS guard (`nfv_virtio::guard`) maps zero
//!   pages over the faulting mapping so the access completes; the rings
//!   using that memory notice at their next burst and are quarantined
//!   (counter `memory_fault`, `quarantined` in its gauges, one log line), and
//!   rings restarted over the same memory refuse to run until the frontend
//!   sends a new memory table. Every other port keeps forwarding.
//!   Limits: the burst that hit the fault completes on zeros (its chains
//!   count as errors or deliver empty data to the faulting guest only); a
//!   program that installs its own SIGBUS handler after ours disables the
//!   guard.
//! * **Memory table size.** A sparse memfd of any size costs the frontend
//!   nothing, but mapping it takes the switch's address space (the attack:
//!   tables of 128 TiB, after which no other port could map its table).
//!   Each table is charged the length actually mapped and must fit the
//!   port's cap (default [`DEFAULT_MAX_GUEST_MEMORY`], 1 TiB: VMs up to
//!   about 1021 GiB, see `memtable.rs` for the arithmetic;
//!   [`VhostUserPort::set_max_guest_memory`]) and the node's budget over
//!   all ports ([`NODE_BUDGET`], default [`DEFAULT_NODE_GUEST_MEMORY`],
//!   64 TiB: half the x86-64 user address space). A table over either is
//!   refused with a NACK and counted in `mem_over_budget` (and
//!   `mem_table_errors`); the port keeps its previous table and its rings
//!   keep running. Memory is mapped, not touched: the switch faults in
//!   pages of a tenant's file only where its rings are and where its
//!   descriptors point, and a page of a hole it faults in first is
//!   charged to the switch's memory cgroup (shmem is charged to whoever
//!   allocates it). A well-behaved guest's buffers are already allocated
//!   (charged to the guest); a hostile one can aim descriptors at holes,
//!   so what it can charge to the switch is bounded by its table, that is
//!   by the port's cap — not yet by anything smaller (RSS under that
//!   attack not measured here).
//! * **Log floods.** Refusals and faults are logged through a per-port
//!   [`RateLimitedLog`] (at most a few lines per reason and 10 s, then a
//!   "suppressed" summary); every refusal is still counted.

mod backend;
mod channel;
mod conn;
mod dispatch;
mod errors;
pub mod features;
#[doc(hidden)]
pub mod fuzzing;
mod lend;
mod memtable;
pub mod message;
mod ownership;
mod queue;
pub mod rarp;
pub mod ratelimit;
mod settings;
mod shared;

use std::path::PathBuf;
use std::sync::atomic::Ordering::*;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use nfv_ports::config::PortConfig;
use nfv_ports::{Port, PortGauges, RxQueue, TxQueue};

pub use conn::{MAX_BACKOFF, RETRY, STABLE};
pub use errors::NAMES as QUEUE_COUNTER_NAMES;
pub use memtable::{
    DEFAULT_MAX_GUEST_MEMORY, DEFAULT_NODE_GUEST_MEMORY, MemTableError, NODE_BUDGET,
};
pub use ratelimit::RateLimitedLog;
pub use settings::{Offloads, VHOST_USER, VhostUserConfig, VhostUserMode, VhostUserType};
use shared::Shared;

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

#[derive(Debug, thiserror::Error)]
pub enum VhostError {
    #[error("port {0}: not a vhost-user port")]
    NotVhostUser(String),
    #[error("vhost-user socket {}: {err}", path.display())]
    Socket { path: PathBuf, err: String },
    #[error("port {port}: queues = {queues} is out of range 1..=16")]
    Queues { port: String, queues: usize },
    #[error("port {port}: cannot start its protocol thread: {err}")]
    Spawn { port: String, err: std::io::Error },
}

/// A vhost-user virtio-net port. Dropping it stops its protocol thread,
/// closes the connection and (server mode) removes the socket.
///
/// Thread safety: `Sync`; `gauges`/`status` read atomics only.
pub struct VhostUserPort {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// Counters and state of one virtqueue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VringStatus {
    /// Virtqueue index (even: guest RX = our tx; odd: guest TX = our rx).
    pub index: usize,
    pub quarantined: bool,
    /// The call fd blocked and is ignored (see `call_blocked`).
    pub call_stuck: bool,
    /// Times a device queue could not be built for it.
    pub setup_failures: u64,
    /// Since the port opened, in the order of [`QUEUE_COUNTER_NAMES`].
    pub counters: Vec<u64>,
}

impl VringStatus {
    /// Protocol violations by the guest (the first ten counters).
    pub fn violations(&self) -> u64 {
        self.counters[..errors::VIOLATIONS].iter().sum()
    }
    pub fn counter(&self, name: &str) -> u64 {
        errors::NAMES
            .iter()
            .position(|n| *n == name)
            .map_or(0, |i| self.counters[i])
    }
}

/// The port's state and counters, typed (its [`Port::gauges`] show them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VhostStatus {
    pub connected: bool,
    /// Acked virtio features (0 before SET_FEATURES).
    pub features: u64,
    pub protocol_features: u64,
    /// Queue pairs with both virtqueues running.
    pub pairs_enabled: usize,
    pub connects: u64,
    pub disconnects: u64,
    pub negotiation_errors: u64,
    /// Refused requests and malformed messages.
    pub protocol_errors: u64,
    pub mem_table_errors: u64,
    /// Memory tables refused for the port's `max_guest_memory` or the
    /// node's budget (also in `mem_table_errors`; the old table stayed).
    pub mem_over_budget: u64,
    /// Bytes of address space mapped for the current memory table.
    pub guest_memory: u64,
    /// Virtqueues refused at start (addresses outside memory, ...).
    pub ring_errors: u64,
    pub ack_timeouts: u64,
    /// Bytes of the dirty log the frontend gave (0: none).
    pub log_bytes: u64,
    /// SET_LOG_BASE requests refused.
    pub log_errors: u64,
    /// Writes into guest memory the dirty log could not record.
    pub log_marks_dropped: u64,
    /// Region or dirty-log fds that are not memory the switch may map
    /// (a FIFO, a file on disk or FUSE, too short); also in
    /// `mem_table_errors` or `log_errors`.
    pub unmappable_fd: u64,
    /// SEND_RARP requests, and announcements injected for them.
    pub rarp_requests: u64,
    pub rarp_sent: u64,
    /// The MTU the frontend set (NET_SET_MTU; 0: none), and the requests
    /// refused (over the port's `mtu`, under 68).
    pub guest_mtu: u64,
    pub mtu_refused: u64,
    pub last_error: String,
    /// Sum over the guest's TX virtqueues of the chains it had queued that
    /// the switch had not taken, as each ring's last rx burst found them
    /// (`avail.idx - last_avail_idx`). High: the switch is slow.
    pub queued: u64,
    /// Sum over the guest's RX virtqueues of the receive buffers it had
    /// posted that the switch had not used, as each ring's last tx burst
    /// found them. 0 while traffic flows: the guest is not draining.
    pub guest_rx_free: u64,
    /// Extra tries into guest RX virtqueues that had run out of buffers
    /// (`tx_retries`), summed over the port's virtqueues.
    pub tx_retries: u64,
    /// Tx bursts into the guest's RX virtqueues that sent nothing because
    /// the protocol thread held or was rebuilding the ring (the PMD does
    /// not wait on it; the packets count as `tx_full` drops).
    pub tx_busy: u64,
    /// Frames the guest sent that were forwarded in one copy (split: the
    /// switch copied their headers, the receiving port the rest), summed
    /// over its TX virtqueues.
    pub one_copy: u64,
    pub vrings: Vec<VringStatus>,
}

impl VhostStatus {
    /// True while the frontend has VHOST_F_LOG_ALL acked (the guest is
    /// migrating): every write into its memory is logged.
    pub fn dirty_logging(&self) -> bool {
        self.features & nfv_virtio::layout::VHOST_F_LOG_ALL != 0
    }

    /// The `dirty_log` gauge: `off`, or `on (N KiB log)`.
    pub fn dirty_log_state(&self) -> String {
        match (self.dirty_logging(), self.log_bytes) {
            (false, _) => "off".into(),
            (true, 0) => "on, but no usable log: rings stopped".into(),
            (true, b) => format!("on ({} KiB log)", b.div_ceil(1024)),
        }
    }

    /// Connections after the first.
    pub fn reconnects(&self) -> u64 {
        self.connects.saturating_sub(1)
    }
    pub fn quarantined(&self) -> Vec<usize> {
        self.vrings
            .iter()
            .filter(|v| v.quarantined)
            .map(|v| v.index)
            .collect()
    }
    /// Vrings whose call fd blocked and is ignored.
    pub fn call_stuck(&self) -> Vec<usize> {
        self.vrings
            .iter()
            .filter(|v| v.call_stuck)
            .map(|v| v.index)
            .collect()
    }
    /// A per-vring counter ([`QUEUE_COUNTER_NAMES`]) summed over vrings.
    pub fn counter(&self, name: &str) -> u64 {
        self.vrings.iter().map(|v| v.counter(name)).sum()
    }
}

impl VhostUserPort {
    /// Opens a port from its validated config: binds the socket (server
    /// mode) and starts the protocol thread, which connects (client mode)
    /// or accepts in the background.
    pub fn open(name: &str, cfg: &VhostUserConfig) -> Result<Arc<VhostUserPort>, VhostError> {
        if !(1..=VhostUserConfig::MAX_QUEUES).contains(&cfg.queues) {
            return Err(VhostError::Queues {
                port: name.to_string(),
                queues: cfg.queues,
            });
        }
        let listener = match cfg.mode {
            VhostUserMode::Server => Some(conn::bind(&cfg.socket)?),
            VhostUserMode::Client => None,
        };
        let shared = Arc::new(Shared::new(name, cfg));
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("vhost-{name}"))
            .spawn(move || conn::run(s, listener))
            .map_err(|err| VhostError::Spawn {
                port: name.to_string(),
                err,
            })?;
        Ok(Arc::new(VhostUserPort {
            shared,
            thread: Mutex::new(Some(thread)),
        }))
    }

    /// Opens the port a [`PortConfig`] of kind `VhostUser` describes.
    pub fn from_config(cfg: &PortConfig) -> Result<Arc<VhostUserPort>, VhostError> {
        match cfg.kind.settings::<VhostUserConfig>() {
            Some(v) => Self::open(&cfg.name, v),
            None => Err(VhostError::NotVhostUser(cfg.name.clone())),
        }
    }

    /// This port as a lender of its guests' receive buffers
    /// (`nfv_virtio::lend`): what the port type adds to the node's
    /// [`nfv_virtio::lend::Lenders`] when it opens the port.
    pub fn lender(&self) -> nfv_virtio::lend::Lender {
        lend::lender(&self.shared)
    }

    pub fn config(&self) -> &VhostUserConfig {
        &self.shared.cfg
    }

    /// Caps the bytes of address space one memory table of this port may
    /// map (default [`DEFAULT_MAX_GUEST_MEMORY`]); applies to later
    /// SET_MEM_TABLE requests. The node-wide budget is [`NODE_BUDGET`].
    pub fn set_max_guest_memory(&self, bytes: u64) {
        self.shared.max_guest_memory.store(bytes, Relaxed);
    }

    pub fn status(&self) -> VhostStatus {
        let s = &self.shared.status;
        let mut vrings = Vec::new();
        for p in 0..self.shared.cfg.queues {
            for (index, m) in [
                (2 * p, &self.shared.tx[p].errors),
                (2 * p + 1, &self.shared.rx[p].errors),
            ] {
                vrings.push(VringStatus {
                    index,
                    quarantined: m.quarantined.load(Relaxed),
                    call_stuck: m.call_stuck.load(Relaxed),
                    setup_failures: m.setup_failures.load(Relaxed),
                    counters: m.load().to_vec(),
                });
            }
        }
        VhostStatus {
            connected: s.connected.load(Acquire),
            features: s.features.load(Relaxed),
            protocol_features: s.protocol_features.load(Relaxed),
            pairs_enabled: s.pairs_enabled.load(Relaxed) as usize,
            connects: s.connects.load(Relaxed),
            disconnects: s.disconnects.load(Relaxed),
            negotiation_errors: s.negotiation_errors.load(Relaxed),
            protocol_errors: s.protocol_errors.load(Relaxed),
            mem_table_errors: s.mem_table_errors.load(Relaxed),
            mem_over_budget: s.mem_over_budget.load(Relaxed),
            guest_memory: s.guest_memory.load(Relaxed),
            ring_errors: s.ring_errors.load(Relaxed),
            ack_timeouts: s.ack_timeouts.load(Relaxed),
            log_bytes: s.log_bytes.load(Relaxed),
            log_errors: s.log_errors.load(Relaxed),
            log_marks_dropped: s.log_marks_dropped.load(Relaxed),
            unmappable_fd: s.unmappable_fd.load(Relaxed),
            rarp_requests: s.rarp_requests.load(Relaxed),
            rarp_sent: s.rarp_sent.load(Relaxed),
            guest_mtu: s.guest_mtu.load(Relaxed),
            mtu_refused: s.mtu_refused.load(Relaxed),
            last_error: s
                .last_error
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
            queued: self
                .shared
                .rx
                .iter()
                .map(|r| r.queued.0.load(Relaxed) as u64)
                .sum(),
            one_copy: self
                .shared
                .rx
                .iter()
                .map(|r| r.one_copy.load(Relaxed))
                .sum(),
            guest_rx_free: self
                .shared
                .tx
                .iter()
                .map(|r| r.rx_free.0.load(Relaxed) as u64)
                .sum(),
            tx_retries: self.shared.tx.iter().map(|r| r.retries.load(Relaxed)).sum(),
            tx_busy: self.shared.tx.iter().map(|r| r.busy.load(Relaxed)).sum(),
            vrings,
        }
    }
}

impl Port for VhostUserPort {
    fn name(&self) -> &str {
        &self.shared.name
    }
    fn type_name(&self) -> &'static str {
        "vhost-user"
    }
    fn n_rxq(&self) -> usize {
        self.shared.cfg.queues
    }
    fn open_rxq(&self, q: usize) -> Box<dyn RxQueue> {
        if q >= self.shared.cfg.queues {
            return nfv_ports::sink::no_rx();
        }
        Box::new(queue::VhostRxq::new(self.shared.clone(), q))
    }
    fn open_txq(&self, q: usize) -> Box<dyn TxQueue> {
        Box::new(queue::VhostTxq::new(self.shared.clone(), q))
    }
    fn gauges(&self) -> PortGauges {
        let st = self.status();
        let cfg = &self.shared.cfg;
        let mut g = PortGauges {
            connected: Some(st.connected),
            queued: Some(st.queued),
            guest_rx_free: Some(st.guest_rx_free),
            other: Vec::new(),
        }
        .with("mode", cfg.mode.as_str())
        .with("socket", cfg.socket.display().to_string())
        .with("features", features::describe(st.features))
        .with(
            "ring_layout",
            features::ring_layout(st.features, st.connected),
        )
        .with(
            "queue_pairs",
            format!("{} of {} enabled", st.pairs_enabled, cfg.queues),
        )
        .with("reconnects", st.reconnects())
        .with("negotiation_errors", st.negotiation_errors)
        .with("protocol_errors", st.protocol_errors)
        .with("mem_table_errors", st.mem_table_errors)
        .with("mem_over_budget", st.mem_over_budget)
        .with("guest_memory_mib", st.guest_memory >> 20)
        .with("ring_errors", st.ring_errors)
        .with("ack_timeouts", st.ack_timeouts)
        .with("quarantined", format!("{:?}", st.quarantined()))
        .with("call_stuck", format!("{:?}", st.call_stuck()))
        .with("call_blocked", st.counter("call_blocked"))
        .with("memory_faults", st.counter("memory_fault"))
        .with("tx_retries", st.tx_retries)
        .with("tx_busy", st.tx_busy)
        .with("copy_mode", if cfg.one_copy { "one-copy" } else { "copy" })
        .with("dirty_log", st.dirty_log_state())
        .with("log_errors", st.log_errors)
        .with("log_marks_dropped", st.log_marks_dropped)
        .with("unmappable_fd", st.unmappable_fd)
        .with("rarp_sent", st.rarp_sent)
        .with(
            "mtu",
            cfg.mtu
                .map_or_else(|| "not offered".to_string(), |m| m.to_string()),
        )
        .with("guest_mtu", st.guest_mtu)
        .with("mtu_refused", st.mtu_refused)
        .with(PortGauges::ONE_COPY_PACKETS, st.one_copy);
        let lend = &self.shared.lend;
        if lend.claimed.load(Acquire) {
            let sum =
                |f: &dyn Fn(&lend::LendPair) -> u64| -> u64 { lend.pairs.iter().map(f).sum() };
            g.push(
                PortGauges::ZERO_COPY_PACKETS,
                sum(&|p| p.zero_copy.load(Relaxed)),
            );
            g.push(
                "zero_copy_returned",
                sum(&|p| p.returned_total.load(Relaxed)),
            );
        }
        for vr in &st.vrings {
            let nonzero: Vec<String> = errors::NAMES
                .iter()
                .zip(&vr.counters)
                .filter(|(_, c)| **c != 0)
                .map(|(n, c)| format!("{n}={c}"))
                .collect();
            if !nonzero.is_empty() || vr.setup_failures != 0 {
                let key: &'static str = VRING_KEYS.get(vr.index).copied().unwrap_or("vring");
                let mut s = nonzero.join(" ");
                if vr.setup_failures != 0 {
                    s.push_str(&format!(" setup_failures={}", vr.setup_failures));
                }
                g.push(key, s.trim());
            }
        }
        if !st.last_error.is_empty() {
            g.push("last_error", st.last_error);
        }
        g
    }
}

/// Gauge keys must be `'static`: one per possible virtqueue.
const VRING_KEYS: [&str; 2 * VhostUserConfig::MAX_QUEUES] = [
    "vring0", "vring1", "vring2", "vring3", "vring4", "vring5", "vring6", "vring7", "vring8",
    "vring9", "vring10", "vring11", "vring12", "vring13", "vring14", "vring15", "vring16",
    "vring17", "vring18", "vring19", "vring20", "vring21", "vring22", "vring23", "vring24",
    "vring25", "vring26", "vring27", "vring28", "vring29", "vring30", "vring31",
];

/// How long dropping a port waits for its protocol thread to end. It ends
/// within milliseconds unless it is blocked in a guest page fault that
/// does not complete (see the crate doc); then it is left to end by itself
/// when the fault does (it holds only the port's shared state, and removes
/// the socket file then).
const JOIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

impl Drop for VhostUserPort {
    fn drop(&mut self) {
        self.shared.stop.store(true, Release);
        if let Some(c) = self.shared.conn().as_ref() {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
        let t = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = t {
            let deadline = std::time::Instant::now() + JOIN_TIMEOUT;
            while !t.is_finished() && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            if t.is_finished() {
                let _ = t.join();
            } else {
                tracing::warn!(
                    "vhost-user port {}: its protocol thread did not end within {:?} (blocked \
                     in the frontend's memory?); removed without waiting for it",
                    self.shared.name,
                    JOIN_TIMEOUT
                );
            }
        }
    }
}
