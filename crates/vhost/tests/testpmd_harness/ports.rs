//! The ports the datapath runs around testpmd: frame generators and
//! checkers, driven by its PMD thread; the test reads what they saw
//! through shared atomics and mutexes.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nfv_mem::{Batch, PoolCache};
use nfv_ports::{Port, RxQueue, TxQueue};

use crate::common::frame;

/// A test port: one rx queue made by `rxq`, tx queues made by `txq`.
/// Shared with the datapath threads: immutable, its closures `Send + Sync`.
struct TestPort {
    name: &'static str,
    type_name: &'static str,
    rxq: Box<dyn Fn() -> Box<dyn RxQueue> + Send + Sync>,
    txq: Box<dyn Fn() -> Box<dyn TxQueue> + Send + Sync>,
}

impl Port for TestPort {
    fn name(&self) -> &str {
        self.name
    }
    fn type_name(&self) -> &'static str {
        self.type_name
    }
    fn n_rxq(&self) -> usize {
        1
    }
    fn open_rxq(&self, _q: usize) -> Box<dyn RxQueue> {
        (self.rxq)()
    }
    fn open_txq(&self, _q: usize) -> Box<dyn TxQueue> {
        (self.txq)()
    }
}

/// The port named `name` of type `type_name` whose queues `rxq` and `txq`
/// make: the one `Port` impl of every test port here.
fn test_port(
    name: &'static str,
    type_name: &'static str,
    rxq: impl Fn() -> Box<dyn RxQueue> + Send + Sync + 'static,
    txq: impl Fn() -> Box<dyn TxQueue> + Send + Sync + 'static,
) -> Arc<dyn Port> {
    Arc::new(TestPort {
        name,
        type_name,
        rxq: Box::new(rxq),
        txq: Box::new(txq),
    })
}

/// Shows every frame of `batch` to `f`, frees them all and returns how
/// many there were: the tx side of every test port here.
fn consume(batch: &mut Batch, pool: &mut PoolCache, mut f: impl FnMut(&[u8])) -> usize {
    let n = batch.len();
    for p in batch.iter() {
        f(p.data());
    }
    pool.free_batch(batch);
    n
}

/// The probe frame sent until testpmd forwards (its RX ring is filled
/// only when its port starts, a little after the vrings are set up).
pub fn probe() -> Vec<u8> {
    frame(64, u32::MAX)
}

pub const IDLE: u8 = 0;
pub const PROBING: u8 = 1;
pub const RUNNING: u8 = 2;

/// Frames of the RUNNING phase in flight at most (sent, not yet back in
/// `got`): half of testpmd's 256-entry RX ring, so a testpmd that is not
/// scheduled for a while (a busy machine) makes the sender wait instead
/// of overflowing its ring.
const WINDOW: usize = 128;

/// How long a full window waits for frames to come back before sending
/// on regardless (frames the switch dropped, counted as `tx_full`, never
/// come back).
const WINDOW_WAIT: Duration = Duration::from_millis(500);

/// Sends probes every 10 ms while PROBING, then `frames`, paced and at
/// most [`WINDOW`] ahead of what came back in `got`, while RUNNING.
pub fn frames_port(
    frames: Arc<Vec<Vec<u8>>>,
    state: Arc<AtomicU8>,
    got: Arc<Mutex<Vec<Vec<u8>>>>,
) -> Arc<dyn Port> {
    let (next, probes) = (Arc::<AtomicUsize>::default(), Arc::<AtomicUsize>::default());
    test_port(
        "frames",
        "test-frames",
        move || {
            Box::new(FramesRx {
                frames: frames.clone(),
                next: next.clone(),
                state: state.clone(),
                probes: probes.clone(),
                got: got.clone(),
                back: (0, Instant::now()),
                last: Instant::now(),
            })
        },
        || Box::new(CheckTx(Arc::default())),
    )
}

struct FramesRx {
    frames: Arc<Vec<Vec<u8>>>,
    next: Arc<AtomicUsize>,
    state: Arc<AtomicU8>,
    probes: Arc<AtomicUsize>,
    got: Arc<Mutex<Vec<Vec<u8>>>>,
    /// Frames back in `got` when last looked, and since when.
    back: (usize, Instant),
    last: Instant,
}

impl FramesRx {
    /// True while [`WINDOW`] frames are out and some came back within
    /// [`WINDOW_WAIT`].
    fn window_full(&mut self) -> bool {
        let back = self.got.lock().unwrap().len();
        if back != self.back.0 {
            self.back = (back, Instant::now());
        }
        let out = self.next.load(Relaxed).saturating_sub(back);
        out >= WINDOW && self.back.1.elapsed() < WINDOW_WAIT
    }
}

impl RxQueue for FramesRx {
    fn rx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        let state = self.state.load(Acquire);
        if state == PROBING && self.last.elapsed() >= Duration::from_millis(10) {
            self.last = Instant::now();
            let f = probe();
            let Some(mut p) = pool.alloc() else { return 0 };
            p.room_mut()[..f.len()].copy_from_slice(&f);
            let _ = p.set_len(f.len());
            batch.push(p);
            self.probes.fetch_add(1, Relaxed);
            return 1;
        }
        // 16 frames per ms (16 kpps): a 256-entry ring then absorbs 16 ms
        // of testpmd being descheduled on this small machine.
        if state != RUNNING || self.last.elapsed() < Duration::from_millis(1) || self.window_full()
        {
            return 0;
        }
        self.last = Instant::now();
        let mut n = 0;
        while n < 16 {
            let i = self.next.load(Relaxed);
            let Some(f) = self.frames.get(i) else { break };
            let Some(mut p) = pool.alloc() else { break };
            p.room_mut()[..f.len()].copy_from_slice(f);
            let _ = p.set_len(f.len());
            batch.push(p);
            self.next.store(i + 1, Relaxed);
            n += 1;
        }
        n
    }
}

/// Records every frame sent to it in `got`.
pub fn check_port(got: Arc<Mutex<Vec<Vec<u8>>>>) -> Arc<dyn Port> {
    test_port("check", "test-check", nfv_ports::sink::no_rx, move || {
        Box::new(CheckTx(got.clone()))
    })
}

struct CheckTx(Arc<Mutex<Vec<Vec<u8>>>>);

impl TxQueue for CheckTx {
    fn tx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        let mut got = self.0.lock().unwrap();
        consume(batch, pool, |d| got.push(d.to_vec()))
    }
}

/// Frame length of sequence number `seq`: 60..=1518 bytes, varying.
pub fn seq_len(seq: u32) -> usize {
    60 + (seq as usize).wrapping_mul(97) % 1459
}

/// While `on`, sends `frame(seq_len(seq), seq)` with `seq` counting up
/// from `next`, 4 frames per ms.
pub fn seq_gen(name: &'static str, on: Arc<AtomicBool>, next: Arc<AtomicU32>) -> Arc<dyn Port> {
    test_port(
        name,
        "test-seqgen",
        move || {
            Box::new(SeqGenRx {
                on: on.clone(),
                next: next.clone(),
                last: Instant::now(),
            })
        },
        || Box::new(Discard),
    )
}

struct SeqGenRx {
    on: Arc<AtomicBool>,
    next: Arc<AtomicU32>,
    last: Instant,
}

impl RxQueue for SeqGenRx {
    fn rx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        if !self.on.load(Acquire) || self.last.elapsed() < Duration::from_millis(1) {
            return 0;
        }
        self.last = Instant::now();
        let mut n = 0;
        while n < 4 {
            let Some(mut p) = pool.alloc() else { break };
            let seq = self.next.load(Relaxed);
            let f = frame(seq_len(seq), seq);
            p.room_mut()[..f.len()].copy_from_slice(&f);
            let _ = p.set_len(f.len());
            batch.push(p);
            self.next.store(seq + 1, Relaxed);
            n += 1;
        }
        n
    }
}

/// Frees what it is sent.
struct Discard;

impl TxQueue for Discard {
    fn tx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        consume(batch, pool, |_| {})
    }
}

/// What a [`seq_check`] port saw.
#[derive(Default)]
pub struct SeqStats {
    /// Byte-correct frames in increasing sequence order.
    good: AtomicU64,
    /// Corrupt, duplicated or reordered frames.
    bad: AtomicU64,
    /// Highest good sequence number + 1 (0: none yet).
    pub next: AtomicU64,
    first_error: Mutex<Option<String>>,
}

impl SeqStats {
    fn check(&self, d: &[u8]) {
        let err = if d.len() < 18 {
            Some(format!("a {}-byte frame", d.len()))
        } else {
            let seq = u32::from_be_bytes(d[14..18].try_into().unwrap());
            let want = frame(seq_len(seq), seq);
            let next = self.next.load(Relaxed);
            if d != want.as_slice() {
                let at = d.iter().zip(&want).position(|(a, b)| a != b);
                Some(format!(
                    "frame {seq}: {} B (sent {} B), first difference at byte {at:?}",
                    d.len(),
                    want.len()
                ))
            } else if (seq as u64) < next {
                Some(format!(
                    "frame {seq} after frame {}: duplicated or reordered",
                    next - 1
                ))
            } else {
                self.next.store(seq as u64 + 1, Relaxed);
                None
            }
        };
        match err {
            None => {
                self.good.fetch_add(1, Relaxed);
            }
            Some(e) => {
                self.bad.fetch_add(1, Relaxed);
                self.first_error
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get_or_insert(e);
            }
        }
    }

    pub fn good(&self) -> u64 {
        self.good.load(Relaxed)
    }

    /// Panics if anything bad arrived.
    pub fn assert_clean(&self, what: &str) {
        let bad = self.bad.load(Relaxed);
        let first = self
            .first_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        assert_eq!(
            bad,
            0,
            "{what}: {bad} bad frames (of {} good); first: {first:?}",
            self.good()
        );
    }
}

/// Checks every frame sent to it against [`seq_len`]/[`frame`], counting
/// into `stats`.
pub fn seq_check(name: &'static str, stats: Arc<SeqStats>) -> Arc<dyn Port> {
    test_port(name, "test-seqcheck", nfv_ports::sink::no_rx, move || {
        Box::new(SeqCheckTx(stats.clone()))
    })
}

struct SeqCheckTx(Arc<SeqStats>);

impl TxQueue for SeqCheckTx {
    fn tx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        consume(batch, pool, |d| self.0.check(d))
    }
}
