//! The checks that need every port at once: unique names, ids, vhost-user
//! sockets and kernel interfaces, and ring ends that name each other with
//! the same size. One validator for both places ports come from: a whole
//! file at load ([`Peers::Complete`]) and one port added to a running node
//! (`add-port`, [`Peers::MayBeMissing`]); only the wording of the error
//! differs (`port[1]` and lines in a file, port names at run time).
//!
//! Sockets are compared as the files they name ([`socket_key`]), not as
//! written: `socks/../socks/a.sock` or a path through a linked directory
//! is the same socket as `socks/a.sock`.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::Path;

use nfv_ports::config::{PortConfig, PortKind};

/// Whether every ring's peer must be in the set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peers {
    /// A whole file: a ring whose peer is absent is an error.
    Complete,
    /// A running node: the other end of a ring may be added later.
    MayBeMissing,
}

/// What two ports (or one ring port) disagree on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConflictKind {
    /// Both have the same name.
    Name,
    /// Both have the same id.
    Id,
    /// Both are vhost-user ports on the same socket.
    Socket,
    /// Both are kernel-facing ports on the same interface.
    Iface,
    /// A ring's peer is not in the set ([`Peers::Complete`] only).
    NoPeer,
    /// A ring's peer is not a ring.
    PeerNotRing,
    /// A ring's peer is a ring that names another port as its peer.
    PeerNotReciprocal,
    /// The two ends of a ring have different sizes.
    PeerSize,
    /// A port borrows receive buffers (`zero_copy`) from a port that is
    /// not in the set ([`Peers::Complete`] only).
    NoLender,
    /// ... or from a port that does not lend them (not vhost-user).
    NotLender,
    /// Two ports borrow from the same one.
    LenderTaken,
}

impl ConflictKind {
    /// The key of `port` the conflict is about.
    pub fn field(self) -> &'static str {
        match self {
            ConflictKind::Name => "name",
            ConflictKind::Id => "id",
            ConflictKind::Socket => "socket",
            ConflictKind::Iface => "iface",
            ConflictKind::NoPeer | ConflictKind::PeerNotRing | ConflictKind::PeerNotReciprocal => {
                "peer"
            }
            ConflictKind::PeerSize => "size",
            ConflictKind::NoLender | ConflictKind::NotLender | ConflictKind::LenderTaken => {
                "zero_copy"
            }
        }
    }
}

/// A conflict found by [`check_port_set`]: port `port` (an index into the
/// checked slice) against port `other` (`None` for [`ConflictKind::NoPeer`]).
/// For duplicates `other` is the earlier port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortConflict {
    pub kind: ConflictKind,
    pub port: usize,
    pub other: Option<usize>,
}

impl PortConflict {
    /// `field: message`, naming ports by name, as `add-port` reports it.
    pub fn describe(&self, ports: &[PortConfig]) -> String {
        let p = &ports[self.port];
        let o = self.other.map(|j| &ports[j]);
        let other_name = o.map_or("", |o| o.name.as_str());
        let message = match (self.kind, o.map(|o| &o.kind)) {
            (ConflictKind::Name, _) => format!(
                "port name {:?} is already in use (id {})",
                p.name,
                o.map_or(0, |o| o.id)
            ),
            (ConflictKind::Id, _) => {
                format!("port number {} is already in use (by {other_name:?})", p.id)
            }
            (ConflictKind::Socket, other) => {
                socket_conflict(p, other, &format!("port {other_name:?}"))
            }
            (ConflictKind::Iface, _) => format!(
                "interface {:?} is already used by port {other_name:?}; one port per kernel \
                 interface",
                port_iface(p).unwrap_or_default()
            ),
            (ConflictKind::NoPeer, _) => {
                format!(
                    "no port is named {:?}",
                    port_ring_peer(p).unwrap_or_default()
                )
            }
            (ConflictKind::PeerNotRing, Some(k)) => format!(
                "ring port {:?} has peer {other_name:?}, which is of type {:?}, not \"ring\"",
                p.name,
                k.type_name()
            ),
            (ConflictKind::PeerNotReciprocal, _) => format!(
                "ring port {other_name:?} names {:?} as its peer, not {:?}; the two ends must \
                 name each other",
                o.and_then(port_ring_peer).unwrap_or_default(),
                p.name
            ),
            (ConflictKind::PeerSize, _) => format!(
                "{} differs from the size of its peer {other_name:?} ({})",
                port_ring_size(p).unwrap_or(0),
                o.and_then(port_ring_size).unwrap_or(0)
            ),
            (ConflictKind::NoLender, _) => format!(
                "no port is named {:?}",
                p.kind.borrows_from().unwrap_or_default()
            ),
            (ConflictKind::NotLender, Some(k)) => format!(
                "port {other_name:?} is of type {:?}; zero_copy needs a vhost-user port",
                k.type_name()
            ),
            (ConflictKind::LenderTaken, _) => format!(
                "port {other_name:?} already receives into {:?}'s buffers; one borrower per VNF",
                p.kind.borrows_from().unwrap_or_default()
            ),
            (ConflictKind::PeerNotRing | ConflictKind::NotLender, None) => String::new(),
        };
        format!("{}: {message}", self.kind.field())
    }
}

pub(crate) fn port_socket(p: &PortConfig) -> Option<&Path> {
    p.kind.socket()
}

/// What two sockets are compared by: an abstract name (`@name`, memif)
/// byte for byte as written (`@a/./b` is not `@a/b`), a file by its
/// canonical path ([`nfv_settings::unix_socket::canonical_path`]:
/// directory resolved, links followed, `.` and `..` removed). Reads the
/// file system.
pub fn socket_key(socket: &Path) -> OsString {
    if socket.as_os_str().as_encoded_bytes().starts_with(b"@") {
        return socket.as_os_str().to_os_string();
    }
    nfv_settings::unix_socket::canonical_path(socket).into_os_string()
}

pub(crate) fn port_iface(p: &PortConfig) -> Option<&str> {
    p.kind.iface()
}

pub(crate) fn port_ring_peer(p: &PortConfig) -> Option<&str> {
    match &p.kind {
        PortKind::Ring(r) => Some(&r.peer),
        _ => None,
    }
}

pub(crate) fn port_ring_size(p: &PortConfig) -> Option<usize> {
    match &p.kind {
        PortKind::Ring(r) => Some(r.size),
        _ => None,
    }
}

/// The first conflict among `ports`, in this order: names and ids (port by
/// port), sockets, interfaces, ring peers.
pub fn check_port_set(ports: &[PortConfig], peers: Peers) -> Result<(), PortConflict> {
    let conflict = |kind, port, other| PortConflict { kind, port, other };
    let mut by_name: HashMap<&str, usize> = HashMap::new();
    let mut by_id: HashMap<u16, usize> = HashMap::new();
    for (i, p) in ports.iter().enumerate() {
        if let Some(j) = by_name.insert(&p.name, i) {
            return Err(conflict(ConflictKind::Name, i, Some(j)));
        }
        if let Some(j) = by_id.insert(p.id, i) {
            return Err(conflict(ConflictKind::Id, i, Some(j)));
        }
    }
    shared_sockets(ports).map_err(|(i, j)| conflict(ConflictKind::Socket, i, Some(j)))?;
    unique(ports, port_iface).map_err(|(i, j)| conflict(ConflictKind::Iface, i, Some(j)))?;
    for (i, p) in ports.iter().enumerate() {
        let Some(peer) = port_ring_peer(p) else {
            continue;
        };
        let Some(&j) = by_name.get(peer) else {
            if peers == Peers::Complete {
                return Err(conflict(ConflictKind::NoPeer, i, None));
            }
            continue;
        };
        let other = &ports[j];
        match port_ring_peer(other) {
            None => return Err(conflict(ConflictKind::PeerNotRing, i, Some(j))),
            Some(back) if back != p.name => {
                return Err(conflict(ConflictKind::PeerNotReciprocal, i, Some(j)));
            }
            Some(_) if i > j && port_ring_size(other) != port_ring_size(p) => {
                return Err(conflict(ConflictKind::PeerSize, i, Some(j)));
            }
            Some(_) => {}
        }
    }
    let mut borrowed: HashMap<&str, usize> = HashMap::new();
    for (i, p) in ports.iter().enumerate() {
        let Some(target) = p.kind.borrows_from() else {
            continue;
        };
        match by_name.get(target) {
            None if peers == Peers::Complete => {
                return Err(conflict(ConflictKind::NoLender, i, None));
            }
            None => {}
            Some(&j) if !ports[j].kind.lends() => {
                return Err(conflict(ConflictKind::NotLender, i, Some(j)));
            }
            Some(_) => {}
        }
        if let Some(j) = borrowed.insert(target, i) {
            return Err(conflict(ConflictKind::LenderTaken, i, Some(j)));
        }
    }
    Ok(())
}

/// Why `p` may not have its socket: `other` (called `other_label`) has
/// it, and either may not share it or serves the same member.
pub(crate) fn socket_conflict(
    p: &PortConfig,
    other: Option<&PortKind>,
    other_label: &str,
) -> String {
    let sock = port_socket(p).map_or_else(String::new, |s| s.display().to_string());
    // Written differently, the same file: say which.
    let same_as = match (port_socket(p), other.and_then(|o| o.socket())) {
        (Some(a), Some(b)) if a != b => format!(
            " (written {}; both are {})",
            b.display(),
            Path::new(&socket_key(a)).display()
        ),
        _ => String::new(),
    };
    match (p.kind.socket_share(), other.and_then(|o| o.socket_share())) {
        (Some(a), Some(b)) if a.group == b.group => format!(
            "{sock} already serves {} {} for {other_label}{same_as}; ports sharing a socket \
             need different ones",
            a.member_name, a.member
        ),
        _ => format!("{sock} is already the socket of {other_label}{same_as}"),
    }
}

/// The first port whose socket an earlier port already has and may not
/// share with it ([`nfv_ports::config::SocketShare`]: same group, another
/// member): (later, earlier).
fn shared_sockets(ports: &[PortConfig]) -> Result<(), (usize, usize)> {
    let mut seen: HashMap<OsString, Vec<usize>> = HashMap::new();
    for (i, p) in ports.iter().enumerate() {
        let Some(sock) = port_socket(p) else {
            continue;
        };
        let earlier = seen.entry(socket_key(sock)).or_default();
        for &j in earlier.iter() {
            let may_share = match (p.kind.socket_share(), ports[j].kind.socket_share()) {
                (Some(a), Some(b)) => a.group == b.group && a.member != b.member,
                _ => false,
            };
            if !may_share {
                return Err((i, j));
            }
        }
        earlier.push(i);
    }
    Ok(())
}

/// The first port whose `key` an earlier port already has: (later, earlier).
fn unique<'a, K: Eq + std::hash::Hash + ?Sized + 'a>(
    ports: &'a [PortConfig],
    key: fn(&'a PortConfig) -> Option<&'a K>,
) -> Result<(), (usize, usize)> {
    let mut seen: HashMap<&K, usize> = HashMap::new();
    for (i, p) in ports.iter().enumerate() {
        if let Some(k) = key(p)
            && let Some(j) = seen.insert(k, i)
        {
            return Err((i, j));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use nfv_memif::{MemifConfig, MemifRole};
    use nfv_vhost::{VhostUserConfig, VhostUserMode};
    use std::path::PathBuf;

    struct Dir(PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn vhost(name: &str, id: u16, socket: &Path) -> PortConfig {
        PortConfig {
            name: name.into(),
            id,
            rxqs: 1,
            kind: PortKind::typed(VhostUserConfig {
                socket: socket.to_path_buf(),
                mode: VhostUserMode::Server,
                queues: 1,
                mrg_rxbuf: true,
                tx_retries: VhostUserConfig::DEFAULT_TX_RETRIES,
                one_copy: true,
                packed_ring: true,
                offloads: nfv_vhost::Offloads::ALL,
                max_guest_memory: nfv_vhost::DEFAULT_MAX_GUEST_MEMORY,
                mtu: None,
            }),
        }
    }

    fn memif(name: &str, id: u16, socket: &Path, role: MemifRole, iface: u32) -> PortConfig {
        PortConfig {
            name: name.into(),
            id,
            rxqs: 1,
            kind: PortKind::typed(MemifConfig {
                role,
                id: iface,
                ..MemifConfig::new(socket)
            }),
        }
    }

    /// Two ports on sockets written `a` and `b` (relative to a scratch
    /// directory holding `socks/` and `link -> socks`): conflict or not.
    #[test]
    fn sockets_conflict_by_the_file_they_name() {
        let root = std::env::temp_dir().join(format!("nfv-port-set-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("socks")).unwrap();
        let _dir = Dir(root.clone());
        std::os::unix::fs::symlink(root.join("socks"), root.join("link")).unwrap();
        let cwd = std::env::current_dir().unwrap();
        let cwd_sock = cwd.join("nfv-port-set-x.sock");
        let cwd_dot = cwd.join(".").join("nfv-port-set-x.sock");
        let at = |s: &str| root.join(s);
        let server = MemifRole::Server;
        let cases: Vec<(&str, PortConfig, PortConfig, bool)> = vec![
            (
                "dot-dot back into the same directory",
                vhost("a", 1, &at("socks/a.sock")),
                vhost("b", 2, &at("socks/../socks/a.sock")),
                true,
            ),
            (
                "through a linked directory",
                vhost("a", 1, &at("socks/a.sock")),
                vhost("b", 2, &at("link/a.sock")),
                true,
            ),
            (
                "./x.sock against x.sock",
                vhost("a", 1, &cwd_sock),
                vhost("b", 2, &cwd_dot),
                true,
            ),
            (
                "relative ./x.sock against the same file absolute",
                vhost("a", 1, Path::new("./nfv-port-set-x.sock")),
                vhost("b", 2, &cwd_sock),
                true,
            ),
            (
                "a directory that does not exist yet",
                vhost("a", 1, &at("later/x.sock")),
                vhost("b", 2, &at("later/./sub/../x.sock")),
                true,
            ),
            (
                "distinct files",
                vhost("a", 1, &at("socks/a.sock")),
                vhost("b", 2, &at("socks/b.sock")),
                false,
            ),
            (
                "vhost-user and memif on one file",
                vhost("a", 1, &at("socks/a.sock")),
                memif("b", 2, &at("link/a.sock"), server, 0),
                true,
            ),
            (
                "memif servers sharing a socket, interface ids differ",
                memif("a", 1, &at("socks/m.sock"), server, 0),
                memif("b", 2, &at("link/../socks/m.sock"), server, 1),
                false,
            ),
            (
                "memif servers, same interface id through a link",
                memif("a", 1, &at("socks/m.sock"), server, 3),
                memif("b", 2, &at("link/m.sock"), server, 3),
                true,
            ),
            (
                "a memif client on a server's socket",
                memif("a", 1, &at("socks/m.sock"), server, 0),
                memif("b", 2, &at("link/m.sock"), MemifRole::Client, 1),
                true,
            ),
            (
                "abstract names compare as written",
                memif("a", 1, Path::new("@nfv/x"), server, 0),
                memif("b", 2, Path::new("@nfv/./x"), server, 0),
                false,
            ),
            (
                "the same abstract name",
                memif("a", 1, Path::new("@nfv/x"), server, 0),
                memif("b", 2, Path::new("@nfv/x"), server, 0),
                true,
            ),
        ];
        for (what, a, b, conflict) in cases {
            let ports = [a, b];
            let got = check_port_set(&ports, Peers::Complete);
            if conflict {
                let c = got.expect_err(what);
                assert_eq!(c.kind, ConflictKind::Socket, "{what}");
                assert_eq!((c.port, c.other), (1, Some(0)), "{what}");
                let text = c.describe(&ports);
                assert!(text.starts_with("socket: "), "{what}: {text}");
            } else {
                assert_eq!(got, Ok(()), "{what}");
            }
        }
    }

    #[test]
    fn a_conflict_written_differently_names_both_spellings() {
        let root = std::env::temp_dir().join(format!("nfv-port-set-msg-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("socks")).unwrap();
        let _dir = Dir(root.clone());
        let ports = [
            vhost("victim", 1, &root.join("socks/a.sock")),
            vhost("thief", 2, &root.join("socks/../socks/a.sock")),
        ];
        let c = check_port_set(&ports, Peers::Complete).unwrap_err();
        let text = c.describe(&ports);
        assert!(
            text.contains("is already the socket of port \"victim\""),
            "{text}"
        );
        assert!(text.contains("both are"), "{text}");
    }
}
