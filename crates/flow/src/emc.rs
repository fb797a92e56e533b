//! Exact-match cache (EMC): the first tier of the forwarding decision.
//!
//! One per PMD thread (never shared, so no atomics). Two-way set
//! associative like OVS's EMC: a key may live at two slots picked by
//! different bits of its hash. Misses of the classifier are cached too
//! (`rule == None`), so a flood of unmatched packets does not run the
//! classifier per packet. The whole cache is flushed whenever the flow
//! table's version changes, which keeps cached `Arc<Rule>`s truthful.

use crate::key::{BASE_WORDS, FlowKey, KEY_WORDS, PACKET_EXT};
use crate::rule::Rule;
use std::sync::Arc;

/// One cache line: the key's base words (all an IPv4 packet sets, its
/// connection-tracking state, zone and mark included) and the answer. The
/// other words live in a parallel array that only a key with
/// [`PACKET_EXT`] (IPv6, ARP, a tracked label or tuple) reads, so IPv4
/// flows touch one line per probe.
///
/// Seven words leave room for the rule pointer only: no stored hash (the
/// seven words compare about as fast), and `rule` says both whether the
/// slot is in use (`None`: empty) and what it caches (the cache's `miss`
/// rule stands for "the table has no rule"). A probe whose base words
/// are equal but whose extended words are not (IPv6 flows on one pair of
/// MACs and ports) reads the extended words to tell, where a stored hash
/// used to tell most of them apart in this line.
#[derive(Clone, Default)]
#[repr(align(64))]
struct Slot {
    base: [u64; BASE_WORDS],
    rule: Option<Arc<Rule>>,
}

const _: () = assert!(
    std::mem::size_of::<Slot>() == 64,
    "a slot is one cache line"
);

type Extended = [u64; KEY_WORDS - BASE_WORDS];

impl Slot {
    #[inline(always)]
    fn holds(&self, key: &FlowKey, ext: &Extended) -> bool {
        let base = (0..BASE_WORDS).fold(0, |acc, i| acc | (self.base[i] ^ key.w[i]));
        base == 0 && (key.w[4] & PACKET_EXT == 0 || ext[..] == key.w[BASE_WORDS..])
    }
}

/// Result of a cache probe.
pub enum EmcLookup<'a> {
    /// Key cached; `None` means "cached table miss".
    Hit(Option<&'a Arc<Rule>>),
    Miss,
}

pub struct ExactMatchCache {
    slots: Box<[Slot]>,
    /// Each slot's words past the base ones (read for extended keys only).
    ext: Box<[Extended]>,
    mask: u32,
    version: u64,
    /// What a slot caching a table miss points at (compared by address;
    /// never returned).
    miss: Arc<Rule>,
}

impl ExactMatchCache {
    /// `entries` is rounded up to a power of two (minimum 2).
    pub fn new(entries: usize) -> Self {
        let n = entries.max(2).next_power_of_two();
        ExactMatchCache {
            slots: vec![Slot::default(); n].into_boxed_slice(),
            ext: vec![[0; KEY_WORDS - BASE_WORDS]; n].into_boxed_slice(),
            mask: (n - 1) as u32,
            version: 0,
            miss: Arc::new(Rule::new(
                crate::rule::FlowSpec {
                    priority: 0,
                    cookie: 0,
                    timeouts: Default::default(),
                    matches: crate::rule::Match::ANY,
                    tun_id: None,
                    actions: Vec::new(),
                },
                0,
            )),
        }
    }

    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Bytes of its slots (fixed at creation), the extended words' array
    /// included (an IPv4-only workload never touches it).
    pub fn memory_bytes(&self) -> usize {
        self.slots.len() * (std::mem::size_of::<Slot>() + std::mem::size_of::<Extended>())
    }

    /// Flushes the cache if the flow table changed since it was filled.
    #[inline]
    pub fn sync_version(&mut self, table_version: u64) {
        if self.version != table_version {
            self.clear();
            self.version = table_version;
        }
    }

    pub fn clear(&mut self) {
        for s in self.slots.iter_mut() {
            s.rule = None;
        }
    }

    #[inline(always)]
    fn positions(&self, hash: u32) -> (usize, usize) {
        (
            (hash & self.mask) as usize,
            ((hash >> 16 ^ hash.rotate_left(7)) & self.mask) as usize,
        )
    }

    /// Where the two slots `hash` may live at are, for the caller to
    /// prefetch a batch's slots before probing them: past a few thousand
    /// flows the slots are cold, and probed one packet after another each
    /// miss would wait for the one before.
    #[inline(always)]
    pub fn slot_addresses(&self, hash: u32) -> [*const u8; 2] {
        let (a, b) = self.positions(hash);
        [a, b].map(|i| (&raw const self.slots[i]).cast())
    }

    #[inline(always)]
    pub fn lookup(&self, key: &FlowKey, hash: u32) -> EmcLookup<'_> {
        let (a, b) = self.positions(hash);
        for i in [a, b] {
            let s = &self.slots[i];
            if let Some(rule) = &s.rule
                && s.holds(key, &self.ext[i])
            {
                let cached_miss = Arc::ptr_eq(rule, &self.miss);
                return EmcLookup::Hit((!cached_miss).then_some(rule));
            }
        }
        EmcLookup::Miss
    }

    /// Caches `key → rule`, evicting the less useful of its two slots
    /// (an empty slot first, else the second way).
    pub fn insert(&mut self, key: &FlowKey, hash: u32, rule: Option<Arc<Rule>>) {
        let (a, b) = self.positions(hash);
        let i = if self.slots[a].rule.is_none() || self.slots[a].holds(key, &self.ext[a]) {
            a
        } else {
            b
        };
        if key.w[4] & PACKET_EXT != 0 {
            self.ext[i].copy_from_slice(&key.w[BASE_WORDS..]);
        }
        let s = &mut self.slots[i];
        s.base.copy_from_slice(&key.w[..BASE_WORDS]);
        s.rule = Some(rule.unwrap_or_else(|| self.miss.clone()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule::{FlowSpec, Match};

    fn rule(p: u16) -> Arc<Rule> {
        Arc::new(Rule::new(
            FlowSpec {
                priority: p,
                cookie: 0,
                timeouts: Default::default(),
                matches: Match::ANY,
                tun_id: None,
                actions: vec![],
            },
            p as u64,
        ))
    }

    #[test]
    fn hit_miss_and_flush_on_version_change() {
        let mut emc = ExactMatchCache::new(8);
        let mut k = FlowKey::ZERO;
        k.set_tp_dst(80);
        let h = k.hash();
        assert!(matches!(emc.lookup(&k, h), EmcLookup::Miss));
        emc.insert(&k, h, Some(rule(5)));
        match emc.lookup(&k, h) {
            EmcLookup::Hit(Some(r)) => assert_eq!(r.spec.priority, 5),
            _ => panic!("expected hit"),
        }
        let mut k2 = k;
        k2.set_tp_dst(81);
        emc.insert(&k2, k2.hash(), None);
        assert!(matches!(emc.lookup(&k2, k2.hash()), EmcLookup::Hit(None)));
        emc.sync_version(1);
        assert!(matches!(emc.lookup(&k, h), EmcLookup::Miss));
        assert!(matches!(emc.lookup(&k2, k2.hash()), EmcLookup::Miss));
    }

    #[test]
    fn many_keys_never_return_a_wrong_rule() {
        let mut emc = ExactMatchCache::new(16);
        for i in 0..1000u16 {
            let mut k = FlowKey::ZERO;
            k.set_tp_src(i);
            emc.insert(&k, k.hash(), Some(rule(i)));
        }
        for i in 0..1000u16 {
            let mut k = FlowKey::ZERO;
            k.set_tp_src(i);
            if let EmcLookup::Hit(Some(r)) = emc.lookup(&k, k.hash()) {
                assert_eq!(r.spec.priority, i);
            }
        }
    }

    /// IPv6 keys equal in their base words but not in their addresses
    /// are different entries (the extended words are compared for them),
    /// and an IPv4 key never matches a slot an IPv6 key left.
    #[test]
    fn extended_words_tell_ipv6_keys_apart() {
        let mut emc = ExactMatchCache::new(64);
        let v6 = |dst: u128| {
            let mut k = FlowKey::ZERO;
            k.set_dl_type(0x86dd);
            k.set_ipv6_dst(dst);
            k.w[4] |= PACKET_EXT;
            k
        };
        let (a, b) = (v6(1), v6(2));
        emc.insert(&a, a.packet_hash(), Some(rule(1)));
        assert!(matches!(
            emc.lookup(&a, a.packet_hash()),
            EmcLookup::Hit(Some(_))
        ));
        // Same hash forced: only the extended words differ.
        assert!(matches!(emc.lookup(&b, a.packet_hash()), EmcLookup::Miss));
        let mut v4 = a;
        v4.w[4] &= !PACKET_EXT;
        v4.w[BASE_WORDS..].fill(0);
        assert!(matches!(emc.lookup(&v4, a.packet_hash()), EmcLookup::Miss));
    }
    /// IPv4 keys equal but for the tracker's state, zone or mark (the
    /// base word w6) are different entries, misses included; one that
    /// also carries a label compares its extended words.
    #[test]
    fn the_ct_word_tells_ipv4_keys_apart() {
        use crate::key::ct_state::{EST, NEW, TRK};
        let mut emc = ExactMatchCache::new(64);
        let mut plain = FlowKey::ZERO;
        plain.set_dl_type(0x0800);
        plain.set_nw_dst(0x0a00_0001);
        let with = |state, zone, mark, label| {
            let mut k = plain;
            k.set_ct(state, zone, mark, label, None);
            k
        };
        let new = with(TRK | NEW, 0, 0, 0);
        let est = with(TRK | EST, 0, 0, 0);
        let zone = with(TRK | EST, 1, 0, 0);
        let mark = with(TRK | EST, 0, 9, 0);
        let label = with(TRK | EST, 0, 0, 1);
        emc.insert(&new, new.packet_hash(), Some(rule(1)));
        emc.insert(&est, est.packet_hash(), None);
        emc.insert(&label, label.packet_hash(), Some(rule(3)));
        let hit = |k: &FlowKey, h: u32| match emc.lookup(k, h) {
            EmcLookup::Hit(r) => Some(r.map(|r| r.spec.priority)),
            EmcLookup::Miss => None,
        };
        assert_eq!(hit(&new, new.packet_hash()), Some(Some(1)));
        assert_eq!(hit(&est, est.packet_hash()), Some(None), "a cached miss");
        assert_eq!(hit(&label, label.packet_hash()), Some(Some(3)));
        // Same slots forced: only the ct word (or the label) differs.
        for k in [plain, zone, mark, with(TRK | EST, 0, 0, 2)] {
            for h in [new.packet_hash(), est.packet_hash(), label.packet_hash()] {
                assert_eq!(hit(&k, h), None, "{k:?}");
            }
        }
    }
}
