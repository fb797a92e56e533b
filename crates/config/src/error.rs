//! The error type, and the bookkeeping that turns byte offsets into
//! `file:line: field` positions.

use std::ops::Range;
use std::path::Path;

use nfv_toml_path::{Field, field_at, join_path, quoted_key};
use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// Why a config was rejected: the project's one TOML file error
/// ([`nfv_toml_path::FileError`]). Every [`ConfigError::Invalid`] names the
/// file, the 1-based line and the field path (`port[1].rate_pps`; array
/// indices are 0-based, in document order).
pub type ConfigError = nfv_toml_path::FileError;

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
        nfv_toml_path::line_of(self.text, self.prefix, offset)
    }

    pub fn err(
        &self,
        span: Range<usize>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> ConfigError {
        ConfigError::at(
            self.file,
            self.text,
            self.prefix,
            span.start,
            field,
            message,
        )
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
            Ok(doc) => match field_at(doc.get_ref(), span.start) {
                Some(Field { mut segs, key }) => {
                    // The span of an unknown `[[table]]` also covers its
                    // first element; the path should end at the key.
                    if let Some(unknown) = quoted_key(&message, "unknown field ")
                        && let Some(i) = segs.iter().rposition(|s| s == unknown)
                    {
                        segs.truncate(i + 1);
                    }
                    let hint = key.and_then(|(k, v)| hint_for(k, v));
                    (join_path(root, &segs), hint)
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
