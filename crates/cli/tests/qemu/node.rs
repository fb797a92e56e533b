//! The switch under test: `nfvswitch run` as a child process with
//! vhost-user ports (and, for a test bed of several nodes, memif ports
//! linking them) joined by NORMAL, read through `nfvswitch ctl --json`.
//! SIGTERM then SIGKILL on drop; its stderr goes to a file kept for
//! diagnostics.

use crate::common::BIN;
use nfv_testutil::wait_until;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Per-vring counters that a well-behaved guest never causes: the ring
/// protocol violations, chains dropped as bad, failed interrupts and
/// faults on guest memory, offload headers refused (a Linux guest sends
/// none the switch should refuse), rings that failed to start (`no_room_drops`, a full guest rx ring, is
/// allowed: TCP recovers from it).
pub const VRING_FAULTS: [&str; 16] = [
    "avail_idx_jump",
    "desc_id_out_of_range",
    "desc_out_of_memory",
    "chain_too_long",
    "indirect_bad_len",
    "indirect_nested",
    "indirect_out_of_memory",
    "len_overflow",
    "wrong_direction",
    "short_chain",
    "bad_offload",
    "offload_refused",
    "bad_chain_drops",
    "interrupt_errors",
    "memory_fault",
    "setup_failures",
];

/// The first of a vhost-user port's vrings (in its `show ports` info) that
/// counts one of [`VRING_FAULTS`], as "vringN: its counters".
#[allow(dead_code)] // qemu.rs checks its vrings inline
pub fn vring_fault(info: &Value) -> Option<String> {
    info.as_object()?
        .iter()
        .filter(|(k, _)| k.starts_with("vring"))
        .find_map(|(k, v)| {
            let text = v.as_str().unwrap_or("");
            text.split_whitespace()
                .any(|kv| VRING_FAULTS.contains(&kv.split('=').next().unwrap_or("")))
                .then(|| format!("{k}: {text}"))
        })
}

/// One vhost-user port of the node.
pub struct PortSpec {
    pub name: &'static str,
    pub id: u16,
    pub socket: PathBuf,
    /// The switch serves the socket (QEMU is the client).
    pub switch_server: bool,
    pub queues: u16,
    pub mrg_rxbuf: bool,
}

/// One memif port of the node: two nodes on the same socket, one in each
/// role, are linked by it.
#[allow(dead_code)] // only the migration test links two nodes
pub struct MemifSpec {
    pub name: &'static str,
    pub id: u16,
    pub socket: PathBuf,
    /// The switch listens (`role = "server"`); otherwise it connects and
    /// owns the shared memory (`role = "client"`).
    pub server: bool,
}

/// How a node differs from the single node of `qemu.rs`.
pub struct NodeOpts {
    /// Part of the node's name: several nodes of one test differ by it.
    pub tag: &'static str,
    /// The PMD's CPU.
    pub core: usize,
    pub memif: Vec<MemifSpec>,
}

pub struct Node {
    child: Child,
    socket: PathBuf,
    log: PathBuf,
}

impl Drop for Node {
    fn drop(&mut self) {
        // SAFETY: signals our own child, which is not reaped yet.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        if !wait_until(Duration::from_secs(5), || {
            matches!(self.child.try_wait(), Ok(Some(_)))
        }) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

impl Node {
    /// A node on the last CPU with `ports` only; its files in `dir`.
    pub fn start(dir: &Path, ports: &[PortSpec]) -> Result<Node, String> {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let opts = NodeOpts {
            tag: "",
            core: cpus - 1,
            memif: Vec::new(),
        };
        Node::start_with(dir, ports, &opts)
    }

    /// A node with `ports` and what `opts` adds; its files (config,
    /// control socket, log) in `dir`, which must be its own.
    pub fn start_with(dir: &Path, ports: &[PortSpec], opts: &NodeOpts) -> Result<Node, String> {
        let socket = dir.join("ctl.sock");
        let mut cfg = format!(
            "flows = [\"priority=0,actions=normal\"]\n\
             [node]\nname = \"qemu{}{}\"\ncontrol_socket = \"{}\"\napi = \"off\"\n\
             [memory]\nframes = 8192\nhugepages = \"never\"\n[pmd]\ncores = [{}]\n",
            std::process::id(),
            opts.tag,
            socket.display(),
            opts.core
        );
        for p in ports {
            cfg.push_str(&format!(
                "[[port]]\nname = \"{}\"\nid = {}\ntype = \"vhost-user\"\nsocket = \"{}\"\n\
                 mode = \"{}\"\nqueues = {}\nmrg_rxbuf = {}\nmtu = 1500\n",
                p.name,
                p.id,
                p.socket.display(),
                if p.switch_server { "server" } else { "client" },
                p.queues,
                p.mrg_rxbuf
            ));
        }
        for m in &opts.memif {
            cfg.push_str(&format!(
                "[[port]]\nname = \"{}\"\nid = {}\ntype = \"memif\"\nsocket = \"{}\"\n\
                 role = \"{}\"\n",
                m.name,
                m.id,
                m.socket.display(),
                if m.server { "server" } else { "client" }
            ));
        }
        let path = dir.join("node.toml");
        std::fs::write(&path, cfg).map_err(|e| e.to_string())?;
        let log = dir.join("switch.log");
        let err = std::fs::File::create(&log).map_err(|e| e.to_string())?;
        // A debugging run may ask for more (e.g. "debug": every vhost-user
        // message).
        let level = std::env::var("NFVSWITCH_TEST_LOG").unwrap_or_else(|_| "info".into());
        let child = Command::new(BIN)
            .args(["--log", &level, "run"])
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start nfvswitch: {e}"))?;
        let node = Node { child, socket, log };
        if !wait_until(Duration::from_secs(20), || {
            std::os::unix::net::UnixStream::connect(&node.socket).is_ok()
        }) {
            return Err(format!(
                "no control socket; switch said:\n{}",
                node.log_tail()
            ));
        }
        Ok(node)
    }

    /// `ctl ARGS` (add-port, del-port, ...); its stdout.
    pub fn ctl(&self, args: &[&str]) -> Result<String, String> {
        let out = Command::new(BIN)
            .args(["ctl", "--socket"])
            .arg(&self.socket)
            .args(args)
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!(
                "ctl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// `ctl --json show ports`, as JSON.
    pub fn ports(&self) -> Result<Value, String> {
        let out = Command::new(BIN)
            .args(["ctl", "--json", "--socket"])
            .arg(&self.socket)
            .args(["show", "ports"])
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!(
                "show ports: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        serde_json::from_slice(&out.stdout).map_err(|e| format!("show ports: {e}"))
    }

    pub fn port(&self, name: &str) -> Result<Value, String> {
        self.ports()?
            .as_array()
            .and_then(|a| a.iter().find(|p| p["name"] == name).cloned())
            .ok_or_else(|| format!("show ports lists no {name}"))
    }

    /// A string from the port's `info` map ("" when absent).
    pub fn info(&self, port: &str, key: &str) -> Result<String, String> {
        Ok(self.port(port)?["info"][key]
            .as_str()
            .unwrap_or("")
            .to_string())
    }

    /// A numeric `info` counter (0 when absent).
    pub fn info_count(&self, port: &str, key: &str) -> Result<u64, String> {
        Ok(self.info(port, key)?.parse().unwrap_or(0))
    }

    /// Waits until `port` reports `connected` and `queue_pairs` starting
    /// with `pairs` ("1 of 2 enabled").
    pub fn wait_connected(&self, port: &str, pairs: u16, timeout: Duration) -> Result<(), String> {
        let want = format!("{pairs} of ");
        let ok = wait_until(timeout, || {
            self.port(port).is_ok_and(|p| {
                p["info"]["connected"] == "true"
                    && p["info"]["queue_pairs"]
                        .as_str()
                        .is_some_and(|q| q.starts_with(&want))
            })
        });
        if ok {
            return Ok(());
        }
        Err(format!(
            "port {port} not connected with {pairs} queue pair(s) within {timeout:?}: {}",
            self.port(port)
                .map(|p| p["info"].to_string())
                .unwrap_or_else(|e| e)
        ))
    }

    /// Every line the switch logged at WARN or ERROR level.
    #[allow(dead_code)] // only the migration test lists them
    pub fn log_warnings(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(" WARN") || l.contains("ERROR"))
            .map(str::to_string)
            .collect()
    }

    /// What the switch logged about its vhost-user rings and frontends
    /// (starts and stops with their positions, GET_VRING_BASE answers,
    /// SEND_RARP, connections), colour codes removed: the first thing to
    /// read when a guest's driver finds its rings in a state it did not
    /// expect.
    pub fn ring_events(&self) -> String {
        let s = std::fs::read_to_string(&self.log).unwrap_or_default();
        let keep = [
            "vring",
            "GET_VRING_BASE",
            "SEND_RARP",
            "connected",
            "features",
        ];
        let lines: Vec<String> = s
            .lines()
            .filter(|l| keep.iter().any(|k| l.contains(k)))
            .map(strip_ansi)
            .collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// The last lines the switch logged.
    pub fn log_tail(&self) -> String {
        let s = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

pub fn wait_info(
    node: &Node,
    port: &str,
    key: &str,
    want: &str,
    t: Duration,
) -> Result<(), String> {
    if wait_until(t, || node.info(port, key).is_ok_and(|v| v == want)) {
        return Ok(());
    }
    Err(format!(
        "{port}: {key} not {want:?} within {t:?}: {}",
        node.port(port)
            .map(|p| p["info"].to_string())
            .unwrap_or_else(|e| e)
    ))
}

/// A port's (rx, tx) packet counters.
pub fn packets(node: &Node, port: &str) -> Result<(u64, u64), String> {
    let p = node.port(port)?;
    Ok((
        p["rx"]["packets"].as_u64().unwrap_or(0),
        p["tx"]["packets"].as_u64().unwrap_or(0),
    ))
}

/// `line` without terminal colour codes (`ESC [ ... m`).
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}
