//! Traffic between two guests, run from their shells: ping (RTT) and a
//! bulk TCP transfer with busybox nc whose bytes are compared by md5 at
//! both ends (throughput from the sender's clock).

use crate::guest::Guest;
use std::time::Duration;

const CMD: Duration = Duration::from_secs(20);
/// Bytes of random data per transfer (64 KiB blocks).
pub const TCP_BLOCKS: u32 = 64;
const TCP_PORT: u16 = 5001;

/// Waits until `from` gets a reply from `to` (link-up, ARP, a
/// renegotiating driver), then sends 10 pings; returns the mean RTT (ms).
pub fn ping(from: &mut Guest, to: &Guest) -> Result<f64, String> {
    let ip = to.spec.addr();
    let name = from.spec.name;
    from.ok(
        &format!("for i in $(seq 30); do ping -c 1 -W 1 {ip} >/dev/null && exit 0; done; exit 1"),
        Duration::from_secs(60),
    )
    .map_err(|e| format!("{name} never reached {ip}: {e}"))?;
    let out = from.ok(&format!("ping -q -c 10 -i 0.2 -W 2 {ip}"), CMD)?;
    if !out.contains("10 packets received") {
        return Err(format!("{name} -> {ip}: lost pings: {}", out.trim()));
    }
    // "round-trip min/avg/max = 0.651/0.822/1.176 ms"
    out.lines()
        .find_map(|l| l.strip_prefix("round-trip min/avg/max = "))
        .and_then(|v| v.split('/').nth(1))
        .and_then(|avg| avg.parse().ok())
        .ok_or_else(|| format!("no RTT in ping output: {out}"))
}

/// Moves `TCP_BLOCKS` × 64 KiB of random data from `from` to `to` over
/// TCP; checks the md5 at both ends; returns the throughput in MB/s.
pub fn tcp(from: &mut Guest, to: &mut Guest) -> Result<f64, String> {
    let ip = to.spec.addr();
    tcp_to(from, to, ip)
}

/// [`tcp`] to `to` at `ip` (e.g. one of its IPv6 addresses).
pub fn tcp_to(from: &mut Guest, to: &mut Guest, ip: &str) -> Result<f64, String> {
    let sent_md5 = md5_of_fresh_data(from)?;
    // The listener's stdin must stay open (busybox nc half-closes the
    // connection when its stdin ends); the `sleep` is killed once the
    // data is in.
    to.ok(
        &format!(
            "rm -f /tmp/rx /tmp/rx.done; \
             sleep 120 | (nc -l -p {TCP_PORT} >/tmp/rx 2>/tmp/rx.err; touch /tmp/rx.done) & \
             for i in $(seq 100); do netstat -ltn | grep -q ':{TCP_PORT} ' && exit 0; sleep 0.1; done; exit 1"
        ),
        CMD,
    )
    .map_err(|e| format!("{} did not listen: {e}", to.spec.name))?;
    let out = from.ok(
        &format!(
            "a=$(cut -d' ' -f1 /proc/uptime); nc -w 5 {ip} {TCP_PORT} </tmp/tx >/dev/null; st=$?; \
             b=$(cut -d' ' -f1 /proc/uptime); echo \"T $a $b\"; exit $st"
        ),
        Duration::from_secs(120),
    )?;
    let secs = out
        .lines()
        .find_map(|l| l.strip_prefix("T "))
        .and_then(|t| {
            let v: Vec<f64> = t.split(' ').filter_map(|x| x.parse().ok()).collect();
            (v.len() == 2).then(|| v[1] - v[0])
        })
        .ok_or_else(|| format!("no timing from the sender: {out}"))?;
    let got = to.ok(
        "for i in $(seq 300); do [ -e /tmp/rx.done ] && break; sleep 0.1; done; \
         [ -e /tmp/rx.done ] && md5sum /tmp/rx && killall sleep; true",
        Duration::from_secs(60),
    )?;
    let got_md5 = got.split_whitespace().next().unwrap_or("");
    if got_md5 != sent_md5 {
        return Err(format!(
            "{} -> {}: bytes differ: sent md5 {sent_md5}, received {:?}",
            from.spec.name,
            to.spec.name,
            got.trim()
        ));
    }
    let bytes = f64::from(TCP_BLOCKS) * 65536.0;
    Ok(bytes / secs.max(0.01) / 1e6)
}

/// Writes fresh random data to /tmp/tx in `g`; returns its md5.
fn md5_of_fresh_data(g: &mut Guest) -> Result<String, String> {
    let out = g.ok(
        &format!("dd if=/dev/urandom of=/tmp/tx bs=65536 count={TCP_BLOCKS} 2>/dev/null && md5sum /tmp/tx"),
        CMD,
    )?;
    out.split_whitespace()
        .next()
        .filter(|m| m.len() == 32)
        .map(str::to_string)
        .ok_or_else(|| format!("md5sum said {out:?}"))
}

/// Pings and a TCP transfer both ways; a one-line summary.
pub fn both_ways(a: &mut Guest, b: &mut Guest) -> Result<String, String> {
    let rtt_ab = ping(a, b)?;
    let rtt_ba = ping(b, a)?;
    let ab = tcp(a, b)?;
    let ba = tcp(b, a)?;
    Ok(format!(
        "ping RTT a->b {rtt_ab:.2} ms, b->a {rtt_ba:.2} ms; TCP {} KiB md5-equal, a->b {ab:.1} MB/s, b->a {ba:.1} MB/s",
        TCP_BLOCKS * 64
    ))
}
