//! The groups and meters a rule set may get, for rules' `group:N` and
//! `meter:N` actions.
//!
//! Bucket actions come from [`ACTIONS`] (by name), in any order, with one
//! or two outputs: both switches run a bucket as an OpenFlow action set
//! (strip_vlan, push_vlan, dec_ttl, the set-fields in order, then only
//! the last output; OVS's `ofpacts_execute_action_set()`, nfvswitch's
//! `nfv_flow::group::action_set`). Left out: `mod_vlan_vid` (OpenFlow 1.3 encodes it as a push
//! when no match says the packet has a tag, and a group has no match),
//! and the pipeline's goto_table/resubmit.
//!
//! A `select` group's buckets all carry the same actions (their weights
//! differ): OVS and nfvswitch hash different fields with different
//! functions, so only an outcome that does not depend on the bucket can be
//! compared. OVS gets `selection_method=hash` (OpenFlow 1.5), which picks
//! the bucket in the trace itself; its default, `dp_hash`, recirculates
//! and `ofproto/trace` stops there.

use super::*;

/// A port neither switch has: a `fast_failover` bucket watching it is
/// never live (both read a missing port as down).
pub const ABSENT_PORT: u16 = 20;

/// One group as both switches are given it.
#[derive(Clone, Debug)]
pub struct Group {
    pub id: u32,
    /// `all`, `indirect`, `select`, `fast_failover`.
    pub kind: &'static str,
    pub buckets: Vec<Bucket>,
}

#[derive(Clone, Debug)]
pub struct Bucket {
    pub weight: Option<u16>,
    pub watch_port: Option<u16>,
    pub actions: Vec<String>,
}

impl Group {
    /// `add-group` text for nfvswitch (and, but for `select`, for OVS).
    pub fn text(&self) -> String {
        let mut s = format!("group_id={},type={}", self.id, self.kind);
        for b in &self.buckets {
            s += ",bucket=";
            if let Some(w) = b.weight {
                s += &format!("weight:{w},");
            }
            if let Some(p) = b.watch_port {
                s += &format!("watch_port:{p},");
            }
            s += &format!("actions={}", b.actions.join(","));
        }
        s
    }

    /// `add-group` text for OVS: a `select` group picks by a hash OVS
    /// computes in the trace (needs OpenFlow 1.5).
    pub fn ovs_text(&self) -> String {
        let t = self.text();
        if self.kind != "select" {
            return t;
        }
        let head = format!("group_id={},type=select", self.id);
        t.replacen(
            &head,
            &format!("{head},selection_method=hash,fields(eth_src,eth_dst,eth_type)"),
            1,
        )
    }
}

/// One meter: a drop band at `rate` kbit/s.
#[derive(Clone, Debug)]
pub struct Meter {
    pub id: u32,
    pub rate: u32,
}

impl Meter {
    /// `add-meter` text (both switches).
    pub fn text(&self) -> String {
        format!("meter={},kbps,band=type=drop,rate={}", self.id, self.rate)
    }
}

/// A rule set's groups (ids 1 to 3, some absent) and meters.
pub fn groups_and_meters(rng: &mut Rng) -> (Vec<Group>, Vec<Meter>) {
    let mut groups = Vec::new();
    if rng.chance(60) {
        for id in 1..=1 + rng.below(3) as u32 {
            groups.push(group(rng, id));
        }
    }
    let mut meters = Vec::new();
    if rng.chance(35) {
        for id in 1..=1 + rng.below(2) as u32 {
            let rate = rng.pick_or(&[1u32, 1000, 1_000_000], |r| 1 + r.below(10_000_000) as u32);
            meters.push(Meter { id, rate });
        }
    }
    (groups, meters)
}

fn group(rng: &mut Rng, id: u32) -> Group {
    let kind = rng.pick(&["all", "all", "indirect", "select", "fast_failover"]);
    let n = if kind == "indirect" {
        1
    } else {
        1 + rng.below(3) as usize
    };
    let shared = bucket_actions(rng);
    let buckets = (0..n)
        .map(|_| Bucket {
            weight: (kind == "select").then(|| 1 + rng.below(100) as u16),
            watch_port: (kind == "fast_failover").then(|| {
                if rng.chance(30) {
                    ABSENT_PORT
                } else {
                    rng.pick(PORTS)
                }
            }),
            actions: if kind == "select" {
                shared.clone()
            } else {
                bucket_actions(rng)
            },
        })
        .collect();
    Group { id, kind, buckets }
}

/// Set-fields a bucket may carry (names in [`ACTIONS`]).
const SETS: &[&str] = &[
    "mod_dl_src",
    "mod_dl_dst",
    "mod_nw_src",
    "mod_nw_dst",
    "mod_tp_src",
    "mod_tp_dst",
    "mod_nw_tos",
    "mod_nw_ecn",
    "mod_nw_ttl",
    "set_field ipv6_src",
    "set_field ipv6_dst",
    "set_field ipv6_label",
];

/// Outputs a bucket may end with (names in [`ACTIONS`]).
const OUTPUTS: &[&str] = &["output", "output", "output", "in_port", "flood", "all"];

/// One action from [`ACTIONS`] by name, for a packet nothing is known of.
fn action(rng: &mut Rng, name: &str) -> Option<String> {
    let g = ACTIONS.iter().find(|a| a.name == name).expect("in ACTIONS");
    let mut c = ActCtx {
        class: Class::Any,
        tags: 0,
        later_frag: false,
        table: 0,
        groups: Vec::new(),
        meters: Vec::new(),
        ct: false,
        inv: false,
    };
    (g.make)(rng, &mut c).map(|a| a.text)
}

/// A bucket's actions in any order: a few rewrites, one or two outputs
/// (the action set keeps the last), sometimes none (then the bucket
/// sends nothing).
fn bucket_actions(rng: &mut Rng) -> Vec<String> {
    let mut acts = Vec::new();
    for name in ["strip_vlan", "push_vlan", "dec_ttl"] {
        if rng.chance(15) {
            acts.extend(action(rng, name));
        }
    }
    for _ in 0..rng.below(4) {
        // Some come out rarely or not at all (ACTIONS keeps rare those
        // that OVS refuses in a rule whose match lacks their header).
        let name = rng.pick(SETS);
        acts.extend(action(rng, name));
    }
    let outputs = if rng.chance(5) { 0 } else { 1 + rng.below(2) };
    for _ in 0..outputs {
        let out = rng.pick(OUTPUTS);
        acts.extend(action(rng, out));
    }
    // Any order (Fisher-Yates).
    for i in (1..acts.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        acts.swap(i, j);
    }
    acts
}
