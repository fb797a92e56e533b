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

pub mod nat;
pub mod summary;

use nfv_conntrack::{CommitError, ConnKey, CtState, Family, NatKind, NatRequest, Tracker};
use nfv_mem::Packet;
use summary::Untrackable;

/// One `ct(...)` action's arguments, as the datapath runs them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtRequest {
    pub zone: u16,
    pub commit: bool,
    /// `force` (with `commit`).
    pub force: bool,
    /// `exec(set_field:V/M->ct_mark)`: (value, mask).
    pub set_mark: Option<(u32, u32)>,
    /// `exec(set_field:V/M->ct_label)`: (value, mask).
    pub set_label: Option<(u128, u128)>,
    /// `nat`: `None` — no translation; `Some(NatAsk::Existing)` — a bare
    /// `nat`, the connection's own translation applied; `Some(Range)` —
    /// a connection committed now is translated into the range (and an
    /// existing one keeps its own).
    pub nat: Option<NatAsk>,
}

impl From<&nfv_flow::action::CtAction> for CtRequest {
    fn from(ct: &nfv_flow::action::CtAction) -> CtRequest {
        use nfv_flow::action::{Nat, NatAddrs, PortPick};
        let range = |kind, r: &nfv_flow::action::NatRange| {
            NatAsk::Range(NatRange {
                kind,
                addrs: r.addrs.map(|a| match a {
                    NatAddrs::V4(lo, hi) => {
                        (Family::V4, u32::from(lo).into(), u32::from(hi).into())
                    }
                    NatAddrs::V6(lo, hi) => (Family::V6, u128::from(lo), u128::from(hi)),
                }),
                ports: r.ports,
                random: r.pick == PortPick::Random,
                persistent: r.persistent,
            })
        };
        CtRequest {
            zone: ct.zone,
            commit: ct.commit,
            force: ct.force,
            set_mark: ct.mark,
            set_label: ct.label,
            nat: ct.nat.map(|n| match n {
                Nat::Existing => NatAsk::Existing,
                Nat::Src(r) => range(NatKind::Src, &r),
                Nat::Dst(r) => range(NatKind::Dst, &r),
            }),
        }
    }
}

/// The `nat` of a `ct` action, as the datapath runs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NatAsk {
    Existing,
    Range(NatRange),
}

/// A `nat(src|dst=ADDRS[:PORTS])` range, of either family (the packet's
/// family picks: a range of the other family translates nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NatRange {
    pub kind: NatKind,
    /// First and last address, IPv4 in the low 32 bits; `None`:
    /// `nat(src)` without addresses (nothing to translate to).
    pub addrs: Option<(Family, u128, u128)>,
    pub ports: Option<(u16, u16)>,
    pub random: bool,
    pub persistent: bool,
}

impl NatRange {
    /// The tracker's request for a packet of `family`, if the range is
    /// of that family.
    fn request(&self, family: Family) -> Option<NatRequest> {
        let (f, min, max) = self.addrs?;
        if f != family {
            return None;
        }
        let mut r = NatRequest::new(self.kind, f, min, max).ok()?;
        if let Some((lo, hi)) = self.ports {
            r = r.with_ports(lo, hi).ok()?;
        }
        if self.random {
            r = r.with_selection(nfv_conntrack::PortSelection::Random);
        }
        Some(r.with_persistent(self.persistent))
    }
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
    /// Whether `nat` rewrote the packet's headers.
    pub translated: bool,
}

/// Why packets were answered `+inv` without the tracker's say, or a
/// commit was refused.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtCounters {
    pub not_ip: u64,
    pub fragment: u64,
    pub malformed: u64,
    pub commit_refused: u64,
    /// Translations the packet could not take (a rewrite refused).
    pub nat_failed: u64,
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

    /// Asks for the index bucket the tracker reads first for a packet
    /// whose flow key is `key`, about to be tracked in `zone` (TCP, UDP
    /// and SCTP over IP, not fragments: the connection key is then the
    /// flow key's 5-tuple). A hint only ([`Tracker::prefetch`]).
    #[inline]
    pub fn prefetch(&self, key: &nfv_flow::FlowKey, zone: u16) {
        let proto = key.nw_proto();
        if !matches!(proto, 6 | 17 | 132) || key.ip_frag() != 0 {
            return;
        }
        let (family, src, dst) = match key.dl_type() {
            0x0800 => (Family::V4, key.nw_src().into(), key.nw_dst().into()),
            0x86dd => (Family::V6, key.ipv6_src(), key.ipv6_dst()),
            _ => return,
        };
        let ck = ConnKey::new(zone, family, proto, src, dst, key.tp_src(), key.tp_dst());
        self.tracker.prefetch(&ck);
    }

    /// Runs `req` for `pkt` at time `now_ms`: its ct fields, and the
    /// packet translated when `req` has a `nat` and its connection a
    /// translation.
    pub fn execute(&mut self, pkt: &mut Packet, req: &CtRequest, now_ms: u64) -> CtFields {
        let invalid = CtFields {
            state: CtState::TRACKED | CtState::INVALID,
            zone: req.zone,
            ..CtFields::default()
        };
        // Matched by reference: moving the summary out of the `Result`
        // copied it, ~40 instructions a packet.
        let summarised = summary::summarise(pkt.data(), req.zone);
        let parsed = match &summarised {
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
        // `force`: a connection this packet answers is ended, and the
        // packet starts one in its own direction.
        if req.force
            && req.commit
            && verdict.state.has(CtState::REPLY)
            && !verdict.state.has(CtState::RELATED)
            && let Some(id) = verdict.conn
        {
            self.tracker.remove_conn(id);
            verdict = self.tracker.process(&parsed.summary, now_ms);
        }
        let mut rewrite = verdict.nat;
        let state = verdict.state;
        let committable = state.has(CtState::TRACKED) && !state.has(CtState::INVALID);
        if req.commit && committable {
            let family = parsed.summary.key.family;
            let ask = match req.nat {
                Some(NatAsk::Range(r)) => r.request(family),
                _ => None,
            };
            match self
                .tracker
                .commit_nat(&parsed.summary, &verdict, ask.as_ref(), now_ms)
            {
                Ok(done) => {
                    if let Some((value, mask)) = req.set_mark {
                        verdict.mark = (verdict.mark & !mask) | (value & mask);
                        self.tracker.set_mark(done.id, verdict.mark);
                    }
                    if let Some((value, mask)) = req.set_label {
                        verdict.label = (verdict.label & !mask) | (value & mask);
                        self.tracker.set_label(done.id, verdict.label);
                    }
                    verdict.orig = verdict.orig.or(Some(parsed.summary.key));
                    rewrite = rewrite.or(done.nat);
                }
                Err(CommitError::NotCommittable) => {}
                Err(_) => {
                    self.counters.commit_refused += 1;
                    return invalid;
                }
            }
        }
        let mut state = verdict.state.0;
        let mut translated = false;
        if req.nat.is_some()
            && let Some(rw) = rewrite
        {
            match nat::apply(pkt, parsed, &rw) {
                Ok(()) => {
                    state |= rw.state_bits();
                    translated = true;
                }
                Err(_) => self.counters.nat_failed += 1,
            }
        }
        CtFields {
            state,
            zone: req.zone,
            mark: verdict.mark,
            label: verdict.label,
            orig: verdict.orig,
            translated,
        }
    }
}

#[cfg(test)]
mod tests;
