//! The unix control socket: one JSON request per line, one JSON response
//! per line, any number of requests per connection. PMD threads are never
//! involved except through `Node`'s typed operations.
//!
//! Who may connect, twice over:
//! * the socket file is mode 0660, owned by the switch's user and by
//!   `[node] group` when one is configured (else the switch's group), set
//!   before the socket can be reached ([`unix_socket::bind_exclusive`]
//!   binds it in a private directory and renames it into place): the
//!   kernel refuses everyone else's `connect(2)`;
//! * every accepted connection's `SO_PEERCRED` is checked ([`Access`]):
//!   root, the switch's own user, and members of the group. Others get one
//!   error line ("permission denied: ...") and are closed. This holds
//!   even if someone loosens the file's mode.
//!
//! How much it may cost: one accept thread hands connections to a fixed
//! pool of workers ([`ControlOptions::workers`]) through a bounded queue;
//! when the queue is full the new connection gets one error line ("busy")
//! and is closed — never a thread per client. A connection must send each
//! complete request line within [`ControlOptions::idle_timeout`] of being
//! accepted or answered (idle or slow, it is closed), its answers must be
//! taken within [`ControlOptions::write_timeout`], and a line longer than
//! [`ControlOptions::max_request`] is answered with an error and closed.
//! Refusals are counted ([`ServerStats`]) and logged at most once a second.
//!
//! Thread safety: [`ServerStats`] is atomics; the handler is shared by
//! the workers and must be `Sync` (`Node` is).

use crate::node::Node;
use crate::protocol::{Request, Response};
use crossbeam_channel::{Receiver, Sender, TrySendError};
use nfv_settings::unix_socket::{self, BoundSocket, Removal, SocketAccess};
use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Largest request line accepted (a big add-flows batch fits).
pub const MAX_REQUEST: usize = 16 << 20;
/// How often the accept thread looks at its stop flag.
const TICK: Duration = Duration::from_millis(100);

/// The server's limits and who may use it.
#[derive(Clone, Debug)]
pub struct ControlOptions {
    /// `[node] group`: its members may use the socket (an unknown group
    /// fails the start).
    pub group: Option<String>,
    /// Worker threads serving connections.
    pub workers: usize,
    /// Accepted connections waiting for a worker; more are refused.
    pub queue: usize,
    /// Longest wait for a whole request line after a connection is
    /// accepted or answered.
    pub idle_timeout: Duration,
    /// Longest wait for a client to take an answer.
    pub write_timeout: Duration,
    /// Longest request line.
    pub max_request: usize,
}

impl Default for ControlOptions {
    fn default() -> ControlOptions {
        ControlOptions {
            group: None,
            workers: 4,
            queue: 16,
            idle_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(10),
            max_request: MAX_REQUEST,
        }
    }
}

/// What the server refused or cut short, since it started.
#[derive(Debug, Default)]
pub struct ServerStats {
    /// Connections served by a worker.
    pub served: AtomicU64,
    /// Refused by `SO_PEERCRED` (or whose credentials could not be read).
    pub refused_peer: AtomicU64,
    /// Refused because every worker was busy and the queue full.
    pub refused_busy: AtomicU64,
    /// Closed for sending no complete line in time.
    pub timed_out: AtomicU64,
    /// Closed for a line longer than the limit.
    pub oversized: AtomicU64,
}

/// A connection's answer: what the node (or a test) says to a request.
pub type Handler = dyn Fn(&Request) -> Response + Send + Sync;

pub struct ControlServer {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
    stats: Arc<ServerStats>,
    bound: Option<BoundSocket>,
}

impl ControlServer {
    /// Binds `path` (replacing a stale socket file, never a live one) and
    /// serves `node` with the default limits; `group` is `[node] group`.
    pub fn start(path: &Path, node: Arc<Node>, group: Option<&str>) -> std::io::Result<Self> {
        let opts = ControlOptions {
            group: group.map(str::to_string),
            ..ControlOptions::default()
        };
        Self::start_with(path, Arc::new(move |r: &Request| node.handle(r)), &opts)
    }

    /// Binds `path` and answers requests with `handler`.
    pub fn start_with(
        path: &Path,
        handler: Arc<Handler>,
        opts: &ControlOptions,
    ) -> std::io::Result<ControlServer> {
        let access = Access::resolve(opts.group.as_deref())?;
        if let Some(dir) = path.parent()
            && !dir.as_os_str().is_empty()
        {
            std::fs::create_dir_all(dir)?;
        }
        let file = SocketAccess {
            mode: Some(0o660),
            uid: None,
            gid: access.group.as_ref().map(|g| g.gid),
        };
        let (listener, bound) = unix_socket::bind_exclusive(path, &file)?;
        listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(ServerStats::default());
        let (tx, rx) = crossbeam_channel::bounded(opts.queue.max(1));
        for k in 0..opts.workers.max(1) {
            let w = Worker {
                rx: rx.clone(),
                handler: handler.clone(),
                opts: opts.clone(),
                stats: stats.clone(),
            };
            std::thread::Builder::new()
                .name(format!("control-{k}"))
                .spawn(move || w.run())?;
        }
        let acceptor = Acceptor {
            listener,
            tx,
            access,
            stats: stats.clone(),
            stop: stop.clone(),
            log: RateLimited::default(),
        };
        let accept = std::thread::Builder::new()
            .name("control".into())
            .spawn(move || acceptor.run())?;
        Ok(ControlServer {
            path: path.to_path_buf(),
            stop,
            accept: Some(accept),
            stats,
            bound: Some(bound),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn stats(&self) -> &ServerStats {
        &self.stats
    }
}

impl Drop for ControlServer {
    /// Stops accepting (connections being served finish on their own) and
    /// removes the socket file if it is still ours.
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
        if let Some(b) = self.bound.take()
            && let Ok(Removal::NotOurs) = b.remove()
        {
            tracing::info!(
                "control socket {}: no longer the one we bound; left in place",
                self.path.display()
            );
        }
    }
}

/// Who may use the socket besides root and the switch's own user.
///
/// Group membership is read once, at start, from the group database
/// (`getgrnam`): a peer is a member when its primary gid (from
/// `SO_PEERCRED`) is the group's, or its user is listed in the group or
/// has it as its login group. Not from `/proc/<pid>/status`: the pid may
/// have exited and been reused between `connect` and the check, and
/// `hidepid` or another pid namespace may hide it. The kernel has already
/// checked the process's real supplementary groups against the socket
/// file's mode; this second check follows the configured accounts.
struct Access {
    euid: u32,
    group: Option<GroupPolicy>,
}

struct GroupPolicy {
    name: String,
    gid: u32,
    members: Vec<String>,
}

/// A connected peer, as `SO_PEERCRED` reports it.
#[derive(Clone, Copy, Debug)]
struct Peer {
    pid: i32,
    uid: u32,
    gid: u32,
}

impl Access {
    fn resolve(group: Option<&str>) -> std::io::Result<Access> {
        let euid = nix::unistd::geteuid().as_raw();
        let Some(name) = group else {
            return Ok(Access { euid, group: None });
        };
        let g = nix::unistd::Group::from_name(name)
            .map_err(|e| std::io::Error::other(format!("group {name:?}: {e}")))?
            .ok_or_else(|| {
                std::io::Error::new(
                    ErrorKind::NotFound,
                    format!("[node] group {name:?}: no such group"),
                )
            })?;
        Ok(Access {
            euid,
            group: Some(GroupPolicy {
                name: name.to_string(),
                gid: g.gid.as_raw(),
                members: g.mem,
            }),
        })
    }

    /// Whether `peer` may use the socket; `user` looks up a uid's name and
    /// login group (only asked when the cheap checks did not decide).
    fn admit(
        &self,
        peer: Peer,
        user: impl FnOnce(u32) -> Option<(String, u32)>,
    ) -> Result<(), String> {
        if peer.uid == 0 || peer.uid == self.euid {
            return Ok(());
        }
        let who = format!("uid {} (gid {}, pid {})", peer.uid, peer.gid, peer.pid);
        let Some(g) = &self.group else {
            return Err(format!(
                "permission denied: {who} is neither root nor the switch's user (uid {}); \
                 [node] group is not set",
                self.euid
            ));
        };
        if peer.gid == g.gid {
            return Ok(());
        }
        if let Some((name, login_gid)) = user(peer.uid)
            && (login_gid == g.gid || g.members.contains(&name))
        {
            return Ok(());
        }
        Err(format!(
            "permission denied: {who} is neither root, the switch's user (uid {}) nor a \
             member of group {:?}",
            self.euid, g.name
        ))
    }
}

fn user_of(uid: u32) -> Option<(String, u32)> {
    let u = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)).ok()??;
    Some((u.name, u.gid.as_raw()))
}

fn peer_of(s: &UnixStream) -> std::io::Result<Peer> {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    let c = getsockopt(s, PeerCredentials)?;
    Ok(Peer {
        pid: c.pid(),
        uid: c.uid(),
        gid: c.gid(),
    })
}

/// At most one log line a second; what it held back is counted in the next.
#[derive(Default)]
struct RateLimited {
    last: Option<Instant>,
    held: u64,
}

impl RateLimited {
    /// Logs `msg` unless a line went out within the last second; says
    /// whether it did.
    fn warn(&mut self, msg: impl FnOnce() -> String) -> bool {
        if self
            .last
            .is_some_and(|t| t.elapsed() < Duration::from_secs(1))
        {
            self.held += 1;
            return false;
        }
        let held = std::mem::take(&mut self.held);
        self.last = Some(Instant::now());
        if held > 0 {
            tracing::warn!("control socket: {} ({held} more not logged)", msg());
        } else {
            tracing::warn!("control socket: {}", msg());
        }
        true
    }
}

/// A connection waiting for a worker, with when it was accepted (its
/// first request is due within the idle timeout of that).
type Queued = (UnixStream, Instant);

struct Acceptor {
    listener: UnixListener,
    tx: Sender<Queued>,
    access: Access,
    stats: Arc<ServerStats>,
    stop: Arc<AtomicBool>,
    log: RateLimited,
}

impl Acceptor {
    fn run(mut self) {
        while !self.stop.load(Relaxed) {
            match self.listener.accept() {
                Ok((conn, _)) => self.admit(conn),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    wait_readable(&self.listener, TICK);
                }
                Err(e) => {
                    self.log.warn(|| format!("accept failed: {e}"));
                    std::thread::sleep(TICK);
                }
            }
        }
    }

    fn admit(&mut self, conn: UnixStream) {
        // Refusals are one short line into an empty socket buffer: they
        // never wait, but must never hold this thread either.
        let _ = conn.set_nonblocking(false);
        let _ = conn.set_write_timeout(Some(Duration::from_millis(100)));
        let verdict = peer_of(&conn)
            .map_err(|e| format!("permission denied: cannot read the peer's credentials: {e}"))
            .and_then(|p| self.access.admit(p, user_of));
        if let Err(why) = verdict {
            self.stats.refused_peer.fetch_add(1, Relaxed);
            self.log.warn(|| format!("refused a client: {why}"));
            refuse(conn, why);
            return;
        }
        match self.tx.try_send((conn, Instant::now())) {
            Ok(()) => {}
            Err(TrySendError::Full((conn, _))) => {
                self.stats.refused_busy.fetch_add(1, Relaxed);
                self.log.warn(|| {
                    "refused a client: busy (every worker serving, the queue full)".into()
                });
                refuse(conn, "busy: too many control connections; try again".into());
            }
            Err(TrySendError::Disconnected(_)) => {}
        }
    }
}

fn wait_readable(l: &UnixListener, timeout: Duration) {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    let ms = u16::try_from(timeout.as_millis()).unwrap_or(u16::MAX);
    let mut fds = [PollFd::new(l.as_fd(), PollFlags::POLLIN)];
    let _ = poll(&mut fds, PollTimeout::from(ms));
}

fn refuse(mut conn: UnixStream, message: String) {
    if let Ok(mut text) = serde_json::to_string(&Response::Error { message }) {
        text.push('\n');
        let _ = conn.write_all(text.as_bytes());
    }
}

struct Worker {
    rx: Receiver<Queued>,
    handler: Arc<Handler>,
    opts: ControlOptions,
    stats: Arc<ServerStats>,
}

/// Why a request line was not read.
enum LineEnd {
    /// The client closed (between requests or in the middle of one).
    Closed,
    /// No complete line before the deadline; `partial` if some came.
    TimedOut {
        partial: bool,
    },
    TooLong,
}

impl Worker {
    fn run(self) {
        let log = Mutex::new(RateLimited::default());
        for (conn, accepted) in self.rx.iter() {
            self.stats.served.fetch_add(1, Relaxed);
            if let Some(why) = self.serve(conn, accepted) {
                let mut l = log.lock().unwrap_or_else(|p| p.into_inner());
                l.warn(|| format!("closed a client: {why}"));
            }
        }
    }

    /// Serves one connection until it ends; says why if it was cut off.
    fn serve(&self, conn: UnixStream, accepted: Instant) -> Option<String> {
        let o = &self.opts;
        let Ok(write_half) = conn.try_clone() else {
            return None;
        };
        let _ = write_half.set_write_timeout(Some(o.write_timeout));
        let mut out = std::io::BufWriter::new(write_half);
        let mut reader = BufReader::new(conn);
        let mut line = Vec::new();
        let mut deadline = accepted + o.idle_timeout;
        loop {
            let resp = match read_line(&mut reader, &mut line, deadline, o.max_request) {
                Ok(()) => match serde_json::from_slice::<Request>(&line) {
                    Ok(req) => (self.handler)(&req),
                    Err(e) => error(format!("bad request: {e}")),
                },
                Err(LineEnd::Closed) => return None,
                Err(LineEnd::TimedOut { partial }) => {
                    self.stats.timed_out.fetch_add(1, Relaxed);
                    if !partial {
                        return None;
                    }
                    let msg = format!("request not complete within {:?}", o.idle_timeout);
                    let _ = send(&mut out, &error(msg.clone()));
                    return Some(msg);
                }
                Err(LineEnd::TooLong) => {
                    self.stats.oversized.fetch_add(1, Relaxed);
                    let msg = format!("request longer than {} bytes", o.max_request);
                    let _ = send(&mut out, &error(msg.clone()));
                    return Some(msg);
                }
            };
            if let Err(e) = send(&mut out, &resp) {
                return Some(format!("cannot send the answer: {e}"));
            }
            deadline = Instant::now() + o.idle_timeout;
        }
    }
}

fn error(message: String) -> Response {
    Response::Error { message }
}

fn send(out: &mut impl Write, resp: &Response) -> std::io::Result<()> {
    let mut text = serde_json::to_string(resp).map_err(std::io::Error::other)?;
    text.push('\n');
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// Reads one line (without its `\n`) into `line`, all of it before
/// `deadline` and at most `max` bytes long.
fn read_line(
    r: &mut BufReader<UnixStream>,
    line: &mut Vec<u8>,
    deadline: Instant,
    max: usize,
) -> Result<(), LineEnd> {
    line.clear();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let timed_out = LineEnd::TimedOut {
            partial: !line.is_empty(),
        };
        if left.is_zero() || r.get_ref().set_read_timeout(Some(left)).is_err() {
            return Err(timed_out);
        }
        let buf = match r.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Err(timed_out);
            }
            Err(_) => return Err(LineEnd::Closed),
        };
        if buf.is_empty() {
            return Err(LineEnd::Closed);
        }
        let (take, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        line.extend_from_slice(&buf[..take]);
        r.consume(take);
        if done {
            line.pop();
        }
        if line.len() > max {
            return Err(LineEnd::TooLong);
        }
        if done {
            return Ok(());
        }
    }
}

/// Client side: sends one request and waits for its response.
pub fn request(path: &Path, req: &Request) -> Result<Response, String> {
    let conn = UnixStream::connect(path).map_err(|e| {
        format!(
            "cannot reach nfvswitch at {}: {e} (is `nfvswitch run` running?)",
            path.display()
        )
    })?;
    let mut w = conn.try_clone().map_err(|e| e.to_string())?;
    let mut text = serde_json::to_string(req).map_err(|e| e.to_string())?;
    text.push('\n');
    // A refusal ("busy", "permission denied") may come, and the server
    // close, before the request is written: read it whatever the write
    // says.
    let sent = w.write_all(text.as_bytes());
    let mut line = String::new();
    let read = BufReader::new(conn).read_line(&mut line);
    match (sent, read) {
        (_, Ok(n)) if n > 0 => {
            serde_json::from_str(&line).map_err(|e| format!("bad response from switch: {e}"))
        }
        (Err(e), _) | (Ok(()), Err(e)) => Err(e.to_string()),
        (Ok(()), Ok(_)) => Err("the switch closed the connection without answering".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(uid: u32, gid: u32) -> Peer {
        Peer { pid: 1, uid, gid }
    }

    #[test]
    fn admission_by_uid_primary_gid_login_group_and_member_list() {
        let none = Access {
            euid: 500,
            group: None,
        };
        let grp = Access {
            euid: 500,
            group: Some(GroupPolicy {
                name: "nfv".into(),
                gid: 900,
                members: vec!["alice".into()],
            }),
        };
        let nobody = |_| Some(("nobody".to_string(), 65534));
        let alice = |_| Some(("alice".to_string(), 100));
        let bob_login_nfv = |_| Some(("bob".to_string(), 900));
        let unknown = |_| None;
        // (what, access, peer, user lookup, allowed)
        type Lookup = fn(u32) -> Option<(String, u32)>;
        let cases: [(&str, &Access, Peer, Lookup, bool); 10] = [
            ("root", &none, peer(0, 0), nobody, true),
            ("the switch's user", &none, peer(500, 7), nobody, true),
            (
                "anyone else, no group",
                &none,
                peer(65534, 65534),
                nobody,
                false,
            ),
            (
                "a member by name, no group set",
                &none,
                peer(1000, 100),
                alice,
                false,
            ),
            ("root, group set", &grp, peer(0, 0), unknown, true),
            (
                "primary gid is the group",
                &grp,
                peer(65534, 900),
                nobody,
                true,
            ),
            ("listed member", &grp, peer(1000, 100), alice, true),
            (
                "login group is the group",
                &grp,
                peer(1001, 100),
                bob_login_nfv,
                true,
            ),
            ("not a member", &grp, peer(65534, 65534), nobody, false),
            ("unknown uid", &grp, peer(4242, 4242), unknown, false),
        ];
        for (what, access, p, lookup, allowed) in cases {
            let got = access.admit(p, lookup);
            assert_eq!(got.is_ok(), allowed, "{what}: {got:?}");
            if let Err(e) = got {
                assert!(e.starts_with("permission denied: uid "), "{what}: {e}");
            }
        }
    }

    #[test]
    fn an_unknown_group_fails_the_start() {
        let e = Access::resolve(Some("nfv-no-such-group-xyz"))
            .err()
            .unwrap();
        assert!(e.to_string().contains("no such group"), "{e}");
    }

    #[test]
    fn refusals_are_logged_at_most_once_a_second() {
        let mut l = RateLimited::default();
        let logged = (0..100).filter(|_| l.warn(String::new)).count();
        assert_eq!(logged, 1);
        assert_eq!(l.held, 99);
    }
}
