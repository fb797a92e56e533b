//! Transmit side: one AF_PACKET socket per tx queue (per PMD), bound to
//! the interface with protocol 0 (it receives nothing) and
//! `PACKET_QDISC_BYPASS` (frames go straight to the driver, no qdisc),
//! sending a whole burst with one `sendmmsg`.
//!
//! Offloads: the socket is opened with `PACKET_VNET_HDR`, so every frame
//! goes out behind a 10-byte virtio-net header — its offload metadata (a
//! partial checksum, a TCP segment of up to 64 KiB) or zeros. The kernel
//! completes the checksum or segments the frame on its way to the driver
//! (`validate_xmit_skb`, also on the qdisc bypass path), or hands the
//! large segment whole to a device that takes it (veth: the receiving
//! stack's GRO path). Where the kernel refuses the option (older than
//! 2.6.27, or a hardened build), the queue sends plain frames and reports
//! no offload capability: the switch segments in software.
//!
//! Why `sendmmsg` rather than a `PACKET_TX_RING`: both copy each frame
//! once (switch buffer → ring slot, or switch buffer → skb) and both cost
//! one syscall per burst (a TX ring still needs a `send()` to kick the
//! kernel). `sendmmsg` needs no slot bookkeeping or completion polling,
//! reports per-frame errors at the frame that failed, leaves nothing
//! mapped per PMD — and measured faster on veth at 64 and 1514 bytes
//! (`examples/afpacket_rate.rs`; figures in `bench/README.md`, AF_PACKET).
//!
//! Errors: EAGAIN/ENOBUFS (socket buffer or device queue full) end the
//! burst and leave the rest in the batch for the caller to count as
//! drops. EMSGSIZE/EINVAL concern one frame (e.g. an untagged frame of
//! MTU + 15..18 bytes, which `max_frame` lets through for VLAN-tagged
//! frames): that frame stays in the batch and the burst goes on with the
//! next, one more syscall. Anything else (ENETDOWN, ENXIO: the link is
//! down or gone) ends the burst.

use crate::shared::{TxCounters, bump};
use nfv_mem::{BATCH, Batch, PoolCache};
use nfv_ports::TxQueue;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

pub struct AfPacketTx {
    fd: Option<OwnedFd>,
    max_frame: usize,
    /// The socket takes a virtio-net header before each frame.
    vnet_hdr: bool,
    counters: Arc<TxCounters>,
    /// Per frame: [virtio-net header, frame] (only the second when the
    /// socket has no `PACKET_VNET_HDR`).
    iov: [[libc::iovec; 2]; BATCH],
    hdrs: [[u8; VNET_HDR_LEN]; BATCH],
    msgs: [libc::mmsghdr; BATCH],
}

/// Length of the virtio-net header in front of each frame
/// (`struct virtio_net_hdr`, no `num_buffers`).
pub const VNET_HDR_LEN: usize = nfv_mem::OFFLOAD_HDR_LEN;

// SAFETY: the raw pointers in `iov` and `msgs` are scratch space, rewritten
// from the batch at the start of every burst and never dereferenced
// outside one; the queue itself is used by one thread at a time.
unsafe impl Send for AfPacketTx {}

impl AfPacketTx {
    /// A queue sending on `fd`; `None` for a queue whose socket could not
    /// be opened (it sends nothing, every frame counted in `errors`).
    /// `vnet_hdr`: the socket was opened with `PACKET_VNET_HDR`.
    pub fn new(
        fd: Option<OwnedFd>,
        max_frame: usize,
        vnet_hdr: bool,
        counters: Arc<TxCounters>,
    ) -> AfPacketTx {
        AfPacketTx {
            fd,
            max_frame,
            vnet_hdr,
            counters,
            hdrs: [[0; VNET_HDR_LEN]; BATCH],
            // SAFETY: iovec and mmsghdr are plain old data; all-zero
            // (null pointers, zero lengths) is a valid value.
            iov: unsafe { std::mem::zeroed() },
            // SAFETY: as above.
            msgs: unsafe { std::mem::zeroed() },
        }
    }
}

impl TxQueue for AfPacketTx {
    fn tx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        let n = batch.len();
        let Some(fd) = &self.fd else {
            bump(&self.counters.errors, n as u64);
            return 0;
        };
        if n == 0 {
            return 0;
        }
        let first = usize::from(!self.vnet_hdr);
        let mut gso_frames = 0;
        for (i, p) in batch.iter().enumerate() {
            let iov = &mut self.iov[i];
            if self.vnet_hdr {
                // The virtio-net header is stored in the layout the
                // kernel reads for packet sockets (little-endian fields).
                self.hdrs[i] = p.offload().unwrap_or([0; VNET_HDR_LEN]);
                // Byte 1: gso_type (0: none).
                gso_frames += u64::from(self.hdrs[i][1] != 0);
                iov[0] = libc::iovec {
                    iov_base: self.hdrs[i].as_mut_ptr().cast(),
                    iov_len: VNET_HDR_LEN,
                };
            }
            iov[1] = libc::iovec {
                iov_base: p.data_ptr() as *mut libc::c_void,
                iov_len: p.len(),
            };
            let h = &mut self.msgs[i].msg_hdr;
            h.msg_iov = iov[first..].as_mut_ptr();
            h.msg_iovlen = 2 - first;
        }
        bump(&self.counters.gso_frames, gso_frames);
        // Frames [0, done) were sent, except those in `refused`.
        let mut done = 0;
        let mut refused: u64 = 0;
        while done < n {
            // SAFETY: msgs[done..n] are initialised above and point at
            // iovecs describing live packet data of the batch and the
            // headers in `hdrs`, neither touched until the call returns.
            // The kernel only reads.
            let r = unsafe {
                libc::sendmmsg(
                    fd.as_raw_fd(),
                    self.msgs[done..n].as_mut_ptr(),
                    (n - done) as libc::c_uint,
                    libc::MSG_DONTWAIT,
                )
            };
            bump(&self.counters.calls, 1);
            if r > 0 {
                done += r as usize;
                continue;
            }
            let err = io::Error::last_os_error().raw_os_error().unwrap_or(0);
            match err {
                libc::EINTR => continue,
                libc::EMSGSIZE | libc::EINVAL => {
                    refused |= 1 << done;
                    bump(&self.counters.bad_frames, 1);
                    done += 1;
                }
                libc::EAGAIN | libc::ENOBUFS => {
                    bump(&self.counters.busy, (n - done) as u64);
                    break;
                }
                _ => {
                    bump(&self.counters.errors, (n - done) as u64);
                    break;
                }
            }
        }
        nfv_ports::settle_tx(batch, pool, done, refused)
    }

    fn max_frame(&self) -> usize {
        self.max_frame
    }

    /// With the header, the kernel completes partial checksums and
    /// segments TCP; UDP segmentation is left to the switch (kernels
    /// before 6.2 refuse `GSO_UDP_L4` from a packet socket).
    fn offload_caps(&mut self) -> nfv_offload::OffloadCaps {
        nfv_offload::OffloadCaps {
            csum: self.vnet_hdr,
            tso4: self.vnet_hdr,
            tso6: self.vnet_hdr,
            ecn: self.vnet_hdr,
            uso: false,
        }
    }

    fn max_segment_frame(&self) -> usize {
        if self.vnet_hdr {
            u16::MAX as usize
        } else {
            self.max_frame
        }
    }
}
