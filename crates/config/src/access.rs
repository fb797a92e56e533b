//! `[node]`'s access keys: who may change the node through the REST API
//! and the control socket, and which paths a run-time request may name.
//! Validated here; enforced by `nfv-api` (credential, Host, Origin),
//! `nfv-control` (attachment sockets, pcap paths, kernel ports, the
//! control socket's group) and the daemon (token file, TLS).

use std::path::{Path, PathBuf};

use crate::check::{self, Result};
use crate::error::Doc;
use crate::raw::{RawNode, S};

/// Who may do what, and where run-time requests may point.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AccessConfig {
    /// `[node] api_token_file`: the bearer token every mutating REST
    /// request must carry (`Authorization: Bearer TOKEN`). Created, mode
    /// 0600, with a random token at the first start when missing. `None`:
    /// [`AccessConfig::token_file_for`] the control socket.
    pub api_token_file: Option<PathBuf>,
    /// `[node] api_hosts`: names besides the bound address (and
    /// `localhost` for a loopback bind) that a request's `Host` may give;
    /// anything else is answered 421 (DNS rebinding).
    pub api_hosts: Vec<String>,
    /// `[node] api_open_reads`: whether GETs need no token. `None`: open
    /// on a loopback bind, token needed elsewhere.
    pub api_open_reads: Option<bool>,
    /// `[node] socket_dir`: the directory attachment sockets are made in
    /// (a request names a file in it, never a path). `None`: attachments
    /// are refused.
    pub socket_dir: Option<PathBuf>,
    /// `[node] pcap_dir`: the directory a `pcap` port added over the REST
    /// API may capture to or replay from. `None`: no pcap port over REST.
    pub pcap_dir: Option<PathBuf>,
    /// `[node] runtime_kernel_ports`: whether kernel-facing ports (afxdp,
    /// afpacket, tap, VXLAN underlays) may be added while the node runs;
    /// default false (the config file is the only way).
    pub runtime_kernel_ports: bool,
    /// `[node] group`: a group whose members may use the control socket
    /// (mode 0660, group-owned) besides root and the switch's own user.
    pub group: Option<String>,
}

impl AccessConfig {
    /// The default token file: beside the control socket,
    /// `nfvswitch-<node>.token`.
    pub fn token_file_for(control_socket: &Path, node_name: &str) -> PathBuf {
        control_socket
            .parent()
            .unwrap_or(Path::new("/"))
            .join(format!("nfvswitch-{node_name}.token"))
    }
}

/// The access keys of `[node]`.
pub(crate) fn access(doc: &Doc<'_>, n: Option<&RawNode>, base: &Path) -> Result<AccessConfig> {
    let Some(n) = n else {
        return Ok(AccessConfig::default());
    };
    let path = |v: &Option<S<String>>, field: &str| -> Result<Option<PathBuf>> {
        v.as_ref()
            .map(|v| check::file_path(doc, v, field, base))
            .transpose()
    };
    let dir = |v: &Option<S<String>>, field: &str| -> Result<Option<PathBuf>> {
        let Some(p) = path(v, field)? else {
            return Ok(None);
        };
        // Attachment sockets are `dir/<name>`: leave room for a name.
        let room = nfv_settings::MAX_SOCKET_PATH.saturating_sub(24);
        if field == "node.socket_dir" && p.as_os_str().len() > room {
            let v = v.as_ref().unwrap_or_else(|| unreachable!("path given"));
            return Err(doc.err(
                v.span(),
                field,
                format!(
                    "{} is {} bytes long; at most {room}, so that a socket name fits in the \
                     {} bytes of a Unix socket path",
                    p.display(),
                    p.as_os_str().len(),
                    nfv_settings::MAX_SOCKET_PATH
                ),
            ));
        }
        Ok(Some(p))
    };
    let mut api_hosts = Vec::new();
    if let Some(hosts) = &n.api_hosts {
        for (i, h) in hosts.get_ref().iter().enumerate() {
            let name = h.get_ref();
            let bare = name.trim_start_matches('[').trim_end_matches(']');
            let ok = bare.parse::<std::net::IpAddr>().is_ok()
                || (!name.is_empty()
                    && name.len() <= 253
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"-.".contains(&b)));
            if !ok {
                return Err(doc.err(
                    h.span(),
                    format!("node.api_hosts[{i}]"),
                    format!(
                        "{name:?} is not a host name (letters, digits, '-', '.', or an IP \
                         address; no port)"
                    ),
                ));
            }
            // As `Host` gives it, without brackets (nfv-api compares so).
            let bare = if bare.parse::<std::net::IpAddr>().is_ok() {
                bare
            } else {
                name
            };
            api_hosts.push(bare.to_ascii_lowercase());
        }
    }
    let group = match &n.group {
        Some(g) => Some(check::name(doc, g, "node.group", 32)?),
        None => None,
    };
    Ok(AccessConfig {
        api_token_file: path(&n.api_token_file, "node.api_token_file")?,
        api_hosts,
        api_open_reads: n.api_open_reads.as_ref().map(|v| *v.get_ref()),
        socket_dir: dir(&n.socket_dir, "node.socket_dir")?,
        pcap_dir: dir(&n.pcap_dir, "node.pcap_dir")?,
        runtime_kernel_ports: n
            .runtime_kernel_ports
            .as_ref()
            .is_some_and(|v| *v.get_ref()),
        group,
    })
}
