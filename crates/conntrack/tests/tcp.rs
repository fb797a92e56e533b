//! TCP state machine and window tracking, as tables of packet sequences.

mod support;

use nfv_conntrack::{ProtoState, TcpPeer, TcpSegment, TcpState};
use support::*;

const ISN_A: u32 = 1000;
const ISN_B: u32 = 5000;

/// One packet of a scenario and what the tracker must say about it.
struct Step {
    reply: bool,
    seg: TcpSegment,
    want: u8,
    state: TcpState,
}

fn o(flags: u8, seq: u32, ack: u32, len: u32, want: u8, state: TcpState) -> Step {
    Step {
        reply: false,
        seg: seg(flags, seq, ack, len),
        want,
        state,
    }
}

fn r(flags: u8, seq: u32, ack: u32, len: u32, want: u8, state: TcpState) -> Step {
    Step {
        reply: true,
        seg: seg(flags, seq, ack, len),
        want,
        state,
    }
}

impl Step {
    fn win(mut self, window: u16) -> Self {
        self.seg.window = window;
        self
    }
    fn wscale(mut self, shift: u8) -> Self {
        self.seg.wscale = Some(shift);
        self
    }
}

fn handshake(a: u32, b: u32) -> Vec<Step> {
    use TcpState::*;
    vec![
        o(SYN, a, 0, 0, NEW, SynSent),
        r(SYN | ACK, b, a.wrapping_add(1), 0, EST | RPL, SynRecv),
        o(
            ACK,
            a.wrapping_add(1),
            b.wrapping_add(1),
            0,
            EST,
            Established,
        ),
    ]
}

fn tcp_state(t: &nfv_conntrack::Tracker) -> (TcpState, [TcpPeer; 2]) {
    match only_conn(t).proto {
        ProtoState::Tcp(conn) => (conn.state, conn.peers),
        other => panic!("not TCP: {other:?}"),
    }
}

/// Runs a scenario, committing `+new` packets, and checks every verdict and
/// the state after every packet. An invalid packet must leave the window
/// data exactly as it was.
fn run(name: &str, steps: &[Step]) {
    let mut t = tracker();
    let key = tcp_key(0);
    for (i, step) in steps.iter().enumerate() {
        let before = t.connections().next().map(|_| tcp_state(&t));
        let v = track_commit(&mut t, &tcp(key, step.reply, step.seg), i as u64);
        assert_eq!(bits(&v), step.want, "{name}: step {i} verdict");
        let (state, peers) = tcp_state(&t);
        assert_eq!(state, step.state, "{name}: step {i} state");
        if step.want & INV != 0 {
            assert_eq!(
                Some((state, peers)),
                before,
                "{name}: step {i} invalid changed state"
            );
        }
    }
    t.check_consistency().unwrap();
}

fn with_handshake(extra: Vec<Step>) -> Vec<Step> {
    let mut steps = handshake(ISN_A, ISN_B);
    steps.extend(extra);
    steps
}

#[test]
fn tcp_scenarios() {
    use TcpState::*;
    let (a, b) = (ISN_A + 1, ISN_B + 1);
    let wrap = u32::MAX - 50;
    let (wa, wb) = (wrap.wrapping_add(1), ISN_B + 1);
    let scenarios: Vec<(&str, Vec<Step>)> = vec![
        ("three-way handshake", handshake(ISN_A, ISN_B)),
        (
            "data both ways",
            with_handshake(vec![
                o(ACK | PSH, a, b, 100, EST, Established),
                r(ACK | PSH, b, a + 100, 200, EST | RPL, Established),
                o(ACK, a + 100, b + 200, 0, EST, Established),
                // A retransmission of data already seen is still in window.
                o(ACK | PSH, a, b + 200, 100, EST, Established),
            ]),
        ),
        (
            "FIN, ACK, FIN, ACK to TIME_WAIT",
            with_handshake(vec![
                o(FIN | ACK, a, b, 0, EST, FinWait),
                r(ACK, b, a + 1, 0, EST | RPL, CloseWait),
                r(FIN | ACK, b, a + 1, 0, EST | RPL, LastAck),
                o(ACK, a + 1, b + 1, 0, EST, TimeWait),
                // The last ACK retransmitted.
                o(ACK, a + 1, b + 1, 0, EST, TimeWait),
            ]),
        ),
        (
            "simultaneous FINs",
            with_handshake(vec![
                o(FIN | ACK, a, b, 0, EST, FinWait),
                r(FIN | ACK, b, a, 0, EST | RPL, LastAck),
                o(ACK, a + 1, b + 1, 0, EST, LastAck),
                r(ACK, b + 1, a + 1, 0, EST | RPL, TimeWait),
            ]),
        ),
        (
            "RST in window",
            with_handshake(vec![r(RST | ACK, b, a, 0, EST | RPL, Close)]),
        ),
        (
            "RST out of window",
            with_handshake(vec![r(RST | ACK, b + 10_000_000, a, 0, INV, Established)]),
        ),
        (
            "RST answering the SYN",
            vec![
                o(SYN, ISN_A, 0, 0, NEW, SynSent),
                r(RST | ACK, 0, a, 0, EST | RPL, Close),
            ],
        ),
        (
            "RST not acknowledging the SYN",
            vec![
                o(SYN, ISN_A, 0, 0, NEW, SynSent),
                r(RST | ACK, 0, a + 7, 0, INV, SynSent),
            ],
        ),
        (
            "retransmitted SYN",
            vec![
                o(SYN, ISN_A, 0, 0, NEW, SynSent),
                o(SYN, ISN_A, 0, 0, NEW, SynSent),
                r(SYN | ACK, ISN_B, a, 0, EST | RPL, SynRecv),
                r(SYN | ACK, ISN_B, a, 0, EST | RPL, SynRecv),
                o(ACK, a, b, 0, EST, Established),
            ],
        ),
        (
            "SYN/ACK acknowledging the wrong sequence",
            vec![
                o(SYN, ISN_A, 0, 0, NEW, SynSent),
                r(SYN | ACK, ISN_B, a + 9, 0, INV, SynSent),
            ],
        ),
        (
            "simultaneous open",
            vec![
                o(SYN, ISN_A, 0, 0, NEW, SynSent),
                r(SYN, ISN_B, 0, 0, EST | RPL, SynSent2),
                o(SYN | ACK, ISN_A, b, 0, EST, SynRecv),
                r(SYN | ACK, ISN_B, a, 0, EST | RPL, SynRecv),
                o(ACK, a, b, 0, EST, Established),
            ],
        ),
        (
            "SYN/ACK again after the handshake (final ACK lost)",
            with_handshake(vec![r(SYN | ACK, ISN_B, a, 0, EST | RPL, Established)]),
        ),
        (
            "data beyond the receiver's window",
            with_handshake(vec![
                o(ACK | PSH, a + 5000, b, 100, INV, Established),
                o(ACK | PSH, a, b, 1001, INV, Established),
                o(ACK | PSH, a, b, 1000, EST, Established),
            ]),
        ),
        (
            "data more than a window old",
            with_handshake(vec![
                o(ACK | PSH, a, b, 1000, EST, Established),
                o(ACK | PSH, a.wrapping_sub(5000), b, 100, INV, Established),
            ]),
        ),
        (
            "acknowledging data never sent",
            with_handshake(vec![o(ACK, a, b + 100, 0, INV, Established)]),
        ),
        (
            "invalid flag combinations",
            with_handshake(vec![
                o(SYN | FIN, a, b, 0, INV, Established),
                o(FIN, a, b, 0, INV, Established),
                o(PSH, a, b, 0, INV, Established),
                o(0, a, b, 0, INV, Established),
                o(SYN, a + 99, 0, 0, INV, Established),
            ]),
        ),
        (
            "window scaling agreed: scaled window admits 100 kB",
            vec![
                o(SYN, ISN_A, 0, 0, NEW, SynSent).wscale(7),
                r(SYN | ACK, ISN_B, a, 0, EST | RPL, SynRecv).wscale(7),
                o(ACK, a, b, 0, EST, Established),
                r(ACK | PSH, b, a, 100_000, EST | RPL, Established),
            ],
        ),
        (
            "window scaling offered by one side only: not applied",
            vec![
                o(SYN, ISN_A, 0, 0, NEW, SynSent).wscale(7),
                r(SYN | ACK, ISN_B, a, 0, EST | RPL, SynRecv),
                o(ACK, a, b, 0, EST, Established),
                r(ACK | PSH, b, a, 100_000, INV, Established),
                r(ACK | PSH, b, a, 1000, EST | RPL, Established),
            ],
        ),
        (
            "sequence numbers wrap at 2^32",
            vec![
                o(SYN, wrap, 0, 0, NEW, SynSent).win(60000),
                r(SYN | ACK, ISN_B, wa, 0, EST | RPL, SynRecv).win(60000),
                o(ACK, wa, wb, 0, EST, Established).win(60000),
                o(ACK | PSH, wa, wb, 500, EST, Established),
                r(ACK, wb, wa.wrapping_add(500), 0, EST | RPL, Established).win(60000),
                o(ACK | PSH, wa.wrapping_add(500), wb, 500, EST, Established),
                o(
                    ACK | PSH,
                    wa.wrapping_add(500).wrapping_add(70_000),
                    wb,
                    10,
                    INV,
                    Established,
                ),
            ],
        ),
    ];
    for (name, steps) in &scenarios {
        run(name, steps);
    }
}

#[test]
fn window_data_advances_only_on_valid_segments() {
    let mut t = tracker();
    let key = tcp_key(0);
    for step in handshake(ISN_A, ISN_B) {
        track_commit(&mut t, &tcp(key, step.reply, step.seg), 0);
    }
    let (_, before) = tcp_state(&t);
    assert_eq!(before[0].end, ISN_A + 1, "the SYN counts one");
    t.process(
        &tcp(key, false, seg(ACK | PSH, ISN_A + 1, ISN_B + 1, 300)),
        1,
    );
    let (_, after) = tcp_state(&t);
    assert_eq!(after[0].end, ISN_A + 301, "end moves by the payload");
    assert_eq!(after[1].max_win, 1000, "the receiver's window");
}

#[test]
fn first_packets_that_may_and_may_not_open_a_connection() {
    let cases = [
        ("SYN", SYN, NEW),
        ("plain ACK is picked up", ACK, NEW),
        ("SYN/ACK", SYN | ACK, INV),
        ("RST", RST | ACK, INV),
        ("FIN", FIN | ACK, INV),
        ("no flags", 0, INV),
    ];
    for (name, flags, want) in cases {
        let mut t = tracker();
        let pkt = tcp(tcp_key(0), false, seg(flags, ISN_A, 1, 0));
        assert_eq!(bits(&t.process(&pkt, 0)), want, "{name}");
        assert!(t.is_empty(), "{name}: process alone creates nothing");
    }
}

#[test]
fn pickup_can_be_refused() {
    let config = nfv_conntrack::Config {
        tcp_pickup: false,
        ..Default::default()
    };
    let mut t = tracker_with(config);
    let v = t.process(&tcp(tcp_key(0), false, seg(ACK, ISN_A, 1, 0)), 0);
    assert_eq!(bits(&v), INV);
}

#[test]
fn syn_on_a_closed_connection_replaces_it() {
    let mut t = tracker();
    let key = tcp_key(0);
    let mut steps = handshake(ISN_A, ISN_B);
    steps.push(r(
        RST | ACK,
        ISN_B + 1,
        ISN_A + 1,
        0,
        EST | RPL,
        TcpState::Close,
    ));
    for step in &steps {
        track_commit(&mut t, &tcp(key, step.reply, step.seg), 0);
    }
    let old = only_conn(&t).id;
    let syn = tcp(key, false, seg(SYN, 90_000, 0, 0));
    let v = t.process(&syn, 1);
    assert_eq!(bits(&v), NEW);
    assert_eq!(
        tcp_state(&t).0,
        TcpState::Close,
        "not replaced before commit"
    );
    let new = t.commit(&syn, &v, 1).unwrap();
    assert_ne!(new, old);
    assert_eq!(tcp_state(&t).0, TcpState::SynSent);
    assert!(t.get(old).is_none(), "the old handle is stale");
    t.check_consistency().unwrap();
}
