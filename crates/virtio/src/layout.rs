//! Split-ring layout (virtio 1.x §2.7) and feature bits used by virtio-net.

pub const VIRTQ_DESC_F_NEXT: u16 = 1;
pub const VIRTQ_DESC_F_WRITE: u16 = 2;
pub const VIRTQ_DESC_F_INDIRECT: u16 = 4;
pub const VIRTQ_USED_F_NO_NOTIFY: u16 = 1;
pub const VIRTQ_AVAIL_F_NO_INTERRUPT: u16 = 1;

/// virtio-net §5.1.3 offload bits. HOST_* (and CSUM): the driver may
/// send partial checksums / large segments to the device; GUEST_* (and
/// GUEST_CSUM): the device may deliver them to the driver.
pub const VIRTIO_NET_F_CSUM: u64 = 1 << 0;
pub const VIRTIO_NET_F_GUEST_CSUM: u64 = 1 << 1;
pub const VIRTIO_NET_F_GUEST_TSO4: u64 = 1 << 7;
pub const VIRTIO_NET_F_GUEST_TSO6: u64 = 1 << 8;
pub const VIRTIO_NET_F_GUEST_ECN: u64 = 1 << 9;
pub const VIRTIO_NET_F_HOST_TSO4: u64 = 1 << 11;
pub const VIRTIO_NET_F_HOST_TSO6: u64 = 1 << 12;
pub const VIRTIO_NET_F_HOST_ECN: u64 = 1 << 13;
pub const VIRTIO_NET_F_GUEST_USO4: u64 = 1 << 54;
pub const VIRTIO_NET_F_GUEST_USO6: u64 = 1 << 55;
pub const VIRTIO_NET_F_HOST_USO: u64 = 1 << 56;
/// virtio-net §5.1.3: the device config carries the MTU the driver should
/// use (vhost-user: the frontend's config space, QEMU `host_mtu`).
pub const VIRTIO_NET_F_MTU: u64 = 1 << 3;
pub const VIRTIO_NET_F_MRG_RXBUF: u64 = 1 << 15;
pub const VIRTIO_NET_F_MQ: u64 = 1 << 22;
pub const VIRTIO_RING_F_INDIRECT_DESC: u64 = 1 << 28;
pub const VIRTIO_RING_F_EVENT_IDX: u64 = 1 << 29;
pub const VIRTIO_F_VERSION_1: u64 = 1 << 32;
pub const VIRTIO_F_RING_PACKED: u64 = 1 << 34;
/// virtio §2.7.9 / §6: the device uses (and returns) buffers in the order
/// they were made available. The device queues here always do, so offering
/// it costs nothing; a driver that gets it may take cheaper paths (DPDK's
/// virtio PMD switches to its in-order rx/tx functions).
pub const VIRTIO_F_IN_ORDER: u64 = 1 << 35;
pub const VHOST_USER_F_PROTOCOL_FEATURES: u64 = 1 << 30;
/// vhost: the backend logs its writes into guest memory (live migration).
pub const VHOST_F_LOG_ALL: u64 = 1 << 26;

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
/// `flags, idx, ring[size], used_event`
pub fn avail_ring_bytes(size: u16) -> usize {
    6 + 2 * size as usize
}
/// `flags, idx, ring[size], avail_event`
pub fn used_ring_bytes(size: u16) -> usize {
    6 + 8 * size as usize
}

/// Alignment of each ring part in [`layout_rings`]: a cache line, so the
/// driver-written parts (descriptors, avail) and the device-written part
/// (used) never share a line. The spec needs 16/2/4.
pub const RING_PART_ALIGN: usize = 64;

/// Addresses of the three parts of a split ring, as written to the device
/// (`VHOST_USER_SET_VRING_ADDR` or a transport's queue registers).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingAddrs {
    pub desc: u64,
    pub avail: u64,
    pub used: u64,
}

#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum LayoutError {
    #[error("queue size {0} must be a power of two in 1..=32768")]
    QueueSize(u16),
    #[error("ring area of {have} bytes is too small: a queue of {size} needs {need}")]
    TooSmall { size: u16, have: usize, need: usize },
}

fn align_up(x: u64, a: u64) -> Option<u64> {
    Some(x.checked_add(a - 1)? & !(a - 1))
}

/// Checks a queue size: a power of two in 1..=32768 (virtio §2.7).
pub fn check_queue_size(size: u16) -> Result<(), LayoutError> {
    if size == 0 || !size.is_power_of_two() {
        return Err(LayoutError::QueueSize(size));
    }
    Ok(())
}

/// Bytes needed by [`layout_rings`] for a queue of `size` (including the
/// event-index fields and worst-case alignment padding).
pub fn ring_area_bytes(size: u16) -> usize {
    desc_table_bytes(size) + avail_ring_bytes(size) + used_ring_bytes(size) + 3 * RING_PART_ALIGN
}

/// Lays out descriptor table, avail ring and used ring for a queue of
/// `size` in the `len` bytes starting at address `area` (any address space:
/// the results are `area` plus offsets). The caller zeroes the area.
pub fn layout_rings(area: u64, len: usize, size: u16) -> Result<RingAddrs, LayoutError> {
    check_queue_size(size)?;
    let a = RING_PART_ALIGN as u64;
    let too_small = LayoutError::TooSmall {
        size,
        have: len,
        need: ring_area_bytes(size),
    };
    let desc = align_up(area, a).ok_or(too_small.clone())?;
    let avail = align_up(desc + desc_table_bytes(size) as u64, a).ok_or(too_small.clone())?;
    let used = align_up(avail + avail_ring_bytes(size) as u64, a).ok_or(too_small.clone())?;
    let end = used + used_ring_bytes(size) as u64;
    if end - area > len as u64 {
        return Err(too_small);
    }
    Ok(RingAddrs { desc, avail, used })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_aligned_and_fits() {
        for size in [1u16, 2, 256, 1024, 32768] {
            for skew in [0u64, 1, 8, 63] {
                let area = 0x10_0000 + skew;
                let len = ring_area_bytes(size);
                let r = layout_rings(area, len, size).unwrap();
                assert_eq!(r.desc % 16, 0);
                assert_eq!(r.avail % 64, 0);
                assert_eq!(r.used % 64, 0);
                assert!(r.desc >= area);
                assert!(r.avail >= r.desc + desc_table_bytes(size) as u64);
                assert!(r.used >= r.avail + avail_ring_bytes(size) as u64);
                assert!(r.used + used_ring_bytes(size) as u64 <= area + len as u64);
            }
        }
        assert_eq!(
            layout_rings(0, 100, 256),
            Err(LayoutError::TooSmall {
                size: 256,
                have: 100,
                need: ring_area_bytes(256)
            })
        );
        assert_eq!(layout_rings(0, 1 << 20, 3), Err(LayoutError::QueueSize(3)));
        assert_eq!(layout_rings(0, 1 << 20, 0), Err(LayoutError::QueueSize(0)));
        assert!(layout_rings(u64::MAX - 10, 1 << 20, 4).is_err());
    }
}
