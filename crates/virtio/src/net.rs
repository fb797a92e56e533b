//! The virtio-net header that precedes every packet in a virtqueue buffer.

use crate::layout::{
    VIRTIO_NET_F_CSUM, VIRTIO_NET_F_GUEST_CSUM, VIRTIO_NET_F_GUEST_ECN, VIRTIO_NET_F_GUEST_TSO4,
    VIRTIO_NET_F_GUEST_TSO6, VIRTIO_NET_F_GUEST_USO4, VIRTIO_NET_F_GUEST_USO6,
    VIRTIO_NET_F_HOST_ECN, VIRTIO_NET_F_HOST_TSO4, VIRTIO_NET_F_HOST_TSO6, VIRTIO_NET_F_HOST_USO,
};
use nfv_offload::OffloadCaps;

/// With VERSION_1 or MRG_RXBUF the header is 12 bytes (it has
/// `num_buffers`); legacy without MRG_RXBUF it is 10.
pub const HDR_LEN_V1: usize = 12;
pub const HDR_LEN_LEGACY: usize = 10;

/// Header length for a negotiated feature set.
pub fn hdr_len(features: u64) -> usize {
    if features & (crate::layout::VIRTIO_F_VERSION_1 | crate::layout::VIRTIO_NET_F_MRG_RXBUF) != 0 {
        HDR_LEN_V1
    } else {
        HDR_LEN_LEGACY
    }
}

/// What the guest may be *given* under the acked `features` (the GUEST_*
/// bits): a packet whose offload the caps do not accept is checksummed or
/// segmented in software before it reaches this guest. A bit whose
/// dependency was not acked counts as absent (a driver acking GUEST_TSO4
/// without GUEST_CSUM is not given TSO frames).
pub fn guest_caps(features: u64) -> OffloadCaps {
    let csum = features & VIRTIO_NET_F_GUEST_CSUM != 0;
    OffloadCaps {
        csum,
        tso4: csum && features & VIRTIO_NET_F_GUEST_TSO4 != 0,
        tso6: csum && features & VIRTIO_NET_F_GUEST_TSO6 != 0,
        ecn: csum && features & VIRTIO_NET_F_GUEST_ECN != 0,
        uso: csum && features & (VIRTIO_NET_F_GUEST_USO4 | VIRTIO_NET_F_GUEST_USO6) != 0,
    }
}

/// What the guest may *send* under the acked `features` (CSUM and the
/// HOST_* bits): a header asking for more is refused and counted.
pub fn host_caps(features: u64) -> OffloadCaps {
    let csum = features & VIRTIO_NET_F_CSUM != 0;
    OffloadCaps {
        csum,
        tso4: csum && features & VIRTIO_NET_F_HOST_TSO4 != 0,
        tso6: csum && features & VIRTIO_NET_F_HOST_TSO6 != 0,
        ecn: csum && features & VIRTIO_NET_F_HOST_ECN != 0,
        uso: csum && features & VIRTIO_NET_F_HOST_USO != 0,
    }
}
