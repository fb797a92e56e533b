//! Megaflow cache: the tier between the exact-match cache and the
//! classifier (OVS's dpcls of megaflows), one per PMD thread.
//!
//! A classifier lookup also tells which bits of the key its answer
//! depended on ([`crate::Classifier::lookup_with_mask`]); the answer is
//! cached under that mask, so every later packet equal on those bits —
//! however many distinct 5-tuples they are — is answered by one hash
//! probe per mask in use instead of one per rule mask. Behind 1,000 ACL
//! rules on 17 prefix lengths, a million flows to the same destination
//! share one megaflow.
//!
//! Megaflows never disagree: two that both match a packet were both
//! derived from the same rule set, so they name the same rule. Lookups
//! may therefore try masks in any order; they go busiest mask first
//! (re-ranked every [`RERANK_EVERY`] batches, counts halved so the
//! ranking follows the traffic).
//!
//! Bounded: at most `capacity` megaflows; a full cache takes no new ones
//! (counted) and keeps serving the ones it has, rather than emptying
//! itself. The whole cache is emptied when the flow table's version
//! changes, like the EMC, so no decision outlives the rules it came from;
//! emptied, not freed: the maps keep their allocations for the next fill,
//! so a PMD that has reached its working set allocates nothing more, even
//! under a controller changing rules a thousand times a second.
//!
//! A megaflow whose mask covers the whole source address and source port
//! is a per-connection entry (the packet got as far as the ports of
//! 5-tuple rules ahead of the answer): one per flow, the EMC's job, and
//! filling this cache with them only costs inserts
//! ([`MegaflowCache::worth_caching`]). Packets that part from those rules
//! earlier — another source address — depend only on the fields up to
//! there (the classifier's staged lookup) and do share megaflows.

use crate::classifier::{MaskedKey as Masked, PassThrough};
use crate::key::{AddrKey, BaseKey, FlowKey};
use crate::rule::Rule;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::Arc;

/// Batches between two re-rankings of the masks.
pub const RERANK_EVERY: u32 = 1 << 16;

type Map<K> = HashMap<K, Option<Arc<Rule>>, BuildHasherDefault<PassThrough>>;

/// Masked key → the rule (`None`: the table has no rule for them). A mask
/// with no bit past the key's base words (every IPv4 rule's) keys its map
/// by those seven words: under a third of the bytes to store, hash and
/// compare (IPv4 rules on `ct_state`, `ct_zone` or `ct_mark` included); a
/// mask with no bit past the IPv6 addresses (IPv6 5-tuples) by eleven
/// ([`AddrKey`]); only wider ones (ND, ARP link-layer addresses) by the
/// whole key.
enum Entries {
    Base(Map<BaseKey>),
    Addr(Map<AddrKey>),
    Full(Map<Masked>),
}

impl Entries {
    fn for_mask(mask: &FlowKey) -> Entries {
        if !mask.has_extended() {
            Entries::Base(Map::default())
        } else if AddrKey::fits(mask) {
            Entries::Addr(Map::default())
        } else {
            Entries::Full(Map::default())
        }
    }

    /// These (emptied) entries for another mask: the map kept where the
    /// key kind is the same.
    fn refit(self, mask: &FlowKey) -> Entries {
        let fresh = Entries::for_mask(mask);
        match (self, fresh) {
            (Entries::Base(m), Entries::Base(_)) => Entries::Base(m),
            (Entries::Addr(m), Entries::Addr(_)) => Entries::Addr(m),
            (Entries::Full(m), Entries::Full(_)) => Entries::Full(m),
            (_, fresh) => fresh,
        }
    }

    #[cfg(test)]
    fn capacity(&self) -> usize {
        match self {
            Entries::Base(m) => m.capacity(),
            Entries::Addr(m) => m.capacity(),
            Entries::Full(m) => m.capacity(),
        }
    }

    fn clear(&mut self) {
        match self {
            Entries::Base(m) => m.clear(),
            Entries::Addr(m) => m.clear(),
            Entries::Full(m) => m.clear(),
        }
    }

    /// Bytes of the map's table, approximately (key, rule pointer and one
    /// control byte per entry of capacity).
    fn bytes(&self) -> usize {
        let rule = std::mem::size_of::<Option<Arc<Rule>>>() + 1;
        match self {
            Entries::Base(m) => m.capacity() * (std::mem::size_of::<BaseKey>() + rule),
            Entries::Addr(m) => m.capacity() * (std::mem::size_of::<AddrKey>() + rule),
            Entries::Full(m) => m.capacity() * (std::mem::size_of::<Masked>() + rule),
        }
    }

    #[inline(always)]
    fn get(&self, key: &FlowKey, mask: &FlowKey) -> Option<&Option<Arc<Rule>>> {
        match self {
            Entries::Base(m) => m.get(&BaseKey::masked(key, mask)),
            Entries::Addr(m) => m.get(&AddrKey::masked(key, mask)),
            Entries::Full(m) => m.get(&Masked(key.masked(mask))),
        }
    }

    /// True when the key was not cached before.
    fn insert(&mut self, key: &FlowKey, mask: &FlowKey, rule: Option<Arc<Rule>>) -> bool {
        match self {
            Entries::Base(m) => m.insert(BaseKey::masked(key, mask), rule).is_none(),
            Entries::Addr(m) => m.insert(AddrKey::masked(key, mask), rule).is_none(),
            Entries::Full(m) => m.insert(Masked(key.masked(mask)), rule).is_none(),
        }
    }
}

struct Subtable {
    mask: FlowKey,
    hits: std::cell::Cell<u64>,
    entries: Entries,
}

pub struct MegaflowCache {
    subtables: Vec<Subtable>,
    /// Emptied subtables kept for their allocations.
    spare: Vec<Subtable>,
    len: usize,
    capacity: usize,
    version: u64,
    lookups: u32,
    /// Megaflows not cached because the cache was full.
    pub refused: u64,
}

impl MegaflowCache {
    pub fn new(capacity: usize) -> MegaflowCache {
        MegaflowCache {
            subtables: Vec::new(),
            spare: Vec::new(),
            len: 0,
            capacity,
            version: 0,
            lookups: 0,
            refused: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes its maps hold, approximately: each map's capacity in entries
    /// (key, rule pointer and one control byte each), spare maps included.
    /// Bounded by `capacity`: a full cache stops growing.
    pub fn memory_bytes(&self) -> usize {
        self.subtables
            .iter()
            .chain(&self.spare)
            .map(|st| std::mem::size_of::<Subtable>() + st.entries.bytes())
            .sum()
    }

    /// Masks in use.
    pub fn masks(&self) -> usize {
        self.subtables.len()
    }

    /// Empties the cache when the flow table changed since it was filled.
    #[inline]
    pub fn sync_version(&mut self, table_version: u64) {
        if self.version != table_version {
            for mut st in self.subtables.drain(..) {
                st.entries.clear();
                st.hits.set(0);
                self.spare.push(st);
            }
            self.len = 0;
            self.version = table_version;
        }
    }

    /// Whether a classification that depended on `mask` is worth a
    /// megaflow: not when the mask pins the source address and port (see
    /// the module docs).
    #[inline]
    pub fn worth_caching(mask: &FlowKey) -> bool {
        let pins = |per_flow: FlowKey| mask.masked(&per_flow) == per_flow;
        let mut v4 = FlowKey::ZERO;
        v4.set_nw_src(u32::MAX);
        v4.set_tp_src(u16::MAX);
        let mut v6 = FlowKey::ZERO;
        v6.set_ipv6_src(u128::MAX);
        v6.set_tp_src(u16::MAX);
        !pins(v4) && !pins(v6)
    }

    /// Once per batch: re-ranks the masks every [`RERANK_EVERY`] calls.
    #[inline]
    pub fn maintain(&mut self) {
        self.lookups = self.lookups.wrapping_add(1);
        if self.lookups.is_multiple_of(RERANK_EVERY) {
            self.rerank();
        }
    }

    /// The cached decision for `key`: `Some(rule or None)`, or `None` when
    /// no megaflow covers it.
    #[inline]
    pub fn lookup(&self, key: &FlowKey) -> Option<Option<&Arc<Rule>>> {
        self.lookup_at(key).map(|(_, hit)| hit)
    }

    /// [`Self::lookup`], also naming the mask (subtable) that answered,
    /// for [`Self::same_megaflow`].
    #[inline]
    pub fn lookup_at(&self, key: &FlowKey) -> Option<(usize, Option<&Arc<Rule>>)> {
        self.subtables.iter().enumerate().find_map(|(i, st)| {
            let hit = st.entries.get(key, &st.mask)?;
            st.hits.set(st.hits.get() + 1);
            Some((i, hit.as_ref()))
        })
    }

    /// Whether `a` and `b` are equal on the mask of subtable `at` (as
    /// [`Self::lookup_at`] named it since the last [`Self::maintain`],
    /// which may re-rank: inserts only append): then `b`'s
    /// megaflow answers `a` too, without a hash or a probe — a run of
    /// packets of one megaflow (one source's many connections behind an
    /// ACL) pays one probe. Megaflows never disagree, so the answer is the
    /// one a probe would give.
    #[inline(always)]
    pub fn same_megaflow(&self, at: usize, a: &FlowKey, b: &FlowKey) -> bool {
        let Some(st) = self.subtables.get(at) else {
            return false;
        };
        // Word by word: straight-line XORs the compiler vectorizes.
        let same = |words: usize| {
            (0..words).fold(0, |acc, i| acc | ((a.w[i] ^ b.w[i]) & st.mask.w[i])) == 0
        };
        match &st.entries {
            Entries::Base(_) => same(crate::key::BASE_WORDS),
            Entries::Addr(_) => same(crate::key::ADDR_WORDS),
            Entries::Full(_) => same(crate::key::KEY_WORDS),
        }
    }

    /// Caches `rule` (or the miss) for every key equal to `key` on `mask`.
    pub fn insert(&mut self, key: &FlowKey, mask: &FlowKey, rule: Option<Arc<Rule>>) {
        if self.len >= self.capacity {
            self.refused += 1;
            return;
        }
        let i = match self.subtables.iter().position(|s| s.mask == *mask) {
            Some(i) => i,
            None => {
                let st = match self.spare.pop() {
                    Some(st) => Subtable {
                        mask: *mask,
                        hits: st.hits,
                        entries: st.entries.refit(mask),
                    },
                    None => Subtable {
                        mask: *mask,
                        hits: std::cell::Cell::new(0),
                        entries: Entries::for_mask(mask),
                    },
                };
                self.subtables.push(st);
                self.subtables.len() - 1
            }
        };
        if self.subtables[i].entries.insert(key, mask, rule) {
            self.len += 1;
        }
    }

    #[cold]
    fn rerank(&mut self) {
        self.subtables
            .sort_by_key(|s| std::cmp::Reverse(s.hits.get()));
        for st in &mut self.subtables {
            st.hits.set(st.hits.get() / 2);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classifier::Classifier;
    use crate::parse_flow;
    use proptest::prelude::*;

    fn classifier(rules: &[String]) -> Classifier {
        let mut c = Classifier::new();
        for (seq, r) in rules.iter().enumerate() {
            c.insert(Arc::new(Rule::new(parse_flow(r).unwrap(), seq as u64)));
        }
        c
    }

    fn key(in_port: u16, nw_dst: u32, tp_dst: u16, tp_src: u16) -> FlowKey {
        let mut k = FlowKey::ZERO;
        k.set_in_port(in_port);
        k.set_dl_type(0x0800);
        k.set_nw_proto(17);
        k.set_nw_src(0x0a00_0001);
        k.set_nw_dst(nw_dst);
        k.set_tp_src(tp_src);
        k.set_tp_dst(tp_dst);
        k
    }

    /// Looks `k` up as the datapath does: megaflow, else classifier and
    /// a new megaflow. Returns the rule's seq.
    fn decide(mf: &mut MegaflowCache, c: &Classifier, k: &FlowKey) -> Option<u64> {
        mf.maintain();
        if let Some(hit) = mf.lookup(k) {
            return hit.map(|r| r.seq);
        }
        let found = c.lookup_with_mask(k);
        mf.insert(k, &found.mask, found.rule.cloned());
        found.rule.map(|r| r.seq)
    }

    #[test]
    fn per_connection_masks_are_not_worth_a_megaflow() {
        // (mask fields as flow text, worth caching)
        let cases = [
            ("ip,nw_dst=10.0.0.0/8", true),
            ("udp,nw_dst=10.0.0.1,tp_dst=53", true),
            ("udp,nw_src=10.0.0.1,tp_dst=53", true),
            ("udp,tp_src=1000", true),
            ("udp,nw_src=10.0.0.0/8,tp_src=1000", true),
            (
                "udp,nw_src=10.0.0.1,nw_dst=10.0.0.2,tp_src=1,tp_dst=2",
                false,
            ),
            ("udp,nw_src=10.0.0.1,tp_src=1", false),
            ("udp6,ipv6_src=fd00::1,tp_src=1", false),
            ("udp6,ipv6_src=fd00::/64,tp_src=1", true),
            ("udp6,ipv6_dst=fd00::1,tp_dst=53", true),
        ];
        for (text, want) in cases {
            let mask = parse_flow(&format!("{text},actions=drop"))
                .unwrap()
                .matches
                .mask;
            assert_eq!(MegaflowCache::worth_caching(&mask), want, "{text}");
        }
    }

    /// Emptied on a table change, refilled without new maps: the
    /// allocation of the flushed subtable is reused.
    #[test]
    fn a_flush_keeps_the_maps_for_the_next_fill() {
        let mut mf = MegaflowCache::new(1 << 16);
        let mask = parse_flow("ip,nw_dst=10.0.0.0/8,actions=drop")
            .unwrap()
            .matches
            .mask;
        for i in 0..1000u32 {
            mf.insert(&key(1, i << 24, 1, 1), &mask, None);
        }
        let cap = mf.subtables[0].entries.capacity();
        mf.sync_version(1);
        assert!(mf.is_empty() && mf.masks() == 0);
        mf.insert(&key(1, 7 << 24, 1, 1), &mask, None);
        assert_eq!(mf.subtables[0].entries.capacity(), cap);
        assert_eq!(mf.len(), 1);
    }

    #[test]
    fn many_flows_behind_prefix_rules_share_one_megaflow() {
        // 17 prefix lengths that never match, then a catch-all.
        let mut rules: Vec<String> = (0..170u32)
            .map(|i| {
                let len = 16 + i % 17;
                format!(
                    "priority=100,ip,nw_dst=192.168.{}.0/{len},actions=output:2",
                    i % 200
                )
            })
            .collect();
        rules.push("priority=1,actions=output:3".into());
        let c = classifier(&rules);
        let mut mf = MegaflowCache::new(1024);
        for sport in 0..10_000u16 {
            let k = key(1, 0x0a00_0002, 5001, 1024 + sport);
            assert_eq!(decide(&mut mf, &c, &k), Some(170));
        }
        assert_eq!(
            (mf.len(), mf.masks()),
            (1, 1),
            "one megaflow for 10,000 flows"
        );
    }

    /// 5-tuple rules for the connections of one client, a catch-all
    /// behind them: the traffic of every other source address misses the
    /// rules at L3 (staged lookup), so it shares one megaflow per address
    /// however many connections it has; the client's own connections
    /// (the whole 5-tuple decides) are not worth a megaflow each.
    #[test]
    fn sources_without_rules_share_a_megaflow_per_address() {
        let mut rules: Vec<String> = (0..500u16)
            .map(|p| {
                format!(
                    "priority=100,in_port=1,udp,nw_src=10.0.0.1,nw_dst=10.0.0.2,tp_src={},tp_dst=5001,actions=output:2",
                    1024 + p
                )
            })
            .collect();
        rules.push("priority=1,in_port=1,actions=output:3".into());
        let c = classifier(&rules);
        let mut mf = MegaflowCache::new(1 << 16);
        let (mut cached, mut per_connection) = (0, 0);
        for src in 1..=8u32 {
            for sport in 1024..1024 + 1000u16 {
                let mut k = key(1, 0x0a00_0002, 5001, sport);
                k.set_nw_src(0x0a00_0000 + src);
                let want = c.lookup(&k).map(|r| r.seq);
                if let Some(hit) = mf.lookup(&k) {
                    assert_eq!(hit.map(|r| r.seq), want, "{k:?}");
                    continue;
                }
                let found = c.lookup_with_mask(&k);
                assert_eq!(found.rule.map(|r| r.seq), want);
                assert!(found.narrowed || found.mask.tp_src() != 0, "{k:?}");
                if MegaflowCache::worth_caching(&found.mask) {
                    mf.insert(&k, &found.mask, found.rule.cloned());
                    cached += 1;
                } else {
                    per_connection += 1;
                }
            }
        }
        assert_eq!(
            (cached, mf.len(), mf.masks()),
            (7, 7, 1),
            "one megaflow per source address without rules"
        );
        assert_eq!(per_connection, 1000, "the client's connections");
    }

    #[test]
    fn a_full_cache_keeps_what_it_has_and_counts_refusals() {
        let c = classifier(&["priority=5,udp,tp_src=7,actions=output:2".into()]);
        let mut mf = MegaflowCache::new(2);
        for sport in 0..5u16 {
            decide(&mut mf, &c, &key(1, 1, 1, sport));
        }
        // tp_src is in the mask: one megaflow per source port.
        assert_eq!((mf.len(), mf.refused), (2, 3));
        assert!(
            mf.lookup(&key(1, 9, 9, 0)).is_some(),
            "kept entries still answer"
        );
        mf.sync_version(1);
        assert!(mf.is_empty());
        assert!(mf.lookup(&key(1, 9, 9, 0)).is_none());
    }

    fn arb_rule() -> impl Strategy<Value = String> {
        (
            0u16..4,
            prop::option::of(1u16..4),
            prop::option::of((0u32..4, 24u32..=32)),
            prop::option::of((0u16..4, prop_oneof![Just(0xffffu16), Just(0xfffcu16)])),
            prop::option::of(1u16..5),
        )
            .prop_map(|(prio, in_port, dst, tp, out)| {
                let mut r = format!("priority={prio}");
                if let Some(p) = in_port {
                    r += &format!(",in_port={p}");
                }
                r += ",udp";
                if let Some((d, len)) = dst {
                    r += &format!(",nw_dst=10.0.0.{d}/{len}");
                }
                if let Some((t, m)) = tp {
                    r += &format!(",tp_dst=0x{t:x}/0x{m:x}");
                }
                match out {
                    Some(o) => r + &format!(",actions=output:{o}"),
                    None => r + ",actions=drop",
                }
            })
    }

    /// IPv6 masks go to address maps (eleven words), wider ones
    /// to whole-key maps, IPv4 ones to base maps; every kind answers what
    /// the classifier answers, and a flushed map changes kind as its next
    /// mask needs.
    #[test]
    fn ipv6_megaflows_key_by_the_words_their_mask_sets() {
        let c = classifier(&[
            "priority=100,in_port=1,udp6,ipv6_src=fd00::1,ipv6_dst=fd00::2,tp_src=7,tp_dst=53,actions=output:2".into(),
            "priority=50,in_port=1,ipv6,ipv6_dst=fd00::/64,actions=output:3".into(),
            "priority=1,actions=output:4".into(),
        ]);
        let v6 = |src: u128, dst: u128, sport: u16| {
            let mut k = FlowKey::ZERO;
            k.set_in_port(1);
            k.set_dl_type(0x86dd);
            k.set_nw_proto(17);
            k.set_ipv6_src(src);
            k.set_ipv6_dst(dst);
            k.set_tp_src(sport);
            k.set_tp_dst(53);
            k
        };
        let fd = 0xfd00u128 << 112;
        let mut mf = MegaflowCache::new(1 << 10);
        for round in 0..2 {
            for i in 0..64u128 {
                let k = v6(fd | (i % 3), fd | 2 | (i % 5) << 80, 7 + (i % 2) as u16);
                let want = c.lookup(&k).map(|r| r.seq);
                assert_eq!(decide(&mut mf, &c, &k), want, "round {round}: {k:?}");
            }
        }
        let kinds: Vec<&str> = mf
            .subtables
            .iter()
            .map(|st| match st.entries {
                Entries::Base(_) => "base",
                Entries::Addr(_) => "addr",
                Entries::Full(_) => "full",
            })
            .collect();
        assert!(
            !kinds.is_empty() && kinds.iter().all(|&k| k == "addr"),
            "{kinds:?}"
        );
        // Flushed, the spare address map serves an IPv4 mask as a base map.
        mf.sync_version(1);
        let k = key(1, 0x0a00_0002, 5001, 9);
        assert_eq!(decide(&mut mf, &c, &k), c.lookup(&k).map(|r| r.seq));
        assert!(matches!(mf.subtables[0].entries, Entries::Base(_)));
    }

    proptest! {
        /// Whatever the rules and the order keys come in, the megaflow
        /// tier answers exactly what the classifier answers.
        #[test]
        fn megaflows_answer_what_the_classifier_answers(
            rules in prop::collection::vec(arb_rule(), 0..12),
            keys in prop::collection::vec((1u16..4, 0u32..6, 0u16..6, 0u16..3), 1..200),
        ) {
            let c = classifier(&rules);
            let mut mf = MegaflowCache::new(64);
            for (in_port, d, t, s) in keys {
                let k = key(in_port, 0x0a00_0000 | d, t, s);
                let want = c.lookup(&k).map(|r| r.seq);
                prop_assert_eq!(decide(&mut mf, &c, &k), want, "{:?}", k);
            }
        }
    }
}
