//! `tap`: a port on a kernel TAP interface — the switch's door to the
//! host's own network stack (OVS's `type=tap`, DPDK's `net_tap`).
//!
//! * Opening: `/dev/net/tun` with `TUNSETIFF(IFF_TAP | IFF_NO_PI)`,
//!   non-blocking, one descriptor per rx queue (`IFF_MULTI_QUEUE` when
//!   `rxqs > 1`; the kernel spreads flows over the queues). A missing
//!   interface is created and disappears when the port closes (the switch
//!   never makes it persistent); an existing TAP — e.g. a persistent one
//!   from `ip tuntap add` — is attached to and left in place. The
//!   interface is brought up. Its name must not belong to another kind of
//!   interface.
//! * Rx and tx (`rx.rs`, `tx.rs`): **one `read()`/`writev()` syscall per frame**,
//!   each behind a virtio-net header (`IFF_VNET_HDR`): a guest's partial
//!   checksums and 64 KiB TCP segments go to the kernel as they are (its
//!   GSO/GRO takes over), not cut by the switch.
//!   A TAP descriptor has no batched I/O, so unlike every other port this
//!   one pays a syscall per packet (about a microsecond) and its rate is
//!   bounded accordingly; use it for the host stack's traffic (management,
//!   ARP, control protocols), not for the data plane's bulk. Tx queue `q`
//!   writes to descriptor `q % queues`; concurrent `write()`s on one
//!   descriptor are safe (each moves one whole frame).
//! * Counters ([`Port::gauges`](nfv_ports::Port::gauges)): frames cut to
//!   fit, read errors, frames left by EAGAIN, short writes, refused
//!   frames, write errors, and the kernel's drops towards the switch (the
//!   TAP's `tx_dropped`).
//!
//! Modules (the port crate shape, `DEVELOPERS.md`): `settings` (the
//! `iface` key), `port` ([`TAP`], open and close, gauges), `rx` and `tx`
//! (the PMD side), `shared` (the queue counters and the virtio-net header
//! length), `dev` (the `/dev/net/tun` ioctls). No module imports one that
//! imports it back (`scripts/mod-cycles crates/tap`).

mod dev;
mod port;
mod rx;
mod settings;
mod shared;
mod tx;

pub use port::{DEFAULT_MAX_FRAME, OpenError, TAP, TapPort, TapType, open, open_with};
pub use settings::{MAX_QUEUES, TapConfig};
