//! Real counters of this thread: whatever the machine offers, each counter
//! reads a value or says why not; the software ones always count unless
//! `perf_event_open` is unavailable altogether (then SKIPPED).

use nfv_pmu::{CounterSource, Event, PerfSource, PmuSampler, Reading, Unsupported};
use std::time::Duration;

/// This thread's CPU time (not wall time: on a crowded machine a thread
/// may get a small share of the wall clock).
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a pointer to a timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Spins until this thread has run for `d` of CPU time.
fn busy(d: Duration) -> u64 {
    let end = thread_cpu() + d;
    let mut x = 1u64;
    let mut v = vec![0u64; 1 << 16];
    while thread_cpu() < end {
        for i in 0..v.len() {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let j = (x >> 40) as usize % v.len();
            v[j] = v[j].wrapping_add(x ^ i as u64);
        }
    }
    v.iter().fold(x, |a, b| a ^ b)
}

#[test]
fn real_counters_read_or_say_why_not() {
    let std::thread::Result::Ok(()) = std::thread::spawn(|| {
        let src = PerfSource::open();
        let failures = src.failures();
        if let Some((_, u)) = failures.iter().find(|(e, _)| *e == Event::TaskClock) {
            nfv_testutil::skip(
                "real_counters_read_or_say_why_not",
                &format!(
                    "perf_event_open unusable here: {}",
                    u.reason(Event::TaskClock)
                ),
            );
            return;
        }
        let mut sampler = PmuSampler::new(Some(Box::new(src)), 0);
        let a = sampler.sample(0, 0);
        std::hint::black_box(busy(Duration::from_millis(200)));
        let b = sampler.sample(200_000_000, 1_000);
        let d = b.since(&a);
        for e in Event::ALL {
            match d.get(e) {
                Reading::Value(v) => eprintln!("{:<18} {v}", e.name()),
                Reading::Unsupported(u) => {
                    let why = u.reason(e);
                    eprintln!("{:<18} unsupported: {why}", e.name());
                    assert!(!why.is_empty());
                    assert!(
                        e.is_hardware(),
                        "software counter {} unsupported: {why}",
                        e.name()
                    );
                    assert!(matches!(
                        u,
                        Unsupported::Open(_) | Unsupported::NotScheduled
                    ));
                }
            }
        }
        // ~200 ms of CPU time in the task clock.
        let clock = d.get(Event::TaskClock).value().unwrap();
        assert!(clock > 50_000_000, "task-clock {clock} ns");
        // A busy loop runs instructions: where the PMU counts, IPC is sane.
        let m = d.derived();
        match (d.get(Event::Instructions), m.ipc.value()) {
            (Reading::Value(i), Some(ipc)) => {
                assert!(i > 1_000_000, "instructions {i}");
                assert!(ipc > 0.05 && ipc < 10.0, "ipc {ipc}");
            }
            _ => eprintln!("IPC unavailable: {}", m.ipc.reason().unwrap_or("")),
        }
        assert!(m.context_switches_per_s.value().is_some());
        assert_eq!(
            m.llc_misses_per_pkt.value().is_some(),
            d.get(Event::LlcReadMisses).value().is_some()
        );
    })
    .join() else {
        panic!("counter thread panicked");
    };
}

#[test]
fn counters_belong_to_the_opening_thread() {
    // Opened here, busy work elsewhere: this thread's task clock barely moves.
    let mut src = PerfSource::open();
    if src.failures().iter().any(|(e, _)| *e == Event::TaskClock) {
        nfv_testutil::skip(
            "counters_belong_to_the_opening_thread",
            "perf_event_open unusable here",
        );
        return;
    }
    let before = src.read()[Event::TaskClock.index()].value().unwrap();
    std::thread::spawn(|| std::hint::black_box(busy(Duration::from_millis(200))))
        .join()
        .unwrap();
    let after = src.read()[Event::TaskClock.index()].value().unwrap();
    assert!(
        after - before < 100_000_000,
        "task clock moved {} ns while another thread worked",
        after - before
    );
}
