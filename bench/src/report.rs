//! Medians over repetitions, the printed tables, ratios against targets,
//! and the JSON/markdown files under `bench/results/`.

use crate::trial::Outcome;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// (median, min, max); None for no values. NaNs are ignored.
pub fn median(v: &[f64]) -> Option<(f64, f64, f64)> {
    let mut v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    let m = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    Some((m, v[0], v[n - 1]))
}

/// One trial as recorded.
#[derive(Clone, Debug, Serialize)]
pub struct Record {
    pub scenario: String,
    pub size: usize,
    pub chain: usize,
    pub rep: usize,
    #[serde(flatten)]
    pub result: RecordResult,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RecordResult {
    Ok(Outcome),
    Failed(String),
    Skipped(String),
}

/// Medians of one scenario in one case.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    pub scenario: String,
    pub size: usize,
    pub chain: usize,
    pub ok: usize,
    pub failed: usize,
    pub skipped: Option<String>,
    pub mpps: Option<(f64, f64, f64)>,
    pub gbps: Option<f64>,
    pub cycles_per_packet: Option<(f64, f64, f64)>,
    pub busy_percent: Option<f64>,
    pub rx_per_busy_iteration: Option<f64>,
    pub other_cpu_percent: Option<f64>,
    pub c2c_ns: Option<f64>,
}

pub fn summarize(records: &[Record], scenario: &str, size: usize, chain: usize) -> Summary {
    let mine: Vec<&Record> = records
        .iter()
        .filter(|r| r.scenario == scenario && r.size == size && r.chain == chain)
        .collect();
    let oks: Vec<&Outcome> = mine
        .iter()
        .filter_map(|r| match &r.result {
            RecordResult::Ok(o) => Some(o),
            _ => None,
        })
        .collect();
    let skipped = mine.iter().find_map(|r| match &r.result {
        RecordResult::Skipped(s) => Some(s.clone()),
        _ => None,
    });
    let mpps = median(&oks.iter().map(|o| o.mpps).collect::<Vec<_>>());
    let pmd = |f: fn(&crate::dut::PmdFigures) -> f64| -> Vec<f64> {
        oks.iter().filter_map(|o| o.pmd.as_ref().map(f)).collect()
    };
    Summary {
        scenario: scenario.to_string(),
        size,
        chain,
        ok: oks.len(),
        failed: mine
            .iter()
            .filter(|r| matches!(r.result, RecordResult::Failed(_)))
            .count(),
        skipped,
        mpps,
        gbps: mpps.map(|m| m.0 * size as f64 * 8.0 / 1000.0),
        cycles_per_packet: median(&pmd(|p| p.cycles_per_packet)),
        busy_percent: median(&pmd(|p| p.busy_percent)).map(|m| m.0),
        rx_per_busy_iteration: median(&pmd(|p| p.rx_per_busy_iteration.unwrap_or(f64::NAN)))
            .map(|m| m.0),
        other_cpu_percent: median(&oks.iter().map(|o| o.other_cpu_percent).collect::<Vec<_>>())
            .map(|m| m.0),
        c2c_ns: median(&oks.iter().filter_map(|o| o.c2c_ns).collect::<Vec<_>>()).map(|m| m.0),
    }
}

pub fn fmt_range(v: Option<(f64, f64, f64)>, prec: usize) -> String {
    match v {
        Some((m, lo, hi)) => format!("{m:.prec$} ({lo:.prec$}..{hi:.prec$})"),
        None => "-".into(),
    }
}

fn fmt_opt(v: Option<f64>, prec: usize) -> String {
    v.map_or("-".into(), |x| format!("{x:.prec$}"))
}

pub const TABLE_HEAD: [&str; 11] = [
    "size",
    "chain",
    "scenario",
    "Mpps median (min..max)",
    "Gbps",
    "switch cyc/pkt (min..max)",
    "busy %",
    "pkts/iter",
    "other CPU %",
    "c2c ns",
    "runs",
];

pub fn table_row(s: &Summary) -> [String; 11] {
    let runs = match &s.skipped {
        Some(r) if s.ok == 0 => format!("SKIPPED: {r}"),
        _ => format!(
            "{} ok{}",
            s.ok,
            if s.failed > 0 {
                format!(", {} failed", s.failed)
            } else {
                String::new()
            }
        ),
    };
    [
        format!("{} B", s.size),
        s.chain.to_string(),
        s.scenario.clone(),
        fmt_range(s.mpps, 3),
        fmt_opt(s.gbps, 2),
        fmt_range(s.cycles_per_packet, 0),
        fmt_opt(s.busy_percent, 0),
        fmt_opt(s.rx_per_busy_iteration, 1),
        fmt_opt(s.other_cpu_percent, 0),
        fmt_opt(s.c2c_ns, 0),
        runs,
    ]
}

/// Plain-text table with columns padded to their widths.
pub fn text_table(head: &[&str], rows: &[Vec<String>]) -> String {
    let mut w: Vec<usize> = head.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<String>| -> String {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s += c;
            } else {
                s += &format!("{c:<width$}  ", width = w[i]);
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(head.iter().map(|s| s.to_string()).collect());
    for r in rows {
        out += &line(r.clone());
    }
    out
}

pub fn md_table(head: &[&str], rows: &[Vec<String>]) -> String {
    let mut s = format!(
        "| {} |\n|{}|\n",
        head.join(" | "),
        vec!["---"; head.len()].join("|")
    );
    for r in rows {
        s += &format!("| {} |\n", r.join(" | "));
    }
    s
}

/// A ratio checked against a target.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    pub size: usize,
    pub chain: usize,
    pub what: String,
    pub value: Option<f64>,
    /// ">=" or "<="
    pub op: &'static str,
    pub target: f64,
    pub met: Option<bool>,
    /// Why there is no value.
    pub missing: Option<String>,
}

impl Check {
    pub fn new(
        size: usize,
        chain: usize,
        what: &str,
        num: Option<f64>,
        den: Option<f64>,
        op: &'static str,
        target: f64,
    ) -> Check {
        let value = match (num, den) {
            (Some(a), Some(b)) if b > 0.0 && a.is_finite() => Some(a / b),
            _ => None,
        };
        Check {
            size,
            chain,
            what: what.to_string(),
            value,
            op,
            target,
            met: value.map(|v| if op == ">=" { v >= target } else { v <= target }),
            missing: value.is_none().then(|| "no figure on one side".to_string()),
        }
    }

    pub fn verdict(&self) -> &'static str {
        match self.met {
            Some(true) => "met",
            Some(false) => "NOT met",
            None => "n/a",
        }
    }

    pub fn row(&self) -> Vec<String> {
        vec![
            format!("{} B", self.size),
            self.chain.to_string(),
            self.what.clone(),
            self.value.map_or("-".into(), |v| format!("{v:.2}")),
            format!("{} {:.2}", self.op, self.target),
            self.verdict().to_string(),
        ]
    }
}

pub const CHECK_HEAD: [&str; 6] = ["size", "chain", "ratio", "value", "target", "verdict"];

/// `bench/results/` of the checkout (gitignored), or `--results`.
pub fn results_dir(arg: Option<PathBuf>) -> PathBuf {
    arg.unwrap_or_else(|| crate::host::checkout().join("bench/results"))
}

/// Writes `<dir>/<stem>.json` and `<dir>/<stem>.md`; returns their paths.
/// [`write_results`], saying where they went (or why not) on the
/// terminal: a bench run's last line.
pub fn save_results(dir: &Path, stem: &str, json: &serde_json::Value, md: &str) {
    match write_results(dir, stem, json, md) {
        Ok((j, m)) => println!("results: {} {}", j.display(), m.display()),
        Err(e) => eprintln!("nfv-bench: cannot write results: {e}"),
    }
}

pub fn write_results(
    dir: &Path,
    stem: &str,
    json: &serde_json::Value,
    md: &str,
) -> Result<(PathBuf, PathBuf), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let j = dir.join(format!("{stem}.json"));
    let m = dir.join(format!("{stem}.md"));
    let text = serde_json::to_string_pretty(json).map_err(|e| e.to_string())?;
    std::fs::write(&j, text + "\n").map_err(|e| format!("{}: {e}", j.display()))?;
    std::fs::write(&m, md).map_err(|e| format!("{}: {e}", m.display()))?;
    Ok((j, m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some((2.0, 1.0, 3.0)));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some((2.5, 1.0, 4.0)));
        assert_eq!(median(&[f64::NAN, 1.0]), Some((1.0, 1.0, 1.0)));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn checks() {
        let c = Check::new(64, 0, "x", Some(3.0), Some(2.0), ">=", 1.5);
        assert_eq!((c.value, c.met), (Some(1.5), Some(true)));
        let c = Check::new(64, 0, "x", Some(1.0), Some(2.0), "<=", 1.0 / 3.0);
        assert_eq!(c.met, Some(false));
        assert_eq!(
            Check::new(64, 0, "x", None, Some(2.0), ">=", 1.0).verdict(),
            "n/a"
        );
    }
}
