//! OpenFlow groups (`ovs-ofctl add-group` syntax): a rule's `group:N`
//! action hands the packet to group N, whose type decides which of its
//! buckets' action lists run.
//!
//! * `all` — every bucket, each on its own copy (mirroring, multicast).
//! * `select` — one bucket per flow: a hash of the packet's 5-tuple
//!   (addresses, protocol, ports; the MACs and EtherType for non-IP)
//!   picks it in proportion to the buckets' weights, so a VNF scaled out
//!   to N instances gets a share of the flows and each flow stays on one
//!   instance while the buckets do not change.
//! * `indirect` — its one bucket (one place to change a next hop many
//!   rules share).
//! * `fast_failover` — the first bucket whose `watch_port` is live (a
//!   primary VNF and its backup); none live: dropped.
//!
//! Groups live in the flow table's generation with the rules, so a rule
//! never sees a group that does not exist: adding a rule that names a
//! missing group is refused, and deleting a group deletes the rules that
//! use it (as OVS does). A bucket may not name a group (no chains of
//! groups: the interpreter's recursion stays one level deep).

use crate::action::Action;
use crate::key::PortNo;
use crate::parse::{FlowParseError, parse_action_list};
use core::fmt;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

pub use crate::action::MAX_GROUP_ID;
/// Most buckets in one group: a select group's buckets are VNF instances.
pub const MAX_BUCKETS: usize = 64;

/// How a group picks its buckets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupType {
    All,
    Select,
    Indirect,
    FastFailover,
}

impl GroupType {
    pub fn as_str(self) -> &'static str {
        match self {
            GroupType::All => "all",
            GroupType::Select => "select",
            GroupType::Indirect => "indirect",
            GroupType::FastFailover => "fast_failover",
        }
    }
}

/// One bucket: its actions, and what the group type reads.
#[derive(Debug)]
pub struct Bucket {
    /// `select`: the bucket's share of flows is weight / sum of weights.
    pub weight: u16,
    /// `fast_failover`: the bucket is used only while this port is live.
    pub watch_port: Option<PortNo>,
    /// As written (what dump-groups shows).
    pub actions: Vec<Action>,
    /// What runs: `actions` as an OpenFlow action set ([`action_set`]).
    pub run: Vec<Action>,
    /// Packets and bytes the bucket ran on, added once per batch.
    pub packets: AtomicU64,
    pub bytes: AtomicU64,
}

impl Bucket {
    /// Adds one batch's tally (single `fetch_add`s, not per packet).
    pub fn count(&self, packets: u64, bytes: u64) {
        self.packets.fetch_add(packets, Relaxed);
        self.bytes.fetch_add(bytes, Relaxed);
    }
}

/// A group as `add-group` describes it.
#[derive(Debug)]
pub struct Group {
    pub id: u32,
    pub kind: GroupType,
    pub buckets: Vec<Bucket>,
    /// `select`: cumulative weights, for picking a bucket by hash.
    cumulative: Vec<u32>,
}

impl Group {
    /// The bucket `select` gives a flow whose hash is `hash`: stable for a
    /// flow while the buckets stay, shares in proportion to the weights.
    pub fn select(&self, hash: u32) -> Option<usize> {
        let total = *self.cumulative.last()?;
        if total == 0 {
            return None;
        }
        // Scale the hash into 0..total (multiply-shift: no modulo bias
        // worth speaking of, no division).
        let point = ((u64::from(hash) * u64::from(total)) >> 32) as u32;
        Some(self.cumulative.partition_point(|&c| c <= point))
    }
}

impl fmt::Display for Group {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "group_id={},type={}", self.id, self.kind.as_str())?;
        for b in &self.buckets {
            f.write_str(",bucket=")?;
            if self.kind == GroupType::Select {
                write!(f, "weight:{},", b.weight)?;
            }
            if let Some(p) = b.watch_port {
                write!(f, "watch_port:{p},")?;
            }
            write!(f, "actions={}", crate::format::ActionList(&b.actions))?;
        }
        Ok(())
    }
}

/// Why a group text was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GroupParseError {
    #[error("{0}")]
    Invalid(String),
    #[error("bucket {bucket}: {error}")]
    Bucket {
        bucket: usize,
        error: FlowParseError,
    },
}

fn invalid(msg: impl Into<String>) -> GroupParseError {
    GroupParseError::Invalid(msg.into())
}

/// Parses `group_id=N[,type=T],bucket=...[,bucket=...]` (the type defaults
/// to `all`, as in `ovs-ofctl`). A bucket is a comma-separated list of
/// `weight:W`, `watch_port:P`, `bucket_id:I` (accepted, not kept) and its
/// actions, either after `actions=` or directly.
pub fn parse_group(text: &str) -> Result<Group, GroupParseError> {
    let mut parts = text.split("bucket=");
    let head = parts.next().unwrap_or_default();
    let (mut id, mut kind) = (None, GroupType::All);
    for item in head.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (k, v) = item
            .split_once('=')
            .ok_or_else(|| invalid(format!("\"{item}\" is not KEY=VALUE")))?;
        match k {
            "group_id" => {
                let n = v
                    .parse::<u32>()
                    .ok()
                    .filter(|&n| n <= MAX_GROUP_ID)
                    .ok_or_else(|| {
                        invalid(format!(
                            "group_id \"{v}\" is not a group id (0..{MAX_GROUP_ID})"
                        ))
                    })?;
                id = Some(n);
            }
            "type" => {
                kind = match v {
                    "all" => GroupType::All,
                    "select" => GroupType::Select,
                    "indirect" => GroupType::Indirect,
                    "fast_failover" | "ff" => GroupType::FastFailover,
                    _ => {
                        return Err(invalid(format!(
                            "type \"{v}\" is not all, select, indirect or fast_failover"
                        )));
                    }
                }
            }
            _ => return Err(invalid(format!("unknown group field \"{k}\""))),
        }
    }
    let id = id.ok_or_else(|| invalid("group_id is missing"))?;
    let buckets = parts
        .enumerate()
        .map(|(i, b)| parse_bucket(b).map_err(|e| with_bucket(i, e)))
        .collect::<Result<Vec<_>, _>>()?;
    Group::new(id, kind, buckets)
}

impl Group {
    /// A group from parts decoded elsewhere (an OpenFlow `GROUP_MOD`),
    /// checked as `add-group` text is: bucket count, indirect's single
    /// bucket, fast_failover's watch ports.
    pub fn new(id: u32, kind: GroupType, buckets: Vec<Bucket>) -> Result<Group, GroupParseError> {
        if id > MAX_GROUP_ID {
            return Err(invalid(format!(
                "group_id {id} is not a group id (0..{MAX_GROUP_ID})"
            )));
        }
        check(kind, &buckets)?;
        let mut total = 0u32;
        let cumulative = buckets
            .iter()
            .map(|b| {
                total += u32::from(b.weight);
                total
            })
            .collect();
        Ok(Group {
            id,
            kind,
            buckets,
            cumulative,
        })
    }
}

impl Bucket {
    /// A bucket with zeroed counters; refused as `add-group` refuses it
    /// when its actions name a group or go on to another table.
    pub fn new(
        weight: u16,
        watch_port: Option<PortNo>,
        actions: Vec<Action>,
    ) -> Result<Bucket, GroupParseError> {
        if actions.iter().any(|a| matches!(a, Action::Group(_))) {
            return Err(invalid(
                "a bucket may not name a group (no chains of groups)",
            ));
        }
        if actions.iter().any(Action::is_pipeline) {
            return Err(invalid(
                "a bucket may not go on to another table (goto_table, resubmit, write_metadata)",
            ));
        }
        if actions.iter().any(|a| matches!(a, Action::Ct(_))) {
            return Err(invalid(
                "a bucket may not hold ct(...) (the connection tracker runs from a rule's \
                 actions only; ct_clear is allowed)",
            ));
        }
        Ok(Bucket {
            weight,
            watch_port,
            run: action_set(&actions),
            actions,
            packets: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
        })
    }
}

/// A bucket's actions as an OpenFlow action set, which is how OVS runs a
/// bucket (OpenFlow 1.3 §5.10: a bucket holds "a set of actions"): at
/// most one of each kind, the last one written, in the set's fixed
/// order — strip_vlan, push_vlan, dec_ttl, meter, every set-field in
/// the order written (a later one of the same field wins), then the
/// last output, whichever kind (a port, in_port, flood, all, normal,
/// controller). A set without an output sends nothing, so it is empty.
/// `meter` in a bucket is nfvswitch's (OpenFlow 1.3 buckets cannot hold
/// one): it runs before the rewrites.
pub fn action_set(actions: &[Action]) -> Vec<Action> {
    let last = |kind: fn(&Action) -> bool| actions.iter().rev().find(|a| kind(a)).cloned();
    let is_output = |a: &Action| {
        matches!(
            a,
            Action::Output(_)
                | Action::InPort
                | Action::Flood
                | Action::All
                | Action::Normal
                | Action::Controller(_)
        )
    };
    let Some(output) = last(is_output) else {
        return Vec::new();
    };
    // ct_clear sits with the outputs in OVS's action set, where only the
    // first of them runs: beside an output it never does, and without one
    // the set is empty. (ct itself is refused in a bucket.)
    let is_set = |a: &&Action| {
        !is_output(a)
            && !matches!(
                a,
                Action::StripVlan
                    | Action::PushVlan(_)
                    | Action::DecTtl
                    | Action::Meter(_)
                    | Action::CtClear
                    | Action::Ct(_)
            )
    };
    let mut set: Vec<Action> = [
        last(|a| matches!(a, Action::StripVlan)),
        last(|a| matches!(a, Action::PushVlan(_))),
        last(|a| matches!(a, Action::DecTtl)),
        last(|a| matches!(a, Action::Meter(_))),
    ]
    .into_iter()
    .flatten()
    .collect();
    set.extend(actions.iter().filter(is_set).cloned());
    set.push(output);
    set
}

fn with_bucket(i: usize, e: GroupParseError) -> GroupParseError {
    match e {
        GroupParseError::Invalid(m) => invalid(format!("bucket {i}: {m}")),
        GroupParseError::Bucket { error, .. } => GroupParseError::Bucket { bucket: i, error },
    }
}

fn parse_bucket(text: &str) -> Result<Bucket, GroupParseError> {
    let text = text.trim().trim_end_matches(',');
    let (mut weight, mut watch_port) = (1u16, None);
    let mut rest = text;
    // Bucket parameters come first; the actions are what follows them.
    loop {
        let (item, tail) = rest.split_once(',').unwrap_or((rest, ""));
        let Some((k, v)) = item.split_once(':') else {
            break;
        };
        match k.trim() {
            "weight" => {
                weight = v
                    .parse()
                    .map_err(|_| invalid(format!("weight \"{v}\" is not 0..65535")))?;
            }
            "watch_port" => {
                let p =
                    v.parse::<PortNo>().ok().filter(|&p| p > 0).ok_or_else(|| {
                        invalid(format!("watch_port \"{v}\" is not a port number"))
                    })?;
                watch_port = Some(p);
            }
            "bucket_id" => {
                v.parse::<u32>()
                    .map_err(|_| invalid(format!("bucket_id \"{v}\" is not a number")))?;
            }
            _ => break,
        }
        rest = tail;
    }
    let actions_text = rest.trim().strip_prefix("actions=").unwrap_or(rest.trim());
    let actions = parse_action_list(actions_text)
        .map_err(|error| GroupParseError::Bucket { bucket: 0, error })?;
    Bucket::new(weight, watch_port, actions)
}

fn check(kind: GroupType, buckets: &[Bucket]) -> Result<(), GroupParseError> {
    if buckets.len() > MAX_BUCKETS {
        return Err(invalid(format!(
            "{} buckets: at most {MAX_BUCKETS}",
            buckets.len()
        )));
    }
    match kind {
        GroupType::Indirect if buckets.len() != 1 => Err(invalid(format!(
            "an indirect group has exactly one bucket, not {}",
            buckets.len()
        ))),
        GroupType::FastFailover if buckets.iter().any(|b| b.watch_port.is_none()) => Err(invalid(
            "every bucket of a fast_failover group needs watch_port:PORT",
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bucket runs as an action set (as OVS runs it), and dump-groups
    /// still shows it as written.
    #[test]
    fn a_bucket_runs_as_an_action_set() {
        // (bucket actions as written, what runs)
        let cases = [
            (
                "output:2,mod_dl_dst:02:00:00:00:00:09,output:3",
                "mod_dl_dst:02:00:00:00:00:09,output:3",
            ),
            (
                "mod_dl_src:02:00:00:00:00:01,strip_vlan,output:2",
                "strip_vlan,mod_dl_src:02:00:00:00:00:01,output:2",
            ),
            (
                "push_vlan:0x8100,strip_vlan,dec_ttl,dec_ttl,in_port",
                "strip_vlan,push_vlan:0x8100,dec_ttl,in_port",
            ),
            (
                "mod_nw_src:10.0.0.1,mod_tp_src:7,mod_nw_src:10.0.0.2,flood",
                "mod_nw_src:10.0.0.1,mod_tp_src:7,mod_nw_src:10.0.0.2,flood",
            ),
            ("mod_dl_src:02:00:00:00:00:01", "drop"),
            ("drop", "drop"),
            ("output:4,all,output:5", "output:5"),
            (
                "meter:3,mod_nw_ttl:9,output:2",
                "meter:3,mod_nw_ttl:9,output:2",
            ),
        ];
        for (written, runs) in cases {
            let text = format!("group_id=1,type=indirect,bucket=actions={written}");
            let g = parse_group(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
            let want = crate::parse_flow(&format!("actions={runs}"))
                .unwrap()
                .actions;
            assert_eq!(g.buckets[0].run, want, "{written}");
            assert!(g.to_string().ends_with(&format!(
                "actions={}",
                crate::format::ActionList(&g.buckets[0].actions)
            )));
        }
    }

    #[test]
    fn groups_parse_and_print_back() {
        let cases = [
            (
                "group_id=1,type=select,bucket=weight:1,output:2,bucket=weight:3,actions=output:3",
                "group_id=1,type=select,bucket=weight:1,actions=output:2,bucket=weight:3,actions=output:3",
            ),
            (
                "group_id=7,bucket=output:1,bucket=mod_dl_dst:02:00:00:00:00:09,output:2",
                "group_id=7,type=all,bucket=actions=output:1,bucket=actions=mod_dl_dst:02:00:00:00:00:09,output:2",
            ),
            (
                "group_id=2,type=fast_failover,bucket=watch_port:3,output:3,bucket=watch_port:4,output:4",
                "group_id=2,type=fast_failover,bucket=watch_port:3,actions=output:3,bucket=watch_port:4,actions=output:4",
            ),
            (
                "group_id=9,type=indirect,bucket=bucket_id:5,actions=drop",
                "group_id=9,type=indirect,bucket=actions=drop",
            ),
        ];
        for (text, shown) in cases {
            let g = parse_group(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(g.to_string(), shown);
            let again = parse_group(&g.to_string()).unwrap();
            assert_eq!(again.to_string(), shown, "round trip");
        }
    }

    #[test]
    fn bad_groups_are_refused_with_the_reason() {
        let cases = [
            ("type=all,bucket=output:1", "group_id is missing"),
            ("group_id=x,bucket=output:1", "is not a group id"),
            ("group_id=1,type=hash,bucket=output:1", "type \"hash\""),
            (
                "group_id=1,type=indirect,bucket=output:1,bucket=output:2",
                "exactly one bucket",
            ),
            (
                "group_id=1,type=fast_failover,bucket=output:1",
                "needs watch_port",
            ),
            ("group_id=1,bucket=group:2", "may not name a group"),
            ("group_id=1,bucket=weight:x,output:1", "weight \"x\""),
            ("group_id=1,bucket=output:zz", "zz"),
        ];
        for (text, want) in cases {
            let e = parse_group(text)
                .err()
                .unwrap_or_else(|| panic!("{text}: accepted"));
            assert!(e.to_string().contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn select_shares_follow_the_weights_and_a_hash_keeps_its_bucket() {
        let g = parse_group(
            "group_id=1,type=select,bucket=weight:1,output:1,bucket=weight:1,output:2,\
             bucket=weight:2,output:3",
        )
        .unwrap();
        let mut n = [0u32; 3];
        // Hashes spread evenly over u32.
        for i in 0..40_000u32 {
            let h = i.wrapping_mul(0x9e37_79b9);
            let b = g.select(h).unwrap();
            assert_eq!(g.select(h), Some(b), "stable");
            n[b] += 1;
        }
        assert!((9_000..11_000).contains(&n[0]), "{n:?}");
        assert!((9_000..11_000).contains(&n[1]), "{n:?}");
        assert!((19_000..21_000).contains(&n[2]), "{n:?}");
        let zero = parse_group("group_id=2,type=select,bucket=weight:0,output:1").unwrap();
        assert_eq!(zero.select(5), None, "all weights 0: no bucket");
    }
}
