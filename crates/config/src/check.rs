//! The value checks of [`nfv_settings::check`] for the node's own
//! sections: each takes the spanned raw value and the field path, and
//! returns the typed value or an error at the value's line.

use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

use nfv_settings::check;

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
    check::int_in(*v.get_ref(), &range).map_err(|m| doc.err(v.span(), field, m))
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
    check::pow2(*v.get_ref(), &range, zero_ok).map_err(|m| doc.err(v.span(), field, m))
}

/// A name of `[a-zA-Z0-9_.-]{1,max}`.
pub(crate) fn name(doc: &Doc<'_>, v: &S<String>, field: &str, max: usize) -> Result<String> {
    check::name(v.get_ref(), max).map_err(|m| doc.err(v.span(), field, m))
}

pub(crate) use check::is_valid_name;

/// A file path, relative ones taken from the config file's directory.
pub(crate) fn file_path(doc: &Doc<'_>, v: &S<String>, field: &str, base: &Path) -> Result<PathBuf> {
    check::file_path(v.get_ref(), base).map_err(|m| doc.err(v.span(), field, m))
}

/// A Unix socket path, at most [`nfv_settings::MAX_SOCKET_PATH`] bytes.
pub(crate) fn socket_path(
    doc: &Doc<'_>,
    v: &S<String>,
    field: &str,
    base: &Path,
) -> Result<PathBuf> {
    check::socket_path(v.get_ref(), base).map_err(|m| doc.err(v.span(), field, m))
}
