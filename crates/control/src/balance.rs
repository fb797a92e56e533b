//! Rx queue balancing on a running node: the load history (every
//! `pmd.load_interval_s`, [`nfv_sched::History`]), `show rxqs`,
//! `pmd-rebalance`, `pmd-rxq-move`, and automatic rebalancing
//! ([`nfv_sched::AutoLb`]) checked at the end of each interval.
//!
//! The decisions are `nfv_sched`'s; this module feeds them the datapath's
//! counters and applies what they decide with [`Datapath::move_rxq`]
//! (one queue at a time, no packet lost). Every automatic decision that
//! moves queues, or that had a dry run, is logged with its variances.
//!
//! This module is the balancing state ([`Balancer`]) and what it does
//! with a datapath; the thread and the requests, which take the node, are
//! `rebalance.rs`, above the node.

use nfv_datapath::Datapath;
use nfv_sched::{AutoLb, Decision, History, INTERVALS, Placement, RxqId, RxqLoad, Skip};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The node's balancing state.
pub(crate) struct Balancer {
    pub algorithm: nfv_sched::Algorithm,
    pub interval: Duration,
    state: Mutex<State>,
    pub(crate) stop: AtomicBool,
    started: Instant,
}

pub(crate) struct State {
    pub(crate) history: History,
    pub(crate) autolb: AutoLb,
    /// The last automatic check's outcome, for `show rxqs`.
    pub(crate) last_decision: Option<String>,
    pub(crate) rebalances: u64,
}

impl Balancer {
    pub fn new(cfg: &nfv_config::PmdConfig) -> Balancer {
        Balancer {
            algorithm: cfg.rxq_assign,
            interval: Duration::from_secs(cfg.load_interval_s),
            state: Mutex::new(State {
                history: History::new(),
                autolb: AutoLb::new(cfg.auto_lb),
                last_decision: None,
                rebalances: 0,
            }),
            stop: AtomicBool::new(false),
            started: Instant::now(),
        }
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    pub(crate) fn now_s(&self) -> u64 {
        self.started.elapsed().as_secs()
    }

    /// An interval ended: its cycles go into the history and the
    /// auto-balancer's overload counts.
    pub(crate) fn sample(&self, dp: &Datapath) {
        let rxqs: Vec<(RxqId, u64)> = dp
            .rxq_cycles()
            .into_iter()
            .map(|(id, _, c)| (id, c))
            .collect();
        let pmds: Vec<(usize, u64, u64)> = dp
            .pmd_views()
            .iter()
            .map(|p| {
                let s = &p.stats;
                (p.index, s.busy_cycles, s.busy_cycles + s.idle_cycles)
            })
            .collect();
        let mut st = self.state();
        st.history.sample(&rxqs, &pmds);
        if st.history.intervals() > 0 {
            let busy = st.history.pmd_busy(1);
            st.autolb.interval_done(&busy);
        }
    }

    /// The measured loads: the history's, or the cumulative counters
    /// when no interval has ended yet.
    pub(crate) fn loads(&self, st: &State, dp: &Datapath) -> (Vec<RxqLoad>, u64, Placement) {
        let now = dp.rxq_cycles();
        let current: Placement = now.iter().map(|&(id, pmd, _)| (id, pmd)).collect();
        if st.history.intervals() > 0 {
            let loads = st.history.rxq_loads(INTERVALS);
            let window = st.history.window(INTERVALS);
            return (loads, window, current);
        }
        let loads = now
            .iter()
            .map(|&(id, _, cycles)| RxqLoad { id, cycles })
            .collect();
        let window = dp
            .pmd_views()
            .iter()
            .map(|p| p.stats.busy_cycles + p.stats.idle_cycles)
            .max()
            .unwrap_or(0);
        (loads, window, current)
    }

    pub(crate) fn auto_check(&self, dp: &Datapath) {
        let mut st = self.state();
        let (loads, window, current) = self.loads(&st, dp);
        let pmds = dp.sched_pmds();
        let now = self.now_s();
        let d = st
            .autolb
            .decide(now, self.algorithm, &pmds, &loads, &current, window);
        let text = d.to_string();
        match &d {
            Decision::Rebalance(run) => {
                tracing::info!("pmd auto load balance: {text}");
                match dp.apply_placement(&run.placement) {
                    Ok(_) => st.rebalances += 1,
                    Err(e) => tracing::warn!("pmd auto load balance: moving queues failed: {e}"),
                }
            }
            Decision::Skip(Skip::SmallImprovement { .. } | Skip::NoMoves) => {
                tracing::info!("pmd auto load balance: {text}")
            }
            Decision::Skip(_) => tracing::debug!("pmd auto load balance: {text}"),
        }
        st.last_decision = Some(text);
    }
}
