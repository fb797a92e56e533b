//! Kernel port → VNF with no switch copy (IOVTee's Rx-queue mapping): an
//! AF_XDP queue whose traffic goes to one vhost-user VNF (`zero_copy =
//! "vnf1"`) receives straight into that guest's receive buffers.
//!
//! How: the queue's socket is rebuilt over a UMEM that *is* the guest's
//! memory (`guest_umem.rs`) plus frames of our own. Each burst the queue
//! borrows the guest's posted receive buffers (`nfv_virtio::lend`) and puts
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
//!   exists (found by name in the node's `Lenders`, which the port was
//!   opened with: looked up again every tick while the queue has no
//!   lender, so a VNF port added later or removed and added again is
//!   found), is claimed (`Lender::claim`; one borrower per queue pair)
//!   and its guest receive ring runs and may lend (no IN_ORDER);
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

use crate::guest_umem::Placement;
use crate::rx::receive_copies;
use crate::shared::add;
pub use crate::shared::{Fallback, ZcCounters};
use crate::umem::Umem;
use crate::xsk::{Bind, Rings, RxRings, TxCounters, Unbound, Xsk};
use crate::zero_copy_choice::SizePolicy;
pub(crate) use crate::zero_copy_choice::Target;
use crate::zero_copy_rx::{FILL_TARGET, LendRx, receive_lent};
use crate::zero_copy_tx::{Source, TxInPlace, TxInPlaceCounters, reap, transmit_in_place};
use nfv_mem::SpinLock;
use nfv_mem::{Batch, PoolCache};
use nfv_ports::{RxQueue, TxQueue};
use nfv_virtio::lend::{Borrower, Lease, Lender, Lenders};
use std::collections::VecDeque;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a revoke waits for the PMD's burst in flight.
const QUIESCE_TIMEOUT: Duration = Duration::from_secs(1);

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
    /// The socket counters (kicks, ...) of closed sockets, so that the
    /// port's counters do not fall back when the socket changes.
    retired: TxCounters,
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
    /// The node's lending ports, where `target` is looked up.
    lenders: Arc<Lenders>,
    lender: Mutex<Option<Lender>>,
    status: Mutex<Status>,
}

impl ZcQueue {
    /// A queue that starts on an ordinary copy socket `xsk`; `cfg` gives
    /// its `send_in_place` and `zero_copy_min_frame`; `target` is looked
    /// up in `lenders`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        port: &str,
        target: Target,
        lenders: Arc<Lenders>,
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
            retired: TxCounters::default(),
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
            lenders,
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

    /// A socket counter summed over this queue's sockets so far.
    pub fn tx_counter(&self, f: impl Fn(&TxCounters) -> &AtomicU64) -> u64 {
        let g = self.slot.lock();
        let now = g
            .as_ref()
            .map_or(0, |s| f(&s.xsk.tx_counters).load(Relaxed));
        f(&self.retired).load(Relaxed) + now
    }

    /// Descriptors on the current socket's tx ring that the kernel has
    /// not taken yet.
    pub fn tx_outstanding(&self) -> u64 {
        let g = self.slot.lock();
        g.as_ref()
            .map_or(0, |s| s.xsk.tx.lock().tx.outstanding() as u64)
    }

    /// Whether the current socket is over guest memory.
    pub fn is_zero_copy(&self) -> bool {
        self.slot.lock().as_ref().is_some_and(|s| s.lend.is_some())
    }

    /// Takes the socket out and waits until the PMD's burst in flight (and
    /// its packets) are done: the caller may then close it.
    fn take_quiet(&self) -> Option<ZcSocket> {
        let s = {
            let mut g = self.slot.lock();
            let s = g.take();
            // Final: the PMD reaches the socket only under this lock.
            if let Some(s) = &s {
                s.xsk.tx_counters.add_into(&self.retired);
            }
            s
        };
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
        self.let_go_if_stale(&mut lender, want.as_deref());
        let Some(target) = want else {
            self.set_status(self.target.why_none());
            self.ensure_socket();
            return;
        };
        if lender.is_none() {
            self.claim(&mut lender, &target);
        }
        let (guest, lending) = {
            let g = self.slot.lock();
            let lend = g.as_ref().and_then(|s| s.lend.as_ref());
            (lend.is_some(), lend.is_some_and(|l| !l.ended))
        };
        if self.copy_small_frames(guest) {
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
            self.lease_and_switch(l, &target);
        } else if lender.is_none() {
            self.set_status(self.target.waiting(&target));
        }
        self.ensure_socket();
    }

    /// Tick, step 1: lets go of `lender` when its VNF port was removed or
    /// is no longer the one `want` names.
    fn let_go_if_stale(&self, lender: &mut Option<Lender>, want: Option<&str>) {
        if let Some(l) = lender.as_ref()
            && (l.is_closed() || want != Some(l.name()))
        {
            // The VNF port was removed, or the flow table now sends this
            // port's frames elsewhere: let go, start over.
            self.close_quiet();
            l.unclaim(self.pair_of(l));
            *lender = None;
            *self.claimed.lock().unwrap_or_else(|p| p.into_inner()) = None;
        }
    }

    /// Tick, step 2: claims the queue pair of `target`, if the node has
    /// that port, into `lender`.
    fn claim(self: &Arc<Self>, lender: &mut Option<Lender>, target: &str) {
        if let Some(l) = self.lenders.find(target) {
            let me: Arc<dyn Borrower> = self.clone();
            match l.claim(self.pair_of(&l), me) {
                Ok(()) => {
                    *lender = Some(l);
                    *self.claimed.lock().unwrap_or_else(|p| p.into_inner()) =
                        Some(target.to_string());
                }
                Err(e) => self.set_status(format!(
                    "copy: cannot borrow from vhost-user port {target}: {e}"
                )),
            }
        }
    }

    /// Tick, step 3: while frames are small on average, a copy socket
    /// (a `guest` one is closed, its buffers given back). Returns whether
    /// they are.
    fn copy_small_frames(&self, guest: bool) -> bool {
        let small = {
            let mut p = self.size_policy.lock().unwrap_or_else(|p| p.into_inner());
            p.tick(
                Instant::now(),
                self.rx_frames.load(Relaxed),
                self.rx_bytes.load(Relaxed),
            )
        };
        let Some(avg) = small else {
            return false;
        };
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
        true
    }

    /// Tick, step 4: leases `l`'s ring and switches to a socket over its
    /// guest memory, unless that lease already failed to build one.
    fn lease_and_switch(&self, l: &Lender, target: &str) {
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
        // Descriptors the kernel left on the tx ring go out from here
        // too (see `tx.rs`).
        crate::tx::retry_tx(&s.xsk);
        n
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
