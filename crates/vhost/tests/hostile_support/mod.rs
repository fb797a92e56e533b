//! Shared by the hostile-frontend tests: one "PMD" thread that serves the
//! switch side of several ports (echoing each port's rx back out of its tx
//! queue 0), and a healthy port checked while another port is attacked.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::thread::JoinHandle;

use crate::common::*;
use nfv_mem::Batch;
use nfv_vhost::VhostUserMode::Client;
use nfv_vhost::VhostUserPort;

/// A thread acting as one PMD for every port given: rx burst on rx queue
/// 0, the same packets out of tx queue 0. Stopped and joined on drop.
pub struct EchoPmd {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl EchoPmd {
    pub fn spawn(mut sides: Vec<SwitchSide>) -> EchoPmd {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            while !s.load(Relaxed) {
                for side in &mut sides {
                    let mut b = Batch::new();
                    side.rxq[0].rx_burst(&mut b, &mut side.cache);
                    if !b.is_empty() {
                        side.txq[0].tx_burst(&mut b, &mut side.cache);
                    } else {
                        // As the datapath does an iteration after a
                        // queue's last burst (`TxQueue::settle`): the
                        // interrupt check the burst left for later.
                        side.txq[0].settle();
                    }
                    side.rxq[0].burst_done();
                    side.cache.free_batch(&mut b);
                }
                std::thread::yield_now();
            }
        });
        EchoPmd {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for EchoPmd {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        // A failing test may have a PMD stuck in a blocking syscall (the
        // bug under test): leave it behind rather than hang on the join.
        if let Some(t) = self.thread.take()
            && !std::thread::panicking()
        {
            let _ = t.join();
        }
    }
}

/// Sends `frames` from the guest on pair 0 and waits until all come back
/// (echoed by an [`EchoPmd`]); checks every byte.
pub fn echo_round_trip(g: &mut Guest, frames: &[Vec<u8>]) {
    assert_eq!(g.send(0, frames), frames.len(), "guest transmit");
    let mut back = Vec::new();
    nfv_testutil::wait_until(WAIT, || {
        back.extend(g.recv(0));
        back.len() >= frames.len()
    });
    assert_eq!(back.len(), frames.len(), "echoed frames");
    assert!(
        back.iter().zip(frames).all(|(a, b)| a == b),
        "frames changed"
    );
}

/// A healthy port whose guest is driven by the test thread and whose
/// switch side runs on the same [`EchoPmd`] as the attacked port.
pub struct Healthy {
    pub g: Guest,
    pub port: Arc<VhostUserPort>,
    n: u32,
    _l: TestListener,
}

impl Healthy {
    /// The guest and the switch side (to hand to the PMD).
    pub fn new(tag: &str) -> (Healthy, SwitchSide) {
        let path = sock(&format!("{tag}-healthy"));
        let l = listen(&path);
        let sw = SwitchSide::open(&format!("{tag}-b"), &cfg(&path, Client, 1, true), 1);
        let g = Guest::setup(accept(&l), &format!("{tag}-b"), &GuestOpts::default());
        let port = sw.port.clone();
        (
            Healthy {
                g,
                port,
                n: 0,
                _l: l,
            },
            sw,
        )
    }

    /// One echo round trip of 20 frames; nothing counted against the port.
    pub fn check(&mut self) {
        self.n += 1;
        let frames: Vec<_> = (0..20)
            .map(|i| frame(60 + i * 70, self.n * 100 + i as u32))
            .collect();
        echo_round_trip(&mut self.g, &frames);
        let st = self.port.status();
        assert_eq!(
            st.protocol_errors + st.ring_errors + st.mem_table_errors,
            0,
            "{st:#?}"
        );
        assert!(st.quarantined().is_empty(), "{st:#?}");
    }
}
