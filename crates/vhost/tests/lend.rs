//! Lending a guest's receive buffers through a real vhost-user port
//! (`nfv_virtio::lend`, vhost-user's side in `nfv_vhost`'s `lend.rs`): the
//! port type adds the port to the node's lenders; a borrower claims the
//! ring, lends buffers, fills
//! some; the frontend then stops the ring (GET_VRING_BASE), replaces the
//! memory table or only the call fd. The borrower must be revoked before
//! the ring changes memory or stops — and not for a new call fd — and
//! every lent buffer must reach the guest exactly once: completed in
//! place with its frame, or empty.

mod common;

use common::{Guest, GuestOpts, SwitchSide, cfg, connect, frame, sock, wait_status};
use nfv_mem::Batch;
use nfv_ports::Port;
use nfv_vhost::VhostUserMode::Server;
use nfv_virtio::Lent;
use nfv_virtio::lend::{Borrower, Lender, Lenders};
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use vhost::VhostBackend;
use vmm_sys_util::eventfd::EventFd;

/// Counts revokes.
#[derive(Default)]
struct Probe(AtomicUsize);

impl Borrower for Probe {
    fn revoke(&self) {
        self.0.fetch_add(1, SeqCst);
    }
}

struct Rig {
    g: Guest,
    sw: SwitchSide,
    lender: Lender,
    probe: Arc<Probe>,
}

fn rig(tag: &str) -> Rig {
    let path = sock(tag);
    let sw = SwitchSide::open(tag, &cfg(&path, Server, 1, true), 1);
    let lender = sw.port.lender();
    let probe = Arc::new(Probe::default());
    lender.claim(0, probe.clone()).expect("claim");
    let g = Guest::setup(connect(&path), &format!("{tag}-g"), &GuestOpts::default());
    wait_status(&sw.port, "enabled", |s| s.pairs_enabled == 1);
    Rig {
        g,
        sw,
        lender,
        probe,
    }
}

/// Lends the first `n` posted buffers: their loans and the lease tag.
fn lend(r: &Rig, n: usize) -> (u32, Vec<Lent>) {
    let lease = r.lender.lease(0).expect("lease");
    let got = r
        .lender
        .with_ring(0, lease.tag, |dq| {
            let pending = dq.lend_pending() as usize;
            assert!(pending >= n, "{pending} buffers posted");
            let v: Vec<Lent> = (0..n as u16).map(|k| dq.lend_peek(k).unwrap()).collect();
            dq.lend_take(&v);
            v
        })
        .expect("ring runs");
    (lease.tag, got)
}

/// Writes `f` after the header of lent buffer `l` (as the kernel would).
fn fill_buffer(r: &Rig, l: &Lent, f: &[u8]) -> NonNull<u8> {
    let lease = r.lender.lease(0).unwrap();
    let p = lease.mem.translate(l.gpa, l.len as usize).unwrap();
    // SAFETY: the lent buffer is `l.len` bytes of guest memory, larger
    // than header + frame here.
    unsafe { std::ptr::copy_nonoverlapping(f.as_ptr(), p.add(12), f.len()) };
    NonNull::new(p).unwrap()
}

/// The port type adds each port it opens to the node's lenders, and only
/// that node's: a borrower finds it by name while it is open, and not
/// once it is removed.
#[test]
fn the_port_type_adds_the_port_to_the_nodes_lenders() {
    use nfv_ports::{NoRoutes, OpenContext, PortConfig, PortFactory, PortKind, PortType, Routes};
    let path = sock("lend-dir");
    let lenders: Arc<Lenders> = Arc::default();
    let other: Arc<Lenders> = Arc::default();
    let routes: Arc<dyn Routes> = Arc::new(NoRoutes);
    let memory = nfv_mem::MemoryConfig::default();
    let factory = PortFactory::new();
    let cx = OpenContext {
        memory: &memory,
        factory: &factory,
        routes: &routes,
        lenders: &lenders,
    };
    let pc = PortConfig {
        name: "vnf-dir".into(),
        id: 3,
        rxqs: 2,
        kind: PortKind::typed(cfg(&path, Server, 2, true)),
    };
    assert!(lenders.find("vnf-dir").is_none(), "not before it opens");
    let port = nfv_vhost::VHOST_USER.open(&pc, &cx).expect("open");
    let l = lenders.find("vnf-dir").expect("found by name");
    assert_eq!((l.name(), l.pairs(), l.is_closed()), ("vnf-dir", 2, false));
    assert!(other.find("vnf-dir").is_none(), "another node's lenders");
    assert!(lenders.find("vnf").is_none());
    drop(port);
    assert!(l.is_closed(), "a lender outliving its port sees it closed");
    assert!(lenders.find("vnf-dir").is_none(), "removed: not found");
    assert!(l.lease(0).is_err(), "its rings stopped");
}

#[test]
fn the_port_stops_offering_in_order_once_claimed() {
    let r = rig("lend-feat");
    let offered = r.g.fe.get_features().unwrap();
    assert_eq!(offered & nfv_virtio::layout::VIRTIO_F_IN_ORDER, 0);
}

#[test]
fn packets_over_lent_buffers_are_completed_in_place_or_given_back() {
    let mut r = rig("lend-pkts");
    let (tag, lent) = lend(&r, 4);
    let owner = r.lender.owner_id().unwrap();
    let frames: Vec<Vec<u8>> = (0..4).map(|i| frame(100 + 300 * i, i as u32)).collect();
    let mut b = Batch::new();
    for (l, f) in lent.iter().zip(&frames) {
        let host = fill_buffer(&r, l, f);
        // SAFETY: `host` is the lent buffer in the lease's memory (mapped
        // while the port runs); header + frame fit.
        b.push(unsafe { r.lender.packet(owner, 0, tag, l, host, 12, f.len()) });
    }
    // Frame 1 goes elsewhere (a drop): its buffer comes back empty.
    let dropped = b.remove(1);
    r.sw.cache.free(dropped);
    let n = b.len();
    assert_eq!(r.sw.txq[0].tx_burst(&mut b, &mut r.sw.cache), n);
    let got = r.g.recv(0);
    assert_eq!(
        got,
        vec![frames[0].clone(), frames[2].clone(), frames[3].clone()]
    );
    assert_eq!(
        r.g.rx[0].errors().short_used,
        1,
        "the dropped frame's buffer"
    );
    let info = r.sw.port.gauges();
    assert_eq!(info.count("zero_copy_packets"), Some(3));
    assert_eq!(info.count("zero_copy_returned"), Some(1));
}

#[test]
fn get_vring_base_revokes_and_returns_every_lent_buffer_first() {
    let mut r = rig("lend-stop");
    let (tag, lent) = lend(&r, 8);
    // Two were filled and completed; six are still lent.
    r.lender
        .with_ring(0, tag, |dq| {
            for l in &lent[..2] {
                assert!(dq.complete_lent(l.head, 60));
            }
            dq.publish();
        })
        .unwrap();
    assert_eq!(r.probe.0.load(SeqCst), 0);
    let base = r.g.fe.get_vring_base(0).unwrap();
    assert_eq!(r.probe.0.load(SeqCst), 1, "revoked before the answer");
    assert_eq!(base, 8, "the position counts the lent buffers");
    // Every lent buffer is in the used ring: 2 frames, 6 empty.
    let got = r.g.recv(0);
    assert_eq!(got.len(), 2);
    assert_eq!(r.g.rx[0].errors().short_used, 6);
    // The old lease is over: nothing can touch the ring through it.
    assert!(r.lender.with_ring(0, tag, |_| ()).is_none());
}

#[test]
fn a_new_call_fd_keeps_the_loan_and_a_new_memory_table_revokes_it() {
    let mut r = rig("lend-mem");
    let (tag, lent) = lend(&r, 4);
    let call = EventFd::new(libc::EFD_NONBLOCK).unwrap();
    r.g.fe.set_vring_call(0, &call).unwrap();
    r.g.eventfds.push(call);
    assert_eq!(
        r.probe.0.load(SeqCst),
        0,
        "same memory and rings: no revoke"
    );
    assert!(
        r.lender
            .with_ring(0, tag, |dq| dq.complete_lent(lent[0].head, 64))
            .unwrap(),
        "the rebuilt ring still knows the loan"
    );
    r.g.send_mem_table().unwrap();
    assert_eq!(r.probe.0.load(SeqCst), 1, "new memory: revoked");
    assert!(r.lender.with_ring(0, tag, |_| ()).is_none());
    r.g.recv(0);
    assert_eq!(r.g.rx[0].errors().short_used, 3, "the three still lent");
    // A new lease on the new memory works.
    let (tag2, again) = lend(&r, 2);
    assert_ne!(tag2, tag);
    assert_eq!(again.len(), 2);
}
