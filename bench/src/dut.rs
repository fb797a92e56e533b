//! The device under test: whatever sits between the endpoint's vhost-user
//! sockets p1..pn and forwards p(2j-1) -> p(2j). Three of them:
//! nfvswitch ([`NfvSwitch`]), OVS-DPDK (`crate::ovs`) and testpmd as a
//! lookup-free "wire" ([`Wire`]). Each is started as vhost-user *client*
//! of the endpoint's `server=1` sockets, so it may start first and
//! (re)connects when the sockets appear.

use crate::proc::{self, Proc};
use crate::testpmd::{self, Mem};
use nix::sys::signal::Signal;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// What a switch says about its own PMD thread over the window.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct PmdFigures {
    /// Busy TSC cycles per packet received by the PMD (OVS definition:
    /// every hop of a chain is one received packet).
    pub cycles_per_packet: f64,
    /// Busy cycles / (busy + idle) cycles, %.
    pub busy_percent: f64,
    /// Packets received by the PMD per second (all its ports), Mpps.
    pub pmd_mpps: f64,
    /// Packets per busy poll iteration (all rx queues of one pass): small
    /// values mean the two sides hand over few packets per cache-line
    /// exchange. nfvswitch: over its last 1-s rate interval.
    pub rx_per_busy_iteration: Option<f64>,
}

/// Where a trial's pieces go and which CPUs they get.
pub struct Layout {
    /// Private directory of this trial (logs, config, pcap).
    pub dir: PathBuf,
    /// Where the endpoint's vhost-user sockets p1..pn are.
    pub sock_dir: PathBuf,
    pub nports: usize,
    /// The switch's PMD (the wire's forwarding lcore).
    pub switch_cpu: usize,
    /// Every PMD of the switches (`switch_cpu` first; `compare --pmds`).
    pub pmd_cpus: Vec<usize>,
    /// The endpoint's forwarding lcore (and housekeeping of the switch).
    pub endpoint_cpu: usize,
    pub mem: Mem,
    /// `[memory] hugepages` of nfvswitch's node config.
    pub switch_hugepages: &'static str,
    /// Unique DPDK --file-prefix stem.
    pub prefix: String,
    /// The endpoint's vhost-user ports run packed virtqueues.
    pub packed: bool,
}

#[cfg(test)]
impl Layout {
    /// A layout in `dir` with `nports` ports, one PMD on CPU 1, the
    /// endpoint on CPU 0, no hugepages: what config-generation tests use.
    pub fn for_test(dir: &std::path::Path, nports: usize) -> Layout {
        Layout {
            dir: dir.to_path_buf(),
            sock_dir: dir.join("sock"),
            nports,
            switch_cpu: 1,
            pmd_cpus: vec![1],
            endpoint_cpu: 0,
            mem: Mem::NoHuge,
            switch_hugepages: "never",
            prefix: "t".into(),
            packed: false,
        }
    }
}

pub trait Dut {
    /// `Err` (with its log) if a process of it died.
    fn ensure_alive(&mut self) -> Result<(), String>;
    /// Start of the measured window: remember/clear the PMD counters.
    fn window_start(&mut self) -> Result<(), String>;
    /// End of the window: the PMD figures over it (None: it has none).
    fn window_end(&mut self) -> Result<Option<PmdFigures>, String>;
    /// PIDs of its processes (for the CPU-load accounting).
    fn pids(&self) -> Vec<u32>;
    /// The PMD thread, for `perf record -t`.
    fn pmd_tid(&self) -> Option<u32> {
        None
    }
    /// Orderly stop (the guards stop everything anyway when dropped).
    fn stop(&mut self) {}
    /// Connections its connection tracker holds now (None: it has none).
    fn connections(&mut self) -> Result<Option<u64>, String> {
        Ok(None)
    }
}

/// The thread of `pid` whose name starts with `pmd-c` (both nfvswitch,
/// "pmd-c01/0", and OVS, "pmd-c01/id:8", name their PMDs so).
pub fn find_pmd_thread(pid: u32) -> Option<u32> {
    let rd = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    rd.flatten().find_map(|e| {
        let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
        comm.starts_with("pmd-c")
            .then(|| e.file_name().to_str()?.parse().ok())
            .flatten()
    })
}

/// Cumulative PMD counters of a node (summed over its PMDs).
#[derive(Clone, Copy, Default)]
struct Counters {
    at: Option<Instant>,
    rx: u64,
    busy: u64,
    idle: u64,
    /// Of the last rate interval (not cumulative).
    per_batch: Option<f64>,
}

/// `nfvswitch run` on a generated config: vhost-user ports p1..pn in
/// client mode, rules p(2j-1) -> p(2j), one PMD on `switch_cpu`.
pub struct NfvSwitch {
    proc: Proc,
    socket: PathBuf,
    start: Counters,
    /// The ring layout the vhost-user ports must run (see
    /// [`NfvSwitch::expecting_layout`]).
    layout: Option<&'static str>,
}

/// The rules p(2j-1) -> p(2j) of `nports` ports.
pub fn pair_flows(nports: usize) -> Vec<String> {
    (1..=nports / 2)
        .map(|j| format!("priority=10,in_port={},actions=output:{}", 2 * j - 1, 2 * j))
        .collect()
}

/// The node config (TOML) for `nports` vhost-user ports (`one_copy`:
/// their setting of that name).
pub fn nfvswitch_config(lay: &Layout, name: &str, control_socket: &Path, one_copy: bool) -> String {
    nfvswitch_vhost_config(
        lay,
        name,
        control_socket,
        one_copy,
        &pair_flows(lay.nports),
        "",
    )
}

/// The same vhost-user node with the rules `flows` and `extra` (more
/// TOML sections, e.g. `[conntrack]`) instead of the port pairs.
pub fn nfvswitch_vhost_config(
    lay: &Layout,
    name: &str,
    control_socket: &Path,
    one_copy: bool,
    flows: &[String],
    extra: &str,
) -> String {
    nfvswitch_config_with(lay, name, control_socket, flows, extra, |i| {
        format!(
            "type = \"vhost-user\"\nsocket = {:?}\nmode = \"client\"\nqueues = 1\none_copy = {one_copy}\n",
            testpmd::sock(&lay.sock_dir, i)
        )
    })
}

/// The same node with memif ports in the client role (the endpoint's
/// net_memif ports are the servers).
pub fn nfvswitch_memif_config(
    lay: &Layout,
    name: &str,
    control_socket: &Path,
    one_copy: bool,
) -> String {
    nfvswitch_config_with(
        lay,
        name,
        control_socket,
        &pair_flows(lay.nports),
        "",
        |i| {
            format!(
                "type = \"memif\"\nsocket = {:?}\nrole = \"client\"\none_copy = {one_copy}\n",
                testpmd::sock(&lay.sock_dir, i)
            )
        },
    )
}

/// The node config with the rules `flows`, the sections `extra` and port
/// `p<i>`'s type and keys from `port(i)`.
fn nfvswitch_config_with(
    lay: &Layout,
    name: &str,
    control_socket: &Path,
    flows: &[String],
    extra: &str,
    port: impl Fn(usize) -> String,
) -> String {
    let mut s = String::from("# generated by nfv-bench\nflows = [\n");
    for f in flows {
        s += &format!("  {f:?},\n");
    }
    s += "]\n\n[node]\n";
    s += &format!(
        "name = {name:?}\ncontrol_socket = {:?}\n\n",
        control_socket.display().to_string()
    );
    s += &format!("[memory]\nhugepages = {:?}\n\n", lay.switch_hugepages);
    let cores: Vec<String> = lay.pmd_cpus.iter().map(|c| c.to_string()).collect();
    s += &format!("[pmd]\ncores = [{}]\n", cores.join(", "));
    s += extra;
    for i in 1..=lay.nports {
        s += &format!("\n[[port]]\nname = \"p{i}\"\nid = {i}\n{}", port(i));
    }
    s
}

impl NfvSwitch {
    pub fn start(bin: &Path, lay: &Layout, one_copy: bool) -> Result<NfvSwitch, String> {
        Self::start_with(bin, lay, |name, socket| {
            nfvswitch_config(lay, name, socket, one_copy)
        })
    }

    /// With memif ports (client role) instead of vhost-user.
    pub fn start_memif(bin: &Path, lay: &Layout, one_copy: bool) -> Result<NfvSwitch, String> {
        Self::start_with(bin, lay, |name, socket| {
            nfvswitch_memif_config(lay, name, socket, one_copy)
        })
    }

    /// With the node config `config(name, control_socket)`.
    pub fn start_with(
        bin: &Path,
        lay: &Layout,
        config: impl Fn(&str, &Path) -> String,
    ) -> Result<NfvSwitch, String> {
        let socket = lay.dir.join("ctl.sock");
        let cfg = lay.dir.join("node.toml");
        let name = format!("bench-{}", lay.prefix);
        std::fs::write(&cfg, config(&name, &socket))
            .map_err(|e| format!("{}: {e}", cfg.display()))?;
        let mut cmd = Command::new(bin);
        cmd.args(["--log", "info", "run"]).arg(&cfg);
        let mut proc = Proc::spawn(
            "nfvswitch",
            cmd,
            &lay.dir.join("nfvswitch.log"),
            Signal::SIGINT,
        )?;
        let end = Instant::now() + Duration::from_secs(20);
        while !socket.exists() {
            proc.ensure_alive()?;
            if Instant::now() > end {
                return Err(format!(
                    "nfvswitch: no control socket {} after 20 s",
                    socket.display()
                ));
            }
            proc::sleep(Duration::from_millis(20))?;
        }
        Ok(NfvSwitch {
            proc,
            socket,
            start: Counters::default(),
            layout: None,
        })
    }

    /// Every measured window first checks that the vhost-user ports run
    /// this ring layout (`split`/`packed`): an endpoint that silently fell
    /// back would make an A/B of layouts meaningless.
    pub fn expecting_layout(mut self, layout: &'static str) -> NfvSwitch {
        self.layout = Some(layout);
        self
    }

    fn check_layout(&self, want: &str) -> Result<(), String> {
        let reply = nfv_control::request(&self.socket, &nfv_control::Request::ShowPorts)?;
        let data = match reply {
            nfv_control::Response::Ok { data } => data,
            nfv_control::Response::Error { message } => {
                return Err(format!("show ports: {message}"));
            }
        };
        let ports: Vec<nfv_control::protocol::PortReport> =
            serde_json::from_value(data).map_err(|e| format!("show ports: {e}"))?;
        for p in ports.iter().filter(|p| p.type_name == "vhost-user") {
            let got = p.info.get("ring_layout").map_or("?", String::as_str);
            if got != want {
                return Err(format!(
                    "port {}: ring layout {got}, this scenario needs {want}",
                    p.name
                ));
            }
        }
        Ok(())
    }

    fn show_pmd(&self) -> Result<Vec<nfv_control::protocol::PmdReport>, String> {
        let reply = nfv_control::request(&self.socket, &nfv_control::Request::ShowPmd)?;
        let data = match reply {
            nfv_control::Response::Ok { data } => data,
            nfv_control::Response::Error { message } => return Err(format!("show pmd: {message}")),
        };
        serde_json::from_value(data).map_err(|e| format!("show pmd: {e}"))
    }

    fn counters(&self) -> Result<Counters, String> {
        let pmds = self.show_pmd()?;
        let mut c = Counters {
            at: Some(Instant::now()),
            ..Counters::default()
        };
        for p in &pmds {
            c.rx += p.figures.rx_packets;
            c.busy += p.figures.busy_cycles;
            c.idle += p.figures.idle_cycles;
        }
        if let [p] = pmds.as_slice() {
            c.per_batch = Some(p.packets_per_batch);
        }
        Ok(c)
    }
}

impl Dut for NfvSwitch {
    fn ensure_alive(&mut self) -> Result<(), String> {
        self.proc.ensure_alive()
    }
    fn window_start(&mut self) -> Result<(), String> {
        if let Some(l) = self.layout {
            self.check_layout(l)?;
        }
        self.start = self.counters()?;
        Ok(())
    }
    fn window_end(&mut self) -> Result<Option<PmdFigures>, String> {
        let (a, b) = (self.start, self.counters()?);
        let (Some(t0), Some(t1)) = (a.at, b.at) else {
            return Ok(None);
        };
        let rx = b.rx.saturating_sub(a.rx);
        let busy = b.busy.saturating_sub(a.busy);
        let idle = b.idle.saturating_sub(a.idle);
        Ok(Some(PmdFigures {
            cycles_per_packet: if rx > 0 {
                busy as f64 / rx as f64
            } else {
                f64::NAN
            },
            busy_percent: 100.0 * busy as f64 / (busy + idle).max(1) as f64,
            pmd_mpps: rx as f64 / (t1 - t0).as_secs_f64() / 1e6,
            rx_per_busy_iteration: b.per_batch,
        }))
    }
    fn pids(&self) -> Vec<u32> {
        self.proc.pid().into_iter().collect()
    }
    fn pmd_tid(&self) -> Option<u32> {
        find_pmd_thread(self.proc.pid()?)
    }
    fn stop(&mut self) {
        self.proc.stop();
    }
    /// The PMDs' `ct_connections` (as of their last housekeeping), summed.
    fn connections(&mut self) -> Result<Option<u64>, String> {
        let pmds = self.show_pmd()?;
        Ok(Some(pmds.iter().map(|p| p.figures.ct_connections).sum()))
    }
}

/// A running testpmd; /var/run/dpdk/<prefix> (left by --no-huge runs) is
/// removed when it is dropped.
pub struct TestPmd {
    pub proc: Proc,
    prefix: String,
}

impl TestPmd {
    pub fn spawn(
        name: &str,
        args: Vec<String>,
        prefix: &str,
        log: &Path,
    ) -> Result<TestPmd, String> {
        let mut cmd = Command::new("dpdk-testpmd");
        cmd.args(args);
        Ok(TestPmd {
            proc: Proc::spawn(name, cmd, log, Signal::SIGINT)?,
            prefix: prefix.to_string(),
        })
    }

    pub fn stop(&mut self) {
        self.proc.stop();
    }
}

impl Drop for TestPmd {
    fn drop(&mut self) {
        self.proc.stop();
        let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/{}", self.prefix));
    }
}

/// testpmd io-forwarding between net_vhost client ports: the cheapest
/// possible vhost-user "switch" (no lookup), forwarding lcore on the
/// switch's CPU.
pub struct Wire(TestPmd);

impl Wire {
    pub fn start(lay: &Layout) -> Result<Wire, String> {
        let prefix = format!("{}_wire", lay.prefix);
        let args = testpmd::wire_args(
            &prefix,
            lay.mem,
            &lay.sock_dir,
            lay.nports,
            lay.switch_cpu,
            lay.endpoint_cpu,
        );
        Ok(Wire(TestPmd::spawn(
            "testpmd (wire)",
            args,
            &prefix,
            &lay.dir.join("wire.log"),
        )?))
    }
}

impl Dut for Wire {
    fn ensure_alive(&mut self) -> Result<(), String> {
        self.0.proc.ensure_alive()
    }
    fn window_start(&mut self) -> Result<(), String> {
        Ok(())
    }
    fn window_end(&mut self) -> Result<Option<PmdFigures>, String> {
        Ok(None)
    }
    fn pids(&self) -> Vec<u32> {
        self.0.proc.pid().into_iter().collect()
    }
    fn stop(&mut self) {
        self.0.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_config_is_valid_and_chains_the_ports() {
        let dir = std::env::temp_dir().join(format!("nfv-bench-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let lay = Layout::for_test(&dir, 6);
        let text = nfvswitch_config(&lay, "bench-t", &dir.join("ctl.sock"), true);
        let path = dir.join("node.toml");
        std::fs::write(&path, &text).unwrap();
        let cfg = nfv_config::load(&path).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(cfg.ports.len(), 6);
        assert_eq!(cfg.pmd.cores, vec![1]);
        let flows: Vec<String> = cfg.flows.iter().map(|f| f.to_string()).collect();
        assert_eq!(flows.len(), 3);
        for (j, f) in flows.iter().enumerate() {
            assert!(f.contains(&format!("in_port={}", 2 * j + 1)), "{f}");
            assert!(f.contains(&format!("output:{}", 2 * j + 2)), "{f}");
        }
    }
}
