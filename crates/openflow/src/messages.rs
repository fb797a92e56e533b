//! Encoders of the messages the switch sends that are more than a few
//! fields (flow stats, flow removed, port descriptions), shared by the
//! session (replies) and the agent (asynchronous messages).

use crate::wire::{Writer, msg};
use crate::{actions, oxm, switch::PortInfo};
use nfv_flow::Rule;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

/// `ofp_flow_removed_reason`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RemovedReason {
    Idle = 0,
    Hard = 1,
    Delete = 2,
    GroupDelete = 3,
    MeterDelete = 4,
}

impl From<nfv_flow::Expiry> for RemovedReason {
    fn from(e: nfv_flow::Expiry) -> RemovedReason {
        match e {
            nfv_flow::Expiry::Idle => RemovedReason::Idle,
            nfv_flow::Expiry::Hard => RemovedReason::Hard,
        }
    }
}

/// A rule's identity: its priority and match (which holds its table).
pub(crate) type RuleKey = (u16, nfv_flow::Match);

/// The rule's identity: priority and match (the table is in the match).
pub(crate) fn rule_key(r: &Rule) -> RuleKey {
    (r.spec.priority, r.spec.matches)
}

/// A rule's match without its table (OpenFlow carries the table apart).
pub(crate) fn match_of(r: &Rule) -> nfv_flow::Match {
    let mut m = r.spec.matches;
    m.key.set_table(0);
    m.mask.set_table(0);
    m
}

fn duration(d: std::time::Duration) -> (u32, u32) {
    (
        d.as_secs().min(u64::from(u32::MAX)) as u32,
        d.subsec_nanos(),
    )
}

/// `OFPT_FLOW_REMOVED` for `rule`.
pub fn flow_removed(rule: &Arc<Rule>, why: RemovedReason) -> Vec<u8> {
    let mut w = Writer::message(msg::FLOW_REMOVED, 0);
    w.u64(rule.spec.cookie);
    w.u16(rule.spec.priority);
    w.u8(why as u8);
    w.u8(rule.spec.matches.key.table());
    let (s, ns) = duration(rule.created.elapsed());
    w.u32(s);
    w.u32(ns);
    w.u16(rule.spec.timeouts.idle);
    w.u16(rule.spec.timeouts.hard);
    w.u64(rule.stats.packets.load(Relaxed));
    w.u64(rule.stats.bytes.load(Relaxed));
    oxm::encode(&mut w, &match_of(rule), rule.spec.tun_id);
    w.finish()
}

/// One `ofp_flow_stats` entry; `flags` are those the rule was added with.
pub fn flow_stats_entry(w: &mut Writer, rule: &Rule, flags: u16) {
    let start = w.len();
    w.u16(0);
    w.u8(rule.spec.matches.key.table());
    w.u8(0);
    let (s, ns) = duration(rule.created.elapsed());
    w.u32(s);
    w.u32(ns);
    w.u16(rule.spec.priority);
    w.u16(rule.spec.timeouts.idle);
    w.u16(rule.spec.timeouts.hard);
    w.u16(flags);
    w.zeros(4);
    w.u64(rule.spec.cookie);
    w.u64(rule.stats.packets.load(Relaxed));
    w.u64(rule.stats.bytes.load(Relaxed));
    let m = match_of(rule);
    oxm::encode(w, &m, rule.spec.tun_id);
    actions::encode_instructions(w, &rule.spec.actions, &m);
    w.patch_len(start, 0);
}

/// `OFPPC_*`/`OFPPS_*` bits used.
const PORT_STATE_LINK_DOWN: u32 = 1;
const PORT_STATE_LIVE: u32 = 4;
/// `OFPPF_10GB_FD | OFPPF_OTHER`-free: a virtual port says 10 Gb/s full
/// duplex, copper, as OVS's virtual ports do.
const PORT_FEATURES: u32 = 1 << 6 | 1 << 11;

/// One `ofp_port` (64 bytes).
pub fn port_desc(w: &mut Writer, p: &PortInfo) {
    w.u32(u32::from(p.no));
    w.zeros(4);
    w.bytes(&p.mac);
    w.zeros(2);
    w.fixed_str(&p.name, 16);
    w.u32(0); // config: nothing administratively down
    w.u32(if p.live {
        PORT_STATE_LIVE
    } else {
        PORT_STATE_LINK_DOWN
    });
    w.u32(PORT_FEATURES); // curr
    w.u32(0); // advertised
    w.u32(0); // supported
    w.u32(0); // peer
    w.u32(10_000_000); // curr_speed, kbps
    w.u32(0); // max_speed
}

/// One `ofp_port_stats` (112 bytes).
pub fn port_stats(w: &mut Writer, p: &PortInfo) {
    w.u32(u32::from(p.no));
    w.zeros(4);
    for v in [
        p.rx_packets,
        p.tx_packets,
        p.rx_bytes,
        p.tx_bytes,
        p.rx_dropped,
        p.tx_dropped,
        p.rx_errors,
        p.tx_errors,
    ] {
        w.u64(v);
    }
    // rx_frame_err, rx_over_err, rx_crc_err, collisions: none exist.
    w.zeros(4 * 8);
    let (s, ns) = duration(p.duration);
    w.u32(s);
    w.u32(ns);
}

/// `OFPT_PORT_STATUS` (reason 0 add, 1 delete, 2 modify).
pub fn port_status(reason: u8, p: &PortInfo) -> Vec<u8> {
    let mut w = Writer::message(msg::PORT_STATUS, 0);
    w.u8(reason);
    w.zeros(7);
    port_desc(&mut w, p);
    w.finish()
}

/// `OFPT_PACKET_IN` (unbuffered): the match carries the in_port.
pub fn packet_in(p: &crate::switch::PacketIn<'_>) -> Vec<u8> {
    let mut w = Writer::message(msg::PACKET_IN, 0);
    w.u32(crate::wire::NO_BUFFER);
    w.u16(p.total_len);
    w.u8(p.reason);
    w.u8(p.table);
    w.u64(p.cookie);
    // The match: in_port alone (OXM type, 12 bytes, padded to 16).
    let in_port = if p.in_port == crate::wire::FROM_CONTROLLER {
        crate::wire::port::CONTROLLER
    } else {
        u32::from(p.in_port)
    };
    w.u16(oxm::MATCH_TYPE_OXM);
    w.u16(12);
    w.u16(oxm::CLASS_BASIC);
    w.u8(0);
    w.u8(4);
    w.u32(in_port);
    w.zeros(4);
    w.zeros(2);
    w.bytes(p.data);
    w.finish()
}
