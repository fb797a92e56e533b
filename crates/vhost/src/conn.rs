//! The protocol thread of a port: accepts (server mode) or makes (client
//! mode) connections and serves vhost-user messages on them, one at a
//! time. Blocking socket I/O is fine here: no PMD ever waits for it.
//!
//! * Server: we listen on the socket path (a stale socket file is
//!   replaced; a socket another process listens on, a link or any other
//!   file is an error at open and left alone:
//!   [`nfv_settings::unix_socket`]); after a disconnect the next
//!   connection is accepted. When the port goes, the socket file is
//!   removed only if it is still the one we bound.
//! * Client: we connect, retrying every [`RETRY`] while the peer is absent.
//!   After a connection ends we wait before connecting again: [`RETRY`]
//!   after a connection that ran for [`STABLE`], doubling (up to
//!   [`MAX_BACKOFF`]) after each one that ended sooner. A peer that accepts
//!   and then refuses us (or that we refuse) therefore sees a few attempts
//!   a minute, not thousands a second, and each refusal is still counted.
//!
//! Whatever ends a connection, the rings stop and the memory table is
//! forgotten ([`Backend::reset`]), so the datapath sees the queues go down.

use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::Ordering::*;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::VhostUserMode;

use crate::VhostError;
use crate::backend::Backend;
use crate::channel::{Channel, RecvError};
use crate::dispatch::{self, Next};
use crate::message;
use crate::shared::{Shared, Status};
use nfv_settings::unix_socket::{self, BoundSocket, Removal, SocketAccess};

/// Client mode: pause between connection attempts while the peer is
/// absent, and after a connection that ended normally.
pub const RETRY: Duration = Duration::from_secs(1);
/// Client mode: the longest pause after connections that keep ending early.
pub const MAX_BACKOFF: Duration = Duration::from_secs(16);
/// A connection that lasted this long resets the backoff.
pub const STABLE: Duration = Duration::from_secs(10);
/// Server mode: how often a non-blocking accept is retried (and the stop
/// flag checked).
const ACCEPT_POLL: Duration = Duration::from_millis(20);

fn lock(b: &Mutex<Backend>) -> MutexGuard<'_, Backend> {
    b.lock().unwrap_or_else(|p| p.into_inner())
}

/// A server port's listening socket and the file it made.
pub(crate) struct ServerSocket {
    listener: UnixListener,
    bound: BoundSocket,
}

/// Binds the server socket (at open, so that errors reach the caller).
pub(crate) fn bind(path: &Path) -> Result<ServerSocket, VhostError> {
    let err = |e: std::io::Error| VhostError::Socket {
        path: path.to_path_buf(),
        err: e.to_string(),
    };
    let (listener, bound) =
        unix_socket::bind_exclusive(path, &SocketAccess::default()).map_err(err)?;
    listener.set_nonblocking(true).map_err(err)?;
    Ok(ServerSocket { listener, bound })
}

/// Runs until `shared.stop` is set.
pub(crate) fn run(shared: Arc<Shared>, socket: Option<ServerSocket>) {
    let backend = Mutex::new(Backend::new(shared.clone()));
    match shared.cfg.mode {
        VhostUserMode::Server => {
            if let Some(s) = socket {
                server(&shared, &backend, &s.listener);
                remove(&shared, s.bound);
            }
        }
        VhostUserMode::Client => client(&shared, &backend),
    }
    lock(&backend).reset();
}

/// Removes the socket file, if it is still ours.
fn remove(shared: &Shared, bound: BoundSocket) {
    let path = bound.path().display().to_string();
    match bound.remove() {
        Ok(Removal::Removed | Removal::Missing) => {}
        Ok(Removal::NotOurs) => tracing::info!(
            "vhost-user port {}: {path} is no longer the socket we bound; left in place",
            shared.name
        ),
        Err(e) => tracing::warn!("vhost-user port {}: cannot remove {path}: {e}", shared.name),
    }
}

fn stopped(shared: &Shared) -> bool {
    shared.stop.load(Acquire)
}

/// Sleeps `d` in small steps; returns false if asked to stop meanwhile.
fn pause(shared: &Shared, d: Duration) -> bool {
    let step = Duration::from_millis(20);
    let mut left = d;
    while !left.is_zero() {
        if stopped(shared) {
            return false;
        }
        let s = left.min(step);
        std::thread::sleep(s);
        left -= s;
    }
    !stopped(shared)
}

fn server(shared: &Arc<Shared>, backend: &Mutex<Backend>, listener: &UnixListener) {
    tracing::info!(
        "vhost-user port {}: listening on {}",
        shared.name,
        shared.cfg.socket.display()
    );
    while !stopped(shared) {
        match listener.accept() {
            Ok((s, _)) => {
                serve(shared, backend, s);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                pause(shared, ACCEPT_POLL);
            }
            Err(e) => {
                tracing::warn!("vhost-user port {}: accept failed: {e}", shared.name);
                pause(shared, RETRY);
            }
        }
    }
}

/// The pause before the next client connection after `early` connections
/// in a row that ended within [`STABLE`] (not counting the last one).
pub fn backoff(early: u32) -> Duration {
    RETRY.saturating_mul(1u32 << early.min(8)).min(MAX_BACKOFF)
}

/// Connects without ever blocking: a peer that listens but does not
/// accept (its backlog full) would otherwise hold this thread in
/// `connect(2)` — and with it port removal and switch shutdown, which
/// join the thread. A full backlog is an error like a missing socket;
/// the caller retries.
pub(crate) fn connect(path: &Path) -> std::io::Result<UnixStream> {
    use nix::sys::socket::{self, AddressFamily, SockFlag, SockType, UnixAddr};
    use std::os::fd::AsRawFd;
    let fd = socket::socket(
        AddressFamily::Unix,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        None,
    )?;
    match socket::connect(fd.as_raw_fd(), &UnixAddr::new(path)?) {
        Ok(()) => {}
        Err(nix::errno::Errno::EAGAIN) => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::WouldBlock,
                "the peer listens but does not accept connections (its backlog is full)",
            ));
        }
        Err(e) => return Err(e.into()),
    }
    let s = UnixStream::from(fd);
    s.set_nonblocking(false)?;
    Ok(s)
}

fn client(shared: &Arc<Shared>, backend: &Mutex<Backend>) {
    let path = &shared.cfg.socket;
    let mut waiting_logged = false;
    let mut early = 0u32;
    while !stopped(shared) {
        match connect(path) {
            Ok(s) => {
                waiting_logged = false;
                let started = Instant::now();
                serve(shared, backend, s);
                early = if started.elapsed() >= STABLE {
                    0
                } else {
                    early + 1
                };
                let wait = backoff(early.saturating_sub(1));
                if early > 1 {
                    tracing::info!(
                        "vhost-user port {}: {early} connections in a row ended within {:?}; next attempt in {:?}",
                        shared.name,
                        STABLE,
                        wait
                    );
                }
                pause(shared, wait);
            }
            Err(e) => {
                if !waiting_logged {
                    tracing::info!(
                        "vhost-user port {}: waiting for {} ({e}); retrying every {:?}",
                        shared.name,
                        path.display(),
                        RETRY
                    );
                    waiting_logged = true;
                }
                pause(shared, RETRY);
            }
        }
    }
}

/// Serves one connection until it ends.
fn serve(shared: &Arc<Shared>, backend: &Mutex<Backend>, stream: UnixStream) {
    let st = &shared.status;
    let mut ch = match Channel::new(stream) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(
                "vhost-user port {}: cannot use the connection: {e}",
                shared.name
            );
            return;
        }
    };
    if let Ok(s) = ch.try_clone() {
        *shared.conn() = Some(s);
    }
    lock(backend).reset();
    let n = st.connects.fetch_add(1, Relaxed) + 1;
    st.connected.store(true, Release);
    tracing::info!(
        "vhost-user port {}: {} on {} (connection {n})",
        shared.name,
        if shared.cfg.mode == VhostUserMode::Server {
            "frontend connected"
        } else {
            "connected"
        },
        shared.cfg.socket.display()
    );
    // A stop requested before the connection was registered ends it here.
    while !stopped(shared) {
        if let Some(reason) = serve_one(shared, backend, &mut ch) {
            if !stopped(shared) {
                tracing::info!("vhost-user port {}: {reason}", shared.name);
            }
            break;
        }
    }
    *shared.conn() = None;
    st.connected.store(false, Release);
    Status::bump(&st.disconnects);
    lock(backend).reset();
}

/// Reads, handles and answers one message. Returns why the connection
/// ended, if it did.
pub(crate) fn serve_one(
    shared: &Shared,
    backend: &Mutex<Backend>,
    ch: &mut Channel,
) -> Option<String> {
    let st = &shared.status;
    let raw = match ch.recv() {
        Ok(r) => r,
        Err(RecvError::Closed) => return Some("frontend disconnected".into()),
        Err(RecvError::Io(e)) => return Some(format!("connection lost: {e}")),
        Err(e) => {
            // The stream is out of step: nothing after this can be trusted.
            Status::bump(&st.protocol_errors);
            let msg = format!("protocol error: {e}; closing the connection");
            shared.warn_limited("protocol", msg.clone());
            return Some(msg);
        }
    };
    let h = raw.header;
    tracing::debug!(
        "vhost-user port {}: {} flags={:#x} size={} fds={}",
        shared.name,
        h.name(),
        h.flags,
        h.size,
        raw.fds.len()
    );
    let outcome = match message::decode(&h, &raw.payload, raw.fds) {
        Ok(req) => dispatch::handle(&mut lock(backend), &h, req),
        Err(e) => {
            Status::bump(&st.protocol_errors);
            shared.warn_limited("refused", format!("refused {}: {e}", h.name()));
            dispatch::undecodable(&h, &e)
        }
    };
    if let Some(bytes) = outcome.reply
        && let Err(e) = ch.send(&bytes)
    {
        return Some(format!("cannot send the {} reply: {e}", h.name()));
    }
    match outcome.next {
        Next::Continue => None,
        Next::Close(reason) => Some(reason),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let got: Vec<u64> = (0..7).map(|k| backoff(k).as_secs()).collect();
        assert_eq!(got, [1, 2, 4, 8, 16, 16, 16]);
        assert_eq!(backoff(u32::MAX), MAX_BACKOFF);
    }
}
