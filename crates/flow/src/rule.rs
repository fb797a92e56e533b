//! Rules: a match, a priority and actions, plus hit counters.

use crate::action::Action;
use crate::key::{FlowKey, PortNo};
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
        (0..4).all(|i| {
            self.mask.w[i] & filter.mask.w[i] == filter.mask.w[i]
                && self.key.w[i] & filter.mask.w[i] == filter.key.w[i]
        })
    }
}

/// A parsed `add-flow` request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowSpec {
    pub priority: u16,
    pub cookie: u64,
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
}

/// Hit counters for one rule. Updated by PMD threads once per group of
/// packets hitting the rule within a batch (not per packet), read by the
/// control plane.
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct RuleStats {
    pub packets: AtomicU64,
    pub bytes: AtomicU64,
}

impl RuleStats {
    #[inline]
    pub fn add(&self, packets: u64, bytes: u64) {
        self.packets.fetch_add(packets, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
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
    pub stats: RuleStats,
    /// Creation time (for `duration=` in dump-flows).
    pub created: std::time::Instant,
}

impl Rule {
    pub fn new(spec: FlowSpec, seq: u64) -> Rule {
        Rule {
            single_output: spec.single_output(),
            spec,
            seq,
            stats: RuleStats::default(),
            created: std::time::Instant::now(),
        }
    }
}
