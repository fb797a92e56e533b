//! A memif port in the server role: the socket, the control thread that
//! serves one client at a time, and what it shares with the PMD queues.
//!
//! * The control thread accepts a client, runs the handshake with a
//!   deadline ([`crate::serve`]), maps its regions and checks its rings
//!   ([`Connection::open`]), answers CONNECTED and *publishes* the
//!   connection: stores it and bumps [`Shared::generation`], which every
//!   queue compares once per burst. It then watches the socket: a
//!   DISCONNECT, EOF or any other message from the client, a memory fault,
//!   or the port being removed ends the connection (published as none).
//! * A second client while one is connected is told "Already connected"
//!   at once (no handshake is held open for it).
//! * A refused or failed client costs a counter and a reason in
//!   `show ports`; the port keeps listening.

use crate::connection::Connection;
use crate::handshake::{Limits, Offer};
use crate::queue::{COUNTER_NAMES, Counters, MemifRxq, MemifTxq};
use crate::serve::{self, HandshakeError};
use crate::settings::MemifConfig;
use crate::socket::{Conn, Listener, Received};
use nfv_ports::{Port, PortGauges, RxQueue, TxQueue};
use nfv_wire::memif::{self, MsgRepr, Reason};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long a client has from accept to CONNECT.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// How often the control thread looks at the stop flag and the memory.
const TICK: Duration = Duration::from_millis(100);
/// Regions a client may add: DPDK uses 1 (copy) or 2 (zero-copy client),
/// VPP one per buffer pool; each takes a slot of the SIGBUS guard's table.
const MAX_REGIONS: u16 = 16;

/// Why the port opened no socket.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot listen on memif socket {socket}: {err}")]
    Listen { socket: String, err: std::io::Error },
    #[error("cannot start its control thread: {0}")]
    Spawn(std::io::Error),
}

/// What the control thread and the queues share.
pub(crate) struct Shared {
    name: String,
    cfg: MemifConfig,
    generation: AtomicU64,
    current: Mutex<Option<Arc<Connection>>>,
    stop: AtomicBool,
    /// Every queue's counters (queues register when they open).
    counters: Mutex<Vec<Arc<Counters>>>,
    status: Mutex<Status>,
}

/// What the control thread reports (`show ports`).
#[derive(Debug, Default, Clone)]
struct Status {
    connected: bool,
    connects: u64,
    disconnects: u64,
    /// Clients refused (handshake refusals, bad rings, timeouts).
    refused: u64,
    /// The last client that connected: its INIT name and interface name.
    peer: String,
    rings: (usize, usize),
    ring_slots: usize,
    /// Why the last connection ended or the last client was refused.
    last_event: String,
}

impl Shared {
    #[inline(always)]
    pub fn generation(&self) -> u64 {
        self.generation.load(Acquire)
    }

    /// The connection now (slow path: on a generation change).
    pub fn current(&self) -> Option<Arc<Connection>> {
        lock(&self.current).clone()
    }

    pub fn register_counters(&self) -> Arc<Counters> {
        let c = Arc::new(Counters::default());
        lock(&self.counters).push(c.clone());
        c
    }

    fn publish(&self, conn: Option<Arc<Connection>>) {
        *lock(&self.current) = conn;
        self.generation.fetch_add(1, Release);
    }

    fn offer(&self, id: u32) -> Option<Offer> {
        (id == self.cfg.id).then(|| Offer {
            secret: self.cfg.secret(),
            taken: false,
        })
    }

    fn limits(&self) -> Limits {
        Limits {
            max_regions: MAX_REGIONS,
            max_rings: self.cfg.queues as u16,
            max_log2_ring: memif::ring::MAX_LOG2_SIZE,
        }
    }

    /// Records what happened for `show ports` and logs it (`warn`: a
    /// refused client or a fault; `info`: connects and disconnects).
    fn event(&self, warn: bool, what: String) {
        if warn {
            tracing::warn!("memif port {}: {what}", self.name);
        } else {
            tracing::info!("memif port {}: {what}", self.name);
        }
        lock(&self.status).last_event = what;
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A memif port, server role.
pub struct MemifPort {
    shared: Arc<Shared>,
    max_frame: usize,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl MemifPort {
    /// Listens on the configured socket and starts the control thread.
    pub fn open(
        name: &str,
        cfg: &MemifConfig,
        max_frame: usize,
    ) -> Result<Arc<MemifPort>, OpenError> {
        let path = cfg.socket_path();
        let listener = Listener::bind(&path).map_err(|err| OpenError::Listen {
            socket: path.to_string(),
            err,
        })?;
        let shared = Arc::new(Shared {
            name: name.to_string(),
            cfg: cfg.clone(),
            generation: AtomicU64::new(0),
            current: Mutex::new(None),
            stop: AtomicBool::new(false),
            counters: Mutex::new(Vec::new()),
            status: Mutex::new(Status::default()),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("memif-{name}"))
            .spawn(move || run(&s, &listener))
            .map_err(OpenError::Spawn)?;
        Ok(Arc::new(MemifPort {
            shared,
            max_frame,
            thread: Mutex::new(Some(thread)),
        }))
    }

    pub fn config(&self) -> &MemifConfig {
        &self.shared.cfg
    }

    /// A queue counter ([`COUNTER_NAMES`]) summed over the queues.
    pub fn counter(&self, name: &str) -> u64 {
        let Some(i) = COUNTER_NAMES.iter().position(|n| *n == name) else {
            return 0;
        };
        lock(&self.shared.counters)
            .iter()
            .map(|c| c.load()[i])
            .sum()
    }

    pub fn is_connected(&self) -> bool {
        lock(&self.shared.status).connected
    }
}

impl Drop for MemifPort {
    fn drop(&mut self) {
        self.shared.stop.store(true, Release);
        if let Some(t) = lock(&self.thread).take() {
            let _ = t.join();
        }
    }
}

impl Port for MemifPort {
    fn name(&self) -> &str {
        &self.shared.name
    }
    fn type_name(&self) -> &'static str {
        "memif"
    }
    fn n_rxq(&self) -> usize {
        self.shared.cfg.queues
    }
    fn open_rxq(&self, q: usize) -> Box<dyn RxQueue> {
        Box::new(MemifRxq::new(self.shared.clone(), q))
    }
    fn open_txq(&self, q: usize) -> Box<dyn TxQueue> {
        Box::new(MemifTxq::new(self.shared.clone(), q, self.max_frame))
    }
    fn gauges(&self) -> PortGauges {
        let st = lock(&self.shared.status).clone();
        let cfg = &self.shared.cfg;
        let mut g = PortGauges {
            connected: Some(st.connected),
            ..PortGauges::default()
        }
        .with("role", "server")
        .with("socket", cfg.socket.display().to_string())
        .with("id", u64::from(cfg.id))
        .with("peer", st.peer)
        .with(
            "rings",
            format!(
                "{} c2s, {} s2c of {} allowed, {} slots",
                st.rings.0, st.rings.1, cfg.queues, st.ring_slots
            ),
        )
        .with("reconnects", st.connects.saturating_sub(1))
        .with("disconnects", st.disconnects)
        .with("refused", st.refused)
        .with("last_event", st.last_event);
        for name in COUNTER_NAMES {
            g.push(name, self.counter(name));
        }
        g
    }
}

/// The control thread: one client at a time until the port is dropped.
fn run(shared: &Shared, listener: &Listener) {
    while !shared.stop.load(Acquire) {
        match listener.accept(TICK) {
            Ok(Some(conn)) => serve_client(shared, listener, conn),
            Ok(None) => {}
            Err(e) => {
                shared.event(true, format!("accept failed: {e}"));
                std::thread::sleep(TICK);
            }
        }
    }
}

fn refuse(shared: &Shared, why: String) {
    lock(&shared.status).refused += 1;
    shared.event(true, why);
}

fn serve_client(shared: &Shared, listener: &Listener, conn: Conn) {
    let hello_name = concat!("nfvswitch ", env!("CARGO_PKG_VERSION"));
    let setup = match serve::until_connect(
        &conn,
        shared.limits(),
        hello_name,
        |id| shared.offer(id),
        HANDSHAKE_TIMEOUT,
    ) {
        Ok(s) => s,
        Err(HandshakeError::PeerLeft(r)) => {
            return refuse(shared, format!("client left during the handshake: {r}"));
        }
        Err(e) => return refuse(shared, format!("client {e}")),
    };
    let slots = setup.c2s.first().map_or(0, |r| 1usize << r.log2_size);
    let connection = match Connection::open(setup) {
        Ok(c) => Arc::new(c),
        Err(reason) => {
            let _ = conn.send(&disconnect(reason), None);
            return refuse(shared, format!("client refused: {reason}"));
        }
    };
    if let Err(e) = serve::confirm(&conn, &shared.name) {
        return refuse(shared, format!("client gone before CONNECTED: {e}"));
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
    let why = watch_client(shared, listener, &conn, &watch);
    drop(watch);
    shared.publish(None);
    {
        let mut st = lock(&shared.status);
        st.connected = false;
        st.disconnects += 1;
    }
    shared.event(false, format!("disconnected: {why}"));
}

fn disconnect(reason: &str) -> MsgRepr {
    MsgRepr::Disconnect {
        code: 0,
        reason: Reason::new(reason.as_bytes()),
    }
}

/// Watches a connected client until the connection ends; returns why.
fn watch_client(shared: &Shared, listener: &Listener, conn: &Conn, c: &Connection) -> String {
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
        if let Some(other) = poll_listener(listener) {
            let _ = other.send(&disconnect("Already connected"), None);
            refuse(shared, "a second client refused: already connected".into());
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

/// A client waiting on the listener, if any (never waits).
fn poll_listener(listener: &Listener) -> Option<Conn> {
    listener.accept(Duration::ZERO).ok().flatten()
}
