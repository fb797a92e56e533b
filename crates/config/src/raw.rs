//! The file as written: serde structs that reject unknown keys and keep the
//! position of every value that is checked after deserialising.
//!
//! Integers are read as `i64` (TOML's integer type) so that range errors can
//! say "-1 is out of range 1..=64" instead of serde's "invalid value".

use serde::Deserialize;
use toml::Spanned;

pub(crate) type S<T> = Spanned<T>;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConfig {
    #[serde(default)]
    pub node: Option<S<RawNode>>,
    #[serde(default)]
    pub memory: Option<S<RawMemory>>,
    #[serde(default)]
    pub pmd: Option<S<RawPmd>>,
    #[serde(default)]
    pub port: Vec<S<RawPort>>,
    #[serde(default)]
    pub flows: Vec<S<String>>,
    #[serde(default)]
    pub flow: Vec<S<RawFlow>>,
    #[serde(default)]
    pub chain: Vec<S<crate::chain::RawChain>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawNode {
    pub name: Option<S<String>>,
    pub control_socket: Option<S<String>>,
    pub api: Option<S<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMemory {
    pub frame_size: Option<S<i64>>,
    pub frames: Option<S<i64>>,
    pub hugepages: Option<S<RawHugepages>>,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RawHugepages {
    Auto,
    Require,
    Never,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPmd {
    pub cores: Option<S<Vec<S<i64>>>>,
    pub emc_entries: Option<S<i64>>,
    pub pmu: Option<S<bool>>,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RawPortType {
    Generator,
    Sink,
    Receiver,
    Pcap,
    Ring,
    #[serde(rename = "vhost-user")]
    VhostUser,
    Afxdp,
    Afpacket,
    Tap,
}

impl RawPortType {
    pub fn name(self) -> &'static str {
        match self {
            RawPortType::Generator => "generator",
            RawPortType::Sink => "sink",
            RawPortType::Receiver => "receiver",
            RawPortType::Pcap => "pcap",
            RawPortType::Ring => "ring",
            RawPortType::VhostUser => "vhost-user",
            RawPortType::Afxdp => "afxdp",
            RawPortType::Afpacket => "afpacket",
            RawPortType::Tap => "tap",
        }
    }
}

/// (key, position if present, port types that accept the key).
pub(crate) type TypeSpecificKey = (
    &'static str,
    Option<std::ops::Range<usize>>,
    &'static [RawPortType],
);

/// One `[[port]]`: the keys of every type side by side, so that a key of
/// another type can be rejected with a message naming both.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPort {
    pub name: S<String>,
    pub id: S<i64>,
    #[serde(rename = "type")]
    pub kind: S<RawPortType>,
    pub rxqs: Option<S<i64>>,
    // generator
    pub frame_size: Option<S<RawFrameSize>>,
    pub stamp: Option<S<bool>>,
    pub rate_percent: Option<S<f64>>,
    pub line_rate_gbps: Option<S<f64>>,
    pub flows: Option<S<i64>>,
    pub count: Option<S<i64>>,
    pub src_mac: Option<S<String>>,
    pub dst_mac: Option<S<String>>,
    pub src_ip: Option<S<String>>,
    pub dst_ip: Option<S<String>>,
    pub src_port: Option<S<i64>>,
    pub dst_port: Option<S<i64>>,
    // generator and pcap
    pub rate_pps: Option<S<i64>>,
    // pcap
    pub replay: Option<S<String>>,
    pub capture: Option<S<String>>,
    pub loops: Option<S<i64>>,
    // ring
    pub peer: Option<S<String>>,
    pub size: Option<S<i64>>,
    // vhost-user
    pub socket: Option<S<String>>,
    pub mode: Option<S<RawVhostMode>>,
    pub queues: Option<S<i64>>,
    pub mrg_rxbuf: Option<S<bool>>,
    pub tx_retries: Option<S<i64>>,
    pub one_copy: Option<S<bool>>,
    // kernel-facing ports
    pub iface: Option<S<String>>,
    pub ring_size: Option<S<i64>>,
    pub xdp_mode: Option<S<RawXdpMode>>,
}

/// A generator's `frame_size`: bytes, or a named mix (`"imix"`).
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum RawFrameSize {
    Bytes(i64),
    Named(String),
}

impl<'de> Deserialize<'de> for RawFrameSize {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = RawFrameSize;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a frame size in bytes or \"imix\"")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<RawFrameSize, E> {
                Ok(RawFrameSize::Bytes(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<RawFrameSize, E> {
                Ok(RawFrameSize::Bytes(i64::try_from(v).unwrap_or(i64::MAX)))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<RawFrameSize, E> {
                Ok(RawFrameSize::Named(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RawVhostMode {
    Server,
    Client,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum RawXdpMode {
    Auto,
    Copy,
    ZeroCopy,
}

impl RawPort {
    /// Every optional, type-specific key with its position if present and
    /// the types that accept it.
    pub fn type_specific_keys(&self) -> [TypeSpecificKey; 27] {
        use RawPortType::*;
        fn sp<T>(v: &Option<S<T>>) -> Option<std::ops::Range<usize>> {
            v.as_ref().map(|s| s.span())
        }
        const GEN: &[RawPortType] = &[Generator];
        [
            ("frame_size", sp(&self.frame_size), GEN),
            ("stamp", sp(&self.stamp), GEN),
            ("rate_percent", sp(&self.rate_percent), GEN),
            ("line_rate_gbps", sp(&self.line_rate_gbps), GEN),
            ("flows", sp(&self.flows), GEN),
            ("count", sp(&self.count), GEN),
            ("src_mac", sp(&self.src_mac), GEN),
            ("dst_mac", sp(&self.dst_mac), GEN),
            ("src_ip", sp(&self.src_ip), GEN),
            ("dst_ip", sp(&self.dst_ip), GEN),
            ("src_port", sp(&self.src_port), GEN),
            ("dst_port", sp(&self.dst_port), GEN),
            ("rate_pps", sp(&self.rate_pps), &[Generator, Pcap]),
            ("replay", sp(&self.replay), &[Pcap]),
            ("capture", sp(&self.capture), &[Pcap]),
            ("loops", sp(&self.loops), &[Pcap]),
            ("peer", sp(&self.peer), &[Ring]),
            ("size", sp(&self.size), &[Ring]),
            ("socket", sp(&self.socket), &[VhostUser]),
            ("mode", sp(&self.mode), &[VhostUser]),
            ("queues", sp(&self.queues), &[VhostUser]),
            ("mrg_rxbuf", sp(&self.mrg_rxbuf), &[VhostUser]),
            ("tx_retries", sp(&self.tx_retries), &[VhostUser]),
            ("one_copy", sp(&self.one_copy), &[VhostUser]),
            ("iface", sp(&self.iface), &[Afxdp, Afpacket, Tap]),
            ("ring_size", sp(&self.ring_size), &[Afxdp, Afpacket]),
            ("xdp_mode", sp(&self.xdp_mode), &[Afxdp]),
        ]
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFlow {
    pub rule: S<String>,
}
