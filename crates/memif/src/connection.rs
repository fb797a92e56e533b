//! A connected interface: the client's regions mapped into this process
//! and its rings checked, ready for the queues (`crate::rx`, `crate::tx`).
//!
//! Regions are mapped through `nfv_virtio::GuestMemory`, which first puts
//! every region fd through `nfv_virtio::tenant_fd::check_mappable` (a
//! regular file on tmpfs/memfd or hugetlbfs, at least as long as the
//! region: a region on a disk or FUSE file could put a PMD to sleep in a
//! page fault) and refuses the client with a DISCONNECT naming what was
//! wrong; it also brings the SIGBUS guard (a client that shrinks its
//! memfd under us turns our next access into zeros, not a crash) and
//! bounds-checked translation.
//!
//! **Memory budgets.** A client's memfd costs it nothing to make huge
//! (a sparse file), but what we map takes the switch's address space. A
//! connection may add at most [`MAX_REGIONS`] regions (announced in
//! HELLO), and what its regions map (each region's length, rounded to its
//! file's page size: `GuestMemory::mapped_len`) must fit the port's
//! `max_shared_memory` and, with everything mapped by every memif and
//! vhost-user port of the node, the node's budget
//! (`nfv_vhost::NODE_BUDGET`, charged until the connection's memory is
//! unmapped, i.e. when its last queue lets go of it). A client over any of
//! them is refused before anything is mapped, and counted
//! ([`Refused::kind`]).
//!
//! What a connection costs the switch's memory cgroup: a page of the
//! client's memfd that nobody has touched is allocated when first
//! touched, read or write, and charged to whoever touched it; memif lets
//! a client place its buffers anywhere in its regions, so its
//! descriptors can make the PMD touch any page it mapped. The charge is
//! therefore bounded by the mapped length — the port's
//! `max_shared_memory` per connection, the node's budget overall — not
//! by ring and buffer sizes: give ports of untrusted tenants a cap near
//! what their VNF needs (rings and buffers, see
//! [`DEFAULT_MAX_SHARED_MEMORY`]).
//!
//! Region `i` sits at the synthetic address
//! `i << 40`, so a descriptor's `(region, offset, length)` is one
//! translation of `(region << 40) + offset` with the region index as the
//! lookup hint: one range check per buffer, and a region index past the
//! end simply matches nothing.

use crate::handshake::{Region, Ring, Setup};
use crate::position::PeerPosition;
use crate::ring::RingView;
use nfv_mem::{SpinGuard, SpinLock};
use nfv_virtio::notify::Call;
use nfv_virtio::{GuestMemory, MemoryError, RegionSpec};
use nfv_wire::memif;
use std::os::fd::OwnedFd;

/// Bits of the synthetic address below a region's index: regions may be
/// up to 1 TiB.
const REGION_SHIFT: u32 = 40;

/// Regions one connection may add. Real clients need one region for
/// their rings and, in zero-copy modes, one per buffer pool: DPDK
/// `net_memif` in copy mode 1 (rings and buffers together), zero-copy 1 +
/// one per memseg list holding memory (one per NUMA node and huge page
/// size while a list's 16–32 GiB suffice), libmemif 2 (rings, buffers),
/// VPP 1 + one buffer pool per NUMA node. 8 covers a two-socket host in
/// every mode with room to spare; each region costs a slot of the SIGBUS
/// guard's node-wide table and a mapping.
pub const MAX_REGIONS: u16 = 8;

/// Default of a port's `max_shared_memory`: 64 GiB. A copy-mode client
/// needs rings and buffers only — 16 queue pairs of 16384 slots of
/// 9 KiB buffers are under 5 GiB — and a zero-copy one its packet memory
/// (DPDK: the memseg lists it has filled, 16–32 GiB each; VPP: its buffer
/// pools, usually well under 1 GiB), so 64 GiB admits every real
/// configuration while a port takes at most 1/1024 of the node's default
/// budget.
pub const DEFAULT_MAX_SHARED_MEMORY: u64 = 64 << 30;

/// The synthetic address of `offset` in `region`.
#[inline(always)]
pub(crate) fn region_addr(region: u16, offset: u32) -> u64 {
    (u64::from(region) << REGION_SHIFT) | u64::from(offset)
}

/// A client-to-server ring (our rx queue `i` reads ring `i`, from the
/// ring's tail when it starts).
#[derive(Debug)]
pub(crate) struct RxRing {
    pub view: RingView,
}

/// A server-to-client ring, shared by the tx queues of every PMD that
/// sends on it (PMD `q` uses ring `q % count`), which take turns
/// ([`TxRing::take`]).
#[derive(Debug)]
pub(crate) struct TxRing {
    pub view: RingView,
    /// The client's eventfd, signalled (through the notifier thread,
    /// never written by a PMD) when it has not masked interrupts.
    pub call: Call,
    turn: SpinLock<Turn>,
}

/// What the PMD holding a [`TxRing`] keeps.
#[derive(Debug, Default)]
struct Turn {
    /// Our tail: kept here, not read back from the ring the client can
    /// write.
    tail: u16,
    /// The check of the client's head (`crate::position`), per ring so
    /// that PMDs sharing it count an event once.
    peer: PeerPosition,
}

/// A [`TxRing`] held by one PMD; released on drop.
pub(crate) struct TxTurn<'a>(SpinGuard<'a, Turn>);

impl TxRing {
    /// Waits for the ring. The holder is another PMD inside a tx burst of
    /// at most one batch (nothing the client controls can make it wait),
    /// so this spins briefly and only when PMDs outnumber the rings.
    #[inline]
    pub fn take(&self) -> TxTurn<'_> {
        TxTurn(self.turn.lock())
    }
}

impl TxTurn<'_> {
    pub fn tail(&self) -> u16 {
        self.0.tail
    }
    pub fn set_tail(&mut self, tail: u16) {
        self.0.tail = tail;
    }
    pub fn peer(&mut self) -> &mut PeerPosition {
        &mut self.0.peer
    }
}

/// The client's memory and rings, for as long as the connection lasts
/// (and until the last queue lets go of it: queues hold it in an `Arc`,
/// so nothing is unmapped under a PMD).
#[derive(Debug)]
pub(crate) struct Connection {
    pub mem: GuestMemory,
    pub rx: Vec<RxRing>,
    pub tx: Vec<TxRing>,
    /// The client's INIT name (e.g. "DPDK 22.11.11").
    pub peer_name: String,
    /// The client's interface name (CONNECT).
    pub peer_if_name: String,
    /// The client's C2S eventfds: we poll those rings (and mask their
    /// interrupts), but keep the fds for the life of the connection.
    _rx_fds: Vec<OwnedFd>,
}

/// What a refusal is counted as (besides `refused`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RefusedKind {
    /// Over a memory budget: too many regions, the port's
    /// `max_shared_memory` or the node's budget (`memory_refused`).
    Memory,
    /// A region fd that fails `check_mappable` (`unmappable_fd`).
    UnmappableFd,
    /// Anything else (bad rings).
    Other,
}

/// Why a handshaken client could not be used: `reason` is sent as its
/// DISCONNECT (at most 96 bytes), `detail` is logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refused {
    pub kind: RefusedKind,
    pub reason: String,
    pub detail: String,
}

impl Refused {
    fn other(reason: &'static str) -> Refused {
        Refused {
            kind: RefusedKind::Other,
            reason: reason.into(),
            detail: reason.into(),
        }
    }

    /// Too many regions (the handshake stops a client at ADD_REGION;
    /// [`Connection::open`] checks again).
    pub fn regions(count: usize) -> Refused {
        Refused {
            kind: RefusedKind::Memory,
            reason: format!("Too many regions (at most {MAX_REGIONS})"),
            detail: format!("it adds {count} regions, at most {MAX_REGIONS} are allowed"),
        }
    }
}

impl Connection {
    /// Maps `setup`'s regions if they fit the budgets (`cap`: the port's
    /// `max_shared_memory`; then the node's) and checks its rings: inside
    /// their region (the handshake checked the arithmetic; this checks
    /// the mapping), 8-byte aligned, cookie in place.
    pub fn open(setup: Setup<OwnedFd>, cap: u64) -> Result<Connection, Refused> {
        let Setup {
            peer_name,
            peer_if_name,
            regions,
            c2s,
            s2c,
            ..
        } = setup;
        if regions.len() > usize::from(MAX_REGIONS) {
            return Err(Refused::regions(regions.len()));
        }
        let mut specs = Vec::with_capacity(regions.len());
        for (i, Region { size, fd }) in regions.into_iter().enumerate() {
            if size >= 1 << REGION_SHIFT {
                return Err(Refused {
                    kind: RefusedKind::Memory,
                    reason: "Region too large".into(),
                    detail: format!("region {i} of {size} bytes: at most 1 TiB - 1 per region"),
                });
            }
            let addr = region_addr(i as u16, 0);
            specs.push(RegionSpec {
                guest_phys_addr: addr,
                size,
                user_addr: addr,
                mmap_offset: 0,
                fd,
                shrink_sealed: false,
            });
        }
        let mem = map(specs, cap)?;
        let mut rx_fds = Vec::with_capacity(c2s.len());
        let mut rx = Vec::with_capacity(c2s.len());
        for ring in c2s {
            let (view, fd) = Self::ring(&mem, ring).map_err(Refused::other)?;
            // We poll: the client need not signal.
            view.set_flags(view.flags() | memif::ring::FLAG_MASK_INT);
            rx.push(RxRing { view });
            rx_fds.push(fd);
        }
        let mut tx = Vec::with_capacity(s2c.len());
        for ring in s2c {
            let (view, fd) = Self::ring(&mem, ring).map_err(Refused::other)?;
            tx.push(TxRing {
                turn: SpinLock::new(Turn {
                    tail: view.tail(),
                    peer: PeerPosition::default(),
                }),
                view,
                call: Call::new(fd),
            });
        }
        Ok(Connection {
            mem,
            rx,
            tx,
            peer_name: String::from_utf8_lossy(peer_name.as_bytes()).into_owned(),
            peer_if_name: String::from_utf8_lossy(peer_if_name.as_bytes()).into_owned(),
            _rx_fds: rx_fds,
        })
    }

    fn ring(mem: &GuestMemory, ring: Ring<OwnedFd>) -> Result<(RingView, OwnedFd), &'static str> {
        let len = memif::ring::len(ring.log2_size).ok_or("Invalid ring size")?;
        let host = mem
            .translate(region_addr(ring.region, ring.offset), len)
            .ok_or("Invalid ring size or offset")?;
        if !(host as usize).is_multiple_of(8) {
            return Err("Ring offset not aligned");
        }
        // SAFETY: `translate` checked that `len` bytes from `host` lie in
        // one mapped region of `mem`; the view is stored beside `mem` in
        // the same `Connection` and dropped with it.
        let view = unsafe { RingView::new(host, ring.log2_size) };
        if view.cookie() != memif::COOKIE {
            return Err("Cookie mismatch");
        }
        Ok((view, ring.fd))
    }

    /// Bytes of address space this connection's regions take (charged to
    /// the node's budget until they are unmapped).
    pub fn mapped(&self) -> u64 {
        self.mem.charged()
    }

    /// The host address of a buffer of `len` bytes at `(region, offset)`,
    /// if it lies inside that region.
    #[inline(always)]
    pub fn buffer(&self, region: u16, offset: u32, len: u32) -> Option<*mut u8> {
        let mut hint = usize::from(region);
        self.mem
            .translate_hinted(region_addr(region, offset), len as usize, &mut hint)
    }
}

/// Maps `specs` if they fit the port's cap `cap` and the node's budget
/// (`nfv_vhost::NODE_BUDGET`, charged until the memory is unmapped); every
/// fd passes `check_mappable` first.
fn map(specs: Vec<RegionSpec>, cap: u64) -> Result<GuestMemory, Refused> {
    let want = GuestMemory::mapped_len(&specs);
    if want > cap {
        return Err(Refused {
            kind: RefusedKind::Memory,
            reason: "Shared memory over the port's limit".into(),
            detail: format!(
                "its regions map {want} bytes, more than the port's max_shared_memory of \
                 {cap} bytes"
            ),
        });
    }
    GuestMemory::map_charged(specs, &nfv_vhost::NODE_BUDGET).map_err(|e| match e {
        MemoryError::OverBudget(o) => Refused {
            kind: RefusedKind::Memory,
            reason: "Shared memory over the node's budget".into(),
            detail: o.to_string(),
        },
        MemoryError::Unmappable { index, err } => Refused {
            kind: RefusedKind::UnmappableFd,
            reason: err.short_reason().into(),
            detail: format!("region {index}: {err}"),
        },
        e => Refused {
            kind: RefusedKind::Other,
            reason: "Failed to map region".into(),
            detail: e.to_string(),
        },
    })
}
