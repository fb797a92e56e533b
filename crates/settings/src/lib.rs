//! Config values as a port type reads them.
//!
//! `nfv-config` owns the file (TOML syntax, the sections, the keys every
//! port has: `name`, `id`, `type`, `rxqs`); each port type owns its own
//! keys. Between the two sits this crate: [`PortTable`] hands a type the
//! rest of its `[[port]]` table with every value's position, and the type
//! answers with its validated settings or a [`SettingError`] naming the key.
//! `nfv-config` turns that into `file:line: port[2].key: message`, so an
//! error reads the same whichever crate found it.
//!
//! [`check`] holds the value checks (ranges, powers of two, names, paths,
//! MAC and IPv4 addresses, interface names) with their messages, used by
//! the port types here and by `nfv-config` for the node's own sections.
//!
//! [`unix_socket`] binds the socket files the switch listens on (never
//! taking a live one over, removing only its own), for every crate that
//! listens on one.

pub mod check;
mod limits;
mod table;
pub mod unix_socket;

pub use limits::{MAX_IFACE_NAME, MAX_SOCKET_PATH};
pub use table::{PortTable, SettingError};
