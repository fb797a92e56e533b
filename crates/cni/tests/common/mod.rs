//! What the plugin's tests share: a node serving its REST API in this
//! process, the plugin run as a runtime runs it, the reference CNI tools
//! (`cnitool`, `host-local`) found where `scripts/test` installs them, and
//! DPDK testpmd on the sockets ADD returns.

#![allow(dead_code)]

use nfv_api::ApiServer;
use nfv_control::Node;
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

pub const PLUGIN: &str = env!("CARGO_BIN_EXE_nfvswitch-cni");

/// A node and its API; both stopped on drop (also when a test panics).
pub struct Running {
    pub node: Arc<Node>,
    api: Option<ApiServer>,
    pub url: String,
    /// The node's API token file (`apiTokenFile` in a network config).
    pub token_file: PathBuf,
    /// `Authorization` for a change made over REST by the test itself.
    pub auth: String,
    /// The node's `socket_dir` (`socketDir` in a network config).
    pub socket_dir: PathBuf,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(api) = self.api.take() {
            api.stop();
        }
        self.node.shutdown();
    }
}

/// A node with a generator (1) and a sink (2), its state file, API token
/// and socket directory (`pods`) in `dir`, its API on an ephemeral port.
pub fn start(dir: &Path) -> Running {
    start_on(dir, "127.0.0.1:0")
}

/// The same with the API on `api` (a node restarted on the address the
/// runtime's config names).
pub fn start_on(dir: &Path, api: &str) -> Running {
    let token_file = dir.join("api-token");
    let token = write_token(&token_file);
    let socket_dir = dir.join("pods");
    let text = format!(
        "flows = [\"priority=10,in_port=1,actions=output:2\"]\n[node]\nname = \"cni\"\napi = \"{api}\"\n\
         state_file = \"{}\"\napi_token_file = \"{}\"\nsocket_dir = \"{}\"\n\
         [memory]\nframes = 4096\nhugepages = \"never\"\n\
         [[port]]\nname = \"gen\"\nid = 1\ntype = \"generator\"\nrate_pps = 1000\n\
         [[port]]\nname = \"sink\"\nid = 2\ntype = \"sink\"\n",
        dir.join("state.json").display(),
        token_file.display(),
        socket_dir.display(),
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
        token_file,
        auth: format!("Bearer {token}"),
        socket_dir,
    }
}

/// The node's token, written by the test (mode 0600, as the node wants
/// it) so that the test knows it; kept across a restart of the node.
fn write_token(file: &Path) -> String {
    use std::os::unix::fs::OpenOptionsExt;
    if let Ok(t) = std::fs::read_to_string(file) {
        return t.trim().to_string();
    }
    let token = format!(
        "cni-test-token-{:016x}",
        std::process::id() as u64 * 0x9e37_79b9
    );
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(file)
        .and_then(|mut f| f.write_all(format!("{token}\n").as_bytes()))
        .unwrap();
    token
}

/// A network config for the node `n`: the plugin's keys besides `api`,
/// `apiTokenFile` and `socketDir` from `extra`.
pub fn netconf(n: &Running, name: &str, extra: Value) -> Value {
    let mut c = serde_json::json!({
        "cniVersion": "1.1.0", "name": name, "type": "nfvswitch-cni",
        "api": n.url, "apiTokenFile": n.token_file, "socketDir": n.socket_dir,
    });
    for (k, v) in extra.as_object().into_iter().flatten() {
        c[k] = v.clone();
    }
    c
}

/// A request to the node's REST API as the test makes it (not through
/// the plugin): (status, body as JSON).
pub fn rest(
    n: &Running,
    method: &str,
    path: &str,
    body: Option<&Value>,
    auth: bool,
) -> (u16, Value) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let url = format!("{}{path}", n.url);
    let header = if auth { n.auth.as_str() } else { "" };
    let r = match method {
        "PUT" => agent
            .put(&url)
            .header("authorization", header)
            .header("content-type", "application/json")
            .send(body.map(Value::to_string).unwrap_or_default()),
        "DELETE" => agent.delete(&url).header("authorization", header).call(),
        _ => agent.get(&url).header("authorization", header).call(),
    };
    let mut r = r.unwrap_or_else(|e| panic!("{method} {path}: {e}"));
    let text = r.body_mut().read_to_string().unwrap_or_default();
    (
        r.status().as_u16(),
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// A scratch directory removed on drop.
pub use nfv_testutil::TempDir;

/// Runs the plugin as a runtime does: (exit success, stdout as JSON or
/// Null). `cni_path` is `CNI_PATH` (where delegated IPAM plugins are).
pub fn plugin_in(
    command: &str,
    container: &str,
    ifname: &str,
    conf: &Value,
    cni_path: &str,
) -> (bool, Value) {
    let mut child = Command::new(PLUGIN)
        .env_clear()
        .env("CNI_COMMAND", command)
        .env("CNI_CONTAINERID", container)
        .env("CNI_IFNAME", ifname)
        .env("CNI_NETNS", format!("/var/run/netns/{container}"))
        .env("CNI_PATH", cni_path)
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

pub fn plugin(command: &str, container: &str, ifname: &str, conf: &Value) -> (bool, Value) {
    plugin_in(command, container, ifname, conf, "/opt/cni/bin")
}

pub fn ports(n: &Running) -> Vec<String> {
    n.node
        .datapath()
        .port_views()
        .iter()
        .map(|v| v.port.name().to_string())
        .collect()
}

pub fn port_rx(node: &Running, name: &str) -> u64 {
    let nfv_control::Response::Ok { data } = node.node.handle(&nfv_control::Request::ShowPorts)
    else {
        panic!("show ports refused");
    };
    data.as_array()
        .and_then(|a| a.iter().find(|p| p["name"] == name))
        .and_then(|p| p["rx"]["packets"].as_u64())
        .unwrap_or(0)
}

/// Where `scripts/test` installs the reference CNI tools (`go install`
/// with GOBIN here), relative to this crate.
fn tools_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/cni-tools")
}

/// `cnitool`: `$NFVSWITCH_CNITOOL`, then `target/cni-tools`, then PATH.
pub fn cnitool() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("NFVSWITCH_CNITOOL") {
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    let local = tools_dir().join("cnitool");
    if local.is_file() {
        return Some(local);
    }
    nfv_testutil::which("cnitool")
}

/// A directory holding the reference `host-local` IPAM plugin:
/// `$NFVSWITCH_CNI_PLUGINS`, then `target/cni-tools`, then Debian's
/// `/usr/lib/cni` and the usual `/opt/cni/bin`.
pub fn reference_plugins() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("NFVSWITCH_CNI_PLUGINS") {
        return Some(PathBuf::from(p)).filter(|p| p.join("host-local").is_file());
    }
    [tools_dir(), "/usr/lib/cni".into(), "/opt/cni/bin".into()]
        .into_iter()
        .find(|d| d.join("host-local").is_file())
}

/// A child process killed (by PID) and reaped on drop.
pub struct Child(pub std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// DPDK testpmd with a virtio-user device on each socket, forwarding
/// between them (`io`, paired) after sending a first burst on each
/// (`--tx-first`): a frame looping pod A → switch → pod B → testpmd → pod
/// A … as long as the switch forwards. Its runtime files go under
/// `/var/run/dpdk/<prefix>`, removed by [`Testpmd`]'s drop.
pub struct Testpmd {
    child: Child,
    prefix: String,
}

impl Testpmd {
    pub fn start(testpmd: &Path, prefix: &str, sockets: &[&str]) -> Testpmd {
        let mut cmd = Command::new(testpmd);
        cmd.args(["--no-pci", "--no-huge", "-m", "512"])
            .arg(format!("--file-prefix={prefix}"))
            .args(["-l", "0,1"]);
        for (i, s) in sockets.iter().enumerate() {
            cmd.arg(format!("--vdev=net_virtio_user{i},path={s}"));
        }
        cmd.args([
            "--",
            "--forward-mode=io",
            "--port-topology=paired",
            "--nb-cores=1",
            "--tx-first",
            "--stats-period=1",
            "--total-num-mbufs=16384",
            "--no-lsc-interrupt",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        Testpmd {
            child: Child(cmd.spawn().unwrap()),
            prefix: prefix.to_string(),
        }
    }
}

impl Drop for Testpmd {
    fn drop(&mut self) {
        let _ = self.child.0.kill();
        let _ = self.child.0.wait();
        let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/{}", self.prefix));
    }
}
