//! `[conntrack]`: each PMD thread's connection table (the `ct` action's).
//!
//! ```toml
//! [conntrack]
//! capacity = 262144        # connections per PMD thread
//! zone_limit = 10000       # per zone, unless absent: no limit but capacity
//! tcp_pickup = true        # a mid-stream TCP segment may start a connection
//! established = "on-commit"  # or "on-reply" (see below)
//! timeouts = { tcp_established = 3600, udp_multiple = 60 }   # seconds
//! ```
//! Timeouts default to OVS's userspace ones ([`nfv_conntrack::Timeouts`]).
//! `established`: when a committed connection's packets are `+est` —
//! `"on-commit"` (default, as OVS's userspace/DPDK datapath: every packet
//! after the commit) or `"on-reply"` (as Linux and so OVS's kernel
//! datapath: once the other direction answered).

use crate::check::{self, Result};
use crate::error::Doc;
use crate::raw::{self, S};

/// Connections a PMD's table holds unless `capacity` says otherwise: the
/// table (~290 bytes a connection, slab and index) is reserved and
/// faulted in at start, unless it is over a quarter of the memory
/// available then (`nfv_mem::huge`).
pub const DEFAULT_CAPACITY: u32 = 262_144;
/// The largest `capacity` accepted.
pub const MAX_CAPACITY: i64 = 16 * 1024 * 1024;
/// The longest timeout accepted: a week.
const MAX_TIMEOUT: i64 = 7 * 24 * 3600;

pub(crate) fn conntrack(
    doc: &Doc<'_>,
    raw: Option<&S<raw::RawConntrack>>,
) -> Result<nfv_conntrack::Config> {
    let Some(r) = raw.map(|r| r.get_ref()) else {
        return Ok(nfv_conntrack::Config {
            capacity: DEFAULT_CAPACITY,
            ..nfv_conntrack::Config::default()
        });
    };
    let capacity = check::opt_int(
        doc,
        &r.capacity,
        "conntrack.capacity",
        1..=MAX_CAPACITY,
        DEFAULT_CAPACITY,
    )?;
    let default_zone_limit = match &r.zone_limit {
        None => None,
        Some(_) => Some(check::opt_int(
            doc,
            &r.zone_limit,
            "conntrack.zone_limit",
            1..=MAX_CAPACITY,
            0u32,
        )?),
    };
    let mut timeouts = nfv_conntrack::Timeouts::default();
    if let Some(t) = &r.timeouts {
        let t = t.get_ref();
        for (name, value, slot) in [
            ("tcp_syn_sent", &t.tcp_syn_sent, &mut timeouts.tcp_syn_sent),
            ("tcp_syn_recv", &t.tcp_syn_recv, &mut timeouts.tcp_syn_recv),
            (
                "tcp_established",
                &t.tcp_established,
                &mut timeouts.tcp_established,
            ),
            ("tcp_fin_wait", &t.tcp_fin_wait, &mut timeouts.tcp_fin_wait),
            (
                "tcp_time_wait",
                &t.tcp_time_wait,
                &mut timeouts.tcp_time_wait,
            ),
            ("tcp_close", &t.tcp_close, &mut timeouts.tcp_close),
            ("udp_first", &t.udp_first, &mut timeouts.udp_first),
            ("udp_single", &t.udp_single, &mut timeouts.udp_single),
            ("udp_multiple", &t.udp_multiple, &mut timeouts.udp_multiple),
            ("icmp_first", &t.icmp_first, &mut timeouts.icmp_first),
            ("icmp_reply", &t.icmp_reply, &mut timeouts.icmp_reply),
        ] {
            let field = format!("conntrack.timeouts.{name}");
            *slot = check::opt_int(doc, value, &field, 1..=MAX_TIMEOUT, *slot)?;
        }
    }
    let established = match &r.established {
        None => nfv_conntrack::Established::OnCommit,
        Some(v) => match v.get_ref().as_str() {
            "on-commit" => nfv_conntrack::Established::OnCommit,
            "on-reply" => nfv_conntrack::Established::OnReply,
            other => {
                return Err(doc.err(
                    v.span(),
                    "conntrack.established",
                    format!("{other:?} is not \"on-commit\" or \"on-reply\""),
                ));
            }
        },
    };
    Ok(nfv_conntrack::Config {
        capacity,
        default_zone_limit,
        timeouts,
        tcp_pickup: r.tcp_pickup.as_ref().is_none_or(|b| *b.get_ref()),
        established,
    })
}
