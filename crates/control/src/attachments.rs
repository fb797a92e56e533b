//! Attachments: ports a container orchestrator asks for on a container's
//! behalf (the CNI plugin's ADD), keyed by container id and interface
//! name as the CNI spec keys an attachment.
//!
//! * **Idempotent.** Attaching a key again with the same request (port and
//!   network; the kept IPAM `addresses` are the first request's) answers
//!   the port already made; with a different one it is refused
//!   ([`AttachError::Conflict`]). Detaching an unknown key is not an error
//!   (CNI DEL must succeed for what is already gone).
//! * **Garbage collection, per network.** Each attachment carries the name
//!   of the CNI network that asked for it; [`Node::gc_attachments`]
//!   removes the attachments of one network that are not in the
//!   orchestrator's list of valid ones (CNI GC, which the spec scopes to
//!   the network in the config), and leaves other networks' alone.
//! * **Persisted.** With `[node] state_file`, every change rewrites the
//!   file (a temporary file renamed over it, so a crash leaves the old or
//!   the new list, never half of one), and a node that starts re-creates
//!   the ports listed there: a restarted switch gives pods their ports
//!   back before their CNI plugin is asked anything.
//!
//! The port made is a vhost-user port (the switch in `mode`, the pod's
//! application the other side) or a memif port (the switch is the
//! server), on the socket path the plugin chose in a directory shared
//! into the pod. Its name is `c-` + the first 12 characters of the
//! container id + `-` + the interface name; its number the lowest free
//! from [`FIRST_ATTACHMENT_ID`].

use crate::Node;
use crate::error::RequestError;
use nfv_flow::PortNo;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Attachment ports are numbered from here up, clear of hand-made ones.
pub const FIRST_ATTACHMENT_ID: PortNo = 1000;
/// `sun_path` holds 108 bytes with the terminating NUL.
pub const MAX_SOCKET_PATH: usize = 107;
/// CNI allows container ids of any length; ours keep state files sane.
pub const MAX_CONTAINER_ID: usize = 256;
/// Network names are short in practice; ours keep state files sane.
pub const MAX_NETWORK_NAME: usize = 256;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AttachmentKey {
    pub container_id: String,
    pub ifname: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AttachKind {
    VhostUser,
    Memif,
}

/// Which end of the socket the switch is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SwitchRole {
    #[default]
    Server,
    Client,
}

/// What the orchestrator asks for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttachRequest {
    #[serde(rename = "type")]
    pub kind: AttachKind,
    /// The switch's role on the socket (vhost-user: server or client;
    /// memif: server only).
    #[serde(default)]
    pub mode: SwitchRole,
    /// Absolute, at most [`MAX_SOCKET_PATH`] bytes.
    pub socket: PathBuf,
    /// The CNI network (`name` in its config) the attachment belongs to;
    /// GC is scoped by it. Empty in state files written before networks
    /// were kept: such an attachment takes the network of the next ADD
    /// that asks for the same port, and no GC removes it until then.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub network: String,
    /// What the plugin's delegated IPAM plugin answered for this
    /// attachment, kept so that ADD again answers the same addresses
    /// (IPAM plugins refuse a second allocation). Not compared when a
    /// request is repeated: the first one stays.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addresses: Option<serde_json::Value>,
}

/// An attachment as the node keeps and reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    #[serde(flatten)]
    pub key: AttachmentKey,
    #[serde(flatten)]
    pub request: AttachRequest,
    /// The port made for it.
    pub port: String,
    pub id: PortNo,
}

#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    #[error("{0}")]
    Invalid(String),
    #[error(
        "{container_id}/{ifname} is attached already with another request (port {port}); \
         detach it first"
    )]
    Conflict {
        container_id: String,
        ifname: String,
        port: String,
    },
    #[error("no free port number from {FIRST_ATTACHMENT_ID} up")]
    NoFreeId,
    #[error(transparent)]
    Port(#[from] RequestError),
    #[error("state file {path}: {err}")]
    State { path: PathBuf, err: String },
}

/// The attachments of a node and where they are kept.
#[derive(Default)]
pub(crate) struct Attachments {
    pub state_file: Option<PathBuf>,
    pub list: BTreeMap<AttachmentKey, Attachment>,
}

#[derive(Serialize, Deserialize)]
struct StateFile {
    version: u32,
    attachments: Vec<Attachment>,
}

impl AttachmentKey {
    fn check(&self) -> Result<(), AttachError> {
        let id_ok = !self.container_id.is_empty()
            && self.container_id.len() <= MAX_CONTAINER_ID
            && self
                .container_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
        if !id_ok {
            return Err(AttachError::Invalid(format!(
                "container id {:?}: 1 to {MAX_CONTAINER_ID} of a-z A-Z 0-9 _ . - (as CNI requires)",
                self.container_id
            )));
        }
        nfv_settings::check::iface_name(&self.ifname)
            .map(drop)
            .map_err(|m| AttachError::Invalid(format!("ifname: {m}")))
    }

    /// The port's name: `c-<id, 12 chars>-<ifname>` with characters a port
    /// name cannot hold replaced by `_`.
    fn port_name(&self) -> String {
        let id: String = self.container_id.chars().take(12).collect();
        let ifname: String = self
            .ifname
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        format!("c-{id}-{ifname}")
    }
}

impl AttachRequest {
    /// The same port asked for, whatever the network.
    fn same_port(&self, other: &AttachRequest) -> bool {
        (self.kind, self.mode, &self.socket) == (other.kind, other.mode, &other.socket)
    }

    fn check(&self) -> Result<(), AttachError> {
        if self.network.len() > MAX_NETWORK_NAME {
            return Err(AttachError::Invalid(format!(
                "network name of {} bytes: at most {MAX_NETWORK_NAME}",
                self.network.len()
            )));
        }
        let s = self.socket.as_os_str().len();
        if !self.socket.is_absolute() || s > MAX_SOCKET_PATH {
            return Err(AttachError::Invalid(format!(
                "socket {:?}: an absolute path of at most {MAX_SOCKET_PATH} bytes (the kernel's \
                 limit for a unix socket), {s} given",
                self.socket
            )));
        }
        if self.kind == AttachKind::Memif && self.mode == SwitchRole::Client {
            return Err(AttachError::Invalid(
                "memif: the switch is the server (the pod's application connects)".into(),
            ));
        }
        Ok(())
    }

    /// The inline port table `add-port` takes.
    fn port_table(&self, name: &str, id: PortNo) -> String {
        let s = |v: &str| toml::Value::String(v.to_string()).to_string();
        let socket = s(&self.socket.to_string_lossy());
        match self.kind {
            AttachKind::VhostUser => {
                let mode = match self.mode {
                    SwitchRole::Server => "server",
                    SwitchRole::Client => "client",
                };
                format!(
                    "{{ name = {}, id = {id}, type = \"vhost-user\", socket = {socket}, mode = \"{mode}\" }}",
                    s(name)
                )
            }
            AttachKind::Memif => {
                format!(
                    "{{ name = {}, id = {id}, type = \"memif\", socket = {socket} }}",
                    s(name)
                )
            }
        }
    }
}

impl Attachments {
    fn save(&self) -> Result<(), AttachError> {
        let Some(path) = &self.state_file else {
            return Ok(());
        };
        let err = |e: &dyn std::fmt::Display| AttachError::State {
            path: path.clone(),
            err: e.to_string(),
        };
        let state = StateFile {
            version: 1,
            attachments: self.list.values().cloned().collect(),
        };
        let text = serde_json::to_vec_pretty(&state).map_err(|e| err(&e))?;
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, text).map_err(|e| err(&e))?;
        std::fs::File::open(&tmp)
            .and_then(|f| f.sync_all())
            .map_err(|e| err(&e))?;
        std::fs::rename(&tmp, path).map_err(|e| err(&e))
    }

    /// The attachments a state file lists (none if it does not exist).
    pub fn load(path: &Path) -> Result<Vec<Attachment>, AttachError> {
        let err = |e: &dyn std::fmt::Display| AttachError::State {
            path: path.to_path_buf(),
            err: e.to_string(),
        };
        let text = match std::fs::read(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(err(&e)),
        };
        let state: StateFile = serde_json::from_slice(&text).map_err(|e| err(&e))?;
        if state.version != 1 {
            return Err(err(&format!(
                "version {} (this switch reads 1)",
                state.version
            )));
        }
        Ok(state.attachments)
    }
}

impl Node {
    fn attachments(&self) -> std::sync::MutexGuard<'_, Attachments> {
        self.attachments.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every attachment, by key.
    pub fn list_attachments(&self) -> Vec<Attachment> {
        self.attachments().list.values().cloned().collect()
    }

    /// Makes the port of `key` (or answers the one made before for the
    /// same request). True when it was made now.
    pub fn attach(
        &self,
        key: AttachmentKey,
        req: AttachRequest,
    ) -> Result<(Attachment, bool), AttachError> {
        key.check()?;
        req.check()?;
        let mut all = self.attachments();
        if let Some(a) = all.list.get_mut(&key) {
            let same_network = a.request.network == req.network || a.request.network.is_empty();
            if a.request.same_port(&req) && same_network {
                // An old state file's attachment takes the network; one
                // made without addresses takes them.
                let adopt = (a.request.network.is_empty() && !req.network.is_empty())
                    || (a.request.addresses.is_none() && req.addresses.is_some());
                if adopt {
                    a.request.network = req.network;
                    a.request.addresses = a.request.addresses.take().or(req.addresses);
                }
                let a = a.clone();
                if adopt && let Err(e) = all.save() {
                    tracing::error!("attachment {}: {e}", a.port);
                }
                return Ok((a, false));
            }
            return Err(AttachError::Conflict {
                container_id: key.container_id,
                ifname: key.ifname,
                port: a.port.clone(),
            });
        }
        let (name, id) = self.free_name_and_id(&key)?;
        self.add_port(&req.port_table(&name, id))?;
        let a = Attachment {
            key: key.clone(),
            request: req,
            port: name,
            id,
        };
        all.list.insert(key, a.clone());
        if let Err(e) = all.save() {
            // The port works; the next change retries the file.
            tracing::error!("attachment {}: {e}", a.port);
        }
        tracing::info!(
            "attached {}/{} as port {} ({})",
            a.key.container_id,
            a.key.ifname,
            a.port,
            a.id
        );
        Ok((a, true))
    }

    /// Removes the port of `key`; `None` if there was no such attachment.
    pub fn detach(&self, key: &AttachmentKey) -> Result<Option<Attachment>, AttachError> {
        let mut all = self.attachments();
        let Some(a) = all.list.remove(key) else {
            return Ok(None);
        };
        match self.del_port(&a.port) {
            Ok(_) | Err(RequestError::NoSuchPort(_)) => {}
            Err(RequestError::Datapath(e)) if e.to_string().contains("no port") => {}
            Err(e) => {
                all.list.insert(key.clone(), a);
                return Err(e.into());
            }
        }
        all.save()?;
        tracing::info!(
            "detached {}/{} (port {})",
            a.key.container_id,
            a.key.ifname,
            a.port
        );
        Ok(Some(a))
    }

    /// Detaches every attachment of `network` whose key is not in `valid`;
    /// returns them. Other networks' attachments stay.
    pub fn gc_attachments(
        &self,
        network: &str,
        valid: &[AttachmentKey],
    ) -> Result<Vec<Attachment>, AttachError> {
        if network.is_empty() {
            return Err(AttachError::Invalid(
                "GC needs the network's name (CNI GC is scoped to one network)".into(),
            ));
        }
        let stale: Vec<AttachmentKey> = self
            .attachments()
            .list
            .values()
            .filter(|a| a.request.network == network && !valid.contains(&a.key))
            .map(|a| a.key.clone())
            .collect();
        let mut removed = Vec::new();
        for k in stale {
            if let Some(a) = self.detach(&k)? {
                removed.push(a);
            }
        }
        Ok(removed)
    }

    /// At start: re-creates the ports of the state file's attachments.
    /// A port that cannot open is logged (and listed by `show ports` if it
    /// failed as a kernel port does); the attachment stays, so DEL and GC
    /// can still remove it.
    pub(crate) fn restore_attachments(&self) -> Result<usize, AttachError> {
        let Some(path) = self.attachments().state_file.clone() else {
            return Ok(0);
        };
        let saved = Attachments::load(&path)?;
        let n = saved.len();
        for a in saved {
            if let Err(e) = self.add_port(&a.request.port_table(&a.port, a.id)) {
                tracing::error!(
                    "attachment {}/{}: port {}: {e}",
                    a.key.container_id,
                    a.key.ifname,
                    a.port
                );
            }
            self.attachments().list.insert(a.key.clone(), a);
        }
        if n > 0 {
            tracing::info!("{n} attachment(s) restored from {}", path.display());
        }
        Ok(n)
    }

    fn free_name_and_id(&self, key: &AttachmentKey) -> Result<(String, PortNo), AttachError> {
        let configs = self.port_configs();
        let taken_id =
            |id: PortNo| configs.iter().any(|c| c.id == id) || self.failed().contains_key(&id);
        let id = (FIRST_ATTACHMENT_ID..=nfv_config::MAX_PORT_ID)
            .find(|&id| !taken_id(id))
            .ok_or(AttachError::NoFreeId)?;
        let mut name = key.port_name();
        if configs.iter().any(|c| c.name == name) {
            name = format!("c-{id}-{}", &name[name.len().min(2 + 12 + 1)..]);
        }
        name.truncate(nfv_ports::config::MAX_PORT_NAME);
        Ok((name, id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_requests_are_checked() {
        let key = |c: &str, i: &str| AttachmentKey {
            container_id: c.into(),
            ifname: i.into(),
        };
        assert!(key("abc123_-.", "net1").check().is_ok());
        for (c, i) in [
            ("", "net1"),
            ("a/b", "net1"),
            ("a b", "net1"),
            ("abc", ""),
            ("abc", "a-very-long-ifname"),
        ] {
            assert!(key(c, i).check().is_err(), "{c:?}/{i:?}");
        }
        assert!(key(&"x".repeat(MAX_CONTAINER_ID + 1), "n").check().is_err());
        let req = |kind, mode, socket: &str| AttachRequest {
            kind,
            mode,
            socket: socket.into(),
            network: "nfv".into(),
            addresses: None,
        };
        assert!(
            req(AttachKind::VhostUser, SwitchRole::Client, "/run/x.sock")
                .check()
                .is_ok()
        );
        assert!(
            req(AttachKind::Memif, SwitchRole::Client, "/run/x.sock")
                .check()
                .is_err()
        );
        assert!(
            req(AttachKind::VhostUser, SwitchRole::Server, "x.sock")
                .check()
                .is_err()
        );
        let long = format!("/{}", "d".repeat(MAX_SOCKET_PATH));
        assert!(
            req(AttachKind::VhostUser, SwitchRole::Server, &long)
                .check()
                .is_err()
        );
        let fits = format!("/{}", "d".repeat(MAX_SOCKET_PATH - 1));
        assert!(
            req(AttachKind::VhostUser, SwitchRole::Server, &fits)
                .check()
                .is_ok()
        );
        let mut named = req(AttachKind::VhostUser, SwitchRole::Server, "/run/x.sock");
        named.network = "n".repeat(MAX_NETWORK_NAME + 1);
        assert!(named.check().is_err());
    }

    #[test]
    fn port_names_and_tables() {
        let k = AttachmentKey {
            container_id: "0123456789abcdef0123".into(),
            ifname: "net@1".into(),
        };
        assert_eq!(k.port_name(), "c-0123456789ab-net_1");
        let r = AttachRequest {
            kind: AttachKind::VhostUser,
            mode: SwitchRole::Client,
            socket: "/var/run/nfv/a \"b\".sock".into(),
            network: String::new(),
            addresses: None,
        };
        assert_eq!(
            r.port_table("c-x-net1", 1000),
            "{ name = \"c-x-net1\", id = 1000, type = \"vhost-user\", socket = '/var/run/nfv/a \"b\".sock', mode = \"client\" }"
        );
        // The switch's own port-table parser reads the quoted path back.
        let p = nfv_config::parse_port_table(&r.port_table("c-x-net1", 1000), &Default::default())
            .unwrap();
        assert_eq!(
            p.kind.socket(),
            Some(std::path::Path::new("/var/run/nfv/a \"b\".sock"))
        );
        let m = AttachRequest {
            kind: AttachKind::Memif,
            ..r
        };
        assert!(m.port_table("c-x-net1", 1001).contains("type = \"memif\""));
    }

    #[test]
    fn the_request_reads_as_the_plugin_sends_it() {
        let r: AttachRequest =
            serde_json::from_str(r#"{"type": "vhost-user", "socket": "/run/a.sock"}"#).unwrap();
        assert_eq!(
            (r.kind, r.mode),
            (AttachKind::VhostUser, SwitchRole::Server)
        );
        assert!(
            serde_json::from_str::<AttachRequest>(r#"{"type": "tap", "socket": "/a"}"#).is_err()
        );
        assert!(
            serde_json::from_str::<AttachRequest>(r#"{"type": "memif", "socket": "/a", "x": 1}"#)
                .is_err()
        );
        assert_eq!(r.network, "", "the network is optional");
        let r: AttachRequest = serde_json::from_str(
            r#"{"type": "memif", "socket": "/run/a.sock", "network": "nfv-memif"}"#,
        )
        .unwrap();
        assert_eq!(r.network, "nfv-memif");
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
        let old = Attachments::load(&path).unwrap();
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
        };
        state.save().unwrap();
        assert_eq!(Attachments::load(&path).unwrap(), vec![a]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
