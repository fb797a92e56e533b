//! Tuple-space-search classifier. (Stub: being implemented.)

use crate::key::FlowKey;
use crate::parse::FlowFilter;
use crate::rule::Rule;
use std::sync::Arc;

#[derive(Clone, Default, Debug)]
pub struct Classifier {
    rules: Vec<Arc<Rule>>,
}

impl Classifier {
    pub fn new() -> Self {
        Self::default()
    }
    /// Inserts `rule`; a rule with the same match and priority is replaced
    /// and returned (OpenFlow add-flow semantics).
    pub fn insert(&mut self, _rule: Arc<Rule>) -> Option<Arc<Rule>> {
        todo!()
    }
    /// Removes rules selected by `filter`; returns how many.
    pub fn remove_matching(&mut self, _filter: &FlowFilter) -> usize {
        todo!()
    }
    /// Highest-priority rule matching `key` (older rule wins a tie).
    pub fn lookup(&self, _key: &FlowKey) -> Option<&Arc<Rule>> {
        todo!()
    }
    /// All rules, highest priority first (dump-flows order).
    pub fn rules(&self) -> Vec<Arc<Rule>> {
        todo!()
    }
    pub fn len(&self) -> usize {
        self.rules.len()
    }
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}
