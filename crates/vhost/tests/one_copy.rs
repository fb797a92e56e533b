//! One-copy forwarding through real vhost-user ports (sockets, memfds,
//! the protocol thread): frames a guest sends leave the rx queue split,
//! their TX chains stay unreturned until the burst ends, and a frontend
//! that stops the ring (GET_VRING_BASE) or replaces the memory table
//! while a burst still holds chains gets every chain back, exactly once,
//! after the packets were delivered byte for byte from the old mapping.

mod common;

use common::{Guest, GuestOpts, SwitchSide, cfg, connect, frame, sock, wait, wait_status};
use nfv_mem::Batch;
use nfv_vhost::VhostUserMode::Server;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use vhost::VhostBackend;

const LEN: usize = 1000;

/// Two guests on two ports: A sends, the switch forwards into B.
struct Pair {
    a: Guest,
    sa: SwitchSide,
    b: Guest,
    sb: SwitchSide,
}

fn pair(tag: &str) -> Pair {
    let (pa, pb) = (sock(&format!("{tag}-a")), sock(&format!("{tag}-b")));
    let sa = SwitchSide::open(&format!("{tag}-a"), &cfg(&pa, Server, 1, true), 1);
    let sb = SwitchSide::open(&format!("{tag}-b"), &cfg(&pb, Server, 1, true), 1);
    let a = Guest::setup(connect(&pa), &format!("{tag}-ga"), &GuestOpts::default());
    let b = Guest::setup(connect(&pb), &format!("{tag}-gb"), &GuestOpts::default());
    wait_status(&sa.port, "a enabled", |s| s.pairs_enabled == 1);
    wait_status(&sb.port, "b enabled", |s| s.pairs_enabled == 1);
    Pair { a, sa, b, sb }
}

/// Guest A posts `frames`; the switch takes them in one burst (split)
/// and holds it. Returns the burst.
fn take_held(p: &mut Pair, frames: &[Vec<u8>]) -> Batch {
    p.a.tx[0].reclaim_tx(&mut p.a.cache);
    assert!(!p.a.tx[0].has_used());
    assert_eq!(p.a.send(0, frames), frames.len());
    let mut b = Batch::new();
    wait("burst", || {
        p.sa.rxq[0].rx_burst(&mut b, &mut p.sa.cache);
        !b.is_empty()
    });
    assert_eq!(b.len(), frames.len(), "one burst takes every frame");
    assert!(b.iter().all(|p| p.is_split()), "{LEN} B frames leave split");
    assert!(!p.a.tx[0].has_used(), "chains held until the burst ends");
    b
}

/// Ends the held burst the way a PMD does: the packets go out (into B),
/// then the rx queue is told the burst is done.
fn deliver(p: &mut Pair, mut b: Batch) {
    let n = b.len();
    assert_eq!(p.sb.txq[0].tx_burst(&mut b, &mut p.sb.cache), n);
    p.sa.rxq[0].burst_done();
}

fn frames(k: u32) -> Vec<Vec<u8>> {
    (0..8).map(|i| frame(LEN, k * 100 + i)).collect()
}

fn received(g: &mut Guest, n: usize) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    wait("frames in B", || {
        got.extend(g.recv(0));
        got.len() >= n
    });
    got
}

#[test]
fn a_held_burst_is_returned_at_its_end_and_delivered_byte_exact() {
    let mut p = pair("oc-basic");
    let f = frames(1);
    let b = take_held(&mut p, &f);
    deliver(&mut p, b);
    assert!(p.a.tx[0].has_used(), "chains returned at burst end");
    assert_eq!(received(&mut p.b, f.len()), f);
    assert_eq!(p.sa.port.status().one_copy, f.len() as u64);
    // A drop: the packets are freed, the chains still come back.
    let mut b = take_held(&mut p, &frames(2));
    p.sa.cache.free_batch(&mut b);
    p.sa.rxq[0].burst_done();
    p.a.tx[0].reclaim_tx(&mut p.a.cache);
    assert_eq!(
        p.a.tx[0].outstanding(),
        0,
        "dropped packets' chains returned"
    );
}

/// GET_VRING_BASE on A's TX ring while a burst holds 8 of its chains: the
/// reply waits for the PMD, which ends the burst first; the base counts
/// every chain taken and each is in the used ring once.
#[test]
fn get_vring_base_while_a_burst_holds_chains() {
    let mut p = pair("oc-base");
    let f = frames(3);
    let b = take_held(&mut p, &f);
    let done = AtomicBool::new(false);
    let Pair { a, sa, b: gb, sb } = &mut p;
    let base = std::thread::scope(|s| {
        let fe = &mut a.fe;
        let done = &done;
        let t = s.spawn(move || {
            let r = fe.get_vring_base(1);
            done.store(true, Relaxed);
            r
        });
        // The PMD finishes its burst, then keeps polling (acks the stop).
        std::thread::sleep(std::time::Duration::from_millis(50));
        let mut b = b;
        assert_eq!(sb.txq[0].tx_burst(&mut b, &mut sb.cache), f.len());
        sa.rxq[0].burst_done();
        while !done.load(Relaxed) {
            sa.poll();
        }
        t.join().unwrap()
    })
    .expect("GET_VRING_BASE");
    assert_eq!(base, f.len() as u32, "every chain taken counted");
    assert_eq!(sa.port.status().ack_timeouts, 0);
    assert_eq!(received(gb, f.len()), f);
    // Each chain once: the driver gets all 8 back and no more.
    assert_eq!(a.tx[0].reclaim_tx(&mut a.cache), f.len());
    assert_eq!(a.tx[0].outstanding(), 0, "every chain returned");
    assert_eq!(a.tx[0].errors().total(), 0, "{:?}", a.tx[0].errors());
}

/// SET_MEM_TABLE from A while a burst holds its chains: the tails are
/// read from the old mapping (kept until the PMD lets go of the queue),
/// the chains come back, and traffic goes on under the new table.
#[test]
fn set_mem_table_while_a_burst_holds_chains() {
    let mut p = pair("oc-mem");
    let f = frames(4);
    let b = take_held(&mut p, &f);
    let done = AtomicBool::new(false);
    {
        let Pair { a, sa, b: gb, sb } = &mut p;
        let regions = a.regions();
        std::thread::scope(|s| {
            let fe = &mut a.fe;
            let done = &done;
            let t = s.spawn(move || {
                let r = fe.set_mem_table(&regions);
                done.store(true, Relaxed);
                r
            });
            std::thread::sleep(std::time::Duration::from_millis(50));
            let mut b = b;
            assert_eq!(sb.txq[0].tx_burst(&mut b, &mut sb.cache), f.len());
            sa.rxq[0].burst_done();
            while !done.load(Relaxed) {
                sa.poll();
            }
            t.join().unwrap().expect("SET_MEM_TABLE");
        });
        assert_eq!(received(gb, f.len()), f);
    }
    assert_eq!(p.sa.port.status().mem_table_errors, 0);
    // The ring runs on under the new table.
    let f2 = frames(5);
    let b = take_held(&mut p, &f2);
    deliver(&mut p, b);
    assert_eq!(received(&mut p.b, f2.len()), f2);
    p.a.tx[0].reclaim_tx(&mut p.a.cache);
    assert_eq!(p.a.tx[0].outstanding(), 0, "every chain returned");
}

/// Guest A shrinks the memfd behind its packet buffers while a burst
/// still borrows their tails: the receiving port's copy faults, the fault
/// is survived (zeros read), B gets frames of the right length with the
/// headers the switch copied, and A's rings are quarantined
/// (`memory_fault`) at its next poll.
#[test]
fn a_tail_in_memory_the_guest_took_away_is_survived() {
    use std::os::fd::AsRawFd;
    let mut p = pair("oc-shrink");
    let f = frames(6);
    let b = take_held(&mut p, &f);
    let (fd, len) = {
        let r = p.a.pool.region();
        (r.fd().as_raw_fd(), r.len() as libc::off_t)
    };
    // SAFETY: plain syscall on the guest's own memfd.
    assert_eq!(unsafe { libc::ftruncate(fd, 0) }, 0);
    deliver(&mut p, b);
    let got = received(&mut p.b, f.len());
    for (i, (g, w)) in got.iter().zip(&f).enumerate() {
        assert_eq!(g.len(), w.len(), "frame {i}: length");
        assert_eq!(
            &g[..nfv_mem::SPLIT_HEAD],
            &w[..nfv_mem::SPLIT_HEAD],
            "frame {i}: the copied head"
        );
    }
    p.sa.poll();
    wait_status(&p.sa.port, "A's memory fault", |s| {
        s.counter("memory_fault") >= 1 && s.quarantined().contains(&1)
    });
    assert!(p.sb.port.status().quarantined().is_empty(), "B unaffected");
    // Give the pages back (as zeros) so this process's own guest can be
    // torn down without touching vanished memory.
    // SAFETY: as above.
    assert_eq!(unsafe { libc::ftruncate(fd, len) }, 0);
}

/// A receiver that never drains (B posts no more buffers): what does not
/// fit is dropped at once and the sender's chains still come back at the
/// end of every burst, so A keeps transmitting — many times its ring's
/// worth — and never stalls on B.
#[test]
fn a_receiver_that_never_drains_does_not_hold_the_senders_chains() {
    let mut p = pair("oc-stuck");
    let ring = GuestOpts::default().size as usize;
    let mut delivered = 0;
    for k in 0..(4 * ring / 8) as u32 {
        let b = take_held(&mut p, &frames(100 + k));
        let mut b = b;
        delivered += p.sb.txq[0].tx_burst(&mut b, &mut p.sb.cache);
        p.sb.cache.free_batch(&mut b);
        p.sa.rxq[0].burst_done();
        p.a.tx[0].reclaim_tx(&mut p.a.cache);
        assert_eq!(p.a.tx[0].outstanding(), 0, "burst {k}: chains back");
    }
    assert!(delivered <= ring, "B's ring took {delivered} of {ring}");
    assert!(p.b.recv(0).len() == delivered, "B got what was delivered");
}

/// The sender dies (its socket and its own mappings gone, as after a
/// SIGKILL) while a burst borrows its buffers: the switch still maps the
/// memory, the frames reach B byte for byte, and A's port goes down cleanly.
#[test]
fn a_sender_that_dies_while_its_chains_are_held() {
    let mut p = pair("oc-kill");
    let f = frames(7);
    let b = take_held(&mut p, &f);
    let Pair {
        a,
        sa,
        b: mut gb,
        mut sb,
    } = p;
    drop(a);
    let mut b = b;
    assert_eq!(sb.txq[0].tx_burst(&mut b, &mut sb.cache), f.len());
    let mut sa = sa;
    sa.rxq[0].burst_done();
    assert_eq!(received(&mut gb, f.len()), f);
    wait("A down", || {
        sa.poll();
        let s = sa.port.status();
        !s.connected && s.pairs_enabled == 0
    });
    assert_eq!(sa.poll(), 0);
}
