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
//! Per burst: no allocation, one kick syscall when the ring drains (copy
//! mode always needs it: the kernel transmits copy-mode frames inside
//! `sendto`, up to 32 descriptors per call, which is our burst size).
//!
//! Descriptors left on the tx ring: in copy mode the kernel stops early —
//! after 32 descriptors (a burst sent in place, `zero_copy_tx.rs`, has two
//! per frame), or when the socket's send buffer is full (each frame is an
//! skb charged to the socket until the receiver frees it, which under CPU
//! load waits for ksoftirqd) — and sends the rest only when kicked again.
//! So [`kick`] kicks again while the kernel takes descriptors, and when
//! some are still left the rx path of the same socket kicks every
//! [`RETRY_AFTER`] until none are ([`retry_backlog`]). Without that, the
//! frames waited for the next frame to this port: for a TCP sender that
//! waits for their ACKs, its retransmission timeout, which backs off
//! exponentially — streams through a loaded host stalled for tens of
//! seconds.

use crate::umem::{TX_OFFSET, Umem};
use crate::xsk::{TxState, Xsk, bump};
use nfv_mem::{Batch, PoolCache};
use nfv_ports::TxQueue;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

/// Kicks per [`kick`] at most (each moves up to 32 descriptors in copy
/// mode): a full ring of frames sent in place is 4096 descriptors, which
/// the next bursts and [`retry_backlog`] take on.
const MAX_KICKS: u32 = 8;

/// How long descriptors the kernel left on the tx ring wait for the next
/// kick from the rx path: a busy send buffer frees within microseconds
/// to milliseconds (as the receiving softirq runs), and a kick that the
/// kernel refuses costs about a microsecond.
pub(crate) const RETRY_AFTER: Duration = Duration::from_micros(100);

/// The same after a kick failed otherwise (interface down or gone): no
/// point in asking often.
const RETRY_AFTER_ERROR: Duration = Duration::from_millis(10);

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
/// (`posted` now, or left from before); again while the kernel takes
/// descriptors and some are left. If some still are, marks the socket for
/// [`retry_backlog`] (see the module doc). Returns the kicks made.
#[inline]
pub(crate) fn kick(xsk: &Xsk, st: &mut TxState, posted: u32) -> u32 {
    if !st.tx.needs_wakeup() {
        // A driver that takes the ring by itself.
        set_backlog(xsk, st, None);
        return 0;
    }
    let mut left = st.tx.outstanding();
    if posted == 0 && left == 0 {
        set_backlog(xsk, st, None);
        return 0;
    }
    let mut kicks = 0;
    let mut failed = false;
    while kicks < MAX_KICKS {
        kicks += 1;
        bump(&xsk.tx_counters.kicks, 1);
        if let Err(e) = xsk.kick_tx() {
            match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS) => {
                    bump(&xsk.tx_counters.kicks_busy, 1)
                }
                _ => {
                    bump(&xsk.tx_counters.kick_errors, 1);
                    failed = true;
                    break;
                }
            }
        }
        let now = st.tx.outstanding();
        let took = now < left;
        left = now;
        if left == 0 || !took {
            break;
        }
    }
    let wait = if failed {
        RETRY_AFTER_ERROR
    } else {
        RETRY_AFTER
    };
    let retry = (left > 0).then_some(wait);
    set_backlog(xsk, st, retry);
    kicks
}

/// Records whether (and after how long) the rx path should kick again.
#[inline]
fn set_backlog(xsk: &Xsk, st: &mut TxState, retry: Option<Duration>) {
    st.retry_at = retry.map(|d| Instant::now() + d);
    if xsk.tx_backlog.load(Relaxed) != retry.is_some() {
        xsk.tx_backlog.store(retry.is_some(), Relaxed);
    }
}

/// For the rx path of a socket whose last kick left descriptors on the
/// tx ring (`Xsk::tx_backlog`): kicks again once the retry time came.
#[inline]
pub(crate) fn retry_backlog(xsk: &Xsk, st: &mut TxState) {
    if st.retry_at.is_some_and(|t| Instant::now() < t) {
        return;
    }
    let kicks = kick(xsk, st, 0);
    if kicks != 0 {
        bump(&xsk.tx_counters.retry_kicks, kicks as u64);
    }
}

/// Kicks the socket's tx ring again if its last kick left descriptors
/// there (see the module doc). Called by the rx path: the rx queue is
/// polled whether or not anything is sent, so frames left by a burst go
/// out without waiting for the next one. A tx burst holding the lock
/// kicks by itself, so a busy lock is skipped.
#[inline]
pub(crate) fn retry_tx(xsk: &Xsk) {
    if xsk.tx_backlog.load(Relaxed)
        && let Some(mut st) = xsk.tx.try_lock()
    {
        retry_backlog(xsk, &mut st);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xsk::Bind;
    use nfv_testutil::netns::{Netns, Veth};

    /// A copy-mode sendto takes 32 descriptors: a ring posted far past
    /// that is left partly sent by a burst's kicks, and with nothing more
    /// to send the rx path's retries send the rest.
    #[test]
    fn descriptors_left_on_the_tx_ring_go_out_without_new_frames() {
        let test = "afxdp::tx::descriptors_left_on_the_tx_ring_go_out_without_new_frames";
        if let Some(why) = nfv_testutil::netns::unavailable() {
            return nfv_testutil::skip(test, &why);
        }
        let ns = Netns::new("nxk").expect("namespace");
        let veth = Veth::into_ns(&ns, "10.77.0.2/24").expect("veth pair");
        let ifindex = nfv_netdev::index(&veth.host).expect("ifindex");
        let xsk = Xsk::open(ifindex, 0, 1024, Bind::Copy).expect("socket");
        let sent_before = tx_packets(&veth.host);
        // Frames to the inner end's MAC of an experimental ethertype: the
        // namespace drops them; only the count matters.
        let mut frame = vec![0u8; 60];
        frame[..6].copy_from_slice(&veth.inner_mac);
        frame[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
        let n = 600u32;
        let mut st = xsk.tx.lock();
        for i in 0..n {
            let addr = st.free.pop().expect("a free tx frame") + TX_OFFSET as u64;
            assert!(xsk.umem.write_from(addr, &frame));
            st.tx.write(
                i,
                libc::xdp_desc {
                    addr,
                    len: frame.len() as u32,
                    options: 0,
                },
            );
        }
        st.tx.submit(n);
        let kicks = kick(&xsk, &mut st, n);
        assert!(
            kicks > 1,
            "one kick took {} of {n}",
            n - st.tx.outstanding()
        );
        assert!(
            st.tx.outstanding() > 0,
            "{n} descriptors went in {kicks} kicks"
        );
        assert!(xsk.tx_backlog.load(Relaxed));
        drop(st);
        let deadline = Instant::now() + Duration::from_secs(5);
        while xsk.tx.lock().tx.outstanding() > 0 && Instant::now() < deadline {
            retry_tx(&xsk);
            std::thread::sleep(RETRY_AFTER / 2);
        }
        let left = xsk.tx.lock().tx.outstanding();
        assert_eq!(left, 0, "{left} descriptors still on the ring");
        assert!(!xsk.tx_backlog.load(Relaxed));
        assert!(xsk.tx_counters.retry_kicks.load(Relaxed) > 0);
        let sent = tx_packets(&veth.host) - sent_before;
        assert!(sent >= n as u64, "the veth sent {sent} of {n}");
        drop(xsk);
        drop(veth);
        drop(ns);
    }

    fn tx_packets(iface: &str) -> u64 {
        std::fs::read_to_string(format!("/sys/class/net/{iface}/statistics/tx_packets"))
            .expect("tx_packets")
            .trim()
            .parse()
            .expect("a number")
    }
}
