//! Rx queue balancing on the node's side ([`crate::balance`] holds the
//! state and the decisions): the thread that ends each interval and runs
//! the automatic check, and the requests `show rxqs`, `pmd-rebalance` and
//! `pmd-rxq-move`.

use crate::balance::Balancer;
use crate::error::RequestError;
use crate::node::Node;
use crate::protocol::{RebalanceReport, RxqMove, RxqReport, RxqsPmd, RxqsReport};
use nfv_sched::INTERVALS;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

impl Balancer {
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
