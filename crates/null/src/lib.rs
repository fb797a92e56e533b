//! `null`: a port that takes every frame it is sent and never receives
//! one (DPDK's `net_null` without its rx side). A test double for tests
//! and benchmarks: a sink that never backpressures, so what is measured
//! is the switch up to the port.
//!
//! * Tx (`tx.rs`): the burst is freed whole and reported sent; the
//!   datapath counts its packets and bytes on the port's tx counters like
//!   any port's. With `max_frame` set, longer frames are dropped by the
//!   datapath as `too_big` ([`TxQueue::max_frame`](nfv_ports::TxQueue::max_frame)),
//!   before the burst. Split packets are taken as they are (it reads no
//!   frame).
//! * Rx (`rx.rs`): every rx queue is empty, and the port says it never
//!   receives, so spreading queues over PMDs does not count it.
//! * Counters: none of its own (nothing can fail); the gauges show
//!   `max_frame`.
//!
//! Unlike the built-in `sink`, it is a typed port in its own crate, with
//! a frame limit; it exists as the smallest port that follows every step
//! of `DEVELOPERS.md`'s "Adding a port type".
//!
//! Modules (the port crate shape, `DEVELOPERS.md`): `settings` (the
//! `max_frame` key), `port` ([`NULL`], open, gauges), `rx` and `tx` (the
//! PMD side). No `shared.rs`: the queues keep no counters and the port
//! publishes nothing to them. No module imports one that imports it back
//! (`scripts/mod-cycles crates/null`).

mod port;
mod rx;
mod settings;
mod tx;

pub use port::{NULL, NullPort, NullType, OpenError, open};
pub use settings::NullConfig;
