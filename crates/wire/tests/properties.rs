//! Property tests: no accessor of a `new_checked` view panics on arbitrary
//! bytes, `Repr::parse` never panics even on unchecked views, and
//! `parse(emit(x)) == x` for arbitrary reprs.

use nfv_wire::{
    ArpOperation, ArpPacket, ArpRepr, EtherType, EthernetAddress, EthernetFrame, EthernetRepr,
    IpProtocol, Ipv4Addr, Ipv4Packet, Ipv4Repr, TcpPacket, UdpPacket, UdpRepr, VlanRepr, VlanTag,
    checksum,
};
use proptest::prelude::*;

/// Reads every field of every view that `new_checked` accepts on `data`, and
/// runs every `Repr::parse` on unchecked views. Returns a value so the reads
/// are not optimised away.
fn read_everything(data: &[u8]) -> usize {
    let mut acc = 0usize;
    let a = Ipv4Addr::new(10, 0, 0, 1);
    let b = Ipv4Addr::new(10, 0, 0, 2);

    if let Ok(f) = EthernetFrame::new_checked(data) {
        acc += f.dst_addr().0[0] as usize + f.src_addr().0[5] as usize;
        acc += f.ethertype().0 as usize + f.payload().len();
    }
    let _ = EthernetRepr::parse(&EthernetFrame::new_unchecked(data));

    if let Ok(t) = VlanTag::new_checked(data) {
        acc += t.tci() as usize + t.pcp() as usize + t.dei() as usize + t.vid() as usize;
        acc += t.ethertype().0 as usize + t.payload().len();
    }
    let _ = VlanRepr::parse(&VlanTag::new_unchecked(data));

    if let Ok(p) = Ipv4Packet::new_checked(data) {
        acc += p.version() as usize + p.header_len() as usize + p.dscp() as usize;
        acc += p.ecn() as usize + p.total_len() as usize + p.ident() as usize;
        acc += p.flags() as usize + p.dont_frag() as usize + p.more_frags() as usize;
        acc += p.frag_offset() as usize + p.is_fragment() as usize + p.ttl() as usize;
        acc += p.protocol().0 as usize + p.checksum() as usize;
        acc += p.src_addr().octets()[0] as usize + p.dst_addr().octets()[0] as usize;
        acc += p.options().len() + p.payload().len() + p.verify_checksum() as usize;
    }
    let _ = Ipv4Repr::parse(&Ipv4Packet::new_unchecked(data));

    if let Ok(p) = UdpPacket::new_checked(data) {
        acc += p.src_port() as usize + p.dst_port() as usize + p.len() as usize;
        acc += p.checksum() as usize + p.payload().len() + p.verify_checksum(a, b) as usize;
    }
    let _ = UdpRepr::parse(&UdpPacket::new_unchecked(data), a, b);

    if let Ok(p) = TcpPacket::new_checked(data) {
        acc += p.src_port() as usize + p.dst_port() as usize;
        acc += p.seq_number() as usize + p.ack_number() as usize;
        acc += p.header_len() as usize + p.flags().0 as usize;
        acc += (p.fin() as usize) + (p.syn() as usize) + (p.rst() as usize) + (p.psh() as usize);
        acc += (p.ack() as usize) + (p.urg() as usize) + (p.ece() as usize) + (p.cwr() as usize);
        acc += p.window_len() as usize + p.checksum() as usize + p.urgent_at() as usize;
        acc += p.options().len() + p.payload().len() + p.verify_checksum(a, b) as usize;
    }

    if let Ok(p) = ArpPacket::new_checked(data) {
        acc += p.hardware_type() as usize + p.protocol_type().0 as usize;
        acc += p.hardware_len() as usize + p.protocol_len() as usize;
        acc += p.operation().0 as usize + p.sha().0[0] as usize + p.tha().0[0] as usize;
        acc += p.spa().octets()[0] as usize + p.tpa().octets()[0] as usize;
    }
    let _ = ArpRepr::parse(&ArpPacket::new_unchecked(data));
    acc
}

/// Mutators that keep a checked view valid (no length fields touched) must
/// not panic either.
fn write_everything(data: &[u8]) {
    let a = Ipv4Addr::new(192, 0, 2, 1);
    let b = Ipv4Addr::new(198, 51, 100, 7);
    let mut buf = data.to_vec();
    if let Ok(mut p) = Ipv4Packet::new_checked(&mut buf[..]) {
        p.decrement_ttl();
        p.set_dscp(0x2e);
        p.set_ecn(3);
        p.set_flags(7);
        p.set_frag_offset(0xffff);
        p.fill_checksum();
        assert!(p.verify_checksum());
        p.options_mut().fill(1);
        p.payload_mut().fill(0);
    }
    let mut buf = data.to_vec();
    if let Ok(mut p) = UdpPacket::new_checked(&mut buf[..]) {
        p.fill_checksum(a, b);
        assert!(p.verify_checksum(a, b));
        p.payload_mut().fill(0);
    }
    let mut buf = data.to_vec();
    if let Ok(mut p) = TcpPacket::new_checked(&mut buf[..]) {
        p.fill_checksum(a, b);
        assert!(p.verify_checksum(a, b));
        p.options_mut().fill(1);
        p.payload_mut().fill(0);
    }
    let mut buf = data.to_vec();
    if let Ok(mut t) = VlanTag::new_checked(&mut buf[..]) {
        t.set_pcp(0xff);
        t.set_vid(0xffff);
        t.set_dei(true);
        assert_eq!(t.tci(), 0xffff);
        t.payload_mut().fill(0);
    }
}

/// Arbitrary bytes, plus buffers that often pass the checks: the first byte
/// biased to IPv4 version/IHL and TCP data-offset values, and the IPv4 total
/// length (bytes 2..4) and UDP length (bytes 4..6) set to at most the buffer
/// length, so that payload, option and checksum paths are reached.
fn bytes() -> impl Strategy<Value = Vec<u8>> {
    let plausible = (
        prop::sample::select(vec![0x45u8, 0x46, 0x4f, 0x50, 0xa0, 0xf0]),
        prop::collection::vec(any::<u8>(), 27..160),
        any::<u16>(),
        any::<u16>(),
    )
        .prop_map(|(first, mut data, l3, l4)| {
            let len = data.len() as u16;
            data[0] = first;
            data[2..4].copy_from_slice(&(l3 % (len + 1)).to_be_bytes());
            data[4..6].copy_from_slice(&(l4 % (len + 1)).to_be_bytes());
            // Ethernet/IPv4 ARP address lengths half of the time.
            if l3 % 2 == 0 {
                data[4] = 6;
                data[5] = 4;
            }
            data
        });
    prop_oneof![prop::collection::vec(any::<u8>(), 0..128), plausible]
}

fn mac() -> impl Strategy<Value = EthernetAddress> {
    any::<[u8; 6]>().prop_map(EthernetAddress)
}

fn ipv4() -> impl Strategy<Value = Ipv4Addr> {
    any::<[u8; 4]>().prop_map(Ipv4Addr::from)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn checked_views_never_panic(data in bytes()) {
        read_everything(&data);
        write_everything(&data);
    }

    #[test]
    fn ethernet_round_trip(src in mac(), dst in mac(), et in any::<u16>()) {
        let repr = EthernetRepr { src, dst, ethertype: EtherType(et) };
        let mut buf = [0u8; 14];
        repr.emit(&mut EthernetFrame::new_unchecked(&mut buf[..]));
        prop_assert_eq!(EthernetRepr::parse(&EthernetFrame::new_checked(&buf[..]).unwrap()), Ok(repr));
        prop_assert_eq!(src.to_string().parse::<EthernetAddress>(), Ok(src));
    }

    #[test]
    fn vlan_round_trip(pcp in 0u8..8, dei in any::<bool>(), vid in 0u16..4096, et in any::<u16>()) {
        let repr = VlanRepr { pcp, dei, vid, ethertype: EtherType(et) };
        let mut buf = [0u8; 4];
        repr.emit(&mut VlanTag::new_unchecked(&mut buf[..]));
        prop_assert_eq!(VlanRepr::parse(&VlanTag::new_checked(&buf[..]).unwrap()), Ok(repr));
    }

    #[test]
    fn ipv4_udp_round_trip(
        src in ipv4(), dst in ipv4(), ttl in any::<u8>(),
        sport in any::<u16>(), dport in any::<u16>(),
        payload in prop::collection::vec(any::<u8>(), 0..256),
    ) {
        let udp = UdpRepr { src_port: sport, dst_port: dport, payload_len: payload.len() };
        let ip = Ipv4Repr { src, dst, protocol: IpProtocol::UDP, payload_len: udp.buffer_len(), ttl };
        let mut buf = vec![0u8; ip.buffer_len() + ip.payload_len];
        let mut p = Ipv4Packet::new_unchecked(&mut buf[..]);
        ip.emit(&mut p);
        udp.emit(&mut UdpPacket::new_unchecked(p.payload_mut()), src, dst, |b| b.copy_from_slice(&payload));

        let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(Ipv4Repr::parse(&p), Ok(ip));
        let u = UdpPacket::new_checked(p.payload()).unwrap();
        prop_assert_eq!(UdpRepr::parse(&u, src, dst), Ok(udp));
        prop_assert_eq!(u.payload(), &payload[..]);

        // etherparse agrees on both checksums.
        let (h, rest) = etherparse::Ipv4Header::from_slice(&buf).unwrap();
        prop_assert_eq!(h.header_checksum, h.calc_header_checksum());
        let (uh, upl) = etherparse::UdpHeader::from_slice(rest).unwrap();
        prop_assert_eq!(uh.calc_checksum_ipv4(&h, upl).unwrap(), u.checksum());
    }

    #[test]
    fn arp_round_trip(op in any::<u16>(), sha in mac(), spa in ipv4(), tha in mac(), tpa in ipv4()) {
        let repr = ArpRepr { op: ArpOperation(op), sha, spa, tha, tpa };
        let mut buf = [0u8; 28];
        repr.emit(&mut ArpPacket::new_unchecked(&mut buf[..]));
        prop_assert_eq!(ArpRepr::parse(&ArpPacket::new_checked(&buf[..]).unwrap()), Ok(repr));
    }

    #[test]
    fn incremental_update_keeps_sum_valid(
        mut data in prop::collection::vec(any::<u8>(), 4..64),
        idx in any::<prop::sample::Index>(),
        new_word in any::<u16>(),
    ) {
        if data.len() % 2 == 1 { data.pop(); }
        // Word 0 is the checksum field.
        data[0] = 0;
        data[1] = 0;
        let c = !checksum::data(&data);
        data[..2].copy_from_slice(&c.to_be_bytes());
        let words = data.len() / 2;
        let i = 1 + idx.index(words - 1);
        let old_word = u16::from_be_bytes([data[2 * i], data[2 * i + 1]]);
        data[2 * i..2 * i + 2].copy_from_slice(&new_word.to_be_bytes());
        // All-zero data has no valid non-zero checksum representation (RFC 1624
        // section 3 discusses the -0/+0 case); real headers never are.
        prop_assume!(data[2..].iter().any(|&b| b != 0));
        let c2 = checksum::update16(c, old_word, new_word);
        data[..2].copy_from_slice(&c2.to_be_bytes());
        prop_assert_eq!(checksum::data(&data), 0xffff);
    }
}

/// The plausible-buffer strategy really reaches the checked paths.
#[test]
fn strategy_reaches_checked_views() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let (mut ip, mut udp, mut tcp, mut arp) = (0, 0, 0, 0);
    for _ in 0..2000 {
        let data = bytes().new_tree(&mut runner).unwrap().current();
        ip += Ipv4Packet::new_checked(&data[..]).is_ok() as u32;
        udp += UdpPacket::new_checked(&data[..]).is_ok() as u32;
        tcp += TcpPacket::new_checked(&data[..]).is_ok() as u32;
        arp += ArpPacket::new_checked(&data[..]).is_ok() as u32;
    }
    assert!(
        ip > 100 && udp > 100 && tcp > 100 && arp > 100,
        "{ip} {udp} {tcp} {arp}"
    );
}
