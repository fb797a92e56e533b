//! Virtqueues for virtio-net, split and packed, written by hand for the
//! fast path.
//!
//! Ring processing is library code: it knows nothing of threads, sockets or
//! processes (cloud-hypervisor's lesson), so the same code serves
//! - the switch's vhost-user ports ([`device::DeviceQueue`], the device side),
//! - the built-in VNF ([`driver::DriverQueue`], the driver side, as DPDK
//!   virtio-user does), and
//! - tests, where each side is the other's mock.
//!
//! Everything read from shared memory is hostile: every descriptor is bounds
//! checked once against [`memory::GuestMemory`], chains are length-limited
//! (no loops), indexes are validated, and a queue that misbehaves is
//! quarantined with a counter ([`device::QueueErrors`]) instead of panicking.
//!
//! Split rings (`ring.rs`, §2.7) and packed rings ([`packed`], §2.8) sit
//! behind the same queue types: a queue whose features include
//! `VIRTIO_F_RING_PACKED` runs the packed code (`device/packed.rs`,
//! `driver/packed.rs`) and everything else is shared (counters, budgets,
//! the copy loops). The device side always uses chains in the order they
//! were made available, so it can offer VIRTIO_F_IN_ORDER. Both do
//! one-copy forwarding; only split rings lend their buffers (`device/`),
//! under the contract between lending and borrowing ports in [`lend`].
//!
//! Nothing the peer controls can block or kill the thread running a queue:
//! - interrupts and kicks go through [`notify`]: the queue marks a
//!   [`notify::Call`] pending and a notifier thread writes the peer's
//!   eventfd, with a watchdog that gives up on (and then ignores) an fd
//!   whose write would block; the queue makes no syscall of its own except
//!   waking that thread when it sleeps;
//! - every file the peer hands us for mapping (guest memory, the dirty log,
//!   memif regions) passes [`tenant_fd::check_mappable`]: a regular file on
//!   tmpfs or hugetlbfs, as long as what is mapped, so a page fault in it
//!   never waits on a disk, a network or a FUSE server;
//! - guest memory mapped by [`memory::GuestMemory::map`] is guarded against
//!   SIGBUS ([`guard`]): a frontend that shrinks its memory file gets its
//!   mapping replaced by zeros and flagged ([`GuestMemory::faulted`]), and
//!   the queues' owner stops them.
//!
//! # Long functions
//!
//! Set-up code stays under 80 lines a function (`DEVELOPERS.md`, "Port
//! crate shape", named steps; the benchmark examples too). The per-burst
//! and per-chain ring loops stay whole; each is one pass over a ring whose
//! state (the avail or used position, the packed ring's wrap counter, the
//! chain or packet in hand, the descriptor budget, per-burst counts kept
//! in locals) every step moves, and the device side's are inlined into
//! their burst. Split into helpers, that state
//! would travel through `&mut` arguments on every chain or packet, and one
//! ring's rules (every descriptor checked once, every chain taken handed
//! back) would be spread over several places:
//!
//! * `DeviceQueue::dequeue_burst` (`device/tx.rs`, about 110 lines) and
//!   `read_tx_chain` (about 100): the guest's TX chains into packets, each
//!   chain walked and checked once, the one-copy split decided on the way;
//! * `DeviceQueue::enqueue_burst` (`device/rx.rs`, about 90) and
//!   `rx_packet` (about 80): packets into the guest's RX chains, merged
//!   buffers with MRG_RXBUF;
//! * `dequeue_packed` (about 85) and `rx_packet_packed` (about 105) in
//!   `device/packed.rs`: the same two directions on a packed ring;
//! * `DriverQueue::receive_burst` (`driver/rx.rs`, about 115): the
//!   built-in VNF's receive, merged buffers copied into one packet.

pub mod device;
pub mod dirty_log;
pub mod driver;
pub mod guard;
pub mod layout;
pub mod lend;
pub mod memory;
pub mod net;
pub mod notify;
pub mod packed;
mod ring;
pub mod tenant_fd;

pub use device::{
    DeviceQueue, Lent, NotLendable, QueueErrors, QueueSetup, QueueStats, SPLIT_HEAD, SPLIT_MIN_TAIL,
};
pub use driver::{DriverErrors, DriverQueue, DriverSetup, DriverStats};
pub use layout::{RingAddrs, layout_rings, ring_area_bytes};
pub use memory::{GuestMemory, MemoryError, RegionFile, RegionSpec};
pub use ring::{SetupError, need_event};
pub use tenant_fd::{UnmappableFd, check_mappable};
