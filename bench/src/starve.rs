//! `nfv-bench starve`: does a hostile VNF starve the other ports of its
//! PMD? Two guest-facing ports on one PMD loop, in process, on the real
//! device queues (`nfv_virtio::DeviceQueue`):
//!
//! * port A, well behaved: a VNF (our virtio driver) sends 64-byte frames,
//!   the PMD takes them from A's TX queue and puts them into A's RX queue,
//!   the VNF receives and sends them again;
//! * port B, one of
//!   - `quiet`: posts nothing;
//!   - `busy`: a well-behaved neighbour at full rate (one-descriptor TX
//!     chains with a 64-byte frame, 2 KiB RX buffers);
//!   - `attack-max`: every TX and RX chain an indirect table of 65,536
//!     zero-length descriptors (legal per virtio; over our cap);
//!   - `attack-cap`: every chain exactly at the cap (legal and accepted:
//!     zero-length descriptors and then the frame / buffer), the most
//!     work per delivered packet a driver can ask for.
//!
//! B's rings are kept full by re-publishing the same chain (a hand-written
//! driver, `crates/virtio/tests/common`): one store of `avail.idx` per
//! PMD iteration in every variant. The PMD offers B a batch of 32 packets
//! per iteration (topped up from the pool; what B does not take stays).
//!
//! Default mode, one thread: per iteration the VNF transmits a burst, the
//! PMD runs its four bursts (A deq, A enq, B deq, B enq), the VNF
//! receives and refills. Only the PMD's part is timed (RDTSC; medians of
//! 100-iteration windows, see [`WINDOW`]): A's
//! throughput with a PMD that A alone keeps saturated is 32 packets per
//! PMD iteration, so the ratio of median PMD cycles per iteration is A's
//! throughput under attack relative to each baseline — the worst case, no
//! idle cycles to absorb anything. `--threads`: the VNF on its own thread
//! (the PMD then polls with whatever slack it has) and A's Mpps.
//!
//! Variants interleave round by round; medians over iterations (a round
//! hit by preemption on these shared VMs shows as an outlier) and over
//! rounds.

#[path = "../../crates/virtio/tests/common/mod.rs"]
mod vq;

use nfv_mem::{BATCH, Batch, PoolCache};
use nfv_virtio::DeviceQueue;
use nfv_virtio::device::MAX_CHAIN_DESCS;
use nfv_virtio::layout::{
    Desc, VIRTIO_F_VERSION_1 as V1, VIRTIO_NET_F_MRG_RXBUF as MRG,
    VIRTIO_RING_F_EVENT_IDX as EVIDX, VIRTQ_DESC_F_INDIRECT as IND, VIRTQ_DESC_F_NEXT as NEXT,
    VIRTQ_DESC_F_WRITE as WRITE,
};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use vq::{Loopback, LoopbackCfg, Mock};

#[derive(clap::Args, Clone, Debug)]
pub struct StarveArgs {
    /// Interleaved rounds.
    #[arg(long, default_value_t = 7)]
    pub rounds: usize,
    /// PMD iterations per round (one-thread mode).
    #[arg(long, default_value_t = 20_000)]
    pub iterations: usize,
    /// VNF on its own thread; measured seconds per round.
    #[arg(long)]
    pub threads: bool,
    #[arg(long, default_value_t = 1.0)]
    pub seconds: f64,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Neighbour {
    Quiet,
    Busy,
    AttackMax,
    AttackCap,
}

const VARIANTS: [(Neighbour, &str); 4] = [
    (Neighbour::Quiet, "quiet"),
    (Neighbour::Busy, "busy"),
    (Neighbour::AttackMax, "attack-max"),
    (Neighbour::AttackCap, "attack-cap"),
];

const RING: u16 = 256;
const FRAME: usize = 64;

fn d(addr: u64, len: u32, flags: u16, next: u16) -> Desc {
    Desc {
        addr,
        len,
        flags,
        next,
    }
}

/// One of B's queues: a hand-written driver whose every avail slot holds
/// chain 0, kept full.
struct HostileQueue {
    mock: Mock,
    dq: DeviceQueue,
    active: bool,
}

impl HostileQueue {
    fn new(kind: Neighbour, rx: bool) -> HostileQueue {
        let mut m = Mock::new(RING, 2 << 20);
        let dq = m.device(V1 | MRG);
        let w = if rx { WRITE } else { 0 };
        let (zero, _) = m.buf(16);
        let data = if rx {
            m.buf(2048).0
        } else {
            let mut v = vec![0u8; 12];
            v.extend(vq::frame(FRAME, 1));
            m.buf_with(&v)
        };
        let data_len = if rx { 2048 } else { (12 + FRAME) as u32 };
        // Zero-length entries in front of the buffer (RX walks only what
        // it needs, so they must come first to cost anything).
        let zeros = match kind {
            Neighbour::Quiet | Neighbour::Busy => 0,
            Neighbour::AttackMax => 65536,
            Neighbour::AttackCap => MAX_CHAIN_DESCS as usize - 2,
        };
        if zeros == 0 {
            m.set_desc(0, d(data, data_len, w, 0));
        } else {
            let mut t: Vec<Desc> = (0..zeros)
                .map(|i| d(zero, 0, w | NEXT, (i as u16).wrapping_add(1)))
                .collect();
            if kind == Neighbour::AttackCap {
                t.push(d(data, data_len, w, 0));
            } else if let Some(last) = t.last_mut() {
                last.flags &= !NEXT;
            }
            let (tg, tl) = m.table(&t);
            m.set_desc(0, d(tg, tl, IND, 0));
        }
        let active = kind != Neighbour::Quiet;
        if active {
            for _ in 0..RING {
                m.push_avail(0);
            }
        }
        HostileQueue {
            mock: m,
            dq,
            active,
        }
    }

    /// Re-publishes the chains the device returned: the ring stays full.
    #[inline(always)]
    fn refill(&self) {
        if self.active {
            self.mock
                .set_avail_idx(self.mock.used_idx().wrapping_add(RING));
        }
    }
}

/// Port B as the PMD sees it, with the packets it offers B.
struct PortB {
    tx: HostileQueue,
    rx: HostileQueue,
    to_b: Batch,
    from_b: Batch,
}

impl PortB {
    fn new(kind: Neighbour) -> PortB {
        PortB {
            tx: HostileQueue::new(kind, false),
            rx: HostileQueue::new(kind, true),
            to_b: Batch::new(),
            from_b: Batch::new(),
        }
    }

    #[inline(always)]
    fn poll(&mut self, sw: &mut PoolCache) {
        self.tx.refill();
        self.rx.refill();
        self.tx.dq.dequeue_burst(&mut self.from_b, sw);
        sw.free_batch(&mut self.from_b);
        while !self.to_b.is_full() {
            let Some(mut p) = sw.alloc() else { break };
            let _ = p.set_len(FRAME);
            self.to_b.push(p);
        }
        self.rx.dq.enqueue_burst(&mut self.to_b, sw);
    }

    fn release(&mut self, sw: &mut PoolCache) {
        sw.free_batch(&mut self.to_b);
        sw.free_batch(&mut self.from_b);
    }
}

fn port_a() -> Loopback {
    Loopback::new(LoopbackCfg {
        size: RING,
        features: V1 | MRG | EVIDX,
        frame_size: 2048,
        frames: 4096,
        ..Default::default()
    })
}

#[inline(always)]
fn rdtsc() -> u64 {
    nfv_tsc::now()
}

/// Iterations summed per sample: a hostile queue's cost comes in bursts
/// (one expensive burst, then skipped ones while it repays the debt), so
/// single iterations would hide it; windows hold whole cycles of that,
/// and their median still drops the windows hit by preemption.
const WINDOW: usize = 100;

/// One thread: PMD cycles per iteration (median over windows of
/// [`WINDOW`] iterations), and the packets A moved per iteration (32 when
/// nothing is lost).
fn one_thread(kind: Neighbour, iters: usize) -> (f64, f64) {
    let mut a = port_a();
    let mut b = PortB::new(kind);
    a.rx_drv.refill_rx(&mut a.drv);
    let mut pkts = Batch::new();
    for i in 0..BATCH {
        let mut p = a.drv.alloc().expect("vnf pool");
        let _ = p.set_len(FRAME);
        vq::fill(p.data_mut(), i as u32);
        pkts.push(p);
    }
    let mut sw = Batch::new();
    let mut cycles = Vec::with_capacity(iters / WINDOW);
    let mut moved = 0u64;
    let mut window = 0u64;
    for k in 0..iters {
        a.tx_drv.transmit_burst(&mut pkts, &mut a.drv);
        let t0 = rdtsc();
        a.tx_dev.dequeue_burst(&mut sw, &mut a.sw);
        moved += a.rx_dev.enqueue_burst(&mut sw, &mut a.sw) as u64;
        b.poll(&mut a.sw);
        let t1 = rdtsc();
        a.sw.free_batch(&mut sw);
        a.rx_drv.receive_burst(&mut pkts, &mut a.drv);
        a.rx_drv.refill_rx(&mut a.drv);
        a.tx_drv.reclaim_tx(&mut a.drv);
        window += t1 - t0;
        if (k + 1) % WINDOW == 0 {
            cycles.push(window as f64 / WINDOW as f64);
            window = 0;
        }
    }
    b.release(&mut a.sw);
    a.drv.free_batch(&mut pkts);
    (median(&mut cycles), moved as f64 / iters as f64)
}

/// VNF and PMD on two threads for `secs`: A's Mpps through the loop.
fn two_threads(kind: Neighbour, secs: f64) -> f64 {
    // Bound first: the fields not taken (guest memory, rings) must live
    // until the end, not only until the end of the destructuring.
    let l = port_a();
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
                    let Some(mut p) = drv.alloc() else { break };
                    let _ = p.set_len(FRAME);
                    out.push(p);
                    inject -= 1;
                }
                tx_drv.transmit_burst(&mut out, &mut drv);
                tx_drv.reclaim_tx(&mut drv);
                if out.is_empty() {
                    n += rx_drv.receive_burst(&mut out, &mut drv) as u64;
                    rx_drv.refill_rx(&mut drv);
                    received.store(n, Ordering::Relaxed);
                }
            }
            drv.free_batch(&mut out);
        });
        s.spawn(|| {
            let mut b = PortB::new(kind);
            let mut batch = Batch::new();
            while !stop.load(Ordering::Relaxed) {
                tx_dev.dequeue_burst(&mut batch, &mut sw);
                rx_dev.enqueue_burst(&mut batch, &mut sw);
                b.poll(&mut sw);
            }
            b.release(&mut sw);
            sw.free_batch(&mut batch);
        });
        // Warm-up, then count over the measured window.
        std::thread::sleep(std::time::Duration::from_secs_f64(0.2));
        let before = received.load(Ordering::Relaxed);
        let t0 = std::time::Instant::now();
        std::thread::sleep(std::time::Duration::from_secs_f64(secs));
        let got = received.load(Ordering::Relaxed) - before;
        let elapsed = t0.elapsed().as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        got as f64 / elapsed / 1e6
    })
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

pub fn starve(a: StarveArgs) -> Result<(), String> {
    let hz = nfv_tsc::hz() as f64;
    let mode = if a.threads {
        format!("two threads (VNF A, PMD), {} s per round", a.seconds)
    } else {
        format!(
            "one thread, {} PMD iterations per round, PMD part timed",
            a.iterations
        )
    };
    println!(
        "nfv-bench starve: port A 64 B loopback + port B on one PMD; {} interleaved rounds; {mode}; cap {} descriptors/chain, budget {} /burst; TSC {:.3} GHz",
        a.rounds,
        MAX_CHAIN_DESCS,
        nfv_virtio::device::BURST_DESC_BUDGET,
        hz / 1e9
    );
    let mut per: Vec<Vec<f64>> = vec![Vec::new(); VARIANTS.len()];
    for r in 0..a.rounds {
        let mut line = format!("  round {}:", r + 1);
        for (i, &(kind, name)) in VARIANTS.iter().enumerate() {
            let v = if a.threads {
                let mpps = two_threads(kind, a.seconds);
                line += &format!("  {name} {mpps:.2} Mpps");
                mpps
            } else {
                let (cyc, moved) = one_thread(kind, a.iterations);
                if moved < BATCH as f64 * 0.99 {
                    return Err(format!(
                        "{name}: port A moved {moved:.1} of {BATCH} per burst"
                    ));
                }
                // A's throughput with the PMD saturated: 32 per iteration.
                let mpps = BATCH as f64 * hz / cyc / 1e6;
                line += &format!("  {name} {cyc:.0} cyc ({mpps:.2} Mpps)");
                mpps
            };
            per[i].push(v);
        }
        println!("{line}");
    }
    let med: Vec<f64> = per.iter_mut().map(|v| median(v)).collect();
    println!("\nport A throughput, medians over rounds (Mpps):");
    for (i, &(_, name)) in VARIANTS.iter().enumerate() {
        println!("  {name:<11} {:>7.2}", med[i]);
    }
    println!("ratios (target >= 0.90):");
    for (atk, an) in [(2, "attack-max"), (3, "attack-cap")] {
        println!(
            "  {an:<11} / quiet {:.3}   / busy {:.3}",
            med[atk] / med[0],
            med[atk] / med[1]
        );
    }
    println!("  busy        / quiet {:.3}", med[1] / med[0]);
    Ok(())
}
