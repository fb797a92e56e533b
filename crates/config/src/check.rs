//! Small value checks shared by the sections: each takes the spanned raw
//! value and the field path, and returns the typed value or an error at the
//! value's line.

use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

use crate::error::{ConfigError, Doc};
use crate::raw::S;

pub(crate) type Result<T> = std::result::Result<T, ConfigError>;

/// `field` under `prefix`: `port[0]` + `rate_pps` → `port[0].rate_pps`;
/// an empty prefix (an inline port table) gives just `rate_pps`.
pub(crate) fn path(prefix: &str, field: &str) -> String {
    if prefix.is_empty() {
        field.to_string()
    } else {
        format!("{prefix}.{field}")
    }
}

/// An integer in `range`.
pub(crate) fn int_in(
    doc: &Doc<'_>,
    v: &S<i64>,
    field: &str,
    range: RangeInclusive<i64>,
) -> Result<i64> {
    let n = *v.get_ref();
    if range.contains(&n) {
        Ok(n)
    } else {
        let msg = if *range.end() == i64::MAX {
            format!("{n} is out of range: must be at least {}", range.start())
        } else {
            format!("{n} is out of range {}..={}", range.start(), range.end())
        };
        Err(doc.err(v.span(), field, msg))
    }
}

/// An optional integer in `range` converted to `T`, or `default`.
pub(crate) fn opt_int<T: TryFrom<i64>>(
    doc: &Doc<'_>,
    v: &Option<S<i64>>,
    field: &str,
    range: RangeInclusive<i64>,
    default: T,
) -> Result<T> {
    match v {
        None => Ok(default),
        Some(v) => {
            let n = int_in(doc, v, field, range)?;
            // The range is always within T's range.
            Ok(T::try_from(n).unwrap_or_else(|_| unreachable!("range checked")))
        }
    }
}

/// An optional power of two in `range` (0 also accepted when `zero_ok`).
pub(crate) fn opt_pow2(
    doc: &Doc<'_>,
    v: &Option<S<i64>>,
    field: &str,
    range: RangeInclusive<i64>,
    zero_ok: bool,
    default: usize,
) -> Result<usize> {
    let Some(v) = v else { return Ok(default) };
    let n = *v.get_ref();
    if (zero_ok && n == 0) || (range.contains(&n) && (n as u64).is_power_of_two()) {
        return Ok(n as usize);
    }
    let zero = if zero_ok { "0 or " } else { "" };
    Err(doc.err(
        v.span(),
        field,
        format!(
            "{n} is not {zero}a power of two in {}..={}",
            range.start(),
            range.end()
        ),
    ))
}

/// A name of `[a-zA-Z0-9_.-]{1,max}`.
pub(crate) fn name(doc: &Doc<'_>, v: &S<String>, field: &str, max: usize) -> Result<String> {
    let s = v.get_ref();
    if is_valid_name(s, max) {
        Ok(s.clone())
    } else {
        Err(doc.err(
            v.span(),
            field,
            format!(
                "{s:?} is not a valid name: use 1 to {max} of the characters a-z A-Z 0-9 _ . -"
            ),
        ))
    }
}

pub(crate) fn is_valid_name(s: &str, max: usize) -> bool {
    (1..=max).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// A non-empty path; relative paths are taken relative to `base` (the
/// directory of the config file).
pub(crate) fn file_path(doc: &Doc<'_>, v: &S<String>, field: &str, base: &Path) -> Result<PathBuf> {
    let s = v.get_ref();
    if s.is_empty() {
        return Err(doc.err(v.span(), field, "the path is empty"));
    }
    if s.contains('\0') {
        return Err(doc.err(v.span(), field, "the path contains a NUL byte"));
    }
    Ok(base.join(s))
}

/// `02:00:00:00:00:01`.
pub(crate) fn mac(doc: &Doc<'_>, v: &S<String>, field: &str) -> Result<[u8; 6]> {
    let s = v.get_ref();
    parse_mac(s).ok_or_else(|| {
        doc.err(
            v.span(),
            field,
            format!("{s:?} is not a MAC address like \"02:00:00:00:00:01\""),
        )
    })
}

fn parse_mac(s: &str) -> Option<[u8; 6]> {
    s.parse::<nfv_wire::EthernetAddress>().ok().map(|a| a.0)
}

/// `10.0.0.1`.
pub(crate) fn ipv4(doc: &Doc<'_>, v: &S<String>, field: &str) -> Result<std::net::Ipv4Addr> {
    let s = v.get_ref();
    s.parse().map_err(|_| {
        doc.err(
            v.span(),
            field,
            format!("{s:?} is not an IPv4 address like \"10.0.0.1\""),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs() {
        assert_eq!(parse_mac("02:00:00:00:00:01"), Some([2, 0, 0, 0, 0, 1]));
        assert_eq!(
            parse_mac("aa:BB:cc:dd:ee:ff"),
            Some([0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff])
        );
        // nfv_wire::EthernetAddress's syntax: one or two hex digits an
        // octet, `:` or `-` between them.
        assert_eq!(parse_mac("2:0:0:0:0:1"), Some([2, 0, 0, 0, 0, 1]));
        assert_eq!(parse_mac("02-00-00-00-00-01"), Some([2, 0, 0, 0, 0, 1]));
        for bad in [
            "",
            "02:00:00:00:00",
            "02:00:00:00:00:01:02",
            "0x:00:00:00:00:01",
            "+2:00:00:00:00:01",
            "02:00:00:00:00:001",
            "02:00-00:00:00:01",
        ] {
            assert_eq!(parse_mac(bad), None, "{bad}");
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
}
