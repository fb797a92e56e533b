//! The tx queue: copy each packet into a free tx frame of the UMEM, post
//! the descriptors, kick the kernel once per burst if the tx ring asks
//! for it, and reap the completion ring at the start of every burst.
//!
//! Sharing: the datapath opens one tx queue per PMD thread, and a port has
//! one socket per rx queue. Tx queue `q` uses socket `q % sockets`; when
//! there are more PMDs than sockets, several tx queues share one socket's
//! tx ring, completion ring and tx frames behind a spin lock, held for
//! one burst. With as many sockets as PMDs (the usual set-up: `rxqs` =
//! PMD threads) every lock is private to one thread and costs one
//! uncontended atomic swap per burst.
//!
//! Why not a socket per tx queue bound with `XDP_SHARED_UMEM` instead: a
//! socket can only bind to an existing NIC queue, and sockets sharing a
//! UMEM on the same queue share its fill and completion rings, so the
//! completion ring would need the same lock. Sharing would also make two
//! PMDs' `sendto` calls meet on the kernel's per-socket mutex (a sleeping
//! lock), which the spin lock avoids by making the kick part of the
//! critical section.
//!
//! Per burst: no allocation, one kick syscall at most (copy mode always
//! needs it: the kernel transmits copy-mode frames inside `sendto`, up to
//! 32 per call, which is our burst size).

use crate::umem::{TX_OFFSET, Umem};
use crate::xsk::{Xsk, bump};
use nfv_mem::{Batch, PoolCache};
use nfv_ports::TxQueue;
use std::sync::Arc;

pub struct AfXdpTxq {
    xsk: Arc<Xsk>,
    max_frame: usize,
}

impl AfXdpTxq {
    pub fn new(xsk: Arc<Xsk>, max_frame: usize) -> AfXdpTxq {
        xsk.tx_users
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        AfXdpTxq { xsk, max_frame }
    }
}

impl Drop for AfXdpTxq {
    fn drop(&mut self) {
        self.xsk
            .tx_users
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl TxQueue for AfXdpTxq {
    /// Sends a prefix of `batch`; what does not fit (no free tx frame or
    /// ring slot) stays in `batch`. Frames longer than [`Self::max_frame`]
    /// (the datapath never passes them) are freed, counted as the port's
    /// `tx_too_big`, and not counted as sent.
    #[inline]
    fn tx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        transmit(&self.xsk, self.max_frame, batch, pool)
    }

    fn max_frame(&self) -> usize {
        self.max_frame
    }

    /// Split packets: head and tail copied straight into the UMEM frame
    /// within the burst (no join first); nothing is kept past it.
    fn takes_split(&self) -> bool {
        true
    }
}

/// One tx burst on `xsk` (see [`AfXdpTxq::tx_burst`]): reap completions,
/// copy a prefix of `batch` into free tx frames, post, kick if asked.
#[inline]
pub(crate) fn transmit(
    xsk: &Xsk,
    max_frame: usize,
    batch: &mut Batch,
    pool: &mut PoolCache,
) -> usize {
    if batch.is_empty() {
        return 0;
    }
    let mut guard = xsk.tx.lock();
    let st = &mut *guard;

    // Completed frames back to the free list.
    let done = st.comp.available(xsk.ring_size);
    for i in 0..done {
        st.free.push(Umem::chunk_of(st.comp.read(i)));
    }
    st.comp.release(done);

    let want = batch.len() as u32;
    let n = want.min(st.free.len() as u32).min(st.tx.free(want));
    let mut posted = 0u32;
    for i in 0..n as usize {
        if i + 1 < n as usize {
            nfv_mem::hint::prefetch(batch[i + 1].data_ptr());
        }
        let p = &batch[i];
        // Split packets (a zero-copy queue takes them) are copied head and
        // tail straight into the frame.
        let len = p.frame_len();
        if len > max_frame {
            bump(&xsk.tx_counters.too_big, 1);
            continue;
        }
        let Some(frame) = st.free.pop() else {
            break;
        };
        let addr = frame + TX_OFFSET as u64;
        if !xsk.umem.write_frame(addr, p) {
            st.free.push(frame);
            bump(&xsk.tx_counters.too_big, 1);
            continue;
        }
        st.tx.write(
            posted,
            libc::xdp_desc {
                addr,
                len: len as u32,
                options: 0,
            },
        );
        posted += 1;
    }
    st.tx.submit(posted);
    kick(xsk, st, posted);
    drop(guard);

    for p in batch.drain(..n as usize) {
        pool.free(p);
    }
    posted as usize
}

/// Kicks the kernel if the tx ring asks for it and something is waiting
/// (`posted` now, or left from before).
#[inline]
pub(crate) fn kick(xsk: &Xsk, st: &mut crate::xsk::TxState, posted: u32) {
    if st.tx.needs_wakeup() && (posted > 0 || st.tx.outstanding() > 0) {
        bump(&xsk.tx_counters.kicks, 1);
        if let Err(e) = xsk.kick_tx() {
            match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS) => {
                    bump(&xsk.tx_counters.kicks_busy, 1)
                }
                _ => bump(&xsk.tx_counters.kick_errors, 1),
            }
        }
    }
}
