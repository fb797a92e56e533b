//! Rules: a match, a priority and actions, plus hit counters.

use crate::action::Action;
use crate::key::{FlowKey, PortNo};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// OpenFlow's default priority when `priority=` is not given.
pub const DEFAULT_PRIORITY: u16 = 32768;

/// A masked match: a packet matches when `packet_key & mask == key`.
/// `key` is always stored pre-masked (`key & mask == key`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct Match {
    pub key: FlowKey,
    pub mask: FlowKey,
}

impl Match {
    /// Matches every packet.
    pub const ANY: Match = Match {
        key: FlowKey::ZERO,
        mask: FlowKey::ZERO,
    };

    #[inline(always)]
    pub fn matches(&self, key: &FlowKey) -> bool {
        key.masked(&self.mask) == self.key
    }

    /// True when every packet this match accepts is also accepted by
    /// `filter` (the `del-flows` non-strict selection rule of OpenFlow).
    pub fn is_covered_by(&self, filter: &Match) -> bool {
        (0..crate::key::KEY_WORDS).all(|i| {
            self.mask.w[i] & filter.mask.w[i] == filter.mask.w[i]
                && self.key.w[i] & filter.mask.w[i] == filter.key.w[i]
        })
    }
}

/// How long a rule lives (`idle_timeout=`, `hard_timeout=`, seconds;
/// 0: forever), as OpenFlow's flow timeouts: a rule not hit for `idle`
/// seconds, or `hard` seconds after it was added, is removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Timeouts {
    pub idle: u16,
    pub hard: u16,
}

impl Timeouts {
    pub const NONE: Timeouts = Timeouts { idle: 0, hard: 0 };

    pub fn any(&self) -> bool {
        self.idle != 0 || self.hard != 0
    }
}

/// Which timeout removed a rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expiry {
    Idle,
    Hard,
}

/// A parsed `add-flow` request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowSpec {
    pub priority: u16,
    pub cookie: u64,
    pub timeouts: Timeouts,
    pub matches: Match,
    /// `tun_id=VNI`: only packets that arrived through a tunnel with this
    /// VNI. Not a key field: [`crate::tunnel::resolve`] turns it into the
    /// `in_port` of each tunnel port carrying the VNI before the rule is
    /// installed, and it stays here for display.
    pub tun_id: Option<u32>,
    /// Empty means drop.
    pub actions: Vec<Action>,
}

impl FlowSpec {
    /// The port of a rule whose only action is one `output:N`: the datapath
    /// sends such packets without running the action interpreter.
    /// `SetTunnel` does nothing at run time, so it does not count.
    pub fn single_output(&self) -> Option<PortNo> {
        let mut acts = self
            .actions
            .iter()
            .filter(|a| !matches!(a, Action::SetTunnel(_)));
        match (acts.next(), acts.next()) {
            (Some(Action::Output(p)), None) => Some(*p),
            _ => None,
        }
    }

    /// Whether the rule's only action is `in_port` (a hairpin: the packet
    /// goes back out of the port it came in on), which the datapath sends
    /// without the interpreter as it does a [`FlowSpec::single_output`].
    /// `SetTunnel` does not count, as there.
    pub fn only_in_port(&self) -> bool {
        let mut acts = self
            .actions
            .iter()
            .filter(|a| !matches!(a, Action::SetTunnel(_)));
        matches!((acts.next(), acts.next()), (Some(Action::InPort), None))
    }
}

/// Hit counters for one rule. Updated by PMD threads once per group of
/// packets hitting the rule within a batch (not per packet), read by the
/// control plane.
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct RuleStats {
    pub packets: AtomicU64,
    pub bytes: AtomicU64,
    /// TSC of the last batch that hit the rule (0: never hit): its
    /// `idle_age` and idle timeout. Written only when it moved, so a rule
    /// hit by several PMDs does not bounce the line for every batch.
    pub last_hit: AtomicU64,
}

impl RuleStats {
    /// Credits a batch's hits at TSC `now`.
    #[inline]
    pub fn add(&self, packets: u64, bytes: u64, now: u64) {
        self.packets.fetch_add(packets, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        // A coarse clock is enough (timeouts are whole seconds): skip the
        // store while the last one is less than ~2^24 cycles old (a few
        // ms at GHz rates).
        if now.wrapping_sub(self.last_hit.load(Ordering::Relaxed)) > 1 << 24 {
            self.last_hit.store(now, Ordering::Relaxed);
        }
    }
}

/// An installed rule. Shared (`Arc<Rule>`) between the classifier snapshots
/// and PMD caches; immutable except for its counters.
#[derive(Debug)]
pub struct Rule {
    pub spec: FlowSpec,
    /// Insertion sequence number: among equal priorities the older rule wins.
    pub seq: u64,
    /// Pre-computed [`FlowSpec::single_output`].
    pub single_output: Option<PortNo>,
    /// Pre-computed [`FlowSpec::only_in_port`].
    pub hairpin: bool,
    pub stats: RuleStats,
    /// Creation time (for `duration=` in dump-flows).
    pub created: std::time::Instant,
    /// The TSC at creation: where `idle_age` starts for a rule never hit.
    pub created_tsc: u64,
    /// Whether its actions continue the pipeline ([`Action::is_pipeline`])
    /// or recirculate ([`Action::recirculates`]): then it is never run as
    /// it is, but resolved ([`crate::pipeline`]).
    pub pipeline: bool,
    /// A resolved pipeline's consulted rules, credited with its packets
    /// ([`crate::pipeline::composite`]); empty for a rule of the table.
    pub parts: Vec<Arc<Rule>>,
}

impl Rule {
    /// Where a packet received on `in_port` goes when the datapath can send
    /// it without the action interpreter: the one `output:N` to another
    /// port, or back out of `in_port` for a hairpin. (An `output:N` naming
    /// the in_port sends nothing, OpenFlow's rule: the interpreter's case.)
    #[inline(always)]
    pub fn direct_output(&self, in_port: PortNo) -> Option<PortNo> {
        match self.single_output {
            Some(out) if out != in_port => Some(out),
            None if self.hairpin => Some(in_port),
            _ => None,
        }
    }

    pub fn new(spec: FlowSpec, seq: u64) -> Rule {
        Rule {
            single_output: spec.single_output(),
            hairpin: spec.only_in_port(),
            // A `ct(table=T)` rule is resolved too: the walk gives its
            // tracked copy the metadata it goes back with.
            pipeline: spec
                .actions
                .iter()
                .any(|a| a.is_pipeline() || a.recirculates()),
            spec,
            seq,
            stats: RuleStats::default(),
            created: std::time::Instant::now(),
            created_tsc: nfv_tsc::now(),
            parts: Vec::new(),
        }
    }

    /// This rule with other actions (OpenFlow's modify-flows): the match,
    /// priority, cookie, timeouts, age and insertion order stay; the
    /// counters are carried over unless `reset_counts`. Packets a PMD
    /// credits to the old rule between the copy and the new generation
    /// reaching it are not carried.
    pub fn with_actions(&self, actions: Vec<Action>, reset_counts: bool) -> Rule {
        let spec = FlowSpec {
            actions,
            ..self.spec.clone()
        };
        let r = Rule {
            created: self.created,
            created_tsc: self.created_tsc,
            ..Rule::new(spec, self.seq)
        };
        if !reset_counts {
            let copy = |to: &AtomicU64, from: &AtomicU64| {
                to.store(from.load(Ordering::Relaxed), Ordering::Relaxed)
            };
            copy(&r.stats.packets, &self.stats.packets);
            copy(&r.stats.bytes, &self.stats.bytes);
            copy(&r.stats.last_hit, &self.stats.last_hit);
        }
        r
    }

    /// A resolved pipeline as one rule (see [`crate::pipeline::composite`]).
    pub fn composite(spec: FlowSpec, seq: u64, parts: Vec<Arc<Rule>>) -> Rule {
        Rule {
            parts,
            ..Rule::new(spec, seq)
        }
    }

    /// Credits `packets` and `bytes` at TSC `now`: to the rule, or to the
    /// rules a resolved pipeline consulted.
    #[inline]
    pub fn credit(&self, packets: u64, bytes: u64, now: u64) {
        if self.parts.is_empty() {
            self.stats.add(packets, bytes, now);
        } else {
            for p in &self.parts {
                p.stats.add(packets, bytes, now);
            }
        }
    }

    /// Seconds since the rule was last hit (since it was added, if
    /// never), at TSC `now`.
    pub fn idle_secs(&self, now: u64) -> f64 {
        let last = self
            .stats
            .last_hit
            .load(Ordering::Relaxed)
            .max(self.created_tsc);
        nfv_tsc::to_secs(now.saturating_sub(last))
    }

    /// Whether a timeout has run out at `now` (an instant and the TSC
    /// read with it); the hard timeout first, as OpenFlow reports it.
    pub fn expired(&self, now: std::time::Instant, tsc: u64) -> Option<Expiry> {
        let t = self.spec.timeouts;
        let age = now.saturating_duration_since(self.created).as_secs_f64();
        if t.hard != 0 && age >= f64::from(t.hard) {
            return Some(Expiry::Hard);
        }
        if t.idle != 0 && self.idle_secs(tsc) >= f64::from(t.idle) {
            return Some(Expiry::Idle);
        }
        None
    }
}
