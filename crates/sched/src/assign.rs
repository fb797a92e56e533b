//! The three placement algorithms, and the load arithmetic of a placement.

use crate::types::{Pmd, RxqId, RxqLoad};
use serde::Serialize;
use std::collections::BTreeMap;

/// Rx queue → PMD index.
pub type Placement = BTreeMap<RxqId, usize>;

/// How rx queues are placed on PMDs (OVS's `pmd-rxq-assign`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Algorithm {
    /// In port and queue order, one PMD after the other; loads ignored.
    RoundRobin,
    /// Busiest queue first, dealt to PMDs in core order up then down
    /// (3, 7, 8, 8, 7, 3, …): the busiest queues land on different PMDs
    /// and each PMD gets as many queues as the others, give or take one.
    #[default]
    Cycles,
    /// Busiest queue first, each to the PMD with the lowest estimated load
    /// so far (then the fewest queues, then core order): the best balance
    /// of load, with no rule on queue counts.
    Group,
}

impl Algorithm {
    pub const NAMES: &[&str] = &["roundrobin", "cycles", "group"];

    pub fn name(self) -> &'static str {
        match self {
            Algorithm::RoundRobin => "roundrobin",
            Algorithm::Cycles => "cycles",
            Algorithm::Group => "group",
        }
    }
}

impl std::str::FromStr for Algorithm {
    type Err = String;
    fn from_str(s: &str) -> Result<Algorithm, String> {
        match s {
            "roundrobin" => Ok(Algorithm::RoundRobin),
            "cycles" => Ok(Algorithm::Cycles),
            "group" => Ok(Algorithm::Group),
            _ => Err(format!(
                "{s:?} is not an rx queue assignment ({})",
                Algorithm::NAMES.join(", ")
            )),
        }
    }
}

/// `pmds` in the order placement walks them: pinned by core, then the
/// unpinned by index.
fn walk_order(pmds: &[Pmd]) -> Vec<usize> {
    let mut order: Vec<&Pmd> = pmds.iter().collect();
    order.sort_by_key(|p| (p.core.is_none(), p.core, p.index));
    order.iter().map(|p| p.index).collect()
}

/// Busiest first; equal loads in port and queue order.
fn by_load(rxqs: &[RxqLoad]) -> Vec<RxqLoad> {
    let mut v = rxqs.to_vec();
    v.sort_by(|a, b| b.cycles.cmp(&a.cycles).then(a.id.cmp(&b.id)));
    v
}

/// Places `rxqs` on `pmds` with `algo`. Empty when there are no PMDs.
pub fn assign(algo: Algorithm, pmds: &[Pmd], rxqs: &[RxqLoad]) -> Placement {
    let order = walk_order(pmds);
    let n = order.len();
    let mut out = Placement::new();
    if n == 0 {
        return out;
    }
    match algo {
        Algorithm::RoundRobin => {
            let mut ids: Vec<RxqId> = rxqs.iter().map(|r| r.id).collect();
            ids.sort();
            for (i, id) in ids.into_iter().enumerate() {
                out.insert(id, order[i % n]);
            }
        }
        Algorithm::Cycles => {
            for (i, r) in by_load(rxqs).into_iter().enumerate() {
                // Up then down: 0, 1, …, n-1, n-1, …, 1, 0, 0, 1, …
                let k = i % (2 * n);
                let pos = if k < n { k } else { 2 * n - 1 - k };
                out.insert(r.id, order[pos]);
            }
        }
        Algorithm::Group => {
            // (estimated cycles, queues) per position in walk order.
            let mut est = vec![(0u64, 0usize); n];
            for r in by_load(rxqs) {
                let pos = (0..n)
                    .min_by_key(|&i| (est[i].0, est[i].1, i))
                    .expect("n > 0");
                est[pos].0 += r.cycles;
                est[pos].1 += 1;
                out.insert(r.id, order[pos]);
            }
        }
    }
    out
}

/// Each PMD's load under `placement`, in percent of `window` cycles (the
/// sum of its queues' cycles; a queue the placement does not know is
/// left out). Indexed like `pmds`.
pub fn pmd_loads(pmds: &[Pmd], rxqs: &[RxqLoad], placement: &Placement, window: u64) -> Vec<f64> {
    pmds.iter()
        .map(|p| {
            let sum: u64 = rxqs
                .iter()
                .filter(|r| placement.get(&r.id) == Some(&p.index))
                .map(|r| r.cycles)
                .sum();
            if window == 0 {
                0.0
            } else {
                100.0 * sum as f64 / window as f64
            }
        })
        .collect()
}

/// Population variance of `loads`.
pub fn variance(loads: &[f64]) -> f64 {
    if loads.is_empty() {
        return 0.0;
    }
    let n = loads.len() as f64;
    let mean = loads.iter().sum::<f64>() / n;
    loads.iter().map(|l| (l - mean) * (l - mean)).sum::<f64>() / n
}

/// The queues whose PMD differs between `from` and `to`: (queue, old PMD,
/// new PMD), in queue order. Queues only in `to` are not moves.
pub fn moves(from: &Placement, to: &Placement) -> Vec<(RxqId, usize, usize)> {
    to.iter()
        .filter_map(|(id, &new)| match from.get(id) {
            Some(&old) if old != new => Some((*id, old, new)),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// OVS's documented example: cores 3, 7 and 8 (the PMDs are listed
    /// out of core order on purpose: placement walks by core).
    fn ovs_cores() -> Vec<Pmd> {
        [(0, 7), (1, 3), (2, 8)]
            .map(|(index, core)| Pmd {
                index,
                core: Some(core),
            })
            .to_vec()
    }

    fn core_of(pmds: &[Pmd], index: usize) -> usize {
        pmds.iter()
            .find(|p| p.index == index)
            .unwrap()
            .core
            .unwrap()
    }

    /// Queues of port 0 with the given loads (percent as cycles).
    fn queues(loads: &[(usize, u64)]) -> Vec<RxqLoad> {
        loads
            .iter()
            .map(|&(queue, cycles)| RxqLoad {
                id: RxqId { port: 0, queue },
                cycles,
            })
            .collect()
    }

    /// The placement as "core: queues in assignment order", like OVS's
    /// documentation shows it.
    fn by_core(pmds: &[Pmd], rxqs: &[RxqLoad], p: &Placement) -> Vec<(usize, Vec<String>)> {
        let mut cores: BTreeMap<usize, Vec<String>> = BTreeMap::new();
        for r in by_load(rxqs) {
            let core = core_of(pmds, p[&r.id]);
            cores
                .entry(core)
                .or_default()
                .push(format!("P{}Q{}", r.id.port, r.id.queue));
        }
        cores.into_iter().collect()
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn cycles_reproduces_the_ovs_documentation_example() {
        // Queue #0: 30%, #1: 80%, #3: 60%, #4: 70%, #5: 10%
        let pmds = ovs_cores();
        let rxqs = queues(&[(0, 30), (1, 80), (3, 60), (4, 70), (5, 10)]);
        let p = assign(Algorithm::Cycles, &pmds, &rxqs);
        assert_eq!(
            by_core(&pmds, &rxqs, &p),
            [
                (3, names(&["P0Q1"])),
                (7, names(&["P0Q4", "P0Q5"])),
                (8, names(&["P0Q3", "P0Q0"])),
            ]
        );
    }

    #[test]
    fn group_reproduces_the_ovs_documentation_example() {
        // Queue #0: 10%, #1: 80%, #3: 50%, #4: 70%, #5: 10%
        let pmds = ovs_cores();
        let rxqs = queues(&[(0, 10), (1, 80), (3, 50), (4, 70), (5, 10)]);
        let p = assign(Algorithm::Group, &pmds, &rxqs);
        assert_eq!(
            by_core(&pmds, &rxqs, &p),
            [
                (3, names(&["P0Q1"])),
                (7, names(&["P0Q4"])),
                (8, names(&["P0Q3", "P0Q0", "P0Q5"])),
            ]
        );
    }

    #[test]
    fn roundrobin_reproduces_the_ovs_documentation_example() {
        // P0Q0, P0Q1, P1Q0, P1Q1, P1Q2 → 3: P0Q0 P1Q1; 7: P0Q1 P1Q2; 8: P1Q0
        let pmds = ovs_cores();
        let ids = [(1, 2), (0, 1), (1, 0), (0, 0), (1, 1)];
        let rxqs: Vec<RxqLoad> = ids
            .iter()
            .map(|&(port, queue)| RxqLoad {
                id: RxqId { port, queue },
                // Loads do not matter to roundrobin.
                cycles: (port as u64 + 1) * 1000 - queue as u64,
            })
            .collect();
        let p = assign(Algorithm::RoundRobin, &pmds, &rxqs);
        let on = |port, queue| core_of(&pmds, p[&RxqId { port, queue }]);
        assert_eq!(
            [on(0, 0), on(0, 1), on(1, 0), on(1, 1), on(1, 2)],
            [3, 7, 8, 3, 7]
        );
    }

    #[test]
    fn cycles_keeps_queue_counts_even_where_group_balances_load() {
        let pmds = ovs_cores()[..2].to_vec();
        // One heavy queue and three light ones.
        let rxqs = queues(&[(0, 90), (1, 10), (2, 10), (3, 10)]);
        let count = |p: &Placement, pmd| p.values().filter(|&&v| v == pmd).count();
        let c = assign(Algorithm::Cycles, &pmds, &rxqs);
        assert_eq!((count(&c, 0), count(&c, 1)), (2, 2));
        let g = assign(Algorithm::Group, &pmds, &rxqs);
        let heavy = g[&RxqId { port: 0, queue: 0 }];
        assert_eq!(count(&g, heavy), 1, "the heavy queue has a PMD to itself");
        let loads = |p| pmd_loads(&pmds, &rxqs, p, 100);
        assert!(variance(&loads(&g)) < variance(&loads(&c)));
    }

    #[test]
    fn no_pmds_no_placement_and_unpinned_pmds_walk_last() {
        assert!(assign(Algorithm::Cycles, &[], &queues(&[(0, 1)])).is_empty());
        let pmds = [
            Pmd {
                index: 0,
                core: None,
            },
            Pmd {
                index: 1,
                core: Some(5),
            },
        ];
        let p = assign(Algorithm::RoundRobin, &pmds, &queues(&[(0, 0), (1, 0)]));
        assert_eq!(p.values().copied().collect::<Vec<_>>(), [1, 0]);
    }

    #[test]
    fn loads_variance_and_moves() {
        let pmds = ovs_cores();
        let rxqs = queues(&[(0, 30), (1, 60)]);
        let from: Placement = [(rxqs[0].id, 0), (rxqs[1].id, 0)].into();
        let to: Placement = [(rxqs[0].id, 0), (rxqs[1].id, 2)].into();
        assert_eq!(pmd_loads(&pmds, &rxqs, &from, 100), [90.0, 0.0, 0.0]);
        assert_eq!(pmd_loads(&pmds, &rxqs, &to, 200), [15.0, 0.0, 30.0]);
        assert_eq!(variance(&[90.0, 0.0, 0.0]), 1800.0);
        assert_eq!(variance(&[]), 0.0);
        assert_eq!(moves(&from, &to), [(rxqs[1].id, 0, 2)]);
        assert!("cycles".parse::<Algorithm>() == Ok(Algorithm::Cycles));
        assert!(
            "rr".parse::<Algorithm>()
                .unwrap_err()
                .contains("roundrobin, cycles, group")
        );
    }
}
