//! `nfvswitch calibrate`: short measurements of what a hop costs on this
//! node, written as an `nfv_plan` cost profile (JSON) for
//! `nfvswitch plan --profile`.
//!
//! It runs `nfvswitch sweep`'s test bed ([`crate::topology::Testbed`]: the
//! switch's PMD on the last core with an in-process generator and sink,
//! built-in VNF processes on the others) per VNF hop type and frame size:
//!
//! - north-south, N = 1 (generator → VNF → sink, two hops): half the
//!   PMD's busy TSC cycles per packet *delivered* to the sink is the
//!   **edge** hop cost; the VNF process's CPU time (from `/proc`, in TSC
//!   cycles) per packet it forwarded is the **VNF** cost, and its CPU
//!   time over the wall time the **VNF core share** (for the record);
//! - east-west, N = 2 (three hops, two of them edges): the **inner**
//!   (VNF → VNF) hop cost is the PMD's busy cycles per delivered packet
//!   minus `2 × edge`.
//!
//! Why per delivered packet: the generator is unpaced, as in `nfvswitch
//! sweep`, so the PMD is always busy and most of what it takes from the
//! generator is dropped at the VNF's full ring (70-90 % in the first
//! planner-vs-sweep run). Busy cycles per *received* packet (what the
//! first profiles recorded) counted those cheap drops as forwarded work
//! and understated a hop 3-5x. Per delivered packet, the figure is what
//! the saturated switch spends per packet that gets through, drops
//! included — the quantity `switch cores × Hz / cycles` needs to predict
//! the sweep. On a paced load (no drops) a hop costs less.
//!
//! Copy modes are the same ports re-added with `one_copy = false` (the
//! VNFs reconnect). A hop that delivered less than its cores allow
//! (PMD under 90 % busy and VNF under 90 % of a core) records the rate
//! as its `limit_mpps`. Kernel ports (AF_XDP, AF_PACKET) and VFs are
//! reported unavailable with the reason; `plan` then uses the built-in
//! figures for them and says so.
//!
//! A point that fails (a test bed that does not start, a VNF that does
//! not connect, a run that delivers nothing) fails the command: after the
//! last run it exits 1, naming every failed point, and writes no profile,
//! because `plan` would silently take that size's figures from the
//! neighbouring sizes. `--keep-going` writes the profile anyway with each
//! failed point recorded in its `missing` list; `plan` then says which
//! figures it took from which sizes ([`nfv_plan::profile_notes`]).
//!
//! The profile also records the machine's cores and the placement (PMD
//! cores, the VNFs' own cores, the most VNFs a run starts): when the
//! east-west run's two VNFs have fewer cores of their own, they wait for
//! each other and the inner-hop and VNF figures carry that wait, so
//! calibrate warns at the start and `plan` warns when it uses the profile.

use crate::sweep::report::rfc3339;
use crate::topology::{Cores, Run, Setup, Testbed, Topology};
use clap::Args;
use nfv_plan::profile::{MissingPoint, Placement};
use nfv_plan::{HopKind, HopPoint, HopProfile, Machine, Profile};
use nfv_vnf_interface::VnfInterface;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct CalibrateArgs {
    /// Where to write the profile (JSON).
    #[arg(long, default_value = "nfvswitch-profile.json")]
    out: PathBuf,
    /// Measured seconds per point (after 0.5 s of warm-up).
    #[arg(long, default_value_t = 2)]
    seconds: u64,
    /// Switch PMD threads, each on a core of its own (default: as many as
    /// are left once each VNF has a core; at least 1).
    #[arg(long)]
    pmds: Option<usize>,
    /// Frame sizes in bytes (64..=1518).
    #[arg(long, value_delimiter = ',', default_values_t = [64usize, 512, 1518])]
    sizes: Vec<usize>,
    /// VNF hop types to measure: vhost-one-copy, vhost-copy,
    /// memif-one-copy, memif-copy.
    #[arg(long, value_delimiter = ',', default_values_t = [HopKind::VhostOneCopy, HopKind::VhostCopy, HopKind::MemifOneCopy, HopKind::MemifCopy])]
    hops: Vec<HopKind>,
    /// Write the profile even when points failed, with each recorded as
    /// missing (without it a failed point writes nothing and exits 1).
    #[arg(long)]
    keep_going: bool,
}

/// `/proc/<pid>/stat` times are in USER_HZ, 100 on Linux.
const USER_HZ: f64 = 100.0;

/// CPU seconds (user + system) of this process's children.
fn children_cpu() -> f64 {
    let mut pids = Vec::new();
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for t in tasks.flatten() {
            if let Ok(s) = std::fs::read_to_string(t.path().join("children")) {
                pids.extend(s.split_whitespace().map(str::to_string));
            }
        }
    }
    pids.iter()
        .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/stat")).ok())
        .filter_map(|s| {
            // Fields after the command's closing parenthesis; utime and
            // stime are fields 14 and 15 of the whole line.
            let rest = s.rsplit_once(')')?.1;
            let f: Vec<&str> = rest.split_whitespace().collect();
            Some((f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?) / USER_HZ)
        })
        .sum()
}

/// One run's figures.
struct Sample {
    mpps: f64,
    /// PMD busy cycles per packet received.
    pmd_cycles: Option<f64>,
    /// PMD busy cycles per packet delivered at the sink(s).
    pmd_per_delivered: Option<f64>,
    pmd_busy: f64,
    /// VNF CPU cycles per packet a VNF forwarded.
    vnf_cycles: Option<f64>,
    /// VNF CPU use as a share of one core.
    vnf_share: f64,
}

fn interface(k: HopKind) -> (VnfInterface, bool) {
    match k {
        HopKind::VhostOneCopy => (VnfInterface::VhostUser, true),
        HopKind::VhostCopy => (VnfInterface::VhostUser, false),
        HopKind::MemifOneCopy => (VnfInterface::Memif, true),
        _ => (VnfInterface::Memif, false),
    }
}

/// Re-adds the VNF ports of a started bed with `one_copy = false` and
/// waits until the VNFs have reconnected.
fn copy_mode(bed: &Testbed, iface: VnfInterface, vnfs: usize) -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!("nfvswitch-demo-{}", std::process::id()));
    let node = bed.node();
    for i in 1..=vnfs {
        let name = format!("vnf{i}");
        let socket = dir.join(format!("{name}.sock"));
        let kind = match iface {
            VnfInterface::VhostUser => {
                "type=\"vhost-user\",mode=\"server\",queues=1,mrg_rxbuf=true,packed_ring=true"
            }
            VnfInterface::Memif => "type=\"memif\"",
        };
        node.del_port(&name).map_err(|e| format!("{name}: {e}"))?;
        let table = format!(
            "name=\"{name}\",id={},{kind},socket=\"{}\",one_copy=false",
            10 + i,
            socket.display()
        );
        node.add_port(&table).map_err(|e| format!("{name}: {e}"))?;
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    while !node
        .show_chains()
        .iter()
        .all(|c| c.vnfs.iter().all(|v| v.connected))
    {
        if Instant::now() > deadline {
            return Err("VNFs did not reconnect to the copy-mode ports within 15 s".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    Ok(())
}

fn sample(k: HopKind, run: &Run, seconds: u64, cores: &Cores) -> Result<Sample, String> {
    let (iface, one_copy) = interface(k);
    let setup = Setup {
        app: "macswap".into(),
        poll: "adaptive".into(),
        interface: iface,
        rate_pps: 0,
        warmup: Duration::from_millis(500),
    };
    let bed = Testbed::start(&setup, run, cores)
        .map_err(|e| format!("cannot start the test bed: {e}"))?;
    if !one_copy {
        copy_mode(&bed, iface, run.vnfs)?;
    }
    let cpu0 = children_cpu();
    let m = bed.measure(seconds, |_, _| {});
    let cpu = children_cpu() - cpu0;
    drop(bed);
    if m.mpps <= 0.0 {
        return Err("no packet delivered".into());
    }
    let vnf_pkts: f64 = m.vnfs.iter().map(|v| v.tx_mpps * 1e6 * m.seconds).sum();
    let hz = nfv_tsc::hz() as f64;
    // Busy cycles over the window = cycles per received × received.
    let delivered = m.mpps * 1e6 * m.seconds;
    let busy = m
        .pmd
        .cycles_per_packet
        .map(|c| c * m.pmd.rx_mpps * 1e6 * m.seconds);
    Ok(Sample {
        mpps: m.mpps,
        pmd_cycles: m.pmd.cycles_per_packet,
        pmd_per_delivered: busy.filter(|_| delivered > 0.0).map(|b| b / delivered),
        pmd_busy: m.pmd.busy_percent,
        vnf_cycles: (vnf_pkts > 0.0 && cpu > 0.0).then(|| cpu * hz / vnf_pkts),
        vnf_share: cpu / m.seconds,
    })
}

/// Edge, inner and VNF figures of one hop type at one size.
fn point(
    k: HopKind,
    size: usize,
    seconds: u64,
    cores: &Cores,
) -> Result<(HopPoint, String), String> {
    let ns = Run {
        topology: Topology::Ns,
        vnfs: 1,
        size,
    };
    let ew = Run {
        topology: Topology::Ew,
        vnfs: 2,
        size,
    };
    let a = sample(k, &ns, seconds, cores).map_err(|e| format!("north-south N=1 run: {e}"))?;
    let b = sample(k, &ew, seconds, cores).map_err(|e| format!("east-west N=2 run: {e}"))?;
    // Two hops per delivered packet in ns N=1, three (two edges) in ew N=2.
    let edge = a.pmd_per_delivered.map(|c| c / 2.0);
    let mut note = String::new();
    let inner = match (edge, b.pmd_per_delivered) {
        (Some(e), Some(chain)) => {
            let raw = chain - 2.0 * e;
            if raw < 0.25 * e {
                note = format!(
                    " (inner {raw:.0} below a quarter of the edge: kept at {:.0})",
                    0.25 * e
                );
            }
            Some(raw.max(0.25 * e))
        }
        _ => None,
    };
    let unsaturated = a.pmd_busy < 90.0 && a.vnf_share < 0.9;
    let p = HopPoint {
        size,
        edge_cycles: edge,
        inner_cycles: inner,
        vnf_cycles: a.vnf_cycles,
        limit_mpps: unsaturated.then_some(a.mpps),
        measured_mpps: Some(a.mpps),
        pmd_busy_percent: Some(a.pmd_busy),
        pmd_cycles_per_received: a.pmd_cycles,
        vnf_core_share: Some(a.vnf_share),
    };
    let f = |v: Option<f64>| v.map_or("-".into(), |x| format!("{x:.0}"));
    let line = format!(
        "{k:>15} {size:>5} B: edge {} inner {} VNF {} cyc/pkt | ns N=1 {:.3} Mpps (PMD {:.0} % busy, {} cyc/received pkt; VNF {:.0} % of a core), ew N=2 {:.3} Mpps{note}",
        f(edge),
        f(inner),
        f(a.vnf_cycles),
        a.mpps,
        a.pmd_busy,
        f(a.pmd_cycles),
        100.0 * a.vnf_share,
        b.mpps
    );
    Ok((p, line))
}

fn machine(cores: &Cores) -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu_model = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")?
                .split_once(':')
                .map(|x| x.1.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    Machine {
        cpu_model,
        tsc_ghz: nfv_tsc::hz() as f64 / 1e9,
        cores: cores.allowed.len(),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map_or("unknown".into(), |s| s.trim().to_string()),
        taken_at: rfc3339(std::time::SystemTime::now()),
        nfvswitch_version: env!("CARGO_PKG_VERSION").into(),
    }
}

/// Why a VF cannot be measured here.
fn vf_reason() -> String {
    let capable = std::fs::read_dir("/sys/class/net")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            std::fs::read_to_string(e.path().join("device/sriov_totalvfs"))
                .is_ok_and(|s| s.trim().parse::<u32>().is_ok_and(|n| n > 0))
        })
        .count();
    if capable == 0 {
        "no SR-IOV capable NIC on this machine (no /sys/class/net/*/device/sriov_totalvfs > 0)"
            .into()
    } else {
        format!(
            "{capable} SR-IOV capable NIC(s), but calibrate does not drive a VNF on a VF (it needs DPDK and a traffic source on the wire)"
        )
    }
}

const KERNEL_PORTS: &str = "calibrate does not measure kernel ports yet: they need a NIC (or a veth \
    pair) under traffic; `nfv-bench kernel-port` measures them";

/// The most VNFs one calibration run starts (east-west, N = 2).
const MOST_VNFS: usize = 2;

pub fn calibrate(args: CalibrateArgs) -> Result<(), String> {
    crate::topology::validate(&[1], &args.sizes)?;
    let seconds = args.seconds.clamp(1, 30);
    let cores = Cores::detect(args.pmds, MOST_VNFS)?;
    let placement = placement(&cores);
    print_plan(&args, seconds, &cores, placement);
    let (mut hops, missing) = measure(&args, seconds, &cores);
    let tried = hops.values().map(|h| h.points.len()).sum::<usize>() + missing.len();
    verdict(&missing, tried, args.keep_going)?;
    unmeasured(&mut hops);
    let profile = Profile {
        source: "calibrated".into(),
        machine: machine(&cores),
        seconds_per_point: seconds as f64,
        hops,
        missing,
        placement: Some(placement),
    };
    std::fs::write(&args.out, profile.to_json() + "\n")
        .map_err(|e| format!("--out {}: {e}", args.out.display()))?;
    println!("wrote {}", args.out.display());
    if !profile.missing.is_empty() {
        println!(
            "{} of {tried} point(s) recorded as missing; `nfvswitch plan` says which figures it \
             takes from other sizes instead (or from its built-in profile, for a hop type with \
             none measured):\n{}",
            profile.missing.len(),
            list(&profile.missing)
        );
    }
    Ok(())
}

/// How this run places the switch and the VNFs (recorded in the profile).
fn placement(cores: &Cores) -> Placement {
    Placement {
        pmd_cores: cores.pmds.len(),
        vnf_cores: cores.vnfs.len(),
        vnfs: MOST_VNFS,
    }
}

/// The first lines: what will run where, and a warning when the VNFs
/// will share cores (their figures then show the sharing).
fn print_plan(args: &CalibrateArgs, seconds: u64, cores: &Cores, placement: Placement) {
    let runs = args.hops.len() * args.sizes.len() * 2;
    println!(
        "nfvswitch calibrate: {} hop type(s) x {} size(s) x 2 runs of {seconds} s (+0.5 s warm-up); {} CPU(s) allowed ({}), switch PMD(s) on core(s) {:?}, VNFs (macswap, adaptive) on {:?}; {runs} runs",
        args.hops.len(),
        args.sizes.len(),
        cores.allowed.len(),
        cores.allowed,
        cores.pmds,
        cores.vnf_cores()
    );
    if placement.vnfs_shared_cores() {
        println!(
            "warning: the east-west runs start {MOST_VNFS} VNFs but they have {} core(s) of their own: \
             the inner-hop and VNF figures will include waiting for a shared core (the profile \
             records it and `nfvswitch plan` warns)",
            placement.vnf_cores
        );
    }
}

/// Every point of every hop type calibrate drives: the hop profiles and
/// the points that failed.
fn measure(
    args: &CalibrateArgs,
    seconds: u64,
    cores: &Cores,
) -> (BTreeMap<HopKind, HopProfile>, Vec<MissingPoint>) {
    let mut hops = BTreeMap::new();
    let mut missing = Vec::new();
    for &k in &args.hops {
        if matches!(k, HopKind::Afxdp | HopKind::Afpacket | HopKind::Vf) {
            continue;
        }
        let mut h = HopProfile::default();
        let mut failed = Vec::new();
        for &size in &args.sizes {
            match point(k, size, seconds, cores) {
                Ok((p, line)) => {
                    println!("{line}");
                    h.points.push(p);
                }
                Err(why) => {
                    println!("{k:>15} {size:>5} B: FAILED: {why}");
                    failed.push(MissingPoint { hop: k, size, why });
                }
            }
        }
        if h.points.is_empty() {
            h.unavailable = Some(format!("every run failed: {}", one_line(&failed)));
        }
        hops.insert(k, h);
        missing.append(&mut failed);
    }
    (hops, missing)
}

/// Marks the hop types calibrate cannot drive unavailable, with why.
fn unmeasured(hops: &mut BTreeMap<HopKind, HopProfile>) {
    for (k, why) in [
        (HopKind::Afxdp, KERNEL_PORTS.to_string()),
        (HopKind::Afpacket, KERNEL_PORTS.to_string()),
        (HopKind::Vf, vf_reason()),
    ] {
        println!("{k:>15}: unavailable: {why}");
        hops.insert(
            k,
            HopProfile {
                unavailable: Some(why),
                points: vec![],
            },
        );
    }
}

/// Whether a profile may be written after `missing` of `tried` points
/// failed: always when none did; otherwise only with `--keep-going`, and
/// the refusal names every failed point.
fn verdict(missing: &[MissingPoint], tried: usize, keep_going: bool) -> Result<(), String> {
    if missing.is_empty() || keep_going {
        return Ok(());
    }
    Err(format!(
        "{} of {tried} calibration point(s) failed, so no profile was written:\n{}\n\
         --keep-going writes the profile anyway, with these points recorded as missing \
         (`nfvswitch plan` then says which figures it takes from other sizes)",
        missing.len(),
        list(missing)
    ))
}

/// One indented line per point: "  memif-copy 1518 B: why".
fn list(missing: &[MissingPoint]) -> String {
    let lines: Vec<String> = missing
        .iter()
        .map(|m| format!("  {} {} B: {}", m.hop, m.size, m.why))
        .collect();
    lines.join("\n")
}

/// "64 B: why; 512 B: why" (the points of one hop type).
fn one_line(failed: &[MissingPoint]) -> String {
    let parts: Vec<String> = failed
        .iter()
        .map(|m| format!("{} B: {}", m.size, m.why))
        .collect();
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(hop: HopKind, size: usize) -> MissingPoint {
        MissingPoint {
            hop,
            size,
            why: "cannot start VNF 1".into(),
        }
    }

    #[test]
    fn a_failed_point_refuses_the_profile_unless_keep_going() {
        let two = [
            failed(HopKind::MemifCopy, 1518),
            failed(HopKind::VhostCopy, 64),
        ];
        // (failed points, --keep-going, expected refusal: None = written)
        let rows: &[(&[MissingPoint], bool, Option<&str>)] = &[
            (&[], false, None),
            (&[], true, None),
            (&two, true, None),
            (
                &two,
                false,
                Some(
                    "2 of 12 calibration point(s) failed, so no profile was written:\n  \
                     memif-copy 1518 B: cannot start VNF 1\n  vhost-copy 64 B: cannot start VNF 1\n\
                     --keep-going writes the profile anyway, with these points recorded as \
                     missing (`nfvswitch plan` then says which figures it takes from other sizes)",
                ),
            ),
        ];
        for &(missing, keep_going, want) in rows {
            let got = verdict(missing, 12, keep_going).err();
            assert_eq!(
                got.as_deref(),
                want,
                "{} failed, keep_going {keep_going}",
                missing.len()
            );
        }
    }

    #[test]
    fn placement_counts_the_vnfs_own_cores() {
        let cpus = |ids: &[usize]| nfv_config::CpuSet::from_ids(ids.iter().copied()).unwrap();
        // (allowed CPUs, --pmds, expected (PMD cores, VNF cores), VNFs
        // share cores?)
        type Row = (&'static [usize], Option<usize>, (usize, usize), bool);
        let rows: &[Row] = &[
            (&[0], None, (1, 0), true),
            (&[0, 1], None, (1, 1), true),
            (&[0, 1, 2], None, (1, 2), false),
            (&[0, 1, 2, 3], Some(3), (3, 1), true),
        ];
        for &(allowed, pmds, (pmd_cores, vnf_cores), shared) in rows {
            let cores = Cores::place(cpus(allowed), pmds, MOST_VNFS).unwrap();
            let p = placement(&cores);
            assert_eq!(
                (p.pmd_cores, p.vnf_cores, p.vnfs_shared_cores()),
                (pmd_cores, vnf_cores, shared),
                "{allowed:?} --pmds {pmds:?}"
            );
        }
    }
}
