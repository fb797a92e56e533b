//! The outer headers: building them in front of an inner frame
//! ([`Template`]) and reading them off a frame from the underlay
//! ([`classify`]). Pure functions over bytes, table-tested.
//!
//! Over IPv4 the outer headers are 50 bytes: Ethernet (14), IPv4 without
//! options (20), UDP (8) and VXLAN (8). What goes in them follows Open
//! vSwitch's userspace tunnels, which users compare with: DF set, TTL 64,
//! UDP checksum zero (allowed over IPv4, RFC 7348 §5), the UDP source port
//! a hash of the inner flow in 32768..=61000 so that underlay ECMP and RSS
//! spread tunnels' flows, and the same port for every frame of one flow.

use nfv_wire::ethernet::{self, EtherType};
use nfv_wire::ipv4::{self, IpProtocol, Ipv4Packet};
use nfv_wire::vxlan::{self, Strictness, VxlanError, VxlanRepr};
use nfv_wire::{EthernetAddress, Ipv4Addr, UdpPacket, checksum, udp};

/// Bytes of outer headers over IPv4.
pub const OUTER_LEN: usize =
    ethernet::HEADER_LEN + ipv4::HEADER_LEN + udp::HEADER_LEN + vxlan::HEADER_LEN;
const IP_AT: usize = ethernet::HEADER_LEN;
const UDP_AT: usize = IP_AT + ipv4::HEADER_LEN;
const VXLAN_AT: usize = UDP_AT + udp::HEADER_LEN;

/// What stays the same for every frame a tunnel sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TunnelHeader {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    pub local_ip: Ipv4Addr,
    pub remote_ip: Ipv4Addr,
    pub vni: u32,
    pub dst_port: u16,
    pub ttl: u8,
    pub dont_fragment: bool,
    /// UDP source ports the flow hash is spread over.
    pub src_ports: (u16, u16),
}

/// The outer headers of one tunnel, built once, patched per frame (four
/// fields: IP length and checksum, UDP source port and length).
#[derive(Clone, Debug)]
pub struct Template {
    bytes: [u8; OUTER_LEN],
    /// The IP header checksum with total length 0, to update per frame.
    ip_csum: u16,
    src_ports: (u16, u16),
}

impl Template {
    pub fn new(h: &TunnelHeader) -> Template {
        let mut bytes = [0u8; OUTER_LEN];
        let mut eth = ethernet::EthernetFrame::new_unchecked(&mut bytes[..]);
        eth.set_dst_addr(EthernetAddress(h.dst_mac));
        eth.set_src_addr(EthernetAddress(h.src_mac));
        eth.set_ethertype(EtherType::IPV4);
        let mut ip = Ipv4Packet::new_unchecked(&mut bytes[IP_AT..UDP_AT]);
        ip.set_version(4);
        ip.set_header_len(ipv4::HEADER_LEN as u8);
        ip.set_total_len(0);
        ip.set_ident(0);
        ip.set_flags(0);
        ip.set_dont_frag(h.dont_fragment);
        ip.set_frag_offset(0);
        ip.set_ttl(h.ttl);
        ip.set_protocol(IpProtocol::UDP);
        ip.set_src_addr(h.local_ip);
        ip.set_dst_addr(h.remote_ip);
        ip.fill_checksum();
        let ip_csum = ip.checksum();
        let mut u = UdpPacket::new_unchecked(&mut bytes[UDP_AT..VXLAN_AT]);
        u.set_dst_port(h.dst_port);
        u.set_checksum(0);
        VxlanRepr { vni: h.vni }.emit(&mut vxlan::VxlanPacket::new_unchecked(
            &mut bytes[VXLAN_AT..],
        ));
        Template {
            bytes,
            ip_csum,
            src_ports: h.src_ports,
        }
    }

    /// Changes the next hop's MAC (after ARP learns a new one).
    pub fn set_dst_mac(&mut self, mac: [u8; 6]) {
        self.bytes[ethernet::field::DESTINATION].copy_from_slice(&mac);
    }

    pub fn dst_mac(&self) -> [u8; 6] {
        let mut m = [0; 6];
        m.copy_from_slice(&self.bytes[ethernet::field::DESTINATION]);
        m
    }

    /// Writes the outer headers of an `inner_len`-byte frame whose flow
    /// hashes to `hash` into `out`.
    #[inline]
    pub fn write(&self, out: &mut [u8], inner_len: usize, hash: u32) {
        let out: &mut [u8; OUTER_LEN] =
            (&mut out[..OUTER_LEN]).try_into().expect("OUTER_LEN bytes");
        *out = self.bytes;
        // At most 64 KiB frames (the pool's limit): the lengths fit in 16 bits.
        let ip_len = (inner_len + OUTER_LEN - IP_AT) as u16;
        let udp_len = (inner_len + OUTER_LEN - UDP_AT) as u16;
        let csum = checksum::update16(self.ip_csum, 0, ip_len);
        out[IP_AT + ipv4::field::LENGTH.start..IP_AT + ipv4::field::LENGTH.end]
            .copy_from_slice(&ip_len.to_be_bytes());
        out[IP_AT + ipv4::field::CHECKSUM.start..IP_AT + ipv4::field::CHECKSUM.end]
            .copy_from_slice(&csum.to_be_bytes());
        let sport = source_port(hash, self.src_ports);
        out[UDP_AT + udp::field::SRC_PORT.start..UDP_AT + udp::field::SRC_PORT.end]
            .copy_from_slice(&sport.to_be_bytes());
        out[UDP_AT + udp::field::LENGTH.start..UDP_AT + udp::field::LENGTH.end]
            .copy_from_slice(&udp_len.to_be_bytes());
    }
}

/// The UDP source port of a flow: its hash scaled into `range` (inclusive),
/// as OVS does (`hash * span >> 32`), so every port of the range is used
/// evenly and one flow always gets the same one.
#[inline]
pub fn source_port(hash: u32, (min, max): (u16, u16)) -> u16 {
    let span = u64::from(max - min) + 1;
    min + ((u64::from(hash) * span) >> 32) as u16
}

/// A hash of the inner frame's flow: both MACs and the EtherType, and for
/// untagged IPv4 the addresses, the protocol and, for TCP, UDP and SCTP
/// first fragments, the ports. Reads at most 38 bytes; frames too short
/// for a field hash what they have.
#[inline]
pub fn flow_hash(frame: &[u8]) -> u32 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let word = |at: usize, n: usize| -> u64 {
        let mut b = [0u8; 8];
        if let Some(s) = frame.get(at..at + n) {
            b[..n].copy_from_slice(s);
        }
        u64::from_le_bytes(b)
    };
    // MACs and EtherType: bytes 0..14.
    let mut h = word(0, 8).wrapping_mul(K);
    h = (h ^ word(8, 6)).wrapping_mul(K).rotate_left(29);
    if frame.get(12..14) == Some(&[0x08, 0x00]) {
        let ip = ethernet::HEADER_LEN;
        // Protocol and addresses (bytes 9 and 12..20 of the header).
        h = (h ^ word(ip + 12, 8)).wrapping_mul(K).rotate_left(29);
        let proto = frame.get(ip + 9).copied().unwrap_or(0);
        h = (h ^ u64::from(proto)).wrapping_mul(K);
        let ihl = usize::from(frame.get(ip).copied().unwrap_or(0) & 0x0f) * 4;
        let first_fragment = frame
            .get(ip + 6..ip + 8)
            .is_some_and(|f| f[0] & 0x1f == 0 && f[1] == 0);
        if matches!(proto, 6 | 17 | 132) && ihl >= ipv4::HEADER_LEN && first_fragment {
            h = (h ^ word(ip + ihl, 4)).wrapping_mul(K);
        }
    }
    (h ^ (h >> 32)) as u32
}

/// What the receive side expects of a tunnel's frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expect {
    pub local_ip: Ipv4Addr,
    pub remote_ip: Ipv4Addr,
    pub dst_port: u16,
    pub vni: u32,
    pub strictness: Strictness,
}

/// Why a frame from the underlay is not decapsulated. `NotForUs` is the
/// underlay's other traffic (IPv6 neighbour discovery, frames for other
/// hosts); the rest are tunnel frames refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Refusal {
    NotForUs,
    /// Shorter than its headers say, or an IPv4 header that does not parse.
    Malformed,
    BadIpChecksum,
    /// An outer IPv4 fragment (the switch does not reassemble; OVS neither).
    Fragment,
    /// From a source other than the tunnel's remote.
    UnknownRemote,
    BadFlags,
    ReservedVni,
    OtherVni,
}

impl Refusal {
    pub const ALL: [Refusal; 8] = [
        Refusal::NotForUs,
        Refusal::Malformed,
        Refusal::BadIpChecksum,
        Refusal::Fragment,
        Refusal::UnknownRemote,
        Refusal::BadFlags,
        Refusal::ReservedVni,
        Refusal::OtherVni,
    ];

    /// The counter's name in `show ports`.
    pub fn name(self) -> &'static str {
        match self {
            Refusal::NotForUs => "rx_not_for_tunnel",
            Refusal::Malformed => "rx_malformed",
            Refusal::BadIpChecksum => "rx_bad_ip_checksum",
            Refusal::Fragment => "rx_fragments",
            Refusal::UnknownRemote => "rx_unknown_remote",
            Refusal::BadFlags => "rx_bad_flags",
            Refusal::ReservedVni => "rx_reserved_vni",
            Refusal::OtherVni => "rx_other_vni",
        }
    }
}

/// What a frame from the underlay is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// A frame of this tunnel: the inner frame is `len` bytes at `offset`
    /// (Ethernet padding after the outer IP packet excluded).
    Tunnel {
        offset: usize,
        len: usize,
    },
    /// An ARP packet (for the neighbour code).
    Arp,
    Refused(Refusal),
}

/// The common case, read at fixed offsets: an untagged IPv4 frame without
/// options, not fragmented, from the remote to us on our UDP port, with
/// our VNI and a plain header, its checksum right and its lengths
/// consistent. Returns the inner frame's length (it starts at
/// [`OUTER_LEN`]); `None` for anything else, which [`classify`] then reads
/// field by field (it accepts everything this accepts, at the same place).
#[inline]
pub fn fast_tunnel(frame: &[u8], expect: &Expect) -> Option<usize> {
    let h: &[u8; OUTER_LEN] = frame.get(..OUTER_LEN)?.try_into().ok()?;
    let be16 = |at: usize| u16::from_be_bytes([h[at], h[at + 1]]);
    let be32 = |at: usize| u32::from_be_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]]);
    let vni_word = expect.vni << 8;
    let vxlan_ok = match expect.strictness {
        Strictness::Exact => {
            be32(VXLAN_AT) == vxlan::FLAGS_VNI_VALID && be32(VXLAN_AT + 4) == vni_word
        }
        Strictness::Rfc => {
            be32(VXLAN_AT) & vxlan::FLAGS_VNI_VALID != 0 && be32(VXLAN_AT + 4) >> 8 == expect.vni
        }
    };
    let fixed = be16(12) == EtherType::IPV4.0
        && h[IP_AT] == 0x45
        && h[IP_AT + 9] == IpProtocol::UDP.0
        && be16(IP_AT + 6) & 0x3fff == 0
        && be32(IP_AT + 12) == u32::from(expect.remote_ip)
        && be32(IP_AT + 16) == u32::from(expect.local_ip)
        && be16(UDP_AT + 2) == expect.dst_port
        && vxlan_ok;
    if !fixed {
        return None;
    }
    let ip_len = usize::from(be16(IP_AT + 2));
    let udp_len = usize::from(be16(UDP_AT + 4));
    let lengths_ok = ip_len + IP_AT <= frame.len()
        && udp_len + ipv4::HEADER_LEN <= ip_len
        && udp_len >= udp::HEADER_LEN + vxlan::HEADER_LEN + ethernet::HEADER_LEN;
    let csum_ok = checksum::data(&h[IP_AT..UDP_AT]) == 0xffff;
    (lengths_ok && csum_ok).then(|| udp_len - udp::HEADER_LEN - vxlan::HEADER_LEN)
}

/// Reads the outer headers of `frame` against `expect`.
pub fn classify(frame: &[u8], expect: &Expect) -> Class {
    use Class::Refused;
    let Ok(eth) = ethernet::EthernetFrame::new_checked(frame) else {
        return Refused(Refusal::Malformed);
    };
    match eth.ethertype() {
        EtherType::IPV4 => {}
        EtherType::ARP => return Class::Arp,
        _ => return Refused(Refusal::NotForUs),
    }
    let Ok(ip) = Ipv4Packet::new_checked(eth.payload()) else {
        return Refused(Refusal::Malformed);
    };
    if ip.dst_addr() != expect.local_ip || ip.protocol() != IpProtocol::UDP {
        return Refused(Refusal::NotForUs);
    }
    if !ip.verify_checksum() {
        return Refused(Refusal::BadIpChecksum);
    }
    if ip.is_fragment() {
        return Refused(Refusal::Fragment);
    }
    let Ok(u) = UdpPacket::new_checked(ip.payload()) else {
        return Refused(Refusal::Malformed);
    };
    if u.dst_port() != expect.dst_port {
        return Refused(Refusal::NotForUs);
    }
    if ip.src_addr() != expect.remote_ip {
        return Refused(Refusal::UnknownRemote);
    }
    let vx = match VxlanRepr::parse(u.payload(), expect.strictness) {
        Ok(v) => v,
        Err(VxlanError::Truncated) => return Refused(Refusal::Malformed),
        Err(VxlanError::BadFlags) => return Refused(Refusal::BadFlags),
        Err(VxlanError::ReservedVni) => return Refused(Refusal::ReservedVni),
    };
    if vx.vni != expect.vni {
        return Refused(Refusal::OtherVni);
    }
    let len = u.payload().len() - vxlan::HEADER_LEN;
    if len < ethernet::HEADER_LEN {
        return Refused(Refusal::Malformed);
    }
    let offset =
        ethernet::HEADER_LEN + usize::from(ip.header_len()) + udp::HEADER_LEN + vxlan::HEADER_LEN;
    Class::Tunnel { offset, len }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::{NetSlice, SlicedPacket, TransportSlice};

    const LOCAL: Ipv4Addr = Ipv4Addr::new(172, 31, 1, 100);
    const REMOTE: Ipv4Addr = Ipv4Addr::new(172, 31, 1, 1);

    fn header() -> TunnelHeader {
        TunnelHeader {
            src_mac: [2, 0, 0, 0, 0, 0x64],
            dst_mac: [2, 0, 0, 0, 0, 1],
            local_ip: LOCAL,
            remote_ip: REMOTE,
            vni: 100,
            dst_port: vxlan::UDP_PORT,
            ttl: 64,
            dont_fragment: true,
            src_ports: (32768, 61000),
        }
    }

    /// The headers the remote end sends us.
    fn from_remote() -> TunnelHeader {
        TunnelHeader {
            local_ip: REMOTE,
            remote_ip: LOCAL,
            ..header()
        }
    }

    /// An inner frame: Ethernet/IPv4/UDP from 10.1.1.2:`sport` to 10.1.1.1:7.
    fn inner(sport: u16, payload: usize) -> Vec<u8> {
        let b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 1, 2], [2, 0, 0, 0, 1, 1])
            .ipv4([10, 1, 1, 2], [10, 1, 1, 1], 64)
            .udp(sport, 7);
        let mut out = Vec::new();
        b.write(&mut out, &vec![0xab; payload]).unwrap();
        out
    }

    fn encap(t: &Template, frame: &[u8]) -> Vec<u8> {
        let mut out = vec![0u8; OUTER_LEN + frame.len()];
        out[OUTER_LEN..].copy_from_slice(frame);
        t.write(&mut out, frame.len(), flow_hash(frame));
        out
    }

    fn expect() -> Expect {
        Expect {
            local_ip: LOCAL,
            remote_ip: REMOTE,
            dst_port: vxlan::UDP_PORT,
            vni: 100,
            strictness: Strictness::Exact,
        }
    }

    #[test]
    fn outer_headers_as_an_independent_parser_reads_them() {
        let t = Template::new(&header());
        for size in [0, 18, 1400] {
            let frame = inner(40000, size);
            let out = encap(&t, &frame);
            let p = SlicedPacket::from_ethernet(&out).unwrap();
            let eth = p.link.as_ref().unwrap().to_header().unwrap();
            let eth = eth.ethernet2().unwrap();
            assert_eq!(
                (eth.source, eth.destination),
                ([2, 0, 0, 0, 0, 0x64], [2, 0, 0, 0, 0, 1])
            );
            let Some(NetSlice::Ipv4(ip)) = &p.net else {
                panic!("not IPv4")
            };
            let h = ip.header().to_header();
            assert_eq!((h.source, h.destination), (LOCAL.octets(), REMOTE.octets()));
            assert!(h.dont_fragment, "DF");
            assert_eq!(h.time_to_live, 64);
            assert_eq!(h.identification, 0);
            assert_eq!(
                h.header_checksum,
                h.calc_header_checksum(),
                "IP checksum, {size} B"
            );
            assert_eq!(usize::from(h.total_len), out.len() - 14);
            let Some(TransportSlice::Udp(u)) = &p.transport else {
                panic!("not UDP")
            };
            assert_eq!(u.destination_port(), 4789);
            assert!((32768..=61000).contains(&u.source_port()));
            assert_eq!(u.checksum(), 0, "no UDP checksum over IPv4");
            assert_eq!(usize::from(u.length()), out.len() - 34);
            assert_eq!(
                &u.payload()[..8],
                &[0x08, 0, 0, 0, 0, 0, 100, 0],
                "VXLAN header"
            );
            assert_eq!(&u.payload()[8..], &frame[..], "inner frame");
        }
    }

    #[test]
    fn golden_bytes_of_a_small_frame() {
        let t = Template::new(&header());
        let out = encap(&t, &[0x11; 60]);
        let sport = source_port(flow_hash(&[0x11; 60]), (32768, 61000));
        #[rustfmt::skip]
        let mut want = vec![
            2, 0, 0, 0, 0, 1,  2, 0, 0, 0, 0, 0x64,  0x08, 0x00,
            0x45, 0, 0, 96,  0, 0, 0x40, 0,  64, 17, 0, 0,  172, 31, 1, 100,  172, 31, 1, 1,
            0, 0, 0x12, 0xb5,  0, 76, 0, 0,
            0x08, 0, 0, 0,  0, 0, 100, 0,
        ];
        want[34..36].copy_from_slice(&sport.to_be_bytes());
        let csum = !nfv_wire::checksum::data(&want[14..34]);
        want[24..26].copy_from_slice(&csum.to_be_bytes());
        want.extend_from_slice(&[0x11; 60]);
        assert_eq!(out, want);
    }

    #[test]
    fn source_port_is_stable_per_flow_and_spread_over_the_range() {
        let t = Template::new(&header());
        let port_of = |sport: u16| {
            let out = encap(&t, &inner(sport, 10));
            u16::from_be_bytes([out[34], out[35]])
        };
        let mut seen = std::collections::HashSet::new();
        for f in 0..2000u16 {
            let p = port_of(1000 + f);
            assert_eq!(p, port_of(1000 + f), "flow {f} changed port");
            assert!((32768..=61000).contains(&p));
            seen.insert(p);
        }
        assert!(seen.len() > 1900, "2000 flows on {} ports", seen.len());
        assert_eq!(source_port(0, (32768, 61000)), 32768);
        assert_eq!(source_port(u32::MAX, (32768, 61000)), 61000);
        assert_eq!(source_port(u32::MAX, (5, 5)), 5);
    }

    #[test]
    fn what_arrives_and_what_is_refused() {
        let t = Template::new(&from_remote());
        let frame = inner(1234, 100);
        let good = encap(&t, &frame);
        let tunnel = Class::Tunnel {
            offset: OUTER_LEN,
            len: frame.len(),
        };
        type Edit = fn(&mut Vec<u8>);
        let cases: &[(&str, Edit, Class)] = &[
            ("as sent", |_| {}, tunnel),
            (
                "with Ethernet padding after it",
                |f| f.extend_from_slice(&[0; 20]),
                tunnel,
            ),
            (
                "ARP",
                |f| f[12..14].copy_from_slice(&[0x08, 0x06]),
                Class::Arp,
            ),
            (
                "IPv6",
                |f| f[12..14].copy_from_slice(&[0x86, 0xdd]),
                Class::Refused(Refusal::NotForUs),
            ),
            (
                "VLAN tagged",
                |f| f[12..14].copy_from_slice(&[0x81, 0x00]),
                Class::Refused(Refusal::NotForUs),
            ),
            (
                "to another address",
                |f| fix_ip(f, |ip| ip[19] = 7),
                Class::Refused(Refusal::NotForUs),
            ),
            (
                "TCP",
                |f| fix_ip(f, |ip| ip[9] = 6),
                Class::Refused(Refusal::NotForUs),
            ),
            (
                "another UDP port",
                |f| f[36..38].copy_from_slice(&4790u16.to_be_bytes()),
                Class::Refused(Refusal::NotForUs),
            ),
            (
                "bad IP checksum",
                |f| f[24] ^= 1,
                Class::Refused(Refusal::BadIpChecksum),
            ),
            (
                "a first fragment",
                |f| fix_ip(f, |ip| ip[6] = 0x20),
                Class::Refused(Refusal::Fragment),
            ),
            (
                "a later fragment",
                |f| fix_ip(f, |ip| ip[7] = 1),
                Class::Refused(Refusal::Fragment),
            ),
            (
                "from another VTEP",
                |f| fix_ip(f, |ip| ip[15] = 9),
                Class::Refused(Refusal::UnknownRemote),
            ),
            (
                "I flag clear",
                |f| f[42] = 0,
                Class::Refused(Refusal::BadFlags),
            ),
            (
                "reserved VNI byte",
                |f| f[49] = 1,
                Class::Refused(Refusal::ReservedVni),
            ),
            (
                "another VNI",
                |f| f[48] = 101,
                Class::Refused(Refusal::OtherVni),
            ),
            (
                "cut inside the inner frame",
                |f| f.truncate(60),
                Class::Refused(Refusal::Malformed),
            ),
            (
                "cut inside the outer IP header",
                |f| f.truncate(20),
                Class::Refused(Refusal::Malformed),
            ),
            (
                "cut inside Ethernet",
                |f| f.truncate(10),
                Class::Refused(Refusal::Malformed),
            ),
            (
                "UDP length short of the VXLAN header",
                |f| f[38..40].copy_from_slice(&12u16.to_be_bytes()),
                Class::Refused(Refusal::Malformed),
            ),
            (
                "inner frame shorter than Ethernet",
                |f| {
                    f.truncate(OUTER_LEN + 10);
                    let n = f.len();
                    f[16..18].copy_from_slice(&((n - 14) as u16).to_be_bytes());
                    f[38..40].copy_from_slice(&((n - 34) as u16).to_be_bytes());
                    fix_ip(f, |_| {});
                },
                Class::Refused(Refusal::Malformed),
            ),
        ];
        for (name, edit, want) in cases {
            let mut f = good.clone();
            edit(&mut f);
            assert_eq!(classify(&f, &expect()), *want, "{name}");
        }
        // RFC strictness takes what OVS refuses.
        let mut f = good.clone();
        f[49] = 1;
        let rfc = Expect {
            strictness: Strictness::Rfc,
            ..expect()
        };
        assert_eq!(classify(&f, &rfc), tunnel);
    }

    #[test]
    fn the_fast_path_accepts_only_what_classify_accepts_at_the_same_place() {
        let t = Template::new(&from_remote());
        let frame = inner(1234, 100);
        let good = encap(&t, &frame);
        for strictness in [Strictness::Exact, Strictness::Rfc] {
            let e = Expect {
                strictness,
                ..expect()
            };
            assert_eq!(fast_tunnel(&good, &e), Some(frame.len()));
            // Every single-byte change of the outer headers, and cuts.
            let mut fast = 0;
            for at in 0..OUTER_LEN {
                for flip in [0x01u8, 0x80, 0xff] {
                    let mut f = good.clone();
                    f[at] ^= flip;
                    for f in [f.clone(), {
                        fix_ip(&mut f, |_| {});
                        f
                    }] {
                        if let Some(len) = fast_tunnel(&f, &e) {
                            fast += 1;
                            assert_eq!(
                                classify(&f, &e),
                                Class::Tunnel {
                                    offset: OUTER_LEN,
                                    len
                                },
                                "byte {at} ^ {flip:#x}"
                            );
                        }
                    }
                }
            }
            for cut in 0..good.len() {
                if let Some(len) = fast_tunnel(&good[..cut], &e) {
                    assert_eq!(
                        classify(&good[..cut], &e),
                        Class::Tunnel {
                            offset: OUTER_LEN,
                            len
                        }
                    );
                }
            }
            // Changes it still takes: MACs, TOS, IP id, TTL, UDP source port
            // and checksum (checksum fixed), and with RFC strictness the
            // reserved bits.
            assert!(fast > 20, "{fast} accepted changes");
        }
    }

    /// Edits the outer IP header and fixes its checksum.
    fn fix_ip(f: &mut [u8], edit: impl Fn(&mut [u8])) {
        let ip = &mut f[14..34];
        edit(ip);
        ip[10..12].copy_from_slice(&[0, 0]);
        let c = !nfv_wire::checksum::data(ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
    }

    #[test]
    fn ip_options_move_the_inner_frame() {
        let t = Template::new(&from_remote());
        let frame = inner(1, 30);
        let plain = encap(&t, &frame);
        // Insert 4 bytes of options (NOP x4) after the fixed IP header.
        let mut f = plain[..34].to_vec();
        f.extend_from_slice(&[1, 1, 1, 1]);
        f.extend_from_slice(&plain[34..]);
        f[14] = 0x46;
        let total = (f.len() - 14) as u16;
        f[16..18].copy_from_slice(&total.to_be_bytes());
        fix_ip(&mut f, |_| {});
        // fix_ip covered 20 bytes only: recompute over all 24.
        f[24..26].copy_from_slice(&[0, 0]);
        let c = !nfv_wire::checksum::data(&f[14..38]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        assert_eq!(
            classify(&f, &expect()),
            Class::Tunnel {
                offset: OUTER_LEN + 4,
                len: frame.len()
            }
        );
    }
}
