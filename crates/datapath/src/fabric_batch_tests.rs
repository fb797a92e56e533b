//! [`Fabric::output_batch`]: a whole batch moves in one go only when no
//! packet of it needs its own treatment; otherwise nothing is done and the
//! batch is left for the per-packet path. The same answer whether the
//! fabric reads the packets itself or is handed their [`BatchShape`].

use super::*;
use nfv_mem::{MemoryConfig, PacketPool};
use nfv_offload::F_NEEDS_CSUM;

/// Counts what it is handed.
struct CountingTxq {
    max_frame: usize,
}

impl TxQueue for CountingTxq {
    fn tx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        let n = batch.len();
        pool.free_batch(batch);
        n
    }
    fn max_frame(&self) -> usize {
        self.max_frame
    }
}

#[test]
fn a_batch_moves_whole_only_when_every_packet_is_plain() {
    const OUT: PortNo = 3;
    // (name, frame lengths, index of a packet with offload metadata,
    // something already pending for OUT, port asked for, moved whole)
    type Case = (
        &'static str,
        &'static [usize],
        Option<usize>,
        bool,
        PortNo,
        bool,
    );
    let cases: &[Case] = &[
        (
            "plain frames",
            &[60, 64, 1514, 100, 64],
            None,
            false,
            OUT,
            true,
        ),
        (
            "one frame too big",
            &[64, 1600, 64],
            None,
            false,
            OUT,
            false,
        ),
        (
            "one frame with offload metadata",
            &[64, 64, 64],
            Some(1),
            false,
            OUT,
            false,
        ),
        (
            "the port has packets pending",
            &[64, 64],
            None,
            true,
            OUT,
            false,
        ),
        ("no such port", &[64, 64], None, false, 9, false),
    ];
    let pool = PacketPool::new("fabric-batch", &MemoryConfig::plain(2048, 256)).unwrap();
    let mut cache = pool.cache();
    for (&(name, lens, offloaded, pending, port, want), shaped) in
        cases.iter().flat_map(|c| [(c, false), (c, true)])
    {
        let name = &format!("{name} ({})", if shaped { "shape given" } else { "read" });
        let stats = Arc::new(PortStats::new(1, 1));
        let mut fabric = Fabric::default();
        fabric.add_tx(
            OUT,
            Box::new(CountingTxq { max_frame: 1518 }),
            stats.clone(),
            0,
        );
        if pending {
            let mut p = cache.alloc().unwrap();
            p.set_len(64).unwrap();
            fabric.output(OUT, p, &stats.rx[0], &mut cache);
        }
        let mut batch = Batch::new();
        for (i, &len) in lens.iter().enumerate() {
            let mut p = cache.alloc().unwrap();
            p.set_len(len).unwrap();
            if offloaded == Some(i) {
                let meta = OffloadMeta {
                    flags: F_NEEDS_CSUM,
                    csum_start: 34,
                    csum_offset: 6,
                    ..Default::default()
                };
                assert!(p.set_offload(meta.to_virtio_hdr()), "{name}");
            }
            batch.push(p);
        }
        let shape = shaped.then(|| {
            let mut s = BatchShape::default();
            batch.iter().for_each(|p| s.add(p));
            s
        });
        let moved = fabric.output_batch(port, &mut batch, shape.as_ref());
        assert_eq!(moved, want, "{name}");
        let sent_before = if pending { 1 } else { 0 };
        if moved {
            assert!(batch.is_empty(), "{name}: the batch is handed over");
        } else {
            assert_eq!(
                batch.len(),
                lens.len(),
                "{name}: the batch is left as it was"
            );
            cache.free_batch(&mut batch);
        }
        fabric.flush(&mut cache);
        let tx = stats.tx[0].snapshot();
        let (want_packets, want_bytes) = if moved {
            (lens.len() as u64, lens.iter().sum::<usize>() as u64)
        } else {
            (sent_before, 64 * sent_before)
        };
        assert_eq!((tx.packets, tx.bytes), (want_packets, want_bytes), "{name}");
    }
    drop(cache);
    assert_eq!(pool.shared_free(), 256, "every frame back");
}
