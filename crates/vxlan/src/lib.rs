//! VXLAN tunnel port (RFC 7348) over an AF_PACKET underlay: frames sent to
//! the port leave the underlay interface inside Ethernet/IPv4/UDP/VXLAN
//! headers towards one remote endpoint, and that endpoint's frames for the
//! port's VNI come out of it with their outer headers removed, entering
//! the flow table with the tunnel port as `in_port`.
//!
//! One port is one tunnel: one VNI to one remote (like a Linux `vxlan`
//! device with `id` and `remote`). The switch is the endpoint itself: it
//! answers ARP for `local_ip` on the underlay and resolves its next hop by
//! ARP ([`neigh`]), so the underlay interface needs no address of its own.
//!
//! * [`header`]: outer headers, built from a template, read and refused
//!   by reason (pure).
//! * [`neigh`]: the next hop's MAC, learnt and aged (pure, atomics).
//! * [`port`]: the port type ([`VXLAN`]) and the queues, wrapping the
//!   underlay's.
//! * [`settings`]: the `[[port]]` keys.

#[doc(hidden)]
pub mod fuzzing;
pub mod header;
pub mod neigh;
pub mod port;
pub mod settings;

pub use header::OUTER_LEN;
pub use port::{Underlay, VXLAN, VxlanOpenError, VxlanPort, VxlanType};
pub use settings::VxlanConfig;
