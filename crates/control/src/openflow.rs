//! The node's OpenFlow agent (`nfv_openflow`): what it asks of the node
//! (ports, identity, the checks a rule passes) answered from the
//! datapath, and its listeners started from `[openflow]`.
//!
//! Flows from OpenFlow, the config, `ctl` and the REST API land in the
//! one flow table; a rule is known by its table, priority and match, and
//! whoever adds the same again replaces it. Rules the node removes on
//! its own (timeouts) are announced to controllers that asked
//! (`OFPFF_SEND_FLOW_REM`); ports added or removed at run time are
//! announced as `PORT_STATUS`.

use crate::node::Node;
use nfv_flow::{FlowSpec, PortNo, TunnelPort};
use nfv_openflow::wire::{OfError, err};
use nfv_openflow::{Agent, Description, PortInfo, Switch};
use std::collections::BTreeSet;
use std::sync::{Arc, Weak};

/// The node as the agent sees it; weak, so the agent (held by the node)
/// does not keep the node alive.
struct NodeSwitch {
    node: Weak<Node>,
    datapath_id: u64,
}

impl Switch for NodeSwitch {
    fn datapath_id(&self) -> u64 {
        self.datapath_id
    }

    fn description(&self) -> Description {
        let name = self
            .node
            .upgrade()
            .map(|n| n.name.clone())
            .unwrap_or_default();
        Description {
            manufacturer: "nfvswitch".into(),
            hardware: "userspace datapath".into(),
            software: env!("CARGO_PKG_VERSION").into(),
            serial: "None".into(),
            datapath: name,
        }
    }

    fn ports(&self) -> Vec<PortInfo> {
        let Some(node) = self.node.upgrade() else {
            return Vec::new();
        };
        node.openflow_ports()
    }

    fn resolve(&self, spec: FlowSpec) -> Result<Vec<FlowSpec>, OfError> {
        let node = self.node.upgrade().ok_or(err::REQUEST_EPERM)?;
        let views = node.datapath.port_views();
        let ports: BTreeSet<PortNo> = views.iter().map(|v| v.no).collect();
        if spec.matches.mask.in_port() != 0 && !ports.contains(&spec.matches.key.in_port()) {
            return Err(err::MATCH_BAD_VALUE);
        }
        for a in &spec.actions {
            if let nfv_flow::Action::Output(p) = a
                && !ports.contains(p)
            {
                return Err(err::ACTION_BAD_OUT_PORT);
            }
        }
        let tunnels: Vec<TunnelPort> = views
            .iter()
            .filter_map(|v| {
                let vni = v.port.config()?.kind.tunnel_id()?;
                Some(TunnelPort { no: v.no, vni })
            })
            .collect();
        nfv_flow::tunnel::resolve(spec, &tunnels).map_err(|_| err::ACTION_BAD_ARGUMENT)
    }

    fn poll_packet_ins(&self, f: &mut dyn FnMut(&nfv_openflow::switch::PacketIn<'_>)) -> usize {
        let Some(node) = self.node.upgrade() else {
            return 0;
        };
        let path = node.datapath.controller();
        let mut n = 0;
        // A bounded pass: the queue holds at most this many.
        while n < nfv_datapath::controller::SLOTS {
            let Some(slot) = path.take() else { break };
            f(&nfv_openflow::switch::PacketIn {
                in_port: slot.in_port,
                table: slot.table,
                cookie: slot.cookie,
                reason: slot.reason,
                total_len: slot.total_len,
                data: &slot.data,
            });
            path.recycle(slot);
            n += 1;
        }
        n
    }

    fn set_packet_in_listening(&self, on: bool) {
        if let Some(node) = self.node.upgrade() {
            node.datapath.controller().set_listening(on);
        }
    }

    fn packet_out(&self, po: nfv_openflow::switch::PacketOut) -> Result<(), OfError> {
        let node = self.node.upgrade().ok_or(err::REQUEST_EPERM)?;
        let ports: BTreeSet<PortNo> = node.datapath.port_views().iter().map(|v| v.no).collect();
        if po.in_port != nfv_openflow::wire::FROM_CONTROLLER && !ports.contains(&po.in_port) {
            return Err(err::BAD_PORT);
        }
        for a in &po.actions {
            if let nfv_flow::Action::Output(p) = a
                && !ports.contains(p)
            {
                return Err(err::ACTION_BAD_OUT_PORT);
            }
        }
        let sent = node
            .datapath
            .packet_out(nfv_datapath::controller::PacketOut {
                in_port: po.in_port,
                actions: po.actions,
                to_table: po.to_table,
                data: po.data,
            });
        if sent {
            Ok(())
        } else {
            Err(err::REQUEST_EPERM)
        }
    }
}

impl Node {
    /// Starts the agent and its listeners (`[openflow] listen`); nothing
    /// when none is configured.
    pub fn start_openflow(
        self: &Arc<Node>,
        cfg: &nfv_config::OpenFlowConfig,
    ) -> Result<(), crate::NodeError> {
        if cfg.listen.is_empty() && cfg.controllers.is_empty() {
            return Ok(());
        }
        let switch = Arc::new(NodeSwitch {
            node: Arc::downgrade(self),
            datapath_id: cfg.datapath_id,
        });
        let agent = Agent::new(switch, self.datapath.table().clone());
        let tls = match &cfg.tls {
            Some(files) => Some(Arc::new(
                nfv_openflow::tls::TlsConfig::load(files)
                    .map_err(|e| crate::NodeError::Open(format!("[openflow] ssl: {e}").into()))?,
            )),
            None => None,
        };
        let mut listeners = nfv_openflow::listen::start(agent.clone(), &cfg.listen, tls.clone())
            .map_err(|e| crate::NodeError::Open(format!("[openflow] listen: {e}").into()))?;
        listeners
            .connect(&agent, &cfg.controllers, cfg.fail_mode, tls)
            .map_err(|e| crate::NodeError::Open(format!("[openflow] controllers: {e}").into()))?;
        for b in &listeners.bound {
            tracing::info!("OpenFlow 1.3 listening on {b}");
        }
        let _ = self.openflow.set(crate::node::OpenFlowRuntime {
            agent,
            listeners: std::sync::Mutex::new(Some(listeners)),
        });
        Ok(())
    }

    /// The ports as `PORT_DESC` and `PORT_STATS` show them.
    pub(crate) fn openflow_ports(&self) -> Vec<PortInfo> {
        let now = std::time::Instant::now();
        self.datapath
            .port_views()
            .into_iter()
            .map(|v| {
                let info: std::collections::BTreeMap<String, String> = v
                    .port
                    .gauges()
                    .entries()
                    .map(|(k, val)| (k.to_string(), val.to_string()))
                    .collect();
                let rx = v.stats.rx_total();
                let tx = v.stats.tx_total();
                let mac = info.get("mac").and_then(|m| parse_mac(m)).unwrap_or([
                    0x02,
                    0,
                    0,
                    0,
                    (v.no >> 8) as u8,
                    v.no as u8,
                ]);
                PortInfo {
                    no: v.no,
                    name: v.port.name().to_string(),
                    mac,
                    live: info.get("connected").is_none_or(|c| c == "true"),
                    rx_packets: rx.packets,
                    tx_packets: tx.packets,
                    rx_bytes: rx.bytes,
                    tx_bytes: tx.bytes,
                    rx_dropped: rx.total_drops(),
                    tx_dropped: tx.total_drops(),
                    duration: now.saturating_duration_since(self.meta.started_at),
                    ..Default::default()
                }
            })
            .collect()
    }

    /// Tells the controllers that asked which rules the node removed.
    pub(crate) fn openflow_rules_removed(&self, gone: &[(Arc<nfv_flow::Rule>, nfv_flow::Expiry)]) {
        if let Some(of) = self.openflow.get() {
            let gone: Vec<_> = gone.iter().map(|(r, e)| (r.clone(), (*e).into())).collect();
            of.agent.rules_removed(&gone);
        }
    }

    /// Tells the controllers that asked which rules a `ctl`/REST
    /// `del-flows` removed.
    pub(crate) fn openflow_rules_deleted(&self, gone: &[Arc<nfv_flow::Rule>]) {
        self.openflow_rules_gone(gone, nfv_openflow::messages::RemovedReason::Delete);
    }

    /// Tells the controllers that asked which rules went, all for `why`
    /// (a `del-flows`, or the group or meter they named deleted).
    pub(crate) fn openflow_rules_gone(
        &self,
        gone: &[Arc<nfv_flow::Rule>],
        why: nfv_openflow::messages::RemovedReason,
    ) {
        if let Some(of) = self.openflow.get() {
            let gone: Vec<_> = gone.iter().map(|r| (r.clone(), why)).collect();
            of.agent.rules_removed(&gone);
        }
    }

    /// Announces a port added (`added`) or removed.
    pub(crate) fn openflow_port_changed(&self, port: PortInfo, added: bool) {
        if let Some(of) = self.openflow.get() {
            of.agent.port_changed(&port, added);
        }
    }

    /// `show controllers`: the listeners and each connection.
    pub fn show_controllers(&self) -> serde_json::Value {
        let Some(of) = self.openflow.get() else {
            return serde_json::json!({ "listen": [], "connections": [] });
        };
        let bound = of
            .listeners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|l| l.bound.clone())
            .unwrap_or_default();
        let connections: Vec<serde_json::Value> = of
            .agent
            .sessions()
            .into_iter()
            .map(|s| {
                serde_json::json!({
                    "id": s.id,
                    "peer": s.peer,
                    "role": s.role.as_str(),
                    "negotiated": s.negotiated,
                    "received": s.received,
                    "errors_sent": s.errors_sent,
                    "async_sent": s.async_sent,
                    "async_dropped": s.async_dropped,
                })
            })
            .collect();
        use std::sync::atomic::Ordering::Relaxed;
        let path = self.datapath.controller();
        let figures = |f: &[(&str, u64)]| -> serde_json::Map<String, serde_json::Value> {
            f.iter()
                .map(|(k, v)| (k.to_string(), (*v).into()))
                .collect()
        };
        let mut packet_in = figures(&path.packet_in_figures());
        // Packet-ins the agent had for a controller whose send queue was full.
        packet_in.insert(
            "dropped_slow_controller".into(),
            of.agent.async_dropped.load(Relaxed).into(),
        );
        serde_json::json!({
            "datapath_id": format!("{:016x}", of.agent.datapath_id()),
            "listen": bound,
            "connections": connections,
            "packet_in": packet_in,
            "packet_out": figures(&path.packet_out_figures()),
        })
    }

    /// Closes the listeners and every OpenFlow connection.
    pub(crate) fn stop_openflow(&self) {
        if let Some(of) = self.openflow.get() {
            drop(
                of.listeners
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .take(),
            );
        }
    }
}

fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut out = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut out {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(out)
}
