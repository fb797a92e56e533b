//! `dump-conntrack`: every PMD's connections, written as OVS's
//! `ovs-appctl dpctl/dump-conntrack` writes them
//! (`tcp,orig=(src=…,dst=…,sport=…,dport=…),reply=(…),zone=N,mark=N,…`).

use crate::error::RequestError;
use crate::node::Node;
use crate::protocol::{ConnReport, ConntrackReport};
use nfv_conntrack::{ConnKey, ConnView, Family, ProtoState, TcpState, key::proto};
use std::net::{Ipv4Addr, Ipv6Addr};

impl Node {
    /// Up to `limit` connections (of `zone`, or all) and the total.
    pub fn dump_conntrack(
        &self,
        zone: Option<u16>,
        limit: usize,
    ) -> Result<ConntrackReport, RequestError> {
        let (conns, total) = self.datapath.dump_conntrack(zone, limit)?;
        let now_ms = tsc_ms();
        let mut connections: Vec<ConnReport> = conns.iter().map(|c| report(c, now_ms)).collect();
        connections.sort_by(|a, b| a.text.cmp(&b.text));
        Ok(ConntrackReport { total, connections })
    }
}

/// The clock the PMDs stamp deadlines with: TSC milliseconds.
fn tsc_ms() -> u64 {
    (u128::from(nfv_tsc::now()) * 1000 / u128::from(nfv_tsc::hz().max(1))) as u64
}

fn proto_name(k: &ConnKey) -> String {
    match (k.proto, k.family) {
        (proto::TCP, _) => "tcp".into(),
        (proto::UDP, _) => "udp".into(),
        (proto::ICMP, Family::V4) => "icmp".into(),
        (proto::ICMPV6, Family::V6) => "icmpv6".into(),
        (p, _) => p.to_string(),
    }
}

fn addr(family: Family, a: u128) -> String {
    match family {
        Family::V4 => Ipv4Addr::from(a as u32).to_string(),
        Family::V6 => Ipv6Addr::from(a).to_string(),
    }
}

/// One direction's tuple: ports for TCP/UDP, id/type/code for ICMP.
fn tuple(k: &ConnKey) -> String {
    let (src, dst) = (addr(k.family, k.src), addr(k.family, k.dst));
    if k.is_icmp() {
        let (ty, code) = k.icmp_type_code();
        format!(
            "src={src},dst={dst},id={},type={ty},code={code}",
            k.src_port
        )
    } else if k.proto == proto::TCP || k.proto == proto::UDP {
        format!(
            "src={src},dst={dst},sport={},dport={}",
            k.src_port, k.dst_port
        )
    } else {
        format!("src={src},dst={dst}")
    }
}

fn state_name(p: &ProtoState) -> String {
    match p {
        ProtoState::Tcp(t) => match t.state {
            TcpState::SynSent => "SYN_SENT",
            TcpState::SynSent2 => "SYN_SENT2",
            TcpState::SynRecv => "SYN_RECV",
            TcpState::Established => "ESTABLISHED",
            TcpState::FinWait => "FIN_WAIT",
            TcpState::CloseWait => "CLOSE_WAIT",
            TcpState::LastAck => "LAST_ACK",
            TcpState::TimeWait => "TIME_WAIT",
            TcpState::Close => "CLOSE",
        }
        .into(),
        ProtoState::Other(s) => format!("{s:?}").to_uppercase(),
        ProtoState::Icmp(s) => format!("{s:?}").to_uppercase(),
    }
}

pub(crate) fn report(c: &ConnView, now_ms: u64) -> ConnReport {
    let proto = proto_name(&c.orig);
    let state = state_name(&c.proto);
    let label = format!("0x{:032x}", c.label);
    let mut text = format!(
        "{proto},orig=({}),reply=({}),zone={}",
        tuple(&c.orig),
        tuple(&c.reply),
        c.orig.zone
    );
    if c.mark != 0 {
        text += &format!(",mark={}", c.mark);
    }
    if c.label != 0 {
        text += &format!(",labels={label}");
    }
    if matches!(c.proto, ProtoState::Tcp(_)) {
        text += &format!(",protoinfo=(state={state})");
    }
    ConnReport {
        text,
        zone: c.orig.zone,
        proto,
        mark: c.mark,
        label,
        state,
        expires_in_secs: c.deadline_ms.saturating_sub(now_ms) as f64 / 1000.0,
    }
}
