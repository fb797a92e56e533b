//! What the runtime names an attachment by (`CNI_CONTAINERID`,
//! `CNI_IFNAME`), checked against the spec's grammar before either goes
//! into a URL or a socket name.

use crate::error::{CniError, INVALID_ENV, err};
use std::collections::HashMap;

/// How many characters of the container id go into port and socket names
/// (the node's port name is `c-<12>-<ifname>`).
const ID_IN_NAMES: usize = 12;
/// `IFNAMSIZ` less its NUL: the spec holds `CNI_IFNAME` to a Linux
/// interface name.
const MAX_IFNAME: usize = 15;
/// The node keeps container ids up to this length.
const MAX_CONTAINER_ID: usize = 256;

/// One attachment: a container and one of its interfaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    pub container_id: String,
    pub ifname: String,
}

/// A `CNI_*` variable that must be set and not empty.
pub fn need<'a>(env: &'a HashMap<String, String>, key: &str) -> Result<&'a str, CniError> {
    match env.get(key).map(String::as_str) {
        Some(v) if !v.is_empty() => Ok(v),
        _ => Err(err(INVALID_ENV, format!("{key} is not set"), "")),
    }
}

impl Key {
    /// From `CNI_CONTAINERID` and `CNI_IFNAME`.
    pub fn from_env(env: &HashMap<String, String>) -> Result<Key, CniError> {
        Key::new(need(env, "CNI_CONTAINERID")?, need(env, "CNI_IFNAME")?)
    }

    /// Checked as the spec words them: a container id starts with a letter
    /// or digit and holds only those, `_`, `.` and `-`; an interface name
    /// is a Linux one (at most 15 bytes, no `/`, `:`, white space or
    /// control characters, not
    /// `.` or `..`). Either goes into the socket's file name, so neither
    /// may carry a path separator.
    pub fn new(container_id: &str, ifname: &str) -> Result<Key, CniError> {
        let id_ok = container_id.len() <= MAX_CONTAINER_ID
            && container_id
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_alphanumeric())
            && container_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
        if !id_ok {
            return Err(err(
                INVALID_ENV,
                "CNI_CONTAINERID must start with a letter or digit and hold only letters, \
                 digits, '_', '.' and '-' (at most 256)",
                container_id.escape_debug().to_string(),
            ));
        }
        let ifname_ok = !ifname.is_empty()
            && ifname.len() <= MAX_IFNAME
            && ifname != "."
            && ifname != ".."
            && ifname
                .chars()
                .all(|c| !c.is_whitespace() && !c.is_control() && c != '/' && c != ':');
        if !ifname_ok {
            return Err(err(
                INVALID_ENV,
                "CNI_IFNAME must be an interface name (1 to 15 bytes, no '/', ':', space or \
                 control characters, not '.' or '..')",
                ifname.escape_debug().to_string(),
            ));
        }
        Ok(Key {
            container_id: container_id.into(),
            ifname: ifname.into(),
        })
    }

    /// The node's resource for this attachment.
    pub fn path(&self) -> String {
        format!(
            "/api/v1/attachments/{}/{}",
            encode(&self.container_id),
            encode(&self.ifname)
        )
    }

    /// The socket's file name in the node's socket directory: a name, never
    /// a path (the node refuses anything else).
    pub fn socket_name(&self) -> String {
        let id: String = self.container_id.chars().take(ID_IN_NAMES).collect();
        format!("{id}-{}.sock", self.ifname)
    }
}

/// Percent-encodes a path segment (container ids and interface names are
/// mostly plain; anything else is escaped).
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_outside_the_spec_grammar_are_refused() {
        let cases: &[(&str, &str, bool)] = &[
            ("0123456789abcdef", "net1", true),
            ("a", "eth0.100", true),
            ("pod_1.x-y", "net1", true),
            ("", "net1", false),
            ("-leading", "net1", false),
            ("../../etc", "net1", false),
            ("abc/def", "net1", false),
            ("abc\0", "net1", false),
            ("abc", "", false),
            ("abc", "..", false),
            ("abc", ".", false),
            ("abc", "../../x", false),
            ("abc", "a/b", false),
            ("abc", "a:b", false),
            ("abc", "a b", false),
            ("abc", "sixteen-chars-xx", false),
            ("abc", "a\tb", false),
            ("abc", "a\nb", false),
            ("abc", "né", true),
        ];
        for (id, ifname, ok) in cases {
            let got = Key::new(id, ifname);
            assert_eq!(got.is_ok(), *ok, "{id:?} {ifname:?}: {got:?}");
            if let Err(e) = got {
                assert_eq!(e.code, INVALID_ENV);
            }
        }
        let long = "a".repeat(257);
        assert!(Key::new(&long, "net1").is_err());
    }

    #[test]
    fn the_socket_is_a_file_name() {
        let k = Key::new("0123456789abcdef", "net1").unwrap();
        assert_eq!(k.socket_name(), "0123456789ab-net1.sock");
        assert_eq!(k.path(), "/api/v1/attachments/0123456789abcdef/net1");
        let k = Key::new("a.b", "x%y").unwrap();
        assert_eq!(k.path(), "/api/v1/attachments/a.b/x%25y");
    }
}
