//! Driver → device → driver loopback cost, in TSC cycles per packet.
//!
//! One thread plays both sides, as the built-in VNF and a PMD would on two
//! cores but without cache-line transfers, so this is the pure ring and
//! copy cost: the VNF transmits a burst of 32, the switch dequeues it
//! (device TX), enqueues it into the VNF's RX queue (device RX), the VNF
//! receives and reposts buffers, and retransmits what it received.
//!
//! Each stage of each burst is timed with RDTSC (~25 cycles per stamp,
//! under 1 cycle/pkt); figures are medians over bursts, so a burst hit by
//! preemption (these VMs share cores) is an outlier rather than part of the
//! figure. Setups are interleaved round by round. A figure for the lead,
//! not a test.
//!
//!     cargo run --release -p nfv-virtio --example virtq_bench
//!
//! `VIRTQ_BENCH_LEN=64` runs only that frame size, `VIRTQ_BENCH_ONLY=<row
//! name>` only that row (for profiling).
//! `VIRTQ_BENCH_THREADS=1` also runs the loopback with the VNF and the
//! switch on two threads (cache lines really move between cores; needs two
//! otherwise idle cores to mean anything) and prints Mpps.

#[path = "../tests/common/mod.rs"]
mod common;

use common::{Loopback, LoopbackCfg};
use nfv_mem::{BATCH, Batch};
use nfv_virtio::layout::{
    VIRTIO_F_IN_ORDER as IN_ORDER, VIRTIO_F_RING_PACKED as PACKED, VIRTIO_F_VERSION_1 as V1,
    VIRTIO_NET_F_CSUM, VIRTIO_NET_F_GUEST_CSUM, VIRTIO_NET_F_GUEST_TSO4, VIRTIO_NET_F_HOST_TSO4,
    VIRTIO_NET_F_MRG_RXBUF as MRG, VIRTIO_RING_F_EVENT_IDX as EVIDX,
};

/// Checksum and TSO offloads negotiated both ways (frames without
/// offload requests, as a UDP packet generator sends them): what carrying
/// them costs a queue that reads every header.
const OFFLOADS: u64 =
    VIRTIO_NET_F_CSUM | VIRTIO_NET_F_GUEST_CSUM | VIRTIO_NET_F_HOST_TSO4 | VIRTIO_NET_F_GUEST_TSO4;

#[inline(always)]
fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC has no preconditions on x86_64.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    nfv_tsc::now()
}

const BURSTS: usize = 20_000;
const ROUNDS: usize = 10;

/// Per burst: cycles of [drv tx, dev dequeue, dev enqueue, drv rx+refill].
type Sample = [u32; 4];

fn round(l: &mut Loopback, pkts: &mut Batch, out: &mut Vec<Sample>) {
    let mut sw = Batch::new();
    for _ in 0..BURSTS {
        let t0 = rdtsc();
        l.tx_drv.transmit_burst(pkts, &mut l.drv);
        let t1 = rdtsc();
        l.tx_dev.dequeue_burst(&mut sw, &mut l.sw);
        let t2 = rdtsc();
        let moved = l.rx_dev.enqueue_burst(&mut sw, &mut l.sw);
        // One-copy rows: the burst is over, its TX chains go back.
        l.tx_dev.complete_held();
        let t3 = rdtsc();
        l.rx_drv.receive_burst(pkts, &mut l.drv);
        l.rx_drv.refill_rx(&mut l.drv);
        let t4 = rdtsc();
        assert_eq!(moved, BATCH, "every burst carries a full batch");
        let c = |a: u64, b: u64| (b - a).min(u32::MAX as u64) as u32;
        out.push([c(t0, t1), c(t1, t2), c(t2, t3), c(t3, t4)]);
    }
}

fn eventfd() -> std::os::fd::OwnedFd {
    use std::os::fd::FromRawFd;
    // SAFETY: plain syscall; the fd is checked and then owned.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    assert!(fd >= 0);
    // SAFETY: a fresh fd nobody else owns.
    unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) }
}

/// Guest-physical base of the pool in the dirty-log rows (rings 4 GiB up).
const LOG_GPA_BASE: u64 = 1 << 32;

/// A dirty log covering the dirty-log rows' guest-physical addresses.
fn dirty_log() -> (
    std::fs::File,
    std::sync::Arc<nfv_virtio::dirty_log::DirtyLog>,
) {
    use std::os::fd::FromRawFd;
    let bytes = (LOG_GPA_BASE + (1 << 32) + (1 << 24)) / nfv_virtio::dirty_log::LOG_PAGE / 8;
    // SAFETY: a literal name; the fd is checked and then owned.
    let fd = unsafe { libc::memfd_create(c"virtq-bench-log".as_ptr(), 0) };
    assert!(fd >= 0);
    // SAFETY: a fresh fd nobody else owns.
    let f = unsafe { std::fs::File::from_raw_fd(fd) };
    f.set_len(bytes).unwrap();
    let log = nfv_virtio::dirty_log::DirtyLog::map(&f, bytes, 0).unwrap();
    (f, std::sync::Arc::new(log))
}

fn median(mut v: Vec<u32>) -> f64 {
    v.sort_unstable();
    v[v.len() / 2] as f64 / BATCH as f64
}

/// VNF and switch on two threads for `secs`: returns Mpps through the
/// whole loop (VNF tx → switch → VNF rx).
fn threaded(len: usize, features: u64, secs: f64) -> f64 {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let l = Loopback::new(LoopbackCfg {
        size: 256,
        features,
        frame_size: 2048,
        frames: 4096,
        ..Default::default()
    });
    let Loopback {
        mut rx_drv,
        mut rx_dev,
        mut tx_drv,
        mut tx_dev,
        mut drv,
        mut sw,
        ..
    } = l;
    let stop = AtomicBool::new(false);
    let received = AtomicU64::new(0);
    std::thread::scope(|s| {
        s.spawn(|| {
            // The VNF: 192 packets circulate; what comes back is resent.
            rx_drv.refill_rx(&mut drv);
            let mut out = Batch::new();
            let mut inject = 192;
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                while inject > 0 && !out.is_full() {
                    let mut p = drv.alloc().unwrap();
                    p.set_len(len).unwrap();
                    out.push(p);
                    inject -= 1;
                }
                tx_drv.transmit_burst(&mut out, &mut drv);
                if out.is_empty() {
                    n += rx_drv.receive_burst(&mut out, &mut drv) as u64;
                    rx_drv.refill_rx(&mut drv);
                }
            }
            received.store(n, Ordering::Relaxed);
        });
        s.spawn(|| {
            // The switch PMD: TX queue → RX queue; what the guest has no
            // room for waits in the batch.
            let mut b = Batch::new();
            while !stop.load(Ordering::Relaxed) {
                tx_dev.dequeue_burst(&mut b, &mut sw);
                rx_dev.enqueue_burst(&mut b, &mut sw);
            }
            sw.free_batch(&mut b);
        });
        std::thread::sleep(std::time::Duration::from_secs_f64(secs));
        stop.store(true, Ordering::Relaxed);
    });
    received.load(Ordering::Relaxed) as f64 / secs / 1e6
}

/// (name, features, with call eventfds: the driver polls (interrupts
/// disabled) but the device must fence and check each burst; one-copy:
/// long frames leave dequeue split and enqueue copies them straight
/// from the TX buffer; dirty log: the guest migrating, every device
/// write marked in a log — compare with the V1+MRG+EVENT_IDX row)
const CONFIGS: &[(&str, u64, bool, bool, bool)] = &[
    ("V1", V1, false, false, false),
    ("V1+MRG", V1 | MRG, false, false, false),
    ("V1+MRG one-copy", V1 | MRG, false, true, false),
    ("V1+MRG+EVENT_IDX", V1 | MRG | EVIDX, false, false, false),
    (
        "V1+MRG+EVIDX+offl",
        V1 | MRG | EVIDX | OFFLOADS,
        false,
        false,
        false,
    ),
    ("V1+MRG+EVIDX+call", V1 | MRG | EVIDX, true, false, false),
    // What testpmd's virtio-user (split ring) and nfvswitch agree on in
    // `nfv-bench compare`: in order, call fds set, one-copy on.
    (
        "V1+MRG+INORDER+call",
        V1 | MRG | IN_ORDER,
        true,
        true,
        false,
    ),
    ("V1+MRG+EVIDX+log", V1 | MRG | EVIDX, false, false, true),
    // Packed rings (what `compare --packed` negotiates).
    ("PACKED+MRG", V1 | MRG | PACKED, false, false, false),
    (
        "PACKED+MRG+EVIDX",
        V1 | MRG | EVIDX | PACKED,
        false,
        false,
        false,
    ),
    // testpmd's virtio-user takes IN_ORDER: TX bursts go back as one
    // used descriptor.
    (
        "PACKED+MRG+INORDER",
        V1 | MRG | IN_ORDER | PACKED,
        false,
        false,
        false,
    ),
];

/// One row: its name, frame length, loopback, burst and samples.
type Setup = (&'static str, usize, Loopback, Batch, Vec<Sample>);

fn main() {
    if std::env::var_os("VIRTQ_BENCH_THREADS").is_some() {
        threaded_rows();
    }
    let hz = nfv_tsc::hz() as f64;
    print_header(hz);
    // Keeps the logs' files open while the setups run.
    let mut logs = Vec::new();
    let mut setups = setups(&mut logs);
    for r in 0..ROUNDS {
        for (_, _, l, pkts, samples) in setups.iter_mut() {
            round(l, pkts, samples);
            if r == 0 {
                samples.clear(); // warm-up
            }
        }
    }
    report(&setups, hz);
}

/// The two-thread rows (`VIRTQ_BENCH_THREADS`).
fn threaded_rows() {
    println!("two threads (VNF, switch), 64 and 1518 B, V1+MRG+EVENT_IDX, Mpps of 5 x 1 s:");
    for len in [64, 1518] {
        let mut v: Vec<f64> = (0..5)
            .map(|_| threaded(len, V1 | MRG | EVIDX, 1.0))
            .collect();
        v.sort_by(|a, b| a.total_cmp(b));
        println!(
            "  {len:>5} B: median {:.2} Mpps (min {:.2}, max {:.2})",
            v[2], v[0], v[4]
        );
    }
}

fn print_header(hz: f64) {
    println!(
        "TSC {:.2} GHz; {ROUNDS} interleaved rounds x {BURSTS} bursts of {BATCH}; medians over bursts",
        hz / 1e9
    );
    println!(
        "{:<18} {:>5} | {:>8} {:>7} | {:>7} {:>7} {:>7} {:>7} | {:>8} {:>7}",
        "features",
        "bytes",
        "cyc/pkt",
        "ns/pkt",
        "drv-tx",
        "dev-deq",
        "dev-enq",
        "drv-rx",
        "device",
        "dev-ns"
    );
}

/// Every row of [`CONFIGS`] at each frame length (as the environment
/// narrows them), set up; dirty logs' files go to `logs`.
fn setups(logs: &mut Vec<std::fs::File>) -> Vec<Setup> {
    let only: Option<usize> = std::env::var("VIRTQ_BENCH_LEN")
        .ok()
        .and_then(|v| v.parse().ok());
    let mut setups: Vec<Setup> = Vec::new();
    // VIRTQ_BENCH_SKIP=<text>: leave out the configurations whose name
    // contains it (to compare instruction counts with an older build that
    // lacks a row).
    let skip = std::env::var("VIRTQ_BENCH_SKIP").ok();
    // VIRTQ_BENCH_ONLY=<name>: that configuration alone (for profiling).
    let only_name = std::env::var("VIRTQ_BENCH_ONLY").ok();
    for &(name, features, call, one_copy, log) in CONFIGS {
        if skip.as_deref().is_some_and(|s| name.contains(s))
            || only_name.as_deref().is_some_and(|o| o != name)
        {
            continue;
        }
        for len in [0usize, 64, 1518] {
            if only.is_some_and(|o| o != len) {
                continue;
            }
            let (l, pkts) = setup(features, call, one_copy, log, len, logs);
            setups.push((name, len, l, pkts, Vec::with_capacity(BURSTS * ROUNDS)));
        }
    }
    setups
}

/// One row's loopback, its driver RX ring filled, and a burst of `len`
/// byte packets to send.
fn setup(
    features: u64,
    call: bool,
    one_copy: bool,
    log: bool,
    len: usize,
    logs: &mut Vec<std::fs::File>,
) -> (Loopback, Batch) {
    let mut l = Loopback::new(LoopbackCfg {
        size: 256,
        features,
        frame_size: 2048,
        frames: 4096,
        rx_call: call.then(eventfd),
        tx_call: call.then(eventfd),
        // Small guest-physical addresses keep the log small.
        gpa_base: if log { LOG_GPA_BASE } else { 0 },
        ..Default::default()
    });
    l.tx_dev.set_one_copy(one_copy);
    if log {
        let (file, log) = dirty_log();
        l.tx_dev.set_dirty_log(Some(log.clone()));
        l.rx_dev.set_dirty_log(Some(log));
        logs.push(file);
    }
    l.rx_drv.refill_rx(&mut l.drv);
    let mut pkts = Batch::new();
    for i in 0..BATCH {
        let mut p = l.drv.alloc().unwrap();
        p.set_len(len).unwrap();
        common::fill(p.data_mut(), i as u32);
        pkts.push(p);
    }
    (l, pkts)
}

/// Prints each row's medians; checks no queue counted an error.
fn report(setups: &[Setup], hz: f64) {
    for (name, len, l, _, samples) in setups {
        let stage = |s: usize| median(samples.iter().map(|x| x[s]).collect());
        let total = median(samples.iter().map(|x| x.iter().sum()).collect());
        let device = median(samples.iter().map(|x| x[1] + x[2]).collect());
        println!(
            "{:<18} {:>5} | {:>8.1} {:>7.1} | {:>7.1} {:>7.1} {:>7.1} {:>7.1} | {:>8.1} {:>7.1}",
            name,
            len,
            total,
            total / hz * 1e9,
            stage(0),
            stage(1),
            stage(2),
            stage(3),
            device,
            device / hz * 1e9,
        );
        let e = l.tx_dev.errors().total() + l.rx_dev.errors().total();
        let d = l.rx_drv.errors().total() + l.tx_drv.errors().total();
        assert_eq!(e + d, 0, "errors in a healthy loopback");
    }
    println!(
        "(all but ns in cycles/pkt; device = dev-deq + dev-enq, one packet through each device \
         direction, copies included; 0 B = header-only chains: ring, pool and header cost alone)"
    );
}
