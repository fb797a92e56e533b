//! The memif port type (issue 15), built in layers:
//!
//! * the message and ring layout live in `nfv_wire::memif` (pure);
//! * [`handshake`]: the control protocol as a state machine with no I/O —
//!   what the server side accepts, in which order, and the DISCONNECT
//!   reason for everything it refuses (the strings DPDK `net_memif` sends,
//!   where it has one);
//! * next: the socket (SCM_RIGHTS, one fd per message), the regions and
//!   rings, the port's rx/tx queues and its `PortType` registration.

pub mod handshake;
