//! `ct` against real frames: a TCP handshake committed by its first
//! packet, replies, marks and labels set on commit, zone limits, and what
//! cannot be tracked.

use super::*;
use etherparse::PacketBuilder;
use nfv_conntrack::key::proto;
use nfv_conntrack::{Config, Family};

const A: [u8; 4] = [10, 0, 0, 1];
const B: [u8; 4] = [10, 0, 0, 2];

fn frame(b: etherparse::PacketBuilderStep<etherparse::TcpHeader>) -> Vec<u8> {
    let mut v = Vec::with_capacity(b.size(0));
    b.write(&mut v, &[]).unwrap();
    v
}

fn seg(
    from_a: bool,
    sport: u16,
    dport: u16,
) -> etherparse::PacketBuilderStep<etherparse::TcpHeader> {
    let (s, d) = if from_a { (A, B) } else { (B, A) };
    PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4(s, d, 64)
        .tcp(sport, dport, if from_a { 100 } else { 5000 }, 64000)
}

fn syn() -> Vec<u8> {
    frame(seg(true, 40000, 22).syn())
}
fn syn_ack() -> Vec<u8> {
    frame(seg(false, 22, 40000).syn().ack(101))
}
fn ack() -> Vec<u8> {
    let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4(A, B, 64)
        .tcp(40000, 22, 101, 64000)
        .ack(5001);
    frame(b)
}

const TRK: u8 = CtState::TRACKED;
const NEW: u8 = CtState::NEW;
const EST: u8 = CtState::ESTABLISHED;
const RPL: u8 = CtState::REPLY;
const INV: u8 = CtState::INVALID;

fn table() -> ConnTable {
    ConnTable::new(Config::default()).unwrap()
}

fn commit(zone: u16) -> CtRequest {
    CtRequest {
        zone,
        commit: true,
        ..CtRequest::default()
    }
}

fn look(zone: u16) -> CtRequest {
    CtRequest {
        zone,
        ..CtRequest::default()
    }
}

#[test]
fn a_committed_handshake_is_new_then_established_in_both_directions() {
    let mut t = table();
    let orig = ConnKey::new(
        5,
        Family::V4,
        proto::TCP,
        u128::from(u32::from_be_bytes(A)),
        u128::from(u32::from_be_bytes(B)),
        40000,
        22,
    );
    // (frame, request, expected state), in order.
    let steps: [(&str, Vec<u8>, CtRequest, u8); 6] = [
        ("SYN looked up only", syn(), look(5), TRK | NEW),
        (
            "SYN again, not committed: nothing was stored",
            syn(),
            look(5),
            TRK | NEW,
        ),
        ("SYN committed", syn(), commit(5), TRK | NEW),
        ("SYN-ACK", syn_ack(), look(5), TRK | EST | RPL),
        ("ACK", ack(), look(5), TRK | EST),
        (
            "ACK in another zone: unknown there",
            ack(),
            look(6),
            TRK | NEW,
        ),
    ];
    for (i, (name, f, req, want)) in steps.into_iter().enumerate() {
        let got = t.execute(&f, &req, 1000 + i as u64);
        assert_eq!(got.state, want, "{name}: {got:?}");
        assert_eq!(got.zone, req.zone, "{name}");
        if want & (EST | NEW) != 0 && req.zone == 5 {
            assert_eq!(got.orig, Some(orig), "{name}");
        }
    }
    assert_eq!(t.tracker().len(), 1);
}

#[test]
fn exec_sets_mark_and_label_on_commit_and_replies_carry_them() {
    let mut t = table();
    let req = CtRequest {
        zone: 1,
        commit: true,
        set_mark: Some((0xab, 0xff)),
        set_label: Some((1 << 100, 1 << 100)),
    };
    let first = t.execute(&syn(), &req, 1);
    assert_eq!((first.mark, first.label), (0xab, 1 << 100));
    let reply = t.execute(&syn_ack(), &look(1), 2);
    assert_eq!(reply.state, TRK | EST | RPL);
    assert_eq!((reply.mark, reply.label), (0xab, 1 << 100));
    // A second commit with a mask keeps the bits outside it.
    let req2 = CtRequest {
        zone: 1,
        commit: true,
        set_mark: Some((0x100, 0xf00)),
        set_label: None,
    };
    let again = t.execute(&ack(), &req2, 3);
    assert_eq!(again.mark, 0x1ab);
    assert_eq!(t.execute(&syn_ack(), &look(1), 4).mark, 0x1ab);
}

#[test]
fn a_refused_commit_is_invalid_and_counted() {
    let mut t = ConnTable::new(Config {
        default_zone_limit: Some(0),
        ..Config::default()
    })
    .unwrap();
    let got = t.execute(&syn(), &commit(3), 1);
    assert_eq!(got.state, TRK | INV);
    assert_eq!(t.counters().commit_refused, 1);
    assert_eq!(t.tracker().len(), 0);
}

#[test]
fn untrackable_frames_are_invalid_by_reason() {
    let mut t = table();
    let mut arp = vec![0u8; 60];
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    let mut frag = syn();
    frag[14 + 6] = 0x20;
    frag[24..26].copy_from_slice(&[0, 0]);
    let sum = !nfv_wire::checksum::data(&frag[14..34]);
    frag[24..26].copy_from_slice(&sum.to_be_bytes());
    let mut runt = syn();
    runt.truncate(30);
    for f in [&arp, &frag, &runt] {
        let got = t.execute(f, &commit(0), 1);
        assert_eq!(got.state, TRK | INV);
        assert_eq!(got.orig, None);
    }
    let c = t.counters();
    assert_eq!((c.not_ip, c.fragment, c.malformed), (1, 1, 1), "{c:?}");
    assert_eq!(t.tracker().len(), 0, "nothing committed");
}
