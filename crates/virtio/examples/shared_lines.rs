//! Guest-shared cache lines per burst, counted from a memory trace.
//!
//! The loopback of `virtq_bench` (the VNF's driver and the switch's
//! device, bursts of 32) runs under Valgrind's lackey, which logs every
//! load and store. Marker loads split the trace into driver and device
//! stretches; this program then replays the trace through a two-cache
//! model (one cache for the VNF's core, one for the switch's) and counts,
//! per burst, the lines of shared memory — rings and packet buffers — the
//! device reads and writes, and how many change owner: a line one side
//! touches after the other wrote it must cross between the cores (on two
//! cores sharing an L3 that costs ~75 ns here, across L3s ~330 ns), so
//! those crossings are what the switch pays for the guest's cache lines.
//!
//!     cargo build --release -p nfv-virtio --example shared_lines
//!     bench/shared-lines          # runs each ring type under valgrind
//!
//! By hand: `shared_lines run <config> > facts` under
//! `valgrind --tool=lackey --trace-mem=yes --log-file=trace`, then
//! `shared_lines count facts trace`.

#[path = "../tests/common/mod.rs"]
mod common;

use common::{Loopback, LoopbackCfg};
use nfv_mem::{BATCH, Batch};
use nfv_virtio::layout::{
    VIRTIO_F_IN_ORDER as IN_ORDER, VIRTIO_F_RING_PACKED as PACKED, VIRTIO_F_VERSION_1 as V1,
    VIRTIO_NET_F_MRG_RXBUF as MRG, VIRTIO_RING_F_EVENT_IDX as EVIDX,
};
use std::collections::HashMap;
use std::hint::black_box;
use std::io::BufRead;
use std::sync::atomic::{AtomicU64, Ordering};

/// The configurations: name, features.
const CONFIGS: &[(&str, u64)] = &[
    ("split", V1 | MRG | EVIDX),
    ("split+inorder", V1 | MRG | EVIDX | IN_ORDER),
    ("packed", V1 | MRG | EVIDX | PACKED),
    ("packed+inorder", V1 | MRG | EVIDX | PACKED | IN_ORDER),
];

const WARM_BURSTS: usize = 40;
const BURSTS: usize = 100;
const FRAME: usize = 64;

/// Loads of these mark where the trace changes side: 0 driver, 1 device,
/// 2 the measured part starts.
static MARKS: [AtomicU64; 3] = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];

fn mark(i: usize) {
    black_box(MARKS[i].load(Ordering::Relaxed));
}

fn run(name: &str) {
    let &(_, features) = CONFIGS
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no config {name}"));
    let mut l = Loopback::new(LoopbackCfg {
        size: 256,
        features,
        frame_size: 2048,
        frames: 4096,
        ..Default::default()
    });
    let r = l.drv_pool.region();
    // The facts the counter needs, one per line.
    println!("mark_drv {:#x}", MARKS[0].as_ptr() as usize);
    println!("mark_dev {:#x}", MARKS[1].as_ptr() as usize);
    println!("mark_start {:#x}", MARKS[2].as_ptr() as usize);
    println!("rings {:#x} {:#x}", l.rings.ptr() as usize, l.rings.len());
    println!("buffers {:#x} {:#x}", r.base().as_ptr() as usize, r.len());
    println!("bursts {BURSTS}");
    l.rx_drv.refill_rx(&mut l.drv);
    let mut pkts = Batch::new();
    for i in 0..BATCH {
        let mut p = l.drv.alloc().unwrap();
        p.set_len(FRAME).unwrap();
        common::fill(p.data_mut(), i as u32);
        pkts.push(p);
    }
    let mut sw = Batch::new();
    for k in 0..WARM_BURSTS + BURSTS {
        if k == WARM_BURSTS {
            mark(2);
        }
        mark(0);
        l.tx_drv.transmit_burst(&mut pkts, &mut l.drv);
        mark(1);
        l.tx_dev.dequeue_burst(&mut sw, &mut l.sw);
        let moved = l.rx_dev.enqueue_burst(&mut sw, &mut l.sw);
        l.tx_dev.complete_held();
        mark(0);
        l.rx_drv.receive_burst(&mut pkts, &mut l.drv);
        l.rx_drv.refill_rx(&mut l.drv);
        l.tx_drv.reclaim_tx(&mut l.drv);
        assert_eq!(moved, BATCH, "every burst carries a full batch");
    }
    mark(1);
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Side {
    Driver,
    Device,
}

/// One line in the two-cache model.
#[derive(Default, Clone, Copy)]
struct Line {
    /// Valid copy in the driver's / the device's cache.
    drv: bool,
    dev: bool,
}

#[derive(Default, Debug)]
struct Tally {
    /// Distinct lines the device read (only) / wrote, per burst, summed.
    dev_read: u64,
    dev_written: u64,
    /// Lines that moved to the device's cache / to the driver's.
    to_dev: u64,
    to_drv: u64,
}

fn hex(s: &str) -> u64 {
    u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap_or_else(|_| panic!("hex {s}"))
}

fn count(facts: &str, trace: &str) {
    let facts = std::fs::read_to_string(facts).expect("facts file");
    let f = parse_facts(&facts);
    let (mdrv, mdev, mstart) = (f["mark_drv"][0], f["mark_dev"][0], f["mark_start"][0]);
    let areas = [
        ("ring", f["rings"][0], f["rings"][1]),
        ("buffer", f["buffers"][0], f["buffers"][1]),
    ];
    let bursts = f["bursts"][0];
    let mut m = Replay::new();
    let file = std::fs::File::open(trace).expect("trace file");
    for l in std::io::BufReader::new(file).lines() {
        let l = l.unwrap();
        let Some((op, addr, size)) = parse_access(&l) else {
            continue;
        };
        if op == b'L' && size == 8 {
            if addr == mdrv || addr == mdev {
                if m.side == Side::Device {
                    m.flush();
                }
                m.side = if addr == mdrv {
                    Side::Driver
                } else {
                    Side::Device
                };
                continue;
            }
            if addr == mstart {
                m.measuring = true;
                continue;
            }
        }
        let Some(area) = areas
            .iter()
            .position(|&(_, base, len)| addr >= base && addr < base + len)
        else {
            continue;
        };
        m.touch(area, addr, size, op != b'L');
    }
    print_tally(&areas, &m.tally, bursts);
}

/// The facts `run` printed: a name, then numbers (hex with `0x`), a line.
fn parse_facts(facts: &str) -> HashMap<&str, Vec<u64>> {
    let mut f: HashMap<&str, Vec<u64>> = HashMap::new();
    for l in facts.lines() {
        let mut w = l.split_whitespace();
        if let Some(k) = w.next() {
            f.insert(
                k,
                w.map(|x| {
                    if x.starts_with("0x") {
                        hex(x)
                    } else {
                        x.parse().unwrap()
                    }
                })
                .collect(),
            );
        }
    }
    f
}

/// A lackey trace line's access: its kind (`L`, `S`, `M`), address and
/// size; `None` for any other line.
fn parse_access(l: &str) -> Option<(u8, u64, u64)> {
    let b = l.as_bytes();
    if b.len() < 4 || b[0] != b' ' {
        return None;
    }
    let op = b[1];
    if !matches!(op, b'L' | b'S' | b'M') {
        return None;
    }
    let (a, sz) = l[3..].trim().split_once(',')?;
    Some((op, hex(a), sz.parse::<u64>().unwrap_or(1).max(1)))
}

/// The two-cache model while the trace replays.
struct Replay {
    lines: HashMap<u64, Line>,
    tally: [Tally; 2],
    side: Side,
    measuring: bool,
    /// Lines the device touched in this device stretch: (line, area) -> wrote.
    stretch: HashMap<(u64, usize), bool>,
}

impl Replay {
    fn new() -> Replay {
        Replay {
            lines: HashMap::new(),
            tally: Default::default(),
            side: Side::Driver,
            measuring: false,
            stretch: HashMap::new(),
        }
    }

    /// A device stretch ends: its lines go into the tally (if measuring).
    fn flush(&mut self) {
        if self.measuring {
            for (&(_, a), &w) in self.stretch.iter() {
                if w {
                    self.tally[a].dev_written += 1;
                } else {
                    self.tally[a].dev_read += 1;
                }
            }
        }
        self.stretch.clear();
    }

    /// An access of `size` bytes at `addr` in area `area` by the current
    /// side: each line it covers moves between the caches as it must.
    fn touch(&mut self, area: usize, addr: u64, size: u64, write: bool) {
        let side = self.side;
        for line in addr / 64..=(addr + size - 1) / 64 {
            let e = self.lines.entry(line).or_default();
            let (mine, other) = match side {
                Side::Driver => (e.drv, e.dev),
                Side::Device => (e.dev, e.drv),
            };
            if !mine && other && self.measuring {
                match side {
                    Side::Driver => self.tally[area].to_drv += 1,
                    Side::Device => self.tally[area].to_dev += 1,
                }
            }
            match (side, write) {
                (Side::Driver, true) => {
                    *e = Line {
                        drv: true,
                        dev: false,
                    }
                }
                (Side::Device, true) => {
                    *e = Line {
                        drv: false,
                        dev: true,
                    }
                }
                (Side::Driver, false) => e.drv = true,
                (Side::Device, false) => e.dev = true,
            }
            if side == Side::Device {
                let w = self.stretch.entry((line, area)).or_insert(false);
                *w |= write;
            }
        }
    }
}

/// The tally per burst, by area.
fn print_tally(areas: &[(&str, u64, u64)], tally: &[Tally; 2], bursts: u64) {
    let per = |x: u64| x as f64 / bursts as f64;
    println!(
        "{:<8} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "lines", "dev-read", "dev-write", "to-dev", "to-drv", "crossings"
    );
    for (i, (name, _, _)) in areas.iter().enumerate() {
        let t = &tally[i];
        println!(
            "{:<8} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1}",
            name,
            per(t.dev_read),
            per(t.dev_written),
            per(t.to_dev),
            per(t.to_drv),
            per(t.to_dev + t.to_drv)
        );
    }
    println!(
        "(per burst of {BATCH} packets of {FRAME} B each way: the VNF transmits, the switch dequeues, enqueues into the VNF's RX queue, the VNF receives)"
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("run") => run(args.get(2).map_or("split", String::as_str)),
        Some("count") if args.len() == 4 => count(&args[2], &args[3]),
        Some("configs") => {
            for (n, _) in CONFIGS {
                println!("{n}");
            }
        }
        _ => {
            eprintln!("usage: shared_lines run <config> | count <facts> <trace> | configs");
            std::process::exit(2);
        }
    }
}
