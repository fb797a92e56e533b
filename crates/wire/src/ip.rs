//! What IPv4 and IPv6 share: the protocol number (`protocol`, `next header`).

use core::fmt;

/// An IP protocol number (IPv4 `protocol`, IPv6 `next header`). A newtype so
/// that unknown values pass through unchanged.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct IpProtocol(pub u8);

impl IpProtocol {
    /// ICMP.
    pub const ICMP: IpProtocol = IpProtocol(1);
    /// IGMP.
    pub const IGMP: IpProtocol = IpProtocol(2);
    /// TCP.
    pub const TCP: IpProtocol = IpProtocol(6);
    /// UDP.
    pub const UDP: IpProtocol = IpProtocol(17);
    /// GRE.
    pub const GRE: IpProtocol = IpProtocol(47);
    /// ICMPv6.
    pub const ICMPV6: IpProtocol = IpProtocol(58);
    /// SCTP.
    pub const SCTP: IpProtocol = IpProtocol(132);

    /// A short name for the known values.
    pub const fn name(self) -> Option<&'static str> {
        match self {
            Self::ICMP => Some("ICMP"),
            Self::IGMP => Some("IGMP"),
            Self::TCP => Some("TCP"),
            Self::UDP => Some("UDP"),
            Self::GRE => Some("GRE"),
            Self::ICMPV6 => Some("ICMPv6"),
            Self::SCTP => Some("SCTP"),
            _ => None,
        }
    }
}

impl From<u8> for IpProtocol {
    fn from(v: u8) -> Self {
        IpProtocol(v)
    }
}

impl From<IpProtocol> for u8 {
    fn from(v: IpProtocol) -> Self {
        v.0
    }
}

impl fmt::Display for IpProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "{}", self.0),
        }
    }
}

impl fmt::Debug for IpProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IpProtocol({self})")
    }
}
