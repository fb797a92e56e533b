//! Packet builders shared by the integration tests.
#![allow(dead_code)]

use nfv_conntrack::key::proto;
use nfv_conntrack::{
    Config, ConnKey, ConnView, CtState, Family, PacketSummary, TcpFlags, TcpSegment, Tracker,
    Verdict,
};

pub const A: u128 = 0x0a00_0001;
pub const B: u128 = 0x0a00_0002;
pub const A6: u128 = 0x2001_0db8_0000_0000_0000_0000_0000_0001;
pub const B6: u128 = 0x2001_0db8_0000_0000_0000_0000_0000_0002;

pub const NEW: u8 = CtState::NEW;
pub const EST: u8 = CtState::ESTABLISHED;
pub const REL: u8 = CtState::RELATED;
pub const RPL: u8 = CtState::REPLY;
pub const INV: u8 = CtState::INVALID;

pub const SYN: u8 = TcpFlags::SYN;
pub const ACK: u8 = TcpFlags::ACK;
pub const FIN: u8 = TcpFlags::FIN;
pub const RST: u8 = TcpFlags::RST;
pub const PSH: u8 = TcpFlags::PSH;

/// A tracker that reports `+est` once the reply direction was seen (as
/// Linux does): the tables here spell out when packets turn `+est`, and
/// `Established::OnCommit` only moves that to the commit (tested apart).
pub fn tracker() -> Tracker {
    tracker_with(Config::default())
}

pub fn tracker_with(config: Config) -> Tracker {
    let config = Config {
        established: nfv_conntrack::Established::OnReply,
        ..config
    };
    Tracker::new(config).expect("test config is valid")
}

/// The original direction of the test TCP connection: A:40000 → B:80.
pub fn tcp_key(zone: u16) -> ConnKey {
    ConnKey::new(zone, Family::V4, proto::TCP, A, B, 40000, 80)
}

pub fn udp_key(zone: u16, sport: u16) -> ConnKey {
    ConnKey::new(zone, Family::V4, proto::UDP, A, B, sport, 53)
}

pub fn seg(flags: u8, seq: u32, ack: u32, len: u32) -> TcpSegment {
    TcpSegment {
        flags: TcpFlags(flags),
        seq,
        ack,
        window: 1000,
        wscale: None,
        payload_len: len,
    }
}

/// A TCP packet of `key`'s connection, in reply direction if `reply`.
pub fn tcp(key: ConnKey, reply: bool, seg: TcpSegment) -> PacketSummary {
    let key = if reply {
        key.reversed().expect("TCP keys reverse")
    } else {
        key
    };
    PacketSummary::tcp(key, seg)
}

pub fn bits(v: &Verdict) -> u8 {
    assert!(v.state.has(CtState::TRACKED), "every verdict is +trk");
    v.state.0 & !CtState::TRACKED
}

/// What a typical firewall flow does: track, and commit what is new.
pub fn track_commit(t: &mut Tracker, pkt: &PacketSummary, now_ms: u64) -> Verdict {
    let v = t.process(pkt, now_ms);
    if v.state.has(CtState::NEW) {
        t.commit(pkt, &v, now_ms).expect("commit of a +new packet");
    }
    v
}

pub fn only_conn(t: &Tracker) -> ConnView {
    let mut all = t.connections();
    let conn = all.next().expect("one connection");
    assert!(all.next().is_none(), "exactly one connection");
    conn
}
