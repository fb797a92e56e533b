//! AF_PACKET socket plumbing: creating, configuring and binding sockets,
//! reading their statistics, and mapping an rx ring. Errors come back as
//! [`IfaceError`] naming the interface and the step, with EPERM/EACCES as
//! a permission error.

use nfv_mem::{Mapping, Populate};
use nfv_netdev::IfaceError;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

/// A fresh, unbound, non-blocking `AF_PACKET`/`SOCK_RAW` socket with
/// protocol 0: it receives nothing until [`bind`] names a protocol, so it
/// never sees other interfaces' traffic while being set up.
pub fn packet_socket(iface: &str) -> Result<OwnedFd, IfaceError> {
    // SAFETY: plain socket(2) call; the result is checked before use.
    let fd = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            0,
        )
    };
    if fd < 0 {
        return Err(IfaceError::from_os(
            iface,
            "creating an AF_PACKET socket",
            io::Error::last_os_error(),
        ));
    }
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `setsockopt(fd, level, opt, val)`.
pub fn setsockopt<T>(
    fd: &OwnedFd,
    level: libc::c_int,
    opt: libc::c_int,
    val: &T,
    iface: &str,
    what: &'static str,
) -> Result<(), IfaceError> {
    // SAFETY: `val` points at a live `T` of the size passed; the kernel
    // only reads it.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            opt,
            (val as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(IfaceError::from_os(iface, what, io::Error::last_os_error()));
    }
    Ok(())
}

/// `getsockopt(fd, SOL_PACKET, opt)` into a plain-data `T`.
pub fn getsockopt<T: Copy>(fd: &OwnedFd, opt: libc::c_int, init: T) -> io::Result<T> {
    let mut val = init;
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: `val` is a live, writable `T` and `len` its size; the kernel
    // writes at most `len` bytes.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            opt,
            (&mut val as *mut T).cast(),
            &mut len,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(val)
}

/// Binds the socket to interface `ifindex` for `protocol` (host order;
/// 0 = send only, `ETH_P_ALL` = receive everything).
pub fn bind(fd: &OwnedFd, ifindex: u32, protocol: u16, iface: &str) -> Result<(), IfaceError> {
    // SAFETY: sockaddr_ll is plain old data; all-zero is a valid value.
    let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sa.sll_family = libc::AF_PACKET as u16;
    sa.sll_protocol = protocol.to_be();
    sa.sll_ifindex = ifindex as i32;
    // SAFETY: `sa` is a valid sockaddr_ll of the size passed.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sa as *const libc::sockaddr_ll).cast(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(IfaceError::from_os(
            iface,
            "binding the AF_PACKET socket",
            io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// Reads and resets the socket's ring statistics (`PACKET_STATISTICS`
/// clears the kernel's counters on every read).
pub fn take_stats(fd: &OwnedFd) -> io::Result<libc::tpacket_stats_v3> {
    getsockopt(
        fd,
        libc::PACKET_STATISTICS,
        libc::tpacket_stats_v3 {
            tp_packets: 0,
            tp_drops: 0,
            tp_freeze_q_cnt: 0,
        },
    )
}

/// The system's page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no memory effects.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as usize } else { 4096 }
}

/// The rx ring of a socket, mapped shared with the kernel (unmapped when
/// the returned value drops).
pub fn map_ring(fd: &OwnedFd, len: usize, iface: &str) -> Result<Mapping, IfaceError> {
    Mapping::shared(fd.as_fd(), len, 0, Populate::Now)
        .map_err(|e| IfaceError::from_os(iface, "mapping the rx ring", e))
}
