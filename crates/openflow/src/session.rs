//! One controller connection: version negotiation, then each request
//! answered in order (so a `BARRIER_REPLY` follows everything before
//! it). A request that cannot be honoured is answered with an
//! `OFPT_ERROR` naming it, and the connection goes on; only a failed
//! negotiation or a framing error ends it.

use crate::agent::{Agent, Role, lock};
use crate::wire::{self, Header, OfError, Reader, Writer, err, msg};
use crate::{mods, multipart};
use std::sync::Arc;

/// `OFPHET_VERSIONBITMAP`.
const HELLO_ELEM_VERSIONBITMAP: u16 = 1;
/// `OFPC_FLOW_STATS | OFPC_TABLE_STATS | OFPC_PORT_STATS | OFPC_GROUP_STATS`.
const CAPABILITIES: u32 = 1 | 2 | 4 | 8;
/// `OFPCML_NO_BUFFER`'s default `miss_send_len` (OpenFlow's 128).
const DEFAULT_MISS_SEND_LEN: u16 = 128;

pub struct Session {
    agent: Arc<Agent>,
    id: u64,
    negotiated: bool,
    /// `SET_CONFIG`'s flags and `miss_send_len`.
    config_flags: u16,
    miss_send_len: u16,
}

/// The names `show controllers` counts messages under.
fn type_name(t: u8) -> &'static str {
    match t {
        msg::HELLO => "hello",
        msg::ERROR => "error",
        msg::ECHO_REQUEST => "echo_request",
        msg::ECHO_REPLY => "echo_reply",
        msg::EXPERIMENTER => "experimenter",
        msg::FEATURES_REQUEST => "features_request",
        msg::GET_CONFIG_REQUEST => "get_config_request",
        msg::SET_CONFIG => "set_config",
        msg::PACKET_OUT => "packet_out",
        msg::FLOW_MOD => "flow_mod",
        msg::GROUP_MOD => "group_mod",
        msg::PORT_MOD => "port_mod",
        msg::TABLE_MOD => "table_mod",
        msg::MULTIPART_REQUEST => "multipart_request",
        msg::BARRIER_REQUEST => "barrier_request",
        msg::QUEUE_GET_CONFIG_REQUEST => "queue_get_config_request",
        msg::ROLE_REQUEST => "role_request",
        msg::GET_ASYNC_REQUEST => "get_async_request",
        msg::SET_ASYNC => "set_async",
        msg::METER_MOD => "meter_mod",
        _ => "other",
    }
}

impl Session {
    /// A session for a new connection from `peer`; asynchronous messages
    /// for it go to `tx`.
    pub fn new(
        agent: Arc<Agent>,
        peer: String,
        tx: std::sync::mpsc::SyncSender<Vec<u8>>,
    ) -> Session {
        let id = agent.open(peer, tx);
        Session {
            agent,
            id,
            negotiated: false,
            config_flags: 0,
            miss_send_len: DEFAULT_MISS_SEND_LEN,
        }
    }

    /// The `HELLO` the switch opens with: version 1.3, and a version
    /// bitmap saying 1.3 is the only one.
    pub fn hello() -> Vec<u8> {
        let mut w = Writer::message(msg::HELLO, 0);
        w.u16(HELLO_ELEM_VERSIONBITMAP);
        w.u16(8);
        w.u32(1 << wire::VERSION);
        w.finish()
    }

    /// Handles one complete message (header included); replies go to
    /// `out`. False: close the connection (negotiation failed).
    pub fn handle(&mut self, m: &[u8], out: &mut Vec<Vec<u8>>) -> bool {
        let Some(h) = Header::parse(m) else {
            return false;
        };
        self.agent.update(self.id, |r| {
            *r.received.entry(type_name(h.kind)).or_default() += 1
        });
        if h.kind == msg::HELLO {
            return self.hello_received(&h, m, out);
        }
        if !self.negotiated {
            // Everything before a HELLO is out of order: the spec lets the
            // switch end the connection.
            out.push(wire::error_message(h.xid, err::HELLO_INCOMPATIBLE, m));
            return false;
        }
        if h.version != wire::VERSION {
            self.error(out, h.xid, err::BAD_VERSION, m);
            return true;
        }
        let body = &m[wire::HEADER_LEN..];
        if let Err(e) = self.request(&h, body, out) {
            self.error(out, h.xid, e, m);
        }
        true
    }

    fn error(&self, out: &mut Vec<Vec<u8>>, xid: u32, e: OfError, m: &[u8]) {
        tracing::debug!(session = self.id, "refused: {e}");
        self.agent.update(self.id, |r| r.errors_sent += 1);
        out.push(wire::error_message(xid, e, m));
    }

    fn hello_received(&mut self, h: &Header, m: &[u8], out: &mut Vec<Vec<u8>>) -> bool {
        // With a bitmap, the highest version both set; without, the
        // lower of the two headers' versions.
        let mut r = Reader::new(&m[wire::HEADER_LEN..]);
        let mut bitmap = None;
        while r.remaining() >= 4 {
            let (Ok(t), Ok(len)) = (r.u16(), r.u16()) else {
                break;
            };
            let len = usize::from(len);
            if len < 4 {
                break;
            }
            let Ok(mut e) = r.sub(len - 4) else { break };
            if t == HELLO_ELEM_VERSIONBITMAP
                && let Ok(word0) = e.u32()
            {
                bitmap = Some(word0);
            }
            let _ = r.skip(len.next_multiple_of(8) - len);
        }
        let ok = match bitmap {
            Some(b) => b & (1 << wire::VERSION) != 0,
            None => h.version >= wire::VERSION,
        };
        if !ok {
            out.push(wire::error_message(h.xid, err::HELLO_INCOMPATIBLE, m));
            return false;
        }
        self.negotiated = true;
        self.agent.update(self.id, |r| r.negotiated = true);
        self.agent.refresh_listening();
        true
    }

    fn writable(&self) -> Result<(), OfError> {
        let role = lock(&self.agent.sessions)
            .get(&self.id)
            .map(|s| s.report.role);
        if role == Some(Role::Slave) {
            return Err(err::IS_SLAVE);
        }
        Ok(())
    }

    fn request(&mut self, h: &Header, body: &[u8], out: &mut Vec<Vec<u8>>) -> Result<(), OfError> {
        let agent = &self.agent;
        match h.kind {
            msg::ECHO_REQUEST => {
                let mut w = Writer::message(msg::ECHO_REPLY, h.xid);
                w.bytes(body);
                out.push(w.finish());
            }
            msg::ECHO_REPLY | msg::ERROR => {}
            msg::FEATURES_REQUEST => out.push(self.features(h.xid)),
            msg::GET_CONFIG_REQUEST => {
                let mut w = Writer::message(msg::GET_CONFIG_REPLY, h.xid);
                w.u16(self.config_flags);
                w.u16(self.miss_send_len);
                out.push(w.finish());
            }
            msg::SET_CONFIG => self.set_config(body)?,
            msg::BARRIER_REQUEST => {
                // Every earlier request is applied: they run in order.
                out.push(Writer::message(msg::BARRIER_REPLY, h.xid).finish());
            }
            msg::FLOW_MOD => {
                self.writable()?;
                mods::flow_mod(agent, body)?;
            }
            msg::GROUP_MOD => {
                self.writable()?;
                mods::group_mod(agent, body)?;
            }
            msg::METER_MOD => {
                self.writable()?;
                mods::meter_mod(agent, body)?;
            }
            msg::MULTIPART_REQUEST => out.extend(multipart::answer(agent, h.xid, body)?),
            msg::ROLE_REQUEST => out.push(self.role_request(h.xid, body)?),
            msg::GET_ASYNC_REQUEST => out.push(self.get_async(h.xid)),
            msg::SET_ASYNC => self.set_async(body)?,
            msg::QUEUE_GET_CONFIG_REQUEST => {
                let port = Reader::new(body).u32()?;
                let mut w = Writer::message(msg::QUEUE_GET_CONFIG_REPLY, h.xid);
                w.u32(port);
                w.zeros(4);
                out.push(w.finish());
            }
            msg::TABLE_MOD => {
                // OpenFlow 1.3 defines no table config bits: nothing to do.
                self.writable()?;
            }
            msg::PORT_MOD => {
                self.writable()?;
                return Err(err::PORT_MOD_EPERM);
            }
            msg::PACKET_OUT => {
                self.writable()?;
                agent.switch.packet_out(decode_packet_out(body)?)?;
            }
            msg::EXPERIMENTER => return Err(err::BAD_EXPERIMENTER),
            _ => return Err(err::BAD_TYPE),
        }
        Ok(())
    }

    fn features(&self, xid: u32) -> Vec<u8> {
        let mut w = Writer::message(msg::FEATURES_REPLY, xid);
        w.u64(self.agent.switch.datapath_id());
        w.u32(0); // n_buffers: packets are never buffered
        w.u8(255); // tables 0..254
        w.u8(0); // auxiliary_id
        w.zeros(2);
        w.u32(CAPABILITIES);
        w.u32(0);
        w.finish()
    }

    fn set_config(&mut self, body: &[u8]) -> Result<(), OfError> {
        let mut r = Reader::new(body);
        let flags = r.u16()?;
        let miss = r.u16()?;
        // OFPC_FRAG_NORMAL (0) only: fragments are not dropped or
        // reassembled.
        if flags & 0x3 != 0 {
            return Err(err::SWITCH_CONFIG_BAD_FLAGS);
        }
        self.config_flags = flags;
        self.miss_send_len = miss;
        Ok(())
    }

    fn get_async(&self, xid: u32) -> Vec<u8> {
        let masks = lock(&self.agent.sessions)
            .get(&self.id)
            .map_or(crate::agent::DEFAULT_ASYNC, |s| s.async_masks);
        let mut w = Writer::message(msg::GET_ASYNC_REPLY, xid);
        for m in masks {
            w.u32(m);
        }
        w.finish()
    }

    fn set_async(&self, body: &[u8]) -> Result<(), OfError> {
        let mut r = Reader::new(body);
        let mut masks = [0u32; 6];
        for m in &mut masks {
            *m = r.u32()?;
        }
        if let Some(s) = lock(&self.agent.sessions).get_mut(&self.id) {
            s.async_masks = masks;
        }
        Ok(())
    }

    /// `ROLE_REQUEST` (§6.3.6): a master or slave request carries a
    /// generation id, refused as stale when older than the newest seen
    /// (compared as a wrapping signed difference); a new master makes
    /// the old one a slave.
    fn role_request(&mut self, xid: u32, body: &[u8]) -> Result<Vec<u8>, OfError> {
        let mut r = Reader::new(body);
        let role = r.u32()?;
        r.skip(4)?;
        let generation = r.u64()?;
        let new = match role {
            0 => None,
            1 => Some(Role::Equal),
            2 => Some(Role::Master),
            3 => Some(Role::Slave),
            _ => return Err(err::ROLE_BAD_ROLE),
        };
        if matches!(new, Some(Role::Master | Role::Slave)) {
            let mut g = lock(&self.agent.generation);
            if let Some(seen) = *g
                && (generation.wrapping_sub(seen) as i64) < 0
            {
                return Err(err::ROLE_STALE);
            }
            *g = Some(generation);
        }
        let mut sessions = lock(&self.agent.sessions);
        if let Some(role) = new {
            if role == Role::Master {
                for s in sessions.values_mut() {
                    if s.report.role == Role::Master {
                        s.report.role = Role::Slave;
                    }
                }
            }
            if let Some(s) = sessions.get_mut(&self.id) {
                s.report.role = role;
            }
        }
        let now = sessions
            .get(&self.id)
            .map_or(Role::Equal, |s| s.report.role);
        drop(sessions);
        self.agent.refresh_listening();
        let generation = lock(&self.agent.generation).unwrap_or(0);
        let mut w = Writer::message(msg::ROLE_REPLY, xid);
        w.u32(now.wire());
        w.zeros(4);
        w.u64(generation);
        Ok(w.finish())
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.agent.close(self.id);
    }
}

/// A `PACKET_OUT` body: unbuffered (`OFP_NO_BUFFER`, the packet in it),
/// from the controller or a port, its actions as a bucket's (no match to
/// check set-fields against) plus `output:TABLE`.
fn decode_packet_out(body: &[u8]) -> Result<crate::switch::PacketOut, OfError> {
    let mut r = Reader::new(body);
    let buffer_id = r.u32()?;
    let in_port = r.u32()?;
    let actions_len = usize::from(r.u16()?);
    r.skip(6)?;
    if buffer_id != wire::NO_BUFFER {
        return Err(err::BUFFER_UNKNOWN);
    }
    let in_port = match in_port {
        wire::port::CONTROLLER | wire::port::ANY => wire::FROM_CONTROLLER,
        p if (1..=u32::from(nfv_flow::parse::MAX_PORT)).contains(&p) => p as u16,
        _ => return Err(err::BAD_PORT),
    };
    let mut acts = r.sub(actions_len)?;
    let mut actions = crate::actions::decode_actions(
        &mut acts,
        crate::actions::Context {
            matches: None,
            table: 0,
            packet_out: true,
        },
    )?;
    let data = r.rest().to_vec();
    if data.len() < 14 {
        return Err(err::BAD_PACKET);
    }
    let to_table = actions.contains(&crate::actions::TABLE_OUTPUT);
    if to_table {
        if actions.len() != 1 {
            // OpenFlow: a lookup, or actions, not both.
            return Err(err::ACTION_BAD_OUT_PORT);
        }
        actions.clear();
    }
    Ok(crate::switch::PacketOut {
        in_port,
        actions,
        to_table,
        data,
    })
}
