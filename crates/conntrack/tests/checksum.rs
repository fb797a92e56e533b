//! The incremental checksum helpers against summing afresh, on packets
//! built byte by byte: IPv4/IPv6 with TCP, UDP and ICMP echo, each with a
//! source or destination address and port (or identifier) rewritten as NAT
//! does.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use nfv_conntrack::checksum::{
    checksum, fold, ones_sum, udp_nonzero, update_ipv4, update_ipv6, update_port,
};

const TCP: u8 = 6;
const UDP: u8 = 17;
const ICMP: u8 = 1;
const ICMPV6: u8 = 58;

/// A packet from the IP header on, and where its parts are.
struct Packet {
    bytes: Vec<u8>,
    v6: bool,
    proto: u8,
    l4: usize,
}

impl Packet {
    /// Builds a packet with correct checksums. For ICMP, `sport` is the echo
    /// identifier and `dport` the sequence number.
    fn build(src: IpAddr, dst: IpAddr, proto: u8, sport: u16, dport: u16, payload: &[u8]) -> Self {
        let mut l4 = match proto {
            TCP => {
                let mut h = vec![0u8; 20];
                h[0..2].copy_from_slice(&sport.to_be_bytes());
                h[2..4].copy_from_slice(&dport.to_be_bytes());
                h[4..8].copy_from_slice(&0x1234_5678u32.to_be_bytes()); // seq
                h[8..12].copy_from_slice(&0x9abc_def0u32.to_be_bytes()); // ack
                h[12] = 5 << 4; // data offset: 5 words
                h[13] = 0x18; // PSH|ACK
                h[14..16].copy_from_slice(&64240u16.to_be_bytes()); // window
                h
            }
            UDP => {
                let mut h = vec![0u8; 8];
                h[0..2].copy_from_slice(&sport.to_be_bytes());
                h[2..4].copy_from_slice(&dport.to_be_bytes());
                let len = (8 + payload.len()) as u16;
                h[4..6].copy_from_slice(&len.to_be_bytes());
                h
            }
            ICMP | ICMPV6 => {
                let mut h = vec![0u8; 8];
                h[0] = if proto == ICMP { 8 } else { 128 }; // echo request
                h[4..6].copy_from_slice(&sport.to_be_bytes());
                h[6..8].copy_from_slice(&dport.to_be_bytes());
                h
            }
            _ => unreachable!(),
        };
        l4.extend_from_slice(payload);
        let (v6, mut bytes) = match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                let mut h = vec![0u8; 20];
                h[0] = 0x45;
                h[2..4].copy_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
                h[4..6].copy_from_slice(&0xbeefu16.to_be_bytes()); // id
                h[6] = 0x40; // don't fragment
                h[8] = 64; // ttl
                h[9] = proto;
                h[12..16].copy_from_slice(&s.octets());
                h[16..20].copy_from_slice(&d.octets());
                (false, h)
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                let mut h = vec![0u8; 40];
                h[0] = 0x60;
                h[4..6].copy_from_slice(&(l4.len() as u16).to_be_bytes());
                h[6] = proto;
                h[7] = 64; // hop limit
                h[8..24].copy_from_slice(&s.octets());
                h[24..40].copy_from_slice(&d.octets());
                (true, h)
            }
            _ => unreachable!("one family"),
        };
        let l4_at = bytes.len();
        bytes.extend_from_slice(&l4);
        let mut p = Packet {
            bytes,
            v6,
            proto,
            l4: l4_at,
        };
        if !v6 {
            let c = p.fresh_ip_checksum();
            p.set16(10, c);
        }
        let c = p.fresh_l4_checksum();
        p.set16(p.l4 + p.l4_check_at(), c);
        p
    }

    fn get16(&self, at: usize) -> u16 {
        u16::from_be_bytes([self.bytes[at], self.bytes[at + 1]])
    }

    fn set16(&mut self, at: usize, v: u16) {
        self.bytes[at..at + 2].copy_from_slice(&v.to_be_bytes());
    }

    fn l4_check_at(&self) -> usize {
        match self.proto {
            TCP => 16,
            UDP => 6,
            _ => 2,
        }
    }

    /// Offsets of the source and destination addresses, and their length.
    fn addr_at(&self) -> (usize, usize, usize) {
        if self.v6 { (8, 24, 16) } else { (12, 16, 4) }
    }

    fn fresh_ip_checksum(&self) -> u16 {
        let mut header = self.bytes[..20].to_vec();
        header[10..12].fill(0);
        checksum(&header)
    }

    /// The layer-4 checksum summed afresh: over the pseudo-header (not for
    /// ICMPv4) and the layer-4 bytes with the checksum field zeroed.
    fn fresh_l4_checksum(&self) -> u16 {
        let mut l4 = self.bytes[self.l4..].to_vec();
        let at = self.l4_check_at();
        l4[at..at + 2].fill(0);
        let (s, d, n) = self.addr_at();
        let mut sum = 0;
        if self.proto != ICMP {
            sum = ones_sum(&self.bytes[s..s + n], sum);
            sum = ones_sum(&self.bytes[d..d + n], sum);
            let len = l4.len() as u32;
            if self.v6 {
                sum = ones_sum(&len.to_be_bytes(), sum);
                sum = ones_sum(&[0, 0, 0, self.proto], sum);
            } else {
                sum = ones_sum(&[0, self.proto], sum);
                sum = ones_sum(&(len as u16).to_be_bytes(), sum);
            }
        }
        let c = !fold(ones_sum(&l4, sum));
        if self.proto == UDP { udp_nonzero(c) } else { c }
    }

    /// Rewrites one end's address and port (ICMP: the identifier), fixing
    /// the checksums incrementally as a datapath would.
    fn rewrite(&mut self, dst_side: bool, addr: IpAddr, port: u16) {
        let (s, d, n) = self.addr_at();
        let at = if dst_side { d } else { s };
        let port_at = match (self.proto, dst_side) {
            (ICMP | ICMPV6, _) => self.l4 + 4,
            (_, false) => self.l4,
            (_, true) => self.l4 + 2,
        };
        let l4_check_at = self.l4 + self.l4_check_at();
        let mut l4_check = self.get16(l4_check_at);
        let udp_v4_absent = self.proto == UDP && !self.v6 && l4_check == 0;
        match addr {
            IpAddr::V4(new) => {
                let old = Ipv4Addr::from(<[u8; 4]>::try_from(&self.bytes[at..at + n]).unwrap());
                let ip_check = update_ipv4(self.get16(10), old, new);
                self.set16(10, ip_check);
                if self.proto != ICMP {
                    l4_check = update_ipv4(l4_check, old, new);
                }
                self.bytes[at..at + n].copy_from_slice(&new.octets());
            }
            IpAddr::V6(new) => {
                let old = Ipv6Addr::from(<[u8; 16]>::try_from(&self.bytes[at..at + n]).unwrap());
                l4_check = update_ipv6(l4_check, old, new);
                self.bytes[at..at + n].copy_from_slice(&new.octets());
            }
        }
        l4_check = update_port(l4_check, self.get16(port_at), port);
        self.set16(port_at, port);
        if udp_v4_absent {
            l4_check = 0;
        } else if self.proto == UDP {
            l4_check = udp_nonzero(l4_check);
        }
        self.set16(l4_check_at, l4_check);
    }
}

fn v4(s: &str) -> IpAddr {
    IpAddr::V4(s.parse().unwrap())
}

fn v6(s: &str) -> IpAddr {
    IpAddr::V6(s.parse().unwrap())
}

#[test]
fn incremental_updates_match_a_fresh_sum() {
    struct Case {
        name: &'static str,
        src: IpAddr,
        dst: IpAddr,
        proto: u8,
        ports: (u16, u16),
        payload: &'static [u8],
        /// Rewrite the destination (else the source) to this.
        dst_side: bool,
        to: (IpAddr, u16),
    }
    let cases = [
        Case {
            name: "ipv4 tcp snat, odd payload",
            src: v4("10.0.0.1"),
            dst: v4("93.184.216.34"),
            proto: TCP,
            ports: (40000, 443),
            payload: b"hello",
            dst_side: false,
            to: (v4("192.168.100.7"), 1024),
        },
        Case {
            name: "ipv4 tcp dnat, empty payload",
            src: v4("198.51.100.20"),
            dst: v4("203.0.113.1"),
            proto: TCP,
            ports: (51515, 80),
            payload: b"",
            dst_side: true,
            to: (v4("10.1.2.3"), 8080),
        },
        Case {
            name: "ipv4 udp snat, port kept",
            src: v4("10.0.0.1"),
            dst: v4("8.8.8.8"),
            proto: UDP,
            ports: (5353, 53),
            payload: b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00",
            dst_side: false,
            to: (v4("100.64.0.1"), 5353),
        },
        Case {
            name: "ipv4 udp dnat to all-ones",
            src: v4("1.2.3.4"),
            dst: v4("5.6.7.8"),
            proto: UDP,
            ports: (1, 2),
            payload: b"x",
            dst_side: true,
            to: (v4("255.255.255.255"), 65535),
        },
        Case {
            name: "ipv4 icmp echo: identifier, no pseudo-header",
            src: v4("10.0.0.1"),
            dst: v4("1.1.1.1"),
            proto: ICMP,
            ports: (0x1234, 1),
            payload: b"abcdefghijklmnopqrstuvwabcdefghi",
            dst_side: false,
            to: (v4("192.0.2.1"), 0xfffe),
        },
        Case {
            name: "ipv6 tcp snat",
            src: v6("fd00::1"),
            dst: v6("2001:db8::80"),
            proto: TCP,
            ports: (40000, 443),
            payload: b"GET / HTTP/1.1\r\n",
            dst_side: false,
            to: (v6("2001:db8:ffff::1"), 2000),
        },
        Case {
            name: "ipv6 udp dnat, odd payload",
            src: v6("2001:db8::1"),
            dst: v6("2001:db8::53"),
            proto: UDP,
            ports: (33333, 53),
            payload: b"odd",
            dst_side: true,
            to: (v6("fd00:1234:5678::53"), 5353),
        },
        Case {
            name: "ipv6 icmpv6 echo: identifier and pseudo-header",
            src: v6("fe80::1"),
            dst: v6("2001:db8::2"),
            proto: ICMPV6,
            ports: (7, 9),
            payload: b"ping",
            dst_side: false,
            to: (v6("2001:db8:1::1"), 700),
        },
    ];
    for case in cases {
        let name = case.name;
        let mut p = Packet::build(
            case.src,
            case.dst,
            case.proto,
            case.ports.0,
            case.ports.1,
            case.payload,
        );
        // The built packet verifies: its sums come out all ones.
        if !p.v6 {
            assert_eq!(fold(ones_sum(&p.bytes[..20], 0)), 0xffff, "{name}: ip");
        }
        let l4_check_at = p.l4 + p.l4_check_at();
        assert_eq!(p.get16(l4_check_at), p.fresh_l4_checksum(), "{name}: built");

        p.rewrite(case.dst_side, case.to.0, case.to.1);
        if !p.v6 {
            assert_eq!(p.get16(10), p.fresh_ip_checksum(), "{name}: ip header");
        }
        assert_eq!(
            p.get16(l4_check_at),
            p.fresh_l4_checksum(),
            "{name}: layer 4"
        );
        // And back again, as the answer's rewrite would.
        let (orig, port) = if case.dst_side {
            (case.dst, case.ports.1)
        } else {
            (case.src, case.ports.0)
        };
        let port = if matches!(case.proto, ICMP | ICMPV6) {
            case.ports.0
        } else {
            port
        };
        p.rewrite(case.dst_side, orig, port);
        let rebuilt = Packet::build(
            case.src,
            case.dst,
            case.proto,
            case.ports.0,
            case.ports.1,
            case.payload,
        );
        assert_eq!(p.bytes, rebuilt.bytes, "{name}: round trip");
    }
}

#[test]
fn a_udp_ipv4_packet_without_checksum_keeps_none() {
    let mut p = Packet::build(v4("10.0.0.1"), v4("10.0.0.2"), UDP, 1000, 2000, b"data");
    let at = p.l4 + 6;
    p.set16(at, 0);
    p.rewrite(false, v4("192.168.1.1"), 3000);
    assert_eq!(p.get16(at), 0, "0 means no checksum and stays so");
    assert_eq!(p.get16(10), p.fresh_ip_checksum());
}
