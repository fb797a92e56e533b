//! Which virtio and vhost-user protocol features the port offers, and the
//! checks applied to what a frontend acks. Pure functions, no I/O.

use crate::settings::Offloads;
use nfv_virtio::layout::{
    VHOST_F_LOG_ALL, VHOST_USER_F_PROTOCOL_FEATURES, VIRTIO_F_IN_ORDER, VIRTIO_F_RING_PACKED,
    VIRTIO_F_VERSION_1, VIRTIO_NET_F_CSUM, VIRTIO_NET_F_GUEST_CSUM, VIRTIO_NET_F_GUEST_ECN,
    VIRTIO_NET_F_GUEST_TSO4, VIRTIO_NET_F_GUEST_TSO6, VIRTIO_NET_F_GUEST_USO4,
    VIRTIO_NET_F_GUEST_USO6, VIRTIO_NET_F_HOST_ECN, VIRTIO_NET_F_HOST_TSO4, VIRTIO_NET_F_HOST_TSO6,
    VIRTIO_NET_F_HOST_USO, VIRTIO_NET_F_MQ, VIRTIO_NET_F_MRG_RXBUF, VIRTIO_NET_F_MTU,
    VIRTIO_RING_F_EVENT_IDX, VIRTIO_RING_F_INDIRECT_DESC,
};
use vhost::vhost_user::VhostUserProtocolFeatures;

/// Virtio feature bits offered to every frontend. `RING_PACKED` when the
/// port allows packed rings (`packed_ring`, default on): the frontend
/// chooses (QEMU `packed=on`, testpmd `packed_vq=1`). `IN_ORDER` too: our device
/// queues use chains strictly in avail order (bad ones included, returned
/// with length 0), and DPDK's virtio PMD runs cheaper in-order paths with
/// it. Its testpmd endpoint in `nfv-bench hop` is the bottleneck of a 64 B
/// hop when the two vCPUs are far apart: offering IN_ORDER took that hop
/// from ~8.5 to ~10.3 Mpps (4 interleaved pairs). Not offered
/// (`in_order` false) once another port borrows the guest's receive
/// buffers (`nfv_virtio::lend`): lent buffers complete in the order the kernel
/// fills them. `VHOST_F_LOG_ALL` always: without it QEMU refuses to
/// migrate the VM (it acks the bit only while a migration runs, and we
/// then log our writes into guest memory, `nfv_virtio::dirty_log`).
/// The checksum and segmentation offloads the port's [`Offloads`] allow
/// ([`offload_bits`]).
pub fn offered(mrg_rxbuf: bool, in_order: bool, packed: bool, offloads: Offloads) -> u64 {
    let mut f = VIRTIO_F_VERSION_1
        | VHOST_F_LOG_ALL
        | VIRTIO_RING_F_INDIRECT_DESC
        | VIRTIO_RING_F_EVENT_IDX
        | VIRTIO_NET_F_MQ
        | VHOST_USER_F_PROTOCOL_FEATURES;
    if mrg_rxbuf {
        f |= VIRTIO_NET_F_MRG_RXBUF;
    }
    if in_order {
        f |= VIRTIO_F_IN_ORDER;
    }
    if packed {
        f |= VIRTIO_F_RING_PACKED;
    }
    f | offload_bits(offloads)
}

/// The offload feature bits `o` allows. Each offload is offered in both
/// directions; segmentation and ECN only with checksum offload, ECN only
/// with TSO (virtio-net §5.1.3.1 dependencies).
pub fn offload_bits(o: Offloads) -> u64 {
    if !o.csum {
        return 0;
    }
    let mut f = VIRTIO_NET_F_CSUM | VIRTIO_NET_F_GUEST_CSUM;
    if o.tso {
        f |= VIRTIO_NET_F_HOST_TSO4
            | VIRTIO_NET_F_HOST_TSO6
            | VIRTIO_NET_F_GUEST_TSO4
            | VIRTIO_NET_F_GUEST_TSO6;
        if o.ecn {
            f |= VIRTIO_NET_F_HOST_ECN | VIRTIO_NET_F_GUEST_ECN;
        }
    }
    if o.uso {
        f |= VIRTIO_NET_F_HOST_USO | VIRTIO_NET_F_GUEST_USO4 | VIRTIO_NET_F_GUEST_USO6;
    }
    f
}

/// What the guest may be given / send under the acked features: the
/// device queues apply them (`nfv_virtio::net`).
pub use nfv_virtio::net::{guest_caps, host_caps};

/// `VHOST_USER_PROTOCOL_F_REPLY_ACK` as a bit mask.
pub const PROTOCOL_REPLY_ACK: u64 = VhostUserProtocolFeatures::REPLY_ACK.bits();

/// `VHOST_USER_PROTOCOL_F_LOG_SHMFD` as a bit mask.
pub const PROTOCOL_LOG_SHMFD: u64 = VhostUserProtocolFeatures::LOG_SHMFD.bits();

/// vhost-user protocol features offered: MQ (several queue pairs),
/// REPLY_ACK (acks on request, see `crate::dispatch`), and for live
/// migration LOG_SHMFD (the dirty log comes as a shared-memory fd with
/// SET_LOG_BASE) and RARP (SEND_RARP: announce the guest's MAC from its
/// new place, see `crate::rarp`).
/// And NET_MTU (NET_SET_MTU: the MTU the frontend gave its guest, checked
/// against the port's; QEMU sends it only when the guest acked
/// VIRTIO_NET_F_MTU, which is offered only with a port `mtu`).
pub fn protocol_offered() -> VhostUserProtocolFeatures {
    VhostUserProtocolFeatures::MQ
        | VhostUserProtocolFeatures::REPLY_ACK
        | VhostUserProtocolFeatures::LOG_SHMFD
        | VhostUserProtocolFeatures::RARP
        | VhostUserProtocolFeatures::MTU
}

/// VIRTIO_NET_F_MTU when the port has an `mtu`.
pub fn mtu_bit(mtu: Option<u16>) -> u64 {
    if mtu.is_some() { VIRTIO_NET_F_MTU } else { 0 }
}

/// Why a frontend's SET_FEATURES / SET_PROTOCOL_FEATURES was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NegotiationError {
    #[error(
        "the frontend acked VIRTIO_F_RING_PACKED (bit 34), which this port does not offer \
         (packed_ring = false): use split virtqueues (e.g. drop testpmd's packed_vq=1) \
         or set packed_ring = true"
    )]
    RingPacked,
    #[error("the frontend acked VIRTIO_F_RING_PACKED without VIRTIO_F_VERSION_1")]
    PackedWithoutVersion1,
    #[error("the frontend acked virtio features {0:#x} that were not offered")]
    Unoffered(u64),
    #[error("the frontend acked vhost-user protocol features {0:#x} that were not offered")]
    UnofferedProtocol(u64),
}

/// Checks the feature bits a frontend acks against what was offered.
pub fn check_ack(acked: u64, offered: u64) -> Result<(), NegotiationError> {
    let extra = acked & !offered;
    if extra & VIRTIO_F_RING_PACKED != 0 {
        return Err(NegotiationError::RingPacked);
    }
    if extra != 0 {
        return Err(NegotiationError::Unoffered(extra));
    }
    if acked & VIRTIO_F_RING_PACKED != 0 && acked & VIRTIO_F_VERSION_1 == 0 {
        return Err(NegotiationError::PackedWithoutVersion1);
    }
    Ok(())
}

/// Checks acked protocol feature bits.
pub fn check_protocol_ack(acked: u64) -> Result<(), NegotiationError> {
    let extra = acked & !protocol_offered().bits();
    if extra != 0 {
        return Err(NegotiationError::UnofferedProtocol(extra));
    }
    Ok(())
}

/// Names of the virtio-net feature bits we know, for `show ports`.
pub fn describe(features: u64) -> String {
    const NAMES: [(u64, &str); 21] = [
        (VIRTIO_NET_F_CSUM, "CSUM"),
        (VIRTIO_NET_F_GUEST_CSUM, "GUEST_CSUM"),
        (VIRTIO_NET_F_GUEST_TSO4, "GUEST_TSO4"),
        (VIRTIO_NET_F_GUEST_TSO6, "GUEST_TSO6"),
        (VIRTIO_NET_F_GUEST_ECN, "GUEST_ECN"),
        (VIRTIO_NET_F_HOST_TSO4, "HOST_TSO4"),
        (VIRTIO_NET_F_HOST_TSO6, "HOST_TSO6"),
        (VIRTIO_NET_F_HOST_ECN, "HOST_ECN"),
        (VIRTIO_NET_F_GUEST_USO4, "GUEST_USO4"),
        (VIRTIO_NET_F_GUEST_USO6, "GUEST_USO6"),
        (VIRTIO_NET_F_HOST_USO, "HOST_USO"),
        (VIRTIO_F_VERSION_1, "VERSION_1"),
        (VHOST_F_LOG_ALL, "LOG_ALL"),
        (VIRTIO_F_IN_ORDER, "IN_ORDER"),
        (VIRTIO_NET_F_MRG_RXBUF, "MRG_RXBUF"),
        (VIRTIO_RING_F_INDIRECT_DESC, "INDIRECT_DESC"),
        (VIRTIO_RING_F_EVENT_IDX, "EVENT_IDX"),
        (VIRTIO_NET_F_MQ, "MQ"),
        (VIRTIO_NET_F_MTU, "MTU"),
        (VHOST_USER_F_PROTOCOL_FEATURES, "PROTOCOL_FEATURES"),
        (VIRTIO_F_RING_PACKED, "RING_PACKED"),
    ];
    let mut names: Vec<&str> = NAMES
        .iter()
        .filter(|(bit, _)| features & bit != 0)
        .map(|(_, n)| *n)
        .collect();
    let known = NAMES.iter().fold(0, |a, (b, _)| a | b);
    let other = features & !known;
    let other_s;
    if other != 0 {
        other_s = format!("{other:#x}");
        names.push(&other_s);
    }
    format!("{features:#x} [{}]", names.join(" "))
}

/// The ring layout the acked `features` select: `"packed"` with
/// VIRTIO_F_RING_PACKED, else `"split"`; `"none"` before negotiation.
pub fn ring_layout(features: u64, connected: bool) -> &'static str {
    match (connected, features & VIRTIO_F_RING_PACKED != 0) {
        (false, _) => "none",
        (true, true) => "packed",
        (true, false) => "split",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nfv_offload::OffloadCaps;

    #[test]
    fn offered_bits() {
        let none = Offloads::NONE;
        let f = offered(true, true, false, none);
        assert_eq!(f & VIRTIO_F_RING_PACKED, 0);
        assert_ne!(f & VIRTIO_NET_F_MRG_RXBUF, 0);
        assert_eq!(
            offered(false, true, false, none) & VIRTIO_NET_F_MRG_RXBUF,
            0
        );
        assert_ne!(f & VIRTIO_F_IN_ORDER, 0);
        assert_eq!(f, 0x9_7440_8000);
        assert_eq!(offered(true, true, true, none), 0xd_7440_8000);
        // Offloads add exactly their bits, in both directions.
        assert_eq!(
            offered(true, true, true, Offloads::ALL),
            0x1c0_000d_7440_bb83
        );
    }

    #[test]
    fn acks_are_checked() {
        let f = offered(false, true, false, Offloads::NONE);
        assert_eq!(check_ack(f, f), Ok(()));
        assert_eq!(check_ack(VIRTIO_F_VERSION_1, f), Ok(()));
        assert_eq!(check_ack(0, f), Ok(()));
        assert_eq!(
            check_ack(f | VIRTIO_F_RING_PACKED, f),
            Err(NegotiationError::RingPacked)
        );
        let p = offered(false, true, true, Offloads::NONE);
        assert_eq!(check_ack(p, p), Ok(()));
        assert_eq!(
            check_ack(VIRTIO_F_RING_PACKED, p),
            Err(NegotiationError::PackedWithoutVersion1)
        );
        assert_eq!(
            check_ack(VIRTIO_NET_F_MRG_RXBUF, f),
            Err(NegotiationError::Unoffered(VIRTIO_NET_F_MRG_RXBUF))
        );
        assert!(check_protocol_ack(protocol_offered().bits()).is_ok());
        assert!(check_protocol_ack(VhostUserProtocolFeatures::CONFIG.bits()).is_err());
    }

    /// Each switch removes its bits, dependencies included; the caps read
    /// back from an ack ignore bits whose dependency is missing.
    #[test]
    fn offloads_switch_off_and_caps_follow_dependencies() {
        struct Case {
            offloads: Offloads,
            has: u64,
            lacks: u64,
        }
        let tso = VIRTIO_NET_F_HOST_TSO4 | VIRTIO_NET_F_GUEST_TSO6;
        let ecn = VIRTIO_NET_F_HOST_ECN | VIRTIO_NET_F_GUEST_ECN;
        let uso = VIRTIO_NET_F_HOST_USO | VIRTIO_NET_F_GUEST_USO4;
        let csum = VIRTIO_NET_F_CSUM | VIRTIO_NET_F_GUEST_CSUM;
        let with = |f: fn(&mut Offloads)| {
            let mut o = Offloads::ALL;
            f(&mut o);
            o
        };
        let cases = [
            Case {
                offloads: Offloads::ALL,
                has: csum | tso | ecn | uso,
                lacks: 0,
            },
            Case {
                offloads: Offloads::NONE,
                has: 0,
                lacks: csum | tso | ecn | uso,
            },
            Case {
                offloads: with(|o| o.csum = false),
                has: 0,
                lacks: csum | tso | ecn | uso,
            },
            Case {
                offloads: with(|o| o.tso = false),
                has: csum | uso,
                lacks: tso | ecn,
            },
            Case {
                offloads: with(|o| o.ecn = false),
                has: csum | tso | uso,
                lacks: ecn,
            },
            Case {
                offloads: with(|o| o.uso = false),
                has: csum | tso | ecn,
                lacks: uso,
            },
        ];
        for c in &cases {
            let f = offload_bits(c.offloads);
            assert_eq!(f & c.has, c.has, "{:?}", c.offloads);
            assert_eq!(f & c.lacks, 0, "{:?}", c.offloads);
        }
        let all = offload_bits(Offloads::ALL);
        assert_eq!(
            guest_caps(all),
            OffloadCaps {
                csum: true,
                tso4: true,
                tso6: true,
                ecn: true,
                uso: true
            }
        );
        assert_eq!(host_caps(all), guest_caps(all));
        // TSO without its checksum dependency is not taken.
        assert_eq!(guest_caps(VIRTIO_NET_F_GUEST_TSO4), OffloadCaps::NONE);
        assert_eq!(
            host_caps(VIRTIO_NET_F_HOST_TSO4 | VIRTIO_NET_F_HOST_USO),
            OffloadCaps::NONE
        );
        assert!(host_caps(VIRTIO_NET_F_CSUM | VIRTIO_NET_F_HOST_TSO6).tso6);
        assert!(!guest_caps(VIRTIO_NET_F_CSUM | VIRTIO_NET_F_GUEST_TSO6).tso6);
    }

    #[test]
    fn ring_layout_follows_the_packed_bit() {
        assert_eq!(ring_layout(0, false), "none");
        assert_eq!(ring_layout(VIRTIO_F_VERSION_1, true), "split");
        assert_eq!(ring_layout(VIRTIO_F_RING_PACKED, true), "packed");
    }

    #[test]
    fn describe_names_bits() {
        assert_eq!(
            describe(VIRTIO_F_VERSION_1 | VIRTIO_NET_F_MQ | 1 << 5),
            "0x100400020 [VERSION_1 MQ 0x20]"
        );
        assert_eq!(
            describe(VIRTIO_NET_F_CSUM | VIRTIO_NET_F_HOST_TSO4),
            "0x801 [CSUM HOST_TSO4]"
        );
    }
}
