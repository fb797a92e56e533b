//! ICMPv6 (RFC 4443) type and code, and the neighbor discovery fields
//! (RFC 4861 sections 4.3, 4.4, 4.6.1) that flows match: the target
//! address and the source/target link-layer address options.

use crate::ethernet::EthernetAddress;

/// Field offsets of the ICMPv6 header and of a neighbor solicitation or
/// advertisement.
pub mod field {
    use crate::{Field, Rest};
    /// Type.
    pub const TYPE: usize = 0;
    /// Code.
    pub const CODE: usize = 1;
    /// Checksum (over the IPv6 pseudo-header and the whole message).
    pub const CHECKSUM: Field = 2..4;
    /// Neighbor solicitation/advertisement: the target address.
    pub const ND_TARGET: Field = 8..24;
    /// Neighbor solicitation/advertisement: the options.
    pub const ND_OPTIONS: Rest = 24..;
}

/// Neighbor solicitation.
pub const NEIGHBOR_SOLICIT: u8 = 135;
/// Neighbor advertisement.
pub const NEIGHBOR_ADVERT: u8 = 136;
/// Option: source link-layer address.
pub const OPTION_SOURCE_LL: u8 = 1;
/// Option: target link-layer address.
pub const OPTION_TARGET_LL: u8 = 2;

/// What a neighbor solicitation or advertisement carries that flows match
/// (OVS's `nd_target`, `nd_sll`, `nd_tll`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NdFields {
    /// The target address.
    pub target: u128,
    /// A solicitation's source link-layer address option (zero when absent).
    pub sll: EthernetAddress,
    /// An advertisement's target link-layer address option (zero when absent).
    pub tll: EthernetAddress,
}

/// Reads the neighbor discovery fields of the ICMPv6 message `msg` (from
/// its type byte on) when it is a solicitation or advertisement with code
/// 0. A message too short for the target, an option of length 0 or past
/// the end, or a second link-layer option of the kind the message takes
/// makes it malformed: `None`, as OVS then clears all three fields. A
/// solicitation's target link-layer option and an advertisement's source
/// one are skipped, as are options of other types. Bounded by the message
/// length (each option is at least 8 bytes).
pub fn nd_fields(msg: &[u8]) -> Option<NdFields> {
    let kind = *msg.get(field::TYPE)?;
    if !(kind == NEIGHBOR_SOLICIT || kind == NEIGHBOR_ADVERT) || msg[field::CODE] != 0 {
        return None;
    }
    let target = msg.get(field::ND_TARGET)?;
    let mut nd = NdFields {
        target: u128::from_be_bytes(target.try_into().ok()?),
        ..NdFields::default()
    };
    let wanted = if kind == NEIGHBOR_SOLICIT {
        OPTION_SOURCE_LL
    } else {
        OPTION_TARGET_LL
    };
    let mut seen = false;
    let mut opts = &msg[field::ND_OPTIONS];
    while opts.len() >= 2 {
        let len = usize::from(opts[1]) * 8;
        if len == 0 || len > opts.len() {
            return None;
        }
        if opts[0] == wanted && len == 8 {
            if seen {
                return None;
            }
            seen = true;
            let mut mac = [0u8; 6];
            mac.copy_from_slice(&opts[2..8]);
            if kind == NEIGHBOR_SOLICIT {
                nd.sll = EthernetAddress(mac);
            } else {
                nd.tll = EthernetAddress(mac);
            }
        }
        opts = &opts[len..];
    }
    Some(nd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec;
    use std::vec::Vec;

    fn message(kind: u8, code: u8, options: &[(u8, &[u8])]) -> Vec<u8> {
        let mut m = vec![kind, code, 0, 0, 0, 0, 0, 0];
        m.extend_from_slice(&"fe80::1".parse::<core::net::Ipv6Addr>().unwrap().octets());
        for (t, body) in options {
            m.push(*t);
            m.push(((body.len() + 2) / 8) as u8);
            m.extend_from_slice(body);
        }
        m
    }

    const MAC: &[u8] = &[2, 0, 0, 0, 0, 7];

    #[test]
    fn nd_table() {
        let target = "fe80::1".parse::<core::net::Ipv6Addr>().unwrap().to_bits();
        let mac = EthernetAddress([2, 0, 0, 0, 0, 7]);
        let none = EthernetAddress::default();
        let long_opt: &[u8] = &[0u8; 14];
        let cases: Vec<(&str, Vec<u8>, Option<NdFields>)> = vec![
            (
                "ns, no option",
                message(135, 0, &[]),
                Some(NdFields {
                    target,
                    sll: none,
                    tll: none,
                }),
            ),
            (
                "ns with sll",
                message(135, 0, &[(1, MAC)]),
                Some(NdFields {
                    target,
                    sll: mac,
                    tll: none,
                }),
            ),
            (
                "na with tll",
                message(136, 0, &[(2, MAC)]),
                Some(NdFields {
                    target,
                    sll: none,
                    tll: mac,
                }),
            ),
            (
                "na skips sll",
                message(136, 0, &[(1, MAC)]),
                Some(NdFields {
                    target,
                    sll: none,
                    tll: none,
                }),
            ),
            (
                "other option first",
                message(135, 0, &[(14, long_opt), (1, MAC)]),
                Some(NdFields {
                    target,
                    sll: mac,
                    tll: none,
                }),
            ),
            ("two sll", message(135, 0, &[(1, MAC), (1, MAC)]), None),
            ("code not 0", message(135, 1, &[]), None),
            ("echo request", message(128, 0, &[]), None),
            ("short target", message(135, 0, &[])[..20].to_vec(), None),
            (
                "zero length option",
                [message(135, 0, &[]), vec![1, 0, 0, 0]].concat(),
                None,
            ),
            (
                "option past the end",
                [message(135, 0, &[]), vec![1, 2, 0, 0, 0, 0, 0, 0]].concat(),
                None,
            ),
            ("empty", vec![], None),
        ];
        for (name, msg, want) in cases {
            assert_eq!(nd_fields(&msg), want, "{name}");
        }
    }

    #[test]
    fn agrees_with_etherparse_on_the_target() {
        let mut m = message(136, 0, &[(2, MAC)]);
        m[4] = 0x60; // router flag off, solicited + override on
        let slice = etherparse::Icmpv6Slice::from_slice(&m).unwrap();
        assert_eq!(slice.type_u8(), 136);
        // etherparse leaves the ND body to the caller: it starts where our
        // target field does.
        assert_eq!(&slice.payload()[..16], &m[field::ND_TARGET]);
        assert_eq!(
            nd_fields(&m).unwrap().target.to_be_bytes(),
            m[field::ND_TARGET]
        );
    }
}
