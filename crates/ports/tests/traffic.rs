//! Generator → impairing link → receiver, port against port (STYLE layer
//! 2), on fake clocks: IMIX proportions, pacing over a clock window,
//! run control, and loss/reorder/duplicate/latency accounting that must
//! come out exactly as the injected impairment dictates.

use nfv_mem::{Batch, HugepageMode, MemoryConfig, Packet, PacketPool, PoolCache};
use nfv_ports::config::GeneratorConfig;
use nfv_ports::generator::GeneratorPort;
use nfv_ports::receiver::ReceiverPort;
use nfv_ports::{Clock, Port, RxQueue};
use nfv_traffic::stamp::{Stamp, stream_id};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Test clocks tick at 1 GHz: cycles are nanoseconds.
const HZ: u64 = 1_000_000_000;

fn pool(name: &str) -> Arc<PacketPool> {
    PacketPool::new(
        name,
        &MemoryConfig {
            frame_size: 2048,
            frames: 32768,
            hugepages: HugepageMode::Never,
        },
    )
    .expect("packet pool")
}

/// Pulls up to `max` packets from `rxq` (stops when it has nothing more).
fn pull(rxq: &mut dyn RxQueue, cache: &mut PoolCache, max: usize) -> Vec<Packet> {
    let mut out = Vec::new();
    loop {
        let mut b = Batch::new();
        let n = rxq.rx_burst(&mut b, cache);
        out.extend(b.drain(..));
        if n == 0 || out.len() >= max {
            return out;
        }
    }
}

#[test]
fn imix_frames_come_in_the_7_4_1_mix_and_are_valid_udp() {
    static NOW: AtomicU64 = AtomicU64::new(5);
    let clock = Clock {
        now: || NOW.load(Relaxed),
        hz: HZ,
    };
    let cfg = GeneratorConfig {
        imix: true,
        stamp: true,
        flows: 3,
        count: Some(1200),
        ..Default::default()
    };
    let port = GeneratorPort::new("g", 7, 1, cfg).with_clock(clock);
    let pool = pool("imix");
    let mut cache = pool.cache();
    let pkts = pull(&mut *port.open_rxq(0), &mut cache, usize::MAX);
    assert_eq!(pkts.len(), 1200);
    let sizes: Vec<usize> = pkts.iter().map(|p| p.len()).collect();
    for w in sizes.windows(12) {
        let n = |s| w.iter().filter(|&&x| x == s).count();
        assert_eq!((n(64), n(594), n(1518)), (7, 4, 1), "{w:?}");
    }
    for (i, p) in pkts.iter().enumerate() {
        let s = etherparse::SlicedPacket::from_ethernet(p.data()).expect("parses");
        let Some(etherparse::NetSlice::Ipv4(ip)) = s.net else {
            panic!("frame {i} not ipv4")
        };
        let h = ip.header().to_header();
        assert_eq!(h.header_checksum, h.calc_header_checksum(), "frame {i}");
        assert_eq!(usize::from(h.total_len), p.len() - 14, "frame {i}");
        let stamp = Stamp::from_frame(p.data()).expect("stamped");
        assert_eq!(
            (stamp.stream, stamp.seq, stamp.tsc),
            (stream_id(7, 0), i as u64, 5)
        );
    }
    for p in pkts {
        cache.free(p);
    }
}

#[test]
fn pacing_over_a_clock_window_and_run_control() {
    static NOW: AtomicU64 = AtomicU64::new(1_000);
    let clock = Clock {
        now: || NOW.load(Relaxed),
        hz: HZ,
    };
    let cfg = GeneratorConfig {
        rate_pps: Some(1000),
        ..Default::default()
    };
    let port = GeneratorPort::new("g", 1, 2, cfg).with_clock(clock);
    let ctl = port
        .generator_control()
        .expect("a generator has run control");
    let pool = pool("pacing");
    let mut cache = pool.cache();
    let mut qs = [port.open_rxq(0), port.open_rxq(1)];
    let mut drain = |qs: &mut [Box<dyn RxQueue>; 2]| -> usize {
        qs.iter_mut()
            .map(|q| {
                let v = pull(&mut **q, &mut cache, usize::MAX);
                let n = v.len();
                drop(v);
                n
            })
            .sum()
    };
    let advance = |ns: u64| NOW.fetch_add(ns, Relaxed);
    // (advance the clock by, packets then due over both queues)
    let steps = [
        (0, 0),
        (250_000_000, 250),
        // 500 pps per queue: 1 ms later half a packet each is due.
        (1_000_000, 0),
        (99_000_000, 100),
        (1_500_000_000, 1500),
    ];
    for (ns, want) in steps {
        advance(ns);
        assert_eq!(drain(&mut qs), want, "after +{ns} ns");
    }
    assert_eq!(ctl.generated(), 1850);

    // A new run: 4000 pps, 100 packets; pacing restarts from now.
    ctl.start(Some(4000), Some(100));
    assert_eq!(drain(&mut qs), 0);
    advance(10_000_000);
    assert_eq!(drain(&mut qs), 40);
    advance(1_000_000_000);
    assert_eq!(drain(&mut qs), 60, "the budget caps the run");
    // Unlimited rate: a full burst per queue per poll until the budget.
    ctl.start(None, Some(70));
    assert_eq!(drain(&mut qs), 70);
    ctl.stop();
    advance(1_000_000_000);
    assert_eq!(drain(&mut qs), 0);
    assert_eq!(ctl.generated(), 1850 + 100 + 70);
    assert_eq!(ctl.generated_bytes(), 64 * 2020);
}

#[test]
fn falling_behind_a_backlog_limit_drops_like_a_nic_ring() {
    static NOW: AtomicU64 = AtomicU64::new(0);
    let clock = Clock {
        now: || NOW.load(Relaxed),
        hz: HZ,
    };
    let cfg = GeneratorConfig {
        stamp: true,
        ..Default::default()
    };
    let port = GeneratorPort::new("g", 5, 1, cfg).with_clock(clock);
    let receiver = ReceiverPort::new("rx").with_clock(clock);
    let mut txq = receiver.open_txq(0);
    let ctl = port.control().clone();
    let pool = pool("backlog");
    let mut cache = pool.cache();
    let mut rxq = port.open_rxq(0);
    ctl.set_backlog_limit(10);
    ctl.start(Some(1000), Some(5000));
    let mut deliver = |rxq: &mut dyn RxQueue| {
        let v = pull(rxq, &mut cache, usize::MAX);
        let n = v.len();
        for p in v {
            let mut b = Batch::new();
            b.push(p);
            txq.tx_burst(&mut b, &mut cache);
        }
        n
    };
    assert_eq!(deliver(&mut *rxq), 0);
    // Polled on time: nothing missed.
    NOW.fetch_add(5_000_000, Relaxed);
    assert_eq!(deliver(&mut *rxq), 5);
    // Not polled for a second: 1000 due, 10 kept, 990 missed.
    NOW.fetch_add(1_000_000_000, Relaxed);
    assert_eq!(deliver(&mut *rxq), 10);
    assert_eq!((ctl.generated(), ctl.missed()), (15, 990));
    let s = receiver.receiver_stats().unwrap().snapshot();
    let s = s.stream(stream_id(5, 0)).unwrap();
    // The receiver sees the missed packets as a sequence gap.
    assert_eq!((s.received, s.lost(), s.loss_given(1005)), (15, 990, 990));
    // The limit applies from the next start; 0 turns it off.
    ctl.set_backlog_limit(0);
    ctl.start(Some(1000), Some(5000));
    deliver(&mut *rxq);
    NOW.fetch_add(1_000_000_000, Relaxed);
    assert_eq!(deliver(&mut *rxq), 1000);
    assert_eq!(ctl.missed(), 990);
}

#[test]
fn rate_percent_of_a_line_rate() {
    let cfg = GeneratorConfig {
        frame_size: 1518,
        rate_percent: Some(10.0),
        line_rate_gbps: 100.0,
        ..Default::default()
    };
    // 10 % of 100 Gbit/s with 1518 + 24 bytes per frame on the wire.
    assert_eq!(cfg.effective_rate_pps(), Some(810_636));
    let port = GeneratorPort::new("g", 1, 1, cfg);
    assert_eq!(port.control().rate_pps(), Some(810_636));
}

/// How the link treats the frames, in generated order: returns
/// (index into the generated frames, extra delay in ns) in arrival order.
type Impairment = fn(usize) -> Vec<(usize, u64)>;

fn clean(n: usize) -> Vec<(usize, u64)> {
    (0..n).map(|i| (i, 0)).collect()
}
fn drop_every_10th(n: usize) -> Vec<(usize, u64)> {
    (0..n).filter(|i| i % 10 != 9).map(|i| (i, 0)).collect()
}
fn swap_pairs(n: usize) -> Vec<(usize, u64)> {
    (0..n).map(|i| (i ^ 1, 0)).collect()
}
fn duplicate_every_50th(n: usize) -> Vec<(usize, u64)> {
    (0..n)
        .flat_map(|i| std::iter::repeat_n((i, 0), if i % 50 == 0 { 2 } else { 1 }))
        .collect()
}
/// Every 100th frame arrives 3 frames later and 40 µs late.
fn delay_every_100th(n: usize) -> Vec<(usize, u64)> {
    let mut out = Vec::new();
    for i in 0..n {
        if i % 100 != 10 {
            out.push((i, 0));
        }
        if i % 100 == 13 {
            out.push((i - 3, 40_000));
        }
    }
    out
}

#[test]
fn receiver_accounts_exactly_what_the_link_did() {
    static GEN_NOW: AtomicU64 = AtomicU64::new(0);
    static RX_NOW: AtomicU64 = AtomicU64::new(0);
    const N: usize = 10_000;
    /// Base one-way delay of the link.
    const D: u64 = 1_234;
    // (name, impairment, received, lost, reordered, duplicates, loss vs sent)
    let cases: [(&str, Impairment, u64, u64, u64, u64, u64); 5] = [
        ("clean", clean, 10_000, 0, 0, 0, 0),
        // Exactly 10 %; the last one (9999) only the sender's count sees.
        ("drop every 10th", drop_every_10th, 9_000, 999, 0, 0, 1_000),
        ("swap pairs", swap_pairs, 10_000, 0, 5_000, 0, 0),
        (
            "duplicate every 50th",
            duplicate_every_50th,
            10_200,
            0,
            0,
            200,
            0,
        ),
        ("delay every 100th", delay_every_100th, 10_000, 0, 100, 0, 0),
    ];
    let pool = pool("loopback");
    let mut cache = pool.cache();
    for (name, impair, received, lost, reordered, duplicates, loss) in cases {
        GEN_NOW.store(1_000_000, Relaxed);
        let gen_clock = Clock {
            now: || GEN_NOW.load(Relaxed),
            hz: HZ,
        };
        let rx_clock = Clock {
            now: || RX_NOW.load(Relaxed),
            hz: HZ,
        };
        let cfg = GeneratorConfig {
            stamp: true,
            count: Some(N as u64),
            flows: 16,
            ..Default::default()
        };
        let generator = GeneratorPort::new("g", 3, 1, cfg).with_clock(gen_clock);
        let receiver = ReceiverPort::new("rx").with_clock(rx_clock);
        let stats = receiver.receiver_stats().expect("a receiver has stats");
        let mut txq = receiver.open_txq(0);

        let mut sent: Vec<Option<Packet>> = pull(&mut *generator.open_rxq(0), &mut cache, N)
            .into_iter()
            .map(Some)
            .collect();
        assert_eq!(sent.len(), N, "{name}");
        let plan = impair(N);
        for (k, &(i, extra)) in plan.iter().enumerate() {
            let again = plan[k + 1..].iter().any(|&(j, _)| j == i);
            let pkt = if again {
                cache.copy(sent[i].as_ref().unwrap()).expect("copy")
            } else {
                sent[i].take().expect("sent once")
            };
            // One frame per burst, so each can have its own receive time.
            RX_NOW.store(1_000_000 + D + extra, Relaxed);
            let mut b = Batch::new();
            b.push(pkt);
            assert_eq!(txq.tx_burst(&mut b, &mut cache), 1);
        }
        for p in sent.into_iter().flatten() {
            cache.free(p); // dropped by the link
        }

        let snap = stats.snapshot();
        assert_eq!(snap.unstamped, 0, "{name}");
        let s = snap.stream(stream_id(3, 0)).expect(name);
        assert_eq!(
            (
                s.received,
                s.lost(),
                s.reordered,
                s.duplicates,
                s.loss_given(N as u64)
            ),
            (received, lost, reordered, duplicates, loss),
            "{name}: (received, lost, reordered, duplicates, loss vs sent)"
        );
        let l = s.latency().expect(name);
        assert_eq!((l.min_ns, l.p50_ns, l.p99_ns), (D, D, D), "{name}");
        if name == "delay every 100th" {
            // 1 % of frames took 40 µs more: p99.9 and max, within the
            // histogram's 0.1 %.
            let slow = D + 40_000;
            assert!(l.p999_ns.abs_diff(slow) <= slow / 1024, "{name}: {l:?}");
            assert!(l.max_ns.abs_diff(slow) <= slow / 1024, "{name}: {l:?}");
            assert!(
                (l.mean_ns - (D as f64 + 400.0)).abs() < 1e-6,
                "{name}: {l:?}"
            );
        } else {
            assert_eq!((l.p999_ns, l.max_ns, l.mean_ns), (D, D, D as f64), "{name}");
        }
        // The port's gauges show the same; clearing starts from zero.
        let gauges = receiver.gauges();
        assert_eq!(gauges.count("received"), Some(received), "{name}");
        assert_eq!(gauges.count("reordered"), Some(reordered), "{name}");
        stats.clear();
        let after = stats.snapshot();
        assert_eq!(after.stream(stream_id(3, 0)).unwrap().received, 0);
        assert_eq!(after.stream(stream_id(3, 0)).unwrap().latency(), None);
    }
}

#[test]
fn unstamped_frames_are_counted_and_each_queue_is_its_own_stream() {
    static NOW: AtomicU64 = AtomicU64::new(0);
    let clock = Clock {
        now: || NOW.load(Relaxed),
        hz: HZ,
    };
    let pool = pool("queues");
    let mut cache = pool.cache();
    let stamped = GeneratorPort::new(
        "g",
        9,
        2,
        GeneratorConfig {
            stamp: true,
            count: Some(100),
            ..Default::default()
        },
    )
    .with_clock(clock);
    let plain = GeneratorPort::new(
        "p",
        10,
        1,
        GeneratorConfig {
            count: Some(7),
            ..Default::default()
        },
    );
    let receiver = ReceiverPort::new("rx").with_clock(clock);
    // Two PMDs: two tx queues, merged on read.
    let mut txqs = [receiver.open_txq(0), receiver.open_txq(1)];
    for (i, mut q) in [stamped.open_rxq(0), stamped.open_rxq(1), plain.open_rxq(0)]
        .into_iter()
        .enumerate()
    {
        for p in pull(&mut *q, &mut cache, usize::MAX) {
            let mut b = Batch::new();
            b.push(p);
            txqs[i % 2].tx_burst(&mut b, &mut cache);
        }
    }
    let s = receiver.receiver_stats().unwrap().snapshot();
    assert_eq!(s.unstamped, 7);
    let got: Vec<(u32, u64, u64)> = s
        .streams
        .iter()
        .map(|x| (x.stream, x.received, x.lost()))
        .collect();
    assert_eq!(got, [(stream_id(9, 0), 50, 0), (stream_id(9, 1), 50, 0)]);
}
