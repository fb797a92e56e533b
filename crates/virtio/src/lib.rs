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
//! (Skeleton: the API being implemented.)

pub mod layout;
pub mod net;
// Being written: pub mod memory; pub mod device; pub mod driver;
