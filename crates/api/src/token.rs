//! The API's bearer token: a file only the switch's user can read,
//! made with a random token at the first start and read at every later
//! one, so `ctl`-side tools, the CNI plugin and scripts find the same
//! token where `[node] api_token_file` says.
//!
//! The file is opened without following symlinks; one that exists must be
//! a regular file of the switch's user that nobody else can read or write
//! (mode `0600` or stricter), or the API does not start: a token others
//! can read is no credential.

use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

/// Random bytes in a new token (hex: twice as many characters).
const TOKEN_BYTES: usize = 32;
/// Shortest token accepted from a file someone wrote by hand.
const MIN_TOKEN_LEN: usize = 16;

/// The token in `path`, made (random, mode 0600, parent directories
/// created) when the file does not exist.
pub fn load_or_create(path: &Path) -> std::io::Result<String> {
    match read(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        r => return r,
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let token = random_token()?;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(mut f) => {
            f.write_all(format!("{token}\n").as_bytes())?;
            f.sync_all()?;
            Ok(token)
        }
        // Another process made it between our read and create: use theirs.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read(path),
        Err(e) => Err(e),
    }
}

fn invalid(path: &Path, why: &str) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("token file {}: {why}", path.display()),
    )
}

fn read(path: &Path) -> std::io::Result<String> {
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                invalid(path, "is a symlink; not followed")
            } else {
                e
            }
        })?;
    let m = f.metadata()?;
    if !m.is_file() {
        return Err(invalid(path, "not a regular file"));
    }
    let me = nix::unistd::geteuid().as_raw();
    if m.uid() != me {
        return Err(invalid(
            path,
            &format!("owned by uid {}, not the switch's ({me})", m.uid()),
        ));
    }
    if m.mode() & 0o077 != 0 {
        return Err(invalid(
            path,
            &format!(
                "mode {:o}: others may read or change it; chmod 600 it",
                m.mode() & 0o777
            ),
        ));
    }
    let mut text = String::new();
    (&mut f).take(4096).read_to_string(&mut text)?;
    let token = text.trim().to_string();
    let well_formed = token.len() >= MIN_TOKEN_LEN
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.~+/=".contains(&b));
    if !well_formed {
        return Err(invalid(
            path,
            &format!("not a token ({MIN_TOKEN_LEN} or more of A-Z a-z 0-9 - _ . ~ + / =)"),
        ));
    }
    Ok(token)
}

fn random_token() -> std::io::Result<String> {
    let mut bytes = [0u8; TOKEN_BYTES];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Compares two tokens in time that depends only on their lengths.
pub fn same_token(given: &[u8], expected: &[u8]) -> bool {
    given.len() == expected.len()
        && given
            .iter()
            .zip(expected)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_token_file_is_made_once_and_must_stay_private() {
        let dir = std::env::temp_dir().join(format!("nfv-token-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("sub/api-token");
        let t = load_or_create(&path).unwrap();
        assert_eq!(t.len(), 2 * TOKEN_BYTES);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(load_or_create(&path).unwrap(), t, "read back, not remade");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(load_or_create(&path).is_err(), "world-readable refused");
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", &path).unwrap();
        assert!(load_or_create(&path).is_err(), "symlink refused");
        std::fs::remove_file(&path).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .unwrap()
            .write_all(b"short\n")
            .unwrap();
        assert!(load_or_create(&path).is_err(), "too short refused");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same_token(b"abcdef", b"abcdef"));
        assert!(!same_token(b"abcdeg", b"abcdef"));
        assert!(!same_token(b"abcde", b"abcdef"));
        assert!(!same_token(b"", b"abcdef"));
    }
}
