//! The published flow table: the control plane edits a private copy and
//! publishes it atomically; PMD threads read the current snapshot without
//! locks. A version counter lets a PMD notice a change with one relaxed
//! load per poll iteration and flush its exact-match cache.
//!
//! Thread safety: [`SharedFlowTable`] is `Sync`. Writers serialise among
//! themselves with a mutex (control plane only); readers never block.

use crate::classifier::Classifier;
use crate::parse::FlowFilter;
use crate::rule::{FlowSpec, Rule};
use arc_swap::ArcSwap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// One immutable generation of the rule set.
#[derive(Debug, Default)]
pub struct FlowTable {
    pub version: u64,
    pub classifier: Classifier,
}

#[derive(Debug)]
pub struct SharedFlowTable {
    current: ArcSwap<FlowTable>,
    version: AtomicU64,
    /// Serialises writers; holds the next rule sequence number.
    writer: Mutex<u64>,
}

impl Default for SharedFlowTable {
    fn default() -> Self {
        Self::new()
    }
}

impl SharedFlowTable {
    pub fn new() -> Self {
        SharedFlowTable {
            current: ArcSwap::from_pointee(FlowTable::default()),
            version: AtomicU64::new(0),
            writer: Mutex::new(0),
        }
    }

    /// Cheap change detector for PMD threads.
    #[inline(always)]
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// The current snapshot (an `Arc` clone: call once per version change,
    /// not per packet).
    pub fn snapshot(&self) -> Arc<FlowTable> {
        self.current.load_full()
    }

    fn edit<R>(&self, f: impl FnOnce(&mut Classifier, &mut u64) -> R) -> R {
        let mut seq = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let old = self.current.load_full();
        let mut classifier = old.classifier.clone();
        let r = f(&mut classifier, &mut seq);
        let version = old.version + 1;
        self.current.store(Arc::new(FlowTable {
            version,
            classifier,
        }));
        self.version.store(version, Ordering::Release);
        r
    }

    /// Adds (or replaces, if match and priority are identical) rules, all in
    /// one new generation.
    pub fn add_flows(&self, specs: impl IntoIterator<Item = FlowSpec>) {
        self.edit(|c, seq| {
            for spec in specs {
                *seq += 1;
                c.insert(Arc::new(Rule::new(spec, *seq)));
            }
        })
    }

    /// Deletes rules selected by `filter` (all rules for the default filter);
    /// returns how many were removed.
    pub fn del_flows(&self, filter: &FlowFilter) -> usize {
        self.edit(|c, _| c.remove_matching(filter))
    }
}
