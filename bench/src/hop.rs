//! `nfv-bench hop`: what one vhost-user -> vhost-user hop through
//! nfvswitch costs, in the endpoint layout of `compare` (one testpmd on
//! the other CPU generates, forwards the VNF streams and sinks). Prints
//! Mpps and Gbps at the sink and the switch's own TSC cycles per packet
//! (= per hop: every hop is one packet received by the PMD) and busy %.

use crate::compare::{self, Common};
use crate::host;
use crate::paired;
use crate::proc;
use crate::report::{self, Record, RecordResult};
use crate::scenario::Scenario;
use std::time::Instant;

#[derive(clap::Args, Clone, Debug)]
pub struct HopArgs {
    #[command(flatten)]
    pub common: Common,
    /// VNFs in series (0 = PVP: generator -> switch -> sink).
    #[arg(long, default_value_t = 0)]
    pub chain: usize,
    /// A/B the one-copy path (the default) against copy mode (every
    /// port's `one_copy = false`): both run in each rep, order alternating
    /// by rep, and the paired ratios are printed.
    #[arg(long, conflicts_with = "memif_ab")]
    pub copy_ab: bool,
    /// A/B the vhost-user hop against the memif hop (the endpoint's ports
    /// are net_memif servers and the switch's memif ports connect to
    /// them): same layout, paired ratios printed.
    #[arg(long, conflicts_with = "memif_copy_ab")]
    pub memif_ab: bool,
    /// A/B the memif hop in one copy (the default) against memif ports
    /// with `one_copy = false`.
    #[arg(long, conflicts_with = "copy_ab")]
    pub memif_copy_ab: bool,
    /// A/B the split-ring hop against the packed-ring hop (the endpoint's
    /// virtio-user ports with `packed_vq=1`).
    #[arg(long, conflicts_with_all = ["copy_ab", "memif_ab", "memif_copy_ab"])]
    pub packed_ab: bool,
}

/// The hop's A/B: the A side, and the B side with what its ratio is
/// called (none: A alone).
#[derive(Clone, Copy)]
struct Ab {
    a: Scenario,
    b: Option<(Scenario, &'static str)>,
}

impl Ab {
    fn of(a: &HopArgs) -> Ab {
        let b = if a.copy_ab {
            Some((Scenario::NfvswitchCopy, "one-copy / copy"))
        } else if a.memif_ab {
            Some((Scenario::NfvswitchMemif, "vhost / memif"))
        } else if a.memif_copy_ab {
            Some((Scenario::NfvswitchMemifCopy, "memif one-copy / copy"))
        } else if a.packed_ab {
            Some((Scenario::NfvswitchPacked, "split / packed"))
        } else {
            None
        };
        // The A side: the memif one-copy hop when A/B-ing memif modes.
        let a_sc = if a.memif_copy_ab {
            Scenario::NfvswitchMemif
        } else {
            Scenario::Nfvswitch
        };
        Ab { a: a_sc, b }
    }

    /// The scenarios each rep runs, A first.
    fn modes(self) -> Vec<Scenario> {
        match self.b {
            Some((sc, _)) => vec![self.a, sc],
            None => vec![self.a],
        }
    }
}

const HEAD: [&str; 10] = [
    "size",
    "mode",
    "Mpps median (min..max)",
    "Gbps",
    "switch cyc/pkt per hop (min..max)",
    "ns/hop",
    "busy %",
    "other CPU %",
    "c2c ns",
    "runs",
];

pub fn hop(a: HopArgs) -> Result<(), String> {
    let c = &a.common;
    let ab = Ab::of(&a);
    let modes = &ab.modes()[..];
    let p = compare::prepare(c, modes)?;
    if let Some(why) = p.skipped(ab.a) {
        println!("nfv-bench hop: SKIPPED: {why}");
        return Ok(());
    }
    let hz = nfv_tsc::hz() as f64;
    println!(
        "nfv-bench hop: nfvswitch, sizes {:?} B, chain {} ({} hops per packet), {} interleaved reps x ({} warm-up + {} measured 1-s samples); PMD on CPU {}, endpoint on CPU {}, testpmd memory {:?}, TSC {:.3} GHz",
        c.sizes,
        a.chain,
        a.chain + 1,
        c.reps,
        c.warm,
        c.seconds,
        c.bed.switch_cpu,
        c.bed.endpoint_cpu,
        p.mem,
        hz / 1e9
    );
    println!("  nfvswitch: {}", p.nfvswitch_source);
    let t0 = Instant::now();
    let records = run_trials(&a, &p, modes);
    let (rows, sums) = summary(&a, modes, &records, hz);
    let elapsed = t0.elapsed().as_secs_f64();
    println!(
        "\nnfvswitch hop, chain {}: medians over {} reps ({:.1} min)",
        a.chain,
        c.reps,
        elapsed / 60.0
    );
    print!("{}", report::text_table(&HEAD, &rows));
    let pairs = ab_pairs(&a, ab, &records);
    let out = Results {
        records,
        rows,
        sums,
        pairs,
    };
    write(&a, &p, hz, elapsed, &out);
    if proc::interrupted() {
        return Err("interrupted (partial results above)".into());
    }
    let failed = out
        .records
        .iter()
        .filter(|r: &&Record| matches!(r.result, RecordResult::Failed(_)))
        .count();
    if failed == out.records.len() {
        return Err("every trial failed".into());
    }
    Ok(())
}

/// What the run measured and its tables.
struct Results {
    records: Vec<Record>,
    /// [`HEAD`]'s rows.
    rows: Vec<Vec<String>>,
    sums: Vec<report::Summary>,
    pairs: Vec<paired::Paired>,
}

/// `hop-TIMESTAMP.json` and `.md` in the results directory.
fn write(a: &HopArgs, p: &compare::Prepared, hz: f64, elapsed: f64, out: &Results) {
    let c = &a.common;
    let ts = host::timestamp();
    let json = serde_json::json!({
        "kind": "hop",
        "timestamp_utc": ts,
        "elapsed_secs": elapsed,
        "tsc_hz": nfv_tsc::hz(),
        "nfvswitch": p.nfvswitch_source,
        "args": {"sizes": c.sizes, "chain": a.chain, "reps": c.reps, "seconds": c.seconds, "warm": c.warm,
                 "switch_cpu": c.bed.switch_cpu, "endpoint_cpu": c.bed.endpoint_cpu, "mem": p.mem,
                 "switch_hugepages": c.switch_hugepages},
        "trials": out.records,
        "summary": out.sums,
        "paired": out.pairs,
    });
    let md = format!(
        "# nfv-bench hop {ts}\n\nnfvswitch, chain {}, {} reps, testpmd memory {:?}, TSC {:.3} GHz.\n\n{}",
        a.chain,
        c.reps,
        p.mem,
        hz / 1e9,
        report::md_table(&HEAD, &out.rows)
    );
    report::save_results(
        &report::results_dir(c.bed.results.clone()),
        &format!("hop-{ts}"),
        &json,
        &md,
    );
}

/// Every trial: per rep, per size, the modes in A/B order, then B/A
/// (drift over the run hits both alike). Stops at Ctrl-C.
fn run_trials(a: &HopArgs, p: &compare::Prepared, modes: &[Scenario]) -> Vec<Record> {
    let c = &a.common;
    let mut records = Vec::new();
    for rep in 1..=c.reps {
        for &size in &c.sizes {
            let spec = compare::spec(c, size, a.chain, p.mem);
            let mut order = modes.to_vec();
            if rep % 2 == 0 {
                order.reverse();
            }
            for sc in order {
                records.push(compare::one(p, sc, &spec, rep));
                if proc::interrupted() {
                    return records;
                }
            }
        }
    }
    records
}

/// The table's rows ([`HEAD`]) and the summaries, size by size, mode by
/// mode.
fn summary(
    a: &HopArgs,
    modes: &[Scenario],
    records: &[Record],
    hz: f64,
) -> (Vec<Vec<String>>, Vec<report::Summary>) {
    let mut rows = Vec::new();
    let mut sums = Vec::new();
    for (&size, &sc) in a
        .common
        .sizes
        .iter()
        .flat_map(|s| modes.iter().map(move |m| (s, m)))
    {
        let s = report::summarize(records, sc.name(), size, a.chain);
        rows.push(vec![
            format!("{size} B"),
            sc.name().to_string(),
            report::fmt_range(s.mpps, 3),
            s.gbps.map_or("-".into(), |g| format!("{g:.2}")),
            report::fmt_range(s.cycles_per_packet, 0),
            s.cycles_per_packet
                .map_or("-".into(), |c| format!("{:.0}", c.0 / hz * 1e9)),
            s.busy_percent.map_or("-".into(), |b| format!("{b:.0}")),
            s.other_cpu_percent
                .map_or("-".into(), |b| format!("{b:.0}")),
            s.c2c_ns.map_or("-".into(), |b| format!("{b:.0}")),
            format!("{} ok, {} failed", s.ok, s.failed),
        ]);
        sums.push(s);
    }
    (rows, sums)
}

/// With a B side: the A/B ratios paired within each rep and placement,
/// printed.
fn ab_pairs(a: &HopArgs, ab: Ab, records: &[Record]) -> Vec<paired::Paired> {
    let mut pairs = Vec::new();
    let Some((b_sc, what)) = ab.b else {
        return pairs;
    };
    let names = (ab.a.name(), b_sc.name());
    let cyc = format!("cyc/pkt {what}");
    let e2e = format!("e2e Mpps {what}");
    for &size in &a.common.sizes {
        let case = (size, a.chain);
        pairs.extend(paired::paired(records, case, &cyc, names, |o| {
            o.pmd.as_ref().map(|p| p.cycles_per_packet)
        }));
        pairs.extend(paired::paired(records, case, &e2e, names, |o| Some(o.mpps)));
    }
    let pair_rows: Vec<Vec<String>> = pairs.iter().map(paired::Paired::row).collect();
    println!("\n{what}, paired within each rep and vCPU placement:");
    print!("{}", report::text_table(&paired::HEAD, &pair_rows));
    pairs
}
