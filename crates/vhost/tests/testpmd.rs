//! Interop with DPDK testpmd (`dpdk-testpmd`, Debian package `dpdk-dev`)
//! as the VNF, through the real datapath:
//!
//! ```text
//!  frames port ──▶ p1 (vhost-user, client mode) ══▶ testpmd port 0 (virtio-user, server=1)
//!                                                        │ io forwarding, paired
//!  check port ◀── p2 (vhost-user, server mode) ◀══ testpmd port 1 (virtio-user client)
//! ```
//!
//! Chain runs put two VNFs (testpmd ports 0↔1 and 2↔3) behind four ports,
//! with the switch forwarding p2 → p3: a vhost-user → vhost-user hop that
//! long frames cross in one copy (split packets, `one_copy` counted).
//!
//! Every frame that comes back must be byte-identical to the one sent with
//! its sequence number, and the counts must agree with testpmd's. testpmd
//! runs with `--no-huge` (no hugepages needed); without the binary the test
//! prints SKIPPED. Every process started is killed by PID, also on panic.
//!
//! The `testpmd_killed_and_restarted_*` tests SIGKILL testpmd mid-traffic
//! and start a new one on the same sockets, with both our ports in client
//! mode (testpmd `server=1`) or both in server mode: the ports must report
//! the disconnect, a bystander port pair on the same PMD must keep
//! forwarding, and traffic (checked byte for byte, in order) must resume
//! with the reconnect counters up. The tests run one at a time.

mod common;
mod testpmd_harness;

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, Ordering::*};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{cfg, frame, pool, sock, wait_status};
use nfv_datapath::{Datapath, DatapathConfig};
use nfv_flow::parse_flow;
use nfv_flow::table::SharedFlowTable;
use nfv_ports::{DropReason, Port};
use nfv_vhost::VhostUserMode::{self, Client, Server};
use nfv_vhost::VhostUserPort;
use testpmd_harness::ports::{
    IDLE, PROBING, RUNNING, SeqStats, check_port, frames_port, probe, seq_check, seq_gen,
};
use testpmd_harness::{
    Failure, Leftovers, TestPmd, eal_error, serial, testpmd_args, testpmd_args_n, testpmd_count,
};

const TEST: &str = "testpmd::interop_with_testpmd";

struct Run {
    /// More virtio-user devargs.
    extra: &'static str,
    queues: usize,
    mrg: bool,
    /// Frame lengths, in turn.
    lens: &'static [usize],
    count: usize,
    /// Two VNFs (testpmd ports 0↔1 and 2↔3) with the switch between
    /// them: p2 → p3 is a vhost-user → vhost-user hop (one copy).
    chain: bool,
}

impl Run {
    fn packed(&self) -> bool {
        self.extra.contains("packed_vq=1")
    }
}

/// The switch's port numbers for the generator and the checker.
/// A packed-ring run: frames of 64 to 1518 bytes.
fn packed(extra: &'static str, queues: usize, mrg: bool) -> Run {
    Run {
        extra,
        queues,
        mrg,
        lens: &[64, 1518, 128, 700, 65, 1500],
        count: 1200,
        chain: false,
    }
}

const GEN: u16 = 10;
const CHECK: u16 = 20;

fn run(r: &Run, n: usize) -> Result<(), Failure> {
    let tag = format!("tp{n}");
    let n_vhost = if r.chain { 4 } else { 2 };
    let socks: Vec<_> = (1..=n_vhost)
        .map(|i| sock(&format!("{tag}-p{i}")))
        .collect();
    // gen → p1 ⇒ VNF ⇒ p2 → [p3 ⇒ VNF ⇒ p4 →] check
    let flows = if r.chain {
        vec![
            format!("in_port={GEN},actions=output:1"),
            "in_port=2,actions=output:3".to_string(),
            format!("in_port=4,actions=output:{CHECK}"),
        ]
    } else {
        vec![
            format!("in_port={GEN},actions=output:1"),
            format!("in_port=2,actions=output:{CHECK}"),
        ]
    };
    let table = Arc::new(SharedFlowTable::new());
    table.add_flows(flows.iter().map(|f| parse_flow(f).unwrap()));
    let dp_pool = pool(&format!("dp-{tag}"), 16384);
    let dp = Datapath::start(
        &DatapathConfig {
            pmd_cores: vec![None],
            emc_entries: 1024,
            megaflow_entries: 1024,
            pmu: false,
            packet_in_rate: 1000,
            packet_in_burst: 100,
            conntrack: Default::default(),
        },
        dp_pool,
        table,
    )
    .map_err(|e| Failure::Fail(e.to_string()))?;
    // Odd ports: we are the client of testpmd's server=1 port; even
    // ports: we serve, testpmd connects.
    let ports: Vec<Arc<VhostUserPort>> = socks
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mode = if i % 2 == 0 { Client } else { Server };
            VhostUserPort::open(&format!("p{}", i + 1), &cfg(s, mode, r.queues, r.mrg)).unwrap()
        })
        .collect();
    let (p1, p2) = (&ports[0], &ports[1]);
    let frames: Arc<Vec<Vec<u8>>> = Arc::new(
        (0..r.count)
            .map(|i| frame(r.lens[i % r.lens.len()], i as u32))
            .collect(),
    );
    let state = Arc::new(AtomicU8::new(IDLE));
    let got = Arc::new(Mutex::new(Vec::new()));
    let gen_port = frames_port(frames.clone(), state.clone(), got.clone());
    for (i, p) in ports.iter().enumerate() {
        dp.add_port(i as u16 + 1, p.clone()).unwrap();
    }
    dp.add_port(CHECK, check_port(got.clone())).unwrap();
    dp.add_port(GEN, gen_port).unwrap();

    let prefix = format!("nfvvhost{}_{n}", std::process::id());
    let mrg = if r.mrg { 1 } else { 0 };
    let q = r.queues;
    let vdevs = socks
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let server = if i % 2 == 0 { ",server=1" } else { "" };
            format!(
                "--vdev=net_virtio_user{i},path={}{server},queues={q},mrg_rxbuf={mrg}{}",
                s.display(),
                r.extra
            )
        })
        .collect();
    let args = testpmd_args_n(&prefix, vdevs, q);
    let mut tp = TestPmd::start(&args, &prefix)
        .map_err(|e| Failure::Skip(format!("cannot run dpdk-testpmd: {e}")))?;
    let ready = nfv_testutil::wait_until(Duration::from_secs(30), || {
        !tp.alive() || ports.iter().all(|p| p.status().pairs_enabled == q)
    });
    if !ready || !tp.alive() {
        let never_connected = ports.iter().all(|p| p.status().connects == 0);
        let (out, err) = tp.stop();
        if never_connected && let Some(line) = eal_error(&err) {
            return Err(Failure::Skip(format!("testpmd cannot start here: {line}")));
        }
        let st: Vec<_> = ports.iter().map(|p| p.status()).collect();
        return Err(Failure::Fail(format!(
            "testpmd did not bring every port up: {st:#?}\n--- stdout\n{out}\n--- stderr\n{err}"
        )));
    }
    let st = p1.status();
    assert_eq!(
        st.features & nfv_virtio::layout::VIRTIO_F_RING_PACKED != 0,
        r.packed(),
        "packed rings negotiated iff testpmd asked for them"
    );
    let layout = if r.packed() { "packed" } else { "split" };
    for p in &ports {
        assert_eq!(p.gauges().text("ring_layout").as_deref(), Some(layout));
    }
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
    // Frames the switch could not hand to a VNF (its ring was full: it
    // was not scheduled in time), on the ports into the VNFs.
    let tx_full_on = |dp: &Datapath, no: u16| {
        dp.port_views()
            .iter()
            .find(|v| v.no == no)
            .map_or(0, |v| v.stats.tx_total().drops[DropReason::TxFull as usize])
    };
    let tx_full = |dp: &Datapath| tx_full_on(dp, 1) + if r.chain { tx_full_on(dp, 3) } else { 0 };
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
    // A probe still inside testpmd when the counted run began (a loaded
    // machine need not return it within the 50 ms above) comes back
    // among the counted frames: it is a probe, not one of them.
    let probe_frame = probe();
    let late_probes = got.iter().filter(|f| **f == probe_frame).count() as u64;
    let got: Vec<Vec<u8>> = got.into_iter().filter(|f| *f != probe_frame).collect();
    let probes_back = probes_back + late_probes;
    // Every frame is accounted for (checked below); how many the VNF's
    // ring had room for depends on whether testpmd was scheduled, which a
    // loaded machine does not promise (1792 of 2000 were seen with both
    // cores busy): half proves forwarding without timing the host.
    if !done || (got.len() as u64) < r.count as u64 / 2 {
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
    let want = got.len() as u64 + probes_back;
    // In a chain, what the first VNF sent and p3 could not take (its
    // ring full) never reached the second.
    let lost_between = if r.chain { tx_full_on(&dp, 3) } else { 0 };
    let rx0 = testpmd_count(&out, 0, "RX-packets");
    let tx1 = testpmd_count(&out, 1, "TX-packets");
    assert_eq!(rx0, Some(want + lost_between), "testpmd port 0 RX\n{out}");
    assert_eq!(tx1, Some(want + lost_between), "testpmd port 1 TX\n{out}");
    if r.chain {
        let rx2 = testpmd_count(&out, 2, "RX-packets");
        let tx3 = testpmd_count(&out, 3, "TX-packets");
        assert_eq!(rx2, Some(want), "testpmd port 2 RX\n{out}");
        assert_eq!(tx3, Some(want), "testpmd port 3 TX\n{out}");
    }
    // Frames the VNFs sent went on in one copy when long enough to split
    // (split and packed rings alike; the probes are 64 B: never split):
    // every long frame that came back, at most every long frame sent.
    let is_long = |f: &Vec<u8>| f.len() >= nfv_mem::SPLIT_HEAD + nfv_virtio::SPLIT_MIN_TAIL;
    let long_sent = frames.iter().filter(|f| is_long(f)).count() as u64;
    let long_got = got.iter().filter(|f| is_long(f)).count() as u64;
    for p in ports.iter().skip(1).step_by(2) {
        let st = p.status();
        assert!(
            (long_got..=long_sent).contains(&st.one_copy),
            "{}: {} frames forwarded in one copy; {long_got} long frames came back, {long_sent} sent",
            p.name(),
            st.one_copy,
        );
    }
    for p in &ports {
        let s = p.status();
        assert_eq!(
            (s.negotiation_errors, s.protocol_errors, s.ring_errors),
            (0, 0, 0),
            "{s:#?}"
        );
        assert!(s.vrings.iter().all(|v| v.violations() == 0), "{s:#?}");
    }
    // testpmd is gone: every port sees the disconnect.
    for p in &ports {
        wait_status(p, "disconnect", |s| s.disconnects >= 1);
    }
    dp.shutdown();
    Ok(())
}

#[test]
fn interop_with_testpmd() {
    if nfv_testutil::which("dpdk-testpmd").is_none() {
        nfv_testutil::skip(TEST, "dpdk-testpmd not installed (Debian package dpdk-dev)");
        return;
    }
    let _serial = serial();
    let runs = [
        Run {
            extra: "",
            queues: 1,
            mrg: true,
            lens: &[1518],
            count: 2000,
            chain: false,
        },
        Run {
            extra: "",
            queues: 2,
            mrg: false,
            lens: &[64],
            count: 2000,
            chain: false,
        },
        // Two VNFs with a vhost-user → vhost-user hop between them: long
        // frames cross it in one copy.
        Run {
            extra: "",
            queues: 1,
            mrg: true,
            lens: &[1518],
            count: 2000,
            chain: true,
        },
        Run {
            extra: "",
            queues: 2,
            mrg: false,
            lens: &[700],
            count: 2000,
            chain: true,
        },
        // Packed rings (testpmd packed_vq=1): in_order 0/1 × mrg_rxbuf
        // 0/1 × 1-2 queue pairs, frames of 64 to 1518 bytes.
        packed(",packed_vq=1,in_order=0", 1, true),
        packed(",packed_vq=1,in_order=0", 2, false),
        packed(",packed_vq=1,in_order=1", 1, false),
        packed(",packed_vq=1,in_order=1", 2, true),
        packed(",packed_vq=1,in_order=0", 1, false),
        packed(",packed_vq=1,in_order=0", 2, true),
        packed(",packed_vq=1,in_order=1", 1, true),
        packed(",packed_vq=1,in_order=1", 2, false),
        // A chain of two VNFs on packed rings.
        Run {
            chain: true,
            ..packed(",packed_vq=1,in_order=1", 1, true)
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
                "run {n} (queues {}, mrg {}, {:?} B{}, chain {}): {e}",
                r.queues, r.mrg, r.lens, r.extra, r.chain
            ),
        }
    }
}

// ---------------------------------------------------------------------
// The VNF killed (SIGKILL) and restarted.
//
//  gen ──▶ p1 ══▶ testpmd port 0 ─ io ─▶ port 1 ══▶ p2 ──▶ check
//  bygen ──────────────────────────────────────────────▶ bycheck
//
// Both vhost-user ports in the same mode: client (testpmd serves both
// sockets with server=1) or server (testpmd connects to both). The
// bystander pair runs on the same PMD and must keep counting while the VNF
// is dead.

const RESTART_CLIENT: &str = "testpmd::testpmd_killed_and_restarted_client_mode";
const RESTART_SERVER: &str = "testpmd::testpmd_killed_and_restarted_server_mode";
const RESTART_PACKED: &str = "testpmd::testpmd_killed_and_restarted_packed_rings";

/// How long traffic may take to resume after the new testpmd starts.
const RESUME: Duration = Duration::from_secs(20);
/// Frames that must arrive (byte-correct) to call traffic flowing.
const FLOWING: u64 = 300;

/// Gauge `key` of a port, as `show ports` prints it.
fn info(port: &dyn Port, key: &str) -> Option<String> {
    port.gauges().text(key)
}

/// tx drops (ring full or not running) of datapath port `no`.
fn tx_drops(dp: &Datapath, no: u16) -> u64 {
    dp.port_views()
        .iter()
        .find(|v| v.no == no)
        .map_or(0, |v| v.stats.tx_total().total_drops())
}

struct RestartRun {
    /// Mode of our two ports (testpmd serves with server=1 when we are
    /// clients).
    mode: VhostUserMode,
    queues: usize,
    mrg: bool,
    /// testpmd asks for packed rings (packed_vq=1).
    packed: bool,
    /// Kill/restart cycles.
    cycles: usize,
}

fn restart_run(r: &RestartRun, tag: &str) -> Result<(), Failure> {
    let q = r.queues;
    let (s1, s2) = (sock(&format!("{tag}-p1")), sock(&format!("{tag}-p2")));
    let mut leftovers = Leftovers::default();
    leftovers.files = vec![s1.clone(), s2.clone()];
    let table = Arc::new(SharedFlowTable::new());
    table.add_flows(
        [
            "in_port=10,actions=output:1",
            "in_port=2,actions=output:20",
            "in_port=30,actions=output:40",
        ]
        .iter()
        .map(|f| parse_flow(f).unwrap()),
    );
    let dp = Datapath::start(
        &DatapathConfig {
            pmd_cores: vec![None],
            emc_entries: 1024,
            megaflow_entries: 1024,
            pmu: false,
            packet_in_rate: 1000,
            packet_in_burst: 100,
            conntrack: Default::default(),
        },
        pool(&format!("dp-{tag}"), 16384),
        table,
    )
    .map_err(|e| Failure::Fail(e.to_string()))?;
    let p1 = VhostUserPort::open("p1", &cfg(&s1, r.mode, q, r.mrg)).unwrap();
    let p2 = VhostUserPort::open("p2", &cfg(&s2, r.mode, q, r.mrg)).unwrap();
    let (gen_on, gen_next) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU32::new(0)),
    );
    let check = Arc::new(SeqStats::default());
    let by_on = Arc::new(AtomicBool::new(true));
    let by = Arc::new(SeqStats::default());
    dp.add_port(1, p1.clone()).unwrap();
    dp.add_port(2, p2.clone()).unwrap();
    dp.add_port(20, seq_check("check", check.clone())).unwrap();
    dp.add_port(10, seq_gen("gen", gen_on.clone(), gen_next.clone()))
        .unwrap();
    dp.add_port(40, seq_check("bycheck", by.clone())).unwrap();
    dp.add_port(30, seq_gen("bygen", by_on.clone(), Arc::default()))
        .unwrap();

    let server = if r.mode == Client { ",server=1" } else { "" };
    let mrg = if r.mrg { 1 } else { 0 };
    let packed = if r.packed { ",packed_vq=1" } else { "" };
    let args = |prefix: &str| {
        testpmd_args(
            prefix,
            format!(
                "--vdev=net_virtio_user0,path={}{server},queues={q},mrg_rxbuf={mrg}{packed}",
                s1.display()
            ),
            format!(
                "--vdev=net_virtio_user1,path={}{server},queues={q},mrg_rxbuf={mrg}{packed}",
                s2.display()
            ),
            q,
        )
    };
    let status = || format!("p1 {:#?}\np2 {:#?}", p1.status(), p2.status());
    // Brings up testpmd instance `i` and waits for both ports to run.
    let mut start = |i: usize| -> Result<TestPmd, Failure> {
        let prefix = format!("nfvvhost{}_{tag}_{i}", std::process::id());
        leftovers.prefixes.push(prefix.clone());
        let mut tp = TestPmd::start(&args(&prefix), &prefix)
            .map_err(|e| Failure::Skip(format!("cannot run dpdk-testpmd: {e}")))?;
        let ready = nfv_testutil::wait_until(Duration::from_secs(30), || {
            !tp.alive() || (p1.status().pairs_enabled == q && p2.status().pairs_enabled == q)
        });
        if ready && tp.alive() {
            return Ok(tp);
        }
        let never_connected = p1.status().connects == 0 && p2.status().connects == 0;
        let (out, err) = tp.stop();
        if i == 0
            && never_connected
            && let Some(line) = eal_error(&err)
        {
            return Err(Failure::Skip(format!("testpmd cannot start here: {line}")));
        }
        Err(Failure::Fail(format!(
            "testpmd {i} did not bring both ports up:\n{}\n--- stdout\n{out}\n--- stderr\n{err}",
            status()
        )))
    };

    let mut tp = start(0)?;
    let layout = if r.packed { "packed" } else { "split" };
    assert_eq!(info(&*p1, "ring_layout").as_deref(), Some(layout));
    gen_on.store(true, Release);
    if !nfv_testutil::wait_until(Duration::from_secs(30), || check.good() >= FLOWING) {
        let (out, err) = tp.stop();
        return Err(format!(
            "no traffic through testpmd: {} good frames\n{}\n--- stdout\n{out}\n--- stderr\n{err}",
            check.good(),
            status()
        )
        .into());
    }
    check.assert_clean("before the first kill");
    eprintln!(
        "{tag}: traffic flows through testpmd (pid {:?}): {} frames",
        tp.pid(),
        check.good()
    );

    for cycle in 1..=r.cycles {
        let (b1, b2) = (p1.status(), p2.status());
        assert!(b1.connected && b2.connected, "{}", status());
        let pid = tp.pid().expect("testpmd running");
        let drops0 = tx_drops(&dp, 1);
        tp.kill_hard();
        eprintln!("{tag}: cycle {cycle}: testpmd pid {pid} killed (SIGKILL)");

        // Both ports notice and report it; rings stop.
        let down = nfv_testutil::wait_until(Duration::from_secs(10), || {
            let (a, b) = (p1.status(), p2.status());
            !a.connected
                && !b.connected
                && a.disconnects > b1.disconnects
                && b.disconnects > b2.disconnects
                && a.pairs_enabled == 0
                && b.pairs_enabled == 0
        });
        assert!(
            down,
            "cycle {cycle}: ports still up after SIGKILL\n{}",
            status()
        );
        for p in [&p1, &p2] {
            assert_eq!(info(&**p, "connected").as_deref(), Some("false"));
            assert_eq!(info(&**p, "queue_pairs"), Some(format!("0 of {q} enabled")));
        }

        // The switch keeps running: the bystander pair on the same PMD
        // keeps counting, the generator's frames towards the dead VNF are
        // dropped, and nothing more arrives from it.
        let by0 = by.good();
        assert!(
            nfv_testutil::wait_until(Duration::from_secs(10), || by.good() >= by0 + 50),
            "cycle {cycle}: the bystander pair stopped forwarding ({} frames)",
            by.good()
        );
        let good_dead = check.good();
        let by1 = by.good();
        assert!(
            nfv_testutil::wait_until(Duration::from_secs(10), || by.good() >= by1 + 500),
            "cycle {cycle}: the bystander pair stopped forwarding ({} frames)",
            by.good()
        );
        assert_eq!(
            check.good(),
            good_dead,
            "cycle {cycle}: frames arrived from a dead VNF"
        );
        assert!(
            tx_drops(&dp, 1) > drops0,
            "cycle {cycle}: frames towards the dead VNF were not counted as drops"
        );
        by.assert_clean("bystander");

        // A new testpmd on the same sockets. In server=1 mode it binds
        // them itself, so the dead one's socket files must go first (DPDK
        // does not replace them).
        if r.mode == Client {
            let _ = std::fs::remove_file(&s1);
            let _ = std::fs::remove_file(&s2);
        }
        let seq_restart = gen_next.load(Relaxed) as u64;
        let good_restart = check.good();
        let t0 = Instant::now();
        tp = start(cycle)?;
        let resumed = nfv_testutil::wait_until(RESUME, || {
            check.next.load(Relaxed) > seq_restart && check.good() >= good_restart + FLOWING
        });
        if !resumed {
            let (out, err) = tp.stop();
            return Err(format!(
                "cycle {cycle}: traffic did not resume within {RESUME:?}: {} new frames\n{}\n--- stdout\n{out}\n--- stderr\n{err}",
                check.good() - good_restart,
                status()
            )
            .into());
        }
        eprintln!(
            "{tag}: cycle {cycle}: traffic resumed {:?} after the restart (pid {:?})",
            t0.elapsed(),
            tp.pid()
        );
        check.assert_clean(&format!("cycle {cycle}"));
        for (p, b) in [(&p1, &b1), (&p2, &b2)] {
            let s = p.status();
            assert!(s.connected, "{s:#?}");
            assert!(s.reconnects() > b.reconnects(), "cycle {cycle}: {s:#?}");
            assert_eq!(info(&**p, "connected").as_deref(), Some("true"));
            let rc: u64 = info(&**p, "reconnects").unwrap().parse().unwrap();
            assert_eq!(rc, s.reconnects());
            assert!(rc >= cycle as u64, "cycle {cycle}: reconnects = {rc}");
        }
    }

    gen_on.store(false, Release);
    by_on.store(false, Release);
    let (out, _) = tp.stop();
    check.assert_clean("at the end");
    by.assert_clean("bystander at the end");
    for p in [&p1, &p2] {
        let s = p.status();
        assert_eq!(
            (
                s.negotiation_errors,
                s.protocol_errors,
                s.mem_table_errors,
                s.ring_errors
            ),
            (0, 0, 0, 0),
            "{s:#?}"
        );
        assert!(s.vrings.iter().all(|v| v.violations() == 0), "{s:#?}");
        assert!(s.quarantined().is_empty(), "{s:#?}");
    }
    // The last testpmd forwarded what it received (its port 0 RX is its
    // port 1 TX; io forwarding, paired).
    let (rx0, tx1) = (
        testpmd_count(&out, 0, "RX-packets"),
        testpmd_count(&out, 1, "TX-packets"),
    );
    assert!(rx0.is_some_and(|n| n > 0), "testpmd port 0 RX\n{out}");
    assert_eq!(rx0, tx1, "testpmd port 0 RX vs port 1 TX\n{out}");
    dp.shutdown();
    drop(leftovers);
    Ok(())
}

fn restart_test(test: &str, r: &RestartRun, tag: &str) {
    if nfv_testutil::which("dpdk-testpmd").is_none() {
        nfv_testutil::skip(test, "dpdk-testpmd not installed (Debian package dpdk-dev)");
        return;
    }
    let _serial = serial();
    match restart_run(r, tag) {
        Ok(()) => {}
        Err(Failure::Skip(reason)) => nfv_testutil::skip(test, &reason),
        Err(Failure::Fail(e)) => panic!(
            "{:?} mode, queues {}, mrg {}: {e}",
            r.mode.as_str(),
            r.queues,
            r.mrg
        ),
    }
}

/// Our ports are vhost-user clients of testpmd's server=1 sockets.
#[test]
fn testpmd_killed_and_restarted_client_mode() {
    restart_test(
        RESTART_CLIENT,
        &RestartRun {
            mode: Client,
            queues: 1,
            mrg: true,
            packed: false,
            cycles: 2,
        },
        "rc",
    );
}

/// The same on packed rings: a new testpmd starts its rings afresh
/// (SET_VRING_BASE slot 0, wrap counter 1), and the ports serve them.
#[test]
fn testpmd_killed_and_restarted_packed_rings() {
    restart_test(
        RESTART_PACKED,
        &RestartRun {
            mode: Client,
            queues: 2,
            mrg: true,
            packed: true,
            cycles: 2,
        },
        "rp",
    );
}

/// Our ports serve the sockets; testpmd connects as the client.
#[test]
fn testpmd_killed_and_restarted_server_mode() {
    restart_test(
        RESTART_SERVER,
        &RestartRun {
            mode: Server,
            queues: 2,
            mrg: false,
            packed: false,
            cycles: 2,
        },
        "rs",
    );
}
