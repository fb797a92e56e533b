//! Where in a TOML document a byte offset falls, as a field path and a
//! line: what turns the span of a TOML or serde error into `file:line:
//! field`. Shared by the files the switch reads (`nfv-config`'s node
//! config, `nfv-plan`'s topologies), so their errors point the same way.

use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// The 1-based line of byte `offset` of `text`, not counting newlines in
/// its first `skip` bytes (text the user did not write, such as a wrapper
/// around an inline table).
pub fn line_of(text: &str, skip: usize, offset: usize) -> usize {
    let end = offset.min(text.len());
    let start = skip.min(end);
    1 + text.as_bytes()[start..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
}

/// The field at an offset: path segments from the root (`name`, or `[3]`
/// for an array element) and, when the innermost one is a table's key,
/// that key and its value (for hints about the value's shape).
pub struct Field<'d, 't> {
    pub segs: Vec<String>,
    pub key: Option<(&'d str, &'d Spanned<DeValue<'t>>)>,
}

/// The deepest key or array element of `table` whose key or value holds
/// byte `offset`; `None` when none does.
pub fn field_at<'d, 't>(table: &'d DeTable<'t>, offset: usize) -> Option<Field<'d, 't>> {
    for (key, value) in table.iter() {
        if let Some(mut f) = field_in_value(value, offset) {
            f.segs.insert(0, key.get_ref().to_string());
            return Some(f);
        }
        if holds(&key.span(), offset) || holds(&value.span(), offset) {
            return Some(Field {
                segs: vec![key.get_ref().to_string()],
                key: Some((key.get_ref(), value)),
            });
        }
    }
    None
}

fn field_in_value<'d, 't>(value: &'d Spanned<DeValue<'t>>, offset: usize) -> Option<Field<'d, 't>> {
    match value.get_ref() {
        DeValue::Table(t) => field_at(t, offset),
        DeValue::Array(a) => a.iter().enumerate().find_map(|(i, item)| {
            let mut f = field_in_value(item, offset).or_else(|| {
                holds(&item.span(), offset).then(|| Field {
                    segs: Vec::new(),
                    key: None,
                })
            })?;
            f.segs.insert(0, format!("[{i}]"));
            Some(f)
        }),
        _ => None,
    }
}

/// Whether `span` holds `offset` (an empty span holds its start).
fn holds(span: &std::ops::Range<usize>, offset: usize) -> bool {
    span.start <= offset && offset < span.end.max(span.start + 1)
}

/// `root` with `segs` appended as a dotted path: `port[1].rate_pps`.
pub fn join_path(root: &str, segs: &[String]) -> String {
    let mut out = root.to_string();
    for s in segs {
        if !s.starts_with('[') && !out.is_empty() {
            out.push('.');
        }
        out.push_str(s);
    }
    out
}

/// The key serde names in a message that starts with `prefix` and quotes
/// it in backticks (`unknown field `, `missing field `).
pub fn quoted_key<'m>(message: &'m str, prefix: &str) -> Option<&'m str> {
    message
        .strip_prefix(prefix)?
        .strip_prefix('`')?
        .split('`')
        .next()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "a = 1\n[t]\nb = [10, { c = 2 }]\n\n[[p]]\nname = \"x\"\n";

    /// (text at the offset, path, innermost is a table key)
    #[test]
    fn offsets_map_to_field_paths() {
        let doc = DeTable::parse(DOC).unwrap();
        let cases: &[(&str, &str, bool)] = &[
            ("a = 1", "a", true),
            ("1\n", "a", true),
            ("10", "t.b[0]", false),
            ("c = 2", "t.b[1].c", true),
            ("\"x\"", "p[0].name", true),
        ];
        for &(at, want, keyed) in cases {
            let offset = DOC.find(at).unwrap();
            let f = field_at(doc.get_ref(), offset).unwrap_or_else(|| panic!("{at:?}"));
            assert_eq!(join_path("", &f.segs), want, "{at:?}");
            assert_eq!(f.key.is_some(), keyed, "{at:?}");
        }
        assert_eq!(line_of(DOC, 0, DOC.find("name").unwrap()), 6);
        assert_eq!(
            line_of(DOC, DOC.find("[t]").unwrap(), DOC.find("name").unwrap()),
            5
        );
        assert_eq!(
            join_path("port", &["[1]".into(), "rate".into()]),
            "port[1].rate"
        );
        assert_eq!(
            quoted_key("unknown field `rte`, expected one of", "unknown field "),
            Some("rte")
        );
        assert_eq!(quoted_key("missing field `id`", "unknown field "), None);
    }
}

/// Why a TOML file (a node config, a topology) was refused: at a place
/// (`file:line: field: message`, the field omitted when the error is not
/// about one, as for a syntax error), or because it could not be read.
/// The one error type of every file this project reads as TOML.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// Not TOML, or a value missing, unknown, of the wrong type, out of
    /// range or inconsistent with another.
    #[error("{}:{line}: {field}{}{message}", file.display(), if field.is_empty() { "" } else { ": " })]
    Invalid {
        file: std::path::PathBuf,
        /// 1-based line of the offending key or value.
        line: usize,
        /// Dotted path of the field (`memory.frame_size`, `port[0].peer`,
        /// `service.frames[1]`; array indices 0-based, in document
        /// order); empty when the error is not about one field.
        field: String,
        message: String,
    },
    /// The file could not be read.
    #[error("{}: {source}", file.display())]
    Io {
        file: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl FileError {
    /// The error at byte `offset` of `text` (of which the first `skip`
    /// bytes are not the user's: see [`line_of`]).
    pub fn at(
        file: &std::path::Path,
        text: &str,
        skip: usize,
        offset: usize,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> FileError {
        FileError::Invalid {
            file: file.to_path_buf(),
            line: line_of(text, skip, offset),
            field: field.into(),
            message: message.into(),
        }
    }

    /// The 1-based line, for [`FileError::Invalid`].
    pub fn line(&self) -> Option<usize> {
        match self {
            FileError::Invalid { line, .. } => Some(*line),
            FileError::Io { .. } => None,
        }
    }

    /// The field path, for [`FileError::Invalid`].
    pub fn field(&self) -> Option<&str> {
        match self {
            FileError::Invalid { field, .. } => Some(field),
            FileError::Io { .. } => None,
        }
    }

    /// The message without position, for [`FileError::Invalid`].
    pub fn message(&self) -> Option<&str> {
        match self {
            FileError::Invalid { message, .. } => Some(message),
            FileError::Io { .. } => None,
        }
    }
}

#[cfg(test)]
mod file_error_tests {
    use super::FileError;
    use std::path::Path;

    #[test]
    fn written_as_file_line_field_message() {
        let text = "a = 1\nb = 2\n";
        let e = FileError::at(Path::new("n.toml"), text, 0, 8, "b", "too big");
        assert_eq!(e.to_string(), "n.toml:2: b: too big");
        assert_eq!(
            (e.line(), e.field(), e.message()),
            (Some(2), Some("b"), Some("too big"))
        );
        let e = FileError::at(Path::new("n.toml"), text, 0, 0, "", "not TOML");
        assert_eq!(e.to_string(), "n.toml:1: not TOML");
        let e = FileError::Io {
            file: "gone.toml".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        };
        assert!(e.to_string().starts_with("gone.toml: "));
        assert_eq!((e.line(), e.field(), e.message()), (None, None, None));
    }
}
