//! The `memif` port: its type ([`MEMIF`], registered in
//! `nfv-port-types`) and [`MemifPort`]: opening it (server role: join the
//! hub of its socket, `crate::hub`; client role: start the port's own
//! thread, [`run_client`]), closing it (drop: stop, leave the hub, join
//! the thread), its queues and its gauges.

use crate::client::{Client, ClientConfig, ClientRings};
use crate::connection::Connection;
use crate::hub::{self, HANDSHAKE_TIMEOUT, HUB_COUNTER_NAMES, Hub};
use crate::rx::{ClientRxq, MemifRxq};
use crate::settings::{self, MemifConfig, MemifRole};
use crate::shared::{COUNTER_NAMES, Common, OpenError, Shared, Status, disconnect, lock};
use crate::tx::{ClientTxq, MemifTxq};
use nfv_ports::config::{PortConfig, PortKind};
use nfv_ports::{OpenContext, Port, PortGauges, PortOpenError, PortType, RxQueue, TxQueue};
use nfv_settings::{PortTable, SettingError};
use nfv_vhost::RateLimitedLog;
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// The `memif` port type, listed in `nfv-port-types`.
pub static MEMIF: MemifType = MemifType;

pub struct MemifType;

impl PortType for MemifType {
    fn name(&self) -> &'static str {
        "memif"
    }
    fn keys(&self) -> &'static [&'static str] {
        settings::KEYS
    }
    fn parse(&self, t: &PortTable<'_>) -> Result<PortKind, SettingError> {
        Ok(PortKind::typed(settings::parse(t)?))
    }
    fn open(&self, cfg: &PortConfig, cx: &OpenContext<'_>) -> Result<Arc<dyn Port>, PortOpenError> {
        let Some(m) = cfg.kind.settings::<MemifConfig>() else {
            return Err(PortOpenError::unavailable(format!(
                "port {}: not a memif port",
                cfg.name
            )));
        };
        let port: Arc<dyn Port> = MemifPort::open(&cfg.name, m, cx.max_frame())
            .map_err(|e| PortOpenError::unavailable(format!("port {}: {e}", cfg.name)))?;
        Ok(port)
    }
}

/// How often the client role's thread looks at its connection.
const TICK: Duration = Duration::from_millis(100);

/// The port's shared state, by role.
enum Role {
    Server(Arc<Shared<Connection>>),
    Client(Arc<Shared<ClientRings>>),
}

/// A memif port, in the server or the client role.
pub struct MemifPort {
    role: Role,
    max_frame: usize,
    /// The client role's thread.
    thread: Mutex<Option<JoinHandle<()>>>,
    /// The server role's socket.
    hub: Option<Arc<Hub>>,
}

impl MemifPort {
    /// Listens on the configured socket (server role) or starts
    /// connecting to it (client role) from the port's control thread.
    pub fn open(
        name: &str,
        cfg: &MemifConfig,
        max_frame: usize,
    ) -> Result<Arc<MemifPort>, OpenError> {
        let common = Common {
            name: name.to_string(),
            cfg: cfg.clone(),
            stop: AtomicBool::new(false),
            claimed: AtomicBool::new(false),
            counters: Mutex::new(Vec::new()),
            status: Mutex::new(Status::default()),
            log: RateLimitedLog::new(format!("memif port {name}")),
        };
        let spawn = |f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(format!("memif-{name}"))
                .spawn(f)
                .map_err(OpenError::Spawn)
        };
        let (role, thread, hub) = match cfg.role {
            MemifRole::Server => {
                let shared = Arc::new(Shared::new(common));
                let hub = hub::join(&cfg.socket_path(), cfg.id, &shared)?;
                (Role::Server(shared), None, Some(hub))
            }
            MemifRole::Client => {
                let shared = Arc::new(Shared::new(common));
                let s = shared.clone();
                let t = spawn(Box::new(move || run_client(&s)))?;
                (Role::Client(shared), Some(t), None)
            }
        };
        Ok(Arc::new(MemifPort {
            role,
            max_frame,
            thread: Mutex::new(thread),
            hub,
        }))
    }

    fn common(&self) -> &Common {
        match &self.role {
            Role::Server(s) => s,
            Role::Client(s) => s,
        }
    }

    pub fn config(&self) -> &MemifConfig {
        &self.common().cfg
    }

    /// A queue counter ([`COUNTER_NAMES`]) summed over the queues, or
    /// one of the socket's (server role, `socket_*`: see `crate::hub`).
    pub fn counter(&self, name: &str) -> u64 {
        if let Some(i) = HUB_COUNTER_NAMES.iter().position(|n| *n == name) {
            return self.hub.as_ref().map_or(0, |h| h.counters()[i]);
        }
        let Some(i) = COUNTER_NAMES.iter().position(|n| *n == name) else {
            return 0;
        };
        lock(&self.common().counters)
            .iter()
            .map(|c| c.load()[i])
            .sum()
    }

    pub fn is_connected(&self) -> bool {
        lock(&self.common().status).connected
    }
}

impl Drop for MemifPort {
    fn drop(&mut self) {
        // A connection thread (server role) sees this within a tick, says
        // "Interface deleted" and unpublishes.
        self.common().stop.store(true, Release);
        if let Some(hub) = &self.hub {
            hub.leave(self.common().cfg.id);
        }
        if let Some(t) = lock(&self.thread).take() {
            let _ = t.join();
        }
    }
}

impl Port for MemifPort {
    fn name(&self) -> &str {
        &self.common().name
    }
    fn type_name(&self) -> &'static str {
        "memif"
    }
    fn n_rxq(&self) -> usize {
        self.common().cfg.queues
    }
    fn open_rxq(&self, q: usize) -> Box<dyn RxQueue> {
        match &self.role {
            Role::Server(s) => Box::new(MemifRxq::new(s.clone(), q, s.cfg.one_copy)),
            Role::Client(s) => Box::new(ClientRxq::new(s.clone(), q, s.cfg.one_copy)),
        }
    }
    fn open_txq(&self, q: usize) -> Box<dyn TxQueue> {
        match &self.role {
            Role::Server(s) => Box::new(MemifTxq::new(s.clone(), q, self.max_frame)),
            Role::Client(s) => Box::new(ClientTxq::new(s.clone(), q, self.max_frame)),
        }
    }
    fn gauges(&self) -> PortGauges {
        let st = lock(&self.common().status).clone();
        let cfg = &self.common().cfg;
        let mut g = PortGauges {
            connected: Some(st.connected),
            ..PortGauges::default()
        }
        .with("role", cfg.role.as_str())
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
        .with("memory_refused", st.memory_refused)
        .with("unmappable_fd", st.unmappable_fd)
        .with("shared_memory_mib", st.shared_memory >> 20)
        .with("last_event", st.last_event);
        for name in COUNTER_NAMES {
            g.push(name, self.counter(name));
        }
        if let Some(hub) = &self.hub {
            for (name, n) in HUB_COUNTER_NAMES.iter().zip(hub.counters()) {
                g.push(name, n);
            }
        }
        g
    }
}

/// How often the client role tries again to reach its server.
const RETRY: Duration = Duration::from_secs(1);

/// The control thread of the client role: connect (again and again while
/// the server is absent or after it left), serve the connection, repeat.
fn run_client(shared: &Shared<ClientRings>) {
    let cfg = &shared.cfg;
    let client_cfg = ClientConfig {
        id: cfg.id,
        secret: cfg.secret.clone(),
        if_name: shared.name.clone(),
        queues: cfg.queues as u16,
        log2_ring: cfg.ring_size.trailing_zeros() as u8,
        buffer_size: cfg.buffer_size,
        ..ClientConfig::new(cfg.socket_path())
    };
    let mut last_failure = String::new();
    while !shared.stop.load(Acquire) {
        let client = match Client::connect(&client_cfg, HANDSHAKE_TIMEOUT) {
            Ok(c) => c,
            Err(e) => {
                // Logged once per kind of failure, not every second.
                let why = format!("cannot connect: {e}");
                if why != last_failure {
                    shared.event(false, why.clone());
                    last_failure = why;
                }
                sleep_unless(&shared.stop, RETRY);
                continue;
            }
        };
        last_failure.clear();
        let rings = client.rings().clone();
        {
            let mut st = lock(&shared.status);
            st.connected = true;
            st.connects += 1;
            st.peer = format!("{} ({})", client.server_if_name, client.server_name);
            st.rings = (rings.queues(), rings.queues());
            st.ring_slots = cfg.ring_size;
        }
        shared.event(
            false,
            format!(
                "connected to {} ({}): {} queue pair(s)",
                client.server_if_name,
                client.server_name,
                rings.queues()
            ),
        );
        shared.publish(Some(rings));
        let why = loop {
            if shared.stop.load(Acquire) {
                let _ = client
                    .raw()
                    .conn()
                    .send(&disconnect("Interface deleted"), None);
                break "the port was removed".to_string();
            }
            if let Some(why) = client.disconnected() {
                break if why.is_empty() {
                    "the server closed the socket".to_string()
                } else {
                    format!("the server disconnected: {why}")
                };
            }
            std::thread::sleep(TICK);
        };
        shared.publish(None);
        {
            let mut st = lock(&shared.status);
            st.connected = false;
            st.disconnects += 1;
        }
        shared.event(false, format!("disconnected: {why}"));
        // The queues let go of the rings at their next burst; the memory
        // goes with the last of them.
        drop(client);
        sleep_unless(&shared.stop, TICK);
    }
}

fn sleep_unless(stop: &AtomicBool, d: Duration) {
    let end = std::time::Instant::now() + d;
    while !stop.load(Acquire) && std::time::Instant::now() < end {
        std::thread::sleep(Duration::from_millis(10));
    }
}
