//! `[[port]]` tables → [`PortConfig`]: one port at a time, then the checks
//! that need all of them (unique names and ids, ring peers).

use std::path::Path;

use nfv_mem::MemoryConfig;
use nfv_ports::config::{
    AfPacketConfig, AfXdpConfig, GeneratorConfig, MAX_IFACE_NAME, PcapConfig, PortConfig, PortKind,
    RingConfig, TapConfig, VhostUserConfig, VhostUserMode, XdpBindMode,
};

use crate::check::{self, Result, path};
use crate::error::Doc;
use crate::port_set::{
    ConflictKind, Peers, check_port_set, port_iface, port_ring_peer, port_ring_size, port_socket,
};
use crate::raw::{RawFrameSize, RawPort, RawPortType, RawVhostMode, RawXdpMode, S};

/// Highest OpenFlow port number a port may have (0xff00 and up are
/// reserved ports).
pub const MAX_PORT_ID: u16 = 0xfeff;
/// Longest port name.
pub const MAX_PORT_NAME: usize = 32;
/// Most rx queues per port.
pub const MAX_RXQS: usize = 64;

/// Validates one port on its own. `prefix` is its path (`port[2]`, or empty
/// for an inline table); relative paths are resolved against `base`.
pub(crate) fn port(
    doc: &Doc<'_>,
    prefix: &str,
    raw: &S<RawPort>,
    memory: &MemoryConfig,
    base: &Path,
) -> Result<PortConfig> {
    let p = raw.get_ref();
    let f = |key: &str| path(prefix, key);
    let kind = *p.kind.get_ref();

    let name = check::name(doc, &p.name, &f("name"), MAX_PORT_NAME)?;
    let id = check::int_in(doc, &p.id, &f("id"), 1..=i64::from(MAX_PORT_ID))? as u16;
    let mut rxqs = check::opt_int(doc, &p.rxqs, &f("rxqs"), 1..=MAX_RXQS as i64, 1usize)?;
    if kind == RawPortType::VhostUser
        && let Some(v) = &p.rxqs
    {
        return Err(doc.err(
            v.span(),
            f("rxqs"),
            "not valid for a port of type \"vhost-user\": its rx queues are the guest's \
             queue pairs; set `queues`",
        ));
    }

    for (key, span, types) in p.type_specific_keys() {
        if let Some(span) = span
            && !types.contains(&kind)
        {
            let valid: Vec<&str> = types.iter().map(|t| t.name()).collect();
            return Err(doc.err(
                span,
                f(key),
                format!(
                    "not valid for a port of type {:?} (only for type {})",
                    kind.name(),
                    valid
                        .iter()
                        .map(|t| format!("{t:?}"))
                        .collect::<Vec<_>>()
                        .join(" or ")
                ),
            ));
        }
    }

    let kind = match kind {
        RawPortType::Sink => PortKind::Sink,
        RawPortType::Receiver => PortKind::Receiver,
        RawPortType::Generator => PortKind::Generator(generator(doc, prefix, p, memory)?),
        RawPortType::Pcap => PortKind::Pcap(pcap(doc, prefix, raw, base)?),
        RawPortType::Ring => PortKind::Ring(ring(doc, prefix, raw)?),
        RawPortType::VhostUser => {
            let v = vhost_user(doc, prefix, raw, base)?;
            rxqs = v.queues;
            PortKind::VhostUser(v)
        }
        RawPortType::Afxdp => {
            let d = AfXdpConfig::new("");
            PortKind::AfXdp(AfXdpConfig {
                iface: iface(doc, prefix, raw)?,
                mode: match p.xdp_mode.as_ref().map(|m| *m.get_ref()) {
                    None => d.mode,
                    Some(RawXdpMode::Auto) => XdpBindMode::Auto,
                    Some(RawXdpMode::Copy) => XdpBindMode::Copy,
                    Some(RawXdpMode::ZeroCopy) => XdpBindMode::ZeroCopy,
                },
                ring_size: check::opt_pow2(
                    doc,
                    &p.ring_size,
                    &f("ring_size"),
                    64..=16384,
                    false,
                    d.ring_size,
                )?,
            })
        }
        RawPortType::Afpacket => {
            let d = AfPacketConfig::new("");
            PortKind::AfPacket(AfPacketConfig {
                iface: iface(doc, prefix, raw)?,
                ring_size: check::opt_pow2(
                    doc,
                    &p.ring_size,
                    &f("ring_size"),
                    64..=65536,
                    false,
                    d.ring_size,
                )?,
            })
        }
        RawPortType::Tap => PortKind::Tap(TapConfig {
            iface: iface(doc, prefix, raw)?,
        }),
    };
    Ok(PortConfig {
        name,
        id,
        rxqs,
        kind,
    })
}

fn generator(
    doc: &Doc<'_>,
    prefix: &str,
    p: &RawPort,
    memory: &MemoryConfig,
) -> Result<GeneratorConfig> {
    let f = |key: &str| path(prefix, key);
    let d = GeneratorConfig::default();
    let (frame_size, imix) = match &p.frame_size {
        None => (d.frame_size, false),
        Some(v) => match v.get_ref() {
            RawFrameSize::Bytes(n) if (64..=9000).contains(n) => (*n as usize, false),
            RawFrameSize::Bytes(n) => {
                return Err(doc.err(
                    v.span(),
                    f("frame_size"),
                    format!("{n} is out of range 64..=9000 (or \"imix\")"),
                ));
            }
            RawFrameSize::Named(n) if n == "imix" => (d.frame_size, true),
            RawFrameSize::Named(n) => {
                return Err(doc.err(
                    v.span(),
                    f("frame_size"),
                    format!(
                        "{n:?} is not a frame size: give bytes (64..=9000) or \"imix\" \
                         (7:4:1 of 64, 594 and 1518 bytes)"
                    ),
                ));
            }
        },
    };
    let largest = if imix {
        nfv_traffic::mix::SIMPLE_IMIX
            .iter()
            .map(|&(s, _)| s)
            .max()
            .unwrap_or(frame_size)
    } else {
        frame_size
    };
    let room = memory.frame_size.saturating_sub(nfv_mem::HEADROOM);
    if largest > room {
        // Only reachable when frame_size was given (the default 64 always fits).
        let span = p.frame_size.as_ref().map_or(0..0, |v| v.span());
        return Err(doc.err(
            span,
            f("frame_size"),
            format!(
                "{largest} does not fit a memory frame of {} bytes ({} bytes of headroom leave {room}); \
                 raise memory.frame_size",
                memory.frame_size,
                nfv_mem::HEADROOM
            ),
        ));
    }
    let rate_percent = match &p.rate_percent {
        None => None,
        Some(v) => {
            let x = *v.get_ref();
            if !(x > 0.0 && x <= 100.0) {
                return Err(doc.err(
                    v.span(),
                    f("rate_percent"),
                    format!("{x} is out of range: must be above 0 and at most 100"),
                ));
            }
            if p.rate_pps.is_some() {
                return Err(doc.err(
                    v.span(),
                    f("rate_percent"),
                    "give either rate_pps or rate_percent, not both",
                ));
            }
            Some(x)
        }
    };
    let line_rate_gbps = match &p.line_rate_gbps {
        None => d.line_rate_gbps,
        Some(v) => {
            let x = *v.get_ref();
            if !(x > 0.0 && x <= 10_000.0) {
                return Err(doc.err(
                    v.span(),
                    f("line_rate_gbps"),
                    format!("{x} is out of range: must be above 0 and at most 10000"),
                ));
            }
            x
        }
    };
    let src_mac = match &p.src_mac {
        Some(v) => {
            let mac = check::mac(doc, v, &f("src_mac"))?;
            if mac[0] & 1 != 0 {
                return Err(doc.err(
                    v.span(),
                    f("src_mac"),
                    format!(
                        "{:?} is a multicast address; a source MAC must be unicast",
                        v.get_ref()
                    ),
                ));
            }
            mac
        }
        None => d.src_mac,
    };
    Ok(GeneratorConfig {
        frame_size,
        imix,
        stamp: p.stamp.as_ref().is_some_and(|v| *v.get_ref()),
        rate_percent,
        line_rate_gbps,
        flows: check::opt_int(doc, &p.flows, &f("flows"), 1..=1_000_000, d.flows)?,
        rate_pps: p
            .rate_pps
            .as_ref()
            .map(|v| check::int_in(doc, v, &f("rate_pps"), 1..=i64::MAX).map(|n| n as u64))
            .transpose()?,
        count: p
            .count
            .as_ref()
            .map(|v| {
                check::int_in(doc, v, &f("count"), 1..=i64::MAX)
                    .map(|n| n as u64)
                    .map_err(|e| with_hint(e, "leave `count` out to send forever"))
            })
            .transpose()?,
        src_mac,
        dst_mac: match &p.dst_mac {
            Some(v) => check::mac(doc, v, &f("dst_mac"))?,
            None => d.dst_mac,
        },
        src_ip: match &p.src_ip {
            Some(v) => check::ipv4(doc, v, &f("src_ip"))?,
            None => d.src_ip,
        },
        dst_ip: match &p.dst_ip {
            Some(v) => check::ipv4(doc, v, &f("dst_ip"))?,
            None => d.dst_ip,
        },
        src_port: check::opt_int(doc, &p.src_port, &f("src_port"), 0..=65535, d.src_port)?,
        dst_port: check::opt_int(doc, &p.dst_port, &f("dst_port"), 0..=65535, d.dst_port)?,
    })
}

fn with_hint(mut e: crate::ConfigError, hint: &str) -> crate::ConfigError {
    if let crate::ConfigError::Invalid { message, .. } = &mut e {
        message.push_str("; ");
        message.push_str(hint);
    }
    e
}

fn pcap(doc: &Doc<'_>, prefix: &str, raw: &S<RawPort>, base: &Path) -> Result<PcapConfig> {
    let p = raw.get_ref();
    let f = |key: &str| path(prefix, key);
    let replay = p
        .replay
        .as_ref()
        .map(|v| check::file_path(doc, v, &f("replay"), base))
        .transpose()?;
    let capture = p
        .capture
        .as_ref()
        .map(|v| check::file_path(doc, v, &f("capture"), base))
        .transpose()?;
    if replay.is_none() && capture.is_none() {
        return Err(doc.err(
            raw.span(),
            f("replay"),
            "a pcap port needs `replay`, `capture` or both",
        ));
    }
    if replay.is_none() {
        for (key, v) in [("loops", &p.loops), ("rate_pps", &p.rate_pps)] {
            if let Some(v) = v {
                return Err(doc.err(v.span(), f(key), "only meaningful with `replay`"));
            }
        }
    }
    Ok(PcapConfig {
        replay,
        capture,
        loops: check::opt_int(doc, &p.loops, &f("loops"), 0..=i64::MAX, 1u64)?,
        rate_pps: p
            .rate_pps
            .as_ref()
            .map(|v| check::int_in(doc, v, &f("rate_pps"), 1..=i64::MAX).map(|n| n as u64))
            .transpose()?,
    })
}

fn ring(doc: &Doc<'_>, prefix: &str, raw: &S<RawPort>) -> Result<RingConfig> {
    let p = raw.get_ref();
    let f = |key: &str| path(prefix, key);
    let Some(peer) = &p.peer else {
        return Err(doc.err(
            raw.span(),
            f("peer"),
            "a ring port needs `peer`, the name of the other end",
        ));
    };
    let peer_name = check::name(doc, peer, &f("peer"), MAX_PORT_NAME)?;
    if peer_name == *p.name.get_ref() {
        return Err(doc.err(peer.span(), f("peer"), "a ring port cannot be its own peer"));
    }
    Ok(RingConfig {
        peer: peer_name,
        size: check::opt_pow2(doc, &p.size, &f("size"), 32..=65536, false, 1024)?,
    })
}

/// The `iface` of a kernel-facing port: a name the kernel would accept
/// (whether it exists is checked when the port opens).
fn iface(doc: &Doc<'_>, prefix: &str, raw: &S<RawPort>) -> Result<String> {
    let p = raw.get_ref();
    let field = path(prefix, "iface");
    let Some(v) = &p.iface else {
        return Err(doc.err(
            raw.span(),
            field,
            format!(
                "a port of type {:?} needs `iface`, the name of a kernel network interface",
                p.kind.get_ref().name()
            ),
        ));
    };
    let s = v.get_ref();
    let ok = (1..=MAX_IFACE_NAME).contains(&s.len())
        && s != "."
        && s != ".."
        && !s
            .bytes()
            .any(|b| b == b'/' || b == b':' || b.is_ascii_whitespace() || b == 0);
    if !ok {
        return Err(doc.err(
            v.span(),
            field,
            format!(
                "{s:?} is not an interface name: 1 to {MAX_IFACE_NAME} bytes without '/', ':' \
                 or whitespace"
            ),
        ));
    }
    Ok(s.clone())
}

fn vhost_user(
    doc: &Doc<'_>,
    prefix: &str,
    raw: &S<RawPort>,
    base: &Path,
) -> Result<VhostUserConfig> {
    let p = raw.get_ref();
    let f = |key: &str| path(prefix, key);
    let Some(socket) = &p.socket else {
        return Err(doc.err(
            raw.span(),
            f("socket"),
            "a vhost-user port needs `socket`, the path of its unix socket",
        ));
    };
    let path = check::file_path(doc, socket, &f("socket"), base)?;
    let len = path.as_os_str().len();
    if len > crate::MAX_SOCKET_PATH {
        return Err(doc.err(
            socket.span(),
            f("socket"),
            format!(
                "{} is {len} bytes long; a Unix socket path holds at most {}",
                path.display(),
                crate::MAX_SOCKET_PATH
            ),
        ));
    }
    let mode = match p.mode.as_ref().map(|m| *m.get_ref()) {
        None => VhostUserMode::default(),
        Some(RawVhostMode::Server) => VhostUserMode::Server,
        Some(RawVhostMode::Client) => VhostUserMode::Client,
    };
    Ok(VhostUserConfig {
        socket: path,
        mode,
        queues: check::opt_int(
            doc,
            &p.queues,
            &f("queues"),
            1..=VhostUserConfig::MAX_QUEUES as i64,
            1usize,
        )?,
        mrg_rxbuf: p.mrg_rxbuf.as_ref().is_none_or(|v| *v.get_ref()),
        tx_retries: check::opt_int(
            doc,
            &p.tx_retries,
            &f("tx_retries"),
            0..=VhostUserConfig::MAX_TX_RETRIES as i64,
            VhostUserConfig::DEFAULT_TX_RETRIES,
        )?,
        one_copy: p.one_copy.as_ref().is_none_or(|v| *v.get_ref()),
    })
}

/// Checks across all ports of a file ([`check_port_set`]), reported at
/// the line of the offending key.
pub(crate) fn check_set(doc: &Doc<'_>, raws: &[S<RawPort>], ports: &[PortConfig]) -> Result<()> {
    let Err(c) = check_port_set(ports, Peers::Complete) else {
        return Ok(());
    };
    let (i, raw, p) = (c.port, raws[c.port].get_ref(), &ports[c.port]);
    let j = c.other.unwrap_or(0);
    let (other, other_raw) = (&ports[j], raws[j].get_ref());
    let table = raws[i].span();
    let span = |v: Option<std::ops::Range<usize>>| v.unwrap_or(table.clone());
    let (span, message) = match c.kind {
        ConflictKind::Name => (
            raw.name.span(),
            format!(
                "{:?} is already the name of port[{j}] (line {})",
                p.name,
                doc.line_of(other_raw.name.span().start)
            ),
        ),
        ConflictKind::Id => (
            raw.id.span(),
            format!(
                "{} is already the id of port[{j}] {:?} (line {})",
                p.id,
                other.name,
                doc.line_of(other_raw.id.span().start)
            ),
        ),
        ConflictKind::Socket => (
            span(raw.socket.as_ref().map(|s| s.span())),
            format!(
                "{} is already the socket of port[{j}] {:?}",
                port_socket(p).unwrap_or(Path::new("")).display(),
                other.name
            ),
        ),
        ConflictKind::Iface => (
            span(raw.iface.as_ref().map(|s| s.span())),
            format!(
                "interface {:?} is already used by port[{j}] {:?}; one port per kernel interface",
                port_iface(p).unwrap_or_default(),
                other.name
            ),
        ),
        ConflictKind::NoPeer => (
            span(raw.peer.as_ref().map(|s| s.span())),
            format!(
                "no port is named {:?}",
                port_ring_peer(p).unwrap_or_default()
            ),
        ),
        ConflictKind::PeerNotRing => (
            span(raw.peer.as_ref().map(|s| s.span())),
            format!(
                "port {:?} is of type {:?}, not \"ring\"",
                other.name,
                other.kind.type_name()
            ),
        ),
        ConflictKind::PeerNotReciprocal => (
            span(raw.peer.as_ref().map(|s| s.span())),
            format!(
                "ring port {:?} names {:?} as its peer, not {:?}; the two ends must name each other",
                other.name,
                port_ring_peer(other).unwrap_or_default(),
                p.name
            ),
        ),
        ConflictKind::PeerSize => (
            span(raw.size.as_ref().map(|s| s.span())),
            format!(
                "{} differs from the size of its peer {:?} ({})",
                port_ring_size(p).unwrap_or(0),
                other.name,
                port_ring_size(other).unwrap_or(0)
            ),
        ),
    };
    Err(doc.err(span, format!("port[{i}].{}", c.kind.field()), message))
}
