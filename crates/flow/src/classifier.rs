//! Tuple-space-search classifier: the rule set behind the exact-match
//! cache.
//!
//! Rules are grouped into subtables by mask. A subtable is a hash map from
//! masked key to the rules with exactly that match (at most one per
//! priority, sorted by priority, highest first). A lookup masks the packet
//! key with each subtable's mask and probes that subtable's map once, so
//! its cost is one hash probe per distinct mask visited — independent of
//! how many rules share a mask.
//!
//! Subtables are kept sorted by their best possible rule, `(max priority,
//! lowest seq among rules of that priority)`, and a lookup stops as soon as
//! the best rule found so far beats the next subtable's bound: with
//! distinct priorities this is "found priority >= next max priority"; the
//! seq part keeps the older-rule-wins tie rule exact when equal-priority
//! rules live in different subtables, while still pruning.
//!
//! Staged lookup (OVS's): a probe that misses still tells the megaflow
//! cache which bits the miss depended on, and the whole mask is more than
//! it needs. Each subtable also keeps, per stage of its mask (metadata,
//! then L2, then L3: [`crate::key::STAGE_PREFIXES`]), the prefixes its
//! rules have there. A packet whose prefix at some stage no rule has
//! misses on the fields up to that stage alone, and only those join the
//! megaflow's mask. Behind 5-tuple rules for some clients, the traffic of
//! every other source address then shares one megaflow per address
//! instead of needing one per connection. Stages are only walked after a
//! miss, and only when the mask is asked for; a stage with one prefix
//! (all the subtable's rules agree there) is a compare, not a hash probe.
//!
//! Thread safety: a `Classifier` is plain data, edited by one writer on a
//! private copy (see [`crate::table`]) and read concurrently only through
//! shared references. Subtables are shared between copies and copied on
//! write: a clone costs an `Arc` per subtable, and an edit copies only the
//! subtables it changes. So a rule added to or deleted from one mask
//! leaves every other subtable of the next generation the very memory the
//! PMDs have warm in their caches (a full copy made each table change
//! cost the PMDs ~700k cycles of cold misses behind 1,000 exact rules).

use crate::key::{FlowKey, PortNo, STAGE_PREFIXES};
use crate::parse::FlowFilter;
use crate::rule::{Match, Rule};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::Arc;

/// A key already masked with its subtable's mask. Hashes with
/// [`FlowKey::hash`], fed through [`PassThrough`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct MaskedKey(pub(crate) FlowKey);

impl Hash for MaskedKey {
    #[inline(always)]
    fn hash<H: Hasher>(&self, state: &mut H) {
        // The map takes bucket bits from the low end and tag bits from the
        // high end: repeat the 32-bit hash in both halves.
        let h = u64::from(self.0.hash());
        state.write_u64(h << 32 | h);
    }
}

impl Hash for crate::key::BaseKey {
    #[inline(always)]
    fn hash<H: Hasher>(&self, state: &mut H) {
        let h = u64::from(crate::key::BaseKey::hash(self));
        state.write_u64(h << 32 | h);
    }
}

impl Hash for crate::key::AddrKey {
    #[inline(always)]
    fn hash<H: Hasher>(&self, state: &mut H) {
        let h = u64::from(crate::key::AddrKey::hash(self));
        state.write_u64(h << 32 | h);
    }
}

/// Hasher that passes a pre-computed hash through.
#[derive(Default, Clone, Copy)]
pub(crate) struct PassThrough(u64);

impl Hasher for PassThrough {
    #[inline(always)]
    fn finish(&self) -> u64 {
        self.0
    }
    #[inline(always)]
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
    /// Only reached if a type other than [`MaskedKey`] is hashed; FNV-1a
    /// keeps that correct.
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }
}

/// What [`Classifier::lookup_with_mask`] found.
#[derive(Debug, Clone, Copy)]
pub struct Classified<'a> {
    /// The highest-priority rule matching the key.
    pub rule: Option<&'a Arc<Rule>>,
    /// The bits of the key the answer depends on.
    pub mask: FlowKey,
    /// Subtables (hash probes) visited.
    pub probes: usize,
    /// Whether a staged miss left out of `mask` fields that the visited
    /// subtables match on: then keys that differ in them share the answer,
    /// however few subtables were visited.
    pub narrowed: bool,
}

type Buckets = HashMap<MaskedKey, Vec<Arc<Rule>>, BuildHasherDefault<PassThrough>>;

/// True when rule `(p1, s1)` wins over `(p2, s2)`: higher priority, then
/// older (lower seq).
#[inline(always)]
pub(crate) fn beats(p1: u16, s1: u64, p2: u16, s2: u64) -> bool {
    p1 > p2 || (p1 == p2 && s1 < s2)
}

/// One stage of a subtable's mask (see the module docs): the prefixes its
/// buckets have there, each with how many buckets share it.
#[derive(Clone, Debug)]
struct Stage {
    /// The subtable's mask cut to this stage and the ones before it.
    mask: FlowKey,
    prefixes: HashMap<MaskedKey, u32, BuildHasherDefault<PassThrough>>,
    /// The prefix, when all the buckets share one: compared, not hashed.
    only: Option<FlowKey>,
}

impl Stage {
    /// Whether some bucket has `key`'s prefix at this stage.
    #[inline(always)]
    fn admits(&self, key: &FlowKey) -> bool {
        let prefix = key.masked(&self.mask);
        match self.only {
            Some(only) => only == prefix,
            None => self.prefixes.contains_key(&MaskedKey(prefix)),
        }
    }

    fn add(&mut self, bucket: &FlowKey) {
        *self
            .prefixes
            .entry(MaskedKey(bucket.masked(&self.mask)))
            .or_default() += 1;
        self.refresh_only();
    }

    fn remove(&mut self, bucket: &FlowKey) {
        let prefix = MaskedKey(bucket.masked(&self.mask));
        if let Some(n) = self.prefixes.get_mut(&prefix) {
            *n -= 1;
            if *n == 0 {
                self.prefixes.remove(&prefix);
            }
        }
        self.refresh_only();
    }

    fn refresh_only(&mut self) {
        self.only = match self.prefixes.len() {
            1 => self.prefixes.keys().next().map(|k| k.0),
            _ => None,
        };
    }
}

#[derive(Clone, Debug)]
struct Subtable {
    mask: FlowKey,
    /// The pipeline table its rules belong to: a subtable holds one
    /// table's rules, so a lookup in another table passes it by without
    /// masking or hashing the key (a 3-table pipeline's lookups probe
    /// only their own table's masks).
    table: u8,
    /// Highest priority of any rule here.
    max_priority: u16,
    /// Lowest seq among the rules with `max_priority`.
    min_seq: u64,
    n_rules: usize,
    buckets: Buckets,
    /// The stages that narrow the mask: each adds fields to the one
    /// before, and none is the whole mask.
    stages: Vec<Stage>,
}

impl Subtable {
    fn new(mask: FlowKey, table: u8) -> Self {
        let mut stages: Vec<Stage> = Vec::new();
        for prefix in &STAGE_PREFIXES {
            let cut = mask.masked(prefix);
            let before = stages.last().map_or(FlowKey::ZERO, |s| s.mask);
            if cut != before && cut != mask {
                stages.push(Stage {
                    mask: cut,
                    prefixes: HashMap::default(),
                    only: None,
                });
            }
        }
        Subtable {
            mask,
            table,
            max_priority: 0,
            min_seq: u64::MAX,
            n_rules: 0,
            buckets: Buckets::default(),
            stages,
        }
    }

    /// The bits of `key` a miss in this subtable depends on: those of the
    /// first stage no bucket's prefix matches, else the whole mask.
    #[inline]
    fn miss_mask(&self, key: &FlowKey) -> FlowKey {
        self.stages
            .iter()
            .find(|s| !s.admits(key))
            .map_or(self.mask, |s| s.mask)
    }

    /// Removes a bucket and its prefixes; returns its rules.
    fn remove_bucket(&mut self, key: &MaskedKey) -> Option<Vec<Arc<Rule>>> {
        let rules = self.buckets.remove(key)?;
        for s in &mut self.stages {
            s.remove(&key.0);
        }
        Some(rules)
    }

    /// Recomputes the bound from scratch (after removals).
    fn refresh_bound(&mut self) {
        let best = self
            .buckets
            .values()
            .map(|rules| &rules[0])
            .fold((0, u64::MAX), |b, r| {
                if beats(r.spec.priority, r.seq, b.0, b.1) {
                    (r.spec.priority, r.seq)
                } else {
                    b
                }
            });
        (self.max_priority, self.min_seq) = best;
    }

    fn widen_bound(&mut self, priority: u16, seq: u64) {
        if beats(priority, seq, self.max_priority, self.min_seq) {
            self.max_priority = priority;
            self.min_seq = seq;
        }
    }

    fn is_bound(&self, r: &Rule) -> bool {
        r.spec.priority == self.max_priority && r.seq == self.min_seq
    }
}

/// A subtable as [`crate::port_wide`] sees it.
pub(crate) struct SubtableView<'a> {
    pub(crate) mask: FlowKey,
    /// The best rule's (priority, seq).
    pub(crate) bound: (u16, u64),
    buckets: &'a Buckets,
}

impl<'a> SubtableView<'a> {
    /// The best rule of each bucket (one per distinct match).
    pub(crate) fn best_rules(&self) -> impl Iterator<Item = &'a Arc<Rule>> + use<'a> {
        self.buckets.values().filter_map(|rules| rules.first())
    }
}

#[derive(Clone, Default, Debug)]
pub struct Classifier {
    /// Sorted by bound, best first (see the module docs); shared with
    /// the other generations until edited.
    subtables: Vec<Arc<Subtable>>,
    len: usize,
}

impl Classifier {
    pub fn new() -> Self {
        Self::default()
    }

    fn sort_subtables(&mut self) {
        self.subtables.retain(|s| s.n_rules > 0);
        // Stable and adaptive: cheap on an almost sorted list.
        self.subtables.sort_by(|a, b| {
            b.max_priority
                .cmp(&a.max_priority)
                .then(a.min_seq.cmp(&b.min_seq))
        });
    }

    /// Every bit some rule's mask holds (the fields any lookup can depend
    /// on).
    pub fn mask_union(&self) -> FlowKey {
        let mut u = FlowKey::ZERO;
        for s in &self.subtables {
            for (w, m) in u.w.iter_mut().zip(s.mask.w) {
                *w |= m;
            }
        }
        u
    }

    /// Inserts `rule`; a rule with the same match and priority is replaced
    /// and returned (OpenFlow add-flow semantics).
    pub fn insert(&mut self, rule: Arc<Rule>) -> Option<Arc<Rule>> {
        let mask = rule.spec.matches.mask;
        let key = MaskedKey(rule.spec.matches.key.masked(&mask));
        let (priority, seq) = (rule.spec.priority, rule.seq);
        let table = key.0.table();
        let i = match self
            .subtables
            .iter()
            .position(|s| s.mask == mask && s.table == table)
        {
            Some(i) => i,
            None => {
                self.subtables.push(Arc::new(Subtable::new(mask, table)));
                self.subtables.len() - 1
            }
        };
        let st = Arc::make_mut(&mut self.subtables[i]);
        let bound = (st.max_priority, st.min_seq);
        if !st.buckets.contains_key(&key) {
            for s in &mut st.stages {
                s.add(&key.0);
            }
        }
        let bucket = st.buckets.entry(key).or_default();
        // Sorted by priority, highest first.
        let old = match bucket.binary_search_by(|r| priority.cmp(&r.spec.priority)) {
            Ok(j) => Some(std::mem::replace(&mut bucket[j], rule)),
            Err(j) => {
                bucket.insert(j, rule);
                None
            }
        };
        match &old {
            Some(o) if st.is_bound(o) => st.refresh_bound(),
            Some(_) => st.widen_bound(priority, seq),
            None => {
                st.n_rules += 1;
                self.len += 1;
                st.widen_bound(priority, seq);
            }
        }
        if bound != (st.max_priority, st.min_seq) {
            self.sort_subtables();
        }
        old
    }

    /// Removes rules selected by `filter`; returns how many. Without a
    /// priority (non-strict) every rule whose match is covered by the
    /// filter's goes ([`crate::Match::is_covered_by`]); with one (strict)
    /// only the rule with exactly that match and priority.
    pub fn remove_matching(&mut self, filter: &FlowFilter) -> usize {
        self.remove_matching_rules(filter).len()
    }

    /// [`Self::remove_matching`], returning the rules removed (those a
    /// controller may be told about).
    pub fn remove_matching_rules(&mut self, filter: &FlowFilter) -> Vec<Arc<Rule>> {
        let fmask = filter.matches.mask;
        let fkey = filter.matches.key.masked(&fmask);
        let mut removed = Vec::new();
        match filter.priority {
            // Strict without `table=`: that match and priority in every
            // table (a walk; the probe below needs the table's number).
            Some(p) if fmask.table() == 0 => {
                return self.remove_rules(
                    |mask| {
                        let mut m = *mask;
                        m.set_table(0);
                        m == fmask
                    },
                    |k| {
                        let mut k = *k;
                        k.set_table(0);
                        k == fkey
                    },
                    |r| r.spec.priority == p && filter.cookie_selects(r.spec.cookie),
                );
            }
            Some(p) => {
                if let Some(shared) = self
                    .subtables
                    .iter_mut()
                    .find(|s| s.mask == fmask && s.table == fkey.table())
                    && let Some(bucket) = shared.buckets.get(&MaskedKey(fkey))
                    && let Some(j) = bucket
                        .iter()
                        .position(|r| r.spec.priority == p && filter.cookie_selects(r.spec.cookie))
                {
                    let st = Arc::make_mut(shared);
                    let Some(bucket) = st.buckets.get_mut(&MaskedKey(fkey)) else {
                        unreachable!("the bucket was just found in the same subtable")
                    };
                    let old = bucket.remove(j);
                    if bucket.is_empty() {
                        st.remove_bucket(&MaskedKey(fkey));
                    }
                    st.n_rules -= 1;
                    if st.is_bound(&old) {
                        st.refresh_bound();
                    }
                    removed.push(old);
                }
            }
            None => {
                // A subtable that ignores bits the filter matches on
                // holds nothing the filter covers.
                return self.remove_rules(
                    |mask| mask.masked(&fmask) == fmask,
                    |k| k.masked(&fmask) == fkey,
                    |r| filter.cookie_selects(r.spec.cookie),
                );
            }
        }
        if !removed.is_empty() {
            self.len -= removed.len();
            self.sort_subtables();
        }
        removed
    }

    /// Removes the rules for which `gone` says so (the flow timeouts, see
    /// [`Rule::expired`]); returns them.
    pub fn remove_if(&mut self, gone: impl Fn(&Rule) -> bool) -> Vec<Arc<Rule>> {
        self.remove_rules(|_| true, |_| true, gone)
    }

    /// Removes the rules `gone` selects among those of subtables whose
    /// mask `subtable` admits, in buckets whose key `bucket` admits (the
    /// two narrow the walk; `gone` decides). Subtables are copied only if
    /// they hold something to remove. Returns the rules removed.
    fn remove_rules(
        &mut self,
        subtable: impl Fn(&FlowKey) -> bool,
        bucket: impl Fn(&FlowKey) -> bool,
        gone: impl Fn(&Rule) -> bool,
    ) -> Vec<Arc<Rule>> {
        let mut out = Vec::new();
        for shared in &mut self.subtables {
            if !subtable(&shared.mask) {
                continue;
            }
            let hit: Vec<MaskedKey> = shared
                .buckets
                .iter()
                .filter(|(k, rules)| bucket(&k.0) && rules.iter().any(|r| gone(r)))
                .map(|(k, _)| *k)
                .collect();
            if hit.is_empty() {
                continue;
            }
            let st = Arc::make_mut(shared);
            for k in &hit {
                let Some(rules) = st.buckets.get_mut(k) else {
                    continue;
                };
                let (went, kept): (Vec<_>, Vec<_>) =
                    std::mem::take(rules).into_iter().partition(|r| gone(r));
                *rules = kept;
                st.n_rules -= went.len();
                out.extend(went);
                if rules.is_empty() {
                    st.remove_bucket(k);
                }
            }
            st.refresh_bound();
        }
        if !out.is_empty() {
            self.len -= out.len();
            self.sort_subtables();
        }
        out
    }

    /// Highest-priority rule matching `key` (older rule wins a tie).
    #[inline]
    pub fn lookup(&self, key: &FlowKey) -> Option<&Arc<Rule>> {
        self.search::<false>(key).rule
    }

    /// [`Classifier::lookup`], also returning how many subtables (hash
    /// probes) it visited — for tracing and tests.
    pub fn lookup_with_probes(&self, key: &FlowKey) -> (Option<&Arc<Rule>>, usize) {
        let found = self.search::<false>(key);
        (found.rule, found.probes)
    }

    /// [`Classifier::lookup`], also returning the bits of `key` the
    /// answer depends on: for each subtable visited, its mask where the
    /// probe found a bucket, and where it found none the fields up to the
    /// first stage whose prefix no bucket has (see the module docs).
    /// Every key equal to `key` on those bits visits the same subtables,
    /// finds the same buckets and so gets the same answer — what makes it
    /// a megaflow ([`crate::megaflow`]).
    #[inline]
    pub fn lookup_with_mask(&self, key: &FlowKey) -> Classified<'_> {
        self.search::<true>(key)
    }

    /// The lookup; with `MASK` it also works out the megaflow mask (the
    /// stages walked after each miss), else `mask` and `narrowed` are
    /// meaningless.
    #[inline(always)]
    fn search<const MASK: bool>(&self, key: &FlowKey) -> Classified<'_> {
        let mut best: Option<&Arc<Rule>> = None;
        let mut seen = FlowKey::ZERO;
        // The union of the whole masks visited, to tell whether the
        // stages left anything out.
        let mut whole = FlowKey::ZERO;
        let mut probes = 0;
        for st in &self.subtables {
            if let Some(b) = best
                && beats(b.spec.priority, b.seq, st.max_priority, st.min_seq)
            {
                break;
            }
            if st.table != key.table() {
                // Passed by on the table number alone.
                if MASK {
                    seen.set_table(u8::MAX);
                    whole.set_table(u8::MAX);
                }
                continue;
            }
            probes += 1;
            let depended = match st.buckets.get(&MaskedKey(key.masked(&st.mask))) {
                Some(rules) => {
                    let r = &rules[0];
                    if best.is_none_or(|b| beats(r.spec.priority, r.seq, b.spec.priority, b.seq)) {
                        best = Some(r);
                    }
                    st.mask
                }
                None if MASK => st.miss_mask(key),
                None => st.mask,
            };
            if MASK {
                for i in 0..crate::key::KEY_WORDS {
                    seen.w[i] |= depended.w[i];
                    whole.w[i] |= st.mask.w[i];
                }
            }
        }
        Classified {
            rule: best,
            mask: seen,
            probes,
            narrowed: seen != whole,
        }
    }

    /// All rules, highest priority first, older first among equals
    /// (dump-flows order).
    pub fn rules(&self) -> Vec<Arc<Rule>> {
        let mut all: Vec<Arc<Rule>> = self
            .subtables
            .iter()
            .flat_map(|s| s.buckets.values().flatten().cloned())
            .collect();
        all.sort_by(|a, b| {
            b.spec
                .priority
                .cmp(&a.spec.priority)
                .then(a.seq.cmp(&b.seq))
        });
        all
    }

    /// The one port every packet received on `in_port` is sent to, if
    /// the rules say so: each rule that can match such a packet, from the
    /// highest priority down to the first one that matches all of them,
    /// is a plain `output:N` to the same port `N` (not `in_port`), or is
    /// shadowed by rules above it (never takes a packet). `None`
    /// when some packet from `in_port` could be dropped, edited, switched
    /// by `normal`, sent to two ports or miss every rule. Control plane
    /// only (walks every rule): an AF_XDP port with `zero_copy = "auto"`
    /// asks it to find the VNF whose buffers its frames may land in.
    pub fn sole_output(&self, in_port: PortNo) -> Option<PortNo> {
        let mut out = None;
        // Rules above that can match: a rule whose every packet one of
        // them takes never decides anything.
        let mut above: Vec<Match> = Vec::new();
        for r in self.rules() {
            let m = &r.spec.matches;
            // Packets arrive in table 0 (a rule going on to later tables
            // has no single output and stops the search below).
            if m.key.table() != 0 || in_port & m.mask.in_port() != m.key.in_port() {
                continue;
            }
            let to = r.single_output.filter(|&p| p != in_port);
            let conforms = to.is_some() && (out.is_none() || to == out);
            if !conforms && above.iter().any(|a| m.is_covered_by(a)) {
                continue;
            }
            above.push(*m);
            let to = to?;
            if out.is_some_and(|o| o != to) {
                return None;
            }
            out = Some(to);
            let mut rest = m.mask;
            rest.set_in_port(0);
            rest.set_table(0);
            if rest == FlowKey::ZERO {
                return out;
            }
        }
        None
    }

    /// What [`crate::port_wide`] reads of each subtable.
    pub(crate) fn subtable_views(&self) -> impl Iterator<Item = SubtableView<'_>> {
        self.subtables.iter().map(|s| SubtableView {
            mask: s.mask,
            bound: (s.max_priority, s.min_seq),
            buckets: &s.buckets,
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of distinct masks (subtables): the worst-case probes per
    /// lookup.
    pub fn n_subtables(&self) -> usize {
        self.subtables.len()
    }
}

#[cfg(test)]
#[path = "classifier_tests.rs"]
mod tests;
