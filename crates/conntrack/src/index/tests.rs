//! The index on its own: keys live in a plain array standing in for the
//! slab, and entry `i` points at `keys[i]`.

use super::*;
use crate::key::proto;

/// An index over an array of keys, as the table uses it over its slab.
struct Harness {
    index: Index,
    keys: Vec<ConnKey>,
}

impl Harness {
    fn new(connections: u32, keys: Vec<ConnKey>) -> Self {
        Harness {
            index: Index::for_connections(connections),
            keys,
        }
    }

    fn entry(i: usize) -> Entry {
        Entry {
            index: i as u32,
            reply: i % 2 == 1,
        }
    }

    fn insert(&mut self, i: usize) -> Result<(), IndexFull> {
        let hash = self.index.hash(&self.keys[i]);
        self.index.insert(hash, Self::entry(i))
    }

    fn remove(&mut self, i: usize) -> bool {
        let hash = self.index.hash(&self.keys[i]);
        self.index.remove(hash, Self::entry(i))
    }

    fn find(&self, key: &ConnKey) -> Option<Entry> {
        let keys = &self.keys;
        self.index
            .find(self.index.hash(key), |e| keys[e.index as usize] == *key)
    }

    /// Every present key is found and every entry is where its hash says.
    fn check(&self, present: impl Iterator<Item = usize>) {
        let mut count = 0;
        for i in present {
            assert_eq!(self.find(&self.keys[i]), Some(Self::entry(i)), "key {i}");
            count += 1;
        }
        assert_eq!(self.index.len(), count);
        for (bucket, dist, e) in self.index.entries() {
            let hash = self.index.hash(&self.keys[e.index as usize]);
            assert!(self.index.check_placement(hash, bucket, dist), "{e:?}");
        }
    }
}

fn tcp(src: u128, dst: u128, sport: u16, dport: u16) -> ConnKey {
    ConnKey::new(0, Family::V4, proto::TCP, src, dst, sport, dport)
}

/// A small deterministic generator (xorshift), so failures repeat.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn key(&mut self) -> ConnKey {
        let (a, b) = (self.next(), self.next());
        tcp(
            u128::from(a as u32),
            u128::from(b as u32),
            (a >> 32) as u16,
            (b >> 32) as u16,
        )
    }
}

#[test]
fn insert_find_remove() {
    let keys: Vec<ConnKey> = (0..6).map(|i| tcp(1, 2, 1000 + i, 80)).collect();
    let mut h = Harness::new(3, keys);
    for i in 0..6 {
        h.insert(i).unwrap();
    }
    h.check(0..6);
    let cases = [(2, true), (2, false), (5, true), (0, true)];
    for (i, present_before) in cases {
        assert_eq!(h.remove(i), present_before, "removing key {i}");
        assert_eq!(h.find(&h.keys[i]), None, "key {i} is gone");
    }
    h.check([1, 3, 4].into_iter());
    assert_eq!(h.find(&tcp(9, 9, 9, 9)), None, "never inserted");
}

#[test]
fn forced_collisions_spill_and_shift_back() {
    // Every entry claims bucket 0 with the same tag: the worst a hash can
    // do. Removal orders: first, middle, last spilled, and all in reverse.
    let orders: [&[usize]; 4] = [&[0], &[13], &[29], &[29, 20, 8, 0]];
    for order in orders {
        let mut index = Index::for_connections(8);
        assert_eq!(index.buckets.len(), 4);
        let hash = Hash { home: 0, tag: 7 };
        for i in 0..30 {
            index.insert(hash, Harness::entry(i)).unwrap();
        }
        for &i in order {
            assert!(index.remove(hash, Harness::entry(i)), "{order:?}");
        }
        let left: Vec<usize> = (0..30).filter(|i| !order.contains(i)).collect();
        for &i in &left {
            let want = Harness::entry(i);
            assert_eq!(index.find(hash, |e| e == want), Some(want), "{order:?}");
        }
        for (bucket, dist, e) in index.entries() {
            assert!(index.check_placement(hash, bucket, dist), "{order:?} {e:?}");
        }
        assert_eq!(index.len(), left.len() as u64);
    }
}

#[test]
fn a_full_index_refuses_and_recovers() {
    for connections in [1u32, 3, 10] {
        let mut index = Index::for_connections(connections);
        let places = index.buckets.len() * WAYS;
        let mut rng = Rng(u64::from(connections) + 1);
        let hashes: Vec<Hash> = (0..=places).map(|_| index.hash(&rng.key())).collect();
        for (i, &hash) in hashes[..places].iter().enumerate() {
            assert_eq!(index.insert(hash, Harness::entry(i)), Ok(()));
        }
        let extra = hashes[places];
        assert_eq!(
            index.insert(extra, Harness::entry(places)),
            Err(IndexFull),
            "{connections} connections: every place taken"
        );
        assert!(index.remove(hashes[0], Harness::entry(0)));
        assert_eq!(index.insert(extra, Harness::entry(places)), Ok(()));
    }
}

#[test]
fn churn_at_full_capacity_does_not_lengthen_probes() {
    const CONNECTIONS: u32 = 4096;
    const CYCLES: usize = 1_000_000;
    let live = 2 * CONNECTIONS as usize;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    // Twice the live count of key positions: a removed key's position is
    // refilled with a fresh key before it is inserted again.
    let mut h = Harness::new(CONNECTIONS, (0..2 * live).map(|_| rng.key()).collect());
    let mut present: Vec<usize> = (0..live).collect();
    let mut absent: Vec<usize> = (live..2 * live).collect();
    for &i in &present {
        h.insert(i).unwrap();
    }
    let filled = h.index.probe_stats();
    for _ in 0..CYCLES {
        let out = (rng.next() % live as u64) as usize;
        let back = (rng.next() % live as u64) as usize;
        assert!(h.remove(present[out]));
        std::mem::swap(&mut present[out], &mut absent[back]);
        h.keys[present[out]] = rng.key();
        h.insert(present[out]).unwrap();
    }
    let churned = h.index.probe_stats();
    eprintln!("probe lengths after filling: {filled:?}; after {CYCLES} cycles: {churned:?}");
    h.check(present.iter().copied());
    assert_eq!(churned.entries, live as u64);
    assert!(churned.max <= 8, "{churned:?} (after filling: {filled:?})");
    assert!(
        churned.mean < 1.05,
        "{churned:?} (after filling: {filled:?})"
    );
    assert!(
        churned.mean < filled.mean + 0.02,
        "{churned:?} (after filling: {filled:?})"
    );
}

/// Keys that differ in one field only, as one guest might pick them.
fn one_field_families() -> [(&'static str, Vec<ConnKey>); 5] {
    let n = 8192u32;
    let v6 = |src: u128| ConnKey::new(0, Family::V6, proto::TCP, src, 1, 1, 80);
    [
        (
            "source port",
            (0..n).map(|i| tcp(1, 2, i as u16, 80)).collect(),
        ),
        (
            "source /19",
            (0..n)
                .map(|i| tcp(0x0a00_0000 + u128::from(i), 2, 1, 80))
                .collect(),
        ),
        (
            "source stride 2^20",
            (0..n).map(|i| tcp(u128::from(i) << 20, 2, 1, 80)).collect(),
        ),
        (
            "v6 upper half",
            (0..n).map(|i| v6(u128::from(i) << 64)).collect(),
        ),
        (
            "zone",
            (0..n)
                .map(|i| ConnKey {
                    zone: i as u16,
                    ..tcp(1, 2, 1, 80)
                })
                .collect(),
        ),
    ]
}

#[test]
fn keys_differing_in_one_field_still_spread() {
    for (name, keys) in one_field_families() {
        let count = keys.len();
        let mut h = Harness::new(count as u32 / 2, keys);
        for i in 0..count {
            h.insert(i).unwrap();
        }
        h.check(0..count);
        let stats = h.index.probe_stats();
        assert!(stats.max <= 8 && stats.mean < 1.05, "{name}: {stats:?}");
    }
}

#[test]
fn tables_have_their_own_hash_key() {
    let key = tcp(1, 2, 3, 4);
    let hashes: Vec<u64> = (0..4).map(|_| KeyHasher::random().hash(&key)).collect();
    let distinct = hashes
        .iter()
        .enumerate()
        .all(|(i, a)| hashes[..i].iter().all(|b| a != b));
    assert!(distinct, "{hashes:x?}");
}

/// The slot a prefetch asks for: a key that sits in its home bucket with
/// no other entry of its tag before it is its home's candidate; whatever
/// the candidate, it carries the key's tag and home. (A hint: a key that
/// spilled, or shares its tag, may be missed.)
#[test]
fn the_home_candidate_is_the_key_in_its_home_bucket() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let keys: Vec<ConnKey> = (0..2000).map(|_| rng.key()).collect();
    let mut h = Harness::new(1000, keys);
    for i in 0..2000 {
        h.insert(i).unwrap();
    }
    let mut found = 0;
    for i in 0..2000 {
        let hash = h.index.hash(&h.keys[i]);
        let Some(c) = h.index.home_candidate(hash) else {
            continue;
        };
        let theirs = h.index.hash(&h.keys[c.index as usize]);
        assert_eq!((theirs.home, theirs.tag), (hash.home, hash.tag), "{c:?}");
        found += usize::from(c == Harness::entry(i));
    }
    assert!(
        found > 1800,
        "{found} of 2000 keys are their home's candidate"
    );
}
