//! The layout of one UMEM chunk: its size, the kernel's headroom in front
//! of a received frame, and where rx and tx data start. Below both the
//! UMEM (`umem.rs`, which re-exports these) and the guest UMEM
//! (`guest_umem.rs`), which lays guest buffers out in chunks of the same
//! size.

/// Bytes per UMEM frame ("chunk"). Aligned mode needs a power of two
/// between 2048 and the page size.
pub const CHUNK_SIZE: usize = 2048;

/// What the kernel reserves in front of every received frame
/// (`XDP_PACKET_HEADROOM`): rx data starts this far into its chunk (plus
/// the UMEM's own headroom, 0 unless over guest memory).
pub const XDP_PACKET_HEADROOM: usize = 256;

/// Largest frame the kernel delivers into one chunk (Ethernet header
/// included, no FCS): `CHUNK_SIZE - XDP_PACKET_HEADROOM` (the UMEM
/// registers no extra headroom).
pub const RX_FRAME_MAX: usize = CHUNK_SIZE - XDP_PACKET_HEADROOM;

/// Where tx data starts in its chunk. Tx needs no headroom in copy mode,
/// so a transmitted frame may use the whole chunk.
pub const TX_OFFSET: usize = 0;
