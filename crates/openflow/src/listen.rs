//! Where controllers connect: passive listeners (`punix:PATH`,
//! `ptcp:PORT[:IP]`), a thread per connection reading requests and one
//! writing what goes back.
//!
//! `punix:` sockets are bound with `nfv_settings::unix_socket` (never
//! taking a path over, removed only while still ours) and mode 0600:
//! only the switch's own user can program it through them. `ptcp:`
//! listens on loopback only: OpenFlow has no credential of its own, so
//! a plain TCP listener would let anyone who reaches the port rewrite
//! the flow table; `ptcp:` on another address is refused at config time.
//! `pssl:` and `ssl:` (`crate::tls`) take any address: the peer's
//! certificate, signed by the configured CA, is the credential.
//!
//! A connection that stays silent is probed with an `ECHO_REQUEST` after
//! [`PROBE_AFTER`] and closed when the probe goes unanswered as long.

use crate::agent::Agent;
use crate::session::Session;
use crate::tls::{TlsConfig, TlsStream};
use crate::wire::{HEADER_LEN, Header};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Idle time before an echo probe, and before closing after one.
pub const PROBE_AFTER: Duration = Duration::from_secs(5);
/// The longest a started message (or header) may take to arrive whole.
pub const MESSAGE_TIME: Duration = Duration::from_secs(30);
/// Connections at once, over all listeners: more are closed at accept.
pub const MAX_CONNECTIONS: usize = 64;
/// Messages queued for one connection's writer.
const QUEUE: usize = 1024;

/// How to close each open connection (when the listeners stop), by a
/// number of its own; a connection removes its entry when it ends.
type Closers = Arc<Mutex<(u64, std::collections::BTreeMap<u64, Box<dyn Fn() + Send>>)>>;

/// A listener as the config names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    Unix(PathBuf),
    Tcp(SocketAddr),
    /// `pssl:PORT[:IP]`: TLS, any address (default all).
    Ssl(SocketAddr),
}

impl Target {
    pub fn is_tls(&self) -> bool {
        matches!(self, Target::Ssl(_))
    }
}

/// `PORT[:IP]` of a `ptcp:`/`pssl:` listener.
fn port_and_ip(s: &str, rest: &str, default_ip: &str) -> Result<SocketAddr, String> {
    let (port, ip) = match rest.split_once(':') {
        Some((p, ip)) => (p, ip.trim_start_matches('[').trim_end_matches(']')),
        None => (rest, default_ip),
    };
    let port: u16 = port
        .parse()
        .map_err(|_| format!("\"{s}\": PORT[:IP] needs a port number"))?;
    let ip: std::net::IpAddr = ip
        .parse()
        .map_err(|_| format!("\"{s}\": \"{ip}\" is not an IP address"))?;
    Ok(SocketAddr::new(ip, port))
}

/// Parses `punix:PATH`, `ptcp:PORT[:IP]` (IP defaults to 127.0.0.1;
/// only loopback addresses are taken, see the module doc) or
/// `pssl:PORT[:IP]` (IP defaults to every address).
pub fn parse_target(s: &str) -> Result<Target, String> {
    if let Some(rest) = s.strip_prefix("pssl:") {
        return Ok(Target::Ssl(port_and_ip(s, rest, "0.0.0.0")?));
    }
    if let Some(path) = s.strip_prefix("punix:") {
        if path.is_empty() || !path.starts_with('/') {
            return Err(format!("\"{s}\": punix: needs an absolute path"));
        }
        return Ok(Target::Unix(PathBuf::from(path)));
    }
    if let Some(rest) = s.strip_prefix("ptcp:") {
        let addr = port_and_ip(s, rest, "127.0.0.1")?;
        if !addr.ip().is_loopback() {
            return Err(format!(
                "\"{s}\": ptcp: listens on loopback only (OpenFlow over plain TCP has no \
                 credential); use pssl: elsewhere"
            ));
        }
        return Ok(Target::Tcp(addr));
    }
    Err(format!(
        "\"{s}\": a listener is punix:PATH, ptcp:PORT[:IP] or pssl:PORT[:IP] \
         (controllers the switch connects to go in `controllers`)"
    ))
}

/// The running listeners; dropping them stops accepting, closes every
/// connection and removes the `punix:` socket files.
pub struct Listeners {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    /// Where each listener ended up (a `ptcp:0` gets a port).
    pub bound: Vec<String>,
    _sockets: Vec<nfv_settings::unix_socket::BoundSocket>,
    conns: Closers,
}

enum Listener {
    Unix(UnixListener),
    Tcp(TcpListener),
    Ssl(TcpListener, Arc<TlsConfig>),
}

/// Starts a listener for each target; `pssl:` ones need `tls`.
pub fn start(
    agent: Arc<Agent>,
    targets: &[Target],
    tls: Option<Arc<TlsConfig>>,
) -> io::Result<Listeners> {
    let stop = Arc::new(AtomicBool::new(false));
    let active = Arc::new(AtomicUsize::new(0));
    let conns: Closers = Arc::default();
    let mut out = Listeners {
        stop: stop.clone(),
        threads: Vec::new(),
        bound: Vec::new(),
        _sockets: Vec::new(),
        conns: conns.clone(),
    };
    let (pump_agent, pump_stop) = (agent.clone(), stop.clone());
    out.threads.push(
        std::thread::Builder::new()
            .name("openflow-pktin".into())
            .spawn(move || pump(&pump_agent, &pump_stop))?,
    );
    for t in targets {
        let l = bind(t, tls.as_ref(), &mut out)?;
        let (agent, stop, active, conns) =
            (agent.clone(), stop.clone(), active.clone(), conns.clone());
        out.threads.push(
            std::thread::Builder::new()
                .name("openflow-listen".into())
                .spawn(move || accept_loop(l, agent, stop, active, conns))?,
        );
    }
    Ok(out)
}

/// The agent's own thread: packet-ins from the queues to the
/// controllers, polled, not woken (a PMD queueing a packet-in makes no
/// system call, `nfv_datapath::controller`); port liveness looked at
/// twice a second.
fn pump(agent: &Agent, stop: &AtomicBool) {
    let mut live = std::collections::BTreeMap::new();
    agent.watch_ports(&mut live);
    let mut next_look = std::time::Instant::now();
    while !stop.load(Relaxed) {
        if agent.pump_packet_ins() == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        if std::time::Instant::now() >= next_look {
            agent.watch_ports(&mut live);
            next_look = std::time::Instant::now() + Duration::from_millis(500);
        }
    }
    agent.switch.set_packet_in_listening(false);
}

/// Binds one listener, recording where (and a `punix:` socket file) in
/// `out`.
fn bind(t: &Target, tls: Option<&Arc<TlsConfig>>, out: &mut Listeners) -> io::Result<Listener> {
    Ok(match t {
        Target::Unix(path) => {
            let access = nfv_settings::unix_socket::SocketAccess {
                mode: Some(0o600),
                ..Default::default()
            };
            let (l, bound) = nfv_settings::unix_socket::bind_exclusive(path, &access)
                .map_err(|e| io::Error::new(e.kind(), format!("punix:{}: {e}", path.display())))?;
            out._sockets.push(bound);
            out.bound.push(format!("punix:{}", path.display()));
            l.set_nonblocking(true)?;
            Listener::Unix(l)
        }
        Target::Tcp(addr) => {
            let l = TcpListener::bind(addr)
                .map_err(|e| io::Error::new(e.kind(), format!("ptcp:{addr}: {e}")))?;
            let a = l.local_addr()?;
            out.bound.push(format!("ptcp:{}:{}", a.port(), a.ip()));
            l.set_nonblocking(true)?;
            Listener::Tcp(l)
        }
        Target::Ssl(addr) => {
            let tls = tls.cloned().ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("pssl:{addr}: no [openflow] ssl_* key, certificate and CA"),
                )
            })?;
            let l = TcpListener::bind(addr)
                .map_err(|e| io::Error::new(e.kind(), format!("pssl:{addr}: {e}")))?;
            let a = l.local_addr()?;
            out.bound.push(format!("pssl:{}:{}", a.port(), a.ip()));
            l.set_nonblocking(true)?;
            Listener::Ssl(l, tls)
        }
    })
}

fn accept_loop(
    l: Listener,
    agent: Arc<Agent>,
    stop: Arc<AtomicBool>,
    active: Arc<AtomicUsize>,
    conns: Closers,
) {
    while !stop.load(Relaxed) {
        let accepted: io::Result<(Box<dyn Conn>, String)> = match &l {
            Listener::Unix(l) => l
                .accept()
                .map(|(s, _)| (Box::new(s) as Box<dyn Conn>, "unix".to_string())),
            Listener::Tcp(l) => l
                .accept()
                .map(|(s, a)| (Box::new(s) as Box<dyn Conn>, a.to_string())),
            Listener::Ssl(l, tls) => l.accept().and_then(|(s, a)| {
                s.set_nonblocking(false)?;
                let t = TlsStream::server(s, tls)?;
                Ok((Box::new(t) as Box<dyn Conn>, format!("ssl:{a}")))
            }),
        };
        match accepted {
            Ok((conn, peer)) => {
                if active.load(Relaxed) >= MAX_CONNECTIONS {
                    tracing::warn!("OpenFlow: {MAX_CONNECTIONS} connections open; {peer} refused");
                    continue;
                }
                if let Err(e) = serve(conn, peer, &agent, &active, &conns) {
                    tracing::warn!("OpenFlow: connection not served: {e}");
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => {
                tracing::warn!("OpenFlow: accept: {e}");
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
}

/// A connected stream of either kind.
trait Conn: Read + Write + Send {
    fn clone_box(&self) -> io::Result<Box<dyn Conn>>;
    fn set_timeout(&self, t: Option<Duration>) -> io::Result<()>;
    fn shutdown_both(&self);
    fn blocking(&self) -> io::Result<()>;
}

impl Conn for std::os::unix::net::UnixStream {
    fn clone_box(&self) -> io::Result<Box<dyn Conn>> {
        Ok(Box::new(self.try_clone()?))
    }
    fn set_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.set_read_timeout(t)
    }
    fn shutdown_both(&self) {
        let _ = self.shutdown(std::net::Shutdown::Both);
    }
    fn blocking(&self) -> io::Result<()> {
        self.set_nonblocking(false)
    }
}

impl Conn for TlsStream {
    fn clone_box(&self) -> io::Result<Box<dyn Conn>> {
        Ok(Box::new(self.try_clone()?))
    }
    fn set_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.socket().set_read_timeout(t)
    }
    fn shutdown_both(&self) {
        let _ = self.socket().shutdown(std::net::Shutdown::Both);
    }
    fn blocking(&self) -> io::Result<()> {
        self.socket().blocking()
    }
}

impl Conn for std::net::TcpStream {
    fn clone_box(&self) -> io::Result<Box<dyn Conn>> {
        Ok(Box::new(self.try_clone()?))
    }
    fn set_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.set_read_timeout(t)
    }
    fn shutdown_both(&self) {
        let _ = self.shutdown(std::net::Shutdown::Both);
    }
    fn blocking(&self) -> io::Result<()> {
        self.set_nodelay(true)?;
        // A peer that stops reading fails the writer, not holds it.
        self.set_write_timeout(Some(2 * PROBE_AFTER))?;
        self.set_nonblocking(false)
    }
}

/// Serves one connection on two threads; the handle is the reading
/// one's, which ends when the connection does.
fn serve(
    conn: Box<dyn Conn>,
    peer: String,
    agent: &Arc<Agent>,
    active: &Arc<AtomicUsize>,
    conns: &Closers,
) -> io::Result<JoinHandle<()>> {
    conn.blocking()?;
    conn.set_timeout(Some(PROBE_AFTER))?;
    let writer = conn.clone_box()?;
    let closer = conn.clone_box()?;
    let key = {
        let mut c = crate::agent::lock(conns);
        c.0 += 1;
        let key = c.0;
        c.1.insert(key, Box::new(move || closer.shutdown_both()));
        key
    };
    let (tx, rx) = sync_channel::<Vec<u8>>(QUEUE);
    let session = Session::new(agent.clone(), peer, tx.clone());
    active.fetch_add(1, Relaxed);
    std::thread::Builder::new()
        .name("openflow-tx".into())
        .spawn(move || write_loop(writer, rx))?;
    let active = active.clone();
    let conns = conns.clone();
    std::thread::Builder::new()
        .name("openflow-rx".into())
        .spawn(move || {
            read_loop(conn, session, tx);
            active.fetch_sub(1, Relaxed);
            crate::agent::lock(&conns).1.remove(&key);
        })
}

/// Writes what the session and the agent queued, everything waiting at
/// once (one system call for a run of packet-ins, not one each).
fn write_loop(w: Box<dyn Conn>, rx: Receiver<Vec<u8>>) {
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, w);
    'conn: while let Ok(m) = rx.recv() {
        if out.write_all(&m).is_err() {
            break;
        }
        while let Ok(m) = rx.try_recv() {
            if out.write_all(&m).is_err() {
                break 'conn;
            }
        }
        if out.flush().is_err() {
            break;
        }
    }
    out.get_ref().shutdown_both();
}

/// Reads until `buf` is full. A read that times out with nothing new
/// is idleness: the first sends an echo probe (`idle` returns false when
/// a probe went unanswered, or the probe could not be queued: give up).
/// Bytes a slow peer sends in pieces are kept, never dropped by a
/// timeout; but a piece of a message must complete within
/// [`MESSAGE_TIME`], so a peer dripping bytes cannot hold a connection.
/// Errors and end of stream are `false`.
fn read_full(r: &mut dyn Conn, buf: &mut [u8], idle: &mut dyn FnMut() -> bool) -> bool {
    let started = std::time::Instant::now();
    let mut got = 0;
    while got < buf.len() {
        if got > 0 && started.elapsed() > MESSAGE_TIME {
            tracing::info!("OpenFlow: a message took over {MESSAGE_TIME:?} to arrive; closing");
            return false;
        }
        match r.read(&mut buf[got..]) {
            Ok(0) => return false,
            Ok(n) => got += n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                if !idle() {
                    return false;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    true
}

fn read_loop(mut r: Box<dyn Conn>, mut session: Session, tx: std::sync::mpsc::SyncSender<Vec<u8>>) {
    if tx.send(Session::hello()).is_err() {
        return;
    }
    // Whether an echo probe is out since the peer last sent anything.
    let probe_sent = std::cell::Cell::new(false);
    let mut idle = || {
        if probe_sent.replace(true) {
            tracing::info!("OpenFlow: a controller stopped answering; closing");
            return false;
        }
        let probe = crate::wire::Writer::message(crate::wire::msg::ECHO_REQUEST, 0);
        tx.send(probe.finish()).is_ok()
    };
    let mut out = Vec::new();
    loop {
        let mut head = [0u8; HEADER_LEN];
        if !read_full(r.as_mut(), &mut head, &mut idle) {
            break;
        }
        probe_sent.set(false);
        let Some(h) = Header::parse(&head) else { break };
        let len = usize::from(h.length);
        if len < HEADER_LEN {
            // No way to find the next message: the stream is lost.
            break;
        }
        let mut m = vec![0u8; len];
        m[..HEADER_LEN].copy_from_slice(&head);
        if !read_full(r.as_mut(), &mut m[HEADER_LEN..], &mut idle) {
            break;
        }
        probe_sent.set(false);
        out.clear();
        let keep = session.handle(&m, &mut out);
        for reply in out.drain(..) {
            if tx.send(reply).is_err() {
                return;
            }
        }
        if !keep {
            break;
        }
    }
    r.shutdown_both();
}

impl Drop for Listeners {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        for close in crate::agent::lock(&self.conns).1.values() {
            close();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Where the switch connects to a controller (`tcp:IP[:PORT]`, port 6653
/// by default; `unix:PATH`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Controller {
    Tcp(SocketAddr),
    Unix(PathBuf),
    /// `ssl:IP[:PORT]`: TLS, any address.
    Ssl(SocketAddr),
}

impl Controller {
    pub fn is_tls(&self) -> bool {
        matches!(self, Controller::Ssl(_))
    }
}

/// What the switch does while no controller is connected (OVS's
/// `fail_mode`): `Secure` keeps its rules and adds none; `Standalone`
/// adds a table-miss rule doing `normal` (MAC learning), removed when a
/// controller connects again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FailMode {
    #[default]
    Secure,
    Standalone,
}

pub use crate::agent::FAIL_OPEN_COOKIE;

/// Parses `tcp:IP[:PORT]` or `unix:PATH` (loopback only for TCP, as
/// `ptcp:`).
pub fn parse_controller(s: &str) -> Result<Controller, String> {
    if let Some(path) = s.strip_prefix("unix:") {
        if !path.starts_with('/') {
            return Err(format!("\"{s}\": unix: needs an absolute path"));
        }
        return Ok(Controller::Unix(PathBuf::from(path)));
    }
    let (tls, rest) = match (s.strip_prefix("tcp:"), s.strip_prefix("ssl:")) {
        (Some(rest), _) => (false, rest),
        (_, Some(rest)) => (true, rest),
        _ => {
            return Err(format!(
                "\"{s}\": a controller is tcp:IP[:PORT], ssl:IP[:PORT] or unix:PATH"
            ));
        }
    };
    let (ip, port) = match rest.rsplit_once(':') {
        Some((ip, p)) if !ip.is_empty() && !rest.starts_with('[') || rest.contains("]:") => (
            ip.trim_start_matches('[').trim_end_matches(']'),
            p.parse::<u16>()
                .map_err(|_| format!("\"{s}\": \"{p}\" is not a port number"))?,
        ),
        _ => (rest.trim_start_matches('[').trim_end_matches(']'), 6653),
    };
    let ip: std::net::IpAddr = ip
        .parse()
        .map_err(|_| format!("\"{s}\": \"{ip}\" is not an IP address"))?;
    let addr = SocketAddr::new(ip, port);
    if tls {
        return Ok(Controller::Ssl(addr));
    }
    if !ip.is_loopback() {
        return Err(format!(
            "\"{s}\": tcp: connects to loopback only (OpenFlow over plain TCP has no \
             credential); use ssl: elsewhere"
        ));
    }
    Ok(Controller::Tcp(addr))
}

/// Reconnection backoff: 1 s, doubling to at most 8 s (OVS's
/// `max_backoff` default).
const BACKOFF_MIN: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(8);

impl Listeners {
    /// Connects to each controller and keeps reconnecting (with backoff)
    /// while the listeners run; `fail_mode` says what the switch does
    /// while none is connected.
    pub fn connect(
        &mut self,
        agent: &Arc<Agent>,
        controllers: &[Controller],
        fail_mode: FailMode,
        tls: Option<Arc<TlsConfig>>,
    ) -> io::Result<()> {
        if controllers.is_empty() {
            return Ok(());
        }
        if tls.is_none()
            && let Some(Controller::Ssl(a)) = controllers.iter().find(|c| c.is_tls())
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("ssl:{a}: no [openflow] ssl_* key, certificate and CA"),
            ));
        }
        let up = Arc::new(AtomicUsize::new(0));
        if fail_mode == FailMode::Standalone {
            agent.fail_open(true);
        }
        for c in controllers {
            let (agent, stop, conns, up, c, tls) = (
                agent.clone(),
                self.stop.clone(),
                self.conns.clone(),
                up.clone(),
                c.clone(),
                tls.clone(),
            );
            self.bound.push(match &c {
                Controller::Tcp(a) => format!("tcp:{a}"),
                Controller::Ssl(a) => format!("ssl:{a}"),
                Controller::Unix(p) => format!("unix:{}", p.display()),
            });
            let link = Link {
                agent,
                stop,
                conns,
                up,
                fail_mode,
                tls,
            };
            self.threads.push(
                std::thread::Builder::new()
                    .name("openflow-ctrl".into())
                    .spawn(move || link.keep_connected(&c))?,
            );
        }
        Ok(())
    }
}

/// What a connection to one controller needs.
struct Link {
    agent: Arc<Agent>,
    stop: Arc<AtomicBool>,
    conns: Closers,
    /// Controllers connected now (fail mode's test).
    up: Arc<AtomicUsize>,
    fail_mode: FailMode,
    tls: Option<Arc<TlsConfig>>,
}

impl Link {
    /// Connects to `c`, serves the connection until it ends, and again
    /// after a backoff, until the listeners stop.
    fn keep_connected(&self, c: &Controller) {
        let active = Arc::new(AtomicUsize::new(0));
        let standalone = self.fail_mode == FailMode::Standalone;
        let mut backoff = BACKOFF_MIN;
        while !self.stop.load(Relaxed) {
            if let Ok((conn, peer)) = self.dial(c)
                && let Ok(rx) = serve(conn, peer, &self.agent, &active, &self.conns)
            {
                if self.up.fetch_add(1, Relaxed) == 0 && standalone {
                    self.agent.fail_open(false);
                }
                backoff = BACKOFF_MIN;
                let _ = rx.join();
                if self.up.fetch_sub(1, Relaxed) == 1 && standalone && !self.stop.load(Relaxed) {
                    self.agent.fail_open(true);
                }
            }
            // Sleep the backoff in short steps, to stop promptly.
            let until = std::time::Instant::now() + backoff;
            while !self.stop.load(Relaxed) && std::time::Instant::now() < until {
                std::thread::sleep(Duration::from_millis(50));
            }
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
    }

    fn dial(&self, c: &Controller) -> io::Result<(Box<dyn Conn>, String)> {
        match c {
            Controller::Tcp(a) => std::net::TcpStream::connect_timeout(a, PROBE_AFTER)
                .map(|s| (Box::new(s) as Box<dyn Conn>, a.to_string())),
            Controller::Unix(p) => std::os::unix::net::UnixStream::connect(p)
                .map(|s| (Box::new(s) as Box<dyn Conn>, p.display().to_string())),
            Controller::Ssl(a) => {
                let s = std::net::TcpStream::connect_timeout(a, PROBE_AFTER)?;
                let cfg = self.tls.as_ref().ok_or_else(|| {
                    io::Error::new(io::ErrorKind::InvalidInput, "no TLS configuration")
                })?;
                let t = TlsStream::client(s, a.ip(), cfg)?;
                Ok((Box::new(t) as Box<dyn Conn>, format!("ssl:{a}")))
            }
        }
    }
}
