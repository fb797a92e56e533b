//! A poll-mode driver (PMD) thread: pinned to one core, it polls its rx
//! queues forever, runs the forwarding element on each received batch and
//! flushes outputs. It never blocks, parses text or takes a control-plane
//! lock; the control plane talks to it only through typed commands
//! ([`PmdCommand`]) that it picks up between iterations.

use crate::dispatch::Dispatch;
use crate::mac_learning::MacTable;
use crate::stats::{PmdCounters, PmdStats};
use crossbeam_channel::{Receiver, Sender};
use nfv_flow::PortNo;
use nfv_flow::table::SharedFlowTable;
use nfv_mem::{Batch, PacketPool};
use nfv_pmu::{CounterSource, PerfSource, PmuSampler};
use nfv_ports::{PortStats, RxQueue, TxQueue};
use std::sync::Arc;
use std::time::Instant;

/// Iterations between looks at the command channel and the table version.
const HOUSEKEEPING_EVERY: u64 = 16;

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
    /// Forget everything about `port`; acknowledge on `ack`.
    DelPort {
        port: PortNo,
        ack: Sender<()>,
    },
    /// Zero this PMD's counters (like `pmd-stats-clear`).
    ClearStats,
    /// Open (true) or close (false) this PMD's PMU counters.
    SetPmu(bool),
    Quit,
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
    pub pmu: bool,
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
    pub fn run(self) {
        if let Some(core) = self.core {
            match pin_to_core(core) {
                Ok(()) => tracing::info!("pmd {} pinned to core {core}", self.index),
                Err(e) => tracing::warn!("pmd {}: cannot pin to core {core}: {e}", self.index),
            }
        }
        let mut pool = self.pool.cache();
        let mut dispatch = Dispatch::new(self.emc_entries, self.table.snapshot(), self.mac.clone());
        let mut rxqs: Vec<PolledRxq> = Vec::new();
        let mut batch = Batch::new();
        let mut c = PmdCounters::default();
        let started = Instant::now();
        let ns = || started.elapsed().as_nanos() as u64;
        let mut pmu = PmuSampler::new(pmu_source(self.pmu, self.index), ns());
        let pmu_period = nfv_tsc::hz() / PMU_READS_PER_SEC;
        let mut pmu_due = 0u64;

        loop {
            if c.iterations % HOUSEKEEPING_EVERY == 0 {
                let mut quit = false;
                while let Ok(cmd) = self.commands.try_recv() {
                    match cmd {
                        PmdCommand::AddRxq {
                            port,
                            qid,
                            rxq,
                            stats,
                        } => rxqs.push(PolledRxq {
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
                        } => dispatch.add_tx(port, txq, stats, qid),
                        PmdCommand::DelPort { port, ack } => {
                            rxqs.retain(|q| q.port != port);
                            dispatch.del_tx(port, Some(&mut pool));
                            let _ = ack.send(());
                        }
                        PmdCommand::ClearStats => {
                            c = PmdCounters::default();
                            self.stats.publish(&c);
                            pmu.clear(ns());
                            pmu_due = 0;
                        }
                        PmdCommand::SetPmu(on) => {
                            if on != pmu.enabled() {
                                pmu.set_source(pmu_source(on, self.index), ns());
                                pmu_due = 0;
                            }
                        }
                        PmdCommand::Quit => quit = true,
                    }
                }
                if quit {
                    break;
                }
                if let Some(t) = self.table.snapshot_if_newer(dispatch.table_version()) {
                    dispatch.set_table(t);
                }
                dispatch.now_secs = started.elapsed().as_secs() as u32;
                self.stats
                    .pool_cached
                    .store(pool.cached() as u64, std::sync::atomic::Ordering::Relaxed);
                let now = nfv_tsc::now();
                if now >= pmu_due {
                    pmu_due = now + pmu_period;
                    self.stats.pmu.publish(&pmu.sample(ns(), c.rx_packets));
                }
            }

            let t_start = nfv_tsc::now();
            let mut t = t_start;
            let mut got = 0usize;
            let mut port_cycles = 0u64;
            for q in rxqs.iter_mut() {
                let n = q.rxq.rx_burst(&mut batch, &mut pool);
                let t_rx = nfv_tsc::now();
                if n == 0 {
                    t = t_rx;
                    continue;
                }
                port_cycles += t_rx - t;
                got += n;
                dispatch.process(q.port, &q.stats.rx[q.qid], &mut batch, &mut pool, &mut c);
                let t_tx = nfv_tsc::now();
                dispatch.flush(&mut pool);
                t = nfv_tsc::now();
                port_cycles += t - t_tx;
            }
            c.iterations += 1;
            if got > 0 {
                c.busy_iterations += 1;
                c.busy_cycles += t - t_start;
                c.port_cycles += port_cycles;
                c.rx_packets += got as u64;
                self.stats.publish(&c);
            } else {
                c.idle_cycles += t - t_start;
                if c.iterations % HOUSEKEEPING_EVERY == 0 {
                    self.stats.publish(&c);
                }
            }
        }
        self.stats.publish(&c);
        self.stats.pmu.publish(&pmu.sample(ns(), c.rx_packets));
        // Free anything still queued for output before the thread ends.
        dispatch.flush(&mut pool);
        drop(pool);
        self.stats
            .pool_cached
            .store(0, std::sync::atomic::Ordering::Relaxed);
        tracing::debug!("pmd {} stopped", self.index);
    }
}
