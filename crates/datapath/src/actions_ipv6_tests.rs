//! The IPv6 rewrites against etherparse: after every edit the TCP, UDP or
//! ICMPv6 checksum verifies when computed from scratch over the new
//! pseudo-header, the field holds its new value, and no byte outside the
//! field and the L4 checksum moved — also behind an extension header.

use super::ip_tests::pool;
use super::*;
use etherparse::{PacketBuilder, SlicedPacket, TransportSlice};

const SRC: [u8; 16] = [0xfd, 0x77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const DST: [u8; 16] = [0xfd, 0x77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
const NEW: [u8; 16] = [
    0x20, 0x01, 0x0d, 0xb8, 0xff, 0, 0, 0, 0, 0, 0, 0, 0xab, 0xcd, 0, 9,
];

/// Writes a finished etherparse builder and its payload into a frame.
macro_rules! build {
    ($b:expr, $payload:expr $(,)?) => {{
        let b = $b;
        let payload: &[u8] = $payload;
        let mut v = Vec::with_capacity(b.size(payload.len()));
        b.write(&mut v, payload).unwrap();
        v
    }};
}

fn ip6() -> etherparse::PacketBuilderStep<etherparse::IpHeaders> {
    PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]).ipv6(SRC, DST, 64)
}

fn tcp6() -> Vec<u8> {
    build!(ip6().tcp(40000, 80, 7, 1024).syn(), &[0xa5; 60])
}

fn udp6() -> Vec<u8> {
    build!(ip6().udp(5000, 53), &[0x5a; 33])
}

fn icmp6() -> Vec<u8> {
    build!(ip6().icmpv6_echo_request(1, 2), &[1, 2, 3, 4, 5])
}

/// `tcp6()` with an 8-byte hop-by-hop header in front of TCP.
fn tcp6_behind_hop_by_hop() -> Vec<u8> {
    let f = tcp6();
    let l3 = 14;
    let mut out = f[..l3 + 40].to_vec();
    out[l3 + 6] = 0; // next header: hop-by-hop
    let plen = u16::from_be_bytes([out[l3 + 4], out[l3 + 5]]) + 8;
    out[l3 + 4..l3 + 6].copy_from_slice(&plen.to_be_bytes());
    out.extend_from_slice(&[6, 0, 1, 4, 0, 0, 0, 0]); // next TCP, len 0, PadN
    out.extend_from_slice(&f[l3 + 40..]);
    out
}

/// Every checksum of an IPv6 frame verifies from scratch.
fn checksums_verify(f: &[u8]) -> bool {
    let p = SlicedPacket::from_ethernet(f).unwrap();
    let Some(etherparse::NetSlice::Ipv6(ip)) = &p.net else {
        panic!("not IPv6");
    };
    let h = ip.header().to_header();
    match &p.transport {
        Some(TransportSlice::Udp(u)) => {
            u.to_header().calc_checksum_ipv6(&h, u.payload()).unwrap() == u.checksum()
        }
        Some(TransportSlice::Tcp(t)) => {
            t.to_header().calc_checksum_ipv6(&h, t.payload()).unwrap() == t.checksum()
        }
        Some(TransportSlice::Icmpv6(i)) => {
            i.header()
                .icmp_type
                .calc_checksum(h.source, h.destination, i.payload())
                .unwrap()
                == i.checksum()
        }
        _ => panic!("no transport header"),
    }
}

type Edit = fn(&mut Packet) -> Result<(), DropReason>;
/// (name, frame, edit, (offset from the IPv6 header, new bytes), whether
/// the L4 checksum may move)
type Case = (&'static str, Vec<u8>, Edit, (usize, Vec<u8>), bool);

/// One edit on a copy of `input` (the IPv4 tests' pool and runner).
fn run(input: &[u8], edit: Edit) -> Result<Vec<u8>, DropReason> {
    let pool = pool();
    let mut cache = pool.cache();
    super::ip_tests::run(&mut cache, input, edit)
}

/// Offset of the L4 checksum field in each frame above (TCP behind the
/// 8-byte hop-by-hop header, or right after the fixed header).
fn l4_csum(f: &[u8]) -> usize {
    let (next, l4) = match f[14 + 6] {
        0 => (f[14 + 40], 14 + 48),
        n => (n, 14 + 40),
    };
    l4 + match next {
        17 => 6,
        58 => 2,
        _ => 16,
    }
}

#[test]
fn ipv6_rewrites_keep_the_l4_checksum_valid_and_touch_nothing_else() {
    let cases: Vec<Case> = vec![
        (
            "tcp ipv6_src",
            tcp6(),
            |p| set_ipv6_addr(p, true, NEW),
            (8, NEW.to_vec()),
            true,
        ),
        (
            "udp ipv6_dst",
            udp6(),
            |p| set_ipv6_addr(p, false, NEW),
            (24, NEW.to_vec()),
            true,
        ),
        (
            "icmpv6 ipv6_dst",
            icmp6(),
            |p| set_ipv6_addr(p, false, NEW),
            (24, NEW.to_vec()),
            true,
        ),
        (
            "tcp behind hop-by-hop ipv6_dst",
            tcp6_behind_hop_by_hop(),
            |p| set_ipv6_addr(p, false, NEW),
            (24, NEW.to_vec()),
            true,
        ),
        (
            "tcp6 mod_tp_dst",
            tcp6(),
            |p| set_tp_port(p, false, 8080),
            (42, 8080u16.to_be_bytes().to_vec()),
            true,
        ),
        (
            "tcp6 behind hop-by-hop mod_tp_src",
            tcp6_behind_hop_by_hop(),
            |p| set_tp_port(p, true, 22),
            (48, 22u16.to_be_bytes().to_vec()),
            true,
        ),
        (
            "udp6 mod_tp_src",
            udp6(),
            |p| set_tp_port(p, true, 1234),
            (40, 1234u16.to_be_bytes().to_vec()),
            true,
        ),
        // Traffic class 0xb8 (DSCP 46): version 6, TC in the next byte's halves.
        (
            "mod_nw_tos",
            tcp6(),
            |p| set_nw_tos(p, 0xb8),
            (0, vec![0x6b, 0x80]),
            false,
        ),
        (
            "mod_nw_ecn",
            udp6(),
            |p| set_nw_ecn(p, 3),
            (0, vec![0x60, 0x30]),
            false,
        ),
        (
            "mod_nw_ttl",
            udp6(),
            |p| set_nw_ttl(p, 9),
            (7, vec![9]),
            false,
        ),
        ("dec_ttl", tcp6(), dec_ttl, (7, vec![63]), false),
        (
            "ipv6_label",
            tcp6(),
            |p| set_ipv6_label(p, 0xabcde),
            (1, vec![0x0a, 0xbc, 0xde]),
            false,
        ),
    ];
    for (name, input, edit, (at, want), l4_moves) in cases {
        assert!(checksums_verify(&input), "{name}: the input verifies");
        let out = run(&input, edit).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        let ip = 14;
        assert_eq!(
            &out[ip + at..ip + at + want.len()],
            &want[..],
            "{name}: the field"
        );
        assert!(
            checksums_verify(&out),
            "{name}: the checksum verifies after"
        );
        let csum = l4_csum(&input);
        for (i, (a, b)) in input.iter().zip(&out).enumerate() {
            let allowed = (ip + at..ip + at + want.len()).contains(&i)
                || (l4_moves && (csum..csum + 2).contains(&i));
            assert!(a == b || allowed, "{name}: byte {i} changed");
        }
    }
}

#[test]
fn hop_limit_one_is_a_ttl_expired_drop_and_ipv4_edits_leave_ipv6_alone() {
    let mut f = udp6();
    f[14 + 7] = 1;
    assert_eq!(run(&f, dec_ttl), Err(DropReason::TtlExpired));
    f[14 + 7] = 0;
    assert_eq!(run(&f, dec_ttl), Err(DropReason::TtlExpired));
    let f = tcp6();
    assert_eq!(run(&f, |p| set_nw_addr(p, true, 0x0a00_0001)).unwrap(), f);
    // And the IPv6 rewrites leave an IPv4 frame alone.
    let v4 = build!(
        PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .udp(1, 2),
        &[0; 8],
    );
    assert_eq!(run(&v4, |p| set_ipv6_addr(p, false, NEW)).unwrap(), v4);
    assert_eq!(run(&v4, |p| set_ipv6_label(p, 1)).unwrap(), v4);
}

#[test]
fn an_offloaded_partial_checksum_follows_the_ipv6_address() {
    let full = tcp6();
    let l4 = 14 + 40;
    let pseudo = |f: &[u8]| {
        let p = nfv_wire::Ipv6Packet::new_unchecked(&f[14..]);
        nfv_wire::checksum::pseudo_header_v6(
            p.src_u128(),
            p.dst_u128(),
            IpProtocol::TCP,
            (f.len() - l4) as u32,
        )
    };
    let mut partial = full.clone();
    let p0 = pseudo(&partial);
    partial[l4 + 16..l4 + 18].copy_from_slice(&p0.to_be_bytes());
    let pool = pool();
    let mut cache = pool.cache();
    let mut p = cache.alloc().unwrap();
    p.set_len(partial.len()).unwrap();
    p.data_mut().copy_from_slice(&partial);
    let meta = nfv_offload::OffloadMeta {
        flags: nfv_offload::F_NEEDS_CSUM,
        csum_start: l4 as u16,
        csum_offset: 16,
        ..Default::default()
    };
    assert!(p.set_offload(meta.to_virtio_hdr()));
    set_ipv6_addr(&mut p, false, NEW).unwrap();
    let mut out = p.data().to_vec();
    cache.free(p);
    assert_eq!(
        u16::from_be_bytes([out[l4 + 16], out[l4 + 17]]),
        pseudo(&out),
        "the field still holds the pseudo-header sum of the new addresses"
    );
    nfv_offload::checksum::complete_checksum(&mut out, l4, 16);
    assert!(checksums_verify(&out), "completed, it verifies");
}
