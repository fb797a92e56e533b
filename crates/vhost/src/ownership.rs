//! The ring ownership state machine: what the owner of one virtqueue does
//! when the published setup of its vring changes.
//!
//! Both kinds of owner run it over the same fields ([`RingOwner`], in
//! `shared.rs`: a guest RX ring's lives behind that ring's lock): a guest
//! TX virtqueue's rx queue object on its PMD (`rx.rs`, when it sees a new
//! generation)
//! and the protocol thread for a guest RX virtqueue (`backend.rs`, on the
//! ring's state taken out of its slot: retiring and building a queue read
//! and write guest memory and the dirty log, which may fault, so no lock
//! a PMD takes is held meanwhile). What differs is only where the result is published
//! (the rx side stores its position for `GET_VRING_BASE`; the tx side keeps
//! it under the lock) and which fill gauge is cleared; that is the
//! caller's.
//!
//! A transition happens when the setup id changes (a vring that starts,
//! stops or whose addresses, memory or call fd changed): the running queue
//! is retired (its position kept, its counters folded into the ring's
//! totals) and, if the vring should run, a new queue is built at the
//! position the old one stopped, or at the frontend's base when the base
//! epoch moved (SET_VRING_BASE, a stop). A setup that fails to build is
//! counted and logged once per setup id; the ring stays stopped until the
//! protocol thread publishes a different setup.
//!
//! A ring that starts or stops (not a rebuild in place) is logged,
//! rate-limited, with its avail and used positions: the numbers a
//! migration or a reconnect resumes from. A split ring that starts with
//! `used.idx` in guest memory different from the avail position it was
//! given is logged as a warning: chains the previous backend took and
//! never returned, or a used ring the frontend restored from stale memory
//! (the driver then sees entries it did not expect).
//!
//! Between transitions, both owners run the same two cold checks from
//! their bursts: [`check_memory`] when the guest-memory fault epoch moved,
//! and [`publish`] when the queue's counters changed.

use std::sync::atomic::Ordering::Relaxed;

use nfv_virtio::DeviceQueue;

use crate::errors::{self, ERROR_KINDS, ErrorMirror};
use crate::shared::{RingOwner, RingSetup, Shared, Status};

impl RingOwner {
    /// Moves vring `vring` to `setup` (`None`: stopped); with `keep_lent`
    /// the new queue takes over the old one's lent buffers (see
    /// `lend.rs`). Returns `None`
    /// when nothing changed, else the retired queue (if one ran), for the
    /// caller to drop where it suits it (outside a lock: dropping the last
    /// user of a memory table unmaps it).
    #[cold]
    pub fn apply(
        &mut self,
        setup: Option<&RingSetup>,
        shared: &Shared,
        vring: usize,
        mirror: &ErrorMirror,
        keep_lent: bool,
    ) -> Option<Option<DeviceQueue>> {
        let want = setup.map_or(0, |s| s.id);
        if want == self.setup_id {
            return None;
        }
        let mut retired = self.dq.take();
        if let Some(dq) = &mut retired {
            // Owners apply between bursts: no packet reads a held chain.
            // Chains kept for a borrower sending them in place go back
            // too: the borrower was revoked before this change (its
            // socket is closed, `LendState::before_tx_change`).
            dq.complete_held();
            if dq.return_all_kept() != 0 {
                dq.publish_kept();
            }
            // The interrupt check the publish left for the next burst,
            // which this owner will not run.
            dq.settle_interrupts();
            self.position = dq.last_avail_idx();
            errors::mirror(mirror, dq, &mut self.error_base, true);
            if setup.is_none() {
                log_stop(shared, vring, self.position, dq);
            }
        }
        self.setup_id = want;
        if let Some(s) = setup {
            if s.base_epoch != self.base_epoch {
                self.position = s.base;
                self.base_epoch = s.base_epoch;
            }
            match s.build(self.position) {
                Ok(mut dq) => {
                    self.error_seen = errors::trigger(&dq);
                    if retired.is_none() {
                        log_start(shared, vring, self.position, &dq);
                    }
                    // Same memory and addresses (a new call fd): buffers
                    // lent by the old queue stay lent by the new one.
                    if keep_lent && let Some(old) = retired.as_mut() {
                        dq.adopt_lent(old);
                    }
                    self.dq = Some(dq);
                }
                Err(e) => {
                    Status::bump(&mirror.setup_failures);
                    Status::bump(&shared.status.ring_errors);
                    shared.warn_limited("ring_setup", format!("vring {vring}: cannot start: {e}"));
                }
            }
        }
        Some(retired)
    }
}

/// Logs a ring that starts (see the module docs).
#[cold]
fn log_start(shared: &Shared, vring: usize, avail: u16, dq: &DeviceQueue) {
    let used = dq.used_position();
    if used != avail && !dq.is_packed() {
        shared.log.warn("ring_start", || {
            format!(
                "vring {vring} started at avail {avail} but used.idx in guest memory is {used}: \
                 {} chains were taken and not returned before, or the used ring is stale",
                avail.wrapping_sub(used)
            )
        });
    } else {
        shared.log.info("ring_start", || {
            format!(
                "vring {vring} started at avail {avail}, used {used}{}",
                history(dq)
            )
        });
    }
}

/// Chains to show on each side of a ring's start and stop positions.
const HISTORY: u16 = 8;

/// The ring's recent entries as guest memory holds them
/// (`DeviceQueue::ring_history`), for a start or stop log line.
fn history(dq: &DeviceQueue) -> String {
    format!("; {}", dq.ring_history(HISTORY))
}

/// Logs a ring that stops. Every chain taken has been returned by then
/// (held and kept chains went back above) except those whose head id was
/// out of range (no id to return them under, counted), so on a split ring
/// `used.idx` plus those equals the avail position; anything else is a
/// bug of ours, warned.
#[cold]
fn log_stop(shared: &Shared, vring: usize, avail: u16, dq: &DeviceQueue) {
    let used = dq.used_position();
    let unreturnable = dq.unreturnable();
    if used.wrapping_add(unreturnable) != avail && !dq.is_packed() && !dq.is_quarantined() {
        shared.log.warn("ring_stop", || {
            format!(
                "vring {vring} stopped at avail {avail} with used.idx {used}: \
                 {} chains taken and not returned",
                avail.wrapping_sub(used).wrapping_sub(unreturnable)
            )
        });
    } else {
        shared.log.info("ring_stop", || {
            if unreturnable != 0 && !dq.is_packed() {
                format!(
                    "vring {vring} stopped at avail {avail}, used {used} \
                     ({unreturnable} chains had head ids out of range: not returnable)"
                )
            } else {
                format!(
                    "vring {vring} stopped at avail {avail}, used {used}{}",
                    history(dq)
                )
            }
        });
    }
}

/// Stops `dq` if its guest memory faulted (cold: the fault epoch moved).
#[cold]
pub(crate) fn check_memory(shared: &Shared, vring: usize, dq: &mut DeviceQueue) {
    if dq.memory().faulted() && dq.stats().memory_faults == 0 {
        dq.quarantine_memory_fault();
        shared.warn_limited(
            "memory_fault",
            format!(
                "vring {vring}: guest memory faulted (SIGBUS: the frontend shrank a memory \
                 file); the ring is quarantined until a new memory table"
            ),
        );
    }
}

/// Publishes `dq`'s counters after they changed; logs a call fd that
/// started blocking.
#[cold]
pub(crate) fn publish(
    shared: &Shared,
    vring: usize,
    m: &ErrorMirror,
    dq: &DeviceQueue,
    base: &mut [u64; ERROR_KINDS],
) {
    errors::mirror(m, dq, base, false);
    if dq.call_stuck() && !m.call_stuck.swap(true, Relaxed) {
        shared.warn_limited(
            "call_blocked",
            format!(
                "vring {vring}: writing the call fd would block; it is ignored until the \
                 frontend sends a new one (SET_VRING_CALL)"
            ),
        );
    }
}
