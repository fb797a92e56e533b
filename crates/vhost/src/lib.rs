//! `vhost-user`: a virtio-net port towards a VM (QEMU) or a container VNF
//! (DPDK virtio-user, the built-in VNF), like OVS `dpdkvhostuser[client]`.
//!
//! * [`VhostUserPort`] implements [`nfv_ports::Port`]. One protocol thread
//!   per port speaks vhost-user: `message.rs` decodes messages (pure, no
//!   I/O), `channel.rs` reads them with their fds, `dispatch.rs` maps each
//!   to the protocol state in `backend.rs` and answers, `conn.rs` runs the
//!   server and client connection loops with reconnect and backoff. The
//!   message layer is ours, not the `vhost` crate's, so that every order of
//!   requests real frontends send is accepted (see `dispatch.rs`). The
//!   virtqueues themselves are served on the PMD threads by
//!   `nfv_virtio::DeviceQueue` (`rx.rs`, `tx.rs`).
//! * Queues: rx queue `i` is the guest's TX virtqueue `2i+1` (the port has
//!   `queues` rx queues). Tx queues are per PMD: PMD `q` sends into the
//!   guest RX virtqueue of the `q % n`-th running pair (`n` = running
//!   guest RX virtqueues, respecting SET_VRING_ENABLE). With as many enabled
//!   pairs as PMDs every PMD has its own virtqueue; otherwise PMDs share one
//!   under a per-virtqueue spin lock (see `shared.rs` for why tx uses a lock
//!   and rx does not).
//! * Offered (`features.rs`): VERSION_1, MRG_RXBUF (configurable),
//!   INDIRECT_DESC, EVENT_IDX, MQ, PROTOCOL_FEATURES, LOG_ALL, IN_ORDER
//!   (unless another port borrows the guest's buffers) and RING_PACKED
//!   (`packed_ring`, default on: the frontend chooses split or packed);
//!   protocol features MQ, REPLY_ACK, LOG_SHMFD and RARP. A frontend
//!   acking any bit not offered is refused, counted in
//!   `negotiation_errors` and disconnected; the port waits for the next
//!   connection.
//! * Ring fill, for telling a slow switch from a slow guest: each rx burst
//!   stores the guest TX backlog it found, each tx burst the guest RX
//!   buffers it found free (one relaxed store per burst, see
//!   [`VhostStatus::queued`] and [`VhostStatus::guest_rx_free`]); its
//!   gauges report the sums as `queued` and `guest_rx_free`.
//! * Disconnect: rings stop, rx bursts return 0 and tx bursts send nothing;
//!   guest memory is unmapped once no PMD can touch it any more.
//!
//! # Module shape
//!
//! The crate has the port crate shape (`DEVELOPERS.md`, "Port crate
//! shape"):
//!
//! * `settings`: [`VhostUserConfig`], its `[[port]]` keys and `parse`,
//!   and the frame limits that follow from them ([`max_frame`]);
//! * `port`: [`VHOST_USER`], [`VhostUserPort`] (open, close, queues, its
//!   typed [`VhostStatus`] and its gauges);
//! * `rx` and `tx`: the PMD side, [`nfv_ports::RxQueue`] and
//!   [`nfv_ports::TxQueue`] over the device queues;
//! * `shared`: what the protocol thread, the queues and the port share
//!   (the published snapshot and ring setups, each ring's owner state and
//!   counters, the port's status, [`VhostError`]);
//! * what the port type needs: the protocol thread (`conn`, `channel`,
//!   [`message`], `dispatch`, `backend`, [`features`], `memtable`,
//!   [`rarp`]), a ring's transitions (`ownership`) and counters
//!   (`errors`), lending the guest's buffers (`lend`: the loans;
//!   `lender`: the port as a lender), [`ratelimit`] for the log.
//!
//! No module imports one that imports it back, directly or through others
//! (`scripts/mod-cycles crates/vhost`): `shared` holds the data the
//! queues, the protocol thread and the lender share (a ring's
//! `RingOwner` included, whose transitions are in `ownership`) and sits
//! below all of them, over `errors` and `lend` (which import no other
//! module of the crate) and `settings` (only `memtable`). Set-up and report
//! functions stay under 80 lines (message decoding and the gauges in
//! named steps), and so do the bursts (`VhostRxq::rx_burst`,
//! `VhostTxq::tx_burst`, `lend::deliver_mixed`): nothing here is an
//! exception. The long hot loops are `nfv_virtio`'s (its crate doc).
//!
//! # What a hostile frontend can and cannot do to the switch
//!
//! Defended (each below): blocking call fds, memory or dirty-log files
//! that could fault slowly or shrink, locks held across a guest page
//! fault, and log floods; malformed rings are quarantined by
//! `nfv_virtio` (counted per reason). The SIGBUS guard's table grows
//! with the ports (`nfv_virtio::guard`, 65,536 mappings); should it still
//! run out, only the port whose memory table or log needed an entry is
//! refused (`mem_table_errors` or `log_errors`). The size of a memory
//! table is bounded per port and per node (below).
//!
//! What this does *not* promise: a frontend can always stop its own port
//! (bad rings, a memory table refused, a fault that never completes on the
//! protocol thread leaves that port's rings stopped), and a PMD still
//! reads and writes guest memory itself in every burst, so the file checks
//! below are what keep those accesses fast: a mapping whose faults do not
//! complete, were one to get past them, would stall that PMD.
//!
//! * **No lock a PMD needs is held across a guest page fault** (the
//!   invariant): code that reads or writes guest memory or the dirty log
//!   runs either on the PMD that owns the ring, in its burst, or on the
//!   protocol thread with no lock held that a PMD takes. The protocol
//!   thread rebuilds a guest RX ring (new memory table, call fd, features,
//!   `VHOST_F_LOG_ALL` and its dirty log) by taking the ring's state out
//!   of its slot under the ring's lock, retiring the old queue and
//!   building the new one with no lock held, and swapping the result in
//!   under the lock (`Backend::apply_tx`); under the lock it only moves
//!   state. A PMD never waits on the protocol thread: a tx burst that
//!   finds the ring held by it, or out for a rebuild, sends nothing (the
//!   datapath counts the packets as `tx_full`) and is counted in
//!   `tx_busy`. Old memory tables and logs are unmapped outside every
//!   lock. So a log or region whose page faults never complete (a FUSE
//!   file, should one pass the file checks) blocks only that port's
//!   protocol thread; its rings stay stopped, and the PMDs and every other
//!   port go on. Removing that port waits at most 2 s for its protocol
//!   thread, then leaves it to end when the fault completes (its socket
//!   file is removed then).
//! * **Call fds.** The frontend's call eventfd could block a `write` (an
//!   eventfd at its maximum count in blocking mode, a pipe nobody reads),
//!   and `O_NONBLOCK` on its shared open file description is the
//!   frontend's to clear. PMDs therefore never write it: an interrupt is
//!   an atomic swap on a `nfv_virtio::notify::Call`, and the notifier
//!   thread does the write under a 1 ms watchdog timer. A call fd whose
//!   write would block is then ignored: the vring shows `call_stuck`, and
//!   each interrupt not sent counts as `call_blocked`; a new SET_VRING_CALL
//!   brings a fresh fd. No lock is held across any write to a guest fd, so
//!   GET_VRING_BASE, disconnect and port removal never wait for one. Kick
//!   and error fds are not read or written at all (PMDs poll).
//! * **Guest memory and the dirty log.** SET_MEM_TABLE and SET_LOG_BASE
//!   accept only regular files on tmpfs (memfd, shm) and hugetlbfs
//!   (`fstatfs`) that cover the mapped range
//!   (`nfv_virtio::tenant_fd::check_mappable`, the check memif regions
//!   pass too). Anything else is refused — a memory table with a NACK
//!   (the port keeps no table and its rings stay stopped), a log with the
//!   reply QEMU needs to go on, the rings that must log stopping instead —
//!   with a rate-limited log line naming the file type or file system, and
//!   counted in `mem_table_errors` or `log_errors` (and
//!   `protocol_errors`).
//!   A memfd sealed with `F_SEAL_SHRINK` (QEMU's default for
//!   `memory-backend-memfd`) cannot shrink afterwards; unsealed memory
//!   (hugetlbfs files, DPDK virtio-user's memfds) can, and the next access
//!   would raise SIGBUS. The SIGBUS guard (`nfv_virtio::guard`) maps zero
//!   pages over the faulting mapping so the access completes; the rings
//!   using that memory notice at their next burst and are quarantined
//!   (counter `memory_fault`, `quarantined` in its gauges, one log line), and
//!   rings restarted over the same memory refuse to run until the frontend
//!   sends a new memory table. Every other port keeps forwarding.
//!   Limits: the burst that hit the fault completes on zeros (its chains
//!   count as errors or deliver empty data to the faulting guest only); a
//!   program that installs its own SIGBUS handler after ours disables the
//!   guard.
//! * **Memory table size.** A sparse memfd of any size costs the frontend
//!   nothing, but mapping it takes the switch's address space (the attack:
//!   tables of 128 TiB, after which no other port could map its table).
//!   Each table is charged the length actually mapped and must fit the
//!   port's cap (default [`DEFAULT_MAX_GUEST_MEMORY`], 1 TiB: VMs up to
//!   about 1021 GiB, see `memtable.rs` for the arithmetic;
//!   [`VhostUserPort::set_max_guest_memory`]) and the node's budget over
//!   all ports ([`NODE_BUDGET`], default [`DEFAULT_NODE_GUEST_MEMORY`],
//!   64 TiB: half the x86-64 user address space). A table over either is
//!   refused with a NACK and counted in `mem_over_budget` (and
//!   `mem_table_errors`); the port keeps its previous table and its rings
//!   keep running. Memory is mapped, not touched: the switch faults in
//!   pages of a tenant's file only where its rings are and where its
//!   descriptors point, and a page of a hole it faults in first is
//!   charged to the switch's memory cgroup (shmem is charged to whoever
//!   allocates it). A well-behaved guest's buffers are already allocated
//!   (charged to the guest); a hostile one can aim descriptors at holes,
//!   so what it can charge to the switch is bounded by its table, that is
//!   by the port's cap — not yet by anything smaller (RSS under that
//!   attack not measured here).
//! * **Log floods.** Refusals and faults are logged through a per-port
//!   [`RateLimitedLog`] (at most a few lines per reason and 10 s, then a
//!   "suppressed" summary); every refusal is still counted.

mod backend;
mod channel;
mod conn;
mod dispatch;
mod errors;
pub mod features;
#[doc(hidden)]
pub mod fuzzing;
mod lend;
mod lender;
mod memtable;
pub mod message;
mod ownership;
mod port;
pub mod rarp;
pub mod ratelimit;
mod rx;
mod settings;
mod shared;
mod stall;
mod tx;

pub use conn::{MAX_BACKOFF, RETRY, STABLE};
pub use errors::NAMES as QUEUE_COUNTER_NAMES;
pub use memtable::{
    DEFAULT_MAX_GUEST_MEMORY, DEFAULT_NODE_GUEST_MEMORY, MemTableError, NODE_BUDGET,
};
pub use port::{VHOST_USER, VhostStatus, VhostUserPort, VhostUserType, VringStatus};
pub use ratelimit::RateLimitedLog;
pub use settings::{
    MAX_FRAME_MRG, MAX_FRAME_NO_MRG, MTU_OVERHEAD, Offloads, VhostUserConfig, VhostUserMode,
    frame_limit, max_frame,
};
pub use shared::VhostError;
