//! Refusals of a topology file as `file:line: field: message`.

use std::ops::Range;
use std::path::{Path, PathBuf};
use toml::Spanned;
use toml::de::{DeTable, DeValue};

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
        let end = offset.min(self.text.len());
        1 + self.text.as_bytes()[..end]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
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
            Ok(doc) => path_in_table(doc.get_ref(), span.start).join("."),
            Err(_) => String::new(),
        };
        let quoted = |prefix: &str| {
            message
                .strip_prefix(prefix)
                .and_then(|r| r.split('`').next())
                .map(str::to_string)
        };
        if let Some(key) = quoted("missing field `") {
            field = if field.is_empty() {
                key
            } else {
                format!("{field}.{key}")
            };
        } else if let Some(key) = quoted("unknown field `")
            && let Some(i) = field.rfind(&key)
        {
            field.truncate(i + key.len());
        }
        self.err(span, &field.replace(".[", "["), message)
    }
}

fn holds(span: &Range<usize>, offset: usize) -> bool {
    span.start <= offset && offset < span.end.max(span.start + 1)
}

fn path_in_table(t: &DeTable<'_>, offset: usize) -> Vec<String> {
    for (k, v) in t.iter() {
        let inner = path_in_value(v, offset);
        if !inner.is_empty() || holds(&k.span(), offset) || holds(&v.span(), offset) {
            let mut p = vec![k.get_ref().to_string()];
            p.extend(inner);
            return p;
        }
    }
    Vec::new()
}

fn path_in_value(v: &Spanned<DeValue<'_>>, offset: usize) -> Vec<String> {
    match v.get_ref() {
        DeValue::Table(t) => path_in_table(t, offset),
        DeValue::Array(a) => a
            .iter()
            .enumerate()
            .find(|(_, item)| holds(&item.span(), offset))
            .map(|(i, item)| {
                let mut p = vec![format!("[{i}]")];
                p.extend(path_in_value(item, offset));
                p
            })
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}
