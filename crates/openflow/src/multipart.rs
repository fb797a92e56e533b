//! `MULTIPART_REQUEST`s (OpenFlow 1.3 §7.3.5): descriptions and counters
//! of the switch, its rules, ports, groups and meters. A reply too big
//! for one message goes out in several, all but the last flagged
//! `REPLY_MORE`.

use crate::agent::Agent;
use crate::messages;
use crate::mods::{self, Selection};
use crate::wire::{self, OfError, Reader, Writer, err, msg, port};
use nfv_flow::Action;
use nfv_flow::group::GroupType;
use nfv_flow::meter::MeterUnit;
use std::sync::atomic::Ordering::Relaxed;

mod kind {
    pub const DESC: u16 = 0;
    pub const FLOW: u16 = 1;
    pub const AGGREGATE: u16 = 2;
    pub const TABLE: u16 = 3;
    pub const PORT_STATS: u16 = 4;
    pub const QUEUE: u16 = 5;
    pub const GROUP: u16 = 6;
    pub const GROUP_DESC: u16 = 7;
    pub const GROUP_FEATURES: u16 = 8;
    pub const METER: u16 = 9;
    pub const METER_CONFIG: u16 = 10;
    pub const METER_FEATURES: u16 = 11;
    pub const TABLE_FEATURES: u16 = 12;
    pub const PORT_DESC: u16 = 13;
}

/// `OFPMPF_REPLY_MORE` / `OFPMPF_REQ_MORE`.
const MORE: u16 = 1;
/// Room for entries in one reply (the length field is 16 bits).
const ROOM: usize = wire::MAX_MESSAGE - 16;

/// Collects a reply's entries and cuts them into messages.
struct Reply {
    xid: u32,
    kind: u16,
    entries: Vec<Vec<u8>>,
}

impl Reply {
    fn new(xid: u32, kind: u16) -> Reply {
        Reply {
            xid,
            kind,
            entries: Vec::new(),
        }
    }

    fn entry(&mut self, f: impl FnOnce(&mut Writer)) {
        let mut w = Writer::default();
        f(&mut w);
        self.entries.push(w.buf);
    }

    fn finish(self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut body: Vec<u8> = Vec::new();
        let message = |body: &[u8], more: bool| {
            let mut w = Writer::message(msg::MULTIPART_REPLY, self.xid);
            w.u16(self.kind);
            w.u16(if more { MORE } else { 0 });
            w.zeros(4);
            w.bytes(body);
            w.finish()
        };
        for e in &self.entries {
            if !body.is_empty() && body.len() + e.len() > ROOM {
                out.push(message(&body, true));
                body.clear();
            }
            body.extend_from_slice(e);
        }
        out.push(message(&body, false));
        out
    }
}

/// Answers a `MULTIPART_REQUEST` body (after the header).
pub fn answer(agent: &Agent, xid: u32, body: &[u8]) -> Result<Vec<Vec<u8>>, OfError> {
    let mut r = Reader::new(body);
    let kind = r.u16()?;
    let flags = r.u16()?;
    r.skip(4)?;
    if flags & MORE != 0 {
        return Err(err::BAD_MULTIPART);
    }
    let mut reply = Reply::new(xid, kind);
    let rp = &mut reply;
    match kind {
        kind::DESC => desc(agent, rp),
        kind::FLOW => flows(agent, &mut r, rp)?,
        kind::AGGREGATE => aggregate(agent, &mut r, rp)?,
        kind::TABLE => tables(agent, rp),
        kind::PORT_STATS => {
            let want = r.u32()?;
            for p in agent.switch.ports() {
                if want == port::ANY || want == u32::from(p.no) {
                    rp.entry(|w| messages::port_stats(w, &p));
                }
            }
        }
        kind::PORT_DESC => {
            for p in agent.switch.ports() {
                rp.entry(|w| messages::port_desc(w, &p));
            }
        }
        kind::QUEUE => {} // no queues
        kind::GROUP_DESC => {
            for g in agent.table.snapshot().groups.values() {
                rp.entry(|w| group_desc(w, g));
            }
        }
        kind::GROUP => groups(agent, r.u32()?, rp),
        kind::GROUP_FEATURES => rp.entry(group_features),
        kind::METER_CONFIG => {
            let want = r.u32()?;
            for m in agent.table.snapshot().meters.values() {
                if want == wire::METER_ALL || want == m.id {
                    rp.entry(|w| meter_config(w, m));
                }
            }
        }
        kind::METER => meters(agent, r.u32()?, rp),
        kind::METER_FEATURES => rp.entry(meter_features),
        kind::TABLE_FEATURES => {
            if !r.is_empty() {
                // A body sets the tables' features: the pipeline is not
                // reconfigurable that way.
                return Err(err::TABLE_FEATURES_EPERM);
            }
            for t in 0..=254u8 {
                rp.entry(|w| table_features(w, t));
            }
        }
        _ => return Err(err::BAD_MULTIPART),
    }
    Ok(reply.finish())
}

fn desc(agent: &Agent, reply: &mut Reply) {
    let d = agent.switch.description();
    reply.entry(|w| {
        w.fixed_str(&d.manufacturer, 256);
        w.fixed_str(&d.hardware, 256);
        w.fixed_str(&d.software, 256);
        w.fixed_str(&d.serial, 32);
        w.fixed_str(&d.datapath, 256);
    });
}

fn flows(agent: &Agent, r: &mut Reader<'_>, reply: &mut Reply) -> Result<(), OfError> {
    let sel = mods::decode_stats_selection(r)?;
    for rule in selected(agent, &sel) {
        let flags = mods::flags_of(agent, &rule);
        reply.entry(|w| messages::flow_stats_entry(w, &rule, flags));
    }
    Ok(())
}

fn aggregate(agent: &Agent, r: &mut Reader<'_>, reply: &mut Reply) -> Result<(), OfError> {
    let sel = mods::decode_stats_selection(r)?;
    let rules = selected(agent, &sel);
    let packets: u64 = rules.iter().map(|r| r.stats.packets.load(Relaxed)).sum();
    let bytes: u64 = rules.iter().map(|r| r.stats.bytes.load(Relaxed)).sum();
    reply.entry(|w| {
        w.u64(packets);
        w.u64(bytes);
        w.u32(rules.len() as u32);
        w.zeros(4);
    });
    Ok(())
}

/// Every table (0-254): its rules and what they matched.
fn tables(agent: &Agent, reply: &mut Reply) {
    let rules = agent.table.snapshot().classifier.rules();
    for t in 0..=254u8 {
        let of_t = rules.iter().filter(|r| r.spec.matches.key.table() == t);
        let (n, matched) = of_t.fold((0u32, 0u64), |(n, m), r| {
            (n + 1, m + r.stats.packets.load(Relaxed))
        });
        reply.entry(|w| {
            w.u8(t);
            w.zeros(3);
            w.u32(n);
            // Lookups are not counted per table; every lookup that found
            // a rule is one the rules counted.
            w.u64(matched);
            w.u64(matched);
        });
    }
}

fn groups(agent: &Agent, want: u32, reply: &mut Reply) {
    let t = agent.table.snapshot();
    let rules = t.classifier.rules();
    for g in t.groups.values() {
        if want != wire::GROUP_ALL && want != g.id {
            continue;
        }
        let refs = rules
            .iter()
            .filter(|r| r.spec.actions.contains(&Action::Group(g.id)))
            .count();
        reply.entry(|w| group_stats(w, g, refs as u32));
    }
}

fn group_features(w: &mut Writer) {
    w.u32(0b1111); // all, select, indirect, fast_failover
    w.u32(1); // OFPGFC_SELECT_WEIGHT
    for _ in 0..4 {
        w.u32(nfv_flow::action::MAX_GROUP_ID);
    }
    for _ in 0..4 {
        w.u32(ACTIONS_SUPPORTED);
    }
}

fn meters(agent: &Agent, want: u32, reply: &mut Reply) {
    let t = agent.table.snapshot();
    let rules = t.classifier.rules();
    for m in t.meters.values() {
        if want != wire::METER_ALL && want != m.id {
            continue;
        }
        let flows = rules
            .iter()
            .filter(|r| r.spec.actions.contains(&Action::Meter(m.id)))
            .count();
        reply.entry(|w| {
            w.u32(m.id);
            w.u16(56);
            w.zeros(6);
            w.u32(flows as u32);
            w.u64(m.packets_in.load(Relaxed));
            w.u64(m.bytes_in.load(Relaxed));
            w.u32(0); // duration is not kept
            w.u32(0);
            w.u64(m.band_packets.load(Relaxed));
            w.u64(m.band_bytes.load(Relaxed));
        });
    }
}

fn meter_features(w: &mut Writer) {
    w.u32(nfv_flow::action::MAX_METER_ID);
    w.u32(1 << 1); // OFPMBT_DROP
    w.u32(0b1111); // kbps, pktps, burst, stats
    w.u8(1); // bands per meter
    w.u8(0); // colors
    w.zeros(2);
}

/// Bit per `ofp_action_type` the buckets take.
const ACTIONS_SUPPORTED: u32 = 1 << 0 | 1 << 17 | 1 << 18 | 1 << 23 | 1 << 24 | 1 << 25;

fn selected(agent: &Agent, sel: &Selection) -> Vec<std::sync::Arc<nfv_flow::Rule>> {
    let mut rules: Vec<_> = agent
        .table
        .snapshot()
        .classifier
        .rules()
        .into_iter()
        .filter(|r| sel.picks(r))
        .collect();
    rules.sort_by_key(|r| {
        (
            r.spec.matches.key.table(),
            std::cmp::Reverse(r.spec.priority),
            r.seq,
        )
    });
    rules
}

fn group_desc(w: &mut Writer, g: &nfv_flow::Group) {
    let start = w.len();
    w.u16(0);
    w.u8(match g.kind {
        GroupType::All => 0,
        GroupType::Select => 1,
        GroupType::Indirect => 2,
        GroupType::FastFailover => 3,
    });
    w.u8(0);
    w.u32(g.id);
    for b in &g.buckets {
        let bs = w.len();
        w.u16(0);
        w.u16(if g.kind == GroupType::Select {
            b.weight
        } else {
            0
        });
        w.u32(b.watch_port.map_or(port::ANY, u32::from));
        w.u32(wire::GROUP_ANY);
        w.zeros(4);
        crate::actions::encode_actions(w, &b.actions, &nfv_flow::Match::ANY);
        w.patch_len(bs, 0);
    }
    w.patch_len(start, 0);
}

fn group_stats(w: &mut Writer, g: &nfv_flow::Group, refs: u32) {
    let start = w.len();
    w.u16(0);
    w.zeros(2);
    w.u32(g.id);
    w.u32(refs);
    w.zeros(4);
    let packets: u64 = g.buckets.iter().map(|b| b.packets.load(Relaxed)).sum();
    let bytes: u64 = g.buckets.iter().map(|b| b.bytes.load(Relaxed)).sum();
    w.u64(packets);
    w.u64(bytes);
    w.u32(0); // duration is not kept
    w.u32(0);
    for b in &g.buckets {
        w.u64(b.packets.load(Relaxed));
        w.u64(b.bytes.load(Relaxed));
    }
    w.patch_len(start, 0);
}

fn meter_config(w: &mut Writer, m: &nfv_flow::meter::Meter) {
    let start = w.len();
    w.u16(0);
    let unit = match m.unit {
        MeterUnit::Kbps => 1,
        MeterUnit::Pktps => 2,
    };
    w.u16(unit | if m.burst { 4 } else { 0 } | 8);
    w.u32(m.id);
    w.u16(1); // OFPMBT_DROP
    w.u16(16);
    w.u32(m.rate.min(u64::from(u32::MAX)) as u32);
    w.u32(if m.burst {
        m.burst_size.min(u64::from(u32::MAX)) as u32
    } else {
        0
    });
    w.zeros(4);
    w.patch_len(start, 0);
}

/// One table's `ofp_table_features`: every table takes the same
/// matches, instructions and actions; a table goes on to later ones only.
fn table_features(w: &mut Writer, t: u8) {
    let start = w.len();
    w.u16(0);
    w.u8(t);
    w.zeros(5);
    w.fixed_str(&format!("table{t}"), 32);
    w.u64(u64::MAX); // metadata_match
    w.u64(u64::MAX); // metadata_write
    w.u32(0); // config
    w.u32(1_000_000); // max_entries: bounded by memory, not a table size
    let prop = |w: &mut Writer, kind: u16, body: &dyn Fn(&mut Writer)| {
        let ps = w.len();
        w.u16(kind);
        w.u16(0);
        body(w);
        w.patch_len(ps, 2);
        w.pad8();
    };
    // goto_table, write_metadata, apply_actions, clear_actions, meter.
    let instructions: &[u16] = if t < 254 {
        &[1, 2, 4, 5, 6]
    } else {
        &[2, 4, 5, 6]
    };
    for kind in [0u16, 1] {
        prop(w, kind, &|w| {
            for i in instructions {
                w.u16(*i);
                w.u16(4);
            }
        });
    }
    for kind in [2u16, 3] {
        prop(w, kind, &|w| {
            for n in t.saturating_add(1)..=254 {
                if n > t {
                    w.u8(n);
                }
            }
        });
    }
    // write_actions is refused: no actions, no set-fields to write.
    for kind in [4u16, 5, 12, 13] {
        prop(w, kind, &|_| {});
    }
    for kind in [6u16, 7] {
        prop(w, kind, &|w| {
            for a in [0u16, 17, 18, 22, 23, 24, 25] {
                w.u16(a);
                w.u16(4);
            }
        });
    }
    prop(w, 8, &|w| {
        for (h, maskable) in crate::oxm::match_headers() {
            // OXM_HASMASK marks the fields a mask may go with.
            w.u32(if maskable { h | 1 << 8 } else { h });
            let _ = maskable;
        }
    });
    prop(w, 10, &|w| {
        for (h, _) in crate::oxm::match_headers() {
            w.u32(h);
        }
    });
    for kind in [14u16, 15] {
        prop(w, kind, &|w| {
            for h in crate::oxm::set_field_headers() {
                w.u32(h);
            }
        });
    }
    w.patch_len(start, 0);
}
