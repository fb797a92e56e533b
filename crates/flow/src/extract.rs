//! Header extraction: frame bytes → [`FlowKey`]. This runs once per packet
//! (before the exact-match cache), so it reads fixed offsets with as few
//! length checks as the frame's shape allows; it never panics on short or
//! malformed frames — missing layers simply leave their fields zero.
//!
//! Every offset comes from `nfv_wire` (views over the bytes after one
//! length check per layer, so the compiler drops the per-field checks).
//! VLAN tags follow [`nfv_wire::l2`]: up to two are skipped, the outer
//! TCI goes into `vlan_tci`, and the L3 fields come from what follows.

use crate::key::{FlowKey, PortNo, VLAN_PRESENT};
use nfv_wire::{
    ArpPacket, EtherType, IpProtocol, Ipv4Packet, UdpPacket, arp, ethernet, icmpv4, ipv4, tcp, udp,
};

/// Shortest frame the datapath accepts: an Ethernet header.
pub const MIN_FRAME: usize = ethernet::HEADER_LEN;

// TCP, UDP and SCTP keep their ports at the same offsets; extraction reads
// all three through the UDP view.
const _: () = assert!(
    tcp::field::SRC_PORT.start == udp::field::SRC_PORT.start
        && tcp::field::DST_PORT.end == udp::field::DST_PORT.end
);

/// Bytes of the transport header that extraction reads (the two ports, or
/// ICMP type and code).
const L4_READ: usize = udp::field::DST_PORT.end;

/// Reads the headers of `frame` (which arrived on `in_port`) into a key.
/// Frames shorter than [`MIN_FRAME`] give a key with only `in_port` set.
#[inline]
pub fn extract(in_port: PortNo, frame: &[u8]) -> FlowKey {
    let mut k = FlowKey::ZERO;
    k.set_in_port(in_port);
    let Some(l2) = nfv_wire::l2::walk(frame) else {
        return k;
    };
    let eth = ethernet::EthernetFrame::new_unchecked(&frame[..ethernet::HEADER_LEN]);
    let dst = eth.dst_addr_u64();
    let src = eth.src_addr_u64();
    let dl_type = l2.ethertype;
    // Keep PCP and VID; the DEI bit position is reused as "tag present".
    let tci = l2
        .outer_tci
        .map_or(0, |t| (t & !VLAN_PRESENT) | VLAN_PRESENT);
    let mut w0 = in_port as u64 | (dl_type.0 as u64) << 16 | (tci as u64) << 32;
    let mut tp_src = 0u64;
    let mut tp_dst = 0u64;
    let mut w3 = 0u64;
    let l3b = &frame[l2.l3_offset..];
    if dl_type == EtherType::IPV4 && l3b.len() >= ipv4::HEADER_LEN {
        let ip = Ipv4Packet::new_unchecked(l3b);
        if ip.version() == 4 {
            let proto = ip.protocol();
            w0 |= (proto.0 as u64) << 48;
            w3 = u32::from(ip.src_addr()) as u64 | (u32::from(ip.dst_addr()) as u64) << 32;
            let ihl = usize::from(ip.header_len());
            if ihl >= ipv4::HEADER_LEN && ip.frag_offset() == 0 && l3b.len() >= ihl + L4_READ {
                (tp_src, tp_dst) = l4_fields(proto, &l3b[ihl..]);
            }
        }
    } else if dl_type == EtherType::ARP && l3b.len() >= arp::PACKET_LEN {
        // OVS convention: ARP opcode in nw_proto (low 8 bits), SPA/TPA in nw_src/nw_dst.
        let a = ArpPacket::new_unchecked(l3b);
        w0 |= (a.operation().0 as u8 as u64) << 48;
        w3 = u32::from(a.spa()) as u64 | (u32::from(a.tpa()) as u64) << 32;
    }
    k.w = [w0, src | tp_src << 48, dst | tp_dst << 48, w3];
    k
}

/// `tp_src` and `tp_dst` of a first fragment's transport header `l4` (at
/// least [`L4_READ`] bytes): ports for TCP, UDP and SCTP; type and code
/// for ICMP (as OVS does); zero for anything else.
#[inline(always)]
fn l4_fields(proto: IpProtocol, l4: &[u8]) -> (u64, u64) {
    match proto {
        IpProtocol::TCP | IpProtocol::UDP | IpProtocol::SCTP => {
            let p = UdpPacket::new_unchecked(l4);
            (p.src_port() as u64, p.dst_port() as u64)
        }
        IpProtocol::ICMP => (
            l4[icmpv4::field::TYPE] as u64,
            l4[icmpv4::field::CODE] as u64,
        ),
        _ => (0, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn udp_frame(vlan: Option<u16>) -> Vec<u8> {
        let mut f = vec![
            0x02, 0, 0, 0, 0, 0x02, // dst
            0x02, 0, 0, 0, 0, 0x01, // src
        ];
        if let Some(tci) = vlan {
            f.extend_from_slice(&[0x81, 0x00]);
            f.extend_from_slice(&tci.to_be_bytes());
        }
        f.extend_from_slice(&[0x08, 0x00]);
        f.extend_from_slice(&[
            0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, // ver/ihl .. proto, csum
            10, 0, 0, 1, // src
            10, 0, 0, 2, // dst
            0x30, 0x39, 0x00, 0x35, 0, 8, 0, 0, // udp 12345 -> 53
        ]);
        f
    }

    #[test]
    fn table_of_frames() {
        struct Case {
            name: &'static str,
            frame: Vec<u8>,
            dl_type: u16,
            tci: u16,
            proto: u8,
            nw: (u32, u32),
            tp: (u16, u16),
        }
        let mut frag = udp_frame(None);
        frag[14 + 6] = 0x00;
        frag[14 + 7] = 0x10; // fragment offset != 0: no L4 ports
        let mut truncated_l4 = udp_frame(None);
        truncated_l4.truncate(14 + 20 + 2);
        let mut bad_version = udp_frame(None);
        bad_version[14] = 0x65;
        // Tags inserted in front of the (possibly already tagged) EtherType.
        let push = |f: Vec<u8>, tpid: u16, tci: u16| {
            let mut f = f;
            f.splice(
                12..12,
                tpid.to_be_bytes().into_iter().chain(tci.to_be_bytes()),
            );
            f
        };
        let qinq = push(udp_frame(Some(100)), 0x88a8, 0x0007);
        let three_tags = push(qinq.clone(), 0x8100, 0x0009);
        let mut icmp = udp_frame(None);
        icmp[14 + 9] = 1;
        icmp[34..36].copy_from_slice(&[8, 0]); // echo request
        #[rustfmt::skip]
        let arp = vec![
            0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x06,
            0, 1, 0x08, 0, 6, 4, 0, 2, // Ethernet/IPv4, reply
            0x02, 0, 0, 0, 0, 0x01, 10, 0, 0, 1, // sha, spa
            0x02, 0, 0, 0, 0, 0x02, 10, 0, 0, 2, // tha, tpa
        ];
        let cases = [
            Case {
                name: "udp",
                frame: udp_frame(None),
                dl_type: 0x0800,
                tci: 0,
                proto: 17,
                nw: (0x0a000001, 0x0a000002),
                tp: (12345, 53),
            },
            Case {
                name: "vlan udp",
                frame: udp_frame(Some(0x2000 | 100)),
                dl_type: 0x0800,
                tci: VLAN_PRESENT | 0x2000 | 100,
                proto: 17,
                nw: (0x0a000001, 0x0a000002),
                tp: (12345, 53),
            },
            Case {
                name: "QinQ udp: two tags skipped, the outer TCI kept",
                frame: qinq,
                dl_type: 0x0800,
                tci: VLAN_PRESENT | 7,
                proto: 17,
                nw: (0x0a000001, 0x0a000002),
                tp: (12345, 53),
            },
            Case {
                name: "three tags: the third TPID is the dl_type, no L3",
                frame: three_tags,
                dl_type: 0x8100,
                tci: VLAN_PRESENT | 9,
                proto: 0,
                nw: (0, 0),
                tp: (0, 0),
            },
            Case {
                name: "icmp type and code in tp_src and tp_dst",
                frame: icmp,
                dl_type: 0x0800,
                tci: 0,
                proto: 1,
                nw: (0x0a000001, 0x0a000002),
                tp: (8, 0),
            },
            Case {
                name: "arp opcode and addresses",
                frame: arp,
                dl_type: 0x0806,
                tci: 0,
                proto: 2,
                nw: (0x0a000001, 0x0a000002),
                tp: (0, 0),
            },
            Case {
                name: "later fragment",
                frame: frag,
                dl_type: 0x0800,
                tci: 0,
                proto: 17,
                nw: (0x0a000001, 0x0a000002),
                tp: (0, 0),
            },
            Case {
                name: "truncated l4",
                frame: truncated_l4,
                dl_type: 0x0800,
                tci: 0,
                proto: 17,
                nw: (0x0a000001, 0x0a000002),
                tp: (0, 0),
            },
            Case {
                name: "not ipv4 version",
                frame: bad_version,
                dl_type: 0x0800,
                tci: 0,
                proto: 0,
                nw: (0, 0),
                tp: (0, 0),
            },
            Case {
                name: "runt",
                frame: vec![0; 13],
                dl_type: 0,
                tci: 0,
                proto: 0,
                nw: (0, 0),
                tp: (0, 0),
            },
            Case {
                name: "eth only",
                frame: udp_frame(None)[..14].to_vec(),
                dl_type: 0x0800,
                tci: 0,
                proto: 0,
                nw: (0, 0),
                tp: (0, 0),
            },
        ];
        for c in cases {
            let k = extract(7, &c.frame);
            assert_eq!(k.in_port(), 7, "{}", c.name);
            assert_eq!(k.dl_type(), c.dl_type, "{}", c.name);
            assert_eq!(k.vlan_tci(), c.tci, "{}", c.name);
            assert_eq!(k.nw_proto(), c.proto, "{}", c.name);
            assert_eq!((k.nw_src(), k.nw_dst()), c.nw, "{}", c.name);
            assert_eq!((k.tp_src(), k.tp_dst()), c.tp, "{}", c.name);
            if c.frame.len() >= 14 {
                assert_eq!(k.dl_src(), [2, 0, 0, 0, 0, 1], "{}", c.name);
                assert_eq!(k.dl_dst(), [2, 0, 0, 0, 0, 2], "{}", c.name);
            }
        }
    }

    /// The extraction rules written out with plain offsets, independently
    /// of `nfv_wire`, as an oracle for the property below.
    fn reference(in_port: PortNo, f: &[u8]) -> FlowKey {
        let be16 = |at: usize| Some(u16::from_be_bytes([*f.get(at)?, *f.get(at + 1)?]));
        let mut k = FlowKey::ZERO;
        k.set_in_port(in_port);
        let Some(mut dl_type) = be16(12) else {
            return k;
        };
        k.set_dl_dst(f[0..6].try_into().unwrap());
        k.set_dl_src(f[6..12].try_into().unwrap());
        let mut l3 = 14;
        for _ in 0..2 {
            if !matches!(dl_type, 0x8100 | 0x88a8) || f.len() < l3 + 4 {
                break;
            }
            if k.vlan_tci() == 0 {
                k.set_vlan_tci(be16(l3).unwrap() | VLAN_PRESENT);
            }
            dl_type = be16(l3 + 2).unwrap();
            l3 += 4;
        }
        k.set_dl_type(dl_type);
        let ip = &f[l3..];
        if dl_type == 0x0800 && ip.len() >= 20 && ip[0] >> 4 == 4 {
            k.set_nw_proto(ip[9]);
            k.set_nw_src(u32::from_be_bytes(ip[12..16].try_into().unwrap()));
            k.set_nw_dst(u32::from_be_bytes(ip[16..20].try_into().unwrap()));
            let ihl = usize::from(ip[0] & 15) * 4;
            let first = u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff == 0;
            if ihl >= 20 && first && ip.len() >= ihl + 4 {
                let l4 = &ip[ihl..];
                let (s, d) = match ip[9] {
                    6 | 17 | 132 => (
                        u16::from_be_bytes([l4[0], l4[1]]),
                        u16::from_be_bytes([l4[2], l4[3]]),
                    ),
                    1 => (l4[0].into(), l4[1].into()),
                    _ => (0, 0),
                };
                k.set_tp_src(s);
                k.set_tp_dst(d);
            }
        } else if dl_type == 0x0806 && ip.len() >= 28 {
            k.set_nw_proto(ip[7]);
            k.set_nw_src(u32::from_be_bytes(ip[14..18].try_into().unwrap()));
            k.set_nw_dst(u32::from_be_bytes(ip[24..28].try_into().unwrap()));
        }
        k
    }

    /// Frames shaped like real ones often enough to reach every branch:
    /// 0-3 tags, IPv4/ARP/other, IHL 5 or 6, the transport protocols that
    /// have ports, fragments, then cut at any length.
    fn arb_frame() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        let tag = (
            prop_oneof![Just(0x8100u16), Just(0x88a8), any::<u16>()],
            any::<u16>(),
        );
        (
            any::<[u8; 12]>(),
            proptest::collection::vec(tag, 0..4),
            prop_oneof![Just(0x0800u16), Just(0x0806), any::<u16>()],
            prop_oneof![Just(0x45u8), Just(0x46), any::<u8>()],
            prop_oneof![Just(6u8), Just(17), Just(132), Just(1), any::<u8>()],
            prop_oneof![Just(0u16), any::<u16>()],
            proptest::collection::vec(any::<u8>(), 40),
            0usize..100,
        )
            .prop_map(|(macs, tags, et, vihl, proto, frag, rest, len)| {
                let mut f = macs.to_vec();
                for (tpid, tci) in tags {
                    f.extend_from_slice(&tpid.to_be_bytes());
                    f.extend_from_slice(&tci.to_be_bytes());
                }
                f.extend_from_slice(&et.to_be_bytes());
                let l3 = f.len();
                f.extend_from_slice(&rest);
                f[l3] = vihl;
                f[l3 + 6..l3 + 8].copy_from_slice(&frag.to_be_bytes());
                f[l3 + 9] = proto;
                f.truncate(len);
                f
            })
    }

    proptest::proptest! {
        #[test]
        fn agrees_with_the_reference_and_never_panics(
            frame in arb_frame(),
            junk in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..80),
            in_port in 1u16..100,
        ) {
            proptest::prop_assert_eq!(extract(in_port, &frame), reference(in_port, &frame));
            proptest::prop_assert_eq!(extract(in_port, &junk), reference(in_port, &junk));
        }
    }
}
