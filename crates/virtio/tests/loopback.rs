//! Driver ↔ device loopback in one process: frames round-trip byte-exact
//! in both directions under every feature combination we support, rings
//! wrap, notifications follow the spec, and a guest without buffers keeps
//! the switch's packets in the batch.

mod common;

use common::{Loopback, LoopbackCfg, frame};
use nfv_mem::Batch;
use nfv_virtio::layout::{
    VIRTIO_F_IN_ORDER as IN_ORDER, VIRTIO_F_VERSION_1 as V1, VIRTIO_NET_F_MRG_RXBUF as MRG,
    VIRTIO_RING_F_EVENT_IDX as EVIDX,
};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const SIZES: &[usize] = &[
    60, 61, 64, 65, 127, 128, 255, 1500, 1514, 1518, 1519, 2047, 2048, 4000, 8191, 8999, 9000,
];

fn frames(seed: u32) -> Vec<Vec<u8>> {
    SIZES
        .iter()
        .enumerate()
        .map(|(i, &l)| frame(l, seed + i as u32))
        .collect()
}

fn jumbo(features: u64, rx_buf_len: u32) -> Loopback {
    Loopback::new(LoopbackCfg {
        features,
        frame_size: 16384,
        frames: 1024,
        rx_buf_len,
        ..Default::default()
    })
}

#[test]
fn frames_of_60_to_9000_bytes_round_trip_in_both_directions_for_every_feature_set() {
    let sets = [
        0,
        V1,
        MRG,
        V1 | MRG,
        V1 | EVIDX,
        V1 | MRG | EVIDX,
        EVIDX,
        // TX chains come back one used entry per burst.
        V1 | IN_ORDER,
        V1 | MRG | EVIDX | IN_ORDER,
    ];
    for features in sets {
        // Whole-frame RX buffers, and (with MRG) 1536-byte buffers so big
        // frames are merged from several.
        let bufs: &[u32] = if features & MRG != 0 {
            &[0, 1536, 64]
        } else {
            &[0]
        };
        for &rx_buf_len in bufs {
            let mut l = jumbo(features, rx_buf_len);
            for round in 0..3 {
                let sent = frames(round * 100);
                let got = l.vnf_to_switch(&sent);
                assert_eq!(got, sent, "vnf→switch, features {features:#x}");
                let back = l.switch_to_vnf(&got);
                assert_eq!(
                    back, sent,
                    "switch→vnf, features {features:#x} buf {rx_buf_len}"
                );
            }
            assert_eq!(l.tx_dev.errors().total(), 0);
            assert_eq!(l.rx_dev.errors().total(), 0);
            assert_eq!(l.rx_drv.errors().total(), 0);
            assert_eq!(l.tx_drv.errors().total(), 0);
            let n = 3 * SIZES.len() as u64;
            assert_eq!(l.tx_dev.stats().packets, n);
            assert_eq!(l.rx_dev.stats().packets, n);
            assert_eq!(l.rx_drv.stats().rx_packets, n);
        }
    }
}

#[test]
fn without_mrg_a_packet_too_big_for_the_next_buffer_is_dropped_and_the_buffer_kept() {
    let mut l = jumbo(V1, 1536);
    l.rx_drv.refill_rx(&mut l.drv);
    let before = l.rx_dev.last_avail_idx();
    let mut b = Batch::new();
    for len in [100, 9000, 1524, 1525, 200] {
        let mut p = l.sw.alloc().unwrap();
        p.set_len(len).unwrap();
        p.data_mut().fill(len as u8);
        b.push(p);
    }
    assert_eq!(l.rx_dev.enqueue_burst(&mut b, &mut l.sw), 3);
    assert!(b.is_empty(), "dropped packets leave the batch too");
    assert_eq!(l.rx_dev.stats().no_room, 2, "9000 and 1525 (+12 > 1536)");
    assert_eq!(
        l.rx_dev.last_avail_idx().wrapping_sub(before),
        3,
        "one chain per delivered packet"
    );
    let mut got = Batch::new();
    l.rx_drv.receive_burst(&mut got, &mut l.drv);
    let lens: Vec<usize> = got.iter().map(|p| p.len()).collect();
    assert_eq!(lens, [100, 1524, 200]);
    l.drv.free_batch(&mut got);
}

#[test]
fn indexes_wrap_around_u16_over_many_bursts() {
    for features in [V1, V1 | MRG | EVIDX, V1 | IN_ORDER] {
        let mut l = Loopback::new(LoopbackCfg {
            size: 64,
            features,
            ..Default::default()
        });
        let mut seed = 0u32;
        // 70_000 frames each way: every free-running index passes 65535.
        for _ in 0..(70_000 / 28) {
            let sent: Vec<Vec<u8>> = (0..28)
                .map(|i| {
                    seed += 1;
                    frame(60 + (seed as usize * 7 + i) % 1400, seed)
                })
                .collect();
            let got = l.vnf_to_switch(&sent);
            assert_eq!(got, sent);
            let back = l.switch_to_vnf(&got);
            assert_eq!(back, sent);
        }
        assert!(l.tx_dev.stats().packets > 65_536);
        assert_eq!(l.tx_dev.last_avail_idx(), l.tx_drv.avail_idx());
        let posted_ahead = l.rx_drv.avail_idx().wrapping_sub(l.rx_dev.last_avail_idx());
        assert_eq!(posted_ahead as usize, l.rx_drv.outstanding());
        assert_eq!(l.rx_drv.errors().total() + l.rx_dev.errors().total(), 0);
        assert_eq!(l.tx_drv.errors().total() + l.tx_dev.errors().total(), 0);
    }
}

fn switch_batch(l: &mut Loopback, lens: &[usize]) -> Batch {
    let mut b = Batch::new();
    for (i, &len) in lens.iter().enumerate() {
        let mut p = l.sw.alloc().unwrap();
        p.set_len(len).unwrap();
        common::fill(p.data_mut(), i as u32);
        b.push(p);
    }
    b
}

#[test]
fn a_guest_without_rx_buffers_leaves_packets_in_the_batch() {
    let mut l = jumbo(V1 | MRG, 1536);
    let mut b = switch_batch(&mut l, &[64; 10]);
    assert_eq!(l.rx_dev.enqueue_burst(&mut b, &mut l.sw), 0);
    assert_eq!(b.len(), 10);
    assert_eq!(l.rx_dev.last_avail_idx(), 0);

    l.sw.free_batch(&mut b);

    // Four 1536-byte buffers (a ring of 4): three small packets fit, then
    // a 9000-byte one needs six and must not consume the fourth.
    let mut l = Loopback::new(LoopbackCfg {
        size: 4,
        features: V1 | MRG,
        frame_size: 16384,
        frames: 256,
        rx_buf_len: 1536,
        ..Default::default()
    });
    assert_eq!(l.rx_drv.refill_rx(&mut l.drv), 4);
    let mut b = switch_batch(&mut l, &[64, 65, 66, 9000, 67]);
    assert_eq!(l.rx_dev.enqueue_burst(&mut b, &mut l.sw), 3);
    let left: Vec<usize> = b.iter().map(|p| p.len()).collect();
    assert_eq!(
        left,
        [9000, 67],
        "stopped at the packet that does not fit, order kept"
    );
    assert_eq!(
        l.rx_dev.last_avail_idx(),
        3,
        "the fourth buffer is still available"
    );
    assert_eq!(l.rx_dev.stats().no_room, 0);
    l.sw.free_batch(&mut b);
}

fn eventfd() -> OwnedFd {
    // SAFETY: plain syscall; the fd is checked and then owned.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    assert!(fd >= 0);
    // SAFETY: fresh fd.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// The call eventfd's count once the notifier thread has written every
/// interrupt requested so far.
fn read_eventfd(fd: &OwnedFd) -> u64 {
    assert!(nfv_virtio::notify::flush(std::time::Duration::from_secs(5)));
    let mut v = 0u64;
    // SAFETY: reads 8 bytes into a local.
    let r = unsafe { libc::read(fd.as_raw_fd(), (&raw mut v).cast(), 8) };
    if r == 8 { v } else { 0 }
}

/// Delivers `n` 64-byte packets to the VNF; returns interrupts added.
fn deliver(l: &mut Loopback, n: usize) -> u64 {
    let before = l.rx_dev.stats().interrupts;
    let mut b = switch_batch(l, &vec![64; n]);
    assert_eq!(l.rx_dev.enqueue_burst(&mut b, &mut l.sw), n);
    // Interrupts are written by the notifier thread; waiting here keeps
    // one eventfd write per interrupting burst (no coalescing).
    assert!(nfv_virtio::notify::flush(std::time::Duration::from_secs(5)));
    l.rx_dev.stats().interrupts - before
}

fn harvest(l: &mut Loopback) -> usize {
    let mut got = Batch::new();
    let n = l.rx_drv.receive_burst(&mut got, &mut l.drv);
    l.drv.free_batch(&mut got);
    l.rx_drv.refill_rx(&mut l.drv);
    n
}

#[test]
fn interrupts_follow_no_interrupt_flag_without_event_idx() {
    let (fd, call) = {
        let fd = eventfd();
        let c = fd.try_clone().unwrap();
        (fd, c)
    };
    let mut l = Loopback::new(LoopbackCfg {
        rx_call: Some(call),
        ..Default::default()
    });
    l.rx_drv.refill_rx(&mut l.drv);
    // Poll mode (the default): never interrupted.
    assert_eq!(deliver(&mut l, 8), 0);
    assert_eq!(read_eventfd(&fd), 0);
    assert_eq!(harvest(&mut l), 8);
    // Interrupts on: once per burst that returned buffers.
    l.rx_drv.enable_interrupts();
    assert!(!l.rx_drv.has_used());
    assert_eq!(deliver(&mut l, 8), 1);
    assert!(l.rx_drv.has_used());
    assert_eq!(deliver(&mut l, 8), 1);
    assert_eq!(read_eventfd(&fd), 2, "one eventfd write per burst");
    assert_eq!(l.rx_dev.stats().interrupt_errors, 0);
    l.rx_drv.disable_interrupts();
    assert_eq!(deliver(&mut l, 8), 0);
}

/// A 64-entry EVENT_IDX loopback whose RX queue interrupts through the
/// eventfd returned with it.
fn event_idx_loopback() -> (OwnedFd, Loopback) {
    let fd = eventfd();
    let l = Loopback::new(LoopbackCfg {
        size: 64,
        features: V1 | EVIDX,
        rx_call: Some(fd.try_clone().unwrap()),
        ..Default::default()
    });
    (fd, l)
}

#[test]
fn interrupts_follow_used_event_with_event_idx() {
    let (fd, mut l) = event_idx_loopback();
    l.rx_drv.refill_rx(&mut l.drv);
    assert_eq!(deliver(&mut l, 4), 0, "poll mode");
    // Enabling before harvesting: used_event = 0 is already behind the
    // device, so no interrupt will come — the re-poll check says so.
    l.rx_drv.enable_interrupts();
    assert!(l.rx_drv.has_used(), "must re-poll instead of sleeping");
    assert_eq!(deliver(&mut l, 4), 0);
    assert_eq!(harvest(&mut l), 8);
    // used_event = 8 (the driver's next entry): the next burst crosses it.
    assert_eq!(deliver(&mut l, 4), 1);
    // Not harvested: used_event still 8, not crossed again.
    assert_eq!(deliver(&mut l, 4), 0);
    assert_eq!(harvest(&mut l), 8);
    assert_eq!(deliver(&mut l, 4), 1, "re-armed by harvesting");
    harvest(&mut l);
    // Disabled for good: no interrupt over a full wrap of the indexes.
    l.rx_drv.disable_interrupts();
    let mut irqs = 0;
    for _ in 0..(70_000 / 32) {
        irqs += deliver(&mut l, 32);
        harvest(&mut l);
    }
    assert_eq!(irqs, 0);
    l.rx_drv.enable_interrupts();
    assert_eq!(deliver(&mut l, 1), 1);
    assert_eq!(read_eventfd(&fd), 3);
}

/// `set_defer_interrupts`: a burst's interrupt check waits for the next
/// burst or `settle_interrupts`, and then covers everything published
/// since the last check — against the driver's `used_event` as it is
/// then (a driver that has already seen the entries and re-armed past
/// them is not woken).
#[test]
fn deferred_interrupt_checks_cover_every_burst_since_the_last() {
    let (fd, mut l) = event_idx_loopback();
    l.rx_dev.set_defer_interrupts(true);
    l.rx_drv.refill_rx(&mut l.drv);
    let settle = |l: &mut Loopback| {
        let before = l.rx_dev.stats().interrupts;
        l.rx_dev.settle_interrupts();
        l.rx_dev.stats().interrupts - before
    };
    // used_event = 0: the driver sleeps until entry 0 is used.
    l.rx_drv.enable_interrupts();
    assert_eq!(
        deliver(&mut l, 4),
        0,
        "published [0, 4): check left for later"
    );
    assert_eq!(settle(&mut l), 1, "[0, 4) crosses used_event 0");
    assert_eq!(settle(&mut l), 0, "nothing new published");
    assert_eq!(harvest(&mut l), 4);
    // used_event = 4. Published, then seen by the driver (re-armed to 8)
    // before the check runs: nobody sleeps on [4, 8).
    assert_eq!(deliver(&mut l, 4), 0);
    assert_eq!(harvest(&mut l), 4);
    assert_eq!(settle(&mut l), 0, "the driver already saw [4, 8)");
    // Two bursts, [8, 12) and [12, 16): the second burst checks the first
    // at its start, and its own check waits.
    assert_eq!(deliver(&mut l, 4), 0);
    assert_eq!(deliver(&mut l, 4), 1, "[8, 12) crosses used_event 8");
    assert_eq!(
        settle(&mut l),
        0,
        "[12, 16) does not: used_event is still 8"
    );
    // Off again: each burst checks at once.
    harvest(&mut l);
    l.rx_dev.set_defer_interrupts(false);
    assert_eq!(deliver(&mut l, 4), 1, "[16, 20) crosses used_event 16");
    assert_eq!(read_eventfd(&fd), 3);
    assert_eq!(l.rx_dev.stats().interrupt_errors, 0);
}

/// With deferred checks a TX queue holds every burst's chains (not only
/// those of split packets) until `complete_held`: their used entries go
/// back after the burst's packets are sent.
#[test]
fn deferred_tx_bursts_go_back_at_complete_held() {
    let mut l = Loopback::new(LoopbackCfg::default());
    l.tx_dev.set_defer_interrupts(true);
    for round in 0..3u16 {
        let mut b = Batch::new();
        for k in 0..2 {
            let mut p = l.drv.alloc().unwrap();
            p.set_len(60).unwrap();
            p.data_mut().copy_from_slice(&frame(60, k));
            b.push(p);
        }
        assert_eq!(l.tx_drv.transmit_burst(&mut b, &mut l.drv), 2);
        let mut got = Batch::new();
        assert_eq!(l.tx_dev.dequeue_burst(&mut got, &mut l.sw), 2);
        assert_eq!(
            l.tx_dev.used_position(),
            2 * round,
            "round {round}: returned early"
        );
        assert!(l.tx_dev.holds_chains());
        l.sw.free_batch(&mut got);
        l.tx_dev.complete_held();
        assert_eq!(l.tx_dev.used_position(), 2 * round + 2, "round {round}");
        assert!(!l.tx_dev.holds_chains());
    }
}

#[test]
fn without_a_call_fd_the_driver_is_never_interrupted() {
    let mut l = Loopback::new(LoopbackCfg::default());
    l.rx_drv.refill_rx(&mut l.drv);
    l.rx_drv.enable_interrupts();
    assert_eq!(deliver(&mut l, 8), 0, "no call fd: the driver polls");
    assert_eq!(harvest(&mut l), 8);
    // A call fd arriving later (VHOST_USER_SET_VRING_CALL) takes effect.
    let fd = eventfd();
    l.rx_dev.set_call(Some(fd.try_clone().unwrap()));
    assert_eq!(deliver(&mut l, 8), 1);
    assert_eq!(read_eventfd(&fd), 1);
}

#[test]
fn kicks_are_suppressed_in_poll_mode_and_requested_when_the_pmd_sleeps() {
    for features in [V1, V1 | EVIDX] {
        let mut l = Loopback::new(LoopbackCfg {
            size: 64,
            features,
            ..Default::default()
        });
        // Poll mode: no kick, across a wrap of the indexes.
        let mut kicks = 0;
        for i in 0..(70_000 / 32) {
            let sent: Vec<Vec<u8>> = (0..32).map(|j| frame(60, i * 32 + j)).collect();
            let mut b = Batch::new();
            for f in &sent {
                let mut p = l.drv.alloc().unwrap();
                p.set_len(f.len()).unwrap();
                p.data_mut().copy_from_slice(f);
                b.push(p);
            }
            l.tx_drv.transmit_burst(&mut b, &mut l.drv);
            kicks += l.tx_drv.needs_kick() as u32;
            let mut got = Batch::new();
            l.tx_dev.dequeue_burst(&mut got, &mut l.sw);
            l.sw.free_batch(&mut got);
        }
        assert_eq!(kicks, 0, "features {features:#x}");
        // The PMD goes to sleep: it wants a kick for the next post.
        l.tx_dev.set_kick_wanted(true);
        assert!(!l.tx_dev.has_avail());
        l.vnf_to_switch(&[frame(60, 1)]);
        // vnf_to_switch does not ask; post one more and ask.
        let mut b = Batch::new();
        let mut p = l.drv.alloc().unwrap();
        p.set_len(60).unwrap();
        b.push(p);
        assert!(!l.tx_drv.needs_kick() || features & EVIDX == 0);
        l.tx_drv.transmit_burst(&mut b, &mut l.drv);
        assert!(l.tx_drv.needs_kick(), "features {features:#x}");
        assert!(l.tx_dev.has_avail());
        assert!(!l.tx_drv.needs_kick(), "nothing new posted");
        l.tx_dev.set_kick_wanted(false);
        let mut b = Batch::new();
        let mut p = l.drv.alloc().unwrap();
        p.set_len(60).unwrap();
        b.push(p);
        l.tx_drv.transmit_burst(&mut b, &mut l.drv);
        assert!(!l.tx_drv.needs_kick());
    }
}

#[test]
fn tx_packets_outside_shared_memory_are_copied_into_it() {
    let mut l = Loopback::new(LoopbackCfg::default());
    let other = common::pool("elsewhere", 2048, 64);
    let mut oc = other.cache();
    let mut b = Batch::new();
    let f = frame(300, 9);
    let mut p = oc.alloc().unwrap();
    p.set_len(300).unwrap();
    p.data_mut().copy_from_slice(&f);
    b.push(p);
    assert_eq!(
        l.tx_drv.transmit_burst(&mut b, &mut oc),
        0,
        "no shared pool in that cache"
    );
    assert_eq!(l.tx_drv.stats().tx_dropped, 1);
    let mut p = oc.alloc().unwrap();
    p.set_len(300).unwrap();
    p.data_mut().copy_from_slice(&f);
    b.push(p);
    // With the VNF's own cache, the foreign packet is copied.
    assert_eq!(l.tx_drv.transmit_burst(&mut b, &mut l.drv), 1);
    let mut got = Batch::new();
    assert_eq!(l.tx_dev.dequeue_burst(&mut got, &mut l.sw), 1);
    assert_eq!(got[0].data(), &f[..]);
    l.sw.free_batch(&mut got);
    drop(oc);
    assert_eq!(other.shared_free(), 64, "the foreign packet went home");
}

/// The ring history a ring start or stop logs names what guest memory
/// holds: on a split ring, with frames returned in order, the last used
/// ids are the last heads taken; on a packed ring, the slots before the
/// used position carry used flags of the device's lap.
#[test]
fn ring_history_shows_the_entries_before_the_positions() {
    let mut l = jumbo(V1, 0);
    let sent = frames(7);
    assert_eq!(l.vnf_to_switch(&sent), sent);
    let text = l.tx_dev.ring_history(4);
    let (used, avail) = text
        .strip_prefix("last used ids ")
        .and_then(|t| t.split_once(", last avail heads "))
        .unwrap_or_else(|| panic!("split ring history: {text}"));
    assert_eq!(used, avail, "{text}");
    assert_eq!(used.matches(',').count(), 3, "{text}");

    let mut p = jumbo(V1 | nfv_virtio::layout::VIRTIO_F_RING_PACKED, 0);
    assert_eq!(p.vnf_to_switch(&sent), sent);
    let text = p.tx_dev.ring_history(2);
    // Used in the first lap: AVAIL and USED both set (0x8080), no WRITE.
    assert!(
        text.starts_with("last descriptors (id/flags) [") && text.matches("/0x8080").count() == 2,
        "{text}"
    );
}
