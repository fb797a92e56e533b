//! `ct(...)` in the datapath: the PMD's connection table
//! ([`nfv_conntrack::Tracker`]) asked about one packet, and the fields the
//! answer gives the packet's key (`ct_state`, `ct_zone`, `ct_mark`,
//! `ct_label`, the original tuple).
//!
//! What OVS's `ct` does and this does alike: the packet is looked up in its
//! zone; `commit` stores a new connection (the packet stays `+new`) and
//! only then may `exec` set the connection's mark and label; a packet that
//! cannot be tracked ([`summary::Untrackable`]) or whose commit is refused
//! (table or zone full) is `+trk+inv`, counted by reason.
//!
//! Ownership: one table per PMD thread, used only by it (no lock, no
//! sharing). A connection whose two directions arrive on queues polled by
//! different PMDs is seen by each PMD alone — each direction looks new to
//! its PMD — until the hand-off between shards described in
//! `nfv_conntrack`'s crate doc is built; a node with connection tracking
//! rules and more than one PMD logs that at start.

pub mod summary;

use nfv_conntrack::{CommitError, ConnKey, CtState, Tracker};
use summary::Untrackable;

/// One `ct(...)` action's arguments, as the datapath runs them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtRequest {
    pub zone: u16,
    pub commit: bool,
    /// `exec(set_field:V/M->ct_mark)`: (value, mask).
    pub set_mark: Option<(u32, u32)>,
    /// `exec(set_field:V/M->ct_label)`: (value, mask).
    pub set_label: Option<(u128, u128)>,
}

/// What `ct` sets in the packet's key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtFields {
    pub state: u8,
    pub zone: u16,
    pub mark: u32,
    pub label: u128,
    /// The connection's original direction (`ct_nw_src`, `ct_tp_dst`, …).
    pub orig: Option<ConnKey>,
}

/// Why packets were answered `+inv` without the tracker's say, or a
/// commit was refused.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtCounters {
    pub not_ip: u64,
    pub fragment: u64,
    pub malformed: u64,
    pub commit_refused: u64,
}

/// A PMD's connection table.
pub struct ConnTable {
    tracker: Tracker,
    counters: CtCounters,
}

impl ConnTable {
    pub fn new(config: nfv_conntrack::Config) -> Result<ConnTable, nfv_conntrack::ConfigError> {
        Ok(ConnTable {
            tracker: Tracker::new(config)?,
            counters: CtCounters::default(),
        })
    }

    pub fn tracker(&self) -> &Tracker {
        &self.tracker
    }

    pub fn tracker_mut(&mut self) -> &mut Tracker {
        &mut self.tracker
    }

    pub fn counters(&self) -> CtCounters {
        self.counters
    }

    /// Runs `req` for the frame `frame` at time `now_ms`.
    pub fn execute(&mut self, frame: &[u8], req: &CtRequest, now_ms: u64) -> CtFields {
        let invalid = CtFields {
            state: CtState::TRACKED | CtState::INVALID,
            zone: req.zone,
            ..CtFields::default()
        };
        let parsed = match summary::summarise(frame, req.zone) {
            Ok(p) => p,
            Err(why) => {
                let c = &mut self.counters;
                *match why {
                    Untrackable::NotIp => &mut c.not_ip,
                    Untrackable::Fragment => &mut c.fragment,
                    Untrackable::Malformed => &mut c.malformed,
                } += 1;
                return invalid;
            }
        };
        let mut verdict = self.tracker.process(&parsed.summary, now_ms);
        let state = verdict.state;
        let committable = state.has(CtState::TRACKED) && !state.has(CtState::INVALID);
        if req.commit && committable {
            match self.tracker.commit(&parsed.summary, &verdict, now_ms) {
                Ok(id) => {
                    if let Some((value, mask)) = req.set_mark {
                        verdict.mark = (verdict.mark & !mask) | (value & mask);
                        self.tracker.set_mark(id, verdict.mark);
                    }
                    if let Some((value, mask)) = req.set_label {
                        verdict.label = (verdict.label & !mask) | (value & mask);
                        self.tracker.set_label(id, verdict.label);
                    }
                    verdict.orig = verdict.orig.or(Some(parsed.summary.key));
                }
                Err(CommitError::NotCommittable) => {}
                Err(_) => {
                    self.counters.commit_refused += 1;
                    return invalid;
                }
            }
        }
        CtFields {
            state: verdict.state.0,
            zone: req.zone,
            mark: verdict.mark,
            label: verdict.label,
            orig: verdict.orig,
        }
    }
}

#[cfg(test)]
mod tests;
