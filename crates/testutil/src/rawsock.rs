//! A raw AF_PACKET socket on one interface: the far side of the wire for
//! tests of ports that sit on the other end of a veth pair.

use crate::netns::Netns;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// Every ethertype, for [`RawSocket::open`].
pub const ETH_P_ALL: u16 = libc::ETH_P_ALL as u16;

/// How long [`RawSocket::recv`] waits for a frame.
pub const RECV_TIMEOUT: Duration = Duration::from_millis(100);

/// Room for every frame a test sends before it reads them.
const RCVBUF: libc::c_int = 32 << 20;

/// A raw AF_PACKET socket bound to one interface and ethertype. Panics
/// (failing the test) where a call that should not fail does.
pub struct RawSocket {
    fd: OwnedFd,
}

impl RawSocket {
    /// Opens a socket bound to `iface` for ethertype `proto` (host order;
    /// [`ETH_P_ALL`] for every frame) in the calling thread's namespace.
    pub fn open(iface: &str, proto: u16) -> RawSocket {
        let name = CString::new(iface).expect("interface name without NUL");
        // SAFETY: `name` is a valid NUL-terminated string for the call.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        assert_ne!(
            ifindex,
            0,
            "interface {iface}: {}",
            io::Error::last_os_error()
        );
        // Protocol 0 until bound: a socket made with a protocol already
        // receives from every interface, and those frames would stay queued.
        // SAFETY: plain socket(2); checked before use.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        assert!(fd >= 0, "AF_PACKET socket: {}", io::Error::last_os_error());
        // SAFETY: a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: all-zero is a valid sockaddr_ll.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto.to_be();
        sll.sll_ifindex = ifindex as i32;
        // SAFETY: `sll` is a valid sockaddr_ll of the size passed.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        assert_eq!(r, 0, "bind AF_PACKET: {}", io::Error::last_os_error());
        // Best effort: a thread that dropped CAP_NET_ADMIN cannot force the
        // size, and the default still serves tests that read as they send.
        // SAFETY: `RCVBUF` is a valid int of the size passed.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                (&RCVBUF as *const libc::c_int).cast(),
                size_of::<libc::c_int>() as u32,
            )
        };
        let tv = libc::timeval {
            tv_sec: 0,
            tv_usec: RECV_TIMEOUT.as_micros() as libc::suseconds_t,
        };
        // SAFETY: `tv` is a valid timeval of the size passed.
        let r = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                size_of::<libc::timeval>() as u32,
            )
        };
        // Without the timeout a test that expects no frame would hang.
        assert_eq!(r, 0, "SO_RCVTIMEO: {}", io::Error::last_os_error());
        RawSocket { fd }
    }

    /// [`RawSocket::open`] inside `ns`: the socket stays in that namespace
    /// when used from any thread.
    pub fn in_ns(ns: &Netns, iface: &str, proto: u16) -> RawSocket {
        let iface = iface.to_string();
        ns.run_in(move || RawSocket::open(&iface, proto))
    }

    /// Sends one whole frame (Ethernet header included) out of the
    /// interface, retrying while the kernel is out of buffers.
    pub fn send(&self, frame: &[u8]) {
        loop {
            // SAFETY: `frame` is a live buffer of the length passed.
            let r =
                unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
            if r == frame.len() as isize {
                return;
            }
            let e = io::Error::last_os_error();
            assert!(
                matches!(e.raw_os_error(), Some(libc::ENOBUFS | libc::EAGAIN)),
                "send: {e}"
            );
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    /// The next incoming frame, or `None` after [`RECV_TIMEOUT`].
    pub fn recv(&self) -> Option<Vec<u8>> {
        // Larger than any frame a test sends, so none is cut short.
        let mut buf = vec![0u8; 65536];
        // SAFETY: `buf` is writable for its length.
        let n = unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            return None;
        }
        buf.truncate(n as usize);
        Some(buf)
    }

    /// Frames passing `keep` until `n` arrived or `timeout` passed.
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
