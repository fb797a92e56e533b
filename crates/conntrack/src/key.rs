//! Connection keys: the 5-tuple plus zone that names one direction of a
//! connection, and the ICMP type tables needed to reverse it.

/// Layer-3 family of a key. Addresses of both families live in a `u128`
/// (IPv4 in the low 32 bits) so one key type serves both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    V4,
    V6,
}

/// IP protocol numbers the tracker gives special treatment.
pub mod proto {
    pub const ICMP: u8 = 1;
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
    pub const ICMPV6: u8 = 58;
}

/// One direction of a connection as seen on the wire.
///
/// For TCP, UDP and other port-less protocols `src_port`/`dst_port` are the
/// ports (zero when the protocol has none). For ICMP queries `src_port` holds
/// the identifier and `dst_port` holds `type << 8 | code`, so that a request
/// and its reply differ only by the type: see [`ConnKey::reversed`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnKey {
    pub zone: u16,
    pub family: Family,
    pub proto: u8,
    pub src: u128,
    pub dst: u128,
    pub src_port: u16,
    pub dst_port: u16,
}

impl ConnKey {
    /// A TCP, UDP or other-protocol key.
    pub fn new(
        zone: u16,
        family: Family,
        proto: u8,
        src: u128,
        dst: u128,
        sport: u16,
        dport: u16,
    ) -> Self {
        ConnKey {
            zone,
            family,
            proto,
            src,
            dst,
            src_port: sport,
            dst_port: dport,
        }
    }

    /// The key of an ICMP or ICMPv6 message with identifier `id`.
    pub fn icmp(
        zone: u16,
        family: Family,
        src: u128,
        dst: u128,
        id: u16,
        ty: u8,
        code: u8,
    ) -> Self {
        let proto = icmp_proto(family);
        let dst_port = u16::from(ty) << 8 | u16::from(code);
        ConnKey {
            zone,
            family,
            proto,
            src,
            dst,
            src_port: id,
            dst_port,
        }
    }

    pub fn is_icmp(&self) -> bool {
        self.proto == icmp_proto(self.family)
    }

    /// ICMP type and code of an ICMP key.
    pub fn icmp_type_code(&self) -> (u8, u8) {
        let [ty, code] = self.dst_port.to_be_bytes();
        (ty, code)
    }

    /// The key the other end's packets carry. Ports swap, except for ICMP
    /// queries, where the identifier stays and the type becomes its answer
    /// (echo request ↔ echo reply), so a second request in the reverse
    /// direction is not mistaken for a reply. `None` for ICMP types that are
    /// not query/answer pairs.
    pub fn reversed(&self) -> Option<ConnKey> {
        let mut rev = ConnKey {
            src: self.dst,
            dst: self.src,
            ..*self
        };
        if self.is_icmp() {
            let (ty, code) = self.icmp_type_code();
            let answer = icmp_answer_type(self.family, ty)?;
            rev.dst_port = u16::from(answer) << 8 | u16::from(code);
        } else {
            rev.src_port = self.dst_port;
            rev.dst_port = self.src_port;
        }
        Some(rev)
    }
}

pub(crate) fn icmp_proto(family: Family) -> u8 {
    match family {
        Family::V4 => proto::ICMP,
        Family::V6 => proto::ICMPV6,
    }
}

/// What an ICMP type means to the tracker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IcmpKind {
    /// A query that may open a pseudo-connection (echo request, …).
    Request,
    /// The answer to a query.
    Reply,
    /// An error that quotes the packet that caused it.
    Error,
    /// Anything else (router/neighbour discovery, …): not tracked.
    Untracked,
}

/// Query/answer pairs: RFC 792 (echo 8/0, timestamp 13/14, information
/// 15/16), RFC 950 (address mask 17/18), RFC 4443 (echo 128/129).
const ICMPV4_PAIRS: [(u8, u8); 4] = [(8, 0), (13, 14), (15, 16), (17, 18)];
const ICMPV6_PAIRS: [(u8, u8); 1] = [(128, 129)];
/// Error types that quote the offending packet: RFC 792 destination
/// unreachable 3, source quench 4, redirect 5, time exceeded 11, parameter
/// problem 12; RFC 4443 destination unreachable 1, packet too big 2, time
/// exceeded 3, parameter problem 4.
const ICMPV4_ERRORS: [u8; 5] = [3, 4, 5, 11, 12];
const ICMPV6_ERRORS: [u8; 4] = [1, 2, 3, 4];

fn pairs(family: Family) -> &'static [(u8, u8)] {
    match family {
        Family::V4 => &ICMPV4_PAIRS,
        Family::V6 => &ICMPV6_PAIRS,
    }
}

pub fn icmp_kind(family: Family, ty: u8) -> IcmpKind {
    let errors: &[u8] = match family {
        Family::V4 => &ICMPV4_ERRORS,
        Family::V6 => &ICMPV6_ERRORS,
    };
    if pairs(family).iter().any(|&(req, _)| req == ty) {
        IcmpKind::Request
    } else if pairs(family).iter().any(|&(_, rep)| rep == ty) {
        IcmpKind::Reply
    } else if errors.contains(&ty) {
        IcmpKind::Error
    } else {
        IcmpKind::Untracked
    }
}

fn icmp_answer_type(family: Family, ty: u8) -> Option<u8> {
    pairs(family).iter().find_map(|&(req, rep)| {
        if req == ty {
            Some(rep)
        } else if rep == ty {
            Some(req)
        } else {
            None
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reverse_table() {
        let tcp = ConnKey::new(3, Family::V4, proto::TCP, 1, 2, 1000, 80);
        let echo4 = ConnKey::icmp(0, Family::V4, 1, 2, 7, 8, 0);
        let echo6 = ConnKey::icmp(0, Family::V6, 1, 2, 7, 128, 0);
        let cases = [
            (
                tcp,
                Some(ConnKey::new(3, Family::V4, proto::TCP, 2, 1, 80, 1000)),
            ),
            (echo4, Some(ConnKey::icmp(0, Family::V4, 2, 1, 7, 0, 0))),
            (echo6, Some(ConnKey::icmp(0, Family::V6, 2, 1, 7, 129, 0))),
            (ConnKey::icmp(0, Family::V4, 1, 2, 7, 3, 1), None),
        ];
        for (key, want) in cases {
            assert_eq!(key.reversed(), want, "{key:?}");
            if let Some(rev) = want {
                assert_eq!(
                    rev.reversed(),
                    Some(key),
                    "reversing twice gives back {key:?}"
                );
            }
        }
    }

    #[test]
    fn icmp_kind_table() {
        let cases = [
            (Family::V4, 8, IcmpKind::Request),
            (Family::V4, 0, IcmpKind::Reply),
            (Family::V4, 3, IcmpKind::Error),
            (Family::V4, 11, IcmpKind::Error),
            (Family::V4, 9, IcmpKind::Untracked),
            (Family::V6, 128, IcmpKind::Request),
            (Family::V6, 129, IcmpKind::Reply),
            (Family::V6, 2, IcmpKind::Error),
            (Family::V6, 135, IcmpKind::Untracked),
        ];
        for (family, ty, want) in cases {
            assert_eq!(icmp_kind(family, ty), want, "{family:?} type {ty}");
        }
    }
}
