//! UDP/other and ICMP pseudo-connections, and ICMP errors related to a
//! tracked connection.

mod support;

use nfv_conntrack::key::proto;
use nfv_conntrack::{ConnKey, Family, IcmpState, OtherState, PacketSummary, ProtoState};
use support::*;

#[test]
fn udp_new_until_answered_then_established() {
    let mut t = tracker();
    let key = udp_key(0, 5353);
    let back = PacketSummary::other(key.reversed().unwrap());
    let out = PacketSummary::other(key);
    let steps = [
        (out, NEW, OtherState::First),
        (out, NEW, OtherState::Multiple),
        (back, EST | RPL, OtherState::Bidir),
        (out, EST, OtherState::Bidir),
    ];
    for (i, (pkt, want, state)) in steps.into_iter().enumerate() {
        let v = track_commit(&mut t, &pkt, i as u64 * 1000);
        assert_eq!(bits(&v), want, "step {i}");
        assert_eq!(only_conn(&t).proto, ProtoState::Other(state), "step {i}");
        assert_eq!(
            v.orig,
            Some(key),
            "step {i}: ct_nw_src/… come from the original tuple"
        );
    }
}

/// OVS's userspace datapath (the default): once committed, a
/// connection's packets are `+est` in both directions, before any answer;
/// Linux's rule (the tables here) keeps them `+new` until one.
#[test]
fn established_on_commit_or_on_reply() {
    use nfv_conntrack::{Config, Established, Tracker};
    let key = udp_key(0, 5353);
    let out = PacketSummary::other(key);
    let back = PacketSummary::other(key.reversed().unwrap());
    for (established, second, answer) in [
        (Established::OnCommit, EST, EST | RPL),
        (Established::OnReply, NEW, EST | RPL),
    ] {
        let mut t = Tracker::new(Config {
            established,
            ..Config::default()
        })
        .unwrap();
        assert_eq!(bits(&track_commit(&mut t, &out, 0)), NEW, "{established:?}");
        assert_eq!(bits(&t.process(&out, 1)), second, "{established:?}");
        assert_eq!(bits(&t.process(&back, 2)), answer, "{established:?}");
        assert_eq!(bits(&t.process(&out, 3)), EST, "{established:?}");
    }
}

#[test]
fn other_protocols_and_ipv6_use_the_same_machine() {
    let keys = [
        ConnKey::new(0, Family::V4, 47, A, B, 0, 0),
        ConnKey::new(0, Family::V6, proto::UDP, A6, B6, 1000, 2000),
    ];
    for key in keys {
        let mut t = tracker();
        assert_eq!(
            bits(&track_commit(&mut t, &PacketSummary::other(key), 0)),
            NEW,
            "{key:?}"
        );
        let back = PacketSummary::other(key.reversed().unwrap());
        assert_eq!(bits(&t.process(&back, 1)), EST | RPL, "{key:?}");
    }
}

fn echo(family: Family, reply: bool, id: u16) -> PacketSummary {
    let (a, b) = if family == Family::V4 {
        (A, B)
    } else {
        (A6, B6)
    };
    let (req, rep) = if family == Family::V4 {
        (8, 0)
    } else {
        (128, 129)
    };
    if reply {
        PacketSummary::icmp_query(0, family, b, a, id, rep)
    } else {
        PacketSummary::icmp_query(0, family, a, b, id, req)
    }
}

#[test]
fn icmp_echo_request_and_reply() {
    for family in [Family::V4, Family::V6] {
        let mut t = tracker();
        let steps = [
            (echo(family, false, 7), NEW, IcmpState::Request),
            (echo(family, true, 7), EST | RPL, IcmpState::Replied),
            (echo(family, false, 7), EST, IcmpState::Replied),
        ];
        for (i, (pkt, want, state)) in steps.into_iter().enumerate() {
            assert_eq!(
                bits(&track_commit(&mut t, &pkt, 0)),
                want,
                "{family:?} step {i}"
            );
            assert_eq!(
                only_conn(&t).proto,
                ProtoState::Icmp(state),
                "{family:?} step {i}"
            );
        }
        let other_id = echo(family, true, 8);
        assert_eq!(
            bits(&t.process(&other_id, 0)),
            INV,
            "{family:?}: reply to another id"
        );
    }
}

#[test]
fn icmp_messages_that_open_nothing() {
    let cases = [
        ("echo reply with no request", echo(Family::V4, true, 1)),
        (
            "router solicitation",
            PacketSummary::icmp_query(0, Family::V6, A6, B6, 0, 133),
        ),
        ("redirect without a quote", {
            let mut p = PacketSummary::icmp_query(0, Family::V4, A, B, 0, 5);
            p.l4 = nfv_conntrack::L4::Icmp {
                ty: 5,
                code: 0,
                inner: None,
            };
            p
        }),
    ];
    for (name, pkt) in cases {
        let mut t = tracker();
        let v = t.process(&pkt, 0);
        assert_eq!(bits(&v), INV, "{name}");
        let refused = Err(nfv_conntrack::CommitError::NotCommittable);
        assert_eq!(t.commit(&pkt, &v, 0), refused, "{name}");
    }
}

/// A TCP connection A→B, established, in zone 0.
fn established_tcp() -> nfv_conntrack::Tracker {
    let mut t = tracker();
    let key = tcp_key(0);
    let steps = [
        (false, seg(SYN, 100, 0, 0)),
        (true, seg(SYN | ACK, 900, 101, 0)),
        (false, seg(ACK, 101, 901, 0)),
    ];
    for (reply, s) in steps {
        track_commit(&mut t, &tcp(key, reply, s), 0);
    }
    t
}

#[test]
fn icmp_errors_related_to_a_connection() {
    const ROUTER: u128 = 0x0a00_00fe;
    let key = tcp_key(0);
    let reverse = key.reversed().unwrap();
    let other_conn = ConnKey { src_port: 1, ..key };
    let cases = [
        // A's packet to B could not be delivered; the error goes back to A.
        (
            "unreachable quoting A→B",
            PacketSummary::icmp_error(0, Family::V4, ROUTER, A, 3, 1, key),
            REL | RPL,
        ),
        (
            "time exceeded quoting B→A",
            PacketSummary::icmp_error(0, Family::V4, ROUTER, B, 11, 0, reverse),
            REL,
        ),
        (
            "quoting an unknown flow",
            PacketSummary::icmp_error(0, Family::V4, ROUTER, A, 3, 1, other_conn),
            INV,
        ),
        (
            "quoting another zone",
            PacketSummary::icmp_error(0, Family::V4, ROUTER, A, 3, 1, tcp_key(9)),
            INV,
        ),
        (
            "quoting an ICMP error",
            PacketSummary::icmp_error(
                0,
                Family::V4,
                ROUTER,
                A,
                3,
                1,
                ConnKey::icmp(0, Family::V4, A, B, 0, 3, 1),
            ),
            INV,
        ),
    ];
    for (name, pkt, want) in cases {
        let mut t = established_tcp();
        t.set_mark(only_conn(&t).id, 0x42);
        let v = t.process(&pkt, 1);
        assert_eq!(bits(&v), want, "{name}");
        if want & REL != 0 {
            assert_eq!(
                (v.mark, v.orig),
                (0x42, Some(key)),
                "{name}: fields of the parent"
            );
            assert_eq!(
                t.commit(&pkt, &v, 1),
                Ok(only_conn(&t).id),
                "{name}: commit is the parent"
            );
        }
        assert_eq!(t.len(), 1, "{name}: errors create nothing");
    }
}

#[test]
fn icmpv6_packet_too_big_is_related() {
    let mut t = tracker();
    let key = ConnKey::new(0, Family::V6, proto::UDP, A6, B6, 1000, 443);
    track_commit(&mut t, &PacketSummary::other(key), 0);
    let ptb = PacketSummary::icmp_error(0, Family::V6, 0xfe80, A6, 2, 0, key);
    assert_eq!(bits(&t.process(&ptb, 1)), REL | RPL);
}
