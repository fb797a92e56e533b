//! Interop with DPDK testpmd (`dpdk-testpmd`, Debian package `dpdk-dev`)
//! as the VNF, through the real datapath:
//!
//! ```text
//!  frames port ──▶ p1 (vhost-user, client mode) ══▶ testpmd port 0 (virtio-user, server=1)
//!                                                        │ io forwarding, paired
//!  check port ◀── p2 (vhost-user, server mode) ◀══ testpmd port 1 (virtio-user client)
//! ```
//!
//! Every frame that comes back must be byte-identical to the one sent with
//! its sequence number, and the counts must agree with testpmd's. testpmd
//! runs with `--no-huge` (no hugepages needed); without the binary the test
//! prints SKIPPED. Every process started is killed by PID, also on panic.

mod common;

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{cfg, frame, pool, sock, wait_status};
use nfv_datapath::{Datapath, DatapathConfig};
use nfv_flow::parse_flow;
use nfv_flow::table::SharedFlowTable;
use nfv_mem::{Batch, PoolCache};
use nfv_ports::config::VhostUserMode::{Client, Server};
use nfv_ports::{DropReason, Port, RxQueue, TxQueue};
use nfv_vhost::VhostUserPort;

const TEST: &str = "testpmd::interop_with_testpmd";

/// A running testpmd; killed (SIGINT, then SIGKILL) when dropped.
struct TestPmd {
    child: Option<Child>,
    prefix: String,
}

impl TestPmd {
    fn start(args: &[String], prefix: &str) -> std::io::Result<TestPmd> {
        let child = Command::new("dpdk-testpmd")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        Ok(TestPmd {
            child: Some(child),
            prefix: prefix.to_string(),
        })
    }

    fn alive(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Stops it (SIGINT makes it print its final statistics) and returns
    /// its stdout and stderr.
    fn stop(&mut self) -> (String, String) {
        let Some(mut c) = self.child.take() else {
            return Default::default();
        };
        let pid = c.id() as libc::pid_t;
        // SAFETY: signals our own child, which has not been reaped yet.
        unsafe { libc::kill(pid, libc::SIGINT) };
        let end = Instant::now() + Duration::from_secs(10);
        while matches!(c.try_wait(), Ok(None)) && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
        }
        if matches!(c.try_wait(), Ok(None)) {
            let _ = c.kill();
        }
        let _ = c.wait();
        let (mut out, mut err) = (String::new(), String::new());
        if let Some(mut s) = c.stdout.take() {
            let _ = s.read_to_string(&mut out);
        }
        if let Some(mut s) = c.stderr.take() {
            let _ = s.read_to_string(&mut err);
        }
        let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/{}", self.prefix));
        (out, err)
    }
}

impl Drop for TestPmd {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The probe frame sent until testpmd forwards (its RX ring is filled
/// only when its port starts, a little after the vrings are set up).
fn probe() -> Vec<u8> {
    frame(64, u32::MAX)
}

const IDLE: u8 = 0;
const PROBING: u8 = 1;
const RUNNING: u8 = 2;

/// Sends probes every 10 ms while PROBING, then a fixed list of frames,
/// paced, while RUNNING.
struct FramesPort {
    frames: Arc<Vec<Vec<u8>>>,
    next: Arc<AtomicUsize>,
    state: Arc<AtomicU8>,
    probes: Arc<AtomicUsize>,
}

struct FramesRx {
    frames: Arc<Vec<Vec<u8>>>,
    next: Arc<AtomicUsize>,
    state: Arc<AtomicU8>,
    probes: Arc<AtomicUsize>,
    last: Instant,
}

impl RxQueue for FramesRx {
    fn rx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        let state = self.state.load(Acquire);
        if state == PROBING && self.last.elapsed() >= Duration::from_millis(10) {
            self.last = Instant::now();
            let f = probe();
            let Some(mut p) = pool.alloc() else { return 0 };
            p.room_mut()[..f.len()].copy_from_slice(&f);
            let _ = p.set_len(f.len());
            batch.push(p);
            self.probes.fetch_add(1, Relaxed);
            return 1;
        }
        // 16 frames per ms (16 kpps): a 256-entry ring then absorbs 16 ms
        // of testpmd being descheduled on this small machine.
        if state != RUNNING || self.last.elapsed() < Duration::from_millis(1) {
            return 0;
        }
        self.last = Instant::now();
        let mut n = 0;
        while n < 16 {
            let i = self.next.load(Relaxed);
            let Some(f) = self.frames.get(i) else { break };
            let Some(mut p) = pool.alloc() else { break };
            p.room_mut()[..f.len()].copy_from_slice(f);
            let _ = p.set_len(f.len());
            batch.push(p);
            self.next.store(i + 1, Relaxed);
            n += 1;
        }
        n
    }
}

impl Port for FramesPort {
    fn name(&self) -> &str {
        "frames"
    }
    fn type_name(&self) -> &'static str {
        "test-frames"
    }
    fn n_rxq(&self) -> usize {
        1
    }
    fn open_rxq(&self, _q: usize) -> Box<dyn RxQueue> {
        Box::new(FramesRx {
            frames: self.frames.clone(),
            next: self.next.clone(),
            state: self.state.clone(),
            probes: self.probes.clone(),
            last: Instant::now(),
        })
    }
    fn open_txq(&self, _q: usize) -> Box<dyn TxQueue> {
        Box::new(CheckTx(Arc::default()))
    }
}

/// Records every frame sent to it.
struct CheckPort(Arc<Mutex<Vec<Vec<u8>>>>);
struct CheckTx(Arc<Mutex<Vec<Vec<u8>>>>);

impl TxQueue for CheckTx {
    fn tx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        let n = batch.len();
        let mut got = self.0.lock().unwrap();
        got.extend(batch.iter().map(|p| p.data().to_vec()));
        pool.free_batch(batch);
        n
    }
}

impl Port for CheckPort {
    fn name(&self) -> &str {
        "check"
    }
    fn type_name(&self) -> &'static str {
        "test-check"
    }
    fn n_rxq(&self) -> usize {
        1
    }
    fn open_rxq(&self, _q: usize) -> Box<dyn RxQueue> {
        nfv_ports::sink::no_rx()
    }
    fn open_txq(&self, _q: usize) -> Box<dyn TxQueue> {
        Box::new(CheckTx(self.0.clone()))
    }
}

/// `RX-packets`/`TX-packets` of `port` in testpmd's final statistics.
fn testpmd_count(out: &str, port: usize, what: &str) -> Option<u64> {
    let head = format!("Forward statistics for port {port} ");
    let at = out.rfind(&head)?;
    let rest = &out[at..];
    let k = rest.find(&format!("{what}:"))?;
    rest[k + what.len() + 1..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

struct Run {
    /// More virtio-user devargs.
    extra: &'static str,
    queues: usize,
    mrg: bool,
    len: usize,
    count: usize,
}

enum Failure {
    /// testpmd cannot run on this machine (never reached our ports).
    Skip(String),
    Fail(String),
}

impl From<String> for Failure {
    fn from(s: String) -> Failure {
        Failure::Fail(s)
    }
}

fn run(r: &Run, n: usize) -> Result<(), Failure> {
    let tag = format!("tp{n}");
    let (s1, s2) = (sock(&format!("{tag}-p1")), sock(&format!("{tag}-p2")));
    let table = Arc::new(SharedFlowTable::new());
    table.add_flows(
        ["in_port=10,actions=output:1", "in_port=2,actions=output:20"]
            .iter()
            .map(|f| parse_flow(f).unwrap()),
    );
    let dp_pool = pool(&format!("dp-{tag}"), 16384);
    let dp = Datapath::start(
        &DatapathConfig {
            pmd_cores: vec![None],
            emc_entries: 1024,
        },
        dp_pool,
        table,
    )
    .map_err(|e| Failure::Fail(e.to_string()))?;
    // p1: we are the client of testpmd's server=1 port; p2: we serve,
    // testpmd connects.
    let p1 = VhostUserPort::open("p1", &cfg(&s1, Client, r.queues, r.mrg)).unwrap();
    let p2 = VhostUserPort::open("p2", &cfg(&s2, Server, r.queues, r.mrg)).unwrap();
    let frames: Arc<Vec<Vec<u8>>> =
        Arc::new((0..r.count).map(|i| frame(r.len, i as u32)).collect());
    let state = Arc::new(AtomicU8::new(IDLE));
    let got = Arc::new(Mutex::new(Vec::new()));
    let gen_port = Arc::new(FramesPort {
        frames: frames.clone(),
        next: Arc::default(),
        state: state.clone(),
        probes: Arc::default(),
    });
    dp.add_port(1, p1.clone()).unwrap();
    dp.add_port(2, p2.clone()).unwrap();
    dp.add_port(20, Arc::new(CheckPort(got.clone()))).unwrap();
    dp.add_port(10, gen_port).unwrap();

    let prefix = format!("nfvvhost{}_{n}", std::process::id());
    let mrg = if r.mrg { 1 } else { 0 };
    let q = r.queues;
    let args: Vec<String> = [
        "--no-pci".to_string(),
        "--no-huge".into(),
        "-m".into(),
        "512".into(),
        format!("--file-prefix={prefix}"),
        "-l".into(),
        "0,1".into(),
        format!(
            "--vdev=net_virtio_user0,path={},server=1,queues={q},mrg_rxbuf={mrg}{}",
            s1.display(),
            r.extra
        ),
        format!(
            "--vdev=net_virtio_user1,path={},queues={q},mrg_rxbuf={mrg}{}",
            s2.display(),
            r.extra
        ),
        "--".into(),
        "--forward-mode=io".into(),
        "--port-topology=paired".into(),
        "--nb-cores=1".into(),
        format!("--rxq={q}"),
        format!("--txq={q}"),
        "--stats-period=1".into(),
        "--total-num-mbufs=16384".into(),
        "--no-lsc-interrupt".into(),
    ]
    .to_vec();
    let mut tp = TestPmd::start(&args, &prefix)
        .map_err(|e| Failure::Skip(format!("cannot run dpdk-testpmd: {e}")))?;
    let ready = nfv_testutil::wait_until(Duration::from_secs(30), || {
        let (a, b) = (p1.status(), p2.status());
        !tp.alive() || (a.pairs_enabled == q && b.pairs_enabled == q)
    });
    if !ready || !tp.alive() {
        let never_connected = p1.status().connects == 0 && p2.status().connects == 0;
        let (out, err) = tp.stop();
        if never_connected && let Some(line) = eal_error(&err) {
            return Err(Failure::Skip(format!("testpmd cannot start here: {line}")));
        }
        return Err(Failure::Fail(format!(
            "testpmd did not bring both ports up: p1 {:?}\np2 {:?}\n--- stdout\n{out}\n--- stderr\n{err}",
            p1.status(),
            p2.status()
        )));
    }
    let st = p1.status();
    assert_eq!(st.features & nfv_virtio::layout::VIRTIO_F_RING_PACKED, 0);
    eprintln!(
        "testpmd connected: features {}",
        nfv_vhost::features::describe(st.features)
    );
    // Probe until testpmd forwards, then send the frames counted.
    state.store(PROBING, Release);
    let p = probe();
    let forwarding =
        nfv_testutil::wait_until(Duration::from_secs(30), || got.lock().unwrap().contains(&p));
    if !forwarding {
        let (out, err) = tp.stop();
        return Err(
            format!("testpmd does not forward\n--- stdout\n{out}\n--- stderr\n{err}").into(),
        );
    }
    state.store(IDLE, Release);
    std::thread::sleep(Duration::from_millis(50));
    let probes_back = {
        let mut g = got.lock().unwrap();
        let n = g.len();
        g.clear();
        n as u64
    };
    state.store(RUNNING, Release);
    let tx_full = |dp: &Datapath| {
        dp.port_views()
            .iter()
            .find(|v| v.no == 1)
            .map_or(0, |v| v.stats.tx_total().drops[DropReason::TxFull as usize])
    };
    let full0 = tx_full(&dp);
    // Every frame comes back or is counted as a tx_full drop on p1 (the
    // VNF's ring was full: it was not scheduled in time).
    let done = nfv_testutil::wait_until(Duration::from_secs(30), || {
        got.lock().unwrap().len() as u64 + tx_full(&dp) - full0 >= r.count as u64
    });
    // Let stragglers arrive (there must be none beyond `count`).
    std::thread::sleep(Duration::from_millis(200));
    let dropped = tx_full(&dp) - full0;
    let (out, err) = tp.stop();
    let got = got.lock().unwrap().clone();
    if !done || (got.len() as u64) < r.count as u64 * 9 / 10 {
        let stats: Vec<String> = dp
            .port_views()
            .iter()
            .map(|v| {
                format!(
                    "port {}: rx {:?} tx {:?}",
                    v.no,
                    v.stats.rx_total(),
                    v.stats.tx_total()
                )
            })
            .collect();
        return Err(format!(
            "{} of {} frames came back, {dropped} dropped\n{}\np1 {:#?}\np2 {:#?}\n--- stdout\n{out}\n--- stderr\n{err}",
            got.len(),
            r.count,
            stats.join("\n"),
            p1.status(),
            p2.status()
        )
        .into());
    }
    assert_eq!(
        got.len() as u64 + dropped,
        r.count as u64,
        "frames unaccounted for"
    );
    if dropped > 0 {
        eprintln!("run {n}: {dropped} frames dropped as tx_full (testpmd not scheduled in time)");
    }
    // Byte-exact, in order, no duplicates (one queue pair carries the flow).
    let mut last = None;
    for (i, a) in got.iter().enumerate() {
        let seq = u32::from_be_bytes(a[14..18].try_into().unwrap()) as usize;
        let b = frames
            .get(seq)
            .unwrap_or_else(|| panic!("frame {i}: unknown sequence {seq}"));
        assert!(
            a == b,
            "frame {seq} of {} B differs after the round trip",
            b.len()
        );
        assert!(
            last.is_none_or(|l| seq > l),
            "frame {seq} out of order or duplicated"
        );
        last = Some(seq);
    }
    // testpmd saw the same numbers (plus the probes that made it).
    let rx0 = testpmd_count(&out, 0, "RX-packets");
    let tx1 = testpmd_count(&out, 1, "TX-packets");
    let want = got.len() as u64 + probes_back;
    assert_eq!(rx0, Some(want), "testpmd port 0 RX\n{out}");
    assert_eq!(tx1, Some(want), "testpmd port 1 TX\n{out}");
    for p in [&p1, &p2] {
        let s = p.status();
        assert_eq!(
            (s.negotiation_errors, s.protocol_errors, s.ring_errors),
            (0, 0, 0),
            "{s:#?}"
        );
        assert!(s.vrings.iter().all(|v| v.violations() == 0), "{s:#?}");
    }
    // testpmd is gone: both ports see the disconnect.
    wait_status(&p2, "p2 disconnect", |s| s.disconnects >= 1);
    wait_status(&p1, "p1 disconnect", |s| s.disconnects >= 1);
    dp.shutdown();
    Ok(())
}

#[test]
fn interop_with_testpmd() {
    if nfv_testutil::which("dpdk-testpmd").is_none() {
        nfv_testutil::skip(TEST, "dpdk-testpmd not installed (Debian package dpdk-dev)");
        return;
    }
    let runs = [
        Run {
            extra: "",
            queues: 1,
            mrg: true,
            len: 1518,
            count: 2000,
        },
        Run {
            extra: "",
            queues: 2,
            mrg: false,
            len: 64,
            count: 2000,
        },
        // testpmd asking for packed rings: RING_PACKED is not offered, and
        // DPDK 22.11 virtio-user then falls back to split rings.
        Run {
            extra: ",packed_vq=1",
            queues: 1,
            mrg: true,
            len: 200,
            count: 500,
        },
    ];
    for (n, r) in runs.iter().enumerate() {
        match run(r, n) {
            Ok(()) => {}
            Err(Failure::Skip(reason)) => {
                nfv_testutil::skip(TEST, &reason);
                return;
            }
            Err(Failure::Fail(e)) => panic!(
                "run {n} (queues {}, mrg {}, {} B{}): {e}",
                r.queues, r.mrg, r.len, r.extra
            ),
        }
    }
}

/// The first EAL error line testpmd printed.
fn eal_error(stderr: &str) -> Option<&str> {
    stderr.lines().find(|l| {
        l.starts_with("EAL: ")
            && (l.contains("Cannot") || l.contains("Error") || l.contains("error"))
    })
}
