//! The forwarding decision for one batch (OVS's cache hierarchy, first
//! tiers): extract every packet's flow key, look it up in the exact-match
//! cache when this PMD has one, else in the classifier, and collect the
//! rules the batch hit. Two shortcuts: a port whose every packet one rule
//! takes ([`nfv_flow::port_wide`]) gives it the batch without a key; and a
//! packet whose key equals the one before it (a burst of one flow) takes
//! that packet's answer without a lookup, counted under the same tier. Nothing here edits packets (it only tags each with
//! its in_port) or touches a tx queue: what happens next is the element's
//! business.
//!
//! Thread safety: one `Decision` per PMD thread (the EMC is not shared);
//! the flow table it reads is an immutable, shared snapshot.

use crate::stats::PmdCounters;
use arrayvec::ArrayVec;
use nfv_flow::emc::{EmcLookup, ExactMatchCache};
use nfv_flow::extract::{MIN_FRAME, extract_into};
use nfv_flow::megaflow::MegaflowCache;
use nfv_flow::pipeline;
use nfv_flow::table::FlowTable;
use nfv_flow::{FlowKey, PortNo, Rule};
use nfv_mem::hint::prefetch;
use nfv_mem::{BATCH, Batch, BatchShape};
use std::sync::Arc;

/// A batch's flow keys, on the heap so that two owners can swap them.
pub type KeyArray = Box<[FlowKey; BATCH]>;

/// One EMC miss in this many is inserted (the first one always).
pub const EMC_INSERT_EVERY: u32 = 100;

/// A classification that visited fewer subtables than this is not cached
/// as a megaflow — a megaflow probe would cost about what it did, and
/// past the cache's capacity every packet would pay a probe that misses
/// on top — unless a staged miss narrowed its mask
/// ([`nfv_flow::Classified::narrowed`]): then the flows that differ only
/// in the fields left out share it, and two probes are worth one. (Masks
/// that pin a connection are not cached at all:
/// [`MegaflowCache::worth_caching`]; [`coarse`] masks are cached whatever
/// the probes.)
pub const MEGAFLOW_MIN_PROBES: usize = 3;

/// The megaflow a classification is cached as, if any: its mask, when
/// the lookup was costly enough ([`MEGAFLOW_MIN_PROBES`]) or the mask is
/// [`coarse`], and the mask does not pin a connection.
pub fn megaflow_of(found: &nfv_flow::Classified<'_>) -> Option<FlowKey> {
    let enough = found.probes >= MEGAFLOW_MIN_PROBES
        || (found.probes >= 2 && found.narrowed)
        || coarse(&found.mask);
    (enough && MegaflowCache::worth_caching(&found.mask)).then_some(found.mask)
}

/// Whether `mask` leaves out every field that may tell flows (or
/// connections) apart: MAC and IP addresses, ports (ICMP type and code),
/// the IPv6 flow label, ND and ARP addresses, `ct_mark`, `ct_label`, the
/// tracked original tuple. Its megaflows then differ only in fields such
/// as `in_port`, `dl_type`, `table`, `metadata` and `ct_state` — a handful
/// for any traffic, so caching them costs no capacity and a probe that
/// misses is rare; and consecutive packets of different flows share one,
/// so a run of them takes one answer without a probe
/// ([`MegaflowCache::same_megaflow`]). A stateful pipeline's `ct_state`
/// stages are such masks, each found by one probe.
pub fn coarse(mask: &FlowKey) -> bool {
    const IPV6_LABEL: u64 = 0xf_ffff << 32;
    const CT_MARK: u64 = 0xffff_ffff << 32;
    mask.w[4] & IPV6_LABEL == 0
        && mask.w[6] & CT_MARK == 0
        && [1, 2, 3].into_iter().chain(7..23).all(|i| mask.w[i] == 0)
}

/// Decisions per judgement of the EMC's worth (see [`EmcGate`]).
pub const EMC_WINDOW: u32 = 8192;

/// While the EMC is bypassed, one batch in this many still probes it, to
/// notice when it would serve again.
pub const EMC_SAMPLE_EVERY: u32 = 16;

/// Per-packet verdicts that are not an index into the batch's rule hits.
const RUNT: u8 = u8::MAX;
const NO_MATCH: u8 = u8::MAX - 1;

/// The tier that answered a packet (see [`Decision::look_up`]).
#[derive(Clone, Copy)]
enum Tier {
    Emc,
    Megaflow,
    Classifier,
    Miss,
}

/// Packets of one batch that hit one rule.
struct RuleHits {
    rule: Arc<Rule>,
    packets: u64,
    bytes: u64,
}

/// What the decision says about one packet.
pub enum Verdict<'a> {
    /// Shorter than an Ethernet header.
    Runt,
    /// No rule matches.
    NoMatch,
    /// This rule matched (its counters are credited by [`Decision::settle`]).
    Rule(&'a Rule),
}

/// The verdicts of one batch, by position in the batch.
pub struct Verdicts {
    /// Rules hit by the batch, each once: consecutive packets of a flow
    /// share an entry, so shared rule counters and reference counts are
    /// touched once per batch, not per packet.
    hits: ArrayVec<RuleHits, BATCH>,
    /// Per packet: an index into `hits`, or [`RUNT`] / [`NO_MATCH`].
    of: [u8; BATCH],
    /// The batch's packets summed up, when the decision read each of them
    /// anyway (a port-wide rule without runts): spares the fabric reading
    /// them again for a whole-batch move.
    shape: Option<BatchShape>,
}

impl Verdicts {
    /// Packet `i` takes packet `j`'s verdict (an earlier packet of the
    /// batch with the same answer), and the rule its `bytes`.
    #[inline(always)]
    fn share(&mut self, i: usize, j: usize, bytes: usize) {
        let verdict = self.of[j];
        if verdict != NO_MATCH {
            let h = &mut self.hits[verdict as usize];
            h.packets += 1;
            h.bytes += bytes as u64;
        }
        self.of[i] = verdict;
    }

    /// The verdict on packet `i` of the batch last classified.
    #[inline(always)]
    pub fn get(&self, i: usize) -> Verdict<'_> {
        match self.of[i] {
            RUNT => Verdict::Runt,
            NO_MATCH => Verdict::NoMatch,
            j => Verdict::Rule(&self.hits[j as usize].rule),
        }
    }

    /// The port every one of the batch's `n` packets, received on
    /// `in_port`, goes to, when one rule took them all whose actions are a
    /// plain `output:N` to another port or `in_port` alone (a hairpin).
    #[inline(always)]
    pub fn sole_output(&self, n: usize, in_port: PortNo) -> Option<PortNo> {
        match self.hits.as_slice() {
            [only] if only.packets == n as u64 => only.rule.direct_output(in_port),
            _ => None,
        }
    }

    /// The batch summed up, if the decision did it (see [`BatchShape`]).
    #[inline(always)]
    pub fn shape(&self) -> Option<&BatchShape> {
        self.shape.as_ref()
    }
}

/// Whether probing the EMC pays. An EMC probe that misses costs two cache
/// lines per packet; with more flows than slots (100k flows over 8,192
/// entries hit 7.7 % of the time, 1M flows 0.4 %) nearly every packet
/// pays them for nothing, while the megaflow cache behind it answers from
/// one hot line. So the hit rate is judged every [`EMC_WINDOW`] probes:
/// under 1/8 the EMC is bypassed (neither probed nor hashed for), and
/// only one batch in [`EMC_SAMPLE_EVERY`] probes it — inserts go on as
/// before, so the sample sees what the EMC would hold — until a window of
/// samples hits 1/4 or more (hysteresis: traffic near one threshold does
/// not flap).
///
/// Hits are not the whole story: a bypassed EMC lets a run of packets in
/// one megaflow share its answer without any probe (the cheapest path of
/// all), which probing forbids. Many flows behind few megaflows — a
/// firewall's `in_port=1,ip,actions=ct(table=1)`, 10k connections — hit
/// an 8k EMC often enough to keep it, yet each hit costs a hash and a
/// probe where the run cost a masked compare, and each miss a megaflow
/// probe on top. So the probing batches also count the misses whose
/// megaflow is the one the miss before them found ("would have run"):
/// when more than half the misses would have run, the EMC is bypassed
/// whatever its hit rate, and it serves again only once under a quarter
/// would (and the hits allow).
#[derive(Debug)]
struct EmcGate {
    bypassed: bool,
    probes: u32,
    hits: u32,
    /// Misses answered by the same megaflow as the miss before them in
    /// their batch.
    would_run: u32,
    batches: u32,
}

impl EmcGate {
    const fn new() -> EmcGate {
        EmcGate {
            bypassed: false,
            probes: 0,
            hits: 0,
            would_run: 0,
            batches: 0,
        }
    }

    /// Whether this batch probes the EMC.
    #[inline(always)]
    fn probe_batch(&mut self) -> bool {
        if !self.bypassed {
            return true;
        }
        self.batches = self.batches.wrapping_add(1);
        self.batches.is_multiple_of(EMC_SAMPLE_EVERY)
    }

    /// Counts a probing batch's outcome and judges each full window.
    #[inline(always)]
    fn record(&mut self, probes: u32, hits: u32, would_run: u32) {
        self.probes += probes;
        self.hits += hits;
        self.would_run += would_run;
        if self.probes >= EMC_WINDOW {
            let misses = self.probes - self.hits;
            self.bypassed = if self.bypassed {
                self.hits * 4 < self.probes || self.would_run * 4 > misses
            } else {
                self.hits * 8 < self.probes || self.would_run * 2 > misses
            };
            self.probes = 0;
            self.hits = 0;
            self.would_run = 0;
        }
    }
}

/// The decision tiers of one PMD: an optional EMC in front of the shared
/// classifier snapshot.
pub struct Decision {
    /// `None` when the configuration disables the EMC: then it is neither
    /// probed nor filled.
    emc: Option<ExactMatchCache>,
    /// The megaflow tier between the EMC and the classifier (`None`:
    /// disabled).
    megaflows: Option<MegaflowCache>,
    /// Composite rules of the pipelines this PMD resolved.
    resolver: pipeline::Resolver,
    /// EMC misses left before the next one is inserted: one in
    /// [`EMC_INSERT_EVERY`] is, so a flood of new flows does not evict the
    /// flows the EMC serves (OVS `emc-insert-inv-prob`, 1/100).
    emc_skip: u32,
    emc_gate: EmcGate,
    /// This batch probes the EMC (decided before its keys are hashed).
    emc_probing: bool,
    table: Arc<FlowTable>,
    /// Boxed so that recirculated keys can be swapped in, not copied
    /// ([`Self::classify_keyed`]).
    keys: KeyArray,
    hashes: [u32; BATCH],
    /// Whether `keys` are the last batch's (false after a port-wide one).
    keyed: bool,
    /// Bit i: packet i's key equals packet i-1's (a burst of one flow),
    /// so it gets the same answer without a lookup of its own.
    repeats: u32,
    verdicts: Verdicts,
}

impl Decision {
    /// `emc_entries` 0 disables the exact-match cache, `megaflow_entries`
    /// 0 the megaflow cache.
    pub fn new(emc_entries: usize, megaflow_entries: usize, table: Arc<FlowTable>) -> Decision {
        let emc = (emc_entries > 0).then(|| {
            let mut emc = ExactMatchCache::new(emc_entries);
            emc.sync_version(table.version);
            emc
        });
        let megaflows = (megaflow_entries > 0).then(|| {
            let mut m = MegaflowCache::new(megaflow_entries);
            m.sync_version(table.version);
            m
        });
        let mut resolver = pipeline::Resolver::default();
        resolver.sync_version(table.version);
        Decision {
            emc,
            megaflows,
            resolver,
            emc_skip: 0,
            emc_gate: EmcGate::new(),
            emc_probing: false,
            table,
            keys: Box::new([FlowKey::ZERO; BATCH]),
            hashes: [0; BATCH],
            keyed: false,
            repeats: 0,
            verdicts: Verdicts {
                hits: ArrayVec::new(),
                of: [RUNT; BATCH],
                shape: None,
            },
        }
    }

    /// Bytes this PMD's caches hold (EMC slots, megaflow maps).
    pub fn cache_bytes(&self) -> usize {
        self.emc.as_ref().map_or(0, ExactMatchCache::memory_bytes)
            + self
                .megaflows
                .as_ref()
                .map_or(0, MegaflowCache::memory_bytes)
    }

    /// Megaflows cached now, and megaflows refused so far because the
    /// cache was full (zeros without a megaflow cache).
    pub fn megaflow_occupancy(&self) -> (usize, u64) {
        self.megaflows
            .as_ref()
            .map_or((0, 0), |m| (m.len(), m.refused))
    }

    /// The generation of the flow table in use.
    pub fn table_version(&self) -> u64 {
        self.table.version
    }

    /// Switches to a new flow table generation (flushing the EMC).
    pub fn set_table(&mut self, table: Arc<FlowTable>) {
        if let Some(emc) = &mut self.emc {
            emc.sync_version(table.version);
        }
        if let Some(m) = &mut self.megaflows {
            m.sync_version(table.version);
        }
        self.resolver.sync_version(table.version);
        self.table = table;
    }

    /// Decides the fate of every packet of `batch` (received on
    /// `in_port`, which each packet is tagged with). Returns the verdicts
    /// and the batch's bytes. Call [`Self::settle`] once the verdicts have
    /// been acted on.
    #[inline]
    pub fn classify(
        &mut self,
        in_port: PortNo,
        batch: &mut Batch,
        c: &mut PmdCounters,
    ) -> (&Verdicts, u64) {
        if let Some(rx_bytes) = self.take_port_wide(in_port, batch, c) {
            self.keyed = false;
            return (&self.verdicts, rx_bytes);
        }
        self.keyed = true;
        self.verdicts.shape = None;
        let rx_bytes = self.extract_keys(in_port, batch);
        self.look_up(batch, c, true);
        (&self.verdicts, rx_bytes)
    }

    /// Decides packets whose keys the caller built: those `ct(table=T)`
    /// sends back through the pipeline, keyed by their headers as they are
    /// now, their ct fields and table T. No port-wide shortcut (that is
    /// table 0's), and no EMC: a tracked connection's packets would hold
    /// a second slot each (their key before and after `ct`), pushing out
    /// the table-0 keys it serves, while their later tables' rules match
    /// `ct_state` rather than the tuple, which megaflows cache whole
    /// ([`coarse`]) — and without the EMC probe a run of them shares one
    /// answer. Otherwise the megaflows and classifier as for any batch.
    ///
    /// `keys` (the first `batch.len()` of them the packets') is swapped
    /// with the decision's own array rather than copied, 192 bytes a
    /// packet: the caller gets the array of the batch decided before,
    /// whose contents are stale, to fill again.
    pub fn classify_keyed(
        &mut self,
        batch: &Batch,
        keys: &mut KeyArray,
        c: &mut PmdCounters,
    ) -> &Verdicts {
        let n = batch.len();
        std::mem::swap(&mut self.keys, keys);
        self.emc_probing = false;
        self.keyed = true;
        let mut repeats = 0u32;
        for i in 1..n {
            if self.keys[i].same_packet(&self.keys[i - 1]) {
                repeats |= 1 << i;
            }
        }
        self.repeats = repeats;
        self.verdicts.shape = None;
        self.look_up(batch, c, false);
        &self.verdicts
    }

    /// The verdicts of the batch last decided, and its packets' flow keys
    /// (`None` when a port-wide rule took it without them).
    #[inline(always)]
    pub fn last(&self) -> (&Verdicts, Option<&[FlowKey]>) {
        (&self.verdicts, self.keyed.then_some(&self.keys[..]))
    }

    /// When one rule takes every packet of `in_port`
    /// ([`nfv_flow::port_wide`]), gives it the whole batch (runts aside)
    /// without reading a header or probing a cache; returns the batch's
    /// bytes. `None`: the batch needs the lookup.
    #[inline(always)]
    fn take_port_wide(
        &mut self,
        in_port: PortNo,
        batch: &mut Batch,
        c: &mut PmdCounters,
    ) -> Option<u64> {
        let rule = self.table.port_wide.rule_for(in_port)?;
        let v = &mut self.verdicts;
        let n = batch.len();
        let mut shape = BatchShape::default();
        for p in batch.iter_mut() {
            p.set_in_port(in_port);
            shape.add(p);
        }
        let rx_bytes = shape.bytes();
        // A split packet's head alone is longer than MIN_FRAME.
        let (bytes, packets) = if shape.shortest_head() >= MIN_FRAME {
            v.of[..n].fill(0);
            v.shape = Some(shape);
            (rx_bytes, n as u64)
        } else {
            v.shape = None;
            let (mut bytes, mut packets) = (0u64, 0u64);
            for (i, p) in batch.iter().enumerate() {
                if p.len() < MIN_FRAME {
                    v.of[i] = RUNT;
                    continue;
                }
                v.of[i] = 0;
                packets += 1;
                bytes += p.frame_len() as u64;
            }
            (bytes, packets)
        };
        if packets > 0 {
            v.hits.push(RuleHits {
                rule: rule.clone(),
                packets,
                bytes,
            });
        }
        c.port_wide_hits += packets;
        Some(rx_bytes)
    }

    /// Pass 1: keys (and their hashes when the EMC is probed), prefetching
    /// the next packet's headers (and, in a sampling batch, the EMC slots
    /// each key may be at).
    #[inline(always)]
    fn extract_keys(&mut self, in_port: PortNo, batch: &mut Batch) -> u64 {
        let n = batch.len();
        self.emc_probing = self.emc.is_some() && self.emc_gate.probe_batch();
        let hashed = self.emc_probing;
        // A sampling batch probes slots nothing has touched for 16
        // batches: cold, so fetched for the whole batch at once. While
        // the EMC serves, its slots are the warm ones (and a prefetch
        // per packet measured slower at one flow).
        let cold_slots = hashed && self.emc_gate.bypassed;
        let mut rx_bytes = 0u64;
        let mut repeats = 0u32;
        for i in 0..n {
            if i + 1 < n {
                prefetch(batch[i + 1].data_ptr());
            }
            let p = &mut batch[i];
            p.set_in_port(in_port);
            rx_bytes += p.frame_len() as u64;
            extract_into(in_port, p.data(), &mut self.keys[i]);
            let k = &self.keys[i];
            if i > 0 && k.same_packet(&self.keys[i - 1]) {
                repeats |= 1 << i;
                self.hashes[i] = self.hashes[i - 1];
            } else if hashed {
                let hash = k.packet_hash();
                if cold_slots && let Some(emc) = &self.emc {
                    for slot in emc.slot_addresses(hash) {
                        prefetch(slot);
                    }
                }
                self.hashes[i] = hash;
            }
        }
        self.repeats = repeats;
        rx_bytes
    }

    /// Pass 2: EMC (if any, and `use_emc`), then megaflows (if any), then
    /// classifier; verdicts and rule hits. The tier counters are kept in
    /// locals for the batch (a store through `c` per packet cannot stay
    /// in a register).
    #[inline(always)]
    fn look_up(&mut self, batch: &Batch, c: &mut PmdCounters, use_emc: bool) {
        let v = &mut self.verdicts;
        let (mut emc_hits, mut megaflow_hits, mut classifier_hits, mut misses) =
            (0u64, 0u64, 0u64, 0u64);
        let (mut emc_probes, mut emc_probe_hits) = (0u32, 0u32);
        // While probing: the subtable that answered the last EMC miss and
        // that packet, and how many misses its megaflow answered too (see
        // [`EmcGate`]).
        let (mut last_miss, mut would_run) = (None::<(usize, usize)>, 0u32);
        let mut repeated = 0u64;
        let mut resolutions = 0u64;
        // The megaflow (subtable) that answered packet j of this batch
        // last, and j: a run of packets in it shares the answer.
        let mut run: Option<(usize, usize)> = None;
        let mut megaflow_runs = 0u64;
        // The tier that answered the packet before, whose answer a repeat
        // of its key takes (and is counted under).
        let mut last_tier = Tier::Miss;
        let probing = self.emc_probing;
        if let Some(m) = &mut self.megaflows {
            m.maintain();
        }
        for i in 0..batch.len() {
            let p = &batch[i];
            // A split packet's head alone is longer than this.
            if p.len() < MIN_FRAME {
                v.of[i] = RUNT;
                continue;
            }
            if self.repeats & (1 << i) != 0 && v.of[i - 1] != RUNT {
                v.share(i, i - 1, p.frame_len());
                repeated += 1;
                match last_tier {
                    Tier::Emc => emc_hits += 1,
                    Tier::Megaflow => megaflow_hits += 1,
                    Tier::Classifier => classifier_hits += 1,
                    Tier::Miss => misses += 1,
                }
                // A cached miss (EMC or megaflow) is a table miss too, as
                // on the probe's own path.
                if v.of[i] == NO_MATCH && !matches!(last_tier, Tier::Miss) {
                    misses += 1;
                }
                continue;
            }
            // In the megaflow of an earlier packet of the batch (while the
            // EMC is not probed): that packet's answer, without a probe.
            if !probing
                && let (Some((at, j)), Some(m)) = (run, &self.megaflows)
                && m.same_megaflow(at, &self.keys[i], &self.keys[j])
            {
                v.share(i, j, p.frame_len());
                megaflow_hits += 1;
                megaflow_runs += 1;
                misses += u64::from(v.of[i] == NO_MATCH);
                last_tier = Tier::Megaflow;
                continue;
            }
            let key = &self.keys[i];
            let hash = self.hashes[i];
            // A resolved pipeline's rule, owned here for this packet.
            let resolved: Option<Arc<Rule>>;
            let from_emc = match &self.emc {
                Some(emc) if probing => {
                    emc_probes += 1;
                    match emc.lookup(key, hash) {
                        EmcLookup::Hit(r) => Some(r),
                        EmcLookup::Miss => None,
                    }
                }
                _ => None,
            };
            // Bypassed, the EMC is still filled (as if it had missed).
            let emc_missed = use_emc && self.emc.is_some() && from_emc.is_none();
            let from_megaflow = match (&from_emc, &self.megaflows) {
                (None, Some(m)) => m.lookup_at(key),
                _ => None,
            };
            if probing && let (Some((at, _)), Some(m)) = (&from_megaflow, &self.megaflows) {
                would_run += u32::from(last_miss.is_some_and(|(was, j)| {
                    was == *at && m.same_megaflow(*at, key, &self.keys[j])
                }));
                last_miss = Some((*at, i));
            }
            let mut megaflow_at = None;
            // A full classification that visited several subtables also
            // gives its megaflow.
            let mut megaflow = None;
            let found = match (from_emc, from_megaflow) {
                (Some(r), _) => {
                    emc_hits += 1;
                    emc_probe_hits += 1;
                    last_tier = Tier::Emc;
                    r
                }
                (None, Some((at, r))) => {
                    megaflow_hits += 1;
                    last_tier = Tier::Megaflow;
                    megaflow_at = Some(at);
                    r
                }
                (None, None) => {
                    let classifier = &self.table.classifier;
                    let (r, mask) = if self.megaflows.is_some() {
                        let found = classifier.lookup_with_mask(key);
                        megaflow = megaflow_of(&found);
                        (found.rule, found.mask)
                    } else {
                        (classifier.lookup(key), FlowKey::ZERO)
                    };
                    // A rule that goes on to later tables: the whole
                    // pipeline's decision, as one rule (slow path only:
                    // the caches keep the result).
                    let r = match r {
                        Some(first) if first.pipeline => {
                            let (rule, mask) = self.resolver.resolve(classifier, key, first, mask);
                            if self.megaflows.is_some() {
                                megaflow = MegaflowCache::worth_caching(&mask).then_some(mask);
                            }
                            resolved = Some(rule);
                            resolutions += 1;
                            resolved.as_ref()
                        }
                        other => other,
                    };
                    classifier_hits += u64::from(r.is_some());
                    last_tier = if r.is_some() {
                        Tier::Classifier
                    } else {
                        Tier::Miss
                    };
                    r
                }
            };
            // One EMC miss in EMC_INSERT_EVERY is cached there.
            let emc_insert = emc_missed && {
                let now = self.emc_skip == 0;
                self.emc_skip = if now {
                    EMC_INSERT_EVERY - 1
                } else {
                    self.emc_skip - 1
                };
                now
            };
            // What the caches will hold, cloned now: the inserts come after
            // this packet's verdict, when nothing borrows them.
            let to_cache = (emc_insert || megaflow.is_some()).then(|| found.cloned());
            let verdict = match found {
                None => {
                    misses += 1;
                    NO_MATCH
                }
                Some(rule) => {
                    let bytes = p.frame_len() as u64;
                    match v.hits.last_mut() {
                        Some(h) if Arc::ptr_eq(&h.rule, rule) => {
                            h.packets += 1;
                            h.bytes += bytes;
                        }
                        _ => v.hits.push(RuleHits {
                            rule: rule.clone(),
                            packets: 1,
                            bytes,
                        }),
                    }
                    (v.hits.len() - 1) as u8
                }
            };
            v.of[i] = verdict;
            if let Some(at) = megaflow_at {
                run = Some((at, i));
            }
            if let Some(rule) = to_cache {
                if let (Some(mask), Some(m)) = (megaflow, &mut self.megaflows) {
                    m.insert(key, &mask, rule.clone());
                }
                if emc_insert && let Some(emc) = &mut self.emc {
                    let hash = if probing { hash } else { key.packet_hash() };
                    emc.insert(key, hash, rule);
                }
            }
        }
        if probing {
            self.emc_gate.record(emc_probes, emc_probe_hits, would_run);
        }
        c.emc_hits += emc_hits;
        c.emc_probes += u64::from(emc_probes);
        c.megaflow_hits += megaflow_hits;
        c.classifier_hits += classifier_hits;
        c.table_misses += misses;
        c.repeated_keys += repeated;
        c.megaflow_runs += megaflow_runs;
        c.pipeline_resolutions += resolutions;
    }

    /// Credits the rules hit by the last batch (last hit at TSC `now`,
    /// the PMD's coarse clock) and lets go of them.
    #[inline]
    pub fn settle(&mut self, now: u64) {
        for h in self.verdicts.hits.drain(..) {
            h.rule.credit(h.packets, h.bytes, now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds the gate windows of batches of 32 decisions at the given hit
    /// rates; returns whether it is bypassed after each window, and the
    /// share of batches that probed during the last one.
    fn run(windows: &[f64]) -> (Vec<bool>, f64) {
        let windows: Vec<(f64, f64)> = windows.iter().map(|&r| (r, 0.0)).collect();
        run_with_runs(&windows)
    }

    /// As [`run`], each window a (hit rate, share of the misses that
    /// would have run) pair.
    fn run_with_runs(windows: &[(f64, f64)]) -> (Vec<bool>, f64) {
        let mut g = EmcGate::new();
        let mut states = Vec::new();
        let mut probed_share = 0.0;
        for &(rate, run_share) in windows {
            let (mut batches, mut probed) = (0u32, 0u32);
            let mut seen = 0u32;
            // Until a full window of probes has been judged.
            while seen < EMC_WINDOW {
                batches += 1;
                if g.probe_batch() {
                    probed += 1;
                    let hits = (32.0 * rate).round() as u32;
                    let would_run = (f64::from(32 - hits) * run_share).round() as u32;
                    g.record(32, hits, would_run);
                    seen += 32;
                }
            }
            states.push(g.bypassed);
            probed_share = f64::from(probed) / f64::from(batches);
        }
        (states, probed_share)
    }

    #[test]
    fn the_emc_is_bypassed_below_an_eighth_and_back_from_a_quarter() {
        // (hit rate per window, bypassed after each window)
        let cases: &[(&[f64], &[bool])] = &[
            (&[1.0, 0.5, 0.2], &[false, false, false]),
            (&[0.05], &[true]),
            (&[0.05, 0.2, 0.2], &[true, true, true]), // hysteresis: 0.2 < 1/4
            (&[0.05, 0.3], &[true, false]),
            (&[0.1, 0.13], &[true, true]),
            (&[0.13, 0.1], &[false, true]),
        ];
        for (rates, want) in cases {
            let (got, _) = run(rates);
            assert_eq!(&got[..], *want, "hit rates {rates:?}");
        }
    }

    #[test]
    fn misses_that_would_have_run_bypass_the_emc_whatever_its_hits() {
        // (hit rate, share of the misses in the megaflow of the miss
        // before) of one window.
        type Window = (f64, f64);
        // (the windows, bypassed after each window)
        let cases: &[(&[Window], &[bool])] = &[
            // A firewall's first table: 40 % hits, the misses all in one
            // megaflow.
            (&[(0.4, 1.0)], &[true]),
            (&[(0.4, 0.6)], &[true]),
            (&[(0.4, 0.45)], &[false]),
            (&[(0.7, 0.0)], &[false]),
            // Back only under a quarter (hysteresis), and with the hits.
            (&[(0.4, 1.0), (0.4, 0.4)], &[true, true]),
            (&[(0.4, 1.0), (0.4, 0.2)], &[true, false]),
            (&[(0.4, 1.0), (0.2, 0.0)], &[true, true]),
            // Every hit, no miss: nothing would have run.
            (&[(1.0, 1.0)], &[false]),
        ];
        for (windows, want) in cases {
            let (got, _) = run_with_runs(windows);
            assert_eq!(&got[..], *want, "windows {windows:?}");
        }
    }

    #[test]
    fn a_bypassed_emc_is_probed_by_one_batch_in_sample_every() {
        let (_, share) = run(&[0.0, 0.0]);
        let want = 1.0 / f64::from(EMC_SAMPLE_EVERY);
        assert!((share - want).abs() < 0.01, "probed {share}, want {want}");
    }
}
