//! The plugin driven as a container runtime drives it: `CNI_*` variables
//! and the network config on stdin, the result or error JSON on stdout,
//! against a node serving its REST API in this process.

use nfv_api::ApiServer;
use nfv_control::Node;
use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

const PLUGIN: &str = env!("CARGO_BIN_EXE_nfvswitch-cni");

struct Running {
    node: Arc<Node>,
    api: Option<ApiServer>,
    url: String,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(api) = self.api.take() {
            api.stop();
        }
        self.node.shutdown();
    }
}

fn start(dir: &Path) -> Running {
    let text = format!(
        "flows = [\"priority=10,in_port=1,actions=output:2\"]\n[node]\nname = \"cni\"\napi = \"127.0.0.1:0\"\n\
         state_file = \"{}\"\n[memory]\nframes = 4096\nhugepages = \"never\"\n\
         [[port]]\nname = \"gen\"\nid = 1\ntype = \"generator\"\nrate_pps = 1000\n\
         [[port]]\nname = \"sink\"\nid = 2\ntype = \"sink\"\n",
        dir.join("state.json").display()
    );
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cfg = nfv_config::parse_str(&text, &dir.join("node.toml"), cpus)
        .unwrap_or_else(|e| panic!("{e}"));
    let node = Node::start(&cfg).expect("node starts");
    let api = ApiServer::start(cfg.api.expect("api on"), node.clone()).expect("API binds");
    let url = format!("http://{}", api.addr());
    Running {
        node,
        api: Some(api),
        url,
    }
}

/// Runs the plugin: (exit success, stdout as JSON or Null).
fn plugin(command: &str, container: &str, ifname: &str, conf: &Value) -> (bool, Value) {
    let mut child = Command::new(PLUGIN)
        .env_clear()
        .env("CNI_COMMAND", command)
        .env("CNI_CONTAINERID", container)
        .env("CNI_IFNAME", ifname)
        .env("CNI_NETNS", format!("/var/run/netns/{container}"))
        .env("CNI_PATH", "/opt/cni/bin")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(conf.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let v = if text.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{command}: not JSON ({e}): {text}"))
    };
    (out.status.success(), v)
}

fn ports(n: &Running) -> Vec<String> {
    n.node
        .datapath()
        .port_views()
        .iter()
        .map(|v| v.port.name().to_string())
        .collect()
}

#[test]
fn add_check_del_gc_status_version() {
    let dir: PathBuf = std::env::temp_dir().join(format!("nfv-cni-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let node = start(&dir);
    let devinfo = dir.join("devinfo/net1.json");
    let conf = json!({
        "cniVersion": "1.1.0", "name": "nfv", "type": "nfvswitch-cni",
        "api": node.url, "interface": "vhost-user", "socketDir": dir.join("pods"),
        "runtimeConfig": { "CNIDeviceInfoFile": devinfo },
    });

    let (ok, v) = plugin("VERSION", "", "", &json!({}));
    assert!(ok);
    assert!(
        v["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!("1.1.0")),
        "{v}"
    );

    // ADD: the result names the socket; the node has the port; the
    // device-info file says the application is the vhost-user client.
    let (ok, added) = plugin("ADD", "0123456789abcdef", "net1", &conf);
    assert!(ok, "{added}");
    let socket = dir.join("pods/0123456789ab-net1.sock");
    assert_eq!(
        added["interfaces"][0]["socketPath"],
        json!(socket),
        "{added}"
    );
    assert_eq!(added["interfaces"][0]["name"], "net1");
    assert_eq!(added["cniVersion"], "1.1.0");
    assert!(ports(&node).contains(&"c-0123456789ab-net1".to_string()));
    assert!(
        socket.exists(),
        "the switch listens on {}",
        socket.display()
    );
    let info: Value = serde_json::from_slice(&std::fs::read(&devinfo).unwrap()).unwrap();
    assert_eq!(
        info,
        json!({"type": "vhost-user", "version": "1.1.0", "vhost-user": {"mode": "client", "path": socket}})
    );
    // ADD again (a retried runtime call): the same answer.
    let (ok, again) = plugin("ADD", "0123456789abcdef", "net1", &conf);
    assert!(ok && again == added, "{again}");
    let (ok, v) = plugin("CHECK", "0123456789abcdef", "net1", &conf);
    assert!(ok && v.is_null(), "{v}");

    // DEL, DEL again, DEL of something never added: all succeed.
    for c in ["0123456789abcdef", "0123456789abcdef", "neveradded"] {
        let (ok, v) = plugin("DEL", c, "net1", &conf);
        assert!(ok, "DEL {c}: {v}");
    }
    assert!(!ports(&node).iter().any(|p| p.starts_with("c-")));
    assert!(!devinfo.exists(), "device-info removed by DEL");
    let (ok, v) = plugin("CHECK", "0123456789abcdef", "net1", &conf);
    assert!(!ok && v["code"] == 100, "{v}");

    // GC: only the valid attachment stays.
    for c in ["aaaa", "bbbb"] {
        assert!(plugin("ADD", c, "net1", &conf).0);
    }
    let mut gc = conf.clone();
    gc["cni.dev/valid-attachments"] = json!([{ "containerID": "bbbb", "ifname": "net1" }]);
    let (ok, v) = plugin("GC", "", "", &gc);
    assert!(ok, "{v}");
    let names = ports(&node);
    assert!(
        !names.contains(&"c-aaaa-net1".to_string()) && names.contains(&"c-bbbb-net1".to_string()),
        "{names:?}"
    );

    // Refusals, each with the spec's code.
    let cases: [(&str, Value, u64); 5] = [
        ("garbage", json!("not a config"), 6),
        (
            "old version",
            json!({"cniVersion": "0.2.0", "name": "nfv", "type": "x"}),
            1,
        ),
        (
            "tap",
            json!({"cniVersion": "1.1.0", "name": "nfv", "type": "x", "interface": "tap"}),
            7,
        ),
        (
            "socket dir too long",
            json!({"cniVersion": "1.1.0", "name": "nfv", "type": "x", "api": node.url,
            "socketDir": format!("/{}", "d".repeat(100))}),
            7,
        ),
        (
            "memif as client",
            json!({"cniVersion": "1.1.0", "name": "nfv", "type": "x", "interface": "memif",
            "switchRole": "client"}),
            7,
        ),
    ];
    for (name, c, code) in cases {
        let (ok, v) = plugin("ADD", "cccc", "net1", &c);
        assert!(!ok && v["code"] == code, "{name}: {v}");
        assert!(
            v["msg"].as_str().is_some_and(|m| !m.is_empty()),
            "{name}: {v}"
        );
    }

    // STATUS: up while the node answers; 50 once it does not.
    assert!(plugin("STATUS", "", "", &conf).0);
    let url = node.url.clone();
    drop(node);
    let mut gone = conf.clone();
    gone["api"] = json!(url);
    let (ok, v) = plugin("STATUS", "", "", &gone);
    assert!(!ok && v["code"] == 50, "{v}");
    let (ok, v) = plugin("ADD", "dddd", "net1", &gone);
    assert!(
        !ok && v["code"] == 11,
        "ADD with the node down: try again later; {v}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// testpmd killed (by PID) when the test ends, also on panic.
struct Testpmd(std::process::Child);

impl Drop for Testpmd {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn port_rx(node: &Running, name: &str) -> u64 {
    let nfv_control::Response::Ok { data } = node.node.handle(&nfv_control::Request::ShowPorts)
    else {
        panic!("show ports refused");
    };
    data.as_array()
        .and_then(|a| a.iter().find(|p| p["name"] == name))
        .and_then(|p| p["rx"]["packets"].as_u64())
        .unwrap_or(0)
}

/// Two "pods" get ports by ADD; DPDK testpmd opens a virtio-user device on
/// each returned socket and forwards between them (`--tx-first` starts a
/// burst looping pod A → switch → pod B → testpmd → pod A …): traffic
/// crosses both ports. Then DEL removes them with testpmd still attached.
#[test]
fn a_dpdk_app_connects_to_the_sockets_add_returns() {
    let test = "plugin::a_dpdk_app_connects_to_the_sockets_add_returns";
    let Some(testpmd) = nfv_testutil::which("dpdk-testpmd") else {
        return nfv_testutil::skip(
            test,
            "dpdk-testpmd is not installed (Debian package dpdk-dev)",
        );
    };
    let dir: PathBuf = std::env::temp_dir().join(format!("nfv-cni-dpdk-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let node = start(&dir);
    let conf = json!({
        "cniVersion": "1.1.0", "name": "nfv", "type": "nfvswitch-cni",
        "api": node.url, "interface": "vhost-user", "socketDir": dir.join("pods"),
    });
    let mut sockets = Vec::new();
    for pod in ["podaaaa", "podbbbb"] {
        let (ok, r) = plugin("ADD", pod, "net1", &conf);
        assert!(ok, "{r}");
        sockets.push(
            r["interfaces"][0]["socketPath"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    node.node
        .add_flows(&[
            "in_port=1000,actions=output:1001".into(),
            "in_port=1001,actions=output:1000".into(),
        ])
        .unwrap();
    let prefix = format!("cni{}", std::process::id());
    let run = Testpmd(
        Command::new(testpmd)
            .args([
                "--no-pci",
                "--no-huge",
                "-m",
                "512",
                &format!("--file-prefix={prefix}"),
                "-l",
                "0,1",
            ])
            .arg(format!("--vdev=net_virtio_user0,path={}", sockets[0]))
            .arg(format!("--vdev=net_virtio_user1,path={}", sockets[1]))
            .args([
                "--",
                "--forward-mode=io",
                "--port-topology=paired",
                "--nb-cores=1",
                "--tx-first",
            ])
            .args([
                "--stats-period=1",
                "--total-num-mbufs=16384",
                "--no-lsc-interrupt",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let flowing = nfv_testutil::wait_until(std::time::Duration::from_secs(30), || {
        port_rx(&node, "c-podaaaa-net1") > 1000 && port_rx(&node, "c-podbbbb-net1") > 1000
    });
    assert!(
        flowing,
        "traffic through both pods' ports: rx {} and {}",
        port_rx(&node, "c-podaaaa-net1"),
        port_rx(&node, "c-podbbbb-net1")
    );
    // DEL while the app is still attached.
    for pod in ["podaaaa", "podbbbb"] {
        let (ok, v) = plugin("DEL", pod, "net1", &conf);
        assert!(ok, "{v}");
    }
    assert!(!ports(&node).iter().any(|p| p.starts_with("c-")));
    drop(run);
    drop(node);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/{prefix}"));
}
