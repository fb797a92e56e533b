//! A sender and a receiver joined by an impairing link (STYLE layer 2):
//! stamped frames go through drops, reordering, duplication and delay,
//! and the receiver's counters must come out exactly as the impairment
//! dictates.

use nfv_traffic::TrafficReceiver;
use nfv_traffic::stamp::{STAMP_LEN, STAMP_OFFSET, Stamp, stream_id};

/// 1 GHz test clock: cycles are nanoseconds, latencies are exact.
const HZ: u64 = 1_000_000_000;
/// The sender stamps one frame every 100 cycles.
const PERIOD: u64 = 100;

fn frame(stream: u32, seq: u64, tsc: u64) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[23] = 17;
    let b: &mut [u8; STAMP_LEN] = f[STAMP_OFFSET..].first_chunk_mut().unwrap();
    Stamp { stream, seq, tsc }.emit(b);
    f
}

/// What the link does to the sequence of frames `0..n`: returns
/// (sequence, extra delay in cycles) in arrival order.
type Impairment = fn(u64) -> Vec<(u64, u64)>;

fn clean(n: u64) -> Vec<(u64, u64)> {
    (0..n).map(|s| (s, 0)).collect()
}
fn drop_every_10th(n: u64) -> Vec<(u64, u64)> {
    (0..n).filter(|s| s % 10 != 9).map(|s| (s, 0)).collect()
}
fn swap_pairs(n: u64) -> Vec<(u64, u64)> {
    (0..n).map(|s| (s ^ 1, 0)).collect()
}
fn duplicate_every_50th(n: u64) -> Vec<(u64, u64)> {
    (0..n)
        .flat_map(|s| {
            let copies = if s % 50 == 0 { 2 } else { 1 };
            std::iter::repeat_n((s, 0), copies)
        })
        .collect()
}
/// Every 100th frame is held back 5 frames (and arrives 500 cycles late).
fn hold_back_every_100th(n: u64) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    let mut held = Vec::new();
    for s in 0..n {
        if s % 100 == 50 {
            held.push((s, 5));
        } else {
            out.push((s, 0));
        }
        held.retain(|&(h, k)| {
            if s == h + k {
                out.push((h, k * PERIOD));
                false
            } else {
                true
            }
        });
    }
    out
}
fn lose_the_tail(n: u64) -> Vec<(u64, u64)> {
    (0..n - 7).map(|s| (s, 0)).collect()
}
fn all_of_it(n: u64) -> Vec<(u64, u64)> {
    // Drop every 10th, then swap what is left pairwise, then duplicate
    // every 50th arrival.
    let kept: Vec<u64> = (0..n).filter(|s| s % 10 != 9).collect();
    let mut swapped = kept.clone();
    for pair in swapped.chunks_mut(2) {
        pair.reverse();
    }
    swapped
        .iter()
        .enumerate()
        .flat_map(|(i, &s)| std::iter::repeat_n((s, 0), if i % 50 == 0 { 2 } else { 1 }))
        .collect()
}

struct Expect {
    received: u64,
    lost: u64,
    reordered: u64,
    duplicates: u64,
    /// Loss against the sender's count.
    loss_given_sent: u64,
}

#[test]
fn receiver_counts_exactly_what_the_link_did() {
    const N: u64 = 10_000;
    // Base one-way delay D of the link, in cycles (= ns at 1 GHz).
    const D: u64 = 1_500;
    let cases: Vec<(&str, Impairment, Expect)> = vec![
        (
            "clean",
            clean,
            Expect {
                received: N,
                lost: 0,
                reordered: 0,
                duplicates: 0,
                loss_given_sent: 0,
            },
        ),
        // Exactly 10 % lost; the last (9999) is after the newest arrival,
        // so only the sender's count sees it.
        (
            "drop every 10th",
            drop_every_10th,
            Expect {
                received: 9_000,
                lost: 999,
                reordered: 0,
                duplicates: 0,
                loss_given_sent: 1_000,
            },
        ),
        // 0,1 → 1,0: every pair's first sequence arrives after the second.
        (
            "swap pairs",
            swap_pairs,
            Expect {
                received: N,
                lost: 0,
                reordered: N / 2,
                duplicates: 0,
                loss_given_sent: 0,
            },
        ),
        (
            "duplicate every 50th",
            duplicate_every_50th,
            Expect {
                received: N + 200,
                lost: 0,
                reordered: 0,
                duplicates: 200,
                loss_given_sent: 0,
            },
        ),
        (
            "hold back every 100th",
            hold_back_every_100th,
            Expect {
                received: N,
                lost: 0,
                reordered: 100,
                duplicates: 0,
                loss_given_sent: 0,
            },
        ),
        // The sequence cannot see a lost tail; the sender's count can.
        (
            "lose the tail",
            lose_the_tail,
            Expect {
                received: N - 7,
                lost: 0,
                reordered: 0,
                duplicates: 0,
                loss_given_sent: 7,
            },
        ),
        (
            "drop, swap and duplicate",
            all_of_it,
            Expect {
                received: 9_000 + 180,
                lost: 999,
                reordered: 4_500,
                duplicates: 180,
                loss_given_sent: 1_000,
            },
        ),
    ];
    for (name, impair, want) in cases {
        let mut rx = TrafficReceiver::new(HZ);
        let stream = stream_id(1, 0);
        for (seq, extra) in impair(N) {
            let tx = 1_000_000 + seq * PERIOD;
            rx.receive(&frame(stream, seq, tx), tx + D + extra);
        }
        let snap = rx.shared().snapshot();
        assert_eq!(snap.unstamped, 0, "{name}");
        let s = snap.stream(stream).expect(name);
        assert_eq!(
            (
                s.received,
                s.lost(),
                s.reordered,
                s.duplicates,
                s.loss_given(N)
            ),
            (
                want.received,
                want.lost,
                want.reordered,
                want.duplicates,
                want.loss_given_sent
            ),
            "{name}: (received, lost, reordered, duplicates, loss given {N} sent)"
        );
        // Every non-duplicate packet took D, except the held-back ones.
        let l = s.latency().expect(name);
        assert_eq!(l.samples, s.received - s.duplicates, "{name}");
        assert_eq!((l.min_ns, l.p50_ns, l.p99_ns), (D, D, D), "{name}");
        if name.starts_with("hold back") {
            // 100 of 10 000 (1 %) came 500 ns later: p99.9 and max see them.
            assert_eq!((l.p999_ns, l.max_ns), (D + 500, D + 500), "{name}");
            let mean = D as f64 + 100.0 * 500.0 / N as f64;
            assert!(
                (l.mean_ns - mean).abs() < 1e-9,
                "{name}: mean {}",
                l.mean_ns
            );
        } else {
            assert_eq!((l.p999_ns, l.max_ns, l.mean_ns), (D, D, D as f64), "{name}");
        }
    }
}

#[test]
fn latency_percentiles_equal_the_injected_delay_within_histogram_precision() {
    // Delays above 2048 ns fall in buckets 1/1024 of their value wide.
    for hz in [1_000_000_000u64, 2_400_000_000, 3_000_000_000] {
        for delay_ns in [700u64, 25_000, 1_000_000, 40_000_000] {
            let cycles = delay_ns * hz / 1_000_000_000;
            let mut rx = TrafficReceiver::new(hz);
            for seq in 0..1000 {
                let tx = seq * 10_000;
                rx.receive(&frame(9, seq, tx), tx + cycles);
            }
            let l = rx.shared().snapshot().streams[0].latency().unwrap();
            let tol = delay_ns / 1024 + 1;
            for (what, v) in [
                ("min", l.min_ns),
                ("p50", l.p50_ns),
                ("p99", l.p99_ns),
                ("p99.9", l.p999_ns),
                ("max", l.max_ns),
            ] {
                assert!(
                    v.abs_diff(delay_ns) <= tol,
                    "{hz} Hz, {delay_ns} ns: {what} = {v}"
                );
            }
            assert!(
                (l.mean_ns - delay_ns as f64).abs() <= 1.0,
                "{hz} Hz: mean {}",
                l.mean_ns
            );
        }
    }
}
