//! Kernel-side traffic for benchmarking ports on kernel interfaces
//! (AF_XDP, AF_PACKET), reusable by any such port type:
//!
//! * [`Wire`]: a veth pair, the switch's end on the host, the peer end in
//!   a fresh network namespace; both removed on drop.
//! * [`Sender`]: a thread that entered the namespace and blasts one frame
//!   out of the peer end as fast as it can — an AF_PACKET socket with
//!   `PACKET_QDISC_BYPASS`, 64 frames per `sendmmsg` — so the port under
//!   test receives it.
//! * [`NsCounters`]: the peer end's kernel counters (what it received
//!   from the port under test), read without spawning anything.
//!
//! Network namespaces are per thread: a thread that did `setns` makes its
//! sockets in that namespace, and files it opens under `/proc/thread-self/net`
//! keep showing that namespace to whoever reads them later.

use nfv_testutil::netns::{Netns, Veth};
use std::fs::File;
use std::io::{self, Read, Seek};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::thread::JoinHandle;

/// `PACKET_QDISC_BYPASS` (linux/if_packet.h): straight to the driver.
const PACKET_QDISC_BYPASS: libc::c_int = 20;
/// Frames per `sendmmsg`.
const SEND_BATCH: usize = 64;

/// A veth pair with its peer end in a namespace.
pub struct Wire {
    // Drop order: the pair before its namespace.
    pub veth: Veth,
    pub ns: Netns,
}

impl Wire {
    pub fn new() -> Result<Wire, String> {
        if let Some(why) = nfv_testutil::netns::unavailable() {
            return Err(format!("cannot build a veth test wire: {why}"));
        }
        let ns = Netns::new("nbk")?;
        let veth = Veth::into_ns(&ns, "10.78.0.2/24")?;
        Ok(Wire { veth, ns })
    }

    /// The switch's end (host namespace).
    pub fn host(&self) -> &str {
        &self.veth.host
    }
}

/// Moves the calling thread into namespace `ns`.
pub fn enter_netns(ns: &str) -> Result<(), String> {
    let path = format!("/var/run/netns/{ns}");
    let f = File::open(&path).map_err(|e| format!("{path}: {e}"))?;
    nix::sched::setns(&f, nix::sched::CloneFlags::CLONE_NEWNET)
        .map_err(|e| format!("setns {path}: {e}"))
}

/// Pins the calling thread to `cpu`.
pub fn pin(cpu: usize) -> Result<(), String> {
    let mut set = nix::sched::CpuSet::new();
    set.set(cpu).map_err(|e| format!("cpu {cpu}: {e}"))?;
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
        .map_err(|e| format!("pinning to cpu {cpu}: {e}"))
}

/// An AF_PACKET socket that only sends, bound to `iface`, bypassing the
/// qdisc. Call inside the namespace that has `iface`.
fn send_socket(iface: &str) -> Result<OwnedFd, String> {
    let ifindex = nfv_netdev::index(iface).map_err(|e| e.to_string())?;
    // Protocol 0: the socket receives nothing.
    // SAFETY: plain socket(2); checked before use.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(format!("AF_PACKET socket: {}", io::Error::last_os_error()));
    }
    // SAFETY: a fresh descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let one: libc::c_int = 1;
    // SAFETY: `one` is a valid int of the size passed.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            PACKET_QDISC_BYPASS,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(format!(
            "PACKET_QDISC_BYPASS: {}",
            io::Error::last_os_error()
        ));
    }
    // SAFETY: all-zero is a valid sockaddr_ll.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_ifindex = ifindex as i32;
    // SAFETY: `sll` is a valid sockaddr_ll of the size passed.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(format!(
            "binding to {iface}: {}",
            io::Error::last_os_error()
        ));
    }
    Ok(fd)
}

/// Sends `frame` out of `iface` in namespace `ns` until stopped.
pub struct Sender {
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
    thread: Option<JoinHandle<Result<(), String>>>,
}

impl Sender {
    /// Starts the sender thread (pinned to `cpu` if given); returns once
    /// its socket is open.
    pub fn start(
        ns: &str,
        iface: &str,
        frame: Vec<u8>,
        cpu: Option<usize>,
    ) -> Result<Sender, String> {
        Self::start_paced(ns, iface, frame, cpu, None)
    }

    /// Like [`Sender::start`], at most `pps` frames per second when given
    /// (it sleeps between batches once ahead of the schedule, leaving its
    /// CPU to others: a VNF sharing it).
    pub fn start_paced(
        ns: &str,
        iface: &str,
        frame: Vec<u8>,
        cpu: Option<usize>,
        pps: Option<f64>,
    ) -> Result<Sender, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (ns, iface) = (ns.to_string(), iface.to_string());
        let (stop2, sent2) = (stop.clone(), sent.clone());
        let thread = std::thread::Builder::new()
            .name("ns-sender".into())
            .spawn(move || {
                let setup = (|| {
                    if let Some(c) = cpu {
                        pin(c)?;
                    }
                    enter_netns(&ns)?;
                    send_socket(&iface)
                })();
                let fd = match setup {
                    Ok(fd) => {
                        let _ = ready_tx.send(Ok(()));
                        fd
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.clone()));
                        return Err(e);
                    }
                };
                send_loop(&fd, &frame, &stop2, &sent2, pps)
            })
            .map_err(|e| format!("spawning the sender: {e}"))?;
        let mut s = Sender {
            stop,
            sent,
            thread: Some(thread),
        };
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(s),
            Ok(Err(e)) => {
                s.thread.take().map(|t| t.join());
                Err(e)
            }
            Err(_) => Err("the sender thread died".into()),
        }
    }

    /// Frames sent so far.
    pub fn sent(&self) -> u64 {
        self.sent.load(Relaxed)
    }

    /// Stops the thread; its error, if it failed while sending.
    pub fn stop(mut self) -> Result<u64, String> {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().map_err(|_| "sender panicked".to_string())??;
        }
        Ok(self.sent())
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn send_loop(
    fd: &OwnedFd,
    frame: &[u8],
    stop: &AtomicBool,
    sent: &AtomicU64,
    pps: Option<f64>,
) -> Result<(), String> {
    let t0 = std::time::Instant::now();
    // One iovec and message header per slot, all pointing at `frame`.
    let iov = libc::iovec {
        iov_base: frame.as_ptr() as *mut libc::c_void,
        iov_len: frame.len(),
    };
    // SAFETY: all-zero is a valid mmsghdr.
    let mut msgs: Vec<libc::mmsghdr> = (0..SEND_BATCH)
        .map(|_| unsafe { std::mem::zeroed() })
        .collect();
    for m in &mut msgs {
        m.msg_hdr.msg_iov = &iov as *const libc::iovec as *mut libc::iovec;
        m.msg_hdr.msg_iovlen = 1;
    }
    let mut total = 0u64;
    let mut errors = 0u64;
    while !stop.load(Relaxed) {
        if let Some(rate) = pps {
            let due = total as f64 / rate;
            let now = t0.elapsed().as_secs_f64();
            if due > now {
                std::thread::sleep(std::time::Duration::from_secs_f64((due - now).min(0.01)));
                continue;
            }
        }
        // SAFETY: `msgs` holds SEND_BATCH valid headers whose iovec points
        // at `frame`, all alive across the call; the kernel only reads them
        // (and writes `msg_len`).
        let r = unsafe { libc::sendmmsg(fd.as_raw_fd(), msgs.as_mut_ptr(), SEND_BATCH as u32, 0) };
        if r > 0 {
            total += r as u64;
            sent.store(total, Relaxed);
        } else {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                // The peer's queue is full: try again.
                Some(libc::ENOBUFS) | Some(libc::EAGAIN) | Some(libc::EBUSY) => {
                    errors += 1;
                    std::hint::spin_loop();
                }
                _ => {
                    return Err(format!(
                        "sendmmsg: {e} (after {total} frames, {errors} busy)"
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Counters of an interface inside a namespace, from that namespace's
/// `/proc/net/dev` (opened once from a thread inside it).
pub struct NsCounters {
    file: File,
    iface: String,
}

impl NsCounters {
    pub fn open(ns: &str, iface: &str) -> Result<NsCounters, String> {
        let ns = ns.to_string();
        let file = std::thread::spawn(move || -> Result<File, String> {
            enter_netns(&ns)?;
            File::open("/proc/thread-self/net/dev")
                .map_err(|e| format!("/proc/net/dev in {ns}: {e}"))
        })
        .join()
        .map_err(|_| "namespace thread panicked".to_string())??;
        Ok(NsCounters {
            file,
            iface: iface.to_string(),
        })
    }

    /// Packets the interface received.
    pub fn rx_packets(&mut self) -> Result<u64, String> {
        self.field(1)
    }

    /// Packets the interface dropped on receive.
    pub fn rx_dropped(&mut self) -> Result<u64, String> {
        self.field(3)
    }

    /// Column `i` of the interface's line (0 = rx bytes, 1 = rx packets,
    /// 2 = rx errs, 3 = rx drop, …, 8 = tx bytes, 9 = tx packets).
    fn field(&mut self, i: usize) -> Result<u64, String> {
        let mut s = String::new();
        self.file
            .rewind()
            .and_then(|_| self.file.read_to_string(&mut s))
            .map_err(|e| format!("reading /proc/net/dev: {e}"))?;
        let line = s
            .lines()
            .find_map(|l| {
                let (name, rest) = l.split_once(':')?;
                (name.trim() == self.iface).then_some(rest)
            })
            .ok_or_else(|| format!("{} not in the namespace's /proc/net/dev", self.iface))?;
        line.split_whitespace()
            .nth(i)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("bad /proc/net/dev line for {}: {line}", self.iface))
    }
}
