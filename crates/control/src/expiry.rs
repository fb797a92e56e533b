//! What the flow-expiry thread (`expiry_thread.rs`) shares with the node
//! that holds it: its stop flag and its counts of removed rules (`show
//! node`). Below the node; the thread, which takes the node, is above it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

#[derive(Debug, Default)]
pub(crate) struct FlowExpiry {
    pub(crate) stop: AtomicBool,
    /// Rules removed by their idle timeout, and by their hard timeout.
    pub idle: AtomicU64,
    pub hard: AtomicU64,
}

impl FlowExpiry {
    pub fn stop(&self) {
        self.stop.store(true, Relaxed);
    }
}
