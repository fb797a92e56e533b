//! The flow key's layout: each field's bits, PACKET_EXT, the masked and
//! packet hashes, the base- and address-word keys.

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
    let fields: [(&str, Set, usize); 34] = [
        ("in_port", |k| k.set_in_port(u16::MAX), 0),
        ("table", |k| k.set_table(u8::MAX), 0),
        ("metadata", |k| k.set_metadata(u64::MAX), 0),
        ("ct_state", |k| k.set_ct_state(u8::MAX), 0),
        ("ct_zone", |k| k.set_ct_zone(u16::MAX), 0),
        ("ct_mark", |k| k.set_ct_mark(u32::MAX), 0),
        ("ct_label", |k| k.set_ct_label(u128::MAX), 0),
        ("ct_nw_src", |k| k.set_ct_nw_src(u32::MAX), 0),
        ("ct_nw_dst", |k| k.set_ct_nw_dst(u32::MAX), 0),
        ("ct_ipv6_src", |k| k.set_ct_ipv6_src(u128::MAX), 0),
        ("ct_ipv6_dst", |k| k.set_ct_ipv6_dst(u128::MAX), 0),
        ("ct_nw_proto", |k| k.set_ct_nw_proto(u8::MAX), 0),
        ("ct_tp_src", |k| k.set_ct_tp_src(u16::MAX), 0),
        ("ct_tp_dst", |k| k.set_ct_tp_dst(u16::MAX), 0),
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
    let setters: [Set; 33] = [
        |k| k.set_ct_state(u8::MAX),
        |k| k.set_ct_zone(u16::MAX),
        |k| k.set_ct_mark(u32::MAX),
        |k| k.set_ct_label(u128::MAX),
        |k| k.set_ct_nw_src(u32::MAX),
        |k| k.set_ct_nw_dst(u32::MAX),
        |k| k.set_ct_ipv6_src(u128::MAX),
        |k| k.set_ct_ipv6_dst(u128::MAX),
        |k| k.set_ct_nw_proto(u8::MAX),
        |k| k.set_ct_tp_src(u16::MAX),
        |k| k.set_ct_tp_dst(u16::MAX),
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
    // Words 0-6 hold the base fields; the last word is free.
    assert!(
        !seen
            .masked(&FlowKey {
                w: core::array::from_fn(|i| if i < BASE_WORDS { u64::MAX } else { 0 })
            })
            .has_extended()
    );
    assert_eq!(seen.w[SPARE_WORD], 0);
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
/// Where each `ct_*` field lives: the state, zone and mark in the base
/// word w6 (so IPv4 rules on them keep the short megaflow map), the
/// label and the original tuple past the base words.
#[test]
fn ct_fields_sit_in_their_words() {
    type Set = fn(&mut FlowKey);
    let cases: [(&str, Set, &[usize]); 11] = [
        ("ct_state", |k| k.set_ct_state(u8::MAX), &[6]),
        ("ct_zone", |k| k.set_ct_zone(u16::MAX), &[6]),
        ("ct_mark", |k| k.set_ct_mark(u32::MAX), &[6]),
        ("ct_label", |k| k.set_ct_label(u128::MAX), &[15, 16]),
        ("ct_nw_src", |k| k.set_ct_nw_src(u32::MAX), &[17]),
        ("ct_nw_dst", |k| k.set_ct_nw_dst(u32::MAX), &[17]),
        ("ct_tp_src", |k| k.set_ct_tp_src(u16::MAX), &[18]),
        ("ct_tp_dst", |k| k.set_ct_tp_dst(u16::MAX), &[18]),
        ("ct_nw_proto", |k| k.set_ct_nw_proto(u8::MAX), &[18]),
        ("ct_ipv6_src", |k| k.set_ct_ipv6_src(u128::MAX), &[19, 20]),
        ("ct_ipv6_dst", |k| k.set_ct_ipv6_dst(u128::MAX), &[21, 22]),
    ];
    for (name, set, words) in cases {
        let mut k = FlowKey::ZERO;
        set(&mut k);
        let nonzero: Vec<usize> = (0..KEY_WORDS).filter(|&i| k.w[i] != 0).collect();
        assert_eq!(nonzero, words, "{name}");
    }
    // Bits within w6 and w18, and the high halves first.
    let mut k = FlowKey::ZERO;
    k.set_ct_state(0x21);
    k.set_ct_zone(0xabcd);
    k.set_ct_mark(0x1234_5678);
    assert_eq!(k.w[6], 0x1234_5678_abcd_0021);
    k.set_ct_label(0x1 << 64 | 0x2);
    assert_eq!((k.w[15], k.w[16]), (1, 2));
    k.set_ct_nw_proto(6);
    k.set_ct_tp_src(0x1111);
    k.set_ct_tp_dst(0x2222);
    assert_eq!(k.w[18], 0x06_2222_1111);
    k.set_ct_nw_src(0x0a00_0001);
    k.set_ct_nw_dst(0x0a00_0002);
    assert_eq!(k.w[17], 0x0a00_0002_0a00_0001);
    assert_eq!(
        (k.ct_state(), k.ct_zone(), k.ct_mark(), k.ct_label()),
        (0x21, 0xabcd, 0x1234_5678, 1 << 64 | 2)
    );
}

/// [`FlowKey::set_ct`] and [`FlowKey::clear_ct`] keep [`PACKET_EXT`]
/// exact on an IPv4 key (set only for a label or a tuple) and never
/// clear it on a key whose other extended words are set (IPv6); the
/// packet comparisons and hash agree with the whole-key ones after
/// each step.
#[test]
fn set_ct_keeps_packet_ext_true_to_the_words() {
    let check = |k: &FlowKey, ext: bool, what: &str| {
        assert_eq!(k.w[4] & PACKET_EXT != 0, ext, "{what}: PACKET_EXT");
        assert_eq!(k.has_extended(), ext, "{what}: extended words");
        assert_eq!(k.packet_hash(), k.hash(), "{what}: packet hash");
        assert!(k.same_packet(k), "{what}");
    };
    let mut v4 = FlowKey::ZERO;
    v4.set_in_port(1);
    v4.set_dl_type(0x0800);
    v4.set_nw_proto(6);
    v4.set_nw_src(0x0a00_0001);
    v4.set_nw_dst(0x0a00_0002);
    v4.set_tp_src(1234);
    v4.set_tp_dst(80);
    let plain = v4;
    check(&v4, false, "extracted");

    v4.set_ct(ct_state::TRK | ct_state::NEW, 7, 0x55, 0, None);
    check(&v4, false, "state, zone and mark only");
    assert_eq!((v4.ct_state(), v4.ct_zone(), v4.ct_mark()), (0x21, 7, 0x55));
    assert!(!v4.same_packet(&plain) && v4.hash() != plain.hash());

    let orig = CtOrig {
        ipv6: false,
        src: 0x0a00_0001,
        dst: 0x0a00_0002,
        proto: 6,
        tp_src: 1234,
        tp_dst: 80,
    };
    v4.set_ct(ct_state::TRK | ct_state::EST, 7, 0x55, 0, Some(orig));
    check(&v4, true, "with the original tuple");
    assert_eq!(
        (v4.ct_nw_src(), v4.ct_nw_dst(), v4.ct_nw_proto()),
        (0x0a00_0001, 0x0a00_0002, 6)
    );
    assert_eq!((v4.ct_tp_src(), v4.ct_tp_dst()), (1234, 80));
    assert_eq!((v4.ct_ipv6_src(), v4.ct_ipv6_dst()), (0, 0));

    v4.set_ct(ct_state::TRK | ct_state::EST, 7, 0x55, 0xfeed, None);
    check(&v4, true, "with a label, no tuple");
    assert_eq!((v4.ct_label(), v4.w[17], v4.w[18]), (0xfeed, 0, 0));

    v4.clear_ct();
    check(&v4, false, "cleared");
    assert_eq!(v4, plain, "ct_clear gives the extracted key back");

    let mut v6 = FlowKey::ZERO;
    v6.set_dl_type(0x86dd);
    v6.set_ipv6_src(0x2001_0db8 << 96 | 1);
    v6.set_ipv6_dst(0x2001_0db8 << 96 | 2);
    v6.w[4] |= PACKET_EXT;
    let plain6 = v6;
    let orig6 = CtOrig {
        ipv6: true,
        src: v6.ipv6_src(),
        dst: v6.ipv6_dst(),
        proto: 17,
        tp_src: 53,
        tp_dst: 5353,
    };
    v6.set_ct(
        ct_state::TRK | ct_state::RPL | ct_state::EST,
        0,
        0,
        0,
        Some(orig6),
    );
    check(&v6, true, "IPv6 tracked");
    assert_eq!((v6.ct_ipv6_src(), v6.ct_ipv6_dst()), (orig6.src, orig6.dst));
    assert_eq!(v6.w[17], 0, "no IPv4 tuple for an IPv6 connection");
    // An IPv4 tuple replaces an IPv6 one entirely.
    v6.set_ct(ct_state::TRK, 0, 0, 0, Some(orig));
    assert_eq!((v6.ct_ipv6_src(), v6.ct_ipv6_dst()), (0, 0));
    v6.clear_ct();
    check(&v6, true, "IPv6 cleared: its addresses stay extended");
    assert_eq!(v6, plain6);
}

/// A mask on the base words alone, `ct_state`/`ct_zone`/`ct_mark`
/// included, is what [`BaseKey`] stores: equal keys under it hash
/// alike through both, and the `ct` word tells keys apart.
#[test]
fn base_keys_cover_the_ct_word() {
    let mut mask = FlowKey::ZERO;
    mask.set_dl_type(u16::MAX);
    mask.set_nw_dst(u32::MAX);
    mask.set_ct_state(ct_state::TRK | ct_state::EST);
    mask.set_ct_zone(u16::MAX);
    mask.set_ct_mark(0xff);
    assert!(!mask.has_extended() && AddrKey::fits(&mask));
    let mut a = FlowKey::ZERO;
    a.set_dl_type(0x0800);
    a.set_nw_dst(0x0a00_0001);
    a.set_ct(ct_state::TRK | ct_state::EST, 3, 0x1ff, 0, None);
    let mut b = a;
    b.set_ct_mark(0x2ff);
    let (ka, kb) = (BaseKey::masked(&a, &mask), BaseKey::masked(&b, &mask));
    assert!(ka == kb, "ct_mark bits outside the mask are not compared");
    assert_eq!(ka.hash(), a.masked(&mask).hash());
    let mut c = a;
    c.set_ct_zone(4);
    let kc = BaseKey::masked(&c, &mask);
    assert!(ka != kc && ka.hash() != kc.hash());
}
