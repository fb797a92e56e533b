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

    /// OVS sends `fields` unchanged everywhere.
    fn ovs_keeps(&self, fields: &[F]) -> bool {
        self.ovs
            .outputs
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
        name: "ovs-no-ip-rewrite-for-nw-proto-0",
        why: "OVS's commit_set_nw_action() takes an IP packet whose nw_proto is 0 for one \
              without an L3 header and commits no IPv4/IPv6 rewrite for it (mod_nw_src/dst, \
              mod_nw_tos/ecn/ttl, dec_ttl, set_field ipv6_*: its Final flow has them, its \
              datapath actions do not); nfvswitch rewrites the header (protocol 0 is IPv6 \
              hop-by-hop, or just a number in IPv4)",
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

/// The known difference that explains `c`, if one does.
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
