//! Target `state_file`: the attachments' state file
//! (`nfv_control::attachment_state::parse`) on hostile bytes, and each
//! attachment it yields through the checks a restore applies
//! (`checked_request`).
//!
//! Checks: no panic; the same text parses the same way twice; an
//! attachment the checks accept has its socket in the socket directory.

use nfv_control::attachment_state::parse;
use nfv_control::attachments::checked_request;
use std::path::Path;

pub fn run(data: &[u8]) {
    let a = parse(data);
    let b = parse(data);
    assert_eq!(
        a.is_ok(),
        b.is_ok(),
        "the same text parsed once and refused once"
    );
    let Ok(list) = a else { return };
    let dir = Path::new("/run/nfvswitch/pods");
    for att in list {
        if let Ok(req) = checked_request(&att.key, att.request.clone(), Some(dir)) {
            assert_eq!(req.socket.parent(), Some(dir), "{:?}", req.socket);
        }
    }
}
