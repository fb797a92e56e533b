//! TAP rx and tx queues: one `read()` or `writev()` per frame, each frame
//! behind a virtio-net header (`IFF_VNET_HDR`). Written frames carry
//! their offload metadata in it (a partial checksum, a large segment):
//! the kernel completes or segments them, or passes them on whole to a
//! receiver that takes them (its GRO/GSO). Read frames come complete
//! (no offloads asked for), their header is skipped.
//!
//! A TAP descriptor moves exactly one frame per call: `read()` returns
//! one frame, and `readv()`/`writev()` only scatter one frame over several
//! buffers — the tun driver has no batched interface (its `recvmmsg`-like
//! path exists only for in-kernel users such as vhost-net). So this is the
//! one port type with a syscall per packet, plus one `read()` that finds
//! nothing (EAGAIN) per burst that empties the queue.

use crate::dev::VNET_HDR_LEN;
use nfv_mem::{Batch, PoolCache};
use nfv_ports::{RxQueue, TxQueue};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Counters of one queue. Single writer (the PMD owning the queue).
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct Counters {
    /// Frames larger than a packet buffer (cut by the kernel, dropped).
    pub rx_truncated: AtomicU64,
    /// `read()` errors other than EAGAIN (ends the burst).
    pub rx_errors: AtomicU64,
    /// Frames left unsent because `write()` said EAGAIN/ENOBUFS.
    pub tx_eagain: AtomicU64,
    /// `write()`s that took fewer bytes than the frame (counted as sent:
    /// the kernel consumed it).
    pub tx_short: AtomicU64,
    /// Frames the kernel refused one by one (EINVAL, EMSGSIZE: runts,
    /// oversize).
    pub tx_refused: AtomicU64,
    /// Frames left unsent after other errors (EIO: the interface is down).
    pub tx_errors: AtomicU64,
    /// Large segments the kernel took whole (GSO metadata in their
    /// virtio-net header: the kernel segments them or passes them on).
    pub tx_gso_frames: AtomicU64,
}

#[inline(always)]
fn bump(c: &AtomicU64, n: u64) {
    c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
}

pub struct TapRx {
    pub fd: Arc<OwnedFd>,
    pub counters: Arc<Counters>,
}

impl RxQueue for TapRx {
    fn rx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        let mut n = 0;
        while !batch.is_full() {
            let Some(mut pkt) = pool.alloc() else { break };
            let room = pkt.room_mut();
            // SAFETY: `room` is a live, writable buffer of the length
            // passed; the kernel writes at most that many bytes.
            let r =
                unsafe { libc::read(self.fd.as_raw_fd(), room.as_mut_ptr().cast(), room.len()) };
            if r <= 0 {
                pool.free(pkt);
                if r < 0 {
                    match io::Error::last_os_error().raw_os_error() {
                        Some(libc::EAGAIN) => {}
                        Some(libc::EINTR) => continue,
                        _ => bump(&self.counters.rx_errors, 1),
                    }
                }
                break;
            }
            // The tun driver returns the frame's full length even when it
            // had to cut it to fit the buffer.
            if (r as usize) < VNET_HDR_LEN || pkt.set_len(r as usize).is_err() {
                bump(&self.counters.rx_truncated, 1);
                pool.free(pkt);
                continue;
            }
            // Nothing to take from the header: no offloads were asked for
            // (DATA_VALID at most, a hint).
            pkt.trim_front(VNET_HDR_LEN);
            batch.push(pkt);
            n += 1;
        }
        n
    }
}

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
