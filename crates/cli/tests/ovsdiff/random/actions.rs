//! The actions a rule may get: one [`ActionGen`] each in [`ACTIONS`].

use super::*;
/// What an action generator sees: the rule's class and, as `ovs-ofctl`
/// checks actions against the match, how many VLAN tags the packet is
/// known to carry at this point.
pub struct ActCtx {
    pub class: Class,
    pub tags: u32,
    /// The match pins `ip_frag` to a later fragment.
    pub later_frag: bool,
    /// The rule's table: `goto_table` and `resubmit` go to a later one.
    pub table: u8,
    /// The rule set's group and meter ids (`group:N`, `meter:N`).
    pub groups: Vec<u32>,
    pub meters: Vec<u32>,
    /// The rule set uses the connection tracker (see [`Extras::ct`]).
    pub ct: bool,
    /// The match wants `+inv` packets: both switches refuse
    /// `ct(commit)` there (OVS's MATCH_INCONSISTENT).
    pub inv: bool,
}

/// Tables the rule sets spread over (0 to `LAST_TABLE`).
pub const LAST_TABLE: u8 = 2;

/// One generated action.
pub struct Act {
    pub text: String,
    /// Only in OpenFlow 1.1+ (`push_vlan`).
    pub of13_only: bool,
    /// Passes OVS's OpenFlow 1.1+ consistency check against the match
    /// (`ofpact_check`), and means the same there as in OpenFlow 1.0.
    pub of13_ok: bool,
}

pub struct ActionGen {
    pub name: &'static str,
    pub weight: u32,
    pub make: fn(&mut Rng, &mut ActCtx) -> Option<Act>,
}

fn act(text: String, of13_ok: bool) -> Option<Act> {
    Some(Act {
        text,
        of13_only: false,
        of13_ok,
    })
}

pub const ACTIONS: &[ActionGen] = &[
    ActionGen {
        name: "output",
        weight: 30,
        make: |r, _| {
            let p = r.pick(PORTS);
            act(
                if r.chance(80) {
                    format!("output:{p}")
                } else {
                    p.to_string()
                },
                true,
            )
        },
    },
    ActionGen {
        name: "in_port",
        weight: 3,
        make: |r, _| {
            act(
                if r.chance(70) {
                    "in_port"
                } else {
                    "output:in_port"
                }
                .into(),
                true,
            )
        },
    },
    ActionGen {
        name: "flood",
        weight: 2,
        make: |_, _| act("flood".into(), true),
    },
    ActionGen {
        name: "all",
        weight: 2,
        make: |_, _| act("all".into(), true),
    },
    ActionGen {
        name: "mod_dl_src",
        weight: 4,
        make: |r, _| act(format!("mod_dl_src:{}", mac(mac_val(r))), true),
    },
    ActionGen {
        name: "mod_dl_dst",
        weight: 4,
        make: |r, _| act(format!("mod_dl_dst:{}", mac(mac_val(r))), true),
    },
    ActionGen {
        name: "mod_vlan_vid",
        weight: 4,
        make: |r, c| {
            let vid = r.pick_or(&[0u16, 1, 7, 4095], |r| r.below(4096) as u16);
            // OpenFlow 1.3 pushes a tag where the match has none: then
            // it would differ from OpenFlow 1.0's "set, or push if none".
            let ok = c.tags > 0;
            c.tags = c.tags.max(1);
            act(format!("mod_vlan_vid:{vid}"), ok)
        },
    },
    ActionGen {
        name: "push_vlan",
        weight: 3,
        make: |r, c| {
            // OVS refuses a third tag (FLOW_MAX_VLAN_HEADERS).
            if c.tags >= 2 {
                return None;
            }
            c.tags += 1;
            Some(Act {
                text: format!("push_vlan:0x{:04x}", r.pick(&[0x8100u16, 0x88a8])),
                of13_only: true,
                of13_ok: true,
            })
        },
    },
    ActionGen {
        name: "strip_vlan",
        weight: 3,
        make: |_, c| {
            let ok = c.tags > 0;
            c.tags = c.tags.saturating_sub(1);
            act("strip_vlan".into(), ok)
        },
    },
    ActionGen {
        name: "mod_nw_src",
        weight: 3,
        make: |r, c| {
            act(
                format!("mod_nw_src:{}", ip4(ip4_val(r))),
                matches!(c.class, Class::Ip4(_)),
            )
        },
    },
    ActionGen {
        name: "mod_nw_dst",
        weight: 3,
        make: |r, c| {
            act(
                format!("mod_nw_dst:{}", ip4(ip4_val(r))),
                matches!(c.class, Class::Ip4(_)),
            )
        },
    },
    ActionGen {
        name: "mod_tp_src",
        weight: 3,
        make: |r, c| {
            act(
                format!("mod_tp_src:{}", port_val(r)),
                c.class.ports() && !c.later_frag,
            )
        },
    },
    ActionGen {
        name: "mod_tp_dst",
        weight: 3,
        make: |r, c| {
            act(
                format!("mod_tp_dst:{}", port_val(r)),
                c.class.ports() && !c.later_frag,
            )
        },
    },
    ActionGen {
        name: "mod_nw_tos",
        weight: 2,
        make: |r, c| act(format!("mod_nw_tos:{}", r.below(64) << 2), c.class.ip()),
    },
    ActionGen {
        name: "mod_nw_ecn",
        weight: 2,
        make: |r, c| {
            // OVS refuses it without an IP match (see KNOWN_REFUSALS):
            // rare there, so that few rule sets lose a rule.
            if !c.class.ip() && !r.chance(10) {
                return None;
            }
            act(format!("mod_nw_ecn:{}", r.below(4)), c.class.ip())
        },
    },
    ActionGen {
        name: "mod_nw_ttl",
        weight: 2,
        make: |r, c| {
            if !c.class.ip() && !r.chance(10) {
                return None;
            }
            act(format!("mod_nw_ttl:{}", ttl_val(r)), c.class.ip())
        },
    },
    ActionGen {
        name: "dec_ttl",
        weight: 3,
        make: |_, c| act("dec_ttl".into(), c.class.ip()),
    },
    ActionGen {
        name: "set_field ipv6_src",
        weight: 2,
        make: |r, c| {
            // OVS refuses it without an IPv6 match (KNOWN_REFUSALS): rare.
            if !c.class.v6() && !r.chance(5) {
                return None;
            }
            act(
                format!("set_field:{}->ipv6_src", ip6(ip6_val(r))),
                c.class.v6(),
            )
        },
    },
    ActionGen {
        name: "set_field ipv6_dst",
        weight: 2,
        make: |r, c| {
            // OVS refuses it without an IPv6 match (KNOWN_REFUSALS): rare.
            if !c.class.v6() && !r.chance(5) {
                return None;
            }
            act(
                format!("set_field:{}->ipv6_dst", ip6(ip6_val(r))),
                c.class.v6(),
            )
        },
    },
    ActionGen {
        name: "goto_table",
        weight: 4,
        make: |r, c| {
            if c.table >= LAST_TABLE {
                return None;
            }
            let t = c.table + 1 + r.below(u64::from(LAST_TABLE - c.table)) as u8;
            // An OpenFlow 1.1+ instruction; the list puts it last.
            Some(Act {
                text: format!("goto_table:{t}"),
                of13_only: true,
                of13_ok: true,
            })
        },
    },
    ActionGen {
        name: "resubmit",
        weight: 4,
        make: |r, c| {
            if c.table >= LAST_TABLE {
                return None;
            }
            let t = c.table + 1 + r.below(u64::from(LAST_TABLE - c.table)) as u8;
            act(format!("resubmit(,{t})"), true)
        },
    },
    ActionGen {
        name: "set_field ipv6_label",
        weight: 2,
        make: |r, c| {
            let l = r.pick_or(&[0u32, 1, 0x12345, 0xfffff], |r| r.next() as u32 & 0xfffff);
            if !c.class.v6() && !r.chance(5) {
                return None;
            }
            act(format!("set_field:0x{l:x}->ipv6_label"), c.class.v6())
        },
    },
    ActionGen {
        name: "group",
        weight: 14,
        make: |r, c| {
            if c.groups.is_empty() {
                return None;
            }
            // OpenFlow 1.1+.
            Some(Act {
                text: format!("group:{}", r.pick(&c.groups)),
                of13_only: true,
                of13_ok: true,
            })
        },
    },
    ActionGen {
        name: "ct",
        weight: 14,
        make: |r, c| {
            // Both switches want an IP match for ct.
            if !c.ct || !c.class.ip() {
                return None;
            }
            let mut args: Vec<String> = Vec::new();
            let commit = !c.inv && r.chance(40);
            if commit {
                args.push("commit".into());
                if r.chance(15) {
                    args.push("force".into());
                }
                // exec: ct_mark, ct_label or both, in either order.
                let mut sets = Vec::new();
                if r.chance(35) {
                    let v = r.pick_or(CT_MARKS, |r| r.next() as u32);
                    let mask = if r.chance(50) {
                        String::new()
                    } else {
                        format!(
                            "/0x{:x}",
                            r.pick_or(&[0xffu32, 0xf, 0x300], |r| r.next() as u32)
                        )
                    };
                    sets.push(format!("set_field:0x{v:x}{mask}->ct_mark"));
                }
                if r.chance(25) {
                    let v = r.pick_or(CT_LABELS, |r| r.u128());
                    let mask = if r.chance(50) {
                        String::new()
                    } else {
                        format!(
                            "/0x{:x}",
                            r.pick_or(&[0xffu128, u128::MAX << 64], |r| r.u128())
                        )
                    };
                    sets.push(format!("set_field:0x{v:x}{mask}->ct_label"));
                }
                if r.chance(50) {
                    sets.reverse();
                }
                if !sets.is_empty() {
                    args.push(format!("exec({})", sets.join(",")));
                }
            }
            if r.chance(60) {
                args.push(format!("zone={}", r.pick(CT_ZONES)));
            }
            // A later table only: no copy comes back to where it started
            // (OVS's trace would follow a loop without end).
            if c.table < LAST_TABLE && r.chance(85) {
                let t = c.table + 1 + r.below(u64::from(LAST_TABLE - c.table)) as u8;
                args.push(format!("table={t}"));
            }
            for i in (1..args.len()).rev() {
                let j = r.below(i as u64 + 1) as usize;
                args.swap(i, j);
            }
            act(
                if args.is_empty() {
                    "ct".into()
                } else {
                    format!("ct({})", args.join(","))
                },
                true,
            )
        },
    },
    ActionGen {
        name: "ct_clear",
        weight: 3,
        make: |_, c| {
            if !c.ct {
                return None;
            }
            act("ct_clear".into(), true)
        },
    },
    ActionGen {
        name: "meter",
        weight: 5,
        make: |r, c| {
            if c.meters.is_empty() {
                return None;
            }
            // An OpenFlow 1.3 instruction: the list puts one first.
            Some(Act {
                text: format!("meter:{}", r.pick(&c.meters)),
                of13_only: true,
                of13_ok: true,
            })
        },
    },
];
