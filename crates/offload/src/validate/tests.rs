use super::*;
use crate::meta::{F_DATA_VALID, GSO_ECN};
use crate::test_frames::{self, Built, Ip, L4, Spec, built, csum, gso, tcp4, tcp6, udp4, udp6};

/// `b` with its frame cut to `len` bytes.
fn cut(mut b: Built, len: usize) -> Built {
    b.bytes.truncate(len);
    b
}
/// `b` with `byte` at `at` replaced.
fn poke(mut b: Built, at: usize, byte: u8) -> Built {
    b.bytes[at] = byte;
    b
}

/// A generic partial checksum inside any frame of 20 bytes or more.
fn generic(_: &Built) -> OffloadMeta {
    OffloadMeta {
        flags: F_NEEDS_CSUM,
        csum_start: 14,
        csum_offset: 4,
        ..Default::default()
    }
}

/// Where the parse is expected to stop for a frame it only partly knows.
#[derive(Clone, Copy, Debug)]
enum End {
    /// Not IP: at the network header.
    L3,
    /// IP carrying something else: after the IP header.
    L4,
}

#[derive(Clone, Copy, Debug)]
enum Expect {
    /// The layout etherparse built.
    Layout,
    /// Headers up to `End` only.
    Opaque(End),
    Err(OffloadError),
}

struct Case {
    name: &'static str,
    frame: fn() -> Built,
    meta: fn(&Built) -> OffloadMeta,
    expect: Expect,
}

const fn case(
    name: &'static str,
    frame: fn() -> Built,
    meta: fn(&Built) -> OffloadMeta,
    expect: Expect,
) -> Case {
    Case {
        name,
        frame,
        meta,
        expect,
    }
}

use Expect::{Err as E, Layout as L, Opaque as O};
use OffloadError as X;

const CASES: &[Case] = &[
    // Accepted.
    case("tcp4 csum", tcp4, csum, L),
    case("udp4 csum", udp4, csum, L),
    case("tcp6 csum", tcp6, csum, L),
    case("udp6 csum", udp6, csum, L),
    case("nothing to do", tcp4, |_| OffloadMeta::default(), L),
    case(
        "data valid only",
        tcp4,
        |_| OffloadMeta {
            flags: F_DATA_VALID,
            ..Default::default()
        },
        L,
    ),
    case("tso4", tcp4, |b| gso(b, GSO_TCPV4, 1448), L),
    case("tso4 ecn", tcp4, |b| gso(b, GSO_TCPV4 | GSO_ECN, 1448), L),
    case("tso6", tcp6, |b| gso(b, GSO_TCPV6, 1448), L),
    case("uso4", udp4, |b| gso(b, GSO_UDP_L4, 1000), L),
    case("uso6", udp6, |b| gso(b, GSO_UDP_L4, 1000), L),
    case(
        "tso4 in a VLAN",
        || {
            test_frames::build(&Spec {
                vlans: 1,
                payload: 3000,
                ..Default::default()
            })
        },
        |b| gso(b, GSO_TCPV4, 1448),
        L,
    ),
    case(
        "tso6 in QinQ",
        || {
            test_frames::build(&Spec {
                vlans: 2,
                ip: Ip::V6,
                payload: 3000,
                ..Default::default()
            })
        },
        |b| gso(b, GSO_TCPV6, 1448),
        L,
    ),
    case(
        "tso4 with IPv4 options",
        || built(Ip::V4Options, L4::Tcp, 3000),
        |b| gso(b, GSO_TCPV4, 1448),
        L,
    ),
    case(
        "tso4 with TCP options",
        || {
            test_frames::build(&Spec {
                tcp_options: true,
                payload: 3000,
                ..Default::default()
            })
        },
        |b| gso(b, GSO_TCPV4, 1448),
        L,
    ),
    case(
        "gso_size larger than the payload",
        tcp4,
        |b| gso(b, GSO_TCPV4, 9000),
        L,
    ),
    case(
        "gso_size equal to the payload",
        tcp4,
        |b| gso(b, GSO_TCPV4, 3000),
        L,
    ),
    case(
        "tso with no payload",
        || built(Ip::V4, L4::Tcp, 0),
        |b| gso(b, GSO_TCPV4, 1448),
        L,
    ),
    case(
        "hdr_len is only a hint",
        tcp4,
        |b| OffloadMeta {
            hdr_len: 0xffff,
            ..gso(b, GSO_TCPV4, 1448)
        },
        L,
    ),
    case(
        "hdr_len zero (DPDK)",
        tcp4,
        |b| OffloadMeta {
            hdr_len: 0,
            ..gso(b, GSO_TCPV4, 1448)
        },
        L,
    ),
    case(
        "largest segment that fits IPv4",
        || built(Ip::V4, L4::Tcp, 65535 - 40),
        |b| gso(b, GSO_TCPV4, u16::MAX),
        L,
    ),
    case(
        "largest segment that fits IPv6",
        || built(Ip::V6, L4::Tcp, 65535 - 20),
        |b| gso(b, GSO_TCPV6, u16::MAX),
        L,
    ),
    // Generic partial checksums on frames without a TCP/UDP header.
    case(
        "generic csum, not IP",
        || poke(tcp4(), 12, 0x88),
        generic,
        O(End::L3),
    ),
    case(
        "generic csum, IPv4 ICMP",
        || poke(tcp4(), 14 + 9, 1),
        generic,
        O(End::L4),
    ),
    case(
        "generic csum, IPv4 fragment",
        || poke(tcp4(), 14 + 6, 0x20),
        generic,
        O(End::L4),
    ),
    case(
        "generic csum, IPv6 hop-by-hop",
        || poke(tcp6(), 14 + 6, 0),
        generic,
        O(End::L4),
    ),
    case(
        "generic csum, three VLAN tags",
        three_tags,
        generic,
        O(End::L3),
    ),
    // Refused: partial checksum.
    case(
        "csum field past the end",
        tcp4,
        |b| OffloadMeta {
            csum_start: (b.bytes.len() - 1) as u16,
            csum_offset: 0,
            ..csum(b)
        },
        E(X::CsumPastFrame),
    ),
    case(
        "csum_start 0xffff",
        tcp4,
        |b| OffloadMeta {
            csum_start: u16::MAX,
            ..csum(b)
        },
        E(X::CsumPastFrame),
    ),
    case(
        "csum_offset 0xffff",
        tcp4,
        |b| OffloadMeta {
            csum_offset: u16::MAX,
            ..csum(b)
        },
        E(X::CsumPastFrame),
    ),
    case(
        "both 0xffff",
        tcp4,
        |b| OffloadMeta {
            csum_start: u16::MAX,
            csum_offset: u16::MAX,
            ..csum(b)
        },
        E(X::CsumPastFrame),
    ),
    case(
        "generic csum past the end of a non-IP frame",
        || poke(tcp4(), 12, 0x88),
        |b| OffloadMeta {
            csum_start: (b.bytes.len() - 2) as u16,
            csum_offset: 1,
            ..csum(b)
        },
        E(X::CsumPastFrame),
    ),
    case(
        "UDP offset on TCP",
        tcp4,
        |b| OffloadMeta {
            csum_offset: 6,
            ..csum(b)
        },
        E(X::CsumOffsetBad),
    ),
    case(
        "TCP offset on UDP",
        udp6,
        |b| OffloadMeta {
            csum_offset: 16,
            ..csum(b)
        },
        E(X::CsumOffsetBad),
    ),
    case(
        "csum_start at IP",
        tcp4,
        |b| OffloadMeta {
            csum_start: b.l3 as u16,
            ..csum(b)
        },
        E(X::CsumStartBad),
    ),
    case(
        "csum_start in the payload",
        tcp4,
        |b| OffloadMeta {
            csum_start: b.payload as u16,
            ..csum(b)
        },
        E(X::CsumStartBad),
    ),
    // Refused: GSO.
    case(
        "gso_size 0",
        tcp4,
        |b| gso(b, GSO_TCPV4, 0),
        E(X::GsoSizeZero),
    ),
    case(
        "gso without NEEDS_CSUM",
        tcp4,
        |b| OffloadMeta {
            flags: 0,
            ..gso(b, GSO_TCPV4, 1448)
        },
        E(X::GsoWithoutCsum),
    ),
    case(
        "gso with DATA_VALID instead",
        tcp4,
        |b| OffloadMeta {
            flags: F_DATA_VALID,
            ..gso(b, GSO_TCPV4, 1448)
        },
        E(X::GsoWithoutCsum),
    ),
    case(
        "TSO4 on UDP",
        udp4,
        |b| gso(b, GSO_TCPV4, 1448),
        E(X::GsoNotTcp),
    ),
    case(
        "TSO4 on IPv6",
        tcp6,
        |b| gso(b, GSO_TCPV4, 1448),
        E(X::GsoNotTcp),
    ),
    case(
        "TSO6 on IPv4",
        tcp4,
        |b| gso(b, GSO_TCPV6, 1448),
        E(X::GsoNotTcp),
    ),
    case(
        "TSO6 on UDP",
        udp6,
        |b| gso(b, GSO_TCPV6, 1448),
        E(X::GsoNotTcp),
    ),
    case(
        "USO on TCP",
        tcp4,
        |b| gso(b, GSO_UDP_L4, 1448),
        E(X::GsoNotUdp),
    ),
    case(
        "TSO4 on ICMP",
        || poke(tcp4(), 14 + 9, 1),
        |b| gso(b, GSO_TCPV4, 1448),
        E(X::GsoNotTcp),
    ),
    case(
        "USO on IPv6 ICMPv6",
        || poke(udp6(), 14 + 6, 58),
        |b| gso(b, GSO_UDP_L4, 1448),
        E(X::GsoNotUdp),
    ),
    case("UFO", udp4, |b| gso(b, GSO_UDP, 1448), E(X::UfoUnsupported)),
    case(
        "gso type 2",
        tcp4,
        |b| gso(b, 2, 1448),
        E(X::UnknownGsoType),
    ),
    case(
        "gso type 0x7f",
        tcp4,
        |b| gso(b, 0x7f, 1448),
        E(X::UnknownGsoType),
    ),
    case(
        "TSO on ARP",
        || poke(tcp4(), 13, 0x06),
        |b| gso(b, GSO_TCPV4, 1448),
        E(X::NotIp),
    ),
    case(
        "TSO on an IPv4 fragment (MF)",
        || poke(tcp4(), 14 + 6, 0x20),
        |b| gso(b, GSO_TCPV4, 1448),
        E(X::IpFragment),
    ),
    case(
        "TSO on an IPv4 fragment (offset)",
        || poke(tcp4(), 14 + 7, 0x01),
        |b| gso(b, GSO_TCPV4, 1448),
        E(X::IpFragment),
    ),
    case(
        "TSO6 with a hop-by-hop header",
        || poke(tcp6(), 14 + 6, 0),
        |b| gso(b, GSO_TCPV6, 1448),
        E(X::Ipv6ExtHeaders),
    ),
    case(
        "USO with an IPv6 fragment header",
        || poke(udp6(), 14 + 6, 44),
        |b| gso(b, GSO_UDP_L4, 1448),
        E(X::Ipv6ExtHeaders),
    ),
    case(
        "segment over 64 KiB",
        || oversized(Ip::V4),
        |b| gso(b, GSO_TCPV4, u16::MAX),
        E(X::SegmentTooLong),
    ),
    case(
        "segment over 64 KiB, IPv6",
        || oversized(Ip::V6),
        |b| gso(b, GSO_TCPV6, u16::MAX),
        E(X::SegmentTooLong),
    ),
    case(
        "oversized frame, small segments",
        || oversized(Ip::V4),
        |b| gso(b, GSO_TCPV4, 1448),
        L,
    ),
    // Refused: headers.
    case(
        "cut inside Ethernet",
        || cut(tcp4(), 10),
        csum,
        E(X::Truncated),
    ),
    case("cut inside the VLAN tag", vlan_cut, csum, E(X::Truncated)),
    case(
        "cut inside IPv4",
        || cut(tcp4(), 14 + 19),
        csum,
        E(X::Truncated),
    ),
    case(
        "cut inside IPv4 options",
        || cut(built(Ip::V4Options, L4::Tcp, 0), 14 + 25),
        csum,
        E(X::Truncated),
    ),
    case(
        "cut inside IPv6",
        || cut(tcp6(), 14 + 39),
        csum,
        E(X::Truncated),
    ),
    case(
        "cut inside TCP",
        || cut(tcp4(), 14 + 20 + 19),
        csum,
        E(X::Truncated),
    ),
    case(
        "cut inside TCP options",
        || {
            cut(
                test_frames::build(&Spec {
                    tcp_options: true,
                    ..Default::default()
                }),
                14 + 20 + 25,
            )
        },
        csum,
        E(X::Truncated),
    ),
    case(
        "cut inside UDP",
        || cut(udp6(), 14 + 40 + 7),
        csum,
        E(X::Truncated),
    ),
    case(
        "cut inside TCP, nothing asked",
        || cut(tcp4(), 14 + 20 + 19),
        |_| OffloadMeta::default(),
        E(X::Truncated),
    ),
    case(
        "IPv4 IHL 4",
        || poke(tcp4(), 14, 0x44),
        csum,
        E(X::IpHeaderBad),
    ),
    case(
        "IPv4 version 6",
        || poke(tcp4(), 14, 0x65),
        csum,
        E(X::IpHeaderBad),
    ),
    case(
        "IPv6 version 4",
        || poke(tcp6(), 14, 0x40),
        csum,
        E(X::IpHeaderBad),
    ),
    case(
        "TCP data offset 4",
        || poke(tcp4(), 14 + 20 + 12, 0x40),
        csum,
        E(X::TcpHeaderBad),
    ),
    case(
        "IHL past the frame",
        || cut(poke(tcp4(), 14, 0x4f), 14 + 40),
        csum,
        E(X::Truncated),
    ),
];

/// Three stacked tags: the walk stops at the third TPID, which is not IP.
fn three_tags() -> Built {
    let mut b = test_frames::build(&Spec {
        vlans: 2,
        payload: 100,
        ..Default::default()
    });
    let inner = b.bytes.split_off(12);
    b.bytes.extend_from_slice(&[0x81, 0x00, 0x00, 0x07]);
    b.bytes.extend_from_slice(&inner);
    b.l3 = 22;
    b
}

/// A frame whose single VLAN tag is cut short.
fn vlan_cut() -> Built {
    cut(
        test_frames::build(&Spec {
            vlans: 1,
            ..Default::default()
        }),
        16,
    )
}

/// TCP with more payload than one IP packet holds (as a hostile guest may
/// send: the IP length fields are not trusted).
fn oversized(ip: Ip) -> Built {
    let mut b = built(ip, L4::Tcp, 40_000);
    b.bytes
        .extend_from_slice(&test_frames::payload_bytes(30_000));
    b
}

#[test]
fn hostile_headers_table() {
    for c in CASES {
        let b = (c.frame)();
        let meta = (c.meta)(&b);
        let got = validate(&meta, &b.bytes);
        let ipv6 = b.spec.ip == Ip::V6;
        let want = match c.expect {
            Expect::Layout => Ok(Layout {
                l3: b.l3,
                l4: b.l4,
                payload: b.payload,
                ipv6,
                tcp: b.spec.l4 == L4::Tcp,
            }),
            Expect::Opaque(end) => {
                let (end, ipv6) = match end {
                    End::L3 => (b.l3, false),
                    End::L4 => (b.l4, ipv6),
                };
                Ok(Layout {
                    l3: b.l3,
                    l4: end,
                    payload: end,
                    ipv6,
                    tcp: false,
                })
            }
            Expect::Err(e) => Err(e),
        };
        assert_eq!(got, want, "{}: {meta:?}", c.name);
        if let Ok(l) = got {
            assert_eq!(l.has_l4(), matches!(c.expect, Expect::Layout), "{}", c.name);
        }
    }
}

#[test]
fn every_truncation_of_every_frame_is_refused_or_bounded() {
    let frames = [
        test_frames::build(&Spec {
            vlans: 2,
            ip: Ip::V4Options,
            tcp_options: true,
            payload: 40,
            ..Default::default()
        }),
        test_frames::build(&Spec {
            vlans: 1,
            ip: Ip::V6,
            l4: L4::Udp,
            payload: 40,
            ..Default::default()
        }),
    ];
    for b in &frames {
        let kind = if b.spec.l4 == L4::Tcp {
            GSO_TCPV4
        } else {
            GSO_UDP_L4
        };
        let meta = gso(b, kind, 16);
        for len in 0..=b.bytes.len() {
            let f = &b.bytes[..len];
            match validate(&meta, f) {
                Ok(l) => {
                    assert!(len >= b.payload, "accepted a frame cut at {len}");
                    assert_eq!(l.payload, b.payload);
                }
                Err(e) => {
                    assert!(len < b.payload, "refused a whole frame of {len}: {e}");
                    assert_eq!(e, X::Truncated, "len {len}");
                }
            }
        }
    }
}
