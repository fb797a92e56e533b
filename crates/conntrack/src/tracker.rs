//! The tracker: classifies packets against the table, commits new
//! connections, and expires idle ones.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};

use thiserror::Error;

use crate::index::{Entry, KeyHasher, ProbeStats};
use crate::key::{ConnKey, IcmpKind, icmp_kind};
use crate::nat::{self, ConnNat, NatError, NatKind, NatRequest, NatRewrite, PortSelection, Seeds};
use crate::packet::{L4, PacketSummary};
use crate::proto::{ProtoState, Update};
use crate::table::{Conn, Table};
use crate::timeouts::{TimeoutMillis, Timeouts, TimeoutsError};
use crate::verdict::{ConnId, CtState, Verdict};
use crate::wheel::{SweepStats, TimerSlots, Wheel};

/// Tracker settings, fixed at construction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Most connections held at once; the storage for them is reserved up
    /// front.
    pub capacity: u32,
    /// Most connections per zone, for zones without their own limit.
    /// `None`: no limit beyond `capacity`.
    pub default_zone_limit: Option<u32>,
    pub timeouts: Timeouts,
    /// Let a plain ACK start a TCP connection (OVS and Linux do by default,
    /// so a restarted switch keeps its established flows).
    pub tcp_pickup: bool,
    /// When a committed connection's packets start to be `+est`.
    pub established: Established,
}

/// When the packets of a committed connection are `+est` rather than
/// `+new`. The two datapaths of OVS differ here, and rule sets are
/// written for one or the other.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Established {
    /// Every packet after the commit that the connection accepts, in
    /// either direction: OVS's userspace (DPDK) datapath
    /// (`conn_update_state` sets `CS_ESTABLISHED` for any valid update).
    #[default]
    OnCommit,
    /// Only once a packet of the reply direction was seen; until then the
    /// original direction stays `+new`: Linux's conntrack (`IP_CT_NEW`
    /// until `IPS_SEEN_REPLY`), so OVS's kernel datapath.
    OnReply,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            capacity: 65_536,
            default_zone_limit: None,
            timeouts: Timeouts::default(),
            tcp_pickup: true,
            established: Established::default(),
        }
    }
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("capacity must be between 1 and {max}, not {got}")]
    Capacity { got: u32, max: u32 },
    #[error(transparent)]
    Timeouts(#[from] TimeoutsError),
}

/// Why `commit` stored nothing.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum CommitError {
    #[error("the packet is invalid or cannot start a connection")]
    NotCommittable,
    #[error("the connection table is full")]
    Full,
    #[error("zone {zone} already holds its limit of {limit} connections")]
    ZoneLimit { zone: u16, limit: u32 },
    /// The NAT request does not fit the packet (family, or a port range
    /// for a protocol without ports).
    #[error(transparent)]
    Nat(#[from] NatError),
    /// No free translated tuple was found: every candidate of the range was
    /// taken, or [`nat::MAX_PROBES`] of them were.
    #[error("no free address and port left in the NAT range")]
    NatExhausted,
}

/// What [`Tracker::commit_nat`] did: the connection, and what to rewrite in
/// the committing packet (`None` when the connection has no translation,
/// including when the chosen tuple is the packet's own).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NatCommit {
    pub id: ConnId,
    pub nat: Option<NatRewrite>,
}

/// Event counts, for export by the datapath.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Packets answered `+new`.
    pub new: u64,
    /// Packets answered `+est`.
    pub established: u64,
    /// Packets answered `+rel`.
    pub related: u64,
    /// Packets answered `+inv`.
    pub invalid: u64,
    /// Connections created by `commit`.
    pub committed: u64,
    pub zone_limit_refused: u64,
    pub full_refused: u64,
    /// NAT commits refused because no free translated tuple was found.
    pub nat_exhausted: u64,
    /// Connections removed because their timeout passed.
    pub expired: u64,
}

/// A read-only copy of one connection, for dumps and tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnView {
    pub id: ConnId,
    pub orig: ConnKey,
    pub reply: ConnKey,
    pub proto: ProtoState,
    pub mark: u32,
    pub label: u128,
    pub deadline_ms: u64,
    /// The translation, if any; `reply` is then the reverse of the
    /// translated tuple.
    pub nat: Option<NatKind>,
}

/// The verdict bits [`Counters`] counts packets by.
const COUNTED: u8 = CtState::NEW | CtState::ESTABLISHED | CtState::RELATED | CtState::INVALID;

/// A connection table owned by one thread (see the crate docs for how
/// several PMD threads are meant to share the work).
pub struct Tracker {
    config: Config,
    /// `config.timeouts` by class, what deadlines are computed from.
    timeouts: TimeoutMillis,
    table: Table,
    wheel: Wheel,
    zone_limits: HashMap<u16, Option<u32>>,
    counters: Counters,
    /// Packets by their verdict's new/est/rel/inv bits ([`COUNTED`]):
    /// one increment a packet, where a counter per bit took four. The
    /// per-bit counts are summed when read ([`Tracker::counters`]).
    by_state: [u64; COUNTED as usize + 1],
    /// Keyed per tracker: NAT port offsets in hash mode, and addresses of
    /// requests that are not persistent.
    nat_hasher: KeyHasher,
    /// Fixed key: addresses of persistent requests.
    persistent_hasher: KeyHasher,
    /// xorshift64 state for `random` port selection; never zero.
    rng: u64,
}

/// A connection key's hash in one tracker's index ([`Tracker::key_hash`]),
/// and, once its connection was asked for ([`Tracker::prefetch_conn`]),
/// the entry its index bucket most likely holds for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyHash {
    hash: crate::index::Hash,
    hint: Option<Entry>,
}

/// Slots are addressed by `u32`; one value stays free as a list end marker.
const MAX_CAPACITY: u32 = u32::MAX - 1;

impl Tracker {
    pub fn new(config: Config) -> Result<Tracker, ConfigError> {
        if config.capacity == 0 || config.capacity > MAX_CAPACITY {
            return Err(ConfigError::Capacity {
                got: config.capacity,
                max: MAX_CAPACITY,
            });
        }
        config.timeouts.validate()?;
        Ok(Tracker {
            timeouts: config.timeouts.millis(),
            config,
            table: Table::with_capacity(config.capacity),
            wheel: Wheel::new(),
            zone_limits: HashMap::new(),
            counters: Counters::default(),
            by_state: [0; COUNTED as usize + 1],
            nat_hasher: KeyHasher::random(),
            persistent_hasher: KeyHasher::fixed(),
            rng: RandomState::new().hash_one(0u64) | 1,
        })
    }

    pub fn counters(&self) -> Counters {
        let with = |bit: u8| -> u64 {
            (0..=COUNTED)
                .filter(|i| i & bit != 0)
                .map(|i| self.by_state[usize::from(i)])
                .sum()
        };
        Counters {
            new: with(CtState::NEW),
            established: with(CtState::ESTABLISHED),
            related: with(CtState::RELATED),
            invalid: with(CtState::INVALID),
            ..self.counters
        }
    }

    pub fn len(&self) -> u32 {
        self.table.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn zone_count(&self, zone: u16) -> u32 {
        self.table.zone_count(zone)
    }

    /// Overrides the default limit for one zone: `Some(None)` for no limit,
    /// `None` to fall back to the default. Existing connections stay.
    pub fn set_zone_limit(&mut self, zone: u16, limit: Option<Option<u32>>) {
        match limit {
            Some(limit) => self.zone_limits.insert(zone, limit),
            None => self.zone_limits.remove(&zone),
        };
    }

    fn zone_limit(&self, zone: u16) -> Option<u32> {
        self.zone_limits
            .get(&zone)
            .copied()
            .unwrap_or(self.config.default_zone_limit)
    }

    /// Classifies a packet. Updates the state of the connection it belongs
    /// to, if any; creates nothing (see [`Tracker::commit`]).
    pub fn process(&mut self, pkt: &PacketSummary, now_ms: u64) -> Verdict {
        let hash = self.key_hash(&pkt.key);
        self.process_hashed(pkt, hash, now_ms)
    }

    /// The index hash of `key`: computed once for a packet, it serves both
    /// the batch's prefetch ([`Tracker::prefetch_hashed`]) and the lookup
    /// ([`Tracker::process_hashed`]), which otherwise hash the key twice.
    #[inline(always)]
    pub fn key_hash(&self, key: &ConnKey) -> KeyHash {
        KeyHash {
            hash: self.table.hash(key),
            hint: None,
        }
    }

    /// Asks for the index bucket of a key hashed by [`Tracker::key_hash`]
    /// (a hint, as [`Tracker::prefetch`]).
    pub fn prefetch_hashed(&self, hash: KeyHash) {
        self.table.prefetch_hash(hash.hash);
    }

    /// Asks for the lines of the connection a key hashed by
    /// [`Tracker::key_hash`] most likely has (the slot its index bucket
    /// points at with the key's tag), and keeps that entry in `hash` for
    /// the lookup to try first. Reads the bucket: call it a while after
    /// [`Tracker::prefetch_hashed`] for the same hash, when the bucket has
    /// arrived, and a while before the packet's turn — the second stage of
    /// a software pipeline over a batch. Changes nothing in the tracker.
    pub fn prefetch_conn(&self, hash: &mut KeyHash) {
        hash.hint = self.table.prefetch_slot(hash.hash);
    }

    /// [`Tracker::process`] with the packet key's hash already at hand;
    /// `hash` must be [`Tracker::key_hash`] of `pkt.key` (of this tracker:
    /// the hash is keyed per table).
    ///
    /// It and the steps an established packet takes (`direct`,
    /// `lookup_live_hashed`, `update`, the state machine) are inlined into
    /// the caller's one body: as calls, their prologues and the verdict
    /// moved between them cost ~50 instructions a tracked packet.
    #[inline(always)]
    pub fn process_hashed(&mut self, pkt: &PacketSummary, hash: KeyHash, now_ms: u64) -> Verdict {
        debug_assert_eq!(
            hash.hash,
            self.key_hash(&pkt.key).hash,
            "a hash of another key"
        );
        // Each way counts its verdict's bits itself, while they are a
        // value in a register: counted here, after the ways join, the
        // byte was read back from the verdict by a wider load that the
        // CPU cannot forward from the byte's store (a stall a packet).
        match pkt.l4 {
            L4::Icmp { ty, inner, .. } => match icmp_kind(pkt.key.family, ty) {
                IcmpKind::Error => self.related(pkt, inner, now_ms),
                IcmpKind::Untracked => self.counted(CtState::INVALID),
                IcmpKind::Request | IcmpKind::Reply => self.direct(pkt, hash, now_ms),
            },
            L4::Tcp(_) | L4::Other => self.direct(pkt, hash, now_ms),
        }
    }

    /// [`Tracker::process`] over a batch, appending one verdict per packet
    /// to `verdicts`. Every packet's lookup runs first, read-only: the
    /// lookups of different packets do not depend on each other, so their
    /// cache misses overlap instead of being paid one after another.
    pub fn process_batch(
        &mut self,
        pkts: &[PacketSummary],
        now_ms: u64,
        verdicts: &mut Vec<Verdict>,
    ) {
        let mut touched = 0u64;
        for pkt in pkts {
            touched ^= self.table.touch(&pkt.key);
        }
        std::hint::black_box(touched);
        verdicts.extend(pkts.iter().map(|pkt| self.process(pkt, now_ms)));
    }

    /// Asks for the index bucket [`Tracker::process`] reads first for a
    /// packet of `key`: called for every packet of a batch before any is
    /// processed, the batch's bucket misses overlap instead of each packet
    /// paying its own in turn. A hint only: nothing changes, and a key
    /// that is not the packet's (or is absent) costs only the wasted
    /// fetch. (Prefetching the slots the buckets lead to in a second pass
    /// right after the first measured no better: it waits for the
    /// buckets there. [`Tracker::prefetch_conn`] asks for them a few
    /// packets later instead.)
    pub fn prefetch(&self, key: &ConnKey) {
        self.table.prefetch_bucket(key);
    }

    /// Counts a verdict of `bits` (besides `+trk`) in `by_state`.
    #[inline(always)]
    fn count(by_state: &mut [u64; COUNTED as usize + 1], bits: u8) {
        by_state[usize::from(bits & COUNTED)] += 1;
    }

    /// `Verdict::bits(bits)`, counted.
    #[inline(always)]
    fn counted(&mut self, bits: u8) -> Verdict {
        Self::count(&mut self.by_state, bits);
        Verdict::bits(bits)
    }

    /// Looks a key up, dropping a connection found past its deadline (the
    /// sweep may not have reached it yet).
    fn lookup_live(&mut self, key: &ConnKey, now_ms: u64) -> Option<Entry> {
        let hash = self.key_hash(key);
        self.lookup_live_hashed(key, hash, now_ms)
    }

    #[inline(always)]
    fn lookup_live_hashed(&mut self, key: &ConnKey, hash: KeyHash, now_ms: u64) -> Option<Entry> {
        let entry = self.table.find_hinted(key, hash.hash, hash.hint)?;
        if self.table.deadline(entry.index) <= now_ms {
            self.remove(entry.index);
            self.counters.expired += 1;
            return None;
        }
        Some(entry)
    }

    fn remove(&mut self, index: u32) {
        self.wheel.remove(&mut self.table, index);
        self.table.release(index);
    }

    #[inline(always)]
    fn direct(&mut self, pkt: &PacketSummary, hash: KeyHash, now_ms: u64) -> Verdict {
        match self.lookup_live_hashed(&pkt.key, hash, now_ms) {
            Some(entry) => self.update(entry, pkt, now_ms),
            // A connection not yet committed would have this packet's tuple
            // as its original direction, and OVS reports it so.
            None if ProtoState::valid_new(pkt, self.config.tcp_pickup) => Verdict {
                orig: Some(pkt.key),
                ..self.counted(CtState::NEW)
            },
            None => self.counted(CtState::INVALID),
        }
    }

    #[inline(always)]
    fn update(&mut self, entry: Entry, pkt: &PacketSummary, now_ms: u64) -> Verdict {
        let id = self.table.id(entry.index);
        let conn = self.table.at_mut(entry.index);
        match conn.proto.update(&pkt.l4, entry.reply) {
            Update::Reject => self.counted(CtState::INVALID),
            Update::Reopen => Verdict {
                replaces: Some(id),
                orig: Some(pkt.key),
                ..self.counted(CtState::NEW)
            },
            Update::Accept(class) => {
                // Written only when it changes: most packets leave it be.
                if entry.reply && !conn.reply_seen {
                    conn.reply_seen = true;
                }
                let mut bits =
                    if conn.reply_seen || self.config.established == Established::OnCommit {
                        CtState::ESTABLISHED
                    } else {
                        CtState::NEW
                    };
                if entry.reply {
                    bits |= CtState::REPLY;
                }
                Self::count(&mut self.by_state, bits);
                let mut verdict = Verdict {
                    mark: conn.mark,
                    label: conn.label,
                    orig: Some(conn.orig),
                    conn: Some(id),
                    ..Verdict::bits(bits)
                };
                // Set apart from the rest so that, without translation, the
                // compiler stores `None`'s tag alone rather than moving the
                // whole option through a temporary.
                if conn.nat != ConnNat::None {
                    verdict.nat = translated_rewrite(conn, entry.reply);
                }
                let deadline = self.timeouts.deadline(class, now_ms);
                self.wheel.refresh(&mut self.table, entry.index, deadline);
                verdict
            }
        }
    }

    /// An ICMP error is related to the connection of the packet it quotes.
    /// The quoted packet travelled the opposite way to the error, so the
    /// reverse of the quoted tuple is the key of the error's own direction:
    /// that is what is looked up (as Linux and OVS do). With NAT this
    /// matters: a quote of a translated packet carries the translated
    /// tuple, which is not a key, while its reverse is the reply key.
    fn related(&mut self, pkt: &PacketSummary, inner: Option<ConnKey>, now_ms: u64) -> Verdict {
        let Some(inner) = inner else {
            return self.counted(CtState::INVALID);
        };
        let quotes_error =
            inner.is_icmp() && icmp_kind(inner.family, inner.icmp_type_code().0) == IcmpKind::Error;
        if quotes_error || inner.zone != pkt.key.zone || inner.family != pkt.key.family {
            return self.counted(CtState::INVALID);
        }
        let Some(entry) = inner
            .reversed()
            .and_then(|own| self.lookup_live(&own, now_ms))
        else {
            return self.counted(CtState::INVALID);
        };
        let id = self.table.id(entry.index);
        let conn = self.table.at_mut(entry.index);
        let bits = if entry.reply {
            CtState::RELATED | CtState::REPLY
        } else {
            CtState::RELATED
        };
        Self::count(&mut self.by_state, bits);
        Verdict {
            mark: conn.mark,
            label: conn.label,
            orig: Some(conn.orig),
            conn: Some(id),
            nat: conn_rewrite(conn, entry.reply),
            ..Verdict::bits(bits)
        }
    }

    /// `ct(commit)`: makes the connection of a packet that [`process`]
    /// answered persistent. A connection that already exists is left as it
    /// is; a closed TCP connection the packet reopens is replaced.
    ///
    /// [`process`]: Tracker::process
    pub fn commit(
        &mut self,
        pkt: &PacketSummary,
        verdict: &Verdict,
        now_ms: u64,
    ) -> Result<ConnId, CommitError> {
        self.commit_nat(pkt, verdict, None, now_ms).map(|c| c.id)
    }

    /// `ct(commit, nat(…))`, or with `nat: None` `ct(commit, nat)`: as
    /// [`Tracker::commit`], and a new connection is translated as `nat`
    /// asks (see [`crate::nat`] for how the tuple is chosen). A connection
    /// that already exists keeps the translation it has, whatever `nat`
    /// says, and the answer carries its rewrite for this packet, as a bare
    /// `nat` would.
    ///
    /// Errors besides those of `commit`: [`CommitError::Nat`] when the
    /// request does not fit the packet, [`CommitError::NatExhausted`] when
    /// no free tuple was found; nothing is stored then.
    pub fn commit_nat(
        &mut self,
        pkt: &PacketSummary,
        verdict: &Verdict,
        nat: Option<&NatRequest>,
        now_ms: u64,
    ) -> Result<NatCommit, CommitError> {
        if !verdict.state.has(CtState::TRACKED) || verdict.state.has(CtState::INVALID) {
            return Err(CommitError::NotCommittable);
        }
        if let Some(old) = verdict.replaces {
            if self.table.get(old).is_some() {
                self.remove(old.index);
            }
        } else if let Some(id) = verdict.conn.filter(|&id| self.table.get(id).is_some()) {
            return Ok(NatCommit {
                id,
                nat: verdict.nat,
            });
        }
        if let Some(entry) = self.lookup_live(&pkt.key, now_ms) {
            let conn = self.table.at_mut(entry.index);
            let nat = conn_rewrite(conn, entry.reply);
            return Ok(NatCommit {
                id: self.table.id(entry.index),
                nat,
            });
        }
        self.create(pkt, nat, now_ms)
    }

    fn create(
        &mut self,
        pkt: &PacketSummary,
        nat: Option<&NatRequest>,
        now_ms: u64,
    ) -> Result<NatCommit, CommitError> {
        let plain_reply = pkt.key.reversed().ok_or(CommitError::NotCommittable)?;
        let proto =
            ProtoState::open(pkt, self.config.tcp_pickup).ok_or(CommitError::NotCommittable)?;
        if let Some(req) = nat {
            req.check(&pkt.key)?;
        } else if plain_reply == pkt.key || self.lookup_live(&plain_reply, now_ms).is_some() {
            // A key that is its own reverse (same address and port at both
            // ends) cannot hold two index entries.
            return Err(CommitError::NotCommittable);
        }
        if self.table.is_full() {
            self.counters.full_refused += 1;
            return Err(CommitError::Full);
        }
        let zone = pkt.key.zone;
        if let Some(limit) = self.zone_limit(zone)
            && self.table.zone_count(zone) >= limit
        {
            self.counters.zone_limit_refused += 1;
            return Err(CommitError::ZoneLimit { zone, limit });
        }
        let (reply, conn_nat) = match nat {
            None => (plain_reply, ConnNat::None),
            Some(req) => {
                let seeds = self.nat_seeds(&pkt.key, req);
                let found = nat::choose(&pkt.key, req, seeds, |reply| {
                    self.lookup_live(reply, now_ms).is_none()
                });
                let Some((translated, reply)) = found else {
                    self.counters.nat_exhausted += 1;
                    return Err(CommitError::NatExhausted);
                };
                // Keeping the packet's own tuple is no translation.
                let kind = if translated == pkt.key {
                    ConnNat::None
                } else {
                    ConnNat::from(req.kind())
                };
                (reply, kind)
            }
        };
        let conn = Conn::new(pkt.key, reply, proto, conn_nat);
        let rewrite = conn_rewrite(&conn, false);
        let Ok(id) = self.table.insert(conn) else {
            self.counters.full_refused += 1;
            return Err(CommitError::Full);
        };
        let deadline = self.timeouts.deadline(proto.timeout_class(), now_ms);
        self.wheel.insert(&mut self.table, id.index, deadline);
        self.counters.committed += 1;
        Ok(NatCommit { id, nat: rewrite })
    }

    /// Where the NAT search starts for `key` (see [`crate::nat`]).
    fn nat_seeds(&mut self, key: &ConnKey, req: &NatRequest) -> Seeds {
        let client = ConnKey {
            proto: 0,
            src_port: 0,
            dst_port: 0,
            dst: if req.persistent() { 0 } else { key.dst },
            ..*key
        };
        let addr = if req.persistent() {
            self.persistent_hasher.hash(&client)
        } else {
            self.nat_hasher.hash(&client)
        };
        let port = match req.selection() {
            PortSelection::Hash => self.nat_hasher.hash(key),
            PortSelection::Random => {
                // xorshift64 (Marsaglia 2003), multiplied on output.
                self.rng ^= self.rng << 13;
                self.rng ^= self.rng >> 7;
                self.rng ^= self.rng << 17;
                self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d)
            }
        };
        Seeds { addr, port }
    }

    /// Sets `ct_mark`; false if the connection is gone.
    pub fn set_mark(&mut self, id: ConnId, mark: u32) -> bool {
        self.table
            .get_mut(id)
            .map(|conn| conn.mark = mark)
            .is_some()
    }

    /// Sets `ct_label`; false if the connection is gone.
    pub fn set_label(&mut self, id: ConnId, label: u128) -> bool {
        self.table
            .get_mut(id)
            .map(|conn| conn.label = label)
            .is_some()
    }

    /// Removes connections whose deadline is at or before `now_ms`. Cost:
    /// the expired connections plus those the wheel must relink (see
    /// `wheel`), never the whole table.
    pub fn expire(&mut self, now_ms: u64) -> SweepStats {
        let stats = self
            .wheel
            .expire(&mut self.table, now_ms, |table, index| table.release(index));
        self.counters.expired += stats.expired;
        stats
    }

    /// Removes every connection, or those of one zone. O(table): a control
    /// command, not for the packet path.
    /// Ends one connection (`ct(commit,force)` on a packet of its reply
    /// direction); false if it is gone already.
    pub fn remove_conn(&mut self, id: ConnId) -> bool {
        if self.table.get(id).is_none() {
            return false;
        }
        self.remove(id.index);
        true
    }

    pub fn flush(&mut self, zone: Option<u16>) -> u32 {
        let doomed: Vec<u32> = self
            .table
            .occupied()
            .filter(|(_, conn)| zone.is_none_or(|z| conn.orig.zone == z))
            .map(|(id, _)| id.index)
            .collect();
        for &index in &doomed {
            self.remove(index);
        }
        doomed.len() as u32
    }

    pub fn get(&self, id: ConnId) -> Option<ConnView> {
        let conn = self.table.get(id)?;
        Some(self.view(id, conn))
    }

    /// Every connection, in slot order. O(table).
    pub fn connections(&self) -> impl Iterator<Item = ConnView> + '_ {
        self.table.occupied().map(|(id, conn)| self.view(id, conn))
    }

    fn view(&self, id: ConnId, conn: &Conn) -> ConnView {
        ConnView {
            id,
            orig: conn.orig,
            reply: conn.reply,
            proto: conn.proto,
            mark: conn.mark,
            label: conn.label,
            deadline_ms: self.table.deadline(id.index),
            nat: conn.nat.kind(),
        }
    }

    /// How many cache lines of the index lookups of present keys read.
    /// O(table): for tests and diagnostics.
    pub fn index_probe_stats(&self) -> ProbeStats {
        self.table.probe_stats()
    }

    /// Checks that the two-direction index agrees with the slab. O(table);
    /// for tests.
    pub fn check_consistency(&self) -> Result<(), String> {
        self.table.check_consistency()
    }
}

/// The rewrite for a packet of `conn` in the given direction; `None`, after
/// one byte compare, for connections without translation.
#[inline]
fn conn_rewrite(conn: &Conn, reply: bool) -> Option<NatRewrite> {
    if conn.nat == ConnNat::None {
        return None;
    }
    translated_rewrite(conn, reply)
}

/// Kept out of line: only translated connections get here.
#[cold]
#[inline(never)]
fn translated_rewrite(conn: &Conn, reply: bool) -> Option<NatRewrite> {
    let kind = conn.nat.kind()?;
    Some(nat::rewrite(kind, &conn.orig, &conn.reply, reply))
}
