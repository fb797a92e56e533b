//! `nfv-bench vm-tcp`: what a VM user measures first — iperf3 between two
//! QEMU guests — through three paths on the same machine with the same
//! pinning:
//!
//! * nfvswitch: two vhost-user ports (client mode; QEMU serves the
//!   sockets), rules port 1 <-> port 2, one PMD;
//! * OVS-DPDK 3.1 with `userspace-tso-enable=true` (set before the daemon
//!   starts: OVS reads it once), `dpdkvhostuserclient` ports, the same two
//!   rules, one PMD;
//! * the kernel: a Linux bridge and two taps (`vnet_hdr`), QEMU's
//!   userspace virtio-net on them, or vhost-net where `/dev/vhost-net`
//!   exists.
//!
//! Each trial starts the path, boots both guests (the image of
//! `scripts/qemu-guest`, KVM where a probe guest boots, else TCG), and
//! runs from guest A to guest B: TCP one stream, TCP four streams (`-P 4`)
//! and UDP with 18-byte payloads (64-byte frames, `-b 0`: as fast as the
//! sender can) whose received packets per second are reported. Rounds
//! interleave the paths (A B C A B C ...); the table gives medians and the
//! ratios nfvswitch/OVS and nfvswitch/kernel. Both guests' vCPU threads
//! run on the guest CPU, every switch's PMD on the switch CPU; QEMU's
//! other threads (under TCG they inject the guest's interrupts; in the
//! kernel path without vhost-net they move the tap's frames) and the
//! switches' control threads are left to the scheduler.
//!
//! Everything started is stopped by guards, also on error and Ctrl-C:
//! guests (killed on drop), daemons ([`Proc`]), the bridge and taps
//! ([`Bridge`]) and the hugepage setting ([`host::Hugepages`]).

use crate::host;
use crate::ovs::{DpdkSetup, OvsDaemons};
use crate::proc::{self, Proc, run_ok};
use crate::report;
use nfv_testutil::qemu::{Extras, Guest, Image, Launch, Spec, Tap, iperf};
use nix::sys::signal::Signal;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct VmTcpArgs {
    /// Interleaved rounds (each path once per round).
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Seconds per iperf3 run.
    #[arg(long, default_value_t = 10)]
    pub seconds: u32,
    /// The paths, in the order each round runs them.
    #[arg(long, value_delimiter = ',', default_value = "nfvswitch,ovs,kernel")]
    pub paths: Vec<PathKind>,
    /// CPU of the guests (every QEMU thread).
    #[arg(long, default_value_t = 0)]
    pub guest_cpu: usize,
    /// CPU of each switch's PMD.
    #[arg(long, default_value_t = 1)]
    pub switch_cpu: usize,
    /// The nfvswitch binary (default: target/release/nfvswitch, built if missing).
    #[arg(long)]
    pub nfvswitch: Option<PathBuf>,
    /// Where the JSON and markdown results go (default: bench/results/).
    #[arg(long)]
    pub results: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PathKind {
    Nfvswitch,
    Ovs,
    Kernel,
}

impl PathKind {
    fn name(self) -> &'static str {
        match self {
            PathKind::Nfvswitch => "nfvswitch",
            PathKind::Ovs => "ovs-dpdk (tso)",
            PathKind::Kernel => "kernel bridge",
        }
    }
    fn short(self) -> &'static str {
        match self {
            PathKind::Nfvswitch => "nfv",
            PathKind::Ovs => "ovs",
            PathKind::Kernel => "kernel",
        }
    }
}

/// The three measurements of a trial, in order.
const TESTS: [&str; 3] = ["TCP 1 stream Gbps", "TCP 4 streams Gbps", "UDP 64 B kpps"];
const BOOT: Duration = Duration::from_secs(300);
const CMD: Duration = Duration::from_secs(30);
const GUESTS: [(&str, &str, &str); 2] = [
    ("vm-a", "52:54:00:76:00:0a", "198.19.0.1/24"),
    ("vm-b", "52:54:00:76:00:0b", "198.19.0.2/24"),
];

/// What one trial measured: per test the figure, and the switch PMD's
/// busy % and TSC cycles per received packet over the run (None for the
/// kernel path, which has no PMD).
#[derive(Clone, Debug, Default, serde::Serialize)]
struct Trial {
    figures: [f64; 3],
    pmd_busy: [Option<f64>; 3],
    pmd_cycles_per_packet: [Option<f64>; 3],
    sender_cpu: [f64; 3],
    lines: Vec<String>,
    boot_secs: f64,
}

pub fn vm_tcp(a: VmTcpArgs) -> Result<(), String> {
    let run_dir = host::run_dir()?;
    let image = match guest_image() {
        Ok(i) => i,
        Err(why) => {
            println!("vm-tcp: SKIPPED: no guest image: {why}");
            return Ok(());
        }
    };
    let (image, accel) = image.probe_accel(&run_dir);
    let ready = Ready::of(&a, &run_dir);
    let paths: Vec<PathKind> = a
        .paths
        .iter()
        .copied()
        .filter(|p| !ready.skip.iter().any(|(s, _)| s == p))
        .collect();
    print_setup(&a, &image, &accel, ready.vhost_net, &run_dir);
    let t0 = Instant::now();
    let trials = run_rounds(&a, &paths, &ready, &image, &run_dir)?;
    report_all(
        &a,
        &paths,
        &ready.skip,
        &trials,
        &accel,
        ready.vhost_net,
        t0,
    );
    if proc::interrupted() {
        return Err("interrupted (partial results above)".into());
    }
    Ok(())
}

/// What the paths need, got ready once; the paths that cannot run, with
/// why (printed as they are found).
struct Ready {
    nfvswitch: PathBuf,
    /// OVS's hugepages, put back when dropped.
    _huge: Option<host::Hugepages>,
    vhost_net: bool,
    skip: Vec<(PathKind, String)>,
}

impl Ready {
    fn of(a: &VmTcpArgs, run_dir: &Path) -> Ready {
        let mut r = Ready {
            nfvswitch: PathBuf::new(),
            _huge: None,
            vhost_net: false,
            skip: Vec::new(),
        };
        for &p in &a.paths {
            let ready = match p {
                PathKind::Nfvswitch => {
                    crate::scenario::nfvswitch_binary(a.nfvswitch.clone()).map(|b| r.nfvswitch = b)
                }
                PathKind::Ovs => crate::ovs::prepare().and_then(|()| {
                    let pages = crate::ovs::SOCKET_MEM_MB / 2 + 64;
                    r._huge = Some(host::Hugepages::reserve(pages, run_dir)?);
                    Ok(())
                }),
                PathKind::Kernel => kernel_ready().map(|v| r.vhost_net = v),
            };
            if let Err(why) = ready {
                println!("vm-tcp: SKIPPED {}: {why}", p.name());
                r.skip.push((p, why));
            }
        }
        r
    }
}

/// Every round over `paths`, each trial printed as it ends; stops at
/// Ctrl-C with what it has.
fn run_rounds(
    a: &VmTcpArgs,
    paths: &[PathKind],
    ready: &Ready,
    image: &Image,
    run_dir: &Path,
) -> Result<Vec<RoundTrial>, String> {
    let mut trials = Vec::new();
    for round in 1..=a.rounds {
        for &p in paths {
            let dir = run_dir.join(format!("r{round}-{}", p.short()));
            let _ = std::fs::create_dir_all(&dir);
            let bed = Bed {
                image,
                dir: &dir,
                nfvswitch: &ready.nfvswitch,
                cpus: (a.guest_cpu, a.switch_cpu),
                vhost_net: ready.vhost_net,
                seconds: a.seconds,
            };
            // Other people's builds on a 2-CPU machine halve a guest.
            host::wait_quiet(25.0, Duration::from_secs(90))?;
            let r = bed.trial(p);
            match &r {
                Ok(t) => {
                    println!(
                        "round {round} {}: {:.3} / {:.3} Gbps, {:.1} kpps (boot {:.0} s)",
                        p.name(),
                        t.figures[0],
                        t.figures[1],
                        t.figures[2],
                        t.boot_secs
                    );
                    for l in &t.lines {
                        println!("    {l}");
                    }
                }
                Err(e) => println!("round {round} {}: FAILED: {e}", p.name()),
            }
            trials.push((p, round, r));
            if proc::interrupted() {
                return Ok(trials);
            }
        }
    }
    Ok(trials)
}

/// The cached guest image, built first (as root with apt) when missing.
fn guest_image() -> Result<Image, String> {
    if let Ok(i) = Image::find() {
        return Ok(i);
    }
    if !host::is_root() {
        return Image::find();
    }
    let script = crate::host::checkout().join("scripts/qemu-guest");
    eprintln!("nfv-bench: building the guest image ({})", script.display());
    let mut c = Command::new("bash");
    c.arg(&script);
    proc::run_to_end(c, Duration::from_secs(1200))?;
    Image::find()
}

/// Root and a tun device; whether vhost-net is there (after trying to
/// load it).
fn kernel_ready() -> Result<bool, String> {
    if !host::is_root() {
        return Err("not root (a bridge and taps need it)".into());
    }
    if !Path::new("/dev/net/tun").exists() {
        return Err("no /dev/net/tun".into());
    }
    if !Path::new("/dev/vhost-net").exists() {
        let mut c = Command::new("modprobe");
        c.arg("vhost_net");
        let _ = proc::run(c, Duration::from_secs(10));
    }
    Ok(Path::new("/dev/vhost-net").exists())
}

fn print_setup(a: &VmTcpArgs, image: &Image, accel: &str, vhost_net: bool, dir: &Path) {
    println!(
        "vm-tcp: {} rounds x {:?}, iperf3 {} s per run, guest A -> guest B",
        a.rounds,
        a.paths.iter().map(|p| p.name()).collect::<Vec<_>>(),
        a.seconds
    );
    println!(
        "  guests: {accel}; 1 vCPU, 256 MiB each; kernel {}",
        image.kernel.display()
    );
    println!(
        "  pinning: both guests' vCPU threads on CPU {g} (QEMU's main loop and I/O threads unpinned); \
         nfvswitch PMD on CPU {s} (its other threads unpinned); OVS PMD on CPU {s} (pmd-cpu-mask), \
         its main thread on CPU {g} (dpdk-lcore-mask); kernel path: no PMD, the bridge forwards \
         in the thread that writes to the tap (the sending QEMU's I/O thread{vhost}, unpinned)",
        g = a.guest_cpu,
        s = a.switch_cpu,
        vhost = if vhost_net {
            " or vhost-net's kernel thread"
        } else {
            ""
        }
    );
    println!(
        "  kernel path: bridge + tap, {}",
        if vhost_net {
            "vhost-net"
        } else {
            "no /dev/vhost-net: QEMU's userspace virtio-net on the taps"
        }
    );
    println!("  private files in {}", dir.display());
}

/// One trial's set-up.
struct Bed<'a> {
    image: &'a Image,
    dir: &'a Path,
    nfvswitch: &'a Path,
    /// (guests, switch PMD)
    cpus: (usize, usize),
    vhost_net: bool,
    seconds: u32,
}

/// The path under test, stopped on drop.
enum Switch {
    Nfv(NfvNode),
    Ovs(OvsNode),
    Kernel(Bridge),
}

impl Switch {
    /// Before a run: remember the PMD counters.
    fn window_start(&mut self) -> Result<(), String> {
        match self {
            Switch::Nfv(n) => {
                n.start = n.counters()?;
                Ok(())
            }
            Switch::Ovs(o) => o.appctl(&["dpif-netdev/pmd-stats-clear"]).map(|_| ()),
            Switch::Kernel(_) => Ok(()),
        }
    }

    /// After it: (busy %, cycles per received packet) of the PMD.
    fn window_end(&mut self) -> (Option<f64>, Option<f64>) {
        match self {
            Switch::Nfv(n) => n.counters().map_or((None, None), |c| {
                let (rx, busy, idle) = (
                    c.0.saturating_sub(n.start.0),
                    c.1.saturating_sub(n.start.1),
                    c.2.saturating_sub(n.start.2),
                );
                (
                    Some(100.0 * busy as f64 / (busy + idle).max(1) as f64),
                    (rx > 0).then(|| busy as f64 / rx as f64),
                )
            }),
            Switch::Ovs(o) => o
                .appctl(&["dpif-netdev/pmd-perf-show"])
                .ok()
                .and_then(|t| crate::ovs::parse_pmd_perf(&t))
                .map_or((None, None), |p| {
                    (Some(p.busy_percent), Some(p.cycles_per_packet))
                }),
            Switch::Kernel(_) => (None, None),
        }
    }

    fn ensure_alive(&mut self) -> Result<(), String> {
        match self {
            Switch::Nfv(n) => n.proc.ensure_alive(),
            Switch::Ovs(o) => o.daemons.ensure_alive(),
            Switch::Kernel(_) => Ok(()),
        }
    }
}

impl Bed<'_> {
    fn sock(&self, i: usize) -> PathBuf {
        self.dir.join(format!("vm{i}.sock"))
    }

    fn trial(&self, kind: PathKind) -> Result<Trial, String> {
        let mut sw = match kind {
            PathKind::Nfvswitch => Switch::Nfv(NfvNode::start(self)?),
            PathKind::Ovs => Switch::Ovs(OvsNode::start(self)?),
            PathKind::Kernel => Switch::Kernel(Bridge::create(self.dir)?),
        };
        let launch = |i: usize| Launch {
            device: None,
            tap: match &sw {
                Switch::Kernel(b) => Some(Tap {
                    ifname: b.taps[i].clone(),
                    vhost: self.vhost_net,
                }),
                _ => None,
            },
            vcpu_cpu: Some(self.cpus.0),
        };
        let spec = |i: usize| Spec {
            name: GUESTS[i].0,
            mac: GUESTS[i].1,
            ip: GUESTS[i].2,
            socket: self.sock(i),
            qemu_server: true,
            queues: 1,
            mrg_rxbuf: true,
            packed: false,
        };
        let (la, lb) = (launch(0), launch(1));
        let t = Instant::now();
        let (ra, rb) = std::thread::scope(|s| {
            let ta = s.spawn(|| {
                Guest::launch(self.image, spec(0), self.dir, BOOT, Extras::default(), &la)
            });
            let tb = s.spawn(|| {
                Guest::launch(self.image, spec(1), self.dir, BOOT, Extras::default(), &lb)
            });
            (
                ta.join().unwrap_or_else(|_| Err("boot panicked".into())),
                tb.join().unwrap_or_else(|_| Err("boot panicked".into())),
            )
        });
        let (mut ga, mut gb) = (ra?, rb?);
        let boot_secs = t.elapsed().as_secs_f64();
        proc::check()?;
        sw.ensure_alive()?;
        reachable(&mut ga, GUESTS[1].2)?;
        let mut trial = Trial {
            boot_secs,
            ..Trial::default()
        };
        let offloads = nfv_testutil::qemu::guest_offloads(&mut ga, CMD)?;
        trial.lines.push(format!("guest offloads: {offloads}"));
        let runs = [
            iperf::Run::tcp(1, self.seconds),
            iperf::Run::tcp(4, self.seconds),
            iperf::Run::udp(18, self.seconds),
        ];
        let addr_b = GUESTS[1].2.split('/').next().unwrap_or_default();
        for (i, r) in runs.iter().enumerate() {
            proc::check()?;
            sw.window_start()?;
            let o = iperf::run(&mut ga, &mut gb, addr_b, r)
                .map_err(|e| format!("{}: {e}", TESTS[i]))?;
            let (busy, cyc) = sw.window_end();
            sw.ensure_alive()?;
            if r.udp_len.is_none() {
                o.check_tcp(TESTS[i])?;
            }
            trial.figures[i] = o.rx_pps.map_or(o.gbps, |p| p / 1e3);
            trial.pmd_busy[i] = busy;
            trial.pmd_cycles_per_packet[i] = cyc;
            trial.sender_cpu[i] = o.sender_cpu;
            trial.lines.push(format!("{}: {}", TESTS[i], o.summary()));
        }
        let _ = std::fs::write(self.dir.join("trial.txt"), trial.lines.join("\n") + "\n");
        Ok(trial)
    }
}

/// Waits until `g` gets a ping reply from `cidr`'s address.
fn reachable(g: &mut Guest, cidr: &str) -> Result<(), String> {
    let ip = cidr.split('/').next().unwrap_or(cidr);
    g.ok(
        &format!("for i in $(seq 60); do ping -c 1 -W 1 {ip} >/dev/null && exit 0; done; exit 1"),
        Duration::from_secs(120),
    )
    .map(|_| ())
    .map_err(|e| format!("guest A never reached {ip}: {e}"))
}

/// The node: vhost-user ports `vm-a` (1) and `vm-b` (2) in client mode
/// on `socks`, rules 1 <-> 2, one PMD on `core`.
fn nfv_config_text(control: &Path, socks: [&Path; 2], core: usize) -> String {
    let mut cfg = format!(
        "flows = [\"priority=10,in_port=1,actions=output:2\", \"priority=10,in_port=2,actions=output:1\"]\n\
         [node]\nname = \"vmtcp-{}\"\ncontrol_socket = {:?}\napi = \"off\"\n[pmd]\ncores = [{core}]\n",
        std::process::id(),
        control.display().to_string(),
    );
    for (i, (name, _, _)) in GUESTS.iter().enumerate() {
        cfg += &format!(
            "\n[[port]]\nname = \"{name}\"\nid = {}\ntype = \"vhost-user\"\nsocket = {:?}\nmode = \"client\"\nqueues = 1\n",
            i + 1,
            socks[i].display().to_string()
        );
    }
    cfg
}

/// `nfvswitch run`: two vhost-user ports in client mode, port 1 <-> 2.
struct NfvNode {
    proc: Proc,
    socket: PathBuf,
    /// (rx packets, busy cycles, idle cycles) at the window's start.
    start: (u64, u64, u64),
}

impl NfvNode {
    fn start(bed: &Bed) -> Result<NfvNode, String> {
        let socket = bed.dir.join("ctl.sock");
        let cfg = nfv_config_text(&socket, [&bed.sock(0), &bed.sock(1)], bed.cpus.1);
        let path = bed.dir.join("node.toml");
        std::fs::write(&path, cfg).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut c = Command::new(bed.nfvswitch);
        c.args(["--log", "info", "run"]).arg(&path);
        let mut proc = Proc::spawn(
            "nfvswitch",
            c,
            &bed.dir.join("nfvswitch.log"),
            Signal::SIGINT,
        )?;
        let end = Instant::now() + Duration::from_secs(20);
        while !socket.exists() {
            proc.ensure_alive()?;
            if Instant::now() > end {
                return Err("nfvswitch: no control socket after 20 s".into());
            }
            proc::sleep(Duration::from_millis(20))?;
        }
        Ok(NfvNode {
            proc,
            socket,
            start: (0, 0, 0),
        })
    }

    fn counters(&self) -> Result<(u64, u64, u64), String> {
        let reply = nfv_control::request(&self.socket, &nfv_control::Request::ShowPmd)?;
        let data = match reply {
            nfv_control::Response::Ok { data } => data,
            nfv_control::Response::Error { message } => return Err(format!("show pmd: {message}")),
        };
        let pmds: Vec<nfv_control::protocol::PmdReport> =
            serde_json::from_value(data).map_err(|e| format!("show pmd: {e}"))?;
        Ok(pmds.iter().fold((0, 0, 0), |s, p| {
            (
                s.0 + p.figures.rx_packets,
                s.1 + p.figures.busy_cycles,
                s.2 + p.figures.idle_cycles,
            )
        }))
    }
}

/// OVS-DPDK 3.1 as in `crate::ovs` (private ovsdb-server and
/// `ovs-vswitchd-dpdk`, state under the trial directory), but with
/// `userspace-tso-enable=true` before the daemon starts and rules both
/// ways between two `dpdkvhostuserclient` ports. Dropping it stops both.
struct OvsNode {
    daemons: OvsDaemons,
}

impl OvsNode {
    fn start(bed: &Bed) -> Result<OvsNode, String> {
        let (g, s) = bed.cpus;
        let daemons = OvsDaemons::start(
            bed.dir,
            &DpdkSetup {
                lcore_cpu: g,
                pmd_cpus: vec![s],
                file_prefix: format!("vmtcp{}_ovs", std::process::id()),
                other_config: &["other_config:userspace-tso-enable=true"],
            },
        )?;
        let tso = daemons.vsctl(&[
            "get",
            "Open_vSwitch",
            ".",
            "other_config:userspace-tso-enable",
        ])?;
        if tso.trim().trim_matches('"') != "true" {
            return Err(format!("OVS userspace-tso-enable reads {tso:?}"));
        }
        let o = OvsNode { daemons };
        o.add_ports(bed)?;
        Ok(o)
    }

    fn appctl(&self, args: &[&str]) -> Result<String, String> {
        self.daemons.appctl(args)
    }

    /// The bridge, one vhost-user client port per guest, rules 1 <-> 2.
    fn add_ports(&self, bed: &Bed) -> Result<(), String> {
        let o = &self.daemons;
        o.vsctl(&[
            "add-br",
            "br0",
            "--",
            "set",
            "bridge",
            "br0",
            "datapath_type=netdev",
        ])?;
        for (i, &(name, _, _)) in GUESTS.iter().enumerate() {
            o.vsctl(&[
                "add-port",
                "br0",
                name,
                "--",
                "set",
                "Interface",
                name,
                "type=dpdkvhostuserclient",
                &format!("options:vhost-server-path={}", bed.sock(i).display()),
                &format!("ofport_request={}", i + 1),
            ])?;
        }
        o.ofctl(&["del-flows", "br0"])?;
        for (from, to) in [(1, 2), (2, 1)] {
            o.ofctl(&[
                "add-flow",
                "br0",
                &format!("priority=10,in_port={from},actions=output:{to}"),
            ])?;
        }
        Ok(())
    }
}

/// A Linux bridge with two `vnet_hdr` taps, deleted on drop.
struct Bridge {
    name: String,
    taps: [String; 2],
    /// What exists (deleted on drop, in reverse).
    made: Vec<String>,
}

impl Bridge {
    fn create(dir: &Path) -> Result<Bridge, String> {
        let id = std::process::id() % 1_000_000;
        let mut b = Bridge {
            name: format!("nfvbr{id}"),
            taps: [format!("nfvt{id}a"), format!("nfvt{id}b")],
            made: Vec::new(),
        };
        ip(&["link", "add", &b.name, "type", "bridge"])?;
        b.made.push(b.name.clone());
        ip(&["link", "set", &b.name, "up"])?;
        for t in b.taps.clone() {
            ip(&["tuntap", "add", "dev", &t, "mode", "tap", "vnet_hdr"])?;
            b.made.push(t.clone());
            ip(&["link", "set", &t, "master", &b.name, "up"])?;
        }
        let _ = std::fs::write(dir.join("bridge.txt"), format!("{} {:?}\n", b.name, b.taps));
        Ok(b)
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        for d in self.made.drain(..).rev() {
            let mut c = Command::new("ip");
            c.args(["link", "del", &d]);
            // Not interruptible: this is the cleanup.
            if let Err(e) = proc::run_to_end(c, Duration::from_secs(10)) {
                eprintln!("nfv-bench: ip link del {d}: {e}");
            }
        }
    }
}

fn ip(args: &[&str]) -> Result<(), String> {
    let mut c = Command::new("ip");
    c.args(args);
    run_ok(c, Duration::from_secs(10)).map(|_| ())
}

/// A path's trial in a round (1-based).
type RoundTrial = (PathKind, usize, Result<Trial, String>);
type Trials = [RoundTrial];

const HEAD: [&str; 7] = [
    "test",
    "path",
    "median (min..max)",
    "PMD busy %",
    "PMD cyc/pkt",
    "sender CPU %",
    "ok",
];
const RATIO_HEAD: [&str; 3] = ["test", "nfvswitch / OVS-DPDK (tso)", "nfvswitch / kernel"];

/// The successful trials of path `p`.
fn oks(trials: &Trials, p: PathKind) -> Vec<&Trial> {
    trials
        .iter()
        .filter(|(k, _, _)| *k == p)
        .filter_map(|(_, _, r)| r.as_ref().ok())
        .collect()
}

/// Median (min, max) of `f` over path `p`'s successful trials.
fn med(trials: &Trials, p: PathKind, f: impl Fn(&Trial) -> Option<f64>) -> Option<(f64, f64, f64)> {
    report::median(&oks(trials, p).into_iter().filter_map(f).collect::<Vec<_>>())
}

/// One row per test and path (medians), one row per test of ratios.
fn tables(paths: &[PathKind], trials: &Trials) -> (Vec<Vec<String>>, Vec<Vec<String>>) {
    let whole = |v: Option<(f64, f64, f64)>| v.map_or("-".into(), |m| format!("{:.0}", m.0));
    let mut rows = Vec::new();
    for (i, test) in TESTS.iter().enumerate() {
        for &p in paths {
            let prec = if i == 2 { 1 } else { 3 };
            let fails = trials
                .iter()
                .filter(|(k, _, r)| *k == p && r.is_err())
                .count();
            let ok = oks(trials, p).len();
            rows.push(vec![
                test.to_string(),
                p.name().to_string(),
                report::fmt_range(med(trials, p, |t| Some(t.figures[i])), prec),
                whole(med(trials, p, |t| t.pmd_busy[i])),
                whole(med(trials, p, |t| t.pmd_cycles_per_packet[i])),
                whole(med(trials, p, |t| Some(t.sender_cpu[i]))),
                format!("{ok}/{}", ok + fails),
            ]);
        }
    }
    let mut ratios = Vec::new();
    for (i, test) in TESTS.iter().enumerate() {
        let m = |p| med(trials, p, |t| Some(t.figures[i])).map(|m| m.0);
        let r = |other| match (m(PathKind::Nfvswitch), m(other)) {
            (Some(x), Some(y)) if y > 0.0 => format!("{:.2}", x / y),
            _ => "-".into(),
        };
        ratios.push(vec![
            test.to_string(),
            r(PathKind::Ovs),
            r(PathKind::Kernel),
        ]);
    }
    (rows, ratios)
}

fn report_all(
    a: &VmTcpArgs,
    paths: &[PathKind],
    skip: &[(PathKind, String)],
    trials: &Trials,
    accel: &str,
    vhost_net: bool,
    t0: Instant,
) {
    let (rows, ratio_rows) = tables(paths, trials);
    let kernel = if vhost_net {
        "with vhost-net"
    } else {
        "without vhost-net"
    };
    println!(
        "\nmedians over {} rounds ({:.1} min); guests under {accel}; kernel path {kernel}",
        a.rounds,
        t0.elapsed().as_secs_f64() / 60.0,
    );
    print!("{}", report::text_table(&HEAD, &rows));
    println!("\nratios of the medians:");
    print!("{}", report::text_table(&RATIO_HEAD, &ratio_rows));
    for (p, why) in skip {
        println!("SKIPPED {}: {why}", p.name());
    }
    for (p, round, r) in trials {
        if let Err(e) = r {
            println!("round {round} {} failed: {e}", p.name());
        }
    }
    let ts = host::timestamp();
    let json = serde_json::json!({
        "kind": "vm-tcp",
        "timestamp_utc": ts,
        "accel": accel,
        "vhost_net": vhost_net,
        "args": {"rounds": a.rounds, "seconds": a.seconds, "guest_cpu": a.guest_cpu, "switch_cpu": a.switch_cpu},
        "trials": trials.iter().map(|(p, round, r)| serde_json::json!({
            "path": p.name(), "round": round,
            "result": r.as_ref().map_err(String::clone),
        })).collect::<Vec<_>>(),
    });
    let md = format!(
        "# nfv-bench vm-tcp {ts}\n\nGuests under {accel}; kernel path {kernel}.\n\n{}\n{}",
        report::md_table(&HEAD, &rows),
        report::md_table(&RATIO_HEAD, &ratio_rows)
    );
    report::save_results(
        &report::results_dir(a.results.clone()),
        &format!("vm-tcp-{ts}"),
        &json,
        &md,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_config_is_valid_and_forwards_both_ways() {
        let dir = std::env::temp_dir().join(format!("nfv-bench-vmtcp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b) = (dir.join("a.sock"), dir.join("b.sock"));
        let text = nfv_config_text(&dir.join("ctl.sock"), [&a, &b], 1);
        let path = dir.join("node.toml");
        std::fs::write(&path, &text).unwrap();
        let cfg = nfv_config::load(&path).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(cfg.ports.len(), 2);
        assert_eq!(cfg.pmd.cores, vec![1]);
        let flows: Vec<String> = cfg.flows.iter().map(|f| f.to_string()).collect();
        assert!(
            flows
                .iter()
                .any(|f| f.contains("in_port=1") && f.contains("output:2"))
        );
        assert!(
            flows
                .iter()
                .any(|f| f.contains("in_port=2") && f.contains("output:1"))
        );
    }

    #[test]
    fn medians_and_ratios() {
        let t = |x: f64| Trial {
            figures: [x, 2.0 * x, 10.0 * x],
            ..Trial::default()
        };
        let trials = vec![
            (PathKind::Nfvswitch, 1, Ok(t(1.0))),
            (PathKind::Ovs, 1, Ok(t(2.0))),
            (PathKind::Kernel, 1, Err("boot failed".into())),
            (PathKind::Nfvswitch, 2, Ok(t(3.0))),
            (PathKind::Ovs, 2, Ok(t(2.0))),
            (PathKind::Kernel, 2, Ok(t(4.0))),
        ];
        let paths = [PathKind::Nfvswitch, PathKind::Ovs, PathKind::Kernel];
        let (rows, ratios) = tables(&paths, &trials);
        assert_eq!(rows.len(), 9);
        assert_eq!(rows[0][2], "2.000 (1.000..3.000)");
        assert_eq!(rows[2][6], "1/2");
        // nfv median 2.0 vs OVS 2.0 and kernel 4.0.
        assert_eq!(ratios[0], ["TCP 1 stream Gbps", "1.00", "0.50"]);
    }
}
