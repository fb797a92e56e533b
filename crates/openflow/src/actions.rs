//! Instructions and actions (OpenFlow 1.3 §7.2.4-5) to and from a rule's
//! [`Action`] list.
//!
//! A rule's list reads as OpenFlow executes instructions: `meter:N` first,
//! the apply-actions in order, then `write_metadata`, then `goto_table`.
//! `clear_actions` is accepted and does nothing (nothing is ever written
//! to the action set); `write_actions` is refused (`UNSUP_INST`): the
//! action set's reordering is not modelled, and accepting it would
//! install a rule that behaves differently from what was asked.
//! Open vSwitch's `resubmit(,N)` extension travels as its experimenter
//! action (`NXAST_RESUBMIT_TABLE`), so `ovs-ofctl` reads it back; so does
//! `ct_clear` (`NXAST_CT_CLEAR`). `ct(...)` (`NXAST_CT`) is not encoded or
//! decoded yet: a decoded one is refused as an unknown experimenter
//! action, and no installed rule holds one (text installs refuse it until
//! the tracker runs in the datapath).

use crate::oxm;
use crate::wire::{OfError, Reader, Writer, err, port};
use nfv_flow::action::{MAX_GROUP_ID, MAX_METER_ID};
use nfv_flow::key::VLAN_PRESENT;
use nfv_flow::{Action, Match};

/// Instruction types (`ofp_instruction_type`).
mod inst {
    pub const GOTO_TABLE: u16 = 1;
    pub const WRITE_METADATA: u16 = 2;
    pub const WRITE_ACTIONS: u16 = 3;
    pub const APPLY_ACTIONS: u16 = 4;
    pub const CLEAR_ACTIONS: u16 = 5;
    pub const METER: u16 = 6;
    pub const EXPERIMENTER: u16 = 0xffff;
}

/// Action types (`ofp_action_type`).
mod act {
    pub const OUTPUT: u16 = 0;
    pub const PUSH_VLAN: u16 = 17;
    pub const POP_VLAN: u16 = 18;
    pub const GROUP: u16 = 22;
    pub const SET_NW_TTL: u16 = 23;
    pub const DEC_NW_TTL: u16 = 24;
    pub const SET_FIELD: u16 = 25;
    pub const EXPERIMENTER: u16 = 0xffff;
}

/// Nicira's experimenter id and the `resubmit(,N)` subtype.
const NX_VENDOR: u32 = 0x0000_2320;
const NXAST_RESUBMIT_TABLE: u16 = 14;
/// `ct_clear`: no arguments, six bytes of padding.
const NXAST_CT_CLEAR: u16 = 43;
/// `resubmit`'s "the packet's own in_port" (OpenFlow 1.0's `OFPP_IN_PORT`).
const NX_IN_PORT: u16 = 0xfff8;

/// Stands for `output:TABLE` in a decoded packet-out's actions (an
/// output to the reserved port number no configured port has).
pub const TABLE_OUTPUT: Action = Action::Output(0xfff9);

/// What decoding needs to know about the rule: its match (set-field
/// prerequisites; `None` for a group's bucket, which any rule may reach:
/// there a set-field whose header a packet lacks leaves it unchanged, as
/// in OVS) and table (goto only goes forward).
#[derive(Clone, Copy)]
pub struct Context<'a> {
    pub matches: Option<&'a Match>,
    pub table: u8,
    /// Decoding a packet-out's actions (`output:TABLE` allowed).
    pub packet_out: bool,
}

/// Decodes a flow_mod's instructions (the rest of `r`) into one action
/// list.
pub fn decode_instructions(r: &mut Reader<'_>, cx: Context<'_>) -> Result<Vec<Action>, OfError> {
    let mut meter = None;
    let mut apply: Option<Vec<Action>> = None;
    let mut metadata = None;
    let mut goto = None;
    let mut cleared = false;
    while !r.is_empty() {
        let kind = r.u16().map_err(|_| err::INST_BAD_LEN)?;
        let len = usize::from(r.u16().map_err(|_| err::INST_BAD_LEN)?);
        if len < 8 || len % 8 != 0 {
            return Err(err::INST_BAD_LEN);
        }
        let mut body = r.sub(len - 4).map_err(|_| err::INST_BAD_LEN)?;
        let dup = || Err(err::INST_UNSUPPORTED);
        match kind {
            inst::GOTO_TABLE => {
                if goto.is_some() {
                    return dup();
                }
                let t = body.u8()?;
                if t <= cx.table || t == crate::wire::TABLE_ALL {
                    return Err(err::INST_BAD_TABLE_ID);
                }
                goto = Some(t);
            }
            inst::WRITE_METADATA => {
                if metadata.is_some() {
                    return dup();
                }
                body.skip(4)?;
                let value = body.u64()?;
                let mask = body.u64()?;
                metadata = Some(Action::WriteMetadata {
                    value: value & mask,
                    mask,
                });
            }
            inst::APPLY_ACTIONS => {
                if apply.is_some() {
                    return dup();
                }
                body.skip(4)?;
                apply = Some(decode_actions(&mut body, cx)?);
            }
            inst::CLEAR_ACTIONS => {
                if cleared {
                    return dup();
                }
                cleared = true;
            }
            inst::METER => {
                if meter.is_some() {
                    return dup();
                }
                let id = body.u32()?;
                if id == 0 || id > MAX_METER_ID {
                    return Err(err::METER_UNKNOWN_METER);
                }
                meter = Some(Action::Meter(id));
            }
            inst::WRITE_ACTIONS => return Err(err::INST_UNSUPPORTED),
            inst::EXPERIMENTER => return Err(err::INST_BAD_EXPERIMENTER),
            _ => return Err(err::INST_UNKNOWN),
        }
    }
    let mut out: Vec<Action> = meter.into_iter().collect();
    out.extend(apply.unwrap_or_default());
    out.extend(metadata);
    out.extend(goto.map(Action::GotoTable));
    Ok(out)
}

/// Decodes an action list (the rest of `r`): a flow's apply-actions, a
/// bucket's or a packet-out's actions.
pub fn decode_actions(r: &mut Reader<'_>, cx: Context<'_>) -> Result<Vec<Action>, OfError> {
    let mut out = Vec::new();
    // Whether the packet is known to carry a VLAN tag at this point (the
    // match requires one, or a push_vlan came before): set_field vlan_vid
    // means the same here as in OVS only then.
    let mut tagged = cx.matches.is_some_and(|m| {
        m.mask.vlan_tci() & VLAN_PRESENT != 0 && m.key.vlan_tci() & VLAN_PRESENT != 0
    });
    while !r.is_empty() {
        let kind = r.u16().map_err(|_| err::ACTION_BAD_LEN)?;
        let len = usize::from(r.u16().map_err(|_| err::ACTION_BAD_LEN)?);
        if len < 8 || len % 8 != 0 {
            return Err(err::ACTION_BAD_LEN);
        }
        let mut body = r
            .sub(len - 4)
            .map_err(|_| err::ACTION_BAD_LEN)?
            .with_error(err::ACTION_BAD_LEN);
        let a = match kind {
            act::OUTPUT => {
                let p = body.u32()?;
                let max_len = body.u16()?;
                output(p, max_len, cx.packet_out)?
            }
            act::GROUP => {
                let g = body.u32()?;
                if g > MAX_GROUP_ID {
                    return Err(err::ACTION_BAD_OUT_GROUP);
                }
                Action::Group(g)
            }
            act::PUSH_VLAN => {
                let tpid = body.u16()?;
                if tpid != 0x8100 && tpid != 0x88a8 {
                    return Err(err::ACTION_BAD_ARGUMENT);
                }
                tagged = true;
                Action::PushVlan(tpid)
            }
            act::POP_VLAN => {
                tagged = false;
                Action::StripVlan
            }
            act::SET_NW_TTL => Action::SetNwTtl(body.u8()?),
            act::DEC_NW_TTL => Action::DecTtl,
            act::SET_FIELD => set_field(body.rest(), cx.matches, tagged)?,
            act::EXPERIMENTER => experimenter(&mut body, cx)?,
            _ => return Err(err::ACTION_BAD_TYPE),
        };
        out.push(a);
    }
    Ok(out)
}

/// An output action's port; `TABLE` only in a packet-out (where it
/// comes back as [`TABLE_OUTPUT`]).
fn output(p: u32, max_len: u16, packet_out: bool) -> Result<Action, OfError> {
    Ok(match p {
        port::CONTROLLER => Action::Controller(max_len),
        port::TABLE if packet_out => TABLE_OUTPUT,
        port::IN_PORT => Action::InPort,
        port::NORMAL => Action::Normal,
        port::FLOOD => Action::Flood,
        port::ALL => Action::All,
        p if (1..=u32::from(nfv_flow::parse::MAX_PORT)).contains(&p) => Action::Output(p as u16),
        _ => return Err(err::ACTION_BAD_OUT_PORT),
    })
}

fn set_field(raw: &[u8], m: Option<&Match>, tagged: bool) -> Result<Action, OfError> {
    let f = oxm::decode_set_field(raw, m)?;
    let v = f.value;
    let bytes16 = |v: u128| v.to_be_bytes();
    let mac = |v: u128| {
        let b = v.to_be_bytes();
        [b[10], b[11], b[12], b[13], b[14], b[15]]
    };
    Ok(match f.name {
        "eth_src" => Action::SetDlSrc(mac(v)),
        "eth_dst" => Action::SetDlDst(mac(v)),
        "vlan_vid" if tagged => Action::SetVlanVid(v as u16 & 0x0fff),
        // On an untagged packet OVS leaves the frame alone where
        // `SetVlanVid` would push a tag: refused rather than different.
        "vlan_vid" => return Err(err::ACTION_MATCH_INCONSISTENT),
        "ip_dscp" => Action::SetNwTos((v as u8) << 2),
        "ip_ecn" => Action::SetNwEcn(v as u8),
        "nw_ttl" => Action::SetNwTtl(v as u8),
        "ipv4_src" => Action::SetNwSrc(v as u32),
        "ipv4_dst" => Action::SetNwDst(v as u32),
        "tcp_src" | "udp_src" => Action::SetTpSrc(v as u16),
        "tcp_dst" | "udp_dst" => Action::SetTpDst(v as u16),
        "ipv6_src" => Action::SetIpv6Src(bytes16(v)),
        "ipv6_dst" => Action::SetIpv6Dst(bytes16(v)),
        "ipv6_flabel" => Action::SetIpv6Label(v as u32),
        "tunnel_id" if v < 1 << 24 => Action::SetTunnel(v as u32),
        "tunnel_id" => return Err(err::ACTION_BAD_SET_ARGUMENT),
        // In the key but not writable here (SCTP ports: the CRC32c is not
        // recomputed; ICMP type/code, ARP, ND, VLAN PCP, metadata through
        // write_metadata).
        _ => return Err(err::ACTION_BAD_SET_TYPE),
    })
}

fn experimenter(body: &mut Reader<'_>, cx: Context<'_>) -> Result<Action, OfError> {
    if body.u32()? != NX_VENDOR {
        return Err(err::ACTION_BAD_EXPERIMENTER);
    }
    match body.u16()? {
        NXAST_RESUBMIT_TABLE => {}
        NXAST_CT_CLEAR => return Ok(Action::CtClear),
        _ => return Err(err::ACTION_BAD_EXPERIMENTER),
    }
    let in_port = body.u16()?;
    let table = body.u8()?;
    if in_port != NX_IN_PORT || table <= cx.table || table == crate::wire::TABLE_ALL {
        // resubmit to another in_port, or to this or an earlier table:
        // the pipeline only goes forward from the packet's own port.
        return Err(err::ACTION_BAD_ARGUMENT);
    }
    Ok(Action::Resubmit(table))
}

/// Writes `actions` (a rule's list) as instructions; `m` names the
/// transport fields a port rewrite sets.
pub fn encode_instructions(w: &mut Writer, actions: &[Action], m: &Match) {
    for a in actions {
        if let Action::Meter(id) = a {
            w.u16(inst::METER);
            w.u16(8);
            w.u32(*id);
        }
    }
    let applied: Vec<&Action> = actions
        .iter()
        .filter(|a| {
            !matches!(
                a,
                Action::Meter(_) | Action::GotoTable(_) | Action::WriteMetadata { .. }
            )
        })
        .collect();
    if !applied.is_empty() {
        let start = w.len();
        w.u16(inst::APPLY_ACTIONS);
        w.u16(0);
        w.zeros(4);
        for a in applied {
            encode_action(w, a, m);
        }
        w.patch_len(start, 2);
    }
    for a in actions {
        match a {
            Action::WriteMetadata { value, mask } => {
                w.u16(inst::WRITE_METADATA);
                w.u16(24);
                w.zeros(4);
                w.u64(*value);
                w.u64(*mask);
            }
            Action::GotoTable(t) => {
                w.u16(inst::GOTO_TABLE);
                w.u16(8);
                w.u8(*t);
                w.zeros(3);
            }
            _ => {}
        }
    }
}

/// Writes an action list (a bucket's).
pub fn encode_actions(w: &mut Writer, actions: &[Action], m: &Match) {
    for a in actions {
        encode_action(w, a, m);
    }
}

/// An action with no body (8 bytes).
fn simple(w: &mut Writer, kind: u16) {
    w.u16(kind);
    w.u16(8);
    w.zeros(4);
}

/// `OUTPUT` to `p` (max_len 0: only `CONTROLLER` reads it).
fn out(w: &mut Writer, p: u32) {
    w.u16(act::OUTPUT);
    w.u16(16);
    w.u32(p);
    w.u16(0);
    w.zeros(6);
}

fn encode_action(w: &mut Writer, a: &Action, m: &Match) {
    if let Some((name, v)) = set_field_of(a, m) {
        let start = w.len();
        w.u16(act::SET_FIELD);
        w.u16(0);
        oxm::encode_set_field(w, name, v);
        w.pad8();
        w.patch_len(start, 2);
        return;
    }
    match *a {
        Action::Output(p) => out(w, u32::from(p)),
        Action::InPort => out(w, port::IN_PORT),
        Action::Normal => out(w, port::NORMAL),
        Action::Flood => out(w, port::FLOOD),
        Action::All => out(w, port::ALL),
        Action::Controller(max_len) => {
            w.u16(act::OUTPUT);
            w.u16(16);
            w.u32(port::CONTROLLER);
            w.u16(max_len);
            w.zeros(6);
        }
        Action::Group(g) => {
            w.u16(act::GROUP);
            w.u16(8);
            w.u32(g);
        }
        Action::PushVlan(tpid) => {
            w.u16(act::PUSH_VLAN);
            w.u16(8);
            w.u16(tpid);
            w.zeros(2);
        }
        Action::StripVlan => simple(w, act::POP_VLAN),
        Action::DecTtl => simple(w, act::DEC_NW_TTL),
        Action::SetNwTtl(t) => {
            w.u16(act::SET_NW_TTL);
            w.u16(8);
            w.u8(t);
            w.zeros(3);
        }
        Action::Resubmit(t) => {
            w.u16(act::EXPERIMENTER);
            w.u16(16);
            w.u32(NX_VENDOR);
            w.u16(NXAST_RESUBMIT_TABLE);
            w.u16(NX_IN_PORT);
            w.u8(t);
            w.zeros(3);
        }
        Action::CtClear => {
            w.u16(act::EXPERIMENTER);
            w.u16(16);
            w.u32(NX_VENDOR);
            w.u16(NXAST_CT_CLEAR);
            w.zeros(6);
        }
        // Not encoded yet (NXAST_CT): no installed rule holds one, as
        // `nfv_flow::tunnel::resolve` refuses it until the tracker runs.
        Action::Ct(_) => {}
        // Instructions, written by `encode_instructions`; set-fields, by
        // `set_field_of` above (listed so that a new action is a compile
        // error here, not an action silently left out).
        Action::Meter(_)
        | Action::GotoTable(_)
        | Action::WriteMetadata { .. }
        | Action::SetDlSrc(_)
        | Action::SetDlDst(_)
        | Action::SetVlanVid(_)
        | Action::SetNwTos(_)
        | Action::SetNwEcn(_)
        | Action::SetNwSrc(_)
        | Action::SetNwDst(_)
        | Action::SetTpSrc(_)
        | Action::SetTpDst(_)
        | Action::SetIpv6Src(_)
        | Action::SetIpv6Dst(_)
        | Action::SetIpv6Label(_)
        | Action::SetTunnel(_) => {}
    }
}

/// The OXM field and value an action sets, for those that go as
/// `set_field` (`m` names the transport fields a port rewrite sets).
fn set_field_of(a: &Action, m: &Match) -> Option<(&'static str, u128)> {
    let mac = |b: &[u8; 6]| b.iter().fold(0u128, |acc, &x| acc << 8 | u128::from(x));
    Some(match *a {
        Action::SetDlSrc(b) => ("eth_src", mac(&b)),
        Action::SetDlDst(b) => ("eth_dst", mac(&b)),
        Action::SetVlanVid(v) => ("vlan_vid", u128::from(v | VLAN_PRESENT)),
        Action::SetNwTos(t) => ("ip_dscp", u128::from(t >> 2)),
        Action::SetNwEcn(e) => ("ip_ecn", u128::from(e)),
        Action::SetNwSrc(a) => ("ipv4_src", u128::from(a)),
        Action::SetNwDst(a) => ("ipv4_dst", u128::from(a)),
        Action::SetTpSrc(p) => (
            oxm::transport_name(m, false).unwrap_or("tcp_src"),
            u128::from(p),
        ),
        Action::SetTpDst(p) => (
            oxm::transport_name(m, true).unwrap_or("tcp_dst"),
            u128::from(p),
        ),
        Action::SetIpv6Src(b) => ("ipv6_src", u128::from_be_bytes(b)),
        Action::SetIpv6Dst(b) => ("ipv6_dst", u128::from_be_bytes(b)),
        Action::SetIpv6Label(l) => ("ipv6_flabel", u128::from(l)),
        Action::SetTunnel(v) => ("tunnel_id", u128::from(v)),
        _ => return None,
    })
}
