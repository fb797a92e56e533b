//! `nfvswitch ctl`: the control client. Human tables by default, `--json`
//! for machines. Exit status is non-zero whenever the switch refused.

use crate::table::{Table, fmt_opt};
use clap::{Args, Subcommand};
use nfv_control::protocol::{
    ChainReport, FlowReport, NodeReport, PmdReport, PortReport, RebalanceReport, RxqsReport,
    TraceReport, TrafficReport,
};
use nfv_control::{Request, Response, request};
use std::path::{Path, PathBuf};

mod trace_text;
pub use trace_text::trace_text;

#[derive(Args)]
pub struct CtlArgs {
    /// Control socket of the node (default: $NFVSWITCH_SOCKET, the
    /// socket of --config, or the only nfvswitch socket found).
    #[arg(long, short = 's', env = "NFVSWITCH_SOCKET")]
    socket: Option<PathBuf>,
    /// Find the socket from this node config.
    #[arg(long, short = 'c')]
    config: Option<PathBuf>,
    /// Print the raw JSON response data.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    cmd: CtlCommand,
}

#[derive(Subcommand)]
enum CtlCommand {
    /// Show ports, counters and drops by reason.
    Show {
        #[command(subcommand)]
        what: ShowWhat,
    },
    /// List rules with hit counters (ovs-ofctl dump-flows style); a filter
    /// in del-flows syntax lists only the rules it selects.
    DumpFlows { filter: Option<String> },
    /// Add rules in ovs-ofctl syntax (all or nothing).
    AddFlow {
        #[arg(required = true)]
        flows: Vec<String>,
    },
    /// Add rules from a file, one per line (# comments allowed).
    AddFlows { file: PathBuf },
    /// Delete rules matching a filter (no filter = all rules).
    DelFlows { filter: Option<String> },
    /// Add a group in ovs-ofctl syntax, e.g.
    /// 'group_id=1,type=select,bucket=output:2,bucket=output:3'.
    AddGroup { group: String },
    /// Replace a group (same syntax; its rules stay).
    ModGroup { group: String },
    /// Delete a group ('group_id=N'; none = every group) and the rules
    /// that name it.
    DelGroups { group: Option<String> },
    /// Groups with their buckets' packet and byte counters.
    DumpGroups,
    /// Add a meter in ovs-ofctl syntax, e.g.
    /// 'meter=1,kbps,burst,band=type=drop,rate=1000,burst_size=100'.
    AddMeter { meter: String },
    /// Replace a meter (same syntax; its rules stay, its bucket starts full).
    ModMeter { meter: String },
    /// Delete a meter ('meter=N'; none = every meter) and the rules that
    /// name it.
    DelMeters { meter: Option<String> },
    /// Meters with their packet, byte and band-drop counters.
    DumpMeters,
    /// The tables that hold rules: rule counts and matched packets.
    DumpTables,
    /// Connections in the PMDs' connection tables, as OVS's
    /// dpctl/dump-conntrack writes them ('zone=N': one zone only).
    DumpConntrack {
        zone: Option<String>,
        /// List at most this many (default 10000; the total is always
        /// given).
        #[arg(long)]
        limit: Option<usize>,
    },
    /// Remove every connection ('zone=N': of one zone only).
    FlushConntrack { zone: Option<String> },
    /// Add a port given as inline TOML, e.g. 'name="s2",id=3,type="sink"'.
    AddPort { port: String },
    /// Delete a port by name or number.
    DelPort { port: String },
    /// Zero the PMD counters and the receiver ports' traffic counters.
    ClearStats,
    /// Place every rx queue again by measured load, with the node's
    /// `pmd.rxq_assign` algorithm (OVS pmd-rxq-rebalance).
    PmdRebalance {
        /// Only print what would move, and the load variance before and
        /// after.
        #[arg(long)]
        dry_run: bool,
    },
    /// Move one rx queue to a PMD (by index, as `show rxqs` lists them);
    /// no packet is lost while it moves.
    PmdRxqMove {
        /// Port name or number.
        port: String,
        queue: usize,
        pmd: usize,
    },
    /// What the datapath would do with a packet given by its fields, e.g.
    /// 'in_port=1,udp,nw_dst=10.0.0.2,tp_dst=80' (unnamed fields are
    /// zero): the tier that decides it, the rule, each action and the
    /// packet after it, the outputs, what the caches keep (OVS
    /// ofproto/trace). A ct(table=T)'s tracked copy is followed into
    /// table T as the connection tracker's answer --ct-next says.
    Trace {
        flow: String,
        /// The connection states the tracker answers for the next tracked
        /// copy (ct(table=T)), OVS's flags: 'trk,new', 'trk,est,rpl',
        /// '+trk+est'. Once per copy, in the order they are looked up
        /// (round by round, each in the order its ct actions ran); copies
        /// past the last --ct-next get 'trk,new'.
        #[arg(long = "ct-next", value_name = "FLAGS")]
        ct_next: Vec<String>,
    },
}

#[derive(Subcommand)]
enum ShowWhat {
    Ports,
    Pmd,
    /// Service chains: per-VNF and per-chain rates and drops.
    Chains,
    /// Receiver ports: per stream received, lost, reordered, duplicates
    /// and latency (µs), since the last clear-stats.
    Traffic,
    /// The node: version, uptime, PMDs, memory and the REST API address.
    Node,
    /// Rx queues per PMD and their share of its cycles over the load
    /// history (OVS pmd-rxq-show); the auto load balancer's last word.
    Rxqs,
    /// OpenFlow: where the agent listens, each controller connected, its
    /// role, messages by type, errors and asynchronous messages.
    Controllers,
}

fn sockets_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("nfvswitch-") && n.ends_with(".sock"))
        })
        .collect()
}

fn find_socket(args: &CtlArgs) -> Result<PathBuf, String> {
    locate_socket(args.socket.as_deref(), args.config.as_deref())
}

/// The node's control socket: `socket` if given, else the one `config`
/// names, else the only nfvswitch socket that answers (also for `top`).
pub fn locate_socket(socket: Option<&Path>, config: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(s) = socket {
        return Ok(s.to_path_buf());
    }
    if let Some(c) = config {
        let cfg = nfv_config::load(c).map_err(|e| e.to_string())?;
        return Ok(cfg
            .control_socket
            .unwrap_or_else(|| nfv_control::default_socket(&cfg.name)));
    }
    let mut found = Vec::new();
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR") {
        found.extend(sockets_in(Path::new(&d)));
    }
    found.extend(sockets_in(Path::new("/tmp")));
    found.retain(|p| std::os::unix::net::UnixStream::connect(p).is_ok());
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err("no running nfvswitch found; give --socket PATH or --config NODE.toml".into()),
        _ => Err(format!(
            "several nfvswitch nodes are running ({}); pick one with --socket",
            found
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

fn call(socket: &Path, req: &Request) -> Result<serde_json::Value, String> {
    match request(socket, req)? {
        Response::Ok { data } => Ok(data),
        Response::Error { message } => Err(message),
    }
}

pub fn ctl(args: CtlArgs) -> Result<(), String> {
    let socket = find_socket(&args)?;
    let req = request_of(&args.cmd)?;
    let data = call(&socket, &req)?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&data).unwrap_or_default()
        );
        return Ok(());
    }
    print_answer(req, data)
}

/// The request a subcommand makes.
fn request_of(cmd: &CtlCommand) -> Result<Request, String> {
    Ok(match cmd {
        CtlCommand::Show { what } => show_request(what),
        CtlCommand::PmdRebalance { dry_run } => Request::PmdRebalance { dry_run: *dry_run },
        CtlCommand::PmdRxqMove { port, queue, pmd } => Request::PmdRxqMove {
            port: port.clone(),
            queue: *queue,
            pmd: *pmd,
        },
        CtlCommand::DumpFlows { filter } => Request::DumpFlows {
            filter: filter.clone().unwrap_or_default(),
        },
        CtlCommand::Trace { flow, ct_next } => Request::Trace {
            flow: flow.clone(),
            ct_next: ct_next.clone(),
        },
        CtlCommand::AddFlow { flows } => Request::AddFlows {
            flows: flows.clone(),
        },
        CtlCommand::AddFlows { file } => Request::AddFlows {
            flows: flows_file(file)?,
        },
        CtlCommand::DelFlows { filter } => Request::DelFlows {
            filter: filter.clone().unwrap_or_default(),
        },
        CtlCommand::AddPort { port } => Request::AddPort { port: port.clone() },
        CtlCommand::DelPort { port } => Request::DelPort { port: port.clone() },
        CtlCommand::ClearStats => Request::ClearStats,
        CtlCommand::AddGroup { group } => Request::AddGroup {
            group: group.clone(),
        },
        CtlCommand::ModGroup { group } => Request::ModGroup {
            group: group.clone(),
        },
        CtlCommand::DelGroups { group } => Request::DelGroups {
            group_id: group.as_deref().map(group_id_of).transpose()?,
        },
        CtlCommand::DumpGroups => Request::DumpGroups,
        CtlCommand::AddMeter { meter } => Request::AddMeter {
            meter: meter.clone(),
        },
        CtlCommand::ModMeter { meter } => Request::ModMeter {
            meter: meter.clone(),
        },
        CtlCommand::DelMeters { meter } => Request::DelMeters {
            meter_id: meter.as_deref().map(meter_id_of).transpose()?,
        },
        CtlCommand::DumpMeters => Request::DumpMeters,
        CtlCommand::DumpTables => Request::DumpTables,
        CtlCommand::DumpConntrack { zone, limit } => Request::DumpConntrack {
            zone: zone.as_deref().map(zone_of).transpose()?,
            limit: *limit,
        },
        CtlCommand::FlushConntrack { zone } => Request::FlushConntrack {
            zone: zone.as_deref().map(zone_of).transpose()?,
        },
    })
}

fn show_request(what: &ShowWhat) -> Request {
    match what {
        ShowWhat::Ports => Request::ShowPorts,
        ShowWhat::Pmd => Request::ShowPmd,
        ShowWhat::Chains => Request::ShowChains,
        ShowWhat::Traffic => Request::ShowTraffic,
        ShowWhat::Node => Request::ShowNode,
        ShowWhat::Rxqs => Request::ShowRxqs,
        ShowWhat::Controllers => Request::ShowControllers,
    }
}

/// The rules of an `add-flows` file: a line each, blank lines and `#`
/// comments skipped.
/// `group_id=N` (or just `N`) of `del-groups`.
fn group_id_of(text: &str) -> Result<u32, String> {
    let n = text.trim().strip_prefix("group_id=").unwrap_or(text.trim());
    n.parse().map_err(|_| format!("{text:?} is not group_id=N"))
}

/// `zone=N` (or just `N`) of `dump-conntrack` and `flush-conntrack`.
fn zone_of(text: &str) -> Result<u16, String> {
    let n = text.trim().strip_prefix("zone=").unwrap_or(text.trim());
    n.parse()
        .map_err(|_| format!("{text:?} is not zone=N (0-65535)"))
}

fn meter_id_of(text: &str) -> Result<u32, String> {
    let n = text.trim().strip_prefix("meter=").unwrap_or(text.trim());
    n.parse().map_err(|_| format!("{text:?} is not meter=N"))
}

fn flows_file(file: &Path) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect())
}

/// Prints the switch's answer to `req` for people.
/// Prints a report of type `T` from the answer's data with `text`.
fn show<T: serde::de::DeserializeOwned>(
    data: serde_json::Value,
    text: impl Fn(&T) -> String,
) -> Result<(), String> {
    let report: T =
        serde_json::from_value(data).map_err(|e| format!("unexpected response: {e}"))?;
    print!("{}", text(&report));
    Ok(())
}

fn print_answer(req: Request, data: serde_json::Value) -> Result<(), String> {
    let parse_err = |e: serde_json::Error| format!("unexpected response: {e}");
    match req {
        Request::ShowPorts => {
            let ports: Vec<PortReport> = serde_json::from_value(data).map_err(parse_err)?;
            print!("{}", ports_table(&ports));
            for p in ports.iter().filter(|p| p.error.is_some()) {
                println!(
                    "port {} {:?} is not running: {}",
                    p.no,
                    p.name,
                    p.error.as_deref().unwrap_or_default()
                );
            }
        }
        Request::ShowPmd => show(data, |r: &Vec<PmdReport>| pmd_text(r))?,
        Request::ShowChains => show(data, |r: &Vec<ChainReport>| chains_text(r))?,
        Request::ShowControllers => println!("{}", controllers_text(&data)),
        Request::ShowTraffic => show(data, |r: &Vec<TrafficReport>| traffic_text(r))?,
        Request::DumpFlows { .. } => {
            let flows: Vec<FlowReport> = serde_json::from_value(data).map_err(parse_err)?;
            for f in flows {
                println!(
                    " duration={:.3}s, n_packets={}, n_bytes={}, idle_age={}, {}",
                    f.duration_secs, f.n_packets, f.n_bytes, f.idle_age_secs as u64, f.rule
                );
            }
        }
        Request::AddFlows { .. } => println!("added {} flow(s)", data["added"]),
        Request::DelFlows { .. } => println!("deleted {} flow(s)", data["deleted"]),
        Request::AddPort { .. } => println!("added port {}", data["added"]),
        Request::DelPort { .. } => println!("deleted port {}", data["deleted"]),
        Request::ClearStats => println!("PMD and receiver counters cleared"),
        Request::AddGroup { .. } => println!("added group {}", data["added"]),
        Request::ModGroup { .. } => println!("modified group {}", data["modified"]),
        Request::DelGroups { .. } => println!(
            "deleted {} group(s) and {} flow(s) naming them",
            data["deleted"], data["rules_deleted"]
        ),
        Request::DumpGroups => show(data, |r: &Vec<nfv_control::protocol::GroupReport>| {
            groups_text(r)
        })?,
        Request::DumpTables => show(data, |r: &Vec<nfv_control::protocol::TableReport>| {
            tables_text(r)
        })?,
        Request::AddMeter { .. } => println!("added meter {}", data["added"]),
        Request::ModMeter { .. } => println!("modified meter {}", data["modified"]),
        Request::DelMeters { .. } => println!(
            "deleted {} meter(s) and {} flow(s) naming them",
            data["deleted"], data["rules_deleted"]
        ),
        Request::DumpMeters => show(data, |r: &Vec<nfv_control::protocol::MeterReport>| {
            meters_text(r)
        })?,
        Request::DumpConntrack { .. } => {
            show(data, |r: &nfv_control::protocol::ConntrackReport| {
                conntrack_text(r)
            })?
        }
        Request::FlushConntrack { .. } => println!("flushed {} connection(s)", data["flushed"]),
        Request::ShowNode => show(data, |r: &NodeReport| node_text(r))?,
        Request::ShowRxqs => show(data, |r: &RxqsReport| rxqs_text(r))?,
        Request::PmdRebalance { .. } => show(data, |r: &RebalanceReport| rebalance_text(r))?,
        Request::PmdRxqMove { port, queue, pmd } => {
            println!("rx queue {queue} of port {port} is now polled by PMD {pmd}")
        }
        Request::Trace { .. } => show(data, |r: &TraceReport| trace_text(r))?,
    }
    Ok(())
}

/// `dump-conntrack`: a line per connection, then how many there are when
/// the list was cut short.
pub fn conntrack_text(r: &nfv_control::protocol::ConntrackReport) -> String {
    let mut out: String = r
        .connections
        .iter()
        .map(|c| format!("{}\n", c.text))
        .collect();
    if (r.connections.len() as u64) < r.total {
        out += &format!(
            "({} of {} connections listed; --limit lists more)\n",
            r.connections.len(),
            r.total
        );
    }
    out
}

/// `dump-tables`: one line per table that holds rules.
pub fn tables_text(tables: &[nfv_control::protocol::TableReport]) -> String {
    tables
        .iter()
        .map(|t| {
            format!(
                " table={}: active={}, matched={} packets, {} bytes\n",
                t.table, t.rules, t.matched_packets, t.matched_bytes
            )
        })
        .collect()
}

/// `dump-meters`: one line per meter, with its counters.
pub fn meters_text(meters: &[nfv_control::protocol::MeterReport]) -> String {
    if meters.is_empty() {
        return "no meters\n".into();
    }
    meters
        .iter()
        .map(|m| {
            format!(
                "{} packets={} bytes={} band: dropped packets={} bytes={} rules={}\n",
                m.meter, m.packets, m.bytes, m.band_packets, m.band_bytes, m.rules
            )
        })
        .collect()
}

/// `dump-groups`: each group as `add-group` text, then its buckets'
/// counters (as `ovs-ofctl dump-group-stats` pairs them).
pub fn groups_text(groups: &[nfv_control::protocol::GroupReport]) -> String {
    if groups.is_empty() {
        return "no groups\n".into();
    }
    let mut out = String::new();
    for g in groups {
        out += &format!(" {} ({} rule(s))\n", g.group, g.rules);
        for (i, b) in g.buckets.iter().enumerate() {
            out += &format!(
                "  bucket{i}: packet_count={}, byte_count={}, actions={}\n",
                b.packets, b.bytes, b.actions
            );
        }
    }
    out
}

pub fn rxqs_text(r: &RxqsReport) -> String {
    let mut out = if r.intervals == 0 {
        format!(
            "rx queue assignment {}; no {} s interval has ended yet: figures since the start\n",
            r.algorithm, r.interval_secs
        )
    } else {
        format!(
            "rx queue assignment {}; load over the last {} x {} s\n",
            r.algorithm, r.intervals, r.interval_secs
        )
    };
    for p in &r.pmds {
        let busy = p
            .busy_percent
            .map_or("-".to_string(), |b| format!("{b:.1} %"));
        out.push_str(&format!(
            "pmd {} (core {}): busy {busy}\n",
            p.pmd,
            p.core.map_or("-".to_string(), |c| c.to_string())
        ));
        for q in &p.rxqs {
            out.push_str(&format!(
                "  port {:<5} {:<20} queue {:<3} usage {:>5.1} %\n",
                q.port, q.name, q.queue, q.usage_percent
            ));
        }
    }
    if r.auto_lb {
        out.push_str(&format!(
            "auto load balance: on, {} rebalance(s); last check: {}\n",
            r.auto_lb_rebalances,
            r.last_auto_lb.as_deref().unwrap_or("none yet")
        ));
    } else {
        out.push_str("auto load balance: off\n");
    }
    out
}

pub fn rebalance_text(r: &RebalanceReport) -> String {
    let verb = if r.dry_run { "would move" } else { "moved" };
    let mut out = format!(
        "{} ({}): {} {} queue(s)\n",
        if r.dry_run { "dry run" } else { "rebalanced" },
        r.algorithm,
        verb,
        r.moves.len()
    );
    for m in &r.moves {
        out.push_str(&format!(
            "  port {} {} queue {}: pmd {} -> {}\n",
            m.port, m.name, m.queue, m.from, m.to
        ));
    }
    let loads = |v: &[f64]| {
        v.iter()
            .map(|l| format!("{l:.1}"))
            .collect::<Vec<_>>()
            .join(" / ")
    };
    out.push_str(&format!(
        "PMD loads % {} -> {}; variance {:.1} -> {:.1} ({:.0} % better)\n",
        loads(&r.current_loads),
        loads(&r.estimated_loads),
        r.current_variance,
        r.estimated_variance,
        r.improvement_percent
    ));
    out
}

pub fn drops_text(d: &std::collections::BTreeMap<String, u64>) -> String {
    if d.is_empty() {
        return "0".into();
    }
    d.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

pub fn ports_table(ports: &[PortReport]) -> Table {
    use nfv_ports::PORT_FIGURES;
    // Per direction: the figures with a column of their own, as
    // `PORT_FIGURES` declares them, then the direction's rates; the drops
    // by reason last.
    let shown = |rx: bool| {
        PORT_FIGURES
            .iter()
            .filter_map(move |f| Some((f, f.export(rx)?.column?)))
    };
    let mut head = vec!["port", "name", "type"];
    head.extend(shown(true).map(|(_, c)| c).chain(["rx Mpps", "rx Gbps"]));
    head.extend(shown(false).map(|(_, c)| c).chain(["tx Mpps", "tx Gbps"]));
    head.extend(["rx drops", "tx drops"]);
    let mut t = Table::new(&head);
    for p in ports {
        let mut row = vec![p.no.to_string(), p.name.clone(), p.type_name.clone()];
        for (rx, d) in [(true, &p.rx), (false, &p.tx)] {
            row.extend(shown(rx).map(|(f, _)| (f.get)(&d.figures).to_string()));
            row.extend([format!("{:.3}", d.mpps), format!("{:.3}", d.gbps)]);
        }
        row.extend([drops_text(&p.rx.drops), drops_text(&p.tx.drops)]);
        t.row(row);
    }
    t
}

pub fn pmd_text(pmds: &[PmdReport]) -> String {
    pmd_table(pmds) + &crate::pmu_text::pmu_lines(pmds)
}

/// The PMD table and what its cycles are, without the PMU lines.
pub fn pmd_table(pmds: &[PmdReport]) -> String {
    use nfv_datapath::stats::{FigureUnit, PMD_FIGURES};
    // The figures with a column of their own, as `PMD_FIGURES` declares
    // them, between the derived rates and the queue list.
    let shown: Vec<_> = PMD_FIGURES.iter().filter(|f| f.column.is_some()).collect();
    let mut head = vec![
        "pmd",
        "core",
        "Mpps",
        "busy %",
        "cyc/pkt",
        "switch cyc/pkt",
        "pkts/iter",
    ];
    head.extend(shown.iter().filter_map(|f| f.column));
    head.push("rx queues");
    let mut t = Table::new(&head);
    for p in pmds {
        let mut row = vec![
            p.index.to_string(),
            p.core.map_or("-".into(), |c| c.to_string()),
            format!("{:.3}", p.mpps),
            format!("{:.1}", p.busy_percent),
            fmt_opt(p.cycles_per_packet, 1),
            fmt_opt(p.switch_cycles_per_packet, 1),
            format!("{:.1}", p.packets_per_batch),
        ];
        row.extend(shown.iter().map(|f| {
            let v = (f.get)(&p.figures);
            match f.unit {
                FigureUnit::Bytes => (v >> 10).to_string(),
                _ => v.to_string(),
            }
        }));
        row.push(p.rx_queues.join(" "));
        t.row(row);
    }
    let hz = pmds.first().map_or(0, |p| p.tsc_hz);
    format!(
        "{t}(cycles are TSC cycles at {:.3} GHz; rates and cycles over the last second)\n",
        hz as f64 / 1e9
    )
}

pub fn chains_text(chains: &[ChainReport]) -> String {
    use nfv_control::vnf_figures::{VNF_FIGURES, VnfValue};
    if chains.is_empty() {
        return "no chains configured\n".into();
    }
    // A row per VNF with the figures `VNF_FIGURES` gives a column, then
    // the chain's total under the columns that have one.
    let shown: Vec<_> = VNF_FIGURES.iter().filter(|f| f.column.is_some()).collect();
    let mut head = vec!["chain", "hop", "VNF"];
    head.extend(shown.iter().filter_map(|f| f.column));
    let mut t = Table::new(&head);
    for c in chains {
        for (i, v) in c.vnfs.iter().enumerate() {
            let mut row = vec![c.name.clone(), (i + 1).to_string(), v.name.clone()];
            row.extend(shown.iter().map(|f| match (f.get)(v) {
                VnfValue::Real(x) => format!("{x:.3}"),
                VnfValue::Count(n) => n.to_string(),
                VnfValue::Flag(true) => "yes".into(),
                VnfValue::Flag(false) => "NO".into(),
            }));
            t.row(row);
        }
        let mut total = vec![c.name.clone(), "total".into(), c.hops.join(" > ")];
        total.extend(shown.iter().map(|f| chain_cell(c, f.name)));
        t.row(total);
    }
    t.to_string()
}

/// What a chain's total row shows under the column of VNF figure `name`:
/// traffic in under the VNFs' rx rate, out under their tx rates, the loss
/// under their drops.
fn chain_cell(c: &ChainReport, name: &str) -> String {
    match name {
        "rx_mpps" => format!("{:.3}", c.ingress_mpps),
        "tx_mpps" => format!("{:.3}", c.egress_mpps),
        "tx_gbps" => format!("{:.3}", c.egress_gbps),
        "drops" => format!("{:.2}%", c.loss_percent),
        _ => String::new(),
    }
}

fn us(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1e3)
}

pub fn traffic_text(reports: &[TrafficReport]) -> String {
    if reports.is_empty() {
        return "no receiver ports\n".into();
    }
    let mut t = Table::new(&[
        "receiver",
        "from",
        "received",
        "lost",
        "reordered",
        "dups",
        "late",
        "min us",
        "mean us",
        "p50 us",
        "p99 us",
        "p99.9 us",
        "max us",
    ]);
    let mut notes = String::new();
    for r in reports {
        for s in &r.streams {
            let mut row = vec![
                r.name.clone(),
                format!("port {} q{}", s.src_port, s.src_queue),
                s.received.to_string(),
                s.lost.to_string(),
                s.reordered.to_string(),
                s.duplicates.to_string(),
                s.late.to_string(),
            ];
            match &s.latency {
                Some(l) => row.extend([
                    us(l.min_ns),
                    format!("{:.3}", l.mean_ns / 1e3),
                    us(l.p50_ns),
                    us(l.p99_ns),
                    us(l.p999_ns),
                    us(l.max_ns),
                ]),
                None => row.extend(std::iter::repeat_n("-".to_string(), 6)),
            }
            t.row(row);
        }
        if r.streams.is_empty() {
            notes.push_str(&format!("{}: no stamped traffic yet\n", r.name));
        }
        if r.unstamped > 0 || r.untracked > 0 {
            notes.push_str(&format!(
                "{}: {} frames without a stamp, {} of untracked streams\n",
                r.name, r.unstamped, r.untracked
            ));
        }
    }
    format!(
        "{t}{notes}(lost = sequence gaps; latency from the generator's TSC stamp to the receiver)\n"
    )
}

pub fn node_text(n: &NodeReport) -> String {
    let cores: Vec<String> = n
        .pmd_cores
        .iter()
        .map(|c| c.map_or("-".into(), |c| c.to_string()))
        .collect();
    format!(
        "node {} (nfvswitch {}), up {:.0} s\n  \
         PMDs: {} on cores [{}]\n  \
         ports: {}, flows: {} (expired: {} idle, {} hard), chains: {}\n  \
         memory: {} x {} B ({} free), hugepages {}, backing {}\n  \
         REST API: {}\n",
        n.name,
        n.version,
        n.uptime_secs,
        n.pmds,
        cores.join(", "),
        n.ports,
        n.flows,
        n.flows_expired_idle,
        n.flows_expired_hard,
        n.chains,
        n.memory.frames,
        n.memory.frame_size,
        n.memory.free_frames,
        n.memory.hugepages,
        n.memory.backing,
        n.api.map_or("off".into(), |a| format!("http://{a}/"))
    ) + &access_text(n)
}

/// Where the API's token is and what attachments may use.
fn access_text(n: &NodeReport) -> String {
    let mut s = String::new();
    if let Some(t) = &n.api_token_file {
        s += &format!("  API token: {} (changes need it)\n", t.display());
    }
    s += &format!(
        "  attachment sockets: {}\n",
        n.socket_dir
            .as_ref()
            .map_or("none ([node] socket_dir not set)".into(), |d| d
                .display()
                .to_string())
    );
    if n.attachments_refused > 0 {
        s += &format!(
            "  attachments refused at restore: {}\n",
            n.attachments_refused
        );
    }
    s
}

/// `show controllers` as text: the listeners, then a line per connection.
fn controllers_text(v: &serde_json::Value) -> String {
    let listen: Vec<&str> = v["listen"]
        .as_array()
        .map(|a| a.iter().filter_map(|x| x.as_str()).collect())
        .unwrap_or_default();
    if listen.is_empty() {
        return "OpenFlow: not listening ([openflow] listen is empty)".into();
    }
    let mut out = format!(
        "OpenFlow 1.3, datapath id {}, listening on {}\n",
        v["datapath_id"].as_str().unwrap_or("?"),
        listen.join(", ")
    );
    let figures = |k: &str| -> String {
        v[k].as_object()
            .map(|o| {
                o.iter()
                    .map(|(k, n)| format!("{k}={n}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default()
    };
    out += &format!("  packet-in: {}\n", figures("packet_in"));
    out += &format!("  packet-out: {}\n", figures("packet_out"));
    let conns = v["connections"].as_array().cloned().unwrap_or_default();
    if conns.is_empty() {
        out += "  no controller connected\n";
    }
    for c in conns {
        let received: Vec<String> = c["received"]
            .as_object()
            .map(|o| o.iter().map(|(k, n)| format!("{k}={n}")).collect())
            .unwrap_or_default();
        out += &format!(
            "  #{} {} role={} errors_sent={} async_sent={} async_dropped={}\n    received: {}\n",
            c["id"],
            c["peer"].as_str().unwrap_or("?"),
            c["role"].as_str().unwrap_or("?"),
            c["errors_sent"],
            c["async_sent"],
            c["async_dropped"],
            received.join(" ")
        );
    }
    out.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use nfv_control::protocol::{DirectionReport, QueueReport, VnfReport};
    use nfv_ports::QueueFigures;

    fn port(no: u16, name: &str, drops: &[(&str, u64)]) -> PortReport {
        let dir = |packets, mpps| DirectionReport {
            figures: QueueFigures {
                packets,
                bytes: packets * 64,
                ..Default::default()
            },
            drops: drops.iter().map(|(r, n)| (r.to_string(), *n)).collect(),
            mpps,
            gbps: mpps * 0.512,
        };
        PortReport {
            no,
            name: name.into(),
            type_name: "ring".into(),
            rx: dir(1_000_000, 1.25),
            tx: dir(999, 0.0),
            rx_queues: vec![QueueReport {
                queue: 0,
                pmd: Some(0),
                figures: QueueFigures {
                    packets: 1_000_000,
                    bytes: 64_000_000,
                    cycles: 9_000_000,
                },
                drops: 0,
            }],
            tx_queues: Vec::new(),
            info: Default::default(),
            error: None,
        }
    }

    fn vnf(name: &str, port: u16, connected: bool) -> VnfReport {
        VnfReport {
            name: name.into(),
            port,
            rx_mpps: 2.5,
            rx_gbps: 1.28,
            tx_mpps: 2.25,
            tx_gbps: 1.152,
            rx_packets: 10,
            tx_packets: 9,
            drops: 1,
            connected,
        }
    }

    /// The columns and cells of `show ports` and `show chains`, as
    /// operators and scripts read them.
    #[test]
    fn ports_and_chains_tables_keep_their_columns() {
        let t = ports_table(&[
            port(1, "a", &[]),
            port(12, "bb", &[("tx_full", 3), ("no_match", 2)]),
        ]);
        assert_eq!(
            t.to_string(),
            concat!(
                "port  name  type  rx pkts  rx Mpps  rx Gbps  tx pkts  tx Mpps  tx Gbps  rx drops              tx drops\n",
                "   1  a     ring  1000000    1.250    0.640      999    0.000    0.000                     0                     0\n",
                "  12  bb    ring  1000000    1.250    0.640      999    0.000    0.000  no_match=2,tx_full=3  no_match=2,tx_full=3\n",
            )
        );
        let c = ChainReport {
            name: "c1".into(),
            hops: vec!["in".into(), "v1".into(), "v2".into(), "out".into()],
            ingress_mpps: 3.0,
            egress_mpps: 2.0,
            egress_gbps: 1.024,
            loss_percent: 33.333,
            vnfs: vec![vnf("v1", 3, true), vnf("v2", 4, false)],
        };
        assert_eq!(
            chains_text(&[c]),
            concat!(
                "chain  hop    VNF                 rx Mpps  rx Gbps  tx Mpps  tx Gbps  drops   connected\n",
                "c1         1  v1                    2.500    1.280    2.250    1.152       1  yes\n",
                "c1         2  v2                    2.500    1.280    2.250    1.152       1  NO\n",
                "c1     total  in > v1 > v2 > out    3.000             2.000    1.024  33.33%\n",
            )
        );
    }
}
