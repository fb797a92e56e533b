//! The virtio-net header that precedes every packet in a virtqueue buffer.

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
