//! Shared by the AF_XDP tests: a veth pair with one end in a namespace
//! (a [`RawSocket`] there is the other side of the wire), test frames,
//! and a look at what is attached to an interface.

#![allow(dead_code)]

use nfv_mem::{MemoryConfig, PacketPool, PoolCache};
use nfv_testutil::netns::{Netns, Veth, run};
pub use nfv_testutil::rawsock::RawSocket;
use std::sync::Arc;

/// Ethertype of test frames (IEEE local experimental), so the namespace's
/// own chatter (IPv6 neighbour discovery and the like) is easy to skip.
pub const ETHERTYPE: u16 = 0x88b5;
pub const MAGIC: &[u8; 6] = b"NFVXDP";

pub struct Env {
    // Drop order: the pair before its namespace.
    pub veth: Veth,
    pub ns: Netns,
}

/// A veth pair with its inner end in a fresh namespace, or `None` after
/// reporting the test as skipped.
pub fn env(test: &str) -> Option<Env> {
    if let Some(why) = nfv_testutil::netns::unavailable() {
        nfv_testutil::skip(test, &why);
        return None;
    }
    let ns = Netns::new("nxn").expect("namespace");
    let veth = Veth::into_ns(&ns, "10.77.0.2/24").expect("veth pair");
    Some(Env { veth, ns })
}

pub fn pool() -> PoolCache {
    let cfg = MemoryConfig {
        frame_size: 2048,
        frames: 4096,
        hugepages: nfv_mem::HugepageMode::Never,
    };
    PacketPool::new("afxdp-test", &cfg).expect("pool").cache()
}

/// A test frame: `dst`, `src`, [`ETHERTYPE`], [`MAGIC`], `seq` (u32 BE),
/// then a pattern derived from `seq`, `len` bytes in all.
pub fn frame(dst: [u8; 6], src: [u8; 6], seq: u32, len: usize) -> Vec<u8> {
    let mut f = Vec::with_capacity(len);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ETHERTYPE.to_be_bytes());
    f.extend_from_slice(MAGIC);
    f.extend_from_slice(&seq.to_be_bytes());
    let mut x = seq.wrapping_mul(2654435761);
    while f.len() < len {
        x = x.wrapping_mul(1103515245).wrapping_add(12345);
        f.push((x >> 16) as u8);
    }
    f.truncate(len);
    f
}

/// The sequence number of a test frame, `None` for anything else.
pub fn test_seq(f: &[u8]) -> Option<u32> {
    if f.len() < 24 || f[12..14] != ETHERTYPE.to_be_bytes() || &f[14..20] != MAGIC {
        return None;
    }
    Some(u32::from_be_bytes([f[20], f[21], f[22], f[23]]))
}

/// What `ip link show dev IFACE` says about XDP, or `None` if nothing is
/// attached.
pub fn xdp_on(iface: &str) -> Option<String> {
    let out = run("ip", &["link", "show", "dev", iface]).expect("ip link show");
    out.contains("xdp").then_some(out)
}

/// The MAC address of a host-side interface.
pub fn host_mac(iface: &str) -> [u8; 6] {
    nfv_netdev::mac(iface).expect("host MAC")
}

pub type Port = Arc<dyn nfv_ports::Port>;

pub fn info(port: &Port, key: &str) -> String {
    port.gauges()
        .text(key)
        .unwrap_or_else(|| panic!("the port has no gauge {key}"))
}
