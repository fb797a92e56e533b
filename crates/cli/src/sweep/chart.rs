//! PNG charts of a sweep with `plotters` (bitmap backend): Mpps and Gbps
//! against N, one line per frame size, one panel per topology (north-south
//! left, east-west right) on a shared y scale.
//!
//! Text is drawn with plotters' pure-Rust `ab_glyph` renderer, which needs
//! a TrueType font registered at run time: `$NFVSWITCH_FONT` (`none`: no
//! text), else DejaVu
//! Sans or Liberation Sans where distributions install them (Debian:
//! `fonts-dejavu-core`). No font is shipped. Without one the charts are
//! drawn without text (lines, points and grid only) and the caller says so.

use super::report::SweepReport;
use crate::topology::{Measurement, Topology};
use plotters::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Where distributions put a sans-serif TrueType font.
const FONT_CANDIDATES: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", // Debian, Ubuntu
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf", // Fedora
    "/usr/share/fonts/TTF/DejaVuSans.ttf",             // Arch
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",          // Alpine, older Fedora
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation-sans/LiberationSans-Regular.ttf",
];

pub(crate) const FONT: &str = "sans-serif";

/// Line colours per frame size (Tableau 10).
pub(crate) const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// Registers a font for chart text once per process; returns its path, or
/// `None` when no usable font was found (charts then have no text).
pub fn load_font() -> Option<&'static Path> {
    static LOADED: OnceLock<Option<PathBuf>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            let env = std::env::var_os("NFVSWITCH_FONT").map(PathBuf::from);
            if env.as_deref() == Some(Path::new("none")) {
                return None;
            }
            env.into_iter()
                .chain(FONT_CANDIDATES.iter().map(PathBuf::from))
                .find(|p| {
                    let Ok(bytes) = std::fs::read(p) else {
                        return false;
                    };
                    // plotters keeps a 'static reference: the font lives
                    // as long as the process (one font, a few hundred KiB).
                    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                    plotters::style::register_font(FONT, FontStyle::Normal, bytes).is_ok()
                })
        })
        .as_deref()
}

/// The quantity a chart shows.
#[derive(Clone, Copy)]
pub enum Metric {
    Mpps,
    Gbps,
}

impl Metric {
    fn of(self, m: &Measurement) -> f64 {
        match self {
            Metric::Mpps => m.mpps,
            Metric::Gbps => m.gbps,
        }
    }
    fn unit(self) -> &'static str {
        match self {
            Metric::Mpps => "Mpps",
            Metric::Gbps => "Gbps",
        }
    }
    fn file(self) -> &'static str {
        match self {
            Metric::Mpps => "mpps_vs_n.png",
            Metric::Gbps => "gbps_vs_n.png",
        }
    }
}

/// Draws `dir/mpps_vs_n.png` and `dir/gbps_vs_n.png`; with `text` false,
/// without captions, labels and legends. Returns the paths.
pub fn draw_all(r: &SweepReport, dir: &Path, text: bool) -> Result<Vec<PathBuf>, String> {
    [Metric::Mpps, Metric::Gbps]
        .into_iter()
        .map(|m| {
            let path = dir.join(m.file());
            draw(r, &path, m, text).map_err(|e| format!("{}: {e}", path.display()))?;
            Ok(path)
        })
        .collect()
}

pub(crate) type DrawResult = Result<(), Box<dyn std::error::Error>>;

/// A chart of some figure (y) against N, the number of VNFs (x).
pub(crate) type NChart<'a, 'b> = ChartContext<
    'a,
    BitMapBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// The grid of a chart against N: a label per N from `lo` to `hi`, faint
/// lines. With `text`, the axis names (`y_desc`) and labels in
/// `label_font` points (axis names in `desc_font` when given); without
/// it, grid lines at the label positions and no text.
pub(crate) fn draw_n_mesh(
    chart: &mut NChart<'_, '_>,
    (lo, hi): (usize, usize),
    y_desc: &str,
    (label_font, desc_font): (u32, Option<u32>),
    text: bool,
) -> DrawResult {
    let mut mesh = chart.configure_mesh();
    mesh.x_labels(hi - lo + 1)
        .light_line_style(WHITE.mix(0.0))
        .bold_line_style(BLACK.mix(0.12));
    if text {
        mesh.x_desc("N (VNFs)")
            .y_desc(y_desc)
            .label_style((FONT, label_font))
            .x_label_formatter(&|v| format!("{v:.0}"))
            .y_label_formatter(&|v| format!("{v:.1}"));
        if let Some(size) = desc_font {
            mesh.axis_desc_style((FONT, size));
        }
    } else {
        mesh.x_label_formatter(&|_| String::new())
            .y_label_formatter(&|_| String::new());
    }
    mesh.draw()?;
    Ok(())
}

/// A line through `points` with a dot at each.
pub(crate) fn draw_line_with_dots(
    chart: &mut NChart<'_, '_>,
    points: &[(f64, f64)],
    color: RGBColor,
) -> DrawResult {
    chart.draw_series(LineSeries::new(
        points.iter().copied(),
        color.stroke_width(3),
    ))?;
    chart.draw_series(points.iter().map(|&p| Circle::new(p, 4, color.filled())))?;
    Ok(())
}

/// One chart: a panel per topology, the legend (frame sizes) at the right.
pub fn draw(r: &SweepReport, path: &Path, metric: Metric, text: bool) -> DrawResult {
    let (topologies, vnfs, sizes) = r.axes();
    let panels = topologies.len().max(1);
    let legend_w = if text { 110 } else { 0 };
    let root = BitMapBackend::new(path, (620 * panels as u32 + legend_w, 520)).into_drawing_area();
    root.fill(&WHITE)?;
    let body = if text {
        let p = &r.parameters;
        root.titled(
            &format!(
                "Delivered {} vs number of VNFs — app {}, mean of {} s per point, {} CPU(s)",
                metric.unit(),
                p.app,
                p.seconds,
                r.machine.cpus,
            ),
            (FONT, 22),
        )?
    } else {
        root.clone()
    };
    let (plots, legend) = body.split_horizontally(620 * panels as u32);
    let ymax = r
        .runs
        .iter()
        .filter_map(|x| x.result.as_ref())
        .map(|m| metric.of(m))
        .fold(0.0, f64::max);
    let ymax = if ymax > 0.0 { ymax * 1.08 } else { 1.0 };
    let (lo, hi) = match (vnfs.first(), vnfs.last()) {
        (Some(&a), Some(&b)) => (a, b),
        _ => (1, 1),
    };
    for (area, &t) in plots.split_evenly((1, panels)).iter().zip(&topologies) {
        panel(r, area, t, metric, (lo, hi, ymax), &sizes, text)?;
    }
    if text {
        legend.draw(&Text::new("frame size", (4, 60), (FONT, 16)))?;
        for (i, size) in sizes.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let y = 92 + 26 * i as i32;
            legend.draw(&PathElement::new(
                vec![(4, y), (34, y)],
                color.stroke_width(3),
            ))?;
            legend.draw(&Circle::new((19, y), 4, color.filled()))?;
            legend.draw(&Text::new(format!("{size} B"), (42, y - 8), (FONT, 16)))?;
        }
    }
    root.present()?;
    Ok(())
}

fn panel(
    r: &SweepReport,
    area: &DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>,
    t: Topology,
    metric: Metric,
    (lo, hi, ymax): (usize, usize, f64),
    sizes: &[usize],
    text: bool,
) -> DrawResult {
    let mut b = ChartBuilder::on(area);
    b.margin(16);
    if text {
        b.caption(
            match t {
                Topology::Ns => "North-south (PVP): N chains in parallel",
                Topology::Ew => "East-west: one chain of N VNFs",
            },
            (FONT, 20),
        )
        .x_label_area_size(48)
        .y_label_area_size(64);
    }
    // Half a step of room either side so the end points are not clipped.
    let x = (lo as f64 - 0.4)..(hi as f64 + 0.4);
    let mut chart = b.build_cartesian_2d(x, 0.0..ymax)?;
    let y_desc = format!("delivered {}", metric.unit());
    draw_n_mesh(&mut chart, (lo, hi), &y_desc, (16, Some(17)), text)?;
    for (i, &size) in sizes.iter().enumerate() {
        let points: Vec<(f64, f64)> = (lo..=hi)
            .filter_map(|n| Some((n as f64, metric.of(r.get(t, n, size)?))))
            .collect();
        draw_line_with_dots(&mut chart, &points, COLORS[i % COLORS.len()])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweep::report::tests::synthetic;

    fn check_png(path: &Path) {
        let bytes = std::fs::read(path).unwrap();
        assert!(
            bytes.len() > 1000,
            "{} is {} bytes",
            path.display(),
            bytes.len()
        );
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{}", path.display());
    }

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("nfvswitch-chart-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn charts_without_text_need_no_font() {
        let d = dir("plain");
        let files = draw_all(&synthetic(), &d, false).unwrap();
        assert_eq!(files.len(), 2);
        for f in &files {
            check_png(f);
        }
        assert!(d.join("mpps_vs_n.png").exists() && d.join("gbps_vs_n.png").exists());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn charts_with_text() {
        if load_font().is_none() {
            nfv_testutil::skip(
                "charts_with_text",
                "no TrueType font found (install fonts-dejavu-core or set NFVSWITCH_FONT)",
            );
            return;
        }
        let d = dir("text");
        for f in draw_all(&synthetic(), &d, true).unwrap() {
            check_png(&f);
        }
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn one_topology_one_point() {
        let mut r = synthetic();
        r.runs
            .retain(|x| x.topology == Topology::Ew && x.vnfs == 1 && x.size == 64);
        let d = dir("one");
        let text = load_font().is_some();
        for f in draw_all(&r, &d, text).unwrap() {
            check_png(&f);
        }
        std::fs::remove_dir_all(&d).unwrap();
    }
}
