//! One queue pair as the poll loop sees it: nfv-virtio's driver side of rx
//! virtqueue 2i and tx virtqueue 2i+1, their kick eventfds, and the glue
//! that counts what happens (rx, tx, drops by reason).
//!
//! Per poll: receive ≤32 → app → transmit (reclaiming first if the ring is
//! short) → drop what did not fit (`tx_ring_full`) → reclaim tx → refill rx.
//! Kicks are written only when the switch asked for them (`needs_kick`,
//! EVENT_IDX or NO_NOTIFY), so a poll-mode switch costs no syscalls.
//!
//! The kick eventfds are ours, but the switch holds them too and shares
//! their open file description: it could clear `O_NONBLOCK` and fill the
//! counter, and a plain `write` would then block this poll loop. Kicks
//! therefore go through `nfv_virtio::notify::Call` (an atomic flag here, the
//! write on the notifier thread under a watchdog); a kick fd that blocks is
//! ignored from then on and logged once.

use crate::app::App;
use crate::memory::SharedMemory;
use crate::session::Session;
use crate::stats::QueueStats;
use nfv_mem::{Batch, PoolCache};
use nfv_virtio::notify::Call;
use nfv_virtio::{DriverQueue, DriverSetup, GuestMemory, SetupError};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::Arc;
use vmm_sys_util::eventfd::EventFd;

/// Driver counters already added to the VNF's stats (they are cumulative
/// per queue; the VNF's survive reconnects).
#[derive(Default)]
struct Synced {
    alloc_failures: u64,
    rx_oversize: u64,
    errors: u64,
    kicks: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error("virtqueue set-up: {0}")]
    Setup(#[from] SetupError),
    #[error("kick eventfd: {0}")]
    EventFd(#[from] std::io::Error),
}

pub struct QueuePair {
    index: usize,
    rx: DriverQueue,
    tx: DriverQueue,
    rx_kick: Call,
    tx_kick: Call,
    /// A kick fd was found blocking and this was logged.
    kick_stuck_logged: bool,
    synced: Synced,
}

impl QueuePair {
    /// Sets up queue pair `index` of a negotiated session and posts its rx
    /// buffers. `mem` must be the memory the session announced.
    pub fn new(
        index: usize,
        session: &Session,
        mem: &SharedMemory,
        gmem: &Arc<GuestMemory>,
        cache: &mut PoolCache,
    ) -> Result<QueuePair, QueueError> {
        let (rx_vq, tx_vq) = (2 * index, 2 * index + 1);
        let setup = |vq: usize| DriverSetup {
            mem: gmem.clone(),
            size: mem.ring_size(),
            rings: mem.vq(vq),
            features: session.features(),
            rx_buf_len: 0,
        };
        let dup = |vq: usize| kick_call(&session.kick[vq]);
        let mut qp = QueuePair {
            index,
            rx: DriverQueue::new(setup(rx_vq))?,
            tx: DriverQueue::new(setup(tx_vq))?,
            rx_kick: dup(rx_vq)?,
            tx_kick: dup(tx_vq)?,
            kick_stuck_logged: false,
            synced: Synced::default(),
        };
        qp.rx.refill_rx(cache);
        if qp.rx.needs_kick() {
            kick(&qp.rx_kick);
        }
        Ok(qp)
    }

    /// One round; returns the packets received.
    #[inline]
    pub fn poll(&mut self, app: &mut dyn App, cache: &mut PoolCache, st: &QueueStats) -> usize {
        let mut batch = Batch::new();
        let n = self.rx.receive_burst(&mut batch, cache);
        if n > 0 {
            let bytes: usize = batch.iter().map(|p| p.len()).sum();
            st.rx(n as u64, bytes as u64);
            app.process(&mut batch);
            if !batch.is_empty() {
                let (want, before) = (batch.len(), self.tx.stats().tx_bytes);
                let sent = self.tx.transmit_burst(&mut batch, cache);
                st.tx(sent as u64, self.tx.stats().tx_bytes - before);
                // Taken from the batch but not posted: no shared memory
                // for it (the driver's copy fallback failed).
                let lost = want - sent - batch.len();
                if lost > 0 {
                    st.tx_copy_failed(lost as u64);
                }
                if !batch.is_empty() {
                    st.drop_tx_full(batch.len() as u64);
                    cache.free_batch(&mut batch);
                }
                if self.tx.needs_kick() {
                    kick(&self.tx_kick);
                }
            }
        }
        self.tx.reclaim_tx(cache);
        if self.rx.refill_rx(cache) > 0 && self.rx.needs_kick() {
            kick(&self.rx_kick);
        }
        n
    }

    /// Before sleeping: asks for an rx interrupt; true if packets are
    /// already waiting (then do not sleep).
    pub fn arm(&mut self) -> bool {
        self.rx.enable_interrupts();
        self.rx.has_used()
    }

    /// Back to polling: no interrupts.
    pub fn disarm(&mut self) {
        self.rx.disable_interrupts();
    }

    /// The rx virtqueue's call eventfd, to sleep on.
    pub fn call_fd<'a>(&self, session: &'a Session) -> BorrowedFd<'a> {
        session.call_fd(2 * self.index)
    }

    pub fn rx_vq(&self) -> usize {
        2 * self.index
    }

    /// True when either queue stopped because the switch broke the
    /// virtqueue protocol.
    pub fn quarantined(&self) -> bool {
        self.rx.is_quarantined() || self.tx.is_quarantined()
    }

    /// Adds what the driver counted since the last call to the VNF's stats:
    /// refills that found the pool empty, merged frames too long for a
    /// packet, protocol violations by the switch, and kicks.
    pub fn sync_counters(&mut self, st: &QueueStats) {
        let (r, t) = (self.rx.stats(), self.tx.stats());
        let now = Synced {
            alloc_failures: r.alloc_failures,
            rx_oversize: r.rx_oversize,
            errors: self.rx.errors().total() + self.tx.errors().total(),
            kicks: r.kicks + t.kicks,
        };
        st.no_buffers(now.alloc_failures - self.synced.alloc_failures);
        st.rx_oversize(now.rx_oversize - self.synced.rx_oversize);
        st.switch_errors(now.errors - self.synced.errors);
        st.kicks(now.kicks - self.synced.kicks);
        self.synced = now;
        if !self.kick_stuck_logged && (self.rx_kick.is_stuck() || self.tx_kick.is_stuck()) {
            self.kick_stuck_logged = true;
            tracing::warn!(
                "vnf: queue pair {}: writing a kick eventfd would block (the switch filled \
                 it); kicks on it are ignored from now on",
                self.index
            );
        }
    }

    /// Ends the pair: counters synced, every buffer back to the pool (the
    /// switch must no longer touch them: it is gone or its rings stopped).
    pub fn release(mut self, st: &QueueStats) {
        self.sync_counters(st);
        if self.quarantined() {
            tracing::warn!(
                "vnf: queue pair {} quarantined: rx {:?}, tx {:?}",
                self.index,
                self.rx.errors(),
                self.tx.errors()
            );
        }
        // Dropping the queues drops their posted packets, which return to
        // the pool through its owner registry.
    }
}

#[inline]
fn kick(c: &Call) {
    // Never blocks; a stuck fd is reported by `sync_counters`.
    c.signal();
}

/// Our own duplicate of a kick eventfd, handed to the notifier.
fn kick_call(efd: &EventFd) -> std::io::Result<Call> {
    // SAFETY: the eventfd is open for as long as `efd` lives, which
    // outlasts this borrow; the duplicate is independent of it.
    let fd = unsafe { BorrowedFd::borrow_raw(efd.as_raw_fd()) }.try_clone_to_owned()?;
    Ok(Call::new(fd))
}

/// Describes the VNF's memory to the driver queues.
pub fn guest_memory(mem: &SharedMemory) -> Result<Arc<GuestMemory>, nfv_virtio::MemoryError> {
    // SAFETY: the regions are the pool's and the rings' mappings, valid
    // for reads and writes while `mem` lives; the returned table is used
    // only by queue pairs, which `runner::drive` drops before `mem`.
    unsafe { GuestMemory::from_raw(&mem.raw_regions()) }.map(Arc::new)
}
