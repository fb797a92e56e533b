//! Rx queue balancing on a running node: the load history (every
//! `pmd.load_interval_s`, [`nfv_sched::History`]), `show rxqs`,
//! `pmd-rebalance`, `pmd-rxq-move`, and automatic rebalancing
//! ([`nfv_sched::AutoLb`]) checked at the end of each interval.
//!
//! The decisions are `nfv_sched`'s; this module feeds them the datapath's
//! counters and applies what they decide with [`Datapath::move_rxq`]
//! (one queue at a time, no packet lost). Every automatic decision that
//! moves queues, or that had a dry run, is logged with its variances.

use crate::error::RequestError;
use crate::node::Node;
use crate::protocol::{RebalanceReport, RxqMove, RxqReport, RxqsPmd, RxqsReport};
use nfv_datapath::Datapath;
use nfv_sched::{AutoLb, Decision, History, INTERVALS, Placement, RxqId, RxqLoad, Skip};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

/// The node's balancing state.
pub(crate) struct Balancer {
    pub algorithm: nfv_sched::Algorithm,
    pub interval: Duration,
    state: Mutex<State>,
    stop: AtomicBool,
    started: Instant,
}

struct State {
    history: History,
    autolb: AutoLb,
    /// The last automatic check's outcome, for `show rxqs`.
    last_decision: Option<String>,
    rebalances: u64,
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

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    fn now_s(&self) -> u64 {
        self.started.elapsed().as_secs()
    }

    /// Samples every interval and runs the automatic check, until the
    /// node is dropped or stopped.
    pub fn start(node: &Arc<Node>) {
        let weak: Weak<Node> = Arc::downgrade(node);
        let interval = node.balancer.interval;
        let _ = std::thread::Builder::new()
            .name("rxq-balance".into())
            .spawn(move || {
                {
                    let Some(node) = weak.upgrade() else { return };
                    node.balancer.sample(node.datapath());
                }
                loop {
                    // Short sleeps, so a stopped node is let go quickly.
                    let until = Instant::now() + interval;
                    while Instant::now() < until {
                        std::thread::sleep(Duration::from_millis(100).min(interval));
                        let Some(node) = weak.upgrade() else { return };
                        if node.balancer.stop.load(Ordering::Relaxed) {
                            return;
                        }
                    }
                    let Some(node) = weak.upgrade() else { return };
                    node.balancer.sample(node.datapath());
                    node.balancer.auto_check(node.datapath());
                }
            });
    }

    /// An interval ended: its cycles go into the history and the
    /// auto-balancer's overload counts.
    fn sample(&self, dp: &Datapath) {
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
    fn loads(&self, st: &State, dp: &Datapath) -> (Vec<RxqLoad>, u64, Placement) {
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

    fn auto_check(&self, dp: &Datapath) {
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

impl Node {
    /// `show rxqs`: each PMD's busy share and each of its queues' share of
    /// its cycles over the history (OVS `pmd-rxq-show`).
    pub fn show_rxqs(&self) -> RxqsReport {
        let b = &self.balancer;
        let st = b.state();
        let dp = &self.datapath;
        let (loads, window, current) = b.loads(&st, dp);
        let names: BTreeMap<u16, String> = dp
            .port_views()
            .iter()
            .map(|v| (v.no, v.port.name().to_string()))
            .collect();
        let busy: BTreeMap<usize, f64> = st.history.pmd_busy(INTERVALS).into_iter().collect();
        let share = |c: u64| {
            if window == 0 {
                0.0
            } else {
                100.0 * c as f64 / window as f64
            }
        };
        let pmds = dp
            .sched_pmds()
            .iter()
            .map(|p| RxqsPmd {
                pmd: p.index,
                core: p.core,
                busy_percent: busy.get(&p.index).copied(),
                rxqs: loads
                    .iter()
                    .filter(|r| current.get(&r.id) == Some(&p.index))
                    .map(|r| RxqReport {
                        port: r.id.port,
                        name: names.get(&r.id.port).cloned().unwrap_or_default(),
                        queue: r.id.queue,
                        usage_percent: share(r.cycles),
                    })
                    .collect(),
            })
            .collect();
        RxqsReport {
            algorithm: b.algorithm.name().to_string(),
            interval_secs: b.interval.as_secs(),
            intervals: st.history.intervals(),
            auto_lb: st.autolb.cfg.enabled,
            auto_lb_rebalances: st.rebalances,
            last_auto_lb: st.last_decision.clone(),
            pmds,
        }
    }

    /// `pmd-rebalance`: places every queue again with the configured
    /// algorithm over the measured loads (`dry_run`: only says what
    /// would move).
    pub fn pmd_rebalance(&self, dry_run: bool) -> Result<RebalanceReport, RequestError> {
        let b = &self.balancer;
        let mut st = b.state();
        let dp = &self.datapath;
        let (loads, window, current) = b.loads(&st, dp);
        let run = nfv_sched::dry_run(b.algorithm, &dp.sched_pmds(), &loads, &current, window);
        let names: BTreeMap<u16, String> = dp
            .port_views()
            .iter()
            .map(|v| (v.no, v.port.name().to_string()))
            .collect();
        if !dry_run && !run.moves.is_empty() {
            dp.apply_placement(&run.placement)?;
            let now = b.now_s();
            st.autolb.rebalanced(now);
        }
        Ok(RebalanceReport {
            algorithm: b.algorithm.name().to_string(),
            dry_run,
            moves: run
                .moves
                .iter()
                .map(|&(id, from, to)| RxqMove {
                    port: id.port,
                    name: names.get(&id.port).cloned().unwrap_or_default(),
                    queue: id.queue,
                    from,
                    to,
                })
                .collect(),
            current_loads: run.current_loads,
            estimated_loads: run.estimated_loads,
            current_variance: run.current_variance,
            estimated_variance: run.estimated_variance,
            improvement_percent: run.improvement,
        })
    }

    /// `pmd-rxq-move PORT QUEUE PMD`: one queue by hand.
    pub fn move_rxq(&self, port: &str, queue: usize, pmd: usize) -> Result<(), RequestError> {
        let dp = &self.datapath;
        let no = dp
            .resolve_port(port)
            .ok_or_else(|| RequestError::NoSuchPort(port.to_string()))?;
        dp.move_rxq(no, queue, pmd)?;
        self.balancer
            .state()
            .autolb
            .rebalanced(self.balancer.now_s());
        Ok(())
    }
}
