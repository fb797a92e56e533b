//! `afpacket`: a port on any kernel network interface through AF_PACKET
//! sockets — the portable fallback when AF_XDP is not possible (OVS's
//! `type=system` netdev, DPDK's `net_af_packet`).
//!
//! * Rx (`rx.rs`): one socket per rx queue with a TPACKET_V3 ring mapped
//!   into the switch; frames are copied out of ready blocks into pool
//!   packets, no syscalls. Sockets are bound to the interface for
//!   `ETH_P_ALL`, ignore the interface's outgoing frames
//!   (`PACKET_IGNORE_OUTGOING`, so the switch never receives its own
//!   transmissions) and hold promiscuous membership (frames to other MACs
//!   arrive; dropped automatically when the socket closes). With
//!   `rxqs > 1` the sockets form a `PACKET_FANOUT_HASH` group: each flow
//!   goes to one queue. The kernel hands frames over a block at a time,
//!   a partly filled block after [`RETIRE_BLOCK_MS`]: at low rates a frame
//!   waits about a millisecond.
//! * Tx (`tx.rs`): one socket per tx queue (per PMD) with
//!   `PACKET_QDISC_BYPASS`, one `sendmmsg` per burst, each frame behind a
//!   virtio-net header (`PACKET_VNET_HDR`): partial checksums and TCP
//!   segments of up to 64 KiB from offloading guests go to the kernel,
//!   which finishes them (its GSO) or passes them whole to a peer that
//!   takes them (veth).
//! * Counters ([`Port::gauges`](nfv_ports::Port::gauges)): the kernel's
//!   ring drops and queue freezes (`PACKET_STATISTICS`), frames the rx
//!   walk dropped (truncated, oversize, bad blocks), tx frames left busy
//!   or refused, syscalls.
//!
//! Frames larger than the interface allows (MTU + 18, one VLAN tag) are
//! dropped by the datapath through
//! [`TxQueue::max_frame`](nfv_ports::TxQueue::max_frame). Opening fails
//! with a message naming the port and the interface when the interface is
//! missing, the process lacks CAP_NET_RAW, or the MTU needs larger frames
//! than the switch's packet buffers hold. Opening brings the interface up
//! if it is down.
//!
//! Modules (the port crate shape, `DEVELOPERS.md`): `settings` (the
//! `iface` and `ring_size` keys), `port` ([`AFPACKET`], open and close,
//! gauges), `rx` and `tx` (the PMD side), `shared` (the queue counters),
//! `block` (the walk through a TPACKET_V3 block, bounds-checked) and
//! `sys` (the socket calls). No module imports one that imports it back
//! (`scripts/mod-cycles crates/afpacket`).

mod block;
mod port;
mod rx;
mod settings;
mod shared;
mod sys;
mod tx;

pub use block::{BlockWalk, Frame, WalkError, WalkErrorKind};
pub use port::{
    AFPACKET, AfPacketPort, AfPacketType, DEFAULT_MAX_FRAME, OpenError, open, open_with,
};
pub use rx::{Geometry, RETIRE_BLOCK_MS};
pub use settings::{AfPacketConfig, MAX_RXQS};
