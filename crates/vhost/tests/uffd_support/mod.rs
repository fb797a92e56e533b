//! Slow page faults on demand, with userfaultfd: the tests register a
//! range of a mapping *the switch* made (found in `/proc/self/maps`: the
//! switch runs in the test process) so that the first touch of a missing
//! page there blocks until the test lets it go — what a frontend's FUSE
//! file whose reads are never answered does to the thread touching it.
//!
//! Missing-page mode on shmem (memfd): a fault is raised for a page not in
//! the file yet, so the file must have a hole there and the test's own
//! side must not touch it while held. Faults are resolved with a zeroed
//! page (`UFFDIO_COPY`); closing the userfaultfd (drop) also wakes every
//! thread waiting, so a failing test does not leave the switch stuck.
#![allow(dead_code)]

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

// <linux/userfaultfd.h>, which the libc crate does not carry.
const UFFD_API: u64 = 0xaa;
const UFFD_USER_MODE_ONLY: libc::c_int = 1;
const UFFDIO_API: libc::c_ulong = 0xc018_aa3f;
const UFFDIO_REGISTER: libc::c_ulong = 0xc020_aa00;
const UFFDIO_COPY: libc::c_ulong = 0xc028_aa03;
const UFFDIO_REGISTER_MODE_MISSING: u64 = 1;
const UFFD_EVENT_PAGEFAULT: u8 = 0x12;

#[repr(C)]
struct UffdioApi {
    api: u64,
    features: u64,
    ioctls: u64,
}

#[repr(C)]
struct UffdioRegister {
    start: u64,
    len: u64,
    mode: u64,
    ioctls: u64,
}

#[repr(C)]
struct UffdioCopy {
    dst: u64,
    src: u64,
    len: u64,
    mode: u64,
    copy: i64,
}

/// `struct uffd_msg` (32 bytes): the event, and for a page fault its flags
/// and address.
#[repr(C)]
#[derive(Default)]
struct UffdMsg {
    event: u8,
    _reserved: [u8; 7],
    flags: u64,
    address: u64,
    _feat: u64,
}

const PAGE: u64 = 4096;

/// Where the first mapping of a file whose `/proc/self/maps` name contains
/// `name` starts, and its length.
pub fn find_mapping(name: &str) -> Option<(u64, u64)> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines().find(|l| l.contains(name)).map(|l| {
        let range = l.split_whitespace().next().unwrap();
        let (a, b) = range.split_once('-').unwrap();
        let a = u64::from_str_radix(a, 16).unwrap();
        let b = u64::from_str_radix(b, 16).unwrap();
        (a, b - a)
    })
}

/// A userfaultfd over one page: the first fault there is held until
/// [`SlowPage::release`] (or drop); any later fault is resolved at once.
pub struct SlowPage {
    /// Closing its last reference wakes any thread still waiting in a
    /// fault on the page (it then retries without us).
    uffd: Arc<OwnedFd>,
    release: Arc<AtomicBool>,
    faults: mpsc::Receiver<u64>,
    thread: Option<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
}

impl SlowPage {
    /// Registers the page at `addr` (page-aligned, in a shmem mapping with
    /// a hole there). `Err` with the reason when userfaultfd is unusable
    /// here (the caller prints SKIPPED).
    pub fn register(addr: u64) -> Result<SlowPage, String> {
        // SAFETY: plain syscall; the fd is taken over below.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_userfaultfd,
                libc::O_CLOEXEC | libc::O_NONBLOCK | UFFD_USER_MODE_ONLY,
            )
        };
        if fd < 0 {
            return Err(format!(
                "userfaultfd: {} (needs CAP_SYS_PTRACE or vm.unprivileged_userfaultfd = 1)",
                std::io::Error::last_os_error()
            ));
        }
        // SAFETY: a fresh fd we own.
        let uffd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        let mut api = UffdioApi {
            api: UFFD_API,
            features: 0,
            ioctls: 0,
        };
        ioctl(&uffd, UFFDIO_API, &mut api).map_err(|e| format!("UFFDIO_API: {e}"))?;
        let mut reg = UffdioRegister {
            start: addr,
            len: PAGE,
            mode: UFFDIO_REGISTER_MODE_MISSING,
            ioctls: 0,
        };
        ioctl(&uffd, UFFDIO_REGISTER, &mut reg)
            .map_err(|e| format!("UFFDIO_REGISTER (missing mode, shmem): {e}"))?;
        let uffd = Arc::new(uffd);
        let release = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, faults) = mpsc::channel();
        let (u, r, s) = (uffd.clone(), release.clone(), stop.clone());
        let thread = std::thread::spawn(move || serve(&u, &r, &s, &tx));
        Ok(SlowPage {
            uffd,
            release,
            faults,
            thread: Some(thread),
            stop,
        })
    }

    /// Waits (at most `timeout`) until a thread faulted on the page and is
    /// being held; returns the faulting address.
    pub fn wait_fault(&self, timeout: Duration) -> Option<u64> {
        self.faults.recv_timeout(timeout).ok()
    }

    /// Resolves the held fault (a zeroed page) and every later one.
    pub fn release(&self) {
        self.release.store(true, Release);
    }
}

impl Drop for SlowPage {
    fn drop(&mut self) {
        self.release();
        self.stop.store(true, Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn ioctl<T>(fd: &OwnedFd, req: libc::c_ulong, arg: &mut T) -> std::io::Result<()> {
    // SAFETY: `arg` is the struct `req` reads and writes.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), req, arg as *mut T) };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// The fault thread: reports each fault; resolves it once released.
fn serve(uffd: &OwnedFd, release: &AtomicBool, stop: &AtomicBool, tx: &mpsc::Sender<u64>) {
    let zero = vec![0u8; PAGE as usize];
    let mut pending: Vec<u64> = Vec::new();
    while !stop.load(Acquire) || !pending.is_empty() {
        let mut pfd = libc::pollfd {
            fd: uffd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut pfd, 1, 10) };
        let mut msg = UffdMsg::default();
        // SAFETY: reads at most one message into `msg`.
        let n = unsafe {
            libc::read(
                uffd.as_raw_fd(),
                (&mut msg as *mut UffdMsg).cast(),
                std::mem::size_of::<UffdMsg>(),
            )
        };
        if n == std::mem::size_of::<UffdMsg>() as isize && msg.event == UFFD_EVENT_PAGEFAULT {
            let page = msg.address & !(PAGE - 1);
            let _ = tx.send(msg.address);
            pending.push(page);
        }
        if release.load(Acquire) {
            for page in pending.drain(..) {
                let mut c = UffdioCopy {
                    dst: page,
                    src: zero.as_ptr() as u64,
                    len: PAGE,
                    mode: 0,
                    copy: 0,
                };
                // EEXIST: another fault on the page filled it already.
                let _ = ioctl(uffd, UFFDIO_COPY, &mut c);
            }
        }
    }
}
