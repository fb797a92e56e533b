//! `afxdp`: an AF_XDP port on a kernel interface — the OVS `afxdp`
//! netdev, without libbpf or clang.
//!
//! One AF_XDP socket per rx queue (NIC queue `q` for `q in 0..rxqs`), each
//! with its own UMEM of `2 × ring_size` frames of 2 KiB: half for rx (all
//! of them on the fill ring to start with), half for tx. A built-in
//! six-instruction XDP program redirects each queue's frames to its socket
//! through an XSKMAP; it is attached with a `bpf_link`, native mode first,
//! generic (SKB) mode if the driver has no XDP, and detached when the port
//! is dropped (or the process dies). Sockets bind zero-copy or copy as
//! configured (`auto`: zero-copy if the driver can, logged if not) and
//! always with need-wakeup, so the fast path makes a syscall only when a
//! ring's flag asks for one — at most one per burst.
//!
//! Rx copies each frame into a switch pool packet and refills the fill
//! ring in the same burst (`rx.rs` explains why); tx copies packets into
//! tx frames (`tx.rs`, including how PMD threads share a socket).
//! With `zero_copy`, a queue receives straight into a VNF's receive
//! buffers and sends its frames' tails in place ([`zero_copy`]).
//!
//! # Module shape
//!
//! The crate has the port crate shape (`DEVELOPERS.md`, "Port crate
//! shape"), one concern a module:
//!
//! * `settings`: [`AfXdpConfig`], its `[[port]]` keys, `parse` and the
//!   limits `open` checks again;
//! * [`port`]: [`AFXDP`], [`OpenError`], [`AfXdpPort`] (opening in named
//!   steps: the interface, the program and its link, the sockets, the
//!   zero-copy manager; closing; `show ports` facts and the kernel's drop
//!   counters);
//! * [`rx`] and [`tx`]: the copy path's bursts (the PMD side);
//! * `shared`: the zero-copy queues' counters and fallback reasons, which
//!   the queues write and `show ports` reads;
//! * what the port type needs: [`xsk`] (socket set-up, in named steps),
//!   [`ring`] (index arithmetic over the shared rings), [`umem`] (frame
//!   memory and mappings) over `chunk` (a chunk's layout), [`bpf`]
//!   (program, map, link), and for `zero_copy`: [`guest_umem`] (a UMEM
//!   over a VNF's memory), [`zero_copy`] (the queue, its manager and its
//!   bursts), `zero_copy_choice` (which VNF, and when small frames make a
//!   copy cheaper), `zero_copy_rx` (receiving into lent buffers) and
//!   [`zero_copy_tx`] (sending tails in place).
//!
//! No module imports one that imports it back, directly or through others
//! (`scripts/mod-cycles crates/afxdp`): `chunk` sits below both UMEMs,
//! `shared` below the zero-copy modules, and the tx ring's retry from the
//! rx path is `tx::retry_tx`. Set-up and report functions stay under 80
//! lines. Three hot loops are longer and stay whole, each one pass over a
//! burst whose state (ring slots, the frame in hand, the lease, counts for
//! one store per counter at the end) every step of the loop moves:
//! helpers would pass that state through `&mut` arguments per frame and
//! split one ring protocol over several places.
//!
//! * `zero_copy_tx::transmit_in_place` (about 130 lines): per frame,
//!   in place (head and tail descriptors, the kept chain) or copied, into
//!   the same tx ring slots and free frames;
//! * `zero_copy_rx::receive_lent` (about 105 lines): per rx descriptor,
//!   an own frame copied out or a guest buffer made a packet, then one
//!   `refill`;
//! * `zero_copy_rx::refill` (about 105 lines): the fill ring topped up
//!   under the lender's ring lock (the closure that lends) and with own
//!   frames when the guest has too few.
//!
//! The copy path's bursts (`rx::receive_copies`, `tx::transmit`) are
//! under 80 lines.

pub mod bpf;
mod chunk;
pub mod guest_umem;
pub mod port;
pub mod ring;
pub mod rx;
mod settings;
mod shared;
pub mod tx;
pub mod umem;
pub mod xsk;
pub mod zero_copy;
mod zero_copy_choice;
mod zero_copy_rx;
pub mod zero_copy_tx;

pub use bpf::AttachMode;
pub use port::{AFXDP, AfXdpPort, AfXdpType, OpenError, open, open_with};
pub use settings::{AfXdpConfig, SendInPlace, XdpBindMode, ZeroCopy};
pub use xsk::Bind;
