//! Random rules and packets.
//!
//! A rule is a protocol class (`tcp`, `arp`, `dl_type=0x88cc`, ...), a few
//! match fields from [`FIELDS`] and an action list from [`ACTIONS`]; each
//! table entry is one field or action with its weight, so covering a new
//! one (`normal`, ...) is one entry there (and, for a new kind of output,
//! one arm where the traces are read). A rule set's groups and meters,
//! which its rules' `group:N` and `meter:N` name, come from
//! [`groups`]; a rule set that uses the connection tracker
//! ([`Extras::ct`]) gets ct actions and matches, and its packets the
//! tracker's answers ([`ct_next`]). Values come
//! from small pools mixed with random ones, so that random packets hit
//! random rules too; [`packet_for`] derives a packet from a rule's match
//! (the matched bits kept, the rest random) and sometimes flips one
//! matched field, for near misses.

use super::key::*;

/// SplitMix64: small, fast, and the same sequence everywhere.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// True with `pct` percent probability.
    pub fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
    pub fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
    /// One of `xs`, or (as likely as each) `f`'s value.
    pub fn pick_or<T: Copy>(&mut self, xs: &[T], f: impl FnOnce(&mut Rng) -> T) -> T {
        let i = self.below(xs.len() as u64 + 1) as usize;
        if i == xs.len() { f(self) } else { xs[i] }
    }
    fn u128(&mut self) -> u128 {
        u128::from(self.next()) << 64 | u128::from(self.next())
    }
}

/// Picks an entry of `table` by weight (`weight` gives an entry's).
fn weighted<'a, T>(rng: &mut Rng, table: &'a [T], weight: impl Fn(&T) -> u32) -> &'a T {
    let total: u64 = table.iter().map(|t| u64::from(weight(t))).sum();
    let mut x = rng.below(total);
    for t in table {
        let w = u64::from(weight(t));
        if x < w {
            return t;
        }
        x -= w;
    }
    unreachable!()
}

/// The OpenFlow port numbers both switches have (not contiguous, on
/// purpose).
pub const PORTS: &[u16] = &[1, 2, 3, 10];

/// What a rule's protocol part says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// No `dl_type`.
    Any,
    /// Some other Ethertype (`dl_type=0x88cc`).
    Eth(u16),
    Arp,
    Ip4(Option<u8>),
    Ip6(Option<u8>),
}

impl Class {
    fn proto(self) -> Option<u8> {
        match self {
            Class::Ip4(p) | Class::Ip6(p) => p,
            _ => None,
        }
    }
    fn ip(self) -> bool {
        matches!(self, Class::Ip4(_) | Class::Ip6(_))
    }
    fn v6(self) -> bool {
        matches!(self, Class::Ip6(_))
    }
    fn ports(self) -> bool {
        self.ip() && matches!(self.proto(), Some(TCP | UDP | SCTP))
    }
    fn icmp(self) -> bool {
        matches!(self, Class::Ip4(Some(ICMP)) | Class::Ip6(Some(ICMPV6)))
    }
}

/// Ethertypes that neither switch parses further (no VLAN TPIDs, MPLS,
/// RARP, NSH, nothing below 0x0600).
const OTHER_ETHERTYPES: &[u16] = &[0x88cc, 0x88b5, 0x9000, 0x1234, 0x88f7, 0x22f0];

/// IP protocols with no ports or type that either switch would parse.
const OTHER_PROTOS: &[u8] = &[47, 2, 89, 103, 250];

/// Protocol classes of rules and random packets, by weight.
const CLASSES: &[(u32, Class)] = &[
    (12, Class::Any),
    (4, Class::Eth(0)),
    (8, Class::Arp),
    (6, Class::Ip4(None)),
    (12, Class::Ip4(Some(TCP))),
    (10, Class::Ip4(Some(UDP))),
    (6, Class::Ip4(Some(ICMP))),
    (4, Class::Ip4(Some(SCTP))),
    (3, Class::Ip4(Some(0))),
    (5, Class::Ip6(None)),
    (8, Class::Ip6(Some(TCP))),
    (6, Class::Ip6(Some(UDP))),
    (8, Class::Ip6(Some(ICMPV6))),
    (3, Class::Ip6(Some(SCTP))),
    (2, Class::Ip6(Some(0))),
];

/// A class from [`CLASSES`], with `Eth` and "other protocol" made concrete.
fn random_class(rng: &mut Rng) -> Class {
    match *weighted(rng, CLASSES, |c| c.0) {
        (_, Class::Eth(_)) => Class::Eth(rng.pick(OTHER_ETHERTYPES)),
        (_, Class::Ip4(Some(0))) => Class::Ip4(Some(rng.pick(OTHER_PROTOS))),
        (_, Class::Ip6(Some(0))) => Class::Ip6(Some(rng.pick(OTHER_PROTOS))),
        (_, c) => c,
    }
}

/// One match field: its text and the bits it constrains.
#[derive(Clone, Debug)]
pub struct MatchItem {
    pub text: String,
    pub f: F,
    pub v: u128,
    pub m: u128,
}

#[derive(Clone, Debug)]
pub struct Rule {
    /// The table it is in (`table=N`; 0 unwritten).
    pub table: u8,
    pub priority: u16,
    /// Written without `priority=` (the default, 32768).
    pub default_priority: bool,
    pub class: Class,
    pub class_text: String,
    pub fields: Vec<MatchItem>,
    pub actions: Vec<String>,
    /// Needs OpenFlow 1.1+ in OVS (`push_vlan`), so `ovs-ofctl` must speak
    /// OpenFlow 1.3 for it, where some OpenFlow 1.0 leniencies are gone.
    pub of13: bool,
}

impl Rule {
    /// The rule in `ovs-ofctl add-flow` syntax (both switches take it).
    pub fn text(&self) -> String {
        let mut items = Vec::new();
        if self.table != 0 {
            items.push(format!("table={}", self.table));
        }
        if !self.default_priority {
            items.push(format!("priority={}", self.priority));
        }
        if !self.class_text.is_empty() {
            items.push(self.class_text.clone());
        }
        items.extend(self.fields.iter().map(|f| f.text.clone()));
        let actions = if self.actions.is_empty() {
            String::new()
        } else {
            self.actions.join(",")
        };
        items.push(format!("actions={actions}"));
        items.join(",")
    }

    /// Every constraint: the class's and the fields'.
    pub fn constraints(&self) -> Vec<(F, u128, u128)> {
        let mut c = Vec::new();
        match self.class {
            Class::Any => {}
            Class::Eth(t) => c.push((F::DlType, t.into(), 0xffff)),
            Class::Arp => c.push((F::DlType, ETH_ARP.into(), 0xffff)),
            Class::Ip4(p) | Class::Ip6(p) => {
                let t = if self.class.v6() { ETH_IPV6 } else { ETH_IPV4 };
                c.push((F::DlType, t.into(), 0xffff));
                if let Some(p) = p {
                    c.push((F::NwProto, p.into(), 0xff));
                }
            }
        }
        c.extend(self.fields.iter().map(|f| (f.f, f.v & f.m, f.m)));
        c
    }

    /// Whether the rule matches `k` (the model's view, for statistics).
    pub fn matches(&self, k: &Key) -> bool {
        self.constraints()
            .iter()
            .all(|&(f, v, m)| k.get(f) & m == v & m)
    }
}

// ---- value pools ----

const MACS: &[u64] = &[
    0x02_00_00_00_00_01,
    0x02_00_00_00_00_02,
    0x01_00_5e_00_00_01,
    0xff_ff_ff_ff_ff_ff,
    0,
];

fn mac_val(rng: &mut Rng) -> u64 {
    if rng.chance(75) {
        rng.pick(MACS)
    } else {
        rng.next() & 0xffff_ffff_ffff
    }
}

fn mac_item(rng: &mut Rng, name: &str, f: F) -> MatchItem {
    let v = mac_val(rng);
    let m = match rng.below(10) {
        0..=5 => 0xffff_ffff_ffff,
        6 => 0xff_ff_ff_00_00_00,
        7 => 0x01_00_00_00_00_00,
        _ => rng.next() & 0xffff_ffff_ffff,
    };
    let text = if m == 0xffff_ffff_ffff {
        format!("{name}={}", mac(v))
    } else {
        format!("{name}={}/{}", mac(v), mac(m))
    };
    MatchItem {
        text,
        f,
        v: v.into(),
        m: m.into(),
    }
}

const IP4S: &[u32] = &[
    0x0a00_0001,
    0x0a00_0002,
    0x0a01_0203,
    0xc0a8_0101,
    0,
    0xffff_ffff,
];

fn ip4_val(rng: &mut Rng) -> u32 {
    if rng.chance(75) {
        rng.pick(IP4S)
    } else {
        rng.next() as u32
    }
}

fn prefix4(n: u32) -> u32 {
    if n == 0 { 0 } else { u32::MAX << (32 - n) }
}

fn ip4_item(rng: &mut Rng, name: &str, f: F) -> MatchItem {
    let v = ip4_val(rng);
    let (m, text) = match rng.below(10) {
        0..=3 => (u32::MAX, format!("{name}={}", ip4(v))),
        4..=8 => {
            let n = rng.pick_or(&[0, 1, 8, 16, 24, 31, 32], |rng| rng.below(33) as u32);
            (prefix4(n), format!("{name}={}/{n}", ip4(v)))
        }
        _ => {
            let m = rng.next() as u32;
            (m, format!("{name}={}/{}", ip4(v), ip4(m)))
        }
    };
    MatchItem {
        text,
        f,
        v: v.into(),
        m: m.into(),
    }
}

const IP6S: &[u128] = &[
    0x2001_0db8_0000_0000_0000_0000_0000_0001,
    0x2001_0db8_0000_0000_0000_0000_0000_0002,
    0x2001_0db8_0001_0000_0000_0000_0000_0001,
    0xfe80_0000_0000_0000_0000_0000_0000_0001,
    0,
    1,
];

fn ip6_val(rng: &mut Rng) -> u128 {
    if rng.chance(75) {
        rng.pick(IP6S)
    } else {
        rng.u128()
    }
}

fn prefix6(n: u32) -> u128 {
    if n == 0 { 0 } else { u128::MAX << (128 - n) }
}

fn ip6_item(rng: &mut Rng, name: &str, f: F) -> MatchItem {
    let v = ip6_val(rng);
    let (m, text) = match rng.below(10) {
        0..=3 => (u128::MAX, format!("{name}={}", ip6(v))),
        4..=8 => {
            let n = rng.pick_or(&[0, 1, 32, 48, 64, 127, 128], |rng| rng.below(129) as u32);
            (prefix6(n), format!("{name}={}/{n}", ip6(v)))
        }
        _ => {
            let m = rng.u128();
            (m, format!("{name}={}/{}", ip6(v), ip6(m)))
        }
    };
    MatchItem { text, f, v, m }
}

const L4_PORTS: &[u16] = &[0, 22, 53, 80, 443, 1024, 8080, 65535];

fn port_val(rng: &mut Rng) -> u16 {
    if rng.chance(75) {
        rng.pick(L4_PORTS)
    } else {
        rng.next() as u16
    }
}

const TTLS: &[u8] = &[0, 1, 2, 64, 255];

fn ttl_val(rng: &mut Rng) -> u8 {
    if rng.chance(70) {
        rng.pick(TTLS)
    } else {
        rng.next() as u8
    }
}

const ICMP_TYPES: &[u16] = &[0, 3, 8, 11, 128, 129, 133, 134, 135, 136, 137];

/// Zones `ct(zone=N)` and `ct_zone=N` take, so that matches meet copies.
const CT_ZONES: &[u16] = &[0, 1, 5, 7];
/// Marks `exec(set_field:V->ct_mark)` and `ct_mark=V` take.
const CT_MARKS: &[u32] = &[0, 1, 5, 0x305, 0xff];
/// Labels `exec(set_field:V->ct_label)` and `ct_label=V` take.
const CT_LABELS: &[u128] = &[0, 1, 0x10, 0xff00, 1 << 100];

/// An `N` or `0xV/0xM` field of `f`'s width.
fn uint_item(rng: &mut Rng, name: &str, f: F, v: u128, exact: bool) -> MatchItem {
    let full = f.all_ones();
    let m = if exact {
        full
    } else {
        match rng.below(4) {
            0 => full & !0xf,
            1 => full & !0xff,
            2 => 1 << (f.bits() - 1),
            _ => rng.u128() & full,
        }
    };
    let text = if m == full {
        format!("{name}={v}")
    } else {
        format!("{name}=0x{v:x}/0x{m:x}")
    };
    MatchItem { text, f, v, m }
}

pub mod actions;
pub mod fields;
pub mod groups;
use actions::{ACTIONS, ActCtx};
use fields::{Ctx, FIELDS};

/// The class as rule text, in one of the spellings both switches take.
fn class_text(rng: &mut Rng, c: Class) -> String {
    let kw = |v6: bool, p: u8| -> Option<&'static str> {
        Some(match (v6, p) {
            (false, TCP) => "tcp",
            (false, UDP) => "udp",
            (false, SCTP) => "sctp",
            (false, ICMP) => "icmp",
            (true, TCP) => "tcp6",
            (true, UDP) => "udp6",
            (true, SCTP) => "sctp6",
            (true, ICMPV6) => "icmp6",
            _ => return None,
        })
    };
    match c {
        Class::Any => String::new(),
        Class::Eth(t) => format!("dl_type=0x{t:04x}"),
        Class::Arp => if rng.chance(70) {
            "arp"
        } else {
            "dl_type=0x0806"
        }
        .into(),
        Class::Ip4(p) | Class::Ip6(p) => {
            let v6 = c.v6();
            let base = match (v6, rng.chance(70)) {
                (false, true) => "ip".to_string(),
                (true, true) => "ipv6".to_string(),
                (false, false) => "dl_type=0x0800".to_string(),
                (true, false) => "dl_type=0x86dd".to_string(),
            };
            match p {
                None => base,
                Some(p) => match kw(v6, p) {
                    Some(k) if rng.chance(70) => k.to_string(),
                    _ => format!("{base},nw_proto={p}"),
                },
            }
        }
    }
}

/// An action list for a rule of `class` whose match says `tagged`,
/// `later_frag` and (`inv`) wants `+inv` packets: (texts, needs OpenFlow
/// 1.3).
/// `oxm_vlan`: the match's VLAN part survives OpenFlow 1.3 (see
/// [`vlan_fits_oxm`]); if not, the list gets no `push_vlan`.
#[allow(clippy::too_many_arguments)]
fn actions(
    rng: &mut Rng,
    class: Class,
    tagged: bool,
    later_frag: bool,
    inv: bool,
    oxm_vlan: bool,
    table: u8,
    set: &Extras,
) -> (Vec<String>, bool) {
    if rng.chance(8) {
        return (
            if rng.chance(50) {
                vec!["drop".into()]
            } else {
                vec![]
            },
            false,
        );
    }
    for _ in 0..20 {
        let mut c = ActCtx {
            class,
            tags: u32::from(tagged),
            later_frag,
            table,
            groups: set.groups.iter().map(|g| g.id).collect(),
            meters: set.meters.iter().map(|m| m.id).collect(),
            ct: set.ct,
            inv,
        };
        let n = 1 + rng.below(7);
        let mut acts = Vec::new();
        for _ in 0..n {
            let g = weighted(rng, ACTIONS, |a| a.weight);
            if let Some(a) = (g.make)(rng, &mut c) {
                acts.push(a);
            }
        }
        // goto_table is an instruction: one, after the actions.
        if let Some(g) = acts.iter().position(|a| a.text.starts_with("goto_table")) {
            let goto = acts.remove(g);
            acts.retain(|a| !a.text.starts_with("goto_table"));
            acts.push(goto);
        }
        // meter is an instruction too: one, before the actions.
        if let Some(m) = acts.iter().position(|a| a.text.starts_with("meter:")) {
            let meter = acts.remove(m);
            acts.retain(|a| !a.text.starts_with("meter:"));
            acts.insert(0, meter);
        }
        let of13 = acts.iter().any(|a| a.of13_only);
        if of13 && !(oxm_vlan && acts.iter().all(|a| a.of13_ok)) {
            continue;
        }
        return (acts.into_iter().map(|a| a.text).collect(), of13);
    }
    (vec![format!("output:{}", rng.pick(PORTS))], false)
}

/// Whether OVS keeps a VLAN match when it speaks OpenFlow 1.3: there the
/// TCI becomes OXM `vlan_vid` (VID and present bit, maskable) and
/// `vlan_pcp` (exact, and only written beside a nonzero `vlan_vid`), so
/// a mask over part of the PCP, or PCP bits without the present bit set,
/// would be silently widened or dropped (`nx_put_raw()`): such a rule
/// would not be the rule nfvswitch has.
fn vlan_fits_oxm(i: &MatchItem) -> bool {
    if i.f != F::VlanTci {
        return true;
    }
    let (v, m) = (i.v as u16, i.m as u16);
    let pcp = m & 0xe000;
    pcp == 0 || (pcp == 0xe000 && v & m & VLAN_PRESENT != 0)
}

/// What a rule set has besides its rules: groups and meters its rules'
/// actions may name, and whether they use the connection tracker.
#[derive(Clone, Debug, Default)]
pub struct Extras {
    pub groups: Vec<groups::Group>,
    pub meters: Vec<groups::Meter>,
    /// Its IP rules may have `ct(...)` and `ct_clear`, its rules match
    /// `ct_state`, `ct_zone`, `ct_mark`; its packets are traced with
    /// `--ct-next` states ([`ct_next`]).
    pub ct: bool,
}

/// A rule set: `n` rules with distinct priorities, whose actions may name
/// the groups and meters of `set`.
pub fn rules(rng: &mut Rng, n: usize, set: &Extras) -> Vec<Rule> {
    let mut used = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    if set.ct && rng.chance(80) {
        for (priority, class) in [(0, Class::Ip4(None)), (1, Class::Ip6(None))] {
            if rng.chance(75) {
                used.insert(priority);
                out.push(tracker_entry(rng, priority, class));
            }
        }
    }
    while out.len() < n {
        let default_priority = rng.chance(5);
        let priority = if default_priority {
            32768
        } else if rng.chance(80) {
            rng.below(200) as u16
        } else {
            rng.next() as u16
        };
        if !used.insert(priority) {
            continue;
        }
        out.push(rule(rng, priority, default_priority, set));
    }
    out
}

/// What a security group starts with, so that many of a ct rule set's
/// packets reach the tracker: at a low priority of table 0, every packet
/// of `class` (IPv4 or IPv6) to `ct(table=T...)` (whose tables then match
/// `ct_state`).
fn tracker_entry(rng: &mut Rng, priority: u16, class: Class) -> Rule {
    let mut args = vec![format!(
        "table={}",
        1 + rng.below(u64::from(actions::LAST_TABLE))
    )];
    if rng.chance(70) {
        args.push(format!("zone={}", rng.pick(CT_ZONES)));
    }
    if rng.chance(20) {
        args.push("commit".into());
    }
    let mut acts = vec![format!("ct({})", args.join(","))];
    if rng.chance(30) {
        acts.push(format!("output:{}", rng.pick(PORTS)));
    }
    Rule {
        table: 0,
        priority,
        default_priority: false,
        class,
        class_text: class_text(rng, class),
        fields: Vec::new(),
        actions: acts,
        of13: false,
    }
}

fn rule(rng: &mut Rng, priority: u16, default_priority: bool, set: &Extras) -> Rule {
    // Most rules in table 0, the rest in the later tables the pipeline's
    // goto_table and resubmit reach (the tracker's copies too: more
    // there in a ct rule set).
    let later = if set.ct { 6 } else { 4 };
    let table = match rng.below(10) {
        t if t >= later => 0,
        t if t >= later / 2 => 1,
        _ => actions::LAST_TABLE,
    };
    // A table the tracker's copies come to is mostly a security group's:
    // IP rules that test ct_state and little else.
    let ct_stage = set.ct && table > 0 && rng.chance(60);
    let mut class = random_class(rng);
    while ct_stage && !class.ip() {
        class = random_class(rng);
    }
    let class_text = class_text(rng, class);
    let mut ctx = Ctx {
        class,
        fields: Vec::new(),
        ct: set.ct,
    };
    if ct_stage {
        ctx.fields.push(fields::ct_state_item(rng));
    }
    let n = if ct_stage {
        rng.pick(&[0, 0, 1, 1, 2])
    } else {
        rng.pick(&[0, 1, 1, 2, 2, 3, 3, 4, 5])
    };
    for _ in 0..n {
        let g = weighted(rng, FIELDS, |f| f.weight);
        if (g.fits)(&ctx) {
            let items = (g.make)(rng, &ctx);
            ctx.fields.extend(items);
        }
    }
    let tagged = ctx.fields.iter().any(|i| {
        i.f == F::VlanTci
            && i.m & u128::from(VLAN_PRESENT) != 0
            && i.v & u128::from(VLAN_PRESENT) != 0
    });
    let later_frag = ctx.fields.iter().any(|i| {
        i.f == F::IpFrag && i.m & u128::from(FRAG_LATER) != 0 && i.v & u128::from(FRAG_LATER) != 0
    });
    let inv = ctx
        .fields
        .iter()
        .any(|i| i.f == F::CtState && i.v & i.m & u128::from(cs::INV) != 0);
    let oxm_vlan = ctx.fields.iter().all(vlan_fits_oxm);
    let (actions, of13) = actions(rng, class, tagged, later_frag, inv, oxm_vlan, table, set);
    Rule {
        table,
        priority,
        default_priority,
        class,
        class_text,
        fields: ctx.fields,
        actions,
        of13,
    }
}

// ---- packets ----

/// A random packet of `class` (`Any`: a random class).
pub fn random_packet(rng: &mut Rng, class: Class) -> Key {
    let mut class = class;
    while class == Class::Any {
        class = random_class(rng);
    }
    let mut k = Key {
        in_port: rng.pick(PORTS),
        dl_src: mac_val(rng),
        dl_dst: mac_val(rng),
        ..Key::default()
    };
    if rng.chance(30) {
        let vid = rng.pick_or(&[0u16, 1, 5, 100, 4095], |rng| rng.below(4096) as u16);
        k.vlan_tci = VLAN_PRESENT | vid | (rng.below(8) as u16) << 13;
    }
    match class {
        Class::Any => unreachable!(),
        Class::Eth(t) => k.dl_type = t,
        Class::Arp => {
            k.dl_type = ETH_ARP;
            k.nw_proto = rng.pick_or(&[1u8, 2, 1, 2, 3, 4], |rng| rng.next() as u8);
            k.nw_src = ip4_val(rng);
            k.nw_dst = ip4_val(rng);
            k.arp_sha = mac_val(rng);
            k.arp_tha = mac_val(rng);
        }
        Class::Ip4(p) | Class::Ip6(p) => {
            let v6 = class.v6();
            k.dl_type = if v6 { ETH_IPV6 } else { ETH_IPV4 };
            k.nw_proto =
                p.unwrap_or_else(|| rng.pick(&[TCP, UDP, SCTP, ICMP, ICMPV6, 47, 89, 250, 0]));
            k.nw_tos = rng.next() as u8;
            k.nw_ttl = ttl_val(rng);
            k.ip_frag = match rng.below(10) {
                0 => FRAG_ANY,
                1 => FRAG_ANY | FRAG_LATER,
                _ => 0,
            };
            if v6 {
                k.ipv6_src = ip6_val(rng);
                k.ipv6_dst = ip6_val(rng);
                k.ipv6_label = rng.pick_or(&[0u32, 1, 0x12345], |rng| rng.next() as u32 & 0xfffff);
            } else {
                k.nw_src = ip4_val(rng);
                k.nw_dst = ip4_val(rng);
            }
            k.tp_src = port_val(rng);
            k.tp_dst = port_val(rng);
            k.tcp_flags = rng.pick_or(&[0u16, 0x002, 0x012, 0x010], |rng| {
                rng.next() as u16 & 0xfff
            });
            if k.has_icmp() || matches!(k.nw_proto, ICMP | ICMPV6) {
                k.tp_src = rng.pick(ICMP_TYPES);
                k.tp_dst = rng.pick_or(&[0u16, 0, 0, 1, 3], |rng| rng.below(256) as u16);
                k.nd_target = ip6_val(rng);
                k.arp_sha = mac_val(rng);
                k.arp_tha = mac_val(rng);
            }
        }
    }
    k.normalize();
    k
}

/// A packet that `rule` matches (in the model), with random bits where it
/// does not look, or (`near`) one matched field then changed.
pub fn packet_for(rng: &mut Rng, rule: &Rule, near: bool) -> Key {
    let mut k = random_packet(rng, rule.class);
    let cons = rule.constraints();
    for &(f, v, m) in &cons {
        k.set(f, (v & m) | (k.get(f) & !m));
    }
    if near && !cons.is_empty() {
        let (f, _, m) = rng.pick(&cons);
        if f == F::InPort {
            // Packets come from ports that exist.
            k.in_port = rng.pick(PORTS);
        } else if f == F::DlType {
            // Another Ethertype both parse alike (not MPLS, NSH, a VLAN
            // TPID, RARP or 802.2: OVS reads further fields of those).
            let others = [ETH_IPV4, ETH_IPV6, ETH_ARP, rng.pick(OTHER_ETHERTYPES)];
            k.dl_type = rng.pick(&others);
        } else {
            k.set(f, k.get(f) ^ (rng.u128() & m).max(m & m.wrapping_neg()));
        }
    }
    k.normalize();
    k
}

// ---- the tracker's answers ----

/// `state` made one a tracker reports (OVS's `validate_ct_state()`, which
/// `--ct-next` must pass): `trk` with any other, `inv` with `trk` alone,
/// `new` without `est` or `rpl`.
fn reportable(rng: &mut Rng, state: u8) -> u8 {
    use cs::*;
    let mut s = state;
    if s == 0 {
        return 0;
    }
    s |= TRK;
    if s & INV != 0 {
        return TRK | INV;
    }
    if s & NEW != 0 && s & (EST | RPL) != 0 {
        if rng.chance(50) {
            s &= !NEW;
        } else {
            s &= !(EST | RPL);
        }
    }
    s
}

/// States a tracker reports, for copies no rule asked anything of.
const CT_STATES: &[u8] = &[
    cs::TRK | cs::NEW,
    cs::TRK | cs::EST,
    cs::TRK | cs::EST | cs::RPL,
    cs::TRK | cs::REL,
    cs::TRK | cs::REL | cs::RPL,
    cs::TRK | cs::INV,
    cs::TRK | cs::EST | cs::DNAT,
    cs::TRK | cs::NEW | cs::SNAT,
    cs::TRK,
];

/// The tracker's answers for a packet's tracked copies (`--ct-next`, in
/// the order the copies are looked up): none at all (every copy is a new
/// connection's, both switches' default) or one to three states, each
/// mostly `wish` made reportable (the `ct_state` a rule the packet was
/// made for matches), else another.
pub fn ct_next(rng: &mut Rng, wish: u8) -> Vec<u8> {
    let n = rng.below(4);
    (0..n)
        .map(|_| {
            if wish != 0 && rng.chance(70) {
                reportable(rng, wish)
            } else if rng.chance(4) {
                // An untracked copy: OVS takes "" for it.
                0
            } else {
                rng.pick(CT_STATES)
            }
        })
        .collect()
}

/// `states` as OVS's `--ct-next` takes them (names, comma-separated), and
/// as nfvswitch is given them (the same, or `trk est`, `+trk+est`,
/// `trk|est`: every spelling it takes).
pub fn ct_next_texts(rng: &mut Rng, states: &[u8]) -> (Vec<String>, Vec<String>) {
    let names = |s: u8| -> Vec<&str> {
        cs::NAMES
            .iter()
            .filter(|n| s & n.1 != 0)
            .map(|n| n.0)
            .collect()
    };
    let ovs = states.iter().map(|&s| names(s).join(",")).collect();
    let nfv = states
        .iter()
        .map(|&s| {
            let mut n = names(s);
            if rng.chance(50) {
                n.reverse();
            }
            match rng.below(4) {
                0 => n.join(","),
                1 => n.join(" "),
                2 if s != 0 => n.iter().map(|x| format!("+{x}")).collect(),
                _ => n.join("|"),
            }
        })
        .collect();
    (ovs, nfv)
}
