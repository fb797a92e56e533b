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
//!   of the CNI network that asked for it;
//!   [`Node::gc_attachments`](crate::Node::gc_attachments) removes the
//!   attachments of one network that are not in the orchestrator's list
//!   of valid ones (CNI GC, which the spec scopes to the network in the
//!   config), and leaves other networks' alone.
//! * **Persisted.** With `[node] state_file`, every change rewrites the
//!   file (`crate::attachment_state`: a new file renamed over it, so a
//!   crash leaves the old or the new list, never half of one), and a node
//!   that starts re-creates the ports listed there: a restarted switch
//!   gives pods their ports back before their CNI plugin is asked
//!   anything. The file is not trusted: each attachment it lists passes
//!   the checks of a new request, after the config's ports are open, so
//!   one in conflict with a configured port loses (logged, counted in
//!   `show node`'s `attachments_refused`, left out).
//! * **Confined.** The socket is a file in `[node] socket_dir`
//!   (`crate::access::socket_in_dir`): a request names a file, not a path,
//!   and binding refuses a socket another process listens on.
//!
//! The port made is a vhost-user port (the switch in `mode`, the pod's
//! application the other side) or a memif port (the switch is the
//! server), on a socket in `[node] socket_dir`, a directory shared into
//! the pod. Its name is `c-` + the first 12 characters of the
//! container id + `-` + the interface name; its number the lowest free
//! from [`FIRST_ATTACHMENT_ID`].
//!
//! This module holds the requests and the checks that need no node; the
//! node's side (attach, detach, GC, restore at start) is `attach.rs`,
//! above the node.

use nfv_flow::PortNo;
use nfv_vnf_interface::VnfInterface;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use crate::attachment_limits::{
    FIRST_ATTACHMENT_ID, MAX_CONTAINER_ID, MAX_NETWORK_NAME, MAX_SOCKET_PATH,
};
pub use crate::error::AttachError;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AttachmentKey {
    pub container_id: String,
    pub ifname: String,
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
    /// The port's type: `"vhost-user"` or `"memif"` (`"vhost"` is read
    /// as `"vhost-user"`; written, and so kept in state files and
    /// answered, as `"vhost-user"`).
    #[serde(rename = "type")]
    pub kind: VnfInterface,
    /// The switch's role on the socket (vhost-user: server or client;
    /// memif: server only).
    #[serde(default)]
    pub mode: SwitchRole,
    /// A file name in `[node] socket_dir` (or an absolute path directly
    /// in it); kept and answered as the absolute path, at most
    /// [`MAX_SOCKET_PATH`] bytes.
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

/// The attachments of a node and where they are kept.
#[derive(Default)]
pub(crate) struct Attachments {
    pub state_file: Option<PathBuf>,
    pub list: BTreeMap<AttachmentKey, Attachment>,
    /// Attachments of the state file refused at start.
    pub restore_refused: u64,
}

impl AttachmentKey {
    pub(crate) fn check(&self) -> Result<(), AttachError> {
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
    pub(crate) fn port_name(&self) -> String {
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
    pub(crate) fn same_port(&self, other: &AttachRequest) -> bool {
        (self.kind, self.mode, &self.socket) == (other.kind, other.mode, &other.socket)
    }

    /// The checks that need no node; the socket is confined by
    /// [`AttachRequest::confine`].
    pub(crate) fn check(&self) -> Result<(), AttachError> {
        if self.network.len() > MAX_NETWORK_NAME {
            return Err(AttachError::Invalid(format!(
                "network name of {} bytes: at most {MAX_NETWORK_NAME}",
                self.network.len()
            )));
        }
        let s = self.socket.as_os_str().len();
        if s > MAX_SOCKET_PATH {
            return Err(AttachError::Invalid(format!(
                "socket {:?}: at most {MAX_SOCKET_PATH} bytes (the kernel's limit for a unix \
                 socket), {s} given",
                self.socket
            )));
        }
        if self.kind == VnfInterface::Memif && self.mode == SwitchRole::Client {
            return Err(AttachError::Invalid(
                "memif: the switch is the server (the pod's application connects)".into(),
            ));
        }
        Ok(())
    }

    /// The request with its socket resolved inside `socket_dir` (refused
    /// without one).
    pub(crate) fn confine(mut self, socket_dir: Option<&Path>) -> Result<Self, AttachError> {
        let Some(dir) = socket_dir else {
            return Err(AttachError::Invalid(
                "this node makes no attachments: set [node] socket_dir (the directory their \
                 sockets are made in)"
                    .into(),
            ));
        };
        self.socket =
            crate::access::socket_in_dir(dir, &self.socket).map_err(AttachError::Invalid)?;
        Ok(self)
    }

    /// The inline port table `add-port` takes.
    pub(crate) fn port_table(&self, name: &str, id: PortNo) -> String {
        let s = |v: &str| toml::Value::String(v.to_string()).to_string();
        let socket = s(&self.socket.to_string_lossy());
        match self.kind {
            VnfInterface::VhostUser => {
                let mode = match self.mode {
                    SwitchRole::Server => "server",
                    SwitchRole::Client => "client",
                };
                format!(
                    "{{ name = {}, id = {id}, type = \"vhost-user\", socket = {socket}, mode = \"{mode}\" }}",
                    s(name)
                )
            }
            VnfInterface::Memif => {
                format!(
                    "{{ name = {}, id = {id}, type = \"memif\", socket = {socket} }}",
                    s(name)
                )
            }
        }
    }
}

/// Every check of an attachment request that needs no running node: the
/// key, the request, and its socket confined to `socket_dir` (the request
/// returned has the socket's full path). Also the fuzz target's entry.
pub fn checked_request(
    key: &AttachmentKey,
    req: AttachRequest,
    socket_dir: Option<&Path>,
) -> Result<AttachRequest, AttachError> {
    key.check()?;
    req.check()?;
    req.confine(socket_dir)
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
            req(VnfInterface::VhostUser, SwitchRole::Client, "/run/x.sock")
                .check()
                .is_ok()
        );
        assert!(
            req(VnfInterface::Memif, SwitchRole::Client, "/run/x.sock")
                .check()
                .is_err()
        );
        // A file name: the node puts it in its socket_dir (`confine`).
        assert!(
            req(VnfInterface::VhostUser, SwitchRole::Server, "x.sock")
                .check()
                .is_ok()
        );
        assert!(
            req(VnfInterface::VhostUser, SwitchRole::Server, "x.sock")
                .confine(None)
                .is_err(),
            "no socket_dir: no attachments"
        );
        assert_eq!(
            req(VnfInterface::VhostUser, SwitchRole::Server, "x.sock")
                .confine(Some(Path::new("/run/nfv")))
                .unwrap()
                .socket,
            Path::new("/run/nfv/x.sock")
        );
        assert!(
            req(VnfInterface::VhostUser, SwitchRole::Server, "../x.sock")
                .confine(Some(Path::new("/run/nfv")))
                .is_err()
        );
        let long = format!("/{}", "d".repeat(MAX_SOCKET_PATH));
        assert!(
            req(VnfInterface::VhostUser, SwitchRole::Server, &long)
                .check()
                .is_err()
        );
        let fits = format!("/{}", "d".repeat(MAX_SOCKET_PATH - 1));
        assert!(
            req(VnfInterface::VhostUser, SwitchRole::Server, &fits)
                .check()
                .is_ok()
        );
        let mut named = req(VnfInterface::VhostUser, SwitchRole::Server, "/run/x.sock");
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
            kind: VnfInterface::VhostUser,
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
            kind: VnfInterface::Memif,
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
            (VnfInterface::VhostUser, SwitchRole::Server)
        );
        assert!(
            serde_json::from_str::<AttachRequest>(r#"{"type": "tap", "socket": "/a"}"#).is_err()
        );
        assert!(
            serde_json::from_str::<AttachRequest>(r#"{"type": "memif", "socket": "/a", "x": 1}"#)
                .is_err()
        );
        assert_eq!(r.network, "", "the network is optional");
        // The short spelling the command line takes is read too; what is
        // written back (state file, answers) is what older nodes read.
        let short: AttachRequest =
            serde_json::from_str(r#"{"type": "vhost", "socket": "/run/a.sock"}"#).unwrap();
        assert_eq!(short, r);
        assert_eq!(serde_json::to_value(&short).unwrap()["type"], "vhost-user");
        let r: AttachRequest = serde_json::from_str(
            r#"{"type": "memif", "socket": "/run/a.sock", "network": "nfv-memif"}"#,
        )
        .unwrap();
        assert_eq!(r.network, "nfv-memif");
    }
}
