//! `nfv-bench soak --attacks`: after the random disruptions are undone,
//! an attacker grows beside the well-behaved VNFs, one attack at a time
//! (the [`crate::attackers`]). Each attack: its ports added, a quiet
//! phase, the attack, a quiet phase, its ports removed. Verdict per
//! attack: every innocent chain's rate during the attack >= 90 % of the
//! quiet phase just before it, the refusal counters named for it moved,
//! nothing that must be refused was accepted. Leaks (fds, mappings,
//! pool) are the soak's final checks, taken after the last attack.

use super::events::Soak;
use super::node::{self, SINK0, SINK1};
use super::procfs::Resources;
use crate::attackers::memif::{self as am, Attempts};
use crate::attackers::vhost::{self as av, Descriptors};
use crate::attackers::{Tally, nice_thread};
use crate::{proc, report};
use nfv_control::protocol::PortReport;
use nfv_memif::socket::SocketPath;
use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// An innocent chain's rate under attack must stay at least this share
/// of its quiet rate.
pub const MIN_RATIO: f64 = 0.90;

/// The attacker's thread body.
type Body = Box<dyn FnOnce(&AtomicBool) -> Tally + Send>;

/// One attack: the ports it needs, the counters that must move, and the
/// attacker.
struct Attack {
    name: &'static str,
    /// `[[port]]` keys of the attacker's ports (added before the quiet
    /// phase, removed after the second).
    ports: Vec<String>,
    /// Counters (`port.key`, or `port.vringN:name`) of which at least
    /// one must move.
    must_move: Vec<String>,
    /// The attacker must never be accepted (every try is a refusal).
    all_refused: bool,
    body: Body,
}

/// An innocent chain's packets per second in the three phases.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ChainRate {
    pub chain: String,
    pub quiet: f64,
    pub attack: f64,
    pub after: f64,
}

impl ChainRate {
    pub fn ratio(&self) -> f64 {
        if self.quiet > 0.0 {
            self.attack / self.quiet
        } else {
            0.0
        }
    }
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct AttackResult {
    pub name: String,
    pub rates: Vec<ChainRate>,
    /// Counters that moved over the attack and the quiet phase after it.
    pub moved: Vec<(String, String)>,
    pub tally: Tally,
    /// Hoarding only: the legitimate client's connected share per phase.
    pub legit: Option<[f64; 3]>,
    /// Drops on the innocent ports during the attack (`port.reason`):
    /// `tx_full` at a VNF's port is the VNF not draining its ring.
    pub innocent_drops: Vec<(String, u64)>,
    /// The switch's resident memory: at the end of the quiet phase, the
    /// peak sampled every 100 ms during the attack, and after the quiet
    /// phase that follows it.
    pub rss: Option<RssPhases>,
    pub ok: bool,
    pub why: String,
}

/// Resident memory of the switch around one attack, KiB (`VmRSS`, and the
/// part of it that is guest memory: mapped VNF tables it has touched).
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct RssPhases {
    pub before_kib: u64,
    pub peak_kib: u64,
    pub peak_guest_kib: u64,
    pub after_kib: u64,
}

/// Samples the switch's RSS every 100 ms until `stop`; the peaks.
fn rss_peaks(pid: u32, stop: &AtomicBool) -> (u64, u64) {
    let (mut rss, mut guest) = (0, 0);
    loop {
        if let Ok(r) = Resources::read(pid) {
            rss = rss.max(r.rss_kib);
            guest = guest.max(r.guest_kib);
        }
        if stop.load(Ordering::Relaxed) {
            return (rss, guest);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Port ids of the attackers (outside the soak's other ranges).
const ATT_ID: u16 = 5000;

fn memif_keys(name: &str, id: u16, socket: &Path, interface_id: u32) -> String {
    format!(
        "name = {name:?}\nid = {id}\ntype = \"memif\"\nsocket = {:?}\ninterface_id = {interface_id}\n",
        socket.display().to_string()
    )
}

fn plans(s: &Soak) -> Vec<Attack> {
    let dir = s.dir.clone();
    let mut v = vhost_plans(&dir);
    v.extend(memif_plans(&dir));
    let ctl = s.sw.socket.clone();
    let d = dir.clone();
    v.push(Attack {
        name: "many short-lived vhost-user ports (8 at a time, each with a table and rings)",
        ports: Vec::new(),
        must_move: Vec::new(),
        all_refused: false,
        body: Box::new(move |stop| short_lived_ports(&ctl, &d, stop)),
    });
    v
}

/// The hostile vhost-user frontends: memory tables, unmappable files,
/// bad descriptors.
fn vhost_plans(dir: &Path) -> Vec<Attack> {
    let sock = |n: &str| node::socket(dir, n);
    let mut v = Vec::new();
    let p = sock("att-mem");
    v.push(Attack {
        name: "vhost-user: memory tables of sparse memfds (4 x 512 GiB, 8 x 16 TiB)",
        ports: vec![node::vhost("att-mem", ATT_ID, &p, "server")],
        must_move: vec!["att-mem.mem_over_budget".into()],
        all_refused: true,
        body: Box::new(move |stop| av::huge_tables(&p, stop)),
    });
    let p = sock("att-fd");
    let d = dir.to_path_buf();
    v.push(Attack {
        name: "vhost-user: memory region and dirty log on a disk file and a pipe",
        ports: vec![node::vhost("att-fd", ATT_ID + 1, &p, "server")],
        must_move: vec!["att-fd.mem_table_errors".into(), "att-fd.log_errors".into()],
        all_refused: true,
        body: Box::new(move |stop| av::unmappable_files(&p, &d, stop)),
    });
    for (i, (name, kind, counter)) in [
        (
            "vhost-user: malformed descriptors (outside memory, ids out of range, wrong direction, short, bad indirect)",
            Descriptors::Malformed,
            "desc_out_of_memory",
        ),
        ("vhost-user: descriptor chain loops", Descriptors::Loops, "chain_too_long"),
        (
            "vhost-user: avail.idx jumps (quarantine, new session, again)",
            Descriptors::AvailJump,
            "avail_idx_jump",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let port = format!("att-ring{i}");
        let p = sock(&port);
        v.push(Attack {
            name,
            ports: vec![node::vhost(&port, ATT_ID + 2 + i as u16, &p, "server")],
            must_move: vec![format!("{port}.vring1:{counter}")],
            all_refused: false,
            body: Box::new(move |stop| av::descriptors(&p, kind, stop)),
        });
    }
    v
}

/// The hostile memif clients: unmappable regions, hoarded handshake
/// slots, ring heads past what the switch gave.
fn memif_plans(dir: &Path) -> Vec<Attack> {
    let sock = |n: &str| node::socket(dir, n);
    let mut v = Vec::new();
    let p = sock("att-mr");
    let (files, writer) = unmappable_fds(dir);
    let sp = SocketPath::File(p.clone());
    v.push(Attack {
        name: "memif: region on a disk file and on a pipe",
        ports: vec![memif_keys("att-mr", ATT_ID + 10, &p, 1)],
        must_move: vec!["att-mr.refused".into()],
        all_refused: true,
        body: Box::new(move |stop| {
            let _open = writer; // the pipe's write end, open while it runs
            am::unmappable_region(&sp, 1, &files, stop)
        }),
    });
    let p = sock("att-hoard");
    let sp = SocketPath::File(p.clone());
    v.push(Attack {
        name: "memif: silent connections hoarding a shared socket's handshake slots",
        ports: vec![
            memif_keys("att-h1", ATT_ID + 11, &p, 1),
            memif_keys("legit", ATT_ID + 12, &p, 2),
        ],
        must_move: [
            "socket_refused_busy",
            "socket_refused_uid",
            "socket_silent_dropped",
            "socket_silent_displaced",
        ]
        .iter()
        .map(|k| format!("legit.{k}"))
        .collect(),
        all_refused: false,
        body: Box::new(move |stop| {
            am::hoarders(
                &sp,
                nfv_memif::MAX_HANDSHAKES + 4,
                Duration::from_millis(800),
                stop,
            )
        }),
    });
    let p = sock("att-pos");
    let sp = SocketPath::File(p.clone());
    v.push(Attack {
        name: "memif: ring head past what the switch gave (off by one, far ahead, backwards)",
        ports: vec![memif_keys("att-pos", ATT_ID + 13, &p, 1)],
        must_move: vec!["att-pos.bad_head".into()],
        all_refused: false,
        body: Box::new(move |stop| am::ring_overrun(&sp, 1, stop)),
    });
    v
}

/// A disk file (when the run directory is on one) and a pipe's read
/// end; the pipe's write end, to keep while they are used.
fn unmappable_fds(dir: &Path) -> (Vec<OwnedFd>, Option<OwnedFd>) {
    let mut v = Vec::new();
    if let Ok(f) = av::disk_file(dir, 1 << 20) {
        v.push(OwnedFd::from(f));
    }
    let mut writer = None;
    if let Ok((r, w)) = nix::unistd::pipe() {
        v.push(r);
        writer = Some(w);
    }
    (v, writer)
}

/// Adds vhost-user ports through the control socket, connects a
/// well-behaved session to each (table and rings: guard slots taken),
/// and removes them, 8 alive at a time.
fn short_lived_ports(ctl: &Path, dir: &Path, stop: &AtomicBool) -> Tally {
    use nfv_control::{Request, Response};
    let mut t = Tally::default();
    let req = |r: Request| match nfv_control::request(ctl, &r) {
        Ok(Response::Ok { .. }) => Ok(()),
        Ok(Response::Error { message }) => Err(message),
        Err(e) => Err(e),
    };
    let mut k = 0u16;
    while !stop.load(Ordering::Relaxed) {
        let mut live = Vec::new();
        for _ in 0..8 {
            let name = format!("ats{k}");
            let p = node::socket(dir, &name);
            let keys = node::vhost(&name, 6000 + k, &p, "server");
            k = (k + 1) % 1000;
            t.tries += 1;
            match req(Request::AddPort {
                port: node::inline(&keys),
            }) {
                Ok(()) => live.push((name, p)),
                Err(e) => t.note(format!("add-port: {e}")),
            }
        }
        let threads: Vec<_> = live
            .iter()
            .map(|(_, p)| {
                let p = p.clone();
                std::thread::spawn(move || {
                    nice_thread();
                    let never = AtomicBool::new(false);
                    av::short_lived_session(&p, Duration::from_millis(300), &never)
                })
            })
            .collect();
        for th in threads {
            match th.join() {
                Ok(Ok(())) => t.accepted += 1,
                Ok(Err(e)) => t.note(format!("session: {e}")),
                Err(_) => t.note("session thread panicked".into()),
            }
        }
        for (name, _) in live {
            if let Err(e) = req(Request::DelPort { port: name }) {
                t.note(format!("del-port: {e}"));
            }
        }
    }
    t
}

/// The innocent chains present: (label, sink port).
fn chains(ports: &[PortReport]) -> Vec<(&'static str, u16)> {
    [
        ("A: gen0 > vnf1 > vnf2 > sink0", SINK0),
        ("B: gen1 > testpmd > sink1", SINK1),
    ]
    .into_iter()
    .filter(|(_, p)| ports.iter().any(|r| r.no == *p))
    .collect()
}

/// Sink counters and the time they were read.
fn reading(s: &Soak) -> Result<Reading, String> {
    let ports = s.sw.ports()?;
    Ok((Instant::now(), ports))
}

fn rate(a: &Reading, b: &Reading, sink: u16) -> f64 {
    let dt = b.0.duration_since(a.0).as_secs_f64().max(1e-3);
    node::tx_packets(&b.1, sink).saturating_sub(node::tx_packets(&a.1, sink)) as f64 / dt
}

/// Every attack in turn (or those numbered in `only`, 1-based, in that
/// order). Stops early (with what it has) if the switch dies.
pub fn run_all(s: &mut Soak, secs: f64, only: &[usize]) -> Result<Vec<AttackResult>, String> {
    let n = plans(s).len();
    let order: Vec<usize> = if only.is_empty() {
        (1..=n).collect()
    } else {
        only.to_vec()
    };
    if let Some(bad) = order.iter().find(|&&i| i == 0 || i > n) {
        return Err(format!("--attack-only: no attack {bad} (1..={n})"));
    }
    let mut out = Vec::new();
    println!("  attacks: {n}, each {secs:.0} s quiet, {secs:.0} s attack, {secs:.0} s quiet");
    for i in order {
        // Bodies run once: the plans are made anew for each attack.
        let Some(a) = plans(s).into_iter().nth(i - 1) else {
            continue;
        };
        println!("  attack {i}/{n}: {}", a.name);
        let r = run_one(s, a, secs)?;
        print_result(&r);
        out.push(r);
        if let Err(e) = s.sw.proc.ensure_alive() {
            println!("  THE SWITCH DIED: {e}");
            break;
        }
    }
    Ok(out)
}

fn run_one(s: &mut Soak, a: Attack, secs: f64) -> Result<AttackResult, String> {
    let phase = Duration::from_secs_f64(secs);
    let names: Vec<String> = a.ports.iter().map(|k| port_name(k)).collect();
    // The switch's fds before the attacker's ports exist (what `fds_back`
    // compares with once they are gone).
    proc::sleep(Duration::from_millis(300))?;
    let fds0 = fd_targets(s.sw.pid);
    if let Err(why) = add_ports(s, &a.ports, &names) {
        return Ok(AttackResult {
            name: a.name.to_string(),
            rates: Vec::new(),
            moved: Vec::new(),
            tally: Tally::default(),
            legit: None,
            innocent_drops: Vec::new(),
            rss: None,
            ok: false,
            why,
        });
    }
    let legit = Legit::start(s, &names);
    let p = phases(s, a.body, phase, &legit)?;
    let legit_thread_ran = legit.stop();
    let moved = moved(&p.r1.1, &p.r3.1, &names);
    for n in &names {
        if let Err(e) = s.sw.del_port(n) {
            s.errors.push(format!("{}: del-port {n}: {e}", a.name));
        }
    }
    let fds = fds_back(s.sw.pid, &fds0);
    let rates: Vec<ChainRate> = chains(&p.r0.1)
        .into_iter()
        .map(|(c, sink)| ChainRate {
            chain: c.to_string(),
            quiet: rate(&p.r0, &p.r1, sink),
            attack: rate(&p.r1, &p.r2, sink),
            after: rate(&p.r2b, &p.r3, sink),
        })
        .collect();
    let [l0, l1, l2, l2b, l3] = p.legit;
    let legit = legit_thread_ran.then(|| [share(l0, l1), share(l1, l2), share(l2b, l3)]);
    let (ok, mut why) = judge(&a.must_move, a.all_refused, &rates, &moved, &p.tally, legit);
    let ok = ok && fds.is_ok();
    if let Err(e) = &fds {
        why = [why, e.clone()]
            .into_iter()
            .filter(|w| !w.is_empty())
            .collect::<Vec<_>>()
            .join("; ");
    }
    Ok(AttackResult {
        name: a.name.to_string(),
        rates,
        moved,
        tally: p.tally,
        legit,
        innocent_drops: drops(&p.r1.1, &p.r2.1),
        rss: p.rss,
        ok,
        why,
    })
}

/// Adds the attacker's ports (`keys`, named `names`); on a refusal
/// removes those added and says which failed.
fn add_ports(s: &mut Soak, keys: &[String], names: &[String]) -> Result<(), String> {
    for (i, keys) in keys.iter().enumerate() {
        if let Err(e) = s.sw.add_port(keys) {
            for n in &names[..i] {
                let _ = s.sw.del_port(n);
            }
            return Err(format!("add-port {}: {e}", names[i]));
        }
    }
    Ok(())
}

/// The hoarded socket's legitimate tenant, reconnecting through all three
/// phases (when the attack has a port named `legit`).
struct Legit {
    stop: Arc<AtomicBool>,
    attempts: Arc<Attempts>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Legit {
    fn start(s: &Soak, names: &[String]) -> Legit {
        let stop = Arc::new(AtomicBool::new(false));
        let attempts = Arc::new(Attempts::default());
        let thread = names.iter().any(|n| n == "legit").then(|| {
            let (st, n) = (stop.clone(), attempts.clone());
            let sp = SocketPath::File(node::socket(&s.dir, "att-hoard"));
            std::thread::spawn(move || {
                nice_thread();
                am::legit_reconnects(&sp, 2, &n, &st)
            })
        });
        Legit {
            stop,
            attempts,
            thread,
        }
    }

    /// (tries, connected) so far.
    fn at(&self) -> (u64, u64) {
        (
            self.attempts.tries.load(Ordering::Relaxed),
            self.attempts.connected.load(Ordering::Relaxed),
        )
    }

    /// Stops and joins it; whether it ran.
    fn stop(self) -> bool {
        self.stop.store(true, Ordering::Relaxed);
        let ran = self.thread.is_some();
        if let Some(t) = self.thread {
            let _ = t.join();
        }
        ran
    }
}

/// The legitimate client's connected share of its tries from `a` to `b`.
fn share(a: (u64, u64), b: (u64, u64)) -> f64 {
    let tries = b.0 - a.0;
    if tries == 0 {
        0.0
    } else {
        (b.1 - a.1) as f64 / tries as f64
    }
}

/// When the switch's ports were read, and their counters.
type Reading = (Instant, Vec<PortReport>);

/// What the three phases measured: sink readings at their edges (`r2b`:
/// once the attacker has stopped), the legitimate client's attempts at
/// the same points, the attacker's tally and the switch's memory.
struct Phases {
    r0: Reading,
    r1: Reading,
    r2: Reading,
    r2b: Reading,
    r3: Reading,
    legit: [(u64, u64); 5],
    tally: Tally,
    rss: Option<RssPhases>,
}

/// A quiet phase, the attack (`body` on its own thread, the switch's RSS
/// sampled beside it), a quiet phase.
fn phases(s: &Soak, body: Body, phase: Duration, legit: &Legit) -> Result<Phases, String> {
    proc::sleep(Duration::from_millis(500))?;
    let r0 = reading(s)?;
    let l0 = legit.at();
    proc::sleep(phase)?;
    let r1 = reading(s)?;
    let l1 = legit.at();
    let pid = s.sw.pid;
    let rss_before = Resources::read(pid).map(|r| r.rss_kib).ok();
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let th = std::thread::spawn(move || {
        nice_thread();
        body(&st)
    });
    let sampling = stop.clone();
    let sampler = std::thread::spawn(move || rss_peaks(pid, &sampling));
    proc::sleep(phase)?;
    let r2 = reading(s)?;
    let l2 = legit.at();
    stop.store(true, Ordering::Relaxed);
    let peaks = sampler.join().ok();
    let tally = th.join().unwrap_or_else(|_| Tally {
        notes: vec!["the attacker panicked".into()],
        ..Tally::default()
    });
    let r2b = reading(s)?;
    let l2b = legit.at();
    proc::sleep(phase)?;
    let r3 = reading(s)?;
    let l3 = legit.at();
    let rss = match (rss_before, peaks, Resources::read(pid)) {
        (Some(before_kib), Some((peak_kib, peak_guest_kib)), Ok(after)) => Some(RssPhases {
            before_kib,
            peak_kib,
            peak_guest_kib,
            after_kib: after.rss_kib,
        }),
        _ => None,
    };
    Ok(Phases {
        r0,
        r1,
        r2,
        r2b,
        r3,
        legit: [l0, l1, l2, l2b, l3],
        tally,
        rss,
    })
}

/// What the switch's open fds point to (`/proc/PID/fd`, readlink).
fn fd_targets(pid: u32) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .map(|p| p.display().to_string())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Waits up to 5 s (protocol threads end after `del-port` returns) for
/// the switch's fds to be those of `before` again, by kind (sockets and
/// anonymous inodes are numbered anew). `Err` names what stayed or went.
fn fds_back(pid: u32, before: &[String]) -> Result<(), String> {
    let kind = |t: &str| -> String {
        match t.split_once(":[") {
            Some((k, _)) => k.to_string(),
            None => t.to_string(),
        }
    };
    let count = |v: &[String]| {
        let mut m = BTreeMap::<String, i64>::new();
        for t in v {
            *m.entry(kind(t)).or_default() += 1;
        }
        m
    };
    let want = count(before);
    let end = Instant::now() + Duration::from_secs(5);
    loop {
        let now = count(&fd_targets(pid));
        if now == want {
            return Ok(());
        }
        if Instant::now() > end {
            let keys: std::collections::BTreeSet<_> = want.keys().chain(now.keys()).collect();
            let diff: Vec<String> = keys
                .into_iter()
                .filter_map(|k| {
                    let d = now.get(k).copied().unwrap_or(0) - want.get(k).copied().unwrap_or(0);
                    (d != 0).then(|| format!("{k} {d:+}"))
                })
                .collect();
            return Err(format!(
                "switch fds not back after the attack: {}",
                diff.join(", ")
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Drops that grew on the long-lived ports (ids below 1000) from `a`
/// to `b`, both directions.
fn drops(a: &[PortReport], b: &[PortReport]) -> Vec<(String, u64)> {
    let mut v = Vec::new();
    for pb in b.iter().filter(|p| p.no < 1000) {
        let Some(pa) = a.iter().find(|p| p.no == pb.no) else {
            continue;
        };
        for (da, db) in [(&pa.rx.drops, &pb.rx.drops), (&pa.tx.drops, &pb.tx.drops)] {
            for (k, y) in db {
                let d = y.saturating_sub(da.get(k).copied().unwrap_or(0));
                if d > 0 {
                    v.push((format!("{}.{k}", pb.name), d));
                }
            }
        }
    }
    v
}

/// `name = "x"` -> `x`.
fn port_name(keys: &str) -> String {
    keys.lines()
        .find_map(|l| l.strip_prefix("name = "))
        .map(|v| v.trim_matches('"').to_string())
        .unwrap_or_default()
}

/// `k=v k=v` tokens of a text gauge (the vring counters).
fn tokens(s: &str) -> BTreeMap<String, u64> {
    s.split_whitespace()
        .filter_map(|t| {
            let (k, v) = t.split_once('=')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

/// Counters of `names`' ports that grew from `a` to `b` (`port.key`,
/// `port.vringN:name`), and text gauges that changed (`quarantined`).
fn moved(a: &[PortReport], b: &[PortReport], names: &[String]) -> Vec<(String, String)> {
    let mut v = Vec::new();
    for n in names {
        let (Some(pa), Some(pb)) = (
            a.iter().find(|p| &p.name == n),
            b.iter().find(|p| &p.name == n),
        ) else {
            continue;
        };
        for (k, vb) in &pb.info {
            let va = pa.info.get(k).map_or("", |s| s.as_str());
            if let (Ok(x), Ok(y)) = (va.parse::<u64>(), vb.parse::<u64>()) {
                if y > x && k != "guest_memory_mib" {
                    v.push((format!("{n}.{k}"), format!("+{}", y - x)));
                }
            } else if k.starts_with("vring") {
                let (ta, tb) = (tokens(va), tokens(vb));
                for (c, y) in tb {
                    let x = ta.get(&c).copied().unwrap_or(0);
                    if y > x {
                        v.push((format!("{n}.{k}:{c}"), format!("+{}", y - x)));
                    }
                }
            } else if k == "quarantined" && va != vb {
                v.push((format!("{n}.{k}"), format!("{va} -> {vb}")));
            }
        }
    }
    v
}

fn judge(
    must_move: &[String],
    all_refused: bool,
    rates: &[ChainRate],
    moved: &[(String, String)],
    t: &Tally,
    legit: Option<[f64; 3]>,
) -> (bool, String) {
    let mut bad = Vec::new();
    for r in rates {
        if r.ratio() < MIN_RATIO {
            bad.push(format!(
                "chain {} at {:.0} % of its quiet rate",
                r.chain,
                100.0 * r.ratio()
            ));
        }
    }
    if !must_move.is_empty() && !must_move.iter().any(|m| moved.iter().any(|(k, _)| k == m)) {
        bad.push(format!("none of {} moved", must_move.join(", ")));
    }
    if t.tries == 0 {
        bad.push("the attacker sent nothing".into());
    }
    if all_refused && t.accepted > 0 {
        bad.push(format!(
            "{} of {} hostile requests accepted",
            t.accepted, t.tries
        ));
    }
    if must_move.is_empty() && t.accepted == 0 {
        bad.push("no short-lived port came up".into());
    }
    if let Some([q, a, _]) = legit
        && a < MIN_RATIO * q
    {
        bad.push(format!(
            "the legitimate client connected {:.0} % of tries under attack, {:.0} % quiet",
            100.0 * a,
            100.0 * q
        ));
    }
    (bad.is_empty(), bad.join("; "))
}

fn kpps(x: f64) -> String {
    format!("{:.1}", x / 1e3)
}

fn print_result(r: &AttackResult) {
    let rows: Vec<Vec<String>> = r
        .rates
        .iter()
        .map(|c| {
            vec![
                c.chain.clone(),
                kpps(c.quiet),
                kpps(c.attack),
                kpps(c.after),
                format!("{:.2}", c.ratio()),
            ]
        })
        .collect();
    let table = report::text_table(
        &[
            "innocent chain",
            "quiet kpps",
            "attack kpps",
            "quiet after",
            "attack/quiet",
        ],
        &rows,
    );
    for line in table.lines() {
        println!("    {line}");
    }
    if let Some([q, a, b]) = r.legit {
        println!(
            "    legitimate memif client connected: {:.0} % of tries quiet, {:.0} % under attack, {:.0} % after",
            100.0 * q,
            100.0 * a,
            100.0 * b
        );
    }
    println!("    counters moved: {}", moved_text(r));
    if let Some(m) = r.rss {
        println!(
            "    switch RSS: {:.1} MiB before, peak {:.1} MiB during the attack \
             (guest memory in it {:.1} MiB), {:.1} MiB after",
            m.before_kib as f64 / 1024.0,
            m.peak_kib as f64 / 1024.0,
            m.peak_guest_kib as f64 / 1024.0,
            m.after_kib as f64 / 1024.0
        );
    }
    let d: Vec<String> = r
        .innocent_drops
        .iter()
        .map(|(k, n)| format!("{k} +{n}"))
        .collect();
    println!(
        "    innocent ports' drops during the attack: {}",
        if d.is_empty() {
            "none".into()
        } else {
            d.join(", ")
        }
    );
    println!(
        "    attacker: {} tries, {} refused, {} accepted{}",
        r.tally.tries,
        r.tally.refused,
        r.tally.accepted,
        if r.tally.notes.is_empty() {
            String::new()
        } else {
            format!("; {}", r.tally.notes.join(" | "))
        }
    );
    println!(
        "    {}{}",
        if r.ok { "PASS" } else { "FAIL" },
        if r.why.is_empty() {
            String::new()
        } else {
            format!(": {}", r.why)
        }
    );
}

fn moved_text(r: &AttackResult) -> String {
    if r.moved.is_empty() {
        return "none".into();
    }
    r.moved
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The summary table: one row per attack and innocent chain.
pub fn summary_rows(results: &[AttackResult]) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for (i, r) in results.iter().enumerate() {
        for (j, c) in r.rates.iter().enumerate() {
            let first = j == 0;
            rows.push(vec![
                if first {
                    format!("{} {}", i + 1, r.name)
                } else {
                    String::new()
                },
                c.chain.split(':').next().unwrap_or("").to_string(),
                kpps(c.quiet),
                kpps(c.attack),
                format!("{:.2}", c.ratio()),
                if first { moved_text(r) } else { String::new() },
                match (first, r.rss) {
                    (true, Some(m)) => format!(
                        "{:.1} / {:.1}",
                        m.before_kib as f64 / 1024.0,
                        m.peak_kib as f64 / 1024.0
                    ),
                    _ => String::new(),
                },
                if first {
                    if r.ok { "PASS".into() } else { "FAIL".into() }
                } else {
                    String::new()
                },
            ]);
        }
    }
    rows
}

pub const SUMMARY_HEAD: [&str; 8] = [
    "attack",
    "chain",
    "quiet kpps",
    "attack kpps",
    "ratio",
    "refusal counters moved (attacker's ports)",
    "switch RSS MiB before / peak",
    "",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vring_tokens_and_ratio_rule() {
        let t = tokens("desc_out_of_memory=3 chain_too_long=1 setup_failures=0");
        assert_eq!(t["desc_out_of_memory"], 3);
        assert_eq!(t.len(), 3);
        let rate = |q, a| ChainRate {
            chain: "A".into(),
            quiet: q,
            attack: a,
            after: q,
        };
        let moved = vec![("p.bad_head".to_string(), "+1".to_string())];
        let t = Tally {
            tries: 5,
            ..Tally::default()
        };
        let must = vec!["p.bad_head".to_string()];
        assert!(judge(&must, true, &[rate(20e3, 18.5e3)], &moved, &t, None).0);
        assert!(!judge(&must, true, &[rate(20e3, 17e3)], &moved, &t, None).0);
        assert!(
            !judge(
                &["p.refused".into()],
                true,
                &[rate(1.0, 1.0)],
                &moved,
                &t,
                None
            )
            .0
        );
        let accepted = Tally {
            accepted: 1,
            ..t.clone()
        };
        assert!(!judge(&must, true, &[rate(1.0, 1.0)], &moved, &accepted, None).0);
        assert!(!judge(&must, false, &[], &moved, &t, Some([1.0, 0.5, 1.0])).0);
    }
}
