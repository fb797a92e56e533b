//! The IPv4/L4 rewrites against etherparse: every edited frame's IPv4 and
//! TCP/UDP checksums verify when computed from scratch, the field holds
//! its new value, and no byte outside the field and the checksums moved.

use super::*;
use etherparse::{PacketBuilder, SlicedPacket, TransportSlice};
use nfv_mem::{MemoryConfig, PacketPool};

const SRC_IP: [u8; 4] = [10, 0, 0, 1];
const DST_IP: [u8; 4] = [192, 0, 2, 7];

fn builder(vlan: bool) -> etherparse::PacketBuilderStep<etherparse::IpHeaders> {
    let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
    if vlan {
        b.single_vlan(etherparse::VlanId::try_new(100).unwrap())
            .ipv4(SRC_IP, DST_IP, 64)
    } else {
        b.ipv4(SRC_IP, DST_IP, 64)
    }
}

fn udp(vlan: bool) -> Vec<u8> {
    let payload = [0x5au8; 37];
    let b = builder(vlan).udp(4000, 53);
    let mut v = Vec::with_capacity(b.size(payload.len()));
    b.write(&mut v, &payload).unwrap();
    v
}

fn tcp() -> Vec<u8> {
    let payload = [0xa5u8; 100];
    let b = builder(false)
        .tcp(40000, 80, 0x1234_5678, 1024)
        .ack(7)
        .psh();
    let mut v = Vec::with_capacity(b.size(payload.len()));
    b.write(&mut v, &payload).unwrap();
    v
}

/// The IPv4 header's offset in a frame built above.
fn l3(frame: &[u8]) -> usize {
    nfv_wire::l2::walk(frame).unwrap().l3_offset
}

/// Checks every checksum of `f` from scratch (None: UDP without one).
fn checksums_verify(f: &[u8]) -> bool {
    let p = SlicedPacket::from_ethernet(f).unwrap();
    let Some(etherparse::NetSlice::Ipv4(ip)) = &p.net else {
        panic!("not IPv4");
    };
    let h = ip.header().to_header();
    if h.calc_header_checksum() != h.header_checksum {
        return false;
    }
    match &p.transport {
        Some(TransportSlice::Udp(u)) if u.checksum() == 0 => true,
        Some(TransportSlice::Udp(u)) => {
            u.to_header().calc_checksum_ipv4(&h, u.payload()).unwrap() == u.checksum()
        }
        Some(TransportSlice::Tcp(t)) => {
            t.to_header().calc_checksum_ipv4(&h, t.payload()).unwrap() == t.checksum()
        }
        _ => true,
    }
}

pub(super) type Edit = fn(&mut Packet) -> Result<(), DropReason>;
/// (name, frame, edit, (offset from the IPv4 header, new bytes) the edit
/// must leave, whether the L4 checksum field may change)
type Case = (&'static str, Vec<u8>, Edit, (usize, Vec<u8>), bool);

fn cases() -> Vec<Case> {
    vec![
        (
            "udp mod_nw_src",
            udp(false),
            |p| set_nw_addr(p, true, 0x0a63_6301),
            (12, vec![10, 99, 99, 1]),
            true,
        ),
        (
            "udp mod_nw_dst",
            udp(false),
            |p| set_nw_addr(p, false, 0xc0a8_0101),
            (16, vec![192, 168, 1, 1]),
            true,
        ),
        (
            "tcp mod_nw_dst",
            tcp(),
            |p| set_nw_addr(p, false, 0xffff_ffff),
            (16, vec![255; 4]),
            true,
        ),
        (
            "vlan udp mod_nw_src",
            udp(true),
            |p| set_nw_addr(p, true, 1),
            (12, vec![0, 0, 0, 1]),
            true,
        ),
        (
            "udp mod_tp_src",
            udp(false),
            |p| set_tp_port(p, true, 1),
            (20, vec![0, 1]),
            true,
        ),
        (
            "tcp mod_tp_dst",
            tcp(),
            |p| set_tp_port(p, false, 8080),
            (22, 8080u16.to_be_bytes().to_vec()),
            true,
        ),
        (
            "mod_nw_tos",
            tcp(),
            |p| set_nw_tos(p, 0xb8),
            (1, vec![0xb8]),
            false,
        ),
        (
            "mod_nw_ecn",
            udp(false),
            |p| set_nw_ecn(p, 3),
            (1, vec![0x03]),
            false,
        ),
        (
            "mod_nw_ttl",
            udp(false),
            |p| set_nw_ttl(p, 1),
            (8, vec![1]),
            false,
        ),
        ("dec_ttl", tcp(), dec_ttl, (8, vec![63]), false),
    ]
}

pub(super) fn pool() -> std::sync::Arc<PacketPool> {
    PacketPool::new("ip-actions", &MemoryConfig::plain(2048, 64)).unwrap()
}

pub(super) fn run(
    cache: &mut nfv_mem::PoolCache,
    input: &[u8],
    edit: Edit,
) -> Result<Vec<u8>, DropReason> {
    let mut p = cache.alloc().unwrap();
    p.set_len(input.len()).unwrap();
    p.data_mut().copy_from_slice(input);
    let got = edit(&mut p).map(|_| p.data().to_vec());
    cache.free(p);
    got
}

#[test]
fn rewrites_keep_every_checksum_valid_and_touch_nothing_else() {
    let pool = pool();
    let mut cache = pool.cache();
    for (name, input, edit, (at, want), l4_csum_moves) in cases() {
        assert!(checksums_verify(&input), "{name}: the input verifies");
        let out = run(&mut cache, &input, edit).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        let ip = l3(&out);
        assert_eq!(
            &out[ip + at..ip + at + want.len()],
            &want[..],
            "{name}: the field"
        );
        assert!(checksums_verify(&out), "{name}: checksums verify after");
        // Bytes allowed to differ: the field, the IPv4 checksum, and the
        // L4 checksum where the field is covered by it.
        let ihl = usize::from(out[ip] & 0x0f) * 4;
        let l4_csum = ip + ihl + if out[ip + 9] == 6 { 16 } else { 6 };
        for (i, (a, b)) in input.iter().zip(&out).enumerate() {
            let allowed = (ip + at..ip + at + want.len()).contains(&i)
                || (ip + 10..ip + 12).contains(&i)
                || (l4_csum_moves && (l4_csum..l4_csum + 2).contains(&i));
            assert!(a == b || allowed, "{name}: byte {i} changed");
        }
    }
}

#[test]
fn udp_without_a_checksum_keeps_none_and_other_frames_pass_unchanged() {
    let pool = pool();
    let mut cache = pool.cache();
    let mut no_csum = udp(false);
    let csum = l3(&no_csum) + 20 + 6;
    no_csum[csum..csum + 2].fill(0);
    let out = run(&mut cache, &no_csum, |p| set_nw_addr(p, true, 0x0102_0304)).unwrap();
    assert_eq!(&out[csum..csum + 2], &[0, 0], "no UDP checksum stays none");
    assert!(checksums_verify(&out));

    // A later fragment has no L4 header: addresses change (IPv4 checksum
    // with them), the bytes where ports would be do not.
    let mut later = udp(false);
    let ip = l3(&later);
    later[ip + 6..ip + 8].copy_from_slice(&0x0010u16.to_be_bytes());
    let mut h = Ipv4Packet::new_unchecked(&mut later[ip..]);
    h.fill_checksum();
    let out = run(&mut cache, &later, |p| set_tp_port(p, true, 9)).unwrap();
    assert_eq!(out, later, "ports of a later fragment");
    let out = run(&mut cache, &later, |p| set_nw_addr(p, false, 7)).unwrap();
    assert_eq!(
        &out[ip + 20..],
        &later[ip + 20..],
        "payload of a later fragment"
    );

    // Not IPv4 (ARP), a runt, a bad IHL: unchanged, not dropped.
    let arp = {
        let mut f = vec![0xff; 6];
        f.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x08, 0x06]);
        f.extend_from_slice(&[0; 28]);
        f
    };
    let mut bad_ihl = udp(false);
    let at = l3(&bad_ihl);
    bad_ihl[at] = 0x44;
    let short = udp(false)[..30].to_vec();
    for (name, f) in [("arp", arp), ("bad ihl", bad_ihl), ("short", short)] {
        for edit in [
            (|p: &mut Packet| set_nw_addr(p, true, 1)) as Edit,
            |p| set_tp_port(p, false, 1),
            |p| set_nw_ttl(p, 9),
            dec_ttl,
        ] {
            assert_eq!(run(&mut cache, &f, edit), Ok(f.clone()), "{name}");
        }
    }
}

#[test]
fn dec_ttl_drops_at_one_and_zero() {
    let pool = pool();
    let mut cache = pool.cache();
    for ttl in [0u8, 1] {
        let mut f = udp(false);
        let ip = l3(&f);
        let mut h = Ipv4Packet::new_unchecked(&mut f[ip..]);
        h.set_ttl(ttl);
        h.fill_checksum();
        assert_eq!(
            run(&mut cache, &f, dec_ttl),
            Err(DropReason::TtlExpired),
            "ttl {ttl}"
        );
    }
}

#[test]
fn an_offloaded_partial_checksum_follows_the_address_and_ignores_the_port() {
    // A guest's NEEDS_CSUM frame: the L4 checksum field holds the
    // pseudo-header's sum; completing it after the rewrite must give the
    // checksum a from-scratch computation gives.
    let pool = pool();
    let mut cache = pool.cache();
    let full = tcp();
    let ip = l3(&full);
    let l4 = ip + 20;
    let pseudo = |f: &[u8]| {
        let h = Ipv4Packet::new_unchecked(&f[ip..]);
        nfv_wire::checksum::pseudo_header(
            h.src_addr(),
            h.dst_addr(),
            IpProtocol::TCP,
            (f.len() - l4) as u32,
        )
    };
    let mut partial = full.clone();
    let p0 = pseudo(&partial);
    partial[l4 + 16..l4 + 18].copy_from_slice(&p0.to_be_bytes());
    for edit in [
        (|p: &mut Packet| set_nw_addr(p, true, 0x0b0b_0b0b)) as Edit,
        |p| set_tp_port(p, true, 22),
    ] {
        let mut p = cache.alloc().unwrap();
        p.set_len(partial.len()).unwrap();
        p.data_mut().copy_from_slice(&partial);
        let meta = nfv_offload::OffloadMeta {
            flags: nfv_offload::F_NEEDS_CSUM,
            csum_start: l4 as u16,
            csum_offset: 16,
            ..Default::default()
        };
        assert!(p.set_offload(meta.to_virtio_hdr()));
        edit(&mut p).unwrap();
        let mut out = p.data().to_vec();
        cache.free(p);
        assert_eq!(
            u16::from_be_bytes([out[l4 + 16], out[l4 + 17]]),
            pseudo(&out),
            "the field still holds the pseudo-header sum of the new addresses"
        );
        nfv_offload::checksum::complete_checksum(&mut out, l4, 16);
        assert!(checksums_verify(&out), "completed, it verifies");
    }
}
