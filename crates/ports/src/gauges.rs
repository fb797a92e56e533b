//! What a port reports beyond the packet, byte and drop counters the
//! datapath keeps for every queue: typed values, so that readers (`show
//! ports`, `/metrics`, the chain report) never parse text back.
//!
//! Gauges the framework itself reads are fields ([`PortGauges::connected`],
//! [`PortGauges::queued`], [`PortGauges::guest_rx_free`]); everything else
//! a port type wants shown is a keyed [`Gauge`] in [`PortGauges::other`].
//! Reading them is cold (control plane, about once a second). The ones
//! `/metrics` exports, with their names and help, are [`GAUGE_METRICS`].

use crate::stats::FigureKind;
use std::fmt;

/// One port-type-specific value.
#[derive(Clone, Debug, PartialEq)]
pub enum Gauge {
    /// A counter or level.
    Count(u64),
    Flag(bool),
    /// A fact shown as written (an interface name, a mode, a list).
    Text(String),
}

impl fmt::Display for Gauge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Gauge::Count(n) => write!(f, "{n}"),
            Gauge::Flag(b) => write!(f, "{b}"),
            Gauge::Text(s) => f.write_str(s),
        }
    }
}

impl From<u64> for Gauge {
    fn from(n: u64) -> Gauge {
        Gauge::Count(n)
    }
}

impl From<u32> for Gauge {
    fn from(n: u32) -> Gauge {
        Gauge::Count(u64::from(n))
    }
}

impl From<usize> for Gauge {
    fn from(n: usize) -> Gauge {
        Gauge::Count(n as u64)
    }
}

impl From<bool> for Gauge {
    fn from(b: bool) -> Gauge {
        Gauge::Flag(b)
    }
}

impl From<String> for Gauge {
    fn from(s: String) -> Gauge {
        Gauge::Text(s)
    }
}

impl From<&str> for Gauge {
    fn from(s: &str) -> Gauge {
        Gauge::Text(s.to_string())
    }
}

/// A port's gauges at one moment ([`crate::Port::gauges`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PortGauges {
    /// Its peer is connected (ports that have one: vhost-user).
    pub connected: Option<bool>,
    /// Packets waiting to be received, as the last rx burst found them
    /// (ports with a ring towards them: ring, vhost-user).
    pub queued: Option<u64>,
    /// Receive buffers the guest had posted at the last tx burst to it
    /// (vhost-user); 0 = the guest is not draining.
    pub guest_rx_free: Option<u64>,
    /// The port type's own facts and counters, in display order; keys
    /// are snake_case and unique.
    pub other: Vec<(&'static str, Gauge)>,
}

impl PortGauges {
    /// Key under which each framework gauge is shown.
    pub const CONNECTED: &'static str = "connected";
    pub const QUEUED: &'static str = "queued";
    pub const GUEST_RX_FREE: &'static str = "guest_rx_free";
    /// Type-specific count that `/metrics` exports too: frames received
    /// and forwarded in one copy (vhost-user).
    pub const ONE_COPY_PACKETS: &'static str = "one_copy_packets";
    /// Frames delivered into a VNF's buffers without a switch copy (a
    /// kernel port received them there; vhost-user ports lending buffers).
    pub const ZERO_COPY_PACKETS: &'static str = "zero_copy_packets";
    /// Frames sent with their tail read from the sender's buffer in
    /// place (an AF_XDP port's `send_in_place`).
    pub const SENT_IN_PLACE_PACKETS: &'static str = "tx_zero_copy_packets";
    /// The prefix of a zero-copy kernel port's fallback counters, one per
    /// reason (`zc_fallback_no_guest_buffer`, …).
    pub const ZC_FALLBACK: &'static str = "zc_fallback_";

    /// Appends a type-specific gauge.
    pub fn push(&mut self, key: &'static str, value: impl Into<Gauge>) {
        self.other.push((key, value.into()));
    }

    /// Builder form of [`PortGauges::push`].
    pub fn with(mut self, key: &'static str, value: impl Into<Gauge>) -> PortGauges {
        self.push(key, value);
        self
    }

    /// Every gauge with its key: the framework's first, then the port
    /// type's.
    pub fn entries(&self) -> impl Iterator<Item = (&'static str, Gauge)> + '_ {
        let framework = [
            (Self::CONNECTED, self.connected.map(Gauge::Flag)),
            (Self::QUEUED, self.queued.map(Gauge::Count)),
            (Self::GUEST_RX_FREE, self.guest_rx_free.map(Gauge::Count)),
        ];
        framework
            .into_iter()
            .filter_map(|(k, v)| Some((k, v?)))
            .chain(self.other.iter().cloned())
    }

    /// The gauge under `key`, if the port has one.
    pub fn get(&self, key: &str) -> Option<Gauge> {
        self.entries().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// The counter under `key` (`None` if absent or not a count).
    pub fn count(&self, key: &str) -> Option<u64> {
        match self.get(key)? {
            Gauge::Count(n) => Some(n),
            _ => None,
        }
    }

    /// The gauge under `key` as `show ports` prints it.
    pub fn text(&self, key: &str) -> Option<String> {
        self.get(key).map(|v| v.to_string())
    }
}

/// A gauge that `/metrics` exports for every port that reports it.
#[derive(Clone, Copy, Debug)]
pub struct GaugeMetric {
    /// The key in [`PortGauges::entries`]. With `label`, a prefix: each
    /// key that starts with it is one series, labelled with the rest.
    pub key: &'static str,
    pub label: Option<&'static str>,
    /// The family's name (`/metrics` adds the `nfvswitch_` prefix, and
    /// `_total` to a counter's samples).
    pub metric: &'static str,
    pub kind: FigureKind,
    pub help: &'static str,
}

impl GaugeMetric {
    /// Its series in `gauges`: the label's value (with a `label`) and the
    /// value, a flag as 0 or 1; text is not exported.
    pub fn series<'a>(
        &'a self,
        gauges: &'a PortGauges,
    ) -> impl Iterator<Item = (Option<&'static str>, u64)> + 'a {
        gauges.entries().filter_map(move |(k, v)| {
            let label = match self.label {
                None => (k == self.key).then_some(None)?,
                Some(_) => Some(k.strip_prefix(self.key)?),
            };
            let v = match v {
                Gauge::Count(n) => n,
                Gauge::Flag(b) => u64::from(b),
                Gauge::Text(_) => return None,
            };
            Some((label, v))
        })
    }
}

/// The [`PortGauges`] that `/metrics` exports, one line each, in the order
/// it exports them. Every other gauge is shown by `show ports` (the
/// control protocol's port `info`) only.
pub const GAUGE_METRICS: &[GaugeMetric] = &[
    GaugeMetric {
        key: PortGauges::QUEUED,
        label: None,
        metric: "port_ring_queued_packets",
        kind: FigureKind::Gauge,
        help: "Packets waiting in a port's ring (ports that expose it).",
    },
    GaugeMetric {
        key: PortGauges::GUEST_RX_FREE,
        label: None,
        metric: "port_guest_rx_buffers",
        kind: FigureKind::Gauge,
        help: "Receive buffers the guest had posted at the switch's last transmit burst to it \
               (vhost-user ports); 0 = the guest is not draining.",
    },
    GaugeMetric {
        key: PortGauges::CONNECTED,
        label: None,
        metric: "port_connected",
        kind: FigureKind::Gauge,
        help: "1 when the port's peer is connected (ports that have one).",
    },
    GaugeMetric {
        key: PortGauges::ONE_COPY_PACKETS,
        label: None,
        metric: "port_one_copy_packets",
        kind: FigureKind::Counter,
        help: "Frames received on a vhost-user port and forwarded in one copy (the switch \
               copied their headers, the receiving port the rest straight from the sender's \
               buffer).",
    },
    GaugeMetric {
        key: PortGauges::ZERO_COPY_PACKETS,
        label: None,
        metric: "port_zero_copy_packets",
        kind: FigureKind::Counter,
        help: "Frames moved without a switch copy: on a kernel port with zero_copy, received \
               straight into the VNF's buffers; on that VNF's vhost-user port, completed in \
               place.",
    },
    GaugeMetric {
        key: PortGauges::ZC_FALLBACK,
        label: Some("reason"),
        metric: "port_zero_copy_fallbacks",
        kind: FigureKind::Counter,
        help: "Why a zero-copy kernel port copied a frame (no_guest_buffer) or stopped \
               lending guest buffers for a burst (buffer_shape, short_buffer, outside_umem, \
               bad_chain).",
    },
    GaugeMetric {
        key: PortGauges::SENT_IN_PLACE_PACKETS,
        label: None,
        metric: "port_sent_in_place_packets",
        kind: FigureKind::Counter,
        help: "Frames a kernel port with zero_copy sent with their tail read by the kernel \
               straight from the VNF's transmit buffer (send_in_place).",
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framework_gauges_come_first_and_render_like_their_type() {
        let g = PortGauges {
            connected: Some(true),
            queued: None,
            guest_rx_free: Some(7),
            other: Vec::new(),
        }
        .with("mode", "server")
        .with("reconnects", 3u64);
        let keys: Vec<&str> = g.entries().map(|(k, _)| k).collect();
        assert_eq!(keys, ["connected", "guest_rx_free", "mode", "reconnects"]);
        let cases: [(&str, Option<&str>); 5] = [
            ("connected", Some("true")),
            ("guest_rx_free", Some("7")),
            ("mode", Some("server")),
            ("reconnects", Some("3")),
            ("queued", None),
        ];
        for (key, want) in cases {
            assert_eq!(g.text(key).as_deref(), want, "{key}");
        }
        assert_eq!(g.count("reconnects"), Some(3));
        assert_eq!(g.count("mode"), None, "a text is not a count");
    }
}
