//! The vhost-user protocol state of one connection: features, memory
//! table and vring parameters, and when a vring runs. Every change ends in
//! [`Backend::publish`], which hands the PMDs a new snapshot (see
//! [`crate::shared`]).
//!
//! A vring runs when the memory table, its size and addresses are known,
//! it has been kicked (SET_VRING_KICK) and — when PROTOCOL_FEATURES was
//! negotiated — enabled by SET_VRING_ENABLE; GET_VRING_BASE stops it.
//!
//! Errors: a refused feature set ends the connection
//! ([`vhost::vhost_user::Error::FeatureMismatch`], counted as a negotiation
//! error); a bad memory table or vring parameter is answered with an error
//! (a NACK with REPLY_ACK), counted and logged, and leaves the affected
//! rings stopped ([`vhost::vhost_user::Error::ReqHandlerError`]).

use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::Ordering::*;
use std::time::{Duration, Instant};

use nfv_virtio::GuestMemory;
use nfv_virtio::layout::{
    VHOST_USER_F_PROTOCOL_FEATURES, avail_ring_bytes, desc_table_bytes, used_ring_bytes,
};
use vhost::VhostUserMemoryRegionBase;
use vhost::vhost_user::message::*;
use vhost::vhost_user::{
    Backend as BackendChannel, Error, GpuBackend, Result, VhostUserBackendReqHandlerMut,
};

use crate::features;
use crate::memtable;
use crate::shared::{RingSetup, Shared, Snapshot, Status};

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
    offered: u64,
    acked: u64,
    protocol: u64,
    mem: Option<Arc<GuestMemory>>,
    vrings: Vec<Vring>,
    next_id: u64,
    /// Set when the current request's failure must end the connection.
    fatal: Option<String>,
}

fn soft(msg: String) -> Error {
    Error::ReqHandlerError(io::Error::other(msg))
}

impl Backend {
    pub fn new(shared: Arc<Shared>) -> Backend {
        let mut b = Backend {
            offered: features::offered(shared.cfg.mrg_rxbuf),
            acked: 0,
            protocol: 0,
            mem: None,
            vrings: Vec::new(),
            next_id: 1,
            fatal: None,
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

    /// The error that ended the connection, if a handler decided so.
    pub fn take_fatal(&mut self) -> Option<String> {
        self.fatal.take()
    }

    /// Forgets everything about the frontend (new connection, disconnect,
    /// RESET_OWNER) and stops all rings.
    pub fn reset(&mut self) {
        self.acked = 0;
        self.protocol = 0;
        self.mem = None;
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

    fn vring_index(&self, index: u32, what: &str) -> Result<usize> {
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
    fn refuse(&self, msg: String) -> Error {
        let s = &self.shared.status;
        Status::bump(&s.protocol_errors);
        self.shared.warn_limited("refused", msg.clone());
        soft(msg)
    }

    fn negotiation_error(&mut self, e: features::NegotiationError) -> Error {
        let s = &self.shared.status;
        Status::bump(&s.negotiation_errors);
        let msg = format!("feature negotiation failed: {e}; closing the connection");
        tracing::warn!("vhost-user port {}: {msg}", self.name());
        s.set_error(msg.clone());
        self.fatal = Some(msg);
        Error::FeatureMismatch
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
        }))
    }

    /// Hands the current state to the PMDs: guest RX virtqueues are
    /// rebuilt here under their locks, guest TX virtqueues by their rx
    /// queue objects when they see the new generation.
    pub fn publish(&mut self) {
        let pairs = self.shared.cfg.queues;
        let generation = self.shared.generation.load(Relaxed) + 1;
        let mut rx = Vec::with_capacity(pairs);
        let mut tx_pairs = Vec::new();
        let mut both = 0;
        for p in 0..pairs {
            let r = self.setup(2 * p + 1);
            let t = self.setup(2 * p);
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
    fn apply_tx(&self, p: usize, setup: Option<Arc<RingSetup>>) {
        let ring = &self.shared.tx[p];
        let want = setup.as_ref().map_or(0, |s| s.id);
        let mut st = ring.lock();
        if st.setup_id == want {
            return;
        }
        let old = st.dq.take();
        // The new queue (if any) reports at its first tx burst.
        ring.rx_free.0.store(0, Relaxed);
        if let Some(dq) = &old {
            st.position = dq.last_avail_idx();
            crate::errors::mirror(&ring.errors, dq, &mut st.error_base, true);
        }
        st.setup_id = want;
        if let Some(s) = setup {
            let base = if st.base_epoch == s.base_epoch {
                st.position
            } else {
                s.base
            };
            st.base_epoch = s.base_epoch;
            st.position = base;
            match s.build(base) {
                Ok(dq) => {
                    st.error_seen = 0;
                    st.dq = Some(dq);
                }
                Err(e) => self.ring_setup_failed(2 * p, &e, &ring.errors),
            }
        }
        drop(st);
        // Unmapping (if this was the last user of an old table) happens
        // outside the lock.
        drop(old);
    }

    fn ring_setup_failed(&self, vring: usize, e: &str, m: &crate::shared::ErrorMirror) {
        Status::bump(&m.setup_failures);
        Status::bump(&self.shared.status.ring_errors);
        let msg = format!("vring {vring}: cannot start: {e}");
        self.shared.warn_limited("ring_setup", msg);
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
            let st = self.shared.tx[p].lock();
            if st.base_epoch == v.base_epoch {
                st.position
            } else {
                v.base
            }
        } else {
            let r = &self.shared.rx[p];
            let deadline = Instant::now() + ACK_TIMEOUT;
            while r.attached.load(Acquire) && r.acked_gen.load(Acquire) < generation {
                if Instant::now() > deadline {
                    Status::bump(&self.shared.status.ack_timeouts);
                    tracing::warn!(
                        "vhost-user port {}: rx queue {p} did not release vring {i} within {:?}",
                        self.name(),
                        ACK_TIMEOUT
                    );
                    break;
                }
                std::thread::sleep(Duration::from_micros(20));
            }
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
        pos
    }

    fn change(&mut self, i: usize, f: impl FnOnce(&mut Vring)) {
        let id = self.next();
        let v = &mut self.vrings[i];
        f(v);
        v.id = id;
        self.publish();
    }
}

fn unsupported<T>(what: &str) -> Result<T> {
    Err(soft(format!("{what} is not supported")))
}

impl VhostUserBackendReqHandlerMut for Backend {
    fn set_owner(&mut self) -> Result<()> {
        Ok(())
    }

    fn reset_owner(&mut self) -> Result<()> {
        self.reset();
        Ok(())
    }

    fn reset_device(&mut self) -> Result<()> {
        self.reset();
        Ok(())
    }

    fn get_features(&mut self) -> Result<u64> {
        Ok(self.offered)
    }

    fn set_features(&mut self, features: u64) -> Result<()> {
        if let Err(e) = features::check_ack(features, self.offered) {
            return Err(self.negotiation_error(e));
        }
        self.acked = features;
        self.shared.status.features.store(features, Relaxed);
        tracing::info!(
            "vhost-user port {}: features {}",
            self.name(),
            features::describe(features)
        );
        self.touch_all();
        self.publish();
        Ok(())
    }

    fn set_mem_table(
        &mut self,
        ctx: &[VhostUserMemoryRegion],
        files: Vec<File>,
        _postcopy_listening: Option<bool>,
    ) -> Result<Option<Vec<VhostUserMemoryRegionBase>>> {
        let mapped = memtable::check(ctx, files)
            .map_err(|e| e.to_string())
            .and_then(|specs| GuestMemory::map(specs).map_err(|e| e.to_string()));
        self.touch_all();
        match mapped {
            Ok(mem) => {
                tracing::info!(
                    "vhost-user port {}: memory table of {} regions, {} MiB",
                    self.name(),
                    ctx.len(),
                    ctx.iter().map(|r| r.memory_size).sum::<u64>() >> 20
                );
                self.mem = Some(Arc::new(mem));
                self.publish();
                Ok(None)
            }
            Err(e) => {
                self.mem = None;
                self.publish();
                Status::bump(&self.shared.status.mem_table_errors);
                Err(self.refuse(format!("memory table refused: {e}; all rings stay stopped")))
            }
        }
    }

    fn set_vring_num(&mut self, index: u32, num: u32) -> Result<()> {
        let i = self.vring_index(index, "SET_VRING_NUM")?;
        let ok = (1..=MAX_QUEUE_SIZE).contains(&num) && num.is_power_of_two();
        self.change(i, |v| v.num = if ok { num as u16 } else { 0 });
        if ok {
            Ok(())
        } else {
            Err(self.refuse(format!(
                "vring {i}: size {num} is not a power of two in 1..={MAX_QUEUE_SIZE}"
            )))
        }
    }

    fn set_vring_addr(
        &mut self,
        index: u32,
        _flags: VhostUserVringAddrFlags,
        descriptor: u64,
        used: u64,
        available: u64,
        _log: u64,
    ) -> Result<()> {
        let i = self.vring_index(index, "SET_VRING_ADDR")?;
        self.change(i, |v| v.addr = Some([descriptor, available, used]));
        Ok(())
    }

    fn set_vring_base(&mut self, index: u32, base: u32) -> Result<()> {
        let i = self.vring_index(index, "SET_VRING_BASE")?;
        let epoch = self.next();
        self.change(i, |v| {
            v.base = base as u16;
            v.base_epoch = epoch;
        });
        Ok(())
    }

    fn get_vring_base(&mut self, index: u32) -> Result<VhostUserVringState> {
        let i = match self.vring_index(index, "GET_VRING_BASE") {
            Ok(i) => i,
            Err(e) => {
                // The frontend waits for a reply we cannot give.
                self.fatal = Some(e.to_string());
                return Err(e);
            }
        };
        let pos = self.stop(i);
        Ok(VhostUserVringState::new(index, pos as u32))
    }

    fn set_vring_kick(&mut self, index: u8, _fd: Option<File>) -> Result<()> {
        // PMDs poll; the kick fd is not read.
        let i = self.vring_index(index as u32, "SET_VRING_KICK")?;
        self.change(i, |v| v.kicked = true);
        Ok(())
    }

    fn set_vring_call(&mut self, index: u8, fd: Option<File>) -> Result<()> {
        let i = self.vring_index(index as u32, "SET_VRING_CALL")?;
        self.change(i, |v| v.call = fd.map(|f| Arc::new(OwnedFd::from(f))));
        Ok(())
    }

    fn set_vring_err(&mut self, index: u8, _fd: Option<File>) -> Result<()> {
        self.vring_index(index as u32, "SET_VRING_ERR")?;
        Ok(())
    }

    fn get_protocol_features(&mut self) -> Result<VhostUserProtocolFeatures> {
        Ok(features::protocol_offered())
    }

    fn set_protocol_features(&mut self, features: u64) -> Result<()> {
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

    fn get_queue_num(&mut self) -> Result<u64> {
        Ok(self.shared.cfg.queues as u64)
    }

    fn set_vring_enable(&mut self, index: u32, enable: bool) -> Result<()> {
        let i = self.vring_index(index, "SET_VRING_ENABLE")?;
        self.change(i, |v| v.enabled = enable);
        Ok(())
    }

    fn get_config(&mut self, _: u32, _: u32, _: VhostUserConfigFlags) -> Result<Vec<u8>> {
        unsupported("GET_CONFIG")
    }

    fn set_config(&mut self, _: u32, _: &[u8], _: VhostUserConfigFlags) -> Result<()> {
        unsupported("SET_CONFIG")
    }

    fn set_backend_req_fd(&mut self, _backend: BackendChannel) {}

    fn set_gpu_socket(&mut self, _gpu_backend: GpuBackend) -> Result<()> {
        unsupported("GPU_SET_SOCKET")
    }

    fn get_shared_object(&mut self, _uuid: VhostUserSharedMsg) -> Result<File> {
        unsupported("GET_SHARED_OBJECT")
    }

    fn get_inflight_fd(&mut self, _: &VhostUserInflight) -> Result<(VhostUserInflight, File)> {
        unsupported("GET_INFLIGHT_FD")
    }

    fn set_inflight_fd(&mut self, _: &VhostUserInflight, _file: File) -> Result<()> {
        unsupported("SET_INFLIGHT_FD")
    }

    fn get_max_mem_slots(&mut self) -> Result<u64> {
        unsupported("GET_MAX_MEM_SLOTS")
    }

    fn add_mem_region(
        &mut self,
        _: &VhostUserSingleMemoryRegion,
        _fd: File,
        _postcopy_listening: Option<bool>,
    ) -> Result<Option<VhostUserMemoryRegionBase>> {
        unsupported("ADD_MEM_REG")
    }

    fn remove_mem_region(&mut self, _: &VhostUserSingleMemoryRegion) -> Result<()> {
        unsupported("REM_MEM_REG")
    }

    fn set_device_state_fd(
        &mut self,
        _: VhostTransferStateDirection,
        _: VhostTransferStatePhase,
        _fd: File,
    ) -> Result<Option<File>> {
        unsupported("SET_DEVICE_STATE_FD")
    }

    fn check_device_state(&mut self) -> Result<()> {
        unsupported("CHECK_DEVICE_STATE")
    }

    fn get_shmem_config(&mut self) -> Result<VhostUserShMemConfig> {
        unsupported("GET_SHMEM_CONFIG")
    }

    fn set_log_base(&mut self, _log: &VhostUserLog, _file: File) -> Result<()> {
        unsupported("SET_LOG_BASE")
    }
}
