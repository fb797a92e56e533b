//! The datapath: PMD threads and the forwarding element they run.
//!
//! [`Datapath`] is the control plane's handle: it starts PMD threads,
//! adds and removes ports (each new rx queue to the PMD polling the
//! fewest, every PMD its own tx queue on every port), moves rx queues
//! between PMDs without loss ([`Datapath::move_rxq`], placements from
//! `nfv_sched`), and reads counters.
//! Flow rules live in a [`SharedFlowTable`] that PMDs pick up lock-free.
//!
//! Thread safety: `Datapath` is `Sync`; its port registry is behind a
//! mutex used only by the control plane. PMD threads see changes only
//! through their command channels.
//!
//! Long functions: set-up and control code stays under 80 lines a
//! function (`DEVELOPERS.md`, named steps). The per-packet lookup loop,
//! [`decision`]'s `look_up` (about 180 lines: a repeat of the last key
//! or a run of the last megaflow, else EMC, then megaflows, then the
//! classifier and a pipeline's resolution, for each packet of a batch),
//! stays whole: the tier counters and the repeat and run state live in
//! locals for the whole batch (a store through the counters per packet cannot stay in a
//! register), and each tier falls through to the next within one
//! iteration; split into helpers, that state would go through `&mut`
//! arguments per packet.

pub mod actions;
pub mod controller;
pub mod ct;
pub mod decision;
pub mod element;
mod fabric;
pub mod group_choice;
mod interpreter;
pub mod mac_learning;
mod pmd;
mod recirculation;
pub mod stats;
pub mod trace;

pub use element::Element;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, bounded, unbounded};
use mac_learning::MacTable;
use nfv_flow::PortNo;
use nfv_flow::table::SharedFlowTable;
use nfv_mem::PacketPool;
use nfv_ports::{Port, PortStats};
use pmd::{PmdCommand, PmdThread};
use stats::{PmdSnapshot, PmdStats};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DatapathConfig {
    /// One PMD thread per entry, pinned to that CPU (`None` = not pinned).
    pub pmd_cores: Vec<Option<usize>>,
    /// Exact-match cache entries per PMD; 0 disables the EMC.
    pub emc_entries: usize,
    /// Megaflow cache entries per PMD; 0 disables it.
    pub megaflow_entries: usize,
    /// Each PMD opens PMU counters for itself (instructions, cycles, cache
    /// and TLB misses, context switches...) and reads them every ~100 ms;
    /// `false` opens none. Can be changed at run time: [`Datapath::set_pmu`].
    pub pmu: bool,
    /// Packets a second `controller` actions may send up, and how many at
    /// once (OVS's `controller-rate-limit` and `controller-burst-limit`).
    pub packet_in_rate: u64,
    pub packet_in_burst: u64,
    /// Each PMD's connection table (`ct`): capacity, zone limit,
    /// timeouts.
    pub conntrack: nfv_conntrack::Config,
}

#[derive(Debug, thiserror::Error)]
pub enum DatapathError {
    #[error("port number {0} is already in use")]
    DuplicatePortNo(PortNo),
    #[error("port name {0:?} is already in use")]
    DuplicatePortName(String),
    #[error("no port {0:?}")]
    NoSuchPort(String),
    #[error("port {port} has no rx queue {queue}")]
    NoSuchRxq { port: PortNo, queue: usize },
    #[error("no PMD {0} (there are {1})")]
    NoSuchPmd(usize, usize),
    #[error("a PMD thread did not answer within {} s", PMD_GIVE_UP.as_secs())]
    PmdTimeout,
    #[error("cannot start PMD thread: {0}")]
    Spawn(std::io::Error),
    #[error("connection tracking: {0}")]
    Conntrack(#[from] nfv_conntrack::ConfigError),
}

/// A PMD answers a command between two of its iterations: within
/// microseconds, unless its thread is descheduled (a machine whose cores
/// run other work can hold it off for seconds). Giving up early is worse
/// than waiting — a queue handed over after the caller left would be lost
/// with the dropped answer channel — so a slow answer is logged after
/// `PMD_SLOW` and only a PMD silent for `PMD_GIVE_UP` is an error.
const PMD_SLOW: Duration = Duration::from_secs(2);
const PMD_GIVE_UP: Duration = Duration::from_secs(60);

/// Waits for a PMD's answer to `what` (see [`PMD_SLOW`]).
fn await_pmd<T>(answer: &Receiver<T>, what: &str) -> Result<T, DatapathError> {
    match answer.recv_timeout(PMD_SLOW) {
        Ok(v) => Ok(v),
        Err(RecvTimeoutError::Disconnected) => Err(DatapathError::PmdTimeout),
        Err(RecvTimeoutError::Timeout) => {
            tracing::warn!(
                "a PMD has not answered {what} for {} s (its thread descheduled?); waiting",
                PMD_SLOW.as_secs()
            );
            answer
                .recv_timeout(PMD_GIVE_UP - PMD_SLOW)
                .map_err(|_| DatapathError::PmdTimeout)
        }
    }
}

struct PmdHandle {
    core: Option<usize>,
    commands: Sender<PmdCommand>,
    stats: Arc<PmdStats>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

struct PortEntry {
    port: Arc<dyn Port>,
    stats: Arc<PortStats>,
    /// PMD index polling each rx queue.
    rxq_pmd: Vec<usize>,
}

/// What `show ports` needs about one port.
#[derive(Clone)]
pub struct PortView {
    pub no: PortNo,
    pub port: Arc<dyn Port>,
    pub stats: Arc<PortStats>,
    pub rxq_pmd: Vec<usize>,
}

/// What `show pmd` needs about one PMD thread.
#[derive(Clone, Debug)]
pub struct PmdView {
    pub index: usize,
    pub core: Option<usize>,
    pub stats: PmdSnapshot,
    /// The latest PMU counter totals (read every ~100 ms by the PMD).
    pub pmu: nfv_pmu::PmuSnapshot,
    /// (port number, port name, queue) polled by this PMD.
    pub rxqs: Vec<(PortNo, String, usize)>,
}

pub struct Datapath {
    pmds: Vec<PmdHandle>,
    ports: Mutex<BTreeMap<PortNo, PortEntry>>,
    table: Arc<SharedFlowTable>,
    mac: Arc<MacTable>,
    pool: Arc<PacketPool>,
    controller: Arc<controller::ControllerPath>,
    /// The PMD the next packet-out goes to (round robin).
    next_out: std::sync::atomic::AtomicUsize,
}

impl Datapath {
    pub fn start(
        cfg: &DatapathConfig,
        pool: Arc<PacketPool>,
        table: Arc<SharedFlowTable>,
    ) -> Result<Datapath, DatapathError> {
        // The settings each PMD's table takes, checked once here (the
        // storage is reserved, not touched).
        nfv_conntrack::Tracker::new(cfg.conntrack)?;
        let mac = Arc::new(MacTable::new(4096));
        let controller = Arc::new(controller::ControllerPath::new(
            cfg.packet_in_rate,
            cfg.packet_in_burst,
        ));
        let mut pmds = Vec::new();
        for (index, &core) in cfg.pmd_cores.iter().enumerate() {
            let (tx, rx) = unbounded();
            let stats = Arc::new(PmdStats::default());
            let t = PmdThread {
                index,
                core,
                commands: rx,
                stats: stats.clone(),
                table: table.clone(),
                pool: pool.clone(),
                mac: mac.clone(),
                emc_entries: cfg.emc_entries,
                megaflow_entries: cfg.megaflow_entries,
                pmu: cfg.pmu,
                controller: controller.clone(),
                conntrack: cfg.conntrack,
                pmds: cfg.pmd_cores.len(),
            };
            let name = match core {
                Some(c) => format!("pmd-c{c:02}/{index}"),
                None => format!("pmd-{index}"),
            };
            let thread = std::thread::Builder::new()
                .name(name)
                .spawn(move || t.run())
                .map_err(DatapathError::Spawn)?;
            pmds.push(PmdHandle {
                core,
                commands: tx,
                stats,
                thread: Mutex::new(Some(thread)),
            });
        }
        Ok(Datapath {
            pmds,
            ports: Mutex::new(BTreeMap::new()),
            table,
            mac,
            pool,
            controller,
            next_out: Default::default(),
        })
    }

    /// The path packets take to and from OpenFlow controllers.
    pub fn controller(&self) -> &Arc<controller::ControllerPath> {
        &self.controller
    }

    /// Hands a controller's packet to a PMD (the next in turn), which
    /// sends it between two polls. False when no PMD runs, or when
    /// [`controller::PACKET_OUTS_WAITING`] already wait (a controller
    /// sending faster than the PMDs pick them up is refused, not queued
    /// without end; counted as `packet_out_refused`).
    pub fn packet_out(&self, po: controller::PacketOut) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        let waiting = &self.controller.packet_outs_waiting;
        if self.pmds.is_empty() || waiting.load(Relaxed) >= controller::PACKET_OUTS_WAITING {
            self.controller.packet_out_refused.fetch_add(1, Relaxed);
            return false;
        }
        waiting.fetch_add(1, Relaxed);
        let i = self.next_out.fetch_add(1, Relaxed) % self.pmds.len();
        let sent = self.pmds[i]
            .commands
            .send(PmdCommand::PacketOut(Box::new(po)))
            .is_ok();
        if !sent {
            waiting.fetch_sub(1, Relaxed);
        }
        sent
    }

    pub fn table(&self) -> &Arc<SharedFlowTable> {
        &self.table
    }
    pub fn pool(&self) -> &Arc<PacketPool> {
        &self.pool
    }
    /// Frames of the packet pool not held by any packet: its shared free
    /// list plus every PMD's cache (as of that PMD's last housekeeping).
    /// Equals `pool().frames()` once no packet is in flight or queued.
    pub fn pool_free_frames(&self) -> usize {
        let cached: u64 = self
            .pmds
            .iter()
            .map(|p| {
                p.stats
                    .pool_cached
                    .load(std::sync::atomic::Ordering::Relaxed)
            })
            .sum();
        self.pool.shared_free() + cached as usize
    }
    pub fn mac_table(&self) -> &MacTable {
        &self.mac
    }
    pub fn n_pmds(&self) -> usize {
        self.pmds.len()
    }

    fn ports(&self) -> std::sync::MutexGuard<'_, BTreeMap<PortNo, PortEntry>> {
        self.ports.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds a port as number `no`: every PMD gets a tx queue on it, and
    /// its rx queues are spread round-robin over the PMDs.
    pub fn add_port(&self, no: PortNo, port: Arc<dyn Port>) -> Result<(), DatapathError> {
        let mut ports = self.ports();
        if ports.contains_key(&no) {
            return Err(DatapathError::DuplicatePortNo(no));
        }
        if ports.values().any(|e| e.port.name() == port.name()) {
            return Err(DatapathError::DuplicatePortName(port.name().to_string()));
        }
        let n_pmds = self.pmds.len().max(1);
        let stats = Arc::new(PortStats::new(port.n_rxq(), n_pmds));
        for (i, pmd) in self.pmds.iter().enumerate() {
            let _ = pmd.commands.send(PmdCommand::AddTx {
                port: no,
                qid: i,
                txq: port.open_txq(i),
                stats: stats.clone(),
            });
        }
        // Each new queue goes to the PMD polling the fewest (then the
        // lowest index): an even spread, whatever was removed before.
        // Queues of ports that never receive are not counted: a sink
        // would otherwise make its PMD look as busy as a VNF's.
        let mut polled = vec![0usize; n_pmds];
        for e in ports.values().filter(|e| !e.port.never_receives()) {
            for &p in &e.rxq_pmd {
                polled[p.min(n_pmds - 1)] += 1;
            }
        }
        let counts = !port.never_receives();
        let mut rxq_pmd = Vec::new();
        for q in 0..port.n_rxq() {
            let i = (0..n_pmds).min_by_key(|&i| (polled[i], i)).unwrap_or(0);
            polled[i] += usize::from(counts);
            rxq_pmd.push(i);
            if let Some(pmd) = self.pmds.get(i) {
                let _ = pmd.commands.send(PmdCommand::AddRxq {
                    port: no,
                    qid: q,
                    rxq: port.open_rxq(q),
                    stats: stats.clone(),
                });
            }
        }
        ports.insert(
            no,
            PortEntry {
                port,
                stats,
                rxq_pmd,
            },
        );
        Ok(())
    }

    /// Looks a port up by number or name.
    pub fn resolve_port(&self, name_or_no: &str) -> Option<PortNo> {
        let ports = self.ports();
        if let Ok(no) = name_or_no.parse::<PortNo>()
            && ports.contains_key(&no)
        {
            return Some(no);
        }
        ports
            .iter()
            .find(|(_, e)| e.port.name() == name_or_no)
            .map(|(no, _)| *no)
    }

    /// Removes a port; returns once no PMD uses it any more.
    pub fn del_port(&self, name_or_no: &str) -> Result<PortNo, DatapathError> {
        let no = self
            .resolve_port(name_or_no)
            .ok_or_else(|| DatapathError::NoSuchPort(name_or_no.to_string()))?;
        let mut ports = self.ports();
        let (ack_tx, ack_rx) = bounded(self.pmds.len().max(1));
        for pmd in &self.pmds {
            let _ = pmd.commands.send(PmdCommand::DelPort {
                port: no,
                ack: ack_tx.clone(),
            });
        }
        let mut result = Ok(no);
        for _ in &self.pmds {
            if let Err(e) = await_pmd(&ack_rx, "a port removal") {
                result = Err(e);
                break;
            }
        }
        ports.remove(&no);
        self.mac.flush_port(no);
        result
    }

    /// Moves rx queue `queue` of `port` to PMD `to`. The PMD polling it
    /// lets go between two of its iterations (every frame it took from
    /// the queue processed and sent), then `to` polls it: frames arriving
    /// meanwhile wait in the queue, so none is lost or reordered.
    pub fn move_rxq(&self, port: PortNo, queue: usize, to: usize) -> Result<(), DatapathError> {
        let mut ports = self.ports();
        let entry = ports
            .get_mut(&port)
            .ok_or_else(|| DatapathError::NoSuchPort(port.to_string()))?;
        let from = *entry
            .rxq_pmd
            .get(queue)
            .ok_or(DatapathError::NoSuchRxq { port, queue })?;
        let target = self
            .pmds
            .get(to)
            .ok_or(DatapathError::NoSuchPmd(to, self.pmds.len()))?;
        if from == to {
            return Ok(());
        }
        let (reply, answer) = bounded(1);
        let _ = self.pmds[from].commands.send(PmdCommand::TakeRxq {
            port,
            qid: queue,
            reply,
        });
        let taken = await_pmd(&answer, "an rx queue move")?
            .ok_or(DatapathError::NoSuchRxq { port, queue })?;
        let _ = target.commands.send(PmdCommand::AddRxq {
            port,
            qid: queue,
            rxq: taken.rxq,
            stats: taken.stats,
        });
        entry.rxq_pmd[queue] = to;
        Ok(())
    }

    /// Moves every rx queue whose PMD in `placement` differs from now
    /// (queues it does not name stay); returns how many moved.
    pub fn apply_placement(
        &self,
        placement: &nfv_sched::Placement,
    ) -> Result<usize, DatapathError> {
        let mut moved = 0;
        for (id, &pmd) in placement {
            let now = self
                .ports()
                .get(&id.port)
                .and_then(|e| e.rxq_pmd.get(id.queue).copied());
            if now.is_some_and(|p| p != pmd) {
                self.move_rxq(id.port, id.queue, pmd)?;
                moved += 1;
            }
        }
        Ok(moved)
    }

    /// Every rx queue: where it is polled and its cumulative processing
    /// cycles.
    pub fn rxq_cycles(&self) -> Vec<(nfv_sched::RxqId, usize, u64)> {
        let ports = self.ports();
        ports
            .iter()
            .flat_map(|(&port, e)| {
                e.rxq_pmd.iter().enumerate().map(move |(queue, &pmd)| {
                    let cycles = e
                        .stats
                        .rx
                        .get(queue)
                        .map_or(0, |c| c.cycles.load(std::sync::atomic::Ordering::Relaxed));
                    (nfv_sched::RxqId { port, queue }, pmd, cycles)
                })
            })
            .collect()
    }

    /// The PMDs as placement sees them.
    pub fn sched_pmds(&self) -> Vec<nfv_sched::Pmd> {
        self.pmds
            .iter()
            .enumerate()
            .map(|(index, p)| nfv_sched::Pmd {
                index,
                core: p.core,
            })
            .collect()
    }

    pub fn port_views(&self) -> Vec<PortView> {
        self.ports()
            .iter()
            .map(|(&no, e)| PortView {
                no,
                port: e.port.clone(),
                stats: e.stats.clone(),
                rxq_pmd: e.rxq_pmd.clone(),
            })
            .collect()
    }

    pub fn pmd_views(&self) -> Vec<PmdView> {
        let ports = self.ports();
        self.pmds
            .iter()
            .enumerate()
            .map(|(i, p)| PmdView {
                index: i,
                core: p.core,
                stats: p.stats.snapshot(),
                pmu: p.stats.pmu.load(),
                rxqs: ports
                    .iter()
                    .flat_map(|(&no, e)| {
                        e.rxq_pmd
                            .iter()
                            .enumerate()
                            .filter(move |(_, pmd)| **pmd == i)
                            .map(move |(q, _)| (no, e.port.name().to_string(), q))
                    })
                    .collect(),
            })
            .collect()
    }

    /// Switches PMU counting on or off in every PMD (off closes the
    /// counters; on opens fresh ones, totals from zero).
    pub fn set_pmu(&self, on: bool) {
        for p in &self.pmds {
            let _ = p.commands.send(PmdCommand::SetPmu(on));
        }
    }

    /// Up to `limit` connections of every PMD's table (of `zone`, or
    /// all), and how many the tables hold in all. Each PMD copies its own
    /// between two polls.
    pub fn dump_conntrack(
        &self,
        zone: Option<u16>,
        limit: usize,
    ) -> Result<(Vec<nfv_conntrack::ConnView>, u64), DatapathError> {
        let mut answers = Vec::new();
        for p in &self.pmds {
            let (tx, rx) = bounded(1);
            if p.commands
                .send(PmdCommand::DumpConntrack {
                    zone,
                    limit,
                    reply: tx,
                })
                .is_ok()
            {
                answers.push(rx);
            }
        }
        let (mut conns, mut total) = (Vec::new(), 0u64);
        for rx in answers {
            let (mut some, n) = await_pmd(&rx, "a connection dump")?;
            total += u64::from(n);
            some.truncate(limit.saturating_sub(conns.len()));
            conns.append(&mut some);
        }
        Ok((conns, total))
    }

    /// Removes every connection (of `zone`, or all) from every PMD's
    /// table; returns how many went.
    pub fn flush_conntrack(&self, zone: Option<u16>) -> Result<u64, DatapathError> {
        let mut answers = Vec::new();
        for p in &self.pmds {
            let (tx, rx) = bounded(1);
            if p.commands
                .send(PmdCommand::FlushConntrack { zone, reply: tx })
                .is_ok()
            {
                answers.push(rx);
            }
        }
        let mut removed = 0u64;
        for rx in answers {
            removed += u64::from(await_pmd(&rx, "a connection flush")?);
        }
        Ok(removed)
    }

    /// Zeroes PMD counters (port counters are cumulative, like OVS).
    pub fn clear_pmd_stats(&self) {
        for p in &self.pmds {
            let _ = p.commands.send(PmdCommand::ClearStats);
        }
    }

    /// Stops all PMD threads and waits for them.
    /// Idempotent.
    pub fn shutdown(&self) {
        for p in &self.pmds {
            let _ = p.commands.send(PmdCommand::Quit);
        }
        for p in &self.pmds {
            let t = p.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(t) = t {
                let _ = t.join();
            }
        }
        // Release the ports (and any packets their queues still hold).
        self.ports().clear();
    }
}

impl Drop for Datapath {
    fn drop(&mut self) {
        self.shutdown();
    }
}
