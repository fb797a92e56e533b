//! Which buckets of a group run for one packet: the PMD's interpreter and
//! `ctl trace` both ask here, so the trace shows the bucket the PMD would
//! take. The caller supplies what it alone knows: the packet's key (read
//! only for `select`) and whether a port is live (the PMD asks its tx
//! queue; the trace, the control plane).

use nfv_flow::{FlowKey, Group, GroupType, PortNo};

/// The fields a select group hashes: the 5-tuple (IPv4 or IPv6) and
/// EtherType, plus the MACs (for frames that are not IP, whose other
/// fields are zero). Nothing that changes within a flow: not the TTL,
/// TCP flags or fragment state (w4), not `metadata`.
pub const SELECT_FIELDS: FlowKey = {
    let mut k = FlowKey::ZERO;
    // in_port and the VLAN TCI do not belong to a flow's identity here:
    // w0 keeps dl_type [16,32) and nw_proto [48,56).
    k.w[0] = (0xff << 48) | (0xffff << 16);
    k.w[1] = u64::MAX;
    k.w[2] = u64::MAX;
    k.w[3] = u64::MAX;
    // ipv6_src, ipv6_dst.
    k.w[6] = u64::MAX;
    k.w[7] = u64::MAX;
    k.w[8] = u64::MAX;
    k.w[9] = u64::MAX;
    k
};

/// The buckets a group runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    /// Every bucket, each on its own copy (`all`).
    Every,
    /// This one bucket.
    One(usize),
    /// None: no bucket (an empty group, a `select` whose weights are all
    /// zero, a `fast_failover` with no live bucket). The packet is
    /// dropped by the group.
    Nothing,
}

/// The select hash of a packet whose fields are `key`: what
/// [`Group::select`] scales over the buckets' weights.
#[inline]
pub fn select_hash(key: &FlowKey) -> u32 {
    key.masked(&SELECT_FIELDS).hash()
}

/// The buckets of `group` that run for a packet: `key` gives its fields
/// (called for `select` only: the PMD parses the frame then), `live`
/// whether a port is live (called for `fast_failover` only).
#[inline]
pub fn choose(
    group: &Group,
    key: impl FnOnce() -> FlowKey,
    live: impl Fn(PortNo) -> bool,
) -> Choice {
    let chosen = match group.kind {
        GroupType::All if group.buckets.is_empty() => None,
        GroupType::All => return Choice::Every,
        GroupType::Indirect => Some(0),
        GroupType::Select => group.select(select_hash(&key())),
        GroupType::FastFailover => group
            .buckets
            .iter()
            .position(|b| b.watch_port.is_some_and(&live)),
    };
    match chosen {
        Some(b) if b < group.buckets.len() => Choice::One(b),
        _ => Choice::Nothing,
    }
}
