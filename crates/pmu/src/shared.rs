//! Publishing snapshots from the measured thread to readers.

use crate::{N_EVENTS, PmuSnapshot, Reading, Unsupported};
use std::sync::atomic::{AtomicU64, Ordering, fence};

/// The latest [`PmuSnapshot`] of one thread as atomics.
///
/// Thread safety: one writer (the measured thread) calls
/// [`publish`](Self::publish); any number of readers call
/// [`load`](Self::load) and always get one whole snapshot, never counters
/// of two different readings (a sequence lock: the writer makes `seq` odd
/// while it writes; a reader retries when `seq` was odd or changed).
/// Neither side blocks, allocates or makes a syscall.
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct SharedPmu {
    seq: AtomicU64,
    generation: AtomicU64,
    epoch_ns: AtomicU64,
    time_ns: AtomicU64,
    packets: AtomicU64,
    user_only: AtomicU64,
    values: [AtomicU64; N_EVENTS],
    /// [`encode`] of each reading's state; 0 (the default) = not yet read.
    states: [AtomicU64; N_EVENTS],
}

const NOT_YET_READ: u64 = 0;
const VALUE: u64 = 1;
const DISABLED: u64 = 2;
const NOT_SCHEDULED: u64 = 3;
const OPEN: u64 = 4;
const READ: u64 = 5;

fn encode(r: Reading) -> (u64, u64) {
    match r {
        Reading::Value(v) => (VALUE, v),
        Reading::Unsupported(u) => (
            match u {
                Unsupported::NotYetRead => NOT_YET_READ,
                Unsupported::Disabled => DISABLED,
                Unsupported::NotScheduled => NOT_SCHEDULED,
                Unsupported::Open(e) => OPEN | (e as u32 as u64) << 8,
                Unsupported::Read(e) => READ | (e as u32 as u64) << 8,
            },
            0,
        ),
    }
}

fn decode(state: u64, value: u64) -> Reading {
    let errno = (state >> 8) as u32 as i32;
    Reading::Unsupported(match state & 0xff {
        VALUE => return Reading::Value(value),
        DISABLED => Unsupported::Disabled,
        NOT_SCHEDULED => Unsupported::NotScheduled,
        OPEN => Unsupported::Open(errno),
        READ => Unsupported::Read(errno),
        _ => Unsupported::NotYetRead,
    })
}

impl SharedPmu {
    /// Stores `s` (single writer only).
    pub fn publish(&self, s: &PmuSnapshot) {
        let seq = self.seq.load(Ordering::Relaxed);
        self.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        // Orders the odd `seq` before the data stores (pairs with the
        // reader's acquire fence).
        fence(Ordering::Release);
        self.generation.store(s.generation, Ordering::Relaxed);
        self.epoch_ns.store(s.epoch_ns, Ordering::Relaxed);
        self.time_ns.store(s.time_ns, Ordering::Relaxed);
        self.packets.store(s.packets, Ordering::Relaxed);
        self.user_only.store(s.user_only as u64, Ordering::Relaxed);
        for ((r, v), st) in s.readings.iter().zip(&self.values).zip(&self.states) {
            let (state, value) = encode(*r);
            v.store(value, Ordering::Relaxed);
            st.store(state, Ordering::Relaxed);
        }
        self.seq.store(seq.wrapping_add(2), Ordering::Release);
    }

    /// The latest published snapshot (the default before the first).
    pub fn load(&self) -> PmuSnapshot {
        loop {
            let s1 = self.seq.load(Ordering::Acquire);
            if s1 & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let mut snap = PmuSnapshot {
                generation: self.generation.load(Ordering::Relaxed),
                epoch_ns: self.epoch_ns.load(Ordering::Relaxed),
                time_ns: self.time_ns.load(Ordering::Relaxed),
                packets: self.packets.load(Ordering::Relaxed),
                user_only: self.user_only.load(Ordering::Relaxed) as u16,
                ..PmuSnapshot::default()
            };
            for ((r, v), st) in snap.readings.iter_mut().zip(&self.values).zip(&self.states) {
                *r = decode(st.load(Ordering::Relaxed), v.load(Ordering::Relaxed));
            }
            fence(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) == s1 {
                return snap;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Event;
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;

    #[test]
    fn every_reading_round_trips() {
        let cell = SharedPmu::default();
        assert_eq!(cell.load(), PmuSnapshot::default());
        let mut s = PmuSnapshot {
            generation: 7,
            epoch_ns: 1,
            time_ns: 2,
            packets: 3,
            user_only: 0b101,
            ..Default::default()
        };
        let all = [
            Reading::Value(u64::MAX),
            Reading::Value(0),
            Reading::Unsupported(Unsupported::NotYetRead),
            Reading::Unsupported(Unsupported::Disabled),
            Reading::Unsupported(Unsupported::NotScheduled),
            Reading::Unsupported(Unsupported::Open(libc::ENOENT)),
            Reading::Unsupported(Unsupported::Open(-1)),
            Reading::Unsupported(Unsupported::Read(libc::EIO)),
            Reading::Value(12345),
        ];
        s.readings = all;
        cell.publish(&s);
        assert_eq!(cell.load(), s);
    }

    #[test]
    fn readers_never_see_a_torn_snapshot() {
        let cell = Arc::new(SharedPmu::default());
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (cell, stop) = (cell.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut n = 1u64;
                while !stop.load(Ordering::Relaxed) {
                    // Every field of snapshot n holds n.
                    let s = PmuSnapshot {
                        generation: n,
                        epoch_ns: n,
                        time_ns: n,
                        packets: n,
                        user_only: 0,
                        readings: [Reading::Value(n); N_EVENTS],
                    };
                    cell.publish(&s);
                    n += 1;
                }
                n
            })
        };
        let mut seen = 0;
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(300);
        while std::time::Instant::now() < deadline {
            let s = cell.load();
            let n = s.generation;
            assert_eq!((s.epoch_ns, s.time_ns, s.packets), (n, n, n));
            if n > 0 {
                assert!(s.readings.iter().all(|r| *r == Reading::Value(n)), "{s:?}");
                assert_eq!(s.get(Event::PageFaults), Reading::Value(n));
                seen += 1;
            }
        }
        stop.store(true, Ordering::Relaxed);
        let written = writer.join().unwrap();
        assert!(written > 1 && seen > 0, "written {written}, seen {seen}");
    }
}
