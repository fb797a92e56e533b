//! What placement works on: rx queues, PMD threads and measured loads,
//! used by [`assign`](crate::assign()), [`History`](crate::History) and
//! [`AutoLb`](crate::AutoLb) alike.

use serde::Serialize;

/// An rx queue: a port number and a queue index on that port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct RxqId {
    pub port: u16,
    pub queue: usize,
}

/// A PMD thread as placement sees it: its index in the datapath and the
/// core it is pinned to (the order `cycles` walks; unpinned PMDs come
/// after pinned ones, by index).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pmd {
    pub index: usize,
    pub core: Option<usize>,
}

/// An rx queue and its measured load (cycles over the history).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxqLoad {
    pub id: RxqId,
    pub cycles: u64,
}
