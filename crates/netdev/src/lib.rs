//! Kernel network interfaces, as the kernel-facing ports (AF_XDP,
//! AF_PACKET, TAP) need them: the index of a name, its MTU, bringing it
//! up. Errors say which interface and what the user can do about it.

use nfv_wire::l2::TAGGED_HEADER_LEN;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Longest interface name the kernel accepts (IFNAMSIZ - 1).
pub const MAX_NAME: usize = libc::IFNAMSIZ - 1;

#[derive(Debug, thiserror::Error)]
pub enum IfaceError {
    #[error("interface name {0:?} is not valid (1..=15 bytes, no '/', ':' or whitespace)")]
    BadName(String),
    #[error("interface {0:?} does not exist (see `ip link show`)")]
    Missing(String),
    #[error(
        "{what} on interface {iface:?}: permission denied (needs root or CAP_NET_ADMIN/CAP_NET_RAW)"
    )]
    Permission { iface: String, what: &'static str },
    #[error(
        "interface {iface:?} has MTU {mtu}, so frames of up to {need} bytes, but the \
         switch's packet buffers hold {have} bytes; lower the MTU \
         (`ip link set {iface} mtu {max_mtu}`) or raise memory.frame_size"
    )]
    MtuTooBig {
        iface: String,
        mtu: usize,
        need: usize,
        have: usize,
        max_mtu: usize,
    },
    #[error("{what} on interface {iface:?}: {err}")]
    Io {
        iface: String,
        what: &'static str,
        err: io::Error,
    },
}

impl IfaceError {
    /// Wraps an OS error, turning EPERM/EACCES into [`IfaceError::Permission`]
    /// and ENODEV into [`IfaceError::Missing`].
    pub fn from_os(iface: &str, what: &'static str, err: io::Error) -> IfaceError {
        match err.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => IfaceError::Permission {
                iface: iface.to_string(),
                what,
            },
            Some(libc::ENODEV) | Some(libc::ENXIO) => IfaceError::Missing(iface.to_string()),
            _ => IfaceError::Io {
                iface: iface.to_string(),
                what,
                err,
            },
        }
    }
}

/// Checks a name the way the kernel does (`dev_valid_name`).
pub fn check_name(name: &str) -> Result<(), IfaceError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME
        && name != "."
        && name != ".."
        && !name
            .bytes()
            .any(|b| b == b'/' || b == b':' || b.is_ascii_whitespace() || b == 0);
    if ok {
        Ok(())
    } else {
        Err(IfaceError::BadName(name.to_string()))
    }
}

/// The interface's index.
pub fn index(name: &str) -> Result<u32, IfaceError> {
    check_name(name)?;
    let c = CString::new(name).map_err(|_| IfaceError::BadName(name.to_string()))?;
    // SAFETY: `c` is a valid NUL-terminated string for the call's duration.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        let err = io::Error::last_os_error();
        return Err(match err.raw_os_error() {
            Some(libc::ENODEV) | Some(libc::ENXIO) | Some(0) | None => {
                IfaceError::Missing(name.to_string())
            }
            _ => IfaceError::from_os(name, "looking up", err),
        });
    }
    Ok(idx)
}

fn ifreq(name: &str) -> Result<libc::ifreq, IfaceError> {
    check_name(name)?;
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    Ok(req)
}

fn ioctl_socket(name: &str, what: &'static str) -> Result<OwnedFd, IfaceError> {
    // SAFETY: plain socket(2) call; the result is checked before use.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(IfaceError::from_os(name, what, io::Error::last_os_error()));
    }
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn ioctl(
    name: &str,
    what: &'static str,
    op: libc::Ioctl,
    req: &mut libc::ifreq,
) -> Result<(), IfaceError> {
    let sock = ioctl_socket(name, what)?;
    // SAFETY: `req` is a valid ifreq that outlives the call; `op` is an
    // interface ioctl that reads and writes only that struct.
    let r = unsafe { libc::ioctl(sock.as_raw_fd(), op, req as *mut libc::ifreq) };
    if r < 0 {
        return Err(IfaceError::from_os(name, what, io::Error::last_os_error()));
    }
    Ok(())
}

/// The interface's MTU (L3 bytes; a frame adds an Ethernet header, and a
/// VLAN tag when tagged).
pub fn mtu(name: &str) -> Result<usize, IfaceError> {
    let mut req = ifreq(name)?;
    ioctl(name, "reading the MTU", libc::SIOCGIFMTU, &mut req)?;
    // SAFETY: SIOCGIFMTU filled the `ifru_mtu` member of the union.
    Ok(unsafe { req.ifr_ifru.ifru_mtu } as usize)
}

/// The interface's MTU, if its largest frame ([`max_frame`]) fits in
/// `buffer` bytes; otherwise an error saying which MTU would.
pub fn mtu_fitting(name: &str, buffer: usize) -> Result<usize, IfaceError> {
    let mtu = mtu(name)?;
    let need = mtu + TAGGED_HEADER_LEN;
    if need > buffer {
        return Err(IfaceError::MtuTooBig {
            iface: name.to_string(),
            mtu,
            need,
            have: buffer,
            max_mtu: buffer.saturating_sub(TAGGED_HEADER_LEN),
        });
    }
    Ok(mtu)
}

/// Largest Ethernet frame (without FCS) the interface sends or receives,
/// allowing one VLAN tag.
pub fn max_frame(name: &str) -> Result<usize, IfaceError> {
    Ok(mtu(name)? + TAGGED_HEADER_LEN)
}

/// The interface's flags (`IFF_UP`, `IFF_RUNNING`, …).
pub fn flags(name: &str) -> Result<i32, IfaceError> {
    let mut req = ifreq(name)?;
    ioctl(name, "reading the flags", libc::SIOCGIFFLAGS, &mut req)?;
    // SAFETY: SIOCGIFFLAGS filled the `ifru_flags` member of the union.
    Ok(i32::from(unsafe { req.ifr_ifru.ifru_flags }))
}

/// Sets the interface administratively up (no-op if it already is).
pub fn set_up(name: &str) -> Result<(), IfaceError> {
    let f = flags(name)?;
    if f & libc::IFF_UP != 0 {
        return Ok(());
    }
    let mut req = ifreq(name)?;
    req.ifr_ifru.ifru_flags = (f | libc::IFF_UP) as libc::c_short;
    ioctl(name, "setting the link up", libc::SIOCSIFFLAGS, &mut req)
}

/// The interface's MAC address.
pub fn mac(name: &str) -> Result<[u8; 6], IfaceError> {
    let mut req = ifreq(name)?;
    ioctl(
        name,
        "reading the MAC address",
        libc::SIOCGIFHWADDR,
        &mut req,
    )?;
    // SAFETY: SIOCGIFHWADDR filled the `ifru_hwaddr` member of the union.
    let sa = unsafe { req.ifr_ifru.ifru_hwaddr };
    let mut m = [0u8; 6];
    for (d, s) in m.iter_mut().zip(sa.sa_data.iter()) {
        *d = *s as u8;
    }
    Ok(m)
}

/// What `ethtool -i` says about an interface: the driver (`"tun"` for TUN
/// and TAP, `"veth"`, …) and its bus info (`"tap"` or `"tun"` for the tun
/// driver).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DriverInfo {
    pub driver: String,
    pub bus_info: String,
}

/// `struct ethtool_drvinfo` (uapi/linux/ethtool.h); not in `libc`.
#[repr(C)]
struct EthtoolDrvinfo {
    cmd: u32,
    driver: [u8; 32],
    version: [u8; 32],
    fw_version: [u8; 32],
    bus_info: [u8; 32],
    erom_version: [u8; 32],
    reserved2: [u8; 12],
    n_priv_flags: u32,
    n_stats: u32,
    testinfo_len: u32,
    eedump_len: u32,
    regdump_len: u32,
}

const ETHTOOL_GDRVINFO: u32 = 0x0000_0003;

fn c_str(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// The interface's driver (`ETHTOOL_GDRVINFO`). Interfaces whose driver
/// has no ethtool support (`lo`) report an empty driver name.
pub fn driver_info(name: &str) -> Result<DriverInfo, IfaceError> {
    let mut info = EthtoolDrvinfo {
        cmd: ETHTOOL_GDRVINFO,
        driver: [0; 32],
        version: [0; 32],
        fw_version: [0; 32],
        bus_info: [0; 32],
        erom_version: [0; 32],
        reserved2: [0; 12],
        n_priv_flags: 0,
        n_stats: 0,
        testinfo_len: 0,
        eedump_len: 0,
        regdump_len: 0,
    };
    let mut req = ifreq(name)?;
    // The kernel writes the answer through this pointer: `info` outlives
    // the ioctl below and is the struct SIOCETHTOOL/GDRVINFO expects.
    req.ifr_ifru.ifru_data = (&mut info as *mut EthtoolDrvinfo).cast();
    match ioctl(name, "reading the driver", libc::SIOCETHTOOL, &mut req) {
        Ok(()) => Ok(DriverInfo {
            driver: c_str(&info.driver),
            bus_info: c_str(&info.bus_info),
        }),
        Err(IfaceError::Io { err, .. }) if err.raw_os_error() == Some(libc::EOPNOTSUPP) => {
            Ok(DriverInfo {
                driver: String::new(),
                bus_info: String::new(),
            })
        }
        Err(e) => Err(e),
    }
}

/// The interface's (rx, tx) queue counts as the kernel uses them
/// (`real_num_rx_queues`/`real_num_tx_queues`, the `rx-N`/`tx-N`
/// entries under `/sys/class/net/NAME/queues`).
pub fn queues(name: &str) -> Result<(usize, usize), IfaceError> {
    check_name(name)?;
    let dir = format!("/sys/class/net/{name}/queues");
    let entries = std::fs::read_dir(&dir).map_err(|err| match err.kind() {
        io::ErrorKind::NotFound => IfaceError::Missing(name.to_string()),
        _ => IfaceError::from_os(name, "counting the queues", err),
    })?;
    let (mut rx, mut tx) = (0, 0);
    for e in entries.flatten() {
        let n = e.file_name();
        let n = n.to_string_lossy();
        if n.starts_with("rx-") {
            rx += 1;
        } else if n.starts_with("tx-") {
            tx += 1;
        }
    }
    Ok((rx, tx))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_has_a_queue_each_way() {
        let (rx, tx) = queues("lo").unwrap();
        assert!(rx >= 1 && tx >= 1, "lo: {rx} rx, {tx} tx queues");
        assert!(matches!(
            queues("nfv-no-such0"),
            Err(IfaceError::Missing(_))
        ));
    }

    #[test]
    fn names_are_checked_like_the_kernel() {
        for (name, ok) in [
            ("eth0", true),
            ("veth-a.10", true),
            ("0123456789abcde", true),
            ("0123456789abcdef", false),
            ("", false),
            (".", false),
            ("a/b", false),
            ("a:b", false),
            ("a b", false),
        ] {
            assert_eq!(check_name(name).is_ok(), ok, "{name:?}");
        }
    }

    #[test]
    fn loopback_is_found_and_missing_names_say_so() {
        assert_eq!(index("lo").unwrap(), 1);
        assert_eq!(mtu("lo").unwrap(), 65536);
        assert!(flags("lo").is_ok());
        let e = index("nfv-no-such0").unwrap_err();
        assert!(matches!(e, IfaceError::Missing(_)), "{e}");
        assert!(e.to_string().contains("does not exist"), "{e}");
        assert_eq!(driver_info("lo").unwrap().driver, "");
        assert!(matches!(
            driver_info("nfv-no-such0"),
            Err(IfaceError::Missing(_))
        ));
    }
}
