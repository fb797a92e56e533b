//! How the poll loops wait: a sleep that a stop request cuts short, and
//! what `poll(2)` found. The vhost-user loop (`runner`) and the memif
//! loop (`memif`) both use them.

use nix::poll::{PollFd, PollFlags};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Sleeps for `d`, waking early when `stop` is set (checked every 10 ms).
pub(crate) fn sleep_unless(stop: &AtomicBool, d: Duration) {
    let end = Instant::now() + d;
    while !stop.load(Ordering::Relaxed) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether `poll` found `fd` readable.
pub(crate) fn readable(fd: &PollFd<'_>) -> bool {
    fd.revents().is_some_and(|r| r.contains(PollFlags::POLLIN))
}
