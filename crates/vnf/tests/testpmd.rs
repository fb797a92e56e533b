//! Interop (STYLE lesson 9, layer 4): the VNF as the virtio-net frontend
//! of DPDK testpmd's vhost-user backend (`net_vhost`), a second, foreign
//! implementation of the device side.
//!
//! ```text
//!  testpmd net_vhost0 (server) ══vhost-user══▶ VNF rx vq ─macswap─▶ VNF tx vq ══▶ testpmd
//!        ▲ io forwarding, port-topology=loop                                         │
//!        └────────────────────────────────────────────────────────────────────────────┘
//! ```
//! testpmd runs interactively (`-i`, commands on stdin) so that its
//! `start tx_first` burst is sent only once the VNF has connected; those
//! frames then circulate between the two for as long as both forward.
//! Without `dpdk-testpmd` (Debian `dpdk-dev`) the test prints SKIPPED.

use nfv_vnf::{Snapshot, VnfConfig, VnfOptions, VnfStats};
use std::io::{Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

const TEST: &str = "testpmd::vnf_interops_with_dpdk_vhost_backend";

/// testpmd, killed by PID when dropped.
struct TestPmd {
    child: Child,
    stdin: Option<ChildStdin>,
    prefix: String,
}

impl TestPmd {
    fn command(&mut self, cmd: &str) {
        if let Some(s) = self.stdin.as_mut() {
            let _ = writeln!(s, "{cmd}");
            let _ = s.flush();
        }
    }

    fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Quits (closing stdin ends interactive mode) and returns stdout.
    fn finish(&mut self) -> String {
        self.command("stop");
        self.command("quit");
        self.stdin = None;
        let end = Instant::now() + Duration::from_secs(10);
        while self.alive() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
        }
        if self.alive() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
        let mut out = String::new();
        if let Some(mut s) = self.child.stdout.take() {
            let _ = s.read_to_string(&mut out);
        }
        out
    }
}

impl Drop for TestPmd {
    fn drop(&mut self) {
        if self.alive() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/{}", self.prefix));
    }
}

fn wait(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let ok = nfv_testutil::wait_until(timeout, &mut cond);
    if !ok {
        eprintln!("timed out waiting for {what}");
    }
    ok
}

#[test]
fn vnf_interops_with_dpdk_vhost_backend() {
    if nfv_testutil::which("dpdk-testpmd").is_none() {
        nfv_testutil::skip(TEST, "dpdk-testpmd not installed (Debian package dpdk-dev)");
        return;
    }
    let socket = std::env::temp_dir().join(format!("nfv-vnf-tp-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&socket);
    let prefix = format!("nfvvnf{}", std::process::id());
    let child = Command::new("dpdk-testpmd")
        .args([
            "--no-pci",
            "--no-huge",
            "-m",
            "256",
            &format!("--file-prefix={prefix}"),
            "-l",
            "0,1",
            &format!("--vdev=net_vhost0,iface={},queues=1", socket.display()),
            "--",
            "-i",
            "--forward-mode=io",
            "--port-topology=loop",
            "--nb-cores=1",
            "--total-num-mbufs=8192",
            "--no-lsc-interrupt",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            nfv_testutil::skip(TEST, &format!("cannot start dpdk-testpmd: {e}"));
            return;
        }
    };
    let stdin = child.stdin.take();
    let mut tp = TestPmd {
        child,
        stdin,
        prefix,
    };
    if !wait("testpmd's socket", Duration::from_secs(30), || {
        socket.exists()
    }) {
        let out = tp.finish();
        nfv_testutil::skip(
            TEST,
            &format!(
                "testpmd did not create its vhost-user socket: {}",
                out.lines().last().unwrap_or("")
            ),
        );
        return;
    }

    let cfg = VnfConfig::try_from(VnfOptions {
        socket: socket.clone(),
        app: "macswap".into(),
        ring_size: 256,
        stats_every: 0.0,
        ..Default::default()
    })
    .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stats = Arc::new(VnfStats::new(1));
    let (s, st) = (stop.clone(), stats.clone());
    let vnf = std::thread::spawn(move || nfv_vnf::run(&cfg, &s, &st).map_err(|e| e.to_string()));

    let connected = wait("the VNF to negotiate", Duration::from_secs(30), || {
        stats.snapshot().connected
    });
    // Give testpmd's vhost library a moment to see the rings enabled.
    std::thread::sleep(Duration::from_millis(300));
    tp.command("start tx_first");
    let flowing = connected
        && wait("frames to circulate", Duration::from_secs(30), || {
            let t = stats.snapshot().total;
            t.rx_packets >= 10_000 && t.tx_packets >= 10_000
        });
    let out = tp.finish();
    // testpmd gone: the VNF sees the socket close and goes back to waiting.
    let noticed = wait(
        "the VNF to notice testpmd leaving",
        Duration::from_secs(10),
        || !stats.snapshot().connected,
    );
    stop.store(true, Relaxed);
    let fin: Snapshot = vnf.join().expect("VNF thread").expect("VNF run");
    assert!(connected, "VNF never connected; testpmd said:\n{out}");
    assert!(
        flowing,
        "frames did not circulate: VNF {:?}; testpmd said:\n{out}",
        fin.total
    );
    assert!(noticed, "VNF did not notice the disconnect");
    let t = fin.total;
    assert_eq!(t.switch_errors, 0, "virtqueue protocol errors by testpmd");
    assert_eq!(t.rx_packets, t.tx_packets + t.drops.forward_drops());
    assert_eq!(
        t.rx_bytes,
        64 * t.rx_packets,
        "testpmd's txonly frames are 64 bytes"
    );
    assert_eq!(fin.connections, 1);
    // VERSION_1 and EVENT_IDX were negotiated with DPDK's backend.
    assert_ne!(fin.features & (1 << 32), 0);
    assert_ne!(fin.features & (1 << 29), 0);
}
