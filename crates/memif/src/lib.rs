//! `memif`: the shared-memory packet interface of FD.io VPP, DPDK
//! `net_memif`, libmemif and gomemif — how container VNFs reach a
//! userspace switch. The port takes either role: server (the switch
//! listens, the VNF connects and owns the shared memory) or client (the
//! VNF listens, the switch connects and owns the memory). In layers:
//!
//! * the message and ring layout live in `nfv_wire::memif` (pure);
//! * [`handshake`]: the control protocol as a state machine with no I/O —
//!   what the server side accepts, in which order, and the DISCONNECT
//!   reason for everything it refuses (the strings DPDK `net_memif` sends,
//!   where it has one);
//! * [`socket`]: the `SOCK_SEQPACKET` control socket (file or abstract
//!   name, one fd per message) and [`serve`]: one connection's server side
//!   from accept to CONNECT;
//! * `connection`: the client's regions mapped (with the SIGBUS guard of
//!   `nfv_virtio`) and its rings checked; `ring`: one ring's header and
//!   descriptors, the only place that touches them;
//! * `queue`: the PMD's rx and tx bursts (copies, chained buffers, every
//!   descriptor checked once), `hub`: the server role's sockets (one per
//!   path, interfaces told apart by id), `port`: [`MemifPort`] and the
//!   client role's thread; `settings`: the `[[port]]` keys and [`MEMIF`];
//! * [`client`]: the client role (creates the memory, connects): the
//!   port's client role (`client_queue`: its PMD side), the built-in VNF
//!   and tests that play a hostile client.

pub mod client;
mod client_queue;
mod connection;
pub mod handshake;
mod hub;
mod port;
mod queue;
mod ring;
pub mod serve;
mod settings;
pub mod socket;

pub use hub::HANDSHAKE_TIMEOUT;
pub use port::{MemifPort, OpenError};
pub use settings::{MEMIF, MemifConfig, MemifRole, MemifType};
