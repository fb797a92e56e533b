//! TCP between the two guests with iperf3 (`-J`), with the guests'
//! checksum and segmentation offloads in each state that matters: as
//! negotiated, turned off in the guest (`ethtool -K`), over IPv6, and
//! between a guest with offloads and one whose device has none. Each
//! iperf3 run is checked by [`iperf::Outcome::check_tcp`]; the exact
//! bytes of each state are checked by an md5-compared transfer
//! ([`traffic::tcp_to`]). Whether offloads were in effect is printed, not
//! asserted: the guests' `ethtool -k` and the virtio features both sides
//! negotiated.

use crate::guest::{Guest, guest_offloads, iperf, offload_summary};
use crate::node::Node;
use crate::traffic;
use std::time::Duration;

const CMD: Duration = Duration::from_secs(30);
/// Seconds per iperf3 run: enough for a figure, small for CI.
const SECS: u32 = 3;

/// One line per guest: its `ethtool -k` offloads, the offload features
/// its driver negotiated, and the switch port's negotiated features.
pub fn offload_state(node: &Node, port: &str, g: &mut Guest) -> Result<String, String> {
    let ethtool = offload_summary(g, CMD)?;
    let virtio = guest_offloads(g, CMD)?;
    let switch = node.info(port, "features")?;
    let line = format!(
        "{}: ethtool -k: {ethtool}; guest virtio offloads: {virtio}; switch port {port}: {switch}",
        g.spec.name
    );
    println!("    {line}");
    Ok(line)
}

/// iperf3 TCP from `from` to `to` (at `addr`), checked; one line.
pub fn iperf_tcp(from: &mut Guest, to: &mut Guest, addr: &str) -> Result<String, String> {
    let what = format!("iperf3 {} -> {} ({addr})", from.spec.name, to.spec.name);
    let o = iperf::run(from, to, addr, &iperf::Run::tcp(1, SECS))
        .map_err(|e| format!("{what}: {e}"))?;
    o.check_tcp(&what)?;
    let line = format!("{what}: {}", o.summary());
    println!("    {line}");
    Ok(line)
}

/// `ethtool -K eth0 tx/tso/gso on|off` in `g`; checks that
/// tx-checksumming is off after turning it off (turning on what the
/// device lacks fails, and is not an error).
pub fn set_offloads(g: &mut Guest, on: bool) -> Result<(), String> {
    let v = if on { "on" } else { "off" };
    g.ok(
        &format!("ethtool -K eth0 tx {v} tso {v} gso {v} 2>&1; true"),
        CMD,
    )?;
    if !on {
        let s = offload_summary(g, CMD)?;
        if !s.contains("tx-checksumming: off") || !s.contains("tcp-segmentation-offload: off") {
            return Err(format!("{}: after ethtool -K ... off: {s}", g.spec.name));
        }
    }
    Ok(())
}

/// An IPv6 address on eth0, usable at once (no duplicate address
/// detection); nothing if it is there already.
pub fn add_ipv6(g: &mut Guest, cidr: &str) -> Result<(), String> {
    let addr = cidr.split('/').next().unwrap_or(cidr);
    g.ok(
        &format!(
            "ip -6 addr show dev eth0 | grep -q ' {addr}/' && exit 0; \
             echo 0 >/proc/sys/net/ipv6/conf/eth0/accept_dad && ip -6 addr add {cidr} dev eth0"
        ),
        CMD,
    )
    .map(|_| ())
}

/// Waits until `from` gets an IPv6 echo reply from `addr` (neighbour
/// discovery), then 5 more must all come back.
pub fn ping6(from: &mut Guest, addr: &str) -> Result<(), String> {
    let name = from.spec.name;
    from.ok(
        &format!(
            "for i in $(seq 30); do ping -6 -c 1 -W 1 {addr} >/dev/null && exit 0; done; exit 1"
        ),
        Duration::from_secs(60),
    )
    .map_err(|e| format!("{name} never reached {addr}: {e}"))?;
    let out = from.ok(&format!("ping -6 -q -c 5 -i 0.2 -W 2 {addr}"), CMD)?;
    if !out.contains("5 packets received") {
        return Err(format!("{name} -> {addr}: lost pings: {}", out.trim()));
    }
    Ok(())
}

/// md5-checked transfer from `from` to `to` at `addr`; one line.
pub fn exact(from: &mut Guest, to: &mut Guest, addr: &str) -> Result<String, String> {
    let mbs = traffic::tcp_to(from, to, addr)?;
    Ok(format!(
        "nc {} -> {} ({addr}): {} KiB md5-equal, {mbs:.1} MB/s",
        from.spec.name,
        to.spec.name,
        traffic::TCP_BLOCKS * 64
    ))
}
