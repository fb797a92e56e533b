//! What a memif port's control side and its PMD queues share, in either
//! role: the types the other modules build on (the part VPP's memif
//! plugin keeps in `private.h`). It imports no module that imports it.
//!
//! * Server role: the port joins the [`crate::hub`] of its socket (one
//!   listener per path, shared by ports with different interface ids);
//!   the hub's connection thread runs the handshake, maps the client's
//!   memory ([`Connection::open`]) and *publishes* the connection: stores
//!   it and bumps [`Shared::generation`], which every queue compares once
//!   per burst, then unpublishes it when the connection ends.
//! * Client role: the port's own thread (`port.rs`) connects (again after
//!   every disconnect), publishes its [`ClientRings`] and watches the
//!   socket.
//! * A refused or failed peer costs a counter and a reason in `show
//!   ports`; the port keeps serving.
//!
//! Each burst checks the port's generation with one atomic load and only
//! on a change takes the slow path ([`Follow`]: the new connection, or
//! none). A queue keeps its connection in an `Arc`, so a disconnect never
//! unmaps memory a PMD is reading; the memory goes when the last queue
//! moves on.

use crate::client::ClientRings;
use crate::connection::Connection;
use crate::settings::MemifConfig;
use nfv_vhost::RateLimitedLog;
use nfv_virtio::guard::fault_epoch;
use nfv_wire::memif::{MsgRepr, Reason};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::{Arc, Mutex, MutexGuard};

/// Why the port opened no socket.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot listen on memif socket {socket}: {err}")]
    Listen { socket: String, err: std::io::Error },
    #[error("memif socket {socket} already serves interface_id {id} for port {port:?}")]
    IdTaken {
        socket: String,
        id: u32,
        port: String,
    },
    #[error("cannot start its control thread: {0}")]
    Spawn(std::io::Error),
}

/// What a port's queues work on while connected: the server role's
/// [`Connection`] (the client's memory, mapped) or the client role's
/// [`ClientRings`] (our own memory).
pub(crate) trait Link: Send + Sync + 'static {
    /// The memory faulted (SIGBUS survived): stop touching it.
    fn faulted(&self) -> bool;
}

impl Link for Connection {
    fn faulted(&self) -> bool {
        self.mem.faulted()
    }
}

impl Link for ClientRings {
    /// Our own region, sealed against shrinking: it cannot fault.
    fn faulted(&self) -> bool {
        false
    }
}

/// What the control thread and the queues share.
pub(crate) struct Shared<L> {
    common: Common,
    generation: AtomicU64,
    current: Mutex<Option<Arc<L>>>,
}

/// The role-independent part: identity, stop flag, counters, status.
pub(crate) struct Common {
    pub name: String,
    pub cfg: MemifConfig,
    pub stop: AtomicBool,
    /// A client holds the interface (server role; set by the hub's
    /// connection thread, so two clients cannot both get it).
    pub claimed: AtomicBool,
    /// Every queue's counters (queues register when they open).
    pub counters: Mutex<Vec<Arc<Counters>>>,
    pub status: Mutex<Status>,
    /// Refusals and faults: a client repeating them cannot flood the log.
    pub log: RateLimitedLog,
}

impl<L> std::ops::Deref for Shared<L> {
    type Target = Common;
    fn deref(&self) -> &Common {
        &self.common
    }
}

/// What the control side reports (`show ports`).
#[derive(Debug, Default, Clone)]
pub(crate) struct Status {
    pub connected: bool,
    pub connects: u64,
    pub disconnects: u64,
    /// Peers refused (handshake refusals, bad rings, timeouts).
    pub refused: u64,
    /// Of `refused`: over a memory budget (too many regions, the port's
    /// `max_shared_memory`, the node's budget).
    pub memory_refused: u64,
    /// Of `refused`: a region fd that is not memory the switch may map
    /// (`nfv_virtio::tenant_fd::check_mappable`).
    pub unmappable_fd: u64,
    /// Bytes of address space the connection's regions map (0: none).
    pub shared_memory: u64,
    /// The last peer: its interface name and its name.
    pub peer: String,
    pub rings: (usize, usize),
    pub ring_slots: usize,
    /// Why the last connection ended or the last peer was refused.
    pub last_event: String,
}

impl<L> Shared<L> {
    pub fn new(common: Common) -> Shared<L> {
        Shared {
            common,
            generation: AtomicU64::new(0),
            current: Mutex::new(None),
        }
    }

    #[inline(always)]
    pub fn generation(&self) -> u64 {
        self.generation.load(Acquire)
    }

    /// The connection now (slow path: on a generation change).
    pub fn current(&self) -> Option<Arc<L>> {
        lock(&self.current).clone()
    }

    pub(crate) fn publish(&self, conn: Option<Arc<L>>) {
        *lock(&self.current) = conn;
        self.generation.fetch_add(1, Release);
    }
}

impl Common {
    pub fn register_counters(&self) -> Arc<Counters> {
        let c = Arc::new(Counters::default());
        lock(&self.counters).push(c.clone());
        c
    }

    /// Records what happened for `show ports` and logs it (`warn`: a
    /// refused client or a fault, rate-limited; `info`: connects and
    /// disconnects, which a client cannot repeat faster than it
    /// handshakes, rate-limited apart).
    /// A refusal, logged (rate-limited) under `reason` and recorded.
    pub(crate) fn refusal(&self, reason: &'static str, what: String) {
        self.log.warn(reason, || what.clone());
        lock(&self.status).last_event = what;
    }

    pub(crate) fn event(&self, warn: bool, what: String) {
        if warn {
            self.log.warn("refused", || what.clone());
        } else {
            self.log.info("connection", || what.clone());
        }
        lock(&self.status).last_event = what;
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

pub(crate) fn disconnect(reason: &str) -> MsgRepr {
    MsgRepr::Disconnect {
        code: 0,
        reason: Reason::new(reason.as_bytes()),
    }
}

/// Errors and events of one queue, written by its PMD only.
#[derive(Debug, Default)]
#[repr(align(64))]
pub(crate) struct Counters {
    /// Descriptors outside their region (or naming no region).
    pub bad_desc: AtomicU64,
    /// Frames whose chain ran past the client's head.
    pub bad_chain: AtomicU64,
    /// Frames larger than a switch packet buffer (rx) or than the room the
    /// client posted (tx never drops for that: it chains).
    pub too_big: AtomicU64,
    /// Frames of zero bytes.
    pub empty: AtomicU64,
    /// Events (not bursts) in which the peer's ring position lay outside
    /// what the switch handed it (`crate::position`: the client's head in
    /// the server role, the server's tail in the client role).
    pub bad_head: AtomicU64,
    /// Interrupts requested from the client's eventfd.
    pub interrupts: AtomicU64,
    /// Bursts that found the client's memory faulted (SIGBUS survived).
    pub memory_faults: AtomicU64,
    /// Frames received as split packets: head copied, tail left in the
    /// peer's buffer until the burst ends (one copy per hop).
    pub one_copy: AtomicU64,
}

/// The counter names, in [`Counters::load`] order.
pub(crate) const COUNTER_NAMES: [&str; 8] = [
    "bad_desc",
    "bad_chain",
    "too_big",
    "empty",
    "bad_head",
    "interrupts",
    "memory_faults",
    nfv_ports::PortGauges::ONE_COPY_PACKETS,
];

impl Counters {
    pub fn load(&self) -> [u64; 8] {
        [
            &self.bad_desc,
            &self.bad_chain,
            &self.too_big,
            &self.empty,
            &self.bad_head,
            &self.interrupts,
            &self.memory_faults,
            &self.one_copy,
        ]
        .map(|c| c.load(Relaxed))
    }
}

#[inline(always)]
pub(crate) fn bump(c: &AtomicU64) {
    c.store(c.load(Relaxed).wrapping_add(1), Relaxed);
}

/// What a queue follows of the port's connection (`L`: the server's
/// [`Connection`] or the client's `ClientRings`).
pub(crate) struct Follow<L> {
    shared: Arc<Shared<L>>,
    generation: u64,
    fault_epoch: u64,
    pub conn: Option<Arc<L>>,
    pub counters: Arc<Counters>,
}

impl<L: Link> Follow<L> {
    pub fn new(shared: Arc<Shared<L>>) -> Follow<L> {
        let counters = shared.register_counters();
        Follow {
            shared,
            // Forces a resync on the first burst.
            generation: u64::MAX,
            fault_epoch: fault_epoch(),
            conn: None,
            counters,
        }
    }

    /// True when the connection changed since the last burst (the caller
    /// then resets its ring position). A new generation or fault epoch
    /// that leaves the same connection in place is not a change: the
    /// position the queue keeps privately stays (taking it again from the
    /// ring would take it from memory the peer writes — the memif_rings
    /// fuzz target saw a queue stall that way).
    #[inline(always)]
    pub fn changed(&mut self) -> bool {
        let g = self.shared.generation();
        let f = fault_epoch();
        if g == self.generation && f == self.fault_epoch {
            return false;
        }
        self.resync(g, f)
    }

    #[cold]
    fn resync(&mut self, generation: u64, epoch: u64) -> bool {
        self.generation = generation;
        self.fault_epoch = epoch;
        let before = self.conn.take();
        self.conn = self.shared.current();
        if self.conn.as_ref().is_some_and(|c| c.faulted()) {
            // The control thread disconnects the client; until then the
            // rings (zeros now) are left alone.
            bump(&self.counters.memory_faults);
            self.conn = None;
        }
        match (&before, &self.conn) {
            (Some(a), Some(b)) => !Arc::ptr_eq(a, b),
            (None, None) => false,
            _ => true,
        }
    }
}
