//! The VNF's life: map memory, connect, negotiate, run the poll loop until
//! told to stop or the switch goes away, then reconnect (client mode) or
//! wait for the switch again (server mode). Nothing here panics on what
//! the switch does; everything it does wrong is an error or a reconnect.
//!
//! The poll loop (one thread, all queue pairs in turn):
//! ```text
//!  rx vq 2i ──receive_burst(≤32)──▶ app.process ──transmit_burst──▶ tx vq 2i+1
//!                                                   reclaim tx, refill rx
//! ```
//! `adaptive` polling sleeps after `idle_polls` empty rounds: it enables rx
//! interrupts, re-checks the used rings (a packet that arrived in between
//! would otherwise never wake us), and blocks in `poll(2)` on the rx call
//! eventfds and the control socket for at most 100 ms, so stop requests,
//! disconnects and stats keep working while asleep.

use crate::app::{self, App};
use crate::config::{Interface, PollMode, VnfConfig};
use crate::memory::SharedMemory;
use crate::queues::{self, QueuePair};
use crate::session::{Endpoint, Session, SessionError};
use crate::stats::{self, JsonStats, Rates, Snapshot, VnfStats};
use crate::wait::{readable, sleep_unless};
use nfv_mem::PoolCache;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Housekeeping period: stop flag, deadline and peer checks.
const HOUSEKEEPING: Duration = Duration::from_millis(100);
/// Longest sleep of an adaptive VNF.
const SLEEP_MS: u16 = 100;
/// Pause before renegotiating after a failed session.
const BACKOFF: Duration = Duration::from_millis(500);

#[derive(Debug, thiserror::Error)]
pub enum VnfError {
    #[error("VNF memory: {0}")]
    Memory(#[from] crate::memory::MemoryError),
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error(transparent)]
    Memif(#[from] crate::memif::MemifError),
    #[error("--cpu {cpu}: {err}")]
    Affinity { cpu: usize, err: nix::Error },
}

/// Why a session ended.
#[derive(Debug, PartialEq, Eq)]
enum End {
    Stop,
    PeerGone,
    Broken(String),
}

/// Runs the VNF until `stop` is set (this sets it too when `--exit-after`
/// passes) and returns the final counters. `stats` is live for whoever
/// else wants to read it. The calling thread becomes the poll thread
/// (pinned with `--cpu` while this runs; its affinity is restored after).
pub fn run(
    cfg: &VnfConfig,
    stop: &AtomicBool,
    stats: &Arc<VnfStats>,
) -> Result<Snapshot, VnfError> {
    let started = Instant::now();
    let deadline = cfg.exit_after.map(|d| started + d);
    let mut app = app::build(cfg.app, cfg.mac, cfg.next_hop);
    tracing::info!(
        "vnf {}: {:?}, {} queue pair(s) x {} descriptors, mac {}, {:?} polling",
        app.name(),
        cfg.interface,
        cfg.queues,
        cfg.ring_size,
        cfg.mac,
        cfg.poll
    );
    let name = app.name();
    let reporter_stop = AtomicBool::new(false);
    let watchdog_done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let reporter = s.spawn(|| report(cfg, stats, &reporter_stop, name, started));
        // An exit deadline also has to end a wait for the switch.
        if let Some(d) = deadline {
            let watchdog_done = &watchdog_done;
            s.spawn(move || {
                while !watchdog_done.load(Ordering::Relaxed) && !stop.load(Ordering::Relaxed) {
                    if Instant::now() >= d {
                        stop.store(true, Ordering::Relaxed);
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            });
        }
        // Pinned after the helper threads started: they inherit the
        // affinity of the thread that creates them.
        let r = cfg.cpu.map(pin).transpose().and_then(|old| {
            let r = match cfg.interface {
                Interface::VhostUser => serve_vhost(cfg, stop, stats, app.as_mut()),
                Interface::Memif { id } => {
                    crate::memif::serve(cfg, id, stop, stats, app.as_mut()).map_err(Into::into)
                }
            };
            if let Some(old) = old {
                let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &old);
            }
            r
        });
        watchdog_done.store(true, Ordering::Relaxed);
        reporter_stop.store(true, Ordering::Relaxed);
        let _ = reporter.join();
        r
    })?;
    Ok(stats.snapshot())
}

/// Pins the calling thread to `cpu`; returns its previous affinity.
fn pin(cpu: usize) -> Result<nix::sched::CpuSet, VnfError> {
    use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
    let me = nix::unistd::Pid::from_raw(0);
    let mut set = CpuSet::new();
    let old = sched_getaffinity(me)
        .and_then(|old| set.set(cpu).map(|()| old))
        .and_then(|old| sched_setaffinity(me, &set).map(|()| old))
        .map_err(|err| VnfError::Affinity { cpu, err })?;
    Ok(old)
}

/// The vhost-user VNF: its memory, then sessions until stopped.
fn serve_vhost(
    cfg: &VnfConfig,
    stop: &AtomicBool,
    stats: &VnfStats,
    app: &mut dyn App,
) -> Result<(), VnfError> {
    let mut mem = SharedMemory::new(cfg.queues, cfg.ring_size, cfg.packed)?;
    let endpoint = Endpoint::new(cfg)?;
    let mut cache = mem.pool().cache();
    serve(cfg, stop, stats, &endpoint, &mut mem, &mut cache, app)
}

/// Sessions one after another until stopped.
fn serve(
    cfg: &VnfConfig,
    stop: &AtomicBool,
    stats: &VnfStats,
    endpoint: &Endpoint,
    mem: &mut SharedMemory,
    cache: &mut PoolCache,
    app: &mut dyn App,
) -> Result<(), VnfError> {
    while !stop.load(Ordering::Relaxed) {
        let stream = match endpoint.connect(stop) {
            Ok(s) => s,
            Err(SessionError::Stopped) => break,
            Err(e) => return Err(e.into()),
        };
        // A fresh session starts from empty rings, whatever the last one
        // left behind.
        mem.clear_rings();
        let mut session = match Session::negotiate(stream, cfg, mem) {
            Ok(s) => s,
            // The switch cannot do what was asked: retrying will not help.
            Err(e @ (SessionError::NoVersion1(_) | SessionError::Queues { .. })) => {
                return Err(e.into());
            }
            Err(e) => {
                tracing::warn!("vnf: session set-up failed: {e}; retrying");
                sleep_unless(stop, BACKOFF);
                continue;
            }
        };
        tracing::info!(
            "vnf: connected to the switch, features {:#x}",
            session.features()
        );
        stats.set_connected(Some(session.features()));
        let end = drive(cfg, stop, stats, &mut session, mem, cache, app);
        stats.set_connected(None);
        match end {
            End::Stop => break,
            End::PeerGone => {
                tracing::warn!("vnf: the switch closed the vhost-user connection; waiting for it")
            }
            End::Broken(why) => {
                tracing::warn!("vnf: {why}; dropping the session and starting over");
                sleep_unless(stop, BACKOFF);
            }
        }
    }
    Ok(())
}

/// One session's poll loop. Queues (and every buffer they hold) are gone
/// when it returns; on `Stop` the switch has been told to stop its rings
/// first, so it no longer writes into buffers that go back to the pool.
fn drive(
    cfg: &VnfConfig,
    stop: &AtomicBool,
    stats: &VnfStats,
    session: &mut Session,
    mem: &SharedMemory,
    cache: &mut PoolCache,
    app: &mut dyn App,
) -> End {
    let gmem = match queues::guest_memory(mem) {
        Ok(g) => g,
        Err(e) => return End::Broken(format!("guest memory: {e}")),
    };
    let mut qps = Vec::with_capacity(cfg.queues as usize);
    for i in 0..cfg.queues as usize {
        match QueuePair::new(i, session, mem, &gmem, cache) {
            Ok(q) => qps.push(q),
            Err(e) => return End::Broken(format!("queue pair {i}: {e}")),
        }
    }
    let adaptive = cfg.poll == PollMode::Adaptive;
    let mut idle: u32 = 0;
    let mut rounds: u32 = 0;
    let mut next_check = Instant::now() + HOUSEKEEPING;
    let end = loop {
        let mut got = 0;
        for (i, qp) in qps.iter_mut().enumerate() {
            got += qp.poll(app, cache, stats.queue(i));
        }
        rounds = rounds.wrapping_add(1);
        idle = if got == 0 { idle.saturating_add(1) } else { 0 };
        let slept = adaptive && idle >= cfg.idle_polls;
        if slept {
            idle = 0;
            sleep(&mut qps, session, stats);
        }
        // A clock read every 64 rounds (~20 ns each) and after every sleep.
        if rounds.is_multiple_of(64) || slept {
            let now = Instant::now();
            if now >= next_check {
                next_check = now + HOUSEKEEPING;
                for (i, qp) in qps.iter_mut().enumerate() {
                    qp.sync_counters(stats.queue(i));
                }
                if stop.load(Ordering::Relaxed) {
                    break End::Stop;
                }
                if session.peer_gone() {
                    break End::PeerGone;
                }
                if qps.iter().any(|q| q.quarantined()) {
                    break End::Broken("the switch broke the virtqueue protocol".into());
                }
            }
        }
    };
    if end == End::Stop {
        session.stop_rings();
    }
    for (i, qp) in qps.into_iter().enumerate() {
        qp.release(stats.queue(i));
    }
    end
}

/// Sleeps until the switch calls on an rx queue, the control socket
/// stirs, or 100 ms pass.
fn sleep(qps: &mut [QueuePair], session: &Session, stats: &VnfStats) {
    let mut pending = false;
    for qp in qps.iter_mut() {
        pending |= qp.arm();
    }
    if !pending {
        stats.note_sleep();
        let mut fds: Vec<PollFd> = qps
            .iter()
            .map(|qp| qp.call_fd(session))
            .chain(std::iter::once(session.socket_fd()))
            .map(|fd| PollFd::new(fd, PollFlags::POLLIN))
            .collect();
        // An error (EINTR) is a wake-up like any other.
        let _ = poll(&mut fds, PollTimeout::from(SLEEP_MS));
        // Drain only the eventfds poll found readable: the switch holds
        // them too and may clear O_NONBLOCK on the shared file description,
        // and a read of a zero counter would then block this thread. (A
        // peer that also drains the counter between poll and read can
        // still make one read wait; the VNF trusts the switch that far.)
        for (qp, fd) in qps.iter().zip(&fds) {
            if readable(fd) {
                let _ = session.call[qp.rx_vq()].read();
            }
        }
    }
    for qp in qps.iter_mut() {
        qp.disarm();
    }
}

/// The reporter thread: a stats line every `--stats-every` and the JSON
/// file (every interval, 1 s if only `--json-stats` was given), once more
/// at the end.
fn report(cfg: &VnfConfig, stats: &VnfStats, done: &AtomicBool, app: &str, started: Instant) {
    if cfg.stats_every.is_none() && cfg.json_stats.is_none() {
        return;
    }
    let every = cfg.stats_every.unwrap_or(Duration::from_secs(1));
    let socket = cfg.socket.display().to_string();
    let mut prev = stats.snapshot();
    let mut t_prev = Instant::now();
    let mut next = t_prev + every;
    loop {
        let finished = done.load(Ordering::Relaxed);
        if !finished && Instant::now() < next {
            std::thread::sleep(Duration::from_millis(10).min(every));
            continue;
        }
        let now = Instant::now();
        let snap = stats.snapshot();
        let rates = Rates::between(&prev.total, &snap.total, now - t_prev);
        if cfg.stats_every.is_some() && !finished {
            println!("{}", stats::line(app, &rates, &snap));
        }
        if let Some(p) = &cfg.json_stats {
            let j = JsonStats {
                app,
                socket: &socket,
                uptime_s: (now - started).as_secs_f64(),
                interval_s: (now - t_prev).as_secs_f64(),
                rates,
                counters: &snap,
            };
            if let Err(e) = stats::write_json(p, &j) {
                tracing::warn!("--json-stats {}: {e}", p.display());
            }
        }
        if finished {
            return;
        }
        prev = snap;
        t_prev = now;
        next += every;
        if next < now {
            next = now + every;
        }
    }
}
