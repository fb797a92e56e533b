//! The `memif_rings` target: a connected client writing anything into
//! its rings and memory (see the parent module).

use super::*;

/// The client's region, mapped a second time for the fuzzer: the hostile
/// client writes it, the model reads it (unmapped on drop).
struct Shm(nfv_mem::Mapping);

impl Shm {
    fn map(fd: std::os::fd::BorrowedFd, len: usize) -> Option<Shm> {
        nfv_mem::Mapping::shared(fd, len, 0, nfv_mem::Populate::OnTouch)
            .ok()
            .map(Shm)
    }
    fn snapshot(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.0.len()];
        // SAFETY: the whole mapping, read while no other thread writes it
        // (the switch runs its bursts on this thread).
        unsafe { std::ptr::copy_nonoverlapping(self.0.as_ptr(), v.as_mut_ptr(), v.len()) };
        v
    }
    fn write(&self, at: usize, bytes: &[u8]) {
        let n = bytes.len().min(self.0.len().saturating_sub(at));
        // SAFETY: `at + n <= len`, inside the mapping.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.0.as_ptr().add(at), n) };
    }
}

thread_local! {
    static RING_POOL: RefCell<Option<(std::sync::Arc<PacketPool>, PoolCache)>> =
        const { RefCell::new(None) };
    static NEXT_ID: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    /// A port that stays on this thread's socket (interface id 0), so that
    /// the socket's listener outlives each input's port: the last port to
    /// leave a socket waits for its listener thread to stop.
    static ANCHOR: RefCell<Option<std::sync::Arc<MemifPort>>> = const { RefCell::new(None) };
}

fn with_pool<R>(f: impl FnOnce(&mut PoolCache) -> R) -> R {
    RING_POOL.with(|p| {
        let mut p = p.borrow_mut();
        let (_, cache) = p.get_or_insert_with(|| {
            let cfg = MemoryConfig {
                frame_size: 2048,
                frames: 512,
                hugepages: HugepageMode::Never,
            };
            let pool = PacketPool::new("fuzz-memif", &cfg).expect("fuzz pool");
            let cache = pool.cache();
            (pool, cache)
        });
        f(cache)
    })
}

/// Where things are in the client's region (`crate::client` lays it out
/// as DPDK does: C2S ring, S2C ring, C2S buffers, S2C buffers).
#[derive(Clone, Copy)]
struct Layout {
    size: u16,
    bsize: u32,
    ring_len: usize,
    region_len: usize,
}

impl Layout {
    /// Offset of ring `s2c`'s header.
    fn ring(&self, s2c: bool) -> usize {
        if s2c { self.ring_len } else { 0 }
    }
    fn desc_at(&self, s2c: bool, slot: u16) -> usize {
        self.ring(s2c) + memif::ring::desc_offset(usize::from(slot & (self.size - 1)))
    }
    fn buffer(&self, s2c: bool, slot: u16) -> u32 {
        let first =
            2 * self.ring_len + if s2c { usize::from(self.size) } else { 0 } * self.bsize as usize;
        first as u32 + u32::from(slot & (self.size - 1)) * self.bsize
    }
    /// The bytes a descriptor names, if they lie inside the region (what
    /// the connection's translation allows: region 0 only).
    fn range(&self, d: &DescRepr) -> Option<std::ops::Range<usize>> {
        let (off, len) = (d.offset as usize, d.length as usize);
        (d.region == 0 && off < self.region_len && len <= self.region_len - off)
            .then_some(off..off + len)
    }
}

fn desc_in(m: &[u8], at: usize) -> DescRepr {
    DescRepr::parse(&m[at..at + memif::ring::DESC_LEN]).expect("16 bytes")
}

fn u16_in(m: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([m[at], m[at + 1]])
}

/// A descriptor as the hostile client writes it.
fn fuzz_desc(b: &mut Bytes, l: &Layout, s2c: bool) -> DescRepr {
    let sel = b.u8();
    let region = if sel & 0x80 != 0 {
        u16::from(b.u8() & 3)
    } else {
        0
    };
    let offset = match sel & 7 {
        0..=2 => l.buffer(s2c, u16::from(b.u8())) + u32::from(b.u8()),
        3 => (l.region_len - usize::from(b.u8()).min(l.region_len)) as u32,
        4 => u32::from(b.u16()) % l.region_len as u32,
        5 => b.u32(),
        _ => (l.desc_at(s2c, u16::from(b.u8())) + usize::from(b.u8() & 15)) as u32,
    };
    let length = match (sel >> 3) & 7 {
        0 => 0,
        1 | 2 => u32::from(b.u8()),
        3 => u32::from(b.u16()) % 4096,
        4 => b.u32(),
        _ => l.bsize,
    };
    DescRepr {
        next: sel & 0x40 != 0,
        other_flags: 0,
        region,
        length,
        offset,
        metadata: 0,
    }
}

/// The model of one rx burst over the C2S ring in `m`, from `next`:
/// the frames handed up and where the switch stops.
fn rx_model(m: &[u8], l: &Layout, next: u16, room: usize) -> (Vec<Vec<u8>>, u16) {
    let head = u16_in(m, memif::ring::HEAD.start);
    let mut avail = head.wrapping_sub(next);
    if avail > l.size {
        return (Vec::new(), next);
    }
    let (mut frames, mut slot) = (Vec::new(), next);
    while avail > 0 && frames.len() < nfv_mem::BATCH {
        let (mut frame, mut fault) = (Vec::new(), false);
        loop {
            if avail == 0 {
                fault = true;
                break;
            }
            let d = desc_in(m, l.desc_at(false, slot));
            slot = slot.wrapping_add(1);
            avail -= 1;
            if !fault {
                match l.range(&d) {
                    Some(r) if frame.len() + r.len() <= room => frame.extend_from_slice(&m[r]),
                    _ => fault = true,
                }
            }
            if !d.next {
                break;
            }
        }
        if !fault && !frame.is_empty() {
            frames.push(frame);
        }
    }
    (frames, slot)
}

/// The model of one tx burst of `frames` over the S2C ring in `m` (which
/// it updates as the switch must), from the switch's `tail`: how many
/// frames go, and the tail after.
fn tx_model(m: &mut [u8], l: &Layout, tail: u16, frames: &[Vec<u8>]) -> (usize, u16) {
    let head = u16_in(m, l.ring(true) + memif::ring::HEAD.start);
    let mut free = head.wrapping_sub(tail);
    if free > l.size {
        return (0, tail);
    }
    let (mut slot, mut sent) = (tail, 0);
    'frames: for f in frames {
        let (start, mut done) = (slot, 0);
        loop {
            let at = l.desc_at(true, slot);
            let d = desc_in(m, at);
            let take = (f.len() - done).min(d.length as usize);
            let Some(r) = l.range(&d).filter(|_| free > 0 && take > 0) else {
                slot = start;
                break 'frames;
            };
            m[r.start..r.start + take].copy_from_slice(&f[done..done + take]);
            done += take;
            let more = done < f.len();
            let mut nd = desc_in(m, at);
            nd.next = more;
            nd.other_flags = 0;
            nd.length = take as u32;
            m[at..at + memif::ring::DESC_LEN].copy_from_slice(&nd.emit());
            slot = slot.wrapping_add(1);
            free -= 1;
            if !more {
                break;
            }
        }
        sent += 1;
    }
    if sent > 0 {
        let at = l.ring(true) + memif::ring::TAIL.start;
        m[at..at + 2].copy_from_slice(&slot.to_le_bytes());
    }
    (sent, if sent > 0 { slot } else { tail })
}

/// A server port and a client connected to it, with the queues synced.
///
/// Dropped in field order: the client first (its connection thread sees
/// the socket close at once), the port last.
struct Rig {
    client: Client,
    shm: Shm,
    rxq: Box<dyn RxQueue>,
    txq: Box<dyn TxQueue>,
    _port: std::sync::Arc<MemifPort>,
    l: Layout,
    /// The slot the rx queue reads next (= the tail it published).
    rx_next: u16,
    /// The switch's own S2C tail.
    tx_tail: u16,
    /// Room in a switch packet buffer.
    room: usize,
}

impl Rig {
    fn new(log2: u8, bsize: u32, one_copy: bool, pool: &mut PoolCache) -> Option<Rig> {
        let path = format!(
            "@nfv-fuzz-rings-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        );
        if ANCHOR.with(|a| a.borrow().is_none()) {
            let port = MemifPort::open("fuzz-anchor", &MemifConfig::new(&path), 9216).ok()?;
            ANCHOR.with(|a| *a.borrow_mut() = Some(port));
        }
        let id = NEXT_ID.with(|n| {
            n.set(n.get().wrapping_add(1).max(1));
            n.get()
        });
        let cfg = MemifConfig {
            id,
            one_copy,
            ..MemifConfig::new(&path)
        };
        let port = MemifPort::open("fuzz-rings", &cfg, 9216).ok()?;
        let mut rxq = port.open_rxq(0);
        let txq = port.open_txq(0);
        let ccfg = ClientConfig {
            id,
            log2_ring: log2,
            buffer_size: bsize,
            ..ClientConfig::new(SocketPath::parse(&path))
        };
        let mut client = Client::connect(&ccfg, Duration::from_secs(5)).ok()?;
        // One frame through proves the port published the connection to
        // its queues (the hub's thread does that after CONNECTED).
        if client.send(0, [&[0x5a; 60][..]]) != 1 {
            return None;
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut batch = Batch::new();
        while rxq.rx_burst(&mut batch, pool) == 0 {
            if Instant::now() > deadline {
                return None;
            }
            std::thread::yield_now();
        }
        rxq.burst_done();
        pool.free_batch(&mut batch);
        let raw = client.raw();
        let size = 1u16 << log2;
        let l = Layout {
            size,
            bsize,
            ring_len: memif::ring::len(log2)?,
            region_len: raw.region_len(),
        };
        let shm = Shm::map(raw.region_fd(), l.region_len)?;
        let room = {
            let p = pool.alloc()?;
            let n = p.max_len();
            pool.free(p);
            n
        };
        Some(Rig {
            client,
            shm,
            rxq,
            txq,
            _port: port,
            l,
            rx_next: 1,
            tx_tail: 0,
            room,
        })
    }

    fn rx_burst(&mut self, pool: &mut PoolCache) {
        let before = self.shm.snapshot();
        let (want, next) = rx_model(&before, &self.l, self.rx_next, self.room);
        let mut batch = Batch::new();
        self.rxq.rx_burst(&mut batch, pool);
        let mut got = Vec::new();
        for p in batch.iter_mut() {
            assert!(p.join_tail(), "a lent frame fits its packet");
            got.push(p.data().to_vec());
        }
        self.rxq.burst_done();
        pool.free_batch(&mut batch);
        assert!(
            got == want,
            "rx from {}: {} frames of {:?} bytes, the model {} of {:?} \
             (connected {}, counters {:?})",
            self.rx_next,
            got.len(),
            got.iter().map(Vec::len).collect::<Vec<_>>(),
            want.len(),
            want.iter().map(Vec::len).collect::<Vec<_>>(),
            self._port.is_connected(),
            [
                "bad_head",
                "bad_desc",
                "bad_chain",
                "too_big",
                "empty",
                "memory_faults"
            ]
            .map(|c| (c, self._port.counter(c)))
        );
        let mut expect = before;
        if next != self.rx_next {
            let at = memif::ring::TAIL.start;
            expect[at..at + 2].copy_from_slice(&next.to_le_bytes());
        }
        assert!(
            self.shm.snapshot() == expect,
            "rx wrote the region other than its tail"
        );
        self.rx_next = next;
    }

    fn tx_burst(&mut self, b: &mut Bytes, pool: &mut PoolCache) {
        let n = b.u8() % 33;
        let mut batch = Batch::new();
        let mut frames = Vec::new();
        for i in 0..n {
            let Some(mut p) = pool.alloc() else { break };
            let len = 1 + usize::from(b.u16()) % self.room;
            if p.set_len(len).is_err() {
                pool.free(p);
                break;
            }
            for (j, x) in p.data_mut().iter_mut().enumerate() {
                *x = i.wrapping_mul(31).wrapping_add(j as u8);
            }
            frames.push(p.data().to_vec());
            batch.push(p);
        }
        let mut expect = self.shm.snapshot();
        let (want, tail) = tx_model(&mut expect, &self.l, self.tx_tail, &frames);
        let sent = self.txq.tx_burst(&mut batch, pool);
        pool.free_batch(&mut batch);
        assert_eq!(sent, want, "tx frames sent");
        if self.shm.snapshot() != expect {
            let now = self.shm.snapshot();
            let first = (0..now.len()).find(|&i| now[i] != expect[i]);
            panic!("tx wrote other than the model: first difference at {first:?}");
        }
        self.tx_tail = tail;
    }
}

/// Runs one input: a connected client that writes anything into its
/// rings and memory, against a real server port's rx and tx queues.
///
/// Input: a header byte (bits 0-2: 2^(1 + x % 6) slots per ring, bits
/// 3-4: buffers of 128, 256, 1024 or 2048 bytes, bit 5: one copy), then
/// up to 48 ops, `op % 8`: 0/4 write a C2S/S2C descriptor (slot, then
/// where it points: a buffer, the region's end, anywhere, past the
/// region, into the descriptors; how long; NEXT; sometimes another
/// region), 1/5 move the C2S/S2C head (within the window or anywhere),
/// 2 write bytes anywhere in the region (headers, tails and cookies
/// included), 3 an rx burst, 6 a tx burst (frames and their lengths),
/// 7 well-formed traffic (C2S frames posted, or S2C buffers reposted).
///
/// Checks, per burst, against a model of the ring walk (`rx_model`,
/// `tx_model`): the frames received are exactly those of the sane chains
/// the head covers, in order; rx writes nothing but its tail; tx sends
/// the frames the posted buffers hold and writes exactly those buffers'
/// bytes, their descriptors' flags and lengths, and its tail — nothing
/// else of the region. No panic, no fault.
pub fn ring_walk(data: &[u8]) {
    let mut b = Bytes { data, at: 0 };
    let h = b.u8();
    let log2 = 1 + (h & 7) % 6;
    let bsize = [128, 256, 1024, 2048][usize::from((h >> 3) & 3)];
    with_pool(|pool| {
        let Some(mut rig) = Rig::new(log2, bsize, h & 0x20 != 0, pool) else {
            return;
        };
        for _ in 0..48 {
            if b.is_empty() {
                break;
            }
            rig.op(&mut b, pool);
        }
        rig.rx_burst(pool);
        let mut none = Bytes { data: &[], at: 0 };
        rig.tx_burst(&mut none, pool);
    });
}

impl Rig {
    fn op(&mut self, b: &mut Bytes, pool: &mut PoolCache) {
        let l = self.l;
        let raw = self.client.raw();
        match b.u8() % 8 {
            op @ (0 | 4) => {
                let s2c = op == 4;
                let slot = u16::from(b.u8());
                let d = fuzz_desc(b, &l, s2c);
                self.shm.write(l.desc_at(s2c, slot), &d.emit());
            }
            op @ (1 | 5) => {
                let s2c = op == 5;
                let from = if s2c { self.tx_tail } else { self.rx_next };
                let sel = b.u8();
                let head = if sel & 0x80 == 0 {
                    from.wrapping_add(u16::from(sel) % (l.size + 2))
                } else {
                    b.u16()
                };
                if s2c {
                    raw.set_s2c_head(0, head);
                } else {
                    raw.set_c2s_head(0, head);
                }
            }
            2 => {
                let at = match b.u8() & 3 {
                    0 => usize::from(b.u8()) % 136,
                    1 => l.ring_len + usize::from(b.u8()) % 136,
                    _ => b.u32() as usize % l.region_len,
                };
                let n = usize::from(b.u8() % 64);
                let bytes: Vec<u8> = (0..n).map(|_| b.u8()).collect();
                self.shm.write(at, &bytes);
            }
            3 => self.rx_burst(pool),
            6 => self.tx_burst(b, pool),
            _ => {
                let k = b.u8();
                if k & 1 == 0 {
                    // C2S: k/2 % size frames of one buffer each.
                    let n = u16::from(k >> 1) % (l.size + 1);
                    for i in 0..n {
                        let slot = self.rx_next.wrapping_add(i);
                        let d = DescRepr {
                            offset: l.buffer(false, slot),
                            length: 1 + u32::from(b.u16()) % l.bsize,
                            ..DescRepr::default()
                        };
                        raw.set_c2s_desc(0, slot, &d);
                    }
                    raw.set_c2s_head(0, self.rx_next.wrapping_add(n));
                } else {
                    // S2C: every buffer posted again.
                    for i in 0..l.size {
                        let slot = self.tx_tail.wrapping_add(i);
                        let d = DescRepr {
                            offset: l.buffer(true, slot),
                            length: l.bsize,
                            ..DescRepr::default()
                        };
                        raw.set_s2c_desc(0, slot, &d);
                    }
                    raw.set_s2c_head(0, self.tx_tail.wrapping_add(l.size));
                }
            }
        }
    }
}
