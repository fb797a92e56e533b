//! The CPUs this process may run on: its affinity mask, not the
//! machine's CPU count. Under `taskset -c 1`, in a container with a
//! cpuset, or beside a VNF given cores 0-5, the switch may only pin PMDs
//! to the CPUs it was given — and CPU 1 is valid there even though the
//! process sees only one CPU.

use std::fmt;

/// A set of CPU ids, ascending, never empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuSet {
    ids: Vec<usize>,
}

impl CpuSet {
    /// The CPUs in this process's affinity mask (`sched_getaffinity`);
    /// CPUs `0..available_parallelism` when the mask cannot be read.
    pub fn of_this_process() -> CpuSet {
        use nix::sched::{CpuSet as Mask, sched_getaffinity};
        let from_mask = sched_getaffinity(nix::unistd::Pid::from_raw(0))
            .ok()
            .map(|m| {
                (0..Mask::count())
                    .filter(|&c| m.is_set(c).unwrap_or(false))
                    .collect::<Vec<_>>()
            });
        match from_mask {
            Some(ids) if !ids.is_empty() => CpuSet { ids },
            _ => CpuSet::first(std::thread::available_parallelism().map_or(1, |n| n.get())),
        }
    }

    /// CPUs `0..n` (at least CPU 0): a machine of `n` CPUs, all allowed.
    pub fn first(n: usize) -> CpuSet {
        CpuSet {
            ids: (0..n.max(1)).collect(),
        }
    }

    /// The given CPUs (sorted, duplicates dropped); `None` when empty.
    pub fn from_ids(ids: impl IntoIterator<Item = usize>) -> Option<CpuSet> {
        let mut ids: Vec<usize> = ids.into_iter().collect();
        ids.sort_unstable();
        ids.dedup();
        (!ids.is_empty()).then_some(CpuSet { ids })
    }

    pub fn contains(&self, cpu: usize) -> bool {
        self.ids.binary_search(&cpu).is_ok()
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Never true: a process runs on at least one CPU.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The ids, ascending.
    pub fn ids(&self) -> &[usize] {
        &self.ids
    }

    /// The highest allowed CPU (where the default PMD runs: VNFs and the
    /// system tend to start from CPU 0).
    pub fn last(&self) -> usize {
        self.ids[self.ids.len() - 1]
    }
}

impl From<usize> for CpuSet {
    /// A machine of `n` CPUs, all allowed (tests and tools that size a
    /// config for another machine).
    fn from(n: usize) -> CpuSet {
        CpuSet::first(n)
    }
}

impl fmt::Display for CpuSet {
    /// The form `taskset -c` takes: `0-3,6,8-9`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut i = 0;
        let mut first = true;
        while i < self.ids.len() {
            let start = self.ids[i];
            let mut end = start;
            while i + 1 < self.ids.len() && self.ids[i + 1] == end + 1 {
                i += 1;
                end += 1;
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if end == start {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
            i += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_as_taskset_takes_it() {
        let cases: &[(&[usize], &str)] = &[
            (&[0], "0"),
            (&[1], "1"),
            (&[0, 1, 2, 3], "0-3"),
            (&[0, 1, 2, 3, 6, 8, 9], "0-3,6,8-9"),
            (&[5, 3, 4, 3], "3-5"),
        ];
        for (ids, want) in cases {
            let s = CpuSet::from_ids(ids.iter().copied()).unwrap();
            assert_eq!(s.to_string(), *want, "{ids:?}");
        }
        assert_eq!(CpuSet::from_ids([]), None);
    }

    #[test]
    fn membership_and_last() {
        let s = CpuSet::from_ids([1, 3]).unwrap();
        assert!(s.contains(1) && s.contains(3));
        assert!(!s.contains(0) && !s.contains(2));
        assert_eq!(s.last(), 3);
        assert_eq!(CpuSet::from(4).last(), 3);
        assert_eq!(CpuSet::from(0).ids(), &[0]);
    }

    #[test]
    fn this_process_runs_on_its_own_set() {
        let s = CpuSet::of_this_process();
        assert!(!s.is_empty());
        let me = nix::sched::sched_getcpu().expect("sched_getcpu");
        assert!(s.contains(me), "running on CPU {me}, outside {s}");
    }
}
