//! Connection tracking for nfvswitch: the table behind `ct()`.
//!
//! The datapath summarises each packet ([`PacketSummary`]: the key of its
//! direction and the TCP/ICMP fields that matter) and asks a [`Tracker`] for
//! a [`Verdict`] — the `ct_state` bits plus the connection's mark, label and
//! original tuple. [`Tracker::process`] never creates anything: like OVS's
//! `ct(commit)`, only [`Tracker::commit`] stores a connection, so a packet
//! that is not committed leaves no trace.
//!
//! Modules: [`key`] (tuples, ICMP type tables), [`packet`] (what the
//! datapath supplies), [`verdict`], [`timeouts`] (OVS's defaults and where
//! they come from), [`tcp`] (window tracking: the rules followed are listed
//! there), `proto` (UDP/other and ICMP pseudo-connections), `index` (the
//! flat two-direction key index), `table` (slab), `wheel` (expiry), [`nat`]
//! (SNAT/DNAT: requests, tuple choice, rewrites), [`checksum`] (RFC 1624
//! incremental updates, for the datapath's rewriting), [`tracker`].
//!
//! # NAT
//!
//! [`Tracker::commit_nat`] stores a connection translated as a
//! [`NatRequest`] asks: its reply key becomes the reverse of the translated
//! tuple, unique in the zone, so answers find it. Every later verdict of
//! the connection (and of ICMP errors related to it) carries the
//! [`NatRewrite`] for the packet's direction; the datapath applies it when
//! its `ct` action has `nat`, and reports [`Verdict::state_with_nat`].
//!
//! # Threads
//!
//! A `Tracker` is single-owner (`&mut self`). The plan for PMD threads is a
//! table sharded by the connection's symmetric hash — a hash of the
//! unordered pair of endpoints, so both directions land on the same shard —
//! with one shard owned by each PMD. A packet whose shard belongs to another
//! PMD is handed to that PMD through a single-producer ring and comes back
//! the same way with its verdict; a full ring drops the packet (counted)
//! rather than wait. Nothing on the packet path takes a lock, no PMD waits
//! for another, and the owner of a shard touches only its own memory, so no
//! lock is ever held across a syscall or page fault. Expiry runs on each
//! PMD between batches, in bounded slices of the wheel. Dumps, flushes and
//! limit changes travel to the owners as messages.
//!
//! Why not a shared table: OVS's userspace conntrack went from 256 hash
//! buckets each under its own lock (2.6–2.11), to one RCU `cmap` with a
//! mutex per connection and a global `ct_lock` taken for insertions,
//! deletions and every packet's expiry-list update (2.12, "conntrack: Add
//! rcu support"), to RCU lists swept by a cleanup thread with atomic
//! expirations so a PMD takes `ct_lock` only to create or delete (3.0,
//! "conntrack: Replace timeout based expiration lists with rculists").
//! Each step was spent removing contention that a shared table creates; a
//! guest that opens connections quickly still makes every PMD contend for
//! `ct_lock`, which is what this plan forbids. The price of sharding is the
//! hand-off when RSS does not put both directions of a connection on the
//! same PMD (a symmetric RSS key avoids most of it), and per-zone limits
//! that must be split between shards or kept as a shared atomic count.

pub mod checksum;
mod index;
pub mod key;
pub mod nat;
pub mod packet;
mod proto;
mod table;
pub mod tcp;
pub mod timeouts;
pub mod tracker;
pub mod verdict;
mod wheel;

pub use index::ProbeStats;
pub use key::{ConnKey, Family, IcmpKind};
pub use nat::{Endpoint, NatError, NatKind, NatRequest, NatRewrite, PortSelection};
pub use packet::{L4, PacketSummary, TcpFlags, TcpSegment};
pub use proto::{IcmpState, OtherState, ProtoState};
pub use tcp::{TcpConn, TcpPeer, TcpState};
pub use timeouts::{TimeoutClass, Timeouts};
pub use tracker::{
    CommitError, Config, ConfigError, ConnView, Counters, Established, KeyHash, NatCommit, Tracker,
};
pub use verdict::{ConnId, CtState, Verdict};
pub use wheel::SweepStats;
