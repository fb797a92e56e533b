//! The Network Plumbing WG device-info file (spec 1.1.0) the runtime
//! asks for with `runtimeConfig.CNIDeviceInfoFile`: written at ADD, from
//! the application's view, with a marker naming the attachment
//! (`"nfvswitch": {"container_id", "ifname"}`), and removed at DEL only
//! when the file there still carries that marker. The plugin runs as
//! root and the path comes from its input: without the marker, DEL would
//! delete (and ADD overwrite) whatever file the path names. ADD replaces
//! only a device-info file this plugin wrote (for any attachment).

use crate::error::{CniError, DEVICE_INFO_FOREIGN, IO_ERROR, err};
use crate::key::Key;
use nfv_vnf_interface::VnfInterface;
use serde::Deserialize;
use serde_json::{Value, json};
use std::fs::{self, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// A device-info file is a few hundred bytes; read no more than this of
/// whatever sits at the path.
const MAX_READ: u64 = 64 << 10;

/// What the file says, from the application's view: `vhost-user` with the
/// application's `mode` (the switch as server means the application is
/// the client), or `memif` with the application's `role` (`slave`: the
/// switch is the server).
pub fn describe(interface: VnfInterface, switch_role: &str, socket: &Path, key: &Key) -> Value {
    let marker = json!({ "container_id": key.container_id, "ifname": key.ifname });
    // The spec's type names are the interface's own names, written out
    // here because the spec fixes them whatever this tree calls them.
    match interface {
        VnfInterface::Memif => json!({ "type": "memif", "version": "1.1.0",
                "memif": { "role": "slave", "path": socket, "mode": "ethernet" },
                "nfvswitch": marker }),
        VnfInterface::VhostUser => {
            let app_mode = if switch_role == "server" {
                "client"
            } else {
                "server"
            };
            json!({ "type": "vhost-user", "version": "1.1.0",
                    "vhost-user": { "mode": app_mode, "path": socket },
                    "nfvswitch": marker })
        }
    }
}

/// What is at a device-info path.
#[derive(Debug, PartialEq, Eq)]
pub enum Found {
    Nothing,
    /// A regular file with this attachment's marker: (device, inode).
    Ours(u64, u64),
    /// A device-info file this plugin wrote for another attachment.
    Another(String),
    /// Anything else, and why it is not ours.
    Foreign(String),
}

#[derive(Deserialize)]
struct Marked {
    nfvswitch: Marker,
}

#[derive(Deserialize)]
struct Marker {
    container_id: String,
    ifname: String,
}

/// Looks at `file` without following a symlink: `lstat`, then the file
/// opened and `fstat`ed; the two must be the same inode, so a path
/// swapped between the two calls is not read as ours.
pub fn inspect(file: &Path, key: &Key) -> Result<Found, CniError> {
    let io = |e: std::io::Error| {
        err(
            IO_ERROR,
            format!("cannot read the device-info file {}", file.display()),
            e.to_string(),
        )
    };
    let link = match fs::symlink_metadata(file) {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Found::Nothing),
        Err(e) => return Err(io(e)),
    };
    if link.file_type().is_symlink() {
        return Ok(Found::Foreign("a symbolic link".into()));
    }
    if !link.file_type().is_file() {
        return Ok(Found::Foreign("not a regular file".into()));
    }
    let mut f = fs::File::open(file).map_err(io)?;
    let opened = f.metadata().map_err(io)?;
    if (opened.dev(), opened.ino()) != (link.dev(), link.ino()) {
        return Ok(Found::Foreign("replaced while it was read".into()));
    }
    let mut text = Vec::new();
    (&mut f).take(MAX_READ).read_to_end(&mut text).map_err(io)?;
    Ok(match serde_json::from_slice::<Marked>(&text) {
        Ok(m)
            if m.nfvswitch.container_id == key.container_id && m.nfvswitch.ifname == key.ifname =>
        {
            Found::Ours(link.dev(), link.ino())
        }
        Ok(m) => Found::Another(format!(
            "written for {}/{}",
            m.nfvswitch.container_id, m.nfvswitch.ifname
        )),
        Err(_) => Found::Foreign("not a device-info file this plugin wrote".into()),
    })
}

/// Writes `info` to `file`: a new file beside it (`O_EXCL`, so nothing
/// already there is opened), synced, then renamed over the path. The
/// path may hold nothing or this attachment's own file (ADD again);
/// anything else there is refused, never replaced.
pub fn write(file: &Path, info: &Value, key: &Key) -> Result<(), CniError> {
    if let Found::Foreign(why) = inspect(file, key)? {
        return Err(err(
            DEVICE_INFO_FOREIGN,
            format!(
                "the device-info path {} holds something else; not replaced",
                file.display()
            ),
            why,
        ));
    }
    let io = |what: &str, e: std::io::Error| {
        err(
            IO_ERROR,
            format!("cannot {what} the device-info file {}", file.display()),
            e.to_string(),
        )
    };
    if let Some(dir) = file.parent() {
        fs::create_dir_all(dir).map_err(|e| io("make the directory of", e))?;
    }
    let tmp = temp_beside(file);
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(&tmp)
        .map_err(|e| io("make a temporary file beside", e))?;
    let written = f
        .write_all(info.to_string().as_bytes())
        .and_then(|()| f.sync_all())
        .and_then(|()| fs::rename(&tmp, file));
    if let Err(e) = written {
        // Only a file this call made is removed.
        let _ = fs::remove_file(&tmp);
        return Err(io("write", e));
    }
    Ok(())
}

/// `.<name>.<pid>.<ns>.tmp` in the same directory (so the rename is
/// atomic).
fn temp_beside(file: &Path) -> PathBuf {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    file.with_file_name(format!(".{name}.{}.{ns}.tmp", std::process::id()))
}

/// DEL: removes `file` if it is this attachment's (checked again just
/// before the unlink); leaves anything else alone, saying so on stderr
/// (stdout carries only the result). Whether it removed the file.
pub fn remove_if_ours(file: &Path, key: &Key) -> Result<bool, CniError> {
    let (dev, ino) = match inspect(file, key)? {
        Found::Nothing => return Ok(false),
        Found::Another(why) | Found::Foreign(why) => {
            eprintln!("nfvswitch-cni: DEL leaves {} alone: {why}", file.display());
            return Ok(false);
        }
        Found::Ours(dev, ino) => (dev, ino),
    };
    let still = fs::symlink_metadata(file).is_ok_and(|m| (m.dev(), m.ino()) == (dev, ino));
    if !still {
        eprintln!(
            "nfvswitch-cni: DEL leaves {} alone: replaced while it was read",
            file.display()
        );
        return Ok(false);
    }
    match fs::remove_file(file) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
        Err(e) => Err(err(
            IO_ERROR,
            format!("cannot remove the device-info file {}", file.display()),
            e.to_string(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Dir(PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }
    fn scratch(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("nfv-cni-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
    fn key(id: &str) -> Key {
        Key::new(id, "net1").unwrap()
    }

    #[test]
    fn del_removes_only_its_own_file() {
        let d = scratch("devinfo-del");
        let ours = key("aaaa");
        let info = describe(
            VnfInterface::VhostUser,
            "server",
            Path::new("/run/p/a.sock"),
            &ours,
        );
        let other = describe(
            VnfInterface::VhostUser,
            "server",
            Path::new("/run/p/b.sock"),
            &key("bbbb"),
        );
        let target = d.0.join("victim");
        fs::write(&target, "root's data").unwrap();
        let precious = |name: &str, content: &str| {
            let p = d.0.join(name);
            fs::write(&p, content).unwrap();
            p
        };
        let link = d.0.join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let ours_link = d.0.join("ours-link");
        let ours_file = precious("ours-behind-link", &info.to_string());
        std::os::unix::fs::symlink(&ours_file, &ours_link).unwrap();
        fs::create_dir(d.0.join("a-dir")).unwrap();
        let foreign: Vec<(&str, PathBuf)> = vec![
            ("plain text", precious("text", "hello")),
            (
                "JSON without the marker",
                precious("nomark", r#"{"type": "vhost-user"}"#),
            ),
            (
                "another attachment's",
                precious("other", &other.to_string()),
            ),
            (
                "marker of the wrong shape",
                precious("odd", r#"{"nfvswitch": "aaaa"}"#),
            ),
            ("a symlink to a file", link.clone()),
            ("a symlink to our own file", ours_link.clone()),
            ("a directory", d.0.join("a-dir")),
        ];
        for (name, path) in &foreign {
            assert_eq!(remove_if_ours(path, &ours), Ok(false), "{name}");
            assert!(fs::symlink_metadata(path).is_ok(), "{name}: still there");
        }
        assert_eq!(fs::read_to_string(&target).unwrap(), "root's data");
        assert!(ours_file.exists());
        assert_eq!(remove_if_ours(&d.0.join("absent"), &ours), Ok(false));
        let mine = precious("mine", &info.to_string());
        assert_eq!(remove_if_ours(&mine, &ours), Ok(true));
        assert!(!mine.exists());
    }

    #[test]
    fn add_writes_its_file_and_refuses_to_replace_another() {
        let d = scratch("devinfo-add");
        let ours = key("aaaa");
        let info = describe(
            VnfInterface::Memif,
            "server",
            Path::new("/run/p/a.sock"),
            &ours,
        );
        let file = d.0.join("sub/dir/net1.json");
        write(&file, &info, &ours).unwrap();
        let back: Value = serde_json::from_slice(&fs::read(&file).unwrap()).unwrap();
        assert_eq!(back, info);
        assert_eq!(back["memif"]["role"], "slave");
        assert_eq!(fs::metadata(&file).unwrap().mode() & 0o777, 0o644);
        // ADD again: its own file is replaced.
        write(&file, &info, &ours).unwrap();
        assert_eq!(inspect(&file, &ours).unwrap(), {
            let m = fs::metadata(&file).unwrap();
            Found::Ours(m.dev(), m.ino())
        });
        // Another attachment's file: replaced (the path is reused).
        let theirs = key("bbbb");
        write(
            &file,
            &describe(VnfInterface::Memif, "server", Path::new("/b"), &theirs),
            &theirs,
        )
        .unwrap();
        assert!(matches!(inspect(&file, &ours).unwrap(), Found::Another(_)));
        write(&file, &info, &ours).unwrap();
        // A foreign file, a symlink: refused, left as they were; no
        // temporary file left behind.
        let target = d.0.join("victim");
        fs::write(&target, "root's data").unwrap();
        let link = d.0.join("link.json");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        for path in [&target, &link] {
            let e = write(path, &info, &key("bbbb")).unwrap_err();
            assert_eq!(e.code, DEVICE_INFO_FOREIGN, "{}", path.display());
        }
        assert_eq!(fs::read_to_string(&target).unwrap(), "root's data");
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        let names: Vec<_> = fs::read_dir(&d.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(!names.iter().any(|n| n.ends_with(".tmp")), "{names:?}");
    }
}
