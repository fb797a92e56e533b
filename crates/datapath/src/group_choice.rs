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
    k.set_ipv6_src(u128::MAX);
    k.set_ipv6_dst(u128::MAX);
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
        GroupType::Select => select_live(group, select_hash(&key()), &live),
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

/// `select` with liveness, as OVS skips a bucket whose watch port is
/// down: a flow whose bucket is live keeps it (the pick is the one with
/// every bucket up), and only the flows of a dead bucket are spread, by
/// the same hash and the weights, over the live ones. `None` when no
/// bucket is live.
fn select_live(group: &Group, hash: u32, live: impl Fn(PortNo) -> bool) -> Option<usize> {
    let up = |b: &nfv_flow::group::Bucket| b.watch_port.is_none_or(&live);
    let first = group.select(hash)?;
    if up(&group.buckets[first]) {
        return Some(first);
    }
    let total: u64 = group
        .buckets
        .iter()
        .filter(|b| up(b))
        .map(|b| u64::from(b.weight))
        .sum();
    if total == 0 {
        return None;
    }
    // A second draw from the hash's other bits, over the live weights.
    let point = (u64::from(hash.rotate_left(16)) * total) >> 32;
    let mut seen = 0u64;
    group.buckets.iter().position(|b| {
        if !up(b) {
            return false;
        }
        seen += u64::from(b.weight);
        point < seen
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A select group skips a bucket whose watch port is down, as OVS
    /// does: the flows of live buckets keep theirs, those of the dead one
    /// spread over the rest by weight; with none live, nothing runs.
    #[test]
    fn select_skips_dead_buckets_and_moves_only_their_flows() {
        let g = nfv_flow::parse_group(
            "group_id=1,type=select,bucket=weight:1,watch_port:2,output:2,\
             bucket=weight:1,watch_port:3,output:3,bucket=weight:2,watch_port:4,output:4,\
             bucket=weight:1,output:6",
        )
        .unwrap();
        let pick = |hash: u32, live: &dyn Fn(PortNo) -> bool| match select_live(&g, hash, live) {
            Some(b) => b,
            None => usize::MAX,
        };
        let mut moved = [0u32; 4];
        for i in 0..20_000u32 {
            let hash = i.wrapping_mul(0x9e37_79b9);
            let all = pick(hash, &|_| true);
            let without_3 = pick(hash, &|p| p != 3);
            if all == 1 {
                assert_ne!(without_3, 1, "a dead bucket is never picked");
                moved[without_3] += 1;
            } else {
                assert_eq!(without_3, all, "a live bucket keeps its flows");
            }
            // No watch port: always live; every watched port down leaves it.
            assert_eq!(pick(hash, &|_| false), 3);
        }
        // Bucket 1 had a fifth of the flows; they go 1:2:1 to 0, 2 and 3.
        let n = f64::from(moved.iter().sum::<u32>());
        assert!((3_500.0..4_500.0).contains(&n), "{n}");
        for (b, share) in [(0, 0.25), (2, 0.5), (3, 0.25)] {
            let got = f64::from(moved[b]) / n;
            assert!((got - share).abs() < 0.05, "bucket {b}: {got}");
        }
        let dead =
            nfv_flow::parse_group("group_id=2,type=select,bucket=watch_port:2,output:2").unwrap();
        assert_eq!(choose(&dead, FlowKey::default, |_| false), Choice::Nothing);
    }
}
