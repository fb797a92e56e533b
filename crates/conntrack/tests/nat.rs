//! SNAT and DNAT: tuple choice, rewrites in both directions, exhaustion,
//! related ICMP errors, and the release of translated tuples.

mod support;

use nfv_conntrack::key::proto;
use nfv_conntrack::{
    CommitError, Config, ConnKey, CtState, Endpoint, Family, NatCommit, NatError, NatKind,
    NatRequest, NatRewrite, PacketSummary, PortSelection, Tracker,
};
use support::*;

const C2: u128 = 0x0a00_0003;
const N: u128 = 0xc0a8_0001;
const N6: u128 = 0x2001_0db8_ffff_0000_0000_0000_0000_0001;
const ROUTER: u128 = 0x0a00_00fe;

fn ep(addr: u128, port: u16) -> Option<Endpoint> {
    Some(Endpoint {
        addr,
        port: Some(port),
    })
}

fn src_to(addr: u128, port: u16) -> NatRewrite {
    NatRewrite {
        end: NatKind::Src,
        addr,
        port: Some(port),
    }
}

fn dst_to(addr: u128, port: u16) -> NatRewrite {
    NatRewrite {
        end: NatKind::Dst,
        addr,
        port: Some(port),
    }
}

fn pkt(key: ConnKey) -> PacketSummary {
    if key.proto == proto::TCP {
        PacketSummary::tcp(key, seg(SYN, 100, 0, 0))
    } else {
        PacketSummary::other(key)
    }
}

/// `process` then `commit_nat`, as `ct(commit, nat(…))` on a new packet.
fn commit(
    t: &mut Tracker,
    p: &PacketSummary,
    req: &NatRequest,
    now: u64,
) -> Result<NatCommit, CommitError> {
    let v = t.process(p, now);
    let out = t.commit_nat(p, &v, Some(req), now);
    assert_eq!(t.check_consistency(), Ok(()));
    out
}

#[test]
fn snat_and_dnat_both_families_both_directions() {
    struct Case {
        name: &'static str,
        key: ConnKey,
        req: NatRequest,
        /// The rewrite of original-direction packets.
        out: NatRewrite,
        /// The rewrite of answers.
        back: NatRewrite,
    }
    let tcp4 = tcp_key(0);
    let udp6 = ConnKey::new(0, Family::V6, proto::UDP, A6, B6, 5000, 53);
    let cases = [
        Case {
            name: "snat tcp v4, port kept",
            key: tcp4,
            req: NatRequest::src(Family::V4, N, N).unwrap(),
            out: src_to(N, 40000),
            back: dst_to(A, 40000),
        },
        Case {
            name: "snat tcp v4 into a port range",
            key: tcp4,
            req: NatRequest::src(Family::V4, N, N)
                .unwrap()
                .with_ports(7000, 7000)
                .unwrap(),
            out: src_to(N, 7000),
            back: dst_to(A, 40000),
        },
        Case {
            name: "dnat tcp v4 with a port",
            key: tcp4,
            req: NatRequest::dst(Family::V4, N, N)
                .unwrap()
                .with_ports(8080, 8080)
                .unwrap(),
            out: dst_to(N, 8080),
            back: src_to(B, 80),
        },
        Case {
            name: "snat udp v6",
            key: udp6,
            req: NatRequest::src(Family::V6, N6, N6).unwrap(),
            out: src_to(N6, 5000),
            back: dst_to(A6, 5000),
        },
        Case {
            name: "dnat udp v6, port kept",
            key: udp6,
            req: NatRequest::dst(Family::V6, N6, N6).unwrap(),
            out: dst_to(N6, 53),
            back: src_to(B6, 53),
        },
    ];
    for case in cases {
        let name = case.name;
        let mut t = tracker();
        let p = pkt(case.key);
        let done = commit(&mut t, &p, &case.req, 0).unwrap();
        assert_eq!(done.nat, Some(case.out), "{name}: committing packet");
        let conn = only_conn(&t);
        assert_eq!(conn.orig, case.key, "{name}: original key unchanged");
        assert_eq!(conn.nat, Some(case.req.kind()), "{name}");
        let translated = case.out.apply_to(&case.key);
        assert_eq!(
            conn.reply,
            translated.reversed().unwrap(),
            "{name}: reply key"
        );

        // The answer arrives with the translated tuple reversed.
        let answer = if case.key.proto == proto::TCP {
            PacketSummary::tcp(conn.reply, seg(SYN | ACK, 900, 101, 0))
        } else {
            PacketSummary::other(conn.reply)
        };
        let v = t.process(&answer, 1);
        assert_eq!(bits(&v), EST | RPL, "{name}: answer");
        assert_eq!(v.conn, Some(done.id), "{name}");
        assert_eq!(v.nat, Some(case.back), "{name}: answer rewrite");
        assert_eq!(
            case.back.apply_to(&answer.key),
            case.key.reversed().unwrap(),
            "{name}: the client sees its own tuple reversed"
        );
        let snat = case.req.kind() == NatKind::Src;
        let (out_bits, back_bits) = if snat {
            (CtState::SRC_NAT, CtState::DST_NAT)
        } else {
            (CtState::DST_NAT, CtState::SRC_NAT)
        };
        assert_eq!(
            v.state_with_nat().0,
            v.state.0 | back_bits,
            "{name}: answers are reported translated the other way"
        );

        // Later original-direction packets: a bare `nat` applies the same.
        let later = if case.key.proto == proto::TCP {
            PacketSummary::tcp(case.key, seg(ACK, 101, 901, 0))
        } else {
            PacketSummary::other(case.key)
        };
        let v = t.process(&later, 2);
        assert_eq!(bits(&v), EST, "{name}");
        assert_eq!(v.nat, Some(case.out), "{name}: original-direction rewrite");
        assert_eq!(v.state_with_nat().0, v.state.0 | out_bits, "{name}");
    }
}

#[test]
fn the_source_port_is_kept_when_it_can_be() {
    let base = NatRequest::src(Family::V4, N, N).unwrap();
    let cases = [
        ("no range: kept", base, 40000, Some(40000)),
        (
            "own port in the range: kept",
            base.with_ports(39000, 41000).unwrap(),
            40000,
            Some(40000),
        ),
        (
            "own port outside: moved into the range",
            base.with_ports(1000, 1999).unwrap(),
            40000,
            None,
        ),
        (
            "random never keeps on purpose: in range anyway",
            base.with_ports(40000, 40000)
                .unwrap()
                .with_selection(PortSelection::Random),
            40000,
            Some(40000),
        ),
    ];
    for (name, req, sport, want) in cases {
        let mut t = tracker();
        let key = ConnKey {
            src_port: sport,
            ..tcp_key(0)
        };
        let done = commit(&mut t, &pkt(key), &req, 0).unwrap();
        let port = done.nat.unwrap().src().unwrap().port.unwrap();
        match want {
            Some(want) => assert_eq!(port, want, "{name}"),
            None => {
                let (lo, hi) = req.ports().unwrap();
                assert!((lo..=hi).contains(&port), "{name}: {port}");
            }
        }
    }
}

#[test]
fn two_clients_with_the_same_port_get_distinct_reply_tuples() {
    let cases = [
        ("no port range", NatRequest::src(Family::V4, N, N).unwrap()),
        (
            "port range",
            NatRequest::src(Family::V4, N, N)
                .unwrap()
                .with_ports(5000, 5001)
                .unwrap(),
        ),
        (
            "random",
            NatRequest::src(Family::V4, N, N)
                .unwrap()
                .with_selection(PortSelection::Random),
        ),
    ];
    for (name, req) in cases {
        let mut t = tracker();
        let first = ConnKey::new(0, Family::V4, proto::UDP, A, B, 5000, 53);
        let second = ConnKey { src: C2, ..first };
        let one = commit(&mut t, &pkt(first), &req, 0).unwrap();
        let two = commit(&mut t, &pkt(second), &req, 0).unwrap();
        let reply = |t: &Tracker, id| t.get(id).unwrap().reply;
        assert_ne!(reply(&t, one.id), reply(&t, two.id), "{name}");
        let (p1, p2) = (
            one.nat.unwrap().src().unwrap(),
            two.nat.unwrap().src().unwrap(),
        );
        assert_eq!((p1.addr, p2.addr), (N, N), "{name}");
        assert_ne!(p1.port, p2.port, "{name}");
        // Each answer finds its own connection and goes back to its client.
        for (id, client) in [(one.id, first), (two.id, second)] {
            let v = t.process(&PacketSummary::other(reply(&t, id)), 1);
            assert_eq!(v.conn, Some(id), "{name}");
            assert_eq!(
                v.nat.unwrap().dst(),
                ep(client.src, 5000),
                "{name}: back to {:#x}",
                client.src
            );
        }
    }
}

/// A 4-port range taken by four clients; the fifth is refused cleanly.
fn exhausted() -> (Tracker, NatRequest, Vec<NatCommit>) {
    let mut t = tracker();
    let req = NatRequest::src(Family::V4, N, N)
        .unwrap()
        .with_ports(1000, 1003)
        .unwrap();
    let mut done = Vec::new();
    for i in 0..4u16 {
        let key = udp_key(0, 2000 + i);
        done.push(commit(&mut t, &pkt(key), &req, u64::from(i) * 10_000).unwrap());
    }
    (t, req, done)
}

#[test]
fn an_exhausted_range_fails_cleanly() {
    let (mut t, req, done) = exhausted();
    let mut ports: Vec<_> = done
        .iter()
        .map(|c| c.nat.unwrap().src().unwrap().port.unwrap())
        .collect();
    ports.sort();
    assert_eq!(ports, [1000, 1001, 1002, 1003]);
    let refused = commit(&mut t, &pkt(udp_key(0, 3000)), &req, 40_000);
    assert_eq!(refused, Err(CommitError::NatExhausted));
    assert_eq!(t.len(), 4, "nothing stored");
    assert_eq!(t.counters().nat_exhausted, 1);
    assert_eq!(t.counters().committed, 4);
}

#[test]
fn expiry_flush_and_replacement_free_the_translated_tuple() {
    // Expiry: the first client's connection (committed at 0) times out
    // first (UDP first-packet timeout, 60 s in OVS's defaults).
    let (mut t, req, done) = exhausted();
    let first_deadline = t.get(done[0].id).unwrap().deadline_ms;
    t.expire(first_deadline);
    assert_eq!(t.len(), 3);
    let again = commit(&mut t, &pkt(udp_key(0, 3000)), &req, first_deadline).unwrap();
    assert_eq!(
        again.nat.unwrap().src(),
        done[0].nat.unwrap().src(),
        "the freed port is reused"
    );
    assert_eq!(t.check_consistency(), Ok(()));

    // A lookup that finds a connection past its deadline drops it too.
    let (mut t, req, done) = exhausted();
    let late = t.get(done[0].id).unwrap().deadline_ms;
    assert!(commit(&mut t, &pkt(udp_key(0, 3000)), &req, late).is_ok());

    // Flush.
    let (mut t, req, _) = exhausted();
    assert_eq!(t.flush(Some(0)), 4);
    assert_eq!(t.index_probe_stats().entries, 0, "both keys of each gone");
    for i in 0..4 {
        assert!(commit(&mut t, &pkt(udp_key(0, 4000 + i)), &req, 50_000).is_ok());
    }

    // A closed TCP connection replaced by a new SYN on its tuple.
    let mut t = tracker();
    let req = NatRequest::src(Family::V4, N, N)
        .unwrap()
        .with_ports(1000, 1000)
        .unwrap();
    let key = tcp_key(0);
    let first = commit(&mut t, &tcp(key, false, seg(SYN, 100, 0, 0)), &req, 0).unwrap();
    let reply = only_conn(&t).reply;
    t.process(&PacketSummary::tcp(reply, seg(RST | ACK, 0, 101, 0)), 1);
    let syn = tcp(key, false, seg(SYN, 5000, 0, 0));
    let v = t.process(&syn, 2);
    assert_eq!(bits(&v), NEW, "a SYN reopens the closed connection");
    let second = t.commit_nat(&syn, &v, Some(&req), 2).unwrap();
    assert_ne!(second.id, first.id);
    assert_eq!(second.nat, first.nat, "the only port was freed and reused");
    assert_eq!(t.len(), 1);
    assert_eq!(t.check_consistency(), Ok(()));
}

#[test]
fn nat_on_an_existing_connection_applies_its_translation() {
    let mut t = tracker();
    let key = udp_key(0, 5353);
    let req = NatRequest::src(Family::V4, N, N)
        .unwrap()
        .with_ports(9000, 9000)
        .unwrap();
    let first = commit(&mut t, &pkt(key), &req, 0).unwrap();
    // `ct(commit, nat(dst=…))` on a later packet: the existing SNAT holds.
    let other = NatRequest::dst(Family::V4, C2, C2).unwrap();
    let again = commit(&mut t, &pkt(key), &other, 1).unwrap();
    assert_eq!(again, first);
    // `ct(commit, nat)` and a bare `nat` (process alone) agree.
    let v = t.process(&pkt(key), 2);
    assert_eq!(t.commit_nat(&pkt(key), &v, None, 2).unwrap(), first);
    assert_eq!(v.nat, first.nat);
    // A commit between a verdict and its commit is found by key.
    let mut t = tracker();
    let v = t.process(&pkt(key), 0);
    let done = t.commit_nat(&pkt(key), &v, Some(&req), 0).unwrap();
    assert_eq!(t.commit_nat(&pkt(key), &v, None, 0).unwrap(), done);
    assert_eq!(t.len(), 1);
}

#[test]
fn related_icmp_errors_of_translated_connections() {
    // SNAT A:40000 -> B:80 as N:1000; DNAT A:40000 -> B:80 to N:8080.
    let key = tcp_key(0);
    let snat = NatRequest::src(Family::V4, N, N)
        .unwrap()
        .with_ports(1000, 1000)
        .unwrap();
    let dnat = NatRequest::dst(Family::V4, N, N)
        .unwrap()
        .with_ports(8080, 8080)
        .unwrap();
    let snat_wire = ConnKey::new(0, Family::V4, proto::TCP, N, B, 1000, 80);
    let dnat_wire = ConnKey::new(0, Family::V4, proto::TCP, A, N, 40000, 8080);
    struct Case {
        name: &'static str,
        req: NatRequest,
        error: PacketSummary,
        bits: u8,
        outer: NatRewrite,
    }
    let cases = [
        Case {
            name: "snat: a router beyond the NAT rejects A's translated packet",
            req: snat,
            error: PacketSummary::icmp_error(0, Family::V4, ROUTER, N, 3, 1, snat_wire),
            bits: REL | RPL,
            outer: dst_to(A, 40000),
        },
        Case {
            name: "snat: A rejects B's answer it received untranslated",
            req: snat,
            error: PacketSummary::icmp_error(0, Family::V4, A, B, 3, 3, key.reversed().unwrap()),
            bits: REL,
            outer: src_to(N, 1000),
        },
        Case {
            name: "dnat: the server's side rejects the translated packet",
            req: dnat,
            error: PacketSummary::icmp_error(0, Family::V4, ROUTER, A, 11, 0, dnat_wire),
            bits: REL | RPL,
            outer: src_to(B, 80),
        },
    ];
    for case in cases {
        let name = case.name;
        let mut t = tracker();
        let done = commit(&mut t, &tcp(key, false, seg(SYN, 100, 0, 0)), &case.req, 0).unwrap();
        let conn = only_conn(&t);
        let v = t.process(&case.error, 1);
        assert_eq!(bits(&v), case.bits, "{name}");
        assert_eq!(v.conn, Some(done.id), "{name}");
        assert_eq!(v.nat, Some(case.outer), "{name}: outer rewrite");
        // The embedded packet gets the swapped rewrite: the quote of a
        // translated packet turns back into the client's own tuple, and
        // the quote of an untranslated one into what the far side sent.
        let nfv_conntrack::L4::Icmp {
            inner: Some(inner), ..
        } = case.error.l4
        else {
            unreachable!()
        };
        let fixed = case.outer.swapped().apply_to(&inner);
        let want = if case.bits & RPL != 0 {
            conn.orig
        } else {
            conn.reply
        };
        assert_eq!(fixed, want, "{name}: embedded header");
        assert_eq!(
            v.state_with_nat().0 & (CtState::SRC_NAT | CtState::DST_NAT),
            case.outer.state_bits(),
            "{name}"
        );
    }
}

#[test]
fn icmp_echo_identifiers_are_translated_like_ports() {
    for family in [Family::V4, Family::V6] {
        let (clients, server, nat, req_ty) = match family {
            Family::V4 => ([A, C2], B, N, 8),
            Family::V6 => ([A6, A6 + 7], B6, N6, 128),
        };
        let mut t = tracker();
        let req = NatRequest::src(family, nat, nat).unwrap();
        let mut replies = Vec::new();
        for client in clients {
            let p = PacketSummary::icmp_query(0, family, client, server, 7, req_ty);
            let done = commit(&mut t, &p, &req, 0).unwrap();
            let out = done.nat.unwrap().src().unwrap();
            assert_eq!(out.addr, nat);
            replies.push((done.id, client, t.get(done.id).unwrap().reply));
        }
        assert_ne!(replies[0].2, replies[1].2, "{family:?}: identifiers differ");
        assert_eq!(
            replies[0].2.src_port, 7,
            "{family:?}: the first keeps its id"
        );
        for (id, client, reply) in replies {
            let (ty, _) = reply.icmp_type_code();
            let answer = PacketSummary::icmp_query(0, family, server, nat, reply.src_port, ty);
            let v = t.process(&answer, 1);
            assert_eq!((bits(&v), v.conn), (EST | RPL, Some(id)), "{family:?}");
            assert_eq!(v.nat.unwrap().dst(), ep(client, 7), "{family:?}: id back");
        }
    }
}

#[test]
fn requests_that_do_not_fit_the_packet_are_refused() {
    let gre = ConnKey::new(0, Family::V4, 47, A, B, 0, 0);
    let ranged = NatRequest::src(Family::V4, N, N)
        .unwrap()
        .with_ports(1, 2)
        .unwrap();
    let cases = [
        (
            "family",
            udp_key(0, 1),
            NatRequest::src(Family::V6, N6, N6).unwrap(),
            CommitError::Nat(NatError::FamilyMismatch {
                range: Family::V6,
                packet: Family::V4,
            }),
        ),
        (
            "ports for GRE",
            gre,
            ranged,
            CommitError::Nat(NatError::PortsWithoutPorts { proto: 47 }),
        ),
    ];
    for (name, key, req, want) in cases {
        let mut t = tracker();
        assert_eq!(commit(&mut t, &pkt(key), &req, 0), Err(want), "{name}");
        assert!(t.is_empty(), "{name}");
    }
    // GRE by address alone is fine.
    let mut t = tracker();
    let req = NatRequest::src(Family::V4, N, N).unwrap();
    let done = commit(&mut t, &pkt(gre), &req, 0).unwrap();
    assert_eq!(
        done.nat.unwrap().src(),
        Some(Endpoint {
            addr: N,
            port: None
        })
    );
}

#[test]
fn a_source_already_in_the_range_is_left_alone() {
    let mut t = tracker();
    let req = NatRequest::src(Family::V4, A - 1, A + 1).unwrap();
    let done = commit(&mut t, &pkt(udp_key(0, 1)), &req, 0).unwrap();
    assert_eq!(done.nat, None);
    assert_eq!(only_conn(&t).nat, None);
    assert_eq!(t.process(&pkt(udp_key(0, 1)), 1).nat, None);
}

#[test]
fn dnat_without_a_port_range_cannot_move_the_port() {
    // Two virtual addresses DNATed to one server: A's second connection
    // from the same port would share the reply tuple, and DNAT may not
    // change the destination port to avoid it (as in Linux).
    let mut t = tracker();
    let req = NatRequest::dst(Family::V4, N, N).unwrap();
    let vip1 = ConnKey::new(0, Family::V4, proto::UDP, A, B, 5000, 53);
    let vip2 = ConnKey { dst: C2, ..vip1 };
    assert!(commit(&mut t, &pkt(vip1), &req, 0).is_ok());
    assert_eq!(
        commit(&mut t, &pkt(vip2), &req, 0),
        Err(CommitError::NatExhausted)
    );
}

#[test]
fn persistent_addresses_survive_a_restart_and_ignore_the_destination() {
    let req = NatRequest::src(Family::V4, N, N + 63)
        .unwrap()
        .with_persistent(true);
    let pick = |t: &mut Tracker, dst: u128| {
        let key = ConnKey::new(0, Family::V4, proto::UDP, A, dst, 5000, 53);
        let done = commit(t, &pkt(key), &req, 0).unwrap();
        done.nat.unwrap().src().unwrap().addr
    };
    let mut first = tracker();
    let mut restarted = tracker();
    let addr = pick(&mut first, B);
    for dst in [B + 1, B + 2, B + 3, 0x0808_0808] {
        assert_eq!(pick(&mut first, dst), addr, "same client, same address");
        assert_eq!(pick(&mut restarted, dst), addr, "and after a restart");
    }
}

#[test]
fn zone_limits_still_apply() {
    let mut t = tracker_with(Config {
        default_zone_limit: Some(1),
        ..Config::default()
    });
    let req = NatRequest::src(Family::V4, N, N).unwrap();
    assert!(commit(&mut t, &pkt(udp_key(0, 1)), &req, 0).is_ok());
    assert_eq!(
        commit(&mut t, &pkt(udp_key(0, 2)), &req, 0),
        Err(CommitError::ZoneLimit { zone: 0, limit: 1 })
    );
    assert!(commit(&mut t, &pkt(udp_key(1, 2)), &req, 0).is_ok());
    assert_eq!(t.counters().nat_exhausted, 0);
}

#[test]
fn an_address_range_spills_over_when_one_address_is_full() {
    let mut t = tracker();
    let req = NatRequest::src(Family::V4, N, N + 2)
        .unwrap()
        .with_ports(1000, 1001)
        .unwrap();
    let mut used = std::collections::HashSet::new();
    for i in 0..6 {
        let done = commit(&mut t, &pkt(udp_key(0, 2000 + i)), &req, 0).unwrap();
        let src = done.nat.unwrap().src().unwrap();
        assert!((N..=N + 2).contains(&src.addr));
        assert!(used.insert((src.addr, src.port)), "{src:?} given twice");
    }
    assert_eq!(
        commit(&mut t, &pkt(udp_key(0, 3000)), &req, 0),
        Err(CommitError::NatExhausted)
    );
}
