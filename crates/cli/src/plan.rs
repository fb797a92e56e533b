//! `nfvswitch plan TOPOLOGY.toml`: for the node and service a topology
//! file describes, what each I/O mode (SR-IOV VFs, nfvswitch copy and
//! one-copy, hybrid) would deliver, what binds it, the cores it needs, and
//! which to use. The model is `nfv_plan`'s; the cost figures come from a
//! profile written by `nfvswitch calibrate`, else the built-in default
//! (and the output says so). Table, `--json`, and a PNG chart of the
//! predicted rate against N per mode (the sweep charts' style).

use crate::sweep::chart::{COLORS, DrawResult, FONT, draw_line_with_dots, draw_n_mesh, load_font};
use crate::table::Table;
use clap::Args;
use nfv_plan::{Mode, Nic, Offered, Plan, Point, Prediction, Profile, Topology};
use plotters::prelude::*;
use std::path::{Path, PathBuf};

#[derive(Args)]
pub struct PlanArgs {
    /// Topology file (TOML; see `examples/plan-*.toml` and
    /// `--explain-topology`).
    #[arg(required_unless_present = "explain_topology")]
    topology: Option<PathBuf>,
    /// Print every key a topology file takes, with its unit and default,
    /// and exit.
    #[arg(long)]
    explain_topology: bool,
    /// Cost profile written by `nfvswitch calibrate` (default: the
    /// built-in one, from another machine).
    #[arg(long)]
    profile: Option<PathBuf>,
    /// The plan as JSON (for machines) instead of tables.
    #[arg(long)]
    json: bool,
    /// Also draw the predicted Mpps against N, per mode, into this PNG.
    #[arg(long, value_name = "OUT.png")]
    chart: Option<PathBuf>,
}

pub fn load_profile(path: Option<&Path>) -> Result<Profile, String> {
    match path {
        None => Ok(Profile::builtin()),
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
            Profile::from_json(&text).map_err(|e| format!("{}: {e}", p.display()))
        }
    }
}

/// A chart path that `draw` can write: a PNG in an existing directory,
/// checked before planning so a bad path fails first, not after the
/// tables. A file this makes for the check is removed again.
fn check_chart(out: &Path) -> Result<(), String> {
    let png = out
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("png"));
    if !png {
        return Err(format!(
            "--chart {}: charts are PNG only; give a path ending in .png",
            out.display()
        ));
    }
    let existed = out.exists();
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(out)
        .map_err(|e| format!("--chart {}: cannot write it: {e}", out.display()))?;
    if !existed {
        let _ = std::fs::remove_file(out);
    }
    Ok(())
}

pub fn plan(args: PlanArgs) -> Result<(), String> {
    if args.explain_topology {
        print!("{}", nfv_plan::topology::explain());
        return Ok(());
    }
    let Some(path) = &args.topology else {
        return Err("a topology file is needed (see --explain-topology)".into());
    };
    if let Some(out) = &args.chart {
        check_chart(out)?;
    }
    let topo = nfv_plan::topology::load(path).map_err(|e| e.to_string())?;
    let profile = load_profile(args.profile.as_deref())?;
    let plan = nfv_plan::plan(&topo, &profile);
    if args.json {
        let v = serde_json::json!({ "node": topo.node, "service": topo.service, "plan": plan });
        println!(
            "{}",
            serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?
        );
    } else {
        print!("{}", text(&topo, &profile, &plan));
    }
    if let Some(out) = &args.chart {
        let font = load_font().is_some();
        draw(&plan, out, font).map_err(|e| format!("--chart {}: {e}", out.display()))?;
        if !args.json {
            println!("wrote {}", out.display());
            if !font {
                println!("note: no TrueType font found, so the chart has no text");
            }
        }
    }
    Ok(())
}

fn node_line(t: &Topology) -> String {
    let nic = match &t.node.nic {
        Nic::Pci {
            ports,
            port_gbps,
            pcie,
            vfs,
            engine,
        } => format!(
            "{ports} x {port_gbps} Gbps, PCIe Gen{} x{} ({:.1} Gbps each way), {vfs} VFs; {}",
            pcie.generation,
            pcie.lanes,
            pcie.bits_per_second() / 1e9,
            engine_text(engine)
        ),
        Nic::Testbed => "the sweep test bed's generator and sink (no wire, no PCIe)".into(),
    };
    format!(
        "node: {} switch core(s), {} VNF core(s); NIC: {nic}",
        t.node.switch_cores, t.node.vnf_cores
    )
}

/// The controller's limits in words.
fn engine_text(e: &nfv_plan::nic::Engine) -> String {
    if e.unknown() {
        return "controller limits unknown (PCIe-bound upper bound)".into();
    }
    let model = e.model.as_ref().map_or(String::new(), |m| format!("{m}: "));
    let f = |v: Option<f64>| v.map_or("unknown".into(), |x| format!("{x} Mpps"));
    format!(
        "{model}packet rate {}, VF-to-VF {}",
        f(e.packet_rate_mpps),
        f(e.hairpin_mpps)
    )
}

/// The human-readable plan.
pub fn text(t: &Topology, profile: &Profile, plan: &Plan) -> String {
    let mut out = header(t, profile, plan);
    let (tables, short) = tables(t, plan);
    out += &tables;
    out += &cores_note(t, short);
    out += "\n\nrecommendations:\n";
    for pt in &plan.points {
        out += &format!("  N={} {}: {}\n", pt.vnfs, pt.frames.label(), pt.why);
    }
    out
}

/// The topology's name, node, service and profile, and the plan's notes.
fn header(t: &Topology, profile: &Profile, plan: &Plan) -> String {
    let mut out = format!("plan: {}\n{}\n", t.name, node_line(t));
    let offered = match t.service.offered {
        Offered::Line => "line rate".to_string(),
        Offered::Gbps(g) => format!("{g} Gbps"),
        Offered::Mpps(m) => format!("{m} Mpps"),
    };
    out += &format!(
        "service: {} VNFs on {}, offered {offered}\n",
        t.service.shape.describe(),
        t.service.interface,
    );
    let m = &profile.machine;
    out += &format!(
        "profile: {} ({}, {:.2} GHz TSC, {} cores, kernel {}, {}); cycles at {:.2} GHz\n",
        profile.source, m.cpu_model, m.tsc_ghz, m.cores, m.kernel, m.taken_at, plan.tsc_ghz
    );
    for n in &plan.notes {
        out += &format!("note: {n}\n");
    }
    out
}

/// A table per frame mix, a row per N and mode; and whether some row
/// needs more cores than the node has.
fn tables(t: &Topology, plan: &Plan) -> (String, bool) {
    let mut out = String::new();
    let mut last = None;
    let mut table = None::<Table>;
    let mut short = false;
    for pt in &plan.points {
        if last != Some(pt.frames) {
            if let Some(t) = table.take() {
                out += &format!("{t}");
            }
            out += &format!("\n{}:\n", pt.frames.label());
            table = Some(Table::new(&[
                "N",
                "mode",
                "Mpps",
                "Gbps",
                "VNF tx Mpps",
                "bottleneck",
                "switch cores",
                "VNF cores",
                "VFs",
                "",
            ]));
            last = Some(pt.frames);
        }
        let Some(tb) = table.as_mut() else { continue };
        for p in &pt.predictions {
            tb.row(prediction_row(t, pt, p, &mut short));
        }
    }
    if let Some(t) = table {
        out += &format!("{t}");
    }
    (out, short)
}

/// One mode at one point; `short` is set when it needs more cores than
/// the node has.
fn prediction_row(t: &Topology, pt: &Point, p: &Prediction, short: &mut bool) -> Vec<String> {
    let star = if pt.recommended == Some(p.mode) {
        "<- recommended"
    } else {
        ""
    };
    match &p.unavailable {
        Some(why) => vec![
            pt.vnfs.to_string(),
            p.mode.as_str().into(),
            "-".into(),
            "-".into(),
            "-".into(),
            format!("unavailable: {why}"),
        ],
        None => vec![
            pt.vnfs.to_string(),
            p.mode.as_str().into(),
            format!("{:.3}", p.mpps),
            format!("{:.2}", p.gbps),
            format!("{:.3}", p.vnf_tx_mpps),
            bottleneck_cell(t, p),
            cores_cell(p.switch_cores_needed, t.node.switch_cores, short),
            cores_cell(p.vnf_cores_needed, t.node.vnf_cores, short),
            p.vfs_needed.to_string(),
            star.into(),
        ],
    }
}

/// The bottleneck's name; the PCIe link of a NIC whose controller limits
/// are unknown is marked an upper bound.
fn bottleneck_cell(t: &Topology, p: &Prediction) -> String {
    let unknown = matches!(&t.node.nic, Nic::Pci { engine, .. } if engine.unknown());
    match p.bottleneck {
        None => "-".into(),
        Some(nfv_plan::Bottleneck::PcieLink) if unknown => {
            "PCIe link (unknown NIC: upper bound)".into()
        }
        Some(b) => b.as_str().into(),
    }
}

/// What the cores columns mean, and (`short`) what "a > b" in them does.
fn cores_note(t: &Topology, short: bool) -> String {
    let mut out = String::from(
        "\ncolumns: N = VNFs; Mpps = million packets per second delivered, all chains \
         together; Gbps = that rate times the mean frame size (without preamble and gap); \
         VNF tx Mpps = the sum of what every VNF transmits (the seeds' GUI aggregate); \
         bottleneck = the limit that binds; VFs = virtual functions used.\nswitch cores, VNF \
         cores: what the hardware's rate (NIC, PCIe) would take.",
    );
    out += match t.service.vnf_poll {
        nfv_plan::VnfPoll::Busy => {
            " Busy-polling VNFs (vnf_poll = \"busy\", the default) take a core each, whatever \
             their load."
        }
        nfv_plan::VnfPoll::Adaptive => {
            " Adaptive VNFs (vnf_poll = \"adaptive\") take the cycles their packets cost."
        }
    };
    if short {
        out += &format!(
            " \"a > b\": a cores, more than the node's b — that mode cannot reach the \
             hardware's rate on this node (its {sw} switch and {vnf} VNF cores); its Mpps is what \
             they carry.",
            sw = t.node.switch_cores,
            vnf = t.node.vnf_cores
        );
    }
    out
}

/// `needed` cores, marked when the node has fewer (`have`).
fn cores_cell(needed: u32, have: u32, short: &mut bool) -> String {
    if needed > have {
        *short = true;
        format!("{needed} > {have}")
    } else {
        needed.to_string()
    }
}

/// One panel per frame mix: predicted Mpps against N, a line per mode.
fn draw(plan: &Plan, path: &Path, text: bool) -> DrawResult {
    let mut frames = Vec::new();
    for p in &plan.points {
        if !frames.contains(&p.frames) {
            frames.push(p.frames);
        }
    }
    let panels = frames.len().max(1);
    let legend_w = if text { 200 } else { 0 };
    let root = BitMapBackend::new(path, (560 * panels as u32 + legend_w, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let body = if text {
        root.titled(
            &format!(
                "Predicted Mpps vs N — {} (profile: {})",
                plan.topology, plan.profile
            ),
            (FONT, 20),
        )?
    } else {
        root.clone()
    };
    let (plots, legend) = body.split_horizontally(560 * panels as u32);
    let ns: Vec<u32> = plan.points.iter().map(|p| p.vnfs).collect();
    let (lo, hi) = (
        ns.iter().copied().min().unwrap_or(1),
        ns.iter().copied().max().unwrap_or(1),
    );
    for (area, &f) in plots.split_evenly((1, panels)).iter().zip(&frames) {
        let pts: Vec<_> = plan.points.iter().filter(|p| p.frames == f).collect();
        let ymax = pts
            .iter()
            .flat_map(|p| p.predictions.iter().map(|x| x.mpps))
            .fold(0.0, f64::max);
        let ymax = if ymax > 0.0 { ymax * 1.08 } else { 1.0 };
        let mut b = ChartBuilder::on(area);
        b.margin(16);
        if text {
            b.caption(f.label(), (FONT, 18))
                .x_label_area_size(44)
                .y_label_area_size(60);
        }
        let mut chart = b.build_cartesian_2d((lo as f64 - 0.4)..(hi as f64 + 0.4), 0.0..ymax)?;
        let n_range = (lo as usize, hi as usize);
        draw_n_mesh(&mut chart, n_range, "predicted Mpps", (15, None), text)?;
        for (i, &m) in Mode::ALL.iter().enumerate() {
            let line: Vec<(f64, f64)> = pts
                .iter()
                .filter_map(|p| {
                    let x = p.predictions.iter().find(|x| x.mode == m)?;
                    x.unavailable.is_none().then_some((p.vnfs as f64, x.mpps))
                })
                .collect();
            draw_line_with_dots(&mut chart, &line, COLORS[i % COLORS.len()])?;
        }
    }
    if text {
        legend.draw(&Text::new("mode", (4, 60), (FONT, 16)))?;
        for (i, m) in Mode::ALL.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let y = 92 + 26 * i as i32;
            legend.draw(&PathElement::new(
                vec![(4, y), (34, y)],
                color.stroke_width(3),
            ))?;
            legend.draw(&Circle::new((19, y), 4, color.filled()))?;
            legend.draw(&Text::new(m.as_str(), (42, y - 8), (FONT, 15)))?;
        }
    }
    root.present()?;
    Ok(())
}
