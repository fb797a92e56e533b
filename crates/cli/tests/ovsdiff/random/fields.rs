//! The match fields a rule may get: one [`FieldGen`] each in [`FIELDS`].

use super::*;
/// What a field generator sees: the rule so far.
pub struct Ctx {
    pub class: Class,
    pub fields: Vec<MatchItem>,
    /// The rule set uses the connection tracker (see [`Extras::ct`]).
    pub ct: bool,
}

impl Ctx {
    fn used(&self, f: F) -> bool {
        self.fields.iter().any(|i| i.f == f)
    }
    fn exact(&self, f: F) -> Option<u128> {
        self.fields
            .iter()
            .find(|i| i.f == f && i.m == f.all_ones())
            .map(|i| i.v)
    }
}

/// One match field: name (for reports), weight, whether it fits the rule
/// so far, and its generator (which may add a prerequisite first).
pub struct FieldGen {
    pub name: &'static str,
    pub weight: u32,
    pub fits: fn(&Ctx) -> bool,
    pub make: fn(&mut Rng, &Ctx) -> Vec<MatchItem>,
}

fn one(i: MatchItem) -> Vec<MatchItem> {
    vec![i]
}

/// ND fields need `icmp_type=135` or `136` (and a code of 0, or none).
fn nd_fits(c: &Ctx, types: &[u128]) -> bool {
    c.class == Class::Ip6(Some(ICMPV6))
        && c.exact(F::TpDst).is_none_or(|v| v == 0)
        && (!c.used(F::TpDst) || c.exact(F::TpDst).is_some())
        && match c.exact(F::TpSrc) {
            Some(t) => types.contains(&t),
            None => !c.used(F::TpSrc),
        }
}

/// `icmp_type=T` when the rule has none yet, then `item`.
fn with_nd_type(rng: &mut Rng, c: &Ctx, types: &[u16], item: MatchItem) -> Vec<MatchItem> {
    let mut v = Vec::new();
    if !c.used(F::TpSrc) {
        let t = rng.pick(types);
        let name = if rng.chance(50) {
            "icmp_type"
        } else {
            "icmpv6_type"
        };
        v.push(MatchItem {
            text: format!("{name}={t}"),
            f: F::TpSrc,
            v: t.into(),
            m: 0xffff,
        });
    }
    v.push(item);
    v
}

pub const FIELDS: &[FieldGen] = &[
    FieldGen {
        name: "in_port",
        weight: 10,
        fits: |c| !c.used(F::InPort),
        make: |r, _| {
            let p = r.pick(PORTS);
            one(MatchItem {
                text: format!("in_port={p}"),
                f: F::InPort,
                v: p.into(),
                m: 0xffff,
            })
        },
    },
    FieldGen {
        name: "dl_src",
        weight: 4,
        fits: |c| !c.used(F::DlSrc),
        make: |r, _| one(mac_item(r, "dl_src", F::DlSrc)),
    },
    FieldGen {
        name: "dl_dst",
        weight: 4,
        fits: |c| !c.used(F::DlDst),
        make: |r, _| one(mac_item(r, "dl_dst", F::DlDst)),
    },
    FieldGen {
        name: "vlan",
        weight: 5,
        fits: |c| !c.used(F::VlanTci),
        make: |r, _| {
            let vid = r.pick_or(&[0u16, 1, 5, 100, 4095], |r| r.below(4096) as u16);
            let pcp = r.below(8) as u16;
            let (text, v, m) = match r.below(6) {
                0 => (format!("dl_vlan={vid}"), VLAN_PRESENT | vid, 0x1fff),
                1 => (
                    format!("dl_vlan_pcp={pcp}"),
                    VLAN_PRESENT | pcp << 13,
                    0xf000,
                ),
                2 => (
                    format!("dl_vlan={vid},dl_vlan_pcp={pcp}"),
                    VLAN_PRESENT | vid | pcp << 13,
                    0xffff,
                ),
                3 => ("dl_vlan=0xffff".to_string(), 0, VLAN_PRESENT),
                4 => ("vlan_tci=0".to_string(), 0, 0xffff),
                _ => {
                    let v = r.next() as u16;
                    let m = r.next() as u16;
                    (format!("vlan_tci=0x{:04x}/0x{m:04x}", v & m), v & m, m)
                }
            };
            one(MatchItem {
                text,
                f: F::VlanTci,
                v: v.into(),
                m: m.into(),
            })
        },
    },
    FieldGen {
        name: "nw_src",
        weight: 5,
        fits: |c| matches!(c.class, Class::Ip4(_) | Class::Arp) && !c.used(F::NwSrc),
        make: |r, c| {
            let name = if c.class == Class::Arp && r.chance(50) {
                "arp_spa"
            } else {
                "nw_src"
            };
            one(ip4_item(r, name, F::NwSrc))
        },
    },
    FieldGen {
        name: "nw_dst",
        weight: 5,
        fits: |c| matches!(c.class, Class::Ip4(_) | Class::Arp) && !c.used(F::NwDst),
        make: |r, c| {
            let name = if c.class == Class::Arp && r.chance(50) {
                "arp_tpa"
            } else {
                "nw_dst"
            };
            one(ip4_item(r, name, F::NwDst))
        },
    },
    FieldGen {
        name: "ipv6_src",
        weight: 5,
        fits: |c| c.class.v6() && !c.used(F::Ipv6Src),
        make: |r, _| one(ip6_item(r, "ipv6_src", F::Ipv6Src)),
    },
    FieldGen {
        name: "ipv6_dst",
        weight: 5,
        fits: |c| c.class.v6() && !c.used(F::Ipv6Dst),
        make: |r, _| one(ip6_item(r, "ipv6_dst", F::Ipv6Dst)),
    },
    FieldGen {
        name: "ipv6_label",
        weight: 2,
        fits: |c| c.class.v6() && !c.used(F::Ipv6Label),
        make: |r, _| {
            let v = r.pick_or(&[0u128, 1, 0x12345, 0xfffff], |r| r.u128() & 0xfffff);
            let exact = r.chance(60);
            one(uint_item(r, "ipv6_label", F::Ipv6Label, v, exact))
        },
    },
    FieldGen {
        name: "arp_op",
        weight: 3,
        fits: |c| c.class == Class::Arp && !c.used(F::NwProto),
        make: |r, _| {
            let op = r.pick_or(&[1u8, 2, 3, 4], |r| r.next() as u8);
            one(MatchItem {
                text: format!("arp_op={op}"),
                f: F::NwProto,
                v: op.into(),
                m: 0xff,
            })
        },
    },
    FieldGen {
        name: "nw_proto (ARP)",
        weight: 1,
        fits: |c| c.class == Class::Arp && !c.used(F::NwProto),
        make: |r, _| {
            let op = r.pick(&[1u8, 2]);
            one(MatchItem {
                text: format!("nw_proto={op}"),
                f: F::NwProto,
                v: op.into(),
                m: 0xff,
            })
        },
    },
    FieldGen {
        name: "nw_tos",
        weight: 3,
        fits: |c| c.class.ip() && !c.fields.iter().any(|i| i.f == F::NwTos && i.m & 0xfc != 0),
        make: |r, _| {
            let dscp = r.pick_or(&[0u8, 1, 10, 46, 63], |r| r.below(64) as u8);
            let text = if r.chance(50) {
                format!("nw_tos={}", dscp << 2)
            } else {
                format!("ip_dscp={dscp}")
            };
            one(MatchItem {
                text,
                f: F::NwTos,
                v: (dscp << 2).into(),
                m: 0xfc,
            })
        },
    },
    FieldGen {
        name: "nw_ecn",
        weight: 2,
        fits: |c| c.class.ip() && !c.fields.iter().any(|i| i.f == F::NwTos && i.m & 0x03 != 0),
        make: |r, _| {
            let ecn = r.below(4) as u8;
            let name = if r.chance(50) { "nw_ecn" } else { "ip_ecn" };
            one(MatchItem {
                text: format!("{name}={ecn}"),
                f: F::NwTos,
                v: ecn.into(),
                m: 0x03,
            })
        },
    },
    FieldGen {
        name: "nw_ttl",
        weight: 3,
        fits: |c| c.class.ip() && !c.used(F::NwTtl),
        make: |r, _| {
            let ttl = ttl_val(r);
            one(uint_item(r, "nw_ttl", F::NwTtl, ttl.into(), true))
        },
    },
    FieldGen {
        name: "ip_frag",
        weight: 3,
        fits: |c| c.class.ip() && !c.used(F::IpFrag),
        make: |r, _| {
            let (word, v, m) = r.pick(&[
                ("no", 0u8, 1u8),
                ("yes", 1, 1),
                ("first", 1, 3),
                ("later", 3, 3),
                ("not_later", 0, 2),
            ]);
            let name = if r.chance(50) { "ip_frag" } else { "nw_frag" };
            one(MatchItem {
                text: format!("{name}={word}"),
                f: F::IpFrag,
                v: v.into(),
                m: m.into(),
            })
        },
    },
    FieldGen {
        name: "tp_src",
        weight: 6,
        fits: |c| (c.class.ports() || c.class.icmp()) && !c.used(F::TpSrc),
        make: |r, c| {
            if c.class.icmp() {
                let t = r.pick(ICMP_TYPES);
                return one(uint_item(r, "tp_src", F::TpSrc, t.into(), true));
            }
            let p = port_val(r);
            let exact = r.chance(70);
            one(uint_item(r, "tp_src", F::TpSrc, p.into(), exact))
        },
    },
    FieldGen {
        name: "tp_dst",
        weight: 6,
        fits: |c| (c.class.ports() || c.class.icmp()) && !c.used(F::TpDst),
        make: |r, c| {
            if c.class.icmp() {
                let code = r.pick(&[0u16, 0, 1, 3]);
                return one(uint_item(r, "tp_dst", F::TpDst, code.into(), true));
            }
            let p = port_val(r);
            let exact = r.chance(70);
            one(uint_item(r, "tp_dst", F::TpDst, p.into(), exact))
        },
    },
    FieldGen {
        name: "tcp_flags",
        weight: 3,
        fits: |c| c.class.proto() == Some(TCP) && !c.used(F::TcpFlags),
        make: |r, _| {
            const NAMES: &[(&str, u16)] = &[
                ("fin", 0x001),
                ("syn", 0x002),
                ("rst", 0x004),
                ("psh", 0x008),
                ("ack", 0x010),
                ("urg", 0x020),
                ("ece", 0x040),
                ("cwr", 0x080),
                ("ns", 0x100),
            ];
            if r.chance(50) {
                let (mut text, mut v, mut m) = (String::new(), 0u16, 0u16);
                for &(name, bit) in NAMES {
                    if r.chance(25) {
                        let set = r.chance(50);
                        text.push(if set { '+' } else { '-' });
                        text.push_str(name);
                        m |= bit;
                        if set {
                            v |= bit;
                        }
                    }
                }
                if m == 0 {
                    (text, v, m) = ("+syn".into(), 2, 2);
                }
                return one(MatchItem {
                    text: format!("tcp_flags={text}"),
                    f: F::TcpFlags,
                    v: v.into(),
                    m: m.into(),
                });
            }
            let v = r.pick_or(&[0x002u128, 0x012, 0x010, 0x001], |r| r.u128() & 0xfff);
            let exact = r.chance(50);
            one(uint_item(r, "tcp_flags", F::TcpFlags, v, exact))
        },
    },
    FieldGen {
        name: "icmp_type",
        weight: 5,
        fits: |c| c.class.icmp() && !c.used(F::TpSrc),
        make: |r, c| {
            let name = if c.class.v6() && r.chance(50) {
                "icmpv6_type"
            } else {
                "icmp_type"
            };
            let t = r.pick(ICMP_TYPES);
            one(uint_item(r, name, F::TpSrc, t.into(), true))
        },
    },
    FieldGen {
        name: "icmp_code",
        weight: 3,
        fits: |c| c.class.icmp() && !c.used(F::TpDst),
        make: |r, c| {
            let name = if c.class.v6() && r.chance(50) {
                "icmpv6_code"
            } else {
                "icmp_code"
            };
            let code = r.pick_or(&[0u16, 0, 1, 3], |r| r.below(256) as u16);
            one(uint_item(r, name, F::TpDst, code.into(), true))
        },
    },
    FieldGen {
        name: "arp_sha",
        weight: 2,
        fits: |c| c.class == Class::Arp && !c.used(F::ArpSha),
        make: |r, _| one(mac_item(r, "arp_sha", F::ArpSha)),
    },
    FieldGen {
        name: "arp_tha",
        weight: 2,
        fits: |c| c.class == Class::Arp && !c.used(F::ArpTha),
        make: |r, _| one(mac_item(r, "arp_tha", F::ArpTha)),
    },
    FieldGen {
        name: "nd_target",
        weight: 3,
        fits: |c| nd_fits(c, &[135, 136]) && !c.used(F::NdTarget),
        make: |r, c| {
            let i = ip6_item(r, "nd_target", F::NdTarget);
            with_nd_type(r, c, &[135, 136], i)
        },
    },
    FieldGen {
        name: "nd_sll",
        weight: 2,
        fits: |c| nd_fits(c, &[135]) && !c.used(F::ArpSha),
        make: |r, c| {
            let i = mac_item(r, "nd_sll", F::ArpSha);
            with_nd_type(r, c, &[135], i)
        },
    },
    FieldGen {
        name: "nd_tll",
        weight: 2,
        fits: |c| nd_fits(c, &[136]) && !c.used(F::ArpTha),
        make: |r, c| {
            let i = mac_item(r, "nd_tll", F::ArpTha);
            with_nd_type(r, c, &[136], i)
        },
    },
    // What the tracker says of a copy ct(table=T) sent back (a packet
    // from the wire: untracked, 0), in the rule sets that use it.
    FieldGen {
        name: "ct_state",
        weight: 14,
        fits: |c| c.ct && !c.used(F::CtState),
        make: |r, _| one(ct_state_item(r)),
    },
    FieldGen {
        name: "ct_zone",
        weight: 4,
        fits: |c| c.ct && !c.used(F::CtZone),
        make: |r, _| {
            // Exact only: OVS refuses a ct_zone mask.
            let z = r.pick_or(CT_ZONES, |r| r.next() as u16);
            one(uint_item(r, "ct_zone", F::CtZone, z.into(), true))
        },
    },
    FieldGen {
        name: "ct_mark",
        weight: 4,
        fits: |c| c.ct && !c.used(F::CtMark),
        make: |r, _| {
            let v = r.pick_or(CT_MARKS, |r| r.next() as u32);
            let exact = r.chance(60);
            one(uint_item(r, "ct_mark", F::CtMark, v.into(), exact))
        },
    },
    FieldGen {
        name: "ct_label",
        weight: 3,
        fits: |c| c.ct && !c.used(F::CtLabel),
        make: |r, _| {
            let v = r.pick_or(CT_LABELS, |r| r.u128());
            let exact = r.chance(60);
            let mut i = uint_item(r, "ct_label", F::CtLabel, v, exact);
            // OVS reads ct_label in hex only.
            if exact {
                i.text = format!("ct_label=0x{v:x}");
            }
            one(i)
        },
    },
];

/// `ct_state` in the three forms both switches read: `+trk-new...` (the
/// named bits only), `est|trk` (exactly these), a number with or without
/// a mask.
pub fn ct_state_item(r: &mut Rng) -> MatchItem {
    use cs::*;
    let (v, m, text) = match r.below(8) {
        0..=4 => {
            // The bits rules test (snat/dnat rarely: no nat is made).
            let mut bits = vec![TRK, NEW, EST, REL, RPL, INV];
            if r.chance(10) {
                bits.push(r.pick(&[SNAT, DNAT]));
            }
            let (mut v, mut m, mut text) = (0u8, 0u8, String::new());
            while m == 0 {
                for i in (1..bits.len()).rev() {
                    let j = r.below(i as u64 + 1) as usize;
                    bits.swap(i, j);
                }
                for &b in &bits {
                    if r.chance(35) {
                        let set = r.chance(60);
                        m |= b;
                        v |= if set { b } else { 0 };
                        let name = NAMES.iter().find(|n| n.1 == b).unwrap().0;
                        text += &format!("{}{name}", if set { '+' } else { '-' });
                    }
                }
            }
            (v, m, text)
        }
        5 | 6 => {
            let v = r.pick(&[
                TRK | NEW,
                TRK | EST,
                TRK | EST | RPL,
                TRK | REL,
                TRK | INV,
                TRK,
                0,
            ]);
            // Any order of the names.
            let mut names: Vec<&str> = NAMES.iter().filter(|n| v & n.1 != 0).map(|n| n.0).collect();
            if r.chance(50) {
                names.reverse();
            }
            let text = if v == 0 { "0".into() } else { names.join("|") };
            (v, 0xff, text)
        }
        _ => {
            let v = r.pick(&[TRK | NEW, TRK | EST, TRK, 0]);
            let m = r.pick(&[0xffu8, TRK, TRK | NEW, TRK | EST | NEW, v | INV]);
            let text = if m == 0xff {
                format!("0x{v:02x}")
            } else {
                format!("0x{:02x}/0x{m:02x}", v & m)
            };
            (v & m, m, text)
        }
    };
    MatchItem {
        text: format!("ct_state={text}"),
        f: F::CtState,
        v: v.into(),
        m: m.into(),
    }
}
