//! The one list of port types the node can open. A new type adds its
//! crate's `PortType` static here (and the crate to `Cargo.toml`); nothing
//! else in `nfv-control` names a type.

use nfv_ports::PortType;
use nfv_ports::port_type::{GENERATOR, PCAP, RECEIVER, RING, SINK};

static PORT_TYPES: &[&dyn PortType] = &[
    &GENERATOR,
    &SINK,
    &RECEIVER,
    &PCAP,
    &RING,
    &nfv_vhost::VHOST_USER,
    &nfv_afxdp::AFXDP,
    &nfv_afpacket::AFPACKET,
    &nfv_tap::TAP,
];

/// The registered type named `name` (a [`nfv_ports::PortKind::type_name`]).
pub(crate) fn port_type(name: &str) -> Option<&'static dyn PortType> {
    PORT_TYPES.iter().copied().find(|t| t.name() == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nfv_ports::PortKind;
    use nfv_ports::config::*;

    /// One settings value of every variant; the match below stops
    /// compiling when a variant is added, so the new type lands here too.
    fn one_of_each() -> Vec<PortKind> {
        let kinds = vec![
            PortKind::Generator(GeneratorConfig::default()),
            PortKind::Sink,
            PortKind::Receiver,
            PortKind::Pcap(PcapConfig::default()),
            PortKind::Ring(RingConfig {
                peer: "b".into(),
                size: 1024,
            }),
            PortKind::VhostUser(VhostUserConfig::new("/tmp/x.sock", VhostUserMode::Server)),
            PortKind::AfXdp(AfXdpConfig::new("eth0")),
            PortKind::AfPacket(AfPacketConfig::new("eth0")),
            PortKind::Tap(TapConfig {
                iface: "tap0".into(),
            }),
        ];
        for k in &kinds {
            match k {
                PortKind::Generator(_)
                | PortKind::Sink
                | PortKind::Receiver
                | PortKind::Pcap(_)
                | PortKind::Ring(_)
                | PortKind::VhostUser(_)
                | PortKind::AfXdp(_)
                | PortKind::AfPacket(_)
                | PortKind::Tap(_) => {}
            }
        }
        kinds
    }

    #[test]
    fn every_port_kind_has_exactly_one_registered_type() {
        for kind in one_of_each() {
            let name = kind.type_name();
            let n = PORT_TYPES.iter().filter(|t| t.name() == name).count();
            assert_eq!(n, 1, "type {name:?} is registered {n} times");
        }
        assert_eq!(
            PORT_TYPES.len(),
            one_of_each().len(),
            "a registered type has no PortKind"
        );
    }
}
