//! Storage: a slab of connections with a free list, and the index from
//! either direction's key to a slot (see `index`), all reserved at
//! construction and never resized; the slab and the index on transparent
//! huge pages where the kernel gives them, faulted in at construction
//! when the machine can spare the memory (`nfv_mem::huge`).
//!
//! A slot is laid out for the packet path. A packet of the original
//! direction reads the index bucket of its key and the slot's first two
//! lines: the original key with the deadline, generation and mark; the
//! protocol state, the flags and the label. A reply packet reads the third
//! as well, which holds the reply key. The wheel's links, needed only when
//! a connection is inserted, moved or removed, sit on the fourth line.

use crate::index::{Entry, Hash, Index, IndexFull, ProbeStats};
use crate::key::ConnKey;
use crate::nat::ConnNat;
use crate::proto::ProtoState;
use crate::verdict::ConnId;
use crate::wheel::{Links, TimerSlots};

/// 128-byte aligned, so that the two lines an original-direction packet
/// reads are one aligned pair: the unit an Intel core's L2 adjacent-line
/// prefetcher completes. (Laid out as lines 1 and 3 instead, the hot
/// lines measured no faster than three of them.)
#[repr(C, align(128))]
pub(crate) struct Conn {
    // First line: what every lookup compares or returns.
    pub(crate) orig: ConnKey,
    deadline_ms: u64,
    generation: u32,
    pub(crate) mark: u32,
    // Second line: what every packet updates or returns.
    pub(crate) proto: ProtoState,
    pub(crate) reply_seen: bool,
    /// The translation, if any; the reply key is then the reverse of the
    /// translated tuple (see `nat`).
    pub(crate) nat: ConnNat,
    live: bool,
    pub(crate) label: u128,
    // Third line: read only by reply packets.
    pub(crate) reply: ConnKey,
    // Cold: the wheel's links.
    links: Links,
}

impl Conn {
    pub(crate) fn new(orig: ConnKey, reply: ConnKey, proto: ProtoState, nat: ConnNat) -> Self {
        Conn {
            orig,
            deadline_ms: 0,
            generation: 0,
            mark: 0,
            proto,
            reply_seen: false,
            nat,
            live: true,
            label: 0,
            reply,
            links: Links::UNLINKED,
        }
    }

    fn key(&self, reply: bool) -> &ConnKey {
        if reply { &self.reply } else { &self.orig }
    }
}

pub(crate) struct Table {
    slots: Vec<Conn>,
    free: Vec<u32>,
    /// Two entries per connection: its original and its reply key.
    index: Index,
    zone_counts: Vec<u32>,
    capacity: u32,
}

impl Table {
    pub(crate) fn with_capacity(capacity: u32) -> Self {
        let cap = capacity as usize;
        Table {
            // Reached at random by every tracked packet: on huge pages,
            // faulted in now unless the machine cannot spare it (see
            // `nfv_mem::huge`).
            slots: nfv_mem::huge::vec_on_huge_pages(cap).0,
            free: Vec::with_capacity(cap),
            index: Index::for_connections(capacity),
            zone_counts: vec![0; usize::from(u16::MAX) + 1],
            capacity,
        }
    }

    pub(crate) fn len(&self) -> u32 {
        (self.slots.len() - self.free.len()) as u32
    }

    pub(crate) fn is_full(&self) -> bool {
        self.len() >= self.capacity
    }

    pub(crate) fn zone_count(&self, zone: u16) -> u32 {
        self.zone_counts[usize::from(zone)]
    }

    pub(crate) fn find(&self, key: &ConnKey) -> Option<Entry> {
        self.find_hashed(key, self.index.hash(key))
    }

    /// [`Table::find`] with `key`'s hash ([`Table::hash`]) at hand.
    pub(crate) fn find_hashed(&self, key: &ConnKey, hash: Hash) -> Option<Entry> {
        let slots = &self.slots;
        self.index.find(hash, |entry| {
            slots[entry.index as usize].key(entry.reply) == key
        })
    }

    #[inline(always)]
    pub(crate) fn hash(&self, key: &ConnKey) -> Hash {
        self.index.hash(key)
    }

    /// Asks for the index bucket a lookup of `key` reads first (a hint).
    pub(crate) fn prefetch_bucket(&self, key: &ConnKey) {
        self.prefetch_hash(self.hash(key));
    }

    /// Asks for the packet-path lines of the slot `hash`'s home bucket most
    /// likely leads to ([`Index::home_candidate`]): the reply key's line
    /// only for an entry of the reply direction. Returns
    /// that entry: a hint for [`Table::find_hinted`]. Reads the bucket,
    /// which should have been asked for well before.
    pub(crate) fn prefetch_slot(&self, hash: Hash) -> Option<Entry> {
        let e = self.index.home_candidate(hash)?;
        let slot = self.slots.get(e.index as usize)?;
        let p: *const Conn = slot;
        let p = p.cast::<u8>();
        crate::index::prefetch(p);
        crate::index::prefetch(p.wrapping_add(64));
        if e.reply {
            crate::index::prefetch(p.wrapping_add(128));
        }
        Some(e)
    }

    /// [`Table::find_hashed`], trying `hint` first: a live slot that holds
    /// `key` in the hinted direction is the key's (each key is in the
    /// table once), so the bucket walk is skipped; a stale hint (the slot
    /// freed, reused or moved since) costs one compare.
    pub(crate) fn find_hinted(
        &self,
        key: &ConnKey,
        hash: Hash,
        hint: Option<Entry>,
    ) -> Option<Entry> {
        if let Some(e) = hint
            && let Some(slot) = self.slots.get(e.index as usize)
            && slot.live
            && slot.key(e.reply) == key
        {
            return Some(e);
        }
        self.find_hashed(key, hash)
    }

    /// [`Table::prefetch_bucket`] of a key hashed already.
    pub(crate) fn prefetch_hash(&self, hash: Hash) {
        self.index.prefetch(hash);
    }

    /// Looks a key up only to bring its bucket and slot lines into the
    /// cache: returns the slot's deadline so the read is not optimised away.
    pub(crate) fn touch(&self, key: &ConnKey) -> u64 {
        self.find(key).map_or(0, |e| {
            let slot = &self.slots[e.index as usize];
            slot.deadline_ms ^ u64::from(slot.proto.timeout_class() as u8)
        })
    }

    pub(crate) fn id(&self, index: u32) -> ConnId {
        ConnId {
            index,
            generation: self.slots[index as usize].generation,
        }
    }

    pub(crate) fn get(&self, id: ConnId) -> Option<&Conn> {
        let slot = self.slots.get(id.index as usize)?;
        (slot.live && slot.generation == id.generation).then_some(slot)
    }

    pub(crate) fn get_mut(&mut self, id: ConnId) -> Option<&mut Conn> {
        let slot = self.slots.get_mut(id.index as usize)?;
        (slot.live && slot.generation == id.generation).then_some(slot)
    }

    /// The connection in a slot the index points at.
    pub(crate) fn at_mut(&mut self, index: u32) -> &mut Conn {
        let slot = &mut self.slots[index as usize];
        debug_assert!(slot.live, "the index points only at occupied slots");
        slot
    }

    /// Stores a connection; the caller has checked capacity and that
    /// neither key is present. Fails only if the index has no place within
    /// reach, which its sizing makes practically impossible.
    pub(crate) fn insert(&mut self, conn: Conn) -> Result<ConnId, IndexFull> {
        debug_assert!(!self.is_full());
        debug_assert!(self.find(&conn.orig).is_none() && self.find(&conn.reply).is_none());
        let index = match self.free.last() {
            Some(&index) => index,
            None => self.slots.len() as u32,
        };
        let (orig, reply) = (self.index.hash(&conn.orig), self.index.hash(&conn.reply));
        self.index.insert(orig, entry(index, false))?;
        if let Err(full) = self.index.insert(reply, entry(index, true)) {
            self.index.remove(orig, entry(index, false));
            return Err(full);
        }
        self.zone_counts[usize::from(conn.orig.zone)] += 1;
        let mut conn = conn;
        if self.free.pop().is_some() {
            conn.generation = self.slots[index as usize].generation;
            self.slots[index as usize] = conn;
        } else {
            self.slots.push(conn);
        }
        Ok(self.id(index))
    }

    /// Frees a slot and drops both its keys from the index. The wheel must
    /// no longer hold it.
    pub(crate) fn release(&mut self, index: u32) {
        let slot = &mut self.slots[index as usize];
        if !slot.live {
            return;
        }
        slot.live = false;
        slot.generation = slot.generation.wrapping_add(1);
        let (orig, reply, zone) = (slot.orig, slot.reply, slot.orig.zone);
        self.index
            .remove(self.index.hash(&orig), entry(index, false));
        self.index
            .remove(self.index.hash(&reply), entry(index, true));
        self.zone_counts[usize::from(zone)] -= 1;
        self.free.push(index);
    }

    pub(crate) fn probe_stats(&self) -> ProbeStats {
        self.index.probe_stats()
    }

    pub(crate) fn occupied(&self) -> impl Iterator<Item = (ConnId, &Conn)> {
        self.slots.iter().enumerate().filter_map(|(i, slot)| {
            slot.live.then_some((
                ConnId {
                    index: i as u32,
                    generation: slot.generation,
                },
                slot,
            ))
        })
    }

    /// Checks that the index and the slab describe the same connections:
    /// every occupied slot has exactly its two keys in the index, each
    /// entry sits where its key's hash puts it with every bucket it skipped
    /// full, and the index has nothing else. O(table); for tests.
    pub(crate) fn check_consistency(&self) -> Result<(), String> {
        let mut live = 0usize;
        for (id, conn) in self.occupied() {
            live += 1;
            for reply in [false, true] {
                let key = conn.key(reply);
                let found = self.find(key);
                if found != Some(entry(id.index, reply)) {
                    return Err(format!(
                        "slot {} key {key:?} indexed as {found:?}",
                        id.index
                    ));
                }
            }
        }
        self.check_index_entries()?;
        if self.index.len() != 2 * live as u64 {
            return Err(format!(
                "index has {} keys for {live} connections",
                self.index.len()
            ));
        }
        let zones: u64 = self.zone_counts.iter().map(|&c| u64::from(c)).sum();
        if zones != live as u64 {
            return Err(format!(
                "zone counts sum to {zones}, {live} connections live"
            ));
        }
        Ok(())
    }

    /// Every index entry points at a live slot and is placed as its key's
    /// hash says.
    fn check_index_entries(&self) -> Result<(), String> {
        for (bucket, dist, e) in self.index.entries() {
            let Some(slot) = self.slots.get(e.index as usize).filter(|s| s.live) else {
                return Err(format!("index entry {e:?} points at no connection"));
            };
            let hash: Hash = self.index.hash(slot.key(e.reply));
            if !self.index.check_placement(hash, bucket, dist) {
                return Err(format!(
                    "entry {e:?} in bucket {bucket} at distance {dist} is misplaced"
                ));
            }
        }
        Ok(())
    }
}

fn entry(index: u32, reply: bool) -> Entry {
    Entry { index, reply }
}

impl TimerSlots for Table {
    fn deadline(&self, idx: u32) -> u64 {
        self.slots[idx as usize].deadline_ms
    }

    fn set_deadline(&mut self, idx: u32, deadline_ms: u64) {
        self.slots[idx as usize].deadline_ms = deadline_ms;
    }

    fn links(&mut self, idx: u32) -> &mut Links {
        &mut self.slots[idx as usize].links
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_original_direction_packet_reads_two_of_the_slots_lines() {
        use std::mem::{offset_of, size_of};
        let cases = [
            ("orig", offset_of!(Conn, orig), size_of::<ConnKey>(), 0),
            ("deadline", offset_of!(Conn, deadline_ms), 8, 0),
            ("generation", offset_of!(Conn, generation), 4, 0),
            ("mark", offset_of!(Conn, mark), 4, 0),
            ("proto", offset_of!(Conn, proto), size_of::<ProtoState>(), 1),
            ("reply_seen", offset_of!(Conn, reply_seen), 1, 1),
            ("nat", offset_of!(Conn, nat), 1, 1),
            ("live", offset_of!(Conn, live), 1, 1),
            ("label", offset_of!(Conn, label), 16, 1),
            ("reply", offset_of!(Conn, reply), size_of::<ConnKey>(), 2),
        ];
        for (field, offset, size, line) in cases {
            let lines = (offset / 64, (offset + size - 1) / 64);
            assert_eq!(
                lines,
                (line, line),
                "{field}: bytes {offset}..{}",
                offset + size
            );
        }
        assert_eq!(std::mem::align_of::<Conn>(), 128);
        assert_eq!(std::mem::size_of::<Conn>(), 256);
    }

    /// A hinted lookup answers as the plain one whatever the hint: right,
    /// naming the other direction or another connection, pointing at a
    /// freed slot, a reused one, or past the slab.
    #[test]
    fn a_hinted_find_answers_as_find_whatever_the_hint() {
        use crate::key::{Family, proto};
        use crate::proto::OtherState;
        let key = |i: u16| ConnKey::new(0, Family::V4, proto::UDP, 1, 2, 1000 + i, 53);
        let conn = |i: u16| {
            let k = key(i);
            Conn::new(
                k,
                k.reversed().unwrap(),
                ProtoState::Other(OtherState::First),
                ConnNat::None,
            )
        };
        let mut t = Table::with_capacity(16);
        let ids: Vec<ConnId> = (0..8).map(|i| t.insert(conn(i)).unwrap()).collect();
        // Slot of connection 3 freed, then reused by connection 100.
        t.release(ids[3].index);
        t.insert(conn(100)).unwrap();
        t.release(ids[5].index);
        let hints = [
            None,
            Some(entry(0, false)),
            Some(entry(0, true)),
            Some(entry(ids[3].index, false)),
            Some(entry(ids[5].index, false)),
            Some(entry(7, true)),
            Some(entry(1_000, false)),
        ];
        let mut lookups = 0;
        for i in (0..8).chain([100, 200]) {
            for k in [key(i), key(i).reversed().unwrap()] {
                let plain = t.find(&k);
                for hint in hints {
                    assert_eq!(t.find_hinted(&k, t.hash(&k), hint), plain, "{k:?} {hint:?}");
                    lookups += 1;
                }
            }
        }
        assert_eq!(lookups, 10 * 2 * hints.len());
        assert!(t.find(&key(3)).is_none() && t.find(&key(100)).is_some());
    }
}
