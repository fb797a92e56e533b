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
//! * `rx` and `tx`: the PMD's bursts, both roles (copies, chained
//!   buffers, every descriptor checked once; `copy`: the byte copies
//!   between packets and a peer's buffers; `position`: the peer's ring
//!   positions checked against what the switch handed out);
//! * `shared`: what the control side and the queues share (the
//!   published connection, the counters, the status `show ports` reads);
//!   `hub`: the server role's sockets (one per path, interfaces told
//!   apart by id); `port`: [`MEMIF`], [`MemifPort`] (open, close, gauges)
//!   and the client role's thread; `settings`: the `[[port]]` keys;
//! * [`client`]: the client role (creates the memory, connects): the
//!   port's client role, the built-in VNF and tests that play a hostile
//!   client.
//!
//! # Module shape
//!
//! The crate has the port crate shape (`DEVELOPERS.md`, "Port crate
//! shape"): `lib`, `settings`, `port`, `rx`/`tx`, `shared`, plus the
//! modules above. No module imports one that imports it back, directly
//! or through others (`scripts/mod-cycles crates/memif`): `shared`,
//! `copy` and the protocol modules sit below everything that uses them.
//! Set-up and report functions stay under 80 lines; the one longer
//! function is the server role's `MemifRxq::rx_burst` (about 120 lines),
//! the per-frame hot loop. Its lend path, copy path and chain walk all
//! move the same ring state (`slot`, `avail`) and fill the same batch;
//! helpers would pass that state through `&mut` arguments on every frame
//! and split one set of ring rules over several places, so it stays one
//! body.
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
mod connection;
mod copy;
#[doc(hidden)]
pub mod fuzzing;
pub mod handshake;
mod hub;
mod port;
mod position;
mod ring;
mod rx;
pub mod serve;
mod settings;
mod shared;
pub mod socket;
mod tx;

pub use connection::{DEFAULT_MAX_SHARED_MEMORY, MAX_REGIONS};
pub use hub::{FIRST_MESSAGE_TIMEOUT, HANDSHAKE_TIMEOUT, MAX_HANDSHAKES, MAX_HANDSHAKES_PER_UID};
pub use port::{MEMIF, MemifPort, MemifType};
pub use settings::{MemifConfig, MemifRole};
pub use shared::OpenError;
