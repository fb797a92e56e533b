//! Checksum and segmentation offloads over a real vhost-user socket: a
//! guest that acked CSUM and HOST_TSO sends headers — good ones are taken
//! with their metadata (large segments whole), hostile ones are refused
//! and counted (`bad_offload`) and the ring keeps working; on the way back
//! a guest that acked GUEST_TSO gets a large segment whole, and one that
//! acked nothing is never handed a header it cannot parse.

mod common;

use common::*;
use nfv_mem::Batch;
use nfv_offload::{
    F_DATA_VALID, F_NEEDS_CSUM, GSO_TCPV4, GSO_TCPV6, GSO_UDP, GSO_UDP_L4, OffloadMeta,
};
use nfv_vhost::VhostUserMode::Server;
use nfv_virtio::layout::*;
use vhost::VhostBackend;

/// Ethernet + IPv4 (or IPv6) + TCP (or UDP) headers and `payload` bytes;
/// checksums are not filled (the switch checks structure, not sums).
fn frame_of(v6: bool, tcp: bool, payload: usize) -> Vec<u8> {
    let mut f = vec![0u8; 14];
    f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    let l4_len = if tcp { 20 } else { 8 } + payload;
    let proto = if tcp { 6 } else { 17 };
    if v6 {
        f[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
        let mut ip = [0u8; 40];
        ip[0] = 0x60;
        ip[4..6].copy_from_slice(&(l4_len as u16).to_be_bytes());
        ip[6] = proto;
        ip[7] = 64;
        ip[8..24].fill(0xfd);
        ip[24..40].fill(0xfe);
        f.extend_from_slice(&ip);
    } else {
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        let mut ip = [0u8; 20];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&((20 + l4_len) as u16).to_be_bytes());
        ip[8] = 64;
        ip[9] = proto;
        ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
        ip[16..20].copy_from_slice(&[10, 0, 0, 2]);
        f.extend_from_slice(&ip);
    }
    if tcp {
        let mut t = [0u8; 20];
        t[0..2].copy_from_slice(&1000u16.to_be_bytes());
        t[2..4].copy_from_slice(&2000u16.to_be_bytes());
        t[12] = 5 << 4;
        t[13] = 0x18; // PSH ACK
        f.extend_from_slice(&t);
    } else {
        let mut u = [0u8; 8];
        u[4..6].copy_from_slice(&(l4_len as u16).to_be_bytes());
        f.extend_from_slice(&u);
    }
    f.extend((0..payload).map(|i| (i * 13 + 5) as u8));
    f
}

/// A header asking for a partial checksum at the transport header of
/// `frame` and, with `gso_type` != 0, segments of `gso` bytes.
fn meta(frame: &[u8], gso_type: u8, gso: u16) -> OffloadMeta {
    let v6 = frame[12..14] == [0x86, 0xdd];
    let l4 = if v6 { 54 } else { 34 };
    let tcp = frame[if v6 { 20 } else { 23 }] == 6;
    OffloadMeta {
        flags: F_NEEDS_CSUM,
        gso_type,
        hdr_len: 0,
        gso_size: gso,
        csum_start: l4,
        csum_offset: if tcp { 16 } else { 6 },
    }
}

/// Sends `frame` from the guest with header `m` (as the packet's offload
/// metadata, which the driver writes into the header).
fn guest_send(g: &mut Guest, frame: &[u8], m: OffloadMeta) -> usize {
    let mut b = fill(&mut g.cache, &[frame.to_vec()]);
    assert!(b[0].set_offload(m.to_virtio_hdr()));
    let n = g.tx[0].transmit_burst(&mut b, &mut g.cache);
    g.cache.free_batch(&mut b);
    n
}

fn offload_guest_features(offered: u64) -> u64 {
    guest_features(offered)
        | (offered
            & (VIRTIO_NET_F_CSUM
                | VIRTIO_NET_F_GUEST_CSUM
                | VIRTIO_NET_F_HOST_TSO4
                | VIRTIO_NET_F_HOST_TSO6
                | VIRTIO_NET_F_HOST_USO
                | VIRTIO_NET_F_GUEST_TSO4
                | VIRTIO_NET_F_GUEST_TSO6))
}

#[test]
fn guest_headers_are_checked_and_large_segments_cross_whole() {
    let path = sock("offload");
    let mut sw = SwitchSide::open("offload", &cfg(&path, Server, 1, true), 1);
    let fe = connect(&path);
    fe.set_owner().unwrap();
    let offered = fe.get_features().unwrap();
    let opts = GuestOpts {
        features: Some(offload_guest_features(offered)),
        frame_size: 65536,
        ..GuestOpts::default()
    };
    let mut g = Guest::setup(fe, "offload", &opts);
    assert_ne!(g.features & VIRTIO_NET_F_HOST_TSO4, 0, "TSO acked");
    wait_status(&sw.port, "pair up", |s| s.pairs_enabled == 1);

    struct Case {
        name: &'static str,
        frame: Vec<u8>,
        meta: OffloadMeta,
        /// Taken (with metadata unless the header asks for nothing).
        taken: bool,
    }
    let tcp4 = frame_of(false, true, 1000);
    let tcp6 = frame_of(true, true, 1000);
    let udp4 = frame_of(false, false, 1000);
    let big4 = frame_of(false, true, 30000);
    let big6 = frame_of(true, true, 20000);
    let with = |f: &[u8], g: u8, s: u16, edit: fn(&mut OffloadMeta)| {
        let mut m = meta(f, g, s);
        edit(&mut m);
        m
    };
    let cases = vec![
        Case {
            name: "partial checksum",
            frame: tcp4.clone(),
            meta: meta(&tcp4, 0, 0),
            taken: true,
        },
        Case {
            name: "udp partial checksum",
            frame: udp4.clone(),
            meta: meta(&udp4, 0, 0),
            taken: true,
        },
        Case {
            name: "data valid only",
            frame: tcp4.clone(),
            meta: OffloadMeta {
                flags: F_DATA_VALID,
                ..Default::default()
            },
            taken: true,
        },
        Case {
            name: "tso4 large segment",
            frame: big4.clone(),
            meta: meta(&big4, GSO_TCPV4, 1448),
            taken: true,
        },
        Case {
            name: "tso6 large segment",
            frame: big6.clone(),
            meta: meta(&big6, GSO_TCPV6, 1440),
            taken: true,
        },
        Case {
            name: "uso",
            frame: udp4.clone(),
            meta: meta(&udp4, GSO_UDP_L4, 400),
            taken: true,
        },
        Case {
            name: "csum_start past the frame",
            frame: tcp4.clone(),
            meta: with(&tcp4, 0, 0, |m| m.csum_start = 60000),
            taken: false,
        },
        Case {
            name: "csum field past the frame",
            frame: tcp4.clone(),
            meta: with(&tcp4, 0, 0, |m| m.csum_offset = 2000),
            taken: false,
        },
        Case {
            name: "gso_size 0",
            frame: big4.clone(),
            meta: meta(&big4, GSO_TCPV4, 0),
            taken: false,
        },
        Case {
            name: "tso4 on udp",
            frame: udp4.clone(),
            meta: meta(&udp4, GSO_TCPV4, 500),
            taken: false,
        },
        Case {
            name: "tso4 on ipv6",
            frame: tcp6.clone(),
            meta: meta(&tcp6, GSO_TCPV4, 500),
            taken: false,
        },
        Case {
            name: "ufo (not offered)",
            frame: udp4.clone(),
            meta: meta(&udp4, GSO_UDP, 500),
            taken: false,
        },
        Case {
            name: "unknown gso type",
            frame: tcp4.clone(),
            meta: meta(&tcp4, 7, 500),
            taken: false,
        },
        Case {
            name: "gso without partial checksum",
            frame: big4.clone(),
            meta: with(&big4, GSO_TCPV4, 1448, |m| m.flags = 0),
            taken: false,
        },
        Case {
            name: "truncated headers",
            frame: tcp4[..40].to_vec(),
            meta: meta(&tcp4, 0, 0),
            taken: false,
        },
    ];
    for c in &cases {
        let before = sw.port.status().vrings[1].counter("bad_offload");
        assert_eq!(
            guest_send(&mut g, &c.frame, c.meta),
            1,
            "{}: posted",
            c.name
        );
        if c.taken {
            let mut b = Batch::new();
            wait(c.name, || sw.rxq[0].rx_burst(&mut b, &mut sw.cache) != 0);
            assert_eq!(b.len(), 1, "{}", c.name);
            let p = &mut b[0];
            // A frame without offload may be split (one-copy mode).
            assert!(p.join_tail(), "{}", c.name);
            assert_eq!(p.data(), &c.frame[..], "{}: frame", c.name);
            let got = p.offload().map(|h| OffloadMeta::from_virtio_hdr(&h));
            if c.meta.is_empty() {
                assert_eq!(got, None, "{}: nothing to carry", c.name);
            } else {
                let got = got.unwrap_or_else(|| panic!("{}: metadata lost", c.name));
                assert_eq!(
                    (got.gso_type, got.gso_size, got.csum_start, got.csum_offset),
                    (
                        c.meta.gso_type,
                        c.meta.gso_size,
                        c.meta.csum_start,
                        c.meta.csum_offset
                    ),
                    "{}",
                    c.name
                );
                assert_eq!(got.flags, F_NEEDS_CSUM, "{}", c.name);
                assert!(got.hdr_len > 0, "{}: hdr_len is the switch's count", c.name);
            }
            sw.cache.free_batch(&mut b);
        } else {
            let mut polled = 0;
            wait(c.name, || {
                polled += sw.poll();
                sw.port.status().vrings[1].counter("bad_offload") > before
            });
            assert_eq!(polled, 0, "{}: a refused frame came through", c.name);
            assert_eq!(
                sw.port.status().vrings[1].counter("bad_offload"),
                before + 1,
                "{}",
                c.name
            );
        }
        assert!(sw.port.status().quarantined().is_empty(), "{}", c.name);
    }
    assert!(sw.port.status().vrings[1].counter("large_segments") >= 2);

    // Switch → guest: a large segment is delivered whole, with its header,
    // to this guest (GUEST_TSO4 acked, 64 KiB buffers).
    // (The switch side's pool has 2 KiB frames: a large one of its own.)
    let mut b = Batch::new();
    let mut pool = pool_of("switch-large", 64, 65536).cache();
    let mut p = pool.alloc().unwrap();
    p.set_len(big4.len()).unwrap();
    p.data_mut().copy_from_slice(&big4);
    let m = meta(&big4, GSO_TCPV4, 1448);
    assert!(p.set_offload(m.to_virtio_hdr()));
    b.push(p);
    let mut received = Vec::new();
    wait("large segment delivered", || {
        if !b.is_empty() {
            sw.txq[0].tx_burst(&mut b, &mut pool);
        }
        let mut rb = Batch::new();
        g.rx[0].receive_burst(&mut rb, &mut g.cache);
        for p in rb.drain(..) {
            received.push((p.data().to_vec(), p.offload()));
            g.cache.free(p);
        }
        g.rx[0].refill_rx(&mut g.cache);
        !received.is_empty()
    });
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].0, big4, "delivered whole");
    let got = OffloadMeta::from_virtio_hdr(&received[0].1.expect("header kept"));
    assert_eq!(
        (got.gso_type, got.gso_size, got.flags),
        (GSO_TCPV4, 1448, F_NEEDS_CSUM)
    );
}

#[test]
fn a_guest_without_offloads_is_never_handed_a_header_it_cannot_parse() {
    let path = sock("no-offload");
    let mut sw = SwitchSide::open("no-offload", &cfg(&path, Server, 1, true), 1);
    let mut g = Guest::setup(connect(&path), "no-offload", &GuestOpts::default());
    assert_eq!(g.features & VIRTIO_NET_F_GUEST_CSUM, 0);
    wait_status(&sw.port, "pair up", |s| s.pairs_enabled == 1);
    let f = frame_of(false, true, 500);
    let mut b = fill(&mut sw.cache, std::slice::from_ref(&f));
    assert!(b[0].set_offload(meta(&f, 0, 0).to_virtio_hdr()));
    b.extend(fill(&mut sw.cache, std::slice::from_ref(&f)));
    let mut got = Vec::new();
    wait("plain frame delivered", || {
        if !b.is_empty() {
            sw.txq[0].tx_burst(&mut b, &mut sw.cache);
        }
        got.extend(g.recv(0));
        !got.is_empty()
    });
    assert_eq!(got, vec![f], "only the plain frame");
    assert_eq!(sw.port.status().vrings[0].counter("offload_refused"), 1);
}
