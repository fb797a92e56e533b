//! The TAP device: `/dev/net/tun` descriptors attached to one interface
//! with `TUNSETIFF`, and what existed before.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

pub const TUN_PATH: &CStr = c"/dev/net/tun";

/// Why a step with the tun device failed.
#[derive(Debug)]
pub enum DevError {
    /// `/dev/net/tun` does not exist.
    NoDevice,
    /// The node exists but no driver answers (tun module not loaded).
    NoDriver,
    /// EPERM/EACCES.
    Permission(&'static str),
    /// EBUSY from TUNSETIFF: the TAP is single-queue and already attached.
    Busy,
    /// EINVAL from TUNSETIFF: the existing interface does not match the
    /// flags (not a TAP, or a different multi-queue setting).
    Mismatch,
    Other(&'static str, io::Error),
}

fn classify(what: &'static str, err: io::Error) -> DevError {
    match err.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => DevError::Permission(what),
        _ => DevError::Other(what, err),
    }
}

/// Opens a fresh, non-blocking descriptor of the tun device.
pub fn open_tun() -> Result<OwnedFd, DevError> {
    // SAFETY: a NUL-terminated path; the result is checked.
    let fd = unsafe {
        libc::open(
            TUN_PATH.as_ptr(),
            libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        let err = io::Error::last_os_error();
        return Err(match err.raw_os_error() {
            Some(libc::ENOENT) => DevError::NoDevice,
            Some(libc::ENODEV) | Some(libc::ENXIO) => DevError::NoDriver,
            _ => classify("opening /dev/net/tun for", err),
        });
    }
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn ifreq(name: &str, flags: libc::c_int) -> libc::ifreq {
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    req.ifr_ifru.ifru_flags = flags as libc::c_short;
    req
}

/// Attaches `fd` to TAP `name` (creating it if missing) as one queue;
/// `what` names the step in errors ("creating", "attaching to").
pub fn attach(
    fd: &OwnedFd,
    name: &str,
    multi_queue: bool,
    what: &'static str,
) -> Result<(), DevError> {
    // IFF_VNET_HDR: every frame read or written starts with a virtio-net
    // header (`VNET_HDR_LEN` bytes), through which the switch hands the
    // kernel partial checksums and large segments (`tx.rs`).
    let mut flags = libc::IFF_TAP | libc::IFF_NO_PI | libc::IFF_VNET_HDR;
    if multi_queue {
        flags |= libc::IFF_MULTI_QUEUE;
    }
    let mut req = ifreq(name, flags);
    // SAFETY: TUNSETIFF reads and writes the ifreq, which outlives the call.
    let r = unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            libc::TUNSETIFF,
            &mut req as *mut libc::ifreq,
        )
    };
    if r < 0 {
        let err = io::Error::last_os_error();
        return Err(match err.raw_os_error() {
            Some(libc::EBUSY) => DevError::Busy,
            Some(libc::EINVAL) => DevError::Mismatch,
            _ => classify(what, err),
        });
    }
    // What the kernel may hand *us*: nothing (no partial checksums, no
    // large segments: frames read fit a pool packet and are complete).
    // What we write may carry both; the kernel takes them whatever this
    // says.
    // SAFETY: TUNSETOFFLOAD takes its argument by value.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETOFFLOAD, 0 as libc::c_ulong) };
    if r < 0 {
        return Err(classify(
            "setting the offloads of",
            io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// The TUN flags of the interface `fd` is attached to (`IFF_PERSIST`,
/// `IFF_MULTI_QUEUE`, …).
pub fn flags(fd: &OwnedFd) -> Result<libc::c_int, DevError> {
    let mut req = ifreq("", 0);
    // SAFETY: TUNGETIFF writes the ifreq, which outlives the call.
    let r = unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            libc::TUNGETIFF,
            &mut req as *mut libc::ifreq,
        )
    };
    if r < 0 {
        return Err(classify("reading the flags of", io::Error::last_os_error()));
    }
    // SAFETY: TUNGETIFF filled the flags member of the union.
    Ok(libc::c_int::from(unsafe { req.ifr_ifru.ifru_flags }) & 0xffff)
}

/// The kernel's count of frames it dropped on their way to the switch
/// (the TAP's `tx_dropped`: the switch did not read fast enough), from
/// `/proc/net/dev` of the calling thread's namespace.
pub fn kernel_tx_dropped(name: &str) -> Option<u64> {
    tx_dropped_in(&std::fs::read_to_string("/proc/self/net/dev").ok()?, name)
}

/// The `tx_dropped` column of interface `name` in `/proc/net/dev` text.
fn tx_dropped_in(text: &str, name: &str) -> Option<u64> {
    let line = text
        .lines()
        .find_map(|l| l.trim_start().strip_prefix(name)?.strip_prefix(':'))?;
    // rx: bytes packets errs drop fifo frame compressed multicast,
    // tx: bytes packets errs drop …
    line.split_whitespace().nth(11)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tx_dropped_is_read_from_proc_net_dev() {
        let text = "\
Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:    1234      10    0    0    0     0          0         0     1234      10    0    0    0     0       0          0
 tap10: 9999999   77777    1    2    3     4          5         6  8888888   66666    7   42    9    10     11         12
  tap1:       0       0    0    0    0     0          0         0        0       0    0    5    0     0       0          0
";
        assert_eq!(tx_dropped_in(text, "tap10"), Some(42));
        assert_eq!(tx_dropped_in(text, "tap1"), Some(5));
        assert_eq!(tx_dropped_in(text, "lo"), Some(0));
        assert_eq!(tx_dropped_in(text, "tap"), None);
        assert_eq!(tx_dropped_in("garbage", "tap1"), None);
    }
}
