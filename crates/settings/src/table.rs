//! [`PortTable`]: the keys of one `[[port]]` table that belong to its type.

use std::ops::{Range, RangeInclusive};
use std::path::{Path, PathBuf};

use nfv_mem::MemoryConfig;
use serde::de::{DeserializeOwned, Unexpected};
use toml::{Spanned, Value};

use crate::check;

/// Why a port type refused its table: the key (as written in the file)
/// and the position of its value, or of the whole table for a missing key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SettingError {
    pub key: String,
    pub span: Range<usize>,
    pub message: String,
}

type Result<T> = std::result::Result<T, SettingError>;

/// One `[[port]]` table as its type sees it: the values of its keys with
/// their positions, the node's memory layout (what frames fit) and the
/// directory relative paths are taken from.
pub struct PortTable<'a> {
    type_name: &'a str,
    port_name: &'a str,
    span: Range<usize>,
    entries: &'a [(String, Spanned<Value>)],
    memory: &'a MemoryConfig,
    base: &'a Path,
}

impl<'a> PortTable<'a> {
    /// `entries` are the table's keys in file order, `span` the table's
    /// position (where errors about a missing key point).
    pub fn new(
        type_name: &'a str,
        port_name: &'a str,
        span: Range<usize>,
        entries: &'a [(String, Spanned<Value>)],
        memory: &'a MemoryConfig,
        base: &'a Path,
    ) -> PortTable<'a> {
        PortTable {
            type_name,
            port_name,
            span,
            entries,
            memory,
            base,
        }
    }

    /// The `type` of the port.
    pub fn type_name(&self) -> &str {
        self.type_name
    }
    /// The `name` of the port.
    pub fn port_name(&self) -> &str {
        self.port_name
    }
    pub fn memory(&self) -> &MemoryConfig {
        self.memory
    }

    fn entry(&self, key: &str) -> Option<&'a Spanned<Value>> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Whether the table has `key`.
    pub fn has(&self, key: &str) -> bool {
        self.entry(key).is_some()
    }

    /// The raw value of `key`, for keys that take more than one type.
    pub fn value(&self, key: &str) -> Option<&'a Value> {
        self.entry(key).map(|v| v.get_ref())
    }

    /// An error about `key`: at its value, or at the table when it is
    /// absent (a required key).
    pub fn error(&self, key: &str, message: impl Into<String>) -> SettingError {
        SettingError {
            key: key.to_string(),
            span: self.entry(key).map_or(self.span.clone(), |v| v.span()),
            message: message.into(),
        }
    }

    /// `key`'s value was not `expected` (serde's wording: "invalid type:
    /// boolean `true`, expected ...").
    pub fn invalid_type(&self, key: &str, expected: &str) -> SettingError {
        let v = self.value(key);
        let unexpected = match v {
            Some(Value::String(s)) => Unexpected::Str(s),
            Some(Value::Integer(n)) => Unexpected::Signed(*n),
            Some(Value::Float(f)) => Unexpected::Float(*f),
            Some(Value::Boolean(b)) => Unexpected::Bool(*b),
            Some(Value::Array(_)) => Unexpected::Seq,
            Some(Value::Table(_)) => Unexpected::Map,
            Some(Value::Datetime(_)) | None => Unexpected::Other("a date-time"),
        };
        let e = <serde::de::value::Error as serde::de::Error>::invalid_type(unexpected, &expected);
        self.error(key, e.to_string())
    }

    /// `key` read as `T`; a value of another type is an error in serde's
    /// words.
    pub fn get<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>> {
        let Some(v) = self.entry(key) else {
            return Ok(None);
        };
        T::deserialize(v.get_ref().clone())
            .map(Some)
            .map_err(|e| self.error(key, check::plain_types(e.message().trim_end())))
    }

    /// Applies `check` to `key`'s value if present.
    fn checked<T, U>(
        &self,
        key: &str,
        check: impl FnOnce(T) -> std::result::Result<U, String>,
    ) -> Result<Option<U>>
    where
        T: DeserializeOwned,
    {
        match self.get::<T>(key)? {
            None => Ok(None),
            Some(v) => check(v).map(Some).map_err(|m| self.error(key, m)),
        }
    }

    /// A required key: present, or an error at the table.
    pub fn required<T>(&self, key: &str, value: Option<T>, why: &str) -> Result<T> {
        value.ok_or_else(|| self.error(key, why))
    }

    /// An integer in `range`.
    pub fn int(&self, key: &str, range: RangeInclusive<i64>) -> Result<Option<i64>> {
        self.checked(key, |n: i64| check::int_in(n, &range))
    }

    /// An integer in `range` (always within `T`'s), or `default`.
    pub fn int_or<T: TryFrom<i64>>(
        &self,
        key: &str,
        range: RangeInclusive<i64>,
        default: T,
    ) -> Result<T> {
        Ok(match self.int(key, range)? {
            None => default,
            Some(n) => T::try_from(n).unwrap_or_else(|_| unreachable!("range checked")),
        })
    }

    /// A power of two in `range`, or `default`.
    pub fn pow2_or(&self, key: &str, range: RangeInclusive<i64>, default: usize) -> Result<usize> {
        Ok(self
            .checked(key, |n: i64| check::pow2(n, &range, false))?
            .unwrap_or(default))
    }

    pub fn bool_or(&self, key: &str, default: bool) -> Result<bool> {
        Ok(self.get::<bool>(key)?.unwrap_or(default))
    }

    pub fn float(&self, key: &str) -> Result<Option<f64>> {
        self.get::<f64>(key)
    }

    /// A file path, relative ones taken from the config file's directory.
    pub fn path(&self, key: &str) -> Result<Option<PathBuf>> {
        self.checked(key, |s: String| check::file_path(&s, self.base))
    }

    /// A Unix socket path ([`check::socket_path`]).
    pub fn socket_path(&self, key: &str) -> Result<Option<PathBuf>> {
        self.checked(key, |s: String| check::socket_path(&s, self.base))
    }

    /// A name of `[a-zA-Z0-9_.-]{1,max}`.
    pub fn name(&self, key: &str, max: usize) -> Result<Option<String>> {
        self.checked(key, |s: String| check::name(&s, max))
    }

    pub fn mac(&self, key: &str) -> Result<Option<[u8; 6]>> {
        self.checked(key, |s: String| check::mac(&s))
    }

    pub fn ipv4(&self, key: &str) -> Result<Option<std::net::Ipv4Addr>> {
        self.checked(key, |s: String| check::ipv4(&s))
    }

    pub fn ipv6(&self, key: &str) -> Result<Option<std::net::Ipv6Addr>> {
        self.checked(key, |s: String| check::ipv6(&s))
    }

    /// One of `options` by name, or `default`.
    pub fn one_of_or<T: Copy>(&self, key: &str, options: &[(&str, T)], default: T) -> Result<T> {
        Ok(self
            .checked(key, |s: String| check::one_of(&s, options))?
            .unwrap_or(default))
    }

    /// The `iface` every kernel-facing type requires.
    pub fn iface(&self) -> Result<String> {
        let iface = self.checked("iface", |s: String| check::iface_name(&s))?;
        self.required(
            "iface",
            iface,
            &format!(
                "a port of type {:?} needs `iface`, the name of a kernel network interface",
                self.type_name
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(text: &str) -> Vec<(String, Spanned<Value>)> {
        let t: toml::Table = toml::from_str(text).unwrap();
        // Positions do not matter here; errors are checked by key.
        t.into_iter()
            .map(|(k, v)| (k, Spanned::new(0..1, v)))
            .collect()
    }

    fn with<R>(text: &str, f: impl FnOnce(&PortTable<'_>) -> R) -> R {
        let e = entries(text);
        let memory = MemoryConfig::default();
        f(&PortTable::new(
            "t",
            "p",
            0..0,
            &e,
            &memory,
            Path::new("/base"),
        ))
    }

    #[test]
    fn typed_reads_check_and_default() {
        with("n = 5\nb = true\np = \"x.pcap\"\nm = \"copy\"", |t| {
            assert_eq!(t.int_or("n", 1..=10, 1usize), Ok(5));
            assert_eq!(t.int_or("absent", 1..=10, 7u32), Ok(7));
            assert_eq!(
                t.int("n", 6..=10).unwrap_err().message,
                "5 is out of range 6..=10"
            );
            assert_eq!(t.bool_or("b", false), Ok(true));
            assert_eq!(t.path("p"), Ok(Some(PathBuf::from("/base/x.pcap"))));
            assert_eq!(t.one_of_or("m", &[("auto", 0), ("copy", 1)], 0), Ok(1));
            let e = t.bool_or("n", false).unwrap_err();
            assert_eq!(
                (e.key.as_str(), e.message.as_str()),
                ("n", "invalid type: integer `5`, expected a boolean")
            );
            let e = t.iface().unwrap_err();
            assert!(e.message.contains("needs `iface`"), "{}", e.message);
        });
    }

    #[test]
    fn invalid_type_names_the_value() {
        with("f = 1.5", |t| {
            assert_eq!(
                t.invalid_type("f", "bytes or \"imix\"").message,
                "invalid type: floating point `1.5`, expected bytes or \"imix\""
            );
        });
    }
}
