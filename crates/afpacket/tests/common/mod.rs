//! Test helpers: frames, packet pools, dropping capabilities, and the raw
//! socket used as the peer inside a network namespace.
#![allow(dead_code)]

use nfv_afpacket::AfPacketConfig;
use nfv_mem::{Batch, HugepageMode, MemoryConfig, PacketPool, PoolCache};
use nfv_ports::{Port, PortConfig, PortKind, RxQueue};
use nfv_testutil::netns::Netns;
pub use nfv_testutil::rawsock::RawSocket;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// An ethertype for test frames (IEEE local experimental), so the
/// kernel's own traffic (IPv6 ND, MLD) is easy to tell apart.
pub const TEST_ETHERTYPE: u16 = 0x88b5;

pub fn pool() -> (Arc<PacketPool>, PoolCache) {
    let pool = PacketPool::new(
        "afpacket-test",
        &MemoryConfig {
            frame_size: 2048,
            frames: 16384,
            hugepages: HugepageMode::Never,
        },
    )
    .unwrap();
    let cache = pool.cache();
    (pool, cache)
}

pub fn port_config(name: &str, iface: &str, rxqs: usize, ring_size: usize) -> PortConfig {
    let mut ap = AfPacketConfig::new(iface);
    ap.ring_size = ring_size;
    PortConfig {
        name: name.into(),
        id: 1,
        rxqs,
        kind: PortKind::typed(ap),
    }
}

/// A test frame: `dst`, a fixed source, [`TEST_ETHERTYPE`], then `seq` as
/// 4 bytes and a pattern derived from it, `len` bytes in all.
pub fn frame(dst: [u8; 6], seq: u32, len: usize) -> Vec<u8> {
    let mut f = Vec::with_capacity(len);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&[0x02, 0x5e, 0x00, 0x00, 0x00, 0x01]);
    f.extend_from_slice(&TEST_ETHERTYPE.to_be_bytes());
    f.extend_from_slice(&seq.to_be_bytes());
    let mut x = seq.wrapping_mul(2_654_435_761);
    while f.len() < len {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        f.push((x >> 16) as u8);
    }
    f
}

pub fn is_test_frame(f: &[u8]) -> bool {
    f.len() >= 18 && f[12..14] == TEST_ETHERTYPE.to_be_bytes()
}

pub fn seq_of(f: &[u8]) -> u32 {
    u32::from_be_bytes([f[14], f[15], f[16], f[17]])
}

/// Polls `rxq` until `n` frames passing `keep` arrived or `timeout`
/// passed; returns their bytes (others are freed).
pub fn rx_n(
    rxq: &mut dyn RxQueue,
    cache: &mut PoolCache,
    n: usize,
    timeout: Duration,
    keep: impl Fn(&[u8]) -> bool,
) -> Vec<Vec<u8>> {
    let end = Instant::now() + timeout;
    let mut out = Vec::new();
    let mut batch = Batch::new();
    while out.len() < n && Instant::now() < end {
        if rxq.rx_burst(&mut batch, cache) == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
        for p in batch.drain(..) {
            if keep(p.data()) {
                out.push(p.data().to_vec());
            }
            cache.free(p);
        }
    }
    out
}

/// A batch holding copies of `frames`.
pub fn batch_of(cache: &mut PoolCache, frames: &[Vec<u8>]) -> Batch {
    let mut b = Batch::new();
    for f in frames {
        let mut p = cache.alloc().expect("pool empty");
        p.set_len(f.len()).unwrap();
        p.data_mut().copy_from_slice(f);
        b.push(p);
    }
    b
}

pub fn info(port: &dyn Port, key: &str) -> String {
    port.gauges()
        .text(key)
        .unwrap_or_else(|| panic!("no gauge {key}"))
}

pub fn info_u64(port: &dyn Port, key: &str) -> u64 {
    port.gauges()
        .count(key)
        .unwrap_or_else(|| panic!("no counter {key}"))
}

pub use nfv_testutil::netns::drop_all_capabilities as drop_all_caps;

/// Runs `f` on a thread that has entered network namespace `ns`.
pub fn in_ns<T: Send + 'static>(ns: &Netns, f: impl FnOnce() -> T + Send + 'static) -> T {
    ns.run_in(f)
}
