//! Tests of the match fields beyond IPv4's five-tuple: IPv6, ND, ARP,
//! TOS/ECN/TTL, fragments, TCP flags, ICMP names, metadata and the
//! connection tracker's fields — each parsed to the key bits it must set,
//! printed back in `ovs-ofctl`'s words, and refused with the reason when
//! a prerequisite is missing.

use crate::key::FlowKey;
use crate::key::ct_state::{DNAT, EST, INV, NEW, REL, RPL, SNAT, TRK};
use crate::parse::{parse_filter, parse_flow};
use crate::rule::Match;

/// A match built with the key's setters: `(key, mask)` pairs per field.
fn m(build: impl Fn(&mut FlowKey, &mut FlowKey)) -> Match {
    let (mut k, mut mk) = (FlowKey::ZERO, FlowKey::ZERO);
    build(&mut k, &mut mk);
    // A rule in table 0 (a filter would not name it).
    mk.set_table(0xff);
    Match {
        key: k.masked(&mk),
        mask: mk,
    }
}

fn eth(k: &mut FlowKey, mk: &mut FlowKey, t: u16) {
    k.set_dl_type(t);
    mk.set_dl_type(0xffff);
}

fn proto(k: &mut FlowKey, mk: &mut FlowKey, t: u16, p: u8) {
    eth(k, mk, t);
    k.set_nw_proto(p);
    mk.set_nw_proto(0xff);
}

const V6: u16 = 0x86dd;

/// (input, expected match, canonical text `dump-flows` prints).
fn good() -> Vec<(&'static str, Match, &'static str)> {
    vec![
        (
            "ipv6,ipv6_src=2001:db8::/32,ipv6_dst=2001:db8::1",
            m(|k, mk| {
                eth(k, mk, V6);
                k.set_ipv6_src(0x2001_0db8 << 96);
                mk.set_ipv6_src(u128::MAX << 96);
                k.set_ipv6_dst(0x2001_0db8 << 96 | 1);
                mk.set_ipv6_dst(u128::MAX);
            }),
            "ipv6,ipv6_src=2001:db8::/32,ipv6_dst=2001:db8::1",
        ),
        (
            "ipv6,ipv6_dst=::1:0:0:0/::ffff:0:0:ffff",
            m(|k, mk| {
                eth(k, mk, V6);
                k.set_ipv6_dst(1 << 48);
                mk.set_ipv6_dst(0xffff << 48 | 0xffff);
            }),
            "ipv6,ipv6_dst=::1:0:0:0/::ffff:0:0:ffff",
        ),
        (
            "tcp6,ipv6_label=0x12345,tp_dst=80,tcp_flags=+syn-ack",
            m(|k, mk| {
                proto(k, mk, V6, 6);
                k.set_ipv6_label(0x12345);
                mk.set_ipv6_label(0xfffff);
                k.set_tp_dst(80);
                mk.set_tp_dst(0xffff);
                k.set_tcp_flags(0x002);
                mk.set_tcp_flags(0x012);
            }),
            "tcp6,ipv6_label=74565,tp_dst=80,tcp_flags=+syn-ack",
        ),
        (
            "udp6,nw_tos=184,nw_ecn=2,nw_ttl=64,ip_frag=first",
            m(|k, mk| {
                proto(k, mk, V6, 17);
                k.set_nw_tos(184 | 2);
                mk.set_nw_tos(0xff);
                k.set_nw_ttl(64);
                mk.set_nw_ttl(0xff);
                k.set_ip_frag(1);
                mk.set_ip_frag(3);
            }),
            "udp6,nw_tos=184,nw_ecn=2,nw_ttl=64,nw_frag=first",
        ),
        (
            "ip,ip_dscp=46,ip_frag=no",
            m(|k, mk| {
                eth(k, mk, 0x0800);
                k.set_nw_tos(46 << 2);
                mk.set_nw_tos(0xfc);
                mk.set_ip_frag(1);
            }),
            "ip,nw_tos=184,nw_frag=no",
        ),
        (
            "ip,ip_frag=later",
            m(|k, mk| {
                eth(k, mk, 0x0800);
                k.set_ip_frag(3);
                mk.set_ip_frag(3);
            }),
            "ip,nw_frag=later",
        ),
        (
            "ip,ip_frag=not_later",
            m(|k, mk| {
                eth(k, mk, 0x0800);
                mk.set_ip_frag(2);
            }),
            "ip,nw_frag=not_later",
        ),
        (
            "tcp,tcp_flags=0x012/0x0ff",
            m(|k, mk| {
                proto(k, mk, 0x0800, 6);
                k.set_tcp_flags(0x012);
                mk.set_tcp_flags(0x0ff);
            }),
            "tcp,tcp_flags=-fin+syn-rst-psh+ack-urg-ece-cwr",
        ),
        (
            "icmp,icmp_type=8,icmp_code=0",
            m(|k, mk| {
                proto(k, mk, 0x0800, 1);
                k.set_tp_src(8);
                mk.set_tp_src(0xffff);
                mk.set_tp_dst(0xffff);
            }),
            "icmp,icmp_type=8,icmp_code=0",
        ),
        (
            "icmp6,icmpv6_type=135,nd_target=fe80::1,nd_sll=02:00:00:00:00:07",
            m(|k, mk| {
                proto(k, mk, V6, 58);
                k.set_tp_src(135);
                mk.set_tp_src(0xffff);
                k.set_nd_target(0xfe80 << 112 | 1);
                mk.set_nd_target(u128::MAX);
                k.set_arp_sha([2, 0, 0, 0, 0, 7]);
                mk.set_arp_sha([0xff; 6]);
            }),
            "icmp6,icmp_type=135,nd_target=fe80::1,nd_sll=02:00:00:00:00:07",
        ),
        (
            "icmp6,icmp_type=136,nd_tll=02:00:00:00:00:08",
            m(|k, mk| {
                proto(k, mk, V6, 58);
                k.set_tp_src(136);
                mk.set_tp_src(0xffff);
                k.set_arp_tha([2, 0, 0, 0, 0, 8]);
                mk.set_arp_tha([0xff; 6]);
            }),
            "icmp6,icmp_type=136,nd_tll=02:00:00:00:00:08",
        ),
        (
            "arp,arp_op=1,arp_spa=10.0.0.1,arp_tpa=10.0.0.0/8,arp_sha=02:00:00:00:00:01,arp_tha=00:00:00:00:00:00",
            m(|k, mk| {
                eth(k, mk, 0x0806);
                k.set_nw_proto(1);
                mk.set_nw_proto(0xff);
                k.set_nw_src(0x0a00_0001);
                mk.set_nw_src(u32::MAX);
                k.set_nw_dst(0x0a00_0000);
                mk.set_nw_dst(0xff00_0000);
                k.set_arp_sha([2, 0, 0, 0, 0, 1]);
                mk.set_arp_sha([0xff; 6]);
                mk.set_arp_tha([0xff; 6]);
            }),
            "arp,arp_spa=10.0.0.1,arp_tpa=10.0.0.0/8,arp_op=1,arp_sha=02:00:00:00:00:01,arp_tha=00:00:00:00:00:00",
        ),
        (
            "metadata=0x5/0xff,in_port=3",
            m(|k, mk| {
                k.set_in_port(3);
                mk.set_in_port(0xffff);
                k.set_metadata(5);
                mk.set_metadata(0xff);
            }),
            "in_port=3,metadata=0x5/0xff",
        ),
        (
            "ipv6,nw_proto=44",
            m(|k, mk| proto(k, mk, V6, 44)),
            "ipv6,nw_proto=44",
        ),
        // The connection tracker's fields: ct_state in OVS's three forms,
        // printed as OVS prints them (`+`/`-` in bit order, `|` exact).
        (
            "ct_state=+trk+est-new",
            m(|k, mk| {
                k.set_ct_state(TRK | EST);
                mk.set_ct_state(TRK | EST | NEW);
            }),
            "ct_state=-new+est+trk",
        ),
        (
            "ct_state=0x22/0x22",
            m(|k, mk| {
                k.set_ct_state(TRK | EST);
                mk.set_ct_state(TRK | EST);
            }),
            "ct_state=+est+trk",
        ),
        (
            "ct_state=trk|est",
            m(|k, mk| {
                k.set_ct_state(TRK | EST);
                mk.set_ct_state(0xff);
            }),
            "ct_state=est|trk",
        ),
        (
            "ct_state=0x21",
            m(|k, mk| {
                k.set_ct_state(TRK | NEW);
                mk.set_ct_state(0xff);
            }),
            "ct_state=new|trk",
        ),
        ("ct_state=0", m(|_, mk| mk.set_ct_state(0xff)), "ct_state=0"),
        (
            "ct_state=-trk",
            m(|_, mk| mk.set_ct_state(TRK)),
            "ct_state=-trk",
        ),
        (
            "ct_state=+rel+rpl+inv+snat+dnat",
            m(|k, mk| {
                k.set_ct_state(REL | RPL | INV | SNAT | DNAT);
                mk.set_ct_state(REL | RPL | INV | SNAT | DNAT);
            }),
            "ct_state=+rel+rpl+inv+snat+dnat",
        ),
        (
            "ct_zone=0x10,ct_mark=0x5/0xff,ct_label=0x1/0x1",
            m(|k, mk| {
                k.set_ct_zone(16);
                mk.set_ct_zone(0xffff);
                k.set_ct_mark(5);
                mk.set_ct_mark(0xff);
                k.set_ct_label(1);
                mk.set_ct_label(1);
            }),
            "ct_zone=16,ct_mark=0x5/0xff,ct_label=0x1/0x1",
        ),
        (
            "ct_mark=0,ct_label=0x1234567890abcdef1234567890abcdef",
            m(|k, mk| {
                mk.set_ct_mark(u32::MAX);
                k.set_ct_label(0x1234_5678_90ab_cdef_1234_5678_90ab_cdef);
                mk.set_ct_label(u128::MAX);
            }),
            "ct_mark=0,ct_label=0x1234567890abcdef1234567890abcdef",
        ),
        (
            "ct_label=340282366920938463463374607431768211455,ct_mark=4294967295",
            m(|k, mk| {
                k.set_ct_label(u128::MAX);
                mk.set_ct_label(u128::MAX);
                k.set_ct_mark(u32::MAX);
                mk.set_ct_mark(u32::MAX);
            }),
            "ct_mark=0xffffffff,ct_label=0xffffffffffffffffffffffffffffffff",
        ),
        (
            "ct_state=+trk+est,ct_nw_src=10.0.0.0/8,ct_nw_dst=10.0.0.1,ct_nw_proto=6,\
             ct_tp_src=0x400/0xfc00,ct_tp_dst=80",
            m(|k, mk| {
                k.set_ct_state(TRK | EST);
                mk.set_ct_state(TRK | EST);
                k.set_ct_nw_src(0x0a00_0000);
                mk.set_ct_nw_src(0xff00_0000);
                k.set_ct_nw_dst(0x0a00_0001);
                mk.set_ct_nw_dst(u32::MAX);
                k.set_ct_nw_proto(6);
                mk.set_ct_nw_proto(0xff);
                k.set_ct_tp_src(0x400);
                mk.set_ct_tp_src(0xfc00);
                k.set_ct_tp_dst(80);
                mk.set_ct_tp_dst(0xffff);
            }),
            "ct_state=+est+trk,ct_nw_src=10.0.0.0/8,ct_nw_dst=10.0.0.1,ct_nw_proto=6,\
             ct_tp_src=0x400/0xfc00,ct_tp_dst=80",
        ),
        (
            "ct_state=+trk-inv,ct_ipv6_src=2001:db8::/32,ct_ipv6_dst=::1",
            m(|k, mk| {
                k.set_ct_state(TRK);
                mk.set_ct_state(TRK | INV);
                k.set_ct_ipv6_src(0x2001_0db8 << 96);
                mk.set_ct_ipv6_src(u128::MAX << 96);
                k.set_ct_ipv6_dst(1);
                mk.set_ct_ipv6_dst(u128::MAX);
            }),
            "ct_state=-inv+trk,ct_ipv6_src=2001:db8::/32,ct_ipv6_dst=::1",
        ),
        (
            "ct_nw_dst=192.168.0.0/255.255.0.255,ct_state=+dnat,ip,in_port=3",
            m(|k, mk| {
                eth(k, mk, 0x0800);
                k.set_in_port(3);
                mk.set_in_port(0xffff);
                k.set_ct_state(DNAT);
                mk.set_ct_state(DNAT);
                k.set_ct_nw_dst(0xc0a8_0000);
                mk.set_ct_nw_dst(0xffff_00ff);
            }),
            "ip,in_port=3,ct_state=+dnat,ct_nw_dst=192.168.0.0/255.255.0.255",
        ),
    ]
}

#[test]
fn new_fields_parse_to_their_key_bits_and_print_as_ovs_does() {
    for (text, want, canonical) in good() {
        let spec =
            parse_flow(&format!("{text},actions=drop")).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(spec.matches, want, "{text}");
        assert_eq!(spec.matches.to_string(), canonical, "{text}");
        // What is printed parses back to the same match (as a filter:
        // in every table).
        let mut any_table = want;
        any_table.mask.set_table(0);
        assert_eq!(
            parse_filter(canonical).unwrap().matches,
            any_table,
            "{canonical}"
        );
    }
}

#[test]
fn prerequisites_and_values_are_checked() {
    let cases: &[(&str, &str)] = &[
        ("ipv6_src=::1", "ipv6_src: needs ipv6 first"),
        ("ip,ipv6_dst=::1", "ipv6_dst: needs ipv6 first"),
        ("ipv6,nw_src=10.0.0.1", "nw_src: needs ip or arp first"),
        ("nw_ttl=3", "nw_ttl: needs ip or ipv6 first"),
        ("arp,nw_tos=4", "nw_tos: needs ip or ipv6 first"),
        ("ip,nw_tos=5", "nw_tos: 5 has ECN bits set"),
        ("ip,nw_ecn=4", "nw_ecn: \"4\" is not an ECN value"),
        ("ip,ip_dscp=64", "ip_dscp: \"64\" is not a DSCP value"),
        (
            "ip,ip_frag=maybe",
            "ip_frag: \"maybe\" is not no, yes, first, later or not_later",
        ),
        ("udp,tcp_flags=+syn", "tcp_flags: needs tcp or tcp6 first"),
        (
            "tcp,tcp_flags=+syn+bogus",
            "tcp_flags: \"+syn+bogus\" is not TCP flags",
        ),
        ("tcp,tcp_flags=+syn-syn", "tcp_flags: syn is named twice"),
        (
            "tcp,tcp_flags=0x1000",
            "tcp_flags: \"0x1000\" is not TCP flags",
        ),
        (
            "udp,ip_frag=later,tp_src=53",
            "tp_src: a later fragment (ip_frag=later) has no TCP, UDP or SCTP header",
        ),
        (
            "sctp6,nw_frag=later,tp_dst=0x0/0x8000",
            "tp_dst: a later fragment (ip_frag=later) has no TCP, UDP or SCTP header",
        ),
        (
            "tcp,tcp_flags=+syn,ip_frag=later",
            "tcp_flags: a later fragment (ip_frag=later) has no TCP, UDP or SCTP header",
        ),
        ("tcp,icmp_type=3", "icmp_type: needs icmp or icmp6 first"),
        ("icmp,icmpv6_type=3", "icmpv6_type: needs icmp6 first"),
        (
            "icmp,icmp_type=256",
            "icmp_type: \"256\" is not an ICMP type",
        ),
        (
            "icmp6,nd_target=::1",
            "nd_target: needs icmp6 with icmp_type=135 or 136",
        ),
        (
            "icmp6,icmp_type=135,icmp_code=3,nd_target=::1",
            "nd_target: needs icmp6 with icmp_type=135 or 136 first, and icmp_code 0",
        ),
        (
            "icmp6,icmp_type=136,nd_tll=02:00:00:00:00:01,tp_dst=1",
            "nd_tll: needs icmp6 with icmp_type=136 first, and icmp_code 0",
        ),
        (
            "icmp6,icmp_type=136,nd_sll=02:00:00:00:00:01",
            "nd_sll: needs icmp6 with icmp_type=135",
        ),
        (
            "icmp6,icmp_type=135,nd_tll=02:00:00:00:00:01",
            "nd_tll: needs icmp6 with icmp_type=136",
        ),
        ("ip,arp_op=1", "arp_op: needs arp first"),
        ("ipv6,arp_sha=02:00:00:00:00:01", "arp_sha: needs arp first"),
        (
            "ipv6,ipv6_src=::1/129",
            "ipv6_src: prefix length 129 out of range 0..128",
        ),
        (
            "ipv6,ipv6_src=1.2.3.4",
            "ipv6_src: \"1.2.3.4\" is not an IPv6 address",
        ),
        (
            "ipv6,ipv6_label=0x100000",
            "ipv6_label: \"0x100000\" is not a flow label",
        ),
        (
            "arp,arp_op=1,nw_proto=2",
            "nw_proto: conflicts with earlier \"arp_op\"",
        ),
        ("ipv6,udp", "udp: conflicts with earlier \"ipv6\""),
        ("tcp6=1", "tcp6: is a keyword and takes no value"),
        ("nd_target", "nd_target: missing value"),
        // The connection tracker's fields.
        (
            "ct_nw_src=10.0.0.1",
            "ct_nw_src: needs a tracked connection first (ct_state with +new, +est",
        ),
        (
            "ct_state=+trk,ct_tp_dst=80",
            "ct_tp_dst: needs a tracked connection first",
        ),
        (
            "ct_state=+trk+inv,ct_nw_proto=6",
            "ct_nw_proto: needs a tracked connection first",
        ),
        (
            "ct_state=+trk-new,ct_ipv6_dst=::1",
            "ct_ipv6_dst: needs a tracked connection first",
        ),
        (
            "ct_state=0,ct_nw_dst=10.0.0.1",
            "ct_nw_dst: needs a tracked connection first",
        ),
        (
            "ct_state=+bogus",
            "ct_state: \"+bogus\" is not connection states (N[/M] up to 0xff, +trk+est-new... \
             or trk|est...; the states: new, est, rel, rpl, inv, trk, snat, dnat)",
        ),
        ("ct_state=+trk+trk", "ct_state: trk is named twice"),
        ("ct_state=est|est", "ct_state: est is named twice"),
        (
            "ct_state=0x100",
            "ct_state: \"0x100\" is not connection states",
        ),
        (
            "ct_state=trk+est",
            "ct_state: \"trk+est\" is not connection states",
        ),
        (
            "ct_state=+[100]",
            "ct_state: \"+[100]\" is not connection states",
        ),
        (
            "ct_zone=1/1",
            "ct_zone: \"1/1\": this field takes no mask (it matches exactly)",
        ),
        (
            "ct_zone=65536",
            "ct_zone: \"65536\" is not a connection tracking zone (0..65535)",
        ),
        (
            "ct_mark=0x100000000",
            "ct_mark: \"0x100000000\" is not a 32-bit mark",
        ),
        ("ct_mark=1/x", "ct_mark: \"x\" is not a 32-bit mark"),
        (
            "ct_label=0x1/0xg",
            "ct_label: \"0xg\" is not a 128-bit label",
        ),
        (
            "ct_label=0x100000000000000000000000000000000",
            "ct_label: \"0x100000000000000000000000000000000\" is not a 128-bit label",
        ),
        ("ct_label=-1", "ct_label: \"-1\" is not a 128-bit label"),
        (
            "ct_state=+est,ct_nw_proto=6/0xff",
            "ct_nw_proto: \"6/0xff\": this field takes no mask",
        ),
        (
            "ct_state=+est,ct_nw_proto=256",
            "ct_nw_proto: \"256\" is not an IP protocol (0..255)",
        ),
        (
            "ct_state=+est,ct_tp_src=65536",
            "ct_tp_src: \"65536\" is not a port (0..65535)",
        ),
        (
            "ct_state=+est,ct_ipv6_src=1.2.3.4",
            "ct_ipv6_src: \"1.2.3.4\" is not an IPv6 address",
        ),
        (
            "ct_state=+est,ct_nw_src=10.0.0.0/33",
            "ct_nw_src: prefix length 33 out of range 0..32",
        ),
        ("ct_mark=1,ct_mark=2", "duplicate field \"ct_mark\""),
        ("ct_zone", "ct_zone: missing value"),
    ];
    for (text, want) in cases {
        let err = parse_flow(&format!("{text},actions=drop"))
            .expect_err(text)
            .to_string();
        assert!(
            err.starts_with(want),
            "{text}: got \"{err}\", want \"{want}...\""
        );
    }
}

#[test]
fn the_same_field_under_two_names_agrees() {
    // icmp_type is tp_src, arp_op is nw_proto: both spellings, one value, pass.
    assert!(parse_flow("icmp,icmp_type=8,tp_src=8,actions=drop").is_ok());
    assert!(parse_flow("arp,arp_op=2,nw_proto=2,actions=drop").is_ok());
    assert!(parse_flow("ip,nw_tos=8,ip_dscp=2,actions=drop").is_ok());
    assert!(parse_flow("icmp,icmp_type=8,tp_src=9,actions=drop").is_err());
}

/// `tcp_flags` as OVS's dump-flows prints it reads back: `[HEX]` for
/// the bits without a name, `a|b` for an exact value.
#[test]
fn tcp_flags_in_ovs_words() {
    for (text, v, m) in [
        ("+ack-urg-ece-cwr-ns-[200]-[400]-[800]", 0x010, 0xff0),
        ("-[800]", 0, 0x800),
        ("+syn+ack-ns-[200]-[400]+[800]", 0x812, 0xf12),
        ("syn|ack", 0x012, 0xfff),
        ("ack", 0x010, 0xfff),
        ("syn|ack|[800]", 0x812, 0xfff),
        ("0", 0, 0xfff),
        ("0x10/0xff0", 0x010, 0xff0),
    ] {
        let spec = parse_flow(&format!("tcp,tcp_flags={text},actions=drop"))
            .unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(
            (spec.matches.key.tcp_flags(), spec.matches.mask.tcp_flags()),
            (v, m),
            "{text}"
        );
    }
    for bad in ["[1000]", "+[3]", "syn|syn", "syn|", "+syn|ack"] {
        assert!(
            parse_flow(&format!("tcp,tcp_flags={bad},actions=drop")).is_err(),
            "{bad}"
        );
    }
}

/// Ports beside a fragment state that has them: as OVS, only a later
/// fragment (which carries no L4 header) refuses them; ICMP's type and
/// code OVS takes beside any state.
#[test]
fn l4_fields_beside_fragment_states() {
    for ok in [
        "udp,ip_frag=first,tp_src=53",
        "udp,ip_frag=yes,tp_src=53",
        "tcp,ip_frag=not_later,tcp_flags=+syn",
        "udp,ip_frag=later",
        "icmp,ip_frag=later,icmp_type=8",
        "ip,ip_frag=later,nw_proto=47",
    ] {
        assert!(parse_flow(&format!("{ok},actions=drop")).is_ok(), "{ok}");
    }
}

/// The OpenFlow 1.2+ names ovs-ofctl also takes: the same key bits as
/// the classic names, each with its protocol's prerequisite.
#[test]
fn oxm_spellings_match_what_the_classic_names_do() {
    // (OXM spelling, classic spelling)
    let same = [
        ("eth_src=02:00:00:00:00:01", "dl_src=02:00:00:00:00:01"),
        (
            "eth_dst=02:00:00:00:00:02/ff:ff:ff:ff:ff:00",
            "dl_dst=02:00:00:00:00:02/ff:ff:ff:ff:ff:00",
        ),
        ("eth_type=0x0800", "dl_type=0x0800"),
        ("ip,ip_src=10.0.0.0/8", "ip,nw_src=10.0.0.0/8"),
        ("ip,ip_dst=10.0.0.1", "ip,nw_dst=10.0.0.1"),
        ("ipv6,ip_proto=17", "ipv6,nw_proto=17"),
        ("tcp,tcp_src=80", "tcp,tp_src=80"),
        ("tcp6,tcp_dst=0x100/0xff00", "tcp6,tp_dst=0x100/0xff00"),
        ("udp,udp_src=53", "udp,tp_src=53"),
        ("udp6,udp_dst=53", "udp6,tp_dst=53"),
        ("sctp,sctp_src=9", "sctp,tp_src=9"),
        ("sctp6,sctp_dst=9", "sctp6,tp_dst=9"),
    ];
    for (oxm, classic) in same {
        let a = parse_flow(&format!("{oxm},actions=drop")).unwrap_or_else(|e| panic!("{oxm}: {e}"));
        let b = parse_flow(&format!("{classic},actions=drop")).unwrap();
        assert_eq!(a.matches, b.matches, "{oxm}");
    }
    // (rule, the refusal)
    let refused = [
        ("udp,tcp_src=80", "tcp_src: needs tcp or tcp6 first"),
        ("tcp,udp_dst=53", "udp_dst: needs udp or udp6 first"),
        ("udp,sctp_src=9", "sctp_src: needs sctp or sctp6 first"),
        ("arp,ip_src=10.0.0.1", "ip_src: needs ip first"),
        ("ipv6,ip_dst=10.0.0.1", "ip_dst: needs ip first"),
        ("arp,ip_proto=1", "ip_proto: needs ip or ipv6 first"),
        (
            "dl_src=02:00:00:00:00:01,eth_src=02:00:00:00:00:02",
            "eth_src",
        ),
    ];
    for (rule, want) in refused {
        let e = parse_flow(&format!("{rule},actions=drop"))
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{rule}: {e}");
    }
    let pop = parse_flow("actions=pop_vlan,output:2").unwrap();
    assert_eq!(
        pop.actions,
        parse_flow("actions=strip_vlan,output:2").unwrap().actions
    );
}

/// Which `ct_state` matches meet OVS's `CT` prerequisite of the
/// original-direction tuple fields: a state that only a valid connection
/// has, or `+trk` with an explicit `-inv`.
#[test]
fn the_tuple_fields_need_a_valid_connection() {
    for (state, ok) in [
        ("+new", true),
        ("+est", true),
        ("+rel", true),
        ("+rpl", true),
        ("+snat", true),
        ("+dnat", true),
        ("+trk-inv", true),
        ("-inv+trk-new", true),
        ("est|trk", true),
        ("0x22/0x22", true),
        ("+trk", false),
        ("-inv", false),
        ("+trk+inv", false),
        ("-new-est", false),
        ("0", false),
        // Exact: inv is matched clear.
        ("trk", true),
        ("inv|trk", false),
    ] {
        let text = format!("ct_state={state},ct_nw_proto=17,actions=drop");
        assert_eq!(parse_flow(&text).is_ok(), ok, "{text}");
    }
    // ct_state, ct_zone, ct_mark and ct_label need nothing.
    for text in [
        "ct_state=+trk",
        "ct_zone=1",
        "ct_mark=1",
        "ct_label=1",
        "arp,ct_state=-trk",
    ] {
        assert!(
            parse_flow(&format!("{text},actions=drop")).is_ok(),
            "{text}"
        );
    }
}

/// `--ct-next` states: OVS's spellings (comma or space separated), the
/// match forms with every flag set, and OVS's consistency rules.
#[test]
fn ct_states_read_as_ofproto_trace_takes_them() {
    let cases: &[(&str, Option<u8>)] = &[
        ("trk,new", Some(TRK | NEW)),
        ("new,trk", Some(TRK | NEW)),
        ("trk est", Some(TRK | EST)),
        ("trk, est ,rpl", Some(TRK | EST | RPL)),
        ("+trk+est", Some(TRK | EST)),
        ("trk|rel|dnat", Some(TRK | REL | DNAT)),
        ("trk,snat,est", Some(TRK | SNAT | EST)),
        ("trk,inv", Some(TRK | INV)),
        ("trk", Some(TRK)),
        // An untracked packet: nothing set.
        ("", Some(0)),
        // States no tracker reports.
        ("new", None),
        ("trk,inv,est", None),
        ("trk,new,est", None),
        ("trk,new,rpl", None),
        // Not states.
        ("trk,bogus", None),
        ("+trk-new", None),
        ("0x21", None),
    ];
    for &(text, want) in cases {
        assert_eq!(crate::parse_ct_states(text).ok(), want, "{text:?}");
    }
    let refused = crate::parse_ct_states("trk,new,est")
        .unwrap_err()
        .to_string();
    assert!(refused.contains("new and est"), "{refused}");
}

#[test]
fn ct_states_print_as_ofproto_trace_prints_them() {
    for (state, text) in [
        (TRK | NEW, "new|trk"),
        (TRK | EST | RPL, "est|rpl|trk"),
        (0, "0"),
        (0xff, "new|est|rel|rpl|inv|trk|snat|dnat"),
    ] {
        assert_eq!(crate::ct_states_text(state), text);
        // What it prints reads back, for the states a tracker reports
        // ("0" is how OVS prints none; its --ct-next takes "" for it).
        if state != 0xff && state != 0 {
            assert_eq!(crate::parse_ct_states(text).ok(), Some(state), "{text}");
        }
    }
}
