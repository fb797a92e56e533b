//! The built-in VNF: a virtio-net driver in its own process, talking
//! vhost-user to the switch as QEMU or DPDK virtio-user would.
//!
//! - [`config`]: options as typed and their validated form.
//! - [`app`]: the [`App`] trait over a batch and the `io`, `macswap` and
//!   `l2fwd` apps.
//! - [`memory`]: the VNF's own shared memory (packet pool and rings on
//!   memfds) and the SET_MEM_TABLE it produces.
//! - [`session`]: the vhost-user control conversation (frontend side).
//! - [`stats`]: per-queue counters, the stats line and JSON file.
//! - `queues`: one queue pair on nfv-virtio's `DriverQueue` (rx vq 2i, tx
//!   vq 2i+1): rx → app → tx → reclaim → refill, kicks only when asked.
//! - [`memif`]: the same apps over memif (the VNF as a memif client).
//! - [`runner`]: the session loop (connect, negotiate, poll, reconnect),
//!   adaptive sleeping on the call eventfds, and the stats reporter.
//! - `wait`: how both loops wait (a sleep a stop request cuts short,
//!   what `poll(2)` found).
//!
//! Tests: apps, config, stats and layout in-file; `tests/switch.rs` runs
//! the VNF against the real switch (a `Datapath` with the `nfv-vhost`
//! port); `tests/testpmd.rs` against DPDK's vhost-user backend.

pub mod app;
pub mod config;
pub mod memif;
pub mod memory;
mod queues;
pub mod runner;
pub mod session;
pub mod stats;
mod wait;

pub use app::App;
pub use config::{AppKind, ConfigError, Interface, Mac, Mode, PollMode, VnfConfig, VnfOptions};
pub use runner::{VnfError, run};
pub use stats::{Snapshot, VnfStats};
