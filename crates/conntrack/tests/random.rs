//! Random packet sequences: the tracker never panics, and its
//! two-direction index always agrees with its slab.

mod support;

use nfv_conntrack::key::proto;
use nfv_conntrack::{Config, ConnKey, Family, PacketSummary, TcpFlags, TcpSegment, Tracker};
use proptest::prelude::*;
use support::*;

const CAPACITY: u32 = 8;
const ZONE_LIMIT: u32 = 5;

#[derive(Clone, Debug)]
enum Op {
    Packet {
        pkt: PacketSummary,
        commit: bool,
        advance_ms: u64,
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

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => (packet(), any::<bool>(), 0u64..5_000)
            .prop_map(|(pkt, commit, advance_ms)| Op::Packet { pkt, commit, advance_ms }),
        2 => (0u64..200_000).prop_map(|advance_ms| Op::Expire { advance_ms }),
        1 => proptest::option::of(0u16..2).prop_map(Op::Flush),
        1 => any::<u32>().prop_map(Op::Mark),
    ]
}

fn apply(t: &mut Tracker, op: &Op, now: &mut u64) {
    match op {
        Op::Packet {
            pkt,
            commit,
            advance_ms,
        } => {
            *now += advance_ms;
            let v = t.process(pkt, *now);
            if *commit {
                let _ = t.commit(pkt, &v, *now);
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
        for op in &ops {
            apply(&mut t, op, &mut now);
            prop_assert_eq!(t.check_consistency(), Ok(()), "after {:?}", op);
            prop_assert!(t.len() <= CAPACITY);
            prop_assert!(t.zone_count(0) <= ZONE_LIMIT && t.zone_count(1) <= ZONE_LIMIT);
        }
        let counters = t.counters();
        prop_assert!(counters.committed >= u64::from(t.len()));
    }
}
