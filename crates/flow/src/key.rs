//! The flow key: every header field a rule can match, packed into 24
//! 64-bit words (three cache lines) so that masking, hashing and comparing
//! are word operations (no per-field branches on the fast path).
//!
//! Word layout (bit 0 = least significant):
//! - w0: `in_port` [0,16) · `dl_type` [16,32) · `vlan_tci` [32,48) · `nw_proto` [48,56) · `nw_tos` [56,64)
//! - w1: `dl_src` [0,48) · `tp_src` [48,64)
//! - w2: `dl_dst` [0,48) · `tp_dst` [48,64)
//! - w3: `nw_src` [0,32) · `nw_dst` [32,64)
//! - w4: `nw_ttl` [0,8) · `ip_frag` [8,16) · `tcp_flags` [16,32) · `ipv6_label` [32,52) ·
//!   `table` [52,60) · [`PACKET_EXT`] (bit 63)
//! - w5: `metadata`
//! - w6: `ct_state` [0,8) · `ct_zone` [16,32) · `ct_mark` [32,64)
//! - w7, w8: `ipv6_src` (w7 the high half) · w9, w10: `ipv6_dst` · w11, w12: `nd_target`
//! - w13: `arp_sha` / `nd_sll` [0,48) · w14: `arp_tha` / `nd_tll` [0,48)
//! - w15, w16: `ct_label` (w15 the high half)
//! - w17: `ct_nw_src` [0,32) · `ct_nw_dst` [32,64) (the connection's
//!   original-direction IPv4 addresses)
//! - w18: `ct_tp_src` [0,16) · `ct_tp_dst` [16,32) · `ct_nw_proto` [32,40)
//! - w19, w20: `ct_ipv6_src` · w21, w22: `ct_ipv6_dst`
//! - w23: zero (spare; never hashed)
//!
//! Words 0-6 are the base words: everything an IPv4 packet sets,
//! `metadata` (which a pipeline's IPv4 rules match) and the connection
//! tracker's state, zone and mark (which a stateful IPv4 pipeline's rules
//! match: `ct_state=+trk+est` must not push its megaflows out of the short
//! map). Words 7-23 are zero for an IPv4 packet that has not been through
//! the tracker with a label or an original-direction tuple, and
//! [`FlowKey::hash`] skips them when they are, so IPv4 keys and its
//! rules' masked keys hash at the cost of seven words (IPv6, ARP and the
//! tracker's label and tuple pay for the rest). Fields of different
//! `dl_type`s share nothing except what OVS shares (ARP's opcode in
//! `nw_proto`, its addresses in `nw_src`/`nw_dst`; `arp_sha`/`nd_sll`,
//! `arp_tha`/`nd_tll`), and a rule that matches one of them also matches
//! its `dl_type`.
//!
//! The `ct_*` fields are never read from a frame: [`crate::extract()`]
//! leaves them zero (a packet is untracked, `ct_state=0`), and the
//! datapath's `ct` action sets them ([`FlowKey::set_ct`]) before the packet
//! is looked up again; `ct_clear` zeroes them ([`FlowKey::clear_ct`]).
//!
//! `table` is the pipeline stage a key is looked up in: every rule matches
//! its own table's number exactly, a packet's key starts in table 0, and
//! `goto_table`/`resubmit` look it up again with the next number (see
//! [`crate::pipeline`]). One classifier so holds every table.
//!
//! MAC addresses are stored as the 48-bit big-endian number they spell, so
//! `00:00:00:00:00:01` is `1`; IPv4 addresses are host-order `u32`, IPv6
//! ones host-order `u128`. `nw_tos` is the whole TOS / traffic class byte
//! (DSCP in the top six bits, ECN in the low two). `ip_frag` is
//! [`FRAG_ANY`] | [`FRAG_LATER`]. ICMP and ICMPv6 type and code are in
//! `tp_src` and `tp_dst`, as OVS keeps them.
//! `vlan_tci` follows OVS: `0` means "no 802.1Q tag"; a tagged frame has
//! [`VLAN_PRESENT`] set plus PCP (bits 13-15) and VID (bits 0-11).

use core::fmt;
use nfv_wire::EthernetAddress;

/// Set in `vlan_tci` when the frame carries an 802.1Q tag (OVS's `VLAN_CFI`).
pub const VLAN_PRESENT: u16 = 0x1000;
/// VID bits of `vlan_tci`.
pub const VLAN_VID_MASK: u16 = 0x0fff;

/// `ip_frag` bit: the packet is a fragment (first or later).
pub const FRAG_ANY: u8 = 1;
/// `ip_frag` bit: the packet is a fragment other than the first.
pub const FRAG_LATER: u8 = 2;

/// Set in w4 of a packet's key when a word past [`BASE_WORDS`] may be
/// nonzero: by [`crate::extract()`] for IPv6 and ARP, by
/// [`FlowKey::set_ct`] for a label or an original-direction tuple. No
/// match field covers the bit, so masks, masked keys and rule keys never
/// hold it; it only lets [`FlowKey::same_packet`] and
/// [`FlowKey::packet_hash`] skip the seventeen words an IPv4 packet
/// leaves zero.
pub const PACKET_EXT: u64 = 1 << 63;

/// Words of a [`FlowKey`].
pub const KEY_WORDS: usize = 24;
/// Words every packet may set; the rest are zero for IPv4 (see the module
/// doc) and hashed only when not.
pub const BASE_WORDS: usize = 7;
/// The words of the connection tracker's original tuple (`ct_nw_src`,
/// `ct_tp_src`, `ct_ipv6_src`, …: w17 to w22).
pub const CT_TUPLE_WORDS: core::ops::Range<usize> = 17..23;
/// The spare word at the end: always zero, never hashed.
pub(crate) const SPARE_WORD: usize = KEY_WORDS - 1;

/// `ct_state` bits, as OVS numbers them (`ovs-fields`(7)).
pub mod ct_state {
    /// The start of a new connection (not yet committed, or its first
    /// packet).
    pub const NEW: u8 = 0x01;
    /// Part of an established connection.
    pub const EST: u8 = 0x02;
    /// Related to an established connection (an ICMP error, an FTP data
    /// connection).
    pub const REL: u8 = 0x04;
    /// In the reply direction (the opposite of the one that committed).
    pub const RPL: u8 = 0x08;
    /// Invalid: the tracker could not make sense of it.
    pub const INV: u8 = 0x10;
    /// Tracked: the packet has been through the connection tracker.
    pub const TRK: u8 = 0x20;
    /// Source address/port translated.
    pub const SNAT: u8 = 0x40;
    /// Destination address/port translated.
    pub const DNAT: u8 = 0x80;
}

/// The original-direction tuple of a tracked connection (what the
/// `ct_nw_*`/`ct_ipv6_*`/`ct_tp_*` fields hold): for an IPv4 connection
/// the addresses in the low 32 bits of `src`/`dst`, for IPv6 the whole
/// 128 bits. For a related connection, the tuple of its parent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct CtOrig {
    pub ipv6: bool,
    pub src: u128,
    pub dst: u128,
    pub proto: u8,
    pub tp_src: u16,
    pub tp_dst: u16,
}

/// An OpenFlow port number as used in `in_port=` and `output:`.
pub type PortNo = u16;

#[derive(Clone, Copy, Default)]
#[repr(C, align(64))]
pub struct FlowKey {
    pub w: [u64; KEY_WORDS],
}

/// Word by word, xored and ored together: the compiler turns the fold into
/// a few vector instructions, where the derived comparison called
/// `memcmp` for every repeated key (12 % of a 1000-rule run's time).
impl PartialEq for FlowKey {
    #[inline(always)]
    fn eq(&self, other: &FlowKey) -> bool {
        self.w
            .iter()
            .zip(&other.w)
            .fold(0, |acc, (a, b)| acc | (a ^ b))
            == 0
    }
}

impl Eq for FlowKey {}

/// The words, as the derived impl would: equal keys hash alike.
impl std::hash::Hash for FlowKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.w.hash(state);
    }
}

const MAC_MASK: u64 = (1 << 48) - 1;

macro_rules! field {
    ($get:ident, $set:ident, $ty:ty, $word:expr, $shift:expr, $bits:expr) => {
        #[inline(always)]
        pub const fn $get(&self) -> $ty {
            ((self.w[$word] >> $shift) & ((1u64 << $bits) - 1)) as $ty
        }
        #[inline(always)]
        pub const fn $set(&mut self, v: $ty) {
            let m = ((1u64 << $bits) - 1) << $shift;
            self.w[$word] = (self.w[$word] & !m) | (((v as u64) << $shift) & m);
        }
    };
}

/// A 128-bit field held in two words, the high half first.
macro_rules! field128 {
    ($get:ident, $set:ident, $word:expr) => {
        #[inline(always)]
        pub const fn $get(&self) -> u128 {
            (self.w[$word] as u128) << 64 | self.w[$word + 1] as u128
        }
        #[inline(always)]
        pub const fn $set(&mut self, v: u128) {
            self.w[$word] = (v >> 64) as u64;
            self.w[$word + 1] = v as u64;
        }
    };
}

/// A MAC address in the low 48 bits of a word.
macro_rules! field_mac {
    ($get:ident, $set:ident, $word:expr) => {
        #[inline(always)]
        pub fn $get(&self) -> [u8; 6] {
            mac_from_u64(self.w[$word] & MAC_MASK)
        }
        #[inline(always)]
        pub fn $set(&mut self, mac: [u8; 6]) {
            self.w[$word] = (self.w[$word] & !MAC_MASK) | mac_to_u64(mac);
        }
    };
}

impl FlowKey {
    pub const ZERO: FlowKey = FlowKey { w: [0; KEY_WORDS] };
    /// All bits set: the mask of an exact match.
    pub const ALL: FlowKey = FlowKey {
        w: [u64::MAX; KEY_WORDS],
    };

    field!(in_port, set_in_port, u16, 0, 0, 16);
    field!(dl_type, set_dl_type, u16, 0, 16, 16);
    field!(vlan_tci, set_vlan_tci, u16, 0, 32, 16);
    field!(nw_proto, set_nw_proto, u8, 0, 48, 8);
    field!(nw_tos, set_nw_tos, u8, 0, 56, 8);
    field!(tp_src, set_tp_src, u16, 1, 48, 16);
    field!(tp_dst, set_tp_dst, u16, 2, 48, 16);
    field!(nw_src, set_nw_src, u32, 3, 0, 32);
    field!(nw_dst, set_nw_dst, u32, 3, 32, 32);
    field!(nw_ttl, set_nw_ttl, u8, 4, 0, 8);
    field!(ip_frag, set_ip_frag, u8, 4, 8, 8);
    field!(tcp_flags, set_tcp_flags, u16, 4, 16, 16);
    field!(ipv6_label, set_ipv6_label, u32, 4, 32, 20);
    field!(table, set_table, u8, 4, 52, 8);
    field!(ct_state, set_ct_state, u8, 6, 0, 8);
    field!(ct_zone, set_ct_zone, u16, 6, 16, 16);
    field!(ct_mark, set_ct_mark, u32, 6, 32, 32);
    field128!(ipv6_src, set_ipv6_src, 7);
    field128!(ipv6_dst, set_ipv6_dst, 9);
    field128!(nd_target, set_nd_target, 11);
    field_mac!(dl_src, set_dl_src, 1);
    field_mac!(dl_dst, set_dl_dst, 2);
    field_mac!(arp_sha, set_arp_sha, 13);
    field_mac!(arp_tha, set_arp_tha, 14);
    field128!(ct_label, set_ct_label, 15);
    field!(ct_nw_src, set_ct_nw_src, u32, 17, 0, 32);
    field!(ct_nw_dst, set_ct_nw_dst, u32, 17, 32, 32);
    field!(ct_tp_src, set_ct_tp_src, u16, 18, 0, 16);
    field!(ct_tp_dst, set_ct_tp_dst, u16, 18, 16, 16);
    field!(ct_nw_proto, set_ct_nw_proto, u8, 18, 32, 8);
    field128!(ct_ipv6_src, set_ct_ipv6_src, 19);
    field128!(ct_ipv6_dst, set_ct_ipv6_dst, 21);

    #[inline(always)]
    pub fn metadata(&self) -> u64 {
        self.w[5]
    }
    #[inline(always)]
    pub fn set_metadata(&mut self, v: u64) {
        self.w[5] = v;
    }

    /// What the connection tracker tells about a packet of a packet key:
    /// `ct_state`, `ct_zone`, `ct_mark`, `ct_label` and, for a packet of a
    /// tracked connection, its original-direction tuple (`None` zeroes the
    /// tuple fields). Keeps [`PACKET_EXT`] true to the words: set when the
    /// label or the tuple is nonzero or the key had other extended words
    /// (IPv6, ARP), cleared otherwise. The datapath's `ct` action calls
    /// this before the packet's next lookup; the fields other than the
    /// `ct_*` ones are left alone.
    #[inline]
    pub fn set_ct(&mut self, state: u8, zone: u16, mark: u32, label: u128, orig: Option<CtOrig>) {
        self.w[6] = FlowKey::ct_word(state, zone, mark);
        self.set_ct_label(label);
        let o = orig.unwrap_or_default();
        if o.ipv6 {
            self.w[17] = 0;
            self.set_ct_ipv6_src(o.src);
            self.set_ct_ipv6_dst(o.dst);
        } else {
            self.w[17] = o.src as u32 as u64 | (o.dst as u32 as u64) << 32;
            self.set_ct_ipv6_src(0);
            self.set_ct_ipv6_dst(0);
        }
        self.w[18] = u64::from(o.tp_src) | u64::from(o.tp_dst) << 16 | u64::from(o.proto) << 32;
        self.sync_packet_ext();
    }

    /// Word 6 as [`FlowKey::set_ct`] writes it: `ct_state`, `ct_zone`
    /// and `ct_mark`.
    #[inline(always)]
    pub const fn ct_word(state: u8, zone: u16, mark: u32) -> u64 {
        state as u64 | (zone as u64) << 16 | (mark as u64) << 32
    }

    /// `ct_clear`: every `ct_*` field zeroed (an untracked packet), and
    /// [`PACKET_EXT`] kept true to the words that remain.
    #[inline]
    pub fn clear_ct(&mut self) {
        self.set_ct(0, 0, 0, 0, None);
    }

    /// Sets [`PACKET_EXT`] of a packet key exactly when a word past
    /// [`BASE_WORDS`] is nonzero.
    #[inline]
    pub fn sync_packet_ext(&mut self) {
        if self.has_extended() {
            self.w[4] |= PACKET_EXT;
        } else {
            self.w[4] &= !PACKET_EXT;
        }
    }

    /// `self & mask`, word by word.
    #[inline(always)]
    pub fn masked(&self, mask: &FlowKey) -> FlowKey {
        FlowKey {
            w: core::array::from_fn(|i| self.w[i] & mask.w[i]),
        }
    }

    /// True when a word past [`BASE_WORDS`] is set (IPv6, ARP hardware
    /// addresses, ND, the tracker's label and original tuple).
    #[inline(always)]
    pub fn has_extended(&self) -> bool {
        self.w[BASE_WORDS..].iter().fold(0, |a, w| a | w) != 0
    }

    /// Equality of two packet keys from [`crate::extract()`]: the base
    /// words (and [`PACKET_EXT`] with them), and the rest only when the
    /// flag says they may be set. The exact-match cache and the batch's
    /// repeated-key check compare with this: an IPv4 key costs seven words.
    #[inline(always)]
    pub fn same_packet(&self, other: &FlowKey) -> bool {
        debug_assert!(self.w[4] & PACKET_EXT != 0 || !self.has_extended());
        let base = (0..BASE_WORDS).fold(0, |acc, i| acc | (self.w[i] ^ other.w[i]));
        base == 0 && (self.w[4] & PACKET_EXT == 0 || self == other)
    }

    /// [`FlowKey::hash`] of a packet key from [`crate::extract()`]: the
    /// same value, with the test for the extended words read from
    /// [`PACKET_EXT`] instead of the words.
    #[inline(always)]
    pub fn packet_hash(&self) -> u32 {
        debug_assert!(self.w[4] & PACKET_EXT != 0 || !self.has_extended());
        self.hash_with(self.w[4] & PACKET_EXT != 0)
    }

    /// A fast 32-bit hash of the whole key. Independent 64x64->128-bit
    /// multiplies of the key's word pairs (each word xored with a
    /// per-process random word), each product folded high into low as
    /// wyhash mixes, then one more such multiply of their xor: the
    /// latency is two multiplies, not a chain — a packet behind several
    /// subtables hashes once per subtable, and a chain was most of a
    /// probe's time. The words past [`BASE_WORDS`] are mixed in only when
    /// one is set, so an IPv4 key costs four multiplies and a final one.
    ///
    /// Why random words: the hash indexes maps that senders fill (the
    /// megaflow cache holds a masked key per distinct flow). With known
    /// constants a sender could make every key hash alike — a word equal
    /// to its constant zeroes its product — and pile its entries into one
    /// probe sequence that other tenants' lookups then walk.
    ///
    /// The spare last word is not mixed in (it is always zero).
    #[inline(always)]
    pub fn hash(&self) -> u32 {
        self.hash_with(self.has_extended())
    }

    /// The hash, mixing in the extended words when `extended`; callers
    /// decide it from the key (the words or [`PACKET_EXT`]), so one key
    /// always hashes alike through one caller.
    #[inline(always)]
    fn hash_with(&self, extended: bool) -> u32 {
        let w = &self.w;
        let base = [w[0], w[1], w[2], w[3], w[4], w[5], w[6]];
        let mut x = mix_base(&base);
        if extended {
            let s = &*HASH_SEED;
            let pair = |i: usize| mum(w[i] ^ s[i], w[i + 1] ^ s[i + 1]);
            // w7..w22 in eight pairs; w23 is the spare word.
            const _: () = assert!(BASE_WORDS == 7 && SPARE_WORD == 23);
            x ^=
                pair(7) ^ pair(9) ^ pair(11) ^ pair(13) ^ pair(15) ^ pair(17) ^ pair(19) ^ pair(21);
        }
        finish(x)
    }
}

/// A 64x64->128-bit multiply folded high into low, as wyhash mixes.
#[inline(always)]
fn mum(a: u64, b: u64) -> u64 {
    let r = u128::from(a) * u128::from(b);
    (r as u64) ^ ((r >> 64) as u64)
}

/// The base words' share of [`FlowKey::hash`]: four independent
/// multiplies (the odd seventh word paired with a seed word of its own).
#[inline(always)]
fn mix_base(w: &[u64; BASE_WORDS]) -> u64 {
    let s = &*HASH_SEED;
    mum(w[0] ^ s[0], w[1] ^ s[1])
        ^ mum(w[2] ^ s[2], w[3] ^ s[3])
        ^ mum(w[4] ^ s[4], w[5] ^ s[5])
        ^ mum(w[6] ^ s[6], s[SEED_W6_PARTNER])
}

/// Indices of [`HASH_SEED`] past the one per word.
const SEED_W6_PARTNER: usize = KEY_WORDS;
const SEED_FINISH: usize = KEY_WORDS + 1;

/// The last step of [`FlowKey::hash`]. The pair products alone spread keys
/// that differ in a few bits of one word poorly for some seeds (a field
/// counting up in the top bits of a word moves only some product bits);
/// one more multiply by an odd random word spreads them over all 64.
#[inline(always)]
fn finish(x: u64) -> u32 {
    let h = mum(x, HASH_SEED[SEED_FINISH]);
    (h ^ (h >> 32)) as u32
}

/// The base words of a key masked with a mask that has no bit past
/// [`BASE_WORDS`] (every IPv4 rule's, `ct_state`/`ct_zone`/`ct_mark`
/// included): what a cache keyed by such a mask stores and compares — 56
/// bytes instead of the key's 192 — hashing to [`FlowKey::hash`] of the
/// whole masked key.
#[derive(Clone, Copy, Debug)]
pub struct BaseKey(pub [u64; BASE_WORDS]);

impl BaseKey {
    /// `key & mask` where `mask` has no extended bits.
    #[inline(always)]
    pub fn masked(key: &FlowKey, mask: &FlowKey) -> BaseKey {
        debug_assert!(!mask.has_extended());
        BaseKey(core::array::from_fn(|i| key.w[i] & mask.w[i]))
    }

    /// Equal to [`FlowKey::hash`] of the full masked key.
    #[inline(always)]
    pub fn hash(&self) -> u32 {
        finish(mix_base(&self.0))
    }
}

impl PartialEq for BaseKey {
    #[inline(always)]
    fn eq(&self, other: &BaseKey) -> bool {
        self.0
            .iter()
            .zip(&other.0)
            .fold(0, |acc, (a, b)| acc | (a ^ b))
            == 0
    }
}

impl Eq for BaseKey {}

/// Words an [`AddrKey`] holds: the base words and the IPv6 addresses
/// (w7-w10).
pub const ADDR_WORDS: usize = 11;

/// A key masked with a mask that sets nothing past the IPv6 addresses
/// (every IPv6 5-tuple, address or port mask, with or without
/// `ct_state`/`ct_zone`/`ct_mark`: no ND target, no ARP/ND link-layer
/// addresses, no `ct_label` or original tuple): what a cache keyed by
/// such a mask stores and compares, 88 bytes instead of 192, masked word
/// by word in a straight line (a gather of only the set words measured
/// slower than masking the eleven).
#[derive(Clone, Copy, Debug)]
pub struct AddrKey(pub [u64; ADDR_WORDS]);

impl AddrKey {
    /// Whether `mask` sets no bit past the IPv6 addresses.
    pub fn fits(mask: &FlowKey) -> bool {
        mask.w[ADDR_WORDS..].iter().all(|&w| w == 0)
    }

    /// `key & mask` over the first [`ADDR_WORDS`] words.
    #[inline(always)]
    pub fn masked(key: &FlowKey, mask: &FlowKey) -> AddrKey {
        AddrKey(core::array::from_fn(|i| key.w[i] & mask.w[i]))
    }

    /// Six independent multiplies, as [`FlowKey::hash`] mixes (not equal
    /// to it: a map holds one kind of key).
    #[inline(always)]
    pub fn hash(&self) -> u32 {
        let (w, s) = (&self.0, &*HASH_SEED);
        finish(
            mum(w[0] ^ s[0], w[1] ^ s[1])
                ^ mum(w[2] ^ s[2], w[3] ^ s[3])
                ^ mum(w[4] ^ s[4], w[5] ^ s[5])
                ^ mum(w[6] ^ s[6], s[SEED_W6_PARTNER])
                ^ mum(w[7] ^ s[7], w[8] ^ s[8])
                ^ mum(w[9] ^ s[9], w[10] ^ s[10]),
        )
    }
}

impl PartialEq for AddrKey {
    #[inline(always)]
    fn eq(&self, other: &AddrKey) -> bool {
        self.0
            .iter()
            .zip(&other.0)
            .fold(0, |acc, (a, b)| acc | (a ^ b))
            == 0
    }
}

impl Eq for AddrKey {}

/// The key's fields in the order a staged lookup checks them (OVS's
/// classifier stages): metadata (`in_port`, `table`, `metadata` and,
/// as in OVS, every `ct_*` field), then L2 (`dl_type`, `vlan_tci`,
/// `dl_src`, `dl_dst`), then L3 (`nw_proto`, `nw_tos`, `nw_ttl`,
/// `ip_frag`, `ipv6_label`, the IPv4 and IPv6 addresses,
/// `arp_sha`/`arp_tha`); L4 (`tp_src`, `tp_dst`, `tcp_flags`,
/// `nd_target`) is what is left. Entry `k` is the union of stages
/// `0..=k`: a rule's mask cut by it is what the rule matches on up to
/// that stage.
pub const STAGE_PREFIXES: [FlowKey; 3] = {
    const META: u64 = 0xffff;
    const L2_W0: u64 = 0xffff_ffff_0000;
    const L3_W0: u64 = 0xffff << 48;
    const L3_W4: u64 = 0xffff | (0xf_ffff << 32);
    const M: u64 = u64::MAX;
    /// `ct_state` [0,8), `ct_zone` [16,32), `ct_mark` [32,64).
    const CT_W6: u64 = 0xff | 0xffff << 16 | 0xffff_ffff << 32;
    /// `ct_tp_src`, `ct_tp_dst`, `ct_nw_proto`.
    const CT_W18: u64 = 0xff_ffff_ffff;
    const fn key(w0: u64, mac: u64, w3: u64, w4: u64, l3: u64) -> FlowKey {
        FlowKey {
            w: [
                w0,
                mac,
                mac,
                w3,
                w4,
                M,
                CT_W6,
                l3,
                l3,
                l3,
                l3,
                0,
                0,
                l3 & MAC_MASK,
                l3 & MAC_MASK,
                M,
                M,
                M,
                CT_W18,
                M,
                M,
                M,
                M,
                0,
            ],
        }
    }
    const TABLE_W4: u64 = 0xff << 52;
    [
        key(META, 0, 0, TABLE_W4, 0),
        key(META | L2_W0, MAC_MASK, 0, TABLE_W4, 0),
        key(META | L2_W0 | L3_W0, MAC_MASK, M, TABLE_W4 | L3_W4, M),
    ]
};

/// The random words [`FlowKey::hash`] mixes in, drawn once per process
/// from the OS (through the standard library's randomly keyed hasher).
static HASH_SEED: std::sync::LazyLock<[u64; KEY_WORDS + 2]> = std::sync::LazyLock::new(|| {
    use std::hash::{BuildHasher, Hasher};
    let keyed = std::collections::hash_map::RandomState::new();
    std::array::from_fn(|i| {
        let mut h = keyed.build_hasher();
        h.write_usize(i);
        h.finish() | 1
    })
});

#[inline(always)]
pub(crate) fn mac_to_u64(mac: [u8; 6]) -> u64 {
    EthernetAddress(mac).to_u64()
}

#[inline(always)]
pub(crate) fn mac_from_u64(v: u64) -> [u8; 6] {
    EthernetAddress::from_u64(v).0
}

impl fmt::Debug for FlowKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "in_port={} dl_src={} dl_dst={} dl_type=0x{:04x} vlan_tci=0x{:04x} \
             nw_src={} nw_dst={} nw_proto={} tp_src={} tp_dst={}",
            self.in_port(),
            EthernetAddress(self.dl_src()),
            EthernetAddress(self.dl_dst()),
            self.dl_type(),
            self.vlan_tci(),
            core::net::Ipv4Addr::from(self.nw_src()),
            core::net::Ipv4Addr::from(self.nw_dst()),
            self.nw_proto(),
            self.tp_src(),
            self.tp_dst()
        )?;
        if self.w[4] != 0 || self.nw_tos() != 0 {
            write!(
                f,
                " nw_tos={} nw_ttl={} ip_frag={} tcp_flags=0x{:03x} ipv6_label=0x{:05x} table={}",
                self.nw_tos(),
                self.nw_ttl(),
                self.ip_frag(),
                self.tcp_flags(),
                self.ipv6_label(),
                self.table()
            )?;
        }
        if self.w[6] != 0 {
            write!(
                f,
                " ct_state=0x{:02x} ct_zone={} ct_mark=0x{:x}",
                self.ct_state(),
                self.ct_zone(),
                self.ct_mark()
            )?;
        }
        if self.has_extended() {
            write!(
                f,
                " metadata=0x{:x} ipv6_src={} ipv6_dst={} nd_target={} arp_sha={} arp_tha={}",
                self.metadata(),
                core::net::Ipv6Addr::from(self.ipv6_src()),
                core::net::Ipv6Addr::from(self.ipv6_dst()),
                core::net::Ipv6Addr::from(self.nd_target()),
                EthernetAddress(self.arp_sha()),
                EthernetAddress(self.arp_tha())
            )?;
            if self.w[15..=22].iter().any(|&w| w != 0) {
                write!(
                    f,
                    " ct_label=0x{:x} ct_nw_src={} ct_nw_dst={} ct_ipv6_src={} ct_ipv6_dst={} \
                     ct_nw_proto={} ct_tp_src={} ct_tp_dst={}",
                    self.ct_label(),
                    core::net::Ipv4Addr::from(self.ct_nw_src()),
                    core::net::Ipv4Addr::from(self.ct_nw_dst()),
                    core::net::Ipv6Addr::from(self.ct_ipv6_src()),
                    core::net::Ipv6Addr::from(self.ct_ipv6_dst()),
                    self.ct_nw_proto(),
                    self.ct_tp_src(),
                    self.ct_tp_dst()
                )?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "key_tests.rs"]
mod tests;
