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
    pub groups: Vec<S<String>>,
    #[serde(default)]
    pub meters: Vec<S<String>>,
    #[serde(default)]
    pub flow: Vec<S<RawFlow>>,
    #[serde(default)]
    pub chain: Vec<S<RawChain>>,
    #[serde(default)]
    pub openflow: Option<S<RawOpenFlow>>,
    #[serde(default)]
    pub conntrack: Option<S<RawConntrack>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConntrack {
    pub capacity: Option<S<i64>>,
    pub zone_limit: Option<S<i64>>,
    pub tcp_pickup: Option<S<bool>>,
    pub established: Option<S<String>>,
    pub timeouts: Option<S<RawCtTimeouts>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCtTimeouts {
    pub tcp_syn_sent: Option<S<i64>>,
    pub tcp_syn_recv: Option<S<i64>>,
    pub tcp_established: Option<S<i64>>,
    pub tcp_fin_wait: Option<S<i64>>,
    pub tcp_time_wait: Option<S<i64>>,
    pub tcp_close: Option<S<i64>>,
    pub udp_first: Option<S<i64>>,
    pub udp_single: Option<S<i64>>,
    pub udp_multiple: Option<S<i64>>,
    pub icmp_first: Option<S<i64>>,
    pub icmp_reply: Option<S<i64>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawOpenFlow {
    pub listen: Option<S<Vec<S<String>>>>,
    pub datapath_id: Option<S<String>>,
    pub packet_in_rate: Option<S<i64>>,
    pub packet_in_burst: Option<S<i64>>,
    pub controllers: Option<S<Vec<S<String>>>>,
    pub fail_mode: Option<S<String>>,
    pub ssl_private_key: Option<S<String>>,
    pub ssl_certificate: Option<S<String>>,
    pub ssl_ca_certificate: Option<S<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawNode {
    pub name: Option<S<String>>,
    pub control_socket: Option<S<String>>,
    pub api: Option<S<String>>,
    pub state_file: Option<S<String>>,
    pub api_token_file: Option<S<String>>,
    pub api_hosts: Option<S<Vec<S<String>>>>,
    pub api_open_reads: Option<S<bool>>,
    pub socket_dir: Option<S<String>>,
    pub pcap_dir: Option<S<String>>,
    pub runtime_kernel_ports: Option<S<bool>>,
    pub group: Option<S<String>>,
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
    pub megaflow_entries: Option<S<i64>>,
    pub pmu: Option<S<bool>>,
    pub rxq_assign: Option<S<String>>,
    pub load_interval_s: Option<S<i64>>,
    pub auto_lb: Option<S<bool>>,
    pub auto_lb_load_threshold: Option<S<i64>>,
    pub auto_lb_improvement_threshold: Option<S<i64>>,
    pub auto_lb_interval_s: Option<S<i64>>,
}

/// One `[[port]]`: the keys every port has, and the rest in file order
/// with their positions, for the port's type to read
/// (`nfv_ports::PortType::parse`).
pub(crate) struct RawPort {
    pub name: S<String>,
    pub id: S<i64>,
    pub kind: S<String>,
    /// Every other key (`rxqs` too: a type may refuse it).
    pub rest: Vec<(String, S<toml::Value>)>,
}

impl RawPort {
    /// The position of `key`'s value, if the table has it.
    pub fn span_of(&self, key: &str) -> Option<std::ops::Range<usize>> {
        self.rest
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.span())
    }
}

impl<'de> Deserialize<'de> for RawPort {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = RawPort;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a port table")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<RawPort, A::Error> {
                use serde::de::Error;
                let (mut name, mut id, mut kind) = (None, None, None);
                let mut rest = Vec::new();
                // Each value is read straight from the TOML deserializer
                // (not buffered, as `#[serde(flatten)]` would), so it keeps
                // its position.
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "name" => name = Some(map.next_value()?),
                        "id" => id = Some(map.next_value()?),
                        "type" => kind = Some(map.next_value()?),
                        _ => rest.push((key, map.next_value()?)),
                    }
                }
                Ok(RawPort {
                    name: name.ok_or_else(|| A::Error::missing_field("name"))?,
                    id: id.ok_or_else(|| A::Error::missing_field("id"))?,
                    kind: kind.ok_or_else(|| A::Error::missing_field("type"))?,
                    rest,
                })
            }
        }
        d.deserialize_map(V)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFlow {
    pub rule: S<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawChain {
    pub name: S<String>,
    pub ingress: S<String>,
    /// Port names, or `{ select = [...] }` / `{ primary, backup }`
    /// tables (`crate::chain` reads them: serde's untagged enums lose
    /// the positions errors need).
    #[serde(default)]
    pub vnfs: Vec<S<toml::Value>>,
    pub egress: S<String>,
    pub priority: Option<S<i64>>,
}
