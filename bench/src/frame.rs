//! The one frame the endpoint's generator replays: a valid Ethernet/IPv4/UDP
//! frame of exactly `size` bytes (no FCS, as carried in a virtio buffer),
//! written as a one-record pcap for testpmd's `net_pcap` (`infinite_rx=1`).

use nfv_wire::{
    EtherType, EthernetAddress, EthernetFrame, EthernetRepr, IpProtocol, Ipv4Packet, Ipv4Repr,
    UdpPacket, UdpRepr, ethernet, ipv4, udp,
};

pub const SRC_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
pub const DST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
/// RFC 2544 benchmarking addresses (198.18.0.0/15).
pub const SRC_IP: [u8; 4] = [198, 18, 0, 1];
pub const DST_IP: [u8; 4] = [198, 18, 0, 2];
pub const UDP_PORT: u16 = 1024;

pub const MIN_SIZE: usize = 60;
/// Largest frame that passes a 1500-byte MTU (OVS vhost ports: 1518).
pub const MAX_SIZE: usize = 1518;

/// The frame bytes. `size` must be within `MIN_SIZE..=MAX_SIZE`.
pub fn udp_frame(size: usize) -> Result<Vec<u8>, String> {
    if !(MIN_SIZE..=MAX_SIZE).contains(&size) {
        return Err(format!(
            "frame size {size}: must be {MIN_SIZE}..={MAX_SIZE} (a 1500-byte MTU carries at most 1518-byte frames)"
        ));
    }
    let headers = ethernet::HEADER_LEN + ipv4::HEADER_LEN + udp::HEADER_LEN;
    let payload_len = size - headers;
    let mut f = vec![0u8; size];
    let mut eth = EthernetFrame::new_unchecked(&mut f[..]);
    EthernetRepr {
        src: EthernetAddress(SRC_MAC),
        dst: EthernetAddress(DST_MAC),
        ethertype: EtherType::IPV4,
    }
    .emit(&mut eth);
    let mut ip = Ipv4Packet::new_unchecked(eth.payload_mut());
    Ipv4Repr {
        src: SRC_IP.into(),
        dst: DST_IP.into(),
        protocol: IpProtocol::UDP,
        payload_len: udp::HEADER_LEN + payload_len,
        ttl: 64,
    }
    .emit(&mut ip);
    // UDP checksum 0 = none (IPv4).
    UdpRepr {
        src_port: UDP_PORT,
        dst_port: UDP_PORT,
        payload_len,
    }
    .emit_header(&mut UdpPacket::new_unchecked(ip.payload_mut()));
    Ok(f)
}

/// A classic pcap file (microsecond timestamps, LINKTYPE_ETHERNET) holding
/// one record.
pub fn pcap(frame: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(24 + 16 + frame.len());
    p.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    p.extend_from_slice(&2u16.to_le_bytes());
    p.extend_from_slice(&4u16.to_le_bytes());
    p.extend_from_slice(&0i32.to_le_bytes()); // thiszone
    p.extend_from_slice(&0u32.to_le_bytes()); // sigfigs
    p.extend_from_slice(&65_535u32.to_le_bytes()); // snaplen
    p.extend_from_slice(&1u32.to_le_bytes()); // Ethernet
    p.extend_from_slice(&0u32.to_le_bytes()); // ts_sec
    p.extend_from_slice(&0u32.to_le_bytes()); // ts_usec
    p.extend_from_slice(&(frame.len() as u32).to_le_bytes());
    p.extend_from_slice(&(frame.len() as u32).to_le_bytes());
    p.extend_from_slice(frame);
    p
}

/// Writes the one-frame pcap of `size` bytes to `path`.
pub fn write_pcap(size: usize, path: &std::path::Path) -> Result<(), String> {
    let f = udp_frame(size)?;
    std::fs::write(path, pcap(&f)).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_parses_as_udp_with_valid_ip_checksum() {
        for size in [60, 64, 128, 1500, 1518] {
            let f = udp_frame(size).unwrap();
            assert_eq!(f.len(), size);
            let p = etherparse::SlicedPacket::from_ethernet(&f).unwrap();
            let Some(etherparse::NetSlice::Ipv4(ip)) = p.net else {
                panic!("not IPv4")
            };
            assert_eq!(ip.header().source(), SRC_IP);
            assert_eq!(ip.header().destination(), DST_IP);
            assert_eq!(usize::from(ip.header().total_len()), size - 14);
            let h = ip.header().to_header();
            assert_eq!(h.header_checksum, h.calc_header_checksum());
            let Some(etherparse::TransportSlice::Udp(u)) = p.transport else {
                panic!("not UDP")
            };
            assert_eq!(u.destination_port(), UDP_PORT);
            assert_eq!(usize::from(u.length()), size - 34);
        }
    }

    #[test]
    fn sizes_outside_the_mtu_are_refused() {
        assert!(udp_frame(59).is_err());
        assert!(udp_frame(1519).is_err());
    }

    #[test]
    fn pcap_layout() {
        let f = udp_frame(64).unwrap();
        let p = pcap(&f);
        assert_eq!(p.len(), 24 + 16 + 64);
        assert_eq!(&p[..4], &[0xd4, 0xc3, 0xb2, 0xa1]);
        assert_eq!(u32::from_le_bytes(p[20..24].try_into().unwrap()), 1);
        assert_eq!(u32::from_le_bytes(p[32..36].try_into().unwrap()), 64);
        assert_eq!(&p[40..], &f[..]);
    }
}
