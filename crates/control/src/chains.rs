//! Service chains at run time: installing their steering rules and
//! reporting per-VNF and per-chain rates. A VNF hop is a vhost-user port:
//! what the switch transmits to it is the VNF's rx, what the switch
//! receives from it is the VNF's tx.

use crate::error::NodeError;
use crate::protocol::{ChainReport, VnfReport};
use crate::rates::Rate;
use nfv_config::ChainConfig;
use nfv_flow::{FlowSpec, PortNo, parse_flow};
use nfv_ports::QueueSnapshot;
use std::collections::BTreeMap;

/// Cookie marking the steering rules of chain `index` (shown by dump-flows).
pub fn chain_cookie(index: usize) -> u64 {
    0x6368_6169_0000_0000 | index as u64
}

/// The groups of every chain's scaled-out and standby hops.
pub fn groups(chains: &[ChainConfig]) -> Result<Vec<nfv_flow::Group>, NodeError> {
    let mut out = Vec::new();
    for (i, c) in chains.iter().enumerate() {
        for g in c.groups_of(i) {
            out.push(
                nfv_flow::parse_group(&g).map_err(|e| {
                    NodeError::Config(format!("chain {:?}: group {g:?}: {e}", c.name))
                })?,
            );
        }
    }
    Ok(out)
}

/// The steering rules of every chain.
pub fn steering(chains: &[ChainConfig]) -> Result<Vec<FlowSpec>, NodeError> {
    let mut specs = Vec::new();
    for (i, c) in chains.iter().enumerate() {
        for r in c.steering_rules_of(i) {
            let mut s = parse_flow(&r).map_err(|source| NodeError::Chain {
                chain: c.name.clone(),
                source,
            })?;
            s.cookie = chain_cookie(i);
            specs.push(s);
        }
    }
    Ok(specs)
}

/// Counters and rates of one port, as the chain report needs them.
pub struct PortSample {
    pub rx: QueueSnapshot,
    pub tx: QueueSnapshot,
    pub rx_rate: Rate,
    pub tx_rate: Rate,
    /// Whether the port's peer is connected, for ports that have one.
    pub connected: Option<bool>,
}

pub fn report(chains: &[ChainConfig], ports: &BTreeMap<PortNo, PortSample>) -> Vec<ChainReport> {
    let empty = PortSample {
        rx: QueueSnapshot::default(),
        tx: QueueSnapshot::default(),
        rx_rate: (0.0, 0.0),
        tx_rate: (0.0, 0.0),
        connected: None,
    };
    chains
        .iter()
        .map(|c| {
            let get = |id: PortNo| ports.get(&id).unwrap_or(&empty);
            let ingress = get(c.ingress().1);
            let egress = get(c.egress().1);
            let vnfs: Vec<VnfReport> = c
                .vnfs()
                .iter()
                .map(|(name, id)| {
                    let p = get(*id);
                    VnfReport {
                        name: name.clone(),
                        port: *id,
                        rx_mpps: p.tx_rate.0,
                        rx_gbps: p.tx_rate.1,
                        tx_mpps: p.rx_rate.0,
                        tx_gbps: p.rx_rate.1,
                        rx_packets: p.tx.packets,
                        tx_packets: p.rx.packets,
                        // Packets the VNF did not take (ring full) and
                        // packets it sent that the switch dropped.
                        drops: p.tx.total_drops() + p.rx.total_drops(),
                        connected: p.connected.unwrap_or(true),
                    }
                })
                .collect();
            let offered = ingress.rx_rate.0;
            let delivered = egress.tx_rate.0;
            ChainReport {
                name: c.name.clone(),
                hops: c.hops.iter().map(|h| h.0.clone()).collect(),
                ingress_mpps: offered,
                egress_mpps: delivered,
                egress_gbps: egress.tx_rate.1,
                loss_percent: if offered > 0.0 {
                    (100.0 * (1.0 - delivered / offered)).max(0.0)
                } else {
                    0.0
                },
                vnfs,
            }
        })
        .collect()
}
