//! Test helpers: raw sockets made inside a network namespace, frames,
//! packet pools, dropping capabilities.
#![allow(dead_code)]

use nfv_mem::{Batch, HugepageMode, MemoryConfig, PacketPool, PoolCache};
use nfv_ports::{Port, PortConfig, PortKind, RxQueue, config::AfPacketConfig};
use nfv_testutil::netns::Netns;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
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
        kind: PortKind::AfPacket(ap),
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

/// A raw AF_PACKET socket on one interface, for the other side of a test.
pub struct RawSock {
    fd: OwnedFd,
}

impl RawSock {
    /// Opens a socket bound to `iface` for ethertype `proto` in the
    /// calling thread's namespace, with a receive timeout.
    pub fn bind(iface: &str, proto: u16) -> RawSock {
        // SAFETY: plain socket call, checked.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        assert!(fd >= 0, "socket: {}", io::Error::last_os_error());
        // SAFETY: fresh descriptor.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let idx = nfv_netdev::index(iface).unwrap();
        // SAFETY: all-zero sockaddr_ll is valid.
        let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sa.sll_family = libc::AF_PACKET as u16;
        sa.sll_protocol = proto.to_be();
        sa.sll_ifindex = idx as i32;
        // SAFETY: valid address of the right size.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sa as *const libc::sockaddr_ll).cast(),
                size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        assert_eq!(r, 0, "bind: {}", io::Error::last_os_error());
        let tv = libc::timeval {
            tv_sec: 0,
            tv_usec: 100_000,
        };
        // SAFETY: valid timeval.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                size_of::<libc::timeval>() as u32,
            )
        };
        let big: libc::c_int = 8 << 20;
        // SAFETY: valid int option.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                (&big as *const libc::c_int).cast(),
                4,
            )
        };
        RawSock { fd }
    }

    /// Opens the socket inside `ns` (sockets keep their namespace when
    /// used from other threads).
    pub fn in_ns(ns: &Netns, iface: &str, proto: u16) -> RawSock {
        let iface = iface.to_string();
        in_ns(ns, move || RawSock::bind(&iface, proto))
    }

    pub fn send(&self, frame: &[u8]) {
        loop {
            // SAFETY: frame is a live buffer of the given length.
            let r =
                unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
            if r == frame.len() as isize {
                return;
            }
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ENOBUFS) || e.raw_os_error() == Some(libc::EAGAIN) {
                std::thread::sleep(Duration::from_micros(100));
                continue;
            }
            panic!("send: {e}");
        }
    }

    /// One frame, or `None` after the receive timeout.
    pub fn recv(&self) -> Option<Vec<u8>> {
        let mut buf = vec![0u8; 65536];
        // SAFETY: buf is a live, writable buffer of the given length.
        let r = unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if r < 0 {
            return None;
        }
        buf.truncate(r as usize);
        Some(buf)
    }

    /// Frames until `n` arrived or `timeout` passed.
    pub fn recv_n(
        &self,
        n: usize,
        timeout: Duration,
        keep: impl Fn(&[u8]) -> bool,
    ) -> Vec<Vec<u8>> {
        let end = Instant::now() + timeout;
        let mut out = Vec::new();
        while out.len() < n && Instant::now() < end {
            if let Some(f) = self.recv()
                && keep(&f)
            {
                out.push(f);
            }
        }
        out
    }
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
    port.info()
        .into_iter()
        .find(|(k, _)| *k == key)
        .unwrap_or_else(|| panic!("no info key {key}"))
        .1
}

pub fn info_u64(port: &dyn Port, key: &str) -> u64 {
    info(port, key).parse().unwrap()
}

pub use nfv_testutil::netns::drop_all_capabilities as drop_all_caps;

/// Runs `f` on a thread that has entered network namespace `ns`.
pub fn in_ns<T: Send + 'static>(ns: &Netns, f: impl FnOnce() -> T + Send + 'static) -> T {
    ns.run_in(f)
}
