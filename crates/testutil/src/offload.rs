//! Frames as an offloading guest sends them, for tests of ports that hand
//! offload metadata to the kernel (TAP, AF_PACKET): IPv4 datagrams and
//! segments whose L4 checksum field holds only the pseudo-header sum (a
//! partial checksum, wrong as a full one) and the virtio-net header that
//! says so, with or without a GSO request.

/// The Internet checksum of `b` (RFC 1071), complemented: what goes in a
/// header's checksum field.
pub fn inet_checksum(b: &[u8]) -> u16 {
    let mut sum: u32 = b
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Who sends to whom.
#[derive(Clone, Copy, Debug)]
pub struct Ends {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    pub src_ip: [u8; 4],
    pub dst_ip: [u8; 4],
}

/// virtio-net header flag: the checksum from `csum_start` is partial.
pub const NEEDS_CSUM: u8 = 1;
/// virtio-net header GSO types.
pub const GSO_TCPV4: u8 = 1;

/// An IPv4 frame from `ends` carrying `l4` (a UDP or TCP header, `proto`
/// 17 or 6, then its payload) with the pseudo-header sum in the L4
/// checksum field; and the virtio-net header asking for the checksum to
/// be completed (NEEDS_CSUM, no GSO).
pub fn partial_csum_ipv4(ends: &Ends, proto: u8, l4: &[u8]) -> (Vec<u8>, [u8; 10]) {
    let csum_offset: usize = if proto == 6 { 16 } else { 6 };
    let mut f = Vec::with_capacity(34 + l4.len());
    f.extend_from_slice(&ends.dst_mac);
    f.extend_from_slice(&ends.src_mac);
    f.extend_from_slice(&0x0800u16.to_be_bytes());
    let mut ip = [0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
    ip[8] = 64;
    ip[9] = proto;
    ip[12..16].copy_from_slice(&ends.src_ip);
    ip[16..20].copy_from_slice(&ends.dst_ip);
    let c = inet_checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&ip[12..20]);
    pseudo.extend_from_slice(&[0, proto]);
    pseudo.extend_from_slice(&(l4.len() as u16).to_be_bytes());
    // The ones'-complement sum, not complemented: what a partial checksum
    // field holds.
    let partial = !inet_checksum(&pseudo);
    let l4_at = f.len();
    f.extend_from_slice(l4);
    f[l4_at + csum_offset..l4_at + csum_offset + 2].copy_from_slice(&partial.to_be_bytes());
    let mut h = [0u8; 10];
    h[0] = NEEDS_CSUM;
    h[6..8].copy_from_slice(&(l4_at as u16).to_le_bytes());
    h[8..10].copy_from_slice(&(csum_offset as u16).to_le_bytes());
    (f, h)
}

/// A UDP datagram from `ends` (source port 4000) to port 9 (discard:
/// nobody listens) with `payload`, partially checksummed.
pub fn partial_csum_udp(ends: &Ends, payload: &[u8]) -> (Vec<u8>, [u8; 10]) {
    let mut l4 = Vec::with_capacity(8 + payload.len());
    l4.extend_from_slice(&4000u16.to_be_bytes());
    l4.extend_from_slice(&9u16.to_be_bytes());
    l4.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    l4.extend_from_slice(&[0, 0]);
    l4.extend_from_slice(payload);
    partial_csum_ipv4(ends, 17, &l4)
}

/// A TCP segment (ACK|PSH, source port 4000, to port 9: nobody listens,
/// so the receiver answers each segment it takes with a RST) carrying
/// `payload` partially checksummed, and a virtio-net header asking for
/// it to be cut into segments of `mss` payload bytes (GSO_TCPV4).
pub fn tso_tcp(ends: &Ends, payload: &[u8], mss: u16) -> (Vec<u8>, [u8; 10]) {
    let mut l4 = vec![0u8; 20];
    l4[0..2].copy_from_slice(&4000u16.to_be_bytes());
    l4[2..4].copy_from_slice(&9u16.to_be_bytes());
    l4[4..8].copy_from_slice(&1000u32.to_be_bytes());
    l4[8..12].copy_from_slice(&1u32.to_be_bytes());
    l4[12] = 5 << 4;
    l4[13] = 0x18; // ACK | PSH
    l4[14..16].copy_from_slice(&65535u16.to_be_bytes());
    l4.extend_from_slice(payload);
    let (f, mut h) = partial_csum_ipv4(ends, 6, &l4);
    h[1] = GSO_TCPV4;
    h[2..4].copy_from_slice(&54u16.to_le_bytes()); // hdr_len: Ethernet + IPv4 + TCP
    h[4..6].copy_from_slice(&mss.to_le_bytes());
    (f, h)
}
