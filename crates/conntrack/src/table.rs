//! Storage: a slab of connections with a free list, and the index from
//! either direction's key to a slot, all reserved at construction.
//!
//! The index is std's `HashMap`. Reserved for twice the capacity, it does
//! not grow while the table fills, but under heavy churn its deleted-entry
//! markers can make it rehash (in place, or into a larger table when more
//! than half full): a rare O(table) pause on a commit. A fixed open-addressing
//! table of our own would remove that; it is not needed for the foundation.

use std::collections::HashMap;

use crate::key::ConnKey;
use crate::proto::ProtoState;
use crate::verdict::ConnId;

pub(crate) struct Conn {
    pub(crate) orig: ConnKey,
    pub(crate) reply: ConnKey,
    pub(crate) proto: ProtoState,
    pub(crate) reply_seen: bool,
    pub(crate) mark: u32,
    pub(crate) label: u128,
}

struct Slot {
    generation: u32,
    conn: Option<Conn>,
}

/// Where a key leads: a slot, and whether the key is its reply direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) index: u32,
    pub(crate) reply: bool,
}

pub(crate) struct Table {
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Two entries per connection: its original and its reply key. std's
    /// SipHash with a random key: tuples are chosen by guests, so an
    /// unkeyed hash would let one guest make every lookup collide.
    index: HashMap<ConnKey, Entry>,
    zone_counts: Vec<u32>,
    capacity: u32,
}

impl Table {
    pub(crate) fn with_capacity(capacity: u32) -> Self {
        let cap = capacity as usize;
        Table {
            slots: Vec::with_capacity(cap),
            free: Vec::with_capacity(cap),
            index: HashMap::with_capacity(2 * cap),
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
        self.index.get(key).copied()
    }

    pub(crate) fn id(&self, index: u32) -> ConnId {
        ConnId {
            index,
            generation: self.slots[index as usize].generation,
        }
    }

    pub(crate) fn get(&self, id: ConnId) -> Option<&Conn> {
        let slot = self.slots.get(id.index as usize)?;
        if slot.generation == id.generation {
            slot.conn.as_ref()
        } else {
            None
        }
    }

    pub(crate) fn get_mut(&mut self, id: ConnId) -> Option<&mut Conn> {
        let slot = self.slots.get_mut(id.index as usize)?;
        if slot.generation == id.generation {
            slot.conn.as_mut()
        } else {
            None
        }
    }

    /// The connection in a slot the index points at.
    pub(crate) fn at_mut(&mut self, index: u32) -> &mut Conn {
        self.slots[index as usize]
            .conn
            .as_mut()
            .expect("the index points only at occupied slots")
    }

    /// Stores a connection; the caller has checked capacity and that
    /// neither key is present.
    pub(crate) fn insert(&mut self, conn: Conn) -> ConnId {
        debug_assert!(!self.is_full());
        debug_assert!(
            !self.index.contains_key(&conn.orig) && !self.index.contains_key(&conn.reply)
        );
        let index = match self.free.pop() {
            Some(index) => index,
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    conn: None,
                });
                (self.slots.len() - 1) as u32
            }
        };
        self.index.insert(
            conn.orig,
            Entry {
                index,
                reply: false,
            },
        );
        self.index.insert(conn.reply, Entry { index, reply: true });
        self.zone_counts[usize::from(conn.orig.zone)] += 1;
        let slot = &mut self.slots[index as usize];
        slot.conn = Some(conn);
        ConnId {
            index,
            generation: slot.generation,
        }
    }

    /// Frees a slot and drops both its keys from the index.
    pub(crate) fn release(&mut self, index: u32) {
        let slot = &mut self.slots[index as usize];
        let Some(conn) = slot.conn.take() else { return };
        slot.generation = slot.generation.wrapping_add(1);
        self.index.remove(&conn.orig);
        self.index.remove(&conn.reply);
        self.zone_counts[usize::from(conn.orig.zone)] -= 1;
        self.free.push(index);
    }

    pub(crate) fn occupied(&self) -> impl Iterator<Item = (ConnId, &Conn)> {
        self.slots.iter().enumerate().filter_map(|(i, slot)| {
            let conn = slot.conn.as_ref()?;
            Some((
                ConnId {
                    index: i as u32,
                    generation: slot.generation,
                },
                conn,
            ))
        })
    }

    /// Checks that the index and the slab describe the same connections:
    /// every occupied slot has exactly its two keys in the index, and the
    /// index has nothing else. O(table); for tests.
    pub(crate) fn check_consistency(&self) -> Result<(), String> {
        let mut live = 0usize;
        for (id, conn) in self.occupied() {
            live += 1;
            let want = [(conn.orig, false), (conn.reply, true)];
            for (key, reply) in want {
                match self.index.get(&key) {
                    Some(e)
                        if *e
                            == (Entry {
                                index: id.index,
                                reply,
                            }) => {}
                    other => {
                        return Err(format!(
                            "slot {} key {key:?} indexed as {other:?}",
                            id.index
                        ));
                    }
                }
            }
        }
        if self.index.len() != 2 * live {
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
}
