//! The memif port type (issue 15), built in layers:
//!
//! * the message and ring layout live in `nfv_wire::memif` (pure);
//! * [`handshake`]: the control protocol as a state machine with no I/O —
//!   what the server side accepts, in which order, and the DISCONNECT
//!   reason for everything it refuses (the strings DPDK `net_memif` sends,
//!   where it has one);
//! * [`socket`]: the `SOCK_SEQPACKET` control socket (file or abstract
//!   name, one fd per message) and [`serve`]: one connection's server side
//!   from accept to CONNECTED;
//! * next: the regions and rings, the port's rx/tx queues and its
//!   `PortType` registration.

pub mod handshake;
pub mod serve;
pub mod socket;
