//! TPACKET_V3 block layout, and a bounds-checked walk over the frames of
//! one block. Pure: works on a byte slice, so the unit tests below feed it
//! fake blocks in plain memory.
//!
//! A block starts with `struct tpacket_block_desc` (48 bytes: version,
//! offset_to_priv, then `tpacket_hdr_v1` with block_status, num_pkts,
//! offset_to_first_pkt, blk_len, seq_num and two timestamps). Frames
//! follow, each a `struct tpacket3_hdr` (48 bytes) whose `tp_next_offset`
//! leads to the next one (0 on the last) and whose `tp_mac`/`tp_snaplen`
//! locate the frame bytes relative to the header.
//!
//! The kernel is trusted, but the walker still checks every offset against
//! the block: a bad one ends the walk of that block with a [`WalkError`]
//! (the caller counts it and hands the block back) instead of reading out
//! of bounds. Offsets must grow by at least a frame header per frame, so
//! the walk ends after at most `block.len() / 48` frames whatever
//! `num_pkts` says.

use std::mem::{offset_of, size_of};

/// Size of the block descriptor at the start of each block.
pub const BLOCK_HDR_LEN: usize = size_of::<libc::tpacket_block_desc>();
/// Size of the header in front of each frame.
pub const FRAME_HDR_LEN: usize = size_of::<libc::tpacket3_hdr>();

const BH1: usize = offset_of!(libc::tpacket_block_desc, hdr);
/// Offset of `block_status` in a block (the word ownership passes through).
pub const OFF_BLOCK_STATUS: usize = BH1 + offset_of!(libc::tpacket_hdr_v1, block_status);
const OFF_NUM_PKTS: usize = BH1 + offset_of!(libc::tpacket_hdr_v1, num_pkts);
const OFF_FIRST_PKT: usize = BH1 + offset_of!(libc::tpacket_hdr_v1, offset_to_first_pkt);

const OFF_NEXT: usize = offset_of!(libc::tpacket3_hdr, tp_next_offset);
const OFF_SNAPLEN: usize = offset_of!(libc::tpacket3_hdr, tp_snaplen);
const OFF_LEN: usize = offset_of!(libc::tpacket3_hdr, tp_len);
const OFF_MAC: usize = offset_of!(libc::tpacket3_hdr, tp_mac);

#[inline(always)]
fn u32_at(b: &[u8], off: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[off..off + 4]);
    u32::from_ne_bytes(w)
}

#[inline(always)]
fn u16_at(b: &[u8], off: usize) -> u16 {
    u16::from_ne_bytes([b[off], b[off + 1]])
}

/// What was wrong with a block. The walk of the block ends; `lost` frames
/// (the bad one and those after it, as `num_pkts` announced) are not
/// delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WalkError {
    pub kind: WalkErrorKind,
    pub lost: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WalkErrorKind {
    /// The block is shorter than its descriptor, or its first frame
    /// would overlap the descriptor.
    BlockHeader,
    /// A frame header lies (partly) outside the block, or the previous
    /// frame's `tp_next_offset` was shorter than a header.
    FrameHeader,
    /// A frame's bytes (`tp_mac`, `tp_snaplen`) lie outside the block or
    /// overlap its header.
    FrameData,
}

/// One frame of a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    /// The captured bytes (`tp_snaplen` of them), from the Ethernet header.
    pub data: &'a [u8],
    /// Length on the wire (`tp_len`); larger than `data.len()` when the
    /// kernel truncated the frame to fit the ring.
    pub wire_len: u32,
}

impl Frame<'_> {
    #[inline(always)]
    pub fn truncated(&self) -> bool {
        (self.data.len() as u64) < u64::from(self.wire_len)
    }
}

/// The position of a walk through one block. Holds offsets only, so it
/// can be kept across rx bursts while the block stays owned by user space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockWalk {
    /// Offset of the next frame header (`usize::MAX` once an offset was
    /// found bad; the next step reports it).
    off: usize,
    /// Frames not yet delivered.
    left: u32,
}

impl BlockWalk {
    /// Starts walking a block that the kernel has handed to user space.
    pub fn start(block: &[u8]) -> Result<BlockWalk, WalkError> {
        if block.len() < BLOCK_HDR_LEN {
            return Err(WalkError {
                kind: WalkErrorKind::BlockHeader,
                lost: 0,
            });
        }
        let left = u32_at(block, OFF_NUM_PKTS);
        let first = u32_at(block, OFF_FIRST_PKT) as usize;
        if left > 0 && first < BLOCK_HDR_LEN {
            return Err(WalkError {
                kind: WalkErrorKind::BlockHeader,
                lost: left,
            });
        }
        Ok(BlockWalk { off: first, left })
    }

    /// Frames of the block not yet delivered.
    #[inline(always)]
    pub fn remaining(&self) -> u32 {
        self.left
    }

    #[inline(always)]
    fn fail(&mut self, kind: WalkErrorKind) -> WalkError {
        let lost = self.left;
        self.left = 0;
        WalkError { kind, lost }
    }

    /// The next frame, `None` when the block is done. After an error the
    /// walk is done.
    #[inline]
    pub fn next_frame<'a>(&mut self, block: &'a [u8]) -> Option<Result<Frame<'a>, WalkError>> {
        if self.left == 0 {
            return None;
        }
        let off = self.off;
        let Some(hdr) = off
            .checked_add(FRAME_HDR_LEN)
            .and_then(|end| block.get(off..end))
        else {
            return Some(Err(self.fail(WalkErrorKind::FrameHeader)));
        };
        let next = u32_at(hdr, OFF_NEXT) as usize;
        let snaplen = u32_at(hdr, OFF_SNAPLEN) as usize;
        let wire_len = u32_at(hdr, OFF_LEN);
        let mac = usize::from(u16_at(hdr, OFF_MAC));
        // `off` fits the block, so these sums cannot overflow.
        let start = off + mac;
        let Some(data) = block
            .get(start..start + snaplen)
            .filter(|_| mac >= FRAME_HDR_LEN)
        else {
            return Some(Err(self.fail(WalkErrorKind::FrameData)));
        };
        self.left -= 1;
        self.off = if next >= FRAME_HDR_LEN {
            off + next
        } else {
            usize::MAX
        };
        Some(Ok(Frame { data, wire_len }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BLOCK: usize = 4096;

    /// Builds a block: `frames` are (offset of the header, tp_mac,
    /// snaplen, wire len, tp_next_offset); frame bytes are filled with
    /// the frame's index.
    fn block(num_pkts: u32, first: u32, frames: &[(usize, u16, u32, u32, u32)]) -> Vec<u8> {
        let mut b = vec![0xeeu8; BLOCK];
        b[OFF_BLOCK_STATUS..OFF_BLOCK_STATUS + 4].copy_from_slice(&1u32.to_ne_bytes());
        b[OFF_NUM_PKTS..OFF_NUM_PKTS + 4].copy_from_slice(&num_pkts.to_ne_bytes());
        b[OFF_FIRST_PKT..OFF_FIRST_PKT + 4].copy_from_slice(&first.to_ne_bytes());
        for (i, &(off, mac, snap, len, next)) in frames.iter().enumerate() {
            let h = &mut b[off..off + FRAME_HDR_LEN];
            h.fill(0);
            h[OFF_NEXT..OFF_NEXT + 4].copy_from_slice(&next.to_ne_bytes());
            h[OFF_SNAPLEN..OFF_SNAPLEN + 4].copy_from_slice(&snap.to_ne_bytes());
            h[OFF_LEN..OFF_LEN + 4].copy_from_slice(&len.to_ne_bytes());
            h[OFF_MAC..OFF_MAC + 2].copy_from_slice(&mac.to_ne_bytes());
            let start = off + mac as usize;
            let end = (start + snap as usize).min(BLOCK);
            if start < end {
                b[start..end].fill(i as u8);
            }
        }
        b
    }

    /// Walks a block; returns the frames as (len, wire_len, fill byte) and
    /// the error that ended the walk, if any.
    fn walk(b: &[u8]) -> (Vec<(usize, u32, u8)>, Option<WalkError>) {
        let mut w = match BlockWalk::start(b) {
            Ok(w) => w,
            Err(e) => return (Vec::new(), Some(e)),
        };
        let mut out = Vec::new();
        while let Some(r) = w.next_frame(b) {
            match r {
                Ok(f) => {
                    assert!(f.data.iter().all(|&x| x == f.data[0]), "frame bytes mixed");
                    out.push((
                        f.data.len(),
                        f.wire_len,
                        f.data.first().copied().unwrap_or(0),
                    ));
                }
                Err(e) => {
                    assert_eq!(w.remaining(), 0);
                    assert!(w.next_frame(b).is_none(), "a walk ends after an error");
                    return (out, Some(e));
                }
            }
        }
        (out, None)
    }

    #[test]
    fn frames_are_walked_and_bad_offsets_are_counted() {
        use WalkErrorKind::*;
        // The kernel's layout for 64-byte frames: header at 48, tp_mac 82,
        // next = align16(82 + 64) = 160.
        let three = [
            (48, 82, 64, 64, 160),
            (208, 82, 64, 64, 160),
            (368, 82, 64, 64, 0),
        ];
        type Case = (
            &'static str,
            Vec<u8>,
            Vec<(usize, u32, u8)>,
            Option<(WalkErrorKind, u32)>,
        );
        let cases: Vec<Case> = vec![
            (
                "three frames",
                block(3, 48, &three),
                vec![(64, 64, 0), (64, 64, 1), (64, 64, 2)],
                None,
            ),
            ("zero frames", block(0, 48, &[]), vec![], None),
            (
                "zero frames, offset to first frame garbage",
                block(0, 0, &[]),
                vec![],
                None,
            ),
            (
                "one truncated frame",
                block(1, 48, &[(48, 82, 100, 1514, 0)]),
                vec![(100, 1514, 0)],
                None,
            ),
            (
                "frame ends exactly at the block end",
                block(1, 48, &[(48, 82, (BLOCK - 48 - 82) as u32, 3966, 0)]),
                vec![(BLOCK - 48 - 82, 3966, 0)],
                None,
            ),
            (
                "first frame overlaps the block descriptor",
                block(3, 16, &[]),
                vec![],
                Some((BlockHeader, 3)),
            ),
            (
                "first frame header beyond the block",
                block(2, BLOCK as u32 - 8, &[]),
                vec![],
                Some((FrameHeader, 2)),
            ),
            (
                "first frame offset near u32::MAX",
                block(2, u32::MAX, &[]),
                vec![],
                Some((FrameHeader, 2)),
            ),
            (
                "frame data beyond the block",
                block(2, 48, &[(48, 82, 64, 64, 160), (208, 82, 5000, 5000, 0)]),
                vec![(64, 64, 0)],
                Some((FrameData, 1)),
            ),
            (
                "tp_mac inside the frame header",
                block(1, 48, &[(48, 20, 64, 64, 0)]),
                vec![],
                Some((FrameData, 1)),
            ),
            (
                "tp_next_offset 0 before the last frame",
                block(3, 48, &[(48, 82, 64, 64, 0)]),
                vec![(64, 64, 0)],
                Some((FrameHeader, 2)),
            ),
            (
                "tp_next_offset leads out of the block",
                block(3, 48, &[(48, 82, 64, 64, 100_000)]),
                vec![(64, 64, 0)],
                Some((FrameHeader, 2)),
            ),
            (
                "num_pkts larger than the frames present",
                // The second "header" is filler bytes; the walk must stop
                // there instead of trusting num_pkts.
                block(u32::MAX, 48, &[(48, 82, 64, 64, 48)]),
                vec![(64, 64, 0)],
                Some((FrameData, u32::MAX - 1)),
            ),
        ];
        for (name, b, want, err) in cases {
            let (got, e) = walk(&b);
            assert_eq!(got, want, "{name}");
            assert_eq!(e.map(|e| (e.kind, e.lost)), err, "{name}");
        }
    }

    #[test]
    fn a_walk_ends_within_the_block_whatever_num_pkts_says() {
        // Minimal valid frames (no data) chained 48 bytes apart.
        let frames: Vec<_> = (0..)
            .map(|i| 48 + 48 * i)
            .take_while(|off| off + FRAME_HDR_LEN <= BLOCK)
            .map(|off| (off, FRAME_HDR_LEN as u16, 0, 0, FRAME_HDR_LEN as u32))
            .collect();
        let b = block(u32::MAX, 48, &frames);
        let (got, e) = walk(&b);
        assert_eq!(got.len(), frames.len());
        assert_eq!(got.len(), (BLOCK - BLOCK_HDR_LEN) / FRAME_HDR_LEN);
        let e = e.unwrap();
        assert_eq!(e.kind, WalkErrorKind::FrameHeader);
        assert_eq!(e.lost, u32::MAX - got.len() as u32);
    }

    #[test]
    fn a_block_shorter_than_its_descriptor_is_refused() {
        let e = BlockWalk::start(&[0u8; 20]).unwrap_err();
        assert_eq!(e.kind, WalkErrorKind::BlockHeader);
    }

    #[test]
    fn walk_can_pause_between_frames() {
        // rx bursts stop mid-block and resume later from the same offsets.
        let b = block(
            3,
            48,
            &[
                (48, 82, 64, 64, 160),
                (208, 82, 64, 64, 160),
                (368, 82, 64, 64, 0),
            ],
        );
        let mut w = BlockWalk::start(&b).unwrap();
        assert_eq!(w.next_frame(&b).unwrap().unwrap().data[0], 0);
        let saved = w;
        let mut w2 = saved;
        assert_eq!(w2.remaining(), 2);
        assert_eq!(w2.next_frame(&b).unwrap().unwrap().data[0], 1);
        assert_eq!(w2.next_frame(&b).unwrap().unwrap().data[0], 2);
        assert!(w2.next_frame(&b).is_none());
    }

    #[test]
    fn layout_matches_the_kernel_headers() {
        assert_eq!(BLOCK_HDR_LEN, 48);
        assert_eq!(FRAME_HDR_LEN, 48);
        assert_eq!(OFF_BLOCK_STATUS, 8);
        assert_eq!((OFF_NUM_PKTS, OFF_FIRST_PKT), (12, 16));
        assert_eq!((OFF_NEXT, OFF_SNAPLEN, OFF_LEN, OFF_MAC), (0, 12, 16, 24));
    }
}
