//! A CNI error (spec 1.1.0, section "Error"): a code, a message and
//! details, answered on stdout as JSON with a non-zero exit. Codes below
//! 100 are the spec's; 100 and up are this plugin's.

/// A CNI error: the spec's code (or this plugin's, ≥ 100), a message and
/// details.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CniError {
    pub code: u32,
    pub msg: String,
    pub details: String,
}

pub fn err(code: u32, msg: impl Into<String>, details: impl Into<String>) -> CniError {
    CniError {
        code,
        msg: msg.into(),
        details: details.into(),
    }
}

/// Spec: the `cniVersion` of the config is not one this plugin supports.
pub const INCOMPATIBLE_VERSION: u32 = 1;
/// Spec: a `CNI_*` variable is missing or invalid.
pub const INVALID_ENV: u32 = 4;
/// Spec: an I/O failure (a file that cannot be read or written).
pub const IO_ERROR: u32 = 5;
/// Spec: stdin (the config, `prevResult`) does not decode.
pub const DECODE: u32 = 6;
/// Spec: the network config is invalid.
pub const INVALID_CONFIG: u32 = 7;
/// Spec: try again later (the node is not up yet).
pub const TRY_AGAIN: u32 = 11;
/// Spec (STATUS): the plugin cannot serve ADDs now.
pub const UNAVAILABLE: u32 = 50;
/// CHECK found the attachment or its socket missing.
pub const ATTACHMENT_MISSING: u32 = 100;
/// The IPAM plugin failed without an error result, or answered a result
/// this plugin cannot use.
pub const IPAM_FAILED: u32 = 101;
/// The node refused the API token (HTTP 401 or 403).
pub const NOT_AUTHORIZED: u32 = 102;
/// The node answered something this plugin cannot use (a body of the
/// wrong shape, an attachment whose kept addresses are not an IPAM
/// result, a socket that is not an absolute path).
pub const NODE_ANSWER: u32 = 103;
/// A device-info file is in the way: a symlink, not a regular file, or a
/// file this plugin did not write for this attachment.
pub const DEVICE_INFO_FOREIGN: u32 = 104;
/// A bug in this plugin (a panic caught at the top of `run`).
pub const INTERNAL: u32 = 999;
