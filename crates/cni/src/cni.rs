//! The plugin's logic over its inputs (environment, stdin) and output
//! (stdout): one function per CNI command, errors as the spec's codes.

use crate::ipam::{self, Ipam};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub const SUPPORTED: [&str; 5] = ["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"];
/// A unix socket path's limit (`sun_path` less its NUL).
const MAX_SOCKET_PATH: usize = 107;

/// A CNI error: code (the spec's, or ≥ 100 for this plugin's), message,
/// details.
#[derive(Debug)]
pub struct CniError {
    pub code: u32,
    pub msg: String,
    pub details: String,
}

pub(crate) fn err(code: u32, msg: impl Into<String>, details: impl Into<String>) -> CniError {
    CniError {
        code,
        msg: msg.into(),
        details: details.into(),
    }
}

const INCOMPATIBLE_VERSION: u32 = 1;
const INVALID_ENV: u32 = 4;
pub(crate) const IO_ERROR: u32 = 5;
const DECODE: u32 = 6;
pub(crate) const INVALID_CONFIG: u32 = 7;
const TRY_AGAIN: u32 = 11;
const UNAVAILABLE: u32 = 50;
/// Plugin-specific: CHECK found the attachment or its socket missing.
const ATTACHMENT_MISSING: u32 = 100;

#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
struct NetConf {
    cni_version: String,
    /// The network's name: the node keeps it with each attachment and
    /// scopes GC by it.
    name: String,
    #[serde(default = "default_api")]
    api: String,
    #[serde(default = "default_interface")]
    interface: String,
    #[serde(default = "default_role")]
    switch_role: String,
    #[serde(default = "default_socket_dir")]
    socket_dir: PathBuf,
    #[serde(default)]
    runtime_config: RuntimeConfig,
    /// Delegated IP address management: `{"type": PLUGIN, ...}`.
    #[serde(default)]
    ipam: Option<Value>,
    /// What the runtime had from ADD (CHECK, DEL; ADD when chained).
    #[serde(default)]
    prev_result: Option<Value>,
    #[serde(default, rename = "cni.dev/valid-attachments")]
    valid_attachments: Option<Vec<ValidAttachment>>,
    /// The key's name before spec 1.1.0 was corrected; read when the right
    /// one is absent.
    #[serde(default, rename = "cni.dev/attachments")]
    attachments: Option<Vec<ValidAttachment>>,
}

#[derive(Deserialize, Debug, Default)]
struct RuntimeConfig {
    #[serde(rename = "CNIDeviceInfoFile")]
    device_info_file: Option<PathBuf>,
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
struct ValidAttachment {
    #[serde(rename = "containerID")]
    container_id: String,
    ifname: String,
}

fn default_api() -> String {
    "http://127.0.0.1:9180".into()
}
fn default_interface() -> String {
    "vhost-user".into()
}
fn default_role() -> String {
    "server".into()
}
fn default_socket_dir() -> PathBuf {
    "/var/run/nfvswitch/pods".into()
}

/// Runs one command; returns the exit status.
pub fn run(env: HashMap<String, String>, stdin: &mut dyn Read, stdout: &mut dyn Write) -> i32 {
    let command = env.get("CNI_COMMAND").cloned().unwrap_or_default();
    let mut input = String::new();
    let read = stdin.read_to_string(&mut input);
    let version_of_input = serde_json::from_str::<Value>(&input)
        .ok()
        .and_then(|v| v["cniVersion"].as_str().map(str::to_string))
        .unwrap_or_else(|| "1.1.0".into());
    let out = match (command.as_str(), read) {
        ("VERSION", _) => Ok(json!({ "cniVersion": "1.1.0", "supportedVersions": SUPPORTED })),
        (_, Err(e)) => Err(err(
            IO_ERROR,
            "cannot read the network config from stdin",
            e.to_string(),
        )),
        ("ADD" | "DEL" | "CHECK" | "GC" | "STATUS", Ok(_)) => conf(&input).and_then(|c| {
            let ipam = Ipam::from(c.ipam.as_ref(), &env, &input)?;
            let ipam = ipam.as_ref();
            match command.as_str() {
                "ADD" => add(&c, &env, ipam),
                "DEL" => del(&c, &env, ipam),
                "CHECK" => check(&c, &env, ipam),
                "GC" => gc(&c, ipam),
                _ => status(&c, ipam),
            }
        }),
        (other, _) => Err(err(
            INVALID_ENV,
            format!("CNI_COMMAND {other:?} is not one of ADD, DEL, CHECK, GC, STATUS, VERSION"),
            "",
        )),
    };
    match out {
        Ok(Value::Null) => 0,
        Ok(v) => {
            let _ = writeln!(stdout, "{v}");
            0
        }
        Err(e) => {
            let v = json!({ "cniVersion": version_of_input, "code": e.code, "msg": e.msg, "details": e.details });
            let _ = writeln!(stdout, "{v}");
            1
        }
    }
}

fn conf(input: &str) -> Result<NetConf, CniError> {
    let c: NetConf = serde_json::from_str(input)
        .map_err(|e| err(DECODE, "cannot decode the network config", e.to_string()))?;
    if !SUPPORTED.contains(&c.cni_version.as_str()) {
        return Err(err(
            INCOMPATIBLE_VERSION,
            format!("cniVersion {:?} is not supported", c.cni_version),
            format!("supported: {}", SUPPORTED.join(", ")),
        ));
    }
    if !matches!(c.interface.as_str(), "vhost-user" | "memif") {
        return Err(err(
            INVALID_CONFIG,
            format!("interface {:?}: vhost-user or memif", c.interface),
            "",
        ));
    }
    if !matches!(c.switch_role.as_str(), "server" | "client")
        || (c.interface == "memif" && c.switch_role == "client")
    {
        return Err(err(
            INVALID_CONFIG,
            format!(
                "switchRole {:?}: server or client (memif: server)",
                c.switch_role
            ),
            "",
        ));
    }
    if !c.socket_dir.is_absolute() {
        return Err(err(
            INVALID_CONFIG,
            "socketDir must be an absolute path",
            c.socket_dir.display().to_string(),
        ));
    }
    Ok(c)
}

fn need<'a>(env: &'a HashMap<String, String>, key: &str) -> Result<&'a str, CniError> {
    match env.get(key).map(String::as_str) {
        Some(v) if !v.is_empty() => Ok(v),
        _ => Err(err(INVALID_ENV, format!("{key} is not set"), "")),
    }
}

struct Key<'a> {
    container_id: &'a str,
    ifname: &'a str,
}

impl Key<'_> {
    fn from(env: &HashMap<String, String>) -> Result<Key<'_>, CniError> {
        Ok(Key {
            container_id: need(env, "CNI_CONTAINERID")?,
            ifname: need(env, "CNI_IFNAME")?,
        })
    }
    fn path(&self) -> String {
        format!(
            "/api/v1/attachments/{}/{}",
            encode(self.container_id),
            encode(self.ifname)
        )
    }
    fn socket(&self, c: &NetConf) -> Result<PathBuf, CniError> {
        let id: String = self.container_id.chars().take(12).collect();
        let p = c.socket_dir.join(format!("{id}-{}.sock", self.ifname));
        let n = p.as_os_str().len();
        if n > MAX_SOCKET_PATH {
            return Err(err(
                INVALID_CONFIG,
                format!(
                    "socket path {} is {n} bytes, more than a unix socket takes ({MAX_SOCKET_PATH}); shorten socketDir",
                    p.display()
                ),
                "",
            ));
        }
        Ok(p)
    }
}

/// Percent-encodes a path segment (container ids and interface names are
/// mostly plain; anything else is escaped).
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// One request to the node: (status, JSON body). A node that cannot be
/// reached is "try again later".
fn call(
    c: &NetConf,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> Result<(u16, Value), CniError> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .proxy(None)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into();
    let url = format!("{}{path}", c.api.trim_end_matches('/'));
    let r = match (method, body) {
        ("GET", _) => agent.get(&url).call(),
        ("DELETE", _) => agent.delete(&url).call(),
        ("PUT", Some(b)) => agent
            .put(&url)
            .header("content-type", "application/json")
            .send(b.to_string()),
        (_, b) => agent
            .post(&url)
            .header("content-type", "application/json")
            .send(b.unwrap_or(Value::Null).to_string()),
    };
    let mut r = r.map_err(|e| {
        err(
            TRY_AGAIN,
            format!("the nfvswitch node at {} does not answer", c.api),
            e.to_string(),
        )
    })?;
    let status = r.status().as_u16();
    let text = r.body_mut().read_to_string().unwrap_or_default();
    let v = serde_json::from_str(&text).unwrap_or(Value::String(text));
    Ok((status, v))
}

fn node_refused(status: u16, v: &Value) -> CniError {
    let msg = v["error"].as_str().unwrap_or("refused").to_string();
    let code = if status >= 500 {
        TRY_AGAIN
    } else {
        INVALID_CONFIG
    };
    err(
        code,
        format!("the node refused the port (HTTP {status})"),
        msg,
    )
}

fn add(c: &NetConf, env: &HashMap<String, String>, ipam: Option<&Ipam>) -> Result<Value, CniError> {
    let key = Key::from(env)?;
    let netns = need(env, "CNI_NETNS")?;
    let socket = key.socket(c)?;
    let known = attachment(c, &key)?;
    // Addresses: those the node kept from an earlier ADD of this key (an
    // IPAM plugin refuses to allocate twice), else the IPAM plugin's; a
    // failure after a new allocation releases it (spec section 4: a
    // delegated plugin that fails ADD is called with DEL).
    let kept = known.as_ref().map(|a| a["addresses"].clone());
    let (addresses, allocated) = match (ipam, kept) {
        (Some(_), Some(v)) if !v.is_null() => (Some(v), false),
        (Some(i), _) => match i.exec("ADD") {
            Ok(v) => (Some(v), true),
            Err(e) => {
                if known.is_none() {
                    let _ = i.exec("DEL");
                }
                return Err(e);
            }
        },
        (None, _) => (None, false),
    };
    let port = match (attach(c, &key, &socket, addresses.as_ref()), ipam) {
        (Ok(p), _) => p,
        (Err(e), Some(i)) if allocated => {
            let _ = i.exec("DEL");
            return Err(e);
        }
        (Err(e), _) => return Err(e),
    };
    // The result of the plugins before us in a chain, with our interface
    // (and its addresses) added.
    let mut result = match &c.prev_result {
        Some(v @ Value::Object(_)) => v.clone(),
        _ => json!({}),
    };
    result["cniVersion"] = json!(c.cni_version);
    let iface = json!({ "name": key.ifname, "sandbox": netns, "socketPath": socket });
    let index = match result["interfaces"].as_array_mut() {
        Some(all) => {
            all.push(iface);
            all.len() - 1
        }
        None => {
            result["interfaces"] = json!([iface]);
            0
        }
    };
    if ipam.is_some() && port["addresses"].is_object() {
        ipam::merge(&mut result, &port["addresses"], index);
    }
    if result["ips"].is_null() {
        result["ips"] = json!([]);
    }
    Ok(result)
}

/// The node's attachment of `key`, if it has one.
fn attachment(c: &NetConf, key: &Key) -> Result<Option<Value>, CniError> {
    let (status, v) = call(c, "GET", "/api/v1/attachments", None)?;
    if status != 200 {
        return Err(node_refused(status, &v));
    }
    Ok(v["attachments"].as_array().and_then(|all| {
        all.iter()
            .find(|a| a["container_id"] == key.container_id && a["ifname"] == key.ifname)
            .cloned()
    }))
}

/// Asks the node for the port (the attachment it answers: the addresses
/// it keeps are the first ADD's) and writes the device-info file; a port
/// made by this call is removed again if the file cannot be written.
fn attach(
    c: &NetConf,
    key: &Key,
    socket: &Path,
    addresses: Option<&Value>,
) -> Result<Value, CniError> {
    std::fs::create_dir_all(&c.socket_dir).map_err(|e| {
        err(
            IO_ERROR,
            format!("cannot create {}", c.socket_dir.display()),
            e.to_string(),
        )
    })?;
    let mut req = json!({ "type": c.interface, "mode": c.switch_role, "socket": socket,
                          "network": c.name });
    if let Some(a) = addresses {
        req["addresses"] = a.clone();
    }
    let (status, v) = call(c, "PUT", &key.path(), Some(req))?;
    if status != 200 && status != 201 {
        return Err(node_refused(status, &v));
    }
    if let Some(file) = &c.runtime_config.device_info_file
        && let Err(e) = write_device_info(file, c, socket)
    {
        if status == 201 {
            let _ = call(c, "DELETE", &key.path(), None);
        }
        return Err(e);
    }
    Ok(v)
}

/// The NPWG device-info file (spec 1.1.0), from the application's view.
fn write_device_info(file: &Path, c: &NetConf, socket: &Path) -> Result<(), CniError> {
    let info = if c.interface == "memif" {
        json!({ "type": "memif", "version": "1.1.0",
                "memif": { "role": "slave", "path": socket, "mode": "ethernet" } })
    } else {
        let app_mode = if c.switch_role == "server" {
            "client"
        } else {
            "server"
        };
        json!({ "type": "vhost-user", "version": "1.1.0",
                "vhost-user": { "mode": app_mode, "path": socket } })
    };
    if let Some(dir) = file.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    std::fs::write(file, info.to_string()).map_err(|e| {
        err(
            IO_ERROR,
            format!("cannot write the device-info file {}", file.display()),
            e.to_string(),
        )
    })
}

/// Removes the port (success when there is none), the device-info file
/// and the addresses: each is tried whatever the others did (DEL is best
/// effort); the first error is answered.
fn del(c: &NetConf, env: &HashMap<String, String>, ipam: Option<&Ipam>) -> Result<Value, CniError> {
    let key = Key::from(env)?;
    let port = call(c, "DELETE", &key.path(), None).and_then(|(status, v)| {
        if status == 200 {
            Ok(())
        } else {
            Err(node_refused(status, &v))
        }
    });
    if let Some(file) = &c.runtime_config.device_info_file {
        let _ = std::fs::remove_file(file);
    }
    let addresses = ipam.map_or(Ok(Value::Null), |i| i.exec("DEL"));
    port.and(addresses).map(|_| Value::Null)
}

/// The node has the port, the socket is there (the switch as server), the
/// port is the one `prevResult` names, and the IPAM plugin agrees.
fn check(
    c: &NetConf,
    env: &HashMap<String, String>,
    ipam: Option<&Ipam>,
) -> Result<Value, CniError> {
    let key = Key::from(env)?;
    let Some(a) = attachment(c, &key)? else {
        return Err(err(
            ATTACHMENT_MISSING,
            format!(
                "{}/{} has no port on the node",
                key.container_id, key.ifname
            ),
            "",
        ));
    };
    let socket = a["socket"].as_str().unwrap_or_default();
    if c.switch_role == "server" && !Path::new(socket).exists() {
        return Err(err(
            ATTACHMENT_MISSING,
            format!("the port's socket {socket} is missing"),
            "",
        ));
    }
    let promised = c.prev_result.as_ref().and_then(|r| {
        r["interfaces"].as_array()?.iter().find_map(|i| {
            (i["name"] == key.ifname).then(|| i["socketPath"].as_str().map(str::to_string))?
        })
    });
    if let Some(p) = promised
        && p != socket
    {
        return Err(err(
            ATTACHMENT_MISSING,
            format!("prevResult gave socket {p}; the node's port is on {socket}"),
            "",
        ));
    }
    if let Some(i) = ipam {
        i.exec("CHECK")?;
    }
    Ok(Value::Null)
}

/// Removes this network's attachments not in the valid list, then
/// forwards GC to the IPAM plugin (spec: GC goes to delegated plugins).
fn gc(c: &NetConf, ipam: Option<&Ipam>) -> Result<Value, CniError> {
    let valid: Vec<Value> = c
        .valid_attachments
        .as_ref()
        .or(c.attachments.as_ref())
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|a| json!({ "container_id": a.container_id, "ifname": a.ifname }))
        .collect();
    let ports = call(
        c,
        "POST",
        "/api/v1/attachments/gc",
        Some(json!({ "network": c.name, "valid": valid })),
    )
    .and_then(|(status, v)| {
        if status == 200 {
            Ok(())
        } else {
            Err(node_refused(status, &v))
        }
    });
    let addresses = ipam.map_or(Ok(Value::Null), |i| i.exec("GC"));
    ports.and(addresses).map(|_| Value::Null)
}

/// Up when the node answers and the IPAM plugin (if any) says it is.
fn status(c: &NetConf, ipam: Option<&Ipam>) -> Result<Value, CniError> {
    match call(c, "GET", "/api/v1/node", None) {
        Ok((200, _)) => {}
        Ok((s, _)) => {
            return Err(err(
                UNAVAILABLE,
                format!("the nfvswitch node answers HTTP {s}"),
                "",
            ));
        }
        Err(e) => return Err(err(UNAVAILABLE, e.msg, e.details)),
    }
    if let Some(i) = ipam {
        i.exec("STATUS")?;
    }
    Ok(Value::Null)
}
