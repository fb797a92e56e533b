//! VNF apps: a small trait over a batch (BESS's module, VPP's node).
//!
//! The runtime receives a batch from the rx virtqueue, hands it to the app,
//! and transmits whatever the app left in the batch on the tx virtqueue of
//! the same queue pair. Apps know nothing of virtqueues, threads or sockets,
//! so they are tested with plain byte arrays.
//!
//! Frames shorter than an Ethernet header are left untouched by the MAC
//! rewriting apps (forwarded as they came): a VNF never panics on what the
//! switch sends it.

use crate::config::{AppKind, Mac};
use nfv_mem::Batch;
use nfv_wire::ethernet::field;

/// The two MAC addresses at the front of a frame (what the apps rewrite).
const MACS_LEN: usize = field::SOURCE.end;

/// A packet-processing element run over each received batch.
pub trait App: Send {
    fn name(&self) -> &'static str;
    /// Rewrites the packets of `batch` in place. Packets still in the batch
    /// afterwards are transmitted; an app that drops a packet removes it
    /// (the runtime frees nothing the app did not leave behind).
    fn process(&mut self, batch: &mut Batch);
}

/// Forwards unchanged (testpmd's `io` mode). Cost: nothing per packet.
pub struct Io;

impl App for Io {
    fn name(&self) -> &'static str {
        "io"
    }
    #[inline]
    fn process(&mut self, _batch: &mut Batch) {}
}

/// Swaps source and destination MAC (BESS `MACSwap`). One 12-byte read
/// and write per packet.
pub struct MacSwap;

impl App for MacSwap {
    fn name(&self) -> &'static str {
        "macswap"
    }
    #[inline]
    fn process(&mut self, batch: &mut Batch) {
        for p in batch.iter_mut() {
            if let Some(h) = p.data_mut().get_mut(..MACS_LEN) {
                let (dst, src) = h.split_at_mut(field::SOURCE.start);
                dst.swap_with_slice(src);
            }
        }
    }
}

/// Sets destination MAC to the next hop and source MAC to our own
/// (testpmd's `mac` mode, DPDK `l2fwd`).
pub struct L2Fwd {
    header: [u8; MACS_LEN],
}

impl L2Fwd {
    pub fn new(next_hop: Mac, own: Mac) -> L2Fwd {
        let mut header = [0u8; MACS_LEN];
        header[field::DESTINATION].copy_from_slice(&next_hop.0);
        header[field::SOURCE].copy_from_slice(&own.0);
        L2Fwd { header }
    }
}

impl App for L2Fwd {
    fn name(&self) -> &'static str {
        "l2fwd"
    }
    #[inline]
    fn process(&mut self, batch: &mut Batch) {
        for p in batch.iter_mut() {
            if let Some(h) = p.data_mut().get_mut(..MACS_LEN) {
                h.copy_from_slice(&self.header);
            }
        }
    }
}

/// Builds the app a validated config asks for.
pub fn build(kind: AppKind, own: Mac, next_hop: Option<Mac>) -> Box<dyn App> {
    match kind {
        AppKind::Io => Box::new(Io),
        AppKind::MacSwap => Box::new(MacSwap),
        // Validation guarantees a next hop for l2fwd; broadcast otherwise.
        AppKind::L2Fwd => Box::new(L2Fwd::new(next_hop.unwrap_or(Mac([0xff; 6])), own)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nfv_mem::{HugepageMode, MemoryConfig, PacketPool};

    const A: [u8; 6] = [0x02, 0, 0, 0, 0, 0xaa];
    const B: [u8; 6] = [0x02, 0, 0, 0, 0, 0xbb];
    const HOP: Mac = Mac([0x02, 0x11, 0x22, 0x33, 0x44, 0x55]);
    const OWN: Mac = Mac([0x02, 0x66, 0x77, 0x88, 0x99, 0x00]);

    fn frame(dst: [u8; 6], src: [u8; 6], payload: &[u8]) -> Vec<u8> {
        let mut f = dst.to_vec();
        f.extend_from_slice(&src);
        f.extend_from_slice(&[0x08, 0x00]);
        f.extend_from_slice(payload);
        f
    }

    /// Runs `app` over packets holding `inputs` and returns their bytes.
    fn run(app: &mut dyn App, inputs: &[Vec<u8>]) -> Vec<Vec<u8>> {
        let pool = PacketPool::new(
            "app-test",
            &MemoryConfig {
                frames: 64,
                frame_size: 2048,
                hugepages: HugepageMode::Never,
            },
        )
        .unwrap();
        let mut cache = pool.cache();
        let mut batch = Batch::new();
        for i in inputs {
            let mut p = cache.alloc().unwrap();
            p.set_len(i.len()).unwrap();
            p.data_mut().copy_from_slice(i);
            batch.push(p);
        }
        app.process(&mut batch);
        let out = batch.iter().map(|p| p.data().to_vec()).collect();
        cache.free_batch(&mut batch);
        out
    }

    #[test]
    fn apps_rewrite_bytes_as_documented() {
        let payload = [0x45u8, 0, 0, 20, 1, 2, 3, 4];
        let ab = frame(A, B, &payload);
        let runt = vec![1u8, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11];
        let exactly_12: Vec<u8> = (0..12).collect();
        // (app, input, expected output)
        let cases: Vec<(AppKind, Vec<u8>, Vec<u8>)> = vec![
            (AppKind::Io, ab.clone(), ab.clone()),
            (AppKind::Io, runt.clone(), runt.clone()),
            (AppKind::MacSwap, ab.clone(), frame(B, A, &payload)),
            (AppKind::MacSwap, runt.clone(), runt.clone()),
            (
                AppKind::MacSwap,
                exactly_12.clone(),
                [&exactly_12[6..], &exactly_12[..6]].concat(),
            ),
            (AppKind::L2Fwd, ab.clone(), frame(HOP.0, OWN.0, &payload)),
            (AppKind::L2Fwd, runt.clone(), runt.clone()),
            (AppKind::L2Fwd, exactly_12, [HOP.0, OWN.0].concat()),
        ];
        for (kind, input, want) in cases {
            let mut app = build(kind, OWN, Some(HOP));
            let got = run(app.as_mut(), std::slice::from_ref(&input));
            assert_eq!(got, vec![want], "{} on {input:02x?}", app.name());
        }
    }

    #[test]
    fn macswap_twice_is_identity_over_a_full_batch() {
        let inputs: Vec<Vec<u8>> = (0..nfv_mem::BATCH as u8)
            .map(|i| frame([2, 0, 0, 0, 1, i], [2, 0, 0, 0, 2, i], &[i; 50]))
            .collect();
        let once = run(&mut MacSwap, &inputs);
        for (i, o) in inputs.iter().zip(&once) {
            assert_eq!(&o[..6], &i[6..12]);
            assert_eq!(&o[6..12], &i[..6]);
            assert_eq!(&o[12..], &i[12..], "payload untouched");
        }
        assert_eq!(run(&mut MacSwap, &once), inputs);
    }

    #[test]
    fn names() {
        for k in [AppKind::Io, AppKind::MacSwap, AppKind::L2Fwd] {
            assert_eq!(build(k, OWN, Some(HOP)).name(), k.name());
        }
    }
}
