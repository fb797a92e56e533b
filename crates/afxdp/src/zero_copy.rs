//! Kernel port → VNF with no switch copy (IOVTee's Rx-queue mapping): an
//! AF_XDP queue whose traffic goes to one vhost-user VNF (`zero_copy =
//! "vnf1"`) receives straight into that guest's receive buffers.
//!
//! How: the queue's socket is rebuilt over a UMEM that *is* the guest's
//! memory (`guest_umem.rs`) plus frames of our own. Each burst the queue
//! borrows the guest's posted receive buffers (`nfv_vhost::lend`) and puts
//! them on the fill ring at the address that lands the frame right after
//! the virtio-net header. A received frame becomes a packet over the guest
//! buffer; when the flow table sends it to that VNF, the vhost-user port
//! writes the header and the used entry and nothing else. A frame the flow
//! table sends elsewhere (or drops) is copied out as usual and its buffer
//! goes back to the guest empty (length 0, which drivers count and
//! recycle). While the guest has no buffers posted, own frames keep the
//! kernel supplied and their frames are copied (`zc_fallback`
//! `no_guest_buffer`).
//!
//! Life cycle (the manager thread, one per port, every 10 ms):
//! * waiting: the queue runs an ordinary copy socket until the VNF port
//!   exists, is claimed (`Lender::claim`; one borrower per queue pair) and
//!   its guest receive ring runs and may lend (no IN_ORDER);
//! * switching: the guest UMEM is mapped and registered (the pinning, the
//!   slow part) while the copy socket still runs; then the copy socket is
//!   taken out, the PMD's burst in flight is waited for, the old socket
//!   closed and the new one bound (retried while the kernel still
//!   releases the old one) and put in the XSKMAP;
//! * revoked: when the VNF's ring stops or its memory changes, the
//!   vhost-user protocol thread calls [`Borrower::revoke`]: the socket is
//!   taken out, the burst in flight waited for, the socket closed — then
//!   the port gives every lent buffer back — and the manager goes back to
//!   waiting (a copy socket first).
//!
//! Between sockets (a few ms) the XDP program passes the queue's frames
//! to the kernel stack. Trust: the VNF sees every frame of this queue in
//! its memory, including frames the flow table sends elsewhere, and could
//! change such a frame before the switch copies it out: `zero_copy` is
//! for a queue whose traffic belongs to that VNF.

use crate::guest_umem::{Placement, Unfit};
use crate::lock::SpinLock;
use crate::rx::receive_copies;
use crate::umem::Umem;
use crate::xsk::{Bind, Rings, RxRings, Unbound, Xsk};
use crate::zero_copy_tx::{Source, TxInPlace, TxInPlaceCounters, reap, transmit_in_place};
use nfv_mem::owner::OwnerId;
use nfv_mem::{BATCH, Batch, PoolCache};
use nfv_ports::{Routes, RxQueue, TxQueue};
use nfv_vhost::lend::{Borrower, Lease, Lender};
use nfv_virtio::{GuestMemory, Lent, NotLendable};
use std::collections::VecDeque;
use std::os::fd::AsFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Guest buffers lent per burst at most.
const LEND_BURST: usize = 64;
/// Fill-ring depth the queue keeps with guest buffers (at most half the
/// guest's ring, the rest stays for the copy path: frames from other
/// ports and own-frame fallbacks need guest buffers too). Deep enough for
/// the kernel's bursts: a sender that was descheduled for a few ms
/// catches up with hundreds of frames at once, faster than the PMD tops
/// the ring up — at 128 the kernel dropped 6-23 % of a 100 kpps stream
/// for want of a fill entry while the copy socket (2048 own frames) lost
/// none (bench/README.md).
const FILL_TARGET: u32 = 512;
/// Below this fill-ring depth after lending (the guest has too few
/// buffers posted: a VNF descheduled for a few ms), own frames top it up
/// to twice this, so the kernel copies into them instead of dropping.
const LOW_WATER: u32 = 64;
/// How long a revoke waits for the PMD's burst in flight.
const QUIESCE_TIMEOUT: Duration = Duration::from_secs(1);

/// Why a frame did not land in a guest buffer, or a buffer was not lent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum Fallback {
    /// No guest buffer was on the fill ring: the frame landed in an own
    /// frame and was copied.
    NoGuestBuffer,
    /// The next guest buffer is not one writable descriptor.
    BufferShape,
    /// The next guest buffer is shorter than header + frame room.
    ShortBuffer,
    /// The next guest buffer does not fit the UMEM's layout.
    OutsideUmem,
    /// A bad chain (left for the copy path to count).
    BadChain,
    /// Zero-copy driver bind: the buffer's chunk would cross a page.
    PageCross,
}

impl Fallback {
    pub const ALL: [Fallback; 6] = [
        Fallback::NoGuestBuffer,
        Fallback::BufferShape,
        Fallback::ShortBuffer,
        Fallback::OutsideUmem,
        Fallback::BadChain,
        Fallback::PageCross,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            Fallback::NoGuestBuffer => "no_guest_buffer",
            Fallback::BufferShape => "buffer_shape",
            Fallback::ShortBuffer => "short_buffer",
            Fallback::OutsideUmem => "outside_umem",
            Fallback::BadChain => "bad_chain",
            Fallback::PageCross => "page_cross",
        }
    }
    fn of_unfit(u: Unfit) -> Fallback {
        match u {
            Unfit::ShortBuffer => Fallback::ShortBuffer,
            Unfit::OutsideUmem => Fallback::OutsideUmem,
            Unfit::PageCross => Fallback::PageCross,
        }
    }
    fn of_not_lendable(n: NotLendable) -> Fallback {
        match n {
            NotLendable::Shape => Fallback::BufferShape,
            _ => Fallback::BadChain,
        }
    }
}

/// Counters of one zero-copy queue, written by its rx PMD (single
/// writer: plain load + store) and read by `show ports`.
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct ZcCounters {
    /// Frames received straight into guest buffers.
    pub zero_copy: AtomicU64,
    /// Guest buffers put on the fill ring.
    pub lent: AtomicU64,
    /// Fallbacks by reason ([`Fallback`] order). `no_guest_buffer` counts
    /// frames; the buffer reasons count bursts that stopped lending.
    pub fallback: [AtomicU64; 6],
    /// Rx descriptors that named no posted buffer, or a frame that did
    /// not fit it (the buffer went back to the guest empty).
    pub bad_descs: AtomicU64,
    /// Guest sockets built / revoked.
    pub switches: AtomicU64,
    pub revokes: AtomicU64,
}

#[inline(always)]
fn add(c: &AtomicU64, n: u64) {
    c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
}

/// Every how long the manager averages a queue's frame sizes.
const SIZE_WINDOW: Duration = Duration::from_secs(1);
/// Fewer frames than this in a window decide nothing (the mode stays).
const SIZE_MIN_FRAMES: u64 = 1000;
/// Hysteresis of the small-frame switch: zero copy again from
/// `min_frame` + this.
const SIZE_HYSTERESIS: u32 = 64;

/// Whether a queue's frames are too small for zero copy to pay
/// (`zero_copy_min_frame`): decided per [`SIZE_WINDOW`] from the frames
/// and bytes the queue received, with hysteresis.
#[derive(Debug)]
pub(crate) struct SizePolicy {
    min_frame: u32,
    since: Option<(Instant, u64, u64)>,
    /// The average that made the queue copy, while it does.
    small: Option<u32>,
}

impl SizePolicy {
    pub(crate) fn new(min_frame: u32) -> SizePolicy {
        SizePolicy {
            min_frame,
            since: None,
            small: None,
        }
    }

    /// The average frame size from which the queue lends again.
    pub(crate) fn lend_from(&self) -> u32 {
        self.min_frame + SIZE_HYSTERESIS
    }

    /// Takes the queue's running totals at `now`; `Some(average)` while
    /// the queue should copy.
    pub(crate) fn tick(&mut self, now: Instant, frames: u64, bytes: u64) -> Option<u32> {
        if self.min_frame == 0 {
            return None;
        }
        let Some((t0, f0, b0)) = self.since else {
            self.since = Some((now, frames, bytes));
            return self.small;
        };
        if now.duration_since(t0) < SIZE_WINDOW {
            return self.small;
        }
        self.since = Some((now, frames, bytes));
        let n = frames.wrapping_sub(f0);
        if n < SIZE_MIN_FRAMES {
            return self.small;
        }
        let avg = (bytes.wrapping_sub(b0) / n).min(u32::MAX as u64) as u32;
        let limit = if self.small.is_some() {
            self.lend_from()
        } else {
            self.min_frame
        };
        self.small = (avg < limit).then_some(avg);
        self.small
    }
}

/// Whose guest buffers a zero-copy queue receives into.
#[derive(Clone)]
pub(crate) enum Target {
    /// `zero_copy = "vnf1"`.
    Port(String),
    /// `zero_copy = "auto"`: the vhost-user port the flow table sends
    /// every frame received on port number `port` to, while it does.
    Auto { routes: Arc<dyn Routes>, port: u16 },
}

impl Target {
    /// The port to borrow from now (control plane: may walk the rules).
    fn resolve(&self) -> Option<String> {
        match self {
            Target::Port(p) => Some(p.clone()),
            Target::Auto { routes, port } => routes.sole_destination(*port),
        }
    }

    /// The status while `resolve` finds nothing.
    fn why_none(&self) -> String {
        "copy: auto: the flow table does not send all of this port's frames to one port".to_string()
    }

    /// The status while `target` is no vhost-user port that lends.
    fn waiting(&self, target: &str) -> String {
        match self {
            Target::Port(_) => format!("copy: waiting for vhost-user port {target}"),
            // The node named a port that runs: it is of another type.
            Target::Auto { .. } => format!(
                "copy: auto: the flow table sends this port's frames to {target}, not a \
                 vhost-user port"
            ),
        }
    }

    /// Appended to the zero-copy status.
    fn suffix(&self) -> &'static str {
        match self {
            Target::Port(_) => "",
            Target::Auto { .. } => ", chosen by the flow table",
        }
    }
}

/// The borrowed side of a guest socket.
struct LendRx {
    lender: Lender,
    owner: OwnerId,
    pair: usize,
    tag: u32,
    mem: Arc<GuestMemory>,
    hdr_len: usize,
    placement: Placement,
    /// Guest buffers on the fill ring, in posting order, with their fill
    /// address. Capacity: the fill ring's size (never grows).
    posted: VecDeque<(u64, Lent)>,
    /// Own rx frames on the fill ring.
    own_posted: u32,
    /// Guest buffers kept on the fill ring: [`FILL_TARGET`], at most half
    /// the guest's receive ring (learnt when lending).
    fill_target: u32,
    /// The lease ended under us (the ring went away without a revoke
    /// yet): stop lending, receive into own frames.
    ended: bool,
}

/// A socket of a zero-copy queue and what the rx side keeps with it.
struct ZcSocket {
    xsk: Xsk,
    rx: RxRings,
    lend: Option<LendRx>,
    /// Own rx frames not on the fill ring (guest sockets).
    own_free: Vec<u64>,
    /// A guest socket bound with `XDP_USE_SG`: the VNF's frames go out
    /// with their tails in place (`zero_copy_tx.rs`).
    tx: Option<TxInPlace>,
}

/// Closes `s` — the kernel reads and writes none of its UMEM after this —
/// then lets the lender give back every chain kept for its sends.
fn close_socket(s: ZcSocket) {
    let ZcSocket { xsk, lend, tx, .. } = s;
    drop(xsk);
    if tx.is_some()
        && let Some(l) = lend
    {
        l.lender.let_go_tx(l.pair);
    }
}

/// What the manager and `show ports` say about a queue.
#[derive(Clone, Debug, Default)]
struct Status {
    text: String,
    /// A lease tag whose socket failed to build: not retried.
    failed_tag: u32,
}

/// One AF_XDP queue in zero-copy-to-VNF mode.
pub struct ZcQueue {
    slot: SpinLock<Option<ZcSocket>>,
    /// Rx bursts begun (single writer: the rx PMD).
    bursts: AtomicU64,
    /// An rx queue object exists (a PMD polls the queue).
    polled: AtomicBool,
    pub counters: ZcCounters,
    pub tx_counters: TxInPlaceCounters,
    port: String,
    target: Target,
    /// The vhost-user port of the current claim (what `target` named
    /// when it was made).
    claimed: Mutex<Option<String>>,
    queue: u32,
    ifindex: u32,
    ring_size: u32,
    bind: Bind,
    max_frame: usize,
    send_in_place: crate::SendInPlace,
    /// Frames and their bytes received (single writer: the rx PMD), read
    /// by the manager's [`SizePolicy`].
    rx_frames: AtomicU64,
    rx_bytes: AtomicU64,
    size_policy: Mutex<SizePolicy>,
    map: Arc<crate::bpf::XskMap>,
    lender: Mutex<Option<Lender>>,
    status: Mutex<Status>,
}

impl ZcQueue {
    /// A queue that starts on an ordinary copy socket `xsk`; `cfg` gives
    /// its `send_in_place` and `zero_copy_min_frame`.
    pub(crate) fn new(
        port: &str,
        target: Target,
        ifindex: u32,
        xsk: Xsk,
        map: Arc<crate::bpf::XskMap>,
        max_frame: usize,
        cfg: &crate::AfXdpConfig,
    ) -> ZcQueue {
        let queue = xsk.queue;
        let ring_size = xsk.ring_size;
        let bind = xsk.bind;
        let rx = xsk.take_rx().expect("a fresh socket has its rx side");
        ZcQueue {
            slot: SpinLock::new(Some(ZcSocket {
                xsk,
                rx,
                lend: None,
                own_free: Vec::new(),
                tx: None,
            })),
            bursts: AtomicU64::new(0),
            polled: AtomicBool::new(false),
            counters: ZcCounters::default(),
            tx_counters: TxInPlaceCounters::default(),
            port: port.to_string(),
            target,
            claimed: Mutex::new(None),
            queue,
            ifindex,
            ring_size,
            bind,
            max_frame,
            send_in_place: cfg.send_in_place,
            rx_frames: AtomicU64::new(0),
            rx_bytes: AtomicU64::new(0),
            size_policy: Mutex::new(SizePolicy::new(cfg.zero_copy_min_frame)),
            map,
            lender: Mutex::new(None),
            status: Mutex::new(Status {
                text: "copy: starting".to_string(),
                failed_tag: 0,
            }),
        }
    }

    pub(crate) fn ring_size(&self) -> u32 {
        self.ring_size
    }

    /// `zero-copy into PORT` or `copy: why` (for `show ports`).
    pub fn mode_text(&self) -> String {
        self.status
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .text
            .clone()
    }

    fn set_status(&self, text: String) {
        let mut s = self.status.lock().unwrap_or_else(|p| p.into_inner());
        if s.text != text {
            tracing::info!("port {} queue {}: {text}", self.port, self.queue);
            s.text = text;
        }
    }

    /// The kernel's counters of the current socket.
    pub fn statistics(&self) -> Option<libc::xdp_statistics> {
        let g = self.slot.lock();
        g.as_ref().and_then(|s| s.xsk.statistics().ok())
    }

    /// Whether the current socket is over guest memory.
    pub fn is_zero_copy(&self) -> bool {
        self.slot.lock().as_ref().is_some_and(|s| s.lend.is_some())
    }

    /// Takes the socket out and waits until the PMD's burst in flight (and
    /// its packets) are done: the caller may then close it.
    fn take_quiet(&self) -> Option<ZcSocket> {
        let s = self.slot.lock().take();
        let b0 = self.bursts.load(Acquire);
        let deadline = Instant::now() + QUIESCE_TIMEOUT;
        while self.polled.load(Acquire) && self.bursts.load(Acquire) < b0 + 2 {
            if Instant::now() > deadline {
                tracing::warn!(
                    "port {} queue {}: the PMD did not finish its burst within {:?}",
                    self.port,
                    self.queue,
                    QUIESCE_TIMEOUT
                );
                break;
            }
            std::thread::sleep(Duration::from_micros(20));
        }
        s
    }

    /// Takes the socket out, waits for the burst in flight and closes it.
    fn close_quiet(&self) {
        if let Some(s) = self.take_quiet() {
            close_socket(s);
        }
    }

    /// Closes a guest socket while keeping the claim, then gives the
    /// guest every buffer still lent (on the fill or rx ring: the burst in
    /// flight and its packets are done).
    fn close_and_give_back(&self) {
        let Some(s) = self.take_quiet() else {
            return;
        };
        let lease = s.lend.as_ref().map(|l| (l.lender.clone(), l.pair, l.tag));
        close_socket(s);
        if let Some((lender, pair, tag)) = lease {
            lender.with_ring(pair, tag, |dq| dq.return_all_lent());
        }
    }

    /// Binds `u`, retrying while the kernel still releases the queue's
    /// previous socket (EBUSY), then puts it in the XSKMAP.
    fn bind_and_map(&self, u: Unbound) -> Result<Xsk, String> {
        self.bind_and_map_sg(u, false).map(|(x, _)| x)
    }

    /// [`ZcQueue::bind_and_map`], with `XDP_USE_SG` if `sg` and the kernel
    /// takes it (else without); says which.
    fn bind_and_map_sg(&self, mut u: Unbound, mut sg: bool) -> Result<(Xsk, bool), String> {
        let deadline = Instant::now() + Duration::from_secs(2);
        let xsk = loop {
            match u.bind_with(self.ifindex, self.bind, sg) {
                Ok(x) => break x,
                Err(b)
                    if b.1.err.raw_os_error() == Some(libc::EBUSY) && Instant::now() < deadline =>
                {
                    u = b.0;
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(b) if sg => {
                    // An older kernel or a driver without multi-buffer
                    // support: the VNF's frames are copied out.
                    tracing::info!(
                        "port {} queue {}: no XDP_USE_SG ({}); sends to the network are copied",
                        self.port,
                        self.queue,
                        b.1.err
                    );
                    u = b.0;
                    sg = false;
                }
                Err(b) => return Err(format!("{}: {}", b.1.what, b.1.err)),
            }
        };
        self.map
            .set(self.queue, xsk.as_fd())
            .map_err(|e| format!("adding the socket to the XSKMAP: {e}"))?;
        Ok((xsk, sg))
    }

    /// Installs a fresh copy socket (after a revoke or a failed switch).
    fn install_copy(&self) -> Result<(), String> {
        let umem = Umem::new(2 * self.ring_size).map_err(|e| e.to_string())?;
        let rings = Rings {
            size: self.ring_size,
            fill_size: self.ring_size,
            own_fill: self.ring_size,
        };
        let u =
            Xsk::unbound(self.queue, rings, umem).map_err(|e| format!("{}: {}", e.what, e.err))?;
        let xsk = self.bind_and_map(u)?;
        let rx = xsk.take_rx().expect("a fresh socket has its rx side");
        *self.slot.lock() = Some(ZcSocket {
            xsk,
            rx,
            lend: None,
            own_free: Vec::new(),
            tx: None,
        });
        Ok(())
    }

    /// Builds a socket over `lease`'s guest memory and switches to it.
    fn switch_to_guest(&self, lender: &Lender, pair: usize, lease: Lease) -> Result<(), String> {
        let owner = lender
            .owner_id()
            .ok_or_else(|| "the VNF port has no lender id".to_string())?;
        let placement = Placement {
            page_bound: self.bind == Bind::ZeroCopy,
            ..Placement::for_frames(self.max_frame, lease.hdr_len)
        };
        let umem = Umem::over_guest(&lease.mem, 2 * self.ring_size, placement)
            .map_err(|e| format!("mapping the guest memory: {e}"))?;
        let fill_size = (2 * self.ring_size).next_power_of_two();
        let rings = Rings {
            size: self.ring_size,
            fill_size,
            own_fill: 0,
        };
        // Pinning happens here, while the old socket still runs.
        let u =
            Xsk::unbound(self.queue, rings, umem).map_err(|e| format!("{}: {}", e.what, e.err))?;
        self.close_quiet();
        // Sends in place (`XDP_USE_SG`: Linux 6.6+, and drivers that
        // support multi-buffer in zero-copy mode) where they pay.
        let want_sg = match self.send_in_place {
            crate::SendInPlace::Auto => self.bind == Bind::ZeroCopy,
            crate::SendInPlace::On => true,
            crate::SendInPlace::Off => false,
        };
        let (xsk, sg) = self.bind_and_map_sg(u, want_sg)?;
        let rx = xsk.take_rx().expect("a fresh socket has its rx side");
        let own_free = (0..self.ring_size)
            .map(|i| xsk.umem.frame_addr(i))
            .collect();
        *self.slot.lock() = Some(ZcSocket {
            xsk,
            rx,
            lend: Some(LendRx {
                lender: lender.clone(),
                owner,
                pair,
                tag: lease.tag,
                mem: lease.mem,
                hdr_len: lease.hdr_len,
                placement,
                posted: VecDeque::with_capacity(fill_size as usize),
                own_posted: 0,
                fill_target: FILL_TARGET,
                ended: false,
            }),
            own_free,
            tx: sg.then(|| TxInPlace::new(self.ring_size)),
        });
        if sg {
            lender.start_tx_keep(pair);
        }
        add(&self.counters.switches, 1);
        Ok(())
    }

    /// One step of the manager (see the module doc).
    pub(crate) fn tick(self: &Arc<Self>) {
        let want = self.target.resolve();
        let mut lender = self.lender.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(l) = lender.as_ref()
            && (l.is_closed() || want.as_deref() != Some(l.name()))
        {
            // The VNF port was removed, or the flow table now sends this
            // port's frames elsewhere: let go, start over.
            self.close_quiet();
            l.unclaim(self.pair_of(l));
            *lender = None;
            *self.claimed.lock().unwrap_or_else(|p| p.into_inner()) = None;
        }
        let Some(target) = want else {
            self.set_status(self.target.why_none());
            self.ensure_socket();
            return;
        };
        if lender.is_none()
            && let Some(l) = Lender::find(&target)
        {
            let me: Arc<dyn Borrower> = self.clone();
            match l.claim(self.pair_of(&l), me) {
                Ok(()) => {
                    *lender = Some(l);
                    *self.claimed.lock().unwrap_or_else(|p| p.into_inner()) = Some(target.clone());
                }
                Err(e) => self.set_status(format!(
                    "copy: cannot borrow from vhost-user port {target}: {e}"
                )),
            }
        }
        let (guest, lending) = {
            let g = self.slot.lock();
            let lend = g.as_ref().and_then(|s| s.lend.as_ref());
            (lend.is_some(), lend.is_some_and(|l| !l.ended))
        };
        let small = {
            let mut p = self.size_policy.lock().unwrap_or_else(|p| p.into_inner());
            p.tick(
                Instant::now(),
                self.rx_frames.load(Relaxed),
                self.rx_bytes.load(Relaxed),
            )
        };
        if let Some(avg) = small {
            // Small frames: a copy socket costs less than lending.
            if guest {
                self.close_and_give_back();
            }
            self.set_status(format!(
                "copy: small frames ({avg} B on average; zero copy from {} B)",
                self.size_policy
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .lend_from()
            ));
            self.ensure_socket();
            return;
        }
        if guest && (!lending || lender.is_none()) {
            // A guest socket whose lease ended: back to copy first.
            self.close_quiet();
        }
        if let Some(l) = lender.as_ref()
            && !lending
        {
            let p = self.pair_of(l);
            match l.lease(p) {
                Ok(lease) => {
                    let failed = self
                        .status
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .failed_tag;
                    if lease.tag != failed {
                        let tag = lease.tag;
                        match self.switch_to_guest(l, p, lease) {
                            Ok(()) => self.set_status(format!(
                                "zero-copy into {target} (queue pair {p}){}",
                                self.target.suffix()
                            )),
                            Err(e) => {
                                self.status
                                    .lock()
                                    .unwrap_or_else(|e| e.into_inner())
                                    .failed_tag = tag;
                                self.set_status(format!("copy: zero-copy failed: {e}"));
                            }
                        }
                    }
                }
                Err(e) => self.set_status(format!("copy: {target}: {e}")),
            }
        } else if lender.is_none() {
            self.set_status(self.target.waiting(&target));
        }
        self.ensure_socket();
    }

    /// A copy socket when the queue has none (after a revoke or a failed
    /// switch).
    fn ensure_socket(&self) {
        if self.slot.lock().is_none()
            && let Err(e) = self.install_copy()
        {
            self.set_status(format!("no socket: {e}"));
        }
    }

    /// The vhost-user port this queue receives into, or would: the
    /// configured one, or for `auto` the current claim (else `auto`).
    pub fn target_name(&self) -> String {
        match &self.target {
            Target::Port(p) => p.clone(),
            Target::Auto { .. } => self
                .claimed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
                .unwrap_or_else(|| "auto".to_string()),
        }
    }

    /// The VNF queue pair this queue borrows from.
    fn pair_of(&self, l: &Lender) -> usize {
        self.queue as usize % l.pairs().max(1)
    }

    /// Stops for good (the port closes).
    pub(crate) fn close(&self) {
        self.close_quiet();
        let l = self.lender.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(l) = l {
            l.unclaim(self.pair_of(&l));
        }
    }
}

impl Borrower for ZcQueue {
    fn revoke(&self) {
        add(&self.counters.revokes, 1);
        // Closing the socket here (outside every lock) stops the kernel
        // writing lent buffers; the manager builds the next one.
        self.close_quiet();
        self.set_status(format!("copy: {} ring stopped", self.target_name()));
    }
}

/// The rx queue of a zero-copy queue.
pub struct ZcRxq {
    q: Arc<ZcQueue>,
}

impl ZcRxq {
    pub(crate) fn new(q: Arc<ZcQueue>) -> ZcRxq {
        q.polled.store(true, Release);
        ZcRxq { q }
    }
}

impl Drop for ZcRxq {
    fn drop(&mut self) {
        self.q.polled.store(false, Release);
    }
}

impl RxQueue for ZcRxq {
    #[inline]
    fn rx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        let q = &*self.q;
        q.bursts.store(q.bursts.load(Relaxed) + 1, Release);
        let mut g = q.slot.lock();
        let Some(s) = g.as_mut() else {
            return 0;
        };
        let start = batch.len();
        let n = match s.lend.as_mut() {
            None => receive_copies(&s.xsk, &mut s.rx, batch, pool),
            Some(l) => receive_lent(
                &q.counters,
                &s.xsk,
                &mut s.rx,
                l,
                &mut s.own_free,
                batch,
                pool,
            ),
        };
        if n != 0 {
            let bytes: usize = batch[start..].iter().map(|p| p.len()).sum();
            add(&q.rx_frames, n as u64);
            add(&q.rx_bytes, bytes as u64);
        }
        if s.rx.fill.needs_wakeup() {
            s.xsk.wake_rx();
        }
        // Sends in place complete while nothing else is sent: their
        // chains go back to the guest from here too.
        if let (Some(z), Some(l)) = (s.tx.as_mut(), s.lend.as_ref())
            && z.inflight() != 0
            && let Some(keep) = l.lender.tx_keep(l.pair)
        {
            let mut st = s.xsk.tx.lock();
            reap(&s.xsk, &mut st, z, keep, &q.tx_counters);
            q.tx_counters.inflight.store(z.inflight() as u64, Relaxed);
        }
        n
    }
}

/// One burst over a guest socket: frames in guest buffers become packets
/// over them, frames in own frames are copied; then the fill ring is
/// topped up with the guest's next buffers (own frames when it has none).
#[inline]
#[allow(clippy::too_many_arguments)]
fn receive_lent(
    c: &ZcCounters,
    xsk: &Xsk,
    r: &mut RxRings,
    l: &mut LendRx,
    own_free: &mut Vec<u64>,
    batch: &mut Batch,
    pool: &mut PoolCache,
) -> usize {
    let room = batch.remaining_capacity().min(BATCH) as u32;
    let n = r.rx.available(room);
    let own_off = xsk.umem.frame_addr(0);
    let lead = crate::umem::XDP_PACKET_HEADROOM as u64 + l.placement.headroom as u64;
    let mut got = 0;
    let mut copied = 0u64;
    let mut bad = 0u64;
    // Buffers to give back empty (bad descriptors): at most one burst.
    let mut back = [0u16; BATCH];
    let mut nback = 0;
    if n > 0 {
        xsk.umem.prefetch(Umem::data_addr(r.rx.read(0).addr));
    }
    for i in 0..n {
        let d = r.rx.read(i);
        if i + 1 < n {
            // The next frame, written by the kernel likely on another
            // core: copied out next, or parsed by the flow lookup.
            xsk.umem.prefetch(Umem::data_addr(r.rx.read(i + 1).addr));
        }
        let fill = Umem::fill_of(d.addr);
        if fill >= own_off {
            // An own frame: copy, as the copy path does.
            l.own_posted = l.own_posted.saturating_sub(1);
            if let Some(mut p) = pool.alloc() {
                let len = d.len as usize;
                let room = p.room_mut();
                if len <= room.len()
                    && xsk
                        .umem
                        .read_into(Umem::data_addr(d.addr), &mut room[..len])
                {
                    let _ = p.set_len(len);
                    batch.push(p);
                    got += 1;
                    copied += 1;
                } else {
                    bad += 1;
                    pool.free(p);
                }
            }
            own_free.push(Umem::chunk_of(fill));
            continue;
        }
        // A guest buffer: nearly always the oldest posted one.
        let pos = match l.posted.front() {
            Some(&(f, _)) if f == fill => Some(0),
            _ => l.posted.iter().position(|&(f, _)| f == fill),
        };
        let Some(pos) = pos else {
            bad += 1;
            continue;
        };
        let (_, lent) = l.posted.remove(pos).expect("found above");
        let len = d.len as usize;
        let fits = Umem::data_addr(d.addr) == fill + lead
            && l.hdr_len + len <= lent.len as usize
            && len <= l.placement.frame_room as usize;
        let host = l
            .mem
            .translate(lent.gpa, lent.len as usize)
            .and_then(NonNull::new);
        match host {
            Some(h) if fits => {
                // SAFETY: `h` translates the lent buffer in the lease's
                // memory, which `l.mem` keeps mapped until a revoke has
                // waited for this burst's packets; the buffer is lent, so
                // no other packet uses it; header + frame fit it (checked).
                let p = unsafe {
                    l.lender
                        .packet(l.owner, l.pair, l.tag, &lent, h, l.hdr_len, len)
                };
                batch.push(p);
                got += 1;
            }
            _ => {
                bad += 1;
                if nback < BATCH {
                    back[nback] = lent.head;
                    nback += 1;
                }
            }
        }
    }
    r.rx.release(n);
    add(&c.zero_copy, (got - copied as usize) as u64);
    if copied != 0 {
        add(&c.fallback[Fallback::NoGuestBuffer as usize], copied);
    }
    if bad != 0 {
        add(&c.bad_descs, bad);
    }
    refill(c, xsk, r, l, own_free, &back[..nback]);
    got
}

/// Tops the fill ring up: the guest's next buffers first, own frames when
/// the guest has too few posted.
#[inline]
fn refill(
    c: &ZcCounters,
    xsk: &Xsk,
    r: &mut RxRings,
    l: &mut LendRx,
    own_free: &mut Vec<u64>,
    back: &[u16],
) {
    let cap = l.posted.capacity();
    // What the kernel still has to fill: posted and not received back,
    // minus frames already waiting on the rx ring (the kernel publishes
    // its fill-ring consumer index lazily, so the fill ring's own count
    // would overstate it).
    let backlog = r.rx.available(u32::MAX);
    let depth = (l.posted.len() as u32 + l.own_posted).saturating_sub(backlog);
    let room = r.fill.free(LEND_BURST as u32).min(LEND_BURST as u32) as usize;
    let want = room
        .min(cap - l.posted.len())
        .min(l.fill_target.saturating_sub(depth) as usize);
    // Lend in batches: lending reads the guest's avail ring, lines the
    // VNF's core writes, and takes its ring's lock — once per burst of a
    // few frames that cost more than the copy it saves (bench/README.md).
    let batch_min = (l.fill_target as usize / 4).clamp(1, LEND_BURST / 2);
    if back.is_empty() && want < batch_min && depth >= LOW_WATER {
        return;
    }
    let mut k = 0u32;
    let mut stop = None;
    let area = xsk.umem.guest().map(|(a, _)| a);
    let placement = l.placement;
    let LendRx {
        lender,
        pair,
        tag,
        posted,
        fill_target,
        ended,
        ..
    } = l;
    let fill = &mut r.fill;
    let done = !*ended
        && lender
            .with_ring(*pair, *tag, |dq| {
                for &h in back {
                    dq.return_lent(h);
                }
                if !back.is_empty() {
                    dq.publish();
                }
                // At most half the guest's ring is lent: the other half
                // stays for frames other ports send this VNF (copied in),
                // however small its ring.
                let half_ring = dq.size() as u32 / 2;
                *fill_target = FILL_TARGET.min(half_ring).max(1);
                let half = half_ring.saturating_sub(dq.lent_outstanding());
                let pending = (dq.lend_pending() as u32).min(want as u32).min(half);
                let Some(area) = area else {
                    return;
                };
                while k < pending {
                    let one = match dq.lend_peek(0) {
                        Ok(x) => x,
                        Err(e) => {
                            stop = Some(Fallback::of_not_lendable(e));
                            break;
                        }
                    };
                    match placement.fill_addr(area, one.gpa, one.len) {
                        Ok(f) => {
                            dq.lend_take(std::slice::from_ref(&one));
                            fill.write(k, f);
                            posted.push_back((f, one));
                            k += 1;
                        }
                        Err(u) => {
                            stop = Some(Fallback::of_unfit(u));
                            break;
                        }
                    }
                }
            })
            .is_some();
    if !done {
        l.ended = true;
    }
    r.fill.submit(k);
    if k != 0 {
        add(&c.lent, k as u64);
    }
    if let Some(f) = stop {
        add(&c.fallback[f as usize], 1);
    }
    // The kernel's reserve: own frames when the guest has too few posted.
    let depth = depth + k;
    if depth < LOW_WATER {
        let n = (2 * LOW_WATER - depth)
            .min(own_free.len() as u32)
            .min(r.fill.free(2 * LOW_WATER));
        for i in 0..n {
            let f = own_free.pop().expect("counted");
            r.fill.write(i, f);
        }
        r.fill.submit(n);
        l.own_posted += n;
    }
}

/// The tx queue of a zero-copy queue: the ordinary copy path over
/// whichever socket the queue has (none while switching: nothing sent).
pub struct ZcTxq {
    q: Arc<ZcQueue>,
}

impl ZcTxq {
    pub(crate) fn new(q: Arc<ZcQueue>) -> ZcTxq {
        ZcTxq { q }
    }
}

impl TxQueue for ZcTxq {
    #[inline]
    fn tx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        let q = &*self.q;
        let mut g = q.slot.lock();
        let Some(s) = g.as_mut() else {
            return 0;
        };
        let ZcSocket { xsk, lend, tx, .. } = s;
        match (tx.as_mut(), lend.as_ref()) {
            // A socket that sent in place reaps its own completions (they
            // name guest memory), even after its lease ended.
            (Some(z), Some(l)) => match l.lender.tx_keep(l.pair) {
                Some(keep) => {
                    let src = Source {
                        mem: &l.mem,
                        keep,
                        take: !l.ended,
                    };
                    transmit_in_place(xsk, q.max_frame, z, &src, &q.tx_counters, batch, pool)
                }
                None => 0,
            },
            _ => crate::tx::transmit(xsk, q.max_frame, batch, pool),
        }
    }

    /// Split packets: sent with their tails in place, or copied here.
    fn takes_split(&self) -> bool {
        true
    }

    fn max_frame(&self) -> usize {
        self.q.max_frame
    }
}

/// The zero-copy facts of `queues` for `show ports`.
pub(crate) fn gauges<'a>(g: &mut nfv_ports::PortGauges, queues: impl Iterator<Item = &'a ZcQueue>) {
    let qs: Vec<&ZcQueue> = queues.collect();
    if qs.is_empty() {
        return;
    }
    let sum = |f: &dyn Fn(&ZcCounters) -> &AtomicU64| -> u64 {
        qs.iter().map(|q| f(&q.counters).load(Relaxed)).sum()
    };
    let modes: Vec<String> = qs.iter().map(|q| q.mode_text()).collect();
    g.push("zero_copy_target", qs[0].target_name());
    if matches!(qs[0].target, Target::Auto { .. }) {
        g.push("zero_copy", "auto".to_string());
    }
    g.push("rx_mode", modes.join("; "));
    g.push(
        nfv_ports::PortGauges::ZERO_COPY_PACKETS,
        sum(&|c| &c.zero_copy),
    );
    g.push("zc_lent", sum(&|c| &c.lent));
    for f in Fallback::ALL {
        g.push(
            ZC_FALLBACK_KEYS[f as usize],
            sum(&|c| &c.fallback[f as usize]),
        );
    }
    g.push("zc_bad_descs", sum(&|c| &c.bad_descs));
    g.push("zc_switches", sum(&|c| &c.switches));
    g.push("zc_revokes", sum(&|c| &c.revokes));
    let tx_sum = |f: &dyn Fn(&TxInPlaceCounters) -> &AtomicU64| -> u64 {
        qs.iter().map(|q| f(&q.tx_counters).load(Relaxed)).sum()
    };
    g.push(
        nfv_ports::PortGauges::SENT_IN_PLACE_PACKETS,
        tx_sum(&|c| &c.sent_in_place),
    );
    g.push("zc_tx_inflight", tx_sum(&|c| &c.inflight));
    g.push("zc_tx_fallback_cap", tx_sum(&|c| &c.cap_reached));
    g.push("zc_tx_fallback_not_lender", tx_sum(&|c| &c.not_lender));
    g.push("zc_tx_stray_completions", tx_sum(&|c| &c.stray_completions));
}

/// Gauge keys must be `'static`: one per [`Fallback`].
const ZC_FALLBACK_KEYS: [&str; 6] = [
    "zc_fallback_no_guest_buffer",
    "zc_fallback_buffer_shape",
    "zc_fallback_short_buffer",
    "zc_fallback_outside_umem",
    "zc_fallback_bad_chain",
    "zc_fallback_page_cross",
];

#[cfg(test)]
mod tests {
    use super::*;

    /// (ms since the first tick, frames received so far, their bytes so
    /// far, the copy decision after this tick: the window's average while
    /// copying)
    type Step = (u64, u64, u64, Option<u32>);

    const CASES: &[(&str, u32, &[Step])] = &[
        (
            "small frames make the queue copy; big ones bring it back",
            224,
            &[
                (0, 0, 0, None),
                (500, 5_000, 300_000, None),
                (1_000, 10_000, 600_000, Some(60)),
                (2_000, 20_000, 15_600_000, None),
            ],
        ),
        (
            "between the threshold and the hysteresis the mode stays",
            224,
            &[
                (0, 0, 0, None),
                (1_000, 2_000, 400_000, Some(200)),
                (2_000, 4_000, 920_000, Some(260)),
                (3_000, 6_000, 1_500_000, None),
                (4_000, 8_000, 1_960_000, None),
            ],
        ),
        (
            "a quiet window decides nothing",
            224,
            &[
                (0, 0, 0, None),
                (1_000, 2_000, 128_000, Some(64)),
                (2_000, 2_500, 2_500_000, Some(64)),
            ],
        ),
        (
            "0 always lends",
            0,
            &[(0, 0, 0, None), (1_000, 10_000, 640_000, None)],
        ),
    ];

    #[test]
    fn size_policy_follows_the_average_frame_with_hysteresis() {
        for &(name, min_frame, steps) in CASES {
            let mut p = SizePolicy::new(min_frame);
            let t0 = Instant::now();
            for (i, &(ms, frames, bytes, want)) in steps.iter().enumerate() {
                let now = t0 + Duration::from_millis(ms);
                assert_eq!(p.tick(now, frames, bytes), want, "{name}, step {i}");
            }
        }
    }
}
