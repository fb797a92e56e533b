//! Times software GSO: a 64 KiB TCP/IPv4 frame (partial checksum, as a
//! TSO guest sends it) cut into 1448-byte segments with full checksums.
//! Prints the median of several runs in ns per frame and GB/s of payload.
//!
//! `cargo run --release -p nfv-offload --example gso_bench`

use std::hint::black_box;
use std::time::Instant;

use nfv_offload::checksum::sum;
use nfv_offload::{F_NEEDS_CSUM, GSO_TCPV4, OffloadMeta, segment, segment_count, validate};

const MSS: usize = 1448;
/// Ethernet + IPv4 + TCP headers.
const HDR: usize = 14 + 20 + 20;
/// The largest TCP payload a 64 KiB IPv4 packet carries.
const PAYLOAD: usize = 65535 - 40;

/// A TCP/IPv4 frame with a partial checksum; its checksum values do not
/// matter for the timing.
fn frame() -> Vec<u8> {
    let mut f = vec![0u8; HDR + PAYLOAD];
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    f[14] = 0x45;
    f[16..18].copy_from_slice(&((20 + 20 + PAYLOAD) as u16).to_be_bytes());
    f[22] = 64;
    f[23] = 6;
    f[26..30].copy_from_slice(&[10, 0, 0, 1]);
    f[30..34].copy_from_slice(&[10, 0, 0, 2]);
    f[34 + 12] = 5 << 4;
    f[34 + 13] = 0x18;
    for (i, b) in f[HDR..].iter_mut().enumerate() {
        *b = (i * 31) as u8;
    }
    f
}

fn main() {
    let f = frame();
    let meta = OffloadMeta {
        flags: F_NEEDS_CSUM,
        gso_type: GSO_TCPV4,
        gso_size: MSS as u16,
        csum_start: 34,
        csum_offset: 16,
        hdr_len: HDR as u16,
    };
    let layout = validate(&meta, &f).expect("a valid TSO frame");
    let n = segment_count(f.len(), &layout, MSS);
    let mut out = vec![vec![0u8; HDR + MSS]; n];
    let iters = 2000;
    let runs = median_of(15, || {
        let t = Instant::now();
        for _ in 0..iters {
            for (i, dst) in out.iter_mut().enumerate() {
                black_box(segment(black_box(&f), &layout, MSS, i, dst, true));
            }
        }
        t.elapsed().as_nanos() as f64 / f64::from(iters)
    });
    let median = runs[runs.len() / 2];
    println!(
        "gso_bench: {PAYLOAD} B TCP payload -> {n} segments of {MSS} B, full checksums: \
         {median:.0} ns per 64 KiB frame, {:.2} GB/s (median of {} runs of {iters}; min {:.0} ns, max {:.0} ns)",
        PAYLOAD as f64 / median,
        runs.len(),
        runs[0],
        runs[runs.len() - 1],
    );
    // The checksum pass alone, over the same bytes, for the split.
    let sums = median_of(15, || {
        let t = Instant::now();
        for _ in 0..iters {
            black_box(sum(black_box(&f[HDR..])));
        }
        t.elapsed().as_nanos() as f64 / f64::from(iters)
    });
    let m = sums[sums.len() / 2];
    println!(
        "checksum::sum alone: {m:.0} ns per 64 KiB, {:.2} GB/s",
        PAYLOAD as f64 / m
    );
}

/// `runs` timings from `f`, sorted.
fn median_of(runs: usize, mut f: impl FnMut() -> f64) -> Vec<f64> {
    let mut v: Vec<f64> = (0..runs).map(|_| f()).collect();
    v.sort_by(f64::total_cmp);
    v
}
