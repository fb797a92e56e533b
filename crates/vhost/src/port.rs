//! The `vhost-user` port: its type ([`VHOST_USER`], registered in
//! `nfv-port-types`), opening (binding the server socket, starting the
//! protocol thread), closing (dropping the port stops that thread), its
//! queues (`rx.rs`, `tx.rs`) and its gauges, typed ([`VhostStatus`]) and
//! as `show ports` prints them.

use std::sync::atomic::Ordering::*;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use nfv_ports::config::{PortConfig, PortKind};
use nfv_ports::{OpenContext, Port, PortGauges, PortOpenError, PortType, RxQueue, TxQueue};
use nfv_settings::{PortTable, SettingError};

use crate::conn;
use crate::errors;
use crate::features;
use crate::lend;
use crate::lender;
use crate::rx::VhostRxq;
use crate::settings::{self, VhostUserConfig, VhostUserMode};
use crate::shared::{Shared, VhostError};
use crate::tx::VhostTxq;

/// The `vhost-user` port type, listed in `nfv-port-types`.
pub static VHOST_USER: VhostUserType = VhostUserType;

pub struct VhostUserType;

impl PortType for VhostUserType {
    fn name(&self) -> &'static str {
        "vhost-user"
    }
    fn keys(&self) -> &'static [&'static str] {
        settings::KEYS
    }
    fn parse(&self, t: &PortTable<'_>) -> Result<PortKind, SettingError> {
        Ok(PortKind::typed(settings::parse(t)?))
    }
    /// Opens the port and adds it to the node's lenders, where a
    /// zero-copy AF_XDP queue naming it finds it.
    fn open(&self, cfg: &PortConfig, cx: &OpenContext<'_>) -> Result<Arc<dyn Port>, PortOpenError> {
        let port = VhostUserPort::from_config(cfg).map_err(PortOpenError::failed)?;
        cx.lenders.add(&port.lender());
        Ok(port)
    }
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
    /// Since the port opened, in the order of
    /// [`QUEUE_COUNTER_NAMES`](crate::QUEUE_COUNTER_NAMES).
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
    /// Times the guest stopped taking packets long enough to count as
    /// down for a fast_failover group (`crate::stall`).
    pub stalls: u64,
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
    /// A per-vring counter
    /// ([`QUEUE_COUNTER_NAMES`](crate::QUEUE_COUNTER_NAMES)) summed over
    /// vrings.
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
        lender::lender(&self.shared)
    }

    pub fn config(&self) -> &VhostUserConfig {
        &self.shared.cfg
    }

    /// Caps the bytes of address space one memory table of this port may
    /// map (default
    /// [`DEFAULT_MAX_GUEST_MEMORY`](crate::DEFAULT_MAX_GUEST_MEMORY));
    /// applies to later SET_MEM_TABLE requests. The node-wide budget is
    /// [`NODE_BUDGET`](crate::NODE_BUDGET).
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
            stalls: s.stall.stalls.load(Relaxed),
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
        Box::new(VhostRxq::new(self.shared.clone(), q))
    }
    fn open_txq(&self, q: usize) -> Box<dyn TxQueue> {
        Box::new(VhostTxq::new(self.shared.clone(), q))
    }
    fn gauges(&self) -> PortGauges {
        let st = self.status();
        let mut g = self.state_gauges(&st);
        self.push_lend_gauges(&mut g);
        push_vring_gauges(&mut g, &st.vrings);
        if !st.last_error.is_empty() {
            g.push("last_error", st.last_error);
        }
        g
    }
}

impl VhostUserPort {
    /// The port's settings, connection, negotiation and error counts.
    fn state_gauges(&self, st: &VhostStatus) -> PortGauges {
        let cfg = &self.shared.cfg;
        PortGauges {
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
        .with("stalls", st.stalls)
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
        .with(PortGauges::ONE_COPY_PACKETS, st.one_copy)
    }

    /// Lent guest buffers, once a borrower has claimed this port.
    fn push_lend_gauges(&self, g: &mut PortGauges) {
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
    }
}

/// One gauge per virtqueue with a nonzero error counter or setup failure.
fn push_vring_gauges(g: &mut PortGauges, vrings: &[VringStatus]) {
    for vr in vrings {
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
