//! The project's one spin lock, for state PMD threads share for the
//! length of one burst (a socket's or a ring's tx side when PMDs outnumber
//! them). Uncontended it costs one compare-exchange and one release store
//! per burst; a waiter spins on a plain load so it does not bounce the line.
//!
//! Holders are tagged (any non-zero `u8`): a thread that must never wait
//! on a certain holder — a PMD on the control thread, which may be slow —
//! asks [`SpinLock::lock_unless`] and is told at once that the lock is
//! held by it, instead of spinning.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU8, Ordering};

/// The holder tag of [`SpinLock::lock`] and [`SpinLock::try_lock`].
pub const ANY: u8 = 1;
const FREE: u8 = 0;

pub struct SpinLock<T> {
    holder: AtomicU8,
    value: UnsafeCell<T>,
}

// SAFETY: the value is only reached through a guard, and at most one guard
// exists at a time (`holder` leaves FREE with Acquire and returns to it
// with Release), so sharing the lock shares `T` exclusively: `T: Send`.
unsafe impl<T: Send> Sync for SpinLock<T> {}
// SAFETY: moving the lock moves the value.
unsafe impl<T: Send> Send for SpinLock<T> {}

impl<T> std::fmt::Debug for SpinLock<T> {
    /// Whether it is held, not the value (reading it would need the lock).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpinLock")
            .field("holder", &self.holder.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl<T: Default> Default for SpinLock<T> {
    fn default() -> Self {
        SpinLock::new(T::default())
    }
}

impl<T> SpinLock<T> {
    pub const fn new(value: T) -> SpinLock<T> {
        SpinLock {
            holder: AtomicU8::new(FREE),
            value: UnsafeCell::new(value),
        }
    }

    /// Takes the lock, spinning while anyone holds it.
    #[inline]
    pub fn lock(&self) -> SpinGuard<'_, T> {
        self.lock_as(ANY)
    }

    /// Takes the lock as `holder` (non-zero), spinning while anyone holds
    /// it.
    #[inline]
    pub fn lock_as(&self, holder: u8) -> SpinGuard<'_, T> {
        debug_assert_ne!(holder, FREE);
        while self
            .holder
            .compare_exchange_weak(FREE, holder, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            while self.holder.load(Ordering::Relaxed) != FREE {
                std::hint::spin_loop();
            }
        }
        SpinGuard { lock: self }
    }

    /// Takes the lock as `holder`, spinning while others hold it, but
    /// returns `None` at once while `never_wait_for` holds it.
    #[inline]
    pub fn lock_unless(&self, holder: u8, never_wait_for: u8) -> Option<SpinGuard<'_, T>> {
        debug_assert_ne!(holder, FREE);
        loop {
            match self.holder.compare_exchange_weak(
                FREE,
                holder,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(SpinGuard { lock: self }),
                Err(h) if h == never_wait_for => return None,
                Err(_) => {
                    while self.holder.load(Ordering::Relaxed) != FREE {
                        std::hint::spin_loop();
                    }
                }
            }
        }
    }

    /// The lock if it is free now; `None` instead of waiting.
    #[inline]
    pub fn try_lock(&self) -> Option<SpinGuard<'_, T>> {
        self.holder
            .compare_exchange(FREE, ANY, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| SpinGuard { lock: self })
    }

    /// The value, without locking: `&mut self` proves nobody holds it.
    pub fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }
}

pub struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    #[inline(always)]
    fn deref(&self) -> &T {
        // SAFETY: this guard holds the lock, so no `&mut` exists elsewhere.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: this guard holds the lock exclusively.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    #[inline(always)]
    fn drop(&mut self) {
        self.lock.holder.store(FREE, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn guards_exclude_each_other() {
        let l = Arc::new(SpinLock::new(0u64));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let l = l.clone();
                std::thread::spawn(move || {
                    for _ in 0..100_000 {
                        *l.lock() += 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*l.lock(), 400_000);
    }

    #[test]
    fn try_lock_fails_while_held() {
        let l = SpinLock::new(1);
        let g = l.lock();
        assert!(l.try_lock().is_none());
        drop(g);
        assert_eq!(*l.try_lock().unwrap(), 1);
    }

    /// A PMD (tag 2) never waits on the control thread (tag 3).
    #[test]
    fn lock_unless_does_not_wait_for_the_named_holder() {
        const PMD: u8 = 2;
        const CONTROL: u8 = 3;
        let l = SpinLock::new(());
        let c = l.lock_as(CONTROL);
        assert!(l.lock_unless(PMD, CONTROL).is_none());
        drop(c);
        let p = l.lock_unless(PMD, CONTROL).expect("free");
        assert!(l.try_lock().is_none());
        drop(p);
        assert!(l.try_lock().is_some());
    }
}
