//! One AF_XDP socket: its UMEM, its four rings, the bind to one NIC queue,
//! and the few syscalls the fast path may need (a tx kick, an rx wakeup —
//! only when the ring's need-wakeup flag asks for one).
//!
//! Set-up order (as libxdp does it): socket → register UMEM → size the
//! fill, completion, rx and tx rings → read their mmap offsets → map them
//! → put every rx frame on the fill ring → bind.
//!
//! Thread safety: `Xsk` is shared (`Arc`) by the port, its rx queue and
//! the tx queues that use it. The rx side (`RxRings`) is taken by the one
//! open rx queue and returned when it closes; the tx side sits behind a
//! spin lock (`tx.rs` says why). Counters are single-writer: rx counters
//! by the rx queue's owner, tx counters under the tx lock.

use crate::ring::{Consumer, Producer, RingLayout};
use crate::umem::Umem;
use nfv_mem::SpinLock;
use nfv_mem::{Mapping, Populate};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::Instant;

/// How a socket shares frames with the driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bind {
    /// `XDP_COPY`: the kernel copies frames into and out of the UMEM.
    Copy,
    /// `XDP_ZEROCOPY`: the driver DMAs straight into the UMEM.
    ZeroCopy,
}

impl Bind {
    pub fn as_str(&self) -> &'static str {
        match self {
            Bind::Copy => "copy",
            Bind::ZeroCopy => "zero-copy",
        }
    }
}

/// A set-up step that failed, and the OS error.
#[derive(Debug)]
pub struct XskError {
    pub what: &'static str,
    pub err: io::Error,
}

fn step<T>(what: &'static str, r: io::Result<T>) -> Result<T, XskError> {
    r.map_err(|err| XskError { what, err })
}

/// Ring sizes of a socket (see [`Xsk::open_over`]).
#[derive(Clone, Copy, Debug)]
pub struct Rings {
    /// Own rx frames, tx frames, tx and completion ring entries.
    pub size: u32,
    /// Fill and rx ring entries (a power of two, at least `size`).
    pub fill_size: u32,
    /// Own rx frames put on the fill ring at the start.
    pub own_fill: u32,
}

/// The rx side: owned by the open rx queue.
pub struct RxRings {
    pub rx: Consumer<libc::xdp_desc>,
    pub fill: Producer<u64>,
}

/// The tx side: shared by the tx queues on this socket, under a lock.
pub struct TxState {
    pub tx: Producer<libc::xdp_desc>,
    pub comp: Consumer<u64>,
    /// Tx frames not on the tx or completion ring (UMEM addresses). Its
    /// capacity is the number of tx frames, so pushes never allocate.
    pub free: Vec<u64>,
    /// When descriptors were left on the tx ring: the next kick of the
    /// rx path's retry (`crate::tx::retry_backlog`).
    pub retry_at: Option<Instant>,
}

/// Counters kept by the rx queue (single writer).
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct RxCounters {
    /// recvfrom() calls made because the fill ring asked for a wakeup.
    pub wakeups: AtomicU64,
    /// Rx descriptors outside the UMEM or longer than a packet buffer
    /// (delivered as empty packets, which the datapath counts as runts).
    pub bad_descs: AtomicU64,
}

/// Counters kept under the tx lock.
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct TxCounters {
    /// sendto() calls made because the tx ring asked for a wakeup.
    pub kicks: AtomicU64,
    /// Kicks the kernel answered with EAGAIN/EBUSY/ENOBUFS (it keeps the
    /// descriptors and sends them with a later kick).
    pub kicks_busy: AtomicU64,
    /// Kicks that failed otherwise (interface down or gone).
    pub kick_errors: AtomicU64,
    /// Kicks made by the rx path for descriptors a burst's kicks left on
    /// the tx ring (also counted in `kicks`).
    pub retry_kicks: AtomicU64,
    /// Frames larger than a UMEM frame (or the interface) allows, dropped.
    pub too_big: AtomicU64,
}

impl TxCounters {
    /// Adds these counts to `to` (a closed socket's to its queue's).
    pub fn add_into(&self, to: &TxCounters) {
        for (from, to) in [
            (&self.kicks, &to.kicks),
            (&self.kicks_busy, &to.kicks_busy),
            (&self.kick_errors, &to.kick_errors),
            (&self.retry_kicks, &to.retry_kicks),
            (&self.too_big, &to.too_big),
        ] {
            to.fetch_add(from.load(Relaxed), Relaxed);
        }
    }
}

/// Adds `n` to a single-writer counter without a locked instruction.
#[inline(always)]
pub fn bump(c: &AtomicU64, n: u64) {
    c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
}

pub struct Xsk {
    // Drop order matters: the ring mappings and the socket go before the
    // UMEM they point into.
    _rx_map: Mapping,
    _tx_map: Mapping,
    _fill_map: Mapping,
    _comp_map: Mapping,
    fd: OwnedFd,
    pub umem: Umem,
    pub queue: u32,
    pub bind: Bind,
    /// Frames (and descriptors) per ring: own rx frames, tx frames, and
    /// the tx and completion rings.
    pub ring_size: u32,
    /// Entries of the fill and rx rings (`ring_size` unless the UMEM is
    /// over guest memory, where guest buffers are posted too).
    pub fill_size: u32,
    rx: Mutex<Option<RxRings>>,
    pub tx: SpinLock<TxState>,
    pub rx_counters: RxCounters,
    pub tx_counters: TxCounters,
    /// Tx queues opened on this socket.
    pub tx_users: AtomicUsize,
    /// The last kick left descriptors on the tx ring: the rx path kicks
    /// again (`crate::tx::retry_backlog`). Read without the tx lock.
    pub tx_backlog: AtomicBool,
}

fn setsockopt<T>(fd: BorrowedFd<'_>, opt: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: `v` is a live value of the size passed.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            opt,
            (v as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// getsockopt(SOL_XDP) into a zeroed `T`; errors if the kernel returned
/// fewer bytes than `T` has.
fn getsockopt<T: Copy>(fd: BorrowedFd<'_>, opt: libc::c_int) -> io::Result<T> {
    // SAFETY: `T` is one of the plain-data uapi structs used below; all-zero
    // is a valid value of each.
    let mut v: T = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `v` is writable for `len` bytes; the kernel writes at most that.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            opt,
            (&mut v as *mut T).cast(),
            &mut len,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    if (len as usize) < std::mem::size_of::<T>() {
        return Err(io::Error::other(format!(
            "kernel returned {len} bytes for socket option {opt}, expected {}",
            std::mem::size_of::<T>()
        )));
    }
    Ok(v)
}

/// Maps one ring and lays out its cursor memory.
fn map_ring<T: Copy>(
    fd: BorrowedFd<'_>,
    off: &libc::xdp_ring_offset,
    size: u32,
    pgoff: u64,
) -> io::Result<(Mapping, RingLayout<T>)> {
    let len = off.desc as usize + size as usize * std::mem::size_of::<T>();
    let map = Mapping::shared(fd, len, pgoff, Populate::Now)?;
    // SAFETY: the kernel laid the ring out at these offsets inside the
    // `len` bytes just mapped; the mapping lives in the same `Xsk` as every
    // cursor made from this layout.
    let layout = unsafe { RingLayout::new(map.as_ptr(), off, size) };
    Ok((map, layout))
}

/// Build, step 1: a fresh AF_XDP socket.
fn new_socket() -> Result<OwnedFd, XskError> {
    // SAFETY: plain socket(2); the result is checked before use.
    let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(XskError {
            what: "creating the AF_XDP socket",
            err: io::Error::last_os_error(),
        });
    }
    // SAFETY: a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// Build, step 2: registers (pins) `umem` with socket `sock` and sizes
/// its four rings.
fn register(sock: BorrowedFd<'_>, umem: &Umem, rings: &Rings) -> Result<(), XskError> {
    let ring_size = rings.size;
    let reg = umem.registration();
    step(
        "registering the UMEM",
        setsockopt(sock, libc::XDP_UMEM_REG, &reg),
    )?;
    for (opt, size) in [
        (libc::XDP_UMEM_FILL_RING, rings.fill_size),
        (libc::XDP_UMEM_COMPLETION_RING, ring_size),
        (libc::XDP_RX_RING, rings.fill_size),
        (libc::XDP_TX_RING, ring_size),
    ] {
        step("sizing the rings", setsockopt(sock, opt, &size))?;
    }
    Ok(())
}

/// The four rings of a socket: each ring's mapping and its layout.
struct RingMaps {
    rx: (Mapping, RingLayout<libc::xdp_desc>),
    tx: (Mapping, RingLayout<libc::xdp_desc>),
    fill: (Mapping, RingLayout<u64>),
    comp: (Mapping, RingLayout<u64>),
}

/// Build, step 3: maps the rx, tx, fill and completion rings of `sock`.
fn map_rings(sock: BorrowedFd<'_>, rings: &Rings) -> Result<RingMaps, XskError> {
    let off: libc::xdp_mmap_offsets = step(
        "reading the ring offsets",
        getsockopt(sock, libc::XDP_MMAP_OFFSETS),
    )?;
    let what = "mapping the rings";
    let (rx_map, rx) = step(
        what,
        map_ring::<libc::xdp_desc>(
            sock,
            &off.rx,
            rings.fill_size,
            libc::XDP_PGOFF_RX_RING as u64,
        ),
    )?;
    let (tx_map, tx) = step(
        what,
        map_ring::<libc::xdp_desc>(sock, &off.tx, rings.size, libc::XDP_PGOFF_TX_RING as u64),
    )?;
    let (fill_map, fill) = step(
        what,
        map_ring::<u64>(
            sock,
            &off.fr,
            rings.fill_size,
            libc::XDP_UMEM_PGOFF_FILL_RING,
        ),
    )?;
    let (comp_map, comp) = step(
        what,
        map_ring::<u64>(
            sock,
            &off.cr,
            rings.size,
            libc::XDP_UMEM_PGOFF_COMPLETION_RING,
        ),
    )?;
    Ok(RingMaps {
        rx: (rx_map, rx),
        tx: (tx_map, tx),
        fill: (fill_map, fill),
        comp: (comp_map, comp),
    })
}

impl Xsk {
    /// A socket on `ifindex` queue `queue` with `ring_size` descriptors per
    /// ring and `2 * ring_size` UMEM frames, bound in `bind` mode with
    /// need-wakeup; every rx frame starts on the fill ring.
    pub fn open(ifindex: u32, queue: u32, ring_size: u32, bind: Bind) -> Result<Xsk, XskError> {
        let umem = step("allocating the UMEM", Umem::new(2 * ring_size))?;
        Self::open_over(
            ifindex,
            queue,
            Rings {
                size: ring_size,
                fill_size: ring_size,
                own_fill: ring_size,
            },
            bind,
            umem,
        )
    }

    /// A socket over `umem` (which has `2 * rings.size` own frames): the
    /// fill ring has `rings.fill_size` entries and starts with own rx
    /// frames `0..rings.own_fill` on it.
    pub fn open_over(
        ifindex: u32,
        queue: u32,
        rings: Rings,
        bind: Bind,
        umem: Umem,
    ) -> Result<Xsk, XskError> {
        Unbound(Self::build(queue, rings, umem)?)
            .bind(ifindex, bind)
            .map_err(|b| b.1)
    }

    /// A socket like [`Xsk::open_over`]'s, its UMEM registered (pinned)
    /// and rings mapped, but not bound yet: the slow part, done while the
    /// queue's previous socket still runs.
    pub fn unbound(queue: u32, rings: Rings, umem: Umem) -> Result<Unbound, XskError> {
        Self::build(queue, rings, umem).map(Unbound)
    }

    fn build(queue: u32, rings: Rings, umem: Umem) -> Result<Xsk, XskError> {
        let ring_size = rings.size;
        let fd = new_socket()?;
        let sock = fd.as_fd();
        register(sock, &umem, &rings)?;
        let RingMaps {
            rx: (rx_map, rx),
            tx: (tx_map, tx),
            fill: (fill_map, fill),
            comp: (comp_map, comp),
        } = map_rings(sock, &rings)?;

        // SAFETY: the rings are fresh; these are the only user-space
        // cursors on each side of each ring.
        let (rx, mut fill, tx, comp) = unsafe {
            (
                Consumer::new(rx),
                Producer::new(fill),
                Producer::new(tx),
                Consumer::new(comp),
            )
        };
        // Rx frames go on the fill ring before the bind, so the kernel
        // has buffers for the first frame.
        let n = fill.free(rings.own_fill).min(rings.own_fill.min(ring_size));
        for i in 0..n {
            fill.write(i, umem.frame_addr(i));
        }
        fill.submit(n);
        let free = (ring_size..2 * ring_size)
            .map(|i| umem.frame_addr(i))
            .collect();

        let xsk = Xsk {
            _rx_map: rx_map,
            _tx_map: tx_map,
            _fill_map: fill_map,
            _comp_map: comp_map,
            fd,
            umem,
            queue,
            // Set by the bind.
            bind: Bind::Copy,
            ring_size,
            fill_size: rings.fill_size,
            rx: Mutex::new(Some(RxRings { rx, fill })),
            tx: SpinLock::new(TxState {
                tx,
                comp,
                free,
                retry_at: None,
            }),
            rx_counters: RxCounters::default(),
            tx_counters: TxCounters::default(),
            tx_users: AtomicUsize::new(0),
            tx_backlog: AtomicBool::new(false),
        };
        Ok(xsk)
    }

    /// Takes the rx side (for the rx queue being opened); `None` if an rx
    /// queue already has it.
    pub fn take_rx(&self) -> Option<RxRings> {
        self.rx.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// Gives the rx side back (the rx queue closed).
    pub fn return_rx(&self, rings: RxRings) {
        *self.rx.lock().unwrap_or_else(|p| p.into_inner()) = Some(rings);
    }

    /// The kernel's counters for this socket.
    pub fn statistics(&self) -> io::Result<libc::xdp_statistics> {
        getsockopt(self.fd.as_fd(), libc::XDP_STATISTICS)
    }

    /// Asks the kernel to send what is on the tx ring (copy mode: sends
    /// up to 32 frames in this call; zero-copy: wakes the driver).
    #[inline]
    pub fn kick_tx(&self) -> io::Result<()> {
        // SAFETY: a zero-length sendto on our own socket; no buffers.
        let r = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Wakes the driver to refill from the fill ring (zero-copy drivers
    /// that ran out of buffers).
    #[inline]
    pub fn wake_rx(&self) {
        // SAFETY: a zero-length, non-blocking recvfrom on our own socket;
        // nothing is written to user memory.
        unsafe {
            libc::recvfrom(
                self.fd.as_raw_fd(),
                std::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
    }
}

/// A socket whose UMEM and rings are set up, not yet bound to a queue
/// ([`Xsk::unbound`]).
pub struct Unbound(Xsk);

impl Unbound {
    /// Binds to `ifindex` queue `self.queue` in `bind` mode with
    /// need-wakeup. On failure the socket comes back with the error, so a
    /// bind refused with EBUSY (the queue's previous socket is still being
    /// released by the kernel) can be tried again.
    pub fn bind(self, ifindex: u32, bind: Bind) -> Result<Xsk, Box<(Unbound, XskError)>> {
        self.bind_with(ifindex, bind, false)
    }

    /// [`Unbound::bind`], with `XDP_USE_SG` when `sg` (tx frames in several
    /// descriptors, `XDP_PKT_CONTD`; Linux 6.6+, and in zero-copy mode
    /// only on drivers that support it: the kernel refuses otherwise).
    pub fn bind_with(
        self,
        ifindex: u32,
        bind: Bind,
        sg: bool,
    ) -> Result<Xsk, Box<(Unbound, XskError)>> {
        let mut xsk = self.0;
        let sg_flag = if sg { libc::XDP_USE_SG } else { 0 };
        let mode = match bind {
            Bind::Copy => libc::XDP_COPY,
            Bind::ZeroCopy => libc::XDP_ZEROCOPY,
        };
        let addr = libc::sockaddr_xdp {
            sxdp_family: libc::AF_XDP as u16,
            sxdp_flags: mode | libc::XDP_USE_NEED_WAKEUP | sg_flag,
            sxdp_ifindex: ifindex,
            sxdp_queue_id: xsk.queue,
            sxdp_shared_umem_fd: 0,
        };
        // SAFETY: `addr` is a valid sockaddr_xdp of the size passed.
        let r = unsafe {
            libc::bind(
                xsk.fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_xdp).cast(),
                std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
            )
        };
        if r < 0 {
            let err = XskError {
                what: "binding the socket to the queue",
                err: io::Error::last_os_error(),
            };
            return Err(Box::new((Unbound(xsk), err)));
        }
        let opts: libc::xdp_options = match getsockopt(xsk.fd.as_fd(), libc::XDP_OPTIONS) {
            Ok(o) => o,
            Err(err) => {
                let e = XskError {
                    what: "reading the socket options",
                    err,
                };
                return Err(Box::new((Unbound(xsk), e)));
            }
        };
        xsk.bind = if opts.flags & libc::XDP_OPTIONS_ZEROCOPY != 0 {
            Bind::ZeroCopy
        } else {
            Bind::Copy
        };
        Ok(xsk)
    }
}

impl AsFd for Xsk {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
