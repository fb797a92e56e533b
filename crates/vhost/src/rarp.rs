//! Announcing a guest that has just migrated in (`VHOST_USER_SEND_RARP`).
//!
//! After a live migration the network still sends the guest's traffic to
//! where it was. QEMU announces the guest from its new place by
//! broadcasting RARP frames with the guest's MAC as source (it does so for
//! a netdev it can send on; for vhost-user it asks the backend instead,
//! with SEND_RARP, once per announcement round). We inject that frame into
//! the switch as if the guest had sent it on queue pair 0: NORMAL's MAC
//! learning moves the MAC to this port, and the broadcast carries the news
//! to the other ports, the uplinks and the switches beyond them — the
//! same frame QEMU itself sends (reverse request, sender and target the
//! guest's MAC, addresses zero), as DPDK's vhost library does.

/// Length of the frame: the Ethernet minimum (without FCS).
pub const FRAME_LEN: usize = 60;

const VALID: u64 = 1 << 48;

/// The MAC packed for [`crate::shared::Shared::rarp`]: never 0.
pub fn encode(mac: [u8; 6]) -> u64 {
    let mut b = [0u8; 8];
    b[..6].copy_from_slice(&mac);
    u64::from_le_bytes(b) | VALID
}

/// The MAC of an [`encode`]d value, `None` for 0.
pub fn decode(v: u64) -> Option<[u8; 6]> {
    if v & VALID == 0 {
        return None;
    }
    let b = v.to_le_bytes();
    let mut mac = [0u8; 6];
    mac.copy_from_slice(&b[..6]);
    Some(mac)
}

pub fn mac_string(mac: [u8; 6]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// The announcement of `mac`: broadcast RARP reverse request (opcode 3),
/// Ethernet/IPv4, sender and target hardware address `mac`, protocol
/// addresses 0, zero padding to 60 bytes.
pub fn frame(mac: [u8; 6]) -> [u8; FRAME_LEN] {
    use nfv_wire::{
        ArpOperation, ArpPacket, ArpRepr, EtherType, EthernetAddress, EthernetFrame, EthernetRepr,
        Ipv4Addr,
    };
    let mut f = [0u8; FRAME_LEN];
    let mut eth = EthernetFrame::new_unchecked(&mut f[..]);
    EthernetRepr {
        src: EthernetAddress(mac),
        dst: EthernetAddress::BROADCAST,
        ethertype: EtherType::RARP,
    }
    .emit(&mut eth);
    ArpRepr {
        op: ArpOperation::REVERSE_REQUEST,
        sha: EthernetAddress(mac),
        spa: Ipv4Addr::UNSPECIFIED,
        tha: EthernetAddress(mac),
        tpa: Ipv4Addr::UNSPECIFIED,
    }
    .emit(&mut ArpPacket::new_unchecked(eth.payload_mut()));
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_round_trips_and_zero_is_none() {
        for mac in [[0u8; 6], [0x52, 0x54, 0, 0x12, 0x34, 0x56], [0xff; 6]] {
            assert_ne!(encode(mac), 0);
            assert_eq!(decode(encode(mac)), Some(mac));
        }
        assert_eq!(decode(0), None);
    }

    #[test]
    fn the_frame_is_a_broadcast_reverse_request_from_the_mac() {
        let mac = [0x52, 0x54, 0x00, 0xab, 0xcd, 0xef];
        let f = frame(mac);
        let want: [u8; 42] = [
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // destination
            0x52, 0x54, 0x00, 0xab, 0xcd, 0xef, // source
            0x80, 0x35, // RARP
            0x00, 0x01, 0x08, 0x00, 6, 4, 0x00, 0x03, // Ethernet, IPv4, reverse request
            0x52, 0x54, 0x00, 0xab, 0xcd, 0xef, 0, 0, 0, 0, // sender
            0x52, 0x54, 0x00, 0xab, 0xcd, 0xef, 0, 0, 0, 0, // target
        ];
        assert_eq!(f[..42], want);
        assert_eq!(f[42..], [0u8; 18]);
        assert_eq!(mac_string(mac), "52:54:00:ab:cd:ef");
    }
}
