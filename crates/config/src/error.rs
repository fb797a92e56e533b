//! The error type, and the bookkeeping that turns byte offsets into
//! `file:line: field` positions.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// Why a config was rejected. Every [`ConfigError::Invalid`] names the file,
/// the 1-based line and the field path (`port[1].rate_pps`; array indices
/// are 0-based, in document order).
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The text is not valid TOML, or a value is missing, of the wrong type,
    /// unknown, out of range or inconsistent with another value.
    #[error("{}", DisplayInvalid { file, line: *line, field, message })]
    Invalid {
        file: PathBuf,
        /// 1-based line of the offending key or value.
        line: usize,
        /// Dotted path of the field (`memory.frame_size`, `port[0].peer`,
        /// `flows[3]`); empty when the error is not about one field (a TOML
        /// syntax error).
        field: String,
        message: String,
    },
    /// The file could not be read.
    #[error("{}: {source}", file.display())]
    Io {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl ConfigError {
    /// The 1-based line, for [`ConfigError::Invalid`].
    pub fn line(&self) -> Option<usize> {
        match self {
            ConfigError::Invalid { line, .. } => Some(*line),
            ConfigError::Io { .. } => None,
        }
    }

    /// The field path, for [`ConfigError::Invalid`].
    pub fn field(&self) -> Option<&str> {
        match self {
            ConfigError::Invalid { field, .. } => Some(field),
            ConfigError::Io { .. } => None,
        }
    }

    /// The message without position, for [`ConfigError::Invalid`].
    pub fn message(&self) -> Option<&str> {
        match self {
            ConfigError::Invalid { message, .. } => Some(message),
            ConfigError::Io { .. } => None,
        }
    }
}

struct DisplayInvalid<'a> {
    file: &'a Path,
    line: usize,
    field: &'a str,
    message: &'a str,
}

impl fmt::Display for DisplayInvalid<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: ", self.file.display(), self.line)?;
        if !self.field.is_empty() {
            write!(f, "{}: ", self.field)?;
        }
        f.write_str(self.message)
    }
}

/// The text being validated: builds errors at byte offsets.
pub(crate) struct Doc<'a> {
    pub file: &'a Path,
    pub text: &'a str,
    /// Bytes of `text` that the user did not write (the wrapper around an
    /// inline port table); subtracted before counting lines.
    pub prefix: usize,
}

impl Doc<'_> {
    /// 1-based line of byte `offset`.
    pub fn line_of(&self, offset: usize) -> usize {
        let end = offset.min(self.text.len());
        let start = self.prefix.min(end);
        1 + self.text.as_bytes()[start..end]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
    }

    pub fn err(
        &self,
        span: Range<usize>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> ConfigError {
        ConfigError::Invalid {
            file: self.file.to_path_buf(),
            line: self.line_of(span.start),
            field: field.into(),
            message: message.into(),
        }
    }

    /// Converts an error of the TOML parser or of serde, which carries a
    /// span but no usable field path, into `file:line: field: message`. The
    /// path is recovered by finding the deepest key or value of the parsed
    /// document that contains the span.
    pub fn toml_error(&self, e: &toml::de::Error, root: &str) -> ConfigError {
        let message = nfv_settings::check::plain_types(e.message().trim_end());
        let Some(span) = e.span() else {
            return self.err(0..0, root, message);
        };
        let (field, value) = match DeTable::parse(self.text) {
            Ok(doc) => match locate_in_table(doc.get_ref(), span.start) {
                Some((mut segs, value)) => {
                    // The span of an unknown `[[table]]` also covers its
                    // first element; the path should end at the key.
                    if let Some(key) = unknown_field(&message)
                        && let Some(i) = segs.iter().rposition(|s| s == key)
                    {
                        segs.truncate(i + 1);
                    }
                    (join_path(root, &segs), value)
                }
                None => (root.to_string(), None),
            },
            // A syntax error: no document to find a path in.
            Err(_) => (String::new(), None),
        };
        let message = match value {
            Some(hint) => format!("{message} ({hint})"),
            None => message,
        };
        self.err(span, field, message)
    }
}

/// The key of serde's "unknown field `key`, expected ...".
fn unknown_field(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("unknown field `")?;
    rest.split('`').next()
}

/// Appends `seg` (`name` or `[3]`) to a dotted path.
pub(crate) fn join_path(root: &str, segs: &[String]) -> String {
    let mut out = root.to_string();
    for s in segs {
        if !s.starts_with('[') && !out.is_empty() {
            out.push('.');
        }
        out.push_str(s);
    }
    out
}

/// A located field: the path segments from the root, and an optional hint
/// about a common mistake at that place.
type Located = (Vec<String>, Option<&'static str>);

fn contains(span: &Range<usize>, offset: usize) -> bool {
    span.start <= offset && offset < span.end.max(span.start + 1)
}

fn locate_in_table(table: &DeTable<'_>, offset: usize) -> Option<Located> {
    for (key, value) in table.iter() {
        if let Some((mut segs, hint)) = locate_in_value(value, offset) {
            segs.insert(0, key.get_ref().to_string());
            return Some((segs, hint));
        }
        if contains(&key.span(), offset) || contains(&value.span(), offset) {
            return Some((
                vec![key.get_ref().to_string()],
                hint_for(key.get_ref(), value),
            ));
        }
    }
    None
}

fn locate_in_value(value: &Spanned<DeValue<'_>>, offset: usize) -> Option<Located> {
    match value.get_ref() {
        DeValue::Table(t) => locate_in_table(t, offset),
        DeValue::Array(a) => a.iter().enumerate().find_map(|(i, item)| {
            let found = locate_in_value(item, offset)
                .or_else(|| contains(&item.span(), offset).then(|| (Vec::new(), None)))?;
            let (mut segs, hint) = found;
            segs.insert(0, format!("[{i}]"));
            Some((segs, hint))
        }),
        _ => None,
    }
}

/// Hints for mistakes that serde's messages do not explain.
fn hint_for(key: &str, value: &Spanned<DeValue<'_>>) -> Option<&'static str> {
    hint(key, matches!(value.get_ref(), DeValue::Array(_)))
}

/// The hint for `key` holding an array (`is_array`) or another value.
pub(crate) fn hint(key: &str, is_array: bool) -> Option<&'static str> {
    match (key, is_array) {
        ("flows", true) => Some(
            "a top-level `flows = [...]` must come before the first [table]; \
             below a [[port]] it belongs to that port. Move it up, or use \
             [[flow]] tables with `rule = \"...\"`",
        ),
        _ => None,
    }
}
