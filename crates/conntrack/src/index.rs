//! The index from a direction's key to its slot: a fixed open-addressing
//! table of 64-byte buckets, sized once and never resized.
//!
//! A bucket holds eight packed entries (tag, home distance, direction,
//! slot), so one probe reads one cache line; the full key lives in the slab
//! and is compared only when a tag matches. Collisions spill into the next
//! bucket (linear probing over buckets). Invariant: an entry stored `d`
//! buckets after its home has every bucket from its home up to (not
//! including) its own full. A lookup may therefore stop at the first bucket
//! with a free place, and deletion restores the invariant by shifting a
//! later entry back into the hole (no tombstones), so churn never lengthens
//! probes.
//!
//! The hash is keyed per table: tuples are chosen by guests, and with an
//! unkeyed hash one guest could aim every key at one bucket.

use std::hash::{BuildHasher, RandomState};

use crate::key::{ConnKey, Family};

const WAYS: usize = 8;
/// Entries per connection (original and reply key).
const PER_CONN: u64 = 2;
/// At most half of all places are ever used: the chance that a bucket
/// spills stays near 2 %, and a spill rarely reaches a third bucket.
const PLACES_PER_ENTRY: u64 = 2;

const INDEX_BITS: u32 = 32;
const REPLY_BIT: u64 = 1 << INDEX_BITS;
const DIST_SHIFT: u32 = 33;
const DIST_MAX: u64 = (1 << 15) - 1;
const TAG_SHIFT: u32 = 48;

/// Where a key leads: a slot, and whether the key is its reply direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) index: u32,
    pub(crate) reply: bool,
}

/// One cache line of entries; zero is a free place (tags are never zero).
#[derive(Clone, Copy)]
#[repr(align(64))]
struct Bucket([u64; WAYS]);

/// A key's hash split into what the index needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Hash {
    home: usize,
    tag: u64,
}

/// The insert found no free place within reach: only possible when the
/// index is used beyond the capacity it was sized for.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct IndexFull;

/// Probe lengths of the index, in buckets (cache lines) read to find each
/// key present: 1 when a key sits in its home bucket.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProbeStats {
    pub entries: u64,
    pub max: u64,
    pub mean: f64,
}

pub(crate) struct Index {
    buckets: Vec<Bucket>,
    hasher: KeyHasher,
    len: u64,
}

fn pack(hash: Hash, dist: u64, entry: Entry) -> u64 {
    (hash.tag << TAG_SHIFT)
        | (dist << DIST_SHIFT)
        | (u64::from(entry.reply) * REPLY_BIT)
        | u64::from(entry.index)
}

fn unpack(word: u64) -> Entry {
    Entry {
        index: word as u32,
        reply: word & REPLY_BIT != 0,
    }
}

fn dist_of(word: u64) -> u64 {
    (word >> DIST_SHIFT) & DIST_MAX
}

impl Index {
    /// An index for `capacity` connections (two keys each).
    pub(crate) fn for_connections(capacity: u32) -> Self {
        let places = u64::from(capacity) * PER_CONN * PLACES_PER_ENTRY;
        let buckets = places.div_ceil(WAYS as u64).max(1) as usize;
        // On huge pages like the slab (`nfv_mem::huge`), filled now.
        Index {
            buckets: nfv_mem::huge::filled_on_huge_pages(buckets, Bucket([0; WAYS])).0,
            hasher: KeyHasher::random(),
            len: 0,
        }
    }

    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    #[inline(always)]
    pub(crate) fn hash(&self, key: &ConnKey) -> Hash {
        let h = self.hasher.hash(key);
        // The high half picks the bucket (multiply-shift, no power-of-two
        // size needed); the low bits make the tag, so the two are unrelated.
        let home = ((u128::from(h) * self.buckets.len() as u128) >> 64) as usize;
        let tag = (h & 0xffff).max(1);
        Hash { home, tag }
    }

    fn bucket_after(&self, home: usize, dist: u64) -> usize {
        (home + dist as usize) % self.buckets.len()
    }

    /// The entry whose tag matches and for which `is_key` confirms the full
    /// key (the caller compares against the slab).
    ///
    /// Every packet a `ct` tracks comes here, so the walk avoids a
    /// division per bucket (the next bucket wraps by comparison) and tests
    /// tag and home distance, adjacent in the word, with one compare.
    pub(crate) fn find(&self, hash: Hash, mut is_key: impl FnMut(Entry) -> bool) -> Option<Entry> {
        let n = self.buckets.len();
        let mut b = hash.home;
        for dist in 0..n as u64 {
            // Tags are never zero, so a free place never matches.
            let want = (hash.tag << (TAG_SHIFT - DIST_SHIFT)) | dist;
            let bucket = &self.buckets[b].0;
            let mut has_room = false;
            for &word in bucket {
                has_room |= word == 0;
                if word >> DIST_SHIFT == want {
                    let entry = unpack(word);
                    if is_key(entry) {
                        return Some(entry);
                    }
                }
            }
            if has_room {
                return None;
            }
            b += 1;
            if b == n {
                b = 0;
            }
        }
        None
    }

    /// The first entry of `hash`'s home bucket whose tag and home match
    /// it: where its key most likely sits, keys not compared (a hint for
    /// a prefetch and a lookup). Reads the bucket, so it should be in the
    /// cache already ([`Index::prefetch`]).
    pub(crate) fn home_candidate(&self, hash: Hash) -> Option<Entry> {
        let want = hash.tag << (TAG_SHIFT - DIST_SHIFT);
        let bucket = &self.buckets.get(hash.home)?.0;
        let word = bucket.iter().find(|&&w| w >> DIST_SHIFT == want)?;
        Some(unpack(*word))
    }

    /// Asks for the home bucket of `hash` to be brought into the cache
    /// (a hint: nothing is read).
    pub(crate) fn prefetch(&self, hash: Hash) {
        if let Some(b) = self.buckets.get(hash.home) {
            prefetch(b);
        }
    }

    /// Adds an entry; the caller has checked that its key is absent.
    pub(crate) fn insert(&mut self, hash: Hash, entry: Entry) -> Result<(), IndexFull> {
        let reach = (self.buckets.len() as u64).min(DIST_MAX + 1);
        for dist in 0..reach {
            let b = self.bucket_after(hash.home, dist);
            if let Some(place) = self.buckets[b].0.iter_mut().find(|w| **w == 0) {
                *place = pack(hash, dist, entry);
                self.len += 1;
                return Ok(());
            }
        }
        Err(IndexFull)
    }

    /// Removes the entry for `entry` (found by its hash; slot and direction
    /// identify it without a key compare). False if it was not there.
    pub(crate) fn remove(&mut self, hash: Hash, entry: Entry) -> bool {
        for dist in 0..self.buckets.len() as u64 {
            let b = self.bucket_after(hash.home, dist);
            let bucket = &mut self.buckets[b].0;
            let found = bucket
                .iter()
                .position(|&w| w != 0 && unpack(w) == entry && dist_of(w) == dist);
            if let Some(way) = found {
                bucket[way] = 0;
                self.len -= 1;
                self.fill_hole(b, way);
                return true;
            }
            if bucket.contains(&0) {
                return false;
            }
        }
        false
    }

    /// Restores the invariant after `(bucket, way)` was emptied: while the
    /// hole's bucket was full before, some later entry may depend on it, so
    /// the nearest entry whose home is at or before the hole moves into it,
    /// leaving a hole further on.
    fn fill_hole(&mut self, mut hole_bucket: usize, mut hole_way: usize) {
        let n = self.buckets.len();
        let mut scan = hole_bucket;
        loop {
            let others_free = self.buckets[hole_bucket]
                .0
                .iter()
                .enumerate()
                .any(|(w, &word)| w != hole_way && word == 0);
            if others_free && scan == hole_bucket {
                return;
            }
            scan = (scan + 1) % n;
            if scan == hole_bucket {
                return;
            }
            let back = ((scan + n - hole_bucket) % n) as u64;
            let bucket = &self.buckets[scan].0;
            let movable = bucket.iter().position(|&w| w != 0 && dist_of(w) >= back);
            match movable {
                Some(way) => {
                    let word = bucket[way];
                    let moved = word - (back << DIST_SHIFT);
                    self.buckets[hole_bucket].0[hole_way] = moved;
                    self.buckets[scan].0[way] = 0;
                    (hole_bucket, hole_way) = (scan, way);
                }
                None if bucket.contains(&0) => return,
                None => {}
            }
        }
    }

    /// Every entry with the bucket it sits in and its home distance. For
    /// consistency checks and tests.
    pub(crate) fn entries(&self) -> impl Iterator<Item = (usize, u64, Entry)> + '_ {
        self.buckets.iter().enumerate().flat_map(|(b, bucket)| {
            bucket
                .0
                .iter()
                .filter(|&&w| w != 0)
                .map(move |&w| (b, dist_of(w), unpack(w)))
        })
    }

    /// Checks that `hash` is where the entry `entry` claims to belong and
    /// that every bucket it skipped is full. For consistency checks.
    pub(crate) fn check_placement(&self, hash: Hash, bucket: usize, dist: u64) -> bool {
        if self.bucket_after(hash.home, dist) != bucket {
            return false;
        }
        (0..dist).all(|d| !self.buckets[self.bucket_after(hash.home, d)].0.contains(&0))
    }

    pub(crate) fn probe_stats(&self) -> ProbeStats {
        let (mut entries, mut max, mut sum) = (0u64, 0u64, 0u64);
        for (_, dist, _) in self.entries() {
            entries += 1;
            max = max.max(dist + 1);
            sum += dist + 1;
        }
        let mean = if entries == 0 {
            0.0
        } else {
            sum as f64 / entries as f64
        };
        ProbeStats { entries, max, mean }
    }
}

/// Asks for the cache line at `p` (a hint: it reads nothing, faults on
/// no address).
#[inline(always)]
pub(crate) fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: PREFETCHT0 is a hint: it does not fault on any address.
        // (SSE is part of the x86_64 baseline.)
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// A keyed multiply-mix hash over the key's five 64-bit words. Each word is
/// combined with a secret before a 64×64→128-bit multiply whose halves are
/// folded together; without the secret, a guest cannot tell which tuples
/// land together. Not a cryptographic PRF: it only has to stop guests from
/// choosing colliding keys cheaply.
#[derive(Clone, Copy, Debug)]
pub(crate) struct KeyHasher {
    secret: [u64; 8],
}

#[inline(always)]
fn folded_multiply(a: u64, b: u64) -> u64 {
    let product = u128::from(a) * u128::from(b);
    (product as u64) ^ ((product >> 64) as u64)
}

impl KeyHasher {
    /// A fresh secret from std's randomly keyed `RandomState`.
    pub(crate) fn random() -> Self {
        let state = RandomState::new();
        KeyHasher {
            secret: std::array::from_fn(|i| state.hash_one(i as u64) | 1),
        }
    }

    /// A hasher with a fixed secret: the same values in every process, for
    /// choices that must survive a restart (persistent NAT addresses).
    /// Not for the index.
    pub(crate) fn fixed() -> Self {
        // The first fractional hex digits of pi, made odd.
        const DIGITS: [u64; 8] = [
            0x243f_6a88_85a3_08d3,
            0x1319_8a2e_0370_7344,
            0xa409_3822_299f_31d0,
            0x082e_fa98_ec4e_6c89,
            0x4528_21e6_38d0_1377,
            0xbe54_66cf_34e9_0c6c,
            0xc0ac_29b7_c97c_50dd,
            0x3f84_d5b5_b547_0917,
        ];
        KeyHasher {
            secret: DIGITS.map(|d| d | 1),
        }
    }

    #[inline(always)]
    pub(crate) fn hash(&self, key: &ConnKey) -> u64 {
        let k = &self.secret;
        let family = match key.family {
            Family::V4 => 0u64,
            Family::V6 => 1,
        };
        let meta = u64::from(key.zone)
            | family << 16
            | u64::from(key.proto) << 24
            | u64::from(key.src_port) << 32
            | u64::from(key.dst_port) << 48;
        let src = folded_multiply(key.src as u64 ^ k[0], (key.src >> 64) as u64 ^ k[1]);
        let dst = folded_multiply(key.dst as u64 ^ k[2], (key.dst >> 64) as u64 ^ k[3]);
        let rest = folded_multiply(meta ^ k[4], src ^ k[5]);
        folded_multiply(dst ^ k[6], rest ^ k[7])
    }
}

#[cfg(test)]
mod tests;
