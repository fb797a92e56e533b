//! Refusals of a topology file as `file:line: field: message`.

use nfv_toml_path::{field_at, join_path, quoted_key};
use std::ops::Range;
use std::path::Path;
use toml::de::DeTable;

/// Why a topology file was refused: the project's one TOML file error
/// ([`nfv_toml_path::FileError`], as the node config's).
pub type TopologyError = nfv_toml_path::FileError;

/// The text being checked: turns byte spans into lines.
pub(crate) struct Doc<'a> {
    pub file: &'a Path,
    pub text: &'a str,
}

impl Doc<'_> {
    pub fn err(
        &self,
        span: Range<usize>,
        field: &str,
        message: impl Into<String>,
    ) -> TopologyError {
        TopologyError::at(self.file, self.text, 0, span.start, field, message)
    }

    /// An error of the TOML parser or of serde: the field is the deepest
    /// key of the document whose key or value holds the error's span; a
    /// missing field is named after the table it is missing from.
    pub fn toml_error(&self, e: &toml::de::Error) -> TopologyError {
        let mut message = e.message().trim_end().to_string();
        // serde's words for the untagged enums of `topology`.
        for (from, to) in [
            ("untagged enum Num", "expected a number"),
            (
                "untagged enum OneOrMany",
                "expected a number or a list of numbers",
            ),
            (
                "untagged enum RawFrames",
                "expected a frame size, a list of frame sizes, or \"imix\"",
            ),
        ] {
            if message.ends_with(from) {
                message = to.to_string();
            }
        }
        let Some(span) = e.span() else {
            return self.err(0..0, "", message);
        };
        let mut field = match DeTable::parse(self.text) {
            Ok(doc) => field_at(doc.get_ref(), span.start)
                .map(|f| join_path("", &f.segs))
                .unwrap_or_default(),
            Err(_) => String::new(),
        };
        if let Some(key) = quoted_key(&message, "missing field ") {
            // The top level's missing fields come with an empty span at
            // 0 (the key found there is only the first table's).
            if span.is_empty() && span.start == 0 {
                field.clear();
            }
            field = if field.is_empty() {
                key.to_string()
            } else {
                format!("{field}.{key}")
            };
        } else if let Some(key) = quoted_key(&message, "unknown field ")
            && let Some(i) = field.rfind(key)
        {
            field.truncate(i + key.len());
        }
        self.err(span, &field, message)
    }
}
