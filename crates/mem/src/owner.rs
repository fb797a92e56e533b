//! Buffer owners: who takes a buffer back when a packet is released.
//!
//! Most packets live in the switch's own pool, which the datapath frees
//! through a per-thread [`crate::PoolCache`] without touching this module.
//! A packet may instead live in memory the switch does not own — a VNF's
//! guest memory (zero-copy vhost-user, IOVTee style) or an AF_XDP UMEM —
//! and then its owner (the port) must get the buffer back. Owners register
//! here once and are found by the small id every packet carries.
//!
//! This registry is the slow path: it is used when a packet is dropped
//! without being handed to a cache, or when a foreign packet is freed.
//! Thread safety: a process-wide `RwLock`; registration is rare.

use std::sync::{RwLock, Weak};

pub type OwnerId = u16;

/// Set in the id of an owner whose buffers are only *borrowed* by the
/// switch (a VNF's receive buffers filled by the kernel, see
/// `nfv_virtio`'s lending): a packet in such a buffer must not outlive
/// the burst that produced it, like a split packet's tail, so ports that
/// keep packets get a copy ([`crate::Packet::is_borrowed`]).
pub const BORROWED: OwnerId = 0x8000;

/// Not an owner bit: set in a [`crate::Packet`]'s owner field while the
/// packet carries offload metadata (see [`crate::Packet::offload`]). Owner
/// ids stay below it.
pub(crate) const OFFLOAD_META: OwnerId = 0x4000;

/// Something that lends packet buffers and wants them back.
pub trait BufferOwner: Send + Sync {
    /// Returns the buffer identified by `token` (meaning is the owner's).
    fn release(&self, token: u32);
}

static OWNERS: RwLock<Vec<Option<Weak<dyn BufferOwner>>>> = RwLock::new(Vec::new());

/// Registers an owner and returns the id its packets carry. Ids of owners
/// that are gone are reused.
pub fn register(owner: Weak<dyn BufferOwner>) -> OwnerId {
    let mut v = OWNERS.write().unwrap_or_else(|p| p.into_inner());
    if let Some(i) = v
        .iter()
        .position(|o| o.as_ref().is_none_or(|w| w.strong_count() == 0))
    {
        v[i] = Some(owner);
        return i as OwnerId;
    }
    assert!(
        v.len() < OFFLOAD_META as usize - 1,
        "too many packet buffer owners"
    );
    v.push(Some(owner));
    (v.len() - 1) as OwnerId
}

/// Registers an owner of borrowed buffers: its id has [`BORROWED`] set.
pub fn register_borrowed(owner: Weak<dyn BufferOwner>) -> OwnerId {
    register(owner) | BORROWED
}

/// Hands `token` back to owner `id`. Returns false if the owner is gone
/// (its memory was leaked on purpose, see `pool.rs`).
pub fn release(id: OwnerId, token: u32) -> bool {
    let owner = {
        let v = OWNERS.read().unwrap_or_else(|p| p.into_inner());
        v.get((id & !(BORROWED | OFFLOAD_META)) as usize)
            .and_then(|o| o.as_ref())
            .and_then(|w| w.upgrade())
    };
    match owner {
        Some(o) => {
            o.release(token);
            true
        }
        None => false,
    }
}
