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
