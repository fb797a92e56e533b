//! OXM match fields (OpenFlow 1.3 §7.2.3) to and from the flow key.
//!
//! One table, [`FIELDS`], says for every supported field where its bits
//! live in [`FlowKey`] and what the match must already say for the field
//! to mean anything (its prerequisite); decoding and encoding both read
//! it. Several fields share key bits, as in OVS (`tcp_src`, `udp_src`,
//! `sctp_src`, `icmpv4_type` and `icmpv6_type` all live in `tp_src`); the
//! prerequisite picks which name a match is written back with.
//!
//! Anything the key cannot hold is refused with the spec's error, never
//! accepted as a different rule: MPLS, PBB and IPv6 extension-header
//! fields are `BAD_FIELD`, a masked `in_port` `BAD_MASK`, a missing
//! prerequisite `BAD_PREREQ`, a repeated field `DUP_FIELD`.

use crate::wire::{OfError, Reader, Writer, err};
use nfv_flow::{FlowKey, Match};

/// `OFPXMC_OPENFLOW_BASIC`.
pub const CLASS_BASIC: u16 = 0x8000;
/// `OFPXMC_NXM_1`: Open vSwitch's fields `ovs-ofctl` sends in OpenFlow
/// 1.3 for what the basic class lacks (`nw_ttl`, `ip_frag`).
pub const CLASS_NXM1: u16 = 0x0001;
/// `OFPMT_OXM`.
pub const MATCH_TYPE_OXM: u16 = 1;

/// `OFPVID_PRESENT`, which is also [`nfv_flow::key::VLAN_PRESENT`]: the
/// key's `vlan_tci` and OXM's `vlan_vid` share bit 12.
const VID_PRESENT: u64 = 0x1000;

const ETH_IP: u64 = 0x0800;
const ETH_ARP: u64 = 0x0806;
const ETH_IPV6: u64 = 0x86dd;

/// What a match must say exactly before a field may appear in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Prereq {
    None,
    /// `vlan_vid` with `OFPVID_PRESENT` set (not "no tag").
    Vlan,
    /// `eth_type` IPv4 or IPv6.
    Ip,
    Ipv4,
    Ipv6,
    Arp,
    /// `eth_type` IPv4 or IPv6 and `ip_proto` this.
    Proto(u8),
    /// `eth_type` IPv4 and `ip_proto` ICMP.
    Icmp4,
    /// `eth_type` IPv6 and `ip_proto` ICMPv6.
    Icmp6,
    /// ICMPv6 with type neighbor solicitation or advertisement.
    Nd,
    /// ICMPv6 neighbor solicitation (135) / advertisement (136).
    NdType(u8),
}

/// Where a field's value sits in the key: `bits` bits from bit `shift`
/// of word `word`, or two whole words (`bits == 128`).
#[derive(Clone, Copy, Debug)]
struct Slot {
    word: usize,
    shift: u32,
    bits: u32,
}

/// One supported OXM field.
#[derive(Clone, Copy, Debug)]
struct Field {
    class: u16,
    field: u8,
    /// Bytes of the value on the wire.
    len: usize,
    maskable: bool,
    slot: Slot,
    prereq: Prereq,
    name: &'static str,
}

const fn f(
    class: u16,
    field: u8,
    name: &'static str,
    len: usize,
    maskable: bool,
    (word, shift, bits): (usize, u32, u32),
    prereq: Prereq,
) -> Field {
    Field {
        class,
        field,
        len,
        maskable,
        slot: Slot { word, shift, bits },
        prereq,
        name,
    }
}

const B: u16 = CLASS_BASIC;
const TCP: u8 = 6;
const UDP: u8 = 17;
const SCTP: u8 = 132;

/// The supported fields, in the order a match is written back (OVS's
/// order: prerequisites before what needs them). Bit positions are the
/// key's (see `nfv_flow::key`).
const FIELDS: &[Field] = &[
    f(B, 0, "in_port", 4, false, (0, 0, 16), Prereq::None),
    f(B, 2, "metadata", 8, true, (5, 0, 64), Prereq::None),
    f(B, 3, "eth_dst", 6, true, (2, 0, 48), Prereq::None),
    f(B, 4, "eth_src", 6, true, (1, 0, 48), Prereq::None),
    f(B, 5, "eth_type", 2, false, (0, 16, 16), Prereq::None),
    f(B, 6, "vlan_vid", 2, true, (0, 32, 13), Prereq::None),
    f(B, 7, "vlan_pcp", 1, false, (0, 45, 3), Prereq::Vlan),
    f(B, 8, "ip_dscp", 1, false, (0, 58, 6), Prereq::Ip),
    f(B, 9, "ip_ecn", 1, false, (0, 56, 2), Prereq::Ip),
    f(B, 10, "ip_proto", 1, false, (0, 48, 8), Prereq::Ip),
    f(CLASS_NXM1, 29, "nw_ttl", 1, false, (4, 0, 8), Prereq::Ip),
    f(CLASS_NXM1, 26, "ip_frag", 1, true, (4, 8, 2), Prereq::Ip),
    f(B, 11, "ipv4_src", 4, true, (3, 0, 32), Prereq::Ipv4),
    f(B, 12, "ipv4_dst", 4, true, (3, 32, 32), Prereq::Ipv4),
    f(B, 13, "tcp_src", 2, false, (1, 48, 16), Prereq::Proto(TCP)),
    f(B, 14, "tcp_dst", 2, false, (2, 48, 16), Prereq::Proto(TCP)),
    f(B, 15, "udp_src", 2, false, (1, 48, 16), Prereq::Proto(UDP)),
    f(B, 16, "udp_dst", 2, false, (2, 48, 16), Prereq::Proto(UDP)),
    f(
        B,
        17,
        "sctp_src",
        2,
        false,
        (1, 48, 16),
        Prereq::Proto(SCTP),
    ),
    f(
        B,
        18,
        "sctp_dst",
        2,
        false,
        (2, 48, 16),
        Prereq::Proto(SCTP),
    ),
    f(B, 19, "icmpv4_type", 1, false, (1, 48, 16), Prereq::Icmp4),
    f(B, 20, "icmpv4_code", 1, false, (2, 48, 16), Prereq::Icmp4),
    f(B, 21, "arp_op", 2, false, (0, 48, 8), Prereq::Arp),
    f(B, 22, "arp_spa", 4, true, (3, 0, 32), Prereq::Arp),
    f(B, 23, "arp_tpa", 4, true, (3, 32, 32), Prereq::Arp),
    f(B, 24, "arp_sha", 6, true, (12, 0, 48), Prereq::Arp),
    f(B, 25, "arp_tha", 6, true, (13, 0, 48), Prereq::Arp),
    f(B, 26, "ipv6_src", 16, true, (6, 0, 128), Prereq::Ipv6),
    f(B, 27, "ipv6_dst", 16, true, (8, 0, 128), Prereq::Ipv6),
    f(B, 28, "ipv6_flabel", 4, true, (4, 32, 20), Prereq::Ipv6),
    f(B, 29, "icmpv6_type", 1, false, (1, 48, 16), Prereq::Icmp6),
    f(B, 30, "icmpv6_code", 1, false, (2, 48, 16), Prereq::Icmp6),
    f(B, 31, "ipv6_nd_target", 16, true, (10, 0, 128), Prereq::Nd),
    f(
        B,
        32,
        "ipv6_nd_sll",
        6,
        true,
        (12, 0, 48),
        Prereq::NdType(135),
    ),
    f(
        B,
        33,
        "ipv6_nd_tll",
        6,
        true,
        (13, 0, 48),
        Prereq::NdType(136),
    ),
];

/// `OFPXMT_OFB_TUNNEL_ID`: held in the rule, not the key (see
/// [`nfv_flow::FlowSpec::tun_id`]).
const TUNNEL_ID: u8 = 38;

fn ones(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1 << bits) - 1
    }
}

fn get(key: &FlowKey, s: Slot) -> u128 {
    if s.bits == 128 {
        return u128::from(key.w[s.word]) << 64 | u128::from(key.w[s.word + 1]);
    }
    u128::from((key.w[s.word] >> s.shift) & ones(s.bits))
}

fn set(key: &mut FlowKey, s: Slot, v: u128) {
    if s.bits == 128 {
        key.w[s.word] = (v >> 64) as u64;
        key.w[s.word + 1] = v as u64;
        return;
    }
    let m = ones(s.bits) << s.shift;
    key.w[s.word] = (key.w[s.word] & !m) | (((v as u64) << s.shift) & m);
}

fn all_ones(s: Slot) -> u128 {
    if s.bits == 128 {
        u128::MAX
    } else {
        u128::from(ones(s.bits))
    }
}

fn exact(m: &Match, s: Slot, v: u128) -> bool {
    get(&m.mask, s) == all_ones(s) && get(&m.key, s) == v
}

const ETH_TYPE: Slot = Slot {
    word: 0,
    shift: 16,
    bits: 16,
};
const IP_PROTO: Slot = Slot {
    word: 0,
    shift: 48,
    bits: 8,
};
const TP_SRC: Slot = Slot {
    word: 1,
    shift: 48,
    bits: 16,
};
const VLAN: Slot = Slot {
    word: 0,
    shift: 32,
    bits: 16,
};

impl Prereq {
    fn met(self, m: &Match) -> bool {
        let eth = |t: u64| exact(m, ETH_TYPE, u128::from(t));
        let ip = eth(ETH_IP) || eth(ETH_IPV6);
        let proto = |p: u8| exact(m, IP_PROTO, u128::from(p));
        match self {
            Prereq::None => true,
            Prereq::Vlan => {
                get(&m.mask, VLAN) as u64 & VID_PRESENT != 0
                    && get(&m.key, VLAN) as u64 & VID_PRESENT != 0
            }
            Prereq::Ip => ip,
            Prereq::Ipv4 => eth(ETH_IP),
            Prereq::Ipv6 => eth(ETH_IPV6),
            Prereq::Arp => eth(ETH_ARP),
            Prereq::Proto(p) => ip && proto(p),
            Prereq::Icmp4 => eth(ETH_IP) && proto(1),
            Prereq::Icmp6 => eth(ETH_IPV6) && proto(58),
            Prereq::Nd => Prereq::Icmp6.met(m) && (exact(m, TP_SRC, 135) || exact(m, TP_SRC, 136)),
            Prereq::NdType(t) => Prereq::Icmp6.met(m) && exact(m, TP_SRC, u128::from(t)),
        }
    }
}

/// A decoded `ofp_match`: the key part, and `tunnel_id` when given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decoded {
    pub matches: Match,
    pub tun_id: Option<u32>,
}

fn value(b: &[u8]) -> u128 {
    b.iter().fold(0u128, |acc, &x| acc << 8 | u128::from(x))
}

/// Decodes an `ofp_match` (type OXM) from `r`, its padding included;
/// prerequisites are checked after all fields are read (OpenFlow lets
/// fields come in any order).
pub fn decode(r: &mut Reader<'_>) -> Result<Decoded, OfError> {
    let kind = r.u16()?;
    let len = usize::from(r.u16()?);
    if kind != MATCH_TYPE_OXM {
        return Err(err::MATCH_BAD_TYPE);
    }
    if len < 4 {
        return Err(err::MATCH_BAD_LEN);
    }
    let mut body = r.sub(len - 4)?.with_error(err::MATCH_BAD_LEN);
    // The padding to a multiple of 8 that follows the match.
    r.skip(len.next_multiple_of(8) - len)?;
    let mut out = Decoded {
        matches: Match::ANY,
        tun_id: None,
    };
    let mut seen: Vec<&'static Field> = Vec::new();
    let mut tunnel_seen = false;
    while !body.is_empty() {
        let class = body.u16()?;
        let fh = body.u8()?;
        let (field, has_mask) = (fh >> 1, fh & 1 == 1);
        let flen = usize::from(body.u8()?);
        let raw = body.bytes(flen)?;
        if class == CLASS_BASIC && field == TUNNEL_ID {
            if tunnel_seen {
                return Err(err::MATCH_DUP_FIELD);
            }
            tunnel_seen = true;
            out.tun_id = Some(tunnel_id(raw, has_mask)?);
            continue;
        }
        let Some(fd) = FIELDS.iter().find(|d| d.class == class && d.field == field) else {
            return Err(err::MATCH_BAD_FIELD);
        };
        if seen.iter().any(|s| std::ptr::eq(*s, fd)) {
            return Err(err::MATCH_DUP_FIELD);
        }
        seen.push(fd);
        let (v, mask) = field_value(fd, raw, has_mask)?;
        // Fields sharing bits (tcp_src and udp_src) cannot both appear.
        if get(&out.matches.mask, fd.slot) != 0 {
            return Err(err::MATCH_DUP_FIELD);
        }
        set(&mut out.matches.key, fd.slot, v & mask);
        set(&mut out.matches.mask, fd.slot, mask);
    }
    for fd in &seen {
        if !fd.prereq.met(&out.matches) {
            return Err(err::MATCH_BAD_PREREQ);
        }
    }
    nfv_flow::parse::check_prerequisites(&out.matches).map_err(|_| err::MATCH_BAD_PREREQ)?;
    Ok(out)
}

/// `tunnel_id`: exact, a VNI (24 bits).
fn tunnel_id(raw: &[u8], has_mask: bool) -> Result<u32, OfError> {
    if has_mask {
        return Err(err::MATCH_BAD_MASK);
    }
    if raw.len() != 8 {
        return Err(err::MATCH_BAD_LEN);
    }
    u32::try_from(value(raw))
        .ok()
        .filter(|v| *v < 1 << 24)
        .ok_or(err::MATCH_BAD_VALUE)
}

/// A field's value and mask (all ones without one), checked against
/// its width and the values the key can hold.
fn field_value(fd: &Field, raw: &[u8], has_mask: bool) -> Result<(u128, u128), OfError> {
    if has_mask && !fd.maskable {
        return Err(err::MATCH_BAD_MASK);
    }
    let want = if has_mask { 2 * fd.len } else { fd.len };
    if raw.len() != want {
        return Err(err::MATCH_BAD_LEN);
    }
    let v = value(&raw[..fd.len]);
    let full = all_ones(fd.slot);
    let mask = if has_mask {
        value(&raw[fd.len..])
    } else {
        full
    };
    if v > full || mask > full {
        return Err(err::MATCH_BAD_VALUE);
    }
    if fd.name == "in_port" && !(1..=u128::from(nfv_flow::parse::MAX_PORT)).contains(&v) {
        // Reserved ports (LOCAL, CONTROLLER) and numbers past the key's
        // 16 bits name no port a packet comes in on.
        return Err(err::MATCH_BAD_VALUE);
    }
    if fd.name == "vlan_vid" && has_mask && mask & VID_PRESENT as u128 == 0 && mask != 0 {
        // A VID without the present bit would also match untagged frames
        // whose key holds 0 there: OVS refuses it too.
        return Err(err::MATCH_BAD_MASK);
    }
    Ok((v, mask))
}

/// Writes `m` (and `tun_id`) as an `ofp_match`, padding included: each
/// set field under the name its prerequisites give it, masked only when
/// the mask is partial.
pub fn encode(w: &mut Writer, m: &Match, tun_id: Option<u32>) {
    let start = w.len();
    w.u16(MATCH_TYPE_OXM);
    w.u16(0);
    for fd in FIELDS {
        let mask = get(&m.mask, fd.slot);
        if mask == 0 || !fd.prereq.met(m) {
            continue;
        }
        // `tp_src` is one of five names: only the one whose prerequisite
        // holds is written (the loop meets them in that order).
        let partial = mask != all_ones(fd.slot);
        w.u16(fd.class);
        w.u8(fd.field << 1 | u8::from(partial && fd.maskable));
        let put = |w: &mut Writer, v: u128| {
            w.bytes(&v.to_be_bytes()[16 - fd.len..]);
        };
        if partial && fd.maskable {
            w.u8((2 * fd.len) as u8);
            put(w, get(&m.key, fd.slot));
            put(w, mask);
        } else {
            w.u8(fd.len as u8);
            put(w, get(&m.key, fd.slot));
        }
    }
    if let Some(vni) = tun_id {
        w.u16(CLASS_BASIC);
        w.u8(TUNNEL_ID << 1);
        w.u8(8);
        w.u64(u64::from(vni));
    }
    w.patch_len(start, 2);
    w.pad8();
}

/// A `set_field` action's field (its [`FIELDS`] name) and value.
pub struct SetField {
    pub name: &'static str,
    pub value: u128,
}

/// Decodes the OXM TLV of a `set_field` action (no mask allowed) and
/// checks its prerequisites against `m` (none for a group bucket's).
pub fn decode_set_field(raw: &[u8], m: Option<&Match>) -> Result<SetField, OfError> {
    let mut r = Reader::new(raw).with_error(err::ACTION_BAD_SET_LEN);
    let class = r.u16()?;
    let fh = r.u8()?;
    let len = usize::from(r.u8()?);
    let bytes = r.bytes(len)?;
    if fh & 1 == 1 {
        return Err(err::ACTION_BAD_SET_ARGUMENT);
    }
    let field = fh >> 1;
    if class == CLASS_BASIC && field == TUNNEL_ID {
        if len != 8 {
            return Err(err::ACTION_BAD_SET_LEN);
        }
        return Ok(SetField {
            name: "tunnel_id",
            value: value(bytes),
        });
    }
    let fd = FIELDS
        .iter()
        .find(|d| d.class == class && d.field == field)
        .ok_or(err::ACTION_BAD_SET_TYPE)?;
    if len != fd.len {
        return Err(err::ACTION_BAD_SET_LEN);
    }
    let v = value(bytes);
    if v > all_ones(fd.slot) {
        return Err(err::ACTION_BAD_SET_ARGUMENT);
    }
    if m.is_some_and(|m| !fd.prereq.met(m)) {
        return Err(err::ACTION_MATCH_INCONSISTENT);
    }
    Ok(SetField {
        name: fd.name,
        value: v,
    })
}

/// Writes a `set_field` OXM TLV for the field `name` (a [`FIELDS`] name,
/// or `tunnel_id`), unpadded.
pub fn encode_set_field(w: &mut Writer, name: &str, v: u128) {
    if name == "tunnel_id" {
        w.u16(CLASS_BASIC);
        w.u8(TUNNEL_ID << 1);
        w.u8(8);
        w.u64(v as u64);
        return;
    }
    let fd = FIELDS
        .iter()
        .find(|d| d.name == name)
        .expect("set_field names a known field");
    w.u16(fd.class);
    w.u8(fd.field << 1);
    w.u8(fd.len as u8);
    w.bytes(&v.to_be_bytes()[16 - fd.len..]);
}

/// The name `tp_src`/`tp_dst` go by under match `m` (`tcp_src`,
/// `icmpv6_code`...), for set-field encoding; `None` when no transport
/// protocol is pinned.
pub fn transport_name(m: &Match, dst: bool) -> Option<&'static str> {
    let word = if dst { 2 } else { 1 };
    FIELDS
        .iter()
        .find(|fd| fd.slot.word == word && fd.slot.shift == 48 && fd.prereq.met(m))
        .map(|fd| fd.name)
}

/// The OXM headers (class, field, length; unmasked) of every field a
/// match may hold, for `TABLE_FEATURES`: (header, maskable).
pub fn match_headers() -> impl Iterator<Item = (u32, bool)> {
    FIELDS
        .iter()
        .map(|fd| (header(fd.class, fd.field, fd.len), fd.maskable))
        .chain(std::iter::once((header(CLASS_BASIC, TUNNEL_ID, 8), false)))
}

/// The OXM headers `set_field` takes.
pub fn set_field_headers() -> impl Iterator<Item = u32> {
    const WRITABLE: &[&str] = &[
        "eth_src",
        "eth_dst",
        "vlan_vid",
        "ip_dscp",
        "ip_ecn",
        "nw_ttl",
        "ipv4_src",
        "ipv4_dst",
        "tcp_src",
        "tcp_dst",
        "udp_src",
        "udp_dst",
        "ipv6_src",
        "ipv6_dst",
        "ipv6_flabel",
    ];
    FIELDS
        .iter()
        .filter(|fd| WRITABLE.contains(&fd.name))
        .map(|fd| header(fd.class, fd.field, fd.len))
        .chain(std::iter::once(header(CLASS_BASIC, TUNNEL_ID, 8)))
}

fn header(class: u16, field: u8, len: usize) -> u32 {
    u32::from(class) << 16 | u32::from(field) << 9 | len as u32
}
