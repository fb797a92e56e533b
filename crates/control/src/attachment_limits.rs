//! What an attachment may be: the port numbers it takes and the lengths
//! of its names. Below both the attachments (which check them) and the
//! errors (whose messages name them); `crate::attachments` re-exports
//! them.

use nfv_flow::PortNo;

/// Attachment ports are numbered from here up, clear of hand-made ones.
pub const FIRST_ATTACHMENT_ID: PortNo = 1000;
/// `sun_path` holds 108 bytes with the terminating NUL.
pub const MAX_SOCKET_PATH: usize = 107;
/// CNI allows container ids of any length; ours keep state files sane.
pub const MAX_CONTAINER_ID: usize = 256;
/// Network names are short in practice; ours keep state files sane.
pub const MAX_NETWORK_NAME: usize = 256;
