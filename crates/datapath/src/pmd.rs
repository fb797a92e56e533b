//! A poll-mode driver (PMD) thread: pinned to one core, it polls its rx
//! queues forever, runs the forwarding element on each received batch and
//! flushes outputs. It never blocks, parses text or takes a control-plane
//! lock; the control plane talks to it only through typed commands
//! ([`PmdCommand`]) that it picks up between iterations.

use crate::ct::ConnTable;
use crate::element::Element;
use crate::mac_learning::MacTable;
use crate::stats::{PmdCounters, PmdStats};
use crossbeam_channel::{Receiver, Sender};
use nfv_flow::PortNo;
use nfv_flow::table::SharedFlowTable;
use nfv_mem::{Batch, PacketPool, PoolCache};
use nfv_pmu::{CounterSource, PerfSource, PmuSampler};
use nfv_ports::{PortStats, RxQueue, TxQueue};
use std::sync::Arc;
use std::time::Instant;

/// Iterations between looks at the command channel and the table version.
const HOUSEKEEPING_EVERY: u64 = 16;

/// One poll iteration in this many times every port burst (two more TSC
/// reads per busy queue) and counts its port cycles this many times; the
/// others read the TSC once, at their end. A TSC read is not free (tens of
/// nanoseconds under virtualisation, see bench/README.md), and reading it
/// three times per queue per iteration cost more than the split is worth.
const PORT_TIMING_EVERY: u64 = 8;

/// A burst that took longer than this was preempted (a burst takes
/// microseconds): its cycles are the other thread's, not the queue's, and
/// would make a quiet queue look busy to rx queue placement.
const PREEMPTED_BURST_NS: u64 = 1_000_000;

/// PMU counter reads per second (each is one `read(2)` per counter, done
/// from housekeeping once this much TSC time has passed).
const PMU_READS_PER_SEC: u64 = 10;

pub enum PmdCommand {
    /// Start polling rx queue `qid` of `port`.
    AddRxq {
        port: PortNo,
        qid: usize,
        rxq: Box<dyn RxQueue>,
        stats: Arc<PortStats>,
    },
    /// Give this PMD its own tx queue (index `qid`) on `port`.
    AddTx {
        port: PortNo,
        qid: usize,
        txq: Box<dyn TxQueue>,
        stats: Arc<PortStats>,
    },
    /// Stop polling rx queue `qid` of `port` and hand it back on `reply`
    /// (`None` if this PMD does not poll it). Taken between iterations, so
    /// every packet it delivered has been processed and sent: another PMD
    /// can poll it next without loss or reordering.
    TakeRxq {
        port: PortNo,
        qid: usize,
        reply: Sender<Option<TakenRxq>>,
    },
    /// Forget everything about `port`; acknowledge on `ack`.
    DelPort {
        port: PortNo,
        ack: Sender<()>,
    },
    /// Zero this PMD's counters (like `pmd-stats-clear`).
    ClearStats,
    /// Open (true) or close (false) this PMD's PMU counters.
    SetPmu(bool),
    /// Send a controller's packet (`PACKET_OUT`).
    PacketOut(Box<crate::controller::PacketOut>),
    /// Copy up to `limit` connections of this PMD's table (of `zone`, or
    /// all) to `reply`, with how many there are in all.
    DumpConntrack {
        zone: Option<u16>,
        limit: usize,
        reply: Sender<(Vec<nfv_conntrack::ConnView>, u32)>,
    },
    /// Remove every connection (of `zone`, or all); the number removed
    /// goes to `reply`.
    FlushConntrack {
        zone: Option<u16>,
        reply: Sender<u32>,
    },
    Quit,
}

/// An rx queue on its way from one PMD to another.
pub struct TakenRxq {
    pub rxq: Box<dyn RxQueue>,
    pub stats: Arc<PortStats>,
}

struct PolledRxq {
    port: PortNo,
    qid: usize,
    rxq: Box<dyn RxQueue>,
    stats: Arc<PortStats>,
}

pub(crate) struct PmdThread {
    pub index: usize,
    pub core: Option<usize>,
    pub commands: Receiver<PmdCommand>,
    pub stats: Arc<PmdStats>,
    pub table: Arc<SharedFlowTable>,
    pub pool: Arc<PacketPool>,
    pub mac: Arc<MacTable>,
    pub emc_entries: usize,
    pub megaflow_entries: usize,
    pub pmu: bool,
    pub controller: Arc<crate::controller::ControllerPath>,
    /// Settings of the PMD's connection table (validated by
    /// [`crate::Datapath::start`]).
    pub conntrack: nfv_conntrack::Config,
    /// PMD threads in the datapath (this one included).
    pub pmds: usize,
}

/// Opens PMU counters for the calling (PMD) thread when `on`.
fn pmu_source(on: bool, index: usize) -> Option<Box<dyn CounterSource>> {
    if !on {
        return None;
    }
    let src = PerfSource::open();
    for (e, why) in src.failures() {
        tracing::info!(
            "pmd {index}: PMU counter {} unsupported: {}",
            e.name(),
            why.reason(e)
        );
    }
    Some(Box::new(src))
}

fn pin_to_core(core: usize) -> Result<(), nix::Error> {
    let mut set = nix::sched::CpuSet::new();
    set.set(core)?;
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
}

impl PmdThread {
    /// The thread's body: set up, then poll until told to quit. Every
    /// [`HOUSEKEEPING_EVERY`] iterations it handles commands and does its
    /// housekeeping; the rest of the time it only polls.
    pub fn run(self) {
        if let Some(core) = self.core {
            match pin_to_core(core) {
                Ok(()) => tracing::info!("pmd {} pinned to core {core}", self.index),
                Err(e) => tracing::warn!("pmd {}: cannot pin to core {core}: {e}", self.index),
            }
        }
        let mut pmd = Running::new(self);
        loop {
            if pmd.c.iterations.is_multiple_of(HOUSEKEEPING_EVERY) {
                if pmd.handle_commands() == Flow::Quit {
                    break;
                }
                pmd.housekeeping();
                // Housekeeping is neither busy nor idle time.
                pmd.last_tsc = nfv_tsc::now();
            }
            pmd.poll_once();
        }
        pmd.stop();
    }
}

#[derive(PartialEq, Eq)]
enum Flow {
    Continue,
    Quit,
}

/// A PMD thread's state while it runs (all of it owned by the thread).
struct Running {
    cfg: PmdThread,
    pool: PoolCache,
    element: Element,
    rxqs: Vec<PolledRxq>,
    batch: Batch,
    c: PmdCounters,
    started: Instant,
    pmu: PmuSampler,
    pmu_period: u64,
    pmu_due: u64,
    /// TSC at the end of the last iteration (or of housekeeping): the
    /// start of the next.
    last_tsc: u64,
    /// [`PREEMPTED_BURST_NS`] in TSC cycles.
    preempted_burst: u64,
    /// The several-PMD `ct` warning was logged.
    warned_ct: bool,
}

impl Running {
    fn new(cfg: PmdThread) -> Running {
        let started = Instant::now();
        let conntrack = ConnTable::new(cfg.conntrack).unwrap_or_else(|e| {
            // Checked before the thread started; the default instead.
            tracing::error!("pmd {}: connection table settings: {e}", cfg.index);
            ConnTable::with_defaults()
        });
        let mut element = Element::with_conn_table(
            cfg.emc_entries,
            cfg.megaflow_entries,
            cfg.table.snapshot(),
            cfg.mac.clone(),
            conntrack,
        );
        element.set_controller(cfg.controller.clone());
        Running {
            pool: cfg.pool.cache(),
            element,
            rxqs: Vec::new(),
            batch: Batch::new(),
            c: PmdCounters::default(),
            pmu: PmuSampler::new(pmu_source(cfg.pmu, cfg.index), 0),
            pmu_period: nfv_tsc::hz() / PMU_READS_PER_SEC,
            pmu_due: 0,
            last_tsc: nfv_tsc::now(),
            preempted_burst: (u128::from(nfv_tsc::hz()) * u128::from(PREEMPTED_BURST_NS)
                / 1_000_000_000) as u64,
            started,
            cfg,
            warned_ct: false,
        }
    }

    /// Nanoseconds since the thread started (the PMU sampler's clock).
    fn ns(&self) -> u64 {
        self.started.elapsed().as_nanos() as u64
    }

    /// Applies every queued command; `Quit` ends the thread.
    fn handle_commands(&mut self) -> Flow {
        let mut flow = Flow::Continue;
        while let Ok(cmd) = self.cfg.commands.try_recv() {
            match cmd {
                PmdCommand::AddRxq {
                    port,
                    qid,
                    rxq,
                    stats,
                } => self.rxqs.push(PolledRxq {
                    port,
                    qid,
                    rxq,
                    stats,
                }),
                PmdCommand::AddTx {
                    port,
                    qid,
                    txq,
                    stats,
                } => self.element.add_output(port, txq, stats, qid),
                PmdCommand::TakeRxq { port, qid, reply } => {
                    let at = self
                        .rxqs
                        .iter()
                        .position(|q| q.port == port && q.qid == qid);
                    let taken = at.map(|i| {
                        let q = self.rxqs.remove(i);
                        TakenRxq {
                            rxq: q.rxq,
                            stats: q.stats,
                        }
                    });
                    let _ = reply.send(taken);
                }
                PmdCommand::DelPort { port, ack } => {
                    self.rxqs.retain(|q| q.port != port);
                    self.element.remove_output(port, &mut self.pool);
                    let _ = ack.send(());
                }
                PmdCommand::ClearStats => {
                    self.c = PmdCounters::default();
                    self.cfg.stats.publish(&self.c);
                    self.pmu.clear(self.ns());
                    self.pmu_due = 0;
                }
                PmdCommand::SetPmu(on) => {
                    if on != self.pmu.enabled() {
                        let ns = self.ns();
                        self.pmu.set_source(pmu_source(on, self.cfg.index), ns);
                        self.pmu_due = 0;
                    }
                }
                PmdCommand::PacketOut(po) => self.packet_out(&po),
                PmdCommand::DumpConntrack { zone, limit, reply } => {
                    let t = self.element.conntrack().tracker();
                    let conns = t
                        .connections()
                        .filter(|c| zone.is_none_or(|z| c.orig.zone == z))
                        .take(limit)
                        .collect();
                    let total = zone.map_or(t.len(), |z| t.zone_count(z));
                    let _ = reply.send((conns, total));
                }
                PmdCommand::FlushConntrack { zone, reply } => {
                    let removed = self.element.conntrack().tracker_mut().flush(zone);
                    self.publish_conntrack();
                    let _ = reply.send(removed);
                }
                PmdCommand::Quit => flow = Flow::Quit,
            }
        }
        flow
    }

    /// Builds the controller's packet in a buffer of the pool and runs
    /// it; one that does not fit a buffer, or finds none, is counted.
    fn packet_out(&mut self, po: &crate::controller::PacketOut) {
        use std::sync::atomic::Ordering::Relaxed;
        self.cfg
            .controller
            .packet_outs_waiting
            .fetch_sub(1, Relaxed);
        let refused = &self.cfg.controller.packet_out_refused;
        let Some(mut pkt) = self.pool.alloc() else {
            refused.fetch_add(1, Relaxed);
            return;
        };
        let n = po.data.len();
        if n > pkt.room_mut().len() || pkt.set_len(n).is_err() {
            self.pool.free(pkt);
            refused.fetch_add(1, Relaxed);
            return;
        }
        pkt.data_mut().copy_from_slice(&po.data);
        self.element.inject(po, pkt, &mut self.pool, &mut self.c);
        self.element.flush(&mut self.pool);
        self.cfg.controller.packet_out_sent.fetch_add(1, Relaxed);
    }

    /// Picks up a new flow table, advances MAC learning's clock and
    /// publishes PMU readings when due.
    fn housekeeping(&mut self) {
        if let Some(t) = self
            .cfg
            .table
            .snapshot_if_newer(self.element.table_version())
        {
            if t.ct_wide.used && self.cfg.pmds > 1 && self.cfg.index == 0 && !self.warned_ct {
                self.warned_ct = true;
                tracing::warn!(
                    "rules run ct() on a node with {} PMD threads: each PMD tracks the \
                     connections of the queues it polls, so a connection whose two \
                     directions arrive on queues of different PMDs looks new to each \
                     (no hand-off between PMDs yet; one PMD keeps ct exact)",
                    self.cfg.pmds
                );
            }
            self.element.set_table(t);
        }
        let now = nfv_tsc::now();
        self.element
            .set_now(self.started.elapsed().as_secs() as u32, now);
        self.cfg.stats.pool_cached.store(
            self.pool.cached() as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
        self.cfg.stats.cache_bytes.store(
            self.element.cache_bytes() as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
        let (megaflows, refused) = self.element.megaflow_occupancy();
        let stats = &self.cfg.stats;
        stats
            .megaflows
            .store(megaflows as u64, std::sync::atomic::Ordering::Relaxed);
        stats
            .megaflow_refused
            .store(refused, std::sync::atomic::Ordering::Relaxed);
        let now_ms = self.element.now_ms();
        self.element.conntrack().tracker_mut().expire(now_ms);
        self.publish_conntrack();
        if now >= self.pmu_due {
            self.pmu_due = now + self.pmu_period;
            let reading = self.pmu.sample(self.ns(), self.c.rx_packets);
            self.cfg.stats.pmu.publish(&reading);
        }
    }

    /// The connection table's figures, into this PMD's shared stats.
    fn publish_conntrack(&mut self) {
        use std::sync::atomic::Ordering::Relaxed;
        let ct = self.element.conntrack();
        let (t, own) = (ct.tracker().counters(), ct.counters());
        let len = ct.tracker().len();
        let s = &self.cfg.stats;
        s.ct_connections.store(u64::from(len), Relaxed);
        s.ct_new.store(t.new, Relaxed);
        s.ct_established.store(t.established, Relaxed);
        s.ct_related.store(t.related, Relaxed);
        let untrackable = own.not_ip + own.fragment + own.malformed;
        s.ct_invalid
            .store(t.invalid + untrackable + own.commit_refused, Relaxed);
        s.ct_committed.store(t.committed, Relaxed);
        s.ct_expired.store(t.expired, Relaxed);
        s.ct_commit_refused.store(own.commit_refused, Relaxed);
        s.ct_untrackable.store(untrackable, Relaxed);
    }

    /// One pass over the rx queues: receive, process and flush each burst;
    /// TSC accounting of busy and idle cycles, and of port cycles on every
    /// [`PORT_TIMING_EVERY`]th iteration.
    #[inline(always)]
    fn poll_once(&mut self) {
        let t_start = self.last_tsc;
        let timed = self.c.iterations.is_multiple_of(PORT_TIMING_EVERY);
        let mut got = 0usize;
        let mut port_cycles = 0u64;
        if timed {
            let preempted = self.preempted_burst;
            let mut t = t_start;
            for q in self.rxqs.iter_mut() {
                let n = q.rxq.rx_burst(&mut self.batch, &mut self.pool);
                let t_rx = nfv_tsc::now();
                if n == 0 {
                    t = t_rx;
                    continue;
                }
                let t_burst = t;
                port_cycles += t_rx - t;
                got += n;
                let rx = &q.stats.rx[q.qid];
                self.element
                    .process(q.port, rx, &mut self.batch, &mut self.pool, &mut self.c);
                let t_tx = nfv_tsc::now();
                self.element.flush(&mut self.pool);
                // Every packet of the burst is out or freed: the rx port
                // may take back what they borrowed (split packets' tails).
                q.rxq.burst_done();
                t = nfv_tsc::now();
                port_cycles += t - t_tx;
                // The queue's processing cycles, for placement.
                let spent = t - t_burst;
                if spent < preempted {
                    rx.add_cycles(spent * PORT_TIMING_EVERY);
                }
            }
            port_cycles *= PORT_TIMING_EVERY;
        } else {
            for q in self.rxqs.iter_mut() {
                let n = q.rxq.rx_burst(&mut self.batch, &mut self.pool);
                if n == 0 {
                    continue;
                }
                got += n;
                let rx = &q.stats.rx[q.qid];
                self.element
                    .process(q.port, rx, &mut self.batch, &mut self.pool, &mut self.c);
                self.element.flush(&mut self.pool);
                q.rxq.burst_done();
            }
        }
        self.element.settle_outputs();
        let t_end = nfv_tsc::now();
        self.last_tsc = t_end;
        let c = &mut self.c;
        c.iterations += 1;
        if got > 0 {
            c.busy_iterations += 1;
            c.busy_cycles += t_end - t_start;
            c.port_cycles += port_cycles;
            c.rx_packets += got as u64;
            self.cfg.stats.publish(c);
        } else {
            c.idle_cycles += t_end - t_start;
            if c.iterations.is_multiple_of(HOUSEKEEPING_EVERY) {
                self.cfg.stats.publish(c);
            }
        }
    }

    /// Final counters, and anything still queued for output freed.
    fn stop(mut self) {
        self.cfg.stats.publish(&self.c);
        let reading = self.pmu.sample(self.ns(), self.c.rx_packets);
        self.cfg.stats.pmu.publish(&reading);
        self.element.flush(&mut self.pool);
        self.element.settle_all_outputs();
        // The cache's frames go back to the shared free list.
        drop(self.pool);
        self.cfg
            .stats
            .pool_cached
            .store(0, std::sync::atomic::Ordering::Relaxed);
        tracing::debug!("pmd {} stopped", self.cfg.index);
    }
}
