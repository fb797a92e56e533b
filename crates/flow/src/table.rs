//! The published flow table: the control plane edits a private copy and
//! publishes it atomically; PMD threads read the current snapshot without
//! locks. Each generation carries a version; a PMD compares the published
//! version (one acquire load, from its housekeeping, not per packet) with
//! the version of the snapshot it holds, and on a change takes the new
//! snapshot and flushes its exact-match cache.
//!
//! Old generations are freed by the writer, never by a PMD: a replaced
//! table is kept in a graveyard until the next edit finds it held by
//! nothing else (every PMD has let go of it), and dropped there: freeing
//! a large classifier is thousands of `free` calls, which belong on the
//! control thread, not in a PMD iteration. (Measured with `nfv-bench
//! scale --changes`, it was not what a table change costs the PMDs: that
//! is the new copy's cold memory, ~700k cycles per change behind 1,000
//! exact rules, see bench/README.)
//!
//! Thread safety: [`SharedFlowTable`] is `Sync`. Writers serialise among
//! themselves with a mutex (control plane only); readers never block.

use crate::action::Action;
use crate::classifier::Classifier;
use crate::ct_dispatch::CtDispatch;
use crate::group::Group;
use crate::meter::{Meter, Meters};
use crate::parse::FlowFilter;
use crate::port_wide::PortWide;
use crate::rule::{Expiry, FlowSpec, Rule};
use arc_swap::ArcSwap;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The groups of one generation, by id.
pub type Groups = BTreeMap<u32, Arc<Group>>;

/// Why a meter edit, or a rule naming a meter, was refused (nothing
/// changed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MeterError {
    #[error("meter {0} exists (mod-meter replaces it)")]
    Exists(u32),
    #[error("no meter {0}")]
    Missing(u32),
}

/// The meters an action list names.
fn meters_named(actions: &[Action]) -> impl Iterator<Item = u32> + '_ {
    actions.iter().filter_map(|a| match a {
        Action::Meter(m) => Some(*m),
        _ => None,
    })
}

/// Why a group or rule edit was refused (nothing changed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    #[error("group {0} exists (mod-group replaces it)")]
    Exists(u32),
    #[error("no group {0}")]
    Missing(u32),
    /// A rule names a meter that does not exist.
    #[error("no meter {0}")]
    MeterMissing(u32),
    /// OpenFlow's `CHECK_OVERLAP`: a rule of the same table and priority
    /// matches some of the same packets.
    #[error("a rule of the same table and priority overlaps it")]
    Overlaps,
}

/// One immutable generation of the rule set.
#[derive(Debug, Default)]
pub struct FlowTable {
    pub version: u64,
    pub classifier: Classifier,
    /// The in_ports whose every packet one rule takes (worked out once per
    /// generation; the PMDs skip the lookup for them).
    pub port_wide: PortWide,
    /// The groups the rules' `group:N` actions name (shared between
    /// generations until a group edit).
    pub groups: Arc<Groups>,
    /// The meters the rules' `meter:N` actions name (shared likewise; a
    /// meter's bucket and counters live as long as the meter).
    pub meters: Arc<Meters>,
    /// Which of the connection tracker's wide fields some rule matches:
    /// `ct_label`, and the original tuple (`ct_nw_src`, …). A packet back
    /// from `ct` carries only those (the others cannot decide anything),
    /// so that most keys stay within the base words.
    pub ct_wide: CtWide,
    /// Where a packet back from `ct(table=T)` gets its rule in table T
    /// without a lookup ([`crate::ct_dispatch`]).
    pub ct_dispatch: Arc<CtDispatch>,
}

/// See [`FlowTable::ct_wide`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtWide {
    pub label: bool,
    pub tuple: bool,
    /// Some rule runs `ct(...)` at all.
    pub used: bool,
}

impl CtWide {
    fn of(classifier: &Classifier) -> CtWide {
        let u = classifier.mask_union();
        CtWide {
            label: u.ct_label() != 0,
            tuple: u.w[crate::key::CT_TUPLE_WORDS].iter().any(|&w| w != 0),
            used: classifier.rules().iter().any(|r| {
                r.spec
                    .actions
                    .iter()
                    .any(|a| matches!(a, crate::Action::Ct(_)))
            }),
        }
    }
}

#[derive(Debug)]
pub struct SharedFlowTable {
    current: ArcSwap<FlowTable>,
    version: AtomicU64,
    /// Serialises writers; holds the next rule sequence number and the
    /// replaced generations not yet freed.
    writer: Mutex<Writer>,
    /// Set once a rule with a timeout was added: until then
    /// [`SharedFlowTable::expire`] does not walk the rules.
    timed: std::sync::atomic::AtomicBool,
}

#[derive(Debug, Default)]
struct Writer {
    seq: u64,
    graveyard: Vec<Arc<FlowTable>>,
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
            writer: Mutex::new(Writer::default()),
            timed: std::sync::atomic::AtomicBool::new(false),
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

    /// The current snapshot if it is not the generation `held` (one
    /// acquire load when nothing changed). Pass the version *of the
    /// snapshot you hold*, never a separately read [`Self::version`]:
    /// reading the version after taking a snapshot can pair an older table
    /// with a newer number, and the newer table would never be picked up.
    #[inline(always)]
    pub fn snapshot_if_newer(&self, held: u64) -> Option<Arc<FlowTable>> {
        if self.version() == held {
            return None;
        }
        Some(self.snapshot())
    }

    fn edit<R>(&self, f: impl FnOnce(&mut Classifier, &mut u64) -> R) -> R {
        match self.try_edit(|c, _, seq| Ok::<R, std::convert::Infallible>(f(c, seq))) {
            Ok(r) => r,
            Err(never) => match never {},
        }
    }

    /// Runs `f` on a copy of the rules and groups and publishes the result
    /// as the next generation — unless `f` refuses, which leaves the
    /// current generation in place.
    fn try_edit<R, E>(
        &self,
        f: impl FnOnce(&mut Classifier, &mut Groups, &mut u64) -> Result<R, E>,
    ) -> Result<R, E> {
        let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let old = self.current.load_full();
        let mut classifier = old.classifier.clone();
        let mut groups = (*old.groups).clone();
        let r = f(&mut classifier, &mut groups, &mut w.seq)?;
        // The same groups (by identity): keep sharing the old map.
        let same = groups.len() == old.groups.len()
            && groups
                .iter()
                .zip(old.groups.iter())
                .all(|((a, ga), (b, gb))| a == b && Arc::ptr_eq(ga, gb));
        let groups = if same {
            old.groups.clone()
        } else {
            Arc::new(groups)
        };
        let meters = old.meters.clone();
        self.publish(&mut w, old, classifier, groups, meters);
        Ok(r)
    }

    /// As [`Self::try_edit`], for the meters (and the rules naming them).
    fn try_edit_meters<R, E>(
        &self,
        f: impl FnOnce(&mut Classifier, &mut Meters) -> Result<R, E>,
    ) -> Result<R, E> {
        let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let old = self.current.load_full();
        let mut classifier = old.classifier.clone();
        let mut meters = (*old.meters).clone();
        let r = f(&mut classifier, &mut meters)?;
        let groups = old.groups.clone();
        self.publish(&mut w, old, classifier, groups, Arc::new(meters));
        Ok(r)
    }

    /// Publishes the next generation after `old`.
    fn publish(
        &self,
        w: &mut Writer,
        old: Arc<FlowTable>,
        classifier: Classifier,
        groups: Arc<Groups>,
        meters: Arc<Meters>,
    ) {
        let version = old.version + 1;
        self.current.store(Arc::new(FlowTable {
            version,
            port_wide: PortWide::of(&classifier),
            ct_wide: CtWide::of(&classifier),
            ct_dispatch: Arc::new(CtDispatch::of(&classifier)),
            classifier,
            groups,
            meters,
        }));
        self.version.store(version, Ordering::Release);
        // Generations nobody else holds any more are freed here; the one
        // just replaced waits for the PMDs to move on.
        w.graveyard.retain(|t| Arc::strong_count(t) > 1);
        w.graveyard.push(old);
    }

    /// Adds a meter; refused if its id is taken.
    pub fn add_meter(&self, meter: Meter) -> Result<(), MeterError> {
        self.try_edit_meters(|_, meters| {
            if meters.contains_key(&meter.id) {
                return Err(MeterError::Exists(meter.id));
            }
            meters.insert(meter.id, Arc::new(meter));
            Ok(())
        })
    }

    /// Replaces a meter (its rules stay; its bucket and counters start over).
    pub fn mod_meter(&self, meter: Meter) -> Result<(), MeterError> {
        self.try_edit_meters(|_, meters| {
            let slot = meters
                .get_mut(&meter.id)
                .ok_or(MeterError::Missing(meter.id))?;
            *slot = Arc::new(meter);
            Ok(())
        })
    }

    /// Deletes meter `id` (every meter for `None`) and the rules that
    /// name a deleted meter, as OpenFlow does; returns the meters deleted
    /// and the rules (for the controllers' FLOW_REMOVED).
    pub fn del_meters(&self, id: Option<u32>) -> (usize, Vec<Arc<Rule>>) {
        self.try_edit_meters(|c, meters| {
            let gone: Vec<u32> = meters
                .keys()
                .copied()
                .filter(|m| id.is_none_or(|id| id == *m))
                .collect();
            for m in &gone {
                meters.remove(m);
            }
            let rules = c.remove_if(|r| meters_named(&r.spec.actions).any(|m| gone.contains(&m)));
            Ok::<_, std::convert::Infallible>((gone.len(), rules))
        })
        .unwrap_or_else(|never| match never {})
    }

    /// Replaced generations still waiting to be freed (some PMD held them
    /// at the last edit).
    pub fn retired(&self) -> usize {
        let w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        w.graveyard.len()
    }

    /// Adds (or replaces, if match and priority are identical) rules, all in
    /// one new generation.
    pub fn add_flows(&self, specs: impl IntoIterator<Item = FlowSpec>) {
        self.edit(|c, seq| {
            for spec in specs {
                if spec.timeouts.any() {
                    self.timed.store(true, Ordering::Relaxed);
                }
                *seq += 1;
                c.insert(Arc::new(Rule::new(spec, *seq)));
            }
        })
    }

    /// As [`Self::add_flows`], refused as a whole (nothing installed) when a
    /// rule names a group or a meter that does not exist.
    pub fn add_flows_checked(
        &self,
        specs: impl IntoIterator<Item = FlowSpec>,
    ) -> Result<(), GroupError> {
        self.try_edit(|c, groups, seq| {
            // The writer lock is held: the current generation is the one
            // being edited.
            let meters = self.current.load().meters.clone();
            let specs: Vec<FlowSpec> = specs.into_iter().collect();
            for spec in &specs {
                if let Some(g) = groups_named(&spec.actions).find(|g| !groups.contains_key(g)) {
                    return Err(GroupError::Missing(g));
                }
                if let Some(m) = meters_named(&spec.actions).find(|m| !meters.contains_key(m)) {
                    return Err(GroupError::MeterMissing(m));
                }
            }
            for spec in specs {
                if spec.timeouts.any() {
                    self.timed.store(true, Ordering::Relaxed);
                }
                *seq += 1;
                c.insert(Arc::new(Rule::new(spec, *seq)));
            }
            Ok(())
        })
    }

    /// Adds a group; refused if its id is taken.
    pub fn add_group(&self, group: Group) -> Result<(), GroupError> {
        self.try_edit(|_, groups, _| {
            if groups.contains_key(&group.id) {
                return Err(GroupError::Exists(group.id));
            }
            groups.insert(group.id, Arc::new(group));
            Ok(())
        })
    }

    /// Replaces a group (its rules stay; its bucket counters start over).
    pub fn mod_group(&self, group: Group) -> Result<(), GroupError> {
        self.try_edit(|_, groups, _| {
            let slot = groups
                .get_mut(&group.id)
                .ok_or(GroupError::Missing(group.id))?;
            *slot = Arc::new(group);
            Ok(())
        })
    }

    /// Deletes group `id` (every group for `None`) and the rules that name
    /// a deleted group, as OVS does; returns the groups deleted and the
    /// rules (for the controllers' FLOW_REMOVED).
    pub fn del_groups(&self, id: Option<u32>) -> (usize, Vec<Arc<Rule>>) {
        self.try_edit(|c, groups, _| {
            let gone: Vec<u32> = groups
                .keys()
                .copied()
                .filter(|g| id.is_none_or(|id| id == *g))
                .collect();
            for g in &gone {
                groups.remove(g);
            }
            let rules = c.remove_if(|r| groups_named(&r.spec.actions).any(|g| gone.contains(&g)));
            Ok::<_, std::convert::Infallible>((gone.len(), rules))
        })
        .unwrap_or_else(|never| match never {})
    }

    /// Replaces the actions of the rules `select` picks (OpenFlow's
    /// modify and modify-strict), keeping their counters unless
    /// `reset_counts`; refused as a whole when the actions name a missing
    /// group or meter. Returns how many rules changed.
    pub fn modify_flows(
        &self,
        select: impl Fn(&Rule) -> bool,
        actions: &[Action],
        reset_counts: bool,
    ) -> Result<usize, GroupError> {
        self.try_edit(|c, groups, _| {
            if let Some(g) = groups_named(actions).find(|g| !groups.contains_key(g)) {
                return Err(GroupError::Missing(g));
            }
            let meters = self.current.load().meters.clone();
            if let Some(m) = meters_named(actions).find(|m| !meters.contains_key(m)) {
                return Err(GroupError::MeterMissing(m));
            }
            let picked: Vec<Arc<Rule>> = c.rules().into_iter().filter(|r| select(r)).collect();
            for r in &picked {
                c.insert(Arc::new(r.with_actions(actions.to_vec(), reset_counts)));
            }
            Ok(picked.len())
        })
    }

    /// Deletes the rules `select` picks and returns them (OpenFlow's
    /// delete with `out_port`/`out_group` filters, whose deleted rules a
    /// controller may be told about).
    pub fn del_flows_where(&self, select: impl Fn(&Rule) -> bool) -> Vec<Arc<Rule>> {
        self.edit(|c, _| c.remove_if(select))
    }

    /// Adds one rule unless a rule `conflicts` with it (OpenFlow's
    /// `CHECK_OVERLAP`: refused with [`GroupError::Overlaps`]), both
    /// decided under the writer lock. Refused like
    /// [`Self::add_flows_checked`] when it names a missing group or meter.
    pub fn add_flow_unless(
        &self,
        spec: FlowSpec,
        conflicts: impl Fn(&Rule) -> bool,
    ) -> Result<(), GroupError> {
        self.try_edit(|c, groups, seq| {
            if let Some(g) = groups_named(&spec.actions).find(|g| !groups.contains_key(g)) {
                return Err(GroupError::Missing(g));
            }
            let meters = self.current.load().meters.clone();
            if let Some(m) = meters_named(&spec.actions).find(|m| !meters.contains_key(m)) {
                return Err(GroupError::MeterMissing(m));
            }
            if c.rules().iter().any(|r| conflicts(r)) {
                return Err(GroupError::Overlaps);
            }
            if spec.timeouts.any() {
                self.timed.store(true, Ordering::Relaxed);
            }
            *seq += 1;
            c.insert(Arc::new(Rule::new(spec, *seq)));
            Ok(())
        })
    }

    /// Deletes rules selected by `filter` (all rules for the default filter);
    /// returns how many were removed.
    pub fn del_flows(&self, filter: &FlowFilter) -> usize {
        self.del_flows_returning(filter).len()
    }

    /// [`Self::del_flows`], returning the rules removed.
    pub fn del_flows_returning(&self, filter: &FlowFilter) -> Vec<Arc<Rule>> {
        self.edit(|c, _| c.remove_matching_rules(filter))
    }

    /// Removes the rules whose idle or hard timeout ran out by `now` (an
    /// instant and the TSC read with it), in one new generation; returns
    /// them with the timeout that ended each. No generation is made when
    /// nothing expired: the PMDs keep their caches.
    pub fn expire(&self, now: std::time::Instant, tsc: u64) -> Vec<(Arc<Rule>, Expiry)> {
        let due = |r: &Rule| r.spec.timeouts.any() && r.expired(now, tsc).is_some();
        if !self.timed.load(Ordering::Relaxed)
            || !self.snapshot().classifier.rules().iter().any(|r| due(r))
        {
            return Vec::new();
        }
        self.edit(|c, _| c.remove_if(due))
            .into_iter()
            .filter_map(|r| r.expired(now, tsc).map(|e| (r, e)))
            .collect()
    }
}

/// The groups an action list names.
fn groups_named(actions: &[Action]) -> impl Iterator<Item = u32> + '_ {
    actions.iter().filter_map(|a| match a {
        Action::Group(g) => Some(*g),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse_flow;

    /// A generation a reader still holds outlives the edits after it and
    /// is freed by the first edit after the reader lets go — by the
    /// writer, so the reader's drop is never the last.
    #[test]
    fn replaced_generations_are_freed_by_the_writer_once_unheld() {
        let shared = SharedFlowTable::new();
        let add = |f: &str| shared.add_flows([parse_flow(f).unwrap()]);
        add("in_port=1,actions=output:2");
        let held = shared.snapshot();
        let weak = Arc::downgrade(&held);
        add("in_port=2,actions=output:1");
        add("in_port=3,actions=output:1");
        assert!(weak.upgrade().is_some());
        drop(held);
        // Still in the graveyard: the reader's drop did not free it.
        assert!(weak.upgrade().is_some(), "freed by the reader");
        add("in_port=4,actions=output:1");
        assert!(weak.upgrade().is_none(), "not freed at the next edit");
        // Only the generation just replaced waits.
        assert_eq!(shared.retired(), 1);
    }

    /// `del-flows cookie=V/M` removes the rules whose cookie has V's
    /// bits under M, and only those the match part also selects.
    #[test]
    fn cookie_filters_select_what_they_mask() {
        // (filter, cookies of the rules left)
        let cases: [(&str, &[u64]); 5] = [
            ("cookie=0x100/0xf00", &[0x1, 0x201, 0x2]),
            ("cookie=0x1/0xff", &[0x2]),
            ("cookie=0x1/0xff,in_port=1", &[0x101, 0x201, 0x2]),
            ("cookie=0x2", &[0x1, 0x101, 0x201]),
            (
                "priority=7,cookie=0x201/0xfff,in_port=3",
                &[0x1, 0x101, 0x2],
            ),
        ];
        for (filter, left) in cases {
            let shared = SharedFlowTable::new();
            shared.add_flows(
                [
                    "cookie=0x1,in_port=1,actions=drop",
                    "cookie=0x101,in_port=2,actions=drop",
                    "priority=7,cookie=0x201,in_port=3,actions=drop",
                    "cookie=0x2,in_port=4,actions=drop",
                ]
                .map(|f| parse_flow(f).unwrap()),
            );
            let removed = shared.del_flows(&crate::parse_filter(filter).unwrap());
            let mut got: Vec<u64> = shared
                .snapshot()
                .classifier
                .rules()
                .iter()
                .map(|r| r.spec.cookie)
                .collect();
            got.sort_unstable();
            let mut want = left.to_vec();
            want.sort_unstable();
            assert_eq!(got, want, "{filter}");
            assert_eq!(removed, 4 - left.len(), "{filter}");
        }
    }

    /// Rules go when their hard timeout has passed since they were added,
    /// or their idle timeout since their last hit (since they were added,
    /// if never hit); the others stay, and a check that removes nothing
    /// makes no new generation.
    #[test]
    fn timeouts_remove_rules_at_their_time() {
        let hz = nfv_tsc::hz();
        let shared = SharedFlowTable::new();
        shared.add_flows(
            [
                "in_port=1,hard_timeout=5,actions=drop",
                "in_port=2,idle_timeout=5,actions=drop",
                "in_port=3,idle_timeout=5,actions=drop",
                "in_port=4,actions=drop",
            ]
            .map(|f| parse_flow(f).unwrap()),
        );
        let rules = shared.snapshot().classifier.rules();
        let rule = |port: u16| {
            rules
                .iter()
                .find(|r| r.spec.matches.key.in_port() == port)
                .unwrap()
                .clone()
        };
        let (t0, c0) = (rule(1).created, rule(1).created_tsc);
        // Rule 3 was hit 4 s after it was added.
        rule(3).stats.add(1, 64, c0 + 4 * hz);
        let at = |secs: u64| (t0 + std::time::Duration::from_secs(secs), c0 + secs * hz);
        // (seconds after the rules were added, ports removed then)
        let steps: [(u64, &[(u16, Expiry)]); 4] = [
            (2, &[]),
            (6, &[(1, Expiry::Hard), (2, Expiry::Idle)]),
            (8, &[]),
            (10, &[(3, Expiry::Idle)]),
        ];
        for (secs, want) in steps {
            let version = shared.version();
            let (now, tsc) = at(secs);
            let mut got: Vec<(u16, Expiry)> = shared
                .expire(now, tsc)
                .iter()
                .map(|(r, e)| (r.spec.matches.key.in_port(), *e))
                .collect();
            got.sort_by_key(|g| g.0);
            assert_eq!(got, want, "at {secs} s");
            assert_eq!(shared.version() != version, !want.is_empty(), "at {secs} s");
        }
        assert_eq!(shared.snapshot().classifier.len(), 1);
    }

    /// A reader that took its snapshot before a publish must see the
    /// publish, whatever it read in between: the version it compares
    /// against is its snapshot's own.
    #[test]
    fn a_stale_snapshot_always_sees_the_next_generation() {
        let shared = SharedFlowTable::new();
        // (flows published after the reader's snapshot, expected rules seen)
        let cases: [(&[&str], usize); 3] = [
            (&[], 0),
            (&["in_port=1,actions=output:2"], 1),
            (&["in_port=3,actions=output:4", "in_port=5,actions=drop"], 2),
        ];
        for (flows, rules) in cases {
            let held = shared.snapshot();
            let before = held.classifier.len();
            if flows.is_empty() {
                assert!(shared.snapshot_if_newer(held.version).is_none());
                continue;
            }
            shared.add_flows(flows.iter().map(|f| parse_flow(f).unwrap()));
            let new = shared
                .snapshot_if_newer(held.version)
                .expect("a publish after the snapshot is seen");
            assert_eq!(new.version, held.version + 1);
            assert_eq!(new.classifier.len(), before + rules);
            assert!(shared.snapshot_if_newer(new.version).is_none());
        }
    }
}
