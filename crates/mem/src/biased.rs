//! A [`SpinLock`] biased towards one user: the tx side of a vhost-user
//! ring, which one PMD sends into burst after burst while the protocol
//! thread takes it only to swap the ring's state.
//!
//! Why: the spin lock's compare-exchange is a locked instruction, and a
//! locked instruction waits until every store before it has left the
//! core. On a PMD those are the previous burst's used-ring stores into
//! lines the guest polls, so each burst's lock waited for a cache-line
//! round trip to the guest's core (a measurement-only build without it:
//! ~6 % fewer cycles a packet on the one-copy hop).
//!
//! How: the lock is *granted* to one [`Bias`] (its owner takes it on its
//! slow path, under the lock, when nobody else has used it since the last
//! [`BiasedLock::rebias`]). The owner then enters with two plain stores
//! and a load: it marks itself inside, then reads the bias; no fence.
//! Anyone else first *revokes* the bias: it marks it revoking, runs the
//! asymmetric barrier (`membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`:
//! every thread of the process executes a full memory barrier before the
//! call returns), then waits for the owner to be outside, then takes the
//! spin lock. This is Dekker's mutual exclusion with the owner's fence
//! moved to the rare side: an owner whose "inside" store had not left its
//! core when it read the bias has it flushed by the barrier, so the
//! revoker sees it and waits; an owner that reads the bias after the
//! barrier sees "revoking" and takes the spin lock instead. A revoked
//! lock stays an ordinary spin lock until `rebias` (the protocol thread,
//! after a swap), so a ring that several threads use pays the barrier
//! once, not per burst.
//!
//! Where `membarrier` is missing (old kernels, seccomp) no bias is ever
//! granted and every user takes the spin lock, as before.
//!
//! Nothing here waits on a guest: the revoker waits for the owner's burst
//! to end, as a spin-lock waiter does.

use std::ops::{Deref, DerefMut};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering, compiler_fence};

use crate::spin::{SpinGuard, SpinLock};

/// No bias: the next user of the slow path that brings a [`Bias`] may
/// take it.
const NONE: u32 = 0;
/// A revoker is waiting for the owner to leave.
const REVOKING: u32 = u32::MAX - 1;
/// Revoked: an ordinary spin lock until [`BiasedLock::rebias`].
const REVOKED: u32 = u32::MAX;

/// A would-be owner's identity (one per user object, e.g. a PMD's tx
/// queue) and whether the lock is granted to it. Ids are unique in the
/// process until 2^32 - 2 of them have been made.
#[derive(Debug)]
pub struct Bias {
    id: u32,
    granted: bool,
}

impl Default for Bias {
    fn default() -> Self {
        Bias::new()
    }
}

impl Bias {
    pub fn new() -> Bias {
        static NEXT: AtomicU32 = AtomicU32::new(1);
        let id = loop {
            let id = NEXT.fetch_add(1, Ordering::Relaxed);
            if id != NONE && id != REVOKING && id != REVOKED {
                break id;
            }
        };
        Bias { id, granted: false }
    }

    /// Whether the last lock taken with it was granted for the next.
    pub fn is_granted(&self) -> bool {
        self.granted
    }
}

/// See the module documentation.
pub struct BiasedLock<T> {
    lock: SpinLock<T>,
    /// [`NONE`], a [`Bias`] id, [`REVOKING`] or [`REVOKED`]. Changes only
    /// under the spin lock (grant), or by CAS from an id (revoke), or by
    /// the owner dropping its own bias (outside).
    bias: AtomicU32,
    /// The owner is inside (entered by the bias, not the spin lock).
    inside: AtomicBool,
}

impl<T: Default> Default for BiasedLock<T> {
    fn default() -> Self {
        BiasedLock::new(T::default())
    }
}

impl<T> std::fmt::Debug for BiasedLock<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BiasedLock")
            .field("lock", &self.lock)
            .field("bias", &self.bias.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl<T> BiasedLock<T> {
    pub const fn new(value: T) -> BiasedLock<T> {
        BiasedLock {
            lock: SpinLock::new(value),
            bias: AtomicU32::new(NONE),
            inside: AtomicBool::new(false),
        }
    }

    /// The owner's way in. Granted to `me`: no locked instruction, nobody
    /// waited for. Otherwise the spin lock as [`SpinLock::lock_unless`]
    /// (`None` at once while `never_wait_for` holds it), and the bias is
    /// granted to `me` for the next time when it is free to grant.
    #[inline]
    pub fn lock_biased(
        &self,
        me: &mut Bias,
        holder: u8,
        never_wait_for: u8,
    ) -> Option<BiasedGuard<'_, T>> {
        if me.granted {
            self.inside.store(true, Ordering::Relaxed);
            // The compiler keeps the store before the load; the CPU may
            // not, which the revoker's barrier answers (module doc).
            compiler_fence(Ordering::SeqCst);
            if self.bias.load(Ordering::Relaxed) == me.id {
                return Some(BiasedGuard {
                    lock: self,
                    held: None,
                    rebias: false,
                });
            }
            self.inside.store(false, Ordering::Release);
            me.granted = false;
        }
        self.lock_slow(holder, Some(never_wait_for), Some(me), false)
    }

    /// Takes the lock as `holder`, revoking any bias (it stays revoked).
    pub fn lock_as(&self, holder: u8) -> BiasedGuard<'_, T> {
        self.lock_slow(holder, None, None, false)
            .unwrap_or_else(|| unreachable!("waits for every holder"))
    }

    /// [`BiasedLock::lock_as`] for the thread that swaps the state: when
    /// the guard goes, the lock may be granted again (to whoever next
    /// takes it with a [`Bias`]).
    pub fn lock_then_rebias(&self, holder: u8) -> BiasedGuard<'_, T> {
        self.lock_slow(holder, None, None, true)
            .unwrap_or_else(|| unreachable!("waits for every holder"))
    }

    /// Makes a revoked lock grantable again.
    pub fn rebias(&self) {
        let _ = self
            .bias
            .compare_exchange(REVOKED, NONE, Ordering::Release, Ordering::Relaxed);
    }

    /// `me` gives its bias up (it is outside: not in a guard of this
    /// lock). For an owner that goes away or moves to another lock.
    pub fn drop_bias(&self, me: &mut Bias) {
        if me.granted {
            me.granted = false;
            let _ = self
                .bias
                .compare_exchange(me.id, NONE, Ordering::Release, Ordering::Relaxed);
        }
    }

    /// Whether the lock is granted to someone now (tests, diagnostics).
    pub fn is_biased(&self) -> bool {
        !matches!(self.bias.load(Ordering::Relaxed), NONE | REVOKED)
    }

    fn lock_slow(
        &self,
        holder: u8,
        never_wait_for: Option<u8>,
        mut me: Option<&mut Bias>,
        rebias: bool,
    ) -> Option<BiasedGuard<'_, T>> {
        let mine = me.as_ref().map(|m| m.id);
        loop {
            let g = match never_wait_for {
                Some(n) => self.lock.lock_unless(holder, n)?,
                None => self.lock.lock_as(holder),
            };
            // Read under the lock: grants happen only under it, so a bias
            // seen free here stays free until the guard goes.
            let b = self.bias.load(Ordering::Acquire);
            if b != NONE && b != REVOKED && Some(b) != mine {
                // An owner may be inside: revoke without holding the lock
                // (the barrier is a system call), then take it again.
                drop(g);
                self.revoke();
                continue;
            }
            if let Some(m) = me.as_mut() {
                m.granted = b == m.id
                    || (b == NONE
                        && asymmetric_barrier_available()
                        && self
                            .bias
                            .compare_exchange(NONE, m.id, Ordering::Relaxed, Ordering::Relaxed)
                            .is_ok());
            }
            return Some(BiasedGuard {
                lock: self,
                held: Some(g),
                rebias,
            });
        }
    }

    /// Ends the bias and waits until its owner is outside.
    #[cold]
    fn revoke(&self) {
        let mut spins = 0u32;
        loop {
            match self.bias.load(Ordering::Acquire) {
                NONE | REVOKED => return,
                REVOKING => pause(&mut spins),
                owner => {
                    if self
                        .bias
                        .compare_exchange(owner, REVOKING, Ordering::AcqRel, Ordering::Relaxed)
                        .is_err()
                    {
                        continue;
                    }
                    heavy_barrier();
                    while self.inside.load(Ordering::Acquire) {
                        pause(&mut spins);
                    }
                    self.bias.store(REVOKED, Ordering::Release);
                    return;
                }
            }
        }
    }
}

/// Spins, then yields: a revoker waits for the owner's burst, which is
/// short unless the owner's thread was preempted.
fn pause(spins: &mut u32) {
    *spins += 1;
    if *spins < 1_000 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

/// `membarrier(2)` commands (linux/membarrier.h).
const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;

fn membarrier(cmd: libc::c_int) -> bool {
    // SAFETY: membarrier takes two integers and touches no memory of ours.
    unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0 as libc::c_int) == 0 }
}

/// Whether this process may use the asymmetric barrier (registered once,
/// at the first ask; Linux 4.14 and later).
pub fn asymmetric_barrier_available() -> bool {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    *REGISTERED.get_or_init(|| membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED))
}

/// A full memory barrier on every running thread of the process. Only
/// called to revoke a bias, which was granted only where registration
/// succeeded; after it the kernel does not refuse the command.
fn heavy_barrier() {
    let done = membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED);
    assert!(
        done,
        "membarrier(PRIVATE_EXPEDITED) failed after registration: {}",
        std::io::Error::last_os_error()
    );
}

/// Holds a [`BiasedLock`]: by its bias, or by its spin lock.
pub struct BiasedGuard<'a, T> {
    lock: &'a BiasedLock<T>,
    /// `None`: entered by the bias.
    held: Option<SpinGuard<'a, T>>,
    /// Make the lock grantable again when this guard goes.
    rebias: bool,
}

impl<T> BiasedGuard<'_, T> {
    /// Whether this guard entered by the bias (tests, diagnostics).
    pub fn by_bias(&self) -> bool {
        self.held.is_none()
    }
}

impl<T> Deref for BiasedGuard<'_, T> {
    type Target = T;
    #[inline(always)]
    fn deref(&self) -> &T {
        // SAFETY: this guard excludes every other (module doc: the bias
        // or the spin lock, never both at once), so no `&mut` exists.
        unsafe { &*self.lock.lock.value.get() }
    }
}

impl<T> DerefMut for BiasedGuard<'_, T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as `deref`; the guard is exclusive.
        unsafe { &mut *self.lock.lock.value.get() }
    }
}

impl<T> Drop for BiasedGuard<'_, T> {
    #[inline(always)]
    fn drop(&mut self) {
        if self.held.is_none() {
            self.lock.inside.store(false, Ordering::Release);
        } else if self.rebias {
            // Before the spin lock goes (`held` drops after this body):
            // a grant needs the lock, so none slips in between.
            self.lock.rebias();
        }
    }
}

#[cfg(test)]
#[path = "biased_tests.rs"]
mod tests;
