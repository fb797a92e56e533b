//! The node's HTTP face: a JSON REST API over [`nfv_control::Node`]
//! (everything `nfvswitch ctl` does, plus rate time series), Prometheus
//! metrics at `/metrics`, and the dashboard's embedded files at `/`.
//!
//! | method | path | what |
//! |---|---|---|
//! | GET | `/api/v1` | this list |
//! | GET | `/api/v1/node` | name, version, uptime, PMDs, memory, API address |
//! | GET | `/api/v1/ports` | ports: counters, drops by reason, rates, queues |
//! | POST | `/api/v1/ports` | add a port: body = inline TOML table (`name="s2",id=3,type="sink"`), or JSON `{"port": "..."}` |
//! | DELETE | `/api/v1/ports/{name or number}` | delete a port |
//! | GET | `/api/v1/pmd` | PMD threads: Mpps, busy %, cycles/packet, cache hits |
//! | GET | `/api/v1/chains` | service chains: per-VNF and per-chain rates |
//! | GET | `/api/v1/traffic` | receiver ports: loss, reordering, latency per stream |
//! | GET | `/api/v1/flows[?filter=F]` | rules with hit counters (with `F`: those `DELETE` with it would remove) |
//! | GET | `/api/v1/trace?flow=PACKET[&ct_next=FLAGS;FLAGS...]` | what the datapath does with a packet given by its fields (`ctl trace`; `ct_next`: its `--ct-next` states, `;`-separated) |
//! | POST | `/api/v1/flows` | add rules (all or nothing): body = one rule per line (`#` comments), or JSON `["...", ...]` / `{"flows": [...]}` |
//! | DELETE | `/api/v1/flows?filter=F` | delete rules matching `F`; `filter=` (empty) deletes every rule, no `filter` is refused |
//! | POST | `/api/v1/stats/clear` | zero PMD and receiver counters |
//! | GET | `/api/v1/timeseries?seconds=N` | the last N (default and at most 300) one-second rate samples |
//! | GET | `/api/v1/demo` | during `nfvswitch demo`: the run shown now and the finished runs ([`DemoStatus`]); 404 otherwise |
//! | GET | `/metrics` | Prometheus text exposition (0.0.4; OpenMetrics when the `Accept` header asks for it) |
//! | GET | `/`, `/app.js`, `/style.css` | the dashboard |
//!
//! Every refusal is a 4xx status with `{"error": "..."}` and leaves the
//! node unchanged (the node validates a whole request before applying it).
//!
//! Access ([`guard`]): every route checks `Host` (421 for a name that is
//! not the node's: DNS rebinding), `Origin` and `Sec-Fetch-Site` (403 for
//! a page elsewhere), and a bearer token (401) for every change, and for
//! reads too unless they are open (`[node] api_open_reads`, default: on a
//! loopback bind). The token lives in `[node] api_token_file` ([`token`]),
//! made at the first start. The API binds loopback only: a bind elsewhere
//! is refused at start (there is no TLS in this build, and a token sent
//! in clear over a network is no credential). What a token holder may add
//! over the API is limited further by the node (`nfv_control::access`).
//!
//! The node served can be replaced while the server runs
//! ([`ApiServer::replace_node`]): the demo starts a new node for every run
//! and the dashboard at the same address follows it.
//!
//! Threads: the server runs on a current-thread tokio runtime on its own
//! thread (`api`), with at most two more threads for control operations
//! (which may touch files and sockets). Connections are tasks, at most
//! [`bounded::MAX_CONNECTIONS`] at once, each closed when idle or too slow
//! ([`bounded`]). None of them is a PMD thread and
//! none is pinned: they inherit the affinity of the thread that calls
//! [`ApiServer::start`] (the daemon's main thread, which is not pinned).

mod assets;
mod attachments;
pub mod bounded;
pub mod guard;
mod handler;
mod metrics;
mod routes;
mod served;
pub mod token;

pub use served::{DemoPhase, DemoResult, DemoRun, DemoStatus};

use nfv_control::Node;
use served::Served;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How long a stop waits for open requests before closing them.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// A running API server. Stopped by [`ApiServer::stop`] or on drop.
pub struct ApiServer {
    addr: SocketAddr,
    token: String,
    connections: Arc<bounded::ListenerStats>,
    served: Arc<Served>,
    stop: tokio::sync::watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
}

impl ApiServer {
    /// Binds `addr` (port 0: any free port) and serves `node` from a
    /// thread of its own. Binding happens before this returns, so an
    /// address in use is an error here, and the bound address is
    /// recorded in the node (`show node`, `GET /api/v1/node`).
    pub fn start(addr: SocketAddr, node: Arc<Node>) -> std::io::Result<ApiServer> {
        ApiServer::serve(TcpListener::bind(addr)?, node)
    }

    /// Serves `node` on a listener bound earlier (`nfvswitch demo` binds
    /// and prints its address before its first node exists; browsers that
    /// connect meanwhile wait in the listen backlog).
    ///
    /// The token is read from the node's token file, which is made when
    /// missing; a listener outside loopback is refused (module doc).
    pub fn serve(listener: TcpListener, node: Arc<Node>) -> std::io::Result<ApiServer> {
        let bound = listener.local_addr()?;
        if !bound.ip().is_loopback() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "{bound} is not a loopback address: the API would send its token in clear \
                     (no TLS in this build); bind 127.0.0.1 or [::1] and reach it through an \
                     SSH tunnel or a TLS proxy"
                ),
            ));
        }
        let token_file = node.api_token_file().to_path_buf();
        let token = token::load_or_create(&token_file)
            .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", token_file.display())))?;
        let guard = Arc::new(guard::Guard::new(token.clone(), bound, node.access()));
        listener.set_nonblocking(true)?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .max_blocking_threads(2)
            .thread_name("api")
            .build()?;
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let served = Arc::new(Served::new(node.clone()));
        let app = routes::router(served.clone(), guard);
        let connections = Arc::new(bounded::ListenerStats::default());
        let thread = std::thread::Builder::new().name("api".into()).spawn({
            let stats = connections.clone();
            move || rt.block_on(serve(listener, stats, app, stopped))
        })?;
        node.set_api_addr(Some(bound));
        tracing::info!("REST API token in {}", token_file.display());
        Ok(ApiServer {
            addr: bound,
            token,
            connections,
            served,
            stop,
            thread: Some(thread),
        })
    }

    /// The address actually bound.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connections the limits closed ([`bounded`]).
    pub fn connection_stats(&self) -> &bounded::ListenerStats {
        &self.connections
    }

    /// The bearer token changes need (`Authorization: Bearer TOKEN`).
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Serves `node` from now on (requests in flight finish on the node
    /// they started with); the API address moves to the new node's
    /// `show node`.
    pub fn replace_node(&self, node: Arc<Node>) {
        node.set_api_addr(Some(self.addr));
        let old = self.served.set_node(node);
        old.set_api_addr(None);
    }

    /// Publishes the demo's progress at `GET /api/v1/demo` (`None`: 404,
    /// not a demo).
    pub fn set_demo(&self, status: Option<DemoStatus>) {
        self.served.set_demo(status);
    }

    /// Stops accepting, lets open requests finish (at most 2 s) and joins
    /// the server thread.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
            self.served.node().set_api_addr(None);
        }
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

async fn serve(
    listener: TcpListener,
    stats: Arc<bounded::ListenerStats>,
    app: axum::Router,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => bounded::Bounded::new(l, stats),
        Err(e) => {
            tracing::warn!("REST API: {e}");
            return;
        }
    };
    let mut graceful = stopped.clone();
    let server = axum::serve(listener, app).with_graceful_shutdown(async move {
        let _ = graceful.wait_for(|s| *s).await;
    });
    tokio::select! {
        r = server => {
            if let Err(e) = r {
                tracing::warn!("REST API stopped: {e}");
            }
        }
        // Connections that stay open past the grace period are dropped.
        _ = async {
            let _ = stopped.wait_for(|s| *s).await;
            tokio::time::sleep(STOP_GRACE).await;
        } => {}
    }
}
