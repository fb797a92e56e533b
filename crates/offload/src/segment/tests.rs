use super::*;
use crate::meta::{F_NEEDS_CSUM, GSO_ECN, GSO_TCPV4, GSO_TCPV6, GSO_UDP_L4, OffloadMeta};
use crate::test_frames::{self, Built, Ip, L4, Spec, built, gso, tcp4, udp6};
use crate::validate;

/// The header a Linux guest sends with `b` as a GSO frame.
fn gso_meta(b: &Built, gso_size: u16, ecn: bool) -> OffloadMeta {
    let kind = match (b.spec.l4, b.spec.ip) {
        (L4::Udp, _) => GSO_UDP_L4,
        (L4::Tcp, Ip::V6) => GSO_TCPV6,
        (L4::Tcp, _) => GSO_TCPV4,
    };
    OffloadMeta {
        flags: F_NEEDS_CSUM,
        gso_type: kind | if ecn { GSO_ECN } else { 0 },
        hdr_len: b.payload as u16,
        gso_size,
        csum_start: b.l4 as u16,
        csum_offset: b.spec.l4.csum_offset() as u16,
    }
}

/// Segments `b` (sent partial, as a guest does) with `gso_size`, both
/// with full and with partial checksums, and checks every segment with
/// etherparse against expectations computed from the input.
fn check(b: &Built, gso_size: usize) {
    let name = format!("{:?} payload {} gso {gso_size}", b.spec, b.spec.payload);
    let frame = test_frames::make_partial(b);
    let meta = gso_meta(b, gso_size as u16, b.spec.cwr);
    let layout = validate(&meta, &frame).unwrap_or_else(|e| panic!("{name}: {e}"));
    let payload = &b.bytes[b.payload..];
    let count = segment_count(frame.len(), &layout, gso_size);
    assert_eq!(count, payload.len().div_ceil(gso_size).max(1), "{name}");
    let orig_tcp = b.spec.l4 == L4::Tcp;
    let orig = test_frames::check_segment(&b.bytes);
    for full_csum in [true, false] {
        let mut joined = Vec::new();
        // Exactly the documented size: headers plus gso_size.
        let mut dst = vec![0u8; layout.payload + gso_size];
        for index in 0..count {
            let n = segment(&frame, &layout, gso_size, index, &mut dst, full_csum);
            let want_len = b.payload + gso_size.min(payload.len() - index * gso_size);
            assert_eq!(n, want_len, "{name}: length of {index}");
            assert_eq!(
                segment_len(frame.len(), &layout, gso_size, index),
                Some(n),
                "{name}"
            );
            let mut seg = dst[..n].to_vec();
            assert_eq!(seg[..b.l3], frame[..b.l3], "{name}: layer 2 of {index}");
            if !full_csum {
                let at = b.l4 + b.spec.l4.csum_offset();
                let field = u16::from_be_bytes([seg[at], seg[at + 1]]);
                assert_eq!(
                    field,
                    test_frames::pseudo_sum(&seg, b),
                    "{name}: partial field of {index}"
                );
                assert_eq!(
                    validate(&layout.partial_csum_meta(), &seg),
                    Ok(layout),
                    "{name}"
                );
                crate::complete_checksum(&mut seg, layout.l4, layout.csum_offset());
            }
            let got = test_frames::check_segment(&seg);
            joined.extend_from_slice(&got.payload);
            if let Some(id) = orig.ip_id {
                assert_eq!(
                    got.ip_id,
                    Some(id.wrapping_add(index as u16)),
                    "{name}: IPv4 id of {index}"
                );
            }
            if orig_tcp {
                check_tcp(
                    &name,
                    orig.tcp.as_ref().unwrap(),
                    got.tcp.as_ref().unwrap(),
                    index,
                    count,
                    gso_size,
                );
            }
        }
        assert_eq!(joined, payload, "{name}: payloads concatenated");
    }
    assert_eq!(segment_len(frame.len(), &layout, gso_size, count), None);
}

fn check_tcp(
    name: &str,
    orig: &etherparse::TcpHeader,
    got: &etherparse::TcpHeader,
    index: usize,
    count: usize,
    gso_size: usize,
) {
    let (first, last) = (index == 0, index + 1 == count);
    let seq = orig.sequence_number.wrapping_add((index * gso_size) as u32);
    assert_eq!(got.sequence_number, seq, "{name}: seq of {index}");
    assert_eq!(got.fin, orig.fin && last, "{name}: FIN of {index}");
    assert_eq!(got.psh, orig.psh && last, "{name}: PSH of {index}");
    assert_eq!(got.cwr, orig.cwr && first, "{name}: CWR of {index}");
    let mut same = got.clone();
    (
        same.sequence_number,
        same.fin,
        same.psh,
        same.cwr,
        same.checksum,
    ) = (
        orig.sequence_number,
        orig.fin,
        orig.psh,
        orig.cwr,
        orig.checksum,
    );
    assert_eq!(&same, orig, "{name}: other TCP fields of {index}");
}

/// (payload length, gso_size): one-byte segments, the classic 536 and
/// 1448 MSS, exactly divisible and with a remainder, one segment, none.
const SIZES: &[(usize, usize)] = &[
    (100, 1),
    (5000, 536),
    (536 * 7, 536),
    (1448 * 10, 1448),
    (1448 * 10 + 1, 1448),
    (1448 * 10 - 1, 1448),
    (60_000, 1448),
    (1000, 1448),
    (1448, 1448),
    (0, 1448),
    (9000, 8948),
];

#[test]
fn segments_verify_with_etherparse() {
    let mut n = 0;
    for ip in [Ip::V4, Ip::V4Options, Ip::V6] {
        for l4 in [L4::Tcp, L4::Udp] {
            for (i, &(payload, gso_size)) in SIZES.iter().enumerate() {
                let spec = Spec {
                    ip,
                    l4,
                    payload,
                    vlans: i % 3,
                    tcp_options: i % 2 == 1,
                    fin: true,
                    psh: true,
                    cwr: i % 2 == 0,
                    ece: i % 2 == 0,
                    ..Default::default()
                };
                check(&test_frames::build(&spec), gso_size);
                n += 1;
            }
        }
    }
    assert_eq!(n, 6 * SIZES.len());
}

#[test]
fn one_segment_with_full_checksum_is_the_original_frame() {
    for ip in [Ip::V4, Ip::V4Options, Ip::V6] {
        for l4 in [L4::Tcp, L4::Udp] {
            let b = test_frames::build(&Spec {
                ip,
                l4,
                payload: 700,
                fin: true,
                psh: true,
                cwr: true,
                ..Default::default()
            });
            let frame = test_frames::make_partial(&b);
            let layout = validate(&gso_meta(&b, 1448, true), &frame).unwrap();
            let mut dst = vec![0u8; 2000];
            let n = segment(&frame, &layout, 1448, 0, &mut dst, true);
            assert_eq!(dst[..n], b.bytes[..], "{ip:?} {l4:?}");
        }
    }
}

#[test]
fn sequence_numbers_and_ids_wrap() {
    let b = test_frames::build(&Spec {
        payload: 10_000,
        seq: u32::MAX - 100,
        ip_id: u16::MAX,
        ..Default::default()
    });
    check(&b, 1000);
}

#[test]
#[should_panic(expected = "segment 3 of 3")]
fn index_past_the_last_segment_panics() {
    let b = test_frames::build(&Spec {
        payload: 3000,
        ..Default::default()
    });
    let layout = validate(&gso_meta(&b, 1000, false), &b.bytes).unwrap();
    segment(&b.bytes, &layout, 1000, 3, &mut [0u8; 2000], true);
}

#[test]
fn counts() {
    let l = Layout {
        l3: 14,
        l4: 34,
        payload: 54,
        ipv6: false,
        tcp: true,
    };
    let table = [
        (54, 1448, 1),
        (55, 1448, 1),
        (54 + 1448, 1448, 1),
        (54 + 1449, 1448, 2),
        (54 + 100, 1, 100),
        (10, 5, 1),
        (100, 0, 1),
    ];
    for (frame_len, gso, want) in table {
        assert_eq!(segment_count(frame_len, &l, gso), want, "{frame_len} {gso}");
    }
}

/// Deterministic fuzzing: random bytes in the header area and random
/// header fields. Whatever validate accepts, the rest of the crate must
/// handle without panicking (debug builds also assert the checksum
/// bounds in complete_checksum).
#[test]
fn random_headers_never_panic_and_accepted_ones_segment() {
    let bases = [
        tcp4(),
        udp6(),
        built(Ip::V4Options, L4::Udp, 500),
        built(Ip::V6, L4::Tcp, 10),
    ];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut dst = vec![0u8; 70_000];
    let mut accepted_gso = 0;
    for i in 0..20_000 {
        let b = &bases[i % bases.len()];
        let mut f = b.bytes.clone();
        for _ in 0..(rnd() % 4) {
            let at = (rnd() as usize) % b.payload.min(f.len());
            f[at] = rnd() as u8;
        }
        f.truncate(f.len() - (rnd() as usize % 8).min(f.len()));
        let r = rnd();
        let mut meta = gso(
            b,
            [GSO_TCPV4, GSO_TCPV6, GSO_UDP_L4, 0, 2][(r % 5) as usize],
            (r >> 8) as u16 % 3000,
        );
        if r & (1 << 30) != 0 {
            meta.csum_start = (r >> 32) as u16 % 128;
            meta.csum_offset = (r >> 48) as u16 % 32;
        }
        let Ok(layout) = validate(&meta, &f) else {
            continue;
        };
        if meta.needs_csum() {
            complete_checksum(
                &mut f.clone(),
                meta.csum_start.into(),
                meta.csum_offset.into(),
            );
        }
        if meta.is_gso() {
            accepted_gso += 1;
            let size = usize::from(meta.gso_size);
            let n = segment_count(f.len(), &layout, size);
            let mut total = 0;
            for k in 0..n {
                total += segment(&f, &layout, size, k, &mut dst, k % 2 == 0) - layout.payload;
            }
            assert_eq!(total, f.len() - layout.payload);
        }
    }
    assert!(
        accepted_gso > 1000,
        "only {accepted_gso} GSO headers accepted: the fuzz is too hostile to reach segment"
    );
}
