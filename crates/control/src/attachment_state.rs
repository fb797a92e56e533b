//! The attachments' state file: written so that a crash, a symlink or a
//! concurrent writer never leaves half a file or writes somewhere else,
//! and read back as untrusted input (`crate::attachments` re-checks every
//! entry before it opens a port).
//!
//! Writing: a new file next to the state file (`O_CREAT|O_EXCL`, which
//! never follows a symlink; mode 0600), the text, `fsync`, `rename` over
//! the state file, `fsync` of the directory so the rename itself survives
//! a power cut. Reading: `O_NOFOLLOW`, a regular file of at most
//! [`MAX_STATE_FILE`] bytes, version 1.

use crate::attachments::{AttachError, Attachment, Attachments};
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Far more than any node's attachments (about 300 bytes each).
pub const MAX_STATE_FILE: u64 = 16 << 20;

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StateFile {
    version: u32,
    attachments: Vec<Attachment>,
}

fn state_error(path: &Path, e: &dyn std::fmt::Display) -> AttachError {
    AttachError::State {
        path: path.to_path_buf(),
        err: e.to_string(),
    }
}

impl Attachments {
    /// Rewrites the state file (if any) with the attachments held now.
    pub(crate) fn save(&self) -> Result<(), AttachError> {
        let Some(path) = &self.state_file else {
            return Ok(());
        };
        let state = StateFile {
            version: 1,
            attachments: self.list.values().cloned().collect(),
        };
        let text = serde_json::to_vec_pretty(&state).map_err(|e| state_error(path, &e))?;
        write_atomically(path, &text).map_err(|e| state_error(path, &e))
    }
}

/// Replaces `path` with `bytes` (see the module doc).
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let tmp = dir.join(format!(".{name}.{}.{nanos}.tmp", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    let written = f
        .write_all(bytes)
        .and_then(|()| f.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::File::open(dir)?.sync_all()
}

/// The attachments a state file lists (none if it does not exist). Their
/// contents are not checked here: the caller checks each as a request.
pub fn load(path: &Path) -> Result<Vec<Attachment>, AttachError> {
    let err = |e: &dyn std::fmt::Display| state_error(path, e);
    let mut f = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(err(&"is a symlink; not followed"));
        }
        Err(e) => return Err(err(&e)),
    };
    let meta = f.metadata().map_err(|e| err(&e))?;
    if !meta.is_file() {
        return Err(err(&"not a regular file"));
    }
    if meta.len() > MAX_STATE_FILE {
        return Err(err(&format!(
            "{} bytes, more than {MAX_STATE_FILE}",
            meta.len()
        )));
    }
    let mut text = Vec::new();
    (&mut f)
        .take(MAX_STATE_FILE + 1)
        .read_to_end(&mut text)
        .map_err(|e| err(&e))?;
    parse(&text).map_err(|m| err(&m))
}

/// A state file's text as its attachments (the fuzz target's entry).
pub fn parse(text: &[u8]) -> Result<Vec<Attachment>, String> {
    if text.len() as u64 > MAX_STATE_FILE {
        return Err(format!("more than {MAX_STATE_FILE} bytes"));
    }
    let state: StateFile = serde_json::from_slice(text).map_err(|e| e.to_string())?;
    if state.version != 1 {
        return Err(format!("version {} (this switch reads 1)", state.version));
    }
    Ok(state.attachments)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_file_is_replaced_whole_and_never_through_a_symlink() {
        let dir = std::env::temp_dir().join(format!("nfv-state-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("state.json");
        write_atomically(&path, b"one").unwrap();
        write_atomically(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        let leftovers: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temporary file left behind");
        // A symlink at the state file's path is replaced, not written through.
        let victim = dir.join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        write_atomically(&path, b"three").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        assert!(!std::fs::symlink_metadata(&path).unwrap().is_symlink());
        // Reading does not follow one either.
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        assert!(load(&path).unwrap_err().to_string().contains("symlink"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn malformed_state_files_are_errors() {
        for text in [
            &b""[..],
            b"{",
            b"[]",
            br#"{"version": 2, "attachments": []}"#,
            br#"{"version": 1}"#,
            br#"{"version": 1, "attachments": [{"container_id": 1}]}"#,
            br#"{"version": 1, "attachments": [], "extra": 1}"#,
        ] {
            assert!(parse(text).is_err(), "{}", String::from_utf8_lossy(text));
        }
        assert_eq!(
            parse(br#"{"version": 1, "attachments": []}"#).unwrap(),
            vec![]
        );
    }

    /// A state file written before attachments kept their network still
    /// loads (network empty); one written now keeps it.
    #[test]
    fn state_files_with_and_without_networks_load() {
        let dir = std::env::temp_dir().join(format!("nfv-attach-state-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("state.json");
        std::fs::write(
            &path,
            r#"{"version": 1, "attachments": [{"container_id": "c1", "ifname": "net1",
                "type": "vhost-user", "mode": "server", "socket": "/run/c1.sock",
                "port": "c-c1-net1", "id": 1000}]}"#,
        )
        .unwrap();
        let old = load(&path).unwrap();
        assert_eq!(old.len(), 1);
        assert_eq!(
            (old[0].port.as_str(), old[0].request.network.as_str()),
            ("c-c1-net1", "")
        );

        let mut a = old[0].clone();
        a.request.network = "nfv".into();
        let state = Attachments {
            state_file: Some(path.clone()),
            list: [(a.key.clone(), a.clone())].into(),
            ..Default::default()
        };
        state.save().unwrap();
        assert_eq!(load(&path).unwrap(), vec![a]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
