//! A connected interface: the client's regions mapped into this process
//! and its rings checked, ready for the queues ([`crate::queue`]).
//!
//! Regions are mapped through `nfv_virtio::GuestMemory`, which first puts
//! every region fd through `nfv_virtio::tenant_fd::check_mappable` (a
//! regular file on tmpfs/memfd or hugetlbfs, at least as long as the
//! region: a region on a disk or FUSE file could put a PMD to sleep in a
//! page fault) and refuses the client with a DISCONNECT naming what was
//! wrong; it also brings the SIGBUS guard (a client that shrinks its
//! memfd under us turns our next access into zeros, not a crash) and
//! bounds-checked translation. Region `i` sits at the synthetic address
//! `i << 40`, so a descriptor's `(region, offset, length)` is one
//! translation of `(region << 40) + offset` with the region index as the
//! lookup hint: one range check per buffer, and a region index past the
//! end simply matches nothing.

use crate::handshake::{Region, Ring, Setup};
use crate::position::PeerPosition;
use crate::ring::RingView;
use nfv_virtio::notify::Call;
use nfv_virtio::{GuestMemory, MemoryError, RegionSpec};
use nfv_wire::memif;
use std::cell::UnsafeCell;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering::*};

/// Bits of the synthetic address below a region's index: regions may be
/// up to 1 TiB.
const REGION_SHIFT: u32 = 40;

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
/// sends on it (PMD `q` uses ring `q % count`), which take turns through
/// `busy`.
#[derive(Debug)]
pub(crate) struct TxRing {
    pub view: RingView,
    /// The client's eventfd, signalled (through the notifier thread,
    /// never written by a PMD) when it has not masked interrupts.
    pub call: Call,
    busy: AtomicBool,
    /// Our tail: kept here, not read back from the ring the client can
    /// write. Only touched by the holder of `busy`.
    tail: UnsafeCell<u16>,
    /// The check of the client's head (`crate::position`), per ring so
    /// that PMDs sharing it count an event once. Held like `tail`.
    peer: UnsafeCell<PeerPosition>,
}

// SAFETY: `tail` and `peer` are only accessed by the thread holding `busy`
// (acquired with Acquire, released with Release), which serialises every
// access.
unsafe impl Sync for TxRing {}

/// A [`TxRing`] held by one PMD; released on drop.
pub(crate) struct TxTurn<'a> {
    ring: &'a TxRing,
}

impl TxRing {
    /// Waits for the ring. The holder is another PMD inside a tx burst of
    /// at most one batch (nothing the client controls can make it wait),
    /// so this spins briefly and only when PMDs outnumber the rings.
    #[inline]
    pub fn take(&self) -> TxTurn<'_> {
        while self
            .busy
            .compare_exchange_weak(false, true, Acquire, Relaxed)
            .is_err()
        {
            std::hint::spin_loop();
        }
        TxTurn { ring: self }
    }
}

impl TxTurn<'_> {
    pub fn tail(&self) -> u16 {
        // SAFETY: we hold `busy`: no other thread accesses `tail`.
        unsafe { *self.ring.tail.get() }
    }
    pub fn set_tail(&mut self, tail: u16) {
        // SAFETY: as in `tail`.
        unsafe { *self.ring.tail.get() = tail }
    }
    pub fn peer(&mut self) -> &mut PeerPosition {
        // SAFETY: we hold `busy`, and `&mut self` makes this the only
        // reference through this turn.
        unsafe { &mut *self.ring.peer.get() }
    }
}

impl Drop for TxTurn<'_> {
    fn drop(&mut self) {
        self.ring.busy.store(false, Release);
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

/// Why a handshaken client could not be used (sent as its DISCONNECT).
pub(crate) type Refused = &'static str;

impl Connection {
    /// Maps `setup`'s regions and checks its rings: inside their region
    /// (the handshake checked the arithmetic; this checks the mapping),
    /// 8-byte aligned, cookie in place.
    pub fn open(setup: Setup<OwnedFd>) -> Result<Connection, Refused> {
        let Setup {
            peer_name,
            peer_if_name,
            regions,
            c2s,
            s2c,
            ..
        } = setup;
        let mut specs = Vec::with_capacity(regions.len());
        for (i, Region { size, fd }) in regions.into_iter().enumerate() {
            if size >= 1 << REGION_SHIFT {
                return Err("Region too large");
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
        let mem = GuestMemory::map(specs).map_err(|e| match e {
            MemoryError::Unmappable { index, err } => {
                tracing::debug!("memif client region {index} refused: {err}");
                err.short_reason()
            }
            _ => "Failed to map region",
        })?;
        let mut rx_fds = Vec::with_capacity(c2s.len());
        let mut rx = Vec::with_capacity(c2s.len());
        for ring in c2s {
            let (view, fd) = Self::ring(&mem, ring)?;
            // We poll: the client need not signal.
            view.set_flags(view.flags() | memif::ring::FLAG_MASK_INT);
            rx.push(RxRing { view });
            rx_fds.push(fd);
        }
        let mut tx = Vec::with_capacity(s2c.len());
        for ring in s2c {
            let (view, fd) = Self::ring(&mem, ring)?;
            tx.push(TxRing {
                tail: UnsafeCell::new(view.tail()),
                peer: UnsafeCell::new(PeerPosition::default()),
                view,
                call: Call::new(fd),
                busy: AtomicBool::new(false),
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

    fn ring(mem: &GuestMemory, ring: Ring<OwnedFd>) -> Result<(RingView, OwnedFd), Refused> {
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

    /// The host address of a buffer of `len` bytes at `(region, offset)`,
    /// if it lies inside that region.
    #[inline(always)]
    pub fn buffer(&self, region: u16, offset: u32, len: u32) -> Option<*mut u8> {
        let mut hint = usize::from(region);
        self.mem
            .translate_hinted(region_addr(region, offset), len as usize, &mut hint)
    }
}
