//! Random packet sequences: the tracker never panics, and its
//! two-direction index always agrees with its slab. Commits may ask for
//! NAT from small ranges, so translated tuples collide and ranges run out:
//! every key stays unique and every rewrite leads to the other key.

mod support;

use std::collections::HashSet;

use nfv_conntrack::key::proto;
use nfv_conntrack::{
    CommitError, Config, ConnKey, ConnView, CtState, Family, L4, NatKind, NatRequest,
    PacketSummary, PortSelection, TcpFlags, TcpSegment, Tracker, Verdict,
};
use proptest::prelude::*;
use support::*;

const CAPACITY: u32 = 8;
const ZONE_LIMIT: u32 = 5;

#[derive(Clone, Debug)]
enum Op {
    Packet {
        pkt: PacketSummary,
        commit: bool,
        /// Commit with `nat(…)` rather than a plain commit.
        nat: Option<NatRequest>,
        advance_ms: u64,
    },
    /// A packet on a key of an existing connection (the `pick`-th), in its
    /// reply direction if `reply`: for translated connections the only way
    /// random packets reach them.
    Answer {
        pick: usize,
        reply: bool,
        seg: TcpSegment,
    },
    /// An ICMP error quoting a packet of an existing connection as it
    /// travelled on the translated side (`reply`: the translated original
    /// direction) or on the client's side.
    QuoteError {
        pick: usize,
        reply: bool,
    },
    /// Several new UDP flows to one server committed with one request,
    /// to run its range out.
    Fill {
        zone: u16,
        count: u16,
        nat: NatRequest,
    },
    Expire {
        advance_ms: u64,
    },
    Flush(Option<u16>),
    Mark(u32),
}

fn base_key() -> impl Strategy<Value = ConnKey> {
    (
        0u16..2,
        1u16..4,
        prop_oneof![Just(proto::TCP), Just(proto::UDP)],
    )
        .prop_map(|(zone, sport, p)| ConnKey::new(zone, Family::V4, p, A, B, sport, 80))
}

/// Sequence numbers near the ones a real exchange uses, and a few wild ones.
fn seq_number() -> impl Strategy<Value = u32> {
    prop_oneof![0u32..4, 1000u32..1004, Just(u32::MAX), any::<u32>()]
}

fn tcp_segment() -> impl Strategy<Value = TcpSegment> {
    (
        any::<u8>(),
        seq_number(),
        seq_number(),
        any::<u16>(),
        proptest::option::of(0u8..20),
        0u32..3000,
    )
        .prop_map(
            |(flags, seq, ack, window, wscale, payload_len)| TcpSegment {
                flags: TcpFlags(flags & 0x3f),
                seq,
                ack,
                window,
                wscale,
                payload_len,
            },
        )
}

fn packet() -> impl Strategy<Value = PacketSummary> {
    let direct = (base_key(), any::<bool>(), tcp_segment()).prop_map(|(key, reply, seg)| {
        let key = if reply { key.reversed().unwrap() } else { key };
        if key.proto == proto::TCP {
            PacketSummary::tcp(key, seg)
        } else {
            PacketSummary::other(key)
        }
    });
    let echo = (
        0u16..2,
        1u16..3,
        prop_oneof![Just(8u8), Just(0u8), Just(9u8)],
        any::<bool>(),
    )
        .prop_map(|(zone, id, ty, reply)| {
            let (src, dst) = if reply { (B, A) } else { (A, B) };
            PacketSummary::icmp_query(zone, Family::V4, src, dst, id, ty)
        });
    let error = (
        base_key(),
        any::<bool>(),
        prop_oneof![Just(3u8), Just(11u8)],
    )
        .prop_map(|(inner, reply, ty)| {
            let inner = if reply {
                inner.reversed().unwrap()
            } else {
                inner
            };
            PacketSummary::icmp_error(inner.zone, Family::V4, 0xfe, A, ty, 0, inner)
        });
    prop_oneof![6 => direct, 2 => echo, 1 => error]
}

const N: u128 = 0xc0a8_0001;

/// NAT into 1–2 addresses and 1–2 ports (around the packets' own source
/// ports, or away from them), so that the packets' own values are
/// sometimes inside the ranges.
fn any_nat_request() -> impl Strategy<Value = NatRequest> {
    (
        any::<bool>(),
        prop_oneof![Just(N), Just(A), Just(B)],
        0u128..2,
        proptest::option::of((prop_oneof![Just(1u16), Just(1000)], 0u16..2)),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(src, lo, extra, ports, random, persistent)| {
            let kind = if src { NatKind::Src } else { NatKind::Dst };
            let mut req = NatRequest::new(kind, Family::V4, lo, lo + extra).unwrap();
            if let Some((first, more)) = ports {
                req = req.with_ports(first, first + more).unwrap();
            }
            let selection = if random {
                PortSelection::Random
            } else {
                PortSelection::Hash
            };
            req.with_selection(selection).with_persistent(persistent)
        })
}

/// Mostly a few fixed requests, so that commits share ranges and fill
/// them; sometimes any.
fn nat_request() -> impl Strategy<Value = NatRequest> {
    let snat = NatRequest::src(Family::V4, N, N).unwrap();
    let dnat = NatRequest::dst(Family::V4, N, N).unwrap();
    prop_oneof![
        2 => Just(snat.with_ports(1000, 1000).unwrap()),
        1 => Just(snat.with_ports(1000, 1001).unwrap().with_selection(PortSelection::Random)),
        1 => Just(snat),
        1 => Just(dnat.with_ports(1000, 1001).unwrap()),
        1 => Just(dnat),
        2 => any_nat_request(),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => (packet(), any::<bool>(), proptest::option::of(nat_request()), 0u64..5_000)
            .prop_map(|(pkt, commit, nat, advance_ms)| Op::Packet { pkt, commit, nat, advance_ms }),
        4 => (any::<usize>(), any::<bool>(), tcp_segment())
            .prop_map(|(pick, reply, seg)| Op::Answer { pick, reply, seg }),
        1 => (any::<usize>(), any::<bool>())
            .prop_map(|(pick, reply)| Op::QuoteError { pick, reply }),
        1 => (0u16..2, 1u16..5, nat_request())
            .prop_map(|(zone, count, nat)| Op::Fill { zone, count, nat }),
        2 => (0u64..200_000).prop_map(|advance_ms| Op::Expire { advance_ms }),
        1 => proptest::option::of(0u16..2).prop_map(Op::Flush),
        1 => any::<u32>().prop_map(Op::Mark),
    ]
}

fn pick(t: &Tracker, pick: usize) -> Option<ConnView> {
    let n = t.connections().count();
    (n > 0).then(|| t.connections().nth(pick % n).unwrap())
}

/// A packet with `key`, of the kind the connection's protocol expects.
fn packet_on(key: ConnKey, seg: TcpSegment) -> PacketSummary {
    if key.proto == proto::TCP {
        PacketSummary::tcp(key, seg)
    } else if key.is_icmp() {
        let (ty, code) = key.icmp_type_code();
        PacketSummary {
            key,
            l4: L4::Icmp {
                ty,
                code,
                inner: None,
            },
        }
    } else {
        PacketSummary::other(key)
    }
}

/// A verdict's rewrite, applied to the packet, gives the key the other
/// end sees: the reverse of the reply key for original-direction packets,
/// the reverse of the original key for answers.
fn check_rewrite(t: &Tracker, pkt: &PacketSummary, v: &Verdict) {
    let Some(conn) = v.conn.and_then(|id| t.get(id)) else {
        return;
    };
    if matches!(pkt.l4, L4::Icmp { inner: Some(_), .. }) {
        return;
    }
    let Some(rewrite) = v.nat else {
        assert!(conn.nat.is_none(), "{conn:?} translated but no rewrite");
        return;
    };
    let after = rewrite.apply_to(&pkt.key);
    if pkt.key == conn.orig {
        assert_eq!(after.reversed(), Some(conn.reply), "{conn:?}");
    } else {
        assert_eq!(pkt.key, conn.reply);
        assert_eq!(Some(after), conn.orig.reversed(), "{conn:?}");
    }
}

fn apply(t: &mut Tracker, op: &Op, now: &mut u64, exhausted: &mut u64) {
    match op {
        Op::Packet {
            pkt,
            commit,
            nat,
            advance_ms,
        } => {
            *now += advance_ms;
            let v = t.process(pkt, *now);
            check_rewrite(t, pkt, &v);
            if *commit {
                let before = t.counters().committed;
                match t.commit_nat(pkt, &v, nat.as_ref(), *now) {
                    Ok(done) => {
                        let conn = t.get(done.id).expect("committed");
                        let created = t.counters().committed > before;
                        if let Some(rewrite) = done.nat {
                            assert!(conn.nat.is_some());
                            if conn.orig == pkt.key {
                                let after = rewrite.apply_to(&pkt.key);
                                assert_eq!(after.reversed(), Some(conn.reply));
                            }
                        }
                        // A new connection's translated end lies in the
                        // requested range (or is the packet's own).
                        if let (true, Some(req)) = (created, nat) {
                            assert_eq!(conn.orig, pkt.key);
                            let after = done.nat.map_or(pkt.key, |r| r.apply_to(&pkt.key));
                            let moved = match req.kind() {
                                NatKind::Src => after.src,
                                NatKind::Dst => after.dst,
                            };
                            let (lo, hi) = req.addrs();
                            let own = moved == pkt.key.src || moved == pkt.key.dst;
                            assert!((lo..=hi).contains(&moved) || own, "{moved:#x}");
                        }
                    }
                    Err(CommitError::NatExhausted) => *exhausted += 1,
                    Err(_) => {}
                }
            }
        }
        Op::Answer {
            pick: n,
            reply,
            seg,
        } => {
            let Some(conn) = pick(t, *n) else { return };
            let key = if *reply { conn.reply } else { conn.orig };
            let pkt = packet_on(key, *seg);
            let v = t.process(&pkt, *now);
            if v.conn.is_some() {
                assert_eq!(v.conn, Some(conn.id), "a key leads to its connection");
                assert_eq!(v.state.has(CtState::REPLY), *reply);
            }
            check_rewrite(t, &pkt, &v);
        }
        Op::Fill { zone, count, nat } => {
            for i in 0..*count {
                let key = ConnKey::new(*zone, Family::V4, proto::UDP, A, B, 100 + i, 53);
                let pkt = PacketSummary::other(key);
                let op = Op::Packet {
                    pkt,
                    commit: true,
                    nat: Some(*nat),
                    advance_ms: 0,
                };
                apply(t, &op, now, exhausted);
            }
        }
        Op::QuoteError { pick: n, reply } => {
            let Some(conn) = pick(t, *n) else { return };
            // The quoted packet travelled opposite to the error.
            let quoted = if *reply {
                conn.reply.reversed()
            } else {
                conn.orig.reversed()
            };
            let Some(inner) = quoted else { return };
            let err =
                PacketSummary::icmp_error(inner.zone, Family::V4, 0xfe, inner.src, 3, 0, inner);
            let v = t.process(&err, *now);
            if conn.deadline_ms <= *now {
                // Found past its deadline: dropped, the error relates to
                // nothing.
                assert_eq!(v.conn, None);
                assert!(t.get(conn.id).is_none());
                return;
            }
            assert_eq!(v.conn, Some(conn.id), "the quote leads to its connection");
            assert_eq!(v.state.has(CtState::REPLY), *reply);
            assert_eq!(v.nat.is_some(), conn.nat.is_some());
            if let Some(rewrite) = v.nat {
                // The embedded packet, rewritten, is what the other side
                // sent or received.
                let fixed = rewrite.swapped().apply_to(&inner);
                let want = if *reply { conn.orig } else { conn.reply };
                assert_eq!(fixed, want);
            }
        }
        Op::Expire { advance_ms } => {
            *now += advance_ms;
            t.expire(*now);
            // The wheel sweeps whole one-second ticks.
            let swept_to = *now / 1000 * 1000;
            assert!(
                t.connections().all(|c| c.deadline_ms > swept_to),
                "a sweep leaves nothing due"
            );
        }
        Op::Flush(zone) => {
            t.flush(*zone);
        }
        Op::Mark(mark) => {
            let first = t.connections().next().map(|c| c.id);
            if let Some(id) = first {
                assert!(t.set_mark(id, *mark));
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_traffic_keeps_the_table_consistent(ops in proptest::collection::vec(op(), 1..120)) {
        let config = Config { capacity: CAPACITY, default_zone_limit: Some(ZONE_LIMIT), ..Config::default() };
        let mut t = Tracker::new(config).unwrap();
        let mut now = 0;
        let mut exhausted = 0;
        for op in &ops {
            apply(&mut t, op, &mut now, &mut exhausted);
            prop_assert_eq!(t.check_consistency(), Ok(()), "after {:?}", op);
            prop_assert!(t.len() <= CAPACITY);
            prop_assert!(t.zone_count(0) <= ZONE_LIMIT && t.zone_count(1) <= ZONE_LIMIT);
            // Every key, original or reply, of every connection is unique,
            // and only translated connections have a reply key other than
            // the reverse of their original one.
            let mut keys = HashSet::new();
            for conn in t.connections() {
                prop_assert!(keys.insert(conn.orig), "{:?} twice", conn.orig);
                prop_assert!(keys.insert(conn.reply), "{:?} twice", conn.reply);
                prop_assert_eq!(
                    conn.nat.is_none(),
                    conn.orig.reversed() == Some(conn.reply),
                    "{:?}", conn
                );
            }
        }
        let counters = t.counters();
        prop_assert!(counters.committed >= u64::from(t.len()));
        prop_assert_eq!(counters.nat_exhausted, exhausted);
    }
}
