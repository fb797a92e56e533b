//! The server role's sockets: one listening socket per path, shared by
//! every memif port (server role) configured on it, each serving one
//! interface id — as VPP and DPDK let several interfaces share a socket
//! (`id=` tells them apart).
//!
//! A [`Hub`] per path accepts connections on its own thread and hands
//! each to a thread of its own (at most [`MAX_HANDSHAKES`] at once, so a
//! crowd of stalled clients cannot pile up threads) that runs the
//! handshake with a deadline, finds the port by INIT's id, claims it
//! (a second client for the same id is told "Already connected"), maps
//! the memory, answers CONNECTED, publishes the connection to the port's
//! queues and watches the socket until the connection ends.
//!
//! Ports join when they open and leave when they are dropped; the last
//! one out stops the hub (joining its thread before the path may be
//! bound again) and the socket file goes with its listener.

use crate::connection::Connection;
use crate::handshake::{Limits, Offer};
use crate::port::{Common, OpenError, Shared, disconnect, lock};
use crate::serve::{self, HandshakeError};
use crate::socket::{Conn, Listener, Received, SocketPath};
use nfv_wire::memif::{self, MsgRepr};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long a client has from accept to CONNECT.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// How often threads look at their stop flags and the memory.
const TICK: Duration = Duration::from_millis(100);
/// Regions a client may add: DPDK uses 1 (copy) or 2 (zero-copy client),
/// VPP one per buffer pool; each takes a slot of the SIGBUS guard's table.
const MAX_REGIONS: u16 = 16;
/// Handshakes in progress on one socket; more clients wait in the
/// listen backlog... and are refused once accepted past this.
pub const MAX_HANDSHAKES: usize = 8;

/// What the accept thread and the connection threads share.
struct HubInner {
    path: SocketPath,
    members: Mutex<HashMap<u32, Weak<Shared<Connection>>>>,
    stop: AtomicBool,
    handshakes: AtomicUsize,
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
        handshakes: AtomicUsize::new(0),
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

impl HubInner {
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
    while !hub.stop.load(Acquire) {
        match listener.accept(TICK) {
            Ok(Some(conn)) => {
                if hub.handshakes.fetch_add(1, AcqRel) >= MAX_HANDSHAKES {
                    hub.handshakes.fetch_sub(1, AcqRel);
                    let _ = conn.send(&disconnect("Too many connections"), None);
                    tracing::warn!(
                        "memif socket {}: a client refused, {MAX_HANDSHAKES} handshakes \
                         already in progress",
                        hub.path
                    );
                    continue;
                }
                let h = hub.clone();
                let spawned = std::thread::Builder::new()
                    .name("memif-conn".into())
                    .spawn(move || serve_conn(&h, conn));
                if spawned.is_err() {
                    hub.handshakes.fetch_sub(1, AcqRel);
                }
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!("memif socket {}: accept failed: {e}", hub.path);
                std::thread::sleep(TICK);
            }
        }
    }
}

/// Releases a port's claim when the connection thread is done with it.
struct Claim<'a>(&'a Shared<Connection>);

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.0.claimed.store(false, Release);
    }
}

/// One client, from accept to the end of its connection.
fn serve_conn(hub: &HubInner, conn: Conn) {
    let hello_name = concat!("nfvswitch ", env!("CARGO_PKG_VERSION"));
    // The id the client asked for, to count a refusal on that port.
    let asked = std::cell::Cell::new(None);
    let offer = |id| {
        asked.set(Some(id));
        hub.member(id).map(|s| Offer {
            secret: s.cfg.secret(),
            taken: s.claimed.load(Acquire),
        })
    };
    let result = serve::until_connect(&conn, hub.limits(), hello_name, offer, HANDSHAKE_TIMEOUT);
    // The handshake is over: another may start.
    hub.handshakes.fetch_sub(1, AcqRel);
    let port = asked.get().and_then(|id| hub.member(id));
    let setup = match result {
        Ok(s) => s,
        Err(e) => {
            let why = match e {
                HandshakeError::PeerLeft(r) => format!("client left during the handshake: {r}"),
                e => format!("client {e}"),
            };
            match port {
                Some(p) => refuse(&p, why),
                None => tracing::warn!("memif socket {}: {why}", hub.path),
            }
            return;
        }
    };
    let Some(shared) = hub.member(setup.id) else {
        let _ = conn.send(&disconnect("ID not found"), None);
        return;
    };
    if shared.claimed.swap(true, AcqRel) {
        // Counted before the client hears it, so whoever sees the
        // disconnect also sees the count.
        refuse(&shared, "a second client refused: already connected".into());
        let _ = conn.send(&disconnect("Already connected"), None);
        return;
    }
    let _claim = Claim(&shared);
    if setup.c2s.len() > shared.cfg.queues || setup.s2c.len() > shared.cfg.queues {
        refuse(
            &shared,
            format!(
                "client refused: {} rings each way, the port takes {}",
                setup.c2s.len().max(setup.s2c.len()),
                shared.cfg.queues
            ),
        );
        let _ = conn.send(&disconnect("Invalid ring index"), None);
        return;
    }
    let slots = setup.c2s.first().map_or(0, |r| 1usize << r.log2_size);
    let connection = match Connection::open(setup) {
        Ok(c) => Arc::new(c),
        Err(reason) => {
            refuse(&shared, format!("client refused: {reason}"));
            let _ = conn.send(&disconnect(reason), None);
            return;
        }
    };
    if let Err(e) = serve::confirm(&conn, &shared.name) {
        return refuse(&shared, format!("client gone before CONNECTED: {e}"));
    }
    {
        let mut st = lock(&shared.status);
        st.connected = true;
        st.connects += 1;
        st.peer = format!("{} ({})", connection.peer_if_name, connection.peer_name);
        st.rings = (connection.rx.len(), connection.tx.len());
        st.ring_slots = slots;
    }
    shared.event(
        false,
        format!(
            "client {} connected: {} c2s and {} s2c rings",
            connection.peer_name,
            connection.rx.len(),
            connection.tx.len()
        ),
    );
    let watch = connection.clone();
    shared.publish(Some(connection));
    let why = watch_client(&shared, &conn, &watch);
    drop(watch);
    shared.publish(None);
    {
        let mut st = lock(&shared.status);
        st.connected = false;
        st.disconnects += 1;
    }
    shared.event(false, format!("disconnected: {why}"));
}

fn refuse(shared: &Common, why: String) {
    lock(&shared.status).refused += 1;
    shared.event(true, why);
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
