//! Header extraction: frame bytes → [`FlowKey`]. This runs once per packet
//! (before the exact-match cache), so it reads fixed offsets with as few
//! length checks as the frame's shape allows; it never panics on short or
//! malformed frames — missing layers simply leave their fields zero.
//!
//! Every offset comes from `nfv_wire` (views over the bytes after one
//! length check per layer, so the compiler drops the per-field checks).
//! VLAN tags follow [`nfv_wire::l2`]: up to two are skipped, the outer
//! TCI goes into `vlan_tci`, and the L3 fields come from what follows.

use crate::key::{
    BASE_WORDS, FRAG_ANY, FRAG_LATER, FlowKey, KEY_WORDS, PACKET_EXT, PortNo, VLAN_PRESENT,
};
use nfv_wire::ipv6::{self, Fragment};
use nfv_wire::{
    ArpPacket, EtherType, IpProtocol, Ipv4Packet, Ipv6Packet, UdpPacket, arp, ethernet, icmpv4,
    icmpv6, ipv4, tcp, udp,
};

/// The key words extraction writes past the base ones (see
/// [`crate::key`]'s layout; the key tests check these against the
/// fields' accessors).
pub(crate) const W_IPV6_SRC: usize = 7;
pub(crate) const W_IPV6_DST: usize = 9;
pub(crate) const W_ND_TARGET: usize = 11;
pub(crate) const W_ARP_SHA: usize = 13;
pub(crate) const W_ARP_THA: usize = 14;

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

/// The bits of TCP's offset-and-flags word that are flags (OVS's
/// `tcp_flags`: the nine defined flags and the three reserved bits).
const TCP_FLAGS_MASK: u16 = 0x0fff;

/// Reads the headers of `frame` (which arrived on `in_port`) into a key.
/// Frames shorter than [`MIN_FRAME`] give a key with only `in_port` set.
#[inline(always)]
pub fn extract(in_port: PortNo, frame: &[u8]) -> FlowKey {
    let mut k = FlowKey::ZERO;
    extract_into(in_port, frame, &mut k);
    k
}

/// [`extract()`] into `k`, which holds [`FlowKey::ZERO`] or a key this
/// function wrote (all its words are then written, or were zero). The PMD's loop builds each key where it keeps
/// it: an IPv4 frame writes the seven base words, and the seventeen others
/// only when the key there had them ([`PACKET_EXT`]) and they must go back
/// to zero. The `ct_*` fields are left zero (untracked): only the
/// datapath's `ct` action sets them.
#[inline(always)]
pub fn extract_into(in_port: PortNo, frame: &[u8], k: &mut FlowKey) {
    debug_assert!(k.w[4] & PACKET_EXT != 0 || !k.has_extended());
    if k.w[4] & PACKET_EXT != 0 {
        k.w[BASE_WORDS..].fill(0);
    }
    let Some(l2) = nfv_wire::l2::walk(frame) else {
        k.w[..BASE_WORDS].copy_from_slice(&[in_port as u64, 0, 0, 0, 0, 0, 0]);
        return;
    };
    let eth = ethernet::EthernetFrame::new_unchecked(&frame[..ethernet::HEADER_LEN]);
    let dst = eth.dst_addr_u64();
    let src = eth.src_addr_u64();
    let dl_type = l2.ethertype;
    // Keep PCP and VID; the DEI bit position is reused as "tag present".
    let tci = l2
        .outer_tci
        .map_or(0, |t| (t & !VLAN_PRESENT) | VLAN_PRESENT);
    let w0 = in_port as u64 | (dl_type.0 as u64) << 16 | (tci as u64) << 32;
    let l3b = &frame[l2.l3_offset..];
    let l3 = if dl_type == EtherType::IPV4 && l3b.len() >= ipv4::HEADER_LEN {
        ipv4_fields(l3b)
    } else if dl_type == EtherType::IPV6 && l3b.len() >= ipv6::HEADER_LEN {
        ipv6_fields(l3b, &mut k.w)
    } else if dl_type == EtherType::ARP && l3b.len() >= arp::PACKET_LEN {
        // OVS convention: ARP opcode in nw_proto (low 8 bits), SPA/TPA in
        // nw_src/nw_dst, SHA/THA where ND keeps its link-layer addresses.
        let a = ArpPacket::new_unchecked(l3b);
        k.w[W_ARP_SHA] = a.sha().to_u64();
        k.w[W_ARP_THA] = a.tha().to_u64();
        L3 {
            w0: (a.operation().0 as u8 as u64) << 48,
            w3: u32::from(a.spa()) as u64 | (u32::from(a.tpa()) as u64) << 32,
            w4: PACKET_EXT,
            ..L3::default()
        }
    } else {
        L3::default()
    };
    k.w[..BASE_WORDS].copy_from_slice(&[
        w0 | l3.w0,
        src | l3.tp_src << 48,
        dst | l3.tp_dst << 48,
        l3.w3,
        l3.w4,
        // metadata: a packet enters the pipeline with none.
        0,
        // ct_state, ct_zone, ct_mark: untracked.
        0,
    ]);
}

/// What the network layer adds to the base words: `nw_proto` and `nw_tos`
/// (shifted into w0), the ports, w3 and w4.
#[derive(Default)]
struct L3 {
    w0: u64,
    tp_src: u64,
    tp_dst: u64,
    w3: u64,
    w4: u64,
}

/// `w4`: `nw_ttl`, `ip_frag`, `tcp_flags`, `ipv6_label`.
#[inline(always)]
fn w4(ttl: u8, frag: u8, tcp_flags: u16, label: u32) -> u64 {
    ttl as u64 | (frag as u64) << 8 | (tcp_flags as u64) << 16 | (label as u64) << 32
}

/// An IPv4 header at `l3b` (at least [`ipv4::HEADER_LEN`] bytes).
#[inline(always)]
fn ipv4_fields(l3b: &[u8]) -> L3 {
    let ip = Ipv4Packet::new_unchecked(l3b);
    if ip.version() != 4 {
        return L3::default();
    }
    let proto = ip.protocol();
    let tos = l3b[ipv4::field::DSCP_ECN];
    let offset = ip.frag_offset();
    let frag = if ip.more_frags() || offset != 0 {
        FRAG_ANY | if offset != 0 { FRAG_LATER } else { 0 }
    } else {
        0
    };
    let mut l3 = L3 {
        w0: (proto.0 as u64) << 48 | (tos as u64) << 56,
        w3: u32::from(ip.src_addr()) as u64 | (u32::from(ip.dst_addr()) as u64) << 32,
        ..L3::default()
    };
    let mut tcp_flags = 0;
    let ihl = usize::from(ip.header_len());
    if ihl >= ipv4::HEADER_LEN && offset == 0 && l3b.len() >= ihl + L4_READ {
        let l4 = &l3b[ihl..];
        (l3.tp_src, l3.tp_dst) = l4_fields(proto, l4);
        tcp_flags = tcp_flags_of(proto, l4);
    }
    l3.w4 = w4(ip.ttl(), frag, tcp_flags, 0);
    l3
}

/// An IPv6 header at `l3b` (at least [`ipv6::HEADER_LEN`] bytes): the
/// base words' share, and the addresses and ND fields written into `w`.
/// Extension headers are skipped as [`ipv6::upper_layer`] says (bounded);
/// `nw_proto` is the upper layer's protocol, or where the walk stopped.
#[inline(never)]
fn ipv6_fields(l3b: &[u8], w: &mut [u64; KEY_WORDS]) -> L3 {
    let ip = Ipv6Packet::new_unchecked(l3b);
    if ip.version() != 6 {
        return L3::default();
    }
    let (src, dst) = (ip.src_u128(), ip.dst_u128());
    w[W_IPV6_SRC] = (src >> 64) as u64;
    w[W_IPV6_SRC + 1] = src as u64;
    w[W_IPV6_DST] = (dst >> 64) as u64;
    w[W_IPV6_DST + 1] = dst as u64;
    let rest = &l3b[ipv6::HEADER_LEN..];
    let up = ipv6::upper_layer(ip.next_header(), rest);
    let frag = match up.fragment {
        Fragment::No => 0,
        Fragment::First => FRAG_ANY,
        Fragment::Later => FRAG_ANY | FRAG_LATER,
    };
    let mut l3 = L3 {
        w0: (up.protocol.0 as u64) << 48 | (ip.traffic_class() as u64) << 56,
        ..L3::default()
    };
    let mut tcp_flags = 0;
    if up.complete && rest.len() >= up.offset + L4_READ {
        let l4 = &rest[up.offset..];
        if up.protocol == IpProtocol::ICMPV6 {
            l3.tp_src = l4[icmpv6::field::TYPE] as u64;
            l3.tp_dst = l4[icmpv6::field::CODE] as u64;
            if let Some(nd) = icmpv6::nd_fields(l4) {
                w[W_ND_TARGET] = (nd.target >> 64) as u64;
                w[W_ND_TARGET + 1] = nd.target as u64;
                w[W_ARP_SHA] = nd.sll.to_u64();
                w[W_ARP_THA] = nd.tll.to_u64();
            }
        } else {
            (l3.tp_src, l3.tp_dst) = l4_fields(up.protocol, l4);
            tcp_flags = tcp_flags_of(up.protocol, l4);
        }
    }
    l3.w4 = w4(ip.hop_limit(), frag, tcp_flags, ip.flow_label()) | PACKET_EXT;
    l3
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

/// TCP's flags when `l4` holds a whole TCP header, else 0 (OVS reads
/// them only from a complete header).
#[inline(always)]
fn tcp_flags_of(proto: IpProtocol, l4: &[u8]) -> u16 {
    if proto == IpProtocol::TCP && l4.len() >= tcp::HEADER_LEN {
        u16::from_be_bytes([l4[tcp::field::FLAGS.start], l4[tcp::field::FLAGS.start + 1]])
            & TCP_FLAGS_MASK
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    /// The word numbers extraction writes directly are the
    /// accessors' words.
    #[test]
    fn extraction_word_numbers_match_the_accessors() {
        type Set = fn(&mut FlowKey);
        let cases: [(Set, &[usize]); 5] = [
            (|k| k.set_ipv6_src(u128::MAX), &[W_IPV6_SRC, W_IPV6_SRC + 1]),
            (|k| k.set_ipv6_dst(u128::MAX), &[W_IPV6_DST, W_IPV6_DST + 1]),
            (
                |k| k.set_nd_target(u128::MAX),
                &[W_ND_TARGET, W_ND_TARGET + 1],
            ),
            (|k| k.set_arp_sha([0xff; 6]), &[W_ARP_SHA]),
            (|k| k.set_arp_tha([0xff; 6]), &[W_ARP_THA]),
        ];
        for (set, words) in cases {
            let mut k = FlowKey::ZERO;
            set(&mut k);
            let nonzero: Vec<usize> = (0..KEY_WORDS).filter(|&i| k.w[i] != 0).collect();
            assert_eq!(nonzero, words);
        }
    }

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
        let ports = |k: &mut FlowKey, proto: u8, l4: &[u8]| {
            let (s, d) = match proto {
                6 | 17 | 132 => (
                    u16::from_be_bytes([l4[0], l4[1]]),
                    u16::from_be_bytes([l4[2], l4[3]]),
                ),
                1 | 58 => (l4[0].into(), l4[1].into()),
                _ => (0, 0),
            };
            k.set_tp_src(s);
            k.set_tp_dst(d);
            if proto == 6 && l4.len() >= 20 {
                k.set_tcp_flags(u16::from_be_bytes([l4[12], l4[13]]) & 0xfff);
            }
        };
        if dl_type == 0x0800 && ip.len() >= 20 && ip[0] >> 4 == 4 {
            k.set_nw_proto(ip[9]);
            k.set_nw_tos(ip[1]);
            k.set_nw_ttl(ip[8]);
            k.set_nw_src(u32::from_be_bytes(ip[12..16].try_into().unwrap()));
            k.set_nw_dst(u32::from_be_bytes(ip[16..20].try_into().unwrap()));
            let ihl = usize::from(ip[0] & 15) * 4;
            let flags_offset = u16::from_be_bytes([ip[6], ip[7]]);
            let first = flags_offset & 0x1fff == 0;
            if flags_offset & 0x3fff != 0 {
                k.set_ip_frag(if first { 1 } else { 3 });
            }
            if ihl >= 20 && first && ip.len() >= ihl + 4 {
                ports(&mut k, ip[9], &ip[ihl..]);
            }
        } else if dl_type == 0x86dd && ip.len() >= 40 && ip[0] >> 4 == 6 {
            let vtf = u32::from_be_bytes(ip[0..4].try_into().unwrap());
            k.set_nw_tos((vtf >> 20) as u8);
            k.set_ipv6_label(vtf & 0xfffff);
            k.set_nw_ttl(ip[7]);
            k.set_ipv6_src(u128::from_be_bytes(ip[8..24].try_into().unwrap()));
            k.set_ipv6_dst(u128::from_be_bytes(ip[24..40].try_into().unwrap()));
            // Extension headers, written out again: 0, 43, 60 in units of
            // 8 bytes, 51 in units of 4, 44 fixed at 8; at most 8 of them.
            let (mut next, mut at, mut frag, mut upper) = (ip[6], 40usize, 0u8, None);
            for _ in 0..8 {
                if !matches!(next, 0 | 43 | 44 | 51 | 60) {
                    upper = (next != 50).then_some(at);
                    break;
                }
                if ip.len() < at + 8 {
                    break;
                }
                let h = &ip[at..];
                if next == 44 {
                    frag = 1;
                    if u16::from_be_bytes([h[2], h[3]]) >> 3 != 0 {
                        frag = 3;
                        next = h[0];
                        break;
                    }
                }
                let len = match next {
                    44 => 8,
                    51 => (usize::from(h[1]) + 2) * 4,
                    _ => (usize::from(h[1]) + 1) * 8,
                };
                next = h[0];
                at += len;
            }
            if upper.is_none() && frag != 3 && !matches!(next, 0 | 43 | 44 | 51 | 60 | 50) {
                // The loop ran out exactly at an upper-layer header.
                upper = Some(at);
            }
            k.set_nw_proto(next);
            k.set_ip_frag(frag);
            k.w[4] |= PACKET_EXT;
            if let Some(at) = upper.filter(|&at| ip.len() >= at + 4) {
                let l4 = &ip[at..];
                ports(&mut k, next, l4);
                if next == 58 {
                    if let Some(nd) = nfv_wire::icmpv6::nd_fields(l4) {
                        k.set_nd_target(nd.target);
                        k.set_arp_sha(nd.sll.0);
                        k.set_arp_tha(nd.tll.0);
                    }
                }
            }
        } else if dl_type == 0x0806 && ip.len() >= 28 {
            k.w[4] |= PACKET_EXT;
            k.set_nw_proto(ip[7]);
            k.set_arp_sha(ip[8..14].try_into().unwrap());
            k.set_nw_src(u32::from_be_bytes(ip[14..18].try_into().unwrap()));
            k.set_arp_tha(ip[18..24].try_into().unwrap());
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
        let v6_next = prop_oneof![
            Just(6u8),
            Just(17),
            Just(58),
            Just(0),
            Just(43),
            Just(44),
            Just(51),
            Just(60),
            Just(50),
            any::<u8>()
        ];
        (
            any::<[u8; 12]>(),
            proptest::collection::vec(tag, 0..4),
            prop_oneof![Just(0x0800u16), Just(0x86dd), Just(0x0806), any::<u16>()],
            prop_oneof![Just(0x45u8), Just(0x46), Just(0x60), any::<u8>()],
            prop_oneof![Just(6u8), Just(17), Just(132), Just(1), any::<u8>()],
            prop_oneof![Just(0u16), any::<u16>()],
            // IPv6: the fixed header's next header, and up to three
            // extension headers (next header, length byte, fragment word).
            (
                v6_next.clone(),
                proptest::collection::vec(
                    (
                        v6_next,
                        0u8..3,
                        prop_oneof![Just(0u16), Just(1), any::<u16>()],
                    ),
                    0..4,
                ),
            ),
            proptest::collection::vec(any::<u8>(), 160),
            0usize..200,
        )
            .prop_map(
                |(macs, tags, et, vihl, proto, frag, (next, exts), rest, len)| {
                    let mut f = macs.to_vec();
                    for (tpid, tci) in tags {
                        f.extend_from_slice(&tpid.to_be_bytes());
                        f.extend_from_slice(&tci.to_be_bytes());
                    }
                    f.extend_from_slice(&et.to_be_bytes());
                    let l3 = f.len();
                    f.extend_from_slice(&rest);
                    f[l3] = vihl;
                    if et == 0x86dd {
                        f[l3 + 6] = next;
                        let mut at = l3 + 40;
                        for (n, len, word) in exts {
                            f[at] = n;
                            f[at + 1] = len;
                            f[at + 2..at + 4].copy_from_slice(&word.to_be_bytes());
                            at += (usize::from(len) + 1) * 8;
                        }
                    } else {
                        f[l3 + 6..l3 + 8].copy_from_slice(&frag.to_be_bytes());
                        f[l3 + 9] = proto;
                    }
                    f.truncate(len);
                    f
                },
            )
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
            // Reusing a slot: whatever key it held, the new one is as fresh.
            let mut slot = extract(in_port, &frame);
            extract_into(in_port, &junk, &mut slot);
            proptest::prop_assert_eq!(slot, reference(in_port, &junk));
            extract_into(in_port, &frame, &mut slot);
            proptest::prop_assert_eq!(slot, reference(in_port, &frame));
        }
    }
}
