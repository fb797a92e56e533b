//! Header extraction: frame bytes → [`FlowKey`]. This runs once per packet
//! (before the exact-match cache), so it reads fixed offsets with as few
//! length checks as the frame's shape allows; it never panics on short or
//! malformed frames — missing layers simply leave their fields zero.

use crate::key::{FlowKey, PortNo, VLAN_PRESENT, mac_to_u64};

pub const ETHERTYPE_IPV4: u16 = 0x0800;
pub const ETHERTYPE_ARP: u16 = 0x0806;
pub const ETHERTYPE_VLAN: u16 = 0x8100;
pub const ETHERTYPE_QINQ: u16 = 0x88a8;
pub const IPPROTO_TCP: u8 = 6;
pub const IPPROTO_UDP: u8 = 17;
pub const IPPROTO_SCTP: u8 = 132;
pub const IPPROTO_ICMP: u8 = 1;

/// Shortest frame the datapath accepts: an Ethernet header.
pub const MIN_FRAME: usize = 14;

#[inline(always)]
fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[inline(always)]
fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Reads the headers of `frame` (which arrived on `in_port`) into a key.
/// Frames shorter than [`MIN_FRAME`] give a key with only `in_port` set.
#[inline]
pub fn extract(in_port: PortNo, frame: &[u8]) -> FlowKey {
    let mut k = FlowKey::ZERO;
    k.set_in_port(in_port);
    if frame.len() < MIN_FRAME {
        return k;
    }
    let dst = mac_to_u64([frame[0], frame[1], frame[2], frame[3], frame[4], frame[5]]);
    let src = mac_to_u64([frame[6], frame[7], frame[8], frame[9], frame[10], frame[11]]);
    let mut dl_type = be16(frame, 12);
    let mut l3 = 14;
    let mut tci = 0u16;
    if (dl_type == ETHERTYPE_VLAN || dl_type == ETHERTYPE_QINQ) && frame.len() >= 18 {
        // Keep PCP and VID; the DEI bit position is reused as "tag present".
        tci = (be16(frame, 14) & !VLAN_PRESENT) | VLAN_PRESENT;
        dl_type = be16(frame, 16);
        l3 = 18;
    }
    let mut w0 = in_port as u64 | (dl_type as u64) << 16 | (tci as u64) << 32;
    let mut tp_src = 0u64;
    let mut tp_dst = 0u64;
    let mut w3 = 0u64;
    let l3b = &frame[l3..];
    if dl_type == ETHERTYPE_IPV4 && l3b.len() >= 20 && l3b[0] >> 4 == 4 {
        let ihl = ((l3b[0] & 0x0f) as usize) * 4;
        let proto = l3b[9];
        w0 |= (proto as u64) << 48;
        w3 = be32(l3b, 12) as u64 | (be32(l3b, 16) as u64) << 32;
        let frag_offset = be16(l3b, 6) & 0x1fff;
        let has_ports = matches!(proto, IPPROTO_TCP | IPPROTO_UDP | IPPROTO_SCTP);
        if ihl >= 20 && frag_offset == 0 && l3b.len() >= ihl + 4 {
            if has_ports {
                tp_src = be16(l3b, ihl) as u64;
                tp_dst = be16(l3b, ihl + 2) as u64;
            } else if proto == IPPROTO_ICMP {
                // OVS puts ICMP type/code in tp_src/tp_dst.
                tp_src = l3b[ihl] as u64;
                tp_dst = l3b[ihl + 1] as u64;
            }
        }
    } else if dl_type == ETHERTYPE_ARP && l3b.len() >= 28 {
        // OVS convention: ARP opcode in nw_proto (low 8 bits), SPA/TPA in nw_src/nw_dst.
        w0 |= (l3b[7] as u64) << 48;
        w3 = be32(l3b, 14) as u64 | (be32(l3b, 24) as u64) << 32;
    }
    k.w = [w0, src | tp_src << 48, dst | tp_dst << 48, w3];
    k
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
}
