//! What a port's protocol thread shares with the PMD threads' queue
//! objects, and how rings change hands.
//!
//! * The protocol thread owns the negotiated state. Each change is
//!   *published*: a new immutable [`Snapshot`] (ring setups holding an
//!   `Arc<GuestMemory>`) is stored and [`Shared::generation`] bumped. PMD queue
//!   objects compare `generation` once per burst (one atomic load) and only on a
//!   change take the snapshot's mutex (slow path).
//! * **Guest TX virtqueues** (our rx queues; vring `2i+1`) are owned by
//!   exactly one rx queue object, which builds its `DeviceQueue` from the
//!   snapshot and drops it (with its `Arc<GuestMemory>`) when it moves to a
//!   generation without it. Rx queues are polled continuously, so the
//!   protocol thread can wait for the owner's acknowledgement
//!   ([`RxRing::acked_gen`]) before answering `GET_VRING_BASE` with the
//!   position the owner left in [`RxRing::position`].
//! * **Guest RX virtqueues** (our tx queues; vring `2p`) live in a
//!   [`TxRing`] slot behind a per-ring spin lock. Tx queues run only when
//!   there is traffic, so they cannot be relied on to notice a generation
//!   promptly; the protocol thread therefore builds and tears down these
//!   `DeviceQueue`s itself, and PMDs that share a guest RX virtqueue (more
//!   PMDs than enabled queue pairs) serialise on the lock. With at least
//!   as many enabled pairs as PMDs, PMD `q` is alone on pair `q` and the
//!   lock is an uncontended exchange per burst. The protocol thread holds
//!   the lock only to take the ring's state out (leaving a stopped,
//!   "rebuilding" slot) and to put the new state in: retiring the old
//!   queue and building the new one touch guest memory and the dirty log,
//!   and happen with no lock held (see `Backend::apply_tx`). A PMD that
//!   finds the slot held by the protocol thread ([`TxRing::lock_pmd`]) or
//!   rebuilding sends nothing that burst and counts it
//!   ([`TxRing::busy`]); it spins only behind another PMD.
//!
//! * **Nothing here waits on the guest.** Interrupts are requested from
//!   the PMD (under the tx lock) with one atomic swap; the guest's call fd
//!   is written by `nfv_virtio::notify`'s thread, never while a lock is
//!   held, so a call fd that blocks cannot stall a PMD or, through the tx
//!   lock, the protocol thread (GET_VRING_BASE, disconnect, port removal).
//! * **Guest memory that faults** (SIGBUS, see `nfv_virtio::guard`) is
//!   noticed by the ring owners through `fault_epoch` (one relaxed load per
//!   burst); the affected queues stop (`memory_fault`), and a ring set up
//!   again over the same faulted memory refuses to start
//!   ([`RingSetup::build`]) until a new memory table arrives.
//!
//! Here too, as the types the other modules share: each ring's owner
//! state ([`RingOwner`]; its transitions are in `ownership.rs`) and the
//! port's open error ([`VhostError`]). This module imports none of the
//! modules that import it.
//!
//! Thread safety: `Shared` is `Sync`. Counters are atomics with a single
//! writer (the protocol thread, or the ring's owner for ring errors).

use nfv_mem::{SpinGuard, SpinLock};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::*};
use std::sync::{Arc, Mutex, MutexGuard};

use nfv_virtio::dirty_log::DirtyLog;
use nfv_virtio::{DeviceQueue, GuestMemory, QueueSetup};

use crate::errors::{ERROR_KINDS, ErrorMirror};
use crate::lend::{LeaseKey, LendState};
use crate::ratelimit::RateLimitedLog;
use crate::settings::VhostUserConfig;

/// Why a port could not be opened (`VhostUserPort::open`; binding the
/// server socket, `conn::bind`, returns it too).
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

/// Everything needed to build a `DeviceQueue` for one running vring.
#[derive(Debug)]
pub(crate) struct RingSetup {
    /// Changes whenever anything below changes (rebuild needed).
    pub id: u64,
    /// Changes whenever the position must restart from `base`
    /// (SET_VRING_BASE, or a stop by GET_VRING_BASE); otherwise a rebuilt
    /// queue continues where the previous one stopped.
    pub base_epoch: u64,
    pub base: u16,
    pub size: u16,
    pub desc: u64,
    pub avail: u64,
    pub used: u64,
    pub features: u64,
    pub mem: Arc<GuestMemory>,
    pub call: Option<Arc<OwnedFd>>,
    /// While the guest migrates: the dirty log every write is marked in.
    pub dirty_log: Option<Arc<DirtyLog>>,
}

impl RingSetup {
    /// A new device queue at avail position `last_avail_idx`.
    pub fn build(&self, last_avail_idx: u16) -> Result<DeviceQueue, String> {
        if self.mem.faulted() {
            return Err(
                "its guest memory faulted (SIGBUS: the frontend shrank a memory file); \
                 waiting for a new memory table"
                    .into(),
            );
        }
        let call = match &self.call {
            Some(fd) => Some(fd.try_clone().map_err(|e| format!("dup of call fd: {e}"))?),
            None => None,
        };
        let mut dq = DeviceQueue::new(QueueSetup {
            mem: self.mem.clone(),
            size: self.size,
            desc_uva: self.desc,
            avail_uva: self.avail,
            used_uva: self.used,
            last_avail_idx,
            features: self.features,
            call,
        })
        .map_err(|e| e.to_string())?;
        dq.set_dirty_log(self.dirty_log.clone());
        // Both directions: a PMD polls every guest TX queue it owns each
        // iteration (its dequeue settles the check), and the datapath
        // settles a guest RX queue an iteration after its last burst
        // (`TxQueue::settle`).
        dq.set_defer_interrupts(true);
        Ok(dq)
    }

    /// What a lease on this setup is granted on: its memory and ring
    /// addresses.
    pub fn lease_key(&self) -> LeaseKey {
        LeaseKey {
            mem: Arc::as_ptr(&self.mem) as usize,
            rings: [self.desc, self.avail, self.used],
            size: self.size,
            features: self.features,
        }
    }
}

/// One published state of the port.
#[derive(Debug, Default)]
pub(crate) struct Snapshot {
    pub generation: u64,
    /// By queue pair: the guest's TX virtqueue `2p+1`, if running.
    pub rx: Vec<Option<Arc<RingSetup>>>,
    /// Pairs whose guest RX virtqueue `2p` is running, ascending. PMD `q`
    /// transmits on `tx_pairs[q % len]`.
    pub tx_pairs: Vec<usize>,
}

/// A ring-fill gauge written by the ring's owner once per burst (one
/// relaxed store) and read by `gauges`. On its own cache line: the rings of
/// neighbouring pairs belong to other PMDs, and a per-burst store must not
/// bounce their lines.
#[derive(Debug, Default)]
#[repr(align(64))]
pub(crate) struct Gauge(pub AtomicU32);

/// Shared part of a guest TX virtqueue (one of our rx queues).
#[derive(Debug, Default)]
pub(crate) struct RxRing {
    /// An rx queue object exists (and is being polled by a PMD).
    pub attached: AtomicBool,
    /// Last generation the owner has moved to.
    pub acked_gen: AtomicU64,
    /// Avail position the owner left when it last dropped its queue, and
    /// the base epoch that position belongs to.
    pub position: AtomicU32,
    pub pos_epoch: AtomicU64,
    /// Chains the guest had queued that we had not taken, at the start of
    /// the owner's last rx burst (0 while the ring is not running).
    pub queued: Gauge,
    /// Frames taken from this ring as split packets (one-copy mode), all
    /// queues it had together. Single writer: the owner.
    pub one_copy: AtomicU64,
    pub errors: ErrorMirror,
}

/// Holders of a [`TxRing`]'s lock: a PMD (or another thread that only
/// touches the queue between bursts: `lend.rs`), or the protocol thread,
/// which PMDs never wait for.
const PMD: u8 = nfv_mem::spin::ANY;
const CONTROL: u8 = 2;

/// A guest RX virtqueue (our tx queues), behind a spin lock.
pub(crate) struct TxRing {
    state: SpinLock<TxState>,
    /// Receive buffers the guest had posted and we had not used, at the
    /// start of the last tx burst into this ring (written under the lock;
    /// 0 until then and while the ring is not running).
    pub rx_free: Gauge,
    /// Extra enqueue tries into this ring after it ran out of buffers
    /// (`tx_retries`); written under the lock.
    pub retries: AtomicU64,
    /// Tx bursts that sent nothing because the protocol thread held the
    /// ring or was rebuilding it (their packets count as `tx_full` drops).
    pub busy: AtomicU64,
    pub errors: ErrorMirror,
}

/// The owner's state of a guest RX virtqueue.
pub(crate) type TxState = RingOwner;

/// The owner's side of one virtqueue. Single owner: a PMD's rx queue
/// object, or whoever holds the tx ring's lock. Its transitions (a setup
/// that changes) are `RingOwner::apply`, in `ownership.rs`.
#[derive(Default)]
pub(crate) struct RingOwner {
    pub dq: Option<DeviceQueue>,
    /// Id of the setup last applied (0: none).
    pub setup_id: u64,
    /// Base epoch `position` belongs to.
    pub base_epoch: u64,
    /// Avail position where the last queue stopped.
    pub position: u16,
    /// Counter totals of the queues this ring had before `dq`.
    pub error_base: [u64; ERROR_KINDS],
    /// Sum of `dq`'s error counters at the last mirror, to notice changes.
    pub error_seen: u64,
    /// Guest-memory fault epoch last checked against `dq`'s memory.
    pub fault_epoch: u64,
    /// Guest RX rings: what a lease on the running setup is granted on.
    pub lease_key: Option<LeaseKey>,
    /// Guest RX rings: this is the stand-in left in the slot while the
    /// protocol thread rebuilds the ring outside the lock (no queue; tx
    /// bursts count as busy).
    pub rebuilding: bool,
}

impl Default for TxRing {
    fn default() -> Self {
        TxRing {
            state: SpinLock::new(TxState::default()),
            rx_free: Gauge::default(),
            retries: AtomicU64::new(0),
            busy: AtomicU64::new(0),
            errors: ErrorMirror::default(),
        }
    }
}

impl TxRing {
    /// Takes the lock, spinning while another thread holds it (the
    /// protocol thread holds it only to swap the ring's state: no guest
    /// memory is touched under it).
    #[inline]
    pub fn lock(&self) -> TxGuard<'_> {
        self.state.lock_as(PMD)
    }

    /// The PMD's tx burst: takes the lock, spinning while another PMD
    /// holds it; `None` (at once, counted in [`TxRing::busy`]) while the
    /// protocol thread holds it. The uncontended case is the same single
    /// compare-exchange as [`TxRing::lock`].
    #[inline]
    pub fn lock_pmd(&self) -> Option<TxGuard<'_>> {
        let g = self.state.lock_unless(PMD, CONTROL);
        if g.is_none() {
            Status::bump(&self.busy);
        }
        g
    }

    /// The protocol thread: takes the lock, marked so that PMDs skip
    /// their burst rather than wait. Hold it only to swap state.
    pub fn lock_control(&self) -> TxGuard<'_> {
        self.state.lock_as(CONTROL)
    }
}

pub(crate) type TxGuard<'a> = SpinGuard<'a, TxState>;

/// Port-level counters and facts, written by the protocol thread.
#[derive(Debug, Default)]
pub(crate) struct Status {
    pub connected: AtomicBool,
    /// Whether the guest still takes packets (`crate::stall`).
    pub stall: crate::stall::Stall,
    pub features: AtomicU64,
    pub protocol_features: AtomicU64,
    pub pairs_enabled: AtomicU64,
    pub connects: AtomicU64,
    pub disconnects: AtomicU64,
    pub negotiation_errors: AtomicU64,
    pub protocol_errors: AtomicU64,
    pub mem_table_errors: AtomicU64,
    /// Memory tables refused for the port's cap or the node's budget
    /// (also counted in `mem_table_errors`).
    pub mem_over_budget: AtomicU64,
    /// Bytes mapped for the current memory table (0: none).
    pub guest_memory: AtomicU64,
    pub ring_errors: AtomicU64,
    pub ack_timeouts: AtomicU64,
    /// SET_LOG_BASE refused (no fd, a log we cannot map).
    pub log_errors: AtomicU64,
    /// Writes into guest memory that could not be marked in the dirty log
    /// (a page past the log's end, an address outside guest memory): the
    /// migration may miss them. Shared with each log (`DirtyLog::
    /// counting_drops_in`).
    pub log_marks_dropped: Arc<AtomicU64>,
    /// Memory-region or dirty-log fds refused by
    /// `nfv_virtio::tenant_fd::check_mappable` (also counted in
    /// `mem_table_errors` or `log_errors`).
    pub unmappable_fd: AtomicU64,
    /// SEND_RARP requests, and announcements injected for them.
    pub rarp_requests: AtomicU64,
    pub rarp_sent: AtomicU64,
    /// NET_SET_MTU: the MTU set (0: none) and the requests refused.
    pub guest_mtu: AtomicU64,
    pub mtu_refused: AtomicU64,
    /// Bytes of the current dirty log (0: none), and whether the queues
    /// log into it (VHOST_F_LOG_ALL acked).
    pub log_bytes: AtomicU64,
    pub last_error: Mutex<String>,
}

impl Status {
    pub fn bump(c: &AtomicU64) {
        c.fetch_add(1, Relaxed);
    }
    pub fn set_error(&self, msg: String) {
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = msg;
    }
}

impl Shared {
    /// A refusal or fault worth a warning: `last_error` always, the log
    /// line at most [`RateLimitedLog::LINES`] times per interval and
    /// `reason`. The caller counts it.
    pub fn warn_limited(&self, reason: &'static str, msg: String) {
        self.log.warn(reason, || msg.clone());
        self.status.set_error(msg);
    }
}

pub(crate) struct Shared {
    pub name: String,
    pub cfg: VhostUserConfig,
    /// Bumped (release) after each new snapshot is stored.
    pub generation: AtomicU64,
    snapshot: Mutex<Arc<Snapshot>>,
    /// By queue pair.
    pub rx: Box<[RxRing]>,
    /// By queue pair.
    pub tx: Box<[TxRing]>,
    pub status: Status,
    /// Asks the protocol thread to end.
    pub stop: AtomicBool,
    /// The current connection, for shutting it down from another thread.
    pub conn: Mutex<Option<UnixStream>>,
    /// Rate limit for this port's warnings.
    pub log: RateLimitedLog,
    /// Cap on the bytes one memory table may map (`crate::memtable`).
    pub max_guest_memory: AtomicU64,
    /// Guest RX buffers lent to other ports' rx queues (`lend.rs`).
    pub lend: LendState,
    /// A MAC to announce (SEND_RARP), taken by queue pair 0's rx queue at
    /// its next resync: `1 << 48 | mac` (see `crate::rarp`), 0 for none.
    pub rarp: AtomicU64,
}

impl Shared {
    pub fn new(name: &str, cfg: &VhostUserConfig) -> Shared {
        let pairs = cfg.queues;
        Shared {
            name: name.to_string(),
            cfg: cfg.clone(),
            generation: AtomicU64::new(0),
            snapshot: Mutex::new(Arc::new(Snapshot {
                generation: 0,
                rx: vec![None; pairs],
                tx_pairs: Vec::new(),
            })),
            rx: (0..pairs).map(|_| RxRing::default()).collect(),
            tx: (0..pairs).map(|_| TxRing::default()).collect(),
            status: Status::default(),
            stop: AtomicBool::new(false),
            conn: Mutex::new(None),
            log: RateLimitedLog::new(format!("vhost-user port {name}")),
            max_guest_memory: AtomicU64::new(cfg.max_guest_memory),
            lend: LendState::new(pairs),
            rarp: AtomicU64::new(0),
        }
    }

    fn snap_lock(&self) -> MutexGuard<'_, Arc<Snapshot>> {
        self.snapshot.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The current snapshot (slow path).
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snap_lock().clone()
    }

    /// Stores `snap` (whose `generation` must be the next one) and bumps `generation`.
    pub fn publish(&self, snap: Snapshot) {
        let generation = snap.generation;
        let old = std::mem::replace(&mut *self.snap_lock(), Arc::new(snap));
        self.generation.store(generation, Release);
        // The last reference to a memory table or log may go with the old
        // snapshot: unmapped outside the mutex PMDs take on a resync.
        drop(old);
    }

    pub fn conn(&self) -> MutexGuard<'_, Option<UnixStream>> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }
}
