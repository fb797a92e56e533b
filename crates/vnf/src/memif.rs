//! The VNF over memif (`nfvswitch vnf --memif SOCKET`): a memif client of
//! the switch's memif port (as DPDK `net_memif role=client` or a libmemif
//! app is), running the same apps as over vhost-user.
//!
//! Per poll and queue pair: receive ≤32 frames from S2C ring `i` (copied
//! into the VNF's packets: the app works on a `Batch`), run the app,
//! send what it left on C2S ring `i`; what finds no room is dropped as
//! `tx_ring_full`. The client masks the switch's interrupts while it
//! polls; an adaptive VNF that found nothing `idle_polls` times in a row
//! unmasks them and sleeps on the S2C eventfds (memif interrupt mode)
//! until the switch signals, or 100 ms. A disconnect
//! (the switch restarted or refused us) is followed by a reconnect.

use crate::app::App;
use crate::config::{PollMode, VnfConfig};
use crate::stats::VnfStats;
use crate::wait::{readable, sleep_unless};
use nfv_mem::{Batch, HugepageMode, MemoryConfig, PacketPool, PoolCache};
use nfv_memif::client::{Client, ClientConfig, ClientError};
use nfv_memif::socket::SocketPath;
use nix::poll::{PollFd, PollFlags, PollTimeout};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long a handshake step may take.
const HANDSHAKE: Duration = Duration::from_secs(5);
/// Pause between connection attempts.
const RETRY: Duration = Duration::from_millis(200);
/// Housekeeping period: stop flag and disconnect checks.
const HOUSEKEEPING: Duration = Duration::from_millis(100);

#[derive(Debug, thiserror::Error)]
pub enum MemifError {
    #[error("packet pool: {0}")]
    Pool(#[from] nfv_mem::PoolError),
    #[error("the switch refused the memif interface: {0}")]
    Refused(String),
}

/// Sessions one after another until `stop`.
pub fn serve(
    cfg: &VnfConfig,
    id: u32,
    stop: &AtomicBool,
    stats: &VnfStats,
    app: &mut dyn App,
) -> Result<(), MemifError> {
    let pool = PacketPool::new(
        "nfv-vnf-memif",
        &MemoryConfig {
            frame_size: 2048,
            frames: 4096,
            hugepages: HugepageMode::Never,
        },
    )?;
    let mut cache = pool.cache();
    let client_cfg = ClientConfig {
        id,
        if_name: "nfv-vnf".into(),
        queues: cfg.queues,
        log2_ring: cfg.ring_size.trailing_zeros() as u8,
        ..ClientConfig::new(SocketPath::parse(&cfg.socket.to_string_lossy()))
    };
    let mut refusals = 0;
    while !stop.load(Ordering::Relaxed) {
        let client = match Client::connect(&client_cfg, HANDSHAKE) {
            Ok(c) => c,
            // Refused for a reason that will not change (wrong id or
            // secret): say so after a few tries rather than spin for ever.
            Err(ClientError::Refused(why)) => {
                refusals += 1;
                if refusals >= 5 {
                    return Err(MemifError::Refused(why));
                }
                tracing::warn!("vnf: the switch refused us: {why}; retrying");
                sleep_unless(stop, RETRY);
                continue;
            }
            Err(e) => {
                tracing::debug!("vnf: memif connect: {e}");
                sleep_unless(stop, RETRY);
                continue;
            }
        };
        refusals = 0;
        tracing::info!(
            "vnf: memif connected to {} ({}), {} queue pair(s)",
            client.server_if_name,
            client.server_name,
            client.queues()
        );
        stats.set_connected(Some(0));
        let why = drive(cfg, stop, stats, client, &mut cache, app);
        stats.set_connected(None);
        if let Some(why) = why {
            tracing::warn!("vnf: memif disconnected: {why}; reconnecting");
            sleep_unless(stop, RETRY);
        }
    }
    Ok(())
}

/// One connection's poll loop; `None` when stopped, else why it ended.
fn drive(
    cfg: &VnfConfig,
    stop: &AtomicBool,
    stats: &VnfStats,
    mut client: Client,
    cache: &mut PoolCache,
    app: &mut dyn App,
) -> Option<String> {
    let queues = client.queues().min(usize::from(cfg.queues));
    let mut idle: u32 = 0;
    let mut rounds: u32 = 0;
    let mut next_check = Instant::now() + HOUSEKEEPING;
    loop {
        let mut got = 0;
        for q in 0..queues {
            got += poll(&mut client, q, cache, app, stats);
        }
        rounds = rounds.wrapping_add(1);
        idle = if got == 0 { idle.saturating_add(1) } else { 0 };
        let slept = cfg.poll == PollMode::Adaptive && idle >= cfg.idle_polls;
        if slept {
            idle = 0;
            sleep(&client, queues, stats);
        }
        if rounds.is_multiple_of(64) || slept {
            let now = Instant::now();
            if now >= next_check {
                next_check = now + HOUSEKEEPING;
                if stop.load(Ordering::Relaxed) {
                    return None;
                }
                if let Some(why) = client.disconnected() {
                    return Some(if why.is_empty() {
                        "the switch closed the socket".into()
                    } else {
                        why
                    });
                }
            }
        }
    }
}

/// Interrupt mode while idle: unmask the S2C rings (the switch then
/// signals their eventfds when it sends), re-check them (a frame that came
/// before the switch saw the request would otherwise wait), and block in
/// `poll(2)` on the eventfds and the control socket for at most 100 ms.
fn sleep(client: &Client, queues: usize, stats: &VnfStats) {
    let mut pending = false;
    for q in 0..queues {
        pending |= client.arm(q);
    }
    if !pending {
        stats.note_sleep();
        let mut fds: Vec<PollFd> = (0..queues)
            .map(|q| client.s2c_eventfd(q))
            .chain(std::iter::once(client.control_fd()))
            .map(|fd| PollFd::new(fd, PollFlags::POLLIN))
            .collect();
        // An error (EINTR) is a wake-up like any other.
        let _ = nix::poll::poll(&mut fds, PollTimeout::from(100u16));
        for (q, fd) in fds.iter().take(queues).enumerate() {
            if readable(fd) {
                client.drain_eventfd(q);
            }
        }
    }
    for q in 0..queues {
        client.disarm(q);
    }
}

/// Receive, process, transmit on queue pair `q`; returns frames received.
fn poll(
    client: &mut Client,
    q: usize,
    cache: &mut PoolCache,
    app: &mut dyn App,
    stats: &VnfStats,
) -> usize {
    let st = stats.queue(q);
    let mut batch = Batch::new();
    let mut bytes = 0u64;
    let mut no_buffer = 0u64;
    let mut oversize = 0u64;
    let n = client.recv(q, nfv_mem::BATCH, |f| {
        let Some(mut p) = cache.alloc() else {
            no_buffer += 1;
            return;
        };
        if f.len() > p.room_mut().len() {
            oversize += 1;
            cache.free(p);
            return;
        }
        p.room_mut()[..f.len()].copy_from_slice(f);
        // Fits: checked against the room above.
        let _ = p.set_len(f.len());
        bytes += f.len() as u64;
        batch.push(p);
    });
    if n == 0 {
        return 0;
    }
    st.rx(batch.len() as u64, bytes);
    if no_buffer > 0 {
        st.no_buffers(no_buffer);
    }
    if oversize > 0 {
        st.rx_oversize(oversize);
    }
    app.process(&mut batch);
    let sent = client.send(q, batch.iter().map(|p| p.data()));
    let sent_bytes: u64 = batch[..sent].iter().map(|p| p.len() as u64).sum();
    st.tx(sent as u64, sent_bytes);
    if sent < batch.len() {
        st.drop_tx_full((batch.len() - sent) as u64);
    }
    cache.free_batch(&mut batch);
    n
}
