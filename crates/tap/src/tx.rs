//! TAP tx queue: one `writev()` per frame, behind a virtio-net header
//! (`IFF_VNET_HDR`) that carries the frame's offload metadata (a partial
//! checksum, a large segment): the kernel completes or segments it, or
//! passes it on whole to a receiver that takes it (its GRO/GSO). As on
//! rx (`rx.rs`), the tun driver takes one frame per call.

use crate::shared::{Counters, VNET_HDR_LEN, bump};
use nfv_mem::{Batch, PoolCache};
use nfv_ports::TxQueue;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

pub struct TapTx {
    pub fd: Arc<OwnedFd>,
    pub max_frame: usize,
    pub counters: Arc<Counters>,
}

impl TxQueue for TapTx {
    fn tx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        let n = batch.len();
        // Frames [0, done) were sent, except those in `refused`.
        let mut done = 0;
        let mut refused: u64 = 0;
        while done < n {
            let p = &batch[done];
            let hdr = vnet_hdr(p);
            let iov = [
                libc::iovec {
                    iov_base: hdr.as_ptr() as *mut libc::c_void,
                    iov_len: VNET_HDR_LEN,
                },
                libc::iovec {
                    iov_base: p.data_ptr() as *mut libc::c_void,
                    iov_len: p.len(),
                },
            ];
            // SAFETY: both spans are live (our header array, the packet's
            // `len` data bytes) for the call; the kernel only reads them.
            let r = unsafe { libc::writev(self.fd.as_raw_fd(), iov.as_ptr(), 2) };
            if r >= 0 {
                if (r as usize) < VNET_HDR_LEN + p.len() {
                    bump(&self.counters.tx_short, 1);
                }
                // Byte 1: gso_type (0: none).
                bump(&self.counters.tx_gso_frames, u64::from(hdr[1] != 0));
                done += 1;
                continue;
            }
            match io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EINVAL) | Some(libc::EMSGSIZE) => {
                    refused |= 1 << done;
                    bump(&self.counters.tx_refused, 1);
                    done += 1;
                }
                Some(libc::EAGAIN) | Some(libc::ENOBUFS) => {
                    bump(&self.counters.tx_eagain, (n - done) as u64);
                    break;
                }
                _ => {
                    bump(&self.counters.tx_errors, (n - done) as u64);
                    break;
                }
            }
        }
        nfv_ports::settle_tx(batch, pool, done, refused)
    }

    fn max_frame(&self) -> usize {
        self.max_frame
    }

    /// The kernel takes partial checksums and TCP (and, since Linux 6.2,
    /// UDP) segments through the header; UDP segmentation is left to the
    /// switch, as older kernels refuse it.
    fn offload_caps(&mut self) -> nfv_offload::OffloadCaps {
        nfv_offload::OffloadCaps {
            csum: true,
            tso4: true,
            tso6: true,
            ecn: true,
            uso: false,
        }
    }

    fn max_segment_frame(&self) -> usize {
        u16::MAX as usize
    }
}

/// The virtio-net header `p` is written with: its offload metadata, or
/// none.
#[inline(always)]
fn vnet_hdr(p: &nfv_mem::Packet) -> [u8; VNET_HDR_LEN] {
    const _: () = assert!(nfv_mem::OFFLOAD_HDR_LEN == VNET_HDR_LEN);
    p.offload().unwrap_or([0; VNET_HDR_LEN])
}
