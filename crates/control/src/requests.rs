//! Control requests: each is checked completely before the switch is
//! touched, so a refused request ([`RequestError`]) changes nothing.

use crate::error::RequestError;
use crate::node::Node;
use crate::protocol::{Request, Response};
use nfv_flow::{Action, FlowSpec, PortNo, TunnelPort, parse_filter, parse_flow};
use serde_json::{Value, json};
use std::collections::BTreeSet;

impl Node {
    /// Handles one control request from the control socket.
    pub fn handle(&self, req: &Request) -> Response {
        self.handle_as(req, crate::Caller::ControlSocket)
    }

    /// Handles one control request from `caller` (`crate::access`).
    pub fn handle_as(&self, req: &Request, caller: crate::Caller) -> Response {
        match self.answer(req, caller) {
            Ok(data) => Response::Ok { data },
            Err(e) => Response::Error {
                message: e.to_string(),
            },
        }
    }

    fn answer(&self, req: &Request, caller: crate::Caller) -> Result<Value, RequestError> {
        Ok(match req {
            Request::ShowPorts => serde_json::to_value(self.show_ports())?,
            Request::ShowPmd => serde_json::to_value(self.show_pmd())?,
            Request::ShowChains => serde_json::to_value(self.show_chains())?,
            Request::ShowTraffic => serde_json::to_value(self.show_traffic())?,
            Request::DumpFlows => serde_json::to_value(self.dump_flows())?,
            Request::ShowNode => serde_json::to_value(self.show_node())?,
            Request::AddFlows { flows } => json!({ "added": self.add_flows(flows)? }),
            Request::DelFlows { filter } => json!({ "deleted": self.del_flows(filter)? }),
            Request::AddPort { port } => json!({ "added": self.add_port_as(port, caller)? }),
            Request::DelPort { port } => json!({ "deleted": self.del_port(port)? }),
            Request::ShowRxqs => serde_json::to_value(self.show_rxqs())?,
            Request::PmdRebalance { dry_run } => {
                serde_json::to_value(self.pmd_rebalance(*dry_run)?)?
            }
            Request::PmdRxqMove { port, queue, pmd } => {
                self.move_rxq(port, *queue, *pmd)?;
                json!({ "moved": { "port": port, "queue": queue, "pmd": pmd } })
            }
            Request::ClearStats => {
                self.clear_stats();
                json!({})
            }
        })
    }

    /// Parses and checks every rule against the ports present, then
    /// installs them all in one table generation.
    /// A `tun_id` match becomes one rule per tunnel port carrying it
    /// (`nfv_flow::tunnel`); the count returned is of rules installed.
    pub fn add_flows(&self, flows: &[String]) -> Result<usize, RequestError> {
        let views = self.datapath.port_views();
        let ports: BTreeSet<PortNo> = views.iter().map(|v| v.no).collect();
        let tunnels: Vec<TunnelPort> = views
            .iter()
            .filter_map(|v| {
                let vni = v.port.config()?.kind.tunnel_id()?;
                Some(TunnelPort { no: v.no, vni })
            })
            .collect();
        let mut specs = Vec::with_capacity(flows.len());
        for (i, text) in flows.iter().enumerate() {
            let index = (flows.len() > 1).then_some(i + 1);
            let spec = parse_flow(text).map_err(|source| RequestError::Flow { index, source })?;
            check_ports(&spec, &ports, index)?;
            let rules = nfv_flow::tunnel::resolve(spec, &tunnels)
                .map_err(|source| RequestError::FlowTunnel { index, source })?;
            specs.extend(rules);
        }
        let n = specs.len();
        self.datapath.table().add_flows(specs);
        Ok(n)
    }

    pub fn del_flows(&self, filter: &str) -> Result<usize, RequestError> {
        let f = parse_filter(filter).map_err(RequestError::Filter)?;
        Ok(self.datapath.table().del_flows(&f))
    }

    /// Zeroes the PMD counters and every receiver's streams.
    pub fn clear_stats(&self) {
        self.datapath.clear_pmd_stats();
        for v in self.datapath.port_views() {
            if let Some(r) = v.port.receiver_stats() {
                r.clear();
            }
        }
    }
}

/// Rejects rules naming ports that do not exist.
fn check_ports(
    spec: &FlowSpec,
    ports: &BTreeSet<PortNo>,
    index: Option<usize>,
) -> Result<(), RequestError> {
    let missing = |what, port| RequestError::FlowPort { index, what, port };
    let in_port = spec.matches.key.in_port();
    if spec.matches.mask.in_port() != 0 && !ports.contains(&in_port) {
        return Err(missing("in_port=", in_port));
    }
    for a in &spec.actions {
        if let Action::Output(p) = a
            && !ports.contains(p)
        {
            return Err(missing("output:", *p));
        }
    }
    Ok(())
}
