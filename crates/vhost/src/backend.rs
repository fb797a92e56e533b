//! The vhost-user protocol state of one connection: features, memory
//! table and vring parameters, and when a vring runs. Every change ends in
//! [`Backend::publish`], which hands the PMDs a new snapshot (see
//! [`crate::shared`]).
//!
//! A vring runs when the memory table, its size and addresses are known,
//! it has been kicked (SET_VRING_KICK) and — when PROTOCOL_FEATURES was
//! negotiated — enabled by SET_VRING_ENABLE; GET_VRING_BASE stops it.
//!
//! Errors ([`Refused`]): a refused feature set ends the connection
//! (counted as a negotiation error); a bad memory table or vring parameter
//! is answered with a NACK when the frontend asked for a reply, counted and
//! logged, and leaves the affected rings stopped.

use std::fs::File;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::Ordering::*;
use std::time::{Duration, Instant};

use nfv_virtio::GuestMemory;
use nfv_virtio::dirty_log::DirtyLog;
use nfv_virtio::layout::{
    VHOST_F_LOG_ALL, VHOST_USER_F_PROTOCOL_FEATURES, avail_ring_bytes, desc_table_bytes,
    used_ring_bytes,
};
use vhost::vhost_user::message::VhostUserMemoryRegion;

use crate::features;
use crate::memtable::{self, MapRefused};
use crate::message::Region;
use crate::shared::{RingOwner, RingSetup, Shared, Snapshot, Status};

/// How long `GET_VRING_BASE` waits for the PMD owning a guest TX
/// virtqueue to let go of it.
const ACK_TIMEOUT: Duration = Duration::from_secs(1);

/// Largest virtqueue (virtio §2.7).
const MAX_QUEUE_SIZE: u32 = 32768;

#[derive(Debug, Default)]
struct Vring {
    /// 0 = not set (or refused).
    num: u16,
    /// desc, avail, used (frontend addresses).
    addr: Option<[u64; 3]>,
    base: u16,
    base_epoch: u64,
    kicked: bool,
    enabled: bool,
    call: Option<Arc<OwnedFd>>,
    /// Bumped on every change; 0 is never used.
    id: u64,
    /// The `id` whose setup failed validation (reported once).
    failed_id: u64,
}

pub(crate) struct Backend {
    shared: Arc<Shared>,
    acked: u64,
    protocol: u64,
    mem: Option<Arc<GuestMemory>>,
    /// The dirty log from SET_LOG_BASE, used while VHOST_F_LOG_ALL is
    /// acked (a live migration).
    log: Option<Arc<DirtyLog>>,
    /// Why the last SET_LOG_BASE gave no usable log (rings that must log
    /// stay stopped; see `setup`).
    log_refused: Option<String>,
    vrings: Vec<Vring>,
    next_id: u64,
}

impl Backend {
    pub fn new(shared: Arc<Shared>) -> Backend {
        let mut b = Backend {
            acked: 0,
            protocol: 0,
            mem: None,
            log: None,
            log_refused: None,
            vrings: Vec::new(),
            next_id: 1,
            shared,
        };
        b.reset();
        b
    }

    fn next(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn name(&self) -> &str {
        &self.shared.name
    }

    /// Forgets everything about the frontend (new connection, disconnect,
    /// RESET_OWNER) and stops all rings.
    pub fn reset(&mut self) {
        self.acked = 0;
        self.protocol = 0;
        self.mem = None;
        self.shared.status.guest_memory.store(0, Relaxed);
        self.log = None;
        self.log_refused = None;
        self.shared.status.log_bytes.store(0, Relaxed);
        let n = 2 * self.shared.cfg.queues;
        self.vrings = (0..n).map(|_| Vring::default()).collect();
        for i in 0..n {
            self.vrings[i].base_epoch = self.next();
            self.vrings[i].id = self.next();
        }
        let s = &self.shared.status;
        s.features.store(0, Relaxed);
        s.protocol_features.store(0, Relaxed);
        self.publish();
    }

    fn touch_all(&mut self) {
        for i in 0..self.vrings.len() {
            self.vrings[i].id = self.next();
        }
    }

    fn vring_index(&self, index: u32, what: &str) -> Answer<usize> {
        let i = index as usize;
        if i < self.vrings.len() {
            Ok(i)
        } else {
            Err(self.refuse(format!(
                "{what}: vring {index} does not exist (the port has {} queue pairs)",
                self.shared.cfg.queues
            )))
        }
    }

    /// Counts and logs a refused request; the connection stays.
    fn refuse(&self, msg: String) -> Refused {
        let s = &self.shared.status;
        Status::bump(&s.protocol_errors);
        self.shared.warn_limited("refused", msg.clone());
        Refused { msg, fatal: false }
    }

    /// A feature set we cannot serve ends the connection.
    fn negotiation_error(&mut self, e: features::NegotiationError) -> Refused {
        let s = &self.shared.status;
        Status::bump(&s.negotiation_errors);
        let msg = format!("feature negotiation failed: {e}; closing the connection");
        tracing::warn!("vhost-user port {}: {msg}", self.name());
        s.set_error(msg.clone());
        Refused { msg, fatal: true }
    }

    fn enabled(&self, v: &Vring) -> bool {
        if self.acked & VHOST_USER_F_PROTOCOL_FEATURES != 0 {
            v.enabled
        } else {
            true
        }
    }

    /// The setup of vring `i` if it should run, after checking its
    /// addresses against the memory table.
    fn setup(&mut self, i: usize) -> Option<Arc<RingSetup>> {
        let v = &self.vrings[i];
        let mem = self.mem.as_ref()?;
        let addr = v.addr?;
        if v.num == 0 || !v.kicked || !self.enabled(v) {
            return None;
        }
        // A migrating guest whose writes we cannot log gets none: its
        // rings stop rather than change pages the copy would miss.
        let logging = self.acked & VHOST_F_LOG_ALL != 0;
        if logging && self.log.is_none() {
            if v.failed_id != v.id {
                let id = v.id;
                self.vrings[i].failed_id = id;
                let why = self
                    .log_refused
                    .clone()
                    .unwrap_or_else(|| "no SET_LOG_BASE was received".into());
                let msg = format!(
                    "vring {i}: VHOST_F_LOG_ALL is acked but there is no dirty log ({why}); \
                     the ring stays stopped while the migration lasts"
                );
                tracing::warn!("vhost-user port {}: {msg}", self.name());
                self.shared.status.set_error(msg);
            }
            return None;
        }
        let n = v.num;
        let parts = [
            ("descriptor table", addr[0], desc_table_bytes(n), 16),
            ("avail ring", addr[1], avail_ring_bytes(n), 2),
            ("used ring", addr[2], used_ring_bytes(n), 4),
        ];
        for (what, a, len, align) in parts {
            let bad = if a % align != 0 {
                Some("misaligned")
            } else if mem.translate_uva(a, len).is_none() {
                Some("not inside the memory table")
            } else {
                None
            };
            if let Some(why) = bad {
                if v.failed_id != v.id {
                    let id = v.id;
                    self.vrings[i].failed_id = id;
                    let s = &self.shared.status;
                    Status::bump(&s.ring_errors);
                    let msg = format!(
                        "vring {i}: {what} at {a:#x} ({len} bytes) is {why}; the ring stays stopped"
                    );
                    tracing::warn!("vhost-user port {}: {msg}", self.name());
                    s.set_error(msg);
                }
                return None;
            }
        }
        Some(Arc::new(RingSetup {
            id: v.id,
            base_epoch: v.base_epoch,
            base: v.base,
            size: n,
            desc: addr[0],
            avail: addr[1],
            used: addr[2],
            features: self.acked,
            mem: mem.clone(),
            call: v.call.clone(),
            dirty_log: if logging { self.log.clone() } else { None },
        }))
    }

    /// Hands the current state to the PMDs: guest RX virtqueues are
    /// rebuilt here (outside their locks, see `apply_tx`), guest TX
    /// virtqueues by their rx queue objects when they see the new
    /// generation.
    pub fn publish(&mut self) {
        let pairs = self.shared.cfg.queues;
        let generation = self.shared.generation.load(Relaxed) + 1;
        let mut rx = Vec::with_capacity(pairs);
        let mut tx_pairs = Vec::new();
        let mut both = 0;
        let before = self.shared.snapshot();
        for p in 0..pairs {
            let r = self.setup(2 * p + 1);
            let t = self.setup(2 * p);
            let id = |s: Option<&Arc<RingSetup>>| s.map_or(0, |s| s.id);
            if id(before.rx.get(p).and_then(|s| s.as_ref())) != id(r.as_ref()) {
                // A borrower sending this guest's frames in place lets go
                // before the ring's queue retires (see `lend.rs`).
                self.shared.lend.before_tx_change(p);
            }
            if t.is_some() {
                tx_pairs.push(p);
                if r.is_some() {
                    both += 1;
                }
            }
            self.apply_tx(p, t);
            rx.push(r);
        }
        self.shared.status.pairs_enabled.store(both, Relaxed);
        self.shared.publish(Snapshot {
            generation,
            rx,
            tx_pairs,
        });
    }

    /// Makes tx ring `p` run `setup` (or stop).
    ///
    /// The ring's state is taken out of its slot under the lock and put
    /// back under it; everything in between — giving lent and kept
    /// buffers back, retiring the old queue, building the new one — reads
    /// and writes guest memory and the dirty log and runs with no lock
    /// held (see the crate doc's invariant). Meanwhile the slot holds a
    /// stopped stand-in: PMDs send nothing into the ring and count it.
    fn apply_tx(&self, p: usize, setup: Option<Arc<RingSetup>>) {
        let ring = &self.shared.tx[p];
        let want = setup.as_ref().map_or(0, |s| s.id);
        if ring.lock_control().setup_id == want {
            return;
        }
        // A borrower of this ring's buffers lets go first, outside the
        // lock (see `lend.rs`): then nothing writes the lent buffers and
        // they can go back to the guest before the ring changes.
        let key = setup.as_deref().map(RingSetup::lease_key);
        let revoked = self.shared.lend.before_change(p, key.as_ref());
        let stand_in = RingOwner {
            rebuilding: true,
            ..RingOwner::default()
        };
        let mut st = std::mem::replace(&mut *ring.lock_control(), stand_in);
        if revoked && let Some(dq) = st.dq.as_mut() {
            self.shared.lend.drain_returns(p, dq);
            let n = dq.return_all_lent();
            if let Some(lp) = self.shared.lend.pairs.get(p) {
                lp.returned_total.fetch_add(n as u64, Relaxed);
            }
        }
        let keep_lent = !revoked;
        let retired = st.apply(
            setup.as_deref(),
            &self.shared,
            2 * p,
            &ring.errors,
            keep_lent,
        );
        if retired.is_some() {
            st.lease_key = key;
            // The new queue (if any) reports at its first tx burst.
            ring.rx_free.0.store(0, Relaxed);
        }
        *ring.lock_control() = st;
        // Unmapping (if this was the last user of an old table) happens
        // outside the lock.
        drop(retired);
    }

    /// GET_VRING_BASE: stops vring `i` and returns where it stopped.
    fn stop(&mut self, i: usize) -> u16 {
        self.vrings[i].kicked = false;
        self.vrings[i].id = self.next();
        self.publish();
        let generation = self.shared.generation.load(Relaxed);
        let p = i / 2;
        let v = &self.vrings[i];
        let pos = if i.is_multiple_of(2) {
            let st = self.shared.tx[p].lock_control();
            if st.base_epoch == v.base_epoch {
                st.position
            } else {
                v.base
            }
        } else {
            self.wait_rx_ack(p, generation, "release vring");
            let r = &self.shared.rx[p];
            if r.pos_epoch.load(Acquire) == v.base_epoch {
                r.position.load(Acquire) as u16
            } else {
                v.base
            }
        };
        let epoch = self.next();
        let v = &mut self.vrings[i];
        v.base = pos;
        v.base_epoch = epoch;
        self.shared.log.info("get_vring_base", || {
            format!("GET_VRING_BASE vring {i}: {pos}")
        });
        pos
    }

    /// Waits (at most [`ACK_TIMEOUT`]) until rx queue `p`'s PMD has moved
    /// to `generation` (or has no PMD), so its old device queue is gone.
    fn wait_rx_ack(&self, p: usize, generation: u64, what: &str) {
        let r = &self.shared.rx[p];
        let deadline = Instant::now() + ACK_TIMEOUT;
        while r.attached.load(Acquire) && r.acked_gen.load(Acquire) < generation {
            if Instant::now() > deadline {
                Status::bump(&self.shared.status.ack_timeouts);
                tracing::warn!(
                    "vhost-user port {}: rx queue {p} did not {what} within {:?}",
                    self.name(),
                    ACK_TIMEOUT
                );
                return;
            }
            std::thread::sleep(Duration::from_micros(20));
        }
    }

    /// After logging started, stopped or moved to a new log: every rx
    /// queue runs a device queue built with the new state before the
    /// frontend hears back, so no write made after it believes logging is
    /// on escapes the log. (Guest RX rings are rebuilt synchronously in
    /// `publish`.)
    fn wait_logging_applied(&self) {
        let generation = self.shared.generation.load(Relaxed);
        for p in 0..self.shared.cfg.queues {
            self.wait_rx_ack(p, generation, "start or stop logging");
        }
    }

    fn change(&mut self, i: usize, f: impl FnOnce(&mut Vring)) {
        let id = self.next();
        let v = &mut self.vrings[i];
        f(v);
        v.id = id;
        self.publish();
    }
}

/// A refused request. The dispatcher answers it with a NACK when the
/// frontend asked for a reply; `fatal` ends the connection (the frontend
/// waits for an answer we cannot give, or negotiated what we cannot serve).
#[derive(Debug)]
pub(crate) struct Refused {
    pub msg: String,
    pub fatal: bool,
}

pub(crate) type Answer<T> = std::result::Result<T, Refused>;

/// The requests, one method each (called by `crate::dispatch`).
impl Backend {
    /// What is offered now: IN_ORDER only while no port borrows this
    /// guest's receive buffers.
    pub fn get_features(&self) -> u64 {
        let lent = self.shared.lend.claimed.load(Acquire);
        features::offered(
            self.shared.cfg.mrg_rxbuf,
            !lent,
            self.shared.cfg.packed_ring,
            self.shared.cfg.offloads,
        ) | features::mtu_bit(self.shared.cfg.mtu)
    }

    /// SET_FEATURES may come more than once (a guest driver that reloads
    /// renegotiates) and after SET_VRING_ENABLE (QEMU enables rings when its
    /// netdev starts, before the guest driver acks anything): rings are
    /// rebuilt with the new bits.
    pub fn set_features(&mut self, features: u64) -> Answer<()> {
        if let Err(e) = features::check_ack(
            features,
            // IN_ORDER stays acceptable: a borrower may have claimed the
            // port between GET_FEATURES and now (its rings then do not lend).
            features::offered(
                self.shared.cfg.mrg_rxbuf,
                true,
                self.shared.cfg.packed_ring,
                self.shared.cfg.offloads,
            ) | features::mtu_bit(self.shared.cfg.mtu),
        ) {
            return Err(self.negotiation_error(e));
        }
        let logging_changed = (self.acked ^ features) & VHOST_F_LOG_ALL != 0;
        self.acked = features;
        self.shared.status.features.store(features, Relaxed);
        tracing::info!(
            "vhost-user port {}: features {}",
            self.name(),
            features::describe(features)
        );
        self.touch_all();
        self.publish();
        if logging_changed {
            self.wait_logging_applied();
        }
        Ok(())
    }

    pub fn set_mem_table(&mut self, regions: &[Region], fds: Vec<OwnedFd>) -> Answer<()> {
        let ctx: Vec<VhostUserMemoryRegion> = regions
            .iter()
            .map(|r| {
                VhostUserMemoryRegion::new(
                    r.guest_phys_addr,
                    r.memory_size,
                    r.user_addr,
                    r.mmap_offset,
                )
            })
            .collect();
        let files = fds.into_iter().map(File::from).collect();
        let cap = self.shared.max_guest_memory.load(Relaxed);
        let checked = memtable::check(&ctx, files);
        if let Err(memtable::MemTableError::File { .. }) = &checked {
            Status::bump(&self.shared.status.unmappable_fd);
        }
        let mapped = checked
            .map_err(|e| MapRefused::Other(e.to_string()))
            .and_then(|specs| memtable::map(specs, cap));
        if let Err(MapRefused::Budget(e)) = &mapped {
            // Nothing changes: the old table and its rings stay.
            let s = &self.shared.status;
            Status::bump(&s.mem_over_budget);
            Status::bump(&s.mem_table_errors);
            return Err(self.refuse(format!(
                "memory table refused: {e}; the port keeps its previous table"
            )));
        }
        self.touch_all();
        match mapped {
            Ok(mem) => {
                tracing::info!(
                    "vhost-user port {}: memory table of {} regions, {} MiB ({} MiB mapped)",
                    self.name(),
                    regions.len(),
                    regions.iter().map(|r| r.memory_size).sum::<u64>() >> 20,
                    mem.charged() >> 20
                );
                self.shared
                    .status
                    .guest_memory
                    .store(mem.charged(), Relaxed);
                self.mem = Some(Arc::new(mem));
                self.publish();
                Ok(())
            }
            Err(e) => {
                let e = match e {
                    MapRefused::Budget(e) | MapRefused::Other(e) => e,
                };
                self.shared.status.guest_memory.store(0, Relaxed);
                self.mem = None;
                self.publish();
                Status::bump(&self.shared.status.mem_table_errors);
                Err(self.refuse(format!("memory table refused: {e}; all rings stay stopped")))
            }
        }
    }

    pub fn set_vring_num(&mut self, index: u32, num: u32) -> Answer<()> {
        let i = self.vring_index(index, "SET_VRING_NUM")?;
        // Packed rings may have any size; split rings a power of two.
        let packed = self.acked & nfv_virtio::layout::VIRTIO_F_RING_PACKED != 0;
        let ok = (1..=MAX_QUEUE_SIZE).contains(&num) && (packed || num.is_power_of_two());
        self.change(i, |v| v.num = if ok { num as u16 } else { 0 });
        if ok {
            Ok(())
        } else {
            Err(self.refuse(format!(
                "vring {i}: size {num} is not a power of two in 1..={MAX_QUEUE_SIZE}"
            )))
        }
    }

    pub fn set_vring_addr(&mut self, index: u32, desc: u64, used: u64, avail: u64) -> Answer<()> {
        let i = self.vring_index(index, "SET_VRING_ADDR")?;
        self.change(i, |v| v.addr = Some([desc, avail, used]));
        Ok(())
    }

    /// On a packed ring `base` carries the avail wrap counter in bit 15
    /// (`nfv_virtio::packed::encode_base`); the device queue decodes it,
    /// and GET_VRING_BASE answers in the same form.
    pub fn set_vring_base(&mut self, index: u32, base: u32) -> Answer<()> {
        let i = self.vring_index(index, "SET_VRING_BASE")?;
        let epoch = self.next();
        self.change(i, |v| {
            v.base = base as u16;
            v.base_epoch = epoch;
        });
        Ok(())
    }

    /// GET_VRING_BASE: the frontend waits for the reply, so a bad index
    /// ends the connection.
    pub fn get_vring_base(&mut self, index: u32) -> Answer<u32> {
        let i = self.vring_index(index, "GET_VRING_BASE").map_err(|mut r| {
            r.fatal = true;
            r
        })?;
        Ok(self.stop(i) as u32)
    }

    /// SET_VRING_KICK: PMDs poll, so the kick fd is only a sign that the
    /// ring may start; it is closed at once.
    pub fn set_vring_kick(&mut self, index: u32) -> Answer<()> {
        let i = self.vring_index(index, "SET_VRING_KICK")?;
        self.change(i, |v| v.kicked = true);
        Ok(())
    }

    pub fn set_vring_call(&mut self, index: u32, fd: Option<OwnedFd>) -> Answer<()> {
        let i = self.vring_index(index, "SET_VRING_CALL")?;
        self.change(i, |v| v.call = fd.map(Arc::new));
        Ok(())
    }

    /// SET_VRING_ERR: we never signal errors that way; the fd is closed.
    pub fn set_vring_err(&mut self, index: u32) -> Answer<()> {
        self.vring_index(index, "SET_VRING_ERR")?;
        Ok(())
    }

    pub fn get_protocol_features(&self) -> u64 {
        features::protocol_offered().bits()
    }

    pub fn set_protocol_features(&mut self, features: u64) -> Answer<()> {
        if let Err(e) = features::check_protocol_ack(features) {
            return Err(self.negotiation_error(e));
        }
        self.protocol = features;
        self.shared
            .status
            .protocol_features
            .store(features, Relaxed);
        Ok(())
    }

    /// SET_LOG_BASE with its fd (LOG_SHMFD): maps the dirty log. Queues
    /// start logging into it once VHOST_F_LOG_ALL is acked (QEMU sends
    /// this first, then the features), and move to a new log when the
    /// frontend resizes it (another SET_LOG_BASE). A log that cannot be
    /// mapped is counted and logged; rings that must log then stop.
    pub fn set_log_base(&mut self, size: u64, offset: u64, fd: OwnedFd) -> Answer<()> {
        let file = File::from(fd);
        let res = DirtyLog::map(&file, size, offset);
        self.touch_all();
        let out = match res {
            Ok(log) => {
                tracing::info!(
                    "vhost-user port {}: dirty log of {} KiB (guest memory up to {} MiB)",
                    self.name(),
                    size >> 10,
                    (size * 8 * nfv_virtio::dirty_log::LOG_PAGE) >> 20
                );
                self.shared.status.log_bytes.store(size, Relaxed);
                let drops = self.shared.status.log_marks_dropped.clone();
                self.log = Some(Arc::new(log.counting_drops_in(drops)));
                self.log_refused = None;
                Ok(())
            }
            Err(e) => {
                self.log = None;
                self.shared.status.log_bytes.store(0, Relaxed);
                let msg = format!("SET_LOG_BASE refused: {e}");
                self.log_refused = Some(msg.clone());
                Status::bump(&self.shared.status.log_errors);
                if matches!(e, nfv_virtio::dirty_log::LogError::Unmappable(_)) {
                    Status::bump(&self.shared.status.unmappable_fd);
                }
                Err(self.refuse(msg))
            }
        };
        self.publish();
        if self.acked & VHOST_F_LOG_ALL != 0 {
            self.wait_logging_applied();
        }
        out
    }

    /// SET_LOG_BASE without an fd: a kernel-style log address we cannot
    /// map (the frontend did not negotiate LOG_SHMFD).
    pub fn log_base_without_fd(&mut self) -> Refused {
        Status::bump(&self.shared.status.log_errors);
        let msg = "SET_LOG_BASE without a file descriptor (VHOST_USER_PROTOCOL_F_LOG_SHMFD \
                   not negotiated): no dirty log"
            .to_string();
        self.log_refused = Some(msg.clone());
        self.refuse(msg)
    }

    /// SEND_RARP: the guest has just migrated in; queue pair 0's rx queue
    /// announces its MAC as if the guest had sent the announcement
    /// (`crate::rarp`), so MAC learning here and in the network beyond
    /// follows the move.
    pub fn send_rarp(&mut self, mac: [u8; 6]) -> Answer<()> {
        Status::bump(&self.shared.status.rarp_requests);
        self.shared.rarp.store(crate::rarp::encode(mac), Release);
        tracing::info!(
            "vhost-user port {}: SEND_RARP for {}",
            self.name(),
            crate::rarp::mac_string(mac)
        );
        // A new generation makes the rx queues resync, where the
        // announcement is picked up (no per-burst check).
        self.publish();
        Ok(())
    }

    /// NET_SET_MTU: the MTU the frontend gave its guest (QEMU `host_mtu`,
    /// sent once the guest acked VIRTIO_NET_F_MTU). Accepted from 68 up to
    /// the port's `mtu` (or, without one, the largest frame it sends less
    /// 18); refused and counted otherwise (`mtu_refused`): the guest would
    /// send frames the port's limits drop.
    pub fn net_set_mtu(&mut self, mtu: u64) -> Answer<()> {
        let cfg = &self.shared.cfg;
        let most = cfg
            .mtu
            .map_or(crate::max_frame(cfg) - crate::MTU_OVERHEAD, usize::from);
        if !(68..=most as u64).contains(&mtu) {
            Status::bump(&self.shared.status.mtu_refused);
            return Err(self.refuse(format!(
                "NET_SET_MTU {mtu} refused: the port takes 68..={most} (its `mtu`)"
            )));
        }
        self.shared.status.guest_mtu.store(mtu, Relaxed);
        tracing::info!("vhost-user port {}: guest MTU {mtu}", self.name());
        Ok(())
    }

    pub fn get_queue_num(&self) -> u64 {
        self.shared.cfg.queues as u64
    }

    /// SET_VRING_ENABLE is accepted in any state. The flag is kept per
    /// vring and only matters once PROTOCOL_FEATURES is acked (see
    /// `enabled`): QEMU sends it when its netdev starts, before the guest
    /// driver has acked any feature, and again when the driver starts.
    pub fn set_vring_enable(&mut self, index: u32, enable: bool) -> Answer<()> {
        let i = self.vring_index(index, "SET_VRING_ENABLE")?;
        self.change(i, |v| v.enabled = enable);
        Ok(())
    }
}
