//! The table: zones, limits, capacity, commit semantics, marks and labels,
//! expiry times and expiry cost.

mod support;

use nfv_conntrack::{CommitError, Config, CtState, Family, L4, PacketSummary, Timeouts, Tracker};
use support::*;

fn udp(zone: u16, sport: u16) -> PacketSummary {
    PacketSummary::other(udp_key(zone, sport))
}

fn commit_udp(
    t: &mut Tracker,
    zone: u16,
    sport: u16,
    now: u64,
) -> Result<nfv_conntrack::ConnId, CommitError> {
    let pkt = udp(zone, sport);
    let v = t.process(&pkt, now);
    t.commit(&pkt, &v, now)
}

#[test]
fn process_without_commit_leaves_nothing() {
    let mut t = tracker();
    for _ in 0..3 {
        assert_eq!(
            bits(&t.process(&udp(0, 1), 0)),
            NEW,
            "still new: nothing was stored"
        );
    }
    assert!(t.is_empty());
    assert_eq!(t.counters().new, 3);
    assert_eq!(t.counters().committed, 0);
}

#[test]
fn commit_twice_is_one_connection() {
    let mut t = tracker();
    let pkt = udp(0, 1);
    let v = t.process(&pkt, 0);
    let first = t.commit(&pkt, &v, 0).unwrap();
    assert_eq!(t.commit(&pkt, &v, 0), Ok(first));
    let v2 = t.process(&pkt, 0);
    assert_eq!(t.commit(&pkt, &v2, 0), Ok(first));
    assert_eq!(t.len(), 1);
}

#[test]
fn invalid_packets_are_not_committed() {
    let mut t = tracker();
    let pkt = tcp(tcp_key(0), false, seg(SYN | ACK, 1, 1, 0));
    let v = t.process(&pkt, 0);
    assert_eq!(t.commit(&pkt, &v, 0), Err(CommitError::NotCommittable));
    assert!(t.is_empty());
}

#[test]
fn same_tuple_in_two_zones_is_two_connections() {
    let mut t = tracker();
    let a = commit_udp(&mut t, 1, 7, 0).unwrap();
    let b = commit_udp(&mut t, 2, 7, 0).unwrap();
    assert_ne!(a, b);
    assert_eq!((t.zone_count(1), t.zone_count(2), t.len()), (1, 1, 2));
    t.set_mark(a, 11);
    let back = PacketSummary::other(udp_key(2, 7).reversed().unwrap());
    let v = t.process(&back, 1);
    assert_eq!(
        (bits(&v), v.mark),
        (EST | RPL, 0),
        "zone 2's reply sees zone 2's connection"
    );
}

#[test]
fn zone_limits_default_and_override() {
    let config = Config {
        default_zone_limit: Some(2),
        ..Config::default()
    };
    let mut t = tracker_with(config);
    t.set_zone_limit(5, Some(Some(3)));
    t.set_zone_limit(6, Some(None));
    // (zone, connections attempted, connections stored)
    let cases = [(1u16, 4u16, 2u32), (5, 4, 3), (6, 10, 10)];
    for (zone, attempts, stored) in cases {
        for sport in 0..attempts {
            let _ = commit_udp(&mut t, zone, sport, 0);
        }
        assert_eq!(t.zone_count(zone), stored, "zone {zone}");
    }
    assert_eq!(
        commit_udp(&mut t, 1, 99, 0),
        Err(CommitError::ZoneLimit { zone: 1, limit: 2 })
    );
    assert_eq!(t.counters().zone_limit_refused, 2 + 1 + 1);
    t.set_zone_limit(5, None);
    assert_eq!(
        commit_udp(&mut t, 5, 99, 0),
        Err(CommitError::ZoneLimit { zone: 5, limit: 2 }),
        "back to the default"
    );
}

#[test]
fn capacity_refuses_new_connections_but_not_existing_ones() {
    let mut t = tracker_with(Config {
        capacity: 3,
        ..Config::default()
    });
    for sport in 0..3 {
        commit_udp(&mut t, 0, sport, 0).unwrap();
    }
    assert_eq!(commit_udp(&mut t, 0, 3, 0), Err(CommitError::Full));
    assert_eq!(t.counters().full_refused, 1);
    assert!(
        commit_udp(&mut t, 0, 1, 0).is_ok(),
        "an existing connection commits"
    );
    t.expire(1_000_000);
    assert!(
        commit_udp(&mut t, 0, 3, 1_000_000).is_ok(),
        "room again after expiry"
    );
}

#[test]
fn mark_and_label_follow_the_connection_both_ways() {
    let mut t = tracker();
    let id = commit_udp(&mut t, 0, 1, 0).unwrap();
    assert!(t.set_mark(id, 0xdead));
    assert!(t.set_label(id, 1 << 100));
    for pkt in [
        udp(0, 1),
        PacketSummary::other(udp_key(0, 1).reversed().unwrap()),
    ] {
        let v = t.process(&pkt, 1);
        assert_eq!(
            (v.mark, v.label, v.conn),
            (0xdead, 1 << 100, Some(id)),
            "{pkt:?}"
        );
    }
    t.flush(None);
    assert!(!t.set_mark(id, 1), "a stale handle changes nothing");
}

#[test]
fn flush_one_zone() {
    let mut t = tracker();
    for zone in [1, 1, 2] {
        let sport = t.len() as u16;
        commit_udp(&mut t, zone, sport, 0).unwrap();
    }
    assert_eq!(t.flush(Some(1)), 2);
    assert_eq!((t.zone_count(1), t.zone_count(2)), (0, 1));
    t.check_consistency().unwrap();
}

/// Drives a fresh tracker to a state; returns it and the time of the last
/// packet.
type Setup = fn(&mut Tracker) -> u64;

fn tcp_steps(t: &mut Tracker, steps: &[(bool, u8, u32, u32)]) -> u64 {
    for (i, &(reply, flags, seq, ack)) in steps.iter().enumerate() {
        let v = track_commit(
            t,
            &tcp(tcp_key(0), reply, seg(flags, seq, ack, 0)),
            i as u64,
        );
        assert!(!v.state.has(CtState::INVALID), "setup step {i}");
    }
    steps.len() as u64 - 1
}

const OPEN: [(bool, u8, u32, u32); 3] = [
    (false, SYN, 1, 0),
    (true, SYN | ACK, 9, 2),
    (false, ACK, 2, 10),
];

#[test]
fn each_state_expires_after_its_own_timeout() {
    let d = Timeouts::default();
    let cases: [(&str, Setup, u32); 9] = [
        ("tcp syn sent", |t| tcp_steps(t, &OPEN[..1]), d.tcp_syn_sent),
        ("tcp syn recv", |t| tcp_steps(t, &OPEN[..2]), d.tcp_syn_recv),
        (
            "tcp established",
            |t| tcp_steps(t, &OPEN),
            d.tcp_established,
        ),
        (
            "tcp fin wait",
            |t| tcp_steps(t, &[OPEN[0], OPEN[1], OPEN[2], (false, FIN | ACK, 2, 10)]),
            d.tcp_fin_wait,
        ),
        (
            "tcp time wait",
            |t| {
                tcp_steps(
                    t,
                    &[
                        OPEN[0],
                        OPEN[1],
                        OPEN[2],
                        (false, FIN | ACK, 2, 10),
                        (true, FIN | ACK, 10, 3),
                        (false, ACK, 3, 11),
                    ],
                )
            },
            d.tcp_time_wait,
        ),
        (
            "tcp close",
            |t| tcp_steps(t, &[OPEN[0], OPEN[1], OPEN[2], (true, RST | ACK, 10, 2)]),
            d.tcp_close,
        ),
        (
            "udp first",
            |t| {
                track_commit(t, &udp(0, 1), 0);
                0
            },
            d.udp_first,
        ),
        (
            "udp bidirectional",
            |t| {
                track_commit(t, &udp(0, 1), 0);
                t.process(&PacketSummary::other(udp_key(0, 1).reversed().unwrap()), 1);
                1
            },
            d.udp_multiple,
        ),
        (
            "icmp first",
            |t| {
                track_commit(
                    t,
                    &PacketSummary::icmp_query(0, nfv_conntrack::Family::V4, A, B, 1, 8),
                    0,
                );
                0
            },
            d.icmp_first,
        ),
    ];
    for (name, setup, secs) in cases {
        let mut t = tracker();
        let last = setup(&mut t);
        let deadline = last + u64::from(secs) * 1000;
        assert_eq!(only_conn(&t).deadline_ms, deadline, "{name}");
        assert_eq!(
            t.expire(deadline - 1).expired,
            0,
            "{name}: alive just before"
        );
        assert_eq!(
            t.expire(deadline + 999).expired,
            1,
            "{name}: gone within a tick after"
        );
        assert!(t.is_empty(), "{name}");
    }
}

#[test]
fn configured_timeouts_apply() {
    let timeouts = Timeouts {
        udp_first: 5,
        ..Timeouts::default()
    };
    let mut t = tracker_with(Config {
        timeouts,
        ..Config::default()
    });
    commit_udp(&mut t, 0, 1, 0).unwrap();
    assert_eq!(only_conn(&t).deadline_ms, 5000);
    let zero = Timeouts {
        tcp_close: 0,
        ..Timeouts::default()
    };
    assert!(
        Tracker::new(Config {
            timeouts: zero,
            ..Config::default()
        })
        .is_err()
    );
}

#[test]
fn a_lookup_past_the_deadline_sees_no_connection() {
    let mut t = tracker();
    commit_udp(&mut t, 0, 1, 0).unwrap();
    let late = u64::from(Timeouts::default().udp_first) * 1000;
    assert_eq!(
        bits(&t.process(&udp(0, 1), late)),
        NEW,
        "expired even before any sweep"
    );
    assert!(t.is_empty());
    assert_eq!(t.counters().expired, 1);
}

#[test]
fn expiry_cost_follows_the_expired_not_the_table() {
    let mut t = tracker_with(Config {
        capacity: 20_000,
        ..Config::default()
    });
    // 10 000 connections that live an hour, 100 that live a minute.
    let icmp = |id| PacketSummary::icmp_query(0, nfv_conntrack::Family::V4, A, B, id, 8);
    for sport in 0..10_000u16 {
        let pkt = udp(0, sport);
        let v = t.process(&pkt, 0);
        let id = t.commit(&pkt, &v, 0).unwrap();
        t.process(&PacketSummary::other(pkt.key.reversed().unwrap()), 0);
        let _ = id;
    }
    for id in 0..100u16 {
        track_commit(&mut t, &icmp(id), 0);
    }
    let mut visited = 0;
    let mut expired = 0;
    for now in (0..=61_000).step_by(1000) {
        let stats = t.expire(now);
        visited += stats.visited;
        expired += stats.expired;
    }
    // The UDP ones (30 s) are due too by then; nothing else is visited.
    assert_eq!(expired, 10_100);
    assert_eq!(visited, expired, "each sweep looked only at due entries");

    // Entries refreshed after placement are revisited once, not per sweep.
    for sport in 0..1000u16 {
        commit_udp(&mut t, 0, sport, 100_000).unwrap();
        t.process(&udp(0, sport), 150_000);
    }
    let stats = t.expire(160_000);
    assert_eq!(
        stats,
        nfv_conntrack::SweepStats {
            expired: 0,
            visited: 1000
        }
    );
    let stats = t.expire(210_000);
    assert_eq!(
        stats,
        nfv_conntrack::SweepStats {
            expired: 1000,
            visited: 1000
        }
    );
}

#[test]
fn a_batch_gets_the_verdicts_of_one_packet_at_a_time() {
    let (mut single, mut batched) = (tracker(), tracker());
    for t in [&mut single, &mut batched] {
        for sport in 1..4 {
            commit_udp(t, 0, sport, 0).unwrap();
        }
    }
    let reply = PacketSummary::other(udp_key(0, 2).reversed().unwrap());
    // Committed, not committed, a reply, and repeats within the batch.
    let pkts = [udp(0, 1), udp(0, 9), reply, udp(0, 2), udp(0, 1), udp(1, 3)];
    let want: Vec<_> = pkts.iter().map(|p| single.process(p, 10)).collect();
    let mut got = Vec::new();
    batched.process_batch(&pkts, 10, &mut got);
    assert_eq!(got, want);
    assert_eq!(batched.counters(), single.counters());
}

/// Every packet is counted under each of its verdict's new, est, rel and
/// inv bits (what the datapath exports as `ct_new`, …), whatever the mix.
#[test]
fn packets_are_counted_by_their_verdicts_bits() {
    let mut t = tracker();
    let mut verdicts = Vec::new();
    for sport in [1, 1, 2] {
        verdicts.push(t.process(&udp(0, sport), 0));
    }
    commit_udp(&mut t, 0, 3, 0).unwrap();
    for _ in 0..4 {
        verdicts.push(t.process(&udp(0, 3), 1));
    }
    let syn_ack = tcp(tcp_key(0), false, seg(SYN | ACK, 1, 1, 0));
    verdicts.push(t.process(&syn_ack, 2));
    // ICMP, each way the tracker answers it: an error about the committed
    // flow (related), about an untracked flow, about the flow in another
    // zone, without a quote (all three invalid), and a type the tracker
    // does not follow (invalid).
    let (router, host) = (u128::from(0x0a00_00feu32), udp_key(0, 3).src);
    let error = |inner| PacketSummary::icmp_error(0, Family::V4, router, host, 3, 3, inner);
    for pkt in [
        error(udp_key(0, 3)),
        error(udp_key(0, 7)),
        error(udp_key(1, 3)),
    ] {
        verdicts.push(t.process(&pkt, 3));
    }
    let mut unquoted = error(udp_key(0, 3));
    unquoted.l4 = L4::Icmp {
        ty: 3,
        code: 3,
        inner: None,
    };
    verdicts.push(t.process(&unquoted, 3));
    verdicts.push(t.process(
        &PacketSummary::icmp_query(0, Family::V4, router, host, 1, 9),
        3,
    ));
    // The commit's own packet went through `process` too.
    let counted = |bit: u8| verdicts.iter().filter(|v| v.state.has(bit)).count() as u64;
    let c = t.counters();
    assert_eq!(c.new, counted(CtState::NEW) + 1, "{c:?}");
    assert_eq!(c.established, counted(CtState::ESTABLISHED), "{c:?}");
    assert_eq!(c.related, counted(CtState::RELATED), "{c:?}");
    assert_eq!(c.invalid, counted(CtState::INVALID), "{c:?}");
    // Eight UDP packets, each new or established (which, the tracker's
    // `established` setting decides), the one related error, and five
    // invalid: the segment and four of the ICMP messages.
    assert_eq!(
        (c.new + c.established, c.related, c.invalid),
        (8, 1, 5),
        "{c:?}"
    );
}
