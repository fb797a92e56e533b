//! Runs every `new_checked` view and `Repr::parse` of `nfv-wire` on the input,
//! reads every accessor of the views that were accepted, and re-emits what
//! parsed, checking that parse(emit(x)) == x.
//!
//! Run: `cd fuzz && cargo +nightly fuzz run wire_parse`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nfv_wire::{
    ArpPacket, ArpRepr, EthernetFrame, EthernetRepr, Ipv4Addr, Ipv4Packet, Ipv4Repr, TcpPacket,
    UdpPacket, UdpRepr, VlanRepr, VlanTag,
};

const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

fn views(data: &[u8]) {
    if let Ok(f) = EthernetFrame::new_checked(data) {
        let _ = (f.dst_addr(), f.src_addr(), f.ethertype(), f.payload());
        let repr = EthernetRepr::parse(&f).expect("checked frame parses");
        let mut buf = [0u8; 14];
        repr.emit(&mut EthernetFrame::new_unchecked(&mut buf[..]));
        assert_eq!(buf[..], data[..14]);
    }
    if let Ok(t) = VlanTag::new_checked(data) {
        let _ = (
            t.tci(),
            t.pcp(),
            t.dei(),
            t.vid(),
            t.ethertype(),
            t.payload(),
        );
        let repr = VlanRepr::parse(&t).expect("checked tag parses");
        let mut buf = [0u8; 4];
        repr.emit(&mut VlanTag::new_unchecked(&mut buf[..]));
        assert_eq!(buf[..], data[..4]);
    }
    if let Ok(p) = Ipv4Packet::new_checked(data) {
        let _ = (
            p.version(),
            p.header_len(),
            p.dscp(),
            p.ecn(),
            p.total_len(),
            p.ident(),
        );
        let _ = (
            p.flags(),
            p.dont_frag(),
            p.more_frags(),
            p.frag_offset(),
            p.is_fragment(),
        );
        let _ = (
            p.ttl(),
            p.protocol(),
            p.checksum(),
            p.src_addr(),
            p.dst_addr(),
        );
        let _ = (p.options(), p.payload(), p.verify_checksum());
        if let Ok(repr) = Ipv4Repr::parse(&p) {
            let mut whole = vec![0u8; repr.buffer_len() + repr.payload_len];
            repr.emit(&mut Ipv4Packet::new_unchecked(&mut whole[..]));
            let again = Ipv4Repr::parse(&Ipv4Packet::new_checked(&whole[..]).unwrap());
            assert_eq!(again, Ok(repr));
        }
    }
    if let Ok(p) = UdpPacket::new_checked(data) {
        let _ = (
            p.src_port(),
            p.dst_port(),
            p.len(),
            p.checksum(),
            p.payload(),
        );
        let _ = p.verify_checksum(A, B);
        if let Ok(repr) = UdpRepr::parse(&p, A, B) {
            let mut buf = p.as_ref()[..repr.buffer_len()].to_vec();
            let payload = p.payload();
            repr.emit(&mut UdpPacket::new_unchecked(&mut buf[..]), A, B, |b| {
                b.copy_from_slice(payload)
            });
            let again = UdpRepr::parse(&UdpPacket::new_checked(&buf[..]).unwrap(), A, B);
            assert_eq!(again, Ok(repr));
        }
    }
    if let Ok(p) = TcpPacket::new_checked(data) {
        let _ = (
            p.src_port(),
            p.dst_port(),
            p.seq_number(),
            p.ack_number(),
            p.header_len(),
        );
        let _ = (
            p.flags(),
            p.fin(),
            p.syn(),
            p.rst(),
            p.psh(),
            p.ack(),
            p.urg(),
            p.ece(),
        );
        let _ = (
            p.cwr(),
            p.window_len(),
            p.checksum(),
            p.urgent_at(),
            p.options(),
        );
        let _ = (p.payload(), p.verify_checksum(A, B));
    }
    if let Ok(p) = ArpPacket::new_checked(data) {
        let _ = (
            p.hardware_type(),
            p.protocol_type(),
            p.hardware_len(),
            p.protocol_len(),
        );
        let _ = (p.operation(), p.sha(), p.spa(), p.tha(), p.tpa());
        if let Ok(repr) = ArpRepr::parse(&p) {
            let mut buf = [0u8; 28];
            repr.emit(&mut ArpPacket::new_unchecked(&mut buf[..]));
            assert_eq!(buf[..], data[..28]);
        }
    }
    // memif control messages and ring descriptors.
    if let Some(m) = data.get(..nfv_wire::memif::MSG_LEN)
        && let Ok(r) = nfv_wire::memif::MsgRepr::parse(m)
    {
        assert_eq!(nfv_wire::memif::MsgRepr::parse(&r.emit()), Ok(r));
    }
    let _ = nfv_wire::memif::MsgRepr::parse(data);
    if let Ok(d) = nfv_wire::memif::DescRepr::parse(data) {
        assert_eq!(d.emit()[..], data[..nfv_wire::memif::ring::DESC_LEN]);
    }
    // Parse must also be safe on unchecked views of any length.
    let _ = EthernetRepr::parse(&EthernetFrame::new_unchecked(data));
    let _ = VlanRepr::parse(&VlanTag::new_unchecked(data));
    let _ = Ipv4Repr::parse(&Ipv4Packet::new_unchecked(data));
    let _ = UdpRepr::parse(&UdpPacket::new_unchecked(data), A, B);
    let _ = ArpRepr::parse(&ArpPacket::new_unchecked(data));
}

fuzz_target!(|data: &[u8]| {
    views(data);
    // Also walk a frame the way the datapath does: Ethernet, optional VLAN
    // tags, then IPv4 / ARP and the transport header.
    let Ok(eth) = EthernetFrame::new_checked(data) else {
        return;
    };
    let mut ethertype = eth.ethertype();
    let mut rest = eth.payload();
    while ethertype.is_vlan() {
        let Ok(tag) = VlanTag::new_checked(rest) else {
            return;
        };
        ethertype = tag.ethertype();
        rest = &rest[VlanRepr::HEADER_LEN..];
    }
    views(rest);
    if let Ok(ip) = Ipv4Packet::new_checked(rest) {
        views(ip.payload());
    }
});
