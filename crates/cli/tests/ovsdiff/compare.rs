//! One case's two traces side by side: what differs, and whether a known
//! difference ([`KNOWN`]) explains it.

use super::key::*;
use super::random::{Class, Rule};
use super::{nfv, ovs};

/// Where copies of a packet leave: (port, its fields there), in order.
pub type Outputs = Vec<(u16, Key)>;

/// A packet traced by both switches over the same rules.
pub struct Case<'a> {
    pub rules: &'a [Rule],
    pub packet: Key,
    /// The `--ct-next` states both were given (OVS's spelling).
    pub ct_next: &'a [String],
    pub ovs: &'a ovs::Trace,
    pub nfv: &'a nfv::Trace,
}

impl Case<'_> {
    /// The rule both switches chose (None: none, or they disagree).
    pub fn rule(&self) -> Option<&Rule> {
        let p = self.ovs.priority?;
        if self.nfv.priority != Some(p) {
            return None;
        }
        self.rules.iter().find(|r| r.priority == p)
    }

    fn actions(&self) -> &[String] {
        self.rule().map_or(&[], |r| &r.actions)
    }

    /// An action of the rule both chose, or of a rule a later table gave
    /// the packet (the pipeline's actions as nfvswitch ran them).
    fn has_action(&self, pred: impl Fn(&str) -> bool) -> bool {
        self.rule().is_some()
            && (self.actions().iter().any(|a| pred(a))
                || self.nfv.pipeline_actions.iter().any(|a| pred(a)))
    }

    /// The outputs of both sides in [`canonical`] order, with `fields`
    /// zeroed.
    fn outputs_without(&self, fields: &[F]) -> (Outputs, Outputs) {
        let strip = |v: &[(u16, Key)]| {
            let v: Vec<(u16, Key)> = v
                .iter()
                .map(|&(p, mut k)| {
                    for &f in fields {
                        k.set(f, 0);
                    }
                    (p, k)
                })
                .collect();
            canonical(&v)
        };
        (strip(&self.ovs.outputs), strip(&self.nfv.outputs))
    }

    /// nfvswitch sends `fields` unchanged everywhere.
    fn nfv_keeps(&self, fields: &[F]) -> bool {
        self.nfv
            .outputs
            .iter()
            .all(|(_, k)| fields.iter().all(|&f| k.get(f) == self.packet.get(f)))
    }

    /// OVS sends `fields` unchanged everywhere the packet itself goes
    /// (its tracked copies aside).
    fn ovs_keeps(&self, fields: &[F]) -> bool {
        self.ovs.outputs[..self.ovs.own_outputs]
            .iter()
            .all(|(_, k)| fields.iter().all(|&f| k.get(f) == self.packet.get(f)))
    }

    /// Same outputs once `fields` are left out.
    fn same_outputs_without(&self, fields: &[F]) -> bool {
        let (a, b) = self.outputs_without(fields);
        a == b
    }
}

/// Outputs in the order the copies leave, except that back-to-back
/// copies with the same fields are sorted by port: `flood` and `all` send
/// theirs in hash order in OVS (in port order in nfvswitch), and OpenFlow
/// orders nothing within them. Copies that differ keep their order.
pub fn canonical(v: &[(u16, Key)]) -> Outputs {
    let mut out: Outputs = Vec::with_capacity(v.len());
    let mut start = 0;
    for (i, o) in v.iter().enumerate() {
        if i > start && o.1 != v[start].1 {
            out[start..].sort();
            start = i;
        }
        out.push(*o);
    }
    out[start..].sort();
    out
}

/// What differs in one case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum What {
    /// The switches read the packet text differently.
    Packet,
    /// Different rules decide.
    Rule,
    /// The tracked copies (`ct(table=T)`) differ: how many, their table,
    /// ct fields or the rule that takes each.
    Recirculations,
    /// Same rule, different ports or header fields at a port.
    Outputs,
}

/// What differs, or nothing.
pub fn differs(c: &Case) -> Option<What> {
    if c.ovs.packet != c.nfv.packet || c.ovs.packet != c.packet {
        return Some(What::Packet);
    }
    if c.ovs.priority != c.nfv.priority {
        return Some(What::Rule);
    }
    if c.ovs.recirculations != c.nfv.recirculations {
        return Some(What::Recirculations);
    }
    if !c.same_outputs_without(&[]) {
        return Some(What::Outputs);
    }
    None
}

/// A difference that is understood: why, and when it applies (tight: the
/// case must show it and nothing else).
pub struct Known {
    pub name: &'static str,
    pub why: &'static str,
    pub applies: fn(&Case, What) -> bool,
}

pub const KNOWN: &[Known] = &[
    Known {
        name: "ovs-mod-tp-rewrites-icmp",
        why: "OVS's mod_tp_src/mod_tp_dst write the flow's tp_src/tp_dst whatever the IP \
              protocol, and for ICMP and ICMPv6 those hold the type and code, so OVS rewrites \
              them (set(icmp(type=..))); nfvswitch, as OpenFlow 1.0 specifies the actions \
              (TCP/UDP ports), leaves ICMP alone",
        applies: |c, what| {
            what == What::Outputs
                && c.packet.has_icmp()
                && c.has_action(|a| a.starts_with("mod_tp_"))
                && c.nfv_keeps(&[F::TpSrc, F::TpDst])
                && c.same_outputs_without(&[F::TpSrc, F::TpDst])
        },
    },
    Known {
        name: "mod-tp-difference-decides-a-later-table",
        why: "ovs-mod-tp-rewrites-icmp or nfvswitch-no-sctp-port-rewrite before a resubmit or \
              goto_table: the later table looks the packet up with OVS's rewritten ICMP \
              type/code or SCTP ports and nfvswitch's own, so a rule there that tests them \
              may take the packet in one switch only",
        applies: |c, what| {
            let sctp = c.packet.has_ports() && c.packet.nw_proto == SCTP;
            what == What::Outputs
                && (c.packet.has_icmp() || sctp)
                && c.rule().is_some()
                && tp_rewrite_decides_a_later_table(c)
        },
    },
    Known {
        name: "ovs-mod-tp-in-the-flow-of-a-ct-copy",
        why: "OVS's mod_tp_src/mod_tp_dst write the flow's tp_src/tp_dst for any IP packet \
              (a later fragment aside), and the tracked copy of a later ct(table=T) is looked \
              up with that flow: it carries the rewrite for ICMP (type/code, as \
              ovs-mod-tp-rewrites-icmp), SCTP (as nfvswitch-no-sctp-port-rewrite) and \
              protocols without ports (numbers no header holds: OVS's datapath actions \
              cannot set them); nfvswitch rewrites TCP and UDP ports only, so its copy has \
              the packet's own (an ND packet's ND fields with its type: OVS's copy of a \
              rewritten type is no ND packet), and a rule of table T that tests them may take \
              one copy and not the other",
        applies: |c, what| {
            let (o, n) = (&c.ovs.recirculations, &c.nfv.recirculations);
            const TP: &[F] = &[F::TpSrc, F::TpDst];
            let strip = |mut k: Key| {
                for f in [F::TpSrc, F::TpDst, F::NdTarget, F::ArpSha, F::ArpTha] {
                    k.set(f, 0);
                }
                k
            };
            what == What::Recirculations
                && c.packet.is_ip()
                && !c.packet.later_fragment()
                && !matches!(c.packet.nw_proto, TCP | UDP)
                && c.has_action(|a| a.starts_with("mod_tp_"))
                && o.len() == n.len()
                && o.iter().zip(n).all(|(o, n)| {
                    o.same_but_headers(n, strip)
                        && TP.iter().all(|&f| n.packet.get(f) == c.packet.get(f))
                })
                && o.iter().zip(n).any(|(o, n)| o.packet != n.packet)
        },
    },
    Known {
        name: "ovs-no-ip-rewrite-for-nw-proto-0",
        why: "OVS's commit_set_nw_action() takes an IP packet whose nw_proto is 0 for one \
              without an L3 header and commits no IPv4/IPv6 rewrite for it (mod_nw_src/dst, \
              mod_nw_tos/ecn/ttl, dec_ttl, set_field ipv6_*: its Final flow has them, its \
              datapath actions do not); nfvswitch rewrites the header (protocol 0 is IPv6 \
              hop-by-hop, or just a number in IPv4). A tracked copy OVS forks after the \
              rewrite has it (OVS's trace looks the copy up with the flow, rewritten): \
              the copies' outputs agree, only the packet's own keep the fields in OVS",
        applies: |c, what| {
            const IP: &[F] = &[
                F::NwSrc,
                F::NwDst,
                F::NwTos,
                F::NwTtl,
                F::Ipv6Src,
                F::Ipv6Dst,
                F::Ipv6Label,
            ];
            what == What::Outputs
                && c.packet.is_ip()
                && c.packet.nw_proto == 0
                && c.ovs_keeps(IP)
                && c.same_outputs_without(IP)
        },
    },
    Known {
        name: "nfvswitch-no-sctp-port-rewrite",
        why: "nfvswitch's mod_tp_src/mod_tp_dst rewrite TCP and UDP ports only (it does not \
              recompute SCTP's CRC32c checksum); OVS rewrites SCTP ports too",
        applies: |c, what| {
            what == What::Outputs
                && c.packet.has_ports()
                && c.packet.nw_proto == SCTP
                && c.has_action(|a| a.starts_with("mod_tp_"))
                && c.nfv_keeps(&[F::TpSrc, F::TpDst])
                && c.same_outputs_without(&[F::TpSrc, F::TpDst])
        },
    },
];

/// Whether a rule of a later table that tests `tp_src`/`tp_dst` (ICMP
/// type/code, SCTP ports) matches the packet as nfvswitch leaves it and
/// not as OVS's `mod_tp_src`/`mod_tp_dst` (in a rule that goes on to a
/// later table) leave it, or the other way round.
fn tp_rewrite_decides_a_later_table(c: &Case) -> bool {
    let width = if c.packet.has_icmp() { 0xff } else { 0xffff };
    let mut rewritten = c.packet;
    for r in c.rules {
        let goes_on = r
            .actions
            .iter()
            .rposition(|a| a.starts_with("resubmit") || a.starts_with("goto_table"));
        for a in r.actions.iter().take(goes_on.map_or(0, |g| g + 1)) {
            let field = match a.split_once(':') {
                Some(("mod_tp_src", v)) => Some((F::TpSrc, v)),
                Some(("mod_tp_dst", v)) => Some((F::TpDst, v)),
                _ => None,
            };
            if let Some((f, v)) = field
                && let Some(v) = parse_uint(v)
            {
                rewritten.set(f, v & width);
            }
        }
    }
    rewritten != c.packet
        && c.rules.iter().any(|r| {
            r.table > 0
                && r.fields.iter().any(|f| matches!(f.f, F::TpSrc | F::TpDst))
                && r.matches(&c.packet) != r.matches(&rewritten)
        })
}

/// The known difference that explains `c`, if one does./// The known difference that explains `c`, if one does.
pub fn explain(c: &Case, what: What) -> Option<&'static Known> {
    KNOWN.iter().find(|k| (k.applies)(c, what))
}

/// Both sides' outputs, one per line, for reports.
pub fn describe_outputs(c: &Case) -> String {
    let (a, b) = (canonical(&c.ovs.outputs), canonical(&c.nfv.outputs));
    let mut s = String::new();
    for (side, v, other) in [("ovs", &a, &b), ("nfvswitch", &b, &a)] {
        s += &format!("  {side} outputs (* where the other differs):\n");
        if v.is_empty() {
            s += "    (none)\n";
        }
        for (i, (p, k)) in v.iter().enumerate() {
            let mark = if other.get(i) == Some(&(*p, *k)) {
                ' '
            } else {
                '*'
            };
            s += &format!("   {mark}{p}: {k:?}\n");
        }
    }
    s
}

/// A rule one switch takes and the other refuses, understood.
pub struct KnownRefusal {
    pub name: &'static str,
    pub why: &'static str,
    /// (the rule, the refusing side's message, whether OVS refused)
    pub applies: fn(&Rule, &str, bool) -> bool,
}

pub const KNOWN_REFUSALS: &[KnownRefusal] = &[
    KnownRefusal {
        name: "nfvswitch-refuses-nd-fields-beside-a-nonzero-code",
        why: "neighbor discovery has ICMPv6 code 0, and both switches extract nd_target, \
              nd_sll and nd_tll only from such packets; beside icmp_code=N (N > 0) OVS's \
              ovs-ofctl drops the ND fields from the match without a word (match \
              normalization), so its rule matches every such packet, while nfvswitch refuses \
              the rule, naming the prerequisite",
        applies: |r, msg, ovs| {
            !ovs && msg.contains("icmp_code 0")
                && r.fields
                    .iter()
                    .any(|f| matches!(f.f, F::NdTarget | F::ArpSha | F::ArpTha))
                && r.fields.iter().any(|f| f.f == F::TpDst && f.v & f.m != 0)
        },
    },
    KnownRefusal {
        name: "ovs-ipv6-mask-with-leading-digit",
        why: "OVS's ipv6_parse_masked_len() tries \"/%d\" (a prefix length) before \"/MASK\", \
              so a mask written starting with a decimal digit (::1/34d4:...) is read as \
              prefix 34 followed by junk and the match is refused as an invalid IPv6 address; \
              nfvswitch reads the mask",
        applies: |r, msg, ovs| {
            ovs && (msg.contains("invalid IPv6 address")
                || msg.contains("IPv6 network prefix bits not between"))
                && r.fields.iter().any(|f| {
                    matches!(f.f, F::Ipv6Src | F::Ipv6Dst | F::NdTarget)
                        && f.text.split_once('/').is_some_and(|(_, m)| {
                            m.contains(':') && m.starts_with(|c: char| c.is_ascii_digit())
                        })
                })
        },
    },
    KnownRefusal {
        name: "ovs-set-field-prerequisites",
        why: "OVS checks a set-field action's prerequisites against the match at install \
              (OFPBAC_MATCH_INCONSISTENT): set_field to ipv6_src/ipv6_dst/ipv6_label needs \
              an IPv6 match, and mod_nw_ecn/mod_nw_ttl, which OVS sends as NXM set-field, \
              an IP one; nfvswitch takes them beside any match and leaves packets without \
              the field alone (as OVS itself does with mod_nw_tos, mod_nw_src, dec_ttl)",
        applies: |r, msg, ovs| {
            let ip = matches!(r.class, Class::Ip4(_) | Class::Ip6(_));
            let v6 = matches!(r.class, Class::Ip6(_));
            ovs && msg.contains("OFPBAC_MATCH_INCONSISTENT")
                && r.actions.iter().any(|a| {
                    (!ip && (a.starts_with("mod_nw_ecn") || a.starts_with("mod_nw_ttl")))
                        || (!v6 && a.starts_with("set_field:") && a.contains("->ipv6_"))
                })
        },
    },
];
