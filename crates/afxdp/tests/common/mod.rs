//! Shared by the AF_XDP tests: a veth pair with one end in a namespace, a
//! raw AF_PACKET socket inside that namespace (the other side of the
//! wire), test frames, and a look at what is attached to an interface.

#![allow(dead_code)]

use nfv_mem::{MemoryConfig, PacketPool, PoolCache};
use nfv_testutil::netns::{Netns, Veth, run};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

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

/// Runs `f` on a thread that entered namespace `ns` (network namespaces
/// are per thread; sockets made there stay in that namespace).
pub fn in_netns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    nfv_testutil::netns::run_in_named(ns, f)
}

/// A raw AF_PACKET socket bound to `iface`, all protocols.
pub struct RawSocket {
    fd: OwnedFd,
    ifindex: i32,
}

impl RawSocket {
    /// Opens it inside namespace `ns`.
    pub fn in_ns(ns: &str, iface: &str) -> RawSocket {
        let iface = iface.to_string();
        in_netns(ns, move || RawSocket::open(&iface))
    }

    pub fn open(iface: &str) -> RawSocket {
        let ifindex = nfv_netdev::index(iface).expect("interface in namespace") as i32;
        let proto = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: plain socket(2); checked before use.
        let fd = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                proto as i32,
            )
        };
        assert!(fd >= 0, "AF_PACKET socket: {}", io::Error::last_os_error());
        // SAFETY: a fresh fd nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: all-zero is a valid sockaddr_ll.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto;
        sll.sll_ifindex = ifindex;
        // SAFETY: `sll` is a valid sockaddr_ll of the size passed.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        assert_eq!(r, 0, "bind AF_PACKET: {}", io::Error::last_os_error());
        // Room for every frame a test sends before it reads them.
        let rcvbuf: libc::c_int = 32 << 20;
        // SAFETY: `rcvbuf` is a valid int of the size passed.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                (&rcvbuf as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as u32,
            )
        };
        let tv = libc::timeval {
            tv_sec: 0,
            tv_usec: 100_000,
        };
        // SAFETY: `tv` is a valid timeval of the size passed.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as u32,
            )
        };
        RawSocket { fd, ifindex }
    }

    pub fn send(&self, frame: &[u8]) {
        // SAFETY: all-zero is a valid sockaddr_ll.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_ifindex = self.ifindex;
        sll.sll_halen = 6;
        sll.sll_addr[..6].copy_from_slice(&frame[..6]);
        loop {
            // SAFETY: `frame` and `sll` are valid for the sizes passed.
            let r = unsafe {
                libc::sendto(
                    self.fd.as_raw_fd(),
                    frame.as_ptr().cast(),
                    frame.len(),
                    0,
                    (&sll as *const libc::sockaddr_ll).cast(),
                    std::mem::size_of::<libc::sockaddr_ll>() as u32,
                )
            };
            if r == frame.len() as isize {
                return;
            }
            let e = io::Error::last_os_error();
            assert!(
                matches!(e.raw_os_error(), Some(libc::ENOBUFS) | Some(libc::EAGAIN)),
                "send: {e}"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The next incoming frame, or `None` after the 100 ms receive timeout.
    pub fn recv(&self) -> Option<Vec<u8>> {
        let mut buf = vec![0u8; 4096];
        // SAFETY: `buf` is writable for its length.
        let n = unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            return None;
        }
        buf.truncate(n as usize);
        Some(buf)
    }
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
    port.info()
        .into_iter()
        .find(|(k, _)| *k == key)
        .unwrap_or_else(|| panic!("info has no {key}"))
        .1
}
