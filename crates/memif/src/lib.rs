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
//!   descriptor checked once; `position`: the peer's ring positions
//!   checked against what the switch handed out, both roles), `hub`: the
//!   server role's sockets (one per path, interfaces told apart by id),
//!   `port`: [`MemifPort`] and the
//!   client role's thread; `settings`: the `[[port]]` keys and [`MEMIF`];
//! * [`client`]: the client role (creates the memory, connects): the
//!   port's client role (`client_queue`: its PMD side), the built-in VNF
//!   and tests that play a hostile client.
//!
//! # Memory a client hands the switch
//!
//! In the server role the switch maps the client's regions. A client
//! adds at most [`MAX_REGIONS`] (announced in HELLO); their mapped
//! length must fit the port's `max_shared_memory_gib` (default
//! [`DEFAULT_MAX_SHARED_MEMORY`]) and the node's budget shared with the
//! vhost-user ports (`nfv_vhost::NODE_BUDGET`, charged until the
//! connection's memory is unmapped); every region fd must pass
//! `nfv_virtio::tenant_fd::check_mappable`. A client that fails any of
//! them is refused with a DISCONNECT naming why, counted (`refused`, and
//! `memory_refused` or `unmappable_fd`) and logged rate-limited; the port
//! serves the next client. The client role maps only memory the switch
//! created.
//!
//! # A shared socket and hostile clients
//!
//! Server ports may share one socket (interfaces told apart by
//! `interface_id`). memif has no other notion of who a client is: **on a
//! shared socket, a port without a `secret` can be claimed by any client
//! that reaches the socket**, by asking for its interface id — a
//! co-tenant can take another tenant's interface (and its traffic) if it
//! connects first, or keep it "Already connected" for as long as it
//! likes. Give every port on a shared socket its own secret (24 bytes at
//! most, compared in INIT); the switch warns once when a socket shared by
//! several ports has ports without one. A secret travels in the clear
//! over the unix socket: it guards against co-tenants, not against root.
//!
//! The handshake itself cannot be hoarded: handshake slots per socket
//! and per peer uid (`SO_PEERCRED`), a first-message deadline of
//! [`FIRST_MESSAGE_TIMEOUT`] after HELLO, silent connections displaced by
//! newcomers, refusals counted by reason (`socket_*` gauges) and logged
//! rate-limited — `hub` has the rules and why the numbers are what they
//! are. A uid is only as good as the user namespaces behind it: pods that
//! all connect as root share one uid's share of the slots.

pub mod client;
mod client_queue;
mod connection;
#[doc(hidden)]
pub mod fuzzing;
pub mod handshake;
mod hub;
mod port;
mod position;
mod queue;
mod ring;
pub mod serve;
mod settings;
pub mod socket;

pub use connection::{DEFAULT_MAX_SHARED_MEMORY, MAX_REGIONS};
pub use hub::{FIRST_MESSAGE_TIMEOUT, HANDSHAKE_TIMEOUT, MAX_HANDSHAKES, MAX_HANDSHAKES_PER_UID};
pub use port::{MemifPort, OpenError};
pub use settings::{MEMIF, MemifConfig, MemifRole, MemifType};
