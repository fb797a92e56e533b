//! What a run-time request may reach. The config file's author is trusted
//! with any path and any port type; a request is held to `[node]`'s access
//! keys ([`nfv_config::AccessConfig`]) according to who sent it
//! ([`Caller`]):
//!
//! * the control socket (root, the switch's user or `[node] group`,
//!   checked with `SO_PEERCRED` by [`crate::server`]) may add any port, as
//!   OVS's local socket may;
//! * the REST API (a bearer token, checked by `nfv-api`) may add
//!   kernel-facing ports (afxdp, afpacket, tap, vxlan) only with `[node]
//!   runtime_kernel_ports = true`, and pcap ports only capturing to and
//!   replaying from files under `[node] pcap_dir`;
//! * attachments (the CNI plugin's requests, over the REST API) name a
//!   socket file inside `[node] socket_dir`, nothing else.
//!
//! The rules are here; the node applies them where it adds a port
//! (`ports.rs`) and confines an attachment's socket ([`crate::attachments`]).

use std::path::{Component, Path, PathBuf};

/// Who sent a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Caller {
    /// The unix control socket (`nfvswitch ctl`): a local administrator.
    ControlSocket,
    /// The REST API, with the node's token.
    RestApi,
}

/// Port types that reach the host's network stack or interfaces.
pub const KERNEL_FACING: [&str; 4] = ["afxdp", "afpacket", "tap", "vxlan"];

/// Checks that `path` names a file directly or deeper under `dir`, after
/// resolving symlinks in its directory, and that the file itself, if it
/// exists, is not a symlink. Returns the resolved path.
///
/// A pcap port opens the file with `O_NOFOLLOW` too, so a symlink swapped
/// in after this check is not followed either.
pub fn confined_file(dir: &Path, path: &Path) -> Result<PathBuf, String> {
    let outside = || format!("{} is not under {}", path.display(), dir.display());
    let dir = dir
        .canonicalize()
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    let name = match path.file_name() {
        Some(n) if path.components().next_back().is_some_and(is_normal) => n,
        _ => return Err(format!("{} does not name a file", path.display())),
    };
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => return Err(outside()),
    };
    let parent = parent
        .canonicalize()
        .map_err(|e| format!("{}: {e}", parent.display()))?;
    if !parent.starts_with(&dir) {
        return Err(outside());
    }
    let resolved = parent.join(name);
    if let Ok(m) = std::fs::symlink_metadata(&resolved)
        && m.file_type().is_symlink()
    {
        return Err(format!("{} is a symlink", resolved.display()));
    }
    Ok(resolved)
}

fn is_normal(c: Component<'_>) -> bool {
    matches!(c, Component::Normal(_))
}

/// The socket an attachment asks for, inside `dir`: `requested` is a file
/// name (`pod-1-net1.sock`), or an absolute path whose directory is `dir`
/// (what plugins sent before sockets were confined). Anything with `/`
/// elsewhere, `..`, `.` or a NUL is refused.
pub fn socket_in_dir(dir: &Path, requested: &Path) -> Result<PathBuf, String> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = requested.as_os_str().as_bytes();
    if bytes.is_empty() || bytes.contains(&0) {
        return Err(format!(
            "socket {requested:?}: give a file name (no NUL, not empty)"
        ));
    }
    let name = if requested.is_absolute() {
        if requested
            .components()
            .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
            || bytes.ends_with(b"/")
        {
            return Err(format!(
                "socket {}: '.', '..' and a trailing '/' are not allowed",
                requested.display()
            ));
        }
        let parent = requested.parent().unwrap_or(Path::new("/"));
        let same_dir = parent == dir
            || match (parent.canonicalize(), dir.canonicalize()) {
                (Ok(a), Ok(b)) => a == b,
                _ => false,
            };
        match requested.file_name() {
            Some(name) if same_dir => name,
            _ => {
                return Err(format!(
                    "socket {}: attachment sockets live in {} (give a file name)",
                    requested.display(),
                    dir.display()
                ));
            }
        }
    } else {
        if bytes.contains(&b'/') || bytes == b"." || bytes == b".." {
            return Err(format!(
                "socket {requested:?}: a file name in {} (no '/', not '.' or '..')",
                dir.display()
            ));
        }
        requested.as_os_str()
    };
    let path = dir.join(name);
    let n = path.as_os_str().len();
    if n > nfv_settings::MAX_SOCKET_PATH {
        return Err(format!(
            "socket {}: {n} bytes, more than a unix socket path holds ({})",
            path.display(),
            nfv_settings::MAX_SOCKET_PATH
        ));
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attachment_sockets_are_file_names_in_the_socket_dir() {
        let dir = std::env::temp_dir().join(format!("nfv-access-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        let inside = |n: &str| Ok(dir.join(n));
        let cases: Vec<(PathBuf, Result<PathBuf, String>)> = vec![
            ("a.sock".into(), inside("a.sock")),
            (dir.join("a.sock"), inside("a.sock")),
            (dir.join("sub/../a.sock"), Err(String::new())),
            ("../a.sock".into(), Err(String::new())),
            ("sub/a.sock".into(), Err(String::new())),
            ("..".into(), Err(String::new())),
            (".".into(), Err(String::new())),
            ("".into(), Err(String::new())),
            ("a\0b".into(), Err(String::new())),
            ("/etc/a.sock".into(), Err(String::new())),
            (dir.join("sub/a.sock"), Err(String::new())),
            ("a.sock/".into(), Err(String::new())),
            ("x".repeat(200).into(), Err(String::new())),
        ];
        for (req, want) in cases {
            let got = socket_in_dir(&dir, &req);
            match want {
                Ok(p) => assert_eq!(got, Ok(p), "{req:?}"),
                Err(_) => assert!(got.is_err(), "{req:?} accepted as {got:?}"),
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn pcap_files_stay_under_the_pcap_dir() {
        let root = std::env::temp_dir().join(format!("nfv-access-pcap-{}", std::process::id()));
        let dir = root.join("pcap");
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::create_dir_all(root.join("other")).unwrap();
        std::os::unix::fs::symlink(root.join("other"), dir.join("escape")).unwrap();
        std::os::unix::fs::symlink("/etc/shadow", dir.join("shadow.pcap")).unwrap();
        let ok = [dir.join("c.pcap"), dir.join("sub/c.pcap")];
        for p in ok {
            assert!(confined_file(&dir, &p).is_ok(), "{p:?}");
        }
        let refused = [
            root.join("other/c.pcap"),
            dir.join("../other/c.pcap"),
            dir.join("escape/c.pcap"),
            dir.join("shadow.pcap"),
            dir.join("sub/.."),
            PathBuf::from("/etc/c.pcap"),
            PathBuf::from("c.pcap"),
        ];
        for p in refused {
            assert!(confined_file(&dir, &p).is_err(), "{p:?} accepted");
        }
        let _ = std::fs::remove_dir_all(&root);
    }
}
