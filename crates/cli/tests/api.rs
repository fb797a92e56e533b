//! `nfvswitch run` and its REST API: the address comes from `[node] api`
//! or `--api`, the bound address is logged and reported by `ctl show
//! node`, a busy address is a warning (the switch runs on without the
//! API), and SIGTERM stops everything cleanly.

use nfv_testutil::wait_until;
use serde_json::Value;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_nfvswitch");

struct Daemon {
    child: Option<Child>,
    socket: PathBuf,
    dir: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// gen (rate-limited) → sink, `api` as `[node] api`, `args` after `run`.
fn start(tag: &str, api: &str, args: &[&str]) -> Daemon {
    let dir = std::env::temp_dir().join(format!("nfvswitch-api-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("ctl.sock");
    let cfg = format!(
        r#"flows = ["priority=10,in_port=1,actions=output:2"]
[node]
name = "api{tag}"
control_socket = "{}"
api = "{api}"
[memory]
frames = 8192
hugepages = "never"
[[port]]
name = "gen0"
id = 1
type = "generator"
rate_pps = 100000
[[port]]
name = "sink0"
id = 2
type = "sink"
"#,
        socket.display()
    );
    let path = dir.join("node.toml");
    std::fs::write(&path, cfg).unwrap();
    let child = Command::new(BIN)
        .args(["--log", "info", "run"])
        .arg(&path)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let d = Daemon {
        child: Some(child),
        socket,
        dir,
    };
    assert!(
        wait_until(Duration::from_secs(10), || {
            std::os::unix::net::UnixStream::connect(&d.socket).is_ok()
        }),
        "control socket never appeared"
    );
    d
}

fn show_node(d: &Daemon) -> Value {
    let out = Command::new(BIN)
        .args(["ctl", "--json", "--socket"])
        .arg(&d.socket)
        .args(["show", "node"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// SIGTERM, then the exit status and what it printed.
fn stop(d: &mut Daemon) -> Output {
    let child = d.child.take().unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    child.wait_with_output().unwrap()
}

/// A plain HTTP/1.0 GET: (status line, body).
fn http_get(addr: &str, path: &str) -> (String, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    (
        head.lines().next().unwrap_or("").to_string(),
        body.to_string(),
    )
}

#[test]
fn run_serves_the_api_on_a_free_port_and_reports_where() {
    let mut d = start("free", "127.0.0.1:0", &[]);
    // The control socket comes up before the API has bound its port: on a
    // busy machine `show node` may not name it yet.
    let mut node = show_node(&d);
    wait_until(Duration::from_secs(20), || {
        node = show_node(&d);
        node["api"].is_string()
    });
    let addr = node["api"].as_str().expect("api address").to_string();
    assert!(
        addr.starts_with("127.0.0.1:") && !addr.ends_with(":0"),
        "{addr}"
    );
    let (status, body) = http_get(&addr, "/api/v1/node");
    assert!(status.contains(" 200 "), "{status}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (v["name"].as_str(), v["api"].as_str()),
        (Some("apifree"), Some(addr.as_str()))
    );
    let (status, body) = http_get(&addr, "/metrics");
    assert!(status.contains(" 200 "), "{status}");
    assert!(body.contains("nfvswitch_port_rx_packets_total{port=\"gen0\""));

    let out = stop(&mut d);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {}: {err}", out.status);
    assert!(
        err.contains(&format!("REST API and dashboard on http://{addr}/")),
        "{err}"
    );
    // Stopped with the switch.
    assert!(std::net::TcpStream::connect(&addr).is_err());
}

#[test]
fn a_busy_address_is_a_warning_and_the_switch_runs_on() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap().to_string();
    // --api overrides the config's "off".
    let mut d = start("busy", "off", &["--api", &addr]);
    let node = show_node(&d);
    assert!(node["api"].is_null(), "{node}");
    assert_eq!(node["ports"], 2);
    let out = stop(&mut d);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {}: {err}", out.status);
    assert!(
        err.contains(&format!("REST API not started: cannot listen on {addr}")),
        "{err}"
    );
    drop(busy);
}

#[test]
fn api_off_and_bad_addresses() {
    let mut d = start("off", "127.0.0.1:0", &["--api", "off"]);
    assert!(show_node(&d)["api"].is_null());
    let out = stop(&mut d);
    assert!(out.status.success());
    assert!(!String::from_utf8_lossy(&out.stderr).contains("REST API"));

    let out = Command::new(BIN)
        .args(["run", "--api", "nowhere:80"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/gen-sink.toml"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--api: \"nowhere:80\" is not an address"),
        "{err}"
    );
}
