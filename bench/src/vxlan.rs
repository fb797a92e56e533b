//! `nfv-bench vxlan` — what a VXLAN tunnel port adds per packet, in
//! process on one thread: frames go out of a transmit queue into an
//! in-process ring and come back out of a receive queue, either through
//! plain ring ends (the baseline) or through two VXLAN ports using those
//! ring ends as their underlays (tunnel A's transmit queue encapsulates,
//! tunnel B's receive queue classifies and decapsulates). TSC cycles
//! around each `tx_burst` and `rx_burst` call, divided by the frames; the
//! tunnel's encap and decap cost is its figure minus the baseline's,
//! with medians over interleaved rounds (baseline, tunnel, baseline, …).
//!
//! Not measured here: the underlay's kernel I/O (the same for a plain
//! AF_PACKET port) and the flow table (the same for any port).

use crate::report::{fmt_range, median, text_table};
use nfv_mem::{BATCH, Batch, HugepageMode, MemoryConfig, PacketPool, PoolCache};
use nfv_ports::ring::{Inbox, RingPort};
use nfv_ports::{Clock, Port, RxQueue, TxQueue};
use nfv_vxlan::{Underlay, VxlanConfig, VxlanPort};
use nfv_wire::Ipv4Addr;
use std::sync::Arc;

#[derive(clap::Args)]
pub struct VxlanArgs {
    /// Interleaved rounds.
    #[arg(long, default_value_t = 7)]
    rounds: usize,
    /// Bursts of 32 frames per trial.
    #[arg(long, default_value_t = 200_000)]
    bursts: usize,
    /// Inner frame sizes.
    #[arg(long, value_delimiter = ',', default_values_t = [64usize, 1518])]
    sizes: Vec<usize>,
}

struct Path {
    tx: Box<dyn TxQueue>,
    rx: Box<dyn RxQueue>,
    /// The ports, kept alive with their queues.
    _ports: Vec<Arc<dyn Port>>,
}

fn ring_pair(name: &str) -> (Arc<dyn Port>, Arc<dyn Port>) {
    let (x, y) = (Inbox::default(), Inbox::default());
    let a = RingPort::new(&format!("{name}.a"), 1, 1024, x.clone(), y.clone());
    let b = RingPort::new(&format!("{name}.b"), 1, 1024, y, x);
    (Arc::new(a), Arc::new(b))
}

fn plain() -> Path {
    let (a, b) = ring_pair("plain");
    Path {
        tx: a.open_txq(0),
        rx: b.open_rxq(0),
        _ports: vec![a, b],
    }
}

fn tunnel() -> Path {
    let (ua, ub) = ring_pair("underlay");
    let ip_a = Ipv4Addr::new(192, 0, 2, 1);
    let ip_b = Ipv4Addr::new(192, 0, 2, 2);
    let (mac_a, mac_b) = ([2, 0, 0, 0, 0, 0xa], [2, 0, 0, 0, 0, 0xb]);
    let under = |port, mac| Underlay {
        port,
        mac,
        mtu: 1600,
    };
    let a = VxlanPort::over(
        "vxlan-a",
        VxlanConfig::new("ring", ip_a, ip_b, 100),
        under(ua, mac_a),
        Clock::tsc(),
    );
    let b = VxlanPort::over(
        "vxlan-b",
        VxlanConfig::new("ring", ip_b, ip_a, 100),
        under(ub, mac_b),
        Clock::tsc(),
    );
    a.neighbour().learn(mac_b, a.now_ms());
    let (a, b): (Arc<dyn Port>, Arc<dyn Port>) = (Arc::new(a), Arc::new(b));
    Path {
        tx: a.open_txq(0),
        rx: b.open_rxq(0),
        _ports: vec![a, b],
    }
}

/// An untagged IPv4/UDP frame of `size` bytes (flows vary by source port).
fn frame_bytes(size: usize, flow: u16) -> Vec<u8> {
    let mut f = vec![0u8; size];
    f[..6].copy_from_slice(&[2, 0, 0, 0, 1, 2]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 1, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[16..18].copy_from_slice(&((size - 14) as u16).to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&[10, 0, 0, 1]);
    f[30..34].copy_from_slice(&[10, 0, 0, 2]);
    f[34..36].copy_from_slice(&flow.to_be_bytes());
    f[36..38].copy_from_slice(&7u16.to_be_bytes());
    f
}

/// (tx cycles/packet, rx cycles/packet) over `bursts` bursts.
fn trial(
    path: &mut Path,
    pool: &mut PoolCache,
    size: usize,
    bursts: usize,
) -> Result<(f64, f64), String> {
    let frames: Vec<Vec<u8>> = (0..BATCH as u16)
        .map(|i| frame_bytes(size, 1000 + i))
        .collect();
    let (mut tx_cycles, mut rx_cycles, mut packets) = (0u64, 0u64, 0u64);
    for _ in 0..bursts {
        let mut batch = Batch::new();
        for f in &frames {
            let mut p = pool.alloc().ok_or("pool empty")?;
            p.set_len(f.len()).map_err(|_| "frame too big")?;
            p.data_mut().copy_from_slice(f);
            batch.push(p);
        }
        let t0 = nfv_tsc::now();
        let sent = path.tx.tx_burst(&mut batch, pool);
        let t1 = nfv_tsc::now();
        pool.free_batch(&mut batch);
        let mut got = Batch::new();
        let t2 = nfv_tsc::now();
        let n = path.rx.rx_burst(&mut got, pool);
        let t3 = nfv_tsc::now();
        path.rx.burst_done();
        if sent != BATCH || n != BATCH {
            return Err(format!("sent {sent}, received {n} of {BATCH}"));
        }
        pool.free_batch(&mut got);
        tx_cycles += t1 - t0;
        rx_cycles += t3 - t2;
        packets += n as u64;
    }
    Ok((
        tx_cycles as f64 / packets as f64,
        rx_cycles as f64 / packets as f64,
    ))
}

pub fn vxlan(a: VxlanArgs) -> Result<(), String> {
    let pool = PacketPool::new(
        "bench-vxlan",
        &MemoryConfig {
            frame_size: 2048,
            frames: 4096,
            hugepages: HugepageMode::Auto,
        },
    )
    .map_err(|e| e.to_string())?;
    let mut pool = pool.cache();
    let head = [
        "inner size",
        "path",
        "tx cyc/pkt (min..max)",
        "rx cyc/pkt (min..max)",
        "added by the tunnel (tx + rx)",
    ];
    let mut rows = Vec::new();
    for &size in &a.sizes {
        if !(60..=1518).contains(&size) {
            return Err(format!("size {size}: 60..=1518"));
        }
        let mut figures: [(Vec<f64>, Vec<f64>); 2] = Default::default();
        for _ in 0..a.rounds {
            for (i, make) in [plain as fn() -> Path, tunnel].iter().enumerate() {
                let mut path = make();
                trial(&mut path, &mut pool, size, a.bursts / 10)?; // warm-up
                let (tx, rx) = trial(&mut path, &mut pool, size, a.bursts)?;
                figures[i].0.push(tx);
                figures[i].1.push(rx);
            }
        }
        let m = |v: &[f64]| median(v).map_or(f64::NAN, |x| x.0);
        let added_tx = m(&figures[1].0) - m(&figures[0].0);
        let added_rx = m(&figures[1].1) - m(&figures[0].1);
        for (i, name) in ["ring (baseline)", "vxlan over ring"].iter().enumerate() {
            let added = if i == 1 {
                format!(
                    "{added_tx:.1} encap + {added_rx:.1} decap = {:.1}",
                    added_tx + added_rx
                )
            } else {
                "-".into()
            };
            rows.push(vec![
                size.to_string(),
                name.to_string(),
                fmt_range(median(&figures[i].0), 1),
                fmt_range(median(&figures[i].1), 1),
                added,
            ]);
        }
    }
    println!(
        "nfv-bench vxlan: {} rounds x {} bursts of {BATCH}, medians of TSC cycles per packet ({:.2} GHz TSC)\n",
        a.rounds,
        a.bursts,
        nfv_tsc::hz() as f64 / 1e9
    );
    print!("{}", text_table(&head, &rows));
    Ok(())
}
