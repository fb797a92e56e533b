//! The fabric's software offloads: a packet with offload metadata leaves
//! as it is for a queue whose peer takes it, else with its checksum
//! completed or cut into segments, each checked with etherparse.

use super::*;
use nfv_mem::{MemoryConfig, PacketPool};
use nfv_offload::{F_NEEDS_CSUM, GSO_TCPV4, GSO_TCPV6, OffloadCaps};
use nfv_ports::PortStats;
use std::sync::Mutex;

/// What a fake queue saw: each frame and its offload header.
type Seen = Arc<Mutex<Vec<(Vec<u8>, Option<[u8; 10]>)>>>;

struct FakeTxq {
    caps: OffloadCaps,
    seen: Seen,
}

impl TxQueue for FakeTxq {
    fn tx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        let n = batch.len();
        for p in batch.drain(..) {
            self.seen
                .lock()
                .unwrap()
                .push((p.data().to_vec(), p.offload()));
            pool.free(p);
        }
        n
    }
    fn max_frame(&self) -> usize {
        9000
    }
    fn offload_caps(&mut self) -> OffloadCaps {
        self.caps
    }
    fn max_segment_frame(&self) -> usize {
        u16::MAX as usize
    }
}

/// A TCP frame of `payload` bytes over IPv4 or IPv6 with its checksum
/// field holding the pseudo-header sum (a partial checksum, as Linux
/// hands it to a NIC), and the offload header asking for `gso`.
fn tcp_frame(v6: bool, payload: usize, gso: u16) -> (Vec<u8>, [u8; 10]) {
    let data: Vec<u8> = (0..payload).map(|i| (i * 7 + 3) as u8).collect();
    let b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
    let b = if v6 {
        b.ipv6([0xfd; 16], [0xfe; 16], 64)
    } else {
        b.ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
    };
    let b = b.tcp(1000, 2000, 0x1000_0000, 65535).ack(7).psh();
    let mut f = Vec::new();
    b.write(&mut f, &data).unwrap();
    let l4 = if v6 { 14 + 40 } else { 14 + 20 };
    // The pseudo-header sum: source, destination, protocol, TCP length.
    let mut pseudo = Vec::new();
    if v6 {
        pseudo.extend_from_slice(&f[22..54]);
    } else {
        pseudo.extend_from_slice(&f[26..34]);
    }
    pseudo.extend_from_slice(&[0, 6]);
    pseudo.extend_from_slice(&((f.len() - l4) as u16).to_be_bytes());
    let partial = nfv_offload::checksum::sum(&pseudo);
    f[l4 + 16..l4 + 18].copy_from_slice(&partial.to_be_bytes());
    let gso_type = match (gso, v6) {
        (0, _) => 0,
        (_, false) => GSO_TCPV4,
        (_, true) => GSO_TCPV6,
    };
    let meta = OffloadMeta {
        flags: F_NEEDS_CSUM,
        gso_type,
        hdr_len: (l4 + 20) as u16,
        gso_size: gso,
        csum_start: l4 as u16,
        csum_offset: 16,
    };
    (f, meta.to_virtio_hdr())
}

/// The TCP payload of a frame whose checksums must all verify.
fn checked_payload(frame: &[u8]) -> Vec<u8> {
    let p = etherparse::SlicedPacket::from_ethernet(frame).expect("parses");
    let Some(etherparse::TransportSlice::Tcp(tcp)) = p.transport else {
        panic!("not TCP");
    };
    let ok = match &p.net {
        Some(etherparse::NetSlice::Ipv4(ip)) => {
            assert_eq!(
                ip.header().to_header().calc_header_checksum(),
                ip.header().header_checksum(),
                "IPv4 header checksum"
            );
            tcp.calc_checksum_ipv4(ip.header().source(), ip.header().destination())
                .unwrap()
        }
        Some(etherparse::NetSlice::Ipv6(ip)) => tcp
            .calc_checksum_ipv6(ip.header().source(), ip.header().destination())
            .unwrap(),
        _ => panic!("not IP"),
    };
    assert_eq!(ok, tcp.checksum(), "TCP checksum");
    tcp.payload().to_vec()
}

fn run(
    caps: OffloadCaps,
    frame: &[u8],
    hdr: [u8; 10],
) -> (Vec<(Vec<u8>, Option<[u8; 10]>)>, QueueSnapshot) {
    let pool = PacketPool::new("fabric-offload", &MemoryConfig::plain(65536, 64)).unwrap();
    let small = PacketPool::new("fabric-segments", &MemoryConfig::plain(2048, 256)).unwrap();
    let seen: Seen = Arc::default();
    let stats = Arc::new(PortStats::new(1, 1));
    let mut fabric = Fabric::default();
    fabric.add_tx(
        3,
        Box::new(FakeTxq {
            caps,
            seen: seen.clone(),
        }),
        stats.clone(),
        0,
    );
    let mut big = pool.cache();
    let mut pkt = big.alloc().unwrap();
    pkt.set_len(frame.len()).unwrap();
    pkt.data_mut().copy_from_slice(frame);
    assert!(pkt.set_offload(hdr));
    let mut cache = small.cache();
    fabric.output(3, pkt, &stats.rx[0], &mut cache);
    fabric.flush(&mut cache);
    let out = std::mem::take(&mut *seen.lock().unwrap());
    (out, stats.tx[0].snapshot())
}

#[test]
fn large_segments_leave_whole_or_cut_as_the_output_takes_them() {
    struct Case {
        name: &'static str,
        v6: bool,
        payload: usize,
        gso: u16,
        caps: OffloadCaps,
        /// Frames expected out, and whether they keep a partial checksum.
        frames: usize,
        partial: bool,
    }
    let csum_only = OffloadCaps {
        csum: true,
        ..OffloadCaps::NONE
    };
    let cases = [
        Case {
            name: "tso4 to a tso peer",
            v6: false,
            payload: 30000,
            gso: 1448,
            caps: OffloadCaps::ALL,
            frames: 1,
            partial: true,
        },
        Case {
            name: "tso4 to a plain port",
            v6: false,
            payload: 30000,
            gso: 1448,
            caps: OffloadCaps::NONE,
            frames: 30000usize.div_ceil(1448),
            partial: false,
        },
        Case {
            name: "tso6 to a plain port",
            v6: true,
            payload: 10000,
            gso: 1440,
            caps: OffloadCaps::NONE,
            frames: 10000usize.div_ceil(1440),
            partial: false,
        },
        Case {
            name: "tso4 to a csum-only peer",
            v6: false,
            payload: 5000,
            gso: 1000,
            caps: csum_only,
            frames: 5,
            partial: true,
        },
        Case {
            name: "tso6 to a tso4-only peer",
            v6: true,
            payload: 3000,
            gso: 1000,
            caps: OffloadCaps {
                tso4: true,
                ..csum_only
            },
            frames: 3,
            partial: true,
        },
        Case {
            name: "partial checksum to a plain port",
            v6: false,
            payload: 1000,
            gso: 0,
            caps: OffloadCaps::NONE,
            frames: 1,
            partial: false,
        },
        Case {
            name: "partial checksum to a csum peer",
            v6: true,
            payload: 1000,
            gso: 0,
            caps: csum_only,
            frames: 1,
            partial: true,
        },
    ];
    for c in &cases {
        let (frame, hdr) = tcp_frame(c.v6, c.payload, c.gso);
        let sent_payload = frame[frame.len() - c.payload..].to_vec();
        let (out, snap) = run(c.caps, &frame, hdr);
        assert_eq!(out.len(), c.frames, "{}: frames out", c.name);
        assert_eq!(snap.total_drops(), 0, "{}: drops {:?}", c.name, snap.drops);
        let mut got = Vec::new();
        for (i, (f, meta)) in out.iter().enumerate() {
            assert_eq!(meta.is_some(), c.partial, "{}: segment {i} header", c.name);
            let mut f = f.clone();
            if let Some(m) = meta {
                let m = OffloadMeta::from_virtio_hdr(m);
                assert!(m.needs_csum(), "{}", c.name);
                if c.frames == 1 && c.caps.accepts(&OffloadMeta::from_virtio_hdr(&hdr)) {
                    assert_eq!(f, frame, "{}: as it was", c.name);
                }
                // The receiver's part: complete the checksum, then check.
                nfv_offload::complete_checksum(
                    &mut f,
                    m.csum_start as usize,
                    m.csum_offset as usize,
                );
            }
            if c.gso != 0 && c.frames > 1 {
                assert!(
                    f.len() - (frame.len() - c.payload) <= c.gso as usize,
                    "{}: segment size",
                    c.name
                );
            }
            got.extend(checked_payload(&f));
        }
        assert_eq!(got, sent_payload, "{}: payload", c.name);
    }
}

#[test]
fn offload_metadata_that_does_not_fit_its_frame_is_dropped_and_counted() {
    let (frame, hdr) = tcp_frame(false, 3000, 1448);
    let mut bad = OffloadMeta::from_virtio_hdr(&hdr);
    bad.csum_start = frame.len() as u16;
    let (out, snap) = run(OffloadCaps::NONE, &frame, bad.to_virtio_hdr());
    assert!(out.is_empty());
    assert_eq!(snap.drops[DropReason::BadOffload as usize], 1);
    let mut zero = OffloadMeta::from_virtio_hdr(&hdr);
    zero.gso_size = 0;
    let (out, snap) = run(OffloadCaps::NONE, &frame, zero.to_virtio_hdr());
    assert!(out.is_empty());
    assert_eq!(snap.drops[DropReason::BadOffload as usize], 1);
}
