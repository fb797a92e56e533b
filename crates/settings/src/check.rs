//! Value checks with the messages users see; each returns the typed value
//! or the message (the caller adds file, line and field).

use std::net::{Ipv4Addr, Ipv6Addr};
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

/// An integer in `range`.
pub fn int_in(n: i64, range: &RangeInclusive<i64>) -> Result<i64, String> {
    if range.contains(&n) {
        Ok(n)
    } else if *range.end() == i64::MAX {
        Err(format!(
            "{n} is out of range: must be at least {}",
            range.start()
        ))
    } else {
        Err(format!(
            "{n} is out of range {}..={}",
            range.start(),
            range.end()
        ))
    }
}

/// A power of two in `range` (0 also accepted when `zero_ok`).
pub fn pow2(n: i64, range: &RangeInclusive<i64>, zero_ok: bool) -> Result<usize, String> {
    if (zero_ok && n == 0) || (range.contains(&n) && (n as u64).is_power_of_two()) {
        return Ok(n as usize);
    }
    let zero = if zero_ok { "0 or " } else { "" };
    Err(format!(
        "{n} is not {zero}a power of two in {}..={}",
        range.start(),
        range.end()
    ))
}

/// A name of `[a-zA-Z0-9_.-]{1,max}`.
pub fn name(s: &str, max: usize) -> Result<String, String> {
    if is_valid_name(s, max) {
        Ok(s.to_string())
    } else {
        Err(format!(
            "{s:?} is not a valid name: use 1 to {max} of the characters a-z A-Z 0-9 _ . -"
        ))
    }
}

pub fn is_valid_name(s: &str, max: usize) -> bool {
    (1..=max).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// A non-empty path; a relative one is taken relative to `base` (the
/// directory of the config file).
pub fn file_path(s: &str, base: &Path) -> Result<PathBuf, String> {
    if s.is_empty() {
        return Err("the path is empty".into());
    }
    if s.contains('\0') {
        return Err("the path contains a NUL byte".into());
    }
    Ok(base.join(s))
}

/// A Unix socket path: [`file_path`], at most [`crate::MAX_SOCKET_PATH`]
/// bytes once resolved.
pub fn socket_path(s: &str, base: &Path) -> Result<PathBuf, String> {
    let path = file_path(s, base)?;
    let len = path.as_os_str().len();
    if len > crate::MAX_SOCKET_PATH {
        return Err(format!(
            "{} is {len} bytes long; a Unix socket path holds at most {}",
            path.display(),
            crate::MAX_SOCKET_PATH
        ));
    }
    Ok(path)
}

/// `02:00:00:00:00:01` (the syntax of `nfv_wire::EthernetAddress`).
pub fn mac(s: &str) -> Result<[u8; 6], String> {
    s.parse::<nfv_wire::EthernetAddress>()
        .map(|a| a.0)
        .map_err(|_| format!("{s:?} is not a MAC address like \"02:00:00:00:00:01\""))
}

/// `10.0.0.1`.
pub fn ipv4(s: &str) -> Result<Ipv4Addr, String> {
    s.parse()
        .map_err(|_| format!("{s:?} is not an IPv4 address like \"10.0.0.1\""))
}

/// `fd00::1`.
pub fn ipv6(s: &str) -> Result<Ipv6Addr, String> {
    s.parse()
        .map_err(|_| format!("{s:?} is not an IPv6 address like \"fd00::1\""))
}

/// A name the kernel would accept for a network interface (whether it
/// exists is the port's business when it opens).
pub fn iface_name(s: &str) -> Result<String, String> {
    let ok = (1..=crate::MAX_IFACE_NAME).contains(&s.len())
        && s != "."
        && s != ".."
        && !s
            .bytes()
            .any(|b| b == b'/' || b == b':' || b.is_ascii_whitespace() || b == 0);
    if ok {
        Ok(s.to_string())
    } else {
        Err(format!(
            "{s:?} is not an interface name: 1 to {} bytes without '/', ':' or whitespace",
            crate::MAX_IFACE_NAME
        ))
    }
}

/// One of `options`, named as serde names an unknown variant.
pub fn one_of<T: Copy>(s: &str, options: &[(&str, T)]) -> Result<T, String> {
    if let Some(&(_, v)) = options.iter().find(|(n, _)| *n == s) {
        return Ok(v);
    }
    let names: Vec<String> = options.iter().map(|(n, _)| format!("`{n}`")).collect();
    let expected = match names.as_slice() {
        [] => "there are no variants".to_string(),
        [a] => format!("expected {a}"),
        [a, b] => format!("expected {a} or {b}"),
        all => format!("expected one of {}", all.join(", ")),
    };
    Err(format!("unknown variant `{s}`, {expected}"))
}

/// serde's message in the words the config errors use ("an integer", not
/// "i64"; "a table", not "struct RawNode").
pub fn plain_types(message: &str) -> String {
    let mut m = message.replace("expected i64", "expected an integer");
    if let Some(pos) = m.find("expected struct ") {
        m.truncate(pos);
        m.push_str("expected a table");
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs() {
        assert_eq!(mac("02:00:00:00:00:01"), Ok([2, 0, 0, 0, 0, 1]));
        assert_eq!(
            mac("aa:BB:cc:dd:ee:ff"),
            Ok([0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff])
        );
        // nfv_wire::EthernetAddress's syntax: one or two hex digits an
        // octet, `:` or `-` between them.
        assert_eq!(mac("2:0:0:0:0:1"), Ok([2, 0, 0, 0, 0, 1]));
        assert_eq!(mac("02-00-00-00-00-01"), Ok([2, 0, 0, 0, 0, 1]));
        for bad in [
            "",
            "02:00:00:00:00",
            "02:00:00:00:00:01:02",
            "0x:00:00:00:00:01",
            "+2:00:00:00:00:01",
            "02:00:00:00:00:001",
            "02:00-00:00:00:01",
        ] {
            assert!(mac(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn names() {
        assert!(is_valid_name("gen0", 32));
        assert!(is_valid_name("a.b-c_D9", 32));
        assert!(!is_valid_name("", 32));
        assert!(!is_valid_name("a b", 32));
        assert!(!is_valid_name("é", 32));
        assert!(is_valid_name(&"x".repeat(32), 32));
        assert!(!is_valid_name(&"x".repeat(33), 32));
    }

    #[test]
    fn variants_are_named_as_serde_names_them() {
        let two = [("server", 0), ("client", 1)];
        let three = [("auto", 0), ("copy", 1), ("zero-copy", 2)];
        assert_eq!(one_of("client", &two), Ok(1));
        assert_eq!(
            one_of("both", &two),
            Err("unknown variant `both`, expected `server` or `client`".into())
        );
        assert_eq!(
            one_of("native", &three),
            Err("unknown variant `native`, expected one of `auto`, `copy`, `zero-copy`".into())
        );
    }

    #[test]
    fn ranges_and_powers() {
        assert_eq!(int_in(5, &(1..=64)), Ok(5));
        assert_eq!(int_in(0, &(1..=64)), Err("0 is out of range 1..=64".into()));
        assert_eq!(
            int_in(0, &(1..=i64::MAX)),
            Err("0 is out of range: must be at least 1".into())
        );
        assert_eq!(pow2(1024, &(32..=65536), false), Ok(1024));
        assert_eq!(pow2(0, &(32..=65536), true), Ok(0));
        assert_eq!(
            pow2(100, &(32..=65536), false),
            Err("100 is not a power of two in 32..=65536".into())
        );
    }

    #[test]
    fn interface_names() {
        assert_eq!(iface_name("veth0"), Ok("veth0".into()));
        for bad in ["", ".", "..", "a/b", "a:b", "a b", "sixteen-bytes-xx"] {
            assert!(iface_name(bad).is_err(), "{bad:?}");
        }
    }
}
