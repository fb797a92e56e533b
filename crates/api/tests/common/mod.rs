//! Shared by the API tests: a node with its API on a free port, a small
//! HTTP client, a JSON schema check and a Prometheus text reader.
#![allow(dead_code)]

use nfv_api::ApiServer;
use nfv_control::Node;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// PMD threads busy-poll: one node at a time.
static SERIAL: Mutex<()> = Mutex::new(());

pub const DEADLINE: Duration = Duration::from_secs(30);

/// A running node with its API on 127.0.0.1:0.
///
/// Ports: gen (1, stamping generator, 100 kpps) → rx (2, receiver) by a
/// rule and by chain "direct"; chain "via-vnf" idle (5, sink) → vnf1 (3,
/// vhost-user server, never connected) → sink (4); a ring pair ra (6) ↔
/// rb (7).
pub struct Fixture {
    pub node: Arc<Node>,
    pub api: Option<ApiServer>,
    pub base: String,
    /// `Authorization` for changes.
    pub auth: String,
    dir: PathBuf,
    _serial: MutexGuard<'static, ()>,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if let Some(api) = self.api.take() {
            api.stop();
        }
        self.node.shutdown();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn start(tag: &str) -> Fixture {
    let serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = std::env::temp_dir().join(format!("nfv-api-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let text = format!(
        r#"flows = ["priority=10,in_port=1,actions=output:2"]
[node]
name = "api-{tag}"
api = "127.0.0.1:0"
[memory]
frames = 8192
hugepages = "never"
[openflow]
listen = ["punix:{of}"]
[[port]]
name = "gen"
id = 1
type = "generator"
stamp = true
rate_pps = 100000
[[port]]
name = "rx"
id = 2
type = "receiver"
[[port]]
name = "vnf1"
id = 3
type = "vhost-user"
socket = "{}"
mode = "server"
[[port]]
name = "sink"
id = 4
type = "sink"
[[port]]
name = "idle"
id = 5
type = "sink"
[[port]]
name = "ra"
id = 6
type = "ring"
peer = "rb"
size = 32
[[port]]
name = "rb"
id = 7
type = "ring"
peer = "ra"
size = 32
[[chain]]
name = "direct"
ingress = "gen"
egress = "rx"
[[chain]]
name = "via-vnf"
ingress = "idle"
vnfs = ["vnf1"]
egress = "sink"
"#,
        dir.join("vnf1.sock").display(),
        of = dir.join("of.sock").display(),
    );
    let cfg = nfv_config::parse_str(&text, &dir.join("node.toml"), cpus)
        .unwrap_or_else(|e| panic!("{e}"));
    let node = Node::start(&cfg).expect("node starts");
    let api = ApiServer::start(cfg.api.expect("api on"), node.clone()).expect("API binds");
    let base = format!("http://{}", api.addr());
    let auth = format!("Bearer {}", api.token());
    Fixture {
        node,
        api: Some(api),
        base,
        auth,
        dir,
        _serial: serial,
    }
}

// ---- HTTP -------------------------------------------------------------

pub struct Reply {
    pub status: u16,
    pub content_type: String,
    pub body: String,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.body))
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .proxy(None)
        .timeout_global(Some(Duration::from_secs(20)))
        .build()
        .into()
}

fn reply(r: Result<ureq::http::Response<ureq::Body>, ureq::Error>, what: &str) -> Reply {
    let mut r = r.unwrap_or_else(|e| panic!("{what}: {e}"));
    let content_type = r
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    Reply {
        status: r.status().as_u16(),
        content_type,
        body: r.body_mut().read_to_string().unwrap(),
    }
}

impl Fixture {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
    pub fn get(&self, path: &str) -> Reply {
        reply(agent().get(self.url(path)).call(), path)
    }
    pub fn get_with(&self, path: &str, header: (&str, &str)) -> Reply {
        reply(
            agent()
                .get(self.url(path))
                .header(header.0, header.1)
                .call(),
            path,
        )
    }
    /// POST with the node's token.
    pub fn post(&self, path: &str, content_type: &str, body: &str) -> Reply {
        self.post_with(path, content_type, body, &[("authorization", &self.auth)])
    }
    /// POST with these headers only (no token unless given).
    pub fn post_with(
        &self,
        path: &str,
        content_type: &str,
        body: &str,
        headers: &[(&str, &str)],
    ) -> Reply {
        let mut r = agent()
            .post(self.url(path))
            .header("content-type", content_type);
        for (k, v) in headers {
            r = r.header(*k, *v);
        }
        reply(r.send(body), path)
    }
    pub fn put(&self, path: &str, body: &str) -> Reply {
        reply(
            agent()
                .put(self.url(path))
                .header("authorization", &self.auth)
                .send(body),
            path,
        )
    }
    pub fn delete(&self, path: &str) -> Reply {
        reply(
            agent()
                .delete(self.url(path))
                .header("authorization", &self.auth)
                .call(),
            path,
        )
    }
    /// DELETE with these headers only (no token unless given).
    pub fn delete_with(&self, path: &str, headers: &[(&str, &str)]) -> Reply {
        let mut r = agent().delete(self.url(path));
        for (k, v) in headers {
            r = r.header(*k, *v);
        }
        reply(r.call(), path)
    }
    /// GET that must succeed with JSON.
    pub fn get_json(&self, path: &str) -> Value {
        let r = self.get(path);
        assert_eq!(r.status, 200, "GET {path}: {}", r.body);
        assert!(
            r.content_type.starts_with("application/json"),
            "GET {path}: content type {:?}",
            r.content_type
        );
        r.json()
    }
}

pub fn promtool() -> Option<PathBuf> {
    nfv_testutil::which("promtool")
}

// ---- JSON schema ------------------------------------------------------

/// The shape a JSON value must have. Objects list their required fields;
/// fields not listed are allowed (the API may grow).
#[derive(Clone, Debug)]
pub enum Ty {
    U64,
    F64,
    Str,
    Bool,
    Any,
    Opt(Box<Ty>),
    List(Box<Ty>),
    /// An object with arbitrary keys and values of one type.
    Map(Box<Ty>),
    Obj(Vec<(&'static str, Ty)>),
}

pub fn opt(t: Ty) -> Ty {
    Ty::Opt(Box::new(t))
}
pub fn list(t: Ty) -> Ty {
    Ty::List(Box::new(t))
}
pub fn map(t: Ty) -> Ty {
    Ty::Map(Box::new(t))
}
pub fn obj(fields: &[(&'static str, Ty)]) -> Ty {
    Ty::Obj(fields.to_vec())
}

/// Every place where `v` departs from `t`, as `path: problem`.
pub fn schema_errors(v: &Value, t: &Ty, path: &str) -> Vec<String> {
    let bad = |want: &str| vec![format!("{path}: want {want}, got {v}")];
    match t {
        Ty::Any => vec![],
        Ty::U64 if v.is_u64() => vec![],
        Ty::U64 => bad("an unsigned integer"),
        Ty::F64 if v.is_number() => vec![],
        Ty::F64 => bad("a number"),
        Ty::Str if v.is_string() => vec![],
        Ty::Str => bad("a string"),
        Ty::Bool if v.is_boolean() => vec![],
        Ty::Bool => bad("a boolean"),
        Ty::Opt(_) if v.is_null() => vec![],
        Ty::Opt(inner) => schema_errors(v, inner, path),
        Ty::List(inner) => match v.as_array() {
            Some(a) => a
                .iter()
                .enumerate()
                .flat_map(|(i, x)| schema_errors(x, inner, &format!("{path}[{i}]")))
                .collect(),
            None => bad("a list"),
        },
        Ty::Map(inner) => match v.as_object() {
            Some(o) => o
                .iter()
                .flat_map(|(k, x)| schema_errors(x, inner, &format!("{path}.{k}")))
                .collect(),
            None => bad("an object"),
        },
        Ty::Obj(fields) => match v.as_object() {
            Some(o) => fields
                .iter()
                .flat_map(|(k, ft)| match o.get(*k) {
                    Some(x) => schema_errors(x, ft, &format!("{path}.{k}")),
                    None => vec![format!("{path}: missing field {k:?}")],
                })
                .collect(),
            None => bad("an object"),
        },
    }
}

#[track_caller]
pub fn assert_schema(v: &Value, t: &Ty, what: &str) {
    let errs = schema_errors(v, t, what);
    assert!(errs.is_empty(), "schema mismatch:\n{}", errs.join("\n"));
}

// ---- Prometheus text ----------------------------------------------------

/// One sample: labels and value.
pub type Sample = (BTreeMap<String, String>, f64);

/// Samples by metric name, and `# TYPE` by family name.
pub struct Metrics {
    pub samples: BTreeMap<String, Vec<Sample>>,
    pub types: BTreeMap<String, String>,
}

/// Reads the text format (enough of it for our own output: label values
/// without escaped quotes).
pub fn parse_metrics(text: &str) -> Metrics {
    let mut samples: BTreeMap<String, Vec<Sample>> = BTreeMap::new();
    let mut types = BTreeMap::new();
    for line in text.lines() {
        if let Some(t) = line.strip_prefix("# TYPE ") {
            let (name, ty) = t.split_once(' ').unwrap();
            types.insert(name.to_string(), ty.to_string());
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap();
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("bad value: {line}"));
        let (name, labels) = match series.split_once('{') {
            Some((n, rest)) => {
                let inner = rest.strip_suffix('}').unwrap();
                let labels = inner
                    .split("\",")
                    .filter(|kv| !kv.is_empty())
                    .map(|kv| {
                        let (k, v) = kv.split_once("=\"").unwrap();
                        (k.to_string(), v.trim_end_matches('"').to_string())
                    })
                    .collect();
                (n, labels)
            }
            None => (series, BTreeMap::new()),
        };
        samples
            .entry(name.to_string())
            .or_default()
            .push((labels, value));
    }
    Metrics { samples, types }
}

impl Metrics {
    /// The value of `name` whose labels include every pair of `want`.
    pub fn value(&self, name: &str, want: &[(&str, &str)]) -> Option<f64> {
        self.samples.get(name)?.iter().find_map(|(l, v)| {
            want.iter()
                .all(|(k, x)| l.get(*k).map(String::as_str) == Some(*x))
                .then_some(*v)
        })
    }
}
