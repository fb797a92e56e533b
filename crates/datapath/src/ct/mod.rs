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

use nfv_conntrack::{CommitError, ConnKey, CtState, Family, KeyHash, NatKind, NatRequest, Tracker};
use nfv_flow::FlowKey;
use nfv_flow::action::{CtAction, Nat, NatAddrs, PortPick};
use nfv_flow::table::CtWide;
use nfv_mem::{BATCH, Packet};
use summary::{Parsed, Untrackable};

/// The tracker's request for `nat(src|dst=…)` on a connection of
/// `family` committed now: `None` for a bare `nat`, a range without
/// addresses, or one of the other family (it translates nothing). Built
/// only on a commit — the action is read as installed, not converted per
/// packet.
fn nat_request(nat: &Nat, family: Family) -> Option<NatRequest> {
    let (kind, range) = match nat {
        Nat::Existing => return None,
        Nat::Src(r) => (NatKind::Src, r),
        Nat::Dst(r) => (NatKind::Dst, r),
    };
    let (f, min, max) = match range.addrs? {
        NatAddrs::V4(lo, hi) => (Family::V4, u32::from(lo).into(), u32::from(hi).into()),
        NatAddrs::V6(lo, hi) => (Family::V6, u128::from(lo), u128::from(hi)),
    };
    if f != family {
        return None;
    }
    let mut r = NatRequest::new(kind, f, min, max).ok()?;
    if let Some((lo, hi)) = range.ports {
        r = r.with_ports(lo, hi).ok()?;
    }
    if range.pick == PortPick::Random {
        r = r.with_selection(nfv_conntrack::PortSelection::Random);
    }
    Some(r.with_persistent(range.persistent))
}

/// What `ct` sets in the packet's key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtFields {
    /// `ct_state`, `ct_zone` and `ct_mark` as the flow key's word holds
    /// them ([`FlowKey::ct_word`]). One field, written with one store:
    /// read back as three fields of different widths, the next table's
    /// lookup loaded them with one wider load the CPU could not forward
    /// from the three stores, a stall a tracked packet.
    word: u64,
    /// `ct_label`: zero unless some rule matches it ([`CtWide::label`]).
    pub label: u128,
    /// The connection's original direction (`ct_nw_src`, `ct_tp_dst`, …):
    /// `None` unless some rule matches it ([`CtWide::tuple`]).
    pub orig: Option<ConnKey>,
    /// Whether `nat` rewrote the packet's headers.
    pub translated: bool,
}

impl CtFields {
    fn new(state: u8, zone: u16, mark: u32) -> CtFields {
        CtFields {
            word: FlowKey::ct_word(state, zone, mark),
            ..CtFields::default()
        }
    }

    /// `ct_state`, `ct_zone` and `ct_mark` packed as in the flow key.
    #[inline(always)]
    pub fn word(&self) -> u64 {
        self.word
    }

    pub fn state(&self) -> u8 {
        self.word as u8
    }

    pub fn zone(&self) -> u16 {
        (self.word >> 16) as u16
    }

    pub fn mark(&self) -> u32 {
        (self.word >> 32) as u32
    }
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
    /// What [`ConnTable::stage`] read of the batch's packets ahead of
    /// their `ct`, by batch slot; a slot counts only while its bit is set
    /// in `staged`.
    staging: Box<[Staged; BATCH]>,
    staged: u32,
}

/// A packet's headers read, and its connection key hashed, before its
/// turn (see [`ConnTable::stage`]).
struct Staged {
    summarised: Result<Parsed, Untrackable>,
    hash: Option<KeyHash>,
}

const _: () = assert!(BATCH <= u32::BITS as usize, "a bit per batch slot");

/// How many slots ahead of the packet being tracked the connection lines
/// of a staged packet are asked for: far enough for its lines from
/// memory to arrive while the packets in between are tracked (a few
/// hundred cycles each), near enough that they are still in the cache.
const CONN_PREFETCH_AHEAD: usize = 4;

impl ConnTable {
    /// A table of the default settings ([`nfv_conntrack::Config::default`]).
    pub fn with_defaults() -> ConnTable {
        ConnTable::new(nfv_conntrack::Config::default())
            .expect("the default connection table settings are valid")
    }

    pub fn new(config: nfv_conntrack::Config) -> Result<ConnTable, nfv_conntrack::ConfigError> {
        Ok(ConnTable {
            tracker: Tracker::new(config)?,
            counters: CtCounters::default(),
            staging: Box::new(std::array::from_fn(|_| Staged {
                summarised: Err(Untrackable::NotIp),
                hash: None,
            })),
            staged: 0,
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

    /// Reads the headers of the packet in batch slot `slot`, about to be
    /// tracked in `zone`, hashes its connection key and asks for the index
    /// bucket its lookup reads: called for the batch's packets before the
    /// first is tracked, their misses overlap, and the packet's own turn
    /// ([`ConnTable::execute_staged`]) neither parses nor hashes again.
    /// Nothing changes but the staging: the packet's bytes and the
    /// tracker are only read.
    pub fn stage(&mut self, slot: usize, pkt: &Packet, zone: u16) {
        // The shortcut's summary is hashed and stored from registers (see
        // `summary::summarise_plain`); only the general way is a call.
        match summary::summarise_plain(pkt.data(), zone) {
            Some(parsed) => {
                let h = self.tracker.key_hash(&parsed.summary.key);
                self.tracker.prefetch_hashed(h);
                self.staging[slot] = Staged {
                    summarised: Ok(parsed),
                    hash: Some(h),
                };
            }
            None => self.staging[slot] = self.stage_walked(pkt, zone),
        }
        self.staged |= 1 << slot;
    }

    /// [`ConnTable::stage`] for a frame the shortcut declined: the
    /// general way only (the shortcut is not tried twice).
    #[inline(never)]
    fn stage_walked(&self, pkt: &Packet, zone: u16) -> Staged {
        let summarised = summary::summarise_walked(pkt.data(), zone);
        let hash = summarised
            .as_ref()
            .ok()
            .map(|p| self.tracker.key_hash(&p.summary.key));
        if let Some(h) = hash {
            self.tracker.prefetch_hashed(h);
        }
        Staged { summarised, hash }
    }

    /// Asks for the connection lines of the staged packets in the batch's
    /// first [`CONN_PREFETCH_AHEAD`] slots: their index buckets, asked for
    /// at the start of the staging, have arrived by its end. (Each later
    /// packet's lines are asked for when the packet that many slots before
    /// it is tracked.)
    pub fn staged_all(&mut self) {
        for slot in 0..CONN_PREFETCH_AHEAD {
            self.prefetch_conn_of(slot);
        }
    }

    fn prefetch_conn_of(&mut self, slot: usize) {
        if slot < BATCH
            && self.staged & (1 << slot) != 0
            && let Some(h) = &mut self.staging[slot].hash
        {
            self.tracker.prefetch_conn(h);
        }
    }

    /// [`ConnTable::execute`] for the packet in batch slot `slot`, with
    /// what [`ConnTable::stage`] read of it (the same packet, unchanged
    /// since, in the same zone: the caller's promise); without a staging
    /// for the slot, as `execute`. Inlined into the element's loop (its
    /// one caller on the packet path): as a call, its prologue and the
    /// returned fields cost a tracked packet ~9 instructions.
    #[inline(always)]
    pub fn execute_staged(
        &mut self,
        slot: usize,
        pkt: &mut Packet,
        ct: &CtAction,
        wide: CtWide,
        now_ms: u64,
    ) -> CtFields {
        let bit = 1u32 << slot;
        if self.staged & bit == 0 {
            return self.execute(pkt, ct, wide, now_ms);
        }
        self.staged &= !bit;
        self.prefetch_conn_of(slot + CONN_PREFETCH_AHEAD);
        let s = &self.staging[slot];
        track(
            &mut self.tracker,
            &mut self.counters,
            pkt,
            ct,
            wide,
            &s.summarised,
            s.hash,
            now_ms,
        )
    }

    /// Runs `ct` for `pkt` at time `now_ms`: its ct fields (the wide ones,
    /// label and original tuple, only where `wide` says a rule matches
    /// them), and the packet translated when `ct` has a `nat` and its
    /// connection a translation. (`ct.table` is the caller's: where the
    /// packet goes next.)
    pub fn execute(
        &mut self,
        pkt: &mut Packet,
        ct: &CtAction,
        wide: CtWide,
        now_ms: u64,
    ) -> CtFields {
        let summarised = summary::summarise(pkt.data(), ct.zone);
        track(
            &mut self.tracker,
            &mut self.counters,
            pkt,
            ct,
            wide,
            &summarised,
            None,
            now_ms,
        )
    }
}

/// `ct` for `pkt`, whose headers `summarised` holds (and `hash` its
/// connection key's hash, when at hand).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn track(
    tracker: &mut Tracker,
    counters: &mut CtCounters,
    pkt: &mut Packet,
    ct: &CtAction,
    wide: CtWide,
    summarised: &Result<Parsed, Untrackable>,
    hash: Option<KeyHash>,
    now_ms: u64,
) -> CtFields {
    // Built only when answered: built up front, it cost a packet ~7
    // instructions on the way that never answers it.
    let invalid = || CtFields::new(CtState::TRACKED | CtState::INVALID, ct.zone, 0);
    // Matched by reference: moving the summary out of the `Result`
    // copied it, ~40 instructions a packet.
    let parsed = match summarised {
        Ok(p) => p,
        Err(why) => {
            *match why {
                Untrackable::NotIp => &mut counters.not_ip,
                Untrackable::Fragment => &mut counters.fragment,
                Untrackable::Malformed => &mut counters.malformed,
            } += 1;
            return invalid();
        }
    };
    let mut verdict = match hash {
        Some(h) => tracker.process_hashed(&parsed.summary, h, now_ms),
        None => tracker.process(&parsed.summary, now_ms),
    };
    // `force`: a connection this packet answers is ended, and the
    // packet starts one in its own direction.
    if ct.force
        && ct.commit
        && verdict.state.has(CtState::REPLY)
        && !verdict.state.has(CtState::RELATED)
        && let Some(id) = verdict.conn
    {
        tracker.remove_conn(id);
        verdict = tracker.process(&parsed.summary, now_ms);
    }
    // The translation is read only where a `nat` asks for it: a copy of
    // the rewrite a packet cost ~7 instructions on every tracked packet.
    let mut committed_nat = None;
    let state = verdict.state;
    let committable = state.has(CtState::TRACKED) && !state.has(CtState::INVALID);
    if ct.commit && committable {
        let family = parsed.summary.key.family;
        let ask = ct.nat.as_ref().and_then(|n| nat_request(n, family));
        match tracker.commit_nat(&parsed.summary, &verdict, ask.as_ref(), now_ms) {
            Ok(done) => {
                if let Some((value, mask)) = ct.mark {
                    verdict.mark = (verdict.mark & !mask) | (value & mask);
                    tracker.set_mark(done.id, verdict.mark);
                }
                if let Some((value, mask)) = ct.label {
                    verdict.label = (verdict.label & !mask) | (value & mask);
                    tracker.set_label(done.id, verdict.label);
                }
                verdict.orig = verdict.orig.or(Some(parsed.summary.key));
                committed_nat = done.nat;
            }
            Err(CommitError::NotCommittable) => {}
            Err(_) => {
                counters.commit_refused += 1;
                return invalid();
            }
        }
    }
    let mut state = verdict.state.0;
    let mut translated = false;
    if ct.nat.is_some()
        && let Some(rw) = verdict.nat.or(committed_nat)
    {
        match nat::apply(pkt, parsed, &rw) {
            Ok(()) => {
                state |= rw.state_bits();
                translated = true;
            }
            Err(_) => counters.nat_failed += 1,
        }
    }
    // The wide fields only where a rule reads them: copied always, the
    // label (stored by the tracker as two 8-byte halves) was read back
    // with one 16-byte load the CPU could not forward, a stall a packet.
    let mut fields = CtFields {
        translated,
        ..CtFields::new(state, ct.zone, verdict.mark)
    };
    if wide.label {
        fields.label = verdict.label;
    }
    if wide.tuple {
        fields.orig = verdict.orig;
    }
    fields
}

#[cfg(test)]
mod tests;
