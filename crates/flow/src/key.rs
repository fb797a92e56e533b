//! The flow key: every header field a rule can match, packed into sixteen
//! 64-bit words (two cache lines) so that masking, hashing and comparing
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
//! - w6, w7: `ipv6_src` (w6 the high half) · w8, w9: `ipv6_dst` · w10, w11: `nd_target`
//! - w12: `arp_sha` / `nd_sll` [0,48) · w13: `arp_tha` / `nd_tll` [0,48)
//! - w14, w15: zero (room for the connection tracker's fields)
//!
//! Words 0-5 hold everything an IPv4 packet sets and `metadata` (which a
//! pipeline's IPv4 rules match: keeping it here keeps their megaflows in
//! the short map); words 6-15 are zero for IPv4, and [`FlowKey::hash`]
//! skips them when they are, so IPv4 keys and its rules' masked keys hash
//! at the cost of six words (IPv6 and ARP pay for the rest). Fields of different `dl_type`s share
//! nothing except what OVS shares (ARP's opcode in `nw_proto`, its
//! addresses in `nw_src`/`nw_dst`; `arp_sha`/`nd_sll`, `arp_tha`/`nd_tll`),
//! and a rule that matches one of them also matches its `dl_type`.
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

/// Set in w4 of a packet's key by [`crate::extract()`] when a word past
/// [`BASE_WORDS`] may be nonzero (IPv6, ARP). No match field covers the
/// bit, so masks, masked keys and rule keys never hold it; it only lets
/// [`FlowKey::same_packet`] and [`FlowKey::packet_hash`] skip the eleven
/// words an IPv4 packet leaves zero.
pub const PACKET_EXT: u64 = 1 << 63;

/// Words of a [`FlowKey`].
pub const KEY_WORDS: usize = 16;
/// Words every packet may set; the rest are zero for IPv4 (see the module
/// doc) and hashed only when not.
pub const BASE_WORDS: usize = 6;

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
        pub fn $get(&self) -> $ty {
            ((self.w[$word] >> $shift) & ((1u64 << $bits) - 1)) as $ty
        }
        #[inline(always)]
        pub fn $set(&mut self, v: $ty) {
            let m = ((1u64 << $bits) - 1) << $shift;
            self.w[$word] = (self.w[$word] & !m) | (((v as u64) << $shift) & m);
        }
    };
}

/// A 128-bit field held in two words, the high half first.
macro_rules! field128 {
    ($get:ident, $set:ident, $word:expr) => {
        #[inline(always)]
        pub fn $get(&self) -> u128 {
            u128::from(self.w[$word]) << 64 | u128::from(self.w[$word + 1])
        }
        #[inline(always)]
        pub fn $set(&mut self, v: u128) {
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
    field128!(ipv6_src, set_ipv6_src, 6);
    field128!(ipv6_dst, set_ipv6_dst, 8);
    field128!(nd_target, set_nd_target, 10);
    field_mac!(dl_src, set_dl_src, 1);
    field_mac!(dl_dst, set_dl_dst, 2);
    field_mac!(arp_sha, set_arp_sha, 12);
    field_mac!(arp_tha, set_arp_tha, 13);

    #[inline(always)]
    pub fn metadata(&self) -> u64 {
        self.w[5]
    }
    #[inline(always)]
    pub fn set_metadata(&mut self, v: u64) {
        self.w[5] = v;
    }

    /// `self & mask`, word by word.
    #[inline(always)]
    pub fn masked(&self, mask: &FlowKey) -> FlowKey {
        FlowKey {
            w: core::array::from_fn(|i| self.w[i] & mask.w[i]),
        }
    }

    /// True when a word past [`BASE_WORDS`] is set (IPv6, ARP hardware
    /// addresses, ND).
    #[inline(always)]
    pub fn has_extended(&self) -> bool {
        self.w[BASE_WORDS..].iter().fold(0, |a, w| a | w) != 0
    }

    /// Equality of two packet keys from [`crate::extract()`]: the base
    /// words (and [`PACKET_EXT`] with them), and the rest only when the
    /// flag says they may be set. The exact-match cache and the batch's
    /// repeated-key check compare with this: an IPv4 key costs six words.
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
    /// one is set, so an IPv4 key costs three multiplies and a final one.
    ///
    /// Why random words: the hash indexes maps that senders fill (the
    /// megaflow cache holds a masked key per distinct flow). With known
    /// constants a sender could make every key hash alike — a word equal
    /// to its constant zeroes its product — and pile its entries into one
    /// probe sequence that other tenants' lookups then walk.
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
        let base = [w[0], w[1], w[2], w[3], w[4], w[5]];
        let mut x = mix_base(&base);
        if extended {
            let s = &*HASH_SEED;
            x ^= mum(w[6] ^ s[6], w[7] ^ s[7])
                ^ mum(w[8] ^ s[8], w[9] ^ s[9])
                ^ mum(w[10] ^ s[10], w[11] ^ s[11])
                ^ mum(w[12] ^ s[12], w[13] ^ s[13])
                ^ mum(w[14] ^ s[14], w[15] ^ s[15]);
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

/// The base words' share of [`FlowKey::hash`]: three independent
/// multiplies.
#[inline(always)]
fn mix_base(w: &[u64; BASE_WORDS]) -> u64 {
    let s = &*HASH_SEED;
    mum(w[0] ^ s[0], w[1] ^ s[1]) ^ mum(w[2] ^ s[2], w[3] ^ s[3]) ^ mum(w[4] ^ s[4], w[5] ^ s[5])
}

/// The last step of [`FlowKey::hash`]. The pair products alone spread keys
/// that differ in a few bits of one word poorly for some seeds (a field
/// counting up in the top bits of a word moves only some product bits);
/// one more multiply by an odd random word spreads them over all 64.
#[inline(always)]
fn finish(x: u64) -> u32 {
    let h = mum(x, HASH_SEED[18]);
    (h ^ (h >> 32)) as u32
}

/// The base words of a key masked with a mask that has no bit past
/// [`BASE_WORDS`] (every IPv4 rule's): what a cache keyed by such a mask
/// stores and compares — 40 bytes instead of the key's 128 — hashing to
/// [`FlowKey::hash`] of the whole masked key.
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
/// (w6-w9).
pub const ADDR_WORDS: usize = 10;

/// A key masked with a mask that sets nothing past the IPv6 addresses
/// (every IPv6 5-tuple, address or port mask: no ND target, no ARP/ND
/// link-layer addresses): what a cache keyed by such a mask stores and
/// compares, 80 bytes instead of 128, masked word by word in a straight
/// line (a gather of only the set words measured slower than masking the
/// ten).
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

    /// Five independent multiplies, as [`FlowKey::hash`] mixes (not equal
    /// to it: a map holds one kind of key).
    #[inline(always)]
    pub fn hash(&self) -> u32 {
        let (w, s) = (&self.0, &*HASH_SEED);
        finish(
            mum(w[0] ^ s[0], w[1] ^ s[1])
                ^ mum(w[2] ^ s[2], w[3] ^ s[3])
                ^ mum(w[4] ^ s[4], w[5] ^ s[5])
                ^ mum(w[6] ^ s[6], w[7] ^ s[7])
                ^ mum(w[8] ^ s[8], w[9] ^ s[9]),
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
/// classifier stages): metadata (`in_port`, `table`, `metadata`), then L2
/// (`dl_type`, `vlan_tci`, `dl_src`, `dl_dst`), then L3 (`nw_proto`,
/// `nw_tos`, `nw_ttl`, `ip_frag`, `ipv6_label`, the IPv4 and IPv6
/// addresses, `arp_sha`/`arp_tha`); L4 (`tp_src`, `tp_dst`, `tcp_flags`,
/// `nd_target`) is what is left. Entry `k` is the union of stages
/// `0..=k`: a rule's mask cut by it is what the rule matches on up to
/// that stage.
pub const STAGE_PREFIXES: [FlowKey; 3] = {
    const META: u64 = 0xffff;
    const L2_W0: u64 = 0xffff_ffff_0000;
    const L3_W0: u64 = 0xffff << 48;
    const L3_W4: u64 = 0xffff | (0xf_ffff << 32);
    const M: u64 = u64::MAX;
    const fn key(w0: u64, mac: u64, w3: u64, w4: u64, l3: u64) -> FlowKey {
        FlowKey {
            w: [
                w0,
                mac,
                mac,
                w3,
                w4,
                M,
                l3,
                l3,
                l3,
                l3,
                0,
                0,
                l3 & MAC_MASK,
                l3 & MAC_MASK,
                0,
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
static HASH_SEED: std::sync::LazyLock<[u64; 19]> = std::sync::LazyLock::new(|| {
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
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_without_clobbering_neighbours() {
        let mut k = FlowKey::ZERO;
        k.set_in_port(0xbeef);
        k.set_dl_type(0x0800);
        k.set_vlan_tci(VLAN_PRESENT | 42);
        k.set_nw_proto(17);
        k.set_dl_src([1, 2, 3, 4, 5, 6]);
        k.set_tp_src(1234);
        k.set_dl_dst([0xff; 6]);
        k.set_tp_dst(80);
        k.set_nw_src(0x0a00_0001);
        k.set_nw_dst(0xc0a8_0101);
        assert_eq!(k.in_port(), 0xbeef);
        assert_eq!(k.dl_type(), 0x0800);
        assert_eq!(k.vlan_tci(), VLAN_PRESENT | 42);
        assert_eq!(k.nw_proto(), 17);
        assert_eq!(k.dl_src(), [1, 2, 3, 4, 5, 6]);
        assert_eq!(k.tp_src(), 1234);
        assert_eq!(k.dl_dst(), [0xff; 6]);
        assert_eq!(k.tp_dst(), 80);
        assert_eq!(k.nw_src(), 0x0a00_0001);
        assert_eq!(k.nw_dst(), 0xc0a8_0101);
    }

    /// The caches take bucket bits from the low end of the hash and
    /// hashbrown its 7-bit tag from the high end: keys that differ the
    /// way real flows do (one field counting up, or two) must spread over
    /// both about as well as random values would.
    #[test]
    fn hashes_of_structured_keys_spread_over_low_and_high_bits() {
        let base = {
            let mut k = FlowKey::ZERO;
            k.set_in_port(1);
            k.set_dl_type(0x0800);
            k.set_nw_proto(17);
            k.set_tp_dst(5001);
            k.set_nw_dst(0x0a00_0002);
            k
        };
        type Vary = fn(&mut FlowKey, u32);
        let shapes: [(&str, Vary); 4] = [
            ("tp_src", |k, i| k.set_tp_src(i as u16)),
            ("nw_src", |k, i| k.set_nw_src(0x0a00_0000 + i)),
            ("nw_src and tp_src", |k, i| {
                k.set_nw_src(0x0a00_0000 + (i >> 10));
                k.set_tp_src(1024 + (i & 1023) as u16);
            }),
            ("dl_src", |k, i| {
                k.set_dl_src([2, 0, 0, 0, (i >> 8) as u8, i as u8])
            }),
        ];
        const N: u32 = 1 << 16;
        for (what, vary) in shapes {
            let mut low = vec![false; N as usize];
            let mut tags = [0u32; 128];
            for i in 0..N {
                let mut k = base;
                vary(&mut k, i);
                let h = k.hash();
                low[(h & (N - 1)) as usize] = true;
                tags[(h >> 25) as usize] += 1;
            }
            // Random values fill 1 - 1/e = 63 % of the slots.
            let filled = low.iter().filter(|&&b| b).count() as f64 / f64::from(N);
            assert!(
                filled > 0.60,
                "{what}: low 16 bits fill {filled:.3} of the slots"
            );
            // 512 per tag on average (sigma ~22.6): random values stay
            // within 5 sigma (the seed is random, so is this draw).
            let (lo, hi) = (tags.iter().min().unwrap(), tags.iter().max().unwrap());
            assert!(*lo > 398 && *hi < 626, "{what}: tag counts {lo}..{hi}");
        }
    }

    /// Each stage adds exactly its own fields, and L4 is all that the
    /// last one leaves out.
    #[test]
    fn stage_prefixes_grow_by_their_own_fields() {
        type Set = fn(&mut FlowKey);
        // (field, the first stage that includes it; 3 = none)
        let fields: [(&str, Set, usize); 23] = [
            ("in_port", |k| k.set_in_port(u16::MAX), 0),
            ("table", |k| k.set_table(u8::MAX), 0),
            ("metadata", |k| k.set_metadata(u64::MAX), 0),
            ("dl_type", |k| k.set_dl_type(u16::MAX), 1),
            ("vlan_tci", |k| k.set_vlan_tci(u16::MAX), 1),
            ("dl_src", |k| k.set_dl_src([0xff; 6]), 1),
            ("dl_dst", |k| k.set_dl_dst([0xff; 6]), 1),
            ("nw_proto", |k| k.set_nw_proto(u8::MAX), 2),
            ("nw_tos", |k| k.set_nw_tos(u8::MAX), 2),
            ("nw_ttl", |k| k.set_nw_ttl(u8::MAX), 2),
            ("ip_frag", |k| k.set_ip_frag(u8::MAX), 2),
            ("ipv6_label", |k| k.set_ipv6_label(u32::MAX), 2),
            ("nw_src", |k| k.set_nw_src(u32::MAX), 2),
            ("nw_dst", |k| k.set_nw_dst(u32::MAX), 2),
            ("ipv6_src", |k| k.set_ipv6_src(u128::MAX), 2),
            ("ipv6_dst", |k| k.set_ipv6_dst(u128::MAX), 2),
            ("arp_sha", |k| k.set_arp_sha([0xff; 6]), 2),
            ("arp_tha", |k| k.set_arp_tha([0xff; 6]), 2),
            ("tp_src", |k| k.set_tp_src(u16::MAX), 3),
            ("tp_dst", |k| k.set_tp_dst(u16::MAX), 3),
            ("tcp_flags", |k| k.set_tcp_flags(u16::MAX), 3),
            ("nd_target", |k| k.set_nd_target(u128::MAX), 3),
            ("nothing else", |_| {}, 3),
        ];
        let mut all = FlowKey::ZERO;
        for (name, set, first) in fields {
            let mut f = FlowKey::ZERO;
            set(&mut f);
            for (stage, prefix) in STAGE_PREFIXES.iter().enumerate() {
                let want = if stage >= first { f } else { FlowKey::ZERO };
                assert_eq!(f.masked(prefix), want, "{name} in stage {stage}");
            }
            for (w, m) in all.w.iter_mut().zip(f.w) {
                *w |= m;
            }
        }
        // Nothing outside the fields.
        assert_eq!(STAGE_PREFIXES[2].masked(&all), STAGE_PREFIXES[2]);
    }

    /// Every field reads back what was set and leaves every other bit
    /// of the key alone, and no two fields share a bit.
    #[test]
    fn fields_are_disjoint() {
        type Set = fn(&mut FlowKey);
        let setters: [Set; 22] = [
            |k| k.set_in_port(u16::MAX),
            |k| k.set_table(u8::MAX),
            |k| k.set_metadata(u64::MAX),
            |k| k.set_dl_type(u16::MAX),
            |k| k.set_vlan_tci(u16::MAX),
            |k| k.set_dl_src([0xff; 6]),
            |k| k.set_dl_dst([0xff; 6]),
            |k| k.set_nw_proto(u8::MAX),
            |k| k.set_nw_tos(u8::MAX),
            |k| k.set_nw_ttl(u8::MAX),
            |k| k.set_ip_frag(u8::MAX),
            |k| k.set_ipv6_label(u32::MAX),
            |k| k.set_nw_src(u32::MAX),
            |k| k.set_nw_dst(u32::MAX),
            |k| k.set_ipv6_src(u128::MAX),
            |k| k.set_ipv6_dst(u128::MAX),
            |k| k.set_arp_sha([0xff; 6]),
            |k| k.set_arp_tha([0xff; 6]),
            |k| k.set_tp_src(u16::MAX),
            |k| k.set_tp_dst(u16::MAX),
            |k| k.set_tcp_flags(u16::MAX),
            |k| k.set_nd_target(u128::MAX),
        ];
        let mut seen = FlowKey::ZERO;
        for (i, set) in setters.iter().enumerate() {
            let mut k = FlowKey::ZERO;
            set(&mut k);
            assert!(k != FlowKey::ZERO, "setter {i} sets nothing");
            assert_eq!(
                k.masked(&seen),
                FlowKey::ZERO,
                "setter {i} overlaps an earlier field"
            );
            for (s, w) in seen.w.iter_mut().zip(k.w) {
                *s |= w;
            }
        }
        // Words 0-5 hold the base fields; 14 and 15 are free.
        assert!(
            !seen
                .masked(&FlowKey {
                    w: core::array::from_fn(|i| if i < BASE_WORDS { u64::MAX } else { 0 })
                })
                .has_extended()
        );
        assert_eq!((seen.w[14], seen.w[15]), (0, 0));
        assert_eq!(seen.w[4] & PACKET_EXT, 0, "no field covers PACKET_EXT");
        let mut v6 = FlowKey::ZERO;
        v6.set_ipv6_src(0x2001_0db8 << 96 | 7);
        assert_eq!(v6.ipv6_src(), 0x2001_0db8 << 96 | 7);
        assert!(v6.has_extended());
    }

    #[test]
    fn extended_words_change_the_hash() {
        let mut a = FlowKey::ZERO;
        a.set_dl_type(0x86dd);
        let mut b = a;
        b.set_ipv6_dst(1);
        let mut c = a;
        c.set_ipv6_dst(2);
        assert_ne!(a.hash(), b.hash());
        assert_ne!(b.hash(), c.hash());
    }

    #[test]
    fn masking_keeps_only_masked_bits() {
        let mut k = FlowKey::ZERO;
        k.set_nw_dst(0x0a01_0203);
        k.set_tp_dst(53);
        let mut m = FlowKey::ZERO;
        m.set_nw_dst(0xffff_0000);
        let mk = k.masked(&m);
        assert_eq!(mk.nw_dst(), 0x0a01_0000);
        assert_eq!(mk.tp_dst(), 0);
    }

    /// An address key keeps what the whole mask keeps: two keys equal
    /// under one are equal under the other, for the masks an IPv6 rule
    /// makes; a mask with ND or ARP link-layer bits does not fit.
    #[test]
    fn an_address_key_keeps_what_the_whole_mask_keeps() {
        let mut five_tuple = FlowKey::ZERO;
        five_tuple.set_in_port(u16::MAX);
        five_tuple.set_dl_type(u16::MAX);
        five_tuple.set_nw_proto(u8::MAX);
        five_tuple.set_table(u8::MAX);
        five_tuple.set_ipv6_src(u128::MAX);
        five_tuple.set_ipv6_dst(u128::MAX << 64);
        five_tuple.set_tp_src(u16::MAX);
        five_tuple.set_tp_dst(0xff00);
        assert!(AddrKey::fits(&five_tuple));
        let mut nd = five_tuple;
        nd.set_nd_target(1);
        assert!(!AddrKey::fits(&nd) && !AddrKey::fits(&FlowKey::ALL));
        // Keys drawn so that some agree under the mask and others not.
        let mut x = 0x1234_5678_9abc_def1u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..2000 {
            let mut a = FlowKey::ZERO;
            for w in &mut a.w {
                *w = next();
            }
            let mut b = a;
            let word = (next() % KEY_WORDS as u64) as usize;
            b.w[word] ^= 1 << (next() % 64);
            let whole = a.masked(&five_tuple) == b.masked(&five_tuple);
            let (ka, kb) = (
                AddrKey::masked(&a, &five_tuple),
                AddrKey::masked(&b, &five_tuple),
            );
            assert_eq!(ka == kb, whole, "word {word}");
            if whole {
                assert_eq!(ka.hash(), kb.hash());
            }
        }
    }
}
