//! Reports for `show ...` and `dump-flows` (also served by the REST API):
//! read from the datapath's counters, the rate sampler and the flow table;
//! nothing here changes the switch.

use crate::node::Node;
use crate::protocol::*;
use nfv_ports::{DropReason, QueueSnapshot};
use std::collections::BTreeMap;

impl Node {
    pub fn show_ports(&self) -> Vec<PortReport> {
        let rates = self.rates.ports();
        self.datapath
            .port_views()
            .into_iter()
            .map(|v| {
                let (rx_rate, tx_rate) = rates.get(&v.no).copied().unwrap_or_default();
                let q = |qs: &[nfv_ports::QueueCounters], pmd: &dyn Fn(usize) -> Option<usize>| {
                    qs.iter()
                        .enumerate()
                        .map(|(i, c)| {
                            let s = c.snapshot();
                            QueueReport {
                                queue: i,
                                pmd: pmd(i),
                                figures: s.figures(),
                                drops: s.total_drops(),
                            }
                        })
                        .collect()
                };
                PortReport {
                    no: v.no,
                    name: v.port.name().to_string(),
                    type_name: v.port.type_name().to_string(),
                    rx: direction(&v.stats.rx_total(), rx_rate),
                    tx: direction(&v.stats.tx_total(), tx_rate),
                    rx_queues: q(&v.stats.rx, &|i| v.rxq_pmd.get(i).copied()),
                    tx_queues: q(&v.stats.tx, &Some),
                    info: v
                        .port
                        .gauges()
                        .entries()
                        .map(|(k, val)| (k.to_string(), val.to_string()))
                        .collect(),
                    error: None,
                }
            })
            .chain(self.failed().values().map(|(c, e)| PortReport {
                no: c.id,
                name: c.name.clone(),
                type_name: c.kind.type_name().to_string(),
                rx: DirectionReport::default(),
                tx: DirectionReport::default(),
                rx_queues: Vec::new(),
                tx_queues: Vec::new(),
                info: BTreeMap::new(),
                error: Some(e.clone()),
            }))
            .collect()
    }

    /// Per-chain and per-VNF rates over the last interval.
    pub fn show_chains(&self) -> Vec<ChainReport> {
        let rates = self.rates.ports();
        let ports = self
            .datapath
            .port_views()
            .into_iter()
            .map(|v| {
                let (rx_rate, tx_rate) = rates.get(&v.no).copied().unwrap_or_default();
                let sample = crate::chains::PortSample {
                    rx: v.stats.rx_total(),
                    tx: v.stats.tx_total(),
                    rx_rate,
                    tx_rate,
                    connected: v.port.gauges().connected,
                };
                (v.no, sample)
            })
            .collect();
        crate::chains::report(&self.chains, &ports)
    }

    /// Every receiver port's streams since the last clear-stats.
    pub fn show_traffic(&self) -> Vec<TrafficReport> {
        self.datapath
            .port_views()
            .into_iter()
            .filter_map(|v| {
                let snap = v.port.receiver_stats()?.snapshot();
                Some(TrafficReport {
                    no: v.no,
                    name: v.port.name().to_string(),
                    unstamped: snap.unstamped,
                    untracked: snap.untracked,
                    streams: snap
                        .streams
                        .iter()
                        .map(|s| StreamReport {
                            stream: s.stream,
                            src_port: nfv_traffic::stamp::stream_port(s.stream),
                            src_queue: nfv_traffic::stamp::stream_queue(s.stream),
                            received: s.received,
                            lost: s.lost(),
                            reordered: s.reordered,
                            duplicates: s.duplicates,
                            late: s.late,
                            latency: s.latency(),
                        })
                        .collect(),
                })
            })
            .collect()
    }

    pub fn show_node(&self) -> NodeReport {
        let pool = self.datapath.pool();
        NodeReport {
            name: self.name.clone(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            started: self
                .meta
                .started
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
            uptime_secs: self.meta.started_at.elapsed().as_secs_f64(),
            pmds: self.datapath.n_pmds(),
            pmd_cores: self.datapath.pmd_views().iter().map(|v| v.core).collect(),
            ports: self.datapath.port_views().len(),
            flows: self.datapath.table().snapshot().classifier.rules().len(),
            flows_expired_idle: self
                .flow_expiry
                .idle
                .load(std::sync::atomic::Ordering::Relaxed),
            flows_expired_hard: self
                .flow_expiry
                .hard
                .load(std::sync::atomic::Ordering::Relaxed),
            chains: self.chains.len(),
            memory: MemoryReport {
                frames: pool.frames(),
                frame_size: pool.frame_size(),
                hugepages: format!("{:?}", self.memory.hugepages).to_lowercase(),
                backing: pool.backing().as_str().to_string(),
                free_frames: self.datapath.pool_free_frames(),
            },
            api: self.api_addr(),
            api_token_file: self.api_addr().map(|_| self.api_token_file.clone()),
            socket_dir: self.access.socket_dir.clone(),
            attachments_refused: self.attachments_refused(),
        }
    }

    pub fn show_pmd(&self) -> Vec<PmdReport> {
        let interval = self.rates.pmds();
        let pmu = self.rates.pmu();
        self.datapath
            .pmd_views()
            .into_iter()
            .map(|v| {
                // Rates and cycle figures over the last interval when there
                // was traffic in it; cumulative otherwise.
                let (mpps, recent) = interval.get(v.index).copied().unwrap_or_default();
                let basis = if recent.rx_packets > 0 {
                    recent
                } else {
                    v.stats
                };
                PmdReport {
                    index: v.index,
                    core: v.core,
                    mpps,
                    busy_percent: recent_or(&recent, &v.stats).busy_percent(),
                    cycles_per_packet: basis.cycles_per_packet(),
                    switch_cycles_per_packet: basis.switch_cycles_per_packet(),
                    packets_per_batch: basis.packets_per_busy_iteration(),
                    figures: v.stats,
                    rx_queues: v
                        .rxqs
                        .iter()
                        .map(|(no, name, q)| format!("{name}({no})/q{q}"))
                        .collect(),
                    tsc_hz: nfv_tsc::hz(),
                    pmu: crate::pmu::report(&v.pmu, pmu.get(v.index)),
                }
            })
            .collect()
    }

    pub fn dump_flows(&self) -> Vec<FlowReport> {
        self.dump_flows_selected(&nfv_flow::FlowFilter::default())
    }

    /// The rules `filter` selects (what `del-flows` with it would remove).
    pub fn dump_flows_selected(&self, filter: &nfv_flow::FlowFilter) -> Vec<FlowReport> {
        let table = self.datapath.table().snapshot();
        let now = nfv_tsc::now();
        table
            .classifier
            .rules()
            .iter()
            .filter(|r| filter.selects(&r.spec))
            .map(|r| FlowReport {
                priority: r.spec.priority,
                cookie: r.spec.cookie,
                n_packets: r.stats.packets.load(std::sync::atomic::Ordering::Relaxed),
                n_bytes: r.stats.bytes.load(std::sync::atomic::Ordering::Relaxed),
                duration_secs: r.created.elapsed().as_secs_f64(),
                idle_age_secs: r.idle_secs(now),
                rule: r.spec.to_string(),
            })
            .collect()
    }
}

fn recent_or(
    recent: &nfv_datapath::stats::PmdSnapshot,
    total: &nfv_datapath::stats::PmdSnapshot,
) -> nfv_datapath::stats::PmdSnapshot {
    if recent.busy_cycles + recent.idle_cycles > 0 {
        *recent
    } else {
        *total
    }
}

fn direction(s: &QueueSnapshot, rate: (f64, f64)) -> DirectionReport {
    DirectionReport {
        figures: s.figures(),
        drops: DropReason::ALL
            .iter()
            .zip(s.drops)
            .filter(|(_, n)| *n > 0)
            .map(|(r, n)| (r.as_str().to_string(), n))
            .collect(),
        mpps: rate.0,
        gbps: rate.1,
    }
}
