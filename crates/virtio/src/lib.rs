//! Split virtqueues for virtio-net, written by hand for the fast path.
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
//! Only split rings are implemented (no packed rings); the device side
//! always uses chains in the order they were made available, so it can
//! offer VIRTIO_F_IN_ORDER. Data is copied between the ring buffers and
//! pool packets (no zero-copy yet). The
//! only syscall is the `write` to the driver's call eventfd, at most once
//! per burst.

pub mod device;
pub mod driver;
pub mod layout;
pub mod memory;
pub mod net;
mod ring;

pub use device::{DeviceQueue, QueueErrors, QueueSetup, QueueStats};
pub use driver::{DriverErrors, DriverQueue, DriverSetup, DriverStats};
pub use layout::{RingAddrs, layout_rings, ring_area_bytes};
pub use memory::{GuestMemory, MemoryError, RegionSpec};
pub use ring::{SetupError, need_event};
