//! The server role's sockets: one listening socket per path, shared by
//! every memif port (server role) configured on it, each serving one
//! interface id — as VPP and DPDK let several interfaces share a socket
//! (`id=` tells them apart).
//!
//! A [`Hub`] per path accepts connections on its own thread and hands
//! each to a thread of its own that runs the handshake with a deadline,
//! finds the port by INIT's id, claims it (a second client for the same
//! id is told "Already connected"), maps the memory, answers CONNECTED,
//! publishes the connection to the port's queues and watches the socket
//! until the connection ends.
//!
//! **Handshake slots.** A handshake holds a slot (and a thread) from
//! accept until CONNECT or failure: at most [`MAX_HANDSHAKES`] per
//! socket, of which one peer uid (`SO_PEERCRED`) holds at most
//! [`MAX_HANDSHAKES_PER_UID`], so no single uid can take them all. A
//! client must send its first message within [`FIRST_MESSAGE_TIMEOUT`]
//! of HELLO and finish within [`HANDSHAKE_TIMEOUT`]. A connection that
//! has not spoken yet is *silent*; a newcomer that finds its uid's share
//! (or the socket) full displaces the oldest silent connection of that
//! uid (or of any uid) instead of being refused, so silent connections
//! hoard nothing even when every tenant runs as the same uid (containers
//! without user namespaces all connect as root). Only when every slot
//! in the way holds a client that has spoken is the newcomer refused
//! ("Too many connections"). What it costs a hostile tenant to hold a
//! slot is then a client that keeps talking (a valid INIT: its own
//! interface id and secret), for at most [`HANDSHAKE_TIMEOUT`] at a
//! time, and only within its uid's share. Every refusal, drop and
//! displacement is counted per socket ([`HUB_COUNTER_NAMES`], in each
//! member port's gauges) and logged rate-limited.
//!
//! Ports join when they open and leave when they are dropped; the last
//! one out stops the hub (joining its thread before the path may be
//! bound again) and the socket file goes with its listener.

use crate::connection::{Connection, MAX_REGIONS, Refused, RefusedKind};
use crate::handshake::{Limits, Offer, Setup};
use crate::serve::{self, HandshakeError, Timeouts};
use crate::shared::{Common, OpenError, Shared, disconnect, lock};
use crate::socket::{Conn, Listener, Received, SocketPath};
use nfv_vhost::RateLimitedLog;
use nfv_wire::memif::{self, MsgRepr};
use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering::*};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long a client has from accept to CONNECT. A DPDK, VPP or libmemif
/// client answers every message within a millisecond; 5 s covers a
/// loaded host and bounds how long a talking client holds a slot.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a client has from HELLO to its first message (INIT). A
/// client creates and maps its memory before INIT (memfd, ftruncate,
/// mmap: micro- to milliseconds), so 1 s leaves two to three orders of
/// magnitude for a loaded host, while a silent connection frees its slot
/// within a second even when nobody displaces it.
pub const FIRST_MESSAGE_TIMEOUT: Duration = Duration::from_secs(1);
/// How often threads look at their stop flags and the memory.
const TICK: Duration = Duration::from_millis(100);
/// How long a handshake that finds its interface still claimed (at INIT,
/// and again when it claims it) waits for the claim to go before
/// answering "Already connected": a client that
/// closes and reconnects at once can finish its new handshake before the
/// thread serving its old connection has seen the close (on a busy
/// machine, before that thread has even run: 300 ms was once not enough
/// with both CPUs busy). The wait holds a handshake slot, so a peer that
/// asks for a taken interface over and over is bounded by the slots.
const RECLAIM_WAIT: Duration = Duration::from_secs(1);
/// Handshakes in progress on one socket (a thread each); more clients
/// wait in the listen backlog and, once accepted, displace a silent one
/// or are refused.
pub const MAX_HANDSHAKES: usize = 16;
/// Of a socket's handshakes, what one peer uid may hold: a VNF starting
/// four interfaces on one socket at once fits, and four uids are needed
/// to fill a socket with clients that talk.
pub const MAX_HANDSHAKES_PER_UID: usize = 4;
/// The uid bucket of a peer whose credentials could not be read.
const UNKNOWN_UID: u32 = u32::MAX;

/// Per-socket counters of refused and dropped handshakes, by reason.
#[derive(Debug, Default)]
pub(crate) struct HubCounters {
    /// Refused: every slot held by clients that have spoken.
    refused_busy: AtomicU64,
    /// Refused: the peer's uid holds its share, all of it talking.
    refused_uid: AtomicU64,
    /// Dropped: nothing within [`FIRST_MESSAGE_TIMEOUT`] of HELLO.
    silent_dropped: AtomicU64,
    /// Dropped while silent to make room for a newcomer.
    silent_displaced: AtomicU64,
    /// Dropped: spoke, but no CONNECT within [`HANDSHAKE_TIMEOUT`].
    handshake_timeouts: AtomicU64,
}

/// The names of [`HubCounters`], in [`HubCounters::load`] order (in the
/// gauges of every port on the socket).
pub(crate) const HUB_COUNTER_NAMES: [&str; 5] = [
    "socket_refused_busy",
    "socket_refused_uid",
    "socket_silent_dropped",
    "socket_silent_displaced",
    "socket_handshake_timeouts",
];

impl HubCounters {
    pub fn load(&self) -> [u64; 5] {
        [
            &self.refused_busy,
            &self.refused_uid,
            &self.silent_dropped,
            &self.silent_displaced,
            &self.handshake_timeouts,
        ]
        .map(|c| c.load(Relaxed))
    }
}

/// A handshake slot's state: silent until its first message.
const SILENT: u8 = 0;
const SPOKE: u8 = 1;
const DISPLACED: u8 = 2;

/// A handshake in progress. `state` goes SILENT → SPOKE (its thread, at
/// the first message) or SILENT → DISPLACED (the accept thread, which
/// then shuts the socket down), never both: a compare-exchange decides.
struct Pending {
    uid: u32,
    serial: u64,
    conn: Conn,
    state: AtomicU8,
}

/// What [`admit`] sees of a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SlotView {
    uid: u32,
    silent: bool,
}

/// Why a newcomer gets no slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Full {
    /// Its uid holds its share, every one talking.
    Uid,
    /// The socket's slots are all held by clients that talk.
    Busy,
}

/// What to do with a newcomer of `uid` given the slots held (oldest
/// first): take a free slot, displace slot `i` (silent), or refuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Admission {
    Take,
    Displace(usize),
    Refuse(Full),
}

fn admit(slots: &[SlotView], uid: u32, max: usize, per_uid: usize) -> Admission {
    let mine = slots.iter().filter(|s| s.uid == uid).count();
    if mine >= per_uid {
        return slots
            .iter()
            .position(|s| s.uid == uid && s.silent)
            .map_or(Admission::Refuse(Full::Uid), Admission::Displace);
    }
    if slots.len() >= max {
        return slots
            .iter()
            .position(|s| s.silent)
            .map_or(Admission::Refuse(Full::Busy), Admission::Displace);
    }
    Admission::Take
}

/// What the accept thread and the connection threads share.
struct HubInner {
    path: SocketPath,
    members: Mutex<HashMap<u32, Weak<Shared<Connection>>>>,
    stop: AtomicBool,
    /// Handshakes in progress, oldest first.
    slots: Mutex<Vec<Arc<Pending>>>,
    counters: HubCounters,
    /// Refusals that name no port (the socket's own) are logged here.
    log: RateLimitedLog,
    /// The "shared socket without a secret" warning was given.
    warned_open: AtomicBool,
}

/// A listening socket and the ports it serves.
pub(crate) struct Hub {
    inner: Arc<HubInner>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// Every hub of the process, by path.
static HUBS: Mutex<Vec<Arc<Hub>>> = Mutex::new(Vec::new());

/// Serves `shared` (a server-role port with interface id `id`) on `path`,
/// binding the socket if no other port has.
pub(crate) fn join(
    path: &SocketPath,
    id: u32,
    shared: &Arc<Shared<Connection>>,
) -> Result<Arc<Hub>, OpenError> {
    let mut hubs = lock(&HUBS);
    if let Some(hub) = hubs.iter().find(|h| h.inner.path == *path) {
        let mut members = lock(&hub.inner.members);
        if let Some(other) = members.get(&id).and_then(Weak::upgrade) {
            return Err(OpenError::IdTaken {
                socket: path.to_string(),
                id,
                port: other.name.clone(),
            });
        }
        members.insert(id, Arc::downgrade(shared));
        hub.inner.warn_if_open(&members);
        return Ok(hub.clone());
    }
    let listener = Listener::bind(path).map_err(|err| OpenError::Listen {
        socket: path.to_string(),
        err,
    })?;
    let inner = Arc::new(HubInner {
        path: path.clone(),
        members: Mutex::new(HashMap::from([(id, Arc::downgrade(shared))])),
        stop: AtomicBool::new(false),
        slots: Mutex::new(Vec::new()),
        counters: HubCounters::default(),
        log: RateLimitedLog::new(format!("memif socket {path}")),
        warned_open: AtomicBool::new(false),
    });
    let i = inner.clone();
    let thread = std::thread::Builder::new()
        .name("memif-accept".into())
        .spawn(move || accept_loop(&i, listener))
        .map_err(OpenError::Spawn)?;
    let hub = Arc::new(Hub {
        inner,
        thread: Mutex::new(Some(thread)),
    });
    hubs.push(hub.clone());
    Ok(hub)
}

impl Hub {
    /// The port with interface `id` leaves; the last one stops the hub.
    pub(crate) fn leave(&self, id: u32) {
        let mut hubs = lock(&HUBS);
        let empty = {
            let mut members = lock(&self.inner.members);
            members.remove(&id);
            members.is_empty()
        };
        if empty {
            hubs.retain(|h| !Arc::ptr_eq(&h.inner, &self.inner));
            self.inner.stop.store(true, Release);
            // Joined under the registry lock: the path cannot be bound
            // again before this listener (and its file) are gone.
            if let Some(t) = lock(&self.thread).take() {
                let _ = t.join();
            }
        }
    }
}

impl Hub {
    /// The socket's counters, by [`HUB_COUNTER_NAMES`].
    pub(crate) fn counters(&self) -> [u64; 5] {
        self.inner.counters.load()
    }
}

impl HubInner {
    /// Warns once per socket when it serves several ports and one of
    /// them takes any client: whoever reaches the socket may claim that
    /// interface id (the crate doc says more).
    fn warn_if_open(&self, members: &HashMap<u32, Weak<Shared<Connection>>>) {
        if members.len() < 2 {
            return;
        }
        let mut open: Vec<String> = members
            .values()
            .filter_map(Weak::upgrade)
            .filter(|s| s.cfg.secret.is_none())
            .map(|s| format!("{} (interface_id {})", s.name, s.cfg.id))
            .collect();
        if open.is_empty() || self.warned_open.swap(true, AcqRel) {
            return;
        }
        open.sort();
        tracing::warn!(
            "memif socket {} is shared by {} ports and {} have no secret: any client that \
             reaches the socket can claim them by interface id; give every port on a \
             shared socket its own `secret`",
            self.path,
            members.len(),
            open.join(", ")
        );
    }

    fn member(&self, id: u32) -> Option<Arc<Shared<Connection>>> {
        lock(&self.members).get(&id).and_then(Weak::upgrade)
    }

    /// What HELLO announces: the most any member takes (each port then
    /// holds its client to its own `queues`).
    fn limits(&self) -> Limits {
        let rings = lock(&self.members)
            .values()
            .filter_map(Weak::upgrade)
            .map(|s| s.cfg.queues)
            .max()
            .unwrap_or(1);
        Limits {
            max_regions: MAX_REGIONS,
            max_rings: rings as u16,
            max_log2_ring: memif::ring::MAX_LOG2_SIZE,
        }
    }
}

fn accept_loop(hub: &Arc<HubInner>, listener: Listener) {
    let mut serial = 0u64;
    while !hub.stop.load(Acquire) {
        match listener.accept(TICK) {
            Ok(Some(conn)) => {
                serial += 1;
                let uid = conn.peer_uid().unwrap_or(UNKNOWN_UID);
                let Some(pending) = hub.admit(conn, uid, serial) else {
                    continue;
                };
                let h = hub.clone();
                let p = pending.clone();
                let spawned = std::thread::Builder::new()
                    .name("memif-conn".into())
                    .spawn(move || serve_conn(&h, &p));
                if spawned.is_err() {
                    hub.release(pending.serial);
                }
            }
            Ok(None) => {}
            Err(e) => {
                hub.log.warn("accept", || format!("accept failed: {e}"));
                std::thread::sleep(TICK);
            }
        }
    }
}

impl HubInner {
    /// Gives a newcomer of `uid` a handshake slot, displacing a silent
    /// connection if it must ([`admit`]), or refuses it (counted, told
    /// "Too many connections", logged rate-limited).
    fn admit(&self, conn: Conn, uid: u32, serial: u64) -> Option<Arc<Pending>> {
        let mut slots = lock(&self.slots);
        loop {
            // Displaced connections are on their way out: not counted.
            let live: Vec<(usize, SlotView)> = slots
                .iter()
                .enumerate()
                .filter_map(|(i, p)| {
                    let state = p.state.load(Acquire);
                    (state != DISPLACED).then_some((
                        i,
                        SlotView {
                            uid: p.uid,
                            silent: state == SILENT,
                        },
                    ))
                })
                .collect();
            let views: Vec<SlotView> = live.iter().map(|(_, v)| *v).collect();
            match admit(&views, uid, MAX_HANDSHAKES, MAX_HANDSHAKES_PER_UID) {
                Admission::Take => break,
                Admission::Displace(k) => {
                    let old = &slots[live[k].0];
                    if old
                        .state
                        .compare_exchange(SILENT, DISPLACED, AcqRel, Acquire)
                        .is_err()
                    {
                        // It spoke just now: look again.
                        continue;
                    }
                    let _ = old.conn.send(&disconnect("Too many connections"), None);
                    let _ = old.conn.shutdown();
                    self.counters.silent_displaced.fetch_add(1, Relaxed);
                    self.log.info("displaced", || {
                        format!(
                            "a silent client (uid {}) dropped to make room for a new one \
                             (uid {uid})",
                            old.uid
                        )
                    });
                    break;
                }
                Admission::Refuse(full) => {
                    drop(slots);
                    let (counter, why) = match full {
                        Full::Uid => (
                            &self.counters.refused_uid,
                            format!(
                                "a client refused: uid {uid} already holds \
                                 {MAX_HANDSHAKES_PER_UID} handshakes"
                            ),
                        ),
                        Full::Busy => (
                            &self.counters.refused_busy,
                            format!(
                                "a client (uid {uid}) refused: {MAX_HANDSHAKES} handshakes \
                                 already in progress"
                            ),
                        ),
                    };
                    // Counted before the client hears it.
                    counter.fetch_add(1, Relaxed);
                    let _ = conn.send(&disconnect("Too many connections"), None);
                    self.log.warn("refused", || why);
                    return None;
                }
            }
        }
        let p = Arc::new(Pending {
            uid,
            serial,
            conn,
            state: AtomicU8::new(SILENT),
        });
        slots.push(p.clone());
        Some(p)
    }

    fn release(&self, serial: u64) {
        lock(&self.slots).retain(|p| p.serial != serial);
    }
}

/// Frees a handshake slot when its thread is done with it.
struct Slot<'a>(&'a HubInner, u64);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.release(self.1);
    }
}

/// Releases a port's claim when the connection thread is done with it.
struct Claim<'a>(&'a Shared<Connection>);

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.0.claimed.store(false, Release);
    }
}

/// Claims `claimed` (false -> true), retrying for up to `wait` while
/// another connection still holds it; true when claimed.
fn claim_within(claimed: &AtomicBool, wait: Duration) -> bool {
    let deadline = std::time::Instant::now() + wait;
    loop {
        if !claimed.swap(true, AcqRel) {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits up to `wait` for `claimed` to be let go (without claiming it);
/// true when it is free.
fn released_within(claimed: &AtomicBool, wait: Duration) -> bool {
    let deadline = std::time::Instant::now() + wait;
    loop {
        if !claimed.load(Acquire) {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// One client, from accept to the end of its connection.
fn serve_conn(hub: &HubInner, pending: &Pending) {
    let slot = Slot(hub, pending.serial);
    let conn = &pending.conn;
    let (result, asked) = handshake(hub, pending);
    if pending.state.load(Acquire) == DISPLACED {
        // Counted and logged when it was displaced.
        return;
    }
    let setup = match result {
        Ok(s) => s,
        Err(e) => {
            drop(slot);
            return failed(hub, pending, asked, e);
        }
    };
    let Some(shared) = claim(hub, conn, setup.id, slot) else {
        return;
    };
    let _claim = Claim(&shared);
    let Some((connection, slots)) = open_connection(&shared, conn, setup) else {
        return;
    };
    connected(&shared, &connection, slots);
    let watch = connection.clone();
    shared.publish(Some(connection));
    let why = watch_client(&shared, conn, &watch);
    drop(watch);
    shared.publish(None);
    disconnected(&shared, why);
}

/// Runs the handshake of `pending` from HELLO to CONNECT within the
/// timeouts, marking it as having spoken at its first message. Also
/// returns the interface id the client asked for, if it got that far, to
/// count a refusal on that port.
fn handshake(
    hub: &HubInner,
    pending: &Pending,
) -> (Result<Setup<OwnedFd>, HandshakeError>, Option<u32>) {
    let hello_name = concat!("nfvswitch ", env!("CARGO_PKG_VERSION"));
    // The id the client asked for, to count a refusal on that port.
    let asked = std::cell::Cell::new(None);
    let offer = |id| {
        asked.set(Some(id));
        hub.member(id).map(|s| Offer {
            secret: s.cfg.secret(),
            // As in `claim`: a client refused or closed a moment ago may
            // still hold the interface while its thread winds down (a
            // loaded machine once took longer than the client needed to
            // reconnect and reach INIT), so wait for it to go before
            // saying "Already connected".
            taken: !released_within(&s.claimed, RECLAIM_WAIT),
        })
    };
    let timeouts = Timeouts {
        first_message: FIRST_MESSAGE_TIMEOUT,
        handshake: HANDSHAKE_TIMEOUT,
    };
    let spoke = || {
        // Fails only if the accept thread displaced it first.
        let _ = pending
            .state
            .compare_exchange(SILENT, SPOKE, AcqRel, Acquire);
    };
    let result = serve::until_connect_timed(
        &pending.conn,
        hub.limits(),
        hello_name,
        offer,
        timeouts,
        spoke,
    );
    (result, asked.get())
}

/// Claims the port with interface `id` for the client on `conn`, waiting
/// up to [`RECLAIM_WAIT`] for a previous connection to let go, and gives
/// the handshake slot back. `None` (the client told why) when there is
/// no such port or it stays claimed.
fn claim(hub: &HubInner, conn: &Conn, id: u32, slot: Slot<'_>) -> Option<Arc<Shared<Connection>>> {
    let Some(shared) = hub.member(id) else {
        let _ = conn.send(&disconnect("ID not found"), None);
        return None;
    };
    // Still holding the handshake slot, so waiters stay bounded by the
    // slots (see [`RECLAIM_WAIT`]).
    let won = claim_within(&shared.claimed, RECLAIM_WAIT);
    // The handshake is over: another may start.
    drop(slot);
    if !won {
        // Counted before the client hears it, so whoever sees the
        // disconnect also sees the count.
        refuse(&shared, "a second client refused: already connected".into());
        let _ = conn.send(&disconnect("Already connected"), None);
        return None;
    }
    Some(shared)
}

/// Checks the client's rings against the port, maps its memory and
/// answers CONNECTED: the connection and its ring size in slots, or
/// `None` when the client was refused (counted on the port, told why) or
/// left.
fn open_connection(
    shared: &Shared<Connection>,
    conn: &Conn,
    setup: Setup<OwnedFd>,
) -> Option<(Arc<Connection>, usize)> {
    if setup.c2s.len() > shared.cfg.queues || setup.s2c.len() > shared.cfg.queues {
        refuse(
            shared,
            format!(
                "client refused: {} rings each way, the port takes {}",
                setup.c2s.len().max(setup.s2c.len()),
                shared.cfg.queues
            ),
        );
        let _ = conn.send(&disconnect("Invalid ring index"), None);
        return None;
    }
    let slots = setup.c2s.first().map_or(0, |r| 1usize << r.log2_size);
    let connection = match Connection::open(setup, shared.cfg.max_shared_memory) {
        Ok(c) => Arc::new(c),
        Err(Refused {
            kind,
            reason,
            detail,
        }) => {
            refuse_as(shared, kind, format!("client refused: {detail}"));
            let _ = conn.send(&disconnect(&reason), None);
            return None;
        }
    };
    if let Err(e) = serve::confirm(conn, &shared.name) {
        refuse(shared, format!("client gone before CONNECTED: {e}"));
        return None;
    }
    Some((connection, slots))
}

/// Records a connection that came up (`show ports`) and logs it.
fn connected(shared: &Common, connection: &Connection, slots: usize) {
    {
        let mut st = lock(&shared.status);
        st.connected = true;
        st.connects += 1;
        st.peer = format!("{} ({})", connection.peer_if_name, connection.peer_name);
        st.rings = (connection.rx.len(), connection.tx.len());
        st.ring_slots = slots;
        st.shared_memory = connection.mapped();
    }
    shared.event(
        false,
        format!(
            "client {} connected: {} c2s and {} s2c rings, {} MiB of shared memory mapped",
            connection.peer_name,
            connection.rx.len(),
            connection.tx.len(),
            connection.mapped() >> 20
        ),
    );
}

/// Records a connection that ended, and why, and logs it.
fn disconnected(shared: &Common, why: String) {
    {
        let mut st = lock(&shared.status);
        st.connected = false;
        st.disconnects += 1;
        // Unmapped (and given back to the node's budget) when the last
        // queue lets go, at its next burst.
        st.shared_memory = 0;
    }
    shared.event(false, format!("disconnected: {why}"));
}

/// A handshake that did not reach CONNECT: counted (timeouts, by kind)
/// and recorded on the port it asked for
/// (`asked`, if it got that far) or logged for the socket, rate-limited,
/// all before the client hears why.
fn failed(hub: &HubInner, pending: &Pending, asked: Option<u32>, e: HandshakeError) {
    let tell = match &e {
        HandshakeError::Silent(_) => {
            hub.counters.silent_dropped.fetch_add(1, Relaxed);
            Some(disconnect("Timeout"))
        }
        HandshakeError::Timeout(_) => {
            hub.counters.handshake_timeouts.fetch_add(1, Relaxed);
            Some(disconnect("Timeout"))
        }
        e => e.refusal_message(),
    };
    let kind = match &e {
        HandshakeError::TooManyRegions { .. } => RefusedKind::Memory,
        _ => RefusedKind::Other,
    };
    let why = match e {
        HandshakeError::PeerLeft(r) => format!("client left during the handshake: {r}"),
        e => format!("client (uid {}) {e}", pending.uid),
    };
    match asked.and_then(|id| hub.member(id)) {
        Some(p) => refuse_as(&p, kind, why),
        None => {
            hub.log.warn("handshake", || why);
        }
    }
    // The client may be gone already: the refusal stands.
    if let Some(m) = tell {
        let _ = pending.conn.send(&m, None);
    }
}

fn refuse(shared: &Common, why: String) {
    refuse_as(shared, RefusedKind::Other, why);
}

/// Counts a refusal (`refused`, and by `kind`) and logs it rate-limited
/// under a reason of its own.
fn refuse_as(shared: &Common, kind: RefusedKind, why: String) {
    let reason = {
        let mut st = lock(&shared.status);
        st.refused += 1;
        match kind {
            RefusedKind::Memory => {
                st.memory_refused += 1;
                "memory_refused"
            }
            RefusedKind::UnmappableFd => {
                st.unmappable_fd += 1;
                "unmappable_fd"
            }
            RefusedKind::Other => "refused",
        }
    };
    shared.refusal(reason, why);
}

/// Watches a connected client until the connection ends; returns why.
fn watch_client(shared: &Common, conn: &Conn, c: &Connection) -> String {
    let mut buf = [0u8; 256];
    loop {
        if shared.stop.load(Acquire) {
            let _ = conn.send(&disconnect("Interface deleted"), None);
            return "the port was removed".into();
        }
        if c.mem.faulted() {
            let _ = conn.send(&disconnect("Shared memory fault"), None);
            return "its shared memory faulted (a region file shrank under us)".into();
        }
        match conn.recv(&mut buf, TICK) {
            Ok(Received::Nothing) => {}
            Ok(Received::Eof) => return "the client closed the socket".into(),
            Err(e) => return format!("socket error: {e}"),
            Ok(Received::Msg { len, .. }) => {
                return match MsgRepr::parse(&buf[..len.min(buf.len())]) {
                    Ok(MsgRepr::Disconnect { reason, .. }) => format!(
                        "the client disconnected: {}",
                        String::from_utf8_lossy(reason.as_bytes())
                    ),
                    _ => {
                        let _ = conn.send(&disconnect("Unexpected message"), None);
                        "the client sent an unexpected message".into()
                    }
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(uid: u32, silent: bool) -> SlotView {
        SlotView { uid, silent }
    }

    #[test]
    fn admission_by_uid_share_then_socket() {
        let (max, per) = (4, 2);
        let talking = |uid| v(uid, false);
        let silent = |uid| v(uid, true);
        // (case, slots oldest first, newcomer's uid, admission)
        let cases = [
            ("empty", vec![], 1, Admission::Take),
            ("below both limits", vec![talking(1)], 1, Admission::Take),
            (
                "uid share full of talkers",
                vec![talking(1), talking(1)],
                1,
                Admission::Refuse(Full::Uid),
            ),
            (
                "uid share full: its oldest silent one goes",
                vec![talking(1), silent(2), silent(1), silent(1)],
                1,
                Admission::Displace(2),
            ),
            (
                "another uid is not displaced for a full share",
                vec![silent(2), talking(1), talking(1)],
                1,
                Admission::Refuse(Full::Uid),
            ),
            (
                "socket full: the oldest silent one of any uid goes",
                vec![talking(1), talking(2), silent(3), silent(4)],
                5,
                Admission::Displace(2),
            ),
            (
                "socket full of talkers",
                vec![talking(1), talking(2), talking(3), talking(4)],
                5,
                Admission::Refuse(Full::Busy),
            ),
            (
                "a free slot is taken before anything is displaced",
                vec![silent(1), silent(2), silent(3)],
                4,
                Admission::Take,
            ),
        ];
        for (case, slots, uid, want) in cases {
            assert_eq!(admit(&slots, uid, max, per), want, "{case}");
        }
    }
}
