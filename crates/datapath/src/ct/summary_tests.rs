//! Frames built by etherparse → the summary the tracker gets, one row per
//! shape: each family and protocol, options, padding, VLAN tags, ICMP
//! errors quoting each protocol, and what cannot be tracked.

use super::*;
use etherparse::{PacketBuilder, TcpOptionElement};
use nfv_conntrack::key::proto;

const A4: [u8; 4] = [10, 0, 0, 1];
const B4: [u8; 4] = [192, 0, 2, 7];
const A6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const B6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
const ZONE: u16 = 9;

macro_rules! build {
    ($b:expr, $payload:expr) => {{
        let b = $b;
        let payload: &[u8] = $payload;
        let mut v = Vec::with_capacity(b.size(payload.len()));
        b.write(&mut v, payload).unwrap();
        v
    }};
}

fn eth() -> etherparse::PacketBuilderStep<etherparse::Ethernet2Header> {
    PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
}

fn a4() -> u128 {
    u128::from(u32::from_be_bytes(A4))
}
fn b4() -> u128 {
    u128::from(u32::from_be_bytes(B4))
}
fn a6() -> u128 {
    u128::from_be_bytes(A6)
}
fn b6() -> u128 {
    u128::from_be_bytes(B6)
}

fn syn_with_options() -> Vec<u8> {
    let b = eth()
        .ipv4(A4, B4, 64)
        .tcp(40000, 80, 1000, 65535)
        .syn()
        .options(&[
            TcpOptionElement::MaximumSegmentSize(1460),
            TcpOptionElement::Noop,
            TcpOptionElement::WindowScale(7),
        ])
        .unwrap();
    build!(b, &[])
}

/// A 64-byte frame: a 10-byte UDP payload and Ethernet padding after it
/// that the lengths must not count.
fn padded_tcp_ack() -> Vec<u8> {
    let mut f = build!(
        eth().ipv4(A4, B4, 64).tcp(40000, 80, 5, 512).ack(77),
        &[1, 2, 3]
    );
    f.resize(64, 0xee);
    f
}

fn udp4() -> Vec<u8> {
    build!(eth().ipv4(A4, B4, 64).udp(5000, 53), &[0; 10])
}

fn tagged_udp4() -> Vec<u8> {
    build!(
        eth()
            .single_vlan(etherparse::VlanId::try_new(7).unwrap())
            .ipv4(A4, B4, 64)
            .udp(5000, 53),
        &[0; 10]
    )
}

fn echo4() -> Vec<u8> {
    build!(
        eth().ipv4(A4, B4, 64).icmpv4_echo_request(0x1234, 1),
        &[9; 8]
    )
}

/// Port unreachable from B about A's UDP datagram to it: the quote is the
/// datagram's IP header and first eight bytes.
fn port_unreachable4() -> Vec<u8> {
    let quoted = &udp4()[14..14 + 28];
    build!(eth().ipv4(B4, A4, 64).icmpv4_raw(3, 3, [0; 4]), quoted)
}

fn gre4() -> Vec<u8> {
    let mut f = udp4();
    f[14 + 9] = 47;
    refresh_ipv4_checksum(&mut f);
    f
}

fn refresh_ipv4_checksum(f: &mut [u8]) {
    f[24] = 0;
    f[25] = 0;
    let sum = nfv_wire::checksum::data(&f[14..34]);
    f[24..26].copy_from_slice(&(!sum).to_be_bytes());
}

fn tcp6() -> Vec<u8> {
    build!(
        eth().ipv6(A6, B6, 64).tcp(40000, 443, 9, 1024).ack(3).psh(),
        &[0xa5; 60]
    )
}

/// `tcp6()` with an 8-byte hop-by-hop header in front of TCP.
fn tcp6_behind_hop_by_hop() -> Vec<u8> {
    let f = tcp6();
    let l3 = 14;
    let mut out = f[..l3 + 40].to_vec();
    out[l3 + 6] = 0;
    let plen = u16::from_be_bytes([out[l3 + 4], out[l3 + 5]]) + 8;
    out[l3 + 4..l3 + 6].copy_from_slice(&plen.to_be_bytes());
    out.extend_from_slice(&[6, 0, 1, 4, 0, 0, 0, 0]);
    out.extend_from_slice(&f[l3 + 40..]);
    out
}

fn echo6() -> Vec<u8> {
    build!(eth().ipv6(A6, B6, 64).icmpv6_echo_request(0x77, 2), &[1; 4])
}

/// Packet too big from B about A's TCP segment (the quote: the whole
/// segment's first 48 bytes).
fn too_big6() -> Vec<u8> {
    let quoted = &tcp6()[14..14 + 48];
    build!(
        eth().ipv6(B6, A6, 64).icmpv6_raw(2, 0, [0, 0, 5, 0xdc]),
        quoted
    )
}

fn fragment4() -> Vec<u8> {
    let mut f = udp4();
    f[14 + 6] = 0x20; // more fragments
    refresh_ipv4_checksum(&mut f);
    f
}

fn bad_checksum4() -> Vec<u8> {
    let mut f = udp4();
    f[24] ^= 0xff;
    f
}

fn truncated_tcp4() -> Vec<u8> {
    let mut f = padded_tcp_ack();
    // Claim a 40-byte TCP header in a 23-byte segment.
    f[14 + 20 + 12] = 10 << 4;
    f
}

fn lying_total_length4() -> Vec<u8> {
    let mut f = udp4();
    let len = u16::from_be_bytes([f[16], f[17]]) + 100;
    f[16..18].copy_from_slice(&len.to_be_bytes());
    refresh_ipv4_checksum(&mut f);
    f
}

fn arp() -> Vec<u8> {
    let mut f = vec![0u8; 42];
    f[12] = 0x08;
    f[13] = 0x06;
    f
}

fn tcp(sport: u16, dport: u16, seg: TcpSegment, v6: bool) -> PacketSummary {
    let (family, src, dst) = if v6 {
        (Family::V6, a6(), b6())
    } else {
        (Family::V4, a4(), b4())
    };
    PacketSummary::tcp(
        ConnKey::new(ZONE, family, proto::TCP, src, dst, sport, dport),
        seg,
    )
}

/// The summary and the offsets of the IP and transport headers, or why not.
type Want = Result<(PacketSummary, usize, usize), Untrackable>;

#[test]
fn frames_summarise_as_the_tracker_expects() {
    let cases: Vec<(&str, Vec<u8>, Want)> = vec![
        (
            "SYN with MSS, NOP, window scale 7",
            syn_with_options(),
            Ok((
                tcp(
                    40000,
                    80,
                    TcpSegment {
                        flags: TcpFlags(TcpFlags::SYN),
                        seq: 1000,
                        ack: 0,
                        window: 65535,
                        wscale: Some(7),
                        payload_len: 0,
                    },
                    false,
                ),
                14,
                34,
            )),
        ),
        (
            "ACK padded to 64 bytes: three payload bytes, not the padding",
            padded_tcp_ack(),
            Ok((
                tcp(
                    40000,
                    80,
                    TcpSegment {
                        flags: TcpFlags(TcpFlags::ACK),
                        seq: 5,
                        ack: 77,
                        window: 512,
                        wscale: None,
                        payload_len: 3,
                    },
                    false,
                ),
                14,
                34,
            )),
        ),
        (
            "UDP",
            udp4(),
            Ok((
                PacketSummary::other(ConnKey::new(
                    ZONE,
                    Family::V4,
                    proto::UDP,
                    a4(),
                    b4(),
                    5000,
                    53,
                )),
                14,
                34,
            )),
        ),
        (
            "UDP behind a VLAN tag",
            tagged_udp4(),
            Ok((
                PacketSummary::other(ConnKey::new(
                    ZONE,
                    Family::V4,
                    proto::UDP,
                    a4(),
                    b4(),
                    5000,
                    53,
                )),
                18,
                38,
            )),
        ),
        (
            "GRE: addresses only",
            gre4(),
            Ok((
                PacketSummary::other(ConnKey::new(ZONE, Family::V4, 47, a4(), b4(), 0, 0)),
                14,
                34,
            )),
        ),
        (
            "ICMP echo request",
            echo4(),
            Ok((
                PacketSummary::icmp_query(ZONE, Family::V4, a4(), b4(), 0x1234, 8),
                14,
                34,
            )),
        ),
        (
            "ICMP port unreachable quoting UDP",
            port_unreachable4(),
            Ok((
                PacketSummary::icmp_error(
                    ZONE,
                    Family::V4,
                    b4(),
                    a4(),
                    3,
                    3,
                    ConnKey::new(ZONE, Family::V4, proto::UDP, a4(), b4(), 5000, 53),
                ),
                14,
                34,
            )),
        ),
        (
            "IPv6 TCP",
            tcp6(),
            Ok((
                tcp(
                    40000,
                    443,
                    TcpSegment {
                        flags: TcpFlags(TcpFlags::ACK | TcpFlags::PSH),
                        seq: 9,
                        ack: 3,
                        window: 1024,
                        wscale: None,
                        payload_len: 60,
                    },
                    true,
                ),
                14,
                54,
            )),
        ),
        (
            "IPv6 TCP behind a hop-by-hop header",
            tcp6_behind_hop_by_hop(),
            Ok((
                tcp(
                    40000,
                    443,
                    TcpSegment {
                        flags: TcpFlags(TcpFlags::ACK | TcpFlags::PSH),
                        seq: 9,
                        ack: 3,
                        window: 1024,
                        wscale: None,
                        payload_len: 60,
                    },
                    true,
                ),
                14,
                62,
            )),
        ),
        (
            "ICMPv6 echo request",
            echo6(),
            Ok((
                PacketSummary::icmp_query(ZONE, Family::V6, a6(), b6(), 0x77, 128),
                14,
                54,
            )),
        ),
        (
            "ICMPv6 packet too big quoting TCP",
            too_big6(),
            Ok((
                PacketSummary::icmp_error(
                    ZONE,
                    Family::V6,
                    b6(),
                    a6(),
                    2,
                    0,
                    ConnKey::new(ZONE, Family::V6, proto::TCP, a6(), b6(), 40000, 443),
                ),
                14,
                54,
            )),
        ),
        ("ARP", arp(), Err(Untrackable::NotIp)),
        (
            "IPv4 first fragment",
            fragment4(),
            Err(Untrackable::Fragment),
        ),
        (
            "IPv4 header checksum wrong",
            bad_checksum4(),
            Err(Untrackable::Malformed),
        ),
        (
            "TCP header longer than the segment",
            truncated_tcp4(),
            Err(Untrackable::Malformed),
        ),
        (
            "IPv4 total length past the frame",
            lying_total_length4(),
            Err(Untrackable::Malformed),
        ),
        ("runt", vec![0u8; 10], Err(Untrackable::Malformed)),
    ];
    for (name, frame, want) in cases {
        let got = summarise(&frame, ZONE).map(|p| (p.summary, p.l3, p.l4));
        assert_eq!(got, want, "{name}");
    }
}

/// Every prefix of every frame above parses or is refused, never panics.
#[test]
fn every_truncation_is_refused_or_parsed_without_panic() {
    for frame in [
        syn_with_options(),
        padded_tcp_ack(),
        port_unreachable4(),
        too_big6(),
        tcp6_behind_hop_by_hop(),
        echo6(),
    ] {
        for n in 0..=frame.len() {
            let _ = summarise(&frame[..n], 0);
        }
    }
}

#[test]
fn window_scale_walks_the_options() {
    let cases: [(&[u8], Option<u8>); 6] = [
        (&[3, 3, 9], Some(9)),
        (&[1, 1, 3, 3, 14], Some(14)),
        (&[2, 4, 5, 0xb4, 3, 3, 2], Some(2)),
        (&[0, 3, 3, 9], None),
        (&[2, 0, 3, 3, 9], None),
        (&[2, 40, 3, 3, 9], None),
    ];
    for (opts, want) in cases {
        assert_eq!(window_scale(opts), want, "{opts:?}");
    }
}

/// The shortcut for plain IPv4 answers as the general walk does: every
/// frame above, every prefix of it, and every single-byte change to its
/// first 64 bytes (flags, lengths, checksums, protocols, EtherTypes).
#[test]
fn the_plain_ipv4_shortcut_agrees_with_the_walk() {
    let frames = [
        syn_with_options(),
        padded_tcp_ack(),
        udp4(),
        tagged_udp4(),
        echo4(),
        port_unreachable4(),
        gre4(),
        fragment4(),
        bad_checksum4(),
        truncated_tcp4(),
        lying_total_length4(),
        tcp6(),
        arp(),
    ];
    let mut shortcut_taken = 0;
    for frame in frames {
        let mut variants: Vec<Vec<u8>> = (0..=frame.len()).map(|n| frame[..n].to_vec()).collect();
        for at in 0..frame.len().min(64) {
            for flip in [0x01u8, 0x10, 0x80, 0xff] {
                let mut v = frame.clone();
                v[at] ^= flip;
                variants.push(v);
            }
        }
        for v in variants {
            let walked = summarise_walked(&v, ZONE);
            shortcut_taken += usize::from(plain_ipv4(&v, ZONE).is_some());
            assert_eq!(summarise(&v, ZONE), walked, "{v:02x?}");
            if let Some(p) = plain_ipv4(&v, ZONE) {
                assert_eq!(Ok(p), walked, "{v:02x?}");
            }
        }
    }
    assert!(
        shortcut_taken > 100,
        "the shortcut answered {shortcut_taken}"
    );
}
