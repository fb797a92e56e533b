//! Which virtio and vhost-user protocol features the port offers, and the
//! checks applied to what a frontend acks. Pure functions, no I/O.

use nfv_virtio::layout::{
    VHOST_F_LOG_ALL, VHOST_USER_F_PROTOCOL_FEATURES, VIRTIO_F_IN_ORDER, VIRTIO_F_RING_PACKED,
    VIRTIO_F_VERSION_1, VIRTIO_NET_F_MQ, VIRTIO_NET_F_MRG_RXBUF, VIRTIO_RING_F_EVENT_IDX,
    VIRTIO_RING_F_INDIRECT_DESC,
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
/// buffers (`crate::lend`): lent buffers complete in the order the kernel
/// fills them. `VHOST_F_LOG_ALL` always: without it QEMU refuses to
/// migrate the VM (it acks the bit only while a migration runs, and we
/// then log our writes into guest memory, `nfv_virtio::dirty_log`).
pub fn offered(mrg_rxbuf: bool, in_order: bool, packed: bool) -> u64 {
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
    f
}

/// `VHOST_USER_PROTOCOL_F_REPLY_ACK` as a bit mask.
pub const PROTOCOL_REPLY_ACK: u64 = VhostUserProtocolFeatures::REPLY_ACK.bits();

/// `VHOST_USER_PROTOCOL_F_LOG_SHMFD` as a bit mask.
pub const PROTOCOL_LOG_SHMFD: u64 = VhostUserProtocolFeatures::LOG_SHMFD.bits();

/// vhost-user protocol features offered: MQ (several queue pairs),
/// REPLY_ACK (acks on request, see `crate::dispatch`), and for live
/// migration LOG_SHMFD (the dirty log comes as a shared-memory fd with
/// SET_LOG_BASE) and RARP (SEND_RARP: announce the guest's MAC from its
/// new place, see `crate::rarp`).
pub fn protocol_offered() -> VhostUserProtocolFeatures {
    VhostUserProtocolFeatures::MQ
        | VhostUserProtocolFeatures::REPLY_ACK
        | VhostUserProtocolFeatures::LOG_SHMFD
        | VhostUserProtocolFeatures::RARP
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
    const NAMES: [(u64, &str); 9] = [
        (VIRTIO_F_VERSION_1, "VERSION_1"),
        (VHOST_F_LOG_ALL, "LOG_ALL"),
        (VIRTIO_F_IN_ORDER, "IN_ORDER"),
        (VIRTIO_NET_F_MRG_RXBUF, "MRG_RXBUF"),
        (VIRTIO_RING_F_INDIRECT_DESC, "INDIRECT_DESC"),
        (VIRTIO_RING_F_EVENT_IDX, "EVENT_IDX"),
        (VIRTIO_NET_F_MQ, "MQ"),
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

    #[test]
    fn offered_bits() {
        let f = offered(true, true, false);
        assert_eq!(f & VIRTIO_F_RING_PACKED, 0);
        assert_ne!(f & VIRTIO_NET_F_MRG_RXBUF, 0);
        assert_eq!(offered(false, true, false) & VIRTIO_NET_F_MRG_RXBUF, 0);
        assert_ne!(f & VIRTIO_F_IN_ORDER, 0);
        assert_eq!(f, 0x9_7440_8000);
        assert_eq!(offered(true, true, true), 0xd_7440_8000);
    }

    #[test]
    fn acks_are_checked() {
        let f = offered(false, true, false);
        assert_eq!(check_ack(f, f), Ok(()));
        assert_eq!(check_ack(VIRTIO_F_VERSION_1, f), Ok(()));
        assert_eq!(check_ack(0, f), Ok(()));
        assert_eq!(
            check_ack(f | VIRTIO_F_RING_PACKED, f),
            Err(NegotiationError::RingPacked)
        );
        let p = offered(false, true, true);
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

    #[test]
    fn ring_layout_follows_the_packed_bit() {
        assert_eq!(ring_layout(0, false), "none");
        assert_eq!(ring_layout(VIRTIO_F_VERSION_1, true), "split");
        assert_eq!(ring_layout(VIRTIO_F_RING_PACKED, true), "packed");
    }

    #[test]
    fn describe_names_bits() {
        assert_eq!(
            describe(VIRTIO_F_VERSION_1 | VIRTIO_NET_F_MQ | 1),
            "0x100400001 [VERSION_1 MQ 0x1]"
        );
    }
}
