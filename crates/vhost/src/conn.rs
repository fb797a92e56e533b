//! The protocol thread of a port: accepts (server mode) or makes (client
//! mode) connections and serves vhost-user messages on them, one at a
//! time. Blocking socket I/O is fine here: no PMD ever waits for it.
//!
//! * Server: we listen on the socket path (a stale socket file is
//!   replaced, anything else there is an error at open); after a
//!   disconnect the next connection is accepted.
//! * Client: we connect, retrying every [`RETRY`] while the peer is absent;
//!   after a disconnect (VNF stopped or restarted) we reconnect the same way.
//!
//! Whatever ends a connection, the rings stop and the memory table is
//! forgotten ([`Backend::reset`]), so the datapath sees the queues go down.

use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::sync::atomic::Ordering::*;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use nfv_ports::config::VhostUserMode;
use vhost::vhost_user::{BackendListener, BackendReqHandler, Error, Listener};

use crate::VhostError;
use crate::backend::Backend;
use crate::shared::{Shared, Status};

/// Client mode: pause between connection attempts.
pub const RETRY: Duration = Duration::from_secs(1);
/// Server mode: how often a non-blocking accept is retried (and the stop
/// flag checked).
const ACCEPT_POLL: Duration = Duration::from_millis(20);

type Handler = BackendReqHandler<Mutex<Backend>>;

fn lock(b: &Mutex<Backend>) -> MutexGuard<'_, Backend> {
    b.lock().unwrap_or_else(|p| p.into_inner())
}

/// Binds the server socket (at open, so that errors reach the caller).
pub(crate) fn bind(path: &Path) -> Result<Listener, VhostError> {
    let err = |e: String| VhostError::Socket {
        path: path.to_path_buf(),
        err: e,
    };
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => {
            // A socket left by an earlier run; Listener::new unlinks it.
        }
        Ok(_) => return Err(err("exists and is not a socket".into())),
        Err(_) => {}
    }
    let l = Listener::new(path, true).map_err(|e| err(e.to_string()))?;
    l.set_nonblocking(true).map_err(|e| err(e.to_string()))?;
    Ok(l)
}

/// Runs until `shared.stop` is set.
pub(crate) fn run(shared: Arc<Shared>, mut listener: Option<Listener>) {
    let backend = Arc::new(Mutex::new(Backend::new(shared.clone())));
    match shared.cfg.mode {
        VhostUserMode::Server => {
            if let Some(l) = listener.as_mut() {
                server(&shared, &backend, l);
            }
            let _ = std::fs::remove_file(&shared.cfg.socket);
        }
        VhostUserMode::Client => client(&shared, &backend),
    }
    lock(&backend).reset();
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

fn server(shared: &Arc<Shared>, backend: &Arc<Mutex<Backend>>, listener: &mut Listener) {
    tracing::info!(
        "vhost-user port {}: listening on {}",
        shared.name,
        shared.cfg.socket.display()
    );
    while !stopped(shared) {
        let accepted = BackendListener::new(listener, backend.clone()).and_then(|mut l| l.accept());
        match accepted {
            Ok(Some(h)) => serve(shared, backend, h),
            Ok(None) => {
                pause(shared, ACCEPT_POLL);
            }
            Err(e) => {
                tracing::warn!("vhost-user port {}: accept failed: {e}", shared.name);
                pause(shared, RETRY);
            }
        }
    }
}

fn client(shared: &Arc<Shared>, backend: &Arc<Mutex<Backend>>) {
    let path = shared.cfg.socket.to_string_lossy().into_owned();
    let mut waiting_logged = false;
    while !stopped(shared) {
        match Handler::connect(&path, backend.clone()) {
            Ok(h) => {
                waiting_logged = false;
                serve(shared, backend, h);
                // Reconnect at once (the VNF may already be back), then
                // every RETRY.
            }
            Err(e) => {
                if !waiting_logged {
                    tracing::info!(
                        "vhost-user port {}: waiting for {} ({e}); retrying every {:?}",
                        shared.name,
                        path,
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
fn serve(shared: &Arc<Shared>, backend: &Arc<Mutex<Backend>>, mut h: Handler) {
    let st = &shared.status;
    if let Ok(s) = h.try_clone_connection() {
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
    // A stop requested before the connection was registered.
    while !stopped(shared) {
        let res = h.handle_request();
        let fatal = lock(backend).take_fatal();
        match (res, fatal) {
            (Ok(()), None) => {}
            (_, Some(_)) => break, // already counted and logged
            // Refused by our handler: answered, counted, logged.
            (Err(Error::ReqHandlerError(_)), None) => {}
            (Err(Error::Disconnected | Error::PartialMessage), None) => {
                tracing::info!("vhost-user port {}: frontend disconnected", shared.name);
                break;
            }
            (Err(Error::SocketBroken(e) | Error::SocketError(e)), None) => {
                if !stopped(shared) {
                    tracing::info!("vhost-user port {}: connection lost: {e}", shared.name);
                }
                break;
            }
            (Err(e), None) => {
                // A malformed or unexpected message: the stream may be out
                // of step, so the connection ends.
                Status::bump(&st.protocol_errors);
                let msg = format!("protocol error: {e}; closing the connection");
                tracing::warn!("vhost-user port {}: {msg}", shared.name);
                st.set_error(msg);
                break;
            }
        }
    }
    *shared.conn() = None;
    st.connected.store(false, Release);
    Status::bump(&st.disconnects);
    lock(backend).reset();
}
