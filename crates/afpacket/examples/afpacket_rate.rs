//! AF_PACKET port rates on a veth pair (needs root).
//!
//! ```sh
//! cargo run --release -p nfv-afpacket --example afpacket_rate -- [SECONDS] [FRAME_SIZE] [ROUNDS]
//! ```
//!
//! Makes a namespace and a veth pair, opens the port on the host end and
//! measures, each for SECONDS (default 3) after a short warm-up, ROUNDS
//! times (default 3, interleaved), printing every round and the medians:
//!
//! * rx: a sender thread that entered the namespace blasts FRAME_SIZE
//!   (default 64) byte frames with `sendmmsg` (32 per call,
//!   `PACKET_QDISC_BYPASS`); the port's rx queue polls its TPACKET_V3
//!   ring and frees what it gets. Prints what the port received per
//!   second, what the sender managed, and the kernel's ring drops.
//! * rx drain: the sender fills a 65536-frame ring while the port does
//!   not poll, stops, and the port drains the ring: the port's own rx
//!   capacity (ring walk + copy into pool packets), which the veth sender
//!   above cannot saturate.
//! * tx: the port's tx queue sends bursts of 32 pool packets as fast as
//!   it can; the rate is what the peer end counted in
//!   `/sys/class/net/<peer>/statistics/rx_packets` (read inside the
//!   namespace). For comparison the same loop also runs against a
//!   `PACKET_TX_RING` (TPACKET_V2, qdisc bypass, one `send()` kick per
//!   burst) built here, which is the alternative to `sendmmsg`.
//!
//! The PMD side runs on CPU 1, the namespace sender on CPU 0. On veth the
//! receiving kernel work (the peer's stack) runs on the sending CPU, so
//! these are rates of the whole kernel path, not of the port alone.

use nfv_afpacket::AfPacketConfig;
use nfv_mem::{Batch, HugepageMode, Mapping, MemoryConfig, PacketPool, PoolCache, Populate};
use nfv_ports::{PortConfig, PortKind};
use nfv_testutil::netns::{Netns, Veth};
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

const WARMUP: Duration = Duration::from_millis(500);
const OTHER_MAC: [u8; 6] = [0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let seconds: f64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(3.0);
    let size: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(64);
    let rounds: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(3).max(1);
    if let Some(why) = nfv_testutil::netns::unavailable() {
        eprintln!("afpacket_rate: cannot run: {why}");
        std::process::exit(2);
    }
    let ns = Netns::new("nar").expect("netns");
    let veth = Veth::into_ns(&ns, "10.79.0.2/24").expect("veth");
    let window = Duration::from_secs_f64(seconds);
    println!(
        "AF_PACKET on veth, {size} B frames, {seconds} s per measurement, {} CPUs",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let (mut rx, mut tx, mut ring) = (Vec::new(), Vec::new(), Vec::new());
    let mut drain = Vec::new();
    for r in 1..=rounds {
        println!("round {r}:");
        rx.push(rx_rate(&ns, &veth, size, window));
        drain.push(rx_drain(&ns, &veth, size));
        let (t, g) = tx_rate(&ns, &veth, size, window);
        tx.push(t);
        ring.push(g);
    }
    println!(
        "median of {rounds}: rx {:.3} Mpps, rx drain {:.3} Mpps, tx (sendmmsg) {:.3} Mpps, \
         tx (PACKET_TX_RING) {:.3} Mpps",
        median(&mut rx),
        median(&mut drain),
        median(&mut tx),
        median(&mut ring)
    );
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn pin(cpu: usize) {
    // SAFETY: cpu_set_t is plain data; CPU_SET writes inside it;
    // sched_setaffinity(0) affects the calling thread only.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set);
    }
}

fn pool() -> (Arc<PacketPool>, PoolCache) {
    let pool = PacketPool::new(
        "afpacket-rate",
        &MemoryConfig {
            frame_size: 2048,
            frames: 32768,
            hugepages: HugepageMode::Auto,
        },
    )
    .expect("pool");
    let cache = pool.cache();
    (pool, cache)
}

fn test_frame(dst: [u8; 6], size: usize) -> Vec<u8> {
    let mut f = vec![0u8; size];
    f[..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&[0x02, 0x5e, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
    f
}

fn packet_socket() -> OwnedFd {
    // SAFETY: plain socket call, checked below.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    assert!(fd >= 0, "socket: {}", io::Error::last_os_error());
    // SAFETY: a fresh descriptor nothing else owns.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

fn set_int(fd: &OwnedFd, level: libc::c_int, opt: libc::c_int, v: libc::c_int) {
    // SAFETY: a valid int option value.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            opt,
            (&v as *const libc::c_int).cast(),
            4,
        )
    };
    assert_eq!(r, 0, "setsockopt {opt}: {}", io::Error::last_os_error());
}

fn bind(fd: &OwnedFd, iface: &str) {
    let idx = nfv_netdev::index(iface).expect("ifindex");
    // SAFETY: all-zero sockaddr_ll is valid.
    let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sa.sll_family = libc::AF_PACKET as u16;
    sa.sll_ifindex = idx as i32;
    // SAFETY: a valid address of the size passed.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sa as *const libc::sockaddr_ll).cast(),
            size_of::<libc::sockaddr_ll>() as u32,
        )
    };
    assert_eq!(r, 0, "bind: {}", io::Error::last_os_error());
}

/// The namespace's traffic source: sendmmsg of 32 frames per call until
/// `stop` or `limit` frames, counting frames the kernel took.
fn ns_sender(
    ns: String,
    iface: String,
    size: usize,
    limit: u64,
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
) {
    let file = std::fs::File::open(format!("/run/netns/{ns}")).expect("netns file");
    // SAFETY: setns on a namespace fd held open; affects this thread only.
    let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(r, 0, "setns: {}", io::Error::last_os_error());
    pin(0);
    let fd = packet_socket();
    set_int(&fd, libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, 1);
    bind(&fd, &iface);
    let frame = test_frame(OTHER_MAC, size);
    let mut iov: Vec<libc::iovec> = (0..32)
        .map(|_| libc::iovec {
            iov_base: frame.as_ptr() as *mut libc::c_void,
            iov_len: frame.len(),
        })
        .collect();
    // SAFETY: mmsghdr is plain data; all-zero is valid.
    let mut msgs: Vec<libc::mmsghdr> = (0..32).map(|_| unsafe { std::mem::zeroed() }).collect();
    for (m, v) in msgs.iter_mut().zip(iov.iter_mut()) {
        m.msg_hdr.msg_iov = v;
        m.msg_hdr.msg_iovlen = 1;
    }
    while !stop.load(Relaxed) && sent.load(Relaxed) < limit {
        // SAFETY: 32 initialised headers pointing at `frame`, alive here.
        let r =
            unsafe { libc::sendmmsg(fd.as_raw_fd(), msgs.as_mut_ptr(), 32, libc::MSG_DONTWAIT) };
        if r > 0 {
            sent.fetch_add(r as u64, Relaxed);
        }
    }
}

fn info(port: &dyn nfv_ports::Port, key: &str) -> String {
    port.gauges().text(key).unwrap_or_default()
}

/// Returns the rx Mpps.
fn rx_rate(ns: &Netns, veth: &Veth, size: usize, window: Duration) -> f64 {
    pin(1);
    let cfg = PortConfig {
        name: "ap0".into(),
        id: 1,
        rxqs: 1,
        kind: PortKind::typed(AfPacketConfig::new(&veth.host)),
    };
    let port = nfv_afpacket::open(&cfg).unwrap_or_else(|e| panic!("{e}"));
    let mut rxq = port.open_rxq(0);
    let (_pool, mut cache) = pool();
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let sender = {
        let (ns, iface, stop, sent) = (
            ns.name().to_string(),
            veth.inner.clone(),
            stop.clone(),
            sent.clone(),
        );
        std::thread::spawn(move || ns_sender(ns, iface, size, u64::MAX, stop, sent))
    };
    let mut batch = Batch::new();
    let mut got = 0u64;
    let mut polls = 0u64;
    let mut empty = 0u64;
    let t0 = Instant::now();
    let mut mark: Option<(Instant, u64, u64, u64, u64)> = None;
    let mut drops0 = 0;
    // Longest gap between two rounds of polls in the window: a PMD that
    // was descheduled (a busy machine) shows here.
    let mut stall = Duration::ZERO;
    let mut prev = t0;
    loop {
        let now = Instant::now();
        if mark.is_some() {
            stall = stall.max(now - prev);
        }
        prev = now;
        if mark.is_none() && now - t0 >= WARMUP {
            mark = Some((now, got, sent.load(Relaxed), polls, empty));
            drops0 = info(&*port, "kernel_drops").parse::<u64>().unwrap_or(0);
        }
        if let Some((m, _, _, _, _)) = mark
            && now - m >= window
        {
            break;
        }
        for _ in 0..64 {
            let n = rxq.rx_burst(&mut batch, &mut cache);
            polls += 1;
            if n == 0 {
                empty += 1;
            }
            got += n as u64;
            cache.free_batch(&mut batch);
        }
    }
    let (m, got0, sent0, polls0, empty0) = mark.expect("warm-up");
    let secs = m.elapsed().as_secs_f64();
    let sent1 = sent.load(Relaxed);
    stop.store(true, Relaxed);
    sender.join().expect("sender");
    let rx = (got - got0) as f64 / secs / 1e6;
    let offered = (sent1 - sent0) as f64 / secs / 1e6;
    let drops = info(&*port, "kernel_drops").parse::<u64>().unwrap_or(0) - drops0;
    println!(
        "  rx: {rx:.3} Mpps received by the port (sender offered {offered:.3} Mpps; \
         {:.2}% of {} polls empty, longest stall {:.1} ms; kernel ring drops in the window \
         {drops}, ring freezes since open {})",
        100.0 * (empty - empty0) as f64 / (polls - polls0).max(1) as f64,
        polls - polls0,
        stall.as_secs_f64() * 1e3,
        info(&*port, "kernel_ring_freezes"),
    );
    rx
}

/// Fills the ring without polling, then times draining it. Returns Mpps.
fn rx_drain(ns: &Netns, veth: &Veth, size: usize) -> f64 {
    pin(1);
    let mut ap = AfPacketConfig::new(&veth.host);
    ap.ring_size = 65536;
    let cfg = PortConfig {
        name: "ap0".into(),
        id: 1,
        rxqs: 1,
        kind: PortKind::typed(ap),
    };
    let port = nfv_afpacket::open(&cfg).unwrap_or_else(|e| panic!("{e}"));
    let mut rxq = port.open_rxq(0);
    let (_pool, mut cache) = pool();
    // Frames of up to 128 B take 160..208 bytes of ring each.
    let n = 400_000u64;
    let sent = Arc::new(AtomicU64::new(0));
    {
        let (ns, iface, sent) = (ns.name().to_string(), veth.inner.clone(), sent.clone());
        let stop = Arc::new(AtomicBool::new(false));
        std::thread::spawn(move || ns_sender(ns, iface, size, n, stop, sent))
            .join()
            .expect("sender");
    }
    // Let the retire timer hand over the last block.
    std::thread::sleep(Duration::from_millis(20));
    let mut batch = Batch::new();
    let mut got = 0u64;
    let t0 = Instant::now();
    let mut last = t0;
    loop {
        let k = rxq.rx_burst(&mut batch, &mut cache);
        cache.free_batch(&mut batch);
        if k > 0 {
            got += k as u64;
            last = Instant::now();
        } else if last.elapsed() > Duration::from_millis(5) {
            break;
        }
    }
    let secs = (last - t0).as_secs_f64();
    let mpps = got as f64 / secs / 1e6;
    println!(
        "  rx drain: {mpps:.3} Mpps ({got} of {} frames in {:.1} ms; kernel drops {})",
        sent.load(Relaxed),
        secs * 1e3,
        info(&*port, "kernel_drops")
    );
    mpps
}

fn peer_rx_packets(ns: &Netns, iface: &str) -> u64 {
    ns.run(&[
        "cat",
        &format!("/sys/class/net/{iface}/statistics/rx_packets"),
    ])
    .expect("peer statistics")
    .trim()
    .parse()
    .expect("a number")
}

/// Runs `send` (a burst of 32 fresh packets each) for `window` after the
/// warm-up; returns (Mpps counted by the peer, Mpps the queue accepted).
fn tx_loop(
    ns: &Netns,
    veth: &Veth,
    size: usize,
    window: Duration,
    mut send: impl FnMut(&mut Batch, &mut PoolCache) -> usize,
) -> (f64, f64) {
    let (_pool, mut cache) = pool();
    let frame = test_frame(OTHER_MAC, size);
    let mut batch = Batch::new();
    let mut accepted = 0u64;
    let t0 = Instant::now();
    let mut run_until = |until: Instant, accepted: &mut u64| {
        while Instant::now() < until {
            for _ in 0..64 {
                while !batch.is_full() {
                    let mut p = cache.alloc().expect("pool");
                    let _ = p.set_len(frame.len());
                    p.data_mut().copy_from_slice(&frame);
                    batch.push(p);
                }
                *accepted += send(&mut batch, &mut cache) as u64;
                cache.free_batch(&mut batch);
            }
        }
    };
    run_until(t0 + WARMUP, &mut accepted);
    let (a0, p0, m) = (accepted, peer_rx_packets(ns, &veth.inner), Instant::now());
    run_until(m + window, &mut accepted);
    let secs = m.elapsed().as_secs_f64();
    let p1 = peer_rx_packets(ns, &veth.inner);
    (
        (p1 - p0) as f64 / secs / 1e6,
        (accepted - a0) as f64 / secs / 1e6,
    )
}

/// Returns the tx Mpps counted by the peer: (port, tx ring).
fn tx_rate(ns: &Netns, veth: &Veth, size: usize, window: Duration) -> (f64, f64) {
    pin(1);
    let cfg = PortConfig {
        name: "ap0".into(),
        id: 1,
        rxqs: 1,
        kind: PortKind::typed(AfPacketConfig::new(&veth.host)),
    };
    let port = nfv_afpacket::open(&cfg).unwrap_or_else(|e| panic!("{e}"));
    let mut txq = port.open_txq(0);
    let (port_peer, accepted) = tx_loop(ns, veth, size, window, |b, c| txq.tx_burst(b, c));
    let peer = port_peer;
    println!(
        "  tx (port, sendmmsg): {peer:.3} Mpps counted by the peer ({accepted:.3} Mpps accepted; \
         syscalls {}, busy {}, errors {})",
        info(&*port, "tx_syscalls"),
        info(&*port, "tx_busy"),
        info(&*port, "tx_errors"),
    );
    drop(txq);
    drop(port);
    let mut ring = TxRing::new(&veth.host);
    let (peer, accepted) = tx_loop(ns, veth, size, window, |b, c| ring.burst(b, c));
    println!(
        "  tx (PACKET_TX_RING, for comparison): {peer:.3} Mpps counted by the peer \
         ({accepted:.3} Mpps accepted; ring full {} times)",
        ring.full
    );
    (port_peer, peer)
}

/// A TPACKET_V2 tx ring with qdisc bypass: frames are copied into slots
/// marked SEND_REQUEST, then one `send()` makes the kernel transmit them.
struct TxRing {
    /// The ring, unmapped on drop (before `fd` is closed: fields drop in
    /// order).
    map: Mapping,
    fd: OwnedFd,
    frame_size: usize,
    frames: usize,
    next: usize,
    full: u64,
}

const TX_FRAME: usize = 2048;
const TX_FRAMES: usize = 1024;
/// Frame data offset in a TPACKET_V2 slot: TPACKET_ALIGN(sizeof(tpacket2_hdr)).
const TX_DATA: usize = 32;

impl TxRing {
    fn new(iface: &str) -> TxRing {
        let fd = packet_socket();
        set_int(
            &fd,
            libc::SOL_PACKET,
            libc::PACKET_VERSION,
            libc::tpacket_versions::TPACKET_V2 as libc::c_int,
        );
        set_int(&fd, libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, 1);
        let req = libc::tpacket_req {
            tp_block_size: (TX_FRAME * 32) as u32,
            tp_block_nr: (TX_FRAMES / 32) as u32,
            tp_frame_size: TX_FRAME as u32,
            tp_frame_nr: TX_FRAMES as u32,
        };
        // SAFETY: a valid tpacket_req of the size passed.
        let r = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_TX_RING,
                (&req as *const libc::tpacket_req).cast(),
                size_of::<libc::tpacket_req>() as u32,
            )
        };
        assert_eq!(r, 0, "PACKET_TX_RING: {}", io::Error::last_os_error());
        let len = TX_FRAME * TX_FRAMES;
        let map = Mapping::shared(fd.as_fd(), len, 0, Populate::Now)
            .unwrap_or_else(|e| panic!("mmap: {e}"));
        bind(&fd, iface);
        TxRing {
            map,
            fd,
            frame_size: TX_FRAME,
            frames: TX_FRAMES,
            next: 0,
            full: 0,
        }
    }

    fn burst(&mut self, batch: &mut Batch, cache: &mut PoolCache) -> usize {
        let mut queued = 0;
        for p in batch.drain(..) {
            // SAFETY: slot `next` lies inside the mapping; its header is a
            // 16-byte aligned tpacket2_hdr shared with the kernel, accessed
            // through volatile reads/writes of the status word.
            unsafe {
                let slot = self.map.as_ptr().add(self.next * self.frame_size);
                let hdr = slot.cast::<libc::tpacket2_hdr>();
                let status = std::ptr::addr_of_mut!((*hdr).tp_status);
                if std::ptr::read_volatile(status) != libc::TP_STATUS_AVAILABLE {
                    self.full += 1;
                    cache.free(p);
                    continue;
                }
                std::ptr::copy_nonoverlapping(p.data_ptr(), slot.add(TX_DATA), p.len());
                (*hdr).tp_len = p.len() as u32;
                std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
                std::ptr::write_volatile(status, libc::TP_STATUS_SEND_REQUEST);
            }
            cache.free(p);
            queued += 1;
            self.next = (self.next + 1) % self.frames;
        }
        // SAFETY: a send with no data kicks the kernel to transmit the
        // slots marked SEND_REQUEST.
        let r = unsafe { libc::send(self.fd.as_raw_fd(), std::ptr::null(), 0, libc::MSG_DONTWAIT) };
        if r < 0 { 0 } else { queued }
    }
}
