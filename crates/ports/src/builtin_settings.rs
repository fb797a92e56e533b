//! The `[[port]]` keys of the types this crate implements, read into their
//! [`PortKind`] variants.

use nfv_settings::{PortTable, SettingError};

use crate::config::{
    FlowOrder, GeneratorConfig, IpFamily, MAX_PORT_NAME, PcapConfig, PortKind, RingConfig,
};

type Result<T> = std::result::Result<T, SettingError>;

pub(crate) const GENERATOR_KEYS: &[&str] = &[
    "frame_size",
    "stamp",
    "rate_percent",
    "line_rate_gbps",
    "flows",
    "flow_order",
    "count",
    "src_mac",
    "dst_mac",
    "src_ip",
    "dst_ip",
    "family",
    "src_ip6",
    "dst_ip6",
    "src_port",
    "dst_port",
    "rate_pps",
];
pub(crate) const PCAP_KEYS: &[&str] = &["replay", "capture", "loops", "rate_pps"];
pub(crate) const RING_KEYS: &[&str] = &["peer", "size"];

pub(crate) fn sink(_: &PortTable<'_>) -> Result<PortKind> {
    Ok(PortKind::Sink)
}

pub(crate) fn receiver(_: &PortTable<'_>) -> Result<PortKind> {
    Ok(PortKind::Receiver)
}

pub(crate) fn generator(t: &PortTable<'_>) -> Result<PortKind> {
    let d = GeneratorConfig::default();
    let (frame_size, imix) = frame_size(t, &d)?;
    check_frame_fits(t, frame_size, imix)?;
    let rate_percent = rate_percent(t)?;
    let line_rate_gbps = line_rate_gbps(t, &d)?;
    let src_mac = src_mac(t, &d)?;
    let family = family(t, &d)?;
    let count = t.int("count", 1..=i64::MAX).map_err(|mut e| {
        e.message.push_str("; leave `count` out to send forever");
        e
    })?;
    Ok(PortKind::Generator(GeneratorConfig {
        frame_size,
        imix,
        stamp: t.bool_or("stamp", false)?,
        rate_percent,
        line_rate_gbps,
        flows: t.int_or("flows", 1..=1_000_000, d.flows)?,
        flow_order: t.one_of_or(
            "flow_order",
            &[
                ("round-robin", FlowOrder::RoundRobin),
                ("scattered", FlowOrder::Scattered),
            ],
            d.flow_order,
        )?,
        family,
        rate_pps: t.int("rate_pps", 1..=i64::MAX)?.map(|n| n as u64),
        count: count.map(|n| n as u64),
        src_mac,
        dst_mac: t.mac("dst_mac")?.unwrap_or(d.dst_mac),
        src_ip: t.ipv4("src_ip")?.unwrap_or(d.src_ip),
        dst_ip: t.ipv4("dst_ip")?.unwrap_or(d.dst_ip),
        src_ip6: t.ipv6("src_ip6")?.unwrap_or(d.src_ip6),
        dst_ip6: t.ipv6("dst_ip6")?.unwrap_or(d.dst_ip6),
        src_port: t.int_or("src_port", 0..=65535, d.src_port)?,
        dst_port: t.int_or("dst_port", 0..=65535, d.dst_port)?,
    }))
}

/// `family`: `"ipv4"` (default) or `"ipv6"`. The other family's
/// addresses are refused rather than ignored, and so is `stamp` with
/// IPv6: a receiver reads stamps where an IPv4 frame's UDP payload starts,
/// and IPv6's mandatory UDP checksum would have to cover each stamp.
fn family(t: &PortTable<'_>, d: &GeneratorConfig) -> Result<IpFamily> {
    let family = t.one_of_or(
        "family",
        &[("ipv4", IpFamily::Ipv4), ("ipv6", IpFamily::Ipv6)],
        d.family,
    )?;
    let (theirs, ours, name) = match family {
        IpFamily::Ipv4 => (["src_ip6", "dst_ip6"], ["src_ip", "dst_ip"], "ipv4"),
        IpFamily::Ipv6 => (["src_ip", "dst_ip"], ["src_ip6", "dst_ip6"], "ipv6"),
    };
    for (key, instead) in theirs.into_iter().zip(ours) {
        if t.has(key) {
            return Err(t.error(
                key,
                format!("not used with family = \"{name}\" (its frames take `{instead}`)"),
            ));
        }
    }
    if family == IpFamily::Ipv6 && t.bool_or("stamp", false)? {
        return Err(t.error(
            "stamp",
            "test stamps are only written into IPv4 frames (family = \"ipv4\")",
        ));
    }
    Ok(family)
}

/// `frame_size`: bytes, or `"imix"` (then the default size is kept).
fn frame_size(t: &PortTable<'_>, d: &GeneratorConfig) -> Result<(usize, bool)> {
    Ok(match t.value("frame_size") {
        None => (d.frame_size, false),
        Some(toml::Value::Integer(n)) if (64..=9000).contains(n) => (*n as usize, false),
        Some(toml::Value::Integer(n)) => {
            return Err(t.error(
                "frame_size",
                format!("{n} is out of range 64..=9000 (or \"imix\")"),
            ));
        }
        Some(toml::Value::String(n)) if n == "imix" => (d.frame_size, true),
        Some(toml::Value::String(n)) => {
            return Err(t.error(
                "frame_size",
                format!(
                    "{n:?} is not a frame size: give bytes (64..=9000) or \"imix\" \
                     (7:4:1 of 64, 594 and 1518 bytes)"
                ),
            ));
        }
        Some(_) => {
            return Err(t.invalid_type("frame_size", "a frame size in bytes or \"imix\""));
        }
    })
}

/// The largest frame the generator sends must fit a memory frame.
fn check_frame_fits(t: &PortTable<'_>, frame_size: usize, imix: bool) -> Result<()> {
    let largest = if imix {
        nfv_traffic::mix::SIMPLE_IMIX
            .iter()
            .map(|&(s, _)| s)
            .max()
            .unwrap_or(frame_size)
    } else {
        frame_size
    };
    let memory = t.memory();
    let room = memory.frame_size.saturating_sub(nfv_mem::HEADROOM);
    if largest > room {
        // Only reachable when frame_size was given (the default 64 always fits).
        return Err(t.error(
            "frame_size",
            format!(
                "{largest} does not fit a memory frame of {} bytes ({} bytes of headroom leave {room}); \
                 raise memory.frame_size",
                memory.frame_size,
                nfv_mem::HEADROOM
            ),
        ));
    }
    Ok(())
}

fn rate_percent(t: &PortTable<'_>) -> Result<Option<f64>> {
    Ok(match t.float("rate_percent")? {
        None => None,
        Some(x) if !(x > 0.0 && x <= 100.0) => {
            return Err(t.error(
                "rate_percent",
                format!("{x} is out of range: must be above 0 and at most 100"),
            ));
        }
        Some(_) if t.has("rate_pps") => {
            return Err(t.error(
                "rate_percent",
                "give either rate_pps or rate_percent, not both",
            ));
        }
        Some(x) => Some(x),
    })
}

fn line_rate_gbps(t: &PortTable<'_>, d: &GeneratorConfig) -> Result<f64> {
    Ok(match t.float("line_rate_gbps")? {
        None => d.line_rate_gbps,
        Some(x) if !(x > 0.0 && x <= 10_000.0) => {
            return Err(t.error(
                "line_rate_gbps",
                format!("{x} is out of range: must be above 0 and at most 10000"),
            ));
        }
        Some(x) => x,
    })
}

/// `src_mac`: unicast only (the switch learns it).
fn src_mac(t: &PortTable<'_>, d: &GeneratorConfig) -> Result<[u8; 6]> {
    Ok(match t.mac("src_mac")? {
        Some(mac) if mac[0] & 1 != 0 => {
            let written = t.value("src_mac").and_then(|v| v.as_str()).unwrap_or("");
            return Err(t.error(
                "src_mac",
                format!("{written:?} is a multicast address; a source MAC must be unicast"),
            ));
        }
        Some(mac) => mac,
        None => d.src_mac,
    })
}

pub(crate) fn pcap(t: &PortTable<'_>) -> Result<PortKind> {
    let replay = t.path("replay")?;
    let capture = t.path("capture")?;
    if replay.is_none() && capture.is_none() {
        return Err(t.error("replay", "a pcap port needs `replay`, `capture` or both"));
    }
    if replay.is_none() {
        for key in ["loops", "rate_pps"] {
            if t.has(key) {
                return Err(t.error(key, "only meaningful with `replay`"));
            }
        }
    }
    Ok(PortKind::Pcap(PcapConfig {
        replay,
        capture,
        loops: t.int_or("loops", 0..=i64::MAX, 1u64)?,
        rate_pps: t.int("rate_pps", 1..=i64::MAX)?.map(|n| n as u64),
    }))
}

pub(crate) fn ring(t: &PortTable<'_>) -> Result<PortKind> {
    let peer = t.name("peer", MAX_PORT_NAME)?;
    let peer = t.required(
        "peer",
        peer,
        "a ring port needs `peer`, the name of the other end",
    )?;
    if peer == t.port_name() {
        return Err(t.error("peer", "a ring port cannot be its own peer"));
    }
    Ok(PortKind::Ring(RingConfig {
        peer,
        size: t.pow2_or("size", 32..=65536, 1024)?,
    }))
}
