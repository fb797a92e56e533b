//! Packet memory for nfvswitch.
//!
//! - [`Region`]: one shared mapping (hugetlb memfd when available, plain
//!   memfd otherwise) so its fd can be shared with VNFs or the kernel.
//! - [`PacketPool`]: fixed-size frames in that region, lock-free free list.
//! - [`PoolCache`]: per-thread front of a pool; the fast path's only
//!   allocator (no locks, atomics or syscalls in steady state).
//! - [`Packet`]: a 32-byte handle that may also point at memory the switch
//!   does not own (guest buffers, AF_XDP UMEM) — see [`owner`] — or be
//!   split, its tail still in the sender's buffer (one-copy forwarding).
//! - [`Batch`]: up to [`BATCH`] packets, the unit every port and element
//!   works on.
//! - [`hint`], [`copy_span`] and [`Mapping`]: the cache hints, the short
//!   copy and the `mmap` wrapper that all ring and memory code shares.
//! - [`huge`]: large tables a PMD reaches at random (the connection
//!   tracker's) on transparent huge pages, faulted in up front.

pub mod copy;
pub mod hint;
pub mod huge;
pub mod mapping;
pub mod owner;
pub mod packet;
pub mod pool;
pub mod region;
pub mod spin;
pub mod stats;

pub use copy::copy_span;
pub use mapping::{Commit, Mapping, Pages, Populate};
pub use packet::{
    BATCH, Batch, BatchShape, HEADROOM, OFFLOAD_HDR_LEN, OFFLOAD_META_LEN, Packet, SPLIT_HEAD,
};
pub use pool::{MemoryConfig, PacketPool, PoolCache, PoolError};
pub use region::{Backing, HugepageMode, Region, RegionError};
pub use spin::{SpinGuard, SpinLock};
