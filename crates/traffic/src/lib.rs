//! Traffic generation and measurement logic for nfvswitch, with no I/O:
//! the pieces the `generator` and `receiver` ports and `nfvswitch ndr`
//! are built from, testable on their own.
//!
//! - [`stamp`]: the 22-byte payload stamp (stream, sequence, TSC) that
//!   fits a 64-byte frame, and finding it in a frame.
//! - [`stream`]: per-stream loss, reordering, duplicates and latency,
//!   written by one thread and read lock-free by others.
//! - [`receiver`]: a set of streams as one queue sees them.
//! - [`latency`]: the lock-free HdrHistogram-compatible latency buckets
//!   and their summary (min, mean, p50, p99, p99.9, max).
//! - [`mix`]: IMIX, line-rate arithmetic and the pacer.
//! - [`search`]: the RFC 2544 binary search for NDR and PDR.

pub mod latency;
pub mod mix;
pub mod receiver;
pub mod search;
pub mod stamp;
pub mod stream;

pub use latency::LatencySummary;
pub use receiver::{ReceiverShared, ReceiverSnapshot, TrafficReceiver};
pub use search::{SearchConfig, SearchResult, TrialResult, search};
pub use stamp::{Stamp, StampError};
pub use stream::{Arrival, StreamReceiver, StreamSnapshot};
