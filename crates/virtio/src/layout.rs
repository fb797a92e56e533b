//! Split-ring layout (virtio 1.x §2.7) and feature bits used by virtio-net.

pub const VIRTQ_DESC_F_NEXT: u16 = 1;
pub const VIRTQ_DESC_F_WRITE: u16 = 2;
pub const VIRTQ_DESC_F_INDIRECT: u16 = 4;
pub const VIRTQ_USED_F_NO_NOTIFY: u16 = 1;
pub const VIRTQ_AVAIL_F_NO_INTERRUPT: u16 = 1;

pub const VIRTIO_NET_F_MRG_RXBUF: u64 = 1 << 15;
pub const VIRTIO_NET_F_MQ: u64 = 1 << 22;
pub const VIRTIO_RING_F_INDIRECT_DESC: u64 = 1 << 28;
pub const VIRTIO_RING_F_EVENT_IDX: u64 = 1 << 29;
pub const VIRTIO_F_VERSION_1: u64 = 1 << 32;
pub const VIRTIO_F_RING_PACKED: u64 = 1 << 34;
pub const VHOST_USER_F_PROTOCOL_FEATURES: u64 = 1 << 30;

/// A descriptor (16 bytes, little-endian in memory; x86 only here).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Desc {
    pub addr: u64,
    pub len: u32,
    pub flags: u16,
    pub next: u16,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct UsedElem {
    pub id: u32,
    pub len: u32,
}

/// Byte sizes of the three ring areas for a queue of `size` entries.
pub fn desc_table_bytes(size: u16) -> usize {
    16 * size as usize
}
/// flags, idx, ring[size], used_event
pub fn avail_ring_bytes(size: u16) -> usize {
    6 + 2 * size as usize
}
/// flags, idx, ring[size], avail_event
pub fn used_ring_bytes(size: u16) -> usize {
    6 + 8 * size as usize
}
