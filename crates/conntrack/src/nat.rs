//! Network address translation: what `ct(commit, nat(src=…|dst=…))` asks
//! for ([`NatRequest`]), how the tracker picks the translated tuple, and
//! what it tells the datapath to rewrite ([`NatRewrite`]).
//!
//! # Model
//!
//! A translated connection keeps its original-direction key as it is (the
//! key its original-direction packets carry before translation), and its
//! reply key becomes the reverse of the *translated* tuple: the key that
//! the other end's answers carry. Both keys go into the index, so an
//! original-direction packet finds the connection by its own tuple and an
//! answer finds it by the tuple it arrives with. Choosing a translation
//! therefore means choosing an (address, port) whose reply key is in no
//! connection of the zone.
//!
//! A connection gets one translation, source or destination, when it is
//! committed (OVS sets NAT up once, at commit; a later `nat(…)` on an
//! established connection only applies the existing one, as a bare `nat`
//! does). A choice that leaves the tuple as it was is no translation at all
//! (the connection is stored plain, as Linux does when `get_unique_tuple`
//! returns the original tuple).
//!
//! # Choosing the tuple
//!
//! "Port" means the TCP or UDP port being translated (source port for
//! SNAT, destination port for DNAT), or for ICMP and ICMPv6 queries the
//! identifier, which both directions share. Other protocols are translated
//! by address only.
//!
//! 1. Address. For SNAT in [`PortSelection::Hash`] mode, the packet's own
//!    source address is tried first when it lies in the range (so is its
//!    port: a packet already inside the range goes out unchanged if it
//!    can, as Linux's `get_unique_tuple` does). Otherwise the first address
//!    is picked by a hash of the client's address and zone, and of the
//!    server's address unless the request is `persistent`. If every port of
//!    that address is taken, the next addresses of the range follow, in
//!    order (Linux and OVS try only the hashed address).
//! 2. Port. In hash mode the packet's own port is tried first when it lies
//!    in the port range (Linux keeps the source port when the resulting
//!    tuple is unique and in range). Then the range is walked from an
//!    offset with a stride coprime to its size, so every port is visited
//!    once: offset and stride come from a keyed hash of the original tuple
//!    (hash mode) or from the tracker's random generator (random mode,
//!    which also skips the own-port attempt, as Linux's
//!    `NF_NAT_RANGE_PROTO_RANDOM_ALL` does). The stride scatters the probes
//!    instead of walking neighbours, so ports taken earlier in runs do not
//!    lengthen later searches.
//! 3. Without a port range: SNAT of TCP/UDP searches the class of the own
//!    port (1–511, 600–1023 or 1024–65535, the ranges Linux's
//!    `nf_nat_l4proto_unique_tuple` and OVS's `set_sport_range` use); DNAT
//!    of TCP/UDP keeps the destination port (Linux: a destination rewrite
//!    without a port range cannot change the port); ICMP searches every
//!    identifier 0–65535 (Linux does, for either direction).
//!
//! Every candidate costs one index lookup, and a commit makes at most
//! [`MAX_PROBES`] of them, over all addresses, before giving up with
//! [`CommitError::NatExhausted`](crate::CommitError::NatExhausted). A PMD
//! commits inline with forwarding, so the search must be bounded. Linux
//! (`nf_nat_l4proto_unique_tuple`, in softirq context) and OVS's userspace
//! datapath (`nat_get_unique_l4`, in the PMD) bound it the same way: a
//! round of at most 128 attempts, then rounds of 64, 32, 16 and 8 from
//! fresh random offsets, 248 attempts at worst. Here the cap is a flat 128
//! lookups: a few tens of microseconds even if every one misses the cache,
//! paid only when a range is nearly full. A range of at most 128
//! candidates is searched exhaustively, so "exhausted" means exactly that
//! for small ranges; for larger ones the walk scatters its probes, and the
//! chance of missing a free port when a fraction `u` of the range is in
//! use is about `u^128` (about 10⁻⁶ at 90 %, 0.1 % at 95 %).
//!
//! # Port ranges and protocols
//!
//! A port range is accepted for TCP and UDP, and for ICMP/ICMPv6 queries,
//! where it bounds the identifier (Linux's ICMP NAT treats the identifier
//! as the port for both families and honours a given range; OVS's
//! userspace datapath does the same for ICMPv4). For other protocols the
//! commit fails with [`NatError::PortsWithoutPorts`]: Linux and OVS ignore
//! the range there, and the datapath may drop the range itself to get
//! that behaviour. SCTP and DCCP ports are not translated: the tracker
//! treats those protocols as port-less.
//!
//! # `persistent`
//!
//! OVS documents `persistent` as "the same mapping can be provided after
//! the system restarts"; its userspace datapath then picks the address by
//! a hash of the source address (with the range, protocol and zone, but
//! not the destination or ports) without its per-process secret, and
//! Linux (`NF_NAT_RANGE_PERSISTENT`) leaves the destination out of the
//! address hash. Here, likewise: a persistent request picks its first
//! address from the zone and the client's address alone, through a hash
//! with a fixed key, so a client maps to the same address for every
//! destination and across restarts; a plain request mixes in the server's
//! address under the tracker's random key. Ports are unaffected.
//!
//! # ICMP errors
//!
//! An ICMP error related to a translated connection gets a [`NatRewrite`]
//! like any packet of its direction; see [`NatRewrite`] for how the
//! datapath applies it to the outer and the embedded header.

use thiserror::Error;

use crate::key::{ConnKey, Family, proto};

/// Candidates (index lookups) one commit may try before giving up.
pub const MAX_PROBES: u32 = 128;

/// Which end of the connection is translated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NatKind {
    /// SNAT: the original direction's source, so the reply's destination.
    Src,
    /// DNAT: the original direction's destination, so the reply's source.
    Dst,
}

/// How the port search starts (OVS's `hash` and `random` flags).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PortSelection {
    /// Offset and stride from a keyed hash of the original tuple, after the
    /// packet's own port: the same tuple gets the same port while it is
    /// free. The default.
    #[default]
    Hash,
    /// Offset and stride from the tracker's random generator; the packet's
    /// own port is not preferred.
    Random,
}

/// A request that fails validation.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum NatError {
    #[error("address range {min:#x}-{max:#x} runs backwards")]
    AddrRange { min: u128, max: u128 },
    #[error("address {addr:#x} does not fit in IPv4")]
    NotIpv4 { addr: u128 },
    #[error("port range {min}-{max} runs backwards")]
    PortRange { min: u16, max: u16 },
    #[error("the NAT range is {range:?} but the packet is {packet:?}")]
    FamilyMismatch { range: Family, packet: Family },
    #[error("a port range needs TCP, UDP or an ICMP query, not protocol {proto}")]
    PortsWithoutPorts { proto: u8 },
}

/// One `nat(src=A1-A2:P1-P2,…)` or `nat(dst=…)`. Ranges are inclusive;
/// addresses are in the tracker's `u128` form (IPv4 in the low 32 bits).
/// Built through [`NatRequest::new`] and the `with_*` methods, which
/// validate; the family and protocol are checked against the packet at
/// commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NatRequest {
    kind: NatKind,
    family: Family,
    addr_min: u128,
    addr_max: u128,
    ports: Option<(u16, u16)>,
    selection: PortSelection,
    persistent: bool,
}

impl NatRequest {
    /// A request over the addresses `min..=max`, without a port range,
    /// in [`PortSelection::Hash`] mode.
    pub fn new(kind: NatKind, family: Family, min: u128, max: u128) -> Result<Self, NatError> {
        if min > max {
            return Err(NatError::AddrRange { min, max });
        }
        if family == Family::V4 && max > u128::from(u32::MAX) {
            return Err(NatError::NotIpv4 { addr: max });
        }
        Ok(NatRequest {
            kind,
            family,
            addr_min: min,
            addr_max: max,
            ports: None,
            selection: PortSelection::Hash,
            persistent: false,
        })
    }

    /// `nat(src=min-max)`.
    pub fn src(family: Family, min: u128, max: u128) -> Result<Self, NatError> {
        Self::new(NatKind::Src, family, min, max)
    }

    /// `nat(dst=min-max)`.
    pub fn dst(family: Family, min: u128, max: u128) -> Result<Self, NatError> {
        Self::new(NatKind::Dst, family, min, max)
    }

    /// Adds the port range `min..=max`.
    pub fn with_ports(self, min: u16, max: u16) -> Result<Self, NatError> {
        if min > max {
            return Err(NatError::PortRange { min, max });
        }
        Ok(NatRequest {
            ports: Some((min, max)),
            ..self
        })
    }

    pub fn with_selection(self, selection: PortSelection) -> Self {
        NatRequest { selection, ..self }
    }

    /// `persistent`: see the module docs.
    pub fn with_persistent(self, persistent: bool) -> Self {
        NatRequest { persistent, ..self }
    }

    pub fn kind(&self) -> NatKind {
        self.kind
    }

    pub fn family(&self) -> Family {
        self.family
    }

    pub fn addrs(&self) -> (u128, u128) {
        (self.addr_min, self.addr_max)
    }

    pub fn ports(&self) -> Option<(u16, u16)> {
        self.ports
    }

    pub fn selection(&self) -> PortSelection {
        self.selection
    }

    pub fn persistent(&self) -> bool {
        self.persistent
    }

    /// Checks the request against the key of the packet that commits.
    pub(crate) fn check(&self, key: &ConnKey) -> Result<(), NatError> {
        if self.family != key.family {
            return Err(NatError::FamilyMismatch {
                range: self.family,
                packet: key.family,
            });
        }
        if self.ports.is_some() && port_kind(key) == PortKind::None {
            return Err(NatError::PortsWithoutPorts { proto: key.proto });
        }
        Ok(())
    }
}

/// One end of a rewritten header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Endpoint {
    /// The new address (IPv4 in the low 32 bits).
    pub addr: u128,
    /// The new TCP/UDP port, or for ICMP queries the new identifier (one
    /// field, whichever end carries it); `None` for port-less protocols.
    pub port: Option<u16>,
}

/// What the datapath rewrites in one packet of a translated connection:
/// one end of its header, `end` (the source for [`NatKind::Src`], the
/// destination for [`NatKind::Dst`]), gets `addr` and, when the protocol
/// has one, `port` (rewriting a field to the value it has is harmless).
/// After rewriting, the datapath fixes the IPv4 header checksum and the
/// layer-4 checksum (the pseudo-header covers the addresses): see
/// [`crate::checksum`].
///
/// A connection has one translation, so one end of each of its packets
/// changes: in the original direction of an SNAT connection the source,
/// in its reply direction the destination (back to the original source);
/// DNAT the other way round. Kept to one end so that a [`Verdict`] stays
/// at 128 bytes (96 without NAT) and is moved without a `memcpy` call:
/// with both ends as options it grew to 160 bytes, and every `process()`
/// paid a call to `memcpy` for it (counted with callgrind).
///
/// The `ct_state` bit goes with the end: `+snat` when the source is
/// rewritten, `+dnat` when the destination is, which is what OVS's
/// userspace datapath sets (`nat_packet`: an answer of an SNAT connection
/// has its destination translated and is reported `+dnat`); see
/// [`NatRewrite::state_bits`].
///
/// # ICMP errors
///
/// For an ICMP error related to a translated connection ([`crate::CtState::RELATED`])
/// the rewrite is the one a packet travelling in the error's direction
/// gets. The datapath applies:
///
/// * to the outer IP header, the address only (the error has no ports);
/// * to the embedded (quoted) packet, [`NatRewrite::swapped`]: the quoted
///   packet travelled the other way, so what is the error's destination
///   was the quoted packet's source. Address and port (or the quoted
///   echo's identifier) change there, then the embedded IPv4 header
///   checksum, and the embedded TCP/UDP checksum only if the quote holds
///   it whole (a quote may be cut after the first 8 bytes of the layer-4
///   header, which is all RFC 792 promises); finally the ICMP checksum is
///   recomputed over the whole message (for ICMPv6 with the pseudo-header
///   of the new outer addresses).
///
/// This is what Linux does (`nf_nat_icmp_reply_translation`: the inner
/// packet is rewritten with the inverse of the other direction's tuple,
/// then the ICMP checksum recomputed, then the outer header rewritten) and
/// OVS's userspace datapath too (`nat_inner_packet`). Linux also drops ICMP
/// redirects of translated connections rather than pass them through; the
/// datapath may do the same.
///
/// [`Verdict`]: crate::Verdict
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NatRewrite {
    /// Which end of this packet's header changes.
    pub end: NatKind,
    /// The new address (IPv4 in the low 32 bits).
    pub addr: u128,
    /// The new TCP/UDP port, or for ICMP queries the new identifier (one
    /// field, whichever end is rewritten); `None` for port-less protocols.
    pub port: Option<u16>,
}

impl NatRewrite {
    /// The new address and port.
    pub fn endpoint(&self) -> Endpoint {
        Endpoint {
            addr: self.addr,
            port: self.port,
        }
    }

    /// The new source, if the source changes.
    pub fn src(&self) -> Option<Endpoint> {
        (self.end == NatKind::Src).then(|| self.endpoint())
    }

    /// The new destination, if the destination changes.
    pub fn dst(&self) -> Option<Endpoint> {
        (self.end == NatKind::Dst).then(|| self.endpoint())
    }

    /// The rewrite for a header travelling the other way: the other end
    /// gets the same values (the embedded packet of an ICMP error).
    pub fn swapped(&self) -> NatRewrite {
        let end = match self.end {
            NatKind::Src => NatKind::Dst,
            NatKind::Dst => NatKind::Src,
        };
        NatRewrite { end, ..*self }
    }

    /// The key a packet with key `key` has after the rewrite (for ICMP
    /// queries the port is the identifier). Applied to an
    /// original-direction packet it gives the translated tuple, whose
    /// reverse is the connection's reply key.
    pub fn apply_to(&self, key: &ConnKey) -> ConnKey {
        let mut out = *key;
        match self.end {
            NatKind::Src => out.src = self.addr,
            NatKind::Dst => out.dst = self.addr,
        }
        if let Some(port) = self.port {
            match (self.end, key.is_icmp()) {
                (NatKind::Src, _) | (NatKind::Dst, true) => out.src_port = port,
                (NatKind::Dst, false) => out.dst_port = port,
            }
        }
        out
    }
}

/// What the translated "port" of a key is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PortKind {
    /// TCP/UDP ports.
    Ports,
    /// The ICMP query identifier (in `src_port` of both directions' keys).
    IcmpId,
    None,
}

pub(crate) fn port_kind(key: &ConnKey) -> PortKind {
    if key.proto == proto::TCP || key.proto == proto::UDP {
        PortKind::Ports
    } else if key.is_icmp() {
        PortKind::IcmpId
    } else {
        PortKind::None
    }
}

/// The translation a stored connection carries (a byte next to the
/// protocol state, so the packet path reads no extra line).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum ConnNat {
    #[default]
    None,
    Src,
    Dst,
}

impl ConnNat {
    pub(crate) fn kind(self) -> Option<NatKind> {
        match self {
            ConnNat::None => None,
            ConnNat::Src => Some(NatKind::Src),
            ConnNat::Dst => Some(NatKind::Dst),
        }
    }
}

impl From<NatKind> for ConnNat {
    fn from(kind: NatKind) -> Self {
        match kind {
            NatKind::Src => ConnNat::Src,
            NatKind::Dst => ConnNat::Dst,
        }
    }
}

/// The rewrite for a packet of a connection translated `kind`, travelling
/// in the reply direction if `reply`, from the connection's two keys: the
/// reply key holds the translated values, the original key the values the
/// answers must get back.
pub(crate) fn rewrite(
    kind: NatKind,
    orig: &ConnKey,
    reply: &ConnKey,
    reply_dir: bool,
) -> NatRewrite {
    let pk = port_kind(orig);
    let port = |ports: u16, icmp_id: u16| match pk {
        PortKind::Ports => Some(ports),
        PortKind::IcmpId => Some(icmp_id),
        PortKind::None => None,
    };
    // The identifier of an ICMP key sits in `src_port` in both directions.
    let (end, addr, port) = match (kind, reply_dir) {
        (NatKind::Src, false) => (
            NatKind::Src,
            reply.dst,
            port(reply.dst_port, reply.src_port),
        ),
        (NatKind::Src, true) => (NatKind::Dst, orig.src, port(orig.src_port, orig.src_port)),
        (NatKind::Dst, false) => (
            NatKind::Dst,
            reply.src,
            port(reply.src_port, reply.src_port),
        ),
        (NatKind::Dst, true) => (NatKind::Src, orig.dst, port(orig.dst_port, orig.src_port)),
    };
    NatRewrite { end, addr, port }
}

/// `key` with its `kind` end moved to `addr` (and `port`, when the
/// protocol has one).
fn translate(key: &ConnKey, kind: NatKind, addr: u128, port: Option<u16>) -> ConnKey {
    let mut out = *key;
    let pk = port_kind(key);
    match kind {
        NatKind::Src => out.src = addr,
        NatKind::Dst => out.dst = addr,
    }
    if let Some(port) = port {
        match (pk, kind) {
            (PortKind::Ports, NatKind::Src) | (PortKind::IcmpId, _) => out.src_port = port,
            (PortKind::Ports, NatKind::Dst) => out.dst_port = port,
            (PortKind::None, _) => {}
        }
    }
    out
}

/// The packet's own value of the port being translated.
fn own_port(key: &ConnKey, kind: NatKind) -> u16 {
    match (port_kind(key), kind) {
        (PortKind::Ports, NatKind::Dst) => key.dst_port,
        _ => key.src_port,
    }
}

/// The ports to try for one address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PortPlan {
    /// Tried first, before the range.
    first: Option<u16>,
    /// Searched after `first` (which is skipped there).
    range: Option<(u16, u16)>,
}

fn port_plan(key: &ConnKey, req: &NatRequest) -> Option<PortPlan> {
    let pk = port_kind(key);
    if pk == PortKind::None {
        return None;
    }
    let own = own_port(key, req.kind);
    let range = match (req.ports, pk, req.kind) {
        (Some(range), _, _) => Some(range),
        (None, PortKind::IcmpId, _) => Some((0, u16::MAX)),
        (None, _, NatKind::Dst) => None,
        (None, _, NatKind::Src) => Some(match own {
            0..=511 => (1, 511),
            512..=1023 => (600, 1023),
            _ => (1024, u16::MAX),
        }),
    };
    let first = match range {
        None => Some(own),
        Some((lo, hi)) => {
            let keep = req.selection == PortSelection::Hash && (lo..=hi).contains(&own);
            keep.then_some(own)
        }
    };
    Some(PortPlan { first, range })
}

fn gcd(mut a: u32, mut b: u32) -> u32 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// A stride in `1..n` coprime to `n`, so that `start + i * stride` visits
/// each of `n` places once.
fn coprime_stride(n: u32, seed: u64) -> u32 {
    if n <= 2 {
        return 1;
    }
    let mut step = 1 + (seed % u64::from(n - 1)) as u32;
    while gcd(step, n) != 1 {
        step = if step + 1 == n { 1 } else { step + 1 };
    }
    step
}

/// Where the searches start: the first address and the port walk.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Seeds {
    pub(crate) addr: u64,
    pub(crate) port: u64,
}

/// Picks the translated tuple for `orig`: the first candidate for which
/// `is_free` accepts the reply key, within [`MAX_PROBES`] candidates.
/// Returns the translated original-direction tuple and its reply key.
pub(crate) fn choose(
    orig: &ConnKey,
    req: &NatRequest,
    seeds: Seeds,
    mut is_free: impl FnMut(&ConnKey) -> bool,
) -> Option<(ConnKey, ConnKey)> {
    candidates(orig, req, seeds)
        .take(MAX_PROBES as usize)
        .find_map(|(addr, port)| {
            let xlat = translate(orig, req.kind, addr, port);
            let reply = xlat.reversed()?;
            // A tuple whose reverse is itself (same address and port at
            // both ends) would put one key in the index twice.
            (reply != *orig && is_free(&reply)).then_some((xlat, reply))
        })
}

/// Every (address, port) to try, in order (see the module docs).
fn candidates(
    orig: &ConnKey,
    req: &NatRequest,
    seeds: Seeds,
) -> impl Iterator<Item = (u128, Option<u16>)> {
    let (lo, hi) = req.addrs();
    // `None`: all 2^128 addresses.
    let count = (hi - lo).checked_add(1);
    let own_addr = match req.kind {
        NatKind::Src => orig.src,
        NatKind::Dst => orig.dst,
    };
    let first = if req.kind == NatKind::Src
        && req.selection == PortSelection::Hash
        && (lo..=hi).contains(&own_addr)
    {
        own_addr - lo
    } else {
        let h = u128::from(seeds.addr);
        count.map_or(h, |n| h % n)
    };
    // The k-th address after `first`, wrapping at the end of the range.
    let nth = move |k: u128| match count {
        None => lo.wrapping_add(first.wrapping_add(k)),
        Some(n) => {
            let off = first.checked_add(k).filter(|&o| o < n);
            lo + off.unwrap_or_else(|| k - (n - first))
        }
    };
    let plan = port_plan(orig, req);
    // Port-less protocols: one candidate per address, without a port.
    let head: Option<Option<u16>> = match plan {
        None => Some(None),
        Some(p) => p.first.map(Some),
    };
    let (port_lo, port_n, start, stride) = match plan.and_then(|p| p.range) {
        Some((plo, phi)) => {
            let n = u64::from(phi - plo) + 1;
            let stride = coprime_stride(n as u32, seeds.port >> 32);
            (plo, n, seeds.port % n, u64::from(stride))
        }
        None => (0, 0, 0, 1),
    };
    let skip = plan.and_then(|p| p.first);
    let walk = move || {
        (0..port_n)
            .map(move |i| port_lo + ((start + i * stride) % port_n) as u16)
            .filter(move |&port| Some(port) != skip)
            .map(Some)
    };
    (0..u128::from(MAX_PROBES))
        .take_while(move |&k| count.is_none_or(|n| k < n))
        .map(nth)
        .flat_map(move |addr| head.into_iter().chain(walk()).map(move |port| (addr, port)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    const C: u128 = 0x0a00_0001;
    const S: u128 = 0x0b00_0001;
    const N: u128 = 0xc0a8_0001;

    fn tcp(sport: u16) -> ConnKey {
        ConnKey::new(0, Family::V4, proto::TCP, C, S, sport, 80)
    }

    fn seeds() -> Seeds {
        Seeds {
            addr: 0x1234_5678_9abc_def0,
            port: 0x0fed_cba9_8765_4321,
        }
    }

    #[test]
    fn validation_table() {
        let v4 = |min, max| NatRequest::src(Family::V4, min, max);
        assert_eq!(
            v4(2, 1).unwrap_err(),
            NatError::AddrRange { min: 2, max: 1 }
        );
        assert_eq!(
            v4(1, 1 << 32).unwrap_err(),
            NatError::NotIpv4 { addr: 1 << 32 }
        );
        assert!(NatRequest::dst(Family::V6, 1, 1 << 100).is_ok());
        assert_eq!(
            v4(1, 1).unwrap().with_ports(10, 9).unwrap_err(),
            NatError::PortRange { min: 10, max: 9 }
        );
        let with_ports = v4(N, N).unwrap().with_ports(1000, 1003).unwrap();
        let gre = ConnKey::new(0, Family::V4, 47, C, S, 0, 0);
        let v6 = ConnKey::new(0, Family::V6, proto::UDP, C, S, 1, 2);
        let echo = ConnKey::icmp(0, Family::V4, C, S, 7, 8, 0);
        let cases = [
            (with_ports, tcp(1), Ok(())),
            (with_ports, echo, Ok(())),
            (
                with_ports,
                gre,
                Err(NatError::PortsWithoutPorts { proto: 47 }),
            ),
            (v4(N, N).unwrap(), gre, Ok(())),
            (
                with_ports,
                v6,
                Err(NatError::FamilyMismatch {
                    range: Family::V4,
                    packet: Family::V6,
                }),
            ),
        ];
        for (req, key, want) in cases {
            assert_eq!(req.check(&key), want, "{req:?} on {key:?}");
        }
    }

    #[test]
    fn port_plans() {
        let src = NatRequest::src(Family::V4, N, N).unwrap();
        let dst = NatRequest::dst(Family::V4, N, N).unwrap();
        let ranged = |r: NatRequest| r.with_ports(2000, 2999).unwrap();
        let random = |r: NatRequest| r.with_selection(PortSelection::Random);
        let echo = ConnKey::icmp(0, Family::V4, C, S, 7, 8, 0);
        let plan = |first, range| Some(PortPlan { first, range });
        let cases = [
            (
                "snat keeps a high port",
                src,
                tcp(40000),
                plan(Some(40000), Some((1024, 65535))),
            ),
            (
                "snat class 1-511",
                src,
                tcp(22),
                plan(Some(22), Some((1, 511))),
            ),
            (
                "snat class 600-1023",
                src,
                tcp(700),
                plan(Some(700), Some((600, 1023))),
            ),
            (
                "snat own port out of range",
                ranged(src),
                tcp(40000),
                plan(None, Some((2000, 2999))),
            ),
            (
                "snat own port in range",
                ranged(src),
                tcp(2500),
                plan(Some(2500), Some((2000, 2999))),
            ),
            (
                "random never prefers",
                random(ranged(src)),
                tcp(2500),
                plan(None, Some((2000, 2999))),
            ),
            (
                "dnat without range keeps the port",
                dst,
                tcp(1),
                plan(Some(80), None),
            ),
            (
                "random dnat still must keep it",
                random(dst),
                tcp(1),
                plan(Some(80), None),
            ),
            (
                "dnat range",
                ranged(dst),
                tcp(1),
                plan(None, Some((2000, 2999))),
            ),
            (
                "icmp id anywhere",
                src,
                echo,
                plan(Some(7), Some((0, 65535))),
            ),
            (
                "icmp dnat id too",
                dst,
                echo,
                plan(Some(7), Some((0, 65535))),
            ),
        ];
        for (name, req, key, want) in cases {
            assert_eq!(port_plan(&key, &req), want, "{name}");
        }
    }

    #[test]
    fn the_stride_visits_every_port_once() {
        for n in [1u32, 2, 3, 4, 6, 12, 64, 100, 511, 424, 65535, 65536] {
            for seed in [0u64, 1, 7, 0xdead_beef, u64::MAX] {
                let step = coprime_stride(n, seed);
                let seen: HashSet<u64> = (0..u64::from(n))
                    .map(|i| (3 + i * u64::from(step)) % u64::from(n))
                    .collect();
                assert_eq!(seen.len() as u32, n, "n {n} seed {seed} step {step}");
            }
        }
    }

    #[test]
    fn search_is_bounded_and_exhaustive_on_small_ranges() {
        let cases = [
            // (addresses, ports, expected probes when nothing is free)
            (1u128, Some((1000u16, 1003u16)), 4u32),
            (3, Some((1000, 1003)), 12),
            (1, None, 128),
            (1000, Some((5, 5)), 128),
        ];
        for (addrs, ports, want) in cases {
            let mut req = NatRequest::src(Family::V4, N, N + addrs - 1).unwrap();
            if let Some((lo, hi)) = ports {
                req = req.with_ports(lo, hi).unwrap();
            }
            let mut tried = HashSet::new();
            let mut calls = 0;
            let got = choose(&tcp(40000), &req, seeds(), |reply| {
                calls += 1;
                assert!(tried.insert(*reply), "{reply:?} tried twice");
                false
            });
            assert_eq!(got, None);
            assert_eq!(calls, want, "{addrs} addresses, ports {ports:?}");
        }
    }

    #[test]
    fn search_prefers_own_values_then_finds_the_free_one() {
        let req = NatRequest::src(Family::V4, N, N + 1)
            .unwrap()
            .with_ports(1000, 1003)
            .unwrap();
        // Own port 1002 in range: tried first on the hashed address.
        let (xlat, reply) = choose(&tcp(1002), &req, seeds(), |_| true).unwrap();
        assert_eq!(xlat.src_port, 1002);
        assert_eq!(reply, xlat.reversed().unwrap());
        // Only one (address, port) is free: found.
        let free = (N + 1, 1001);
        let (xlat, _) = choose(&tcp(1002), &req, seeds(), |r| (r.dst, r.dst_port) == free).unwrap();
        assert_eq!((xlat.src, xlat.src_port), free);
        // SNAT of a source already in the range keeps it as it is.
        let inside = ConnKey {
            src: N + 1,
            ..tcp(1003)
        };
        let (xlat, _) = choose(&inside, &req, seeds(), |_| true).unwrap();
        assert_eq!(xlat, inside);
    }

    #[test]
    fn rewrites_apply_to_the_translated_tuple() {
        let echo = ConnKey::icmp(0, Family::V6, C, S, 7, 128, 0);
        let gre = ConnKey::new(0, Family::V4, 47, C, S, 0, 0);
        let cases = [
            (NatKind::Src, tcp(40000), N, Some(1000)),
            (NatKind::Dst, tcp(40000), N, Some(8080)),
            (NatKind::Src, echo, N, Some(99)),
            (NatKind::Dst, echo, N, Some(99)),
            (NatKind::Src, gre, N, None),
            (NatKind::Dst, gre, N, None),
        ];
        for (kind, orig, addr, port) in cases {
            let xlat = translate(&orig, kind, addr, port);
            let reply = xlat.reversed().unwrap();
            let out = rewrite(kind, &orig, &reply, false);
            assert_eq!(out.apply_to(&orig), xlat, "{kind:?} {orig:?} forward");
            let back = rewrite(kind, &orig, &reply, true);
            assert_eq!(
                back.apply_to(&reply),
                orig.reversed().unwrap(),
                "{kind:?} {orig:?}: answers get the original tuple back"
            );
            // +snat 0x40 / +dnat 0x80 (`CtState`), by the end rewritten.
            let bits = match kind {
                NatKind::Src => (0x40, 0x80),
                NatKind::Dst => (0x80, 0x40),
            };
            assert_eq!((out.state_bits(), back.state_bits()), bits);
            assert_eq!(out.swapped().swapped(), out);
        }
    }
}
