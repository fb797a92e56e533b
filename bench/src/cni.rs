//! `nfv-bench cni` — how long a pod waits for its nfvswitch port, as a
//! container runtime sees it: the switch runs as its own process
//! (`nfvswitch run`, REST API on loopback), the plugin (`nfvswitch-cni`)
//! is run with `CNI_COMMAND=ADD` and the config on stdin, then DPDK
//! testpmd (`txonly`, virtio-user) opens the socket ADD returned, as the
//! pod's application would. Per round:
//!
//! * **ADD**: the plugin's wall time (process start to exit: the API
//!   call, the port opened on the switch, the device-info file);
//! * **first frame**: from the start of ADD until the switch has forwarded
//!   a frame from the new port (the sink behind `in_port=<port>` counts
//!   it), polled every millisecond over the REST API. This includes the
//!   application's own start (EAL init) and the vhost-user negotiation.
//!
//! Then testpmd stops and DEL removes the port. Both binaries are taken
//! from the directory of this one (`cargo build --release --workspace`).

use crate::proc::{self, Proc};
use crate::report::{fmt_range, median, text_table};
use nix::sys::signal::Signal;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct CniArgs {
    /// ADD → first frame rounds.
    #[arg(long, default_value_t = 10)]
    rounds: usize,
    /// Where the run's files go (config, sockets, logs).
    #[arg(long, default_value = "/tmp/nfv-bench-cni")]
    dir: PathBuf,
}

/// What testpmd prints when it starts forwarding without `-i`.
const FORWARDING_STARTED: &str = "start packet forwarding";
/// The sink port's id in the switch's config.
const SINK: u32 = 2;

fn sibling(name: &str) -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let p = exe.with_file_name(name);
    p.is_file().then_some(p.clone()).ok_or_else(|| {
        format!(
            "{} not built (cargo build --release --workspace)",
            p.display()
        )
    })
}

/// `GET path` on the switch's API (HTTP/1.1, one connection per call).
fn get(api: &str, path: &str) -> Result<Value, String> {
    let mut s = TcpStream::connect(api).map_err(|e| format!("{api}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {api}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut text = String::new();
    s.read_to_string(&mut text).map_err(|e| e.to_string())?;
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    serde_json::from_str(body).map_err(|e| format!("GET {path}: {e}: {body}"))
}

fn counter(ports: &Value, name: &str, dir: &str) -> u64 {
    ports
        .as_array()
        .and_then(|a| a.iter().find(|p| p["name"] == name))
        .and_then(|p| p[dir]["packets"].as_u64())
        .unwrap_or(0)
}

/// Runs the plugin as a runtime does; its stdout as JSON.
fn plugin(bin: &Path, command: &str, container: &str, conf: &Value) -> Result<Value, String> {
    let mut child = Command::new(bin)
        .env_clear()
        .env("CNI_COMMAND", command)
        .env("CNI_CONTAINERID", container)
        .env("CNI_IFNAME", "net1")
        .env("CNI_NETNS", format!("/var/run/netns/{container}"))
        .env("CNI_PATH", "/opt/cni/bin")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    if let Some(mut s) = child.stdin.take() {
        s.write_all(conf.to_string().as_bytes())
            .map_err(|e| e.to_string())?;
    }
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!("{command}: {text}"));
    }
    Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn free_api_addr() -> Result<String, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.to_string())
}

/// One round's times from the start of ADD, in ms.
struct Round {
    /// ADD returned.
    add: f64,
    /// The switch's port reports the application connected (vhost-user
    /// negotiation done).
    connected: f64,
    /// Every queue pair of the port enabled (the application started
    /// its port: rings set up).
    enabled: f64,
    /// testpmd's log says it started forwarding (its link check done).
    started: f64,
    /// The sink counted a frame from the port.
    first: f64,
}

/// (connected, every queue pair enabled) of port `name`, from its gauges.
fn port_state(ports: &Value, name: &str) -> (bool, bool) {
    let Some(p) = ports
        .as_array()
        .and_then(|a| a.iter().find(|p| p["name"] == name))
    else {
        return (false, false);
    };
    let connected = p["info"]["connected"] == "true";
    // "N of M enabled"
    let pairs: Vec<&str> = p["info"]["queue_pairs"]
        .as_str()
        .unwrap_or_default()
        .split(' ')
        .collect();
    let enabled = matches!(pairs[..], [n, "of", m, "enabled"] if n == m && n != "0");
    (connected, enabled)
}

fn round(
    i: usize,
    a: &CniArgs,
    api: &str,
    cni: &Path,
    testpmd: &Path,
    conf: &Value,
) -> Result<Round, String> {
    let container = format!("bench{i:04}");
    let port = format!("c-{container}-net1");
    let before = counter(&get(api, "/api/v1/ports")?, "sink", "tx");
    let t0 = Instant::now();
    let r = plugin(cni, "ADD", &container, conf)?;
    let add = t0.elapsed();
    let socket = r["interfaces"][0]["socketPath"]
        .as_str()
        .ok_or(format!("ADD answered no socket: {r}"))?;
    let id = attachment_id(api, &port)?;
    flow(
        api,
        &a.dir.join("api-token"),
        &format!("in_port={id},actions=output:{SINK}"),
    )?;
    let log = a.dir.join(format!("testpmd-{i}.log"));
    let mut app = spawn_app(testpmd, socket, &log)?;
    let seen = watch(api, &port, &log, before, t0, &mut app)?;
    app.stop();
    let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/nfvbcni{}", std::process::id()));
    plugin(cni, "DEL", &container, conf)?;
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    Ok(Round {
        add: ms(add),
        connected: ms(seen.connected.unwrap_or(seen.first)),
        enabled: ms(seen.enabled.unwrap_or(seen.first)),
        started: ms(seen.started.unwrap_or(seen.first)),
        first: ms(seen.first),
    })
}

/// The switch's number for the attachment of `port` (the API's list).
fn attachment_id(api: &str, port: &str) -> Result<u64, String> {
    get(api, "/api/v1/attachments")?["attachments"]
        .as_array()
        .and_then(|all| all.iter().find(|x| x["port"] == port))
        .and_then(|x| x["id"].as_u64())
        .ok_or_else(|| "the attachment is not listed".into())
}

/// The pod's application: testpmd sending 64 B frames on virtio-user at
/// `socket`, logging to `log`.
fn spawn_app(testpmd: &Path, socket: &str, log: &Path) -> Result<Proc, String> {
    let mut cmd = Command::new(testpmd);
    cmd.args(["--no-pci", "--no-huge", "-m", "512", "-l", "0,1"])
        .arg(format!("--file-prefix=nfvbcni{}", std::process::id()))
        .arg(format!("--vdev=net_virtio_user0,path={socket}"))
        .args([
            "--",
            "--forward-mode=txonly",
            "--txpkts=64",
            "--total-num-mbufs=16384",
            "--no-lsc-interrupt",
        ]);
    Proc::spawn("testpmd", cmd, log, Signal::SIGINT)
}

/// When, after ADD began, each step was first seen.
struct Seen {
    connected: Option<Duration>,
    enabled: Option<Duration>,
    started: Option<Duration>,
    first: Duration,
}

/// Polls the API (and the application's `log`) every millisecond until
/// the sink counts more than `before` (30 s at most after `t0`), noting
/// when `port` connected, when its queues were enabled and when the
/// application started forwarding.
fn watch(
    api: &str,
    port: &str,
    log: &Path,
    before: u64,
    t0: Instant,
    app: &mut Proc,
) -> Result<Seen, String> {
    let deadline = t0 + Duration::from_secs(30);
    let (mut connected, mut enabled, mut started) = (None, None, None);
    let first = loop {
        if started.is_none()
            && std::fs::read_to_string(log).is_ok_and(|l| l.contains(FORWARDING_STARTED))
        {
            started = Some(t0.elapsed());
        }
        let ports = get(api, "/api/v1/ports")?;
        let (c, e) = port_state(&ports, port);
        if connected.is_none() && c {
            connected = Some(t0.elapsed());
        }
        if enabled.is_none() && e {
            enabled = Some(t0.elapsed());
        }
        if counter(&ports, "sink", "tx") > before {
            break t0.elapsed();
        }
        app.ensure_alive()?;
        if Instant::now() > deadline {
            return Err(format!("no frame from {port} within 30 s"));
        }
        proc::sleep(Duration::from_millis(1))?;
    };
    Ok(Seen {
        connected,
        enabled,
        started,
        first,
    })
}

/// Adds one flow through the API (`POST /api/v1/flows`, text body), with
/// the node's token from `token_file`.
fn flow(api: &str, token_file: &Path, rule: &str) -> Result<(), String> {
    let token = std::fs::read_to_string(token_file)
        .map_err(|e| format!("{}: {e}", token_file.display()))?;
    let mut s = TcpStream::connect(api).map_err(|e| e.to_string())?;
    write!(
        s,
        "POST /api/v1/flows HTTP/1.1\r\nHost: {api}\r\nConnection: close\r\n\
         Authorization: Bearer {}\r\n\
         Content-Type: text/plain\r\nContent-Length: {}\r\n\r\n{rule}",
        token.trim(),
        rule.len()
    )
    .map_err(|e| e.to_string())?;
    let mut text = String::new();
    s.read_to_string(&mut text).map_err(|e| e.to_string())?;
    if text.starts_with("HTTP/1.1 200") {
        Ok(())
    } else {
        Err(format!("flow {rule}: {text}"))
    }
}

pub fn cni(a: CniArgs) -> Result<(), String> {
    let switch = sibling("nfvswitch")?;
    let cni = sibling("nfvswitch-cni")?;
    let testpmd = nfv_testutil::which("dpdk-testpmd")
        .ok_or("dpdk-testpmd is not installed (Debian package dpdk-dev)")?;
    let _ = std::fs::remove_dir_all(&a.dir);
    std::fs::create_dir_all(&a.dir).map_err(|e| e.to_string())?;
    let api = free_api_addr()?;
    let config = a.dir.join("node.toml");
    std::fs::write(
        &config,
        format!(
            "[node]\nname = \"bench-cni\"\napi = \"{api}\"\napi_token_file = \"api-token\"\n\
             socket_dir = \"pods\"\n[memory]\nframes = 8192\n\
             hugepages = \"never\"\n[[port]]\nname = \"sink\"\nid = {SINK}\ntype = \"sink\"\n"
        ),
    )
    .map_err(|e| e.to_string())?;
    let mut cmd = Command::new(&switch);
    cmd.arg("run").arg(&config);
    let mut node = Proc::spawn(
        "nfvswitch",
        cmd,
        &a.dir.join("nfvswitch.log"),
        Signal::SIGINT,
    )?;
    let up = Instant::now();
    while get(&api, "/api/v1/node").is_err() {
        node.ensure_alive()?;
        if up.elapsed() > Duration::from_secs(30) {
            return Err("the switch's API did not answer within 30 s".into());
        }
        proc::sleep(Duration::from_millis(20))?;
    }
    let conf = json!({
        "cniVersion": "1.1.0", "name": "bench", "type": "nfvswitch-cni",
        "api": format!("http://{api}"), "interface": "vhost-user", "switchRole": "server",
        "socketDir": a.dir.join("pods"),
        "apiTokenFile": a.dir.join("api-token"),
        "runtimeConfig": { "CNIDeviceInfoFile": a.dir.join("devinfo.json") },
    });
    let mut rounds = Vec::new();
    for i in 0..a.rounds {
        let r = round(i, &a, &api, &cni, &testpmd, &conf)?;
        eprintln!(
            "round {i}: ADD {:.1} ms, connected {:.1} ms, rings enabled {:.1} ms, \
             forwarding {:.1} ms, first frame {:.1} ms",
            r.add, r.connected, r.enabled, r.started, r.first
        );
        rounds.push(r);
    }
    node.stop();
    let col =
        |f: &dyn Fn(&Round) -> f64| fmt_range(median(&rounds.iter().map(f).collect::<Vec<_>>()), 1);
    println!(
        "{}",
        text_table(
            &["from the start of ADD to", "median (min..max) ms"],
            &[
                vec!["ADD returned".into(), col(&|r| r.add)],
                vec![
                    "application connected (vhost-user negotiated)".into(),
                    col(&|r| r.connected)
                ],
                vec!["its queue pairs enabled".into(), col(&|r| r.enabled)],
                vec!["testpmd says it forwards".into(), col(&|r| r.started)],
                vec![
                    "first frame forwarded from the new port".into(),
                    col(&|r| r.first)
                ],
                vec![
                    "  (testpmd forwards -> first frame)".into(),
                    col(&|r| r.first - r.started)
                ],
            ],
        )
    );
    println!("{} rounds; logs in {}", a.rounds, a.dir.display());
    Ok(())
}
