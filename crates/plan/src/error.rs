//! Refusals of a topology file as `file:line: field: message`.

use nfv_toml_path::{field_at, join_path, quoted_key};
use std::ops::Range;
use std::path::{Path, PathBuf};
use toml::de::DeTable;

/// Why a topology file was refused.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// Not TOML, or a value missing, unknown, of the wrong type, out of
    /// range or inconsistent with another.
    #[error("{}:{line}: {field}{}{message}", file.display(), if field.is_empty() { "" } else { ": " })]
    Invalid {
        file: PathBuf,
        /// 1-based line of the offending key or value.
        line: usize,
        /// Dotted path (`node.nic.pcie_lanes`, `service.frames[1]`); empty
        /// for a TOML syntax error.
        field: String,
        message: String,
    },
    #[error("{}: {source}", file.display())]
    Io {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl TopologyError {
    pub fn line(&self) -> Option<usize> {
        match self {
            TopologyError::Invalid { line, .. } => Some(*line),
            TopologyError::Io { .. } => None,
        }
    }
    pub fn field(&self) -> Option<&str> {
        match self {
            TopologyError::Invalid { field, .. } => Some(field),
            TopologyError::Io { .. } => None,
        }
    }
}

/// The text being checked: turns byte spans into lines.
pub(crate) struct Doc<'a> {
    pub file: &'a Path,
    pub text: &'a str,
}

impl Doc<'_> {
    pub fn line_of(&self, offset: usize) -> usize {
        nfv_toml_path::line_of(self.text, 0, offset)
    }

    pub fn err(
        &self,
        span: Range<usize>,
        field: &str,
        message: impl Into<String>,
    ) -> TopologyError {
        TopologyError::Invalid {
            file: self.file.to_path_buf(),
            line: self.line_of(span.start),
            field: field.to_string(),
            message: message.into(),
        }
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
