//! Target `attach_request`: the body of `PUT /api/v1/attachments/{id}/{ifname}`
//! (`nfv_control::attachments::AttachRequest`, JSON) and the key, through
//! every check a request passes before a port is made
//! (`checked_request`), on hostile bytes. The input's first line is the
//! container id, the second the interface name, the rest the body.
//!
//! Checks: no panic; a request accepted names a socket that is a file
//! directly in the socket directory (no `..`, no other directory), fits a
//! unix socket path, and is accepted again unchanged (a restored
//! attachment passes the same checks).

use nfv_control::attachments::{AttachRequest, AttachmentKey, checked_request};
use std::path::{Component, Path};

const SOCKET_DIR: &str = "/run/nfvswitch/pods";

pub fn run(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut parts = text.splitn(3, '\n');
    let key = AttachmentKey {
        container_id: parts.next().unwrap_or_default().to_string(),
        ifname: parts.next().unwrap_or_default().to_string(),
    };
    let Ok(req) = serde_json::from_str::<AttachRequest>(parts.next().unwrap_or_default()) else {
        return;
    };
    let dir = Path::new(SOCKET_DIR);
    assert!(
        checked_request(&key, req.clone(), None).is_err(),
        "no socket_dir: refused"
    );
    let Ok(ok) = checked_request(&key, req, Some(dir)) else {
        return;
    };
    let socket = &ok.socket;
    assert_eq!(
        socket.parent(),
        Some(dir),
        "{socket:?} outside {SOCKET_DIR}"
    );
    assert!(
        socket
            .components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_))),
        "{socket:?}"
    );
    assert!(socket.as_os_str().len() <= nfv_control::attachments::MAX_SOCKET_PATH);
    let again = checked_request(&key, ok.clone(), Some(dir)).expect("accepted twice");
    assert_eq!(again, ok, "checking an accepted request changes it");
}
