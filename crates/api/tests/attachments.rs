//! Attachments through the REST API, as the CNI plugin uses them: made
//! idempotently by container id and interface name, refused when the same
//! key asks for something else, removed (also when unknown), garbage
//! collected one network at a time, and re-created by a node restarted on
//! the same state file.

use nfv_api::ApiServer;
use nfv_control::Node;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

struct Running {
    node: Arc<Node>,
    api: Option<ApiServer>,
    base: String,
    token: String,
}

impl Running {
    fn start(dir: &Path) -> Running {
        let text = format!(
            r#"flows = ["priority=10,in_port=1,actions=output:2"]
[node]
name = "attach"
api = "127.0.0.1:0"
state_file = "{}"
socket_dir = "socks"
[memory]
frames = 4096
hugepages = "never"
[[port]]
name = "gen"
id = 1
type = "generator"
rate_pps = 1000
[[port]]
name = "sink"
id = 2
type = "sink"
"#,
            dir.join("state.json").display()
        );
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let cfg = nfv_config::parse_str(&text, &dir.join("node.toml"), cpus)
            .unwrap_or_else(|e| panic!("{e}"));
        let node = Node::start(&cfg).expect("node starts");
        let api = ApiServer::start(cfg.api.expect("api on"), node.clone()).expect("API binds");
        let base = format!("http://{}", api.addr());
        Running {
            node,
            token: format!("Bearer {}", api.token()),
            api: Some(api),
            base,
        }
    }

    fn call(&self, method: &str, path: &str, body: Option<&str>) -> (u16, Value) {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .proxy(None)
            .timeout_global(Some(Duration::from_secs(20)))
            .build()
            .into();
        let url = format!("{}{path}", self.base);
        let r = match (method, body) {
            ("GET", _) => agent.get(&url).call(),
            ("DELETE", _) => agent
                .delete(&url)
                .header("authorization", &self.token)
                .call(),
            ("PUT", Some(b)) => agent
                .put(&url)
                .header("content-type", "application/json")
                .header("authorization", &self.token)
                .send(b),
            ("POST", Some(b)) => agent
                .post(&url)
                .header("content-type", "application/json")
                .header("authorization", &self.token)
                .send(b),
            _ => unreachable!(),
        };
        let mut r = r.unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let text = r.body_mut().read_to_string().unwrap();
        let v = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{method} {path}: not JSON ({e}): {text}"));
        (r.status().as_u16(), v)
    }

    fn port_names(&self) -> Vec<String> {
        let (s, v) = self.call("GET", "/api/v1/ports", None);
        assert_eq!(s, 200);
        v.as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap().to_string())
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

/// A vhost-user request of network `net-a`.
fn vhost(socket: &Path) -> String {
    format!(
        r#"{{"type": "vhost-user", "mode": "server", "socket": "{}", "network": "net-a"}}"#,
        socket.display()
    )
}

#[test]
fn attachments_are_idempotent_collected_and_outlive_a_restart() {
    let dir: PathBuf = std::env::temp_dir().join(format!("nfv-attach-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let sock = |n: &str| dir.join("socks").join(format!("{n}.sock"));
    let node = Running::start(&dir);

    // ADD, and ADD again: the same port.
    let (s, first) = node.call(
        "PUT",
        "/api/v1/attachments/c1abc/net1",
        Some(&vhost(&sock("c1"))),
    );
    assert_eq!(s, 201, "{first}");
    assert_eq!(
        (first["port"].as_str(), first["id"].as_u64()),
        (Some("c-c1abc-net1"), Some(1000))
    );
    assert_eq!(first["type"], "vhost-user");
    let (s, again) = node.call(
        "PUT",
        "/api/v1/attachments/c1abc/net1",
        Some(&vhost(&sock("c1"))),
    );
    assert_eq!((s, &again), (200, &first));
    // The same key asking for something else: another port, or the same
    // port for another network.
    let memif = format!(
        r#"{{"type": "memif", "socket": "{}", "network": "net-b"}}"#,
        sock("m2").display()
    );
    let (s, v) = node.call("PUT", "/api/v1/attachments/c1abc/net1", Some(&memif));
    assert_eq!(s, 409, "{v}");
    let other_net = vhost(&sock("c1")).replace("net-a", "net-b");
    let (s, v) = node.call("PUT", "/api/v1/attachments/c1abc/net1", Some(&other_net));
    assert_eq!(s, 409, "{v}");
    let (s, v) = node.call("PUT", "/api/v1/attachments/c2def/net1", Some(&memif));
    assert_eq!((s, v["id"].as_u64()), (201, Some(1001)), "{v}");
    assert!(node.port_names().contains(&"c-c1abc-net1".to_string()));
    assert!(node.port_names().contains(&"c-c2def-net1".to_string()));

    // Refusals that change nothing.
    for (path, body, why) in [
        (
            "/api/v1/attachments/a%20b/net1",
            vhost(&sock("x")),
            "container id",
        ),
        (
            "/api/v1/attachments/c3/net1",
            r#"{"type": "vhost-user", "socket": "../rel.sock"}"#.to_string(),
            "socket",
        ),
        (
            "/api/v1/attachments/c3/net1",
            format!(
                r#"{{"type": "vhost-user", "socket": "/{}"}}"#,
                "d".repeat(120)
            ),
            "107 bytes",
        ),
        (
            "/api/v1/attachments/c3/net1",
            r#"{"type": "tap"}"#.to_string(),
            "the body must be",
        ),
        (
            "/api/v1/attachments/c3/waytoolongifname0",
            vhost(&sock("y")),
            "ifname",
        ),
        // The socket of c1's port: the port set's own check refuses it.
        ("/api/v1/attachments/c3/net1", vhost(&sock("c1")), "socket"),
    ] {
        let (s, v) = node.call("PUT", path, Some(&body));
        assert_eq!(s, 400, "{path} {body}: {v}");
        assert!(
            v["error"].as_str().is_some_and(|e| e.contains(why)),
            "{path}: {v}"
        );
    }
    let (_, list) = node.call("GET", "/api/v1/attachments", None);
    assert_eq!(list["attachments"].as_array().unwrap().len(), 2, "{list}");

    // DEL of what is not attached: not an error.
    let (s, v) = node.call("DELETE", "/api/v1/attachments/nobody/net1", None);
    assert_eq!((s, v["deleted"].as_bool()), (200, Some(false)));

    // A restart on the same state file gives the ports back.
    drop(node);
    let node = Running::start(&dir);
    let (_, list) = node.call("GET", "/api/v1/attachments", None);
    assert_eq!(list["attachments"].as_array().unwrap().len(), 2, "{list}");
    for p in ["c-c1abc-net1", "c-c2def-net1"] {
        assert!(
            node.port_names().contains(&p.to_string()),
            "{p} after restart"
        );
    }
    let (s, v) = node.call(
        "PUT",
        "/api/v1/attachments/c1abc/net1",
        Some(&vhost(&sock("c1"))),
    );
    assert_eq!(
        (s, &v),
        (200, &first),
        "ADD after the restart answers the same port"
    );

    // GC is scoped to one network: net-a's GC with nothing valid removes
    // c1abc (net-a) and leaves c2def (net-b); net-b's GC keeps what is
    // valid. A GC without a network is refused.
    let gc = |body: &str| {
        let (s, v) = node.call("POST", "/api/v1/attachments/gc", Some(body));
        let removed: Vec<String> = v["removed"]
            .as_array()
            .map(|r| {
                r.iter()
                    .map(|a| a["port"].as_str().unwrap().to_string())
                    .collect()
            })
            .unwrap_or_default();
        (s, removed, v)
    };
    let (s, _, v) = gc(r#"{"valid": []}"#);
    assert_eq!(s, 400, "{v}");
    let (s, removed, v) = gc(r#"{"network": "", "valid": []}"#);
    assert_eq!((s, removed.len()), (400, 0), "{v}");
    let (s, removed, v) = gc(r#"{"network": "net-a", "valid": []}"#);
    assert_eq!((s, removed), (200, vec!["c-c1abc-net1".to_string()]), "{v}");
    assert!(!node.port_names().contains(&"c-c1abc-net1".to_string()));
    assert!(node.port_names().contains(&"c-c2def-net1".to_string()));
    let (s, removed, v) =
        gc(r#"{"network": "net-b", "valid": [{"container_id": "c2def", "ifname": "net1"}]}"#);
    assert_eq!((s, removed.len()), (200, 0), "{v}");
    assert!(node.port_names().contains(&"c-c2def-net1".to_string()));
    let (s, v) = node.call("DELETE", "/api/v1/attachments/c2def/net1", None);
    assert_eq!((s, v["deleted"].as_bool()), (200, Some(true)), "{v}");
    assert!(!node.port_names().iter().any(|p| p.starts_with("c-")));
    let state: Value =
        serde_json::from_slice(&std::fs::read(dir.join("state.json")).unwrap()).unwrap();
    assert_eq!(
        state["attachments"].as_array().map(Vec::len),
        Some(0),
        "{state}"
    );
    drop(node);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A state file from before attachments kept their network: the node
/// restores the port, no network's GC removes it, and the next ADD for the
/// same port gives it that ADD's network (then that network's GC does).
#[test]
fn attachments_from_an_old_state_file_take_the_network_of_the_next_add() {
    let dir: PathBuf = std::env::temp_dir().join(format!("nfv-attach-old-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("socks/old.sock");
    std::fs::write(
        dir.join("state.json"),
        format!(
            r#"{{"version": 1, "attachments": [{{"container_id": "old1", "ifname": "net1",
                "type": "vhost-user", "mode": "server", "socket": "{}",
                "port": "c-old1-net1", "id": 1000}}]}}"#,
            sock.display()
        ),
    )
    .unwrap();
    let node = Running::start(&dir);
    assert!(node.port_names().contains(&"c-old1-net1".to_string()));
    let (s, v) = node.call(
        "POST",
        "/api/v1/attachments/gc",
        Some(r#"{"network": "net-a", "valid": []}"#),
    );
    assert_eq!(
        (s, v["removed"].as_array().map(Vec::len)),
        (200, Some(0)),
        "{v}"
    );
    let (s, v) = node.call("PUT", "/api/v1/attachments/old1/net1", Some(&vhost(&sock)));
    assert_eq!(
        (s, v["port"].as_str(), v["network"].as_str()),
        (200, Some("c-old1-net1"), Some("net-a")),
        "{v}"
    );
    let state: Value =
        serde_json::from_slice(&std::fs::read(dir.join("state.json")).unwrap()).unwrap();
    assert_eq!(state["attachments"][0]["network"], "net-a", "{state}");
    // Addresses given with a later ADD are kept; the first ones stay.
    let with = |ip: &str| {
        vhost(&sock).replace(
            "\"network\"",
            &format!(r#""addresses": {{"ips": [{{"address": "{ip}"}}]}}, "network""#),
        )
    };
    for (given, kept) in [
        ("10.0.0.2/24", "10.0.0.2/24"),
        ("10.0.0.3/24", "10.0.0.2/24"),
    ] {
        let (s, v) = node.call("PUT", "/api/v1/attachments/old1/net1", Some(&with(given)));
        assert_eq!(
            (s, &v["addresses"]["ips"][0]["address"]),
            (200, &Value::from(kept)),
            "{given}: {v}"
        );
    }
    let (s, v) = node.call(
        "POST",
        "/api/v1/attachments/gc",
        Some(r#"{"network": "net-a", "valid": []}"#),
    );
    assert_eq!(
        (s, v["removed"].as_array().map(Vec::len)),
        (200, Some(1)),
        "{v}"
    );
    assert!(!node.port_names().contains(&"c-old1-net1".to_string()));
    drop(node);
    let _ = std::fs::remove_dir_all(&dir);
}
