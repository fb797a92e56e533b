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
            Request::ShowControllers => self.show_controllers(),
            Request::ShowTraffic => serde_json::to_value(self.show_traffic())?,
            Request::DumpFlows { filter } => {
                let f = parse_filter(filter).map_err(RequestError::Filter)?;
                serde_json::to_value(self.dump_flows_selected(&f))?
            }
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
            Request::Trace { flow, ct_next } => serde_json::to_value(self.trace(flow, ct_next)?)?,
            Request::AddGroup { group } => {
                let g = nfv_flow::parse_group(group)?;
                let id = g.id;
                self.datapath.table().add_group(g)?;
                json!({ "added": id })
            }
            Request::ModGroup { group } => {
                let g = nfv_flow::parse_group(group)?;
                let id = g.id;
                self.datapath.table().mod_group(g)?;
                json!({ "modified": id })
            }
            Request::DelGroups { group_id } => {
                let (groups, rules) = self.datapath.table().del_groups(*group_id);
                self.openflow_rules_gone(
                    &rules,
                    nfv_openflow::messages::RemovedReason::GroupDelete,
                );
                json!({ "deleted": groups, "rules_deleted": rules.len() })
            }
            Request::DumpGroups => serde_json::to_value(self.dump_groups())?,
            Request::AddMeter { meter } => {
                let m = nfv_flow::meter::parse_meter(meter)?;
                let id = m.id;
                self.datapath.table().add_meter(m)?;
                json!({ "added": id })
            }
            Request::ModMeter { meter } => {
                let m = nfv_flow::meter::parse_meter(meter)?;
                let id = m.id;
                self.datapath.table().mod_meter(m)?;
                json!({ "modified": id })
            }
            Request::DelMeters { meter_id } => {
                let (meters, rules) = self.datapath.table().del_meters(*meter_id);
                self.openflow_rules_gone(
                    &rules,
                    nfv_openflow::messages::RemovedReason::MeterDelete,
                );
                json!({ "deleted": meters, "rules_deleted": rules.len() })
            }
            Request::DumpMeters => serde_json::to_value(self.dump_meters())?,
            Request::DumpTables => serde_json::to_value(self.dump_tables())?,
            Request::DumpConntrack { zone, limit } => {
                let limit = limit.unwrap_or(crate::protocol::CONNTRACK_DUMP_LIMIT);
                serde_json::to_value(self.dump_conntrack(*zone, limit)?)?
            }
            Request::FlushConntrack { zone } => {
                json!({ "flushed": self.datapath.flush_conntrack(*zone)? })
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
        self.datapath.table().add_flows_checked(specs)?;
        Ok(n)
    }

    /// Per table that holds rules: how many, and what they matched.
    pub fn dump_tables(&self) -> Vec<crate::protocol::TableReport> {
        use std::sync::atomic::Ordering::Relaxed;
        let mut tables = std::collections::BTreeMap::<u8, crate::protocol::TableReport>::new();
        for r in self.datapath.table().snapshot().classifier.rules() {
            let t = r.spec.matches.key.table();
            let e = tables.entry(t).or_insert(crate::protocol::TableReport {
                table: t,
                rules: 0,
                matched_packets: 0,
                matched_bytes: 0,
            });
            e.rules += 1;
            e.matched_packets += r.stats.packets.load(Relaxed);
            e.matched_bytes += r.stats.bytes.load(Relaxed);
        }
        tables.into_values().collect()
    }

    /// Every meter, its counters and how many rules name it.
    pub fn dump_meters(&self) -> Vec<crate::protocol::MeterReport> {
        use std::sync::atomic::Ordering::Relaxed;
        let table = self.datapath.table().snapshot();
        let rules = table.classifier.rules();
        table
            .meters
            .values()
            .map(|m| crate::protocol::MeterReport {
                meter_id: m.id,
                meter: m.to_string(),
                packets: m.packets_in.load(Relaxed),
                bytes: m.bytes_in.load(Relaxed),
                band_packets: m.band_packets.load(Relaxed),
                band_bytes: m.band_bytes.load(Relaxed),
                rules: rules
                    .iter()
                    .filter(|r| {
                        r.spec
                            .actions
                            .iter()
                            .any(|a| *a == nfv_flow::Action::Meter(m.id))
                    })
                    .count(),
            })
            .collect()
    }

    /// Every group, its buckets' counters and how many rules name it.
    pub fn dump_groups(&self) -> Vec<crate::protocol::GroupReport> {
        use std::sync::atomic::Ordering::Relaxed;
        let table = self.datapath.table().snapshot();
        let rules = table.classifier.rules();
        table
            .groups
            .values()
            .map(|g| crate::protocol::GroupReport {
                group_id: g.id,
                kind: g.kind.as_str().into(),
                group: g.to_string(),
                buckets: g
                    .buckets
                    .iter()
                    .map(|b| crate::protocol::BucketReport {
                        actions: nfv_flow::format::ActionList(&b.actions).to_string(),
                        weight: b.weight,
                        watch_port: b.watch_port,
                        packets: b.packets.load(Relaxed),
                        bytes: b.bytes.load(Relaxed),
                    })
                    .collect(),
                rules: rules
                    .iter()
                    .filter(|r| r.spec.actions.contains(&nfv_flow::Action::Group(g.id)))
                    .count(),
            })
            .collect()
    }

    /// `del-flows`: the rules a controller asked to hear of are announced
    /// (`FLOW_REMOVED`, reason delete), as its own deletes are.
    pub fn del_flows(&self, filter: &str) -> Result<usize, RequestError> {
        let f = parse_filter(filter).map_err(RequestError::Filter)?;
        let gone = self.datapath.table().del_flows_returning(&f);
        self.openflow_rules_deleted(&gone);
        Ok(gone.len())
    }

    /// `trace`: what the datapath would do with the packet `flow`
    /// describes, the tracker answering `ct_next` (OVS's `--ct-next`
    /// flags, one per tracked copy in the order they are looked up).
    pub fn trace(
        &self,
        flow: &str,
        ct_next: &[String],
    ) -> Result<crate::protocol::TraceReport, RequestError> {
        use nfv_datapath::trace::{Tier, trace_tracked};
        let f = parse_filter(flow).map_err(RequestError::Filter)?;
        if f.priority.is_some() || f.cookie.is_some() {
            return Err(RequestError::Trace("a packet has no priority or cookie"));
        }
        if f.matches.mask.in_port() == 0 {
            return Err(RequestError::Trace("name the packet's in_port"));
        }
        if has_partial_field(&f.matches.mask) {
            return Err(RequestError::Trace(
                "a packet's fields are exact: no masks or prefixes",
            ));
        }
        let ct_next = ct_next
            .iter()
            .map(|s| nfv_flow::parse_ct_states(s))
            .collect::<Result<Vec<u8>, _>>()
            .map_err(RequestError::Filter)?;
        let table = self.datapath.table().snapshot();
        let views = self.datapath.port_views();
        // Live as far as the control plane can tell: the port exists and
        // its peer, if it has one, is connected. (A vhost-user port whose
        // guest stopped taking packets is down to the PMD for a hold,
        // `nfv_vhost::stall`, which this does not see.)
        let live = |p: PortNo| {
            views
                .iter()
                .any(|v| v.no == p && v.port.gauges().connected != Some(false))
        };
        let t = trace_tracked(&table, f.matches.key, &live, &ct_next);
        let names: std::collections::BTreeMap<PortNo, String> = views
            .iter()
            .map(|v| (v.no, v.port.name().to_string()))
            .collect();
        let port = |p: PortNo| match names.get(&p) {
            Some(n) => format!("{p} ({n})"),
            None => format!("{p} (no such port: dropped as no_port)"),
        };
        let emc =
            "the EMC (where enabled) may keep this exact packet: one EMC miss in 100 is inserted";
        let cache = match &t.tier {
            Tier::PortWide => "nothing: the in_port's batches skip the caches".to_string(),
            Tier::Classifier {
                megaflow: Some(m), ..
            } => format!("the megaflow {m}; {emc}"),
            Tier::Classifier { .. } => format!("no megaflow (too few subtables visited); {emc}"),
        };
        let report = TraceReporter {
            trace: &t,
            port: &port,
        };
        Ok(crate::protocol::TraceReport {
            packet: format!("{:?}", t.packet),
            decided_by: match &t.tier {
                Tier::PortWide => "port-wide rule (every packet of the in_port, no lookup)".into(),
                Tier::Classifier { probes, .. } => {
                    format!("classifier ({probes} subtable(s) visited)")
                }
            },
            rule: t.rule.as_ref().map(|r| r.spec.to_string()),
            cookie: t.rule.as_ref().map(|r| r.spec.cookie),
            tables: table_reports(&t.stages),
            steps: report.steps(&t.steps),
            unused_actions: t.unused.iter().map(|a| a.to_string()).collect(),
            outputs: report.outputs(&t.outputs),
            cache,
        })
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

/// Turns a trace into its report: steps (with their buckets and the
/// tracked copies they forked, nested), outputs named.
struct TraceReporter<'a> {
    trace: &'a nfv_datapath::trace::Trace,
    port: &'a dyn Fn(PortNo) -> String,
}

impl TraceReporter<'_> {
    fn steps(&self, steps: &[nfv_datapath::trace::Step]) -> Vec<crate::protocol::TraceStepReport> {
        steps
            .iter()
            .map(|s| crate::protocol::TraceStepReport {
                action: s.action.to_string(),
                packet: format!("{:?}", s.after),
                note: s.note.clone(),
                buckets: s
                    .buckets
                    .iter()
                    .map(|b| crate::protocol::TraceBucketReport {
                        bucket: b.index,
                        steps: self.steps(&b.steps),
                        unused_actions: b.unused.iter().map(|a| a.to_string()).collect(),
                    })
                    .collect(),
                recirculation: s.recirculation.map(|n| Box::new(self.recirculation(n))),
            })
            .collect()
    }

    /// The `n`-th tracked copy (0 first), the ones it forked nested in its
    /// steps. Each fork's index is above its parent's, so this ends.
    fn recirculation(&self, n: usize) -> crate::protocol::TraceRecirculationReport {
        let r = &self.trace.recirculations[n];
        crate::protocol::TraceRecirculationReport {
            recirculation: n + 1,
            round: r.round,
            ct_state: nfv_flow::ct_states_text(r.ct_state),
            ct_state_from: if r.given {
                format!("--ct-next {}", n + 1)
            } else {
                "the default: no --ct-next left for it".into()
            },
            packet: format!("{:?}", r.packet),
            rule: r.rule.as_ref().map(|r| r.spec.to_string()),
            tables: table_reports(&r.stages),
            steps: self.steps(&r.steps),
            unused_actions: r.unused.iter().map(|a| a.to_string()).collect(),
            outputs: self.outputs(&r.outputs),
        }
    }

    fn outputs(&self, outputs: &[nfv_datapath::trace::Output]) -> Vec<String> {
        use nfv_datapath::trace::Output;
        outputs
            .iter()
            .map(|o| match *o {
                Output::Port(p) => (self.port)(p),
                Output::Normal => "normal".to_string(),
                Output::Flood => "flood (every port but the in_port)".to_string(),
                Output::Recirculate(t) => format!(
                    "table {t} again, tracked: not followed, past the datapath's recirculation \
                     limit (it drops the copy, recirc_limit)"
                ),
            })
            .collect()
    }
}

fn table_reports(stages: &[nfv_flow::pipeline::Stage]) -> Vec<crate::protocol::TraceTableReport> {
    stages
        .iter()
        .map(|s| crate::protocol::TraceTableReport {
            table: s.table,
            rule: s.rule.as_ref().map(|r| r.spec.to_string()),
        })
        .collect()
}

/// Whether `mask` covers only part of some field (an address prefix or a
/// bit mask): a packet has every field whole. (`vlan_tci` aside:
/// `dl_vlan=5` names a packet's VID and leaves its PCP zero; and
/// `ct_state=+trk+est`, which names the states a packet has, the others
/// clear.)
fn has_partial_field(mask: &nfv_flow::FlowKey) -> bool {
    let full = |v: u64, bits: u32| v == 0 || v == (1u64 << bits) - 1;
    !(full(u64::from(mask.dl_type()), 16)
        && full(u64::from(mask.nw_proto()), 8)
        && full(u64::from(mask.tp_src()), 16)
        && full(u64::from(mask.tp_dst()), 16)
        && full(u64::from(mask.nw_src()), 32)
        && full(u64::from(mask.nw_dst()), 32)
        && full(u64::from(mask.ct_zone()), 16)
        && full(u64::from(mask.ct_mark()), 32)
        && (mask.ct_label() == 0 || mask.ct_label() == u128::MAX)
        && [mask.dl_src(), mask.dl_dst()]
            .iter()
            .all(|m| *m == [0; 6] || *m == [0xff; 6]))
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
