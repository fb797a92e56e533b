//! Test harness shared by the integration tests and the benchmark:
//! guarded memory, a driver↔device loopback, and a hand-written mock
//! driver for crafting ring states the real driver never produces.
#![allow(dead_code)]

use nfv_mem::{Batch, HugepageMode, MemoryConfig, PacketPool, PoolCache};
use nfv_virtio::layout::{Desc, RingAddrs, UsedElem, ring_area_bytes};
use nfv_virtio::{DeviceQueue, DriverQueue, DriverSetup, GuestMemory, QueueSetup, layout_rings};
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};

pub const PAGE: usize = 4096;

/// Anonymous shared memory with a PROT_NONE page on each side: any access
/// one byte outside faults instead of passing silently.
pub struct Guarded {
    base: *mut u8,
    len: usize,
}

impl Guarded {
    pub fn new(len: usize) -> Guarded {
        let len = len.div_ceil(PAGE).max(1) * PAGE;
        // SAFETY: anonymous mapping, result checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len + 2 * PAGE,
                libc::PROT_NONE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        let base = p.cast::<u8>().wrapping_add(PAGE);
        // SAFETY: the middle of our own mapping.
        let r = unsafe { libc::mprotect(base.cast(), len, libc::PROT_READ | libc::PROT_WRITE) };
        assert_eq!(r, 0);
        Guarded { base, len }
    }
    pub fn ptr(&self) -> *mut u8 {
        self.base
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: readable for `len` bytes while self lives.
        unsafe { std::slice::from_raw_parts(self.base, self.len) }
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        // SAFETY: the whole mapping made in `new`.
        unsafe { libc::munmap(self.base.wrapping_sub(PAGE).cast(), self.len + 2 * PAGE) };
    }
}

/// Address space reserved but inaccessible: large guest "memory" that
/// translates fine but faults if ever touched.
pub struct Reserved {
    pub base: *mut u8,
    pub len: usize,
}

impl Reserved {
    pub fn new(len: usize) -> Reserved {
        // SAFETY: anonymous PROT_NONE reservation, result checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        Reserved {
            base: p.cast(),
            len,
        }
    }
}

impl Drop for Reserved {
    fn drop(&mut self) {
        // SAFETY: our own mapping.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

pub fn pool(name: &str, frame_size: usize, frames: usize) -> Arc<PacketPool> {
    PacketPool::new(
        name,
        &MemoryConfig {
            frame_size,
            frames,
            hugepages: HugepageMode::Never,
        },
    )
    .unwrap()
}

/// Frame `n` of a test stream: length and contents both encode `seed`.
pub fn fill(buf: &mut [u8], seed: u32) {
    let mut x = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    for b in buf.iter_mut() {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        *b = x as u8;
    }
    if buf.len() >= 4 {
        buf[..4].copy_from_slice(&seed.to_le_bytes());
    }
}

pub fn frame(len: usize, seed: u32) -> Vec<u8> {
    let mut v = vec![0; len];
    fill(&mut v, seed);
    v
}

/// A VNF (driver) and the switch (device) in one process, as with
/// virtio-user: the VNF's pool and ring area are the guest memory, with
/// guest-physical = user = host address. Queue 0 is the VNF's RX, queue 1
/// its TX (virtio-net numbering).
pub struct Loopback {
    pub rx_drv: DriverQueue,
    pub rx_dev: DeviceQueue,
    pub tx_drv: DriverQueue,
    pub tx_dev: DeviceQueue,
    pub drv: PoolCache,
    pub sw: PoolCache,
    pub mem: Arc<GuestMemory>,
    pub rings: Guarded,
    pub drv_pool: Arc<PacketPool>,
    pub sw_pool: Arc<PacketPool>,
}

pub struct LoopbackCfg {
    pub size: u16,
    pub features: u64,
    pub frame_size: usize,
    pub frames: usize,
    pub rx_buf_len: u32,
    pub rx_call: Option<OwnedFd>,
    pub tx_call: Option<OwnedFd>,
    /// Guest-physical address of the pool (the rings 4 GiB above it);
    /// 0: guest-physical = host address.
    pub gpa_base: u64,
}

impl Default for LoopbackCfg {
    fn default() -> Self {
        LoopbackCfg {
            size: 256,
            features: nfv_virtio::layout::VIRTIO_F_VERSION_1,
            frame_size: 2048,
            frames: 2048,
            rx_buf_len: 0,
            rx_call: None,
            tx_call: None,
            gpa_base: 0,
        }
    }
}

impl Loopback {
    pub fn new(cfg: LoopbackCfg) -> Loopback {
        let drv_pool = pool("vnf", cfg.frame_size, cfg.frames);
        let sw_pool = pool("switch", cfg.frame_size, cfg.frames);
        let packed = cfg.features & nfv_virtio::layout::VIRTIO_F_RING_PACKED != 0;
        let per = if packed {
            nfv_virtio::packed::packed_area_bytes(cfg.size)
        } else {
            ring_area_bytes(cfg.size)
        };
        let rings = Guarded::new(2 * per);
        let r = drv_pool.region();
        let (pb, pl) = (r.base().as_ptr(), r.len());
        // SAFETY: the pool region and the guarded area outlive every queue
        // (fields drop in order: queues first).
        let mem = Arc::new(
            unsafe {
                GuestMemory::from_raw(&[
                    (
                        if cfg.gpa_base == 0 {
                            pb as u64
                        } else {
                            cfg.gpa_base
                        },
                        pb as u64,
                        pb,
                        pl,
                    ),
                    (
                        if cfg.gpa_base == 0 {
                            rings.ptr() as u64
                        } else {
                            cfg.gpa_base + (1 << 32)
                        },
                        rings.ptr() as u64,
                        rings.ptr(),
                        rings.len(),
                    ),
                ])
            }
            .unwrap(),
        );
        let mk = |i: usize, call: Option<OwnedFd>| {
            let area = rings.ptr() as u64 + (i * per) as u64;
            let addrs = if packed {
                nfv_virtio::packed::layout_packed(area, per, cfg.size).unwrap()
            } else {
                layout_rings(area, per, cfg.size).unwrap()
            };
            // The driver names its rings by guest-physical address, the
            // device by user address (= host here).
            let gpa_area = match cfg.gpa_base {
                0 => area,
                b => b + (1 << 32) + (i * per) as u64,
            };
            let drv_addrs = if packed {
                nfv_virtio::packed::layout_packed(gpa_area, per, cfg.size).unwrap()
            } else {
                layout_rings(gpa_area, per, cfg.size).unwrap()
            };
            let drv = DriverQueue::new(DriverSetup {
                mem: mem.clone(),
                size: cfg.size,
                rings: drv_addrs,
                features: cfg.features,
                rx_buf_len: cfg.rx_buf_len,
            })
            .unwrap();
            let dev = DeviceQueue::new(QueueSetup {
                mem: mem.clone(),
                size: cfg.size,
                desc_uva: addrs.desc,
                avail_uva: addrs.avail,
                used_uva: addrs.used,
                // Packed rings start in lap 1 (wrap counter in bit 15), as
                // QEMU and DPDK virtio-user send it.
                last_avail_idx: if packed { 0x8000 } else { 0 },
                features: cfg.features,
                call,
            })
            .unwrap();
            (drv, dev)
        };
        let (rx_drv, rx_dev) = mk(0, cfg.rx_call);
        let (tx_drv, tx_dev) = mk(1, cfg.tx_call);
        Loopback {
            rx_drv,
            rx_dev,
            tx_drv,
            tx_dev,
            drv: drv_pool.cache(),
            sw: sw_pool.cache(),
            mem,
            rings,
            drv_pool,
            sw_pool,
        }
    }

    /// VNF transmits `frames`; the switch dequeues them. Returns the
    /// switch-side packets' contents.
    pub fn vnf_to_switch(&mut self, frames: &[Vec<u8>]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for chunk in frames.chunks(nfv_mem::BATCH) {
            let mut b = Batch::new();
            for f in chunk {
                let mut p = self.drv.alloc().expect("vnf pool");
                p.set_len(f.len()).unwrap();
                p.data_mut().copy_from_slice(f);
                b.push(p);
            }
            let n = self.tx_drv.transmit_burst(&mut b, &mut self.drv);
            assert_eq!(n, chunk.len(), "tx ring full");
            let mut got = Batch::new();
            while !got.is_full() && self.tx_dev.dequeue_burst(&mut got, &mut self.sw) > 0 {}
            for p in got.drain(..) {
                out.push(p.data().to_vec());
                self.sw.free(p);
            }
            self.tx_drv.reclaim_tx(&mut self.drv);
        }
        out
    }

    /// The switch sends `frames` to the VNF's RX queue; the VNF receives.
    pub fn switch_to_vnf(&mut self, frames: &[Vec<u8>]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for chunk in frames.chunks(nfv_mem::BATCH) {
            let mut b = Batch::new();
            for f in chunk {
                let mut p = self.sw.alloc().expect("switch pool");
                p.set_len(f.len()).unwrap();
                p.data_mut().copy_from_slice(f);
                b.push(p);
            }
            // Small RX buffers may need several rounds of the VNF
            // harvesting and reposting before the whole chunk fits.
            for _ in 0..1000 {
                if b.is_empty() {
                    break;
                }
                self.rx_drv.refill_rx(&mut self.drv);
                self.rx_dev.enqueue_burst(&mut b, &mut self.sw);
                let mut got = Batch::new();
                loop {
                    let n = self.rx_drv.receive_burst(&mut got, &mut self.drv);
                    for p in got.drain(..) {
                        out.push(p.data().to_vec());
                        self.drv.free(p);
                    }
                    if n == 0 {
                        break;
                    }
                }
            }
            assert!(b.is_empty(), "guest ran out of buffers");
        }
        out
    }
}

/// A driver written by hand: rings and buffers in a guarded area mapped at
/// distinct guest-physical, user and host addresses, so every translation
/// path is exercised. Tests write descriptors and avail entries directly.
pub struct Mock {
    pub area: Guarded,
    pub mem: Arc<GuestMemory>,
    pub size: u16,
    /// Ring addresses in host terms.
    pub host: RingAddrs,
    pub avail_idx: u16,
    next_buf: usize,
    ring_bytes: usize,
    _hole: Option<Reserved>,
}

pub const GPA: u64 = 0x4_0000_0000;
pub const UVA: u64 = 0x7f12_0000_0000;
/// Guest-physical base of the optional huge inaccessible region.
pub const HOLE_GPA: u64 = 0x100_0000_0000;

impl Mock {
    pub fn new(size: u16, data_bytes: usize) -> Mock {
        Self::build(size, data_bytes, 0)
    }

    /// With an extra guest region of `hole` bytes that translates but
    /// faults if touched (for length-overflow tests).
    pub fn with_hole(size: u16, data_bytes: usize, hole: usize) -> Mock {
        Self::build(size, data_bytes, hole)
    }

    fn build(size: u16, data_bytes: usize, hole: usize) -> Mock {
        let ring_bytes = ring_area_bytes(size).div_ceil(64) * 64;
        let area = Guarded::new(ring_bytes + data_bytes);
        let h = area.ptr();
        let reserved = (hole > 0).then(|| Reserved::new(hole));
        let mut regions = vec![(GPA, UVA, h, area.len())];
        if let Some(r) = &reserved {
            regions.push((HOLE_GPA, UVA + (1 << 36), r.base, r.len));
        }
        // SAFETY: the area (and reservation) live as long as the mock,
        // which outlives the queues the tests build on it.
        let mem = Arc::new(unsafe { GuestMemory::from_raw(&regions) }.unwrap());
        let host = layout_rings(h as u64, ring_bytes, size).unwrap();
        Mock {
            area,
            mem,
            size,
            host,
            avail_idx: 0,
            next_buf: ring_bytes,
            ring_bytes,
            _hole: reserved,
        }
    }

    fn to_uva(&self, host: u64) -> u64 {
        host - self.area.ptr() as u64 + UVA
    }

    /// Guest-physical address of host pointer `p` inside the area.
    pub fn gpa(&self, p: *const u8) -> u64 {
        p as u64 - self.area.ptr() as u64 + GPA
    }

    /// One past the last guest-physical byte of the area.
    pub fn gpa_end(&self) -> u64 {
        GPA + self.area.len() as u64
    }

    pub fn device(&self, features: u64) -> DeviceQueue {
        self.device_at(features, 0)
    }

    pub fn device_at(&self, features: u64, last_avail: u16) -> DeviceQueue {
        DeviceQueue::new(QueueSetup {
            mem: self.mem.clone(),
            size: self.size,
            desc_uva: self.to_uva(self.host.desc),
            avail_uva: self.to_uva(self.host.avail),
            used_uva: self.to_uva(self.host.used),
            last_avail_idx: last_avail,
            features,
            call: None,
        })
        .unwrap()
    }

    /// A 16-aligned buffer of `len` bytes in the data area: (gpa, host).
    pub fn buf(&mut self, len: usize) -> (u64, *mut u8) {
        let off = self.next_buf.div_ceil(16) * 16;
        assert!(off + len <= self.area.len(), "mock data area exhausted");
        self.next_buf = off + len;
        let p = self.area.ptr().wrapping_add(off);
        (self.gpa(p), p)
    }

    /// A buffer holding `bytes`: its gpa.
    pub fn buf_with(&mut self, bytes: &[u8]) -> u64 {
        let (g, p) = self.buf(bytes.len());
        // SAFETY: `buf` returned `bytes.len()` bytes inside the area.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len()) };
        g
    }

    /// An indirect table holding `descs`: its gpa and byte length.
    pub fn table(&mut self, descs: &[Desc]) -> (u64, u32) {
        let (g, p) = self.buf(16 * descs.len());
        for (i, d) in descs.iter().enumerate() {
            // SAFETY: inside the buffer just reserved, 16-aligned.
            unsafe { p.cast::<Desc>().add(i).write(*d) };
        }
        (g, 16 * descs.len() as u32)
    }

    pub fn set_desc(&self, i: u16, d: Desc) {
        assert!(i < self.size);
        // SAFETY: inside the descriptor table.
        unsafe { (self.host.desc as *mut Desc).add(i as usize).write(d) };
    }

    /// Writes an avail entry at the current index and publishes it.
    pub fn push_avail(&mut self, head: u16) {
        let slot = 2 + (self.avail_idx & (self.size - 1)) as usize;
        // SAFETY: inside the avail ring.
        unsafe { (self.host.avail as *mut u16).add(slot).write(head) };
        self.avail_idx = self.avail_idx.wrapping_add(1);
        self.set_avail_idx(self.avail_idx);
    }

    pub fn set_avail_idx(&self, v: u16) {
        self.atomic(self.host.avail + 2).store(v, Ordering::Release);
    }
    pub fn set_avail_flags(&self, v: u16) {
        self.atomic(self.host.avail).store(v, Ordering::Release);
    }
    pub fn set_used_event(&self, v: u16) {
        self.atomic(self.host.avail + 4 + 2 * self.size as u64)
            .store(v, Ordering::Release);
    }
    pub fn used_idx(&self) -> u16 {
        self.atomic(self.host.used + 2).load(Ordering::Acquire)
    }
    pub fn used_flags(&self) -> u16 {
        self.atomic(self.host.used).load(Ordering::Acquire)
    }
    pub fn avail_event(&self) -> u16 {
        self.atomic(self.host.used + 4 + 8 * self.size as u64)
            .load(Ordering::Acquire)
    }
    pub fn used(&self, i: u16) -> UsedElem {
        let slot = (i & (self.size - 1)) as u64;
        // SAFETY: inside the used ring.
        unsafe { ((self.host.used + 4 + 8 * slot) as *const UsedElem).read_volatile() }
    }

    /// The used ring as an in-order driver reads it (virtio 1.2 §2.7.9,
    /// as Linux's in-order split ring does), `posted` being the heads in
    /// avail order from used position 0: an entry whose id is not the next
    /// head returns every chain up to the one it names, those before it
    /// with length 0 (TX drivers ignore lengths; on RX the device writes
    /// every entry). Panics on an id that is not a head still out.
    #[allow(dead_code)]
    pub fn used_in_order(&self, posted: &[u16]) -> Vec<(u16, u32)> {
        let end = self.used_idx();
        let mut got = Vec::new();
        let mut i = 0u16;
        while i != end {
            let e = self.used(i);
            let id = e.id as u16;
            let at = usize::from(i);
            let pos = posted[at..]
                .iter()
                .position(|&h| h == id)
                .unwrap_or_else(|| panic!("used[{i}] names {id}, not a head still out"));
            got.extend(posted[at..at + pos].iter().map(|&h| (h, 0)));
            got.push((id, e.len));
            i = i.wrapping_add(pos as u16 + 1);
        }
        got
    }

    fn atomic(&self, addr: u64) -> &AtomicU16 {
        // SAFETY: ring fields inside the area, 2-aligned.
        unsafe { AtomicU16::from_ptr(addr as *mut u16) }
    }

    /// Reads `len` bytes at host pointer `p` (test helper).
    pub fn read(&self, p: *const u8, len: usize) -> Vec<u8> {
        // SAFETY: tests pass pointers from `buf`.
        unsafe { std::slice::from_raw_parts(p, len) }.to_vec()
    }

    /// Bytes of the descriptor table and avail ring (the device must never
    /// write them).
    pub fn driver_owned(&self) -> Vec<u8> {
        let start = self.host.desc as usize - self.area.ptr() as usize;
        let end = self.host.used as usize - self.area.ptr() as usize;
        self.area.bytes()[start..end].to_vec()
    }

    pub fn ring_bytes(&self) -> usize {
        self.ring_bytes
    }
}
