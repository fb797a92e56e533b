//! A set of streams as one queue sees them: find the stamp in each frame,
//! hand it to that stream's [`StreamReceiver`], count what is not stamped.
//!
//! The writer ([`TrafficReceiver`]) belongs to one thread; readers take
//! [`ReceiverShared::snapshot`] at any time without locks. A stream is
//! published to readers through a `OnceLock` slot the first time it is
//! seen (the only allocation, once per stream); at most [`MAX_STREAMS`]
//! streams are tracked per queue, packets of further streams are counted
//! as `untracked`.
//!
//! Thread safety: `ReceiverShared` is `Sync` (single writer, any readers).

use crate::latency::bump;
use crate::stamp::Stamp;
use crate::stream::{Arrival, StreamReceiver, StreamShared, StreamSnapshot};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};

/// Streams tracked per queue.
pub const MAX_STREAMS: usize = 64;

/// What readers see of one queue's streams.
pub struct ReceiverShared {
    slots: Box<[OnceLock<Arc<StreamShared>>]>,
    unstamped: AtomicU64,
    untracked: AtomicU64,
}

impl Default for ReceiverShared {
    fn default() -> Self {
        ReceiverShared {
            slots: (0..MAX_STREAMS).map(|_| OnceLock::new()).collect(),
            unstamped: AtomicU64::new(0),
            untracked: AtomicU64::new(0),
        }
    }
}

impl ReceiverShared {
    pub fn snapshot(&self) -> ReceiverSnapshot {
        let mut streams: Vec<StreamSnapshot> = self
            .slots
            .iter()
            .map_while(|s| s.get())
            .map(|s| s.snapshot())
            .collect();
        streams.sort_by_key(|s| s.stream);
        ReceiverSnapshot {
            streams,
            unstamped: self.unstamped.load(Relaxed),
            untracked: self.untracked.load(Relaxed),
        }
    }
}

/// Counters of a receiver (one queue, or several merged).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReceiverSnapshot {
    /// Sorted by stream id.
    pub streams: Vec<StreamSnapshot>,
    /// Frames without a valid stamp.
    pub unstamped: u64,
    /// Stamped frames of streams beyond [`MAX_STREAMS`].
    pub untracked: u64,
}

impl ReceiverSnapshot {
    pub fn stream(&self, id: u32) -> Option<&StreamSnapshot> {
        self.streams
            .binary_search_by_key(&id, |s| s.stream)
            .ok()
            .map(|i| &self.streams[i])
    }

    /// Merges another queue's view (same stream ids add up).
    pub fn merge(&mut self, o: &ReceiverSnapshot) {
        self.unstamped += o.unstamped;
        self.untracked += o.untracked;
        for s in &o.streams {
            match self.streams.binary_search_by_key(&s.stream, |x| x.stream) {
                Ok(i) => self.streams[i].merge(s),
                Err(i) => self.streams.insert(i, s.clone()),
            }
        }
    }

    /// What happened since `base` (streams new since then start from 0).
    pub fn since(&self, base: &ReceiverSnapshot) -> ReceiverSnapshot {
        ReceiverSnapshot {
            streams: self
                .streams
                .iter()
                .map(|s| match base.stream(s.stream) {
                    Some(b) => s.since(b),
                    None => s.clone(),
                })
                .collect(),
            unstamped: self.unstamped.saturating_sub(base.unstamped),
            untracked: self.untracked.saturating_sub(base.untracked),
        }
    }
}

/// The writer side: owned by the thread that receives the packets.
pub struct TrafficReceiver {
    shared: Arc<ReceiverShared>,
    streams: Vec<StreamReceiver>,
    last: usize,
    hz: u64,
}

impl TrafficReceiver {
    /// Timestamps tick at `hz` (the TSC frequency, or a test clock's).
    pub fn new(hz: u64) -> TrafficReceiver {
        TrafficReceiver {
            shared: Arc::new(ReceiverShared::default()),
            streams: Vec::with_capacity(MAX_STREAMS),
            last: 0,
            hz,
        }
    }

    pub fn shared(&self) -> &Arc<ReceiverShared> {
        &self.shared
    }

    /// Accounts one Ethernet frame received at `rx_tsc`; `None` if it
    /// carries no stamp or its stream is untracked.
    #[inline]
    pub fn receive(&mut self, frame: &[u8], rx_tsc: u64) -> Option<Arrival> {
        match Stamp::from_frame(frame) {
            Ok(s) => self.record(&s, rx_tsc, frame.len()),
            Err(_) => {
                bump(&self.shared.unstamped, 1);
                None
            }
        }
    }

    /// Accounts one stamp (of a frame of `len` bytes).
    #[inline]
    pub fn record(&mut self, s: &Stamp, rx_tsc: u64, len: usize) -> Option<Arrival> {
        let i = match self.streams.get(self.last) {
            Some(r) if r.stream() == s.stream => self.last,
            _ => match self.streams.iter().position(|r| r.stream() == s.stream) {
                Some(i) => i,
                None => self.add(s.stream)?,
            },
        };
        self.last = i;
        Some(self.streams[i].record(s.seq, s.tsc, rx_tsc, len))
    }

    #[cold]
    fn add(&mut self, stream: u32) -> Option<usize> {
        let i = self.streams.len();
        if i == MAX_STREAMS {
            bump(&self.shared.untracked, 1);
            return None;
        }
        let r = StreamReceiver::new(stream, self.hz);
        // Only this thread sets slots, in order, so slot `i` is empty.
        let _ = self.shared.slots[i].set(r.shared().clone());
        self.streams.push(r);
        Some(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stamp::{STAMP_LEN, STAMP_OFFSET};

    fn frame(stream: u32, seq: u64, tsc: u64) -> Vec<u8> {
        let mut f = vec![0u8; 64];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[23] = 17;
        let b: &mut [u8; STAMP_LEN] = f[STAMP_OFFSET..].first_chunk_mut().unwrap();
        Stamp { stream, seq, tsc }.emit(b);
        f
    }

    #[test]
    fn streams_are_kept_apart_and_unstamped_frames_counted() {
        let mut r = TrafficReceiver::new(1_000_000_000);
        for seq in 0..100 {
            r.receive(&frame(0x100, seq, 10), 20);
            if seq % 2 == 0 {
                r.receive(&frame(0x200, seq / 2, 10), 30);
            }
        }
        r.receive(&[0u8; 64], 0);
        r.receive(&[0u8; 10], 0);
        let s = r.shared().snapshot();
        assert_eq!(s.unstamped, 2);
        assert_eq!(s.streams.len(), 2);
        let a = s.stream(0x100).unwrap();
        let b = s.stream(0x200).unwrap();
        assert_eq!((a.received, a.lost(), a.reordered), (100, 0, 0));
        assert_eq!((b.received, b.lost(), b.reordered), (50, 0, 0));
        assert_eq!(a.latency().unwrap().p50_ns, 10);
        assert_eq!(b.latency().unwrap().p50_ns, 20);
    }

    #[test]
    fn too_many_streams_are_counted_not_tracked() {
        let mut r = TrafficReceiver::new(1_000_000_000);
        for id in 0..MAX_STREAMS as u32 + 3 {
            r.receive(&frame(id, 0, 0), 0);
        }
        let s = r.shared().snapshot();
        assert_eq!((s.streams.len(), s.untracked), (MAX_STREAMS, 3));
    }

    #[test]
    fn merge_and_since_across_queues() {
        let mut q0 = TrafficReceiver::new(1_000_000_000);
        let mut q1 = TrafficReceiver::new(1_000_000_000);
        for seq in 0..10 {
            q0.receive(&frame(1, seq, 0), 5);
            q1.receive(&frame(2, seq, 0), 5);
        }
        let mut base = q0.shared().snapshot();
        base.merge(&q1.shared().snapshot());
        for seq in 10..15 {
            q1.receive(&frame(2, seq, 0), 5);
            q1.receive(&frame(3, seq, 0), 5);
        }
        let mut now = q0.shared().snapshot();
        now.merge(&q1.shared().snapshot());
        let d = now.since(&base);
        let got: Vec<(u32, u64, u64)> = d
            .streams
            .iter()
            .map(|s| (s.stream, s.received, s.lost()))
            .collect();
        // Stream 3 started at sequence 10: 0..10 count as lost.
        assert_eq!(got, [(1, 0, 0), (2, 5, 0), (3, 5, 10)]);
    }
}
