//! `FLOW_MOD`, `GROUP_MOD` and `METER_MOD`: decoded completely, checked
//! as `ctl` checks the same edit, then applied to the flow table in one
//! generation — or refused with the spec's error and nothing changed.

use crate::actions::{self, Context};
use crate::agent::{Agent, lock};
use crate::messages::{RemovedReason, rule_key};
use crate::oxm;
use crate::wire::{self, GROUP_ANY, NO_BUFFER, OfError, Reader, err, port};
use nfv_flow::group::{Bucket, GroupType};
use nfv_flow::meter::{Meter, MeterUnit};
use nfv_flow::table::{GroupError, MeterError};
use nfv_flow::{Action, FlowSpec, Match, Rule, Timeouts};
use std::sync::Arc;

/// `ofp_flow_mod_command`.
const ADD: u8 = 0;
const MODIFY: u8 = 1;
const MODIFY_STRICT: u8 = 2;
const DELETE: u8 = 3;
const DELETE_STRICT: u8 = 4;

/// `ofp_flow_mod_flags`.
pub const SEND_FLOW_REM: u16 = 1;
const CHECK_OVERLAP: u16 = 2;
const RESET_COUNTS: u16 = 4;
const NO_PKT_COUNTS: u16 = 8;
const NO_BYT_COUNTS: u16 = 16;
/// Largest table number (`table=0..254`).
const MAX_TABLE: u8 = 254;

/// Which rules a modify, delete or stats request selects: OpenFlow's
/// table (or all), match (non-strict: covered by it; strict: exactly it,
/// with the priority), cookie under a mask, and output port and group.
pub struct Selection {
    pub table: u8,
    pub matches: Match,
    pub tun_id: Option<u32>,
    pub strict_priority: Option<u16>,
    pub cookie: u64,
    pub cookie_mask: u64,
    pub out_port: u32,
    pub out_group: u32,
}

impl Selection {
    pub fn picks(&self, r: &Rule) -> bool {
        let t = r.spec.matches.key.table();
        if self.table != wire::TABLE_ALL && t != self.table {
            return false;
        }
        let m = crate::messages::match_of(r);
        let matched = match self.strict_priority {
            Some(p) => r.spec.priority == p && m == self.matches && r.spec.tun_id == self.tun_id,
            None => {
                m.is_covered_by(&self.matches)
                    && (self.tun_id.is_none() || r.spec.tun_id == self.tun_id)
            }
        };
        matched
            && r.spec.cookie & self.cookie_mask == self.cookie & self.cookie_mask
            && (self.out_port == port::ANY || outputs_to(&r.spec.actions, self.out_port))
            && (self.out_group == GROUP_ANY
                || r.spec.actions.contains(&Action::Group(self.out_group)))
    }
}

fn outputs_to(actions: &[Action], p: u32) -> bool {
    actions.iter().any(|a| match a {
        Action::Output(o) => u32::from(*o) == p,
        Action::InPort => p == port::IN_PORT,
        Action::Normal => p == port::NORMAL,
        Action::Flood => p == port::FLOOD,
        Action::All => p == port::ALL,
        _ => false,
    })
}

/// The part a flow stats or aggregate request shares with a delete: table,
/// out_port, out_group, cookie, cookie mask, match (OpenFlow 1.3
/// `ofp_flow_stats_request`).
pub fn decode_stats_selection(r: &mut Reader<'_>) -> Result<Selection, OfError> {
    let table = r.u8()?;
    r.skip(3)?;
    let out_port = r.u32()?;
    let out_group = r.u32()?;
    r.skip(4)?;
    let cookie = r.u64()?;
    let cookie_mask = r.u64()?;
    let d = oxm::decode(r)?;
    Ok(Selection {
        table,
        matches: d.matches,
        tun_id: d.tun_id,
        strict_priority: None,
        cookie,
        cookie_mask,
        out_port,
        out_group,
    })
}

/// A `FLOW_MOD`'s fixed part and match, decoded.
struct FlowMod {
    cookie: u64,
    cookie_mask: u64,
    table: u8,
    command: u8,
    timeouts: Timeouts,
    priority: u16,
    buffer_id: u32,
    out_port: u32,
    out_group: u32,
    flags: u16,
    matches: oxm::Decoded,
}

fn decode_flow_mod(r: &mut Reader<'_>) -> Result<FlowMod, OfError> {
    let cookie = r.u64()?;
    let cookie_mask = r.u64()?;
    let table = r.u8()?;
    let command = r.u8()?;
    let idle = r.u16()?;
    let hard = r.u16()?;
    let priority = r.u16()?;
    let buffer_id = r.u32()?;
    let out_port = r.u32()?;
    let out_group = r.u32()?;
    let flags = r.u16()?;
    r.skip(2)?;
    let matches = oxm::decode(r)?;
    let known = SEND_FLOW_REM | CHECK_OVERLAP | RESET_COUNTS | NO_PKT_COUNTS | NO_BYT_COUNTS;
    if flags & !known != 0 {
        return Err(err::FLOW_MOD_BAD_FLAGS);
    }
    if matches!(command, ADD | MODIFY | MODIFY_STRICT) && table > MAX_TABLE {
        return Err(err::FLOW_MOD_BAD_TABLE_ID);
    }
    Ok(FlowMod {
        cookie,
        cookie_mask,
        table,
        command,
        timeouts: Timeouts { idle, hard },
        priority,
        buffer_id,
        out_port,
        out_group,
        flags,
        matches,
    })
}

impl FlowMod {
    /// The rules a modify or delete acts on (out_port and out_group
    /// filter deletes only).
    fn selection(&self) -> Selection {
        let delete = matches!(self.command, DELETE | DELETE_STRICT);
        Selection {
            table: self.table,
            matches: self.matches.matches,
            tun_id: self.matches.tun_id,
            strict_priority: matches!(self.command, MODIFY_STRICT | DELETE_STRICT)
                .then_some(self.priority),
            cookie: self.cookie,
            cookie_mask: self.cookie_mask,
            out_port: if delete { self.out_port } else { port::ANY },
            out_group: if delete { self.out_group } else { GROUP_ANY },
        }
    }

    /// The instructions (the rest of `r`), as an action list.
    fn actions(&self, r: &mut Reader<'_>) -> Result<Vec<Action>, OfError> {
        let actions = actions::decode_instructions(
            r,
            Context {
                matches: Some(&self.matches.matches),
                table: self.table,
                packet_out: false,
            },
        )?;
        if self.buffer_id != NO_BUFFER {
            return Err(err::BUFFER_UNKNOWN);
        }
        Ok(actions)
    }
}

/// Handles a `FLOW_MOD` body (after the header).
pub fn flow_mod(agent: &Agent, body: &[u8]) -> Result<(), OfError> {
    let mut r = Reader::new(body);
    let fm = decode_flow_mod(&mut r)?;
    match fm.command {
        ADD => {
            let actions = fm.actions(&mut r)?;
            add(agent, &fm, actions)
        }
        MODIFY | MODIFY_STRICT => {
            let actions = fm.actions(&mut r)?;
            check_actions(agent, &actions)?;
            let select = fm.selection();
            agent
                .table
                .modify_flows(|r| select.picks(r), &actions, fm.flags & RESET_COUNTS != 0)
                .map_err(group_error)?;
            Ok(())
        }
        DELETE | DELETE_STRICT => {
            let select = fm.selection();
            let gone = agent.table.del_flows_where(|r| select.picks(r));
            removed(agent, &gone, RemovedReason::Delete);
            Ok(())
        }
        _ => Err(err::FLOW_MOD_BAD_COMMAND),
    }
}

/// An add: checked as `add-flow` is, refused on overlap when asked, and
/// remembered for `FLOW_REMOVED` when asked.
fn add(agent: &Agent, fm: &FlowMod, actions: Vec<Action>) -> Result<(), OfError> {
    let mut m = fm.matches.matches;
    m.key.set_table(fm.table);
    m.mask.set_table(0xff);
    let spec = FlowSpec {
        priority: fm.priority,
        cookie: fm.cookie,
        timeouts: fm.timeouts,
        matches: m,
        tun_id: fm.matches.tun_id,
        actions,
    };
    let specs = agent.switch.resolve(spec)?;
    let keys: Vec<_> = specs.iter().map(|s| (s.priority, s.matches)).collect();
    if fm.flags & CHECK_OVERLAP != 0 {
        for s in specs {
            let (p, sm) = (s.priority, s.matches);
            agent
                .table
                .add_flow_unless(s, |r| {
                    r.spec.priority == p && overlaps(&r.spec.matches, &sm)
                })
                .map_err(group_error)?;
        }
    } else {
        agent.table.add_flows_checked(specs).map_err(group_error)?;
    }
    let mut wanted = lock(&agent.flow_removed_wanted);
    for k in keys {
        if fm.flags & SEND_FLOW_REM != 0 {
            wanted.insert(k);
        } else {
            wanted.remove(&k);
        }
    }
    Ok(())
}

/// Whether some packet matches both (they agree wherever both look).
fn overlaps(a: &Match, b: &Match) -> bool {
    (0..nfv_flow::key::KEY_WORDS)
        .all(|i| (a.key.w[i] ^ b.key.w[i]) & a.mask.w[i] & b.mask.w[i] == 0)
}

/// The checks `resolve` makes on a new rule's actions, for a modify's.
fn check_actions(agent: &Agent, actions: &[Action]) -> Result<(), OfError> {
    let spec = FlowSpec {
        priority: 0,
        cookie: 0,
        timeouts: Timeouts::NONE,
        matches: Match::ANY,
        tun_id: None,
        actions: actions.to_vec(),
    };
    agent.switch.resolve(spec).map(|_| ())
}

fn group_error(e: GroupError) -> OfError {
    match e {
        GroupError::Exists(_) => err::GROUP_EXISTS,
        GroupError::Missing(_) => err::ACTION_BAD_OUT_GROUP,
        GroupError::MeterMissing(_) => err::METER_UNKNOWN_METER,
        GroupError::Overlaps => err::FLOW_MOD_OVERLAP,
    }
}

/// Handles a `GROUP_MOD` body.
pub fn group_mod(agent: &Agent, body: &[u8]) -> Result<(), OfError> {
    let mut r = Reader::new(body);
    let command = r.u16()?;
    let kind = r.u8()?;
    r.skip(1)?;
    let id = r.u32()?;
    if command == 2 {
        // Delete: OFPG_ALL, or one group (absent: nothing to do). Rules
        // naming a deleted group go too, as in OVS.
        let which = if id == wire::GROUP_ALL {
            None
        } else {
            Some(id)
        };
        let (_, rules) = agent.table.del_groups(which);
        removed(agent, &rules, crate::messages::RemovedReason::GroupDelete);
        return Ok(());
    }
    if command > 2 {
        return Err(err::GROUP_BAD_COMMAND);
    }
    if id > nfv_flow::action::MAX_GROUP_ID {
        return Err(err::GROUP_INVALID);
    }
    let kind = match kind {
        0 => GroupType::All,
        1 => GroupType::Select,
        2 => GroupType::Indirect,
        3 => GroupType::FastFailover,
        _ => return Err(err::GROUP_BAD_TYPE),
    };
    let mut buckets = Vec::new();
    while !r.is_empty() {
        buckets.push(decode_bucket(&mut r, kind)?);
    }
    for bk in &buckets {
        check_actions(agent, &bk.actions)?;
    }
    let group = nfv_flow::Group::new(id, kind, buckets).map_err(|_| {
        if kind == GroupType::FastFailover {
            err::GROUP_BAD_WATCH
        } else {
            err::GROUP_BAD_BUCKET
        }
    })?;
    let done = if command == 0 {
        agent.table.add_group(group)
    } else {
        agent.table.mod_group(group)
    };
    done.map_err(|e| match e {
        GroupError::Exists(_) => err::GROUP_EXISTS,
        _ => err::GROUP_UNKNOWN,
    })
}

/// One `ofp_bucket` of a group of `kind`.
fn decode_bucket(r: &mut Reader<'_>, kind: GroupType) -> Result<Bucket, OfError> {
    let len = usize::from(r.u16()?);
    if len < 16 {
        return Err(err::GROUP_BAD_BUCKET);
    }
    let mut b = r.sub(len - 2)?;
    let weight = b.u16()?;
    let watch_port = b.u32()?;
    let watch_group = b.u32()?;
    b.skip(4)?;
    if watch_group != GROUP_ANY {
        return Err(err::GROUP_WATCH_UNSUPPORTED);
    }
    let watch = match watch_port {
        port::ANY => None,
        p if (1..=u32::from(nfv_flow::parse::MAX_PORT)).contains(&p) => Some(p as u16),
        _ => return Err(err::GROUP_BAD_WATCH),
    };
    if kind != GroupType::Select && weight != 0 {
        return Err(err::GROUP_BAD_BUCKET);
    }
    let acts = actions::decode_actions(
        &mut b,
        Context {
            matches: None,
            table: 0,
            packet_out: false,
        },
    )?;
    Bucket::new(weight, watch, acts).map_err(|_| err::GROUP_CHAINING_UNSUPPORTED)
}

/// `ofp_meter_flags`.
const KBPS: u16 = 1;
const PKTPS: u16 = 2;
const BURST: u16 = 4;
const STATS: u16 = 8;

/// Handles a `METER_MOD` body.
pub fn meter_mod(agent: &Agent, body: &[u8]) -> Result<(), OfError> {
    let mut r = Reader::new(body);
    let command = r.u16()?;
    let flags = r.u16()?;
    let id = r.u32()?;
    if command == 2 {
        let which = if id == wire::METER_ALL {
            None
        } else {
            Some(id)
        };
        let (_, rules) = agent.table.del_meters(which);
        removed(agent, &rules, crate::messages::RemovedReason::MeterDelete);
        return Ok(());
    }
    if command > 2 {
        return Err(err::METER_BAD_COMMAND);
    }
    if id == 0 || id > nfv_flow::action::MAX_METER_ID {
        return Err(err::METER_INVALID);
    }
    if flags & !(KBPS | PKTPS | BURST | STATS) != 0 {
        return Err(err::METER_BAD_FLAGS);
    }
    let unit = match flags & (KBPS | PKTPS) {
        KBPS => MeterUnit::Kbps,
        PKTPS => MeterUnit::Pktps,
        _ => return Err(err::METER_BAD_FLAGS),
    };
    let mut band = None;
    while !r.is_empty() {
        let kind = r.u16()?;
        let len = usize::from(r.u16()?);
        if len < 16 {
            return Err(err::METER_BAD_BAND);
        }
        let mut b = r.sub(len - 4)?;
        let rate = b.u32()?;
        let burst = b.u32()?;
        if kind != 1 {
            // Only the drop band exists (no DSCP remarking).
            return Err(err::METER_BAD_BAND);
        }
        if band.is_some() {
            return Err(err::METER_OUT_OF_BANDS);
        }
        band = Some((rate, burst));
    }
    let (rate, burst_size) = band.ok_or(err::METER_BAD_BAND)?;
    if rate == 0 {
        return Err(err::METER_BAD_RATE);
    }
    let burst = flags & BURST != 0;
    let depth = if burst { burst_size.max(1) } else { rate };
    let meter = Meter::new(id, unit, burst, u64::from(rate), u64::from(depth));
    let done = if command == 0 {
        agent.table.add_meter(meter)
    } else {
        agent.table.mod_meter(meter)
    };
    done.map_err(|e| match e {
        MeterError::Exists(_) => err::METER_EXISTS,
        MeterError::Missing(_) => err::METER_UNKNOWN_METER,
    })
}

/// The flags a rule was added with, as flow stats report them.
pub fn flags_of(agent: &Agent, r: &Arc<Rule>) -> u16 {
    if lock(&agent.flow_removed_wanted).contains(&rule_key(r)) {
        SEND_FLOW_REM
    } else {
        0
    }
}

/// Tells the controllers that asked that `rules` went, all for `why`.
fn removed(agent: &Agent, rules: &[Arc<nfv_flow::Rule>], why: RemovedReason) {
    let gone: Vec<_> = rules.iter().map(|r| (r.clone(), why)).collect();
    agent.rules_removed(&gone);
}
