//! Every port type a node can run, in one list. A new type adds its
//! crate's [`PortType`] static to [`PORT_TYPES`] (and the crate to this
//! crate's `Cargo.toml`); the config loader (`nfv-config`) and the node
//! (`nfv-control`) find types only through [`port_type`], so nothing else
//! names a type.

use nfv_ports::PortType;
use nfv_ports::port_type::{GENERATOR, PCAP, RECEIVER, RING, SINK};

/// In the order `type` values are listed in error messages.
pub static PORT_TYPES: &[&dyn PortType] = &[
    &GENERATOR,
    &SINK,
    &RECEIVER,
    &PCAP,
    &RING,
    &nfv_vhost::VHOST_USER,
    &nfv_afxdp::AFXDP,
    &nfv_afpacket::AFPACKET,
    &nfv_tap::TAP,
    &nfv_memif::MEMIF,
    &nfv_vxlan::VXLAN,
    &nfv_null::NULL,
];

/// The registered type named `name` (a `type = "..."` value).
pub fn port_type(name: &str) -> Option<&'static dyn PortType> {
    PORT_TYPES.iter().copied().find(|t| t.name() == name)
}

/// The types that accept `key` in their `[[port]]` tables.
pub fn types_with_key(key: &str) -> impl Iterator<Item = &'static dyn PortType> + '_ {
    PORT_TYPES
        .iter()
        .copied()
        .filter(move |t| t.keys().contains(&key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique() {
        for t in PORT_TYPES {
            let n = PORT_TYPES.iter().filter(|u| u.name() == t.name()).count();
            assert_eq!(n, 1, "type {:?} is registered {n} times", t.name());
        }
    }

    #[test]
    fn no_type_claims_a_key_every_port_has() {
        for t in PORT_TYPES {
            for common in ["name", "id", "type", "rxqs"] {
                assert!(
                    !t.keys().contains(&common),
                    "type {:?} lists {common:?} among its own keys",
                    t.name()
                );
            }
        }
    }
}
