//! TAP rx queue: one `read()` per frame. Frames come complete behind
//! their virtio-net header (`IFF_VNET_HDR`; no offloads were asked for,
//! `dev::attach`), which is skipped.
//!
//! A TAP descriptor moves exactly one frame per call: `read()` returns
//! one frame, and `readv()`/`writev()` only scatter one frame over several
//! buffers — the tun driver has no batched interface (its `recvmmsg`-like
//! path exists only for in-kernel users such as vhost-net). So this is the
//! one port type with a syscall per packet, plus one `read()` that finds
//! nothing (EAGAIN) per burst that empties the queue.

use crate::shared::{Counters, VNET_HDR_LEN, bump};
use nfv_mem::{Batch, PoolCache};
use nfv_ports::RxQueue;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

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
