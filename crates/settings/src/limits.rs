//! The kernel's limits on the names settings give: socket paths and
//! interface names. [`check`](crate::check) checks them; the crate root
//! re-exports them for the port types and `nfv-config`.

/// Longest Unix socket path (`sun_path` holds 108 bytes with the NUL).
pub const MAX_SOCKET_PATH: usize = 107;
/// Longest Linux interface name (IFNAMSIZ - 1).
pub const MAX_IFACE_NAME: usize = 15;
