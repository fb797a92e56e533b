//! Test frames built by etherparse, their header offsets as etherparse
//! laid them out, and checks of segments by etherparse: an oracle that
//! shares no code with the crate. Also the offload headers a sender sets
//! with them.

use crate::meta::{F_NEEDS_CSUM, OffloadMeta};
use etherparse::{
    IpHeaders, IpNumber, Ipv4Extensions, Ipv4Header, Ipv4Options, Ipv6Extensions, Ipv6Header,
    NetHeaders, PacketBuilder, PacketHeaders, PayloadSlice, TcpHeader, TransportHeader, VlanId,
};

/// The network layer of a test frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ip {
    V4,
    /// IPv4 with 8 bytes of options (NOPs then end of list).
    V4Options,
    V6,
}

/// The transport layer of a test frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum L4 {
    Tcp,
    Udp,
}

impl L4 {
    pub fn csum_offset(self) -> usize {
        match self {
            L4::Tcp => 16,
            L4::Udp => 6,
        }
    }
}

/// What to build.
#[derive(Clone, Debug)]
pub struct Spec {
    pub ip: Ip,
    pub l4: L4,
    pub payload: usize,
    /// 0, 1 (802.1Q) or 2 (802.1ad + 802.1Q).
    pub vlans: usize,
    pub fin: bool,
    pub psh: bool,
    pub cwr: bool,
    pub ece: bool,
    /// 12 bytes of TCP options (NOP, NOP, timestamps).
    pub tcp_options: bool,
    pub seq: u32,
    pub ip_id: u16,
    pub src4: [u8; 4],
    pub dst_port: u16,
}

impl Default for Spec {
    fn default() -> Self {
        Spec {
            ip: Ip::V4,
            l4: L4::Tcp,
            payload: 0,
            vlans: 0,
            fin: false,
            psh: false,
            cwr: false,
            ece: false,
            tcp_options: false,
            // Near the top of their ranges: segmenting must wrap them.
            seq: 0xffff_f000,
            ip_id: 0xfffe,
            src4: [192, 168, 1, 1],
            dst_port: 80,
        }
    }
}

/// A built frame and where etherparse put its headers.
#[derive(Clone, Debug)]
pub struct Built {
    pub bytes: Vec<u8>,
    pub l3: usize,
    pub l4: usize,
    pub payload: usize,
    pub spec: Spec,
}

pub const DST4: [u8; 4] = [10, 0, 0, 2];
pub const SRC6: [u8; 16] = [
    0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x12, 0x34,
];
pub const DST6: [u8; 16] = [
    0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0xab, 0xcd, 0, 1,
];
const TCP_OPTIONS: [u8; 12] = [1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2];
const IP_OPTIONS: [u8; 8] = [1, 1, 1, 1, 1, 1, 1, 0];

/// Payload bytes: a pattern that does not repeat every 256 bytes, so a
/// misplaced segment shows.
pub fn payload_bytes(n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| (i.wrapping_mul(31) ^ (i >> 8)) as u8)
        .collect()
}

/// Builds the frame `spec` describes, checksums complete.
pub fn build(spec: &Spec) -> Built {
    let ip_headers = match spec.ip {
        Ip::V4 | Ip::V4Options => {
            let mut h = Ipv4Header::new(0, 64, IpNumber::TCP, spec.src4, DST4).unwrap();
            h.identification = spec.ip_id;
            h.dont_fragment = true;
            if spec.ip == Ip::V4Options {
                h.options = Ipv4Options::try_from(&IP_OPTIONS[..]).unwrap();
            }
            IpHeaders::Ipv4(h, Ipv4Extensions::default())
        }
        Ip::V6 => IpHeaders::Ipv6(
            Ipv6Header {
                next_header: IpNumber::TCP,
                hop_limit: 64,
                source: SRC6,
                destination: DST6,
                ..Default::default()
            },
            Ipv6Extensions::default(),
        ),
    };
    let eth = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
    let ip_step = match spec.vlans {
        0 => eth.ip(ip_headers),
        1 => eth
            .single_vlan(VlanId::try_new(100).unwrap())
            .ip(ip_headers),
        _ => eth
            .double_vlan(VlanId::try_new(200).unwrap(), VlanId::try_new(100).unwrap())
            .ip(ip_headers),
    };
    let payload = payload_bytes(spec.payload);
    let mut bytes = Vec::new();
    let l4_hdr_len = match spec.l4 {
        L4::Tcp => {
            let mut t = TcpHeader::new(1234, spec.dst_port, spec.seq, 65000);
            t.ack = true;
            t.acknowledgment_number = 0x0102_0304;
            (t.fin, t.psh, t.cwr, t.ece) = (spec.fin, spec.psh, spec.cwr, spec.ece);
            if spec.tcp_options {
                t.set_options_raw(&TCP_OPTIONS).unwrap();
            }
            let len = t.header_len();
            ip_step.tcp_header(t).write(&mut bytes, &payload).unwrap();
            len
        }
        L4::Udp => {
            ip_step
                .udp(5000, spec.dst_port)
                .write(&mut bytes, &payload)
                .unwrap();
            8
        }
    };
    let l3 = 14 + 4 * spec.vlans.min(2);
    let l4 = l3
        + match spec.ip {
            Ip::V4 => 20,
            Ip::V4Options => 20 + IP_OPTIONS.len(),
            Ip::V6 => 40,
        };
    let built = Built {
        l3,
        l4,
        payload: l4 + l4_hdr_len,
        bytes,
        spec: spec.clone(),
    };
    assert_eq!(
        built.bytes.len(),
        built.payload + spec.payload,
        "offsets of {spec:?}"
    );
    built
}

/// Reference ones'-complement sum: 16-bit words, end-around carry per add.
pub fn reference_sum(bytes: &[u8]) -> u16 {
    let mut s: u32 = 0;
    for pair in bytes.chunks(2) {
        s += u32::from(u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)]));
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// The pseudo-header sum of `frame` (a frame or segment shaped like
/// `built`), from bytes laid out by hand: what a NEEDS_CSUM sender leaves
/// in the checksum field.
pub fn pseudo_sum(frame: &[u8], built: &Built) -> u16 {
    let l4_len = (frame.len() - built.l4) as u32;
    let proto = match built.spec.l4 {
        L4::Tcp => 6u8,
        L4::Udp => 17,
    };
    let mut b = Vec::new();
    if built.spec.ip == Ip::V6 {
        b.extend_from_slice(&frame[built.l3 + 8..built.l3 + 40]);
        b.extend_from_slice(&l4_len.to_be_bytes());
        b.extend_from_slice(&[0, 0, 0, proto]);
    } else {
        b.extend_from_slice(&frame[built.l3 + 12..built.l3 + 20]);
        b.extend_from_slice(&[0, proto]);
        b.extend_from_slice(&(l4_len as u16).to_be_bytes());
    }
    reference_sum(&b)
}

/// `built` as a NEEDS_CSUM sender hands it over: the pseudo-header sum in
/// the transport checksum field.
pub fn make_partial(built: &Built) -> Vec<u8> {
    let mut f = built.bytes.clone();
    let at = built.l4 + built.spec.l4.csum_offset();
    let p = pseudo_sum(&f, built);
    f[at..at + 2].copy_from_slice(&p.to_be_bytes());
    f
}

pub fn built(ip: Ip, l4: L4, payload: usize) -> Built {
    build(&Spec {
        ip,
        l4,
        payload,
        ..Default::default()
    })
}
pub fn tcp4() -> Built {
    built(Ip::V4, L4::Tcp, 3000)
}
pub fn udp4() -> Built {
    built(Ip::V4, L4::Udp, 3000)
}
pub fn tcp6() -> Built {
    built(Ip::V6, L4::Tcp, 3000)
}
pub fn udp6() -> Built {
    built(Ip::V6, L4::Udp, 3000)
}

/// The partial checksum a sender of `b` sets.
pub fn csum(b: &Built) -> OffloadMeta {
    OffloadMeta {
        flags: F_NEEDS_CSUM,
        csum_start: b.l4 as u16,
        csum_offset: b.spec.l4.csum_offset() as u16,
        ..Default::default()
    }
}
/// GSO of `gso_type` with `gso_size`, as Linux fills it (hdr_len too).
pub fn gso(b: &Built, gso_type: u8, gso_size: u16) -> OffloadMeta {
    OffloadMeta {
        gso_type,
        gso_size,
        hdr_len: b.payload as u16,
        ..csum(b)
    }
}

/// A segment as etherparse reads it, every checksum verified.
pub struct Checked {
    pub ip_id: Option<u16>,
    pub tcp: Option<TcpHeader>,
    pub payload: Vec<u8>,
}

/// Parses `seg` with etherparse and checks that its IP header checksum
/// (IPv4), its length fields and its transport checksum are right.
pub fn check_segment(seg: &[u8]) -> Checked {
    let h = PacketHeaders::from_ethernet_slice(seg).expect("etherparse parses the segment");
    let payload = match h.payload {
        PayloadSlice::Tcp(p) | PayloadSlice::Udp(p) => p,
        _ => panic!("no transport payload"),
    };
    let transport = h.transport.clone().expect("transport header");
    let (ip_id, tcp) = match (h.net.as_ref().expect("IP header"), transport) {
        (NetHeaders::Ipv4(ip, _), t) => {
            assert_eq!(
                ip.calc_header_checksum(),
                ip.header_checksum,
                "IPv4 header checksum"
            );
            match t {
                TransportHeader::Tcp(tcp) => {
                    assert_eq!(
                        tcp.calc_checksum_ipv4(ip, payload).unwrap(),
                        tcp.checksum,
                        "TCP checksum"
                    );
                    (Some(ip.identification), Some(tcp))
                }
                TransportHeader::Udp(udp) => {
                    assert_eq!(udp.length as usize, 8 + payload.len(), "UDP length");
                    assert_eq!(
                        udp.calc_checksum_ipv4(ip, payload).unwrap(),
                        udp.checksum,
                        "UDP checksum"
                    );
                    (Some(ip.identification), None)
                }
                _ => panic!("not TCP/UDP"),
            }
        }
        (NetHeaders::Ipv6(ip, _), t) => match t {
            TransportHeader::Tcp(tcp) => {
                assert_eq!(
                    tcp.calc_checksum_ipv6(ip, payload).unwrap(),
                    tcp.checksum,
                    "TCP checksum"
                );
                (None, Some(tcp))
            }
            TransportHeader::Udp(udp) => {
                assert_eq!(udp.length as usize, 8 + payload.len(), "UDP length");
                assert_eq!(
                    udp.calc_checksum_ipv6(ip, payload).unwrap(),
                    udp.checksum,
                    "UDP checksum"
                );
                (None, None)
            }
            _ => panic!("not TCP/UDP"),
        },
        _ => panic!("not IP"),
    };
    // The IP length fields end the packet exactly at the end of the
    // segment: etherparse cut the payload at them.
    assert_eq!(
        payload.as_ptr() as usize + payload.len(),
        seg.as_ptr() as usize + seg.len(),
        "IP length"
    );
    Checked {
        ip_id,
        tcp,
        payload: payload.to_vec(),
    }
}
