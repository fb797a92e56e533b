//! Issue 35's attacks on a real node and API, each refused: a web page's
//! cross-site and DNS-rebinding requests, changes without the token, a
//! pcap capture over a root-only file, host interfaces over REST, sockets
//! named outside `socket_dir` or live ones taken over, a state file that
//! hijacks a configured port at restart, and a local user reading the
//! token.
//!
//! Requests go over a raw TCP stream, so the test says exactly which
//! `Host`, `Origin` and headers are sent (an HTTP client library would
//! set some of them itself).

use nfv_api::ApiServer;
use nfv_control::Node;
use nfv_testutil::TempDir;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// PMD threads busy-poll: one node at a time.
static SERIAL: Mutex<()> = Mutex::new(());

struct Running {
    node: Arc<Node>,
    api: Option<ApiServer>,
}

impl Running {
    /// A node from `extra_node_keys` (lines of `[node]`) and `ports` (TOML
    /// after `[memory]`), its API on 127.0.0.1:0.
    fn start(dir: &Path, extra_node_keys: &str, ports: &str) -> Running {
        let text = format!(
            "[node]\nname = \"access\"\napi = \"127.0.0.1:0\"\ncontrol_socket = \"ctl.sock\"\n\
             {extra_node_keys}\n[memory]\nframes = 4096\nhugepages = \"never\"\n\
             [[port]]\nname = \"sink\"\nid = 2\ntype = \"sink\"\n{ports}"
        );
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let cfg = nfv_config::parse_str(&text, &dir.join("node.toml"), cpus)
            .unwrap_or_else(|e| panic!("{e}"));
        let node = Node::start(&cfg).expect("node starts");
        let api = ApiServer::start(cfg.api.expect("api on"), node.clone()).expect("API binds");
        Running {
            node,
            api: Some(api),
        }
    }

    fn addr(&self) -> SocketAddr {
        self.api.as_ref().unwrap().addr()
    }

    fn bearer(&self) -> String {
        format!("Bearer {}", self.api.as_ref().unwrap().token())
    }

    /// A request with exactly these headers (`Host` among them or not).
    fn raw(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, Value) {
        raw(self.addr(), method, path, headers, body)
    }

    fn port_names(&self) -> Vec<String> {
        self.node
            .show_ports()
            .iter()
            .map(|p| p.name.clone())
            .collect()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(api) = self.api.take() {
            api.stop();
        }
        self.node.shutdown();
    }
}

fn raw(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Value) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    s.write_all(req.as_bytes()).unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status in {answer:?}"));
    let json = answer
        .split_once("\r\n\r\n")
        .and_then(|(_, b)| serde_json::from_str(b).ok())
        .unwrap_or(Value::Null);
    (status, json)
}

/// A web page (or a local user) without the token: every door it tries.
#[test]
fn cross_site_rebinding_and_tokenless_requests_change_nothing() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = TempDir::new("api-access", "web");
    let secret = dir.0.join("root-only");
    std::fs::write(&secret, "secret\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let node = Running::start(&dir.0, "socket_dir = \"socks\"", "");
    node.node
        .attach(
            nfv_control::attachments::AttachmentKey {
                container_id: "pod1".into(),
                ifname: "net1".into(),
            },
            serde_json::from_str(
                r#"{"type": "vhost-user", "socket": "pod1.sock", "network": "n"}"#,
            )
            .unwrap(),
        )
        .expect("an attachment to keep");
    let host = node.addr().to_string();
    let bearer = node.bearer();
    let pcap = format!(
        "name=\"cap\",id=3,type=\"pcap\",capture=\"{}\"",
        secret.display()
    );
    let evil_host = format!("evil.example:{}", node.addr().port());
    // (what, method, path, headers, body, status)
    let cases: Vec<(&str, &str, &str, Vec<(&str, &str)>, String, u16)> = vec![
        (
            "a page's text/plain POST through DNS rebinding (its own Host)",
            "POST",
            "/api/v1/ports",
            vec![
                ("Host", &evil_host),
                ("Origin", "http://evil.example"),
                ("Content-Type", "text/plain"),
            ],
            pcap.clone(),
            421,
        ),
        (
            "a page's text/plain POST to 127.0.0.1 (foreign Origin)",
            "POST",
            "/api/v1/ports",
            vec![
                ("Host", &host),
                ("Origin", "http://evil.example"),
                ("Content-Type", "text/plain"),
            ],
            pcap.clone(),
            403,
        ),
        (
            "a cross-site fetch (Sec-Fetch-Site) even with the token",
            "POST",
            "/api/v1/flows",
            vec![
                ("Host", &host),
                ("Sec-Fetch-Site", "cross-site"),
                ("Authorization", &bearer),
            ],
            "priority=1,actions=drop".into(),
            403,
        ),
        (
            "a pcap port without the token",
            "POST",
            "/api/v1/ports",
            vec![("Host", &host), ("Content-Type", "text/plain")],
            pcap.clone(),
            401,
        ),
        (
            "a pcap port with the token but no [node] pcap_dir",
            "POST",
            "/api/v1/ports",
            vec![("Host", &host), ("Authorization", &bearer)],
            pcap.clone(),
            403,
        ),
        (
            "an afpacket port on a host interface over REST",
            "POST",
            "/api/v1/ports",
            vec![("Host", &host), ("Authorization", &bearer)],
            "name=\"sniff\",id=4,type=\"afpacket\",iface=\"lo\"".into(),
            403,
        ),
        (
            "attachments GC as text/plain without the token",
            "POST",
            "/api/v1/attachments/gc",
            vec![("Host", &host), ("Content-Type", "text/plain")],
            r#"{"network": "n", "valid": []}"#.into(),
            401,
        ),
        (
            "a wrong token",
            "DELETE",
            "/api/v1/flows?filter=",
            vec![
                ("Host", &host),
                ("Authorization", "Bearer 0000000000000000"),
            ],
            String::new(),
            401,
        ),
        (
            "an attachment without the token",
            "PUT",
            "/api/v1/attachments/evil/net1",
            vec![("Host", &host), ("Content-Type", "application/json")],
            r#"{"type": "vhost-user", "socket": "x.sock"}"#.into(),
            401,
        ),
        (
            "the dashboard under a rebinding name",
            "GET",
            "/api/v1/ports",
            vec![("Host", &evil_host)],
            String::new(),
            421,
        ),
        (
            "no Host at all",
            "GET",
            "/api/v1/ports",
            vec![],
            String::new(),
            421,
        ),
    ];
    let flows_before = node.node.dump_flows().len();
    for (what, method, path, headers, body, want) in &cases {
        let (status, v) = node.raw(method, path, headers, body);
        assert_eq!(status, *want, "{what}: {v}");
        assert!(v["error"].is_string(), "{what}: a reason is given: {v}");
    }
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "secret\n");
    assert_eq!(node.port_names().len(), 2, "{:?}", node.port_names());
    assert_eq!(node.node.list_attachments().len(), 1);
    assert_eq!(node.node.dump_flows().len(), flows_before);
    // What stays open: reads from loopback (Prometheus, the dashboard),
    // and changes with the token from this origin.
    let (s, _) = node.raw("GET", "/metrics", &[("Host", &host)], "");
    assert_eq!(s, 200);
    let (s, v) = node.raw(
        "GET",
        "/api/v1/ports",
        &[("Host", "localhost"), ("Origin", &format!("http://{host}"))],
        "",
    );
    assert_eq!(s, 403, "Origin names another authority than Host: {v}");
    let (s, v) = node.raw(
        "POST",
        "/api/v1/flows",
        &[("Host", &host), ("Authorization", &bearer)],
        "priority=1,actions=drop",
    );
    assert_eq!(s, 200, "{v}");
}

/// pcap ports over REST capture and replay only under `[node] pcap_dir`.
#[test]
fn a_pcap_port_over_rest_stays_in_the_pcap_dir() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = TempDir::new("api-access", "pcap");
    std::fs::create_dir_all(dir.0.join("pcap")).unwrap();
    let victim = dir.0.join("victim");
    std::fs::write(&victim, "keep\n").unwrap();
    std::os::unix::fs::symlink(&victim, dir.0.join("pcap/link.pcap")).unwrap();
    let node = Running::start(&dir.0, "pcap_dir = \"pcap\"", "");
    let host = node.addr().to_string();
    let bearer = node.bearer();
    let add = |id: u16, capture: &Path| {
        node.raw(
            "POST",
            "/api/v1/ports",
            &[("Host", &host), ("Authorization", &bearer)],
            &format!(
                "name=\"cap{id}\",id={id},type=\"pcap\",capture=\"{}\"",
                capture.display()
            ),
        )
    };
    for (id, path) in [
        (10, victim.clone()),
        (11, dir.0.join("pcap/../victim")),
        (12, dir.0.join("pcap/link.pcap")),
    ] {
        let (s, v) = add(id, &path);
        assert_eq!(s, 403, "{}: {v}", path.display());
    }
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep\n");
    let (s, v) = add(13, &dir.0.join("pcap/ok.pcap"));
    assert_eq!(s, 200, "{v}");
    assert!(dir.0.join("pcap/ok.pcap").exists());
}

/// Attachment sockets: a file name in `socket_dir`, never a path, never a
/// socket another process serves, never a configured port's.
#[test]
fn attachments_cannot_take_over_sockets() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = TempDir::new("api-access", "sockets");
    let socks = dir.0.join("socks");
    std::fs::create_dir_all(socks.join("sub")).unwrap();
    let vm = format!(
        "[[port]]\nname = \"vm1\"\nid = 3\ntype = \"vhost-user\"\nmode = \"server\"\nsocket = \"{}\"\n",
        socks.join("vm1.sock").display()
    );
    let node = Running::start(&dir.0, "socket_dir = \"socks\"", &vm);
    // Another service's live socket in the same directory.
    let live_path = socks.join("live.sock");
    let live = std::os::unix::net::UnixListener::bind(&live_path).unwrap();
    live.set_nonblocking(true).unwrap();
    std::fs::write(socks.join("file.sock"), "not a socket").unwrap();
    let host = node.addr().to_string();
    let bearer = node.bearer();
    let attach = |key: &str, socket: &str| {
        node.raw(
            "PUT",
            &format!("/api/v1/attachments/{key}/net1"),
            &[
                ("Host", &host),
                ("Authorization", &bearer),
                ("Content-Type", "application/json"),
            ],
            &format!(r#"{{"type": "vhost-user", "mode": "server", "socket": "{socket}", "network": "n"}}"#),
        )
    };
    let escape = socks.join("sub/../vm1.sock");
    for (socket, why) in [
        ("../socks/vm1.sock", "file name"),
        ("sub/x.sock", "file name"),
        ("/tmp/x.sock", "live in"),
        (escape.to_str().unwrap(), "not allowed"),
        ("vm1.sock", "vm1"),
        ("live.sock", "in use"),
        ("file.sock", "not a socket"),
    ] {
        let (s, v) = attach("pod2", socket);
        assert_eq!(s, 400, "{socket}: {v}");
        let e = v["error"].as_str().unwrap_or_default();
        assert!(e.contains(why), "{socket}: {e:?} should say {why:?}");
    }
    assert!(
        std::os::unix::net::UnixStream::connect(&live_path).is_ok(),
        "the other service still listens on its socket"
    );
    assert!(live.accept().is_ok());
    assert_eq!(
        std::fs::read_to_string(socks.join("file.sock")).unwrap(),
        "not a socket"
    );
    assert!(node.node.list_attachments().is_empty());
    let (s, v) = attach("pod2", "pod2.sock");
    assert_eq!(s, 201, "{v}");
    assert_eq!(
        v["socket"].as_str(),
        socks.join("pod2.sock").to_str(),
        "answered as the path in socket_dir"
    );
}

/// A state file (written by an attacker, or by an older node) whose
/// attachments name a configured port's socket, or a path outside
/// `socket_dir`: the config ports win, those attachments are left out and
/// counted, the good one is restored.
#[test]
fn a_restored_attachment_never_beats_a_config_port() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = TempDir::new("api-access", "restore");
    let socks = dir.0.join("socks");
    std::fs::create_dir_all(&socks).unwrap();
    let entry = |id: &str, socket: &Path, port: &str, no: u16| {
        format!(
            r#"{{"container_id": "{id}", "ifname": "net1", "type": "vhost-user",
                "mode": "server", "socket": "{}", "network": "n", "port": "{port}",
                "id": {no}}}"#,
            socket.display()
        )
    };
    let state = format!(
        r#"{{"version": 1, "attachments": [{}, {}, {}, {}]}}"#,
        entry(
            "hijack",
            &socks.join("../socks/vm1.sock"),
            "c-hijack-net1",
            1000
        ),
        entry("same", &socks.join("vm1.sock"), "c-same-net1", 1001),
        entry(
            "outside",
            Path::new("/tmp/outside.sock"),
            "c-outside-net1",
            1002
        ),
        entry("good", &socks.join("good.sock"), "c-good-net1", 1003),
    );
    std::fs::write(dir.0.join("state.json"), state).unwrap();
    let vm = format!(
        "[[port]]\nname = \"vm1\"\nid = 3\ntype = \"vhost-user\"\nmode = \"server\"\nsocket = \"{}\"\n",
        socks.join("vm1.sock").display()
    );
    let node = Running::start(
        &dir.0,
        "socket_dir = \"socks\"\nstate_file = \"state.json\"",
        &vm,
    );
    let names = node.port_names();
    assert!(names.contains(&"vm1".to_string()), "{names:?}");
    assert!(names.contains(&"c-good-net1".to_string()), "{names:?}");
    assert_eq!(names.len(), 3, "sink, vm1, c-good-net1: {names:?}");
    let kept: Vec<String> = node
        .node
        .list_attachments()
        .into_iter()
        .map(|a| a.key.container_id)
        .collect();
    assert_eq!(kept, ["good"]);
    assert_eq!(node.node.show_node().attachments_refused, 3);
    let (s, v) = node.raw(
        "GET",
        "/api/v1/node",
        &[("Host", &node.addr().to_string())],
        "",
    );
    assert_eq!(
        (s, v["attachments_refused"].as_u64()),
        (200, Some(3)),
        "{v}"
    );
    assert!(!Path::new("/tmp/outside.sock").exists());
}

/// A local user who is not the switch's cannot read the token, so cannot
/// change the node over the API either.
#[test]
fn a_local_user_cannot_read_the_token() {
    let test = "a_local_user_cannot_read_the_token";
    if !nfv_testutil::is_root() {
        return nfv_testutil::skip(test, "needs root to run a client as nobody");
    }
    let Some(setpriv) = nfv_testutil::which("setpriv") else {
        return nfv_testutil::skip(test, "setpriv (util-linux) not installed");
    };
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = TempDir::new("api-access", "nobody");
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    let node = Running::start(&dir.0, "", "");
    let token_file = node.node.api_token_file().to_path_buf();
    let mode = std::fs::metadata(&token_file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{}", token_file.display());
    let as_nobody = |script: &str| {
        std::process::Command::new(&setpriv)
            .args([
                "--reuid=nobody",
                "--regid=nogroup",
                "--clear-groups",
                "bash",
                "-c",
                script,
            ])
            .output()
            .expect("setpriv runs")
    };
    let out = as_nobody(&format!("cat {}", token_file.display()));
    assert!(!out.status.success(), "nobody read the token");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Permission denied"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // nobody's change over the API, as curl would send it.
    let addr = node.addr();
    let out = as_nobody(&format!(
        "exec 3<>/dev/tcp/{}/{}; printf 'POST /api/v1/flows HTTP/1.1\\r\\nHost: {addr}\\r\\n\
         Content-Type: text/plain\\r\\nContent-Length: 23\\r\\nConnection: close\\r\\n\\r\\n\
         priority=1,actions=drop' >&3; head -n 1 <&3",
        addr.ip(),
        addr.port()
    ));
    let status = String::from_utf8_lossy(&out.stdout);
    assert!(status.contains(" 401 "), "{status:?}");
    assert!(node.node.dump_flows().is_empty());
}
