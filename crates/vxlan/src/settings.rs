//! The `vxlan` port's settings and its `[[port]]` keys ([`KEYS`],
//! [`parse`]); its registration, [`VXLAN`](crate::VXLAN), is in `port.rs`.
//!
//! ```toml
//! [[port]]
//! name = "vxlan0"
//! type = "vxlan"
//! underlay = "veth-u"        # kernel interface the tunnel's frames use
//! local_ip = "172.31.1.100"  # this end (answered to ARP by the switch)
//! remote_ip = "172.31.1.1"   # the other VTEP
//! vni = 100
//! # gateway = "172.31.1.254" # next hop when the remote is not on-link
//! # dst_port = 4789, ttl = 64, df = true
//! # src_port_min = 32768, src_port_max = 61000
//! # arp_ageing_s = 900, arp_retry_ms = 1000
//! # strict = true             # OVS's checks of the reserved bits
//! ```

use std::net::Ipv4Addr;

use nfv_ports::config::{PortSettings, same_settings};
use nfv_settings::{PortTable, SettingError, check};
use nfv_wire::vxlan::{MAX_VNI, UDP_PORT};

#[derive(Clone, Debug, PartialEq)]
pub struct VxlanConfig {
    /// The kernel interface the tunnel sends and receives on (AF_PACKET).
    pub underlay: String,
    pub local_ip: Ipv4Addr,
    pub remote_ip: Ipv4Addr,
    /// The next hop towards `remote_ip`, if it is not on the underlay's link.
    pub gateway: Option<Ipv4Addr>,
    /// The source MAC of the tunnel's frames; default: the underlay's.
    pub local_mac: Option<[u8; 6]>,
    pub vni: u32,
    pub dst_port: u16,
    pub src_port_min: u16,
    pub src_port_max: u16,
    pub ttl: u8,
    pub dont_fragment: bool,
    pub arp_ageing_ms: u64,
    pub arp_retry_ms: u64,
    /// Refuse frames with reserved bits set, as OVS does (RFC 7348 says
    /// to ignore them).
    pub strict: bool,
    /// The underlay's rx ring (frames, power of two).
    pub ring_size: usize,
}

impl VxlanConfig {
    /// A tunnel with every optional key at its default.
    pub fn new(underlay: &str, local_ip: Ipv4Addr, remote_ip: Ipv4Addr, vni: u32) -> VxlanConfig {
        VxlanConfig {
            underlay: underlay.to_string(),
            local_ip,
            remote_ip,
            gateway: None,
            local_mac: None,
            vni,
            dst_port: UDP_PORT,
            src_port_min: 32768,
            src_port_max: 61000,
            ttl: 64,
            dont_fragment: true,
            arp_ageing_ms: 900_000,
            arp_retry_ms: 1000,
            strict: true,
            ring_size: 4096,
        }
    }

    /// The address ARP resolves: the gateway, else the remote.
    pub fn next_hop(&self) -> Ipv4Addr {
        self.gateway.unwrap_or(self.remote_ip)
    }
}

impl PortSettings for VxlanConfig {
    fn type_name(&self) -> &'static str {
        "vxlan"
    }
    fn iface(&self) -> Option<&str> {
        Some(&self.underlay)
    }
    fn tunnel_id(&self) -> Option<u32> {
        Some(self.vni)
    }
    fn eq_settings(&self, other: &dyn PortSettings) -> bool {
        same_settings(self, other)
    }
}

/// The `[[port]]` keys a `vxlan` port reads besides `name`, `id`, `type`
/// and `rxqs`.
pub const KEYS: &[&str] = &[
    "underlay",
    "local_ip",
    "remote_ip",
    "gateway",
    "local_mac",
    "vni",
    "dst_port",
    "src_port_min",
    "src_port_max",
    "ttl",
    "df",
    "arp_ageing_s",
    "arp_retry_ms",
    "strict",
    "ring_size",
];

/// An address a tunnel endpoint or next hop can have: unicast.
fn unicast(t: &PortTable<'_>, key: &str, ip: Ipv4Addr) -> Result<Ipv4Addr, SettingError> {
    if ip.is_unspecified() || ip.is_broadcast() || ip.is_multicast() || ip.is_loopback() {
        return Err(t.error(
            key,
            format!("{ip} is not a unicast address a tunnel endpoint can have"),
        ));
    }
    Ok(ip)
}

/// Reads a `vxlan` port's keys (the ones in [`KEYS`]).
pub fn parse(t: &PortTable<'_>) -> Result<VxlanConfig, SettingError> {
    let underlay = t.get::<String>("underlay")?;
    let underlay = t.required(
        "underlay",
        underlay,
        "a vxlan port needs `underlay`, the kernel interface its frames use",
    )?;
    let underlay = check::iface_name(&underlay).map_err(|m| t.error("underlay", m))?;
    let need = |key: &str, what: &str| -> Result<Ipv4Addr, SettingError> {
        let ip = t.ipv4(key)?;
        let ip = t.required(key, ip, &format!("a vxlan port needs `{key}`, {what}"))?;
        unicast(t, key, ip)
    };
    let local_ip = need("local_ip", "this end's IPv4 address on the underlay")?;
    let remote_ip = need("remote_ip", "the other tunnel endpoint's IPv4 address")?;
    if local_ip == remote_ip {
        return Err(t.error("remote_ip", format!("{remote_ip} is also local_ip")));
    }
    let gateway = match t.ipv4("gateway")? {
        None => None,
        Some(g) if g == local_ip => return Err(t.error("gateway", format!("{g} is local_ip"))),
        Some(g) => Some(unicast(t, "gateway", g)?),
    };
    let vni = t.int("vni", 0..=i64::from(MAX_VNI))?;
    let vni = t.required("vni", vni, "a vxlan port needs `vni` (0..=16777215)")? as u32;
    let d = VxlanConfig::new(&underlay, local_ip, remote_ip, vni);
    let src_port_min = t.int_or("src_port_min", 1..=65535, d.src_port_min)?;
    let src_port_max = t.int_or("src_port_max", 1..=65535, d.src_port_max)?;
    if src_port_min > src_port_max {
        return Err(t.error(
            "src_port_max",
            format!("{src_port_max} is below src_port_min ({src_port_min})"),
        ));
    }
    let local_mac = t.mac("local_mac")?;
    if let Some(m) = local_mac
        && !nfv_wire::EthernetAddress(m).is_unicast()
    {
        return Err(t.error("local_mac", "a tunnel's source MAC must be unicast"));
    }
    let ageing_s: u64 = t.int_or("arp_ageing_s", 1..=3600, d.arp_ageing_ms / 1000)?;
    Ok(VxlanConfig {
        gateway,
        local_mac,
        dst_port: t.int_or("dst_port", 1..=65535, d.dst_port)?,
        src_port_min,
        src_port_max,
        ttl: t.int_or("ttl", 1..=255, d.ttl)?,
        dont_fragment: t.bool_or("df", d.dont_fragment)?,
        arp_ageing_ms: ageing_s * 1000,
        arp_retry_ms: t.int_or("arp_retry_ms", 10..=60_000, d.arp_retry_ms)?,
        strict: t.bool_or("strict", d.strict)?,
        ring_size: t.pow2_or("ring_size", 64..=65536, d.ring_size)?,
        ..d
    })
}
