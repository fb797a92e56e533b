//! Test harness: a guest (the `vhost` crate's frontend for the protocol,
//! `nfv_virtio::DriverQueue` for the rings, an `nfv_mem` pool as its
//! memory, shared with the port through memfds) and the switch side (the
//! port's own rx/tx queue objects, driven by the test thread as a PMD).
#![allow(dead_code)]

use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use nfv_mem::{Batch, HugepageMode, MemoryConfig, PacketPool, PoolCache, Region};
use nfv_ports::{Port, RxQueue, TxQueue};
use nfv_vhost::{VhostStatus, VhostUserPort};
use nfv_vhost::{VhostUserConfig, VhostUserMode};
use nfv_virtio::layout::{
    VHOST_USER_F_PROTOCOL_FEATURES, VIRTIO_F_RING_PACKED, VIRTIO_F_VERSION_1, VIRTIO_NET_F_MQ,
    VIRTIO_NET_F_MRG_RXBUF, VIRTIO_RING_F_EVENT_IDX, VIRTIO_RING_F_INDIRECT_DESC,
};
use nfv_virtio::{DriverQueue, DriverSetup, GuestMemory, RingAddrs, layout_rings, ring_area_bytes};
use vhost::vhost_user::message::VhostUserHeaderFlag;
use vhost::vhost_user::{Frontend, VhostUserFrontend, VhostUserProtocolFeatures};
use vhost::{VhostBackend, VhostUserMemoryRegionInfo, VringConfigData};
use vmm_sys_util::eventfd::EventFd;

pub const WAIT: Duration = Duration::from_secs(10);

/// A socket path unique to this test process and `tag`.
pub fn sock(tag: &str) -> PathBuf {
    let p = PathBuf::from(format!("/tmp/nfv-vhost-{}-{tag}.sock", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

pub fn cfg(socket: &Path, mode: VhostUserMode, queues: usize, mrg: bool) -> VhostUserConfig {
    VhostUserConfig {
        socket: socket.to_path_buf(),
        mode,
        queues,
        mrg_rxbuf: mrg,
        tx_retries: VhostUserConfig::DEFAULT_TX_RETRIES,
        one_copy: true,
        packed_ring: true,
        offloads: nfv_vhost::Offloads::ALL,
        max_guest_memory: nfv_vhost::DEFAULT_MAX_GUEST_MEMORY,
        mtu: None,
    }
}

pub fn pool(name: &str, frames: usize) -> Arc<PacketPool> {
    pool_of(name, frames, 2048)
}

/// A pool of `frames` buffers of `frame_size` bytes.
pub fn pool_of(name: &str, frames: usize, frame_size: usize) -> Arc<PacketPool> {
    PacketPool::new(
        name,
        &MemoryConfig {
            frame_size,
            frames,
            hugepages: HugepageMode::Never,
        },
    )
    .expect("pool")
}

pub fn wait(what: &str, mut cond: impl FnMut() -> bool) {
    assert!(
        nfv_testutil::wait_until(WAIT, &mut cond),
        "timed out waiting for {what}"
    );
}

/// Waits until the port's status satisfies `f`.
pub fn wait_status(port: &VhostUserPort, what: &str, f: impl Fn(&VhostStatus) -> bool) {
    if !nfv_testutil::wait_until(WAIT, || f(&port.status())) {
        panic!("timed out waiting for {what}: {:#?}", port.status());
    }
}

/// A test frame: `len` bytes, locally administered MACs, a private
/// ethertype and a payload derived from `seed`.
pub fn frame(len: usize, seed: u32) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    f[12..14].copy_from_slice(&[0x88, 0xb5]);
    let mut x = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    for b in &mut f[14..] {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        *b = x as u8;
    }
    if len >= 18 {
        f[14..18].copy_from_slice(&seed.to_be_bytes());
    }
    f
}

pub fn fill(cache: &mut PoolCache, frames: &[Vec<u8>]) -> Batch {
    let mut b = Batch::new();
    for f in frames {
        let mut p = cache.alloc().expect("packet");
        p.room_mut()[..f.len()].copy_from_slice(f);
        p.set_len(f.len()).unwrap();
        b.push(p);
    }
    b
}

/// Split packets (one-copy mode) are joined first, as any caller that
/// keeps frames past the burst must.
pub fn drain(cache: &mut PoolCache, b: &mut Batch) -> Vec<Vec<u8>> {
    let v = b
        .iter_mut()
        .map(|p| {
            assert!(p.join_tail(), "a split packet's buffer holds its frame");
            p.data().to_vec()
        })
        .collect();
    cache.free_batch(b);
    v
}

/// Features a well-behaved guest acks: everything offered that it knows.
pub fn guest_features(offered: u64) -> u64 {
    offered
        & (VIRTIO_F_VERSION_1
            | VIRTIO_NET_F_MRG_RXBUF
            | VIRTIO_RING_F_INDIRECT_DESC
            | VIRTIO_RING_F_EVENT_IDX
            | VIRTIO_NET_F_MQ
            | VHOST_USER_F_PROTOCOL_FEATURES)
}

/// How the guest sets itself up.
#[derive(Clone, Debug)]
pub struct GuestOpts {
    pub pairs: usize,
    pub size: u16,
    /// RX buffer length (0 = a whole pool packet); small with MRG_RXBUF
    /// so that large frames span several buffers.
    pub rx_buf_len: u32,
    /// Features to ack instead of [`guest_features`].
    pub features: Option<u64>,
    /// Bytes per guest buffer (frames sent and received are at most this
    /// minus the headroom).
    pub frame_size: usize,
}

impl Default for GuestOpts {
    fn default() -> Self {
        GuestOpts {
            pairs: 1,
            size: 256,
            rx_buf_len: 0,
            features: None,
            frame_size: 2048,
        }
    }
}

/// The guest: a vhost-user frontend with its memory and driver queues.
/// (Fields drop in order: the queues give their packets back before the
/// pool goes, so the pool can unmap its memory.)
pub struct Guest {
    /// Guest RX virtqueues (vring 2p), by pair.
    pub rx: Vec<DriverQueue>,
    /// Guest TX virtqueues (vring 2p+1), by pair.
    pub tx: Vec<DriverQueue>,
    pub fe: Frontend,
    pub cache: PoolCache,
    pub pool: Arc<PacketPool>,
    pub rings: Region,
    pub mem: Arc<GuestMemory>,
    pub ring_addrs: Vec<RingAddrs>,
    pub features: u64,
    pub eventfds: Vec<EventFd>,
}

/// A guest's memory and driver queues without a protocol frontend (the
/// conformance table speaks the protocol byte by byte). Fields drop in
/// order: queues before the pool.
pub struct GuestMem {
    pub rx: Vec<DriverQueue>,
    pub tx: Vec<DriverQueue>,
    pub cache: PoolCache,
    pub pool: Arc<PacketPool>,
    pub rings: Region,
    pub mem: Arc<GuestMemory>,
    pub ring_addrs: Vec<RingAddrs>,
}

impl GuestMem {
    pub fn new(tag: &str, opts: &GuestOpts, features: u64) -> GuestMem {
        // Every ring full (RX posted, TX not yet reclaimed) and a burst to
        // spare.
        let frames = (2 * opts.pairs * opts.size as usize + 256).max(1024);
        let pool = pool_of(&format!("guest-{tag}"), frames, opts.frame_size);
        let cache = pool.cache();
        // Large enough for either layout (a packed ring needs less).
        let area = ring_area_bytes(opts.size);
        let n = 2 * opts.pairs;
        let rings = Region::new("guest-rings", area * n, HugepageMode::Never).expect("rings");
        let (pb, pl) = (pool.region().base().as_ptr(), pool.region().len());
        let (rb, rl) = (rings.base().as_ptr(), rings.len());
        // SAFETY: both regions are mapped for as long as the GuestMem lives
        // (it owns them and drops the queues first).
        let mem = Arc::new(
            unsafe {
                GuestMemory::from_raw(&[
                    (pb as u64, pb as u64, pb, pl),
                    (rb as u64, rb as u64, rb, rl),
                ])
            }
            .expect("guest memory"),
        );
        let mut ring_addrs = Vec::new();
        let (mut rx, mut tx) = (Vec::new(), Vec::new());
        let packed = features & VIRTIO_F_RING_PACKED != 0;
        for i in 0..n {
            let at = rb as u64 + (i * area) as u64;
            let a = if packed {
                nfv_virtio::packed::layout_packed(at, area, opts.size).unwrap()
            } else {
                layout_rings(at, area, opts.size).unwrap()
            };
            ring_addrs.push(a);
            let q = DriverQueue::new(DriverSetup {
                mem: mem.clone(),
                size: opts.size,
                rings: a,
                features,
                rx_buf_len: if i % 2 == 0 { opts.rx_buf_len } else { 0 },
            })
            .expect("driver queue");
            if i.is_multiple_of(2) {
                rx.push(q);
            } else {
                tx.push(q);
            }
        }
        GuestMem {
            rx,
            tx,
            cache,
            pool,
            rings,
            mem,
            ring_addrs,
        }
    }

    /// (guest-physical = frontend address, size, fd) of its two regions.
    pub fn regions(&self) -> [(u64, u64, i32); 2] {
        let r = self.pool.region();
        [
            (r.base().as_ptr() as u64, r.len() as u64, r.fd().as_raw_fd()),
            (
                self.rings.base().as_ptr() as u64,
                self.rings.len() as u64,
                self.rings.fd().as_raw_fd(),
            ),
        ]
    }
}

/// Connects to a server-mode port.
pub fn connect(path: &Path) -> Frontend {
    Frontend::connect(path, 32).expect("connect")
}

/// Accepts the connection of a client-mode port.
pub fn accept(listener: &UnixListener) -> Frontend {
    listener.set_nonblocking(false).unwrap();
    let (s, _) = listener.accept().expect("accept");
    Frontend::from_stream(s, 32)
}

/// A test VNF's listening socket (client-mode ports connect to it);
/// the socket file is removed on drop.
pub struct TestListener {
    l: UnixListener,
    path: PathBuf,
}

impl std::ops::Deref for TestListener {
    type Target = UnixListener;
    fn deref(&self) -> &UnixListener {
        &self.l
    }
}

impl Drop for TestListener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

pub fn listen(path: &Path) -> TestListener {
    TestListener {
        l: UnixListener::bind(path).expect("bind"),
        path: path.to_path_buf(),
    }
}

/// Negotiates features (SET_FEATURES with `features`) and protocol
/// features, asking for REPLY_ACK on every later message.
pub fn negotiate(fe: &mut Frontend, features: Option<u64>) -> vhost::Result<u64> {
    fe.set_owner()?;
    let offered = fe.get_features()?;
    let f = features.unwrap_or_else(|| guest_features(offered));
    fe.set_features(f)?;
    if f & VHOST_USER_F_PROTOCOL_FEATURES != 0 {
        let pf = fe.get_protocol_features()?;
        fe.set_protocol_features(
            pf & (VhostUserProtocolFeatures::MQ | VhostUserProtocolFeatures::REPLY_ACK),
        )?;
        fe.set_hdr_flags(VhostUserHeaderFlag::NEED_REPLY);
    }
    Ok(f)
}

impl Guest {
    /// Full set-up over `fe`: features, memory table, every vring of
    /// `opts.pairs` pairs started and enabled.
    pub fn setup(mut fe: Frontend, tag: &str, opts: &GuestOpts) -> Guest {
        let features = negotiate(&mut fe, opts.features).expect("negotiate");
        let mut g = Guest::memory(fe, tag, opts, features);
        g.send_mem_table().expect("mem table");
        for i in 0..2 * opts.pairs {
            g.start_vring(i, opts).expect("vring");
        }
        g
    }

    /// Memory and driver queues, nothing sent yet.
    pub fn memory(fe: Frontend, tag: &str, opts: &GuestOpts, features: u64) -> Guest {
        let m = GuestMem::new(tag, opts, features);
        Guest {
            fe,
            pool: m.pool,
            cache: m.cache,
            rings: m.rings,
            mem: m.mem,
            ring_addrs: m.ring_addrs,
            rx: m.rx,
            tx: m.tx,
            features,
            eventfds: Vec::new(),
        }
    }

    pub fn regions(&self) -> Vec<VhostUserMemoryRegionInfo> {
        let r = self.pool.region();
        let region = |base: *mut u8, len: usize, fd: i32| VhostUserMemoryRegionInfo {
            guest_phys_addr: base as u64,
            memory_size: len as u64,
            userspace_addr: base as u64,
            mmap_offset: 0,
            mmap_handle: fd,
        };
        vec![
            region(r.base().as_ptr(), r.len(), r.fd().as_raw_fd()),
            region(
                self.rings.base().as_ptr(),
                self.rings.len(),
                self.rings.fd().as_raw_fd(),
            ),
        ]
    }

    pub fn send_mem_table(&mut self) -> vhost::Result<()> {
        self.fe.set_mem_table(&self.regions()).map(|_| ())
    }

    pub fn start_vring(&mut self, i: usize, opts: &GuestOpts) -> vhost::Result<()> {
        let a = self.ring_addrs[i];
        let (kick, call) = (
            EventFd::new(libc::EFD_NONBLOCK).unwrap(),
            EventFd::new(libc::EFD_NONBLOCK).unwrap(),
        );
        self.fe.set_vring_call(i, &call)?;
        self.fe.set_vring_num(i, opts.size)?;
        // Packed rings start in lap 1: the wrap counter in bit 15.
        let base = if self.features & VIRTIO_F_RING_PACKED != 0 {
            0x8000
        } else {
            0
        };
        self.fe.set_vring_base(i, base)?;
        self.fe.set_vring_addr(
            i,
            &VringConfigData {
                queue_max_size: opts.size,
                queue_size: opts.size,
                flags: 0,
                desc_table_addr: a.desc,
                used_ring_addr: a.used,
                avail_ring_addr: a.avail,
                log_addr: None,
            },
        )?;
        self.fe.set_vring_kick(i, &kick)?;
        if self.features & VHOST_USER_F_PROTOCOL_FEATURES != 0 {
            self.fe.set_vring_enable(i, true)?;
        }
        self.eventfds.push(kick);
        self.eventfds.push(call);
        if i.is_multiple_of(2) {
            self.rx[i / 2].refill_rx(&mut self.cache);
        }
        Ok(())
    }

    /// Transmits `frames` on pair `p`; returns how many were posted.
    pub fn send(&mut self, p: usize, frames: &[Vec<u8>]) -> usize {
        let mut sent = 0;
        for chunk in frames.chunks(nfv_mem::BATCH) {
            let mut b = fill(&mut self.cache, chunk);
            sent += self.tx[p].transmit_burst(&mut b, &mut self.cache);
            self.cache.free_batch(&mut b);
        }
        sent
    }

    /// Frames received on pair `p` so far (and reposts buffers).
    pub fn recv(&mut self, p: usize) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        loop {
            let mut b = Batch::new();
            let n = self.rx[p].receive_burst(&mut b, &mut self.cache);
            out.extend(drain(&mut self.cache, &mut b));
            self.rx[p].refill_rx(&mut self.cache);
            if n == 0 {
                break;
            }
        }
        out
    }
}

/// The switch side of a port: its queue objects, driven by the test thread.
pub struct SwitchSide {
    pub port: Arc<VhostUserPort>,
    pub cache: PoolCache,
    pub rxq: Vec<Box<dyn RxQueue>>,
    pub txq: Vec<Box<dyn TxQueue>>,
}

impl SwitchSide {
    /// Opens `cfg` as port `name` with `pmds` tx queues.
    pub fn open(name: &str, cfg: &VhostUserConfig, pmds: usize) -> SwitchSide {
        let port = VhostUserPort::open(name, cfg).expect("open port");
        let cache = pool(&format!("switch-{name}"), 4096).cache();
        let rxq = (0..port.n_rxq()).map(|q| port.open_rxq(q)).collect();
        let txq = (0..pmds).map(|q| port.open_txq(q)).collect();
        SwitchSide {
            port,
            cache,
            rxq,
            txq,
        }
    }

    /// Polls rx queue `q` until `n` frames came or the deadline passed.
    pub fn recv(&mut self, q: usize, n: usize) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        nfv_testutil::wait_until(WAIT, || {
            let mut b = Batch::new();
            self.rxq[q].rx_burst(&mut b, &mut self.cache);
            out.extend(drain(&mut self.cache, &mut b));
            out.len() >= n
        });
        out
    }

    /// Sends `frames` on tx queue `q`; returns how many were accepted (a
    /// prefix of `frames`: sending stops at the first burst not taken
    /// whole, whose rest is dropped as a PMD would).
    pub fn send(&mut self, q: usize, frames: &[Vec<u8>]) -> usize {
        let mut sent = 0;
        for chunk in frames.chunks(nfv_mem::BATCH) {
            let mut b = fill(&mut self.cache, chunk);
            let n = self.txq[q].tx_burst(&mut b, &mut self.cache);
            sent += n;
            self.cache.free_batch(&mut b);
            if n < chunk.len() {
                break;
            }
        }
        sent
    }

    /// One rx burst on every queue (what a PMD does), keeping the frames
    /// (for a test to say what came when nothing should have).
    pub fn poll_frames(&mut self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for q in &mut self.rxq {
            let mut b = Batch::new();
            q.rx_burst(&mut b, &mut self.cache);
            out.extend(drain(&mut self.cache, &mut b));
        }
        out
    }

    /// One rx burst on every queue (what a PMD does), discarding.
    pub fn poll(&mut self) -> usize {
        let mut n = 0;
        for q in &mut self.rxq {
            let mut b = Batch::new();
            n += q.rx_burst(&mut b, &mut self.cache);
            self.cache.free_batch(&mut b);
        }
        n
    }
}

/// Round trip on pair `p`: the guest sends `frames` on its TX virtqueue,
/// the switch receives them on rx queue `p` and sends them back on tx
/// queue `txq`; the guest receives them on pair `back`. Checks every byte.
pub fn round_trip(
    g: &mut Guest,
    sw: &mut SwitchSide,
    p: usize,
    txq: usize,
    back: usize,
    frames: &[Vec<u8>],
) {
    assert_eq!(g.send(p, frames), frames.len(), "guest transmit");
    let got = sw.recv(p, frames.len());
    assert_eq!(got.len(), frames.len(), "switch received");
    for (i, (a, b)) in got.iter().zip(frames).enumerate() {
        assert!(
            a == b,
            "frame {i} ({} B) changed on guest TX -> switch rx",
            b.len()
        );
    }
    let mut sent = 0;
    let mut back_frames = Vec::new();
    nfv_testutil::wait_until(WAIT, || {
        if sent < got.len() {
            sent += sw.send(txq, &got[sent..]);
        }
        back_frames.extend(g.recv(back));
        back_frames.len() >= frames.len()
    });
    assert_eq!(back_frames.len(), frames.len(), "guest received");
    for (i, (a, b)) in back_frames.iter().zip(frames).enumerate() {
        assert!(
            a == b,
            "frame {i} ({} B) changed on switch tx -> guest RX",
            b.len()
        );
    }
}

/// Raw access for the malicious tests.
pub fn raw_stream(path: &Path) -> UnixStream {
    UnixStream::connect(path).expect("connect")
}
