//! `ct` against real frames: a TCP handshake committed by its first
//! packet, replies, marks and labels set on commit, zone limits, and what
//! cannot be tracked.

use super::*;
use etherparse::PacketBuilder;
use nfv_conntrack::key::proto;
use nfv_conntrack::{Config, Family};
use nfv_flow::action::{Nat, NatAddrs, NatRange};
use nfv_mem::{MemoryConfig, PacketPool};

/// Every ct field wanted, as when some rule matches the label and the
/// original tuple.
const WIDE: CtWide = CtWide {
    label: true,
    tuple: true,
    used: true,
};

/// Runs `req` on a packet holding `frame`; the fields (all of them), and
/// the frame as the ct action left it.
fn run(t: &mut ConnTable, frame: &[u8], req: &CtAction, now: u64) -> (CtFields, Vec<u8>) {
    run_with(frame, |p| t.execute(p, req, WIDE, now))
}

/// `track` on a packet holding `frame`: its answer, and the frame after.
fn run_with(frame: &[u8], track: impl FnOnce(&mut Packet) -> CtFields) -> (CtFields, Vec<u8>) {
    thread_local! {
        static POOL: std::sync::Arc<PacketPool> = PacketPool::new(
            "ct-tests",
            &MemoryConfig::plain(2048, 64),
        )
        .unwrap();
    }
    POOL.with(|pool| {
        let mut cache = pool.cache();
        let mut p = cache.alloc().unwrap();
        p.set_len(frame.len()).unwrap();
        p.data_mut().copy_from_slice(frame);
        let f = track(&mut p);
        let out = p.data().to_vec();
        cache.free(p);
        (f, out)
    })
}

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
    ConnTable::with_defaults()
}

fn commit(zone: u16) -> CtAction {
    CtAction {
        zone,
        commit: true,
        ..CtAction::default()
    }
}

fn look(zone: u16) -> CtAction {
    CtAction {
        zone,
        ..CtAction::default()
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
    let steps: [(&str, Vec<u8>, CtAction, u8); 6] = [
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
        let (got, _) = run(&mut t, &f, &req, 1000 + i as u64);
        assert_eq!(got.state(), want, "{name}: {got:?}");
        assert_eq!(got.zone(), req.zone, "{name}");
        if want & (EST | NEW) != 0 && req.zone == 5 {
            assert_eq!(got.orig, Some(orig), "{name}");
        }
    }
    assert_eq!(t.tracker().len(), 1);
}

#[test]
fn exec_sets_mark_and_label_on_commit_and_replies_carry_them() {
    let mut t = table();
    let req = CtAction {
        zone: 1,
        commit: true,
        mark: Some((0xab, 0xff)),
        label: Some((1 << 100, 1 << 100)),
        ..CtAction::default()
    };
    let (first, _) = run(&mut t, &syn(), &req, 1);
    assert_eq!((first.mark(), first.label), (0xab, 1 << 100));
    let (reply, _) = run(&mut t, &syn_ack(), &look(1), 2);
    assert_eq!(reply.state(), TRK | EST | RPL);
    assert_eq!((reply.mark(), reply.label), (0xab, 1 << 100));
    // Where no rule matches the label or the original tuple, they are
    // left out (zero, as the next table's key holds them); the rest alike.
    for (label, tuple) in [(false, false), (true, false), (false, true)] {
        let wide = CtWide {
            label,
            tuple,
            used: true,
        };
        let narrow = run_with(&syn_ack(), |p| t.execute(p, &look(1), wide, 3)).0;
        assert_eq!(
            (narrow.word(), narrow.translated),
            (reply.word(), reply.translated)
        );
        assert_eq!(narrow.label, if label { 1 << 100 } else { 0 });
        assert_eq!(narrow.orig, reply.orig.filter(|_| tuple));
        assert!(reply.orig.is_some());
    }
    // A second commit with a mask keeps the bits outside it.
    let req2 = CtAction {
        zone: 1,
        commit: true,
        mark: Some((0x100, 0xf00)),
        ..CtAction::default()
    };
    let (again, _) = run(&mut t, &ack(), &req2, 3);
    assert_eq!(again.mark(), 0x1ab);
    assert_eq!(run(&mut t, &syn_ack(), &look(1), 4).0.mark(), 0x1ab);
}

#[test]
fn a_refused_commit_is_invalid_and_counted() {
    let mut t = ConnTable::new(Config {
        default_zone_limit: Some(0),
        ..Config::default()
    })
    .unwrap();
    let (got, _) = run(&mut t, &syn(), &commit(3), 1);
    assert_eq!(got.state(), TRK | INV);
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
        let (got, _) = run(&mut t, f, &commit(0), 1);
        assert_eq!(got.state(), TRK | INV);
        assert_eq!(got.orig, None);
    }
    let c = t.counters();
    assert_eq!((c.not_ip, c.fragment, c.malformed), (1, 1, 1), "{c:?}");
    assert_eq!(t.tracker().len(), 0, "nothing committed");
}

/// The batch's way (`stage` ahead, `execute_staged` in turn: the
/// shortcut's summary hashed in registers, other frames through the
/// general way) answers every frame as `execute` does, and leaves the
/// same connections and counters: plain IPv4 TCP and UDP, a VLAN tag,
/// IPv6, a bad header checksum, a fragment, ARP, a runt.
#[test]
fn staged_tracking_answers_as_unstaged() {
    let mut tagged = syn_ack();
    tagged.splice(12..12, [0x81, 0x00, 0x00, 0x07]);
    let mut bad_sum = ack();
    bad_sum[24] ^= 0xff;
    let mut frag = syn();
    frag[14 + 6] = 0x20;
    frag[24..26].copy_from_slice(&[0, 0]);
    let sum = !nfv_wire::checksum::data(&frag[14..34]);
    frag[24..26].copy_from_slice(&sum.to_be_bytes());
    let mut arp = vec![0u8; 60];
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    let mut runt = syn();
    runt.truncate(30);
    let udp = |from_a: bool| {
        let (s, d, sp, dp) = if from_a {
            (A, B, 5000, 53)
        } else {
            (B, A, 53, 5000)
        };
        let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4(s, d, 64)
            .udp(sp, dp);
        let mut v = Vec::with_capacity(b.size(4));
        b.write(&mut v, &[1, 2, 3, 4]).unwrap();
        v
    };
    let udp6 = {
        let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv6([0xfd; 16], [0xfe; 16], 64)
            .udp(6000, 7000);
        let mut v = Vec::with_capacity(b.size(0));
        b.write(&mut v, &[]).unwrap();
        v
    };
    let frames: Vec<(&str, Vec<u8>, CtAction)> = vec![
        ("syn", syn(), commit(3)),
        ("syn-ack, tagged", tagged, look(3)),
        ("syn-ack", syn_ack(), look(3)),
        ("ack", ack(), commit(3)),
        ("ack, bad header checksum", bad_sum, commit(3)),
        ("udp out", udp(true), commit(3)),
        ("udp back", udp(false), look(3)),
        ("udp out, other zone", udp(true), look(4)),
        ("udp6", udp6.clone(), commit(3)),
        ("udp6 again", udp6, look(3)),
        ("fragment", frag, commit(3)),
        ("arp", arp, commit(3)),
        ("runt", runt, commit(3)),
    ];
    let (mut plain, mut staged) = (table(), table());
    for (i, (name, f, req)) in frames.iter().enumerate() {
        let want = run(&mut plain, f, req, 10 + i as u64);
        let got = run_with(f, |p| {
            // A slot per frame, as a batch stages each packet's own.
            let slot = i % nfv_mem::BATCH;
            staged.stage(slot, p, req.zone);
            staged.staged_all();
            staged.execute_staged(slot, p, req, WIDE, 10 + i as u64)
        });
        assert_eq!(got, want, "{name}");
    }
    assert_eq!(staged.counters(), plain.counters());
    assert_eq!(staged.tracker().counters(), plain.tracker().counters());
    assert_eq!(staged.tracker().len(), plain.tracker().len());
    assert!(plain.tracker().len() >= 3, "connections were committed");
}

/// Every checksum of an IPv4 frame verifies from scratch: the header's,
/// and TCP's/UDP's (with the pseudo-header) or ICMP's.
fn ipv4_checksums_verify(f: &[u8]) -> bool {
    use nfv_wire::checksum::{combine, data, pseudo_header};
    let ip = &f[14..];
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    if data(&ip[..ihl]) != 0xffff {
        return false;
    }
    let l4 = &ip[ihl..total];
    let proto = nfv_wire::IpProtocol(ip[9]);
    if proto.0 == proto::ICMP {
        return data(l4) == 0xffff;
    }
    let src = std::net::Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
    let dst = std::net::Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
    combine(&[pseudo_header(src, dst, proto, l4.len() as u32), data(l4)]) == 0xffff
}

fn ip_of(f: &[u8], at: usize) -> [u8; 4] {
    f[14 + at..14 + at + 4].try_into().unwrap()
}

fn port_of(f: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([f[34 + at], f[35 + at]])
}

const NAT_IP: [u8; 4] = [10, 0, 0, 100];

fn snat(zone: u16) -> CtAction {
    CtAction {
        zone,
        commit: true,
        nat: Some(Nat::Src(NatRange {
            addrs: Some(NatAddrs::V4(NAT_IP.into(), NAT_IP.into())),
            ports: Some((30000, 30010)),
            ..NatRange::default()
        })),
        ..CtAction::default()
    }
}

fn bare_nat(zone: u16) -> CtAction {
    CtAction {
        zone,
        nat: Some(Nat::Existing),
        ..CtAction::default()
    }
}

/// SNAT to one address and a port range: the SYN leaves translated, the
/// answer comes back to the original source, every checksum verifying;
/// `+snat` and `+dnat` as OVS sets them.
#[test]
fn snat_translates_a_connection_both_ways_with_valid_checksums() {
    let mut t = table();
    let (first, out) = run(&mut t, &syn(), &snat(2), 1);
    assert_eq!(first.state(), TRK | NEW | CtState::SRC_NAT, "{first:?}");
    assert_eq!(ip_of(&out, 12), NAT_IP, "source address");
    let port = port_of(&out, 0);
    assert!((30000..=30010).contains(&port), "source port {port}");
    assert_eq!(
        (ip_of(&out, 16), port_of(&out, 2)),
        (B, 22),
        "destination kept"
    );
    assert!(ipv4_checksums_verify(&syn()), "the input verifies");
    assert!(ipv4_checksums_verify(&out), "checksums after SNAT");

    // B answers the translated address and port.
    let answer = frame(
        PacketBuilder::ethernet2([2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 1])
            .ipv4(B, NAT_IP, 64)
            .tcp(22, port, 5000, 64000)
            .syn()
            .ack(101),
    );
    let (reply, back) = run(&mut t, &answer, &bare_nat(2), 2);
    assert_eq!(
        reply.state(),
        TRK | EST | RPL | CtState::DST_NAT,
        "{reply:?}"
    );
    assert_eq!((ip_of(&back, 16), port_of(&back, 2)), (A, 40000));
    assert_eq!((ip_of(&back, 12), port_of(&back, 0)), (B, 22));
    assert!(ipv4_checksums_verify(&back), "checksums after the reverse");

    // Without `nat` in the action the same answer is tracked, untouched.
    let (plain, same) = run(&mut t, &answer, &look(2), 3);
    assert_eq!(plain.state(), TRK | EST | RPL);
    assert_eq!(same, answer);
}

/// A port unreachable from B about a translated datagram: the outer
/// destination and the quoted source go back to A's, the ICMP checksum
/// is computed afresh, and it is `+rel`.
#[test]
fn an_icmp_error_about_a_translated_datagram_is_translated_inside_and_out() {
    let mut t = table();
    let udp = |src: [u8; 4], sport: u16| {
        let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4(src, B, 64)
            .udp(sport, 53);
        let mut v = Vec::with_capacity(b.size(4));
        b.write(&mut v, &[1, 2, 3, 4]).unwrap();
        v
    };
    let (first, out) = run(&mut t, &udp(A, 4444), &snat(0), 1);
    assert_eq!(first.state(), TRK | NEW | CtState::SRC_NAT);
    let port = port_of(&out, 0);
    // B's kernel quotes the datagram as it arrived: translated.
    let quote = udp(NAT_IP, port)[14..14 + 28].to_vec();
    let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 1])
        .ipv4(B, NAT_IP, 64)
        .icmpv4_raw(3, 3, [0; 4]);
    let mut err = Vec::with_capacity(b.size(quote.len()));
    b.write(&mut err, &quote).unwrap();
    let (rel, back) = run(&mut t, &err, &bare_nat(0), 2);
    assert_eq!(
        rel.state() & (TRK | CtState::RELATED),
        TRK | CtState::RELATED,
        "{rel:?}"
    );
    assert_eq!(ip_of(&back, 16), A, "outer destination");
    // The quote starts 8 bytes into the ICMP message (at 34).
    assert_eq!(back[42 + 12..42 + 16], A, "quoted source address");
    assert_eq!(
        u16::from_be_bytes([back[62], back[63]]),
        4444,
        "quoted port"
    );
    assert!(ipv4_checksums_verify(&back), "outer and ICMP checksums");
    assert_eq!(
        nfv_wire::checksum::data(&back[42..62]),
        0xffff,
        "quoted IPv4 header checksum"
    );
}

/// A port range of two: two connections take both ports, a third is
/// refused (+inv, counted), and none of the three packets is rewritten
/// wrongly.
#[test]
fn an_exhausted_nat_range_refuses_the_commit() {
    let mut t = table();
    let mut req = snat(4);
    if let Some(Nat::Src(r)) = &mut req.nat {
        r.ports = Some((30000, 30001));
    }
    let mut got = Vec::new();
    for sport in [1000u16, 1001, 1002] {
        let f = frame(seg(true, sport, 22).syn());
        let (fields, out) = run(&mut t, &f, &req, 1);
        got.push((fields.state(), port_of(&out, 0)));
    }
    assert_eq!(got[0].0, TRK | NEW | CtState::SRC_NAT);
    assert_eq!(got[1].0, TRK | NEW | CtState::SRC_NAT);
    assert_ne!(got[0].1, got[1].1, "two connections, two ports: {got:?}");
    assert_eq!(got[2], (TRK | INV, 1002), "the third: {got:?}");
    assert_eq!(t.counters().commit_refused, 1);
}

/// `ct(commit,force)` on the answer of a connection ends it and commits
/// one in the answer's direction: its next packet is `+est` without the
/// reply bit.
#[test]
fn force_turns_a_connection_round() {
    let mut t = table();
    run(&mut t, &syn(), &commit(1), 1);
    let (answer, _) = run(&mut t, &syn_ack(), &look(1), 2);
    assert_eq!(answer.state(), TRK | EST | RPL);
    let force = CtAction {
        zone: 1,
        commit: true,
        force: true,
        ..CtAction::default()
    };
    // B's next segment (a plain ACK: it may start a connection, as
    // OVS's and Linux's pick-up lets it).
    let b_ack = frame(seg(false, 22, 40000).ack(101));
    let (forced, _) = run(&mut t, &b_ack, &force, 3);
    assert_eq!(
        forced.state() & (RPL | INV),
        0,
        "committed in its own direction: {forced:?}"
    );
    assert_eq!(
        t.tracker().len(),
        1,
        "the old one ended, the new one stored"
    );
    let (later, _) = run(&mut t, &b_ack, &look(1), 4);
    assert_eq!(later.state() & (RPL | INV), 0, "{later:?}");
    let (a_side, _) = run(&mut t, &ack(), &look(1), 5);
    assert_eq!(a_side.state() & RPL, RPL, "A answers now: {a_side:?}");
}
