//! Times `Tracker::process` on established connections: a quick look, not
//! a benchmark harness. Usage: `cargo run --release --example process_bench
//! [connections...]` (default 10000 1000000).
//!
//! Besides the time per packet it prints how many index cache lines a
//! lookup reads (the slot adds two more, three for a reply: see the layout
//! test in `table.rs`), and a floor for the same walk: two dependent random reads
//! per packet (a bucket, then a slot) over buffers as large as the index
//! and the slab, which is what the memory system alone costs.

use std::hint::black_box;
use std::time::Instant;

use nfv_conntrack::key::proto;
use nfv_conntrack::{
    Config, ConnKey, CtState, Family, PacketSummary, TcpFlags, TcpSegment, Tracker,
};

const PACKETS: usize = 4_000_000;
const BATCH: usize = 32;

fn key(i: u32) -> ConnKey {
    let src = 0x0a00_0000 | u128::from(i >> 8);
    ConnKey::new(
        0,
        Family::V4,
        proto::TCP,
        src,
        0x0b00_0001,
        (i & 0xff) as u16 + 1024,
        80,
    )
}

fn seg(flags: u8, seq: u32, ack: u32) -> TcpSegment {
    TcpSegment {
        flags: TcpFlags(flags),
        seq,
        ack,
        window: 65535,
        wscale: None,
        payload_len: 0,
    }
}

/// Opens `n` TCP connections through the full handshake.
fn established(n: u32) -> Tracker {
    let config = Config {
        capacity: n,
        ..Config::default()
    };
    let mut t = Tracker::new(config).expect("valid config");
    for i in 0..n {
        let k = key(i);
        let syn = PacketSummary::tcp(k, seg(TcpFlags::SYN, 100, 0));
        let v = t.process(&syn, 0);
        t.commit(&syn, &v, 0).expect("room");
        let back = k.reversed().expect("TCP reverses");
        t.process(
            &PacketSummary::tcp(back, seg(TcpFlags::SYN | TcpFlags::ACK, 900, 101)),
            0,
        );
        t.process(&PacketSummary::tcp(k, seg(TcpFlags::ACK, 101, 901)), 0);
    }
    t
}

/// Two dependent random cache-line reads per packet, over buffers the size
/// of the index (64 bytes per connection) and the slab (256 bytes per
/// connection), visited in the benchmark's order. Returns ns per packet.
fn memory_floor(n: u32, order: &[u32]) -> f64 {
    let lines = |per_conn: usize| vec![[0u64; 8]; n as usize * per_conn];
    let mut index = lines(1);
    let slab = lines(4);
    // Each bucket line names a slot line, as an index entry does.
    for (i, line) in index.iter_mut().enumerate() {
        line[0] = (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) % slab.len() as u64;
    }
    let start = Instant::now();
    let mut sum = 0u64;
    for &c in order {
        let bucket = &index[c as usize % index.len()];
        sum = sum.wrapping_add(slab[bucket[0] as usize][0]);
    }
    black_box(sum);
    start.elapsed().as_nanos() as f64 / order.len() as f64
}

fn main() {
    let args: Vec<u32> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let sizes = if args.is_empty() {
        vec![10_000, 1_000_000]
    } else {
        args
    };
    for n in sizes {
        let start = Instant::now();
        let mut t = established(n);
        let setup = start.elapsed();
        // A pseudo-random walk over the connections, built before timing.
        let walk: Vec<u32> = (0..PACKETS as u64)
            .map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as u32 % n)
            .collect();
        let order: Vec<PacketSummary> = walk
            .iter()
            .map(|&c| PacketSummary::tcp(key(c), seg(TcpFlags::ACK, 101, 901)))
            .collect();
        let start = Instant::now();
        let mut established = 0u64;
        for pkt in &order {
            let v = t.process(black_box(pkt), 1);
            established += u64::from(v.state.has(CtState::ESTABLISHED));
        }
        let elapsed = start.elapsed();
        assert_eq!(established, PACKETS as u64, "every packet is +est");
        let ns = elapsed.as_nanos() as f64 / PACKETS as f64;
        println!(
            "{n:>8} connections: setup {:.2?} ({:.0} k connections/s: SYN committed, \
             SYN-ACK, ACK), process {ns:.1} ns/packet ({:.2} Mpps, one core)",
            setup,
            f64::from(n) / setup.as_secs_f64() / 1e3,
            1e3 / ns
        );
        let start = Instant::now();
        let mut verdicts = Vec::with_capacity(BATCH);
        let mut established = 0u64;
        for batch in order.chunks(BATCH) {
            verdicts.clear();
            t.process_batch(black_box(batch), 1, &mut verdicts);
            established += verdicts
                .iter()
                .filter(|v| v.state.has(CtState::ESTABLISHED))
                .count() as u64;
        }
        assert_eq!(established, PACKETS as u64, "every packet is +est");
        let ns = start.elapsed().as_nanos() as f64 / PACKETS as f64;
        println!("{n:>8} connections: process_batch({BATCH}) {ns:.1} ns/packet");
        let probes = t.index_probe_stats();
        println!(
            "{n:>8} connections: index lines per lookup mean {:.3} max {}; \
             memory floor (2 dependent random lines) {:.1} ns/packet",
            probes.mean,
            probes.max,
            memory_floor(n, &walk)
        );
    }
}
